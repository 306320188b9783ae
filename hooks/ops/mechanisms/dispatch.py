"""A method that is FlashInfer's for eager calls and dynafold's while Dynamo traces.

Three forms, the first that applies (issue 40 measured each on the 2-core CPU machine, with
SGLang's keywords: `forward(q, kv, sm_scale=..., logits_soft_cap=..., k_scale=..., v_scale=...)`,
which calls `run()`, so it pays twice):

- In place (`_in_place`): FlashInfer's method compiled again from its own source with the
  traced block as its first statement. No frame of dynafold's: eagerly one call of
  `is_dynamo_compiling`, +0.03 us a method. Only where that source, compiled without the block,
  gives exactly the code that runs.
- Exact (`_exact`): a function with FlashInfer's own parameter list, made from the method's code
  (its names only, each checked to be an identifier; the defaults are the method's own objects,
  bound by name in the generated code's namespace, never written into it), passing every
  argument on by position: one frame, +0.07 us. A method with keyword-only parameters is called
  through a copy of its function whose code takes them by position too (`code.replace`: the
  same body, line table and closure; CPython keeps keyword-only parameters right after the
  positional ones, so only the counts change).
- Packing (`_packing`), for a method whose code takes no named parameter first, or a
  positional-only one with a default: `def method(self, *args, **kwargs)`, +0.37 us; for a
  partialmethod made plain, the plain method's own call, made in the dispatcher.

A method behind FlashInfer's own decorator gets the dispatcher inside it (`_through_decorator`).

While Dynamo traces, the dispatcher calls `traced(self, args, kwargs)` with the call's
arguments: those without a default by position, the others by name, a default included only
where it is None, a bool or a string (see `_shape`).
"""

import __future__
import ast
import dis
import functools
import inspect
import keyword
import linecache
import operator
import sys
import types
import typing

import torch

# Dynamo knows the function by identity and folds it to True while it traces. Eagerly it is
# one frame returning False, where `torch.compiler.is_compiling` is two (it asks TorchScript
# first) and is also true under non-strict export, which runs FlashInfer's methods eagerly.
is_dynamo_compiling = torch.compiler.is_dynamo_compiling

_P = inspect.Parameter
# The attribute of a plain method made from a partialmethod: (function, bound arguments,
# keywords), the call it makes.
PARTIAL = "_dynafold_partial"
# A dispatcher's default for a parameter whose own default is held back from a trace: not
# given by the caller.
_UNSET = object()


def dispatcher(original, traced, from_source=True) -> typing.Any:
    """A function to set on the class in place of `original`: `original` eagerly, `traced(self,
    args, kwargs)` while Dynamo traces. Without `from_source`, never made in place: reading and
    compiling a method's source costs 1-6 ms, too much at a module's import."""
    made = (_through_decorator(original, traced, from_source)
            or (_in_place(original, traced) if from_source else None)
            or _exact(original, traced))
    if made is None:
        made = _packing(original, traced)
    functools.update_wrapper(made, original)
    return made


def _through_decorator(original, traced, from_source):
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
    made = (_in_place(inner, traced) if from_source else None) or _exact(inner, traced)
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
    partial = getattr(original, PARTIAL, None)
    if partial is not None:
        # A partialmethod made plain (hooks/ops/mechanisms/partial_methods.py): its call made
        # here, one frame where the plain method behind a dispatcher would be two (+0.25 us).
        func, bound, keywords = partial

        def plain(self, /, *args, **kwargs):
            if is_dynamo_compiling():
                return traced(self, args, kwargs)
            return func(self, *bound, *args, **{**keywords, **kwargs})
        return plain

    def method(self, *args, **kwargs):
        if is_dynamo_compiling():
            return traced(self, args, kwargs)
        return original(self, *args, **kwargs)
    return method


class _Shape(typing.NamedTuple):
    """How a method's call reaches the traced path, read from its code."""
    params: typing.List[inspect.Parameter]
    star: typing.Optional[str]  # its `*args`
    stars: typing.Optional[str]  # its `**kwargs`
    only: typing.List[str]  # its keyword-only parameters
    by_position: typing.List[inspect.Parameter]  # given to the traced path by position
    held_back: typing.Set[str]  # not given when left at their default

    def traced_block(self):
        """The lines that hand the call to `_dynafold_traced` while Dynamo traces. A parameter
        held back whose value is `_dynafold_unset` (its default in the function the lines are
        in) was not given."""
        named = [p for p in self.params if p.kind not in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)]
        given = [p.name for p in self.by_position[1:]]
        args = ("(" + "".join(f"{n}, " for n in given) + ")"
                + (f" + {self.star}" if self.star else ""))
        keywords = [p.name for p in named
                    if p not in self.by_position and p.name not in self.held_back]
        lines = ["if _dynafold_tracing():",
                 "    _dynafold_keywords = {" + "".join(f"{n!r}: {n}, " for n in keywords)
                 + (f"**{self.stars}" if self.stars else "") + "}"]
        lines += [f"    if {p.name} is not _dynafold_unset:\n"
                  f"        _dynafold_keywords[{p.name!r}] = {p.name}"
                  for p in self.params if p.name in self.held_back]
        lines.append(f"    return _dynafold_traced({self.by_position[0].name}, {args}, "
                     "_dynafold_keywords)")
        return lines

    def restored(self):
        """The lines after the traced block: each parameter held back and not given gets its
        own default (`_dynafold_default_<index>`) again, for the eager call."""
        return [f"if {p.name} is _dynafold_unset:\n    {p.name} = _dynafold_default_{i}"
                for i, p in enumerate(self.params) if p.name in self.held_back]

    def names(self, traced):
        """What the lines of `traced_block()` and `restored()` read, by name."""
        return {"_dynafold_tracing": is_dynamo_compiling, "_dynafold_traced": traced,
                "_dynafold_unset": _UNSET,
                **{f"_dynafold_default_{i}": p.default for i, p in enumerate(self.params)
                   if p.name in self.held_back}}


