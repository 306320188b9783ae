"""A builder's call fitted to the release's signature: the builders are written for the newest
release, and an older one lacks parameters added since (0.6.3's trtllm MoE has no `output`,
`per_token_scale` nor `use_fused_finalize`). Dropping what the signature lacks is the call
that release's own callers make (SGLang 0.5.9 on 0.6.3); a parameter a release requires and
the builder does not give still fails, by name."""
import inspect
import typing


def accepted(fn, kwargs):
    """Of `kwargs`, the ones `fn` takes (all of them where it takes **kwargs)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


def takes(fn, name):
    """Whether `fn` has a parameter `name`."""
    return name in inspect.signature(fn).parameters


def first(result):
    """The output of a MoE entry point: the first of the list newer releases return, or the
    tensor older ones return alone."""
    return result[0] if isinstance(result, (list, tuple)) else result


def choice(fn, name, wanted):
    """`wanted` where `fn`'s `name` may be it (its Literal names it, or it is no Literal),
    else the parameter's default: the release's own choice (0.7.2's per-token group quantizer
    has the "cutile" backend alone)."""
    param = inspect.signature(fn).parameters[name]
    annotation = param.annotation
    if isinstance(annotation, str):  # `from __future__ import annotations`
        literal = "Literal" in annotation
        named = f'"{wanted}"' in annotation or f"'{wanted}'" in annotation
        return wanted if not literal or named else param.default
    options = typing.get_args(annotation)
    return wanted if not options or wanted in options else param.default
