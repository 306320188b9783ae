"""Each woken operator's fake, checked against its kernel before anyone relies on it.

FlashInfer's fakes are not exercised by FlashInfer itself (its declarations are switched off),
and some have rotted. The first time an operator runs for real in the process (a compiled
graph's first call), the shapes, dtypes, strides and devices of what its kernel returned are
compared with what its fake returns for the same inputs, before the result is returned. A
mismatch raises (the compiled graph was planned on the fake's word) and every verdict is kept.
"""

import functools

import torch


# "flashinfer::NAME" -> "agrees" or what differs, once the operator has run for real.
verdicts = {}

FAKE_DIFFERS = (
    "dynafold: the fake of {name} does not describe its kernel's result ({what}); the compiled "
    "graph was planned on the fake and cannot be trusted. Set DYNAFOLD_OPS=0 to leave "
    "FlashInfer's ops as it ships them, and report this to dynafold."
)


def checked(name, fn, fake):
    """FlashInfer's function as the operator's kernel, checking `fake` on the first call."""

    def kernel(*args, **kwargs):
        out = fn(*args, **kwargs)
        verdict = verdicts.get(name)
        if verdict is None:
            verdict = verdicts[name] = compare(fake, args, kwargs, out)
        if verdict != "agrees":
            raise RuntimeError(FAKE_DIFFERS.format(name=name, what=verdict))
        return out

    functools.update_wrapper(kernel, fn)
    del kernel.__wrapped__
    return kernel


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
    except Exception as e:
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
