"""Wakes FlashInfer's dormant op declarations, for Dynamo only.

FlashInfer's kernel wrappers carry `@register_custom_op("flashinfer::NAME", mutates_args=...)`
and `@register_fake_op("flashinfer::NAME")`, and `flashinfer/utils.py` makes both the identity
(FlashInfer PR #709), because `torch.library.custom_op` costs microseconds on every eager call.
So Dynamo traces into each kernel's Python wrapper, meets the JIT loader (`os.stat`, file
locks, ninja) and the opaque FFI call, and the compile dies.

This module keeps the eager path exactly as FlashInfer ships it and gives Dynamo the op:

1. Right after `flashinfer.utils` executes, its two decorators are replaced by ones that still
   return the decorated function itself (so FlashInfer's eager calls are unchanged, at no
   cost) and record the declaration and its fake.
2. At the start of every compile (a Dynamo start callback, so a process that never compiles
   pays nothing), each declaration recorded since the last one is woken: a torch operator
   `dynafold_flashinfer::NAME` is defined with FlashInfer's schema (its `schema=` or its
   annotations), whose real implementation is FlashInfer's function and whose fake is
   FlashInfer's `register_fake_op` function, dynafold's override where FlashInfer's is wrong
   (the op's record, hooks/ops/registry/), or, for an op that returns nothing, one that
   returns nothing (several of FlashInfer's no-result fakes rotted: parameters missing); then
   `torch._dynamo.substitute_in_graph(fn)` makes Dynamo call the operator wherever it meets
   `fn`. `fn` itself is untouched. The op records and the engine reading them (COMPILE_TIME
   below) are imported at the first compile start too, not at FlashInfer's import.
3. A declaration whose full signature no torch schema can say (FlashInfer's sampling ops: a
   `Generator`, `Union[int, Tensor]` seeds, a result that is a tensor or a tuple) is woken
   narrowed to how serving code calls it (hooks/ops/engine/narrowing.py); Dynamo then calls the
   operator for a call that fits and traces FlashInfer's function as shipped for any other. A declaration that cannot become a correct operator at all
   (schema not expressible, tensors returned without a fake, a fake that does not take the
   kernel's parameters, a name that is not an identifier) stays as FlashInfer ships it, with
   one debug line; `status()` says per module what was woken and why not.
4. Each fake is checked against its kernel the first time the operator runs for real in the
   process, before that result is returned (hooks/ops/engine/fake_check.py); the verdicts are in
   `status()`.
5. Every `functools.cache`d JIT loader (`get_*module*`, `_get_*module*`) of a woken module is made trace-
   transparent: under compile Dynamo calls it outside the trace (as a constant), so the
   module it returns is the one the eager path built, or is built then, outside the graph.
6. FlashInfer's attention wrappers keep their plan as a tvm_ffi Array, which Dynamo cannot pass
   to an operator; once a trace reads a wrapper class's plan, traced reads get an int64 tensor of
   it (hooks/ops/mechanisms/attention_plans.py).
7. With `FLASHINFER_LOGLEVEL` >= 1, FlashInfer's `flashinfer_api` wraps each public function in
   a logger (timestamps, file dumps, locks). Right after `flashinfer.api_logging` executes, its
   decorator is replaced by one that makes the same wrapper and remembers what it wraps; at
   compile start Dynamo is told to call the wrapped function instead, so eager calls log as
   before and the logging stays out of the traced path. 0.7.4's `flashinfer_experimental_api`
   (a warning on an experimental op's first call) is kept out the same way.
8. FlashInfer 0.7.4's per-stream scratch lookup (`_get_stream_cache_buf`) becomes a run-time
   operator under compile (hooks/ops/mechanisms/stream_scratch.py says why).
9. A wrapper method whose body holds what no trace can (the AutoTuner's lock, a prepared
   program's launch) is a row of EXTRA_DECLARATIONS named `Class.method`: under compile it
   calls dynafold's declaration taking the object's key (hooks/ops/mechanisms/method_boundaries.py).
10. The decode, prefill, MLA, BatchAttention and POD wrappers' run methods are each one
   operator under compile, so nothing `plan()` left on the wrapper is read (and guarded) by a
   trace (hooks/ops/mechanisms/wrapper_runs.py); item 6 still serves the calls it leaves as
   shipped (BatchPOD's `return_lse=True`).

Nothing user-supplied reaches generated source: there is no generated source.
"""

import enum
import functools
import importlib
import inspect
import logging
import operator
import sys
import typing

import torch

# What FlashInfer's import needs (the hooks below, run as its modules load): the mechanisms
# that change its wrapper classes there and then.
from _dynafold_ops.mechanisms import (
    attention_plans,
    method_boundaries,
    partial_methods,
    wrapper_runs,
)

# What only waking needs: the op records (registry/) and the engine reading them, imported at
# the first compile start (`_load_compile_time`), or when one of these names is read from this
# module, so that a process importing FlashInfer does not execute them (issue 40 item 2: 18-21
# ms of every start-up). Name in this module -> module.
COMPILE_TIME = {
    "registry": "_dynafold_ops.registry",
    "op_corrections": "_dynafold_ops.engine.corrections",
    "fake_check": "_dynafold_ops.engine.fake_check",
    "op_fakes": "_dynafold_ops.engine.fakes",
    "op_narrowing": "_dynafold_ops.engine.narrowing",
    "stream_scratch": "_dynafold_ops.mechanisms.stream_scratch",
}
if typing.TYPE_CHECKING:
    from _dynafold_ops import registry
    from _dynafold_ops.engine import corrections as op_corrections
    from _dynafold_ops.engine import fake_check
    from _dynafold_ops.engine import fakes as op_fakes
    from _dynafold_ops.engine import narrowing as op_narrowing
    from _dynafold_ops.mechanisms import stream_scratch

_log = logging.getLogger("dynafold")

NAMESPACE = "dynafold_flashinfer"
_lib = None
# Declarations (_Declared) in declaration order, not yet woken.
_pending = []
# Every declaration recorded, woken or not (for status and tests), in declaration order.
_declarations = []
# "flashinfer::NAME" -> fakes declared before their op (paired with the next declaration).
_unpaired: typing.Dict[str, typing.List[typing.Any]] = {}
# module name -> {"woken": n, "skipped": {reason: n}}
_status: typing.Dict[str, typing.Dict[str, typing.Any]] = {}
# "flashinfer::NAME" -> [(operator, FlashInfer's function)], once defined.
_ops: typing.Dict[str, typing.List[typing.Tuple[typing.Any, typing.Any]]] = {}
_armed = False
# (logging wrapper, the function it wraps) made by flashinfer_api, not yet substituted.
_api_pending = []

