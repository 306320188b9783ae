"""dynafold's fakes, where FlashInfer's are wrong or missing, by declared name.

The fakes themselves are the op records' (hooks/ops/registry/, each defined beside its record;
engine/record.py Fake): `BY_NAME`, {declared name: (a fake taking the arguments by parameter
name, the parameters it reads)}, and `PLAIN`, {declared name: a fake taking the kernel's own
parameters}. Each is checked against the kernel at its first real run like every other fake
(engine/fake_check.py).
"""

import inspect

from _dynafold_ops.registry import BY_NAME, PLAIN


def override(name, kernel):
    """dynafold's fake for the declaration `name` of `kernel`, or None when there is none (or
    `kernel` lacks a parameter the fake reads: the declaration then keeps FlashInfer's fake,
    whose own checks decide)."""
    plain = PLAIN.get(name)
    if plain is not None:
        return plain
    entry = BY_NAME.get(name)
    if entry is None:
        return None
    rule, reads = entry
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return None
    if not set(reads) <= set(sig.parameters):
        return None

    def fake(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return rule(bound.arguments)

    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    fake.__signature__ = sig  # type: ignore[attr-defined]
    fake.__name__ = f"dynafold_fake_{kernel.__name__}"
    return fake
