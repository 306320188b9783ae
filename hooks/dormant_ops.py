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
   (`FAKE_OVERRIDES`), or, for an op that returns nothing, one that returns nothing (several of
   FlashInfer's no-result fakes rotted: parameters missing); then
   `torch._dynamo.substitute_in_graph(fn)` makes Dynamo call the operator wherever it meets
   `fn`. `fn` itself is untouched.
3. A declaration whose full signature no torch schema can say (FlashInfer's sampling ops: a
   `Generator`, `Union[int, Tensor]` seeds, a result that is a tensor or a tuple) is woken
   narrowed to how serving code calls it (`NARROWED`: no generator object, int seeds, one tensor
   back); Dynamo then calls the operator for a call that fits and traces FlashInfer's function
   as shipped for any other. A declaration that cannot become a correct operator at all
   (schema not expressible, tensors returned without a fake, a fake that does not take the
   kernel's parameters, a name that is not an identifier) stays as FlashInfer ships it, with
   one debug line; `status()` says per module what was woken and why not.
4. Each fake is checked against its kernel the first time the operator runs for real in the
   process (a compiled graph's first call), before that result is returned: FlashInfer's fakes
   are not exercised by FlashInfer itself and some have rotted. The shapes, dtypes and strides
   of what the kernel returned are compared with what the fake returns for the same inputs; a
   mismatch raises (the compiled graph was planned on the fake's word) and is kept in
   `status()`, as is every agreement.
5. Every `functools.cache`d JIT loader (`get_*module*`) of a woken module is made trace-
   transparent: under compile Dynamo calls it outside the trace (as a constant), so the
   module it returns is the one the eager path built, or is built then, outside the graph.
6. FlashInfer's attention wrappers keep what `plan()` computed for `run()` in `_plan_info`,
   a tvm_ffi Array since 0.6, which Dynamo cannot pass to an operator. Once a process compiles,
   each wrapper's plan info is kept as a list of ints (made from the Array after `plan()`;
   tvm_ffi takes the list in eager calls too): wrappers planned before the first compile are
   remembered (weakly) and converted when it starts. A process that never compiles keeps the
   Arrays.
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

_log = logging.getLogger("dynafold")

NAMESPACE = "dynafold_flashinfer"
_lib = None
# (name, fn, mutates_args, schema, module) in declaration order, not yet woken.
_pending = []
# "flashinfer::NAME" -> the fake FlashInfer declared for it.
_fakes = {}
# module name -> {"woken": n, "skipped": {reason: n}}
_status = {}
# "flashinfer::NAME" -> the operator, once defined.
_ops = {}
_armed = False
# (logging wrapper, the function it wraps) made by flashinfer_api, not yet substituted.
_api_pending = []

NOT_BUILT = (
    "dynafold: torch.compile reached FlashInfer's {loader}{args}, whose JIT module is not built "
    "in this process and could not be built outside the trace ({error}). Call the FlashInfer "
    "op once eagerly on the same device before compiling (SGLang's warm-up forward does this)."
)
_transparent = set()


def _fake_merge_states(v, s):
    # FlashInfer's own fake allocates on the CPU.
    seq_len, _, num_heads, head_dim = v.size()
    return (v.new_empty(seq_len, num_heads, head_dim),
            s.new_empty(seq_len, num_heads, dtype=torch.float32))


# Declarations dynafold makes traceable another way, by declared name: fp4_quantize's kernel
# (hooks/fp4_opaque.py, with a fake that gives the swizzled layout's real size; FlashInfer's
# own fake for it is wrong).
HANDLED_ELSEWHERE = {
    "flashinfer::fp4_quantize_sm100": "covered by dynafold's fp4 path (hooks/fp4_opaque.py)",
}

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
]

# FlashInfer's fake, where wrong or missing, by declared name.
FAKE_OVERRIDES = {
    "flashinfer::merge_states": _fake_merge_states,
}


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
    """Called once a module defining FlashInfer's attention wrappers has executed. Returns a
    line for the log, or None when it defines none."""
    kept = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        plan = cls.__dict__.get("plan")
        if not inspect.isfunction(plan) or not any(
                inspect.isfunction(f) and "_plan_info" in f.__code__.co_names
                for f in vars(cls).values()):
            continue
        kept_plan = _keeping_plan(plan)
        for attr, value in list(vars(cls).items()):
            if value is plan:  # `plan` and its aliases (`begin_forward`)
                setattr(cls, attr, kept_plan)
        kept.append(name)
    if not kept:
        return None
    return f"{module.__name__}: the plans of {', '.join(kept)} kept for the woken run operators"


# Wrappers planned before the first compile (weakly), and whether plans are now kept as lists.
_planned = None
_plans_as_lists = [False]


def _keeping_plan(plan):
    def kept_plan(self, *args, **kwargs):
        result = plan(self, *args, **kwargs)
        if _plans_as_lists[0]:
            _plan_as_list(self)
        else:
            _remember_planned(self)
        return result

    functools.update_wrapper(kept_plan, plan)
    return kept_plan


def _remember_planned(wrapper):
    global _planned
    if _planned is None:
        import weakref
        _planned = weakref.WeakSet()
    try:
        _planned.add(wrapper)
    except TypeError:  # a wrapper that cannot be weakly referenced stays as it is
        pass


def _plan_as_list(wrapper):
    """The wrapper's plan info as a list of ints, when it is a sequence of ints that is not one."""
    info = getattr(wrapper, "_plan_info", None)
    if info is None or isinstance(info, list):
        return
    try:
        values = list(info)
    except TypeError:
        return
    if all(type(v) is int for v in values):
        wrapper._plan_info = values


def _plans_become_lists():
    """At the first compile start: from now on plans are kept as lists, and so are the plans
    made before."""
    if _plans_as_lists[0]:
        return
    _plans_as_lists[0] = True
    for wrapper in list(_planned or ()):
        _plan_as_list(wrapper)
    if _planned is not None:
        _planned.clear()


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
    _plans_become_lists()
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


def _has_union(hints):
    """A Union other than Optional, which torch's schemas cannot express (checked first: torch
    logs a warning per such parameter when asked)."""
    for hint in hints.values():
        if typing.get_origin(hint) is typing.Union:
            if len([a for a in typing.get_args(hint) if a is not type(None)]) > 1:
                return True
    return False


def _returns_nothing(hints):
    return "return" in hints and hints["return"] is type(None)


def _plan(declared):
    """(operator name, schema, fake, narrowing or None) for a declaration that can become a
    correct operator, else the reason it cannot, as one short line."""
    fn = declared.fn
    if declared.name in HANDLED_ELSEWHERE:
        return HANDLED_ELSEWHERE[declared.name]
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
    if declared.schema is None and (_has_union(hints) or _has_generator(hints)):
        narrowing = _Narrowing.of(fn, hints)
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
    fake = FAKE_OVERRIDES.get(declared.name) or _fakes.get(declared.name)
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


def _fits_none(value):
    return value is None


def _fits_false(value):
    return value is False


def _fits_not_a_tensor(value):
    return not isinstance(value, torch.Tensor)


# Parameters torch's schemas cannot express, narrowed to the form serving code calls them with:
# name -> (the annotation in the operator, or None to leave the parameter out of it, the values
# that fit). A call whose values fit goes through the operator (a left-out parameter is given
# back to FlashInfer's function with the value that fits); any other call is traced as FlashInfer
# ships it. These are FlashInfer's sampling ops': `generator` (no schema type for a Generator),
# `seed`/`offset` (Union[int, Tensor]) and `return_valid` (it turns the Tensor result into a
# tuple).
NARROWED = {
    "generator": (None, _fits_none),
    "seed": (typing.Optional[int], _fits_not_a_tensor),
    "offset": (typing.Optional[int], _fits_not_a_tensor),
    "return_valid": (None, _fits_false),
}
# Parameters a fake may lack (added to the kernel after its fake was written) because they cannot
# change the result's shape, dtype or strides: the random stream's position.
FAKE_MAY_LACK = {"seed", "offset"}


def _has_generator(hints):
    return any(name != "return" and "Generator" in str(hint) for name, hint in hints.items())


def _is_union(hint):
    return typing.get_origin(hint) is typing.Union and len(
        [a for a in typing.get_args(hint) if a is not type(None)]) > 1


class _Narrowing:
    """One declaration narrowed by NARROWED: its operator's prototype (for the schema), the
    call check Dynamo inlines, and its kernel and fake adapted to the operator's parameters."""

    def __init__(self, names, kept, dropped, checks, prototype):
        self.names = names          # FlashInfer's parameter names, in order
        self.kept = kept            # (index, name, default) of those the operator takes
        self.dropped = dropped      # (index, value given back) of those left out of it
        self.checks = checks        # (index, name, default, fits) tested per call
        self.prototype = prototype

    @classmethod
    def of(cls, fn, hints):
        """The narrowing of `fn`, or why it cannot be narrowed."""
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return "schema not expressible (no signature)"
        names, kept, dropped, checks, params = [], [], [], [], []
        for index, param in enumerate(sig.parameters.values()):
            if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                return "schema not expressible (variadic or keyword-only parameters)"
            names.append(param.name)
            hint = hints.get(param.name, param.annotation)
            default = None if param.default is param.empty else param.default
            rule = NARROWED.get(param.name)
            if rule is None:
                if _is_union(hint):
                    return "schema not expressible (a Union parameter)"
                if "Generator" in str(hint):
                    return "schema not expressible (a Generator parameter)"
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=hint))
                continue
            annotation, fits = rule
            checks.append((index, param.name, default, fits))
            if annotation is None:
                dropped.append((index, False if fits is _fits_false else None))
            else:
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=annotation))
        result = hints.get("return", sig.return_annotation)
        if _is_union(result):
            members = [a for a in typing.get_args(result) if a is not type(None)]
            if "return_valid" not in names or members[0] is not torch.Tensor:
                return "schema not expressible (a Union result)"
            result = torch.Tensor

        def prototype(*args):
            raise NotImplementedError

        prototype.__signature__ = sig.replace(parameters=params, return_annotation=result)
        prototype.__name__ = fn.__name__
        return cls(names, kept, dropped, checks, prototype)

    def through_op(self, op, as_shipped):
        """What Dynamo calls in place of FlashInfer's function: the operator when the call fits,
        else the function as shipped. (Dynamo inlines it with no source for its closure, so the
        closure holds only tuples, constants and functions.)"""
        checks = tuple(self.checks)
        kept = tuple(self.kept)

        def through_op(*args, **kwargs):
            for index, name, default, fits in checks:
                if not fits(args[index] if index < len(args) else kwargs.get(name, default)):
                    return as_shipped(*args, **kwargs)
            return op(*[args[index] if index < len(args) else kwargs.get(name, default)
                        for index, name, default in kept])
        return through_op

    def full_args(self, args):
        """The operator's arguments as FlashInfer's function takes them."""
        out = list(args)
        for index, value in self.dropped:
            out.insert(index, value)
        return out

    def kernel(self, fn):
        def kernel(*args):
            return fn(*self.full_args(args))
        return kernel

    def adapt_fake(self, fake):
        """FlashInfer's fake, given the parameters it takes by name; a reason when it lacks one
        that could change the result."""
        try:
            takes = set(inspect.signature(fake).parameters)
        except (TypeError, ValueError):
            return "fake has no signature"
        lacking = [n for n in self.names if n not in takes and n not in FAKE_MAY_LACK]
        if lacking:
            return f"fake lacks {', '.join(lacking)}"
        names = self.names

        def adapted(*args):
            full = self.full_args(args)
            return fake(**{n: v for n, v in zip(names, full) if n in takes})
        return adapted


