"""dynafold's Dynamo observer: one dict per graph break or failed fullgraph compile, to a sink.

Executed as module `_dynafold_observer` once `torch._dynamo` has been imported; `install(sink)`
starts it. It patches nothing in torch. It listens on two loggers torch already writes to, and
reads the exception that is live while torch logs (both calls happen inside torch's `except`):

- the `graph_breaks` artifact loggers (`torch._dynamo.<module>.__graph_breaks`): one record per
  graph break that Dynamo recovers from (fullgraph=False), and per frame it gives up on;
- `torch._utils_internal` at INFO (`log_compilation_event`, once per frame compile while
  `torch._dynamo.config.log_compilation_metrics` is on): carries `fail_type` and the live
  exception when a compile fails, which is how fullgraph=True `Unsupported` errors are seen,
  also when the caller catches them.

The structured trace logger (`torch.__trace`) would carry the same facts, but a handler there
makes torch build every trace payload (graphs, generated code) on every compile.

Each record names its owner, the package whose frame broke (`flashinfer`, `sglang`, `torch`,
...) or, for code outside every package, the user's file itself; and, in survey mode
(hooks/survey/fullgraph_survey.py), whether its compile asked for fullgraph=True and was
carried on past the break.

Listening must not change what torch prints: where a logger is not already enabled at the level
needed, its level is lowered and a logger filter drops, after observing them, exactly the
records that would not have passed before (see `_Tap`). Everything is wrapped: the first
unexpected error disables the observer with one line on the `dynafold` logger.
"""

import logging
import os
import re
import sys
import sysconfig
import time
from types import FrameType
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypedDict

_log = logging.getLogger("dynafold")

_FRAMES_KEPT = 16
_WALK_LIMIT = 80
_SEEN_ATTR = "_dynafold_seen"
_RESUME_RE = re.compile(r"^torch_dynamo_resume_in_(.+)_at_\d+$")
_GB_ID_RE = re.compile(r"\b(gb\d{4})\b", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"(?<=[.`])\s+(?=[A-Z])")
_PREFIX_RE = re.compile(r"^Encountered graph break when attempting to trace", re.IGNORECASE)
# What survey mode sets on the frame converter of a compile it carried on (fullgraph_survey.MARK),
# and how far above Dynamo's `_compile` frame that converter's `__call__` frames are looked for.
_SURVEY_MARK = "_dynafold_survey"
_SURVEY_WALK = 6
# Files of dynafold's own Python. The op engine's are what Dynamo traces in place of FlashInfer's
# functions (torch._dynamo.substitute_in_graph): a break there, e.g. inside a woken op's fake,
# is FlashInfer's. No other file of dynafold's is ever a break's owner.
_DYNAFOLD_FILES = "<dynafold>"
_OP_ENGINE_FILES = "<dynafold>/hooks/ops/"


class _State(TypedDict):
    # Where records go (None: nowhere, after uninstall).
    sink: Optional[Callable[[Dict[str, Any]], Any]]
    enabled: bool
    # Logger name -> its tap.
    taps: Dict[str, "_Tap"]
    # (path root, whether it is the standard library's), longest first; None until needed.
    roots: Optional[List[Tuple[str, bool]]]
    # Graph-break type -> its id (gbNNNN), from torch's registry; None until needed.
    gb_ids: Optional[Dict[str, str]]
    # The keys of the warnings said once.
    said: Set[str]
    torch_version: Optional[str]
    # How many loggers there were when the graph_breaks loggers were last looked for.
    logger_count: int
    gb_loggers: List[str]


_state: _State = {
    "sink": None,
    "enabled": False,
    "taps": {},
    "roots": None,
    "gb_ids": None,
    "said": set(),
    "torch_version": None,
    "logger_count": -1,
    "gb_loggers": [],
}


def install(sink):
    """Start observing; returns True when at least one hook is live. Never raises."""
    try:
        if _state["enabled"]:
            _state["sink"] = sink
            return True
        import torch

        _state["sink"] = sink
        _state["torch_version"] = str(getattr(torch, "__version__", "?"))
        _state["enabled"] = True
        return _ensure_taps()
    except Exception as e:  # noqa: BLE001 - the observer must never break the host process
        _disable("install failed: %r" % (e,))
        return False


