"""The statuses a rule gives without a trace: out of scope, and not compilable by design.

Each verdict carries its reason. "By design" quotes FlashInfer where its docstring says the
op cannot be compiled; where a builder exists the op is traced anyway, and a by-design op
that traces is reported as tracing (the rule was wrong, the trace wins)."""
import inspect
import re

# FlashInfer's own words, found in docstrings.
_NOT_COMPILABLE = [
    re.compile(r"``torch\.compile`` is not supported for this function because it's data "
               r"dependent"),
    re.compile(r"cannot be used in Cuda Graph or in ``torch\.compile``"),
]
PLAN_REASON = ("host synchronisation: plan() reads the batch's index pointers on the host and "
               "schedules there; FlashInfer: \"The :meth:`plan` method cannot be used in Cuda "
               "Graph or in ``torch.compile``\" (decode.py); servers plan outside the compiled "
               "forward and compile run()")
PLAN_METHODS = {"plan", "begin_forward", "end_forward"}
PLAN_FUNCTIONS = re.compile(r"(^|\.)(fast_decode_plan|\w+_plan|prepare_\w*decode\w*|"
                            r"compute_paged_mqa_logits_schedule)$")
# Ops whose result or path depends on a tensor's values read on the host, found by their
# trace (a data-dependent branch), with where FlashInfer does it.
DATA_DEPENDENT = {
    "make_nvfp4_global_scale": "data-dependent branch: without a given scale it reduces the "
    "input's amax and branches on `amax == 0` on the host (nvfp4_quantization_utils.py); a "
    "server computes global scales at load or calibration time",
    # sparse.py:185-191 (0.6.16-0.7.4): `for i in range(MB): out[indptr[i] * R * C : ...] =
    # mask[indptr[i] : indptr[i + 1]]...`, called by BlockSparseAttentionWrapper.plan().
    "convert_bsr_mask_layout": "data-dependent slicing: it copies the mask block row by block "
    "row between bounds read from `indptr`'s values on the host (sparse.py: `mask[indptr[i] : "
    "indptr[i + 1]]`), one host read per row; FlashInfer calls it from "
    "BlockSparseAttentionWrapper.plan(), outside the forward",
    # fp4_quantization.py (0.7.4 :2412-:2415): `k_gs_ret = (1.0 / k_global_sf).item()`, v's,
    # returned; its signature's result holds two `float`s.
    "nvfp4_quantize_paged_kv_cache": "host synchronisation: its declared result includes the "
    "global scales as Python floats (`Tuple[..., float, float]`), read back from the device in "
    "every call ((1.0 / k_global_sf).item() and v's; without given scales the caches' amax "
    "too); an operator cannot return a host float, and a server quantizes a cache with it "
    "outside the forward",
}
# Ops whose own API contract no compiled graph can keep, by public name: what the call takes
# or gives back cannot be a graph value, by FlashInfer's design (not a limit of dynafold's).
# Lines are 0.7.4's; 0.7.2 has the same bodies.
CONTRACTS = {
    # cake_minimax_h3.py: each class's docstring says "The tensors passed to :meth:`run` must
    # be the same objects supplied here" (:46, :240, :478); __init__ keeps them
    # (`self._bound_tensors`, :84, :285, :502) and prepares the Cake programs over them (:100,
    # :307, :510); run() raises ValueError unless each tensor `is` the one bound (:199-:208,
    # :441-:450, :574-:583), then calls `self._prepared()` with no argument (:209, :451,
    # :584), which launches the programs on the argument tuples fixed at preparation
    # (diffusion_ops/cake_minimax_h3_qkv_pack.py:266-:269 `self._module.run(*self._args)`;
    # cake_minimax_h3_mxfp8.py:233, cake_minimax_h3_nvfp4.py:365 the same).
    **{name: "bound to the caller's tensor objects: the object is prepared over the caller's "
       "very tensors and run() accepts only those same objects (FlashInfer: \"The tensors "
       "passed to :meth:`run` must be the same objects supplied here\"; an `is` check, else "
       "ValueError), then launches programs that read and write those tensors only; in a "
       "compiled graph an operator receives the graph's values (functionalized copies, fresh "
       "buffers), never the caller's objects, so no compiled call can keep the contract. Call "
       "run() outside the compiled region (eagerly, or from a function marked "
       "torch.compiler.disable, a graph break), copying the step's inputs into the tensors it "
       "was prepared with; FlashInfer says run() can be captured in a CUDA graph as it is"
       for name in ("MiniMaxH3Mxfp8PreAttention.run", "MiniMaxH3Nvfp4PreAttention.run",
                    "MiniMaxH3QkvQuantizePack.run")},
    # fused_moe/alphamoe_nvfp4_sm100.py: _alphamoe_complete_route_id (:1655) picks the route
    # from the tensors' data_ptr() alignment (`w1_scale_prepared.data_ptr() % 16`, `out.
    # data_ptr() % 16`, the scales' `% 4`: :1700, :1754-:1757, :1779-:1806), called per call
    # (:2267); a route outside _DEFERRABLE_COMPLETE_ROUTES (:2145) finishes `out` and returns
    # no accumulators (:2288-:2331), route 9 bfloat16 ones, the others float32 (:2338-:2419);
    # AlphaMoeNvfp4DeferredOutput keeps `self.route_id = int(route_id)` (:2179), by which
    # alphamoe_nvfp4_finalize_deferred launches. Its docstring (:2484): "the arithmetic equals
    # the existing routed entry given the same seed".
    "fused_moe.alphamoe_nvfp4_routed_moe_deferred": "a result that is no graph value: its "
    "AlphaMoeNvfp4DeferredOutput holds the route id as a Python int, and its form (float32 or "
    "bfloat16 route accumulators, or none with the caller's `out` already finished) follows a "
    "route chosen per call from the tensors' data_ptr() alignment, while an operator returns "
    "tensors of a form fixed when traced, where no address can be read. In a compiled forward "
    "call fused_moe.alphamoe_nvfp4_routed_moe with the seed (the shared-expert output) already "
    "in `out` and accumulate=True, which FlashInfer says computes the same arithmetic and "
    "which traces; or call this and alphamoe_nvfp4_finalize_deferred outside the compiled "
    "region",
}
# Attention-sink wrappers' inherited deprecated forward(): no place for the sink tensor.
SINK_WRAPPERS = re.compile(r"^Batch\w*AttentionSinkWrapper\.forward(_return_lse)?$")
HOUSEKEEPING = {"reset_workspace_buffer", "workspace_size"}
# Set-up a server does once, outside the compiled forward, with FlashInfer's words for it.
SETUP = {
    "trtllm_moe_allocate_routing_metadata": "allocation of graph-stable routing buffers "
    "(\"Allocate graph-stable TRT-LLM routing metadata\", core.py): made once before CUDA "
    "graph capture; the forward fills them with populate_trtllm_moe_routing_metadata_",
    "trtllm_moe_allocate_routing_metadata_multi_tile": "allocation of graph-stable routing "
    "buffers for several tiles (\"Allocate graph-stable TRT-LLM routing metadata\", core.py): "
    "made once before CUDA graph capture; the forward fills them with "
    "populate_trtllm_moe_routing_metadata_",
    "fill_w_ptr": "adapter preparation: writes the LoRA banks' device addresses into the "
    "pointer table the BGMV kernels read (bgmv_moe.py), done when adapters load (its "
    "prepared wrapper does so at set-up); bgmv_moe, which calls it per call, has its own row",
}
WEIGHT_PREP = re.compile(r"(^|\.)(prepare_\w+|shuffle_matrix_\w+|reorder_rows_for_gated_act_gemm|"
                         r"\w*interleave\w*_weights\w*|interleave_\w+|preprocess_\w+|"
                         r"pad_\w+_weights|convert_to_block_layout|encode_\w+|"
                         r"deinterleave_gated_rows)$")