NOT_BUILT = (
    "dynafold: torch.compile reached FlashInfer's {loader}({args}), whose JIT module is not built "
    "in this process and could not be built outside the trace ({error}). Call the FlashInfer "
    "op once eagerly on the same device before compiling (SGLang's warm-up forward does this)."
)
_transparent = set()


# Declarations left as FlashInfer ships them by the library's settings, by declared name ->
# why (e.g. DYNAFOLD_FP4_OPAQUE=0 for fp4_quantize's kernel); filled before any is woken.
LEFT_ALONE: typing.Dict[str, str] = {}

# EXTRA_DECLARATIONS (registry.EXTRA_DECLARATIONS, read through this module too): boundaries
# FlashInfer forgot: public paths that reach the JIT machinery, the autotuner (threading locks,
# classes defined per call) or an FFI call outside any declared op. (module, function, declared
# name, mutated parameters, schema or None for the annotations'), woken like FlashInfer's own
# declarations once its module is loaded: the op records' `declare` (registry/,
# engine/record.py Declare). Those naming a `Class.method` are installed at import from
# mechanisms/method_boundaries.py's BOUNDARIES, which names them without the records.


def _load_compile_time():
    """Imports the modules only waking needs (COMPILE_TIME) into this module's names, once."""
    names = globals()
    if "registry" in names:
        return
    # All at once: a second thread compiling meanwhile finds all of them or none.
    names.update({name: importlib.import_module(module) for name, module in COMPILE_TIME.items()})


# The error that stopped `_load_compile_time` in `wake_pending`, once logged.
_load_failed: typing.List[Exception] = []


def __getattr__(name):
    """A compile-time name read from outside before the first compile (tests, the sweep)."""
    if name in COMPILE_TIME:
        _load_compile_time()
        return globals()[name]
    if name == "EXTRA_DECLARATIONS":
        _load_compile_time()
        return registry.EXTRA_DECLARATIONS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Declared:
    """One `register_custom_op` declaration and the fake declared with it: a second build of a
    loader declares the same name again with its own function and its own fake, so a fake
    belongs to a declaration, not to a name."""
    __slots__ = ("name", "fn", "mutates_args", "schema", "module", "fake")

    def __init__(self, name, fn, mutates_args, schema):
        self.name = name
        self.fn = fn
        self.mutates_args = mutates_args
        self.schema = schema
        self.module = getattr(fn, "__module__", None) or "?"
        self.fake = None


def _declare(declared):
    waiting = _unpaired.get(declared.name)
    if waiting:
        declared.fake = waiting.pop(0)
    _pending.append(declared)
    _declarations.append(declared)


def _declare_fake(name, fake):
    """Pairs `fake` with the latest declaration of `name` that has none (FlashInfer declares the
    fake right after its op, inside the same loader call), else keeps it for the next one."""
    for declared in reversed(_declarations):
        if declared.name == name:
            if declared.fake is None:
                declared.fake = fake
                return
            break
    _unpaired.setdefault(name, []).append(fake)


def declared_fake(name, index=0):
    """The fake FlashInfer declared with the `index`-th declaration of `name` (for tests)."""
    matches = [d.fake for d in _declarations if d.name == name] + _unpaired.get(name, [])
    return matches[index] if index < len(matches) else None


def _expected_shape(original_op, original_fake):
    """FlashInfer's dormant pair, as shipped since PR #709: the signatures FlashInfer has used
    and identity behaviour. Anything else (FlashInfer woke them itself, or changed them) is
    left alone."""
    try:
        op_params = list(inspect.signature(original_op).parameters)
        fake_params = list(inspect.signature(original_fake).parameters)
    except (TypeError, ValueError):
        return False
    if op_params != ["name", "fn", "mutates_args", "device_types", "schema"]:
        return False
    if fake_params != ["name", "fn"]:
        return False

    def probe(x):
        return x

    try:
        return (original_op("dynafold::probe", mutates_args=())(probe) is probe
                and original_fake("dynafold::probe")(probe) is probe)
    except Exception:  # noqa: BLE001 - a torch whose custom_op refuses the probe: not ours to wake
        return False


def install_utils(utils):
    """Called once `flashinfer.utils` has executed. Returns a line for the log, or raises
    Unsupported with why the decorators were left alone."""
    original_op = getattr(utils, "register_custom_op", None)
    original_fake = getattr(utils, "register_fake_op", None)
    if original_op is None or original_fake is None:
        raise Unsupported("flashinfer.utils has no register_custom_op/register_fake_op")
    if not _expected_shape(original_op, original_fake):
        raise Unsupported("register_custom_op/register_fake_op are not the dormant pair")

    def register_custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
        def declare(f):
            _declare(_Declared(name, f, mutates_args, schema))
            return f
        return declare

    def register_fake_op(name, fn=None):
        def declare(f):
            _declare_fake(name, f)
            return f
        return declare

    register_custom_op.__doc__ = original_op.__doc__
    register_fake_op.__doc__ = original_fake.__doc__
    utils.register_custom_op = register_custom_op
    utils.register_fake_op = register_fake_op
    if "torch._dynamo" in sys.modules:
        arm()
    return "FlashInfer's op declarations recorded; woken at the start of each compile"


def install_api_logging(api_logging):
    """Called once `flashinfer.api_logging` has executed. Returns a line for the log (None when
    the logging is off and FlashInfer's decorator already returns the function itself), or
    raises Unsupported."""
    level = getattr(api_logging, "_API_LOG_LEVEL", None)
    original = getattr(api_logging, "flashinfer_api", None)
    if original is None or not isinstance(level, int):
        raise Unsupported("flashinfer.api_logging has no flashinfer_api/_API_LOG_LEVEL")
    experimental = _install_experimental(api_logging)
    if level == 0:
        return experimental
    try:
        first = next(iter(inspect.signature(original).parameters))
    except (TypeError, ValueError, StopIteration):
        first = None
    if first != "func":
        raise Unsupported("flashinfer_api does not take the decorated function first")

    def flashinfer_api(func=None, **options):
        if func is not None:
            return _remember_api(original(func, **options), func)
        made = original(**options)

        def decorate(f):
            return _remember_api(made(f), f)
        return decorate

    flashinfer_api.__doc__ = original.__doc__
    api_logging.flashinfer_api = flashinfer_api
    return (f"FLASHINFER_LOGLEVEL={level}: FlashInfer's API logging kept for eager calls, "
            "left out of traced code")


