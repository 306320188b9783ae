"""Issue 18: every declaration FlashInfer ships, woken by dynafold, gives eager's values compiled.

Not a sample: helpers/declaration_sweep.py makes each `register_custom_op` of the release again
exactly as FlashInfer's source writes it (name, `mutates_args`, signature, declaring module and
qualified name, the fake declared beside it), with the declared function's body, which is the
kernel call, replaced by a CPU stand-in that writes exactly what the op audit says the kernel
writes (docs/op-audit, read from FlashInfer's C++/CUDA) and draws from the generator as the
kernel does. dynafold's own declarations of public functions that call a JIT kernel outside any
(the op records with a `declare`, those with an audit row) are made again the same way.
dynafold wakes them as it wakes FlashInfer's; one function calling every woken
declaration is compiled with real inductor, `fullgraph=True`, static and `dynamic=True`, and its
results, argument states and generator position are compared with eager.

A declaration dynafold leaves as FlashInfer ships it (traced, a graph break at its kernel, never
a wrong value) must say why, with one of the reasons below.

It runs on CPython 3.12 (the SGLang environment, torch 2.14.1): FlashInfer's `flashinfer.comm`
does not import on 3.11 (`array.array[int]` in fd_exchange.py), and a third of 0.7.4's
declarations are there.
"""
import ast
import os
import sys

import pytest

from conftest import CACHE, ROOT, result_of, run
from test_cute_dsl_fake import CUTLASS_PYTHON
from test_fold import OLD_LAYOUT_RELEASE, flashinfer_path
from test_op_semantics import standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "declaration_sweep.py"
PYTHON = CACHE / "venv-sglang0.5.23-torch2.14.1" / "bin" / "python"

sys.path.insert(0, str(HELPER.parent))
from declarations import declarations  # noqa: E402
from engine_source import engine  # noqa: E402

# Why a declaration may stay as FlashInfer ships it; anything else fails the test.
LEFT_AS_SHIPPED = (
    # A correction's `dormant`: no schema says "the caller's buffer when given, else new".
    "result is the caller's output only when one is given",
    "result is (or holds) the caller's output",
    # Host-side helpers (workspace sizes, IPC handles, init/dispose) that return ints or
    # handles and declare no fake: nothing a compiled forward calls.
    "returns a value and has no fake",
    # Declarations torch's schemas cannot say: variadic JIT run functions, an Enum, `Any`,
    # ints declared mutable (the comm ops' pointer arguments). (XQA's two Unions are woken as
    # one operator per combination of members, hooks/ops/engine/narrowing.py.)
    "schema not expressible",
    # 0.6.16's top_k_page_table_transform (its record's sweep: 0.7.4 only).
    "correction names parameters the kernel lacks (out_raw_indices, out)",
)
# Declarations whose module does not import here, and why that is not dynafold's to answer.
NOT_IMPORTABLE = {
    # 0.6.16's all_gather_matmul imports NVIDIA's cuTile (`cuda.tile`, an optional dependency
    # of FlashInfer's, CUDA-only) at module level; 0.7.x imports it lazily and is swept.
    "flashinfer.comm.all_gather_matmul.all_gather_matmul:all_gather_matmul":
        "not rebuilt: ModuleNotFoundError: No module named 'cuda.tile'",
    # per_token_group_quant_8bit's cuTile backend (dynafold's declaration) likewise imports
    # cuda.tile at module level: checked on values where cuda-tile is installed,
    # test_cutile_quant.py.
    "flashinfer.quantization.kernels.cutile.per_token_group_quant_8bit_cutile:"
    "per_token_group_quant_8bit_cutile":
        "not rebuilt: ModuleNotFoundError: No module named 'cuda.tile'",
}
# Equal, but Dynamo inlined the declared function instead of calling its operator: the
# declaration's narrowing does not take the call this sweep's generic arguments make. Named, so
# that no other declaration passes this way unnoticed.
NOT_THROUGH_THE_OPERATOR = set()


# Where each op is swept: its record's `sweep` (hooks/ops/engine/record.py Sweep), by
# "module:function". The records are read from the source tree.
SWEPT = {f"{op.module}:{op.function}": op.sweep for op in engine("registry").OPS if op.sweep}
# dynafold's declarations and FlashInfer's that the sweep of each release must find equal.
OWN = {release: [k for k, s in SWEPT.items() if release in s.equal]
       for release in ("0.6.16", "0.7.4")}
# Those whose modules import `cutlass` (nvidia-cutlass-dsl), which the SGLang environment
# lacks: swept in the CuTe DSL one instead (test_cute_dsl_declarations_equal_eager_compiled).
CUTE_DSL = {release: [k for k, s in SWEPT.items() if release in s.cute_dsl]
            for release in ("0.6.16", "0.7.4")}
NOT_IMPORTABLE.update({key: "not rebuilt: ModuleNotFoundError: No module named 'cutlass'"
                       for key in SWEPT if SWEPT[key].cute_dsl})
# The declaring functions of the older release (scripts/lib/env.sh OLD_LAYOUT_RELEASE) whose
# corrections are their own (their records' `by_release`; their rows in the op audit), and
# what its sweep must find for each.
OLD_LAYOUT = {k: s.old_layout for k, s in SWEPT.items() if s.old_layout}