def _as_shipped(fn):
    """A copy of `fn` that Dynamo traces as FlashInfer ships it (the substitution is keyed to
    `fn` itself), for the calls a narrowed operator does not take."""
    import types
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _wake(declared):
    """Defines the operator and substitutes it for `fn` under Dynamo; a reason when not."""
    fn = declared.fn
    existing = _ops.get(declared.name)
    if existing is not None:
        return None if existing[1] is fn else "declared more than once"
    plan = _plan(declared)
    if isinstance(plan, str):
        return plan
    op_name, schema, fake, narrowing = plan
    lib = _library()
    lib.define(op_name + schema)
    kernel = fn if narrowing is None else narrowing.kernel(fn)
    if fake is _no_result:
        kernel = _result_dropped(kernel)
    lib.impl(op_name, _fake_checked(declared.name, kernel, fake), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{op_name}", fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), op_name).default

    if narrowing is None:
        def through_op(*args, **kwargs):
            return op(*args, **kwargs)
    else:
        through_op = narrowing.through_op(op, _as_shipped(fn))

    functools.update_wrapper(through_op, fn)
    del through_op.__wrapped__
    torch._dynamo.substitute_in_graph(fn, skip_signature_check=True)(through_op)
    _ops[declared.name] = (op, fn)
    return None


# "flashinfer::NAME" -> "agrees" or what differs, once the operator has run for real.
_fake_checks = {}

FAKE_DIFFERS = (
    "dynafold: the fake of {name} does not describe its kernel's result ({what}); the compiled "
    "graph was planned on the fake and cannot be trusted. Set DYNAFOLD_OPS=0 to leave "
    "FlashInfer's ops as it ships them, and report this to dynafold."
)


def _fake_checked(name, fn, fake):
    """FlashInfer's function as the operator's kernel, checking `fake` on the first call."""

    def kernel(*args, **kwargs):
        out = fn(*args, **kwargs)
        verdict = _fake_checks.get(name)
        if verdict is None:
            verdict = _fake_checks[name] = _compare_with_fake(fake, args, kwargs, out)
        if verdict != "agrees":
            raise RuntimeError(FAKE_DIFFERS.format(name=name, what=verdict))
        return out

    functools.update_wrapper(kernel, fn)
    del kernel.__wrapped__
    return kernel


def _compare_with_fake(fake, args, kwargs, real):
    """"agrees" when `fake`, given fake copies of the inputs, returns what `real` is (shapes,
    dtypes, strides, devices); else what differs, as one short line."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_flatten, tree_map

    try:
        with FakeTensorMode() as mode:
            def fakeify(x):
                return mode.from_tensor(x) if isinstance(x, torch.Tensor) else x
            predicted = fake(*tree_map(fakeify, args), **tree_map(fakeify, kwargs))
    except Exception as e:
        return f"the fake raised {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    got, got_shape = tree_flatten(real)
    want, want_shape = tree_flatten(predicted)
    if got_shape != want_shape:
        return f"structure {want_shape} predicted, {got_shape} returned"
    for i, (r, f) in enumerate(zip(got, want)):
        if isinstance(r, torch.Tensor) != isinstance(f, torch.Tensor):
            return f"output {i}: {type(f).__name__} predicted, {type(r).__name__} returned"
        if not isinstance(r, torch.Tensor):
            continue
        for what in ("shape", "dtype", "stride", "device"):
            have = tuple(r.shape) if what == "shape" else (
                r.stride() if what == "stride" else getattr(r, what))
            said = tuple(f.shape) if what == "shape" else (
                f.stride() if what == "stride" else getattr(f, what))
            if have != said:
                return f"output {i}: {what} {said} predicted, {have} returned"
    return "agrees"


def census():
    """For `dynafold doctor`: per module, the declarations recorded so far that would be
    woken, and why the others would not; nothing is defined."""
    _declare_extras()
    out = {}
    for declared in list(_pending) + [_Declared(n, fn, (), None) for n, (_, fn) in _ops.items()]:
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
                loader=getattr(loader, "__qualname__", loader), args=args,
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
    if _fake_checks:
        out["fake checks"] = dict(_fake_checks)
    return out