def install_planners(module):
    """Called once a module defining FlashInfer's attention wrappers has executed (see
    hooks/ops/mechanisms/attention_plans.py and hooks/ops/mechanisms/partial_methods.py), or FlashInfer's wrapper classes
    whose methods are dynafold's boundaries (hooks/ops/mechanisms/method_boundaries.py: the rows of
    EXTRA_DECLARATIONS naming a `Class.method` of the module). Returns a line for the log, or
    None."""
    said = [method_boundaries.install(module,
                                      method_boundaries.BOUNDARIES.get(module.__name__, ()))]
    plain = partial_methods.install(module)
    if plain:
        said.append(f"{', '.join(plain)} made plain methods (a partialmethod stops Dynamo)")
    # After the partialmethods are plain: their `*_return_lse` methods become operators too.
    said.append(wrapper_runs.install(module))
    # The plans of the wrappers whose runs are operators wait until a trace needs them.
    said.insert(0, attention_plans.install(module, wrapper_runs.operated(module)))
    said = [line for line in said if line]
    return "; ".join(said) if said else None


def _install_experimental(api_logging):
    """FlashInfer 0.7.4's `flashinfer_experimental_api` wraps a public function in one that
    warns (`warnings.warn`, ExperimentalWarning) on its first call, then calls the logged
    function; Dynamo cannot trace `warnings.warn`, so an experimental op whose first call is
    compiled stops the trace. The decorator is replaced by one that makes the same wrapper and
    remembers the function it calls (its `__wrapped__`); at compile start Dynamo is told to call
    that instead. Eager calls warn as shipped; a process whose first call is compiled does not
    see the warning. Returns a line for the log, or None where the release has no such
    decorator."""
    original = getattr(api_logging, "flashinfer_experimental_api", None)
    if original is None:
        return None
    try:
        params = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        params = []
    if params[:1] != ["func"]:
        return None

    def flashinfer_experimental_api(func=None, **options):
        made = original(**options)

        def decorate(f):
            wrapper = made(f)
            return _remember_api(wrapper, getattr(wrapper, "__wrapped__", wrapper))
        return decorate(func) if func is not None else decorate

    flashinfer_experimental_api.__doc__ = original.__doc__
    api_logging.flashinfer_experimental_api = flashinfer_experimental_api
    return ("FlashInfer's experimental-API warning kept for eager calls, left out of traced "
            "code")


def _remember_api(wrapper, func):
    if wrapper is not func and callable(wrapper):
        _api_pending.append((wrapper, func))
    return wrapper


def _without_api_wrappers(fn):
    """`fn` without FlashInfer's `flashinfer_api` wrappers (logging, and from 0.6.16 the trace
    auto-dump, which wraps even with logging off and binds `inspect.signature` per call, where
    Dynamo stops): what a narrowed public function's other calls are traced as, the logging
    kept out of traced code as for every other public function."""
    while (getattr(fn, "__wrapped__", None) is not None
           and getattr(getattr(fn, "__code__", None), "co_filename", "").endswith(
               "flashinfer/api_logging.py")):
        fn = fn.__wrapped__
    return fn


def _call_through(func):
    def call(*args, **kwargs):
        return func(*args, **kwargs)
    return call


class Unsupported(Exception):
    """FlashInfer does not look as expected: leave it alone."""


def arm():
    """Has `wake_pending` called at the start of every compile, once torch._dynamo is
    imported: through Dynamo's own start callbacks, kept registered across
    `torch._dynamo.reset()` (which clears them), and through the graph-break observer's
    compile-start signal. Neither depends on logging alone: `logging.disable` silences the
    observer's signal, not Dynamo's callbacks."""
    global _armed
    if _armed:
        return
    observer = sys.modules.get("_dynafold_observer")
    if observer is not None:
        observer.on_compile_start(wake_pending)
    from torch._dynamo.callback import callback_handler
    _keep_registered(callback_handler, wake_pending)
    _armed = True


def _keep_registered(handler, callback):
    """Registers `callback` as a compile-start callback of `handler` and again after each of
    its `clear()` calls (`torch._dynamo.reset()` makes one)."""
    handler.register_start_callback(callback)
    clear = handler.clear
    if getattr(clear, "_dynafold_keeps", None) is not None:
        clear._dynafold_keeps.append(callback)
        return

    keeps = [callback]

    def clear_then_register(*args, **kwargs):
        result = clear(*args, **kwargs)
        for kept in keeps:
            handler.register_start_callback(kept)
        return result

    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    clear_then_register._dynafold_keeps = keeps  # type: ignore[attr-defined]
    functools.update_wrapper(clear_then_register, clear)
    handler.clear = clear_then_register


def wake_pending(*_args):
    """At each compile start: wakes what was declared since the last one."""
    attention_plans.become_data()
    wrapper_runs.define()
    try:
        _load_compile_time()
    except Exception as e:  # noqa: BLE001 - never break the compile: the declarations stay dormant
        # Where the engine's own modules failing at FlashInfer's import used to be logged.
        if not _load_failed:
            _load_failed.append(e)
            _log.warning("dynafold: FlashInfer's op declarations stay as FlashInfer ships them "
                         "(the op engine could not be loaded: %s: %s)", type(e).__name__, e)
        return
    if not _pending and not _api_pending and len(sys.modules) == _scanned[0]:
        return
    _declare_extras()
    # A wrapper dynafold declares an operator of (an experimental public function that is a
    # boundary) is substituted by that operator, not called through.
    declared = {id(d.fn) for d in _pending}
    while _api_pending:
        wrapper, func = _api_pending.pop(0)
        if id(wrapper) in declared:
            continue
        try:
            torch._dynamo.substitute_in_graph(wrapper, skip_signature_check=True)(
                _call_through(func))
        except Exception as e:  # noqa: BLE001 - the logging wrapper stays traced, as shipped
            _log.debug("dynafold: FlashInfer's logging wrapper of %s stays traced: %s",
                       getattr(func, "__qualname__", func), e)
    while _pending:
        declared = _pending.pop(0)
        try:
            why_not = _wake(declared)
        except Exception as e:  # noqa: BLE001 - a declaration we cannot wake must not break the compile
            first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
            why_not = f"{type(e).__name__}: {first}"
        entry = _status.setdefault(declared.module, {"woken": 0, "skipped": {}})
        if why_not is None:
            entry["woken"] += 1
        else:
            entry["skipped"][why_not] = entry["skipped"].get(why_not, 0) + 1
            _log.debug("dynafold: %s left as FlashInfer ships it: %s", declared.name, why_not)
    _substitute_rebuilt()
    _make_loaders_transparent()
    _filter_cache_warning()
    # FlashInfer's logger arrives with a module import, which is what brings a compile here.
    _reorder_once_warnings()
    stream_scratch.make_opaque()
    _scanned[0] = len(sys.modules)


