"""Each woken operator's declaration, checked against its kernel before anyone relies on it.

FlashInfer's declarations are not exercised by FlashInfer itself (they are switched off), and
some have rotted: fakes that describe another result, `mutates_args` that leave out a buffer the
kernel writes, a result that is one of the inputs, a generator advanced by an op declared pure.
A compiled graph is planned on the declaration's word, so each of those is a wrong answer, not a
slow one. The first time an operator runs for real in the process in each call form (a compiled
graph's first call; a form is which optional tensor arguments are given, since a kernel may
write or return another thing when one is: single decode's `maybe_lse`), before that result is
returned:

- the shapes, dtypes, strides and devices of what its kernel returned are compared with what its
  fake returns for the same inputs;
- every tensor argument the operator does not declare mutable is compared with its content
  before the call (bitwise; a fingerprint for tensors too large to copy), skipping those that
  share storage with a declared-mutable one;
- every result is checked not to share storage with an input;
- an operator not tagged `nondeterministic_seeded` must leave the random generator where it was.

Any difference raises with what to do, and every verdict is kept, per operator and form. After
the first run of a form the operator is FlashInfer's function plus one dict lookup. An operator
that has not run for real in the process (none of its graphs has run, or every graph dropped
its result) is "never checked": `never_checked()`, never "agrees".
"""

import functools
import typing

import torch


# Operator key ("flashinfer::NAME", with the build for a name declared again), with the optional
# tensors given in that call form (`form`) -> "agrees" or what differs, once that form has run
# for real.
verdicts: typing.Dict[str, str] = {}
# Every operator key defined in the process, in definition order; those of them that have run.
defined: typing.List[str] = []
_ran = set()

DIFFERS = (
    "dynafold: the declaration of {name} does not describe its kernel ({what}); the compiled "
    "graph was planned on the declaration and cannot be trusted. Set DYNAFOLD_OPS=0 to leave "
    "FlashInfer's ops as it ships them, and report this to dynafold (the fix is in the op's "
    "record, hooks/ops/registry/: its correction or its fake)."
)

# Up to this many bytes a non-mutable argument is copied for an exact comparison; larger ones
# (a KV cache) are compared by fingerprint, so the check never doubles a server's memory.
COPY_LIMIT = 64 << 20


class Declared:
    """What the operator's declaration promises: the parameters it may write (by position and
    name), whether it draws from the random generator, and its optional tensor parameters
    ((position, name): each combination of them given is a call form, checked on its own)."""

    __slots__ = ("names", "mutable", "seeded", "optional")

    def __init__(self, names=(), mutable=(), seeded=False, optional=()):
        self.names = tuple(names)
        self.mutable = frozenset(mutable)
        self.seeded = seeded
        self.optional = tuple(optional)


def optional_tensors(schema):
    """(position, name) of each `Tensor?` or `Tensor[]?` argument of a parsed schema."""
    return tuple((i, a.name) for i, a in enumerate(schema.arguments)
                 if str(a.type) in ("Optional[Tensor]", "Optional[List[Tensor]]"))


def form(name, optional, args, kwargs):
    """The verdict key of one call: the operator's key, and the optional tensors given (none
    given: the key alone)."""
    if not optional:
        return name
    given = [n for i, n in optional
             if (args[i] if i < len(args) else kwargs.get(n)) is not None]
    return f"{name} [given: {', '.join(given)}]" if given else name


def never_checked():
    """The operators defined in this process that have not run for real in any form."""
    return [key for key in defined if key not in _ran]


def checked(name, fn, fake, declared=None):
    """FlashInfer's function as the operator's kernel, checking the declaration (`fake`, and
    `declared`: what it may write and whether it is seeded) on the first call."""
    declared = declared or Declared()
    defined.append(name)

    def kernel(*args, **kwargs):
        key = form(name, declared.optional, args, kwargs)
        verdict = verdicts.get(key)
        if verdict is not None:
            if verdict != "agrees":
                raise RuntimeError(DIFFERS.format(name=key, what=verdict))
            return fn(*args, **kwargs)
        if _capturing():
            # Copies and comparisons cannot run inside a CUDA-graph capture; the check waits
            # for the first run outside one (SGLang runs each compiled size once before it
            # captures).
            return fn(*args, **kwargs)
        before = _Snapshot(args, kwargs, declared)
        out = fn(*args, **kwargs)
        _ran.add(name)
        verdict = verdicts[key] = (compare(fake, args, kwargs, out)
                                   if fake is not None else "agrees")
        if verdict == "agrees":
            verdict = verdicts[key] = before.differences(args, kwargs, out)
        if verdict != "agrees":
            raise RuntimeError(DIFFERS.format(name=key, what=verdict))
        return out

    kernel = functools.update_wrapper(kernel, fn)
    del kernel.__wrapped__
    return kernel