def uninstall():
    """Detach every tap and restore the loggers (used by tests)."""
    try:
        for tap in list(_state["taps"].values()):
            tap.detach()
        _state["taps"].clear()
        _state["enabled"] = False
        _state["sink"] = None
    except Exception as e:  # noqa: BLE001
        _log.warning("dynafold: observer uninstall failed: %r", e)


def _disable(why):
    _state["enabled"] = False
    try:
        for tap in list(_state["taps"].values()):
            tap.detach()
        _state["taps"].clear()
    except Exception:  # noqa: BLE001 - already failing; the one line below is what matters
        pass
    try:
        _log.warning("dynafold: graph-break observer disabled: %s", why)
    except Exception:  # noqa: BLE001
        pass


def _say_once(key, msg, *args):
    if key in _state["said"]:
        return
    _state["said"].add(key)
    _log.warning("dynafold: " + msg, *args)


# --- taps -------------------------------------------------------------------------------


class _Tap(logging.Filter):
    """A filter on `logger` that hands its records at `level` to the observer without
    changing what any handler sees.

    A logger filter runs before every handler, the logger's own and its ancestors', however
    late they were added. When the logger is already enabled at `level` (e.g.
    TORCH_LOGS=graph_breaks) only the filter is added and it lets everything through.
    Otherwise the logger's level is lowered and the filter drops, after observing them, the
    records below the level the logger had before, so handlers see exactly what they saw.
    """

    def __init__(self, logger, level, on_record, artifact=None):
        super().__init__()
        self.logger = logger
        self.wanted = level
        self.on_record = on_record
        self.artifact = artifact
        # The logger's own level before it was lowered; None while it was not lowered.
        self.saved = None

    def attach(self):
        lg = self.logger
        if self not in lg.filters:
            lg.addFilter(self)
        if lg.level == self.wanted and self.saved is not None:
            return
        if lg.isEnabledFor(self.wanted):
            self.saved = None
            return
        self.saved = lg.level
        lg.setLevel(self.wanted)

    def detach(self):
        lg = self.logger
        if self in lg.filters:
            lg.removeFilter(self)
        if self.saved is not None and lg.level == self.wanted:
            lg.setLevel(self.saved)
        self.saved = None

    def threshold(self):
        """The effective level the logger would have without this tap."""
        if self.saved is None or (self.artifact and _artifact_enabled(self.artifact)):
            return logging.NOTSET
        if self.saved != logging.NOTSET:
            return self.saved
        parent = self.logger.parent
        return parent.getEffectiveLevel() if parent is not None else logging.WARNING

    def filter(self, record):
        if _state["enabled"]:
            try:
                self.on_record(record)
            except Exception as e:  # noqa: BLE001
                _disable("%s while handling a %s record" % (repr(e), self.logger.name))
        try:
            return record.levelno >= self.threshold()
        except Exception:  # noqa: BLE001 - when unsure, behave as torch did by default
            return record.levelno >= logging.WARNING


def _artifact_enabled(name):
    # torch._logging.set_logs(graph_breaks=True) after install sets the level we set; ask
    # torch whether the artifact is on rather than guessing from the level.
    try:
        from torch._logging._internal import log_state

        return bool(log_state.is_artifact_enabled(name))
    except Exception:  # noqa: BLE001
        return False


def _ensure_taps():
    """Taps every graph_breaks logger and torch._utils_internal, and re-lowers any level torch
    reset (torch._logging.set_logs does). Runs at install and at each compile start."""
    if not _state["enabled"]:
        return False
    taps = _state["taps"]
    registry = logging.Logger.manager.loggerDict
    if len(registry) != _state["logger_count"]:
        # Artifact loggers are created when their module is imported: look again only when
        # a logger was added.
        _state["logger_count"] = len(registry)
        _state["gb_loggers"] = [n for n in list(registry) if isinstance(n, str)
                                and n.startswith("torch.") and n.endswith(".__graph_breaks")]
    names = _state["gb_loggers"]
    for name in names:
        _tap(name, logging.DEBUG, _on_graph_break_record, "graph_breaks")
    if not names:
        _say_once("no-gb-logger", "torch %s has no graph_breaks artifact logger; graph breaks "
                  "under fullgraph=False are not observed", _state["torch_version"])
    # Also tapped without the metrics hook: signpost_event logs there at each compile start,
    # which is when taps are re-checked (Dynamo's start callbacks are cleared by reset()).
    _tap("torch._utils_internal", logging.INFO, _on_internal_record)
    if not _metrics_hook_available():
        _say_once("no-metrics", "torch %s does not log compilation metrics "
                  "(log_compilation_event / config.log_compilation_metrics); fullgraph=True "
                  "failures are seen only where they are also graph breaks",
                  _state["torch_version"])
    for tap in list(taps.values()):
        tap.attach()
    return bool(taps)


