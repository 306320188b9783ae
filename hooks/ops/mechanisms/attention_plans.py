"""FlashInfer's attention plans, as graph data under compile.

FlashInfer's attention wrappers keep what planning computed for `run()` in `_plan_info` (POD:
`_plan_info_p`, `_plan_info_d`): a tvm_ffi Array since 0.6, a list before. Neither can reach a
compiled graph well: Dynamo cannot pass an Array to an operator at all, and a list of ints
becomes constants of the graph, each guarded, so every new plan (FlashInfer's plan holds the
token count and padded batch size) recompiles, and under `fullgraph=True` the ninth one fails.

So the plan is handled where it is set, whoever sets it (`plan()`, `begin_forward`, SGLang's
`fast_decode_plan`, a subclass): each such attribute of a wrapper class becomes a property.
Setting it keeps FlashInfer's value for eager calls and, once a trace has read a plan of that
wrapper class, an int64 CPU tensor of the same ints; reading it gives FlashInfer's value,
except while Dynamo traces, where it gives the tensor, a graph input like any other (guarded
on its length, never on its values). The woken run operators take that tensor
(`plan_info_vec`, hooks/ops/engine/narrowing.py) and hand FlashInfer its list.

The tensor is made only for classes a trace has read a plan of (`_wanting`, which Dynamo calls
for real at that read, makes the class's live wrappers' tensors then): reading a tvm_ffi Array
costs about 1 us an element, more than FlashInfer's whole plan() on the host (issue 40: plan()
1.4x-5.7x once a process had compiled, on CPU stand-ins), and the wrappers whose run methods
are operators (hooks/ops/mechanisms/wrapper_runs.py, SGLang's) never have their plan read by a
trace. Those classes get no property at all until a trace is about to read their state anyway
(`traced_as_shipped`, called by their run dispatcher for a call the operator cannot hold):
until then plan() and run() are FlashInfer's, attribute for attribute. Any other wrapper class
pays one property call per read and per set.

`install(module)` runs right after a module defining such wrappers has executed; the op
declarations' `wake_pending` calls `become_data()` at each compile start.

The JIT module itself, where a wrapper calls its function with no declared op between (the
MLA wrapper's `self._cached_module.run(...)`, a tvm_ffi function no trace can enter): the
attribute holding the module (`_cached_module`) becomes a property too. Setting it keeps
FlashInfer's module and notes it by key; reading it gives that module, except while Dynamo
traces, where it gives a stand-in whose functions are dynafold's declarations (`mla_run` below,
woken like FlashInfer's own: their records in hooks/ops/registry/): the operator takes the
module's key (an int, the same for every call to one built module) and calls the module's
function with FlashInfer's arguments. The POD wrappers get their module from a cached
loader each run (`get_batch_pod_module(...).run_tensor(...)`): the loader's stand-in under
compile (hooks/ops/engine/wake.py `_outside_the_trace`) gives a stand-in of the same kind
(`through_operators`).
"""

import inspect
import re
import typing

import torch

from _dynafold_ops.mechanisms import method_boundaries
from _dynafold_ops.mechanisms.dispatch import is_dynamo_compiling

# Attributes of a wrapper that hold a plan: `_plan_info` and its POD variants.
PREFIX = "_plan_info"


def install(module, deferred=frozenset()):
    """Called once a module defining FlashInfer's attention wrappers has executed. Classes
    named in `deferred` (those whose run methods are operators, hooks/ops/mechanisms/wrapper_runs.py)
    get their properties only when a trace first reads their plan anyway (`traced_as_shipped`).
    Returns a line for the log, or None when it defines none."""
    held = _hold_modules(module, deferred)
    kept: typing.List[str] = []
    later: typing.List[str] = []
    for name, cls in list(vars(module).items()):
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        attrs = sorted(_plan_attributes(cls))
        if not attrs:
            continue
        for attr in attrs:
            if not isinstance(cls.__dict__.get(attr), property):
                _make(cls, attr, _plan_property(attr), name in deferred)
        (later if name in deferred else kept).append(name)
    for name, cls in list(vars(module).items()):
        if isinstance(cls, type) and cls.__module__ == module.__name__ and name not in deferred:
            _inherit_deferred(cls)
    said = []
    if kept:
        said.append(f"the plans of {', '.join(kept)} kept as graph data for the woken run "
                    "operators")
    if later:
        said.append(f"the plans of {', '.join(later)} made graph data if a trace reads them")
    if held:
        said.append(held)
    return "; ".join(said) if said else None


# class -> {attribute: its property}, not yet set on the class: the plans and JIT modules of
# the wrappers whose run methods are operators (hooks/ops/mechanisms/wrapper_runs.py). No trace
# reads them while those operators hold the calls, and a property costs every eager plan() and
# run() a Python call per read and per set (issue 40: 1.03-1.4x of plan() on CPU stand-ins).
_deferred: typing.Dict[type, typing.Dict[str, property]] = {}


def _inherit_deferred(cls):
    """A class whose base's properties wait, but whose own run is no operator, has them now:
    its trace reads the plan it inherits (0.7.x's BatchPrefillWithCausalBidirectionalRangesWrapper
    calls its parent's undecorated run() itself, past any dispatcher)."""
    for base in cls.__mro__[1:]:
        for attr, prop in _deferred.get(base, {}).items():
            if not isinstance(cls.__dict__.get(attr), property):
                setattr(cls, attr, prop)


def _make(cls, attr, prop, defer):
    if defer:
        _deferred.setdefault(cls, {})[attr] = prop
    else:
        setattr(cls, attr, prop)


def traced_as_shipped(module_name, class_name):
    """Called by Dynamo, for real, when a trace is about to read a wrapper's state itself (its
    run method traced as FlashInfer ships it): the class's deferred properties are set, and the
    values its live wrappers already hold move behind them."""
    import sys
    cls = getattr(sys.modules.get(module_name), class_name, None)
    if isinstance(cls, type):
        set_deferred(cls)
    return True