def _reorder_once_warnings():
    """FlashInfer's public MoE functions warn once, after their op, that a single-tensor
    result is deprecated (0.7.4 fused_moe/core.py:5458 `logger.warning_once`); Dynamo stops
    at any Logger method it is not told about. FlashInfer's logger's once-methods
    (0.7.4 jit/core.py:80-105: an lru_cache over the message) are listed as reorderable: the
    compiled code makes the same call right after the graph, and the message still shows
    once, as in eager. Done once FlashInfer's logger exists."""
    if _reordered[0]:
        return
    core = sys.modules.get("flashinfer.jit.core")
    cls = getattr(core, "FlashInferJITLogger", None) if core is not None else None
    if cls is None:
        return
    reorderable = getattr(torch._dynamo.config, "reorderable_logging_functions", None)
    if reorderable is None:
        _reordered[0] = True
        return
    for name in ("warning_once", "info_once", "debug_once"):
        method = getattr(cls, name, None)
        if method is not None:
            reorderable.add(method)
    _reordered[0] = True


_reordered = [False]


def _substitute_rebuilt():
    """Public functions that take or return a Python object no schema can say (a NamedTuple of
    tensors), once their module is loaded: Dynamo traces dynafold's Python instead
    (hooks/ops/mechanisms/attention_plans.py REBUILT), which unpacks the object into dynafold's declarations
    and makes it again around their results. The function itself is untouched for eager calls;
    what is substituted is the function FlashInfer's decorators wrap (the experimental and
    logging wrappers call it, hooks above)."""
    for (module_name, attr), (holder, through) in attention_plans.REBUILT.items():
        module = sys.modules.get(module_name)
        fn = getattr(module, attr, None) if module is not None else None
        if fn is None or (module_name, attr) in _rebuilt:
            continue
        _rebuilt.add((module_name, attr))
        try:
            import importlib
            replacement = through(importlib.import_module(holder))
            torch._dynamo.substitute_in_graph(inspect.unwrap(fn), skip_signature_check=True)(
                replacement)
        except Exception as e:  # noqa: BLE001 - a release that changed: traced as shipped
            _log.debug("dynafold: %s.%s stays traced: %s", module_name, attr, e)


_rebuilt: typing.Set[typing.Tuple[str, str]] = set()


def _declare_extras():
    """dynafold's own declarations whose module is now loaded, once each."""
    for module_name, attr, name, mutates, schema in registry.EXTRA_DECLARATIONS:
        module = sys.modules.get(module_name)
        if "." in attr:
            # A wrapper's method (hooks/ops/mechanisms/method_boundaries.py): its declaration, once its
            # class is installed.
            fn = method_boundaries.declaration(module_name, attr) if module is not None else None
        else:
            fn = getattr(module, attr, None) if module is not None else None
        if fn is None or name in _extras_declared:
            continue
        _extras_declared.add(name)
        if not inspect.isfunction(fn):
            _log.debug("dynafold: %s.%s is not a plain function; no boundary", module_name, attr)
            continue
        params = inspect.signature(fn).parameters
        if schema is not None and list(params) != _schema_names(schema):
            _log.debug("dynafold: %s.%s's parameters changed; no boundary", module_name, attr)
            continue
        # A release older than the parameter (0.6.3's chunk_gated_delta_rule, before
        # `state_checkpoints`) has nothing there to write: declared without it, not left
        # dormant for a schema torch refuses.
        _declare(_Declared(name, fn, tuple(m for m in mutates if m in params), schema))


_extras_declared: typing.Set[str] = set()


def _schema_names(schema):
    """The parameter names of a `(Type name[=default], ..., *, ...) -> ...` schema."""
    params = schema[1:schema.rindex(") ->")]
    return [p.split("=")[0].split()[-1] for p in params.split(",")
            if p.strip() and p.strip() != "*"]


# len(sys.modules) at the last scan for loaders: a new FlashInfer module means a new scan.
_scanned = [-1]


def _op_name(declared):
    ns, sep, op = declared.name.partition("::")
    if not sep or not ns.isidentifier() or not op.isidentifier():
        return None
    return f"{ns}_{op}" if ns != "flashinfer" else op


def _library():
    global _lib
    if _lib is None:
        _lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    return _lib