def _tap(name, level, on_record, artifact=None):
    taps = _state["taps"]
    if name in taps:
        return
    tap = _Tap(logging.getLogger(name), level, on_record, artifact)
    tap.attach()
    taps[name] = tap


def _metrics_hook_available():
    try:
        import torch._dynamo.config as cfg
        import torch._utils_internal as ui

        return hasattr(ui, "log_compilation_event") and bool(
            getattr(cfg, "log_compilation_metrics", False))
    except Exception:  # noqa: BLE001
        return False


# --- records ------------------------------------------------------------------------------


def _on_graph_break_record(record):
    exc = sys.exc_info()[1]
    if exc is not None and getattr(exc, _SEEN_ATTR, False):
        return
    compile_frame = _find_compile_frame()
    fullgraph = _fullgraph_of(compile_frame)
    if exc is not None and _is_dynamo_exc(exc):
        _mark(exc)
        rec = _from_exception(exc, compile_frame, "graph_breaks")
    else:
        rec = _from_message(record.getMessage(), compile_frame)
    if rec is None:
        return
    rec["fullgraph"] = False if fullgraph is None else fullgraph
    rec["survey"] = _surveyed(compile_frame)
    _emit(rec)


def on_compile_start(callback):
    """Calls `callback()` at the start of every frame compile (the signpost torch logs there).
    Unlike Dynamo's own start callbacks, it survives `torch._dynamo.reset()`."""
    if callback not in _compile_start:
        _compile_start.append(callback)


_compile_start: List[Callable[[], Any]] = []


def _on_internal_record(record):
    args = record.args
    metrics = args[0] if isinstance(args, tuple) and args else None
    if metrics is None or type(metrics).__name__ != "CompilationMetrics":
        _ensure_taps()
        for callback in list(_compile_start):
            try:
                callback()
            except Exception as e:  # noqa: BLE001
                _say_once(f"start-{id(callback)}", "a compile-start hook failed: %s", e)
        return
    fail_type = getattr(metrics, "fail_type", None)
    if not fail_type:
        return
    exc = sys.exc_info()[1]
    if exc is not None and getattr(exc, _SEEN_ATTR, False):
        return
    compile_frame = _find_compile_frame()
    fullgraph = _fullgraph_of(compile_frame)
    if exc is not None and not _worth_reporting(exc, fullgraph):
        return
    if exc is not None:
        _mark(exc)
        rec = _from_exception(exc, compile_frame, "compilation_metrics")
    else:
        rec = _base_record(fail_type, _first_line(getattr(metrics, "fail_reason", "") or ""))
        filename = getattr(metrics, "fail_user_frame_filename", None)
        if filename:
            rec["user_frame"] = _frame(filename, getattr(metrics, "fail_user_frame_lineno", 0),
                                       getattr(metrics, "co_name", None) or "?")
        rec["exception"] = fail_type
        rec["source"] = "compilation_metrics"
        rec["owner"] = _owner([rec["user_frame"]] if rec["user_frame"] else [])
    rec["fullgraph"] = fullgraph
    rec["survey"] = _surveyed(compile_frame)
    _emit(rec)


def _worth_reporting(exc, fullgraph):
    try:
        from torch._dynamo import exc as dexc

        if isinstance(exc, (dexc.Unsupported, dexc.UserError)):
            return True
        # Other compile failures (backend, fake tensor...) fail a fullgraph compile too.
        return fullgraph is True
    except Exception:  # noqa: BLE001
        return fullgraph is True


def _is_dynamo_exc(exc):
    return hasattr(exc, "real_stack") or hasattr(exc, "gb_type")


def _mark(exc):
    try:
        setattr(exc, _SEEN_ATTR, True)
    except Exception:  # noqa: BLE001 - exceptions with __slots__: counted twice at worst
        pass


def _emit(rec):
    sink = _state["sink"]
    if sink is None:
        return
    try:
        sink(rec)
    except Exception as e:  # noqa: BLE001
        _disable("the sink raised %r" % (e,))