def set_deferred(cls=None):
    """Sets the deferred properties of `cls` and its bases (of every class: None)."""
    classes = list(_deferred) if cls is None else [k for k in cls.__mro__ if k in _deferred]
    for klass in classes:
        props = _deferred.pop(klass, None) or {}
        wrappers = [ref() for ref in list(method_boundaries._held.values())]
        wrappers = [w for w in wrappers if isinstance(w, klass)]
        for attr, prop in props.items():
            # Read and removed before the property exists (not through `__dict__`: see
            # method_boundaries.key_of), then set again through it.
            values = []
            for wrapper in wrappers:
                try:
                    value = getattr(wrapper, attr)
                    delattr(wrapper, attr)
                except AttributeError:
                    continue
                values.append((wrapper, value))
            setattr(klass, attr, prop)
            for wrapper, value in values:
                setattr(wrapper, attr, value)


def _shadowed(obj, attr, raw):
    """A property's read of `raw` that found nothing: FlashInfer's value of `attr`, set in
    `obj.__dict__` before the class's property existed, moved behind the property; else the
    AttributeError a read of `attr` gives."""
    try:
        value = obj.__dict__.pop(attr)
    except (KeyError, AttributeError):
        raise AttributeError(f"{type(obj).__name__!r} object has no attribute {attr!r}") from None
    setattr(obj, attr, value)
    return getattr(obj, raw)


def _plan_attributes(cls):
    """The `_plan_info*` attributes the class's own methods assign or read."""
    found: typing.Set[str] = set()
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is None:
            continue
        found.update(n for n in code.co_names
                     if n == PREFIX or (n.startswith(PREFIX + "_") and n[len(PREFIX) + 1:].isalnum()))
    return found


# The wrapper classes (and their subclasses) whose plans a trace has read, and per type whether
# it is one of them: only their plans are kept as tensors. Converting a plan costs more than
# FlashInfer's whole plan() on the host (a tvm_ffi Array is read element by element: about
# 1 us each, 17-24 us a plan measured on CPU), and no trace reads the plans of the wrappers
# whose run methods are operators (hooks/ops/mechanisms/wrapper_runs.py): SGLang's.
_wanted: typing.Set[type] = set()
_converts: typing.Dict[type, bool] = {}
# `_wanting`, as Dynamo calls it: outside the trace, its result a constant.
_wanting_constant: typing.List[typing.Any] = [None]


def _plan_property(attr):
    raw, data = f"_dynafold{attr}", f"_dynafold{attr}_data"

    def get(self):
        # Before the first compile start `_wanting_constant` is empty: eager reads skip the test.
        if _wanting_constant[0] is not None and is_dynamo_compiling():
            # Dynamo calls `_wanting` for real, here, before it reads the tensor below: the
            # class's plans become tensors from now on, this wrapper's at once.
            if _wanting_constant[0](type(self)):
                tensor = getattr(self, data, None)
                if tensor is not None:
                    return tensor
        try:
            return getattr(self, raw)
        except AttributeError:
            return _shadowed(self, attr, raw)

    def set(self, value):
        setattr(self, raw, value)
        if method_boundaries.key_of(self) is None:
            # Once per wrapper, whoever made it (`object.__new__` too): `_wanting` finds the
            # planned wrappers by their keys.
            method_boundaries.hold(self)
        cls = type(self)
        converts = _converts.get(cls)
        if converts is None:
            converts = _converts[cls] = any(issubclass(cls, w) for w in _wanted)
        if converts:
            setattr(self, data, as_data(value))

    def delete(self):
        delattr(self, raw)
        setattr(self, data, None)

    get.__name__ = set.__name__ = delete.__name__ = attr
    return property(get, set, delete, f"FlashInfer's {attr}, graph data under compile (dynafold)")


def as_data(value):
    """An int64 CPU tensor of the plan's ints, or None when it is not a sequence of ints
    (None itself, a backend's own plan object)."""
    if value is None or isinstance(value, (str, bytes, torch.Tensor)):
        return None
    try:
        values = list(value)
    except TypeError:
        return None
    if not all(type(v) is int for v in values):
        return None
    return torch.tensor(values, dtype=torch.int64)


def _wanting(cls):
    """Called by Dynamo, for real, when a trace reads the plan of a `cls` wrapper: from now on
    the plans of `cls` (and its subclasses) are kept as tensors too, and every live one's now
    (the wrappers are found by their keys: hooks/ops/mechanisms/method_boundaries.py)."""
    if any(issubclass(cls, w) for w in _wanted):
        return True
    _wanted.add(cls)
    _converts.clear()
    for ref in list(method_boundaries._held.values()):
        wrapper = ref()
        if not isinstance(wrapper, cls):
            continue
        for attr in _plan_properties(type(wrapper)):
            try:
                setattr(wrapper, f"_dynafold{attr}_data", as_data(getattr(wrapper, attr)))
            except AttributeError:
                continue
    return True


def become_data():
    """At each compile start (Dynamo is imported then): traced reads of a plan can mark their
    class (`_wanting`, Dynamo calls it outside the trace)."""
    if _wanting_constant[0] is None:
        # Marked here, not by a decorator at import: that would import torch._dynamo into
        # every process importing FlashInfer.
        _wanting_constant[0] = torch._dynamo.assume_constant_result(_wanting)


def _plan_properties(cls):
    """The plan attributes `install` made properties, on the class or a base."""
    return {name for klass in cls.__mro__ for name, value in vars(klass).items()
            if isinstance(value, property) and name.startswith(PREFIX)}


# --- JIT modules called without a declared op ---------------------------------------------

