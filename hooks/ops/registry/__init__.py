"""Every op record (one file per family) and the tables the engine reads, derived from them.

- `EXTRA_DECLARATIONS` (engine/wake.py): (module, function, declared name, mutated parameters,
  schema or None for the annotations') of every record with a `declare`, family by family in
  FILES' order, each in its file's order. Only the order of rows of one declared name says
  anything (grouped_gemm_nt_masked's two modules: the first loaded is declared); every other row
  is declared and woken on its own.
- `CORRECTIONS`, `BY_RELEASE` (engine/corrections.py): {(module, qualified name): correction}
  and {release: {(module, qualified name): that release's correction}}, as `Correction.entry()`
  gives them.
- `BY_NAME`, `PLAIN` (engine/fakes.py): {declared name: (fake taking the arguments by parameter
  name, the parameters it reads)} and {declared name: fake taking the kernel's own parameters}.
"""

from typing import Any, Dict, Tuple

from _dynafold_ops.engine.record import Family
from _dynafold_ops.registry import (
    attention,
    comm,
    gemm,
    linear_attention,
    moe,
    norm_activation,
    quantization,
    sampling,
)

FILES = (attention, gemm, moe, quantization, sampling, norm_activation, linear_attention, comm)


def _gathered():
    """Every record, each in the file of its family, one record a declaring function and one
    fake a declared name."""
    ops = []
    for file in FILES:
        family = Family(file.__name__.rpartition(".")[2])
        for op in file.OPS:
            if op.family is not family:
                raise ValueError(f"{op.key}: a {op.family.value} op in {family.value}.py")
            ops.append(op)
    keys, names = set(), set()
    for op in ops:
        if op.key in keys:
            raise ValueError(f"two records of {op.key}")
        keys.add(op.key)
        # A declared name may be declared by several functions (one per release's module, or
        # per JIT build); its fake is one.
        for name in ([op.name] if op.fake else []) + list(op.fakes):
            if name in names:
                raise ValueError(f"two fakes of {name}")
            names.add(name)
    return ops


def _by_release(ops):
    out: Dict[str, Dict[Tuple[str, str], Dict[str, Any]]] = {}
    for op in ops:
        for release, correction in op.by_release.items():
            out.setdefault(release, {})[op.key] = correction.entry()
    return out


def _fakes(ops, plain):
    """{declared name: fake} of the fakes taking the kernel's own parameters (`plain`), else
    {declared name: (fake, the parameters it reads)}."""
    out = {}
    for op in ops:
        for name, fake in ([(op.name, op.fake)] if op.fake else []) + list(op.fakes.items()):
            if (fake.reads is None) == plain:
                out[name] = fake.fn if plain else (fake.fn, fake.reads)
    return out


OPS = _gathered()
EXTRA_DECLARATIONS = [(op.module, op.function, op.name, op.declare.mutates, op.declare.schema)
                      for op in OPS if op.declare is not None]
CORRECTIONS = {op.key: op.correction.entry() for op in OPS if op.correction is not None}
BY_RELEASE = _by_release(OPS)
BY_NAME = _fakes(OPS, plain=False)
PLAIN = _fakes(OPS, plain=True)
