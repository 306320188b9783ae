"""Attention: single decode/prefill, and the batch wrappers' run() (decode, prefill paged and
ragged, MLA, POD, cascade) after an eager plan() with host index pointers, as a server plans
outside its compiled forward."""
import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode

from . import fit

BF16, I32 = torch.bfloat16, torch.int32
H, D, PAGE, PAGES = 4, 128, 16, 8


def _host(*values):
    with unset_fake_temporarily():
        return torch.tensor(values, dtype=I32)


class _HostPlan(TorchDispatchMode):
    """plan() as a server makes it, eagerly before compile, with its host side real: what it
    computes on CPU tensors runs (it reads the index pointers with .item() and .tolist()),
    what touches or makes a CUDA tensor goes to the fake mode (this machine has no GPU)."""

    def __init__(self, fake):
        super().__init__()
        self.fake = fake

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # Pinned host memory needs the driver: plain host memory stands in for it.
        if kwargs.get("pin_memory"):
            kwargs = {**kwargs, "pin_memory": False}
        if func is torch.ops.aten._pin_memory.default:
            return args[0].clone()
        leaves = pytree.tree_leaves((args, kwargs))
        device = kwargs.get("device")
        if (any(isinstance(a, FakeTensor) for a in leaves)
                or (device is not None and torch.device(device).type == "cuda")):
            with self.fake:
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def _plan(plan, *args, **kwargs):
    fake = torch._guards.detect_fake_mode()
    if fake is None:  # real tensors (integration/gpu/api_status_check.py on the H200)
        return plan(*args, **kwargs)
    # CUDA counts as initialised meanwhile, as in a server: `.to("cuda")` asks torch to
    # initialise it before dispatch, and this machine has no driver (the copy goes fake).
    # `with torch.cuda.device(...)` likewise: the one stand-in device is always current; and
    # nothing runs on it, so a synchronize has nothing to wait for.
    saved = (torch.cuda._initialized, torch.cuda._exchange_device,
             torch.cuda._maybe_exchange_device, torch.cuda.synchronize)
    torch.cuda._initialized = True
    torch.cuda._exchange_device = torch.cuda._maybe_exchange_device = lambda device: 0
    torch.cuda.synchronize = lambda device=None: None
    try:
        with unset_fake_temporarily(), _HostPlan(fake):
            return plan(*args, **kwargs)
    finally:
        (torch.cuda._initialized, torch.cuda._exchange_device,
         torch.cuda._maybe_exchange_device, torch.cuda.synchronize) = saved


def _ws():
    return torch.empty(128 << 20, device="cuda", dtype=torch.uint8)  # fake: costs nothing


def _single_decode(t, fi):
    return (lambda q, k, v: fi.single_decode_with_kv_cache(q, k, v),
            (t(H, D), t(32, H, D), t(32, H, D)))


def _single_prefill(t, fi):
    return (lambda q, k, v: fi.single_prefill_with_kv_cache(q, k, v, causal=True),
            (t(8, H, D), t(32, H, D), t(32, H, D)))


def _decode_run(method, cls="BatchDecodeWithPagedKVCacheWrapper"):
    def build(t, fi):
        if cls == "BatchDecodeWithPagedKVCacheWrapper":
            w = fi.BatchDecodeWithPagedKVCacheWrapper(_ws(), "NHD", backend="fa2")
        else:  # fixed index buffers, as CUDA graph capture needs; no backend argument
            w = getattr(fi, cls)(_ws(), _i(3), _i(PAGES), _i(2), "NHD")
        _plan(w.plan, _host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE,
              q_data_type=BF16, kv_data_type=BF16)
        return (lambda q, c: getattr(w, method)(q, c)), (t(2, H, D), t(PAGES, 2, PAGE, H, D))
    return build


def _i(n):
    return torch.zeros(n, device="cuda", dtype=I32)


def _prefill_paged_run(method):
    def build(t, fi):
        w = fi.BatchPrefillWithPagedKVCacheWrapper(_ws(), "NHD", backend="fa2")
        _plan(w.plan, _host(0, 4, 8), _host(0, 1, 2), _host(0, 1), _host(4, 4), H, H, D, PAGE,
               causal=True, q_data_type=BF16, kv_data_type=BF16)
        return (lambda q, c: getattr(w, method)(q, c)), (t(8, H, D), t(PAGES, 2, PAGE, H, D))
    return build


