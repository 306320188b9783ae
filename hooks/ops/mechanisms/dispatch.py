"""A method that is FlashInfer's for eager calls and dynafold's while Dynamo traces, at the
cost of one frame.

A plain `def method(self, *args, **kwargs)` that forwards to FlashInfer's method packs the
call into a tuple and a dict and unpacks them again: with SGLang's keywords (`forward(q, kv,
sm_scale=..., logits_soft_cap=..., k_scale=..., v_scale=...)`) about 0.37 us a call on the
2-core CPU machine, twice per decode call (FlashInfer's `forward()` calls `run()`), 1.10-1.12x
of the stand-in call (issue 40). So the dispatcher has FlashInfer's own parameter list, made
from the method's code (its names only, each checked to be an identifier; the defaults are the
method's own objects, bound by name in the generated code's namespace, never written into
it), and passes every argument on by position. A method with keyword-only parameters is called through a copy of its function
whose code takes them by position too (`code.replace`: the same body, line held_back and
closure; CPython keeps keyword-only parameters right after the positional ones, so only the
counts change). A method behind FlashInfer's own decorator gets the dispatcher inside it
(`_through_decorator`); any other whose code takes no named parameter first gets the packing
one.

While Dynamo traces, the dispatcher calls `traced(self, args, kwargs)` with the call's
arguments: those without a default by position, the others by name, a default included only
where it is None, a bool or a string (see `_exact`).
"""

import functools
import inspect
import keyword
import types
import typing

import torch

# Dynamo knows the function by identity and folds it to True while it traces. Eagerly it is
# one frame returning False, where `torch.compiler.is_compiling` is two (it asks TorchScript
# first) and is also true under non-strict export, which runs FlashInfer's methods eagerly.
is_dynamo_compiling = torch.compiler.is_dynamo_compiling

_P = inspect.Parameter
# A dispatcher's default for a parameter whose own default is held back from a trace: not
# given by the caller.
_UNSET = object()


def dispatcher(original, traced) -> typing.Any:
    """A function to set on the class in place of `original`: `original` eagerly, `traced(self,
    args, kwargs)` while Dynamo traces."""
    made = _through_decorator(original, traced) or _exact(original, traced)
    if made is None:
        made = _packing(original, traced)
    functools.update_wrapper(made, original)
    return made


def _through_decorator(original, traced):
    """FlashInfer's own decorator around the method (0.6.16-0.7.x `flashinfer_api(trace=...)`:
    `_auto_dump_wrapper(*args, **kwargs)`, which calls the function it wraps from a closure
    cell) copied with the dispatcher in that cell: the packing is FlashInfer's, as without
    dynafold, and the dispatcher gets its call from it. None when `original` is not such a
    wrapper, or the function it wraps has no exact dispatcher."""
    inner = getattr(original, "__wrapped__", None)
    code = getattr(original, "__code__", None)
    closure = getattr(original, "__closure__", None)
    # That decorator only: a trace passes through it (it reads one environment variable), as
    # it does without dynafold. Others may not be traced at all (0.7.4's experimental-API
    # decorator warns on the first call) and stay outside the dispatcher.
    if (inner is None or code is None or not closure or code.co_name != "_auto_dump_wrapper"
            or not code.co_filename.endswith("api_logging.py")):
        return None
    cells = [i for i, cell in enumerate(closure) if _contents(cell) is inner]
    if len(cells) != 1:
        return None
    made = _exact(inner, traced)
    if made is None:
        return None
    functools.update_wrapper(made, inner)
    copy = types.FunctionType(
        code, original.__globals__, original.__name__, original.__defaults__,
        tuple(types.CellType(made) if i == cells[0] else cell for i, cell in enumerate(closure)))
    copy.__kwdefaults__ = original.__kwdefaults__
    return copy


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _packing(original, traced):
    def method(self, *args, **kwargs):
        if is_dynamo_compiling():
            return traced(self, args, kwargs)
        return original(self, *args, **kwargs)
    return method


