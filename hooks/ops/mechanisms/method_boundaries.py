"""FlashInfer's wrapper methods as operators under compile.

Some of FlashInfer's public ops are methods of objects that hold state: compiled kernels,
tactic caches, prepared programs, locks (CuteDslMoEWrapper.run takes the AutoTuner's lock and
choice in its own body, with no declared op around it). No operator schema takes `self`, so
such a method is an operator by the object's key: an int the object keeps, the same for every
call to that object, that finds it again in a registry of weak references. This is the general
form of what hooks/ops/mechanisms/attention_plans.py does for a wrapper's JIT module (held by its key, called
through dynafold's declarations taking the key).

Each boundary is an op record (hooks/ops/registry/) whose declared function is `Class.method`
(its row of EXTRA_DECLARATIONS: module, "Class.method", declared name, mutated parameters,
schema), named again in BOUNDARIES below. Right after the module defining the class has
executed (`install`):

- the class's `__init__` gives each object its key once it is made (objects that cannot be
  weakly referenced get none);
- the method becomes a dispatcher (hooks/ops/mechanisms/dispatch.py): FlashInfer's own
  method for every eager call, one frame more; while Dynamo traces, the declaration below, given
  the object's key and the method's other arguments;
- the declaration (`declaration(module, "Class.method")`) is a function of `wrapper_key` and
  the method's parameters after `self`, annotated as the method is, that calls FlashInfer's
  method on the object the key holds. hooks/ops/engine/wake.py declares and wakes it like any other
  (corrections, narrowings and fakes keyed by the module and "Class.method", the fake reading
  what it needs of the object through `held`).

Dynamo reads the key as a constant of the graph and guards on it: one graph per object, as a
server has one wrapper per layer; tensor values are never guarded. A subclass that overrides
the method has a row of its own; one that does not calls the base's operator with its own
object. An object without a key (made before this hook, or whose class skipped `__init__`)
is traced as FlashInfer ships it.
"""

import functools
import inspect
import itertools
import typing
import weakref

from _dynafold_ops.mechanisms import dispatch


# module -> its boundaries, (class name, method name): the names of the op records whose
# declared function is a `Class.method` (registry/), so that FlashInfer's import installs
# them without executing the records, which only a compile needs (engine/wake.py
# COMPILE_TIME). tests/python/test_registry.py checks that the two agree; the modules are
# among the library's post-import targets (src/python/src/post_import.rs FLASHINFER_PLANNERS).
BOUNDARIES: typing.Dict[str, typing.Tuple[typing.Tuple[str, str], ...]] = {
    "flashinfer.fused_moe.cute_dsl.fused_moe": (("CuteDslMoEWrapper", "run"),
                                                ("CuteDslMxfp8Mxfp4MoEWrapper", "run")),
    "flashinfer.fused_moe.cute_dsl.b12x_moe": (("B12xMoEWrapper", "run"),),
    "flashinfer.gemm.cake_grouped_fp8_gemm": (
        ("PreparedGroupGemmFp8NtGroupwiseContiguous", "launch"),),
    "flashinfer.gemm.cake_grouped_fp8_fused_silu_quant": (
        ("PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant", "launch"),),
    "flashinfer.kda": (("RecurrentKDAPrefillWrapper", "run"),),
}

# The attribute holding an object's key.
KEY = "_dynafold_key"
# The declaration's first parameter: the key of the object whose method it calls.
KEY_PARAMETER = "wrapper_key"

# key -> weak reference to the object.
_held: typing.Dict[int, weakref.ref] = {}
_keys = itertools.count(1)
# (module, "Class.method") -> the declaration calling FlashInfer's method.
_declarations = {}


def hold(obj):
    """`obj`'s key, given it now if it has none; None when it cannot be weakly referenced."""
    key = key_of(obj)
    if key is not None:
        return key
    key = next(_keys)

    def forget(_, key=key):
        _held.pop(key, None)
    try:
        ref = weakref.ref(obj, forget)
        object.__setattr__(obj, KEY, key)
    except (TypeError, AttributeError):
        return None
    _held[key] = ref
    return key