def _base_record(break_type, reason):
    return {
        "time": time.time(),
        "pid": os.getpid(),
        "rank": _rank(),
        "torch": _state["torch_version"],
        "break_type": break_type,
        "gb_type": None,
        "reason": reason,
        "user_frame": None,
        "library_frame": None,
        "via_frame": None,
        "stack": [],
        "fullgraph": None,
        "hint": None,
        "exception": None,
        "source": None,
        "owner": None,
        "survey": False,
    }


def _from_exception(exc, compile_frame, source):
    gb_type = getattr(exc, "gb_type", None) or None
    if isinstance(gb_type, type):
        gb_type = gb_type.__name__
    text = str(getattr(exc, "msg", None) or exc)
    gb_id = _gb_id(gb_type, text)
    if gb_type is None and gb_id is not None:
        # Older torch (2.9) has no gb_type attribute; the message starts with it.
        gb_type = _first_line(text) or None
    rec = _base_record(gb_id or gb_type or type(exc).__name__, _reason(text, gb_type))
    rec["gb_type"] = gb_type
    rec["exception"] = type(exc).__name__
    rec["source"] = source
    frames = _frames_of(exc)
    if not frames:
        code = _compiled_code(compile_frame)
        if code is not None:
            frames = [_frame(code.co_filename, code.co_firstlineno, code.co_name)]
    _attribute(rec, frames)
    rec["hint"] = _hint(rec, text)
    return rec


def _from_message(msg, compile_frame):
    """No live exception: Dynamo logs repeats of a (gb_type, location) pair outside its except
    block ("user stack suppressed due to duplicate graph break"), e.g. when it compiles an
    inner frame on its own after a break in its caller. The log text has the location and
    the reason; the compiled code comes from the `_compile` frame."""
    loc = re.search(r"in user code at (.+?):(\d+)\s*$", msg.splitlines()[0] if msg else "")
    body = msg.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in msg else msg
    body = body.split("User code traceback:", 1)[0]
    gb_type = None
    for ln in body.splitlines():
        ln = ln.strip()
        if ln and not _PREFIX_RE.match(ln):
            gb_type = ln
            break
    gb_id = _gb_id(gb_type, body)
    rec = _base_record(gb_id or gb_type or "graph_break", _reason(body, gb_type))
    rec["gb_type"] = gb_type
    rec["source"] = "graph_breaks(text)"
    frames = []
    code = _compiled_code(compile_frame)
    where = (loc.group(1), int(loc.group(2))) if loc else None
    if code is not None:
        if where is not None and where[0] == code.co_filename and _code_has_line(code, where[1]):
            frames.append(_frame(where[0], where[1], code.co_name))
            where = None
        else:
            frames.append(_frame(code.co_filename, code.co_firstlineno, code.co_name))
    if where is not None:
        frames.append(_frame(where[0], where[1], "?"))
    _attribute(rec, frames)
    rec["hint"] = _hint(rec, body)
    return rec


def _code_has_line(code, line):
    try:
        return any(ln == line for _s, _e, ln in code.co_lines())
    except Exception:  # noqa: BLE001 - co_lines is 3.10+; the first line is a fair guess
        return line == code.co_firstlineno


def _frames_of(exc):
    stack = getattr(exc, "real_stack", None) or []
    out = []
    for fs in stack:
        filename = getattr(fs, "filename", None)
        if not filename or _is_dynamo_internal(filename):
            continue
        out.append(_frame(filename, getattr(fs, "lineno", 0) or 0, getattr(fs, "name", "?")))
    return out


def _attribute(rec, frames):
    """User frame: the outermost traced frame (the compiled function's own code). Library
    frame: the innermost one, when the break is not in the compiled function itself. Via: the
    innermost frame outside the standard library and the user's file, when that is another."""
    rec["stack"] = [_frame_text(f) for f in frames[-_FRAMES_KEPT:]]
    rec["owner"] = _owner(frames)
    if not frames:
        return
    user = frames[0]
    rec["user_frame"] = {"file": user["file"], "line": user["line"], "function": user["function"]}
    if len(frames) < 2:
        return
    inner = frames[-1]
    rec["library_frame"] = inner
    for f in reversed(frames[1:]):
        if not f["stdlib"] and f["file"] != user["file"]:
            if f is not inner:
                rec["via_frame"] = f
            break


def _frame(filename, line, function):
    m = _RESUME_RE.match(function or "")
    if m:
        function = m.group(1)
    package, stdlib = _package_of(filename)
    return {"file": filename, "line": int(line or 0), "function": function or "?",
            "package": package, "stdlib": stdlib}