def _prefill_ragged_run(method):
    def build(t, fi):
        w = fi.BatchPrefillWithRaggedKVCacheWrapper(_ws(), "NHD", backend="fa2")
        _plan(w.plan, _host(0, 4, 8), _host(0, 4, 8), H, H, D, causal=True, q_data_type=BF16,
               kv_data_type=BF16)
        return (lambda q, k, v: getattr(w, method)(q, k, v)), (t(8, H, D), t(8, H, D),
                                                               t(8, H, D))
    return build


def _mla_run(t, fi):
    import inspect
    w = fi.BatchMLAPagedAttentionWrapper(_ws(), backend="fa2")
    _plan(w.plan, _host(0, 1, 2), _host(0, 1, 2), _host(0, 1), _host(4, 4), 16, 512, 64, PAGE,
          False, 0.1, BF16, BF16)
    args = (t(2, 16, 512), t(2, 16, 64), t(PAGES, PAGE, 512), t(PAGES, PAGE, 64))
    if "query" in inspect.signature(w.run).parameters:
        # 0.7.4's structural form; its legacy tensor form warns through sys._getframe
        return (lambda qn, qp, ckv, kpe: w.run(query=(qn, qp), kv_cache=(ckv, kpe))), args
    return (lambda qn, qp, ckv, kpe: w.run(qn, qp, ckv, kpe)), args


def _mla_decode_run(method):
    """The deprecated MLA decode wrapper (0.6.x; its run() takes SM80 alone): 16 heads of
    512 + 64 over a paged compressed-KV cache, planned as BatchMLAPagedAttentionWrapper is."""
    def build(t, fi):
        w = fi.BatchDecodeMlaWithPagedKVCacheWrapper(_ws())
        _plan(w.plan, _host(0, 1, 2), _host(0, 1), _host(1, 1), 16, 512, PAGE, 0.1,
              data_type=BF16, q_data_type=BF16)
        return ((lambda qn, qp, ckv, kpe: getattr(w, method)(qn, qp, ckv, kpe)),
                (t(2, 16, 512), t(2, 16, 64), t(PAGES, PAGE, 512), t(PAGES, PAGE, 64)))
    return build


def _pod_run(t, fi):
    w = fi.PODWithPagedKVCacheWrapper(_ws(), "NHD")
    _plan(w.plan, _host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE, q_data_type=BF16,
           kv_data_type=BF16)
    return (lambda qp, kp, vp, qd, c: w.run(qp, kp, vp, qd, c, causal_p=True),
            (t(8, H, D), t(8, H, D), t(8, H, D), t(2, H, D), t(PAGES, 2, PAGE, H, D)))


def _cascade_run(t, fi):
    w = fi.MultiLevelCascadeAttentionWrapper(2, _ws(), "NHD")
    _plan(w.plan, [_host(0, 2), _host(0, 1, 2)], [_host(0, 1), _host(0, 1, 2)],
           [_host(0), _host(1, 2)], [_host(4), _host(1, 1)], H, H, D, PAGE,
           q_data_type=BF16, kv_data_type=BF16)
    return (lambda q, c: w.run(q, c)), (t(2, H, D), t(PAGES, 2, PAGE, H, D))


