"""What dynafold's op engine makes of one FlashInfer release, as one deterministic JSON file:
python census.py OUT.json (run with dynafold's preload and the release on PYTHONPATH; the
wrapper is scripts/engine-census).

Issue 31 restructures the engine without changing behaviour; this is the record to hold it
to. The process imports every FlashInfer submodule it can (failures are recorded, not fatal),
then starts a real compile, so the declarations are woken by the engine's compile-start
callback exactly as a user's first compile wakes them. It writes the engine's `census()`
(before and after the wake) and `status()`, every operator defined (its schema, the
arguments it writes, the FlashInfer function it stands for) and every declaration left as
FlashInfer ships it, with the reason.

The engine is found under its module name before issue 31 and after; dynafold's own module
names are written in their pre-31 spelling (RENAMES), so the two sides compare line by line.
"""
import importlib
import json
import logging
import os
import pathlib
import re
import signal
import sys
import time

# Where issue 31 moves dynafold's internal modules: new name -> the name used in the record.
# Every other `_dynafold_*` module keeps its name (it maps to itself); a name under
# `_dynafold_ops.` that is not here is reported in `unmapped_internal_names`, so a move this
# map does not know shows up as a difference instead of passing unnoticed.
RENAMES = {
    "_dynafold_ops.mechanisms.attention_plans": "_dynafold_attention_plans",
    "_dynafold_ops.mechanisms.method_boundaries": "_dynafold_method_boundaries",
    "_dynafold_ops.mechanisms.stream_scratch": "_dynafold_stream_scratch",
    "_dynafold_ops.mechanisms.partial_methods": "_dynafold_partial_methods",
    "_dynafold_ops.mechanisms.wrapper_runs": "_dynafold_wrapper_runs",
    "_dynafold_ops.engine.wake": "_dynafold_dormant_ops",
}
ENGINE_MODULES = ("_dynafold_dormant_ops", "_dynafold_ops.engine.wake")
# The engine's debug line for a declaration it leaves as shipped: (declared name, reason).
LEFT_LINE = "left as FlashInfer ships it"
IMPORT_TIMEOUT_S = 120
# Subtrees not imported, and why: what importing them does to the engine is a bug of its own,
# found by this census, which would hide everything after it in wake_pending.
EXCLUDED = {
    # 0.7.4's vendored cuDNN frontend stand-in (`_cudnn_frost._compiled_module`) raises
    # NotImplementedError from attribute lookups, and hasattr() in the engine's scan for JIT
    # loaders let it out: every compile start of a process that imported it failed (found at
    # 71f36bd, fixed by wake.py `_is_cached`). Still kept out, so that censuses taken before the
    # fix compare with later ones.
    "flashinfer.experimental.qwen_3_5_block":
        "attribute lookups raise NotImplementedError: breaks the engine's compile start",
}


def normalized(text):
    for new in sorted(RENAMES, key=len, reverse=True):
        text = re.sub(re.escape(new) + r"(?![\w])", RENAMES[new], text)
    return text


def _normalize(value, places):
    """`value` with dynafold's module names in their pre-31 spelling and the run's own paths
    (its temporary folders, the release's folder) as placeholders, keys included."""
    if isinstance(value, str):
        for path, placeholder in places:
            value = value.replace(path, placeholder)
        return re.sub(r" at 0x[0-9a-f]+", "", normalized(value))
    if isinstance(value, dict):
        return {_normalize(k, places): _normalize(v, places) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v, places) for v in value]
    return value