# The module being installed -> the classes it brings that call their JIT module's `run`
# themselves: (module, class, the attribute holding the JIT module, the stand-in's class, set
# below). A class defined elsewhere is named with the module that imports it (`_wrapper`
# imports `_fa_common`). FlashInfer's MLA wrapper (0.6.16 `mla/_core.py`
# BatchMLAPagedAttentionWrapper.run; 0.7.2, 0.7.4 `mla/_batch_mla/_backends/_fa_common.py`
# _run_generated_fa, the FA2/FA3 backends) calls `self._cached_module.run(...)`;
# BatchAttention.run (`attention/_core.py`, 0.6.16-0.7.4) `self.module.run(...)`.
HOLDERS: typing.Dict[str, typing.Tuple[typing.Tuple[str, str, str, type], ...]] = {}

# key -> a JIT module set on a holder (kept alive: FlashInfer's loaders cache them anyway).
_modules = {}


def _hold_modules(module, deferred):
    """For the holder classes `module` brings: the attribute holding the JIT module and the
    class's `_plan_info` become properties. Returns a line for the log, or None."""
    import sys
    done = []
    for module_name, class_name, attr, calls in HOLDERS.get(module.__name__, ()):
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if not isinstance(cls, type) or not _calls_module(cls, attr):
            continue
        defer = class_name in deferred
        if not isinstance(cls.__dict__.get(attr), property):
            _make(cls, attr, _module_property(attr, calls), defer)
        for attr in sorted(_plan_attributes(cls)):
            if not isinstance(cls.__dict__.get(attr), property):
                _make(cls, attr, _plan_property(attr), defer)
        done.append(class_name)
    if not done:
        return None
    return f"the JIT modules of {', '.join(done)} called through dynafold's operators"


def _calls_module(cls, attr):
    """Whether a method of `cls` reads `attr` and calls `run` (the shape this hook knows); a
    class that changed is left alone."""
    for value in vars(cls).values():
        # Through FlashInfer's decorators (0.7.4's `flashinfer_api(trace=...)` checks the
        # arguments in a wrapper of its own).
        while getattr(value, "__wrapped__", None) is not None:
            value = value.__wrapped__
        code = getattr(value, "__code__", None)
        if code is not None and attr in code.co_names and "run" in code.co_names:
            return True
    return False


class _HeldModule:
    """A JIT module to a trace, held by its key: the stand-in's own methods call dynafold's
    declarations; any other attribute is the module's own."""

    def __init__(self, key, module):
        self.key = key
        self.module = module

    def __getattr__(self, name):
        return getattr(self.module, name)


class _MlaCalls(_HeldModule):
    """What the MLA wrapper's `_cached_module` is to a trace: `run` is dynafold's declaration
    `mla_run`, given the module's key."""

    def run(self, *args):
        return mla_run(self.key, *args)


class _HolisticCalls(_MlaCalls):
    """What BatchAttention's `module` is to a trace: `run` is `holistic_run`."""

    def run(self, *args):
        return holistic_run(self.key, *args)


def _module_property(attr, stand_in_class):
    raw, calls = f"_dynafold{attr}", f"_dynafold{attr}_calls"

    def get(self):
        if is_dynamo_compiling():
            stand_in = getattr(self, calls, None)
            if stand_in is not None:
                return stand_in
        try:
            return getattr(self, raw)
        except AttributeError:
            return _shadowed(self, attr, raw)

    def set(self, value):
        if value is not None and getattr(self, raw, None) is value:
            return  # plan() sets the same built module at every call
        setattr(self, raw, value)
        setattr(self, calls, None if value is None else _stand_in(stand_in_class, value))

    def delete(self):
        delattr(self, raw)
        setattr(self, calls, None)

    get.__name__ = set.__name__ = delete.__name__ = attr
    return property(get, set, delete,
                    f"FlashInfer's {attr}, called through operators under compile (dynafold)")


# (stand-in class, module key) -> the stand-in: plan() sets the module at every call, and FlashInfer's
# loaders give the same module for the same build.
_stand_ins: typing.Dict[typing.Tuple[type, int], typing.Any] = {}


def _stand_in(stand_in_class, module):
    key = id(module)
    stand_in = _stand_ins.get((stand_in_class, key))
    if stand_in is None or stand_in.module is not module:
        _modules[key] = module
        stand_in = _stand_ins[(stand_in_class, key)] = stand_in_class(key, module)
    return stand_in


def mla_run(
    module: int,
    float_workspace_buffer: torch.Tensor,
    int_workspace_buffer: torch.Tensor,
    plan_info_vec: typing.List[int],
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    kv_indices: torch.Tensor,
    o: torch.Tensor,
    maybe_lse: typing.Optional[torch.Tensor],
    *args,
) -> None:
    """The MLA JIT module's `run` (csrc/batch_mla_run.cu, batch_mla_sm90_run.cu
    BatchMLAPagedAttentionRun): writes `o`, `maybe_lse` when given and the float workspace
    (partial results); reads the int workspace (the plan's arrays). `*args`: the mask mode,
    head count, page size, sm_scale, the LSE base flag, the KV scales, 0.7.x's
    `ckv_scale_arr` (read) and, with the profiler built in, `profiler_buffer` (written): the
    operator declares `*args`'s tensors mutable (hooks/ops/engine/narrowing.py VARIADIC)."""
    _modules[module].run(float_workspace_buffer, int_workspace_buffer, plan_info_vec, q_nope,
                         q_pe, ckv_cache, kpe_cache, kv_indices, o, maybe_lse, *args)


HOLDERS.update({
    "flashinfer.mla._core": (
        ("flashinfer.mla._core", "BatchMLAPagedAttentionWrapper", "_cached_module", _MlaCalls),),
    "flashinfer.mla._batch_mla._wrapper": (
        ("flashinfer.mla._batch_mla._backends._fa_common", "_BatchMLAGeneratedFaMechanics",
         "_cached_module", _MlaCalls),),
    "flashinfer.attention._core": (
        ("flashinfer.attention._core", "BatchAttention", "module", _HolisticCalls),),
})


