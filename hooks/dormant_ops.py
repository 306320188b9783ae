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
   (hooks/op_fakes.py), or, for an op that returns nothing, one that returns nothing (several of
   FlashInfer's no-result fakes rotted: parameters missing); then
   `torch._dynamo.substitute_in_graph(fn)` makes Dynamo call the operator wherever it meets
   `fn`. `fn` itself is untouched.
3. A declaration whose full signature no torch schema can say (FlashInfer's sampling ops: a
   `Generator`, `Union[int, Tensor]` seeds, a result that is a tensor or a tuple) is woken
   narrowed to how serving code calls it (hooks/op_narrowing.py); Dynamo then calls the
   operator for a call that fits and traces FlashInfer's function as shipped for any other. A declaration that cannot become a correct operator at all
   (schema not expressible, tensors returned without a fake, a fake that does not take the
   kernel's parameters, a name that is not an identifier) stays as FlashInfer ships it, with
   one debug line; `status()` says per module what was woken and why not.
4. Each fake is checked against its kernel the first time the operator runs for real in the
   process, before that result is returned (hooks/fake_check.py); the verdicts are in
   `status()`.
5. Every `functools.cache`d JIT loader (`get_*module*`) of a woken module is made trace-
   transparent: under compile Dynamo calls it outside the trace (as a constant), so the
   module it returns is the one the eager path built, or is built then, outside the graph.
6. FlashInfer's attention wrappers keep their plan as a tvm_ffi Array, which Dynamo cannot pass
   to an operator; from a process's first compile on it is a list (hooks/attention_plans.py).
7. With `FLASHINFER_LOGLEVEL` >= 1, FlashInfer's `flashinfer_api` wraps each public function in
   a logger (timestamps, file dumps, locks). Right after `flashinfer.api_logging` executes, its
   decorator is replaced by one that makes the same wrapper and remembers what it wraps; at
   compile start Dynamo is told to call the wrapped function instead, so eager calls log as
   before and the logging stays out of the traced path.

Nothing user-supplied reaches generated source: there is no generated source.
"""

import functools
import inspect
import logging
import sys
import typing

import torch

# dynafold's other hooks, loaded before this one (src/python/src/dormant_ops.rs).
import _dynafold_attention_plans as attention_plans
import _dynafold_fake_check as fake_check
import _dynafold_op_fakes as op_fakes
import _dynafold_op_narrowing as op_narrowing

_log = logging.getLogger("dynafold")

NAMESPACE = "dynafold_flashinfer"
_lib = None
# (name, fn, mutates_args, schema, module) in declaration order, not yet woken.
_pending = []
# "flashinfer::NAME" -> the fake FlashInfer declared for it.
_fakes = {}
# module name -> {"woken": n, "skipped": {reason: n}}
_status = {}
# "flashinfer::NAME" -> [(operator, FlashInfer's function)], once defined.
_ops = {}
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
LEFT_ALONE = {}

# Boundaries FlashInfer forgot: public paths that reach the JIT machinery, the autotuner
# (threading locks, classes defined per call) or an FFI call outside any declared op.
# (module, function, declared name, mutated parameters, schema or None for the annotations'),
# woken like FlashInfer's own declarations once its module is loaded.
EXTRA_DECLARATIONS = [
    # bmm_fp8 -> fp8_gemm_sm100: AutoTuner.choose_one and runner classes built per call. Its
    # `List[str]` parameter is not one torch infers, hence the schema.
    ("flashinfer.gemm.gemm_base", "fp8_gemm_sm100", "flashinfer::fp8_gemm_sm100",
     ("out", "workspace_buffer"),
     "(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor(a4!) out, "
     "Tensor(a5!) workspace_buffer, str[] runner_names) -> ()"),
    # fp4_quantize(..., backend="cute-dsl") -> _fp4_quantize_cute_dsl (0.6.16 on, SM100; SGLang
    # selects it there): is_cute_dsl_available() (importlib), per-call environment reads and a
    # CuTe DSL kernel compiled at call time (file locks), then a tvm_ffi launch. Its fake is
    # hooks/op_fakes.py's; 0.7.2's `nvfp4_4over6` recipe object is narrowed to None (off).
    ("flashinfer.quantization.fp4_quantization", "_fp4_quantize_cute_dsl",
     "flashinfer::fp4_quantize_cute_dsl", (), None),
]

class _Declared:
    __slots__ = ("name", "fn", "mutates_args", "schema", "module")

    def __init__(self, name, fn, mutates_args, schema):
        self.name = name
        self.fn = fn
        self.mutates_args = mutates_args
        self.schema = schema
        self.module = getattr(fn, "__module__", None) or "?"


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
    except Exception:
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
            _pending.append(_Declared(name, f, mutates_args, schema))
            return f
        return declare

    def register_fake_op(name, fn=None):
        def declare(f):
            _fakes.setdefault(name, f)
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
    if level == 0:
        return None
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
    hooks/attention_plans.py). Returns a line for the log, or None."""
    return attention_plans.install(module)


def _remember_api(wrapper, func):
    if wrapper is not func and callable(wrapper):
        _api_pending.append((wrapper, func))
    return wrapper


def _call_through(func):
    def call(*args, **kwargs):
        return func(*args, **kwargs)
    return call


class Unsupported(Exception):
    """FlashInfer does not look as expected: leave it alone."""


def arm():
    """Has `wake_pending` called at the start of every compile, once torch._dynamo is
    imported: through the graph-break observer's compile-start signal, which outlives
    `torch._dynamo.reset()`, and through Dynamo's own start callbacks, which do not."""
    global _armed
    if _armed:
        return
    observer = sys.modules.get("_dynafold_observer")
    if observer is not None:
        observer.on_compile_start(wake_pending)
    from torch._dynamo.callback import callback_handler
    callback_handler.register_start_callback(wake_pending)
    _armed = True


def wake_pending(*_args):
    """At each compile start: wakes what was declared since the last one."""
    attention_plans.become_lists()
    if not _pending and not _api_pending and len(sys.modules) == _scanned[0]:
        return
    _declare_extras()
    while _api_pending:
        wrapper, func = _api_pending.pop(0)
        try:
            torch._dynamo.substitute_in_graph(wrapper, skip_signature_check=True)(
                _call_through(func))
        except Exception as e:
            _log.debug("dynafold: FlashInfer's logging wrapper of %s stays traced: %s",
                       getattr(func, "__qualname__", func), e)
    while _pending:
        declared = _pending.pop(0)
        try:
            why_not = _wake(declared)
        except Exception as e:  # a declaration we cannot wake must not break the compile
            why_not = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        entry = _status.setdefault(declared.module, {"woken": 0, "skipped": {}})
        if why_not is None:
            entry["woken"] += 1
        else:
            entry["skipped"][why_not] = entry["skipped"].get(why_not, 0) + 1
            _log.debug("dynafold: %s left as FlashInfer ships it: %s", declared.name, why_not)
    _make_loaders_transparent()
    _scanned[0] = len(sys.modules)


def _declare_extras():
    """dynafold's own declarations whose module is now loaded, once each."""
    for module_name, attr, name, mutates, schema in EXTRA_DECLARATIONS:
        module = sys.modules.get(module_name)
        fn = getattr(module, attr, None) if module is not None else None
        if fn is None or name in _extras_declared:
            continue
        _extras_declared.add(name)
        if not inspect.isfunction(fn):
            _log.debug("dynafold: %s.%s is not a plain function; no boundary", module_name, attr)
            continue
        if schema is not None and list(inspect.signature(fn).parameters) != _schema_names(schema):
            _log.debug("dynafold: %s.%s's parameters changed; no boundary", module_name, attr)
            continue
        _pending.append(_Declared(name, fn, mutates, schema))


_extras_declared = set()


def _schema_names(schema):
    """The parameter names of a `(Type name, ...) -> ...` schema."""
    params = schema[1:schema.rindex(") ->")]
    return [p.split()[-1] for p in params.split(",") if p.strip()]


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
    except Exception:
        return {}


def _returns_nothing(hints):
    return "return" in hints and hints["return"] is type(None)


def _plan(declared):
    """(operator name, schema, fake, narrowing or None) for a declaration that can become a
    correct operator, else the reason it cannot, as one short line."""
    fn = declared.fn
    if declared.name in LEFT_ALONE:
        return LEFT_ALONE[declared.name]
    op_name = _op_name(declared)
    if op_name is None:
        return "name is not namespace::identifier"
    mutates = declared.mutates_args
    if isinstance(mutates, str):
        mutates = (mutates,) if mutates != "unknown" else mutates
    if mutates == "unknown":
        return "mutates_args='unknown'"
    # FlashInfer writes `mutates_args=("")` (a string, not a tuple) for "mutates nothing".
    mutates = tuple(m for m in mutates if m)
    hints = _hints(fn)
    narrowing = None
    prototype = fn
    # Checked before asking torch, which logs a warning per Union parameter when asked.
    if declared.schema is None and op_narrowing.needed(hints):
        narrowing = op_narrowing.Narrowing.of(fn, hints)
        if isinstance(narrowing, str):
            return narrowing
        prototype = narrowing.prototype
    try:
        schema = declared.schema or torch.library.infer_schema(prototype, mutates_args=mutates)
    except Exception as e:
        return f"schema not expressible ({str(e).splitlines()[0][:80]})"
    if _returns_nothing(hints):
        # An operator with no result needs a fake that returns nothing, whatever FlashInfer's
        # says: several of FlashInfer's rotted (a parameter missing), and one kernel declared
        # `-> None` returns its output buffer anyway (its callers read the buffer).
        return op_name, schema, _no_result, narrowing
    fake = op_fakes.override(declared.name, fn) or _fakes.get(declared.name)
    if fake is None:
        return "returns tensors and has no fake"
    if narrowing is not None:
        fake = narrowing.adapt_fake(fake)
        if isinstance(fake, str):
            return fake
    elif not _takes_the_same(fake, fn):
        return "fake's parameters differ from the kernel's"
    return op_name, schema, fake, narrowing


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
    """Defines the operator and substitutes it for `fn` under Dynamo; a reason when not."""
    fn = declared.fn
    existing = _ops.get(declared.name, ())
    if any(known is fn for _, known in existing):
        return None
    plan = _plan(declared)
    if isinstance(plan, str):
        return plan
    op_name, schema, fake, narrowing = plan
    if existing:
        # Declared again by another build of its loader (fp4_quantize_sm100 per SM backend):
        # an operator of its own, whose kernel is that build's.
        op_name = f"{op_name}_{len(existing)}"
    lib = _library()
    lib.define(op_name + schema)
    kernel = fn if narrowing is None else narrowing.kernel(fn)
    if fake is _no_result:
        kernel = _result_dropped(kernel)
    lib.impl(op_name, fake_check.checked(declared.name, kernel, fake), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{op_name}", fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), op_name).default

    if narrowing is None:
        def through_op(*args, **kwargs):
            return op(*args, **kwargs)
    else:
        through_op = narrowing.through_op(op, op_narrowing.as_shipped(fn))

    functools.update_wrapper(through_op, fn)
    del through_op.__wrapped__
    torch._dynamo.substitute_in_graph(fn, skip_signature_check=True)(through_op)
    _ops.setdefault(declared.name, []).append((op, fn))
    return None


def census():
    """For `dynafold doctor`: per module, the declarations recorded so far that would be
    woken, and why the others would not; nothing is defined."""
    _declare_extras()
    out = {}
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

    functools.update_wrapper(no_result, kernel)
    del no_result.__wrapped__
    return no_result


def _make_loaders_transparent():
    """Every cached `get_*module*` of a FlashInfer module with woken ops: called outside the
    trace under compile, so Dynamo never enters the JIT machinery."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if not (attr.startswith("get_") and "module" in attr):
                continue
            if not (callable(value) and hasattr(value, "cache_info")):
                continue
            if id(value) in _transparent:
                continue
            _transparent.add(id(value))

            outside_the_trace = _outside_the_trace(value)
            # Dynamo looks through the cache wrapper and traces what it wraps.
            target = getattr(value, "__wrapped__", value)
            try:
                torch._dynamo.substitute_in_graph(target, skip_signature_check=True)(
                    outside_the_trace)
            except Exception as e:
                _log.debug("dynafold: %s.%s stays traced: %s", name, attr, e)


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
    def build(*args):
        try:
            _BUILT[(key,) + args] = loader(*args)
        except Exception as e:
            raise RuntimeError(NOT_BUILT.format(
                loader=getattr(loader, "__qualname__", loader), args=", ".join(map(repr, args)),
                error=f"{type(e).__name__}: {e}")) from e
        # Declarations made by this build (ops declared inside the loader) join this compile.
        wake_pending()
        return True

    def stand_in(*args):
        build(*args)
        return _BUILT[(key,) + args]

    return stand_in


def status():
    """Per module: how many declarations are woken and why the others are not; per operator
    that has run for real, whether its fake agreed with its kernel."""
    out = {m: {"woken": s["woken"], "skipped": dict(s["skipped"])} for m, s in _status.items()}
    if fake_check.verdicts:
        out["fake checks"] = dict(fake_check.verdicts)
    return out
