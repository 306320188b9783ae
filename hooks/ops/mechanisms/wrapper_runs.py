"""FlashInfer's attention wrappers' run methods, each one operator under compile.

What `plan()` (or `begin_forward`, SGLang's `fast_decode_plan`) computes reaches `run()` as
wrapper state: Python ints (batch size, max lengths, the last token count), bools, tensors and a
tvm_ffi Array. A trace of `run()` reads that state, and every int it reads is a guarded
constant of the graph: each new plan recompiles (tensor-core decode guards `_max_kv_len`;
prefill guards `_batch_size`, and under a dynamic token dimension `q.size(0) !=
self._qo_indptr_last` specializes it and the compile fails). Handling it attribute by
attribute never ends: each release and backend reads others.

So the plan never reaches the trace. Under compile each run method of a wrapper class
(`run`, the deprecated `forward`, their `*_return_lse` forms) is one operator,
`dynafold_flashinfer::wrapper_run`, which takes the wrapper's key (hooks/ops/mechanisms/method_boundaries.py
`hold`: an int the object keeps, found again in a registry of weak references), the call's
form and its tensors, and calls FlashInfer's method on the wrapper at run time, as eager
does, with whatever plan is current. Eager calls are FlashInfer's method itself; once the
process has compiled, its code compiled again with the dispatch first, one call more
(hooks/ops/mechanisms/dispatch.py). Nothing of the plan
is guarded; Dynamo guards the key, so a graph is one wrapper's (a server keeps its wrappers
for its lifetime).

A call's form: its arguments split into tensors (top-level, or in a tuple or list such as the
`(k_cache, v_cache)` pair) and constants (None, bools, ints, floats, strings, dtypes), which
are constants of the graph as they are of the call. The form is a string naming the method
and the constants, registered once per process while Dynamo traces (`assume_constant_result`:
Dynamo calls `_form` and keeps its result as a constant, with no guard on the registry). A
call with anything else (FlashInfer's `*args` of a custom JIT variant, a plan object) is
traced as FlashInfer ships it.

The dispatchers are set on the classes at the process's first compile start (`define()`),
before any trace: a process that never compiles runs FlashInfer's methods untouched.

Writes: the operator declares the caller's buffers a family's kernels write mutable (`out`
and `lse`; the workspaces are the wrapper's own, never graph values). Its two results are the
fresh tensors only (an operator may not return its argument), in the family's two result slots
(`out`, `lse`; POD's `out_p`, `out_d`); the method's result is put back together from the form.
Each wrapper class is a `Family` record: what its run allocates, the names of the two result
slots, the results every call returns (BatchAttention always `(out, lse)`) and the parameters
whose true value keeps a call traced as shipped (BatchPOD's `return_lse`: two pairs, four
results). The fake allocates what FlashInfer's method allocates, by the family's rule; the same
rule, applied to the real results at every run, stops a call whose results differ from what the
graph was traced with, with the reason, before it returns.
"""

import dataclasses
import functools
import inspect
import logging
import typing

import torch

from _dynafold_ops.mechanisms import attention_plans, dispatch, method_boundaries

_log = logging.getLogger("dynafold")

NAMESPACE = "dynafold_flashinfer"
OPERATOR = "wrapper_run"
# The run methods of a wrapper, and whether each returns the lse by default.
METHODS = {"run": False, "forward": False, "run_return_lse": True, "forward_return_lse": True}
# Constants a form may hold: the graph holds them as the call does.
CONSTANT_TYPES = (type(None), bool, int, float, str, torch.dtype)


@dataclasses.dataclass(frozen=True)
class Family:
    """One wrapper class's run methods, read from FlashInfer's source."""
    # (wrapper, the call's bound arguments) -> {result name: (shape, dtype)} of what the run
    # allocates when the caller gives no buffer.
    allocates: typing.Callable
    # The operator's two result slots, by name: what the method can return fresh.
    slots: typing.Tuple[str, str] = ("out", "lse")
    # The caller's buffers the kernels write (parameters of the method, at most two).
    writes: typing.Tuple[str, ...] = ("out", "lse")
    # The results every call returns, in order; None: `out`, and `lse` with `return_lse`.
    fixed: typing.Optional[typing.Tuple[str, ...]] = None
    # Parameters whose true value keeps a call traced as shipped (a result this record cannot
    # say in two slots).
    shipped_if: typing.Tuple[str, ...] = ()