def holistic_run(
    module: int,
    float_workspace_buffer: torch.Tensor,
    int_workspace_buffer: torch.Tensor,
    plan_info_vec: typing.List[int],
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indices: torch.Tensor,
    o: torch.Tensor,
    maybe_lse: typing.Optional[torch.Tensor],
    *args,
) -> None:
    """BatchAttention's JIT module `run` (csrc/batch_attention.cu BatchPagedAttentionRun):
    writes `o`, `maybe_lse` and the float workspace (partial results); reads the int
    workspace (the plan's arrays). `*args`: mask mode, layout, head counts, page size, the
    scales, the variant's additional tensors (0.7.x's NVFP4 `maybe_k_cache_sf`,
    `maybe_v_cache_sf`, read) and a profiler build's `profiler_buffer` (written): declared
    mutable (hooks/ops/engine/narrowing.py VARIADIC)."""
    _modules[module].run(float_workspace_buffer, int_workspace_buffer, plan_info_vec, q,
                         k_cache, v_cache, kv_indices, o, maybe_lse, *args)


class _PodCalls:
    """What `get_pod_module(...)` is to a trace: `run_tensor` is dynafold's `pod_run`."""

    # The module function the stand-in calls through an operator (`through_operators`).
    CALLS = "run_tensor"

    def __init__(self, key, module):
        self.key = key
        self.module = module

    def run_tensor(self, *args):
        return pod_run(self.key, *args)


class _BatchPodCalls(_PodCalls):
    """What `get_batch_pod_module(...)` is to a trace: `run_tensor` is `batch_pod_run`."""

    def run_tensor(self, *args):
        return batch_pod_run(self.key, *args)


class _QuantizationCalls(_HeldModule):
    """What 0.7.4's `get_quantization_module()` is to a trace: `csf_expand` (which
    expand_csf_scales calls in its body, outside any declared op) is dynafold's `csf_expand`."""

    CALLS = "csf_expand"

    def csf_expand(self, *args):
        return csf_expand(self.key, *args)


class _TrtllmMoeCalls(_HeldModule):
    """What 0.7.x's trtllm-gen fused-MoE namespace (`get_trtllm_moe_sm100_module()`, built by
    the cached `_get_trtllm_moe_sm100_module_impl`) is to a trace:
    `populate_routing_metadata_multi_tile` (which populate_trtllm_moe_routing_metadata_ calls
    in its body, outside any declared op, with the prepared slots' tensors flattened) is
    dynafold's `trtllm_moe_populate_routing_metadata`; every other attribute (the declared
    MoE ops, the runners) is the namespace's own."""

    CALLS = "populate_routing_metadata_multi_tile"

    def populate_routing_metadata_multi_tile(self, *args):
        return trtllm_moe_populate_routing_metadata(self.key, *args)


class _AlphaMoeCalls(_HeldModule):
    """What 0.7.x's AlphaMoE NVFP4 module (`get_alphamoe_nvfp4_sm100_module()`) is to a trace:
    `nvfp4_complete_routed_finalize_op` (which alphamoe_nvfp4_finalize_deferred calls in its
    body, outside any declared op, with the deferred call's held tensors) is dynafold's
    `alphamoe_complete_routed_finalize`; every other attribute is the module's own."""

    CALLS = "nvfp4_complete_routed_finalize_op"

    def nvfp4_complete_routed_finalize_op(self, *args):
        return alphamoe_complete_routed_finalize(self.key, *args)


# (module, loader) -> the stand-in class of what it returns, under compile.
LOADERS: typing.Dict[typing.Tuple[str, str], typing.Type[typing.Any]] = {
    ("flashinfer.fused_moe.alphamoe_nvfp4_sm100", "get_alphamoe_nvfp4_sm100_module"):
        _AlphaMoeCalls,
    ("flashinfer.pod", "get_pod_module"): _PodCalls,
    ("flashinfer.pod", "get_batch_pod_module"): _BatchPodCalls,
    ("flashinfer.quantization.packbits", "get_quantization_module"): _QuantizationCalls,
    ("flashinfer.fused_moe.core", "_get_trtllm_moe_sm100_module_impl"): _TrtllmMoeCalls,
}


def through_operators(loader, built):
    """What a cached loader's stand-in gives a trace: for a loader in LOADERS whose result has
    the function called (its stand-in's CALLS: `run_tensor`, `csf_expand`), a stand-in calling
    dynafold's declaration; else `built` itself (0.6.16's and 0.7.2's quantization modules
    have no `csf_expand`)."""
    wrapped = getattr(loader, "__wrapped__", loader)
    calls = LOADERS.get((getattr(wrapped, "__module__", ""),
                         getattr(wrapped, "__qualname__", "")))
    if calls is None or not hasattr(built, calls.CALLS):
        return built
    key = id(built)
    _modules[key] = built
    return calls(key, built)


