"""The dispatchers dynafold sets in place of FlashInfer's wrapper methods
(hooks/ops/mechanisms/dispatch.py): eagerly the same call as the method, whatever its
parameters and however it is called; under Dynamo the call's arguments, with a number left at
its default not given (Dynamo would make it symbolic under `dynamic=True`); behind
FlashInfer's own decorator, the decorator kept. Real torch, real Dynamo."""
import functools
import inspect
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from engine_source import engine

dispatch = engine("mechanisms.dispatch")


def flashinfer_api(func):
    """FlashInfer 0.6.16-0.7.x's `flashinfer_api(trace=...)` in its shape: a wrapper calling
    the function from a closure cell (`_inner`), after a check of its own."""
    _inner = func
    calls = []

    # Compiled as FlashInfer's file names it, which is how the dispatcher knows the decorator.
    namespace = {"_inner": func, "calls": calls}
    exec(compile("def _make(_inner, calls):\n"
                 "    def _auto_dump_wrapper(*args, **kwargs):\n"
                 "        calls.append(len(args))\n"
                 "        return _inner(*args, **kwargs)\n"
                 "    return _auto_dump_wrapper\n",
                 "flashinfer/api_logging.py", "exec"), namespace)
    wrapper = functools.wraps(_inner)(namespace["_make"](_inner, calls))
    wrapper.calls = calls
    return wrapper


class Wrapper:
    scale = 2

    def run(self, q, kv, *args, q_scale=None, k_scale=None, out=None, return_lse=False,
            cap=0.0):
        return ("run", q * self.scale, kv, args, q_scale, k_scale, out, return_lse, cap)

    def forward(self, q, kv, pos="NONE", sm_scale=None, window_left=-1, k_scale=None):
        return ("forward", q, kv, pos, sm_scale, window_left, k_scale)

    def only(self, a, /, b, *, c=3, **extra):
        return ("only", a, b, c, extra)

    def po_default(self, a, b=1, /, c=None):
        return ("po_default", a, b, c)

    def cell(self, x):
        return ("cell", x, __class__.__name__, super().__repr__() is not None)

    @flashinfer_api
    def decorated(self, q, *, out=None, window=-1):
        return ("decorated", q, out, window)


CALLS = [
    ("run", (1, 2), {}),
    ("run", (1, 2, 9, 8), {"k_scale": 5, "return_lse": True, "cap": 1.5}),
    ("forward", (1, 2), {"sm_scale": 0.1, "k_scale": 1.0}),
    ("forward", (1, 2, "ROPE", 0.5, 7), {}),
    ("only", (1, 2), {"c": 4, "z": 5}),
    ("only", (1,), {"b": 2}),
    ("po_default", (1,), {"c": 2}),
    ("po_default", (1, 5), {}),
    ("cell", (7,), {}),
    ("decorated", (3,), {"out": 4}),
    ("decorated", (3,), {}),
]
BAD = [("run", (1,), {}), ("forward", (1, 2), {"bogus": 1}), ("only", (), {"a": 1, "b": 2}),
       ("decorated", (1, 2), {})]


@pytest.fixture
def dispatched():
    """The class with every method dispatched; what the traced path was given, in order."""
    seen = []
    originals = {name: Wrapper.__dict__[name] for name, _, _ in CALLS}
    for name, original in originals.items():
        def traced(self, args, kwargs, original=original, name=name):
            seen.append((name, args, kwargs))
            return original(self, *args, **kwargs)
        setattr(Wrapper, name, dispatch.dispatcher(original, traced))
    yield seen
    for name, original in originals.items():
        setattr(Wrapper, name, original)


def _outcome(call):
    name, args, kwargs = call
    try:
        return getattr(Wrapper(), name)(*args, **kwargs)
    except TypeError as e:
        return ("TypeError", str(e).split("()", 1)[-1])


def test_eager_calls_are_the_methods_own():
    """Every call, the right ones and the wrong ones, gives what FlashInfer's method gives
    (results, and the same TypeError); FlashInfer's decorator still runs."""
    want = [_outcome(c) for c in CALLS + BAD]
    decorated_calls = len(Wrapper.__dict__["decorated"].calls)
    originals = dict(vars(Wrapper))
    for name in {n for n, _, _ in CALLS}:
        setattr(Wrapper, name, dispatch.dispatcher(originals[name], None))
    try:
        assert [_outcome(c) for c in CALLS + BAD] == want
        # The decorator's own work ran for the dispatched calls too.
        assert len(originals["decorated"].calls) == decorated_calls + 3
        # One frame of dynafold's: no `*args` packing where the method has named parameters,
        # and FlashInfer's decorator kept outermost, the dispatcher in its closure.
        assert Wrapper.forward.__code__.co_varnames[:3] == ("self", "q", "kv")
        assert Wrapper.decorated.__code__ is originals["decorated"].__code__
    finally:
        for name, value in originals.items():
            if name in {n for n, _, _ in CALLS}:
                setattr(Wrapper, name, value)


