"""Attention: single decode/prefill, and the batch wrappers' run() (decode, prefill paged and
ragged, MLA, POD, cascade) after an eager plan() with host index pointers, as a server plans
outside its compiled forward."""
import torch

BF16, I32 = torch.bfloat16, torch.int32
H, D, PAGE, PAGES = 4, 128, 16, 8


def _host(*values):
    return torch.tensor(values, dtype=I32)


def _ws():
    return torch.empty(1 << 20, device="cuda", dtype=torch.uint8)


def _single_decode(t, fi):
    return (lambda q, k, v: fi.single_decode_with_kv_cache(q, k, v),
            (t(H, D), t(32, H, D), t(32, H, D)))


def _single_prefill(t, fi):
    return (lambda q, k, v: fi.single_prefill_with_kv_cache(q, k, v, causal=True),
            (t(8, H, D), t(32, H, D), t(32, H, D)))


def _decode_run(method, cls="BatchDecodeWithPagedKVCacheWrapper"):
    def build(t, fi):
        w = getattr(fi, cls)(_ws(), "NHD", backend="fa2")
        w.plan(_host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE, q_data_type=BF16,
               kv_data_type=BF16)
        return (lambda q, c: getattr(w, method)(q, c)), (t(2, H, D), t(PAGES, 2, PAGE, H, D))
    return build


def _prefill_paged_run(method):
    def build(t, fi):
        w = fi.BatchPrefillWithPagedKVCacheWrapper(_ws(), "NHD", backend="fa2")
        w.plan(_host(0, 4, 8), _host(0, 1, 2), _host(0, 1), _host(4, 4), H, H, D, PAGE,
               causal=True, q_data_type=BF16, kv_data_type=BF16)
        return (lambda q, c: getattr(w, method)(q, c)), (t(8, H, D), t(PAGES, 2, PAGE, H, D))
    return build


def _prefill_ragged_run(method):
    def build(t, fi):
        w = fi.BatchPrefillWithRaggedKVCacheWrapper(_ws(), "NHD", backend="fa2")
        w.plan(_host(0, 4, 8), _host(0, 4, 8), H, H, D, causal=True, q_data_type=BF16,
               kv_data_type=BF16)
        return (lambda q, k, v: getattr(w, method)(q, k, v)), (t(8, H, D), t(8, H, D),
                                                               t(8, H, D))
    return build


def _mla_run(t, fi):
    w = fi.BatchMLAPagedAttentionWrapper(_ws(), backend="fa2")
    w.plan(_host(0, 1, 2), _host(0, 1, 2), _host(0, 1), _host(4, 4), 16, 512, 64, PAGE, False,
           0.1, BF16, BF16)
    return (lambda qn, qp, ckv, kpe: w.run(qn, qp, ckv, kpe),
            (t(2, 16, 512), t(2, 16, 64), t(PAGES, PAGE, 512), t(PAGES, PAGE, 64)))


def _pod_run(t, fi):
    w = fi.PODWithPagedKVCacheWrapper(_ws(), "NHD")
    w.plan(_host(0, 1, 2), _host(0, 1), _host(1, 1), H, H, D, PAGE, q_data_type=BF16,
           kv_data_type=BF16)
    return (lambda qp, kp, vp, qd, c: w.run(qp, kp, vp, qd, c, causal_p=True),
            (t(8, H, D), t(8, H, D), t(8, H, D), t(2, H, D), t(PAGES, 2, PAGE, H, D)))


def _cascade_run(t, fi):
    w = fi.MultiLevelCascadeAttentionWrapper(2, _ws(), "NHD")
    w.plan([_host(0, 2), _host(0, 1, 2)], [_host(0, 1), _host(0, 1, 2)],
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