def pod_run(
    module: int,
    q_p: torch.Tensor,
    k_p: torch.Tensor,
    v_p: torch.Tensor,
    tmp_p: torch.Tensor,
    o_p: torch.Tensor,
    maybe_lse_p: typing.Optional[torch.Tensor],
    mask_mode_code_p: int,
    layout_p: int,
    window_left_p: int,
    maybe_custom_mask_p: typing.Optional[torch.Tensor],
    maybe_alibi_slopes_p: typing.Optional[torch.Tensor],
    logits_soft_cap_p: float,
    sm_scale_p: float,
    rope_rcp_scale_p: float,
    rope_rcp_theta_p: float,
    float_workspace_buffer_d: torch.Tensor,
    int_workspace_buffer_d: torch.Tensor,
    plan_info_vec: typing.List[int],
    q_d: torch.Tensor,
    paged_k_cache_d: torch.Tensor,
    paged_v_cache_d: torch.Tensor,
    qo_indptr_d: torch.Tensor,
    paged_kv_indptr_d: torch.Tensor,
    paged_kv_indices_d: torch.Tensor,
    paged_kv_last_page_len_d: torch.Tensor,
    o_d: torch.Tensor,
    maybe_lse_d: typing.Optional[torch.Tensor],
    mask_mode_code_d: int,
    layout_d: int,
    window_left_d: int,
    maybe_custom_mask_d: typing.Optional[torch.Tensor],
    maybe_mask_indptr_d: typing.Optional[torch.Tensor],
    maybe_alibi_slopes_d: typing.Optional[torch.Tensor],
    logits_soft_cap_d: float,
    sm_scale_d: float,
    rope_rcp_scale_d: float,
    rope_rcp_theta_d: float,
    enable_pdl: bool,
) -> None:
    """The POD JIT module's `pod_with_kv_cache_tensor` (csrc/pod.cu, the same parameters in
    0.6.16-0.7.4): writes `o_p`, `maybe_lse_p`, the prefill scratch `tmp_p`, `o_d`,
    `maybe_lse_d` and the decode float workspace (docs/op-audit)."""
    _modules[module].run_tensor(
        q_p, k_p, v_p, tmp_p, o_p, maybe_lse_p, mask_mode_code_p, layout_p, window_left_p,
        maybe_custom_mask_p, maybe_alibi_slopes_p, logits_soft_cap_p, sm_scale_p,
        rope_rcp_scale_p, rope_rcp_theta_p, float_workspace_buffer_d, int_workspace_buffer_d,
        plan_info_vec, q_d, paged_k_cache_d, paged_v_cache_d, qo_indptr_d, paged_kv_indptr_d,
        paged_kv_indices_d, paged_kv_last_page_len_d, o_d, maybe_lse_d, mask_mode_code_d,
        layout_d, window_left_d, maybe_custom_mask_d, maybe_mask_indptr_d,
        maybe_alibi_slopes_d, logits_soft_cap_d, sm_scale_d, rope_rcp_scale_d,
        rope_rcp_theta_d, enable_pdl)


def batch_pod_run(
    module: int,
    float_workspace_buffer_p: torch.Tensor,
    int_workspace_buffer_p: torch.Tensor,
    plan_info_vec_p: typing.List[int],
    q_p: torch.Tensor,
    paged_k_cache_p: torch.Tensor,
    paged_v_cache_p: torch.Tensor,
    qo_indptr_p: torch.Tensor,
    paged_kv_indptr_p: torch.Tensor,
    paged_kv_indices_p: torch.Tensor,
    paged_kv_last_page_len_p: torch.Tensor,
    o_p: torch.Tensor,
    maybe_lse_p: typing.Optional[torch.Tensor],
    mask_mode_code_p: int,
    layout_p: int,
    window_left_p: int,
    maybe_custom_mask_p: typing.Optional[torch.Tensor],
    maybe_mask_indptr_p: typing.Optional[torch.Tensor],
    maybe_alibi_slopes_p: typing.Optional[torch.Tensor],
    logits_soft_cap_p: float,
    sm_scale_p: float,
    rope_rcp_scale_p: float,
    rope_rcp_theta_p: float,
    float_workspace_buffer_d: torch.Tensor,
    int_workspace_buffer_d: torch.Tensor,
    plan_info_vec_d: typing.List[int],
    q_d: torch.Tensor,
    paged_k_cache_d: torch.Tensor,
    paged_v_cache_d: torch.Tensor,
    qo_indptr_d: torch.Tensor,
    paged_kv_indptr_d: torch.Tensor,
    paged_kv_indices_d: torch.Tensor,
    paged_kv_last_page_len_d: torch.Tensor,
    o_d: torch.Tensor,
    maybe_lse_d: typing.Optional[torch.Tensor],
    mask_mode_code_d: int,
    layout_d: int,
    window_left_d: int,
    maybe_custom_mask_d: typing.Optional[torch.Tensor],
    maybe_mask_indptr_d: typing.Optional[torch.Tensor],
    maybe_alibi_slopes_d: typing.Optional[torch.Tensor],
    logits_soft_cap_d: float,
    sm_scale_d: float,
    rope_rcp_scale_d: float,
    rope_rcp_theta_d: float,
    enable_pdl: bool,
    sm_aware_sched: torch.Tensor,
) -> None:
    """The batch POD JIT module's `batch_pod_with_kv_cache_tensor` (csrc/batch_pod.cu, the
    same parameters in 0.6.16-0.7.4): writes `o_p`, `maybe_lse_p`, `o_d`, `maybe_lse_d`, both
    float workspaces (partial results) and the SM-aware scheduler's counters
    `sm_aware_sched` (atomicAdd, include/flashinfer/attention/batch_pod.cuh)."""
    _modules[module].run_tensor(
        float_workspace_buffer_p, int_workspace_buffer_p, plan_info_vec_p, q_p,
        paged_k_cache_p, paged_v_cache_p, qo_indptr_p, paged_kv_indptr_p, paged_kv_indices_p,
        paged_kv_last_page_len_p, o_p, maybe_lse_p, mask_mode_code_p, layout_p, window_left_p,
        maybe_custom_mask_p, maybe_mask_indptr_p, maybe_alibi_slopes_p, logits_soft_cap_p,
        sm_scale_p, rope_rcp_scale_p, rope_rcp_theta_p, float_workspace_buffer_d,
        int_workspace_buffer_d, plan_info_vec_d, q_d, paged_k_cache_d, paged_v_cache_d,
        qo_indptr_d, paged_kv_indptr_d, paged_kv_indices_d, paged_kv_last_page_len_d, o_d,
        maybe_lse_d, mask_mode_code_d, layout_d, window_left_d, maybe_custom_mask_d,
        maybe_mask_indptr_d, maybe_alibi_slopes_d, logits_soft_cap_d, sm_scale_d,
        rope_rcp_scale_d, rope_rcp_theta_d, enable_pdl, sm_aware_sched)