def key_of(obj):
    """`obj`'s key, or None. Read as an attribute, never through `obj.__dict__`: on CPython
    3.11 asking an object for its `__dict__` turns its inline attribute values into a dict
    for good, and every later attribute read and write of that object is slower (issue 40:
    FlashInfer's MLA plan() 1.15x on CPU stand-ins, from that alone)."""
    try:
        return object.__getattribute__(obj, KEY)
    except AttributeError:
        return None


def held(key):
    """The object holding `key` (what a compiled graph's operator was traced for). Under
    `dynamic=True` the key may reach a fake as a SymInt: `int` specializes it (a guard on the
    key, as for a constant), so a graph is still one object's."""
    key = int(key)
    ref = _held.get(key)
    obj = ref() if ref is not None else None
    if obj is None:
        raise RuntimeError(f"dynafold: the FlashInfer object of key {key} no longer exists; "
                           "a graph compiled for it cannot run")
    return obj


def install(module, rows):
    """Called once `module` has executed, with the `(class name, method name)` pairs of its
    boundaries. Returns a line for the log, or None when none was made."""
    made = []
    for class_name, method in rows:
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        original = cls.__dict__.get(method)
        if getattr(original, "_dynafold_dispatcher", False):
            made.append(f"{class_name}.{method}")
            continue
        if not inspect.isfunction(original):
            continue
        call = _declaration(module.__name__, class_name, method, original)
        if call is None:
            continue
        _hold_on_init(cls)
        setattr(cls, method, _dispatcher(original, call))
        _declarations[(module.__name__, f"{class_name}.{method}")] = call
        made.append(f"{class_name}.{method}")
    if not made:
        return None
    return f"{', '.join(made)} called through dynafold's operators under compile"


def declaration(module_name, qualname):
    """The declaration of the boundary `qualname` ("Class.method") of `module_name`, once its
    module has executed; else None."""
    return _declarations.get((module_name, qualname))


def _declaration(module_name, class_name, method, original):
    """A function of `wrapper_key` and `original`'s parameters after `self`, annotated as
    `original` is, calling `original` on the object the key holds; None when `original` takes
    no `self` first or already has a parameter of that name."""
    try:
        sig = inspect.signature(original)
        hints = typing.get_type_hints(original)
    except Exception:  # noqa: BLE001 - a method without a readable signature stays as shipped
        return None
    params = list(sig.parameters.values())
    if not params or params[0].name != "self" or any(p.name == KEY_PARAMETER for p in params):
        return None
    first = inspect.Parameter(KEY_PARAMETER, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=int)
    rest = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in params[1:]]

    def call(wrapper_key, *args, **kwargs):
        return original(held(wrapper_key), *args, **kwargs)

    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    call.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[first, *rest], return_annotation=hints.get("return", sig.return_annotation))
    call.__annotations__ = {KEY_PARAMETER: int,
                            **{p.name: hints[p.name] for p in params[1:] if p.name in hints}}
    if "return" in hints:
        call.__annotations__["return"] = hints["return"]
    call.__name__ = f"{class_name}_{method}"
    call.__qualname__ = f"{class_name}.{method}"
    call.__module__ = module_name
    call.__doc__ = original.__doc__
    return call


def _dispatcher(original, call):
    """FlashInfer's method for eager calls; the declaration `call` while Dynamo traces an
    object that has a key."""
    def traced(self, args, kwargs):
        key = getattr(self, KEY, None)
        if key is not None:
            return call(key, *args, **kwargs)
        return original(self, *args, **kwargs)

    # Made at the module's import (`install`), where start-up counts: the exact dispatcher.
    method = dispatch.dispatcher(original, traced, from_source=False)
    method._dynafold_dispatcher = True
    return method


def _hold_on_init(cls):
    """`cls.__init__` gives each object its key once made (once, whichever class's runs)."""
    init = cls.__dict__.get("__init__")
    if getattr(init, "_dynafold_holds", False):
        return
    if init is None:
        def holding_init(self, *args, **kwargs):
            super(cls, self).__init__(*args, **kwargs)
            hold(self)
        holding_init.__qualname__ = f"{cls.__qualname__}.__init__"
    else:
        def holding_init(self, *args, **kwargs):
            init(self, *args, **kwargs)
            hold(self)
        functools.update_wrapper(holding_init, init)
    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    holding_init._dynafold_holds = True  # type: ignore[attr-defined]
    cls.__init__ = holding_init