def _is_runner(cls):
    return any(k.__name__ == "TunableRunner" for k in getattr(cls, "__mro__", ()))


def _is_autograd(cls):
    return any(k.__name__ == "Function" and k.__module__.startswith("torch.autograd")
               for k in getattr(cls, "__mro__", ()))


def _owner(fn):
    """The class a method was found on (its qualified name's first part), or None."""
    qual = getattr(fn, "__qualname__", "")
    module = inspect.getmodule(fn)
    if "." not in qual or module is None:
        return None
    return getattr(module, qual.split(".")[0], None)


def verdict(name, entry):
    """("out of scope" | "by design", reason), or None: the op is to be traced."""
    fn = entry["object"]
    method = name.rsplit(".", 1)[-1]
    owner = _owner(fn) if entry["kind"] == "method" else None
    if owner is not None and _is_runner(owner):
        return ("out of scope", f"a method of {owner.__name__}, an autotuner runner "
                "(TunableRunner): its module's __all__ exports the class, but only FlashInfer's "
                "AutoTuner calls it (choose_one: tactics, profiling, then forward with the "
                "chosen tactic) from inside the public op that owns it, which has its own row; "
                "no user code calls a runner")
    if owner is not None and _is_autograd(owner):
        return ("out of scope", "a torch.autograd.Function's method: autograd calls it, "
                "through the public function that applies it")
    if SINK_WRAPPERS.match(name):
        return ("out of scope", "the attention-sink wrappers inherit FlashInfer's deprecated "
                "forward() from the paged wrapper, which has no place for the sink tensor and "
                "sm_scale the sink variant's JIT kernel reads: called as its signature allows "
                "it crashes in paged_run on the H200 (segfault, "
                "docs/gpu-runs/gpu-run-2026-12-01-api-status-4), eagerly; the wrappers' run() "
                "is the call (it has its own row, traced)")
    if method.startswith("supports_"):
        return ("out of scope", "a capability query (returns whether the op supports these "
                "tensors), not an op: a server asks it once, outside any compiled forward")
    if method in HOUSEKEEPING or method.endswith("_workspace_size"):
        return ("out of scope", "wrapper set-up (workspace buffers), called once outside the "
                "forward")
    if "backward" in name or "_train" in entry["module"] or "_train" in name:
        return ("out of scope", "a training kernel (forward/backward for autograd); dynafold "
                "targets serving forwards")
    if name.rsplit(".", 1)[-1] in SETUP:
        return ("out of scope", SETUP[name.rsplit(".", 1)[-1]])
    if name.endswith("_host"):
        return ("out of scope", "a host (CPU) reference implementation, not a CUDA op")
    if WEIGHT_PREP.search(name) and not PLAN_FUNCTIONS.search(name):
        return ("out of scope", "weight or adapter preparation at model load, outside any "
                "compiled forward")
    if name in CONTRACTS:
        return ("by design", CONTRACTS[name])
    if name.rsplit(".", 1)[-1] in DATA_DEPENDENT:
        return ("by design", DATA_DEPENDENT[name.rsplit(".", 1)[-1]])
    doc = inspect.getdoc(fn) or ""
    for pattern in _NOT_COMPILABLE:
        found = pattern.search(doc)
        if found:
            return ("by design", f"FlashInfer: \"{found.group(0)}\"")
    if method in PLAN_METHODS or PLAN_FUNCTIONS.search(name):
        return ("by design", PLAN_REASON)
    return None