def csf_expand(
    module: int,
    fixed: torch.Tensor,
    exceptions: torch.Tensor,
    exc_offsets: torch.Tensor,
    token_selected_experts: typing.Optional[torch.Tensor],
    out: torch.Tensor,
    layout: int,
    swap_row_halves: bool,
    local_expert_offset: int,
) -> None:
    """0.7.4's quantization JIT module `csf_expand` (csrc/csf_scales.cu): expands the CSF
    slabs into `out` (uint8), only the selected experts' matrices when
    `token_selected_experts` is given (the rest keep their bytes); everything else is read
    (docs/op-audit)."""
    _modules[module].csf_expand(fixed, exceptions, exc_offsets, token_selected_experts, out,
                                layout, swap_row_halves, local_expert_offset)


def trtllm_moe_populate_routing_metadata(
    module: int,
    topk_ids: torch.Tensor,
    num_experts: int,
    top_k: int,
    local_expert_offset: int,
    num_local_experts: int,
    tile_tokens_dims: typing.List[int],
    flat_routing_metadata: typing.List[torch.Tensor],
    routing_input_mode: int,
    topk_weights: typing.Optional[torch.Tensor],
) -> None:
    """0.7.x's trtllm-gen fused-MoE JIT function `trtllm_moe_populate_routing_metadata_multi_tile`
    (csrc/trtllm_fused_moe_kernel_launcher.cu): fills every prepared tile slot's nine tensors
    (`flat_routing_metadata`, TrtllmMoERoutingMetadata.flat_tensors(): the padded count, the
    permutation maps, the expert weights, histogram, per-expert counts and CTA maps) from the
    live `topk_ids` (and, unpacked, `topk_weights`, copied into the slots' expert weights);
    `topk_ids` and `topk_weights` are read (docs/op-audit)."""
    _modules[module].populate_routing_metadata_multi_tile(
        topk_ids, num_experts, top_k, local_expert_offset, num_local_experts, tile_tokens_dims,
        flat_routing_metadata, routing_input_mode, topk_weights)


def alphamoe_complete_routed_finalize(
    module: int,
    route_accumulator: torch.Tensor,
    route_experts: torch.Tensor,
    output2_scale_scalar: torch.Tensor,
    topk_weights: torch.Tensor,
    seed: torch.Tensor,
    out: torch.Tensor,
    top_k: int,
    routed_scaling_factor: float,
    route_id: int,
) -> None:
    """0.7.x's AlphaMoE NVFP4 JIT function `nvfp4_complete_routed_finalize_op`
    (csrc/alphamoe_nvfp4_sm100.cu RunCompleteRoutedFinalize): writes `out` = `seed` plus the
    weighted route contributions, element by element (`out` may be `seed` itself: the
    function's default, in place); every other tensor is read (docs/op-audit)."""
    _modules[module].nvfp4_complete_routed_finalize_op(
        route_accumulator, route_experts, output2_scale_scalar, topk_weights, seed, out,
        top_k, routed_scaling_factor, route_id)


# --- Python objects around an operator ------------------------------------------------------

# 0.7.x's Kimi-K3 fused router (fused_moe/kimi_k3_fused_router.py) returns a KimiK3RoutePlan
# NamedTuple and takes one (`plan: Optional[Any]`, the caller's buffers), neither of which an
# operator schema can say; its body checks data_ptr() alignment and that no two tensors
# overlap (no trace can read an address). Under compile the public function is
# `kimi_k3_fused_router` below (hooks/ops/engine/wake.py REBUILT): the plan's eight tensors go to
# dynafold's declarations and the NamedTuple is made again around them, as eagerly.
KIMI_K3_BACKEND = "flashinfer.experimental.kimi_k3_fused_router.cake_backend"
KIMI_K3_PUBLIC = "flashinfer.fused_moe.kimi_k3_fused_router"


def _kimi_k3_router():
    import sys
    return sys.modules[KIMI_K3_PUBLIC].kimi_k3_fused_router


def kimi_k3_route(
    logits: torch.Tensor,
    bias: torch.Tensor,
    block_m: int,
) -> typing.Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                  torch.Tensor, torch.Tensor, torch.Tensor]:
    """FlashInfer's kimi_k3_fused_router without a plan: the eight tensors of the plan it
    allocates (allocate_kimi_k3_route_plan) and its kernel fills, in KimiK3RoutePlan's order;
    `logits` and `bias` are read (docs/op-audit)."""
    return tuple(_kimi_k3_router()(logits, bias, block_m=block_m))


def kimi_k3_route_into(
    logits: torch.Tensor,
    bias: torch.Tensor,
    block_m: int,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    sorted_token_ids: torch.Tensor,
    expert_ids: torch.Tensor,
    num_tokens_post_padded: torch.Tensor,
    expert_counts: torch.Tensor,
    expert_offsets: torch.Tensor,
    expert_scatter_offsets: torch.Tensor,
) -> None:
    """FlashInfer's kimi_k3_fused_router with the caller's plan, given as its eight tensors:
    the kernel writes them (capacity past the valid extent keeps its bytes) and reads
    `logits` and `bias` (docs/op-audit)."""
    import sys
    plan = sys.modules[KIMI_K3_BACKEND].KimiK3RoutePlan(
        topk_weights, topk_ids, sorted_token_ids, expert_ids, num_tokens_post_padded,
        expert_counts, expert_offsets, expert_scatter_offsets)
    _kimi_k3_router()(logits, bias, block_m=block_m, plan=plan)


def kimi_k3_fused_router_through(plan_class):
    """What Dynamo traces for FlashInfer's kimi_k3_fused_router: its own checks of what is
    not a tensor (the backend, the plan's type, as its body and _validate_plan raise them),
    then one of the operators above, and the plan made again (or the caller's returned, as
    the runner returns the plan it was bound to)."""

    def kimi_k3_fused_router(logits, bias, *, block_m=8, plan=None, backend="cake"):
        if backend != "cake":
            raise ValueError("the Kimi-K3 fused router currently supports backend='cake'")
        if plan is None:
            return plan_class(*kimi_k3_route(logits, bias, block_m))
        if not isinstance(plan, plan_class):
            raise TypeError(f"plan must be a KimiK3RoutePlan, got {type(plan).__name__}")
        kimi_k3_route_into(logits, bias, block_m, *plan)
        return plan

    return kimi_k3_fused_router


