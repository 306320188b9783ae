"""Where FlashInfer's declarations say less than its kernels do, read per declaring function.

The corrections themselves are the op records' (hooks/ops/registry/, `correction` and
`by_release`; engine/record.py Correction says what each field means). They are keyed by the
declaring function, (module, qualified name), because the declared name of many ops carries a
JIT uri that changes with every build (`flashinfer::single_decode_with_kv_cache_dtype_q_..._run`);
an older release whose declaring function has the same module and qualified name but a
different body has its own (`BY_RELEASE`). Each is a dict of the fields given, as
`Correction.entry()` makes it.
"""

import sys

from _dynafold_ops.registry import BY_RELEASE, CORRECTIONS

# Parameter names that mean the kernel draws from the random generator.
SEEDED_PARAMETERS = frozenset({"generator", "seed", "offset"})


def entry(release, module, function):
    """The correction for `function` of `module` as `release` declares it."""
    own = BY_RELEASE.get(release, {})
    key = (module, function)
    return own[key] if key in own else CORRECTIONS.get(key, {})


def _release_of(module):
    """The version of the package `module` belongs to (FlashInfer's), without a local part."""
    package = sys.modules.get(str(module).partition(".")[0])
    return str(getattr(package, "__version__", "")).split("+")[0]


def of(fn):
    """The correction for FlashInfer's declared function `fn` (empty when there is none)."""
    module = getattr(fn, "__module__", None)
    return entry(_release_of(module), module, getattr(fn, "__qualname__", None))