def _hints(fn):
    """`fn`'s resolved annotations; empty when they cannot be resolved."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: none
        return {}


def _returns_nothing(hints):
    return "return" in hints and hints["return"] is type(None)


class _Operator:
    """How one declaration becomes operators: its name, its variants (narrowing or None,
    schema, fake; one operator each, several for a Union parameter split by member), the
    parameters it may write, whether it is seeded and which parameter its result is (an
    aliased result, woken as a mutation)."""
    __slots__ = ("name", "variants", "mutable", "seeded", "returns_argument", "renames")

    def __init__(self, **fields):
        for field in self.__slots__:
            setattr(self, field, fields.get(field))


def _mutated(declared, correction, params):
    """The parameters the operator declares mutable: FlashInfer's `mutates_args`, plus what
    the op's correction adds (hooks/ops/registry/); a reason instead when FlashInfer's cannot be read."""
    mutates = declared.mutates_args
    if isinstance(mutates, str):
        mutates = (mutates,) if mutates != "unknown" else mutates
    if mutates == "unknown":
        return "mutates_args='unknown'"
    # FlashInfer writes `mutates_args=("")` (a string, not a tuple) for "mutates nothing".
    mutates = [m for m in mutates if m]
    extra = list(correction.get("also_mutates", ()))
    if correction.get("returns_argument"):
        extra.append(correction["returns_argument"])
    if correction.get("result_is_given"):
        extra.append(correction["result_is_given"]["argument"])
    # Arguments a fresh-result call returns after its fresh tensors, updated in place.
    extra += list(correction.get("fresh_only", {}).get("then", ()))
    missing = [m for m in extra if m not in params]
    if missing:
        return f"correction names parameters the kernel lacks ({', '.join(missing)})"
    return tuple(dict.fromkeys(mutates + extra))


def _is_seeded(correction, params, hints):
    """Whether the kernel draws from the random generator: it takes one (FlashInfer's sampling
    ops, whose seed and offset default to the generator's), or its correction says so."""
    return bool(correction.get("seeded")) or any(
        name == "generator" or op_narrowing.is_generator(hints.get(name)) for name in params)


def _plan(declared):
    """How a declaration becomes correct operators (an _Operator), else the reason it cannot,
    as one short line."""
    fn = declared.fn
    if declared.name in LEFT_ALONE:
        return LEFT_ALONE[declared.name]
    op_name = _op_name(declared)
    if op_name is None:
        return "name is not namespace::identifier"
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "no signature"
    correction = op_corrections.of(fn)
    if correction.get("dormant"):
        return correction["dormant"]
    if correction and declared.schema is not None:
        return "a correction is needed and the declaration gives its own schema"
    mutates = _mutated(declared, correction, params)
    if isinstance(mutates, str):
        return mutates
    returns_argument = correction.get("returns_argument")
    # Annotations FlashInfer left out or wrote wrong, as the op's correction gives them.
    hints = {**_hints(fn), **correction.get("annotations", {})}
    if returns_argument:
        hints = {**hints, "return": type(None)}
    narrowings = [None]
    given = correction.get("result_is_given")
    fresh = correction.get("fresh_only")
    # The optional buffers a fresh-result call may leave out, where every buffer the operator
    # declares mutable is one: the call giving none of them gets an operator that declares
    # none (_mutable_in; op_narrowing._bare says why).
    optional = tuple(m for m in mutates if op_narrowing.is_optional(hints.get(m)))
    if len(optional) < len(mutates):
        optional = ()
    if given and declared.schema is None:
        narrowings = op_narrowing.given_result(fn, hints, given, optional)
        if isinstance(narrowings, str):
            return narrowings
    elif fresh and declared.schema is None:
        narrowings = op_narrowing.fresh_result(fn, hints, fresh, optional)
        if isinstance(narrowings, str):
            return narrowings
    # Checked before asking torch, which logs a warning per Union parameter when asked.
    elif declared.schema is None and (op_narrowing.needed(hints) or correction.get("variadic")
                                      or correction.get("keywords") or correction.get("when")):
        # A JIT run function's `*args` (its correction's `variadic`) reach the operator
        # packed, its tensors declared mutable (op_narrowing.VARIADIC); a `**kwargs`'s known
        # entries (`keywords`) as parameters of their own; only calls whose `when` values hold
        # (B12xMoEWrapper.run: a wrapper built without use_cuda_graph, a `Holds`).
        narrowings = op_narrowing.variants(
            fn, hints, variadic=bool(correction.get("variadic")),
            fits={name: op_narrowing._fits(value)
                  for name, value in correction.get("when", {}).items()},
            keywords=correction.get("keywords"))
        if isinstance(narrowings, str):
            return narrowings
        if correction.get("variadic"):
            mutates = mutates + ("args_tensors",)
    enums = [n for n, h in hints.items() if isinstance(h, type) and issubclass(h, enum.Enum)]
    if enums and narrowings == [None]:
        # infer_schema writes `enum.Enum`, which no schema parser takes (a narrowing gives an
        # IntEnum to its operator as an int).
        return f"schema not expressible (an Enum parameter: {', '.join(enums)})"
    nothing = _returns_nothing(hints)
    fake = None
    if not nothing and not given:
        fake = op_fakes.override(declared.name, fn) or declared.fake
        if fake is None:
            return "returns a value and has no fake"
        if narrowings == [None] and not _takes_the_same(fake, fn):
            return "fake's parameters differ from the kernel's"
    renames = tuple((p, p + "_") for p in params if p in TAKEN_BY_TORCH)
    if renames and (narrowings != [None] or set(p for p, _ in renames) & set(mutates)):
        return f"a parameter named {renames[0][0]} (torch's functionalization takes that name)"
    variants = []
    for narrowing in narrowings:
        prototype = (narrowing.prototype if narrowing is not None
                     else _returning_nothing(fn, hints) if returns_argument else fn)
        if renames:
            prototype = _renamed(prototype, dict(renames))
        try:
            schema = declared.schema or torch.library.infer_schema(
                prototype, mutates_args=_mutable_in(narrowing, mutates))
        except Exception as e:  # noqa: BLE001 - the schema torch refuses is the reason given
            return f"schema not expressible ({_first_sentence(str(e))})"
        variant_fake = _variant_fake(declared, fn, narrowing, nothing, fake, given)
        if isinstance(variant_fake, str):
            return variant_fake
        variants.append((narrowing, schema, variant_fake))
    return _Operator(name=op_name, variants=variants, mutable=mutates,
                     seeded=_is_seeded(correction, params, hints),
                     returns_argument=returns_argument, renames=renames)


def _mutable_in(narrowing, mutates):
    """The declared-mutable parameters one operator's schema marks: not those it takes only as
    None (the call that gives no buffer, `result_is_given`'s fresh operator), which it never
    writes, and which inductor cannot lower as the only mutable argument (torch 2.9 to 2.15:
    "getitem is not an OpOverload" for an operator whose only mutable argument is None)."""
    if narrowing is None:
        return mutates
    none_only = {name for _, name, _, fits in narrowing.checks
                 if fits is op_narrowing.fits_none}
    return tuple(m for m in mutates if m not in none_only)


# Parameter names torch's auto_functionalization passes beside an operator's own arguments, by
# name: an operator parameter of that name fails at inductor's lowering ("got multiple values for
# argument 'mode'", FlashInfer 0.7.4's ulysses_a2a). The operator's parameter gets a suffix.
TAKEN_BY_TORCH = frozenset({"mode"})


def _renamed(prototype, renames):
    """A prototype of `prototype` whose parameters in `renames` are renamed."""
    sig = inspect.signature(prototype)
    hints = _hints(prototype)
    params = [p.replace(name=renames.get(p.name, p.name),
                        annotation=hints.get(p.name, p.annotation))
              for p in sig.parameters.values()]
    result = hints.get("return", sig.return_annotation)
    return op_narrowing.prototype_of(prototype, params, None if result is type(None) else result)


def _variant_fake(declared, fn, narrowing, nothing, fake, given):
    """The fake of one operator of a declaration; a reason when there is none that fits.

    An operator with no result needs a fake that returns nothing, whatever FlashInfer's says:
    several of FlashInfer's rotted (a parameter missing), and one kernel declared `-> None`
    returns its output buffer anyway (its callers read the buffer). So does the operator of a
    call whose result is the buffer it gave; one that also returns fresh tensors ("list+")
    takes dynafold's fake of those (`rest_fake`), and the call without a buffer the
    declaration's own."""
    if nothing:
        return _no_result
    if given:
        form = narrowing.gives_back[0] if narrowing.gives_back else None
        if form in ("itself", "list", "pair"):
            return _no_result
        name = given.get("rest_fake") if form == "list+" else declared.name
        fake = op_fakes.override(name, fn) if name else None
        if fake is None and form in (None, "fresh"):
            # (the call without a buffer: the declaration's own fake, `[fresh]` unlisted
            # by the narrowing for the form "list")
            fake = declared.fake
        if fake is None:
            return "returns tensors and has no fake"
    if narrowing is None:
        return fake
    return narrowing.adapt_fake(fake)


def _returning_nothing(fn, hints):
    """A prototype of `fn` whose result is None, for the schema of an aliased-result op."""
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in inspect.signature(fn).parameters.values()]
    return op_narrowing.prototype_of(fn, params, None)


