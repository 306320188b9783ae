"""FlashInfer's `run_return_lse = functools.partialmethod(run, return_lse=True)`, as a plain method.

Called through an instance, a partialmethod builds a `functools.partial` and sets its
`__self__` (CPython's functools.py, `partialmethod.__get__`). Dynamo cannot set an attribute on
a partial, so every `wrapper.run_return_lse(...)` stops the trace, and so does every deprecated
`forward_return_lse` that calls it (SGLang's FlashInfer backend calls the ragged prefill one),
with or without dynafold.

Each such attribute of a class the module defines becomes a plain function making the same
call: the function the partialmethod holds, with its bound arguments first and its keywords
overridden by the caller's, which is what partialmethod does for a function
(`_make_unbound_method`). It keeps the partialmethod's signature and the held function's
documentation. A partialmethod over anything but a plain function (a classmethod, another
descriptor) is left as it is.

`install(module)` runs right after a module defining FlashInfer's attention wrappers has
executed, with the plans' hook (hooks/ops/mechanisms/attention_plans.py).
"""

import functools
import inspect

from _dynafold_ops.mechanisms import dispatch


def install(module):
    """The `Class.attribute` names made plain in `module`, in definition order."""
    made = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        for attr, value in list(vars(cls).items()):
            if isinstance(value, functools.partialmethod) and inspect.isfunction(value.func):
                setattr(cls, attr, _plain(cls, attr, value))
                made.append(f"{name}.{attr}")
    return made


def _plain(cls, attr, partial_method):
    func = partial_method.func
    bound = partial_method.args
    keywords = partial_method.keywords

    def method(self, /, *args, **kwargs):
        return func(self, *bound, *args, **{**keywords, **kwargs})

    method.__name__ = attr
    method.__qualname__ = f"{cls.__qualname__}.{attr}"
    method.__module__ = cls.__module__
    method.__doc__ = func.__doc__
    setattr(method, dispatch.PARTIAL, (func, bound, keywords))  # the dispatcher makes this call
    try:
        # (mypy has no type for an attribute set on a function: python/mypy#2087)
        method.__signature__ = inspect.signature(getattr(cls, attr))  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pass
    return method