def _shape(original):
    """`original`'s call shape, or None where its code says no parameter first, a name is not a
    plain identifier, or a default held back is that of a parameter that must be passed by
    position."""
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
    # What Dynamo is given: the parameters without a default by position (with `*args`, every
    # positional one), the others by name. A default that is not None, a bool or a string is
    # held back, not given when the caller left it: Dynamo may make a number symbolic (a
    # function's defaults are inputs of the frame under `dynamic=True`), which no constant form
    # can hold, and an object default may be a sentinel of FlashInfer's own (0.7.4's
    # CuteDslMoEWrapper.run `nvfp4_4over6=_UNSET`) that no declaration takes.
    by_position = [p for p in named if p.kind != _P.KEYWORD_ONLY
                   and (star is not None or p.default is _P.empty)]
    held_back = {p.name for p in named if p.default is not _P.empty
                 and type(p.default) not in (type(None), bool, str)}
    if any(p.name in held_back for p in by_position) or any(
            p.kind == _P.POSITIONAL_ONLY and p.default is not _P.empty for p in named):
        return None  # (a positional-only parameter cannot be given by name)
    return _Shape(params, star, stars, [p.name for p in named if p.kind == _P.KEYWORD_ONLY],
                  by_position, held_back)


def _in_place(original, traced):
    """`original` compiled again from its own source with the traced block as its first
    statement (after the docstring): eagerly the cost of one call returning False, and no frame
    of dynafold's. The source is FlashInfer's file as linecache has it, compiled as `original`
    was (its line numbers, its columns, its `__future__` flags) and used only when, compiled
    without the block, it gives a code object equal to `original`'s (same bytecode, constants,
    names and line table): anything else is None, and the next dispatcher is tried. The block's
    names are cells of the copy (the function and the defaults it compares with), never
    FlashInfer's globals."""
    shape = _shape(original)
    code = getattr(original, "__code__", None)
    # (In a generator the block's `return` would end the generator instead of answering.)
    if shape is None or code is None or code.co_flags & _NOT_PLAIN:
        return None
    first = code.co_firstlineno
    lines = _block(linecache.getlines(code.co_filename, original.__globals__), code)
    indent = len(lines[0]) - len(lines[0].lstrip(" ")) if lines else 0
    # Three lines of scaffold above the method: the module's imports of the names it uses
    # (never run: CPython 3.11+ compiles `name.attr(...)` differently where `name` is imported),
    # then, each less indented than the method, a function whose locals the block's names are,
    # and a class, so that `super()` and `__class__` compile as they did.
    if not lines or first < 4 or not 2 <= indent < len(lines[0]) or lines[0][indent] in "\t\f":
        return None
    cells = shape.names(traced)
    # A function defined in another (a decorator's wrapper) reads that one's variables as
    # cells: the scaffold's function has them too.
    outer = [n for n in code.co_freevars if n != "__class__"]
    if any(n.startswith("_dynafold") for n in outer):
        return None
    imported = sorted(_imported(code, original.__globals__))
    scaffold = ((f"import {', '.join(imported)}\n" if imported else "\n")
                + f"def _dynafold_scope({', '.join(outer + list(cells))}):\n"
                + " class _dynafold_class:\n")
    flags = code.co_flags & _FUTURE_FLAGS
    try:
        tree = ast.parse("\n" * (first - 4) + scaffold + "".join(lines))
        scope = typing.cast(ast.FunctionDef, tree.body[-1])
        method = typing.cast(ast.ClassDef, scope.body[0]).body
        if (len(method) != 1 or not isinstance(method[0], ast.FunctionDef)
                or method[0].name != code.co_name):
            return None
        if _compiled(tree, code, flags) != code:
            return None  # not the source of the code that runs
        body = method[0].body
        at = 1 if (len(body) > 1 and isinstance(body[0], ast.Expr)
                   and isinstance(body[0].value, ast.Constant)
                   and isinstance(body[0].value.value, str)) else 0
        block = ast.parse("\n".join(shape.traced_block() + shape.restored()) + "\n").body
        for node in block:
            for part in ast.walk(node):
                ast.copy_location(part, body[at])
        body[at:at] = block
        made = _compiled(tree, code, flags)
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    if made is None or not set(made.co_freevars) <= set(cells) | set(code.co_freevars):
        return None
    own = dict(zip(code.co_freevars, original.__closure__ or ()))
    closure = tuple(own[n] if n in own else types.CellType(cells[n]) for n in made.co_freevars)
    if sys.version_info >= (3, 11):
        made = made.replace(co_qualname=code.co_qualname)
    # A default held back is dynafold's sentinel in the copy, as in `_exact`'s dispatcher:
    # under Dynamo an identity test with the default's own object fails (a constant is made
    # again), one with an object of dynafold's holds.
    defaults = original.__defaults__
    if defaults:
        names = [p.name for p in shape.params if p.kind != _P.KEYWORD_ONLY
                 and p.default is not _P.empty]
        if len(names) != len(defaults):
            return None
        defaults = tuple(_UNSET if n in shape.held_back else v for n, v in zip(names, defaults))
    copy = types.FunctionType(made, original.__globals__, original.__name__, defaults, closure)
    if original.__kwdefaults__:
        copy.__kwdefaults__ = {n: _UNSET if n in shape.held_back else v
                               for n, v in original.__kwdefaults__.items()}
    return copy