# single_decode_with_kv_cache_with_jit_module and single_prefill_with_kv_cache_with_jit_module
# (decode.py, prefill.py; the same body in 0.6.16, 0.7.2 and 0.7.4) take the JIT module as an
# argument (`jit_module: Any`, what a gen_*_module factory's build_and_load() gave the caller)
# and call its tvm_ffi `run` in their bodies, which no trace can enter. Under compile Dynamo
# traces `single_decode_through` / `single_prefill_through` instead: FlashInfer's body, its
# allocations and its constants (read from the module), with the call to `run` made through
# dynafold's declaration keyed by the module. The key is taken at trace time by `_hold`
# (`assume_constant_result`: Dynamo calls it on the real object and guards the graph on that
# object's identity, so another module compiles a graph of its own, never reuses this one).
# Nothing here constructs an object in the trace: a class of dynafold's, or SimpleNamespace on
# torch 2.14, is refused in a substituted function's trace.


def _holds_objects():
    """Whether this torch's `assume_constant_result` passes a Python object through (guarded
    on its identity; torch 2.14 on) rather than asking it for a constant, which would stop
    the trace in dynafold's code instead of FlashInfer's. Called at a compile's start, when
    Dynamo is imported: `_hold` is marked then, not at this module's import, which would
    import torch._dynamo into every process that imports FlashInfer."""
    from torch._dynamo.variables import functions
    convert = getattr(functions, "invoke_and_store_as_constant", None)
    try:
        takes = convert is not None and "UserDefinedObjectVariable" in inspect.getsource(
            convert)
    except (OSError, TypeError):
        return False
    if takes:
        torch.compiler.assume_constant_result(_hold)
    return takes


def _hold(obj):
    """The key of a Python object a caller passes in (a JIT module, a prepared weight), noted
    so the operator finds it; called by Dynamo while it traces, on the real object. Held
    weakly where the object allows it (hooks/ops/mechanisms/method_boundaries.py `hold`: a prepared weight's
    device tensors are freed with it, and a graph whose object is gone says so), else by its
    id (a tvm_ffi module takes no weak reference; FlashInfer's loaders keep theirs anyway)."""
    key = method_boundaries.hold(obj)
    if key is None:
        key = id(obj)
        _modules[key] = obj
    return key


def held(key):
    """The object `_hold` gave `key` (int() specializes a SymInt key, as for a constant)."""
    key = int(key)
    if key in _modules:
        return _modules[key]
    return method_boundaries.held(key)


# The signatures the bodies below copy (names, kinds, defaults), 0.6.3 to 0.7.4; a release
# that differs is traced as shipped.
_JIT_MODULE_SIGNATURES = {
    "single_decode_with_kv_cache_with_jit_module": (
        ("jit_module", "q", "k", "v", "*args"),
        {"kv_layout": "NHD", "window_left": -1, "return_lse": False}),
    "single_prefill_with_kv_cache_with_jit_module": (
        ("jit_module", "q", "k", "v", "*args"),
        {"kv_layout": "NHD", "mask_mode": 0, "window_left": -1, "return_lse": False}),
}


# 0.6.3 (SGLang 0.5.9's pin) takes the split-KV scratch from FlashInfer's per-device cache,
# `_get_cache_buf("single_decode_with_kv_cache_tmp", 32 * 1024 * 1024, device)`; from 0.6.11 the
# body allocates it fresh per call, `torch.empty(SINGLE_KERNEL_TMP_SIZE)` (32 MiB too), so the
# kernel carries nothing in it from one call to the next and a fresh buffer of that size serves.
_CACHED_TMP = re.compile(r'_get_cache_buf\(\s*"single_(decode|prefill)_with_kv_cache_tmp",\s*'
                         r'32 \* 1024 \* 1024\b')


def _tmp_size(public):
    size = public.__globals__.get("SINGLE_KERNEL_TMP_SIZE")
    if size is not None:
        return int(size)
    if _CACHED_TMP.search(inspect.getsource(public)):
        return 32 * 1024 * 1024
    raise RuntimeError(f"{public.__name__}'s scratch changed")


def _constants(public):
    """FlashInfer's constants the body reads: the split-KV scratch size and the layout codes.
    Raises when `public` is not the function this module copies."""
    positional, keywords = _JIT_MODULE_SIGNATURES[public.__name__]
    params = list(inspect.signature(public).parameters.values())
    names = tuple(("*" + p.name) if p.kind is p.VAR_POSITIONAL else p.name
                  for p in params if p.kind is not p.KEYWORD_ONLY)
    found = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    if names != positional or found != keywords:
        raise RuntimeError(f"{public.__name__}'s signature changed")
    layouts = {layout.name: int(layout.value) for layout in public.__globals__["TensorLayout"]}
    return _tmp_size(public), layouts


def single_decode_through(public):
    """What Dynamo traces instead of single_decode_with_kv_cache_with_jit_module."""
    tmp_size, layouts = _constants(public)

    def single_decode_with_kv_cache_with_jit_module(
            jit_module, q, k, v, *args, kv_layout="NHD", window_left=-1, return_lse=False):
        tmp = torch.empty(tmp_size, dtype=torch.uint8, device=q.device)
        o = torch.empty_like(q)
        lse = (torch.empty((q.size(0)), dtype=torch.float32, device=q.device)
               if return_lse else None)
        single_decode_run(_hold(jit_module), q, k, v, tmp, o, lse, layouts[kv_layout],
                          window_left, *args)
        return o

    return single_decode_with_kv_cache_with_jit_module