def _unmapped(value, found):
    if isinstance(value, str):
        found.update(re.findall(r"_dynafold_ops(?:\.\w+)+", value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _unmapped(k, found)
            _unmapped(v, found)
    elif isinstance(value, list):
        for v in value:
            _unmapped(v, found)
    return found


def first_line(e):
    lines = [ln.strip() for ln in f"{type(e).__name__}: {e}".splitlines() if ln.strip()]
    return (lines[0] if lines else type(e).__name__)[:300]


def submodules(package):
    """Every module of FlashInfer's source tree by name, sorted. `data/` holds the sources
    FlashInfer's JIT compiles (CUTLASS's Python among them), not FlashInfer's modules."""
    root = pathlib.Path(package.__file__).parent
    names = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[0] == "data" or parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if all(p.isidentifier() for p in parts):
            names.add(".".join(("flashinfer",) + parts))
    return sorted(names)


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"import ran past {IMPORT_TIMEOUT_S} s")


def _excluded(name):
    return next((prefix for prefix in EXCLUDED
                 if name == prefix or name.startswith(prefix + ".")), None)


class _Refuse:
    """Refuses the EXCLUDED subtrees to every importer, FlashInfer's own modules included
    (their failure is then recorded like any other)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        prefix = _excluded(name)
        if prefix:
            raise ImportError(f"{prefix} not imported by the census (EXCLUDED)")
        return None


def import_everything(flashinfer):
    failed = {}
    excluded = {}
    signal.signal(signal.SIGALRM, _alarm)
    sys.meta_path.insert(0, _Refuse)
    for name in submodules(flashinfer):
        if name in sys.modules:
            continue
        prefix = _excluded(name)
        if prefix:
            excluded[prefix] = EXCLUDED[prefix]
            continue
        signal.alarm(IMPORT_TIMEOUT_S)
        try:
            importlib.import_module(name)
        except BaseException as e:  # SystemExit, a timeout: recorded, the rest goes on
            if isinstance(e, KeyboardInterrupt):
                raise
            failed[name] = first_line(e)
        finally:
            signal.alarm(0)
    imported = sorted(n for n in sys.modules if n == "flashinfer" or n.startswith("flashinfer."))
    return imported, failed, excluded


def engine():
    """The module holding the engine's `census()` and `status()`: its pre-31 or post-31
    name, else (a split this census does not know yet) any of dynafold's modules with both."""
    def serves(module):
        return callable(getattr(module, "census", None)) and callable(
            getattr(module, "status", None))
    for name in ENGINE_MODULES:
        module = sys.modules.get(name)
        if module is not None and serves(module):
            return name, module
    for name in sorted(sys.modules):
        if name.startswith("_dynafold") and serves(sys.modules[name]):
            return name, sys.modules[name]
    raise SystemExit(f"no engine module ({' or '.join(ENGINE_MODULES)}): is the preload on and "
                     "FlashInfer's register_custom_op the dormant pair?")


def _in_dynafold(frame):
    return (frame.f_globals.get("__name__") or "").startswith("_dynafold")


def _declaration_in_stack(frame, op=None):
    """The declaration being woken (its name and function), from the innermost engine frame
    that holds one (`declared`); for an operator `op`, only a declaration it is named after
    (the engine's loop variable outlives its loop: an operator of dynafold's own defined after
    the loop is no declaration's). (None, None) when there is none."""
    while frame is not None:
        if _in_dynafold(frame):
            declared = frame.f_locals.get("declared")
            if hasattr(declared, "fn") and hasattr(declared, "name"):
                if op is None or _named_after(op, str(declared.name)):
                    return declared.name, declared.fn
                return None, None
        frame = frame.f_back
    return None, None


def _named_after(op, declared):
    """Whether operator `op` (ns::name) carries the name of declaration `declared`: the
    engine names an operator after its declaration, `flashinfer::` dropped, other namespaces
    prefixed, and suffixed per variant or rebuild."""
    ns, _, name = declared.partition("::")
    base = name if ns == "flashinfer" else f"{ns}_{name}"
    return op.partition("::")[2].startswith(base)


def _where(fn):
    if fn is None:
        return None
    return {"module": getattr(fn, "__module__", None),
            "qualname": getattr(fn, "__qualname__", None)}


class Recorder(logging.Handler):
    """The engine's "left as FlashInfer ships it" lines, each with the declaration's
    function, read from the engine's frame that logs it."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.left = []

    def emit(self, record):
        if LEFT_LINE not in record.msg or not isinstance(record.args, tuple) \
                or len(record.args) != 2:
            return
        name, reason = record.args
        declared, fn = _declaration_in_stack(sys._getframe(1))
        if declared != name:
            fn = None
        self.left.append({"declaration": str(name), "reason": str(reason),
                          "function": _where(fn)})


def watch_definitions(torch):
    """Every operator defined from now on, with the declaration whose waking defines it."""
    defined = []
    define = torch.library.Library.define

    def recording_define(self, schema, *args, **kwargs):
        result = define(self, schema, *args, **kwargs)
        name = schema.split("(")[0]
        op = name if "::" in name else f"{self.ns}::{name}"
        frame = sys._getframe(1)
        if not op.startswith("dynafold"):
            return result  # torch's own (prims, defined as inductor loads) or FlashInfer's
        name, fn = _declaration_in_stack(frame, op)
        defined.append({"op": op, "declaration": name, "function": _where(fn)})
        return result

    torch.library.Library.define = recording_define
    return defined


def schema_of(torch, qualified):
    """The operator's schema, the arguments it writes, and its tags (seeded ops carry one)."""
    name, _, overload = qualified.partition(".")
    ns, _, op = name.partition("::")
    overloaded = getattr(getattr(getattr(torch.ops, ns), op), overload or "default")
    schema = overloaded._schema
    writes = sorted(a.name for a in schema.arguments
                    if a.alias_info is not None and a.alias_info.is_write)
    tags = sorted(str(t) for t in overloaded.tags)
    return str(schema), writes, tags


def main():
    out_path = sys.argv[1]
    started = time.monotonic()
    import torch
    import torch._dynamo  # as a compiling program has it by the time FlashInfer is imported
    defined = watch_definitions(torch)
    recorder = Recorder()
    log = logging.getLogger("dynafold")
    log.addHandler(recorder)
    log.setLevel(logging.DEBUG)

    import flashinfer
    release = flashinfer.__version__.split("+")[0]
    imported, failed, excluded = import_everything(flashinfer)
    engine_name, ops = engine()
    census_before = ops.census()

    # A compile start: the engine's callback wakes what is pending, as at a user's first
    # compile. The eager backend keeps the compile itself cheap.
    compiled = torch.compile(lambda x: x + 1, backend="eager", fullgraph=True)
    try:
        compiled(torch.ones(2))
        compile_start = "ok"
    except Exception as e:  # the engine broke the compile: recorded, as any behaviour
        compile_start = first_line(e)

    status = ops.status()
    census_after = ops.census()
    # Every operator in dynafold's namespaces, whoever defined it: one defined unwatched
    # shows up as such.
    registered = sorted({n for n in torch._C._dispatch_get_all_op_names()
                         if n.startswith("dynafold")} | {d["op"] for d in defined})
    by_op = {d["op"]: d for d in defined}
    woken = []
    for op in registered:
        schema, writes, tags = schema_of(torch, op)
        seen = by_op.get(op, {})
        woken.append({"op": op, "schema": schema, "mutates": writes, "tags": tags,
                      "declaration": seen.get("declaration"), "function": seen.get("function"),
                      "defined_while_watched": op in by_op})

    record = {
        "release": release,
        "engine_module": engine_name,
        "imports": {"flashinfer_modules_loaded": len(imported), "failed": failed,
                    "excluded": excluded},
        "compile_start": compile_start,
        "census_before_wake": census_before,
        "census": census_after,
        "status": status,
        "woken_ops": woken,
        "left_as_shipped": sorted(recorder.left, key=lambda d: json.dumps(d, sort_keys=True)),
        "defined_twice": sorted({d["op"] for d in defined if
                                 sum(e["op"] == d["op"] for e in defined) > 1}),
    }
    places = [(p, f"<{k}>") for k, p in sorted(
        {"release_dir": os.path.dirname(os.path.dirname(flashinfer.__file__)),
         "work_dir": os.environ.get("DYNAFOLD_CENSUS_WORK", "")}.items()) if p]
    record = _normalize(record, places)
    record["status"] = _sorted_lists(record["status"])
    record["unmapped_internal_names"] = sorted(_unmapped(record, set()))
    pathlib.Path(out_path).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"{release}: {len(woken)} operators, {len(recorder.left)} declarations left as "
          f"shipped, {len(failed)} imports failed, {time.monotonic() - started:.0f} s",
          file=sys.stderr)


def _sorted_lists(value):
    """`status()`'s lists (operators never checked, wrappers) in a fixed order: they are in
    definition order, which follows import order, not behaviour."""
    if isinstance(value, dict):
        return {k: _sorted_lists(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_sorted_lists(v) for v in value), key=lambda v: json.dumps(v))
    return value


if __name__ == "__main__":
    main()