def _capturing():
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:  # noqa: BLE001 - no CUDA to ask: not capturing
        return False


def compare(fake, args, kwargs, real):
    """"agrees" when `fake`, given fake copies of the inputs, returns what `real` is (shapes,
    dtypes, strides, devices); else what differs, as one short line."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_flatten, tree_map

    try:
        with FakeTensorMode() as mode:
            def fakeify(x):
                return mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
            predicted = fake(*tree_map(fakeify, args), **tree_map(fakeify, kwargs))
    except Exception as e:  # noqa: BLE001 - whatever the fake raises is the verdict
        return f"the fake raised {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    got, got_shape = tree_flatten(real)
    want, want_shape = tree_flatten(predicted)
    if got_shape != want_shape:
        return f"structure {want_shape} predicted, {got_shape} returned"
    for i, (r, f) in enumerate(zip(got, want)):
        if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):
            return f"output {i}: {type(f).__name__} predicted, {type(r).__name__} returned"
        if not isinstance(r, torch.Tensor):
            continue
        have, said = _layout(r), _layout(f)
        for what in have:
            if have[what] != said[what]:
                return f"output {i}: {what} {said[what]} predicted, {have[what]} returned"
    return "agrees"


def _layout(t):
    """What a compiled graph relies on a fake for, in the order it is compared."""
    return {"shape": tuple(t.shape), "dtype": t.dtype, "stride": t.stride(), "device": t.device}


def _named_tensors(args, kwargs, names):
    """(parameter name, tensor) for every tensor argument, lists of tensors included."""
    out = []
    for i, value in enumerate(args):
        out += _tensors_in(names[i] if i < len(names) else f"argument {i}", value)
    for key, value in kwargs.items():
        out += _tensors_in(key, value)
    return out


def _tensors_in(name, value):
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, (list, tuple)):
        return [(name, v) for v in value if isinstance(v, torch.Tensor)]
    return []


def _storage(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - tensors without storage (sparse, nested) are not compared
        return None


def _as_bytes(t):
    """The tensor's bytes as a flat uint8 tensor (a copy)."""
    flat = t.detach().reshape(-1).clone()
    return flat.view(torch.uint8) if flat.numel() else flat


def _fingerprint(t):
    """Content summary of a tensor too large to copy: torch's own reduction where it has one."""
    hash_tensor = getattr(torch, "hash_tensor", None)
    if hash_tensor is None:
        return None
    try:
        return hash_tensor(t.detach()).item()
    except Exception:  # noqa: BLE001 - a tensor that cannot be hashed is not compared
        return None


def _generator_state(device):
    try:
        if device.type == "cuda":
            return torch.cuda.default_generators[device.index or 0].get_offset()
        if device.type == "cpu":
            return torch.default_generator.get_state()
    except Exception:  # noqa: BLE001 - no generator state to read: not compared
        return None
    return None


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b


class _Snapshot:
    """Argument contents and generator state before an operator's first real run."""

    def __init__(self, args, kwargs, declared):
        self.declared = declared
        tensors = _named_tensors(args, kwargs, declared.names)
        self.inputs = [(n, _storage(t)) for n, t in tensors]
        writable = {_storage(t) for n, t in tensors if n in declared.mutable}
        self.kept = []
        for name, t in tensors:
            storage = _storage(t)
            if name in declared.mutable or storage is None or storage in writable:
                continue
            if t.numel() * t.element_size() <= COPY_LIMIT:
                self.kept.append((name, t, True, _as_bytes(t)))
            else:
                self.kept.append((name, t, False, _fingerprint(t)))
        device = next((t.device for _, t in tensors), None)
        self.device = device
        self.rng = None if declared.seeded or device is None else _generator_state(device)

    def differences(self, args, kwargs, out):
        """"agrees", or the first thing the kernel did that its declaration does not say."""
        for name, t, exact, was in self.kept:
            now = _as_bytes(t) if exact else _fingerprint(t)
            if was is not None and not _same(was, now):
                return (f"the kernel wrote {name}, which the declaration does not list as "
                        "mutated")
        from torch.utils._pytree import tree_flatten
        results, _ = tree_flatten(out)
        inputs = {s: n for n, s in self.inputs if s}
        for i, r in enumerate(results):
            if isinstance(r, torch.Tensor) and r.numel() and _storage(r) in inputs:
                return (f"output {i} shares storage with {inputs[_storage(r)]}, an input: an "
                        "aliased result declared as a new tensor")
        if self.rng is not None and not _same(self.rng, _generator_state(self.device)):
            return ("the kernel advanced the random generator, which the declaration does not "
                    "say (not tagged nondeterministic_seeded)")
        return "agrees"