def _takes_the_same(fake, fn):
    """Whether `fake` accepts every call `fn` accepts, by its parameters' names and order."""
    try:
        ours = [p.name for p in inspect.signature(fn).parameters.values()]
        theirs = inspect.signature(fake).parameters
    except (TypeError, ValueError):
        return False
    return list(theirs)[:len(ours)] == ours and all(
        p.default is not p.empty for p in list(theirs.values())[len(ours):])


def _wake(declared):
    """Defines the operators and substitutes them for `fn` under Dynamo; a reason when not."""
    fn = declared.fn
    existing = _ops.get(declared.name, ())
    if any(known is fn for _, known in existing):
        return None
    operator = _plan(declared)
    if isinstance(operator, str):
        return operator
    op_name, key = operator.name, declared.name
    if existing:
        # Declared again by another build of its loader (fp4_quantize_sm100 per SM backend):
        # operators of its own, whose kernel, fake and checks are that build's.
        op_name = f"{op_name}_{len(existing)}"
        key = f"{declared.name} (build {len(existing) + 1})"
    tags = (torch.Tag.nondeterministic_seeded,) if operator.seeded else ()
    narrowed = []
    op: typing.Any = None
    for narrowing, schema, fake in operator.variants:
        suffix = getattr(narrowing, "suffix", "")
        op = _define(f"{op_name}{suffix}", schema, tags, fn, narrowing, fake,
                     f"{key}{' (' + suffix[1:] + ')' if suffix else ''}", operator)
        narrowed.append((narrowing, op))

    if narrowed[0][0] is None:
        renames = operator.renames or ()

        def through_op(*args, **kwargs):
            for old, new in renames:
                if old in kwargs:
                    kwargs[new] = kwargs.pop(old)
            return op(*args, **kwargs)
    else:
        through_op = op_narrowing.through_ops(
            narrowed, op_narrowing.as_shipped(_without_api_wrappers(fn)))
    if operator.returns_argument:
        through_op = _returning_argument(through_op, fn, operator.returns_argument)
    positional = op_corrections.of(fn).get("positional")
    if positional:
        through_op = _repositioned(through_op, positional)

    through_op = functools.update_wrapper(through_op, fn)
    del through_op.__wrapped__
    torch._dynamo.substitute_in_graph(fn, skip_signature_check=True)(through_op)
    _ops.setdefault(declared.name, []).append((op, fn))
    return None


def _repositioned(through_op, spec):
    """`through_op` for a caller whose `spec["count"]` positional arguments are its own layout
    (its correction's `positional`): those from `spec["from"]` on are given by name."""
    count, start, names = spec["count"], spec["from"], tuple(spec["names"])

    def repositioned(*args, **kwargs):
        if len(args) == count and not kwargs:
            kwargs = {name: value for name, value in zip(names, args[start:]) if name}
            args = args[:start]
        return through_op(*args, **kwargs)
    return repositioned


def _define(op_name, schema, tags, fn, narrowing, fake, key, operator):
    """One operator: FlashInfer's function (through the narrowing) as its kernel, checked at
    its first real run against its fake and what the declaration promises."""
    lib = _library()
    lib.define(op_name + schema, tags=tags)
    kernel = fn if narrowing is None else narrowing.kernel(fn)
    if fake is _no_result:
        kernel = _result_dropped(kernel)
    names = ([name for _, name, _ in narrowing.kept] + list(narrowing.extra_names)
             if narrowing is not None else list(inspect.signature(fn).parameters))
    promise = fake_check.Declared(names, operator.mutable, operator.seeded,
                                  _optional_tensors(op_name, schema))
    lib.impl(op_name, fake_check.checked(key, kernel, None if fake is _no_result else fake,
                                         promise), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{op_name}", fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), op_name).default
    if operator.seeded and not operator.mutable:
        _keep_every_draw(op)
    return op


def _first_sentence(text, limit=160):
    """The first sentence of an error's first line, for a reason `dynafold doctor` prints: whole
    where it fits, else cut at a word with "..." (a cut at a fixed width ended mid-word and
    mid-sentence: "... were not found in the")."""
    line = text.splitlines()[0].strip() if text.strip() else ""
    end = line.find(". ")
    sentence = line[:end + 1] if end >= 0 else line
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0] + " ..."