BUILDERS = {
    "single_decode_with_kv_cache": _single_decode,
    "single_prefill_with_kv_cache": _single_prefill,
    **{f"BatchDecodeWithPagedKVCacheWrapper.{m}": _decode_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    **{f"CUDAGraphBatchDecodeWithPagedKVCacheWrapper.{m}":
       _decode_run(m, "CUDAGraphBatchDecodeWithPagedKVCacheWrapper")
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    **{f"BatchPrefillWithPagedKVCacheWrapper.{m}": _prefill_paged_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    **{f"BatchPrefillWithRaggedKVCacheWrapper.{m}": _prefill_ragged_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    "BatchMLAPagedAttentionWrapper.run": _mla_run,
    **{f"BatchDecodeMlaWithPagedKVCacheWrapper.{m}": _mla_decode_run(m)
       for m in ("run", "run_return_lse")},
    "PODWithPagedKVCacheWrapper.run": _pod_run,
    "MultiLevelCascadeAttentionWrapper.run": _cascade_run,
}


def _batch_attention_run(t, fi):
    w = fi.BatchAttention("NHD")
    _plan(w.plan, _host(0, 1, 2), _host(0, 1, 2), _host(0, 1), _host(16, 16), H, H, D, D, PAGE,
          q_data_type=BF16, kv_data_type=BF16)
    return (lambda q, c: w.run(q, c)), (t(2, H, D), t(PAGES, 2, PAGE, H, D))


def _block_sparse_run(cls):
    def build(t, fi):
        w = getattr(fi, cls)(_ws())
        if cls == "BlockSparseAttentionWrapper":
            # 2 x 2 blocks of 16 x 16 over a 32 x 32 score matrix, all present
            _plan(w.plan, _host(0, 2, 4), _host(0, 1, 0, 1), 32, 32, 16, 16, H, H, D,
                  q_data_type=BF16, kv_data_type=BF16, o_data_type=BF16)
            return (lambda q, k, v: w.run(q, k, v)), (t(32, H, D), t(32, H, D), t(32, H, D))
        with unset_fake_temporarily():
            mask = torch.ones(H, 2, 2, dtype=torch.bool)
            rows, cols = torch.full((H, 2), 16, dtype=I32), torch.full((H, 2), 16, dtype=I32)
        _plan(w.plan, mask, rows, cols, H, H, D, q_data_type=BF16, kv_data_type=BF16)
        return ((lambda q, k, v: w.run(q, k, v)),
                (t(H, 32, D), t(H, 32, D), t(H, 32, D)))
    return build


def _batch_pod_run(t, fi):
    w = fi.BatchPODWithPagedKVCacheWrapper(_ws(), "NHD")
    _plan(w.plan, _host(0, 8), _host(0, 1), _host(0), _host(4), _host(0, 1, 2), _host(0, 2, 3),
          _host(1, 2, 3), _host(1, 1), H, H, D, PAGE, q_data_type=BF16, kv_data_type=BF16)
    return (lambda qp, cp, qd, cd: w.run(qp, cp, qd, cd, causal_p=True),
            (t(8, H, D), t(PAGES, 2, PAGE, H, D), t(2, H, D), t(PAGES, 2, PAGE, H, D)))


def _trtllm_decode(t, fi):
    from flashinfer import decode
    return (lambda q, c, ws, bt, sl: decode.trtllm_batch_decode_with_kv_cache(
        q, c, ws, bt, sl, 64, kv_layout="HND"),
        (t(2, H, D), t(PAGES, 2, H, PAGE, D), _ws(), _i(2 * 4).view(2, 4), _i(2)))


BUILDERS.update({
    "BatchAttention.run": _batch_attention_run,
    **{f"{c}.{m}": _block_sparse_run(c)
       for c in ("BlockSparseAttentionWrapper", "VariableBlockSparseAttentionWrapper")
       for m in ("run", "forward")},
    "BatchPODWithPagedKVCacheWrapper.run": _batch_pod_run,
    "trtllm_batch_decode_with_kv_cache": _trtllm_decode,
})


def _shared_prefix(cls):
    """The deprecated shared-prefix wrappers: begin_forward() plans for float16 (their
    data_type is not passed on to the query's), so the call is float16 throughout."""
    def build(t, fi):
        f16 = torch.float16
        w = getattr(fi, cls)(_ws(), "NHD")
        if cls.startswith("BatchDecode"):
            _plan(w.begin_forward, _host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE,
                  data_type=f16)
            q = t(2, H, D, dtype=f16)
        else:
            _plan(w.begin_forward, _host(0, 4, 8), _host(0, 1, 2), _host(0, 1), _host(4, 4),
                  H, H, D, PAGE)
            q = t(8, H, D, dtype=f16)
        return ((lambda q, ks, vs, c: w.forward(q, ks, vs, c)),
                (q, t(16, H, D, dtype=f16), t(16, H, D, dtype=f16),
                 t(PAGES, 2, PAGE, H, D, dtype=f16)))
    return build


def _trtllm_context(t, fi):
    from flashinfer import prefill
    return (lambda q, c, ws, bt, sl, cq, ck: prefill.trtllm_batch_context_with_kv_cache(
        q, c, ws, bt, sl, 4, 64, 1.0, 1.0, 2, cq, ck),
        (t(8, H, D), t(PAGES, 2, H, PAGE, D), _ws(), _i(8).view(2, 4), _i(2), _i(3), _i(3)))


def _fmha_varlen(t, fi):
    """As BatchPrefillWithRaggedKVCacheWrapper's cutlass backend calls it: planned in the
    wrapper's plan() (fmha_varlen_plan), the plan passed to the forward call with the
    wrapper's own `out` (and `lse`, None without return_lse)."""
    from flashinfer import prefill
    qo, kv = _i(3), _i(3)
    module = _plan(prefill.get_fmha_module, BF16, BF16, BF16, I32, D, D, 0, False, False,
                   torch.device("cuda", 0))
    plan_info = _plan(prefill.fmha_varlen_plan, module, qo, kv, H, True)
    return (lambda q, k, v, qo, kv, o: prefill.fmha_varlen(
        q, k, v, qo, kv, plan_info=plan_info, causal=True, max_qo_len=4, out=o, lse=None),
        (t(8, H, D), t(8, H, D), t(8, H, D), qo, kv, t(8, H, D)))


def _sink_call(w, method, q, c, s):
    """The sink kernel takes its sink tensor and sm_scale as the JIT variant's extra arguments,
    positionally: run(q, paged_kv_cache, sinks, sm_scale) (the class docstring). A `sinks=`
    keyword is the parent's trtllm-gen parameter, which the JIT path drops. The deprecated
    forward()s are the parents', with no place for either: called as their signature allows."""
    if method.startswith("forward"):
        return getattr(w, method)(q, c)
    return getattr(w, method)(q, c, s, D ** -0.5)


# The sink wrappers' deprecated forward()s are the parents': they pass the JIT variant no sink
# tensor and no sm_scale, which its kernel reads. On the H200 (0.7.2) both prefill-sink calls
# crash in FlashInfer's paged_run, eagerly (docs/gpu-runs/gpu-run-2026-12-01-api-status-4): no
# call of theirs is worth tracing.
NO_SINK = ("FlashInfer's deprecated forward() of an attention-sink wrapper passes no sink tensor "
           "to the JIT variant that reads one")


def _no_sinks(method):
    if method.startswith("forward"):
        raise ValueError(NO_SINK)


def _decode_sink_run(method):
    def build(t, fi):
        _no_sinks(method)
        w = fi.BatchDecodeWithAttentionSinkWrapper(_ws(), "NHD", backend="fa2",
                                                   q_data_type=BF16, kv_data_type=BF16,
                                                   head_dim_qk=D, head_dim_vo=D)
        _plan(w.plan, _host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE,
              q_data_type=BF16, kv_data_type=BF16)
        return ((lambda q, c, s: _sink_call(w, method, q, c, s)),
                (t(2, H, D), t(PAGES, 2, PAGE, H, D), t(H, dtype=torch.float32)))
    return build


def _prefill_sink_run(method):
    def build(t, fi):
        _no_sinks(method)
        w = fi.BatchAttentionWithAttentionSinkWrapper(_ws(), "NHD", backend="fa2",
                                                      q_data_type=BF16, kv_data_type=BF16,
                                                      head_dim_qk=D, head_dim_vo=D)
        _plan(w.plan, _host(0, 4, 8), _host(0, 1, 2), _host(0, 1), _host(4, 4), H, H, D, PAGE,
              causal=True, q_data_type=BF16, kv_data_type=BF16)
        return ((lambda q, c, s: _sink_call(w, method, q, c, s)),
                (t(8, H, D), t(PAGES, 2, PAGE, H, D), t(H, dtype=torch.float32)))
    return build


def _bidirectional_ranges_run(method):
    def build(t, fi):
        w = fi.BatchPrefillWithCausalBidirectionalRangesWrapper(
            _ws(), "NHD", q_data_type=BF16, kv_data_type=BF16, head_dim_qk=D, head_dim_vo=D)
        # causality is the variant's own mask: plan() refuses causal=True
        _plan(w.plan, _host(0, 4, 8), _host(0, 1, 2), _host(0, 1), _host(4, 4), H, H, D, PAGE,
              q_data_type=BF16, kv_data_type=BF16)
        # one [start, end] key span per query token; (-1, -1): no span, plain causal
        return ((lambda q, c, r: getattr(w, method)(q, c, r)),
                (t(8, H, D), t(PAGES, 2, PAGE, H, D), _i(16).view(8, 2)))
    return build


BUILDERS.update({
    **{f"BatchDecodeWithAttentionSinkWrapper.{m}": _decode_sink_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    **{f"BatchAttentionWithAttentionSinkWrapper.{m}": _prefill_sink_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    **{f"BatchPrefillWithCausalBidirectionalRangesWrapper.{m}": _bidirectional_ranges_run(m)
       for m in ("run", "run_return_lse", "forward", "forward_return_lse")},
    "BatchDecodeWithSharedPrefixPagedKVCacheWrapper.forward":
        _shared_prefix("BatchDecodeWithSharedPrefixPagedKVCacheWrapper"),
    "BatchPrefillWithSharedPrefixPagedKVCacheWrapper.forward":
        _shared_prefix("BatchPrefillWithSharedPrefixPagedKVCacheWrapper"),
    "trtllm_batch_context_with_kv_cache": _trtllm_context,
    "fmha_varlen": _fmha_varlen,
})


def _single_with_jit_module(kind):
    """The raw entry points for a caller holding a built JIT module (FlashInfer's docstring:
    "one of the gen_*_module factories"): built as single_{decode,prefill}_with_kv_cache builds
    theirs, with the variant's trailing arguments (alibi slopes, soft cap, sm_scale, rope
    reciprocals) passed through *args."""
    def build(t, fi):
        from flashinfer.jit import attention as jit_attention
        if kind == "decode":
            from flashinfer import decode as mod
            module = jit_attention.gen_single_decode_module(
                BF16, BF16, BF16, D, D, 0, False, False).build_and_load()
            q = t(H, D)
        else:
            from flashinfer import prefill as mod
            module = jit_attention.gen_single_prefill_module(
                "fa2", BF16, BF16, BF16, D, D, 0, False, False, False).build_and_load()
            q = t(8, H, D)
        call = getattr(mod, f"single_{kind}_with_kv_cache_with_jit_module")
        extra = (None, 0.0, D ** -0.5, 1.0, 1e-4)  # alibi, soft cap, sm_scale, rope rcp
        if kind == "prefill":  # packed mask, alibi, k/v block scales before them
            extra = (None, None, None, None) + extra[1:]
        return ((lambda q, k, v: call(module, q, k, v, *extra)), (q, t(32, H, D), t(32, H, D)))
    return build


def _cudnn_decode(t, fi):
    from flashinfer.cudnn import decode
    return (lambda q, kc, vc, ws, sl, bt: decode.cudnn_batch_decode_with_kv_cache(
        q, kc, vc, D ** -0.5, ws, max_sequence_kv=PAGE * 4, actual_seq_lens_kv=sl,
        block_tables=bt, is_cuda_graph_compatible=True),
        (t(2, H, D), t(PAGES, H, PAGE, D), t(PAGES, H, PAGE, D), _ws(), _i(2), _i(8).view(2, 4)))


def _xqa_decode(t, fi):
    from flashinfer import decode
    return (lambda q, c, ws, bt, sl: decode.xqa_batch_decode_with_kv_cache(
        q, c, ws, bt, sl, PAGE * 4, bmm1_scale=D ** -0.5),
        (t(2, H, D), t(PAGES, 2, PAGE, H, D), _ws(), _i(8).view(2, 4), _i(2)))


def _xqa_module():
    import sys
    return sys.modules["flashinfer.xqa"]  # `flashinfer.xqa` the attribute is the function


def _xqa(t, fi):
    xqa = _xqa_module()
    # GQA 4:1 with 8 query heads, as xqa's kernels are built; semaphores zeroed once
    return (lambda q, kc, vc, bt, sl, o, ws, sem: xqa.xqa(
        q, kc, vc, bt, sl, o, ws, sem, 2, PAGE),
        (t(2, 1, 8, D), t(PAGES, PAGE, 2, D), t(PAGES, PAGE, 2, D), _i(8).view(2, 4), _i(2),
         t(2, 1, 8, D), _ws(), _i(8 << 10)))


def _xqa_mla(t, fi):
    xqa = _xqa_module()
    f8 = torch.float8_e4m3fn
    return (lambda q, kc, vc, bt, sl, o, ws, sem: xqa.xqa_mla(
        q, kc, vc, bt, sl, o, ws, sem, 32),
        (t(2, 1, 128, 576, dtype=f8), t(PAGES, 32, 576, dtype=f8), t(PAGES, 32, 576, dtype=f8),
         _i(4).view(2, 2), _i(2), t(2, 1, 128, 512), _ws(), _i(8 << 10)))


def _trtllm_mla_decode(t, fi):
    """SGLang's trtllm_mla backend (DeepSeek MLA decode on Blackwell): one query token per
    request, 16 heads of 512 + 64 against a paged cache of 64-token pages, four pages a request
    (block tables a multiple of 128 / page size wide, FlashInfer's check); the backend FlashInfer
    picks by the device ("auto")."""
    from flashinfer import mla
    return (lambda q, c, ws, bt, sl: mla.trtllm_batch_decode_with_kv_cache_mla(
        q, c, ws, 128, 512, 64, bt, sl, 256, bmm1_scale=576 ** -0.5),
        (t(2, 1, 16, 576), t(PAGES, 64, 576), _ws(), _i(8).view(2, 4), _i(2)))


def _xqa_mla_decode(t, fi):
    """The XQA MLA decode (SM120, FP8 E4M3 query and cache, BF16 out): as xqa_mla's builder,
    128 heads over 32-token pages, through the batch API's shape checks."""
    from flashinfer import mla
    f8 = torch.float8_e4m3fn
    return (lambda q, c, ws, bt, sl: mla.xqa_batch_decode_with_kv_cache_mla(
        q, c, ws, 128, 512, 64, bt, sl, 128),
        (t(2, 1, 128, 576, dtype=f8), t(PAGES, 32, 576, dtype=f8), _ws(), _i(8).view(2, 4),
         _i(2)))


def _sm110_gqa_decode(t, fi):
    from flashinfer import decode
    f16 = torch.float16
    return (lambda q, kv, sl: decode.sm110_gqa_decode(q, kv, sl),
            (t(2, 32, 128, dtype=f16), t(2, 2, 8, 64, 128, dtype=f16), _i(2)))


def _sage_quantize(t, fi):
    """SGLang's diffusion Sage attention: INT8 Q/K per block, FP8 V, ragged offsets."""
    from flashinfer import prefill
    fn = prefill.trtllm_sage_attention_quantize
    if not fit.takes(fn, "cum_seq_lens_q"):
        # 0.6.16 quantizes one dense batch: no ragged offsets to give.
        return (lambda q, k, v: fn(q, k, v, q_block_size=1, k_block_size=16,
                                   qk_quant_dtype=torch.int8),
                (t(16, H, D), t(16, H, D), t(16, H, D)))
    return (lambda q, k, v, cq, ck: fn(
        q, k, v, q_block_size=1, k_block_size=16, qk_quant_dtype=torch.int8,
        cum_seq_lens_q=cq, cum_seq_lens_kv=ck),
        (t(16, H, D), t(16, H, D), t(16, H, D), _i(3), _i(3)))


def _ragged_deepseek(t, fi):
    """SGLang's skip-softmax attention on SM100 (multimodal_gen skip_softmax.py)."""
    from flashinfer import prefill
    return (lambda q, k, v, ws, sl, cq, ck: prefill.trtllm_ragged_attention_deepseek(
        q, k, v, ws, sl, 8, 8, D ** -0.5, 1.0, -1.0, 2, -1, cq, ck, None, False, False),
        (t(16, H, D), t(16, H, D), t(16, H, D), _ws(), _i(2), _i(3), _i(3)))


def _fmha_v2_prefill(t, fi):
    """SGLang's skip-softmax attention on SM90: Q apart, K and V stacked."""
    from flashinfer import prefill
    return (lambda q, kv, ws, sl, cq, ck: prefill.trtllm_fmha_v2_prefill(
        (q, kv), "CONTIGUOUS_Q_KV", ws, sl, 8, 8, D ** -0.5, 1.0, 2, cq, ck,
        mask_mode="causal"),
        (t(16, H, D), t(16, 2, H, D), _ws(), _i(2), _i(3), _i(3)))


def _fmha_v2_dense(kind):
    def build(t, fi):
        from flashinfer import prefill
        if kind == "deepseek":  # MLA prefill: 192-wide QK, 128-wide V
            return (lambda q, k, v, o: prefill.fmha_v2_prefill_deepseek(
                q, k, v, o, 16, 192, 8, 192 ** -0.5),
                (t(1, 8, 16, 192), t(1, 8, 16, 192), t(1, 8, 16, 128), t(1, 8, 16, 128)))
        # FP8 E4M3 Q/K/V, BF16 out: the only dtypes its SM120 kernels take (prefill.py checks)
        f8 = torch.float8_e4m3fn
        return (lambda q, k, v, o: prefill.fmha_v2_prefill_sm120(q, k, v, o, H, D, 8, D ** -0.5),
                (t(1, 8, H, D, dtype=f8), t(1, 8, H, D, dtype=f8), t(1, 8, H, D, dtype=f8),
                 t(1, 8, H, D)))
    return build


def _minimax_h3(variant):
    """MiniMax-H3's noncausal packed-varlen attention: THD [T, H, 128], two segments, their
    offsets on the host too (cu_seqlens_host spares the kernel set-up a device read)."""
    def build(t, fi):
        from flashinfer import prefill
        f8 = torch.float8_e4m3fn
        host = [0, 8, 16]
        fn = getattr(prefill, f"minimax_h3_varlen_{variant}")
        dtype = f8 if variant == "fp8_attention" else BF16
        args = (t(16, H, 128, dtype=dtype), t(16, H, 128, dtype=dtype),
                t(16, H, 128, dtype=dtype), _i(3))
        if variant == "fp8_attention":
            return (lambda q, k, v, cu: fn(q, k, v, cu, q_descale=1.0, k_descale=1.0,
                                           v_descale=1.0, cu_seqlens_host=host)), args
        return (lambda q, k, v, cu: fn(q, k, v, cu, cu_seqlens_host=host)), args
    return build


def _nvfp4_sm120(kind):
    def build(t, fi):
        from flashinfer import nvfp4_attention_sm120 as mod
        if kind == "quantize_qkv":
            return ((lambda q, k, v: mod.nvfp4_attention_sm120_quantize_qkv(q, k, v)),
                    (t(1, H, 128, D), t(1, H, 128, D), t(1, H, 128, D)))
        # what quantize_qkv returns for [1, H, 128, D] (its docstring's layouts)
        u8, f8 = torch.uint8, torch.float8_e4m3fn
        return ((lambda *a: mod.nvfp4_attention_sm120_fwd(*a, causal=True)),
                (t(1, H, 128, D // 2, dtype=u8), t(1, H, 128, D // 2, dtype=u8),
                 t(1, H, D, 64, dtype=u8), t(1, H, 128, D // 16, dtype=f8),
                 t(1, H, 128, D // 16, dtype=f8), t(1, H, D, 8, dtype=f8),
                 t(1, H, 1, 128, dtype=torch.float32)))
    return build


def _qsa(kind):
    """Qwen3.8's quest-sparse attention (QSA): 12 query heads over one KV head, 256 wide."""
    def build(t, fi):
        from flashinfer import qsa
        T = 16
        if kind == "indexed":
            return ((lambda q, k, v, idx: qsa.qsa_indexed_forward(q, k, v, idx)),
                    (t(T, 12, 256), t(T, 1, 256), t(T, 1, 256), _i(T * 8).view(T, 8)))
        nb = T // 4
        return ((lambda q, k, v, sel, lo, hi, bb, tb, bf, bl: qsa.qsa_forward(
            q, k, v, sel, lo, hi, bb, tb, bf, bl)),
            (t(T, 12, 256), t(T, 1, 256), t(T, 1, 256),
             t(T, nb, dtype=torch.uint8), _i(T), _i(T), _i(T), _i(T), _i(nb), _i(nb)))
    return build


def _qsa_sparse_paged(t, fi):
    from flashinfer import sparse
    rows = 4
    return (lambda q, kc, vc, li, bt, tr, g: sparse.qsa_sparse_paged_attention(
        q, kc, vc, li, bt, tr, False, output_gate=g),
        (t(rows, 12, 256), t(PAGES, PAGE, 1, 256), t(PAGES, PAGE, 1, 256),
         _i(rows * 9).view(rows, 9), _i(8).view(2, 4), _i(rows), t(rows, 12, 256)))


def _mqa_logits(kind):
    """DeepSeek-V3.2's sparse-attention indexer: 2 requests, next_n 1, 64 heads of 128, KV
    blocks of 64 tokens with their scales fused in (the docstrings' layout)."""
    def build(t, fi):
        from flashinfer.attn_scores import attn_scores
        u8 = torch.uint8
        # the CTA schedule ([num_sms + 1, 2]) made once per batch outside the layers, as
        # SGLang's DSA backend makes it (compute_paged_mqa_logits_schedule, a plan step)
        sched = _i(149 * 2).view(149, 2)
        if kind == "fp8":
            return ((lambda q, kv, w, bt, sl, sm: attn_scores.fp8_paged_mqa_logits(
                q, kv, w, bt, sl, 256, schedule_meta=sm)),
                (t(2, 1, 64, 128, dtype=torch.float8_e4m3fn), t(PAGES, 64, 1, 132, dtype=u8),
                 t(2, 64, dtype=torch.float32), _i(8).view(2, 4), _i(2), sched))
        return ((lambda q, sf, kv, w, bt, sl, sm: attn_scores.fp4_paged_mqa_logits(
            q, sf, kv, w, bt, sl, 256, schedule_meta=sm)),
            (t(2, 1, 64, 64, dtype=u8), _i(2 * 64).view(2, 1, 64),
             t(PAGES, 64, 1, 68, dtype=u8), t(2, 64, dtype=torch.float32),
             _i(8).view(2, 4), _i(2), sched))
    return build


BUILDERS.update({
    "single_decode_with_kv_cache_with_jit_module": _single_with_jit_module("decode"),
    "single_prefill_with_kv_cache_with_jit_module": _single_with_jit_module("prefill"),
    "cudnn_batch_decode_with_kv_cache": _cudnn_decode,
    "xqa_batch_decode_with_kv_cache": _xqa_decode,
    "xqa": _xqa,
    "xqa_mla": _xqa_mla,
    "trtllm_batch_decode_with_kv_cache_mla": _trtllm_mla_decode,
    "xqa_batch_decode_with_kv_cache_mla": _xqa_mla_decode,
    "sm110_gqa_decode": _sm110_gqa_decode,
    "trtllm_sage_attention_quantize": _sage_quantize,
    "trtllm_ragged_attention_deepseek": _ragged_deepseek,
    "trtllm_fmha_v2_prefill": _fmha_v2_prefill,
    "fmha_v2_prefill_deepseek": _fmha_v2_dense("deepseek"),
    "fmha_v2_prefill_sm120": _fmha_v2_dense("sm120"),
    **{f"minimax_h3_varlen_{v}": _minimax_h3(v)
       for v in ("attention", "fp8_attention", "fp8_attention_bf16", "nvfp4_attention")},
    "nvfp4_attention_sm120_fwd": _nvfp4_sm120("fwd"),
    "nvfp4_attention_sm120_quantize_qkv": _nvfp4_sm120("quantize_qkv"),
    "qsa_forward": _qsa("blocks"),
    "qsa_indexed_forward": _qsa("indexed"),
    "qsa_sparse_paged_attention": _qsa_sparse_paged,
    "fp8_paged_mqa_logits": _mqa_logits("fp8"),
    "fp4_paged_mqa_logits": _mqa_logits("fp4"),
})


def _bsr_mask_layout(t, fi):
    """As BlockSparseAttentionWrapper.plan() calls it: a boolean mask per nonzero block."""
    from flashinfer import sparse
    return ((lambda m, ip: sparse.convert_bsr_mask_layout(m, ip)),
            (t(4, 16, 16, dtype=torch.bool), _i(3)))


def _mqa_topk_run(t, fi):
    """DeepSeek-V3.2-style indexer top-k over continuous FP8 K for one prefill chunk: planned
    and its K pool prepared eagerly, before capture, as its docstring asks; run per layer."""
    w = _plan(fi.FP8MQATopKWrapper, max_context_length=1024, max_chunk_size=64,
              max_batch_size=1, device="cuda", num_heads=64)  # it sets up on the device
    k, ks = t(1024, 128, dtype=torch.float8_e4m3fn), t(1024, dtype=torch.float32)
    _plan(w.plan, _i(2), _i(2))
    _plan(w.prepare_pool, k, k_scale=ks)
    return ((lambda q, wt, k, ks: w.run(q, wt, k, k_scale=ks)),
            (t(64, 64, 128, dtype=torch.float8_e4m3fn), t(64, 64, dtype=torch.float32), k, ks))


BUILDERS.update({
    "convert_bsr_mask_layout": _bsr_mask_layout,
    "FP8MQATopKWrapper.run": _mqa_topk_run,
})