# (module, class) -> its Family (see FAMILIES).
_families: typing.Dict[typing.Tuple[str, str], Family] = {}
# form -> what `_describe` says of it (None: the call is traced as shipped).
_forms: typing.Dict[str, typing.Any] = {}
# (module, class, method) -> FlashInfer's method.
_originals: typing.Dict[typing.Tuple[str, str, str], typing.Any] = {}
_defined: typing.List[typing.Any] = [False]
# (class, method) -> what makes its dispatcher, made and set on the class by `define()` at the
# process's first compile start: until then eager calls are FlashInfer's method itself, not
# even one call more (issue 40: a process that never compiles, as SGLang's breakable CUDA
# graphs, pays nothing on run()), and FlashInfer's import does not pay for making them
# (1-6 ms each, read and compiled from FlashInfer's source, hooks/ops/mechanisms/dispatch.py;
# sixteen on 0.6.16).
_waiting: typing.Dict[typing.Tuple[type, str], typing.Any] = {}
# `_form`, as Dynamo calls it: outside the trace, its result a constant.
_form_constant: typing.List[typing.Any] = [None]
# attention_plans.traced_as_shipped, as Dynamo calls it: a call the operator does not hold
# makes the wrapper's plan graph data before the trace reads it.
_shipped_constant: typing.List[typing.Any] = [None]


def install(module):
    """Called once a module defining FlashInfer's attention wrappers has executed (after
    hooks/ops/mechanisms/partial_methods.py made the `*_return_lse` partialmethods plain). Returns a line for
    the log, or None when it defines none."""
    made = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        family = FAMILIES.get(name)
        if family is None:
            continue
        for method in METHODS:
            original = cls.__dict__.get(method)
            if not inspect.isfunction(original) or getattr(original, "_dynafold_run", False):
                continue
            _originals[(module.__name__, name, method)] = original
            making = (module.__name__, name, method, original)
            if _defined[0]:
                setattr(cls, method, _dispatcher(*making))
            else:
                _waiting[(cls, method)] = making
            made.append(f"{name}.{method}")
        if any(m.startswith(f"{name}.") for m in made):
            _families[(module.__name__, name)] = family
            method_boundaries._hold_on_init(cls)
    if not made:
        return None
    return (f"{', '.join(made)} one operator each under compile (the plan stays out of the "
            "trace)")


def operated(module):
    """The names of `module`'s classes whose run methods are operators under compile."""
    return frozenset(name for m, name in _families if m == module.__name__)


