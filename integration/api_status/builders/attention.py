"""Attention: single decode/prefill, and the batch wrappers' run() (decode, prefill paged and
ragged, MLA, POD, cascade) after an eager plan() with host index pointers, as a server plans
outside its compiled forward."""
import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode

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
        plan(*args, **kwargs)
        return
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
            plan(*args, **kwargs)
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
       for m in ("run", "forward", "forward_return_lse")},
    **{f"CUDAGraphBatchDecodeWithPagedKVCacheWrapper.{m}":
       _decode_run(m, "CUDAGraphBatchDecodeWithPagedKVCacheWrapper")
       for m in ("run", "forward", "forward_return_lse")},
    **{f"BatchPrefillWithPagedKVCacheWrapper.{m}": _prefill_paged_run(m)
       for m in ("run", "forward", "forward_return_lse")},
    **{f"BatchPrefillWithRaggedKVCacheWrapper.{m}": _prefill_ragged_run(m)
       for m in ("run", "forward", "forward_return_lse")},
    "BatchMLAPagedAttentionWrapper.run": _mla_run,
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
    from flashinfer import prefill
    return (lambda q, k, v, qo, kv: prefill.fmha_varlen(q, k, v, qo, kv, max_qo_len=4),
            (t(8, H, D), t(8, H, D), t(8, H, D), _i(3), _i(3)))


def _decode_sink_run(method):
    def build(t, fi):
        w = fi.BatchDecodeWithAttentionSinkWrapper(_ws(), "NHD", q_data_type=BF16,
                                                   kv_data_type=BF16, head_dim_qk=D,
                                                   head_dim_vo=D)
        _plan(w.plan, _host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE,
              q_data_type=BF16, kv_data_type=BF16)
        return ((lambda q, c, s: getattr(w, method)(q, c, sinks=s)),
                (t(2, H, D), t(PAGES, 2, PAGE, H, D), t(H, dtype=torch.float32)))
    return build


BUILDERS.update({
    **{f"BatchDecodeWithAttentionSinkWrapper.{m}": _decode_sink_run(m)
       for m in ("run", "forward", "forward_return_lse")},
    "BatchDecodeWithSharedPrefixPagedKVCacheWrapper.forward":
        _shared_prefix("BatchDecodeWithSharedPrefixPagedKVCacheWrapper"),
    "BatchPrefillWithSharedPrefixPagedKVCacheWrapper.forward":
        _shared_prefix("BatchPrefillWithSharedPrefixPagedKVCacheWrapper"),
    "trtllm_batch_context_with_kv_cache": _trtllm_context,
    "fmha_varlen": _fmha_varlen,
})