def _exact(original, traced):
    """The dispatcher with `original`'s parameters, or None where its code says none first, a
    name is not a plain identifier, or a default held back is that of a parameter that must be
    passed by position."""
    if not inspect.isfunction(original) or "__signature__" in vars(original):
        return None  # the parameters are read from the code, never from what it says of itself
    try:
        params = list(inspect.signature(original, follow_wrapped=False).parameters.values())
    except (TypeError, ValueError):
        return None
    if not params or params[0].kind not in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
        return None
    if any(not p.name.isidentifier() or keyword.iskeyword(p.name) or
           p.name.startswith("_dynafold") for p in params):
        return None
    named = [p for p in params if p.kind not in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)]
    star = next((p.name for p in params if p.kind == _P.VAR_POSITIONAL), None)
    stars = next((p.name for p in params if p.kind == _P.VAR_KEYWORD), None)
    only = [p.name for p in named if p.kind == _P.KEYWORD_ONLY]
    # What Dynamo is given: the parameters without a default by position (with `*args`, every
    # positional one), the others by name. A default that is not None, a bool or a string is
    # held back, not given when the caller left it: Dynamo may make a number symbolic (a
    # function's defaults are inputs of the frame under `dynamic=True`), which no constant form
    # can hold, and an object default may be a sentinel of FlashInfer's own (0.7.4's
    # CuteDslMoEWrapper.run `nvfp4_4over6=_UNSET`) that no declaration takes. Such a parameter
    # gets a sentinel default of dynafold's, replaced before the eager call.
    by_position = [p for p in named if p.kind != _P.KEYWORD_ONLY
                   and (star is not None or p.default is _P.empty)]
    held_back = {p.name for p in named if p.default is not _P.empty
               and type(p.default) not in (type(None), bool, str)}
    if any(p.name in held_back for p in by_position) or any(
            p.kind == _P.POSITIONAL_ONLY and p.default is not _P.empty for p in named):
        return None  # (a positional-only parameter cannot be given by name)
    eager = _positional_copy(original, len(only)) if only else original
    if eager is None:
        return None

    namespace = {"_dynafold_tracing": is_dynamo_compiling, "_dynafold_traced": traced,
                 "_dynafold_eager": eager, "_dynafold_unset": _UNSET}
    listed = []
    for i, p in enumerate(params):
        if p.kind == _P.KEYWORD_ONLY and star is None and "*" not in listed:
            listed.append("*")
        text = ("*" if p.kind == _P.VAR_POSITIONAL else "**" if p.kind == _P.VAR_KEYWORD
                else "") + p.name
        if p.default is not _P.empty:
            namespace[f"_dynafold_default_{i}"] = p.default
            text += "=_dynafold_unset" if p.name in held_back else f"=_dynafold_default_{i}"
        listed.append(text)
        if p.kind == _P.POSITIONAL_ONLY and (
                i + 1 == len(params) or params[i + 1].kind != _P.POSITIONAL_ONLY):
            listed.append("/")
    first = by_position[0].name
    given = [p.name for p in by_position[1:]]
    traced_args = "(" + "".join(f"{n}, " for n in given) + ")" + (f" + {star}" if star else "")
    keywords = [p.name for p in named if p not in by_position and p.name not in held_back]
    lines = [f"def method({', '.join(listed)}):",
             "    if _dynafold_tracing():",
             "        _dynafold_keywords = {" + "".join(f"{n!r}: {n}, " for n in keywords)
             + (f"**{stars}" if stars else "") + "}"]
    lines += [f"        if {n} is not _dynafold_unset:\n"
              f"            _dynafold_keywords[{n!r}] = {n}" for n in sorted(held_back)]
    lines.append(f"        return _dynafold_traced({first}, {traced_args}, _dynafold_keywords)")
    for i, p in enumerate(params):
        if p.name in held_back:
            lines.append(f"    if {p.name} is _dynafold_unset:\n"
                         f"        {p.name} = _dynafold_default_{i}")
    positional = [p.name for p in named if p.kind != _P.KEYWORD_ONLY]
    # The copy takes the keyword-only ones right after the positional ones, then any `*args`
    # (passed on only when there are some: an empty `*args` still costs a tuple).
    eager_args = positional + only
    tail = [f"**{stars}"] if stars else []
    if star:
        lines.append(f"    if {star}:\n"
                     f"        return _dynafold_eager({', '.join(eager_args + [f'*{star}'] + tail)})")
    lines.append(f"    return _dynafold_eager({', '.join(eager_args + tail)})")
    try:
        exec(compile("\n".join(lines) + "\n",
                     f"<dynafold dispatcher of {original.__qualname__}>", "exec"), namespace)
    except SyntaxError:
        return None
    return namespace["method"]


def _positional_copy(function, kwonly):
    """`function` with its `kwonly` keyword-only parameters taken by position, right after its
    positional ones; None where its code is not that shape."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_kwonlyargcount != kwonly:
        return None
    try:
        copy = types.FunctionType(
            code.replace(co_argcount=code.co_argcount + kwonly, co_kwonlyargcount=0),
            function.__globals__, function.__name__, None, function.__closure__)
    except (TypeError, ValueError):
        return None
    copy.__qualname__ = function.__qualname__
    return copy