def define():
    """At a compile's start (never inside a trace): the operator, once per process. If it
    cannot be defined, the wrappers are traced as FlashInfer ships them, with one log line."""
    if _defined[0] or len(_defined) > 1:
        return
    try:
        # Marked here, not by a decorator at import: that would import torch._dynamo into
        # every process importing FlashInfer.
        _form_constant[0] = torch._dynamo.assume_constant_result(_form)
        _shipped_constant[0] = torch._dynamo.assume_constant_result(
            attention_plans.traced_as_shipped)
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        # Two mutable slots (the family's written buffers) and two results (its result
        # slots, empty where the result is not fresh): torch reads a Tensor[] result of an
        # operator with mutable arguments as aliased, which it cannot functionalize.
        lib.define(f"{OPERATOR}(int key, str form, Tensor?[] reads, Tensor(a!)? out, "
                   "Tensor(b!)? lse) -> (Tensor, Tensor)")
        lib.impl(OPERATOR, _run, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{OPERATOR}", _fake, lib=lib)
    except Exception as e:  # noqa: BLE001 - never break the compile: the wrappers stay as shipped
        _defined.append(None)
        attention_plans.set_deferred()
        _log.warning("dynafold: attention wrappers' run methods stay as FlashInfer ships them "
                     "(the operator could not be defined: %s: %s)", type(e).__name__, e)
        return
    _defined.append(lib)  # a Library deregisters its operator when collected
    _defined[0] = True
    for (cls, method), making in _waiting.items():
        try:
            setattr(cls, method, _dispatcher(*making))
        except Exception as e:  # noqa: BLE001 - never break the compile: that method stays as shipped
            attention_plans.set_deferred(cls)  # a trace of it reads the plan
            _log.warning("dynafold: %s.%s stays as FlashInfer ships it (no dispatcher: %s: %s)",
                         making[1], method, type(e).__name__, e)
    _waiting.clear()


def _dispatcher(module_name, class_name, method, original):
    """FlashInfer's method for eager calls; the operator while Dynamo traces a wrapper that
    has a key and a call whose form it can say."""
    def traced(self, args, kwargs):
        key = getattr(self, method_boundaries.KEY, None)
        if key is not None and _defined[0]:
            split = _split(args, kwargs)
            if split is not None:
                tensors, positional, keywords = split
                form, write_at, results = _form_constant[0](
                    module_name, class_name, method, positional, keywords)
                if results is not None:
                    return _through_operator(key, form, write_at, results, tensors)
        _shipped_constant[0](module_name, class_name)
        return original(self, *args, **kwargs)

    run = dispatch.dispatcher(original, traced)
    run._dynafold_run = True
    return run


def _split(args, kwargs):
    """The call's tensors and its shape of kinds, or None when an argument is neither a
    tensor, a tuple or list of tensors, nor a constant."""
    tensors: typing.List[torch.Tensor] = []
    positional = []
    for value in args:
        kind = _kind(value, tensors)
        if kind is None:
            return None
        positional.append(kind)
    keywords = []
    for name, value in kwargs.items():
        kind = _kind(value, tensors)
        if kind is None:
            return None
        keywords.append((name, kind))
    return tensors, tuple(positional), tuple(keywords)


def _kind(value, tensors):
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return ("t",)
    if isinstance(value, (tuple, list)) and value and all(
            isinstance(v, torch.Tensor) for v in value):
        tensors.extend(value)
        return ("tuple" if isinstance(value, tuple) else "list", len(value))
    if isinstance(value, CONSTANT_TYPES):
        return ("c", value)
    return None


def _through_operator(key, form, write_at, results, tensors):
    """The operator's call; the method's result from its results: each ("w", i) the caller's
    i-th written buffer, each ("f", i) the operator's i-th result."""
    written = [None if at is None else tensors[at] for at in write_at]
    reads = [None if i in write_at else t for i, t in enumerate(tensors)]
    fresh = torch.ops.dynafold_flashinfer.wrapper_run(key, form, reads, *written)
    slots, is_tuple = results
    out = [written[at] if kind == "w" else fresh[at] for kind, at in slots]
    return tuple(out) if is_tuple else out[0]


def _form(module_name, class_name, method, positional, keywords):
    """The form's name, which tensors are the caller's written buffers and how the result is
    made of the caller's buffers and fresh tensors (None: the call is traced as shipped).
    Registered once; called by Dynamo outside the trace, its result a constant of the graph."""
    form = f"{class_name}.{method}{positional}{keywords}"
    if form not in _forms:
        _forms[form] = _describe(module_name, class_name, method, positional, keywords)
    entry = _forms[form]
    if entry is None:
        return form, None, None
    return form, entry["write_at"], entry["results"]


def _describe(module_name, class_name, method, positional, keywords):
    family = _families[(module_name, class_name)]
    marks: typing.List[_Mark] = []

    def placeholder(kind):
        if kind[0] == "c":
            return kind[1]
        mark = _Mark(len(marks), kind)
        marks.append(mark)
        return mark

    pos = [placeholder(k) for k in positional]
    kw = {name: placeholder(k) for name, k in keywords}
    bound = _signature(module_name, class_name, method).bind(None, *pos, **kw)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    if any(arguments.get(name) is True for name in family.shipped_if):
        return None
    # Tensor indices: each mark stands for 1 (a tensor) or n (a tuple or list) of them.
    first = []
    at = 0
    for mark in marks:
        first.append(at)
        at += 1 if mark.kind == ("t",) else mark.kind[1]
    # Per operator slot of a written buffer (family.writes), the index of the caller's tensor.
    write_at = [None, None]
    for i, name in enumerate(family.writes):
        value = arguments.get(name)
        if isinstance(value, _Mark) and value.kind == ("t",):
            write_at[i] = first[value.index]
    names = family.fixed
    if names is None:
        lse = arguments.get("return_lse", METHODS[method])
        if not isinstance(lse, bool):
            lse = METHODS[method]
        names = ("out", "lse") if lse else ("out",)
    slots = []
    for name in names:
        given = name in family.writes and write_at[family.writes.index(name)] is not None
        slots.append(("w", family.writes.index(name)) if given
                     else ("f", family.slots.index(name)))
    return {"module": module_name, "class": class_name, "method": method,
            "positional": positional, "keywords": keywords, "names": names,
            "write_at": tuple(write_at), "results": (tuple(slots), len(names) > 1)}


class _Mark:
    """A tensor argument's place while a form is described."""
    __slots__ = ("index", "kind")

    def __init__(self, index, kind):
        self.index = index
        self.kind = kind


def _rebuild(entry, reads, written):
    """FlashInfer's arguments from the operator's (`written`: the buffers, per slot)."""
    tensors = list(reads)
    for at, buffer in zip(entry["write_at"], written):
        if at is not None:
            tensors[at] = buffer
    taken = iter(tensors)

    def value(kind):
        if kind[0] == "c":
            return kind[1]
        if kind == ("t",):
            return next(taken)
        items = [next(taken) for _ in range(kind[1])]
        return tuple(items) if kind[0] == "tuple" else items

    args = [value(k) for k in entry["positional"]]
    kwargs = {name: value(k) for name, k in entry["keywords"]}
    return args, kwargs


def _family(entry):
    return _families[(entry["module"], entry["class"])]


def _run(key, form, reads, out, lse):
    entry = _forms[form]
    wrapper = method_boundaries.held(key)
    args, kwargs = _rebuild(entry, reads, (out, lse))
    original = _originals[(entry["module"], entry["class"], entry["method"])]
    result = original(wrapper, *args, **kwargs)
    got = list(result) if isinstance(result, (tuple, list)) else [result]
    fresh = [t for t, slot in zip(got, entry["results"][0]) if slot[0] == "f"]
    expected = _allocated(entry, wrapper, args, kwargs)
    for t, (name, (shape, dtype)) in zip(fresh, expected):
        if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
            raise RuntimeError(
                f"dynafold: {entry['class']}.{entry['method']} returned {name} "
                f"{tuple(t.shape)} {t.dtype} where its operator says {tuple(shape)} {dtype}; "
                "the compiled graph would be wrong (report it; DYNAFOLD_OPS=0 runs the "
                "wrapper as FlashInfer ships it)")
    results = dict(zip((name for name, _ in expected), fresh))
    # An operator's result may not be its argument: a fresh result FlashInfer took from the
    # caller's tensors (none known) would be copied rather than aliased.
    results = {n: t.clone() if any(t is r for r in reads if r is not None) else t
               for n, t in results.items()}
    return tuple(results.get(n, _none(reads)) for n in _family(entry).slots)


def _none(reads):
    """The result of a slot that is not fresh: empty, never read."""
    return next(t for t in reads if t is not None).new_empty(0)


def _fake(key, form, reads, out, lse):
    entry = _forms[form]
    wrapper = method_boundaries.held(key)
    args, kwargs = _rebuild(entry, reads, (out, lse))
    device = next(t.device for t in reads if t is not None)
    fresh = {name: torch.empty(shape, dtype=dtype, device=device)
             for name, (shape, dtype) in _allocated(entry, wrapper, args, kwargs)}
    return tuple(fresh.get(n, _none(reads)) for n in _family(entry).slots)


@functools.cache
def _signature(module_name, class_name, method):
    """FlashInfer's method's signature, read once: `_run` binds it on every call."""
    return inspect.signature(_originals[(module_name, class_name, method)])


def _allocated(entry, wrapper, args, kwargs):
    """(name, (shape, dtype)) of each fresh result of the call, by its family's rule."""
    bound = _signature(entry["module"], entry["class"], entry["method"]).bind(
        wrapper, *args, **kwargs)
    bound.apply_defaults()
    sizes = _family(entry).allocates(wrapper, bound.arguments)
    return [(name, sizes[name]) for name, slot in zip(entry["names"], entry["results"][0])
            if slot[0] == "f"]


# What each family's run methods allocate, from FlashInfer's source (every release from
# 0.5.3 to 0.7.4).


def _lse_of(q):
    """The lse: one float32 per query row and head."""
    return ((q.shape[0], q.shape[1]), torch.float32)


def _value_dim(arguments):
    kv = arguments.get("paged_kv_cache")
    if kv is None:
        kv = arguments.get("v")
    if isinstance(kv, (tuple, list)):
        kv = kv[1]
    dim = kv.shape[-1]
    sf = arguments.get("kv_cache_sf")
    if sf is not None and kv.dtype == torch.uint8:  # NVFP4: two values a byte
        dim = dim * 2
    return dim


def _gqa(wrapper, arguments):
    """decode.py, prefill.py: the output of the query's shape with the value head dimension,
    in the planned output dtype (or the query's)."""
    q = arguments["q"]
    dtype = getattr(wrapper, "_cached_o_data_type", None) or q.dtype
    return {"out": ((*q.shape[:-1], _value_dim(arguments)), dtype), "lse": _lse_of(q)}


def _mla(wrapper, arguments):
    """mla.py / mla/_core.py: 0.5-0.6 `q_nope`, the output its shape. 0.7: `query`, the pair
    (q_nope, q_pe) or one tensor, the output the compressed KV's head dimension."""
    q = arguments.get("q_nope")
    if q is None:
        query, kv = arguments["query"], arguments.get("kv_cache")
        q = query[0] if isinstance(query, (tuple, list)) else query
        if isinstance(kv, (tuple, list)) and not isinstance(query, (tuple, list)):
            return {"out": ((*q.shape[:-1], kv[0].shape[-1]), q.dtype), "lse": _lse_of(q)}
    return {"out": (tuple(q.shape), q.dtype), "lse": _lse_of(q)}


def _holistic(wrapper, arguments):
    """attention.py / attention/_core.py BatchAttention.run: `torch.empty_like(q)` and the
    lse."""
    q = arguments["q"]
    return {"out": (tuple(q.shape), q.dtype), "lse": _lse_of(q)}


def _pod(wrapper, arguments):
    """pod.py: `torch.empty_like(q_p)` and `torch.empty_like(q_d)` (the lse buffers its
    `return_lse*` flags allocate are the kernel's to write, never returned)."""
    q_p, q_d = arguments["q_p"], arguments["q_d"]
    return {"out_p": (tuple(q_p.shape), q_p.dtype), "out_d": (tuple(q_d.shape), q_d.dtype)}


_GQA = Family(_gqa)
FAMILIES = {
    "BatchDecodeWithPagedKVCacheWrapper": _GQA,
    "CUDAGraphBatchDecodeWithPagedKVCacheWrapper": _GQA,
    "BatchPrefillWithPagedKVCacheWrapper": _GQA,
    "BatchPrefillWithRaggedKVCacheWrapper": _GQA,
    "BatchMLAPagedAttentionWrapper": Family(_mla),
    # Always `(out, lse)`, whatever the call.
    "BatchAttention": Family(_holistic, fixed=("out", "lse")),
    # Always `(out_p, out_d)`; no buffer of the caller's.
    "PODWithPagedKVCacheWrapper": Family(_pod, slots=("out_p", "out_d"), writes=(),
                                         fixed=("out_p", "out_d")),
    # `(out_p, out_d)`; with `return_lse` `((out_p, out_d), (lse_p, lse_d))`, traced as
    # shipped.
    "BatchPODWithPagedKVCacheWrapper": Family(_pod, slots=("out_p", "out_d"), writes=(),
                                              fixed=("out_p", "out_d"),
                                              shipped_if=("return_lse",)),
}


def status():
    """For `status()`: the wrappers whose run methods are operators, and the forms seen."""
    return {"wrappers": sorted(f"{m}.{c}" for m, c in _families),
            "forms": len(_forms)}