def single_prefill_through(public):
    """What Dynamo traces instead of single_prefill_with_kv_cache_with_jit_module."""
    tmp_size, layouts = _constants(public)

    def single_prefill_with_kv_cache_with_jit_module(
            jit_module, q, k, v, *args, kv_layout="NHD", mask_mode=0, window_left=-1,
            return_lse=False):
        tmp = torch.empty(tmp_size, dtype=torch.uint8, device=q.device)
        o = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=q.dtype, device=q.device)
        lse = (torch.empty((q.size(0), q.size(1)), dtype=torch.float32, device=q.device)
               if return_lse else None)
        single_prefill_run(_hold(jit_module), q, k, v, tmp, o, lse, mask_mode,
                           layouts[kv_layout], window_left, *args)
        return (o, lse) if return_lse else o

    return single_prefill_with_kv_cache_with_jit_module


def single_decode_run(
    module: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tmp: torch.Tensor,
    o: torch.Tensor,
    maybe_lse: typing.Optional[torch.Tensor],
    layout: int,
    window_left: int,
    *args,
) -> None:
    """A single-decode JIT module's `run` (csrc/single_decode.cu single_decode_with_kv_cache):
    writes `o`, `maybe_lse` when given and `tmp` (the split-KV partial results); reads q, k and
    v. `*args`: the variant's additional tensors and scalars (alibi slopes, soft cap, sm_scale,
    rope reciprocals for the standard variants), its tensors declared mutable
    (hooks/ops/engine/narrowing.py VARIADIC)."""
    held(module).run(q, k, v, tmp, o, maybe_lse, layout, window_left, *args)


def single_prefill_run(
    module: int,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tmp: torch.Tensor,
    o: torch.Tensor,
    maybe_lse: typing.Optional[torch.Tensor],
    mask_mode: int,
    layout: int,
    window_left: int,
    *args,
) -> None:
    """A single-prefill JIT module's `run` (csrc/single_prefill.cu
    single_prefill_with_kv_cache): writes `o`, `maybe_lse` when given and `tmp`; reads q, k and
    v. `*args`: the variant's additional tensors (custom mask, alibi slopes, FP8 block scales)
    and scalars, its tensors declared mutable (hooks/ops/engine/narrowing.py VARIADIC)."""
    held(module).run(q, k, v, tmp, o, maybe_lse, mask_mode, layout, window_left, *args)


# kimi_k3_fp8_projection (0.7.4 gemm/kimi_k3_fp8_projection.py -> experimental/
# kimi_k3_fp8_projection/cake_backend.py) takes `prepared` (a PreparedProjectionWeight: the
# requantized weight and scale tiles, its shape record, a scale-tile cache filled on first use)
# and `workspace` (a ProjectionWorkspace, or None to allocate one), Python objects no schema can
# say, and chooses its programs from data_ptr() alignment. Under compile Dynamo traces
# `kimi_k3_projection_through` instead: both objects held by key (`_hold`), the whole call
# dynafold's declaration `kimi_k3_project`, which calls FlashInfer's function at run time.
KIMI_K3_PROJECTION = "flashinfer.gemm.kimi_k3_fp8_projection"


def kimi_k3_project(
    x: torch.Tensor,
    prepared: int,
    out: typing.Optional[torch.Tensor] = None,
    workspace: typing.Optional[int] = None,
) -> torch.Tensor:
    """FlashInfer's kimi_k3_fp8_projection with its objects by key: `out[:, :n_valid] =
    bf16(x @ dequant(weight).T)`, into the caller's `out` when given (only its n_valid
    columns written), else a fresh bfloat16 (M, n_valid); `x` is read; the workspace's buffers
    are scratch of this call (docs/op-audit)."""
    import sys
    public = sys.modules[KIMI_K3_PROJECTION].kimi_k3_fp8_projection
    return public(x, held(prepared), out,
                  workspace=None if workspace is None else held(workspace))


def kimi_k3_projection_through(public):
    """What Dynamo traces instead of kimi_k3_fp8_projection."""
    params = inspect.signature(public).parameters
    if list(params) != ["x", "prepared", "out", "workspace", "backend"]:
        raise RuntimeError("kimi_k3_fp8_projection's signature changed")

    def kimi_k3_fp8_projection(x, prepared, out=None, *, workspace=None, backend="cake"):
        if backend != "cake":
            raise ValueError("the Kimi-K3 FP8 projection currently supports backend='cake'")
        workspace_key = None if workspace is None else _hold(workspace)
        return kimi_k3_project(x, _hold(prepared), out, workspace_key)

    return kimi_k3_fp8_projection


def _held_argument(public_name, through):
    """REBUILT's entry for a public function taking Python objects `_hold` keeps: what
    `through` makes of FlashInfer's function, where this torch lets `_hold` take them."""
    def rebuilt(module):
        if not _holds_objects():
            raise RuntimeError("this torch's assume_constant_result takes no Python object")
        return through(inspect.unwrap(getattr(module, public_name)))
    return rebuilt


# (module, public function) -> (the module holding the Python object's class, or the public
# function's own for one taking objects `_hold` keeps; a function of that module giving what
# Dynamo traces instead of the public function).
REBUILT = {
    (KIMI_K3_PUBLIC, "kimi_k3_fused_router"): (
        KIMI_K3_BACKEND, lambda backend: kimi_k3_fused_router_through(backend.KimiK3RoutePlan)),
    **{(f"flashinfer.{kind}", f"single_{kind}_with_kv_cache_with_jit_module"): (
        f"flashinfer.{kind}", _held_argument(f"single_{kind}_with_kv_cache_with_jit_module",
                                             through))
       for kind, through in (("decode", single_decode_through),
                             ("prefill", single_prefill_through))},
    (KIMI_K3_PROJECTION, "kimi_k3_fp8_projection"): (
        KIMI_K3_PROJECTION, _held_argument("kimi_k3_fp8_projection", kimi_k3_projection_through)),
}