def _optional_tensors(op_name, schema):
    """The operator's optional tensor parameters, each combination of them given a call form
    of its own first-run check (hooks/ops/engine/fake_check.py)."""
    try:
        parsed = torch._C.parse_schema(f"{NAMESPACE}::{op_name}{schema}")
    except Exception as e:  # noqa: BLE001 - a schema torch parses differently: one form, as before
        _log.debug("dynafold: %s: one call form checked: %s", op_name, e)
        return ()
    return fake_check.optional_tensors(parsed)


def _keep_every_draw(op):
    """A draw whose result is unused still advances the generator in eager; a compiled graph
    drops an unused pure op, and torch's `nondeterministic_seeded` tag does not stop that (torch
    2.9-2.15 drop it all the same). An ordered effect does (torch 2.14+ with inductor, 2.9+
    with aot_eager), and keeps the draws in program order. (A mutating op is kept anyway.)"""
    try:
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op
        _register_effectful_op(op, _EffectType.ORDERED)
    except Exception as e:  # noqa: BLE001 - an older or changed API: the tag alone, as documented
        _log.debug("dynafold: %s: draws not ordered as effects: %s", op, e)


def _returning_argument(call, fn, name):
    """What Dynamo calls for a declaration whose result is its argument `name`: the operator
    (which mutates that argument and returns nothing), then the argument itself."""
    params = list(inspect.signature(fn).parameters.values())
    index = [p.name for p in params].index(name)
    default = params[index].default

    def returning(*args, **kwargs):
        call(*args, **kwargs)
        return args[index] if index < len(args) else kwargs.get(name, default)
    return returning


def census():
    """For `dynafold doctor`: per module, the declarations recorded so far that would be
    woken, and why the others would not; nothing is defined."""
    _load_compile_time()
    _declare_extras()
    out: typing.Dict[str, typing.Dict[str, typing.Any]] = {}
    woken = [_Declared(n, fn, (), None) for n, ops in _ops.items() for _, fn in ops]
    for declared in list(_pending) + woken:
        entry = out.setdefault(declared.module, {"woken": 0, "skipped": {}})
        plan = None if declared.name in _ops else _plan(declared)
        if plan is None or not isinstance(plan, str):
            entry["woken"] += 1
        else:
            entry["skipped"][plan] = entry["skipped"].get(plan, 0) + 1
    return out


def _no_result(*args, **kwargs):
    return None


def _result_dropped(kernel):
    """The kernel of an operator declared to return nothing: what it returns anyway (an output
    buffer its callers already hold) is not passed on."""
    def no_result(*args, **kwargs):
        kernel(*args, **kwargs)

    no_result = functools.update_wrapper(no_result, kernel)
    del no_result.__wrapped__
    return no_result


# FlashInfer's cached device queries (flashinfer/utils.py), called on the traced path of most
# public ops: pure functions of the device that Dynamo traces through as before; only its
# warning about their cache wrapper is dropped (under `-W error::UserWarning` it fails the
# compile).
DEVICE_QUERIES = frozenset({
    "device_support_pdl", "get_compute_capability", "get_device_sm_count", "get_device_name",
    "get_gpu_memory_bandwidth", "get_shared_bytes_per_block_optin", "version_at_least",
    "is_confidential_compute",
})


# Parameter names that say "a device" or its compute capability: a cached function of these
# alone answers a question about the device (0.7.2's `_blackwell_softmax_capability(
# device_index)`, utils.py's `get_device_properties(device)`, 0.7.4's `is_sm90a_device`,
# topk_varlen's `_cute_dsl_supports_arch(major, minor)`), whatever FlashInfer names it.
DEVICE_PARAMETERS = frozenset({"device", "device_index", "device_id", "dev", "major", "minor",
                               "capability"})


def _is_device_query(attr, value):
    """A cached question about the device (or the installed libraries) whose answer is a
    value, the same on every call with these arguments: Dynamo tracing what it wraps gives
    that answer, so its warning says nothing."""
    if attr in DEVICE_QUERIES or (attr.startswith("is_sm") and attr.endswith("_supported")):
        return True
    try:
        signature = inspect.signature(getattr(value, "__wrapped__", value))
    except (TypeError, ValueError):
        return False
    params = list(signature.parameters.values())
    about_the_device = [p for p in params if p.name in DEVICE_PARAMETERS]
    # Besides the device, only yes/no switches (`is_cute_dsl_arch_supported(major, minor,
    # native_only: bool = False)`).
    switches = [p for p in params if p.annotation in (bool, "bool")]
    # A cached tensor (`_dummy_nvp(device_index) -> torch.Tensor`) is state, not an answer:
    # its warning stays.
    returns = signature.return_annotation
    if not params:
        # A yes/no probe of the installed libraries (topk_varlen's
        # `_radix_filter_kernel_dsl_ok() -> bool`): one answer per process.
        return returns in (bool, "bool")
    return (bool(about_the_device) and len(about_the_device) + len(switches) == len(params)
            and "Tensor" not in str(returns))


def _is_flashinfer_device_query(wrapper):
    module = getattr(wrapper, "__module__", None) or ""
    return (hasattr(wrapper, "cache_info") and module.split(".")[0] == "flashinfer"
            and _is_device_query(getattr(wrapper, "__name__", ""), wrapper))