# While a boundary is built: `DYNAFOLD_SWEEP_ONLY=name,... pytest -k subset` sweeps just those
# declarations (substrings of their keys), with the same checks minus the totals.
ONLY = [o for o in os.environ.get("DYNAFOLD_SWEEP_ONLY", "").split(",") if o]


# Defined only when asked for: the suite allows no skips (conftest.ALLOWED_SKIPS), and a run
# without DYNAFOLD_SWEEP_ONLY has nothing for this test to do.
if ONLY:
    @pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
    def test_subset(preload, release, tmp_path):
        env = standin_env(release, tmp_path, preload)
        # CuTe DSL declarations (CUTE_DSL) are swept in the environment that imports `cutlass`.
        cute = any(o in key for o in ONLY for key in CUTE_DSL["0.6.16"] + CUTE_DSL["0.7.4"])
        python = CUTLASS_PYTHON if cute else PYTHON
        r = run([str(python), "-W", "error::UserWarning", str(HELPER), *ONLY], env, timeout=1200)
        got = result_of(r)
        status = got["status"]
        # A name may exist in one release only; that release's half has nothing to check.
        print(status or f"no declaration of {release} matches {ONLY}")
        assert all(v == "equal" or NOT_IMPORTABLE.get(k) == v for k, v in status.items()), status
        assert set(got["checks"].values()) <= {"agrees"}, got["checks"]


@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
def test_every_woken_declaration_equals_eager_compiled(preload, release, tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=1200)
    got = result_of(r)
    assert got["release"] == release
    status = got["status"]
    equal = [k for k, v in status.items() if v == "equal"]
    shipped = {k: v for k, v in status.items() if v.startswith("not woken: ")}
    wrong = {k: v for k, v in status.items()
             if v != "equal" and k not in shipped and NOT_IMPORTABLE.get(k) != v
             and not (v == "equal, traced as shipped" and k in NOT_THROUGH_THE_OPERATOR)}
    unexplained = {k: v for k, v in shipped.items()
                   if not any(v[len("not woken: "):].startswith(why) for why in LEFT_AS_SHIPPED)}
    assert not wrong, wrong
    assert not unexplained, unexplained
    own = OWN[release]
    assert all(status.get(k) == "equal" for k in own), {k: status.get(k) for k in own}
    # Most of what FlashInfer declares is woken and checked on values (0.6.16: 80 of 119
    # declaring functions, 0.7.4: 152 of 204, on 2026-12-01).
    assert len(equal) >= {"0.6.16": 80, "0.7.4": 152}[release], (len(equal), shipped)
    # Every woken operator that ran was checked at its first real run, and agreed.
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]


@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
def test_cute_dsl_declarations_equal_eager_compiled(preload, release, tmp_path):
    """dynafold's declarations whose modules import the CuTe DSL (CUTE_DSL), swept the same way
    in the environment that has nvidia-cutlass-dsl (scripts/lib/env.sh CUTLASS_VENV)."""
    env = standin_env(release, tmp_path, preload)
    keys = CUTE_DSL[release]
    r = run([str(CUTLASS_PYTHON), "-W", "error::UserWarning", str(HELPER),
             *(key.split(":")[1] for key in keys)], env, timeout=900)
    got = result_of(r)
    assert got["release"] == release
    status = {k: v for k, v in got["status"].items() if k in keys}
    assert status == {key: "equal" for key in keys}, status
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]


def _differing(release, newer="0.6.16"):
    """The declarations of `release` whose source (decorator, function, fake) differs from
    `newer`'s or that `newer` lacks, as sweep keys: the rest is `newer`'s own sweep, the same
    source woken with the same corrections and audit row."""
    def source(d):
        return "\n".join(ast.unparse(n) for n in (d["decorator"], d["node"], d["fake"]) if n)
    theirs = {(d["module"], d["function"]): source(d)
              for d in declarations(flashinfer_path(newer), nodes=True)}
    return [f"{d['module']}:{d['function']}"
            for d in declarations(flashinfer_path(release), nodes=True)
            if theirs.get((d["module"], d["function"])) != source(d)]


def test_older_layout_declarations_equal_eager_compiled(preload, tmp_path):
    """Issue 30 (finding 6): the older release's declarations that differ from 0.6.16's (40 of
    0.6.7.post3's 98: its own loaders for the trtllm-gen MoE ops and XQA, the GDN prefill op
    0.6.16 lacks, fewer parameters, fakes that lag their ops) are swept as 0.6.16's are: its own
    declaring functions are corrected as its source says (docs/op-audit), woken and equal to
    eager compiled, or left as shipped for one of the named reasons."""
    keys = _differing(OLD_LAYOUT_RELEASE)
    assert set(OLD_LAYOUT) <= set(keys), sorted(set(OLD_LAYOUT) - set(keys))
    env = standin_env(OLD_LAYOUT_RELEASE, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER), *keys], env, timeout=900)
    got = result_of(r)
    assert got["release"] == OLD_LAYOUT_RELEASE
    status = got["status"]
    assert set(keys) <= set(status), sorted(set(keys) - set(status))
    wrong = {k: v for k, v in status.items() if v != "equal" and not v.startswith("not woken: ")}
    unexplained = {k: v for k, v in status.items() if v.startswith("not woken: ") and not any(
        v[len("not woken: "):].startswith(why) for why in LEFT_AS_SHIPPED)}
    assert not wrong, wrong
    assert not unexplained, unexplained
    assert {k: v for k, v in status.items() if k in OLD_LAYOUT} == OLD_LAYOUT, status
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]