def test_a_trace_gets_the_call_and_no_symbolic_default(dispatched):
    """Under `dynamic=True` Dynamo makes a function's numeric defaults symbolic; a number left
    at its default is not given to the traced path (the caller's literal is)."""
    w = Wrapper()

    @torch.compile(backend="eager", fullgraph=True, dynamic=True)
    def f(x):
        return (w.run(x, 2, 3, k_scale=4)[1], w.run(x, 2, cap=0.5)[1],
                w.forward(x, 2, sm_scale=0.5)[1], w.forward(x, 2, "R", 0.1, 7)[1],
                w.decorated(x)[1], w.po_default(x, 2)[1])

    x = torch.ones(2)
    assert all(torch.equal(t, e) for t, e in zip(f(x), (x * 2, x * 2, x, x, x, x)))
    assert dispatched == [
        ("run", (x, 2, 3), {"q_scale": None, "k_scale": 4, "out": None, "return_lse": False}),
        ("run", (x, 2), {"q_scale": None, "k_scale": None, "out": None, "return_lse": False,
                         "cap": 0.5}),
        ("forward", (x, 2), {"pos": "NONE", "sm_scale": 0.5, "k_scale": None}),
        ("forward", (x, 2), {"pos": "R", "sm_scale": 0.1, "k_scale": None, "window_left": 7}),
        ("decorated", (x,), {"out": None}),
        # A positional-only parameter with a default: the packing dispatcher, the call as made.
        ("po_default", (x, 2), {}),
    ]


def test_a_signature_not_from_the_code_gets_the_packing_dispatcher():
    """The exact dispatcher's parameters come from the method's code, never from what it says
    of itself (a `__signature__`, as partial_methods.py sets on its plain methods, which need
    not agree with the code): the call is passed on as made."""
    def method(self, *args, **kwargs):
        return args, kwargs
    method.__signature__ = inspect.Signature([
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
    made = dispatch.dispatcher(method, None)
    assert made.__code__.co_varnames[:3] == ("self", "args", "kwargs")
    assert made(None, 1, y=2) == ((1,), {"y": 2})


def warn_on_positional(method):
    """FlashInfer 0.7.x's MLA `run` decorator in its shape: a wrapper defined in a function,
    reading that function's variable."""
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        return ("wrapped", method(self, *args, **kwargs))
    return wrapped


class Decorated:
    @warn_on_positional
    def run(self, q, out=None):
        return (q, out)


# A class whose method's code is not its file's text, as in a module an import hook rewrote.
exec(compile("class Rewritten:\n"
             "    def run(self, q, kv, window_left=-1):\n"
             "        return ('rewritten', q)\n", __file__, "exec"))


def test_the_method_itself_where_its_source_is_its_code():
    """Where the method's file compiles to exactly the code that runs, the dispatcher is that
    code with the traced block first: the method's own file, first line and line numbers (an
    error's traceback names the same line), no frame of dynafold's. Anything else gets the
    exact dispatcher, one frame."""
    def line_of_error(method):
        try:
            method(Wrapper(), None, None)
        except TypeError as e:
            return e.__traceback__.tb_next.tb_lineno, e.__traceback__.tb_next.tb_frame.f_code
        raise AssertionError("no error")

    original = Wrapper.__dict__["run"]
    made = dispatch.dispatcher(original, None)
    assert made.__code__.co_filename == original.__code__.co_filename
    assert made.__code__.co_firstlineno == original.__code__.co_firstlineno
    (line, code), (want, _) = line_of_error(made), line_of_error(original)
    assert line == want and code is made.__code__  # the method's own frame, first after the caller

    other = dispatch.dispatcher(Rewritten.run, None)  # noqa: F821 - made by exec
    assert other.__code__.co_filename == "<dynafold dispatcher of Rewritten.run>"
    assert other(None, 1, 2) == ("rewritten", 1)
    # A wrapper defined in a decorator: its own code in place, the decorator's cell kept.
    nested = dispatch.dispatcher(Decorated.__dict__["run"], None)
    assert nested.__code__.co_filename == __file__ and "method" in nested.__code__.co_freevars
    assert nested(Decorated(), 1, out=2) == ("wrapped", (1, 2))
    # Made at a module's import (method boundaries): no source read, the exact dispatcher.
    exact = dispatch.dispatcher(original, None, from_source=False)
    assert exact.__code__.co_filename == "<dynafold dispatcher of Wrapper.run>"


def test_a_partialmethod_made_plain_is_called_by_its_dispatcher():
    """FlashInfer's `run_return_lse = partialmethod(run, return_lse=True)`, made plain by
    hooks/ops/mechanisms/partial_methods.py: the dispatcher makes the plain method's call
    itself (one frame, not two), eagerly the partialmethod's result; a trace gets the call."""
    partial_methods = engine("mechanisms.partial_methods")

    class Lse(Wrapper):
        run_return_lse = functools.partialmethod(Wrapper.run, return_lse=True)

    shipped = Lse().run_return_lse(1, 2, 9, k_scale=5, cap=0.5)
    module = type(sys)("lse_module")
    Lse.__module__ = module.__name__
    module.Lse = Lse
    assert partial_methods.install(module) == ["Lse.run_return_lse"]
    seen = []
    plain = Lse.__dict__["run_return_lse"]
    Lse.run_return_lse = dispatch.dispatcher(
        plain, lambda self, args, kwargs: seen.append((args, kwargs)) or plain(self, *args, **kwargs))
    cells = [c.cell_contents for c in Lse.run_return_lse.__closure__]
    assert plain not in cells and Wrapper.run in cells  # the plain method's call, made here
    assert Lse().run_return_lse(1, 2, 9, k_scale=5, cap=0.5) == shipped
    assert Lse().run_return_lse(1, 2, return_lse=False)[7] is False  # the caller's keyword wins

    w = Lse()

    @torch.compile(backend="eager", fullgraph=True)
    def f(x):
        return w.run_return_lse(x, 2, k_scale=3)[1]

    x = torch.ones(2)
    assert torch.equal(f(x), x * 2) and seen == [((x, 2), {"k_scale": 3})]