def _make_loaders_transparent():
    """Every cached `get_*module*` of a FlashInfer module with woken ops: called outside the
    trace under compile, so Dynamo never enters the JIT machinery. FlashInfer's cached device
    queries stay traced, without Dynamo's warning."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            # `_get_*module*` too: 0.6.16-0.7.x build the fused-MoE module (and declare its
            # ops) in `_get_trtllm_moe_sm100_module_impl`, behind an uncached public getter.
            loader = attr.lstrip("_").startswith("get_") and "module" in attr
            if not _is_cached(value):
                continue
            if not (loader or _is_device_query(attr, value)):
                continue
            if id(value) in _transparent:
                continue
            _transparent.add(id(value))
            if not loader:
                _allow_cache_wrapper(value)
                continue

            outside_the_trace = _outside_the_trace(value)
            # Dynamo looks through the cache wrapper and traces what it wraps.
            target = getattr(value, "__wrapped__", value)
            try:
                torch._dynamo.substitute_in_graph(target, skip_signature_check=True)(
                    outside_the_trace)
            except Exception as e:  # noqa: BLE001 - the loader stays traced, as shipped
                _log.debug("dynafold: %s.%s stays traced: %s", name, attr, e)
                continue
            _allow_cache_wrapper(value)


def _is_cached(value):
    """Whether `value` is a `functools.cache`d callable. A module attribute's lookup may raise
    what `hasattr` lets out: 0.7.4's flashinfer.experimental.qwen_3_5_block vendors a cuDNN
    stand-in whose every attribute raises NotImplementedError, which failed every compile
    started after its import."""
    try:
        return callable(value) and hasattr(value, "cache_info")
    except Exception:  # noqa: BLE001 - any lookup error: not a loader
        return False


# ids of the cache wrappers whose Dynamo warning is dynafold's to silence (torch < 2.14).
_quiet_wrappers = set()


def _allow_cache_wrapper(wrapper):
    """Dynamo warns ("Silent incorrectness is only a potential risk") whenever it meets a
    `functools.cache` wrapper, and the loaders made transparent are met on every trace; what it
    warns of cannot happen here (the substitute calls the cached loader itself). torch 2.14+
    has an allow-list for exactly this; older torch gets a filter on its `warn_once` that
    drops that one warning for these wrappers only, found by the object Dynamo is calling."""
    allow = getattr(torch._dynamo.utils, "allow_lru_cache_wrapper_trace_without_warning", None)
    if allow is not None:
        try:
            allow(wrapper)
            return
        except Exception:  # noqa: BLE001 - an allow-list that changed shape: fall back to the filter
            pass
    _quiet_wrappers.add(id(wrapper))
    _filter_cache_warning()


def _filter_cache_warning():
    """A filter on Dynamo's `warn_once` that drops the cache warning for the wrappers above
    (torch < 2.14) and, on every torch, for FlashInfer's device queries in modules first
    imported inside a trace (0.7.2's `cute_dsl/availability.py`, imported by topk_varlen's
    dispatch as it runs), which no scan before the trace can see. The wrapper is the object
    Dynamo is calling (its variable's `wrapper_obj`)."""
    utils = torch._dynamo.utils
    if getattr(utils.warn_once, "_dynafold_filter", False):
        return
    warn_once = utils.warn_once

    def filtered_warn_once(msg, stacklevel=1):
        if isinstance(msg, str) and msg.startswith(LRU_WARNING):
            try:
                caller = sys._getframe(1).f_locals.get("self")
            except Exception:  # noqa: BLE001 - no caller frame: the warning is kept
                caller = None
            wrapper = getattr(caller, "wrapper_obj", None)
            if id(wrapper) in _quiet_wrappers or _is_flashinfer_device_query(wrapper):
                return None
        return warn_once(msg, stacklevel + 1)

    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    filtered_warn_once._dynafold_filter = True  # type: ignore[attr-defined]
    functools.update_wrapper(filtered_warn_once, warn_once)
    utils.warn_once = filtered_warn_once


LRU_WARNING = "Dynamo detected a call to a `functools.lru_cache`-wrapped function"


# (id of the loader, *args) -> what the loader returned, for the stand-ins below.
_BUILT = {}


def _outside_the_trace(loader):
    """A stand-in for `loader` that Dynamo inlines. Its `build` is a constant function: Dynamo
    calls it once at trace time, outside the graph (so the loader's JIT machinery never enters
    the trace); the module it built is then read from a global dict, which gives Dynamo a
    source it can guard on (a constant function's own result has none)."""
    from torch._dynamo import assume_constant_result

    key = id(loader)

    @assume_constant_result
    def build(*args, **kwargs):
        try:
            # A loader whose module's functions have dynafold declarations (the POD modules,
            # hooks/ops/mechanisms/attention_plans.py) gives the trace a stand-in calling them.
            _BUILT[(key,) + args + tuple(kwargs.items())] = attention_plans.through_operators(
                loader, loader(*args, **kwargs))
        except Exception as e:
            raise RuntimeError(NOT_BUILT.format(
                loader=getattr(loader, "__qualname__", loader),
                args=", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())]),
                error=f"{type(e).__name__}: {e}")) from e
        # Declarations made by this build (ops declared inside the loader) join this compile.
        wake_pending()
        return True

    # Keywords too: 0.7.4 calls `get_dsv3_fused_routing_module(backend=backend)`, and a
    # stand-in taking positions only made Dynamo refuse the call ("Unexpected keyword
    # arguments") where eager Python builds the module.
    def stand_in(*args, **kwargs):
        args = tuple(_specialized(a) for a in args)
        kwargs = {k: _specialized(v) for k, v in kwargs.items()}
        build(*args, **kwargs)
        return _BUILT[(key,) + args + tuple(kwargs.items())]

    return stand_in


def _specialized(value):
    """`value`, a plain int or bool where it is a symbolic one. Loaders are keyed by sizes (the
    head dimension picks the attention module); with `dynamic=True`, or once Dynamo's automatic
    dynamic has seen two head dimensions, the size is a SymInt, which the constant function
    `build` cannot take (AsPythonConstantNotImplementedError on the H200, 2026-12-02). Under
    `dynamic=True` a wrapper's float attribute is a SymFloat too, so FlashInfer's
    `logits_soft_cap > 0` (the POD modules' loader arguments) is a SymBool, which `build` cannot
    take either: every POD compile with `dynamic=True` failed. operator.index, and a branch on
    the bool, make Dynamo guard on the value: one graph per module, as eager builds one module
    per value (`bool(value)` stays symbolic). Under Dynamo a SymInt passes isinstance(value,
    int) and a SymBool isinstance(value, bool); bools stay bools (FlashInfer's module names
    spell them)."""
    if isinstance(value, bool):
        return True if value else False  # the branch is what specializes it
    if isinstance(value, int):
        return operator.index(value)
    return value


def status():
    """Per module: how many declarations are woken and why the others are not; per operator
    and call form that has run for real, whether its declaration agreed with its kernel; the
    operators that have not run for real ("never checked")."""
    _load_compile_time()
    out = {m: {"woken": s["woken"], "skipped": dict(s["skipped"])} for m, s in _status.items()}
    if fake_check.verdicts:
        out["fake checks"] = dict(fake_check.verdicts)
    runs = wrapper_runs.status()
    if runs["wrappers"]:
        out["wrapper runs"] = runs
    never = fake_check.never_checked()
    if never:
        out["never checked"] = never
    return out