def _block(lines, code):
    """The lines of `code`'s definition: from its first line (its first decorator's) to the last
    its instructions cover, then any more indented or blank. A cheap reading, where
    `inspect.getsourcelines` tokenizes (8 ms for a 300-line method); a wrong one does not
    compile to the code that runs."""
    first = code.co_firstlineno
    if not 0 < first <= len(lines):
        return []
    head = lines[first - 1]
    indent = len(head) - len(head.lstrip())
    end = min(_last_line(code), len(lines))
    while end < len(lines) and (not lines[end].strip()
                                or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    return lines[first - 1:end]


def _last_line(code):
    if hasattr(code, "co_positions"):  # CPython 3.11+: where each instruction's source ends
        ends = [end for _, end, _, _ in code.co_positions() if end is not None]
    else:
        ends = [line for _, line in dis.findlinestarts(code) if line is not None]
    nested = [_last_line(c) for c in code.co_consts if isinstance(c, types.CodeType)]
    return max([code.co_firstlineno] + ends + nested)


_NOT_PLAIN = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
              | inspect.CO_ITERABLE_COROUTINE)

# The `__future__` features a code object's flags carry, which its copy is compiled with.
_FUTURE_FLAGS = functools.reduce(
    operator.or_, (getattr(__future__, f).compiler_flag for f in __future__.all_feature_names))


def _imported(code, module):
    """The global names `code` (and code nested in it) uses that its module has imported, as
    far as the values tell: modules, and objects defined in another module. A guess, which the
    comparison of the compiled code checks."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _imported(const, module)
    own = module.get("__name__")
    return {n for n in names if n.isidentifier() and not keyword.iskeyword(n) and n in module and (
        isinstance(module[n], types.ModuleType)
        or getattr(module[n], "__module__", own) not in (own, None))}


def _compiled(tree, code, flags):
    """The method's code object in `tree` (the scaffold's), compiled as `code` was."""
    module = compile(tree, code.co_filename, "exec", flags=flags, dont_inherit=True)
    for scope in module.co_consts:
        if isinstance(scope, types.CodeType) and scope.co_name == "_dynafold_scope":
            for cls in scope.co_consts:
                if isinstance(cls, types.CodeType) and cls.co_name == "_dynafold_class":
                    for made in cls.co_consts:
                        if isinstance(made, types.CodeType) and made.co_name == code.co_name:
                            # Nested in the scaffold, which `code` was not.
                            return made.replace(co_flags=made.co_flags & ~inspect.CO_NESTED
                                                | code.co_flags & inspect.CO_NESTED)
    return None


def _exact(original, traced):
    """The dispatcher with `original`'s parameters, or None where it has no call shape."""
    shape = _shape(original)
    if shape is None:
        return None
    params, star, stars, only = shape.params, shape.star, shape.stars, shape.only
    eager = _positional_copy(original, len(only)) if only else original
    if eager is None:
        return None

    namespace = {**shape.names(traced), "_dynafold_eager": eager}
    listed = []
    for i, p in enumerate(params):
        if p.kind == _P.KEYWORD_ONLY and star is None and "*" not in listed:
            listed.append("*")
        text = ("*" if p.kind == _P.VAR_POSITIONAL else "**" if p.kind == _P.VAR_KEYWORD
                else "") + p.name
        # A default held back gets a sentinel of dynafold's, replaced before the eager call.
        if p.name in shape.held_back:
            text += "=_dynafold_unset"
        elif p.default is not _P.empty:
            namespace[f"_dynafold_default_{i}"] = p.default
            text += f"=_dynafold_default_{i}"
        listed.append(text)
        if p.kind == _P.POSITIONAL_ONLY and (
                i + 1 == len(params) or params[i + 1].kind != _P.POSITIONAL_ONLY):
            listed.append("/")
    lines = [f"def method({', '.join(listed)}):"]
    lines += ["    " + line for line in "\n".join(
        shape.traced_block() + shape.restored()).split("\n")]
    named = [p for p in params if p.kind not in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)]
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