def _frame_text(f):
    return "%s:%d in %s" % (f["file"], f["line"], f["function"])


def _is_dynamo_internal(filename):
    # Dynamo's polyfills appear in real_stack between user frames; they are not user code.
    n = filename.replace("\\", "/")
    return "/torch/_dynamo/" in n


def _roots():
    roots = _state["roots"]
    if roots is not None:
        return roots
    std = set()
    for key in ("stdlib", "platstdlib"):
        try:
            p = sysconfig.get_paths().get(key)
        except Exception:  # noqa: BLE001
            p = None
        if p:
            std.add(os.path.realpath(p))
    found: Dict[str, bool] = {}
    for p in list(sys.path) + list(std):
        if not isinstance(p, str) or not p:
            continue
        try:
            rp = os.path.realpath(p)
        except Exception:  # noqa: BLE001
            continue
        found[rp] = found.get(rp, False) or rp in std
    for p in list(found):
        if p.endswith("lib-dynload"):
            found[p] = True
    roots = sorted(found.items(), key=lambda kv: len(kv[0]), reverse=True)
    _state["roots"] = roots
    return roots


def _package_of(filename):
    if filename.startswith("<frozen "):
        return filename[len("<frozen "):].rstrip(">").split(".", 1)[0], True
    try:
        path = os.path.realpath(filename)
    except Exception:  # noqa: BLE001
        path = filename
    for root, stdlib in _roots():
        prefix = root.rstrip(os.sep) + os.sep
        if path.startswith(prefix):
            first = path[len(prefix):].split(os.sep, 1)[0]
            if first.endswith(".py"):
                first = first[:-3]
            if first in ("site-packages", "dist-packages"):
                continue
            return first, stdlib and "-packages" not in path[len(prefix):]
    return os.path.splitext(os.path.basename(filename))[0], False


def _owner(frames):
    """Who owns the frame that broke: the innermost frame that is neither the standard
    library's (a `subprocess.Popen` is broken by whoever called it) nor dynafold's own (the op
    engine's stands for FlashInfer); the innermost frame when all are."""
    for f in reversed(frames):
        filename = str(f.get("file", ""))
        if filename.startswith(_OP_ENGINE_FILES):
            return "flashinfer"
        if f.get("stdlib") or filename.startswith(_DYNAFOLD_FILES):
            continue
        return _owner_of(filename)
    return _owner_of(frames[-1]["file"]) if frames else None


def _owner_of(filename):
    """The top-level package a file belongs to (`flashinfer`, `sglang`, `torch`, `transformers`,
    or a package of the user's own), the module name of a top-level module installed in
    site-packages, or else the file itself: a script or module of the user's."""
    if filename.startswith("<"):
        return filename
    try:
        path = os.path.realpath(filename)
    except Exception:  # noqa: BLE001
        path = filename
    for root, _stdlib in _roots():
        prefix = root.rstrip(os.sep) + os.sep
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):]
        first = rest.split(os.sep, 1)[0]
        if first in ("site-packages", "dist-packages"):
            continue
        if os.sep in rest:
            return first
        if "-packages" in root:
            return first[:-3] if first.endswith(".py") else first
        return filename
    return filename


def _surveyed(compile_frame):
    """Whether the compile being traced asked for fullgraph=True and survey mode carried it on:
    its frame converter, whose `__call__` is a few frames above Dynamo's `_compile`, is marked."""
    f = compile_frame.f_back if compile_frame is not None else None
    n = 0
    while f is not None and n < _SURVEY_WALK:
        owner = f.f_locals.get("self")
        if owner is not None and getattr(owner, _SURVEY_MARK, False) is True:
            return True
        f = f.f_back
        n += 1
    return False


def _gb_id(gb_type, text):
    m = _GB_ID_RE.search(text or "")
    if m:
        return m.group(1).lower()
    if not gb_type:
        return None
    ids = _state["gb_ids"]
    if ids is None:
        ids = _load_gb_ids()
        _state["gb_ids"] = ids
    return ids.get(gb_type)


