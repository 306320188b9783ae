"""dynafold's survey mode (`DYNAFOLD_SURVEY=1`, `dynafold run --survey`): a compile that asks for
fullgraph=True carries on past its graph breaks, so one run meets every obstacle Dynamo has on
its path instead of dying at the first, and the graph-break observer records each one.

Executed as module `_dynafold_survey` once `torch._dynamo` has been imported, and only when
the setting says yes; `install(warn)` starts it. Off, nothing here runs.

Where the request is changed: `torch._dynamo.eval_frame._optimize`, the one function every
compile entry reaches with the fullgraph request in hand, in every torch from 2.9 to 2.15.
`torch.compile(..., fullgraph=True)` passes it on as `nopython=True` through
`torch._dynamo.optimize`, which calls `_optimize` through the module's global at call time; so
the request is seen however it was made: directly, through a `functools.partial`, positionally
to a wrapper (SGLang's `install_torch_compiled` passes its `fullgraph` on), before or after this
ran. There the arguments are bound to `_optimize`'s own signature, so a positional `nopython`
is read too, and `nopython` becomes False: the compile is then exactly a fullgraph=False one
(Dynamo's `ConvertFrame`, its splitting at breaks and its fallbacks), not a fullgraph compile
told to ignore errors. Two other places would not do: `torch._dynamo.error_on_graph_break(False)`
does nothing under fullgraph=True, and a config value read by the frame converter is one a
process may set or patch itself. `error_on_graph_break=False` is also given, where this torch
takes it, so that a process that made graph breaks errors globally is surveyed too.

Left alone: `optimize_assert` (torch.export's entry: an export needs its one graph) and every
compile that did not ask for fullgraph=True.

Each process says once, on the `warn` callable it is given (dynafold's log), that survey mode
changed a compile's fullgraph and that the run is a diagnosis. The compile's frame converter
gets the attribute `_dynafold_survey`, which the observer reads to mark its records.
"""

import functools
import inspect
import os
from typing import Any, Callable, Dict, Optional

# What the observer looks for on a frame converter (hooks/observer/dynamo_observer.py).
MARK = "_dynafold_survey"

WARNING = ("survey mode (DYNAFOLD_SURVEY): a compile that asked for fullgraph=True carries on "
           "past its graph breaks, so this run reports all of them; it is a diagnosis, not a "
           "server's run (a CUDA graph captured over a graph with breaks may fail or run slower)")

# The frame converters' classes, across torch 2.9-2.15, found by walking the callback's
# `_torchdynamo_orig_backend` chain: only they are marked, never the user's backend, which
# another compile may share.
_CONVERTERS = ("ConvertFrame", "ConvertFrameAssert")
_CHAIN_LIMIT = 8

_state: Dict[str, Any] = {"warn": None, "said_pid": None, "original": None}


def install(warn: Callable[[str], Any]) -> Optional[str]:
    """Wraps `_optimize`. Returns None when survey mode is live, else why not (the caller says
    it once). Never raises."""
    try:
        _state["warn"] = warn
        from torch._dynamo import eval_frame

        current = eval_frame._optimize
        if getattr(current, MARK, False):
            return None
        signature = inspect.signature(current)
        if "nopython" not in signature.parameters:
            return "torch._dynamo.eval_frame._optimize takes no `nopython` in this torch"
        wrapper = _wrap(current, signature)
        eval_frame._optimize = wrapper
        _state["original"] = current
        return None
    except Exception as e:  # noqa: BLE001 - survey mode must never break the host process
        return "cannot wrap torch._dynamo.eval_frame._optimize: %r" % (e,)


def uninstall() -> None:
    """Puts torch's own `_optimize` back (used by tests)."""
    original = _state["original"]
    if original is None:
        return
    from torch._dynamo import eval_frame

    eval_frame._optimize = original
    _state["original"] = None


def _wrap(original: Callable[..., Any], signature: inspect.Signature) -> Callable[..., Any]:
    takes_error_on_graph_break = "error_on_graph_break" in signature.parameters

    @functools.wraps(original)
    def _optimize(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
            asked = bool(bound.arguments.get("nopython")) and not bound.arguments.get("disable")
        except Exception:  # noqa: BLE001 - a bad call: torch says what is wrong with it
            asked = False
        if not asked:
            return original(*args, **kwargs)
        bound.arguments["nopython"] = False
        if takes_error_on_graph_break:
            bound.arguments["error_on_graph_break"] = False
        ctx = original(*bound.args, **bound.kwargs)
        try:
            if _mark(ctx):
                _say()
        except Exception:  # noqa: BLE001 - the compile is the host's; only our note is lost
            pass
        return ctx

    setattr(_optimize, MARK, True)
    return _optimize


def _mark(ctx: Any) -> bool:
    """Marks the frame converter(s) behind `ctx`'s callback; False when there is none (a
    disabled compile, TORCHDYNAMO_DISABLE=1: nothing will be compiled)."""
    obj = getattr(ctx, "callback", None)
    found = False
    for _ in range(_CHAIN_LIMIT):
        if obj is None:
            break
        if type(obj).__name__ in _CONVERTERS:
            found = True
            for converter in (obj, getattr(obj, "_inner_convert", None)):
                if converter is not None:
                    try:
                        setattr(converter, MARK, True)
                    except Exception:  # noqa: BLE001 - unmarked: its records say fullgraph=False
                        pass
            break
        obj = getattr(obj, "_torchdynamo_orig_backend", None)
    return found or getattr(ctx, "callback", None) not in (None, False)


def _say() -> None:
    # Once per process: a forked child has a pid of its own and says it again.
    pid = os.getpid()
    if _state["said_pid"] == pid:
        return
    _state["said_pid"] = pid
    warn = _state["warn"]
    if warn is None:
        return
    try:
        warn(WARNING)
    except Exception:  # noqa: BLE001 - the warning is ours; the compile is the host's
        pass