def _load_gb_ids():
    try:
        import json

        import torch._dynamo as d

        path = os.path.join(os.path.dirname(d.__file__), "graph_break_registry.json")
        if not os.path.exists(path):
            _say_once("no-gb-registry", "torch %s has no graph_break_registry.json; break "
                      "types are Dynamo's gb_type text", _state["torch_version"])
            return {}
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        out = {}
        for gid, entries in data.items():
            for entry in entries if isinstance(entries, list) else []:
                t = entry.get("Gb_type") if isinstance(entry, dict) else None
                if t and t not in out:
                    out[t] = gid.lower()
        return out
    except Exception as e:  # noqa: BLE001
        _say_once("gb-registry-err", "cannot read graph_break_registry.json: %r", e)
        return {}


def _first_line(text):
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _reason(text, gb_type):
    """The line an operator needs: Dynamo's `Explanation:` when there is one (the gb_type is
    already the break type), else the first line that is not torch's generic preamble."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("Explanation:"):
            return _first_sentence(ln[len("Explanation:"):].strip())
    for ln in lines:
        if _PREFIX_RE.match(ln) or (gb_type and ln == gb_type):
            continue
        return ln
    return lines[0] if lines else (gb_type or "")


def _first_sentence(line):
    # Dynamo's explanations continue with generic advice after the first sentence.
    parts = _SENTENCE_END_RE.split(line, maxsplit=1)
    return parts[0] if parts and parts[0] else line


def _rank():
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001
        pass
    for key in ("RANK", "LOCAL_RANK"):
        v = os.environ.get(key)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def _find_compile_frame():
    f: Optional[FrameType] = sys._getframe(1)
    n = 0
    while f is not None and n < _WALK_LIMIT:
        code = f.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            return f
        f = f.f_back
        n += 1
    return None


def _fullgraph_of(frame):
    if frame is None:
        return None
    v = frame.f_locals.get("one_graph")
    return v if isinstance(v, bool) else None


def _compiled_code(frame):
    if frame is None:
        return None
    code = frame.f_locals.get("code")
    return code if hasattr(code, "co_filename") else None


# --- hints ------------------------------------------------------------------------------

_FFI_HINT = ("call into a C/FFI extension Dynamo cannot trace: wrap the kernel in "
             "torch.library.custom_op with a fake implementation")

_HINTS = (
    ("subprocess", ("subprocess.py", "subprocess", "popen"),
     "subprocess at trace time: compute the value before compiling (dynafold folds "
     "FlashInfer's CUDA checks) or torch._dynamo.assume_constant_result"),
    ("cache", ("functools.cache", "lru_cache", "functools.py"),
     "functools.cache/lru_cache is ignored by Dynamo and the wrapped function is traced: "
     "call it before compiling and close over the value"),
    ("lock", ("allocate_lock", "filelock", "getpid", "threading.py", "rlock", "lock("),
     "lock or pid (threading.Lock, FileLock, os.getpid) at trace time: keep locking out of "
     "the compiled region"),
    ("fs", ("posix.stat", "os.stat", "stat`", "exists", "pathlib", "genericpath.py",
            "mkdir", "io.open", "builtin `open`", "listdir", "scandir", "makedirs"),
     "file-system access (os.stat, Path.exists, open, mkdir) at trace time: do it before "
     "compiling, outside the compiled function"),
    ("time", ("datetime", "method `now`", "perf_counter", "time.time", "time.monotonic",
              "builtin `time."),
     "wall-clock read (datetime.now, time.perf_counter) at trace time: move it out of the "
     "compiled region"),
    ("print", ("`print`", "logging/__init__.py", "logger", "logging"),
     "print/logging in the compiled region: drop it or list it in "
     "torch._dynamo.config.reorderable_logging_functions"),
    ("ffi", ("tvm_ffi", "ffi.function", "pybind", "cannot determine source file"),
     _FFI_HINT),
)


def _hint(rec, text):
    # Only what identifies this break: the reason, Dynamo's debug context and the frames.
    # The rest of Dynamo's message is boilerplate shared by many breaks ("(e.g.
    # _warnings.warn) ... C/C++ Python extension (perhaps created with pybind)").
    context = ""
    m = re.search(r"Developer debug context:(.*)", str(text))
    if m:
        context = m.group(1)
    lib = rec["library_frame"] or {}
    via = rec["via_frame"] or {}
    hay = " ".join([
        rec["reason"] or "",
        rec.get("gb_type") or "",
        context,
        " ".join(rec["stack"]),
        lib.get("package") or "",
        via.get("package") or "",
    ]).lower()
    for _key, needles, hint in _HINTS:
        for needle in needles:
            if needle in hay:
                return hint
    if "builtin `" in hay or "skipped" in hay:
        return _FFI_HINT
    return None
