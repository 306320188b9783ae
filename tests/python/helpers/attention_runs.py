"""Plans as data on the attention paths (issue 30): FlashInfer's real wrappers, plan() and run()
as shipped, the kernels replaced by CPU stand-ins that write what the real ones write (the
output rows of each request, and the lse when asked), compiled once with inductor and
`fullgraph=True`, then run over 50 plans of different batch sizes, query and KV lengths.
Per family, per shape mode (static, the token dimension marked dynamic, `dynamic=True`) and
per way the wrapper reaches the compiled function (a global, an argument): whether every
result equals eager's, the frames compiled and the recompiles (torch._dynamo counters).

The batch prefill module (plan, paged_run, ragged_run: tensor-core decode and both prefill
wrappers use it) is stood in at its JIT spec, as standin_kernels.py does for the others, so
FlashInfer's loader and its declared run functions stay; its kernels take FlashInfer's
arguments in FlashInfer's order, which every release from 0.5.3 to 0.7.4 shares.

BatchAttention's holistic module, POD's and BatchPOD's modules and the cascade module (its
`merge_state_in_place`) are stood in at their JIT specs the same way. Their wrappers ask the
device in places a CPU has no answer for: `plan()` waits for its host copies
(`torch.cuda.synchronize`), BatchPOD's constructor sizes its scheduler buffer by the SM count,
and the prefill wrappers' "auto" backend asks the compute capability (`host_device` below).

Prints one JSON line. Families are chosen on the command line (all by default); a family whose
wrapper class the release lacks is left out and listed under "absent"."""
import contextlib
import importlib
import json
import sys
import types

import torch
from torch._dynamo.utils import counters

import flashinfer  # noqa: F401  (the package's own imports, as a user's program makes them)
import flashinfer.cascade as cascade
import flashinfer.decode as decode
import flashinfer.pod as pod
import flashinfer.prefill as prefill
import standin_kernels as standins
from dispatched import dispatched_methods
from value_compare import same

standins.install({"decode": decode})

HEADS, KV_HEADS, DIM, PAGE, PAGES = 8, 2, 64, 4, 96


def _as_plan(ints):
    try:
        import tvm_ffi
        return tvm_ffi.convert(ints)
    except ImportError:
        return ints


def prefill_plan(float_ws, int_ws, pinned, qo_indptr_host, kv_indptr_host, *rest):
    """The plan holds the batch's sizes, as FlashInfer's scheduler's does."""
    return _as_plan([len(qo_indptr_host) - 1, int(qo_indptr_host[-1]), int(kv_indptr_host[-1]),
                     0, 1])


def _write(plan, q, o, lse, rows, values):
    """Each request's output rows from its query rows, its keys' and values' sums and the
    plan's ints; the lse likewise."""
    plan = [int(v) for v in plan]
    for r in range(plan[0]):
        lo, hi = int(rows[r]), int(rows[r + 1])
        o[lo:hi] = (q[lo:hi].float() * plan[0] + values(r) + plan[2]).to(o.dtype)
        if lse is not None:
            lse[lo:hi] = q[lo:hi].float().sum(-1) + values(r) + plan[1]


def paged_run(float_ws, int_ws, plan, q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices,
              last_page_len, o, lse, *rest):
    def values(r):
        pages = kv_indices[int(kv_indptr[r]):int(kv_indptr[r + 1])].long()
        return k_cache[pages].float().sum() * 1e-3 + v_cache[pages].float().sum() * 1e-2
    _write(plan, q, o, lse, qo_indptr, values)


def ragged_run(float_ws, int_ws, plan, q, k, v, qo_indptr, kv_indptr, o, lse, *rest):
    def values(r):
        lo, hi = int(kv_indptr[r]), int(kv_indptr[r + 1])
        return k[lo:hi].float().sum() * 1e-3 + v[lo:hi].float().sum() * 1e-2
    _write(plan, q, o, lse, qo_indptr, values)


def _prefill_spec(*args, **kwargs):
    return standins._spec(plan=prefill_plan, paged_run=paged_run, ragged_run=ragged_run)


# FlashInfer's JIT spec of the batch prefill module, wherever the release builds it from:
# one spec up to 0.7.2, a primary and an independent-stride one in 0.7.4's fa2 path.
for _name in ("gen_batch_prefill_module", "_gen_batch_prefill_primary_module",
              "_gen_batch_prefill_independent_paged_module"):
    if hasattr(prefill, _name):
        setattr(prefill, _name, _prefill_spec)


def _paged_values(k_cache, v_cache, kv_indptr, kv_indices):
    """Request r's part of the output: its pages' keys and values."""
    def values(r):
        pages = kv_indices[int(kv_indptr[r]):int(kv_indptr[r + 1])].long()
        return k_cache[pages].float().sum() * 1e-3 + v_cache[pages].float().sum() * 1e-2
    return values


def holistic_plan(float_ws, int_ws, pinned, qo_indptr_host, kv_indptr_host, kv_len_host,
                  batch_size, *rest):
    """csrc/batch_attention.cu BatchPagedAttentionPlan: the schedule's arrays go to the int
    workspace (through the page-locked buffer), the plan holds the batch's sizes and offsets.
    Here the arrays are the requests' query rows and pages, which `holistic_run` reads back."""
    arrays = torch.cat([qo_indptr_host, kv_indptr_host]).int()
    int_ws.view(torch.int32)[: arrays.numel()].copy_(arrays)
    return _as_plan([batch_size, int(qo_indptr_host[-1]), int(kv_len_host.sum()), 0, 1])


def holistic_run(float_ws, int_ws, plan, q, k_cache, v_cache, kv_indices, o, lse, *rest):
    """csrc/batch_attention.cu BatchPagedAttentionRun: writes every query row of `o` and
    `maybe_lse` (BatchAttention always gives one) and the float workspace (partial results),
    from the schedule `plan()` left in the int workspace."""
    n = int(plan[0])
    arrays = int_ws.view(torch.int32)[: 2 * (n + 1)].long()
    _write(plan, q, o, lse, arrays[: n + 1],
           _paged_values(k_cache, v_cache, arrays[n + 1:], kv_indices))
    float_ws.view(-1)[:1].fill_(1)


def _holistic_spec(*args, **kwargs):
    return standins._spec(plan=holistic_plan, run=holistic_run)


def _single_prefill(q, k, v, o, lse):
    """One request's rows: the prefill half of POD."""
    values = k.float().sum() * 1e-3 + v.float().sum() * 1e-2
    _write([1, q.size(0), k.size(0)], q, o, lse, [0, q.size(0)], lambda r: values)


def pod_run(q_p, k_p, v_p, tmp_p, o_p, lse_p, mask_mode_p, layout_p, window_left_p,
            custom_mask_p, alibi_slopes_p, logits_soft_cap_p, sm_scale_p, rope_rcp_scale_p,
            rope_rcp_theta_p, float_ws_d, int_ws_d, plan_d, q_d, k_cache_d, v_cache_d,
            qo_indptr_d, kv_indptr_d, kv_indices_d, last_page_len_d, o_d, lse_d, *rest):
    """csrc/pod.cu pod_with_kv_cache_tensor (0.5.3-0.7.4): writes the prefill's `o_p`,
    `maybe_lse_p` when given and its scratch `tmp_p`, the decode requests' `o_d`,
    `maybe_lse_d` when given and the decode float workspace."""
    _single_prefill(q_p, k_p, v_p, o_p, lse_p)
    tmp_p.view(-1)[:1].fill_(1)
    _write(plan_d, q_d, o_d, lse_d, qo_indptr_d,
           _paged_values(k_cache_d, v_cache_d, kv_indptr_d, kv_indices_d))
    float_ws_d.view(-1)[:1].fill_(1)


def batch_pod_run(float_ws_p, int_ws_p, plan_p, q_p, k_cache_p, v_cache_p, qo_indptr_p,
                  kv_indptr_p, kv_indices_p, last_page_len_p, o_p, lse_p, mask_mode_p, layout_p,
                  window_left_p, custom_mask_p, mask_indptr_p, alibi_slopes_p,
                  logits_soft_cap_p, sm_scale_p, rope_rcp_scale_p, rope_rcp_theta_p,
                  float_ws_d, int_ws_d, plan_d, q_d, k_cache_d, v_cache_d, qo_indptr_d,
                  kv_indptr_d, kv_indices_d, last_page_len_d, o_d, lse_d, *rest):
    """csrc/batch_pod.cu batch_pod_with_kv_cache_tensor (0.5.3-0.7.4): writes `o_p`,
    `maybe_lse_p`, `o_d`, `maybe_lse_d` (the lse when given), both float workspaces and the
    SM-aware scheduler's counters (the last argument, atomicAdd in
    include/flashinfer/attention/batch_pod.cuh)."""
    _write(plan_p, q_p, o_p, lse_p, qo_indptr_p,
           _paged_values(k_cache_p, v_cache_p, kv_indptr_p, kv_indices_p))
    _write(plan_d, q_d, o_d, lse_d, qo_indptr_d,
           _paged_values(k_cache_d, v_cache_d, kv_indptr_d, kv_indices_d))
    float_ws_p.view(-1)[:1].fill_(1)
    float_ws_d.view(-1)[:1].fill_(1)
    rest[-1].fill_(0)


def merge_state_in_place(v, s, v_other, s_other, mask=None, *rest):
    """include/flashinfer/attention/cascade.cuh MergeStateInPlaceKernel: merges the state
    (v_other, s_other) into (v, s), the lse in base 2; a row whose `mask` is 0 keeps its own.
    Writes `v` and `s`."""
    s_max = torch.maximum(s, s_other)
    # max(x - s_max, -inf) drops the NaN of two empty states, whose merged output stays zero.
    a = torch.exp2(torch.nan_to_num(s - s_max, nan=-float("inf")))
    b = torch.exp2(torch.nan_to_num(s_other - s_max, nan=-float("inf")))
    d = a + b
    scale = torch.where(d > 0, a / d, torch.zeros_like(d))
    other_scale = torch.where(d > 0, b / d, torch.zeros_like(d))
    merged = (scale[..., None] * v.float() + other_scale[..., None] * v_other.float()).to(v.dtype)
    merged_s = torch.log2(d) + s_max
    if mask is not None:
        keep = mask.bool()
        merged = torch.where(keep[:, None, None], merged, v)
        merged_s = torch.where(keep[:, None], merged_s, s)
    v.copy_(merged)
    s.copy_(merged_s)


def _holistic_module():
    """The module defining BatchAttention: flashinfer/attention.py up to 0.6.7,
    attention/_core.py after; None where the release has none."""
    for name in ("flashinfer.attention._core", "flashinfer.attention"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "BatchAttention"):
            return module
    return None


# Each module's JIT spec, wherever the release builds it from: BatchAttention's one spec up to
# 0.7.2, a primary and an independent-stride one in 0.7.4; POD's, BatchPOD's, cascade's.
_holistic = _holistic_module()
for _module, _names, _made in (
        (_holistic, ("gen_batch_attention_module", "_gen_batch_attention_primary_module",
                     "_gen_batch_attention_independent_module"), _holistic_spec),
        (pod, ("gen_pod_module",), lambda *a: standins._spec(pod_with_kv_cache_tensor=pod_run)),
        (pod, ("gen_batch_pod_module",), lambda *a: standins._spec(
            batch_pod_with_kv_cache_tensor=batch_pod_run)),
        (cascade, ("gen_cascade_module",), lambda *a: standins._spec(
            merge_state_in_place=merge_state_in_place))):
    for _name in _names:
        if _module is not None and hasattr(_module, _name):
            setattr(_module, _name, _made)


@contextlib.contextmanager
def host_device():
    """What FlashInfer's wrappers ask the device outside their kernels, answered for the host:
    `plan()` waits for its host copies (nothing is pending on the host), BatchPOD's constructor
    sizes its scheduler's counters by the SM count (an H200's 132), and the prefill wrappers'
    "auto" backend is fa2 (FlashInfer's answer below sm90)."""
    cuda = torch.cuda
    saved = (cuda.synchronize, cuda.get_device_properties, prefill.determine_attention_backend)
    cuda.synchronize = lambda *a, **k: None
    cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        multi_processor_count=132, major=9, minor=0)
    prefill.determine_attention_backend = lambda *a, **k: "fa2"
    try:
        yield
    finally:
        cuda.synchronize, cuda.get_device_properties, prefill.determine_attention_backend = saved


def mla_plan(float_ws, int_ws, pinned, qo_indptr_host, kv_indptr_host, kv_len_host, *rest):
    return _as_plan([len(qo_indptr_host) - 1, int(qo_indptr_host[-1]), int(kv_len_host.sum()),
                     0, 1])


def mla_run(float_ws, int_ws, plan, q_nope, q_pe, ckv_cache, kpe_cache, kv_indices, out, lse,
            *rest):
    """Writes `out` (and `lse` when given) from the queries, the planned pages and the plan's
    ints (the kernel's work partition lives in the plan, not in its arguments)."""
    plan = [int(v) for v in plan]
    pages = kv_indices.long()
    values = ckv_cache[pages].float().sum() * 1e-3 + kpe_cache[pages].float().sum() * 1e-2
    out.copy_((q_nope.float() * plan[0] + q_pe.float().sum(-1, keepdim=True) + values
               + plan[2]).to(out.dtype))
    if lse is not None and lse.numel():
        lse.copy_(q_nope.float().sum(-1) + plan[1])


def _mla_spec(*args, **kwargs):
    return standins._spec(plan=mla_plan, run=mla_run)


def _mla_modules():
    """The modules holding `gen_batch_mla_module` for the MLA wrapper: flashinfer/mla.py up to
    0.6.7, mla/_core.py in 0.6.16, 0.7.4's fa backends."""
    import importlib
    for name in ("flashinfer.mla", "flashinfer.mla._core",
                 "flashinfer.mla._batch_mla._backends._fa_common"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "gen_batch_mla_module"):
            module.gen_batch_mla_module = _mla_spec
            yield module


def _mla_wrapper_class():
    import flashinfer.mla as mla
    return list(_mla_modules()) and mla.BatchMLAPagedAttentionWrapper


def _workspace():
    return torch.empty(1 << 20, dtype=torch.uint8)


def _lengths(bs, step):
    return torch.Generator().manual_seed(1000 * step + bs)


def _query_lengths(g, bs, fixed):
    """Each request's new tokens: 3 under static shapes (the token count stays), else 1-4."""
    return torch.full((bs,), 3) if fixed else torch.randint(1, 5, (bs,), generator=g)


def _pages(g, lens):
    """Page indptr and indices of requests of `lens` pages each, and last-page lengths."""
    indptr = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).int()])
    indices = torch.randperm(PAGES, generator=g)[: int(indptr[-1])].int()
    last = torch.randint(1, PAGE + 1, (len(lens),), generator=g).int()
    return indptr, indices, last


def _indptr(lens):
    return torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).int()])


def _paged(g, bs):
    return _pages(g, torch.randint(1, 4, (bs,), generator=g))


def decode_family(tensor_cores):
    with standins.unpinned():
        w = decode.BatchDecodeWithPagedKVCacheWrapper(
            _workspace(), "NHD", use_tensor_cores=tensor_cores, backend="fa2")
    cache = (torch.randn(PAGES, PAGE, KV_HEADS, DIM).half(),
             torch.randn(PAGES, PAGE, KV_HEADS, DIM).half())

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        indptr, indices, last = _paged(g, bs)
        w.plan(indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, data_type=torch.float16)
        return (torch.randn(bs, HEADS, DIM, generator=g).half(),)

    def run(wrapper, q):
        o, lse = wrapper.run(q, cache, return_lse=True)
        return o * 2, lse
    return w, plan, run


def prefill_paged_family():
    with standins.unpinned():
        w = prefill.BatchPrefillWithPagedKVCacheWrapper(_workspace(), "NHD", backend="fa2")
    cache = torch.randn(PAGES, 2, PAGE, KV_HEADS, DIM).half()

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        indptr, indices, last = _paged(g, bs)
        qo = _query_lengths(g, bs, fixed)
        qo_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), qo.cumsum(0).int()])
        w.plan(qo_indptr, indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, causal=True,
               q_data_type=torch.float16)
        return (torch.randn(int(qo_indptr[-1]), HEADS, DIM, generator=g).half(),)

    def run(wrapper, q):
        return wrapper.run(q, cache) + 1
    return w, plan, run


def prefill_ragged_family():
    with standins.unpinned():
        w = prefill.BatchPrefillWithRaggedKVCacheWrapper(_workspace(), "NHD", backend="fa2")

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        qo = _query_lengths(g, bs, fixed)
        # Under static shapes the KV token count stays too: the extra lengths move between
        # requests from plan to plan.
        extra = (torch.arange(bs) % 5).roll(step) if fixed else torch.randint(
            0, 6, (bs,), generator=g)
        kv = qo + extra
        qo_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), qo.cumsum(0).int()])
        kv_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), kv.cumsum(0).int()])
        w.plan(qo_indptr, kv_indptr, HEADS, KV_HEADS, DIM, causal=True,
               q_data_type=torch.float16)
        n, m = int(qo_indptr[-1]), int(kv_indptr[-1])
        return (torch.randn(n, HEADS, DIM, generator=g).half(),
                torch.randn(m, KV_HEADS, DIM, generator=g).half(),
                torch.randn(m, KV_HEADS, DIM, generator=g).half())

    def run(wrapper, q, k, v):
        out, lse = wrapper.run_return_lse(q, k, v)
        return out - 1, lse
    return w, plan, run


def mla_family():
    heads, ckv, kpe = 4, 128, 64  # 0.7.4's fa2 takes multiples of 128 and 64
    with standins.unpinned():
        w = _mla_wrapper_class()(_workspace(), backend="fa2")
    ckv_cache = torch.randn(PAGES, PAGE, ckv).half()
    kpe_cache = torch.randn(PAGES, PAGE, kpe).half()

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        kv_len = torch.randint(1, 3 * PAGE, (bs,), generator=g).int()
        pages = (kv_len + PAGE - 1) // PAGE
        kv_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), pages.cumsum(0).int()])
        kv_indices = torch.randperm(PAGES, generator=g)[: int(kv_indptr[-1])].int()
        qo_indptr = torch.arange(bs + 1, dtype=torch.int32)
        w.plan(qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices,
               kv_len_arr=kv_len, num_heads=heads, head_dim_ckv=ckv, head_dim_kpe=kpe,
               page_size=PAGE, causal=False, sm_scale=0.1, q_data_type=torch.float16,
               kv_data_type=torch.float16)
        return (torch.randn(bs, heads, ckv, generator=g).half(),
                torch.randn(bs, heads, kpe, generator=g).half())

    def run(wrapper, q_nope, q_pe):
        out, lse = wrapper.run(q_nope, q_pe, ckv_cache, kpe_cache, return_lse=True)
        return out * 3, lse
    return w, plan, run


def batch_attention_family():
    with standins.unpinned():
        w = _holistic.BatchAttention("NHD", device="cpu")
    cache = (torch.randn(PAGES, PAGE, KV_HEADS, DIM).half(),
             torch.randn(PAGES, PAGE, KV_HEADS, DIM).half())

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        kv_len = torch.randint(1, 3 * PAGE, (bs,), generator=g).int()
        kv_indptr = _indptr((kv_len + PAGE - 1) // PAGE)
        kv_indices = torch.randperm(PAGES, generator=g)[: int(kv_indptr[-1])].int()
        qo_indptr = _indptr(_query_lengths(g, bs, fixed))
        with host_device():
            w.plan(qo_indptr, kv_indptr, kv_indices, kv_len, HEADS, KV_HEADS, DIM, DIM, PAGE,
                   causal=True, q_data_type=torch.float16, kv_data_type=torch.float16)
        return (torch.randn(int(qo_indptr[-1]), HEADS, DIM, generator=g).half(),)

    def run(wrapper, q):
        out, lse = wrapper.run(q, cache)  # always (out, lse)
        return out * 2, lse
    return w, plan, run


def pod_family():
    """One prefill request (its own K and V) beside a batch of decode requests (paged)."""
    with standins.unpinned():
        w = pod.PODWithPagedKVCacheWrapper(_workspace(), "NHD")
    cache = torch.randn(PAGES, 2, PAGE, KV_HEADS, DIM).half()

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        indptr, indices, last = _paged(g, bs)
        w.plan(indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, q_data_type=torch.float16)
        # At least 2 rows: a size of 1 is specialized (a graph of its own) in every shape mode.
        qo = 5 if fixed else int(torch.randint(2, 9, (1,), generator=g))
        kv = qo + (3 if fixed else int(torch.randint(0, 6, (1,), generator=g)))
        return (torch.randn(qo, HEADS, DIM, generator=g).half(),
                torch.randn(kv, KV_HEADS, DIM, generator=g).half(),
                torch.randn(kv, KV_HEADS, DIM, generator=g).half(),
                torch.randn(bs, HEADS, DIM, generator=g).half())

    def run(wrapper, q_p, k_p, v_p, q_d):
        out_p, out_d = wrapper.run(q_p, k_p, v_p, q_d, cache, causal_p=True)
        return out_p + 1, out_d * 2
    return w, plan, run


def batch_pod_family(return_lse=False):
    """A batch of prefill requests and a batch of decode requests, one paged cache. With
    `return_lse` the call returns two pairs, four results: traced as shipped (its module call
    through dynafold's `batch_pod_run`, the plans as graph data)."""
    with standins.unpinned(), host_device():
        w = pod.BatchPODWithPagedKVCacheWrapper(_workspace(), "NHD")
    cache = torch.randn(PAGES, 2, PAGE, KV_HEADS, DIM).half()

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        prefills = 3
        qo_p = _indptr(_query_lengths(g, prefills, fixed))
        pages = torch.randint(1, 4, (prefills + bs,), generator=g)
        kv_p, idx_p, last_p = _pages(g, pages[:prefills])
        kv_d, idx_d, last_d = _pages(g, pages[prefills:])
        w.plan(qo_p, kv_p, idx_p, last_p, torch.arange(bs + 1, dtype=torch.int32), kv_d, idx_d,
               last_d, HEADS, KV_HEADS, DIM, PAGE, q_data_type=torch.float16)
        return (torch.randn(int(qo_p[-1]), HEADS, DIM, generator=g).half(),
                torch.randn(bs, HEADS, DIM, generator=g).half())

    def run(wrapper, q_p, q_d):
        if return_lse:
            (out_p, out_d), lse = wrapper.run(q_p, cache, q_d, cache, causal_p=True,
                                              return_lse=True)
            return out_p - 1, out_d * 3, lse
        out_p, out_d = wrapper.run(q_p, cache, q_d, cache, causal_p=True)
        return out_p - 1, out_d * 3
    return w, plan, run


def cascade_family():
    """Two levels: a prefix shared by the whole batch, then each request's own pages, merged
    by merge_state_in_place."""
    with standins.unpinned():
        w = cascade.MultiLevelCascadeAttentionWrapper(2, _workspace(), "NHD")
    cache = torch.randn(PAGES, 2, PAGE, KV_HEADS, DIM).half()

    def plan(bs, step, fixed):
        g = _lengths(bs, step)
        qo = _query_lengths(g, bs, fixed)
        shared = 2 if fixed else int(torch.randint(1, 5, (1,), generator=g))
        own = torch.randint(1, 3, (bs,), generator=g)
        order = torch.randperm(PAGES, generator=g).int()
        own_indptr = _indptr(own)
        qo_indptr = [torch.tensor([0, int(qo.sum())], dtype=torch.int32), _indptr(qo)]
        kv_indptr = [torch.tensor([0, shared], dtype=torch.int32), own_indptr]
        kv_indices = [order[:shared], order[shared:shared + int(own_indptr[-1])]]
        last = [torch.tensor([PAGE], dtype=torch.int32),
                torch.randint(1, PAGE + 1, (bs,), generator=g).int()]
        with host_device():
            w.plan(qo_indptr, kv_indptr, kv_indices, last, HEADS, KV_HEADS, DIM, PAGE,
                   causal=True, q_data_type=torch.float16)
        return (torch.randn(int(qo.sum()), HEADS, DIM, generator=g).half(),)

    def run(wrapper, q):
        return wrapper.run(q, cache) * 2
    return w, plan, run


# A family's wrapper class, where the release may lack it.
NEEDS = {"batch_attention": lambda: _holistic is not None,
         "pod": lambda: hasattr(pod, "PODWithPagedKVCacheWrapper"),
         "batch_pod": lambda: hasattr(pod, "BatchPODWithPagedKVCacheWrapper"),
         "batch_pod_lse": lambda: hasattr(pod, "BatchPODWithPagedKVCacheWrapper"),
         "cascade": lambda: hasattr(cascade, "MultiLevelCascadeAttentionWrapper")}
FAMILIES = {
    "decode": lambda: decode_family(False),
    "decode_tensor_cores": lambda: decode_family(True),
    "prefill_paged": prefill_paged_family,
    "prefill_ragged": prefill_ragged_family,
    "mla": mla_family,
    "batch_attention": batch_attention_family,
    "pod": pod_family,
    "batch_pod": batch_pod_family,
    "batch_pod_lse": lambda: batch_pod_family(return_lse=True),
    "cascade": cascade_family,
}
# 25 batch sizes up, 25 down: 50 plans, each its own sizes. The first is none of the other
# dimensions (heads, head dim, page size), which duck sizing would tie it to. Under static
# shapes the batch (and so the token count) stays and the plans differ in their KV lengths,
# pages and last-page lengths, as a CUDA-graph batch padded to its captured size does.
SIZES = list(range(5, 30)) + list(range(29, 4, -1))
STATIC_BATCH = 7


def check(family, mode, holding):
    w, plan, run = FAMILIES[family]()
    if holding == "global":
        globals()["WRAPPER"] = w

        def fn(*inputs):
            return run(WRAPPER, *inputs)  # noqa: F821  (set just above)
    else:
        fn = run
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(fn, fullgraph=True, backend="inductor", dynamic={
        "static": False, "mark_dynamic": None, "dynamic": True}[mode])
    unequal = []
    for step, bs in enumerate(SIZES):
        if mode == "static":
            bs = STATIC_BATCH
        inputs = plan(bs, step, mode == "static")
        args = inputs if holding == "global" else (w, *inputs)
        eager = fn(*args)  # first, as a server's warm-up runs before its compiled forward
        if mode == "mark_dynamic":
            for t in inputs:
                torch._dynamo.mark_dynamic(t, 0)
        try:
            got = compiled(*args)
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500], "at": bs}
        if not same(eager, got):
            unequal.append(bs)
    return {"ok": True, "equal": not unequal, "unequal": unequal[:5], "plans": len(SIZES),
            "frames": counters["stats"].get("unique_graphs", 0),
            "recompiles": sum(counters["recompiles"].values())
            if "recompiles" in counters else 0}


def dispatch_forms():
    """Per method dynafold dispatches on FlashInfer's classes ("Class.method"), its form
    (hooks/ops/mechanisms/dispatch.py): "in place" (FlashInfer's own code with the dispatch
    first), "exact" (one frame with the method's parameters) or "packing"."""
    forms = {}
    for cls, attr, value in dispatched_methods():
        # The dispatcher itself, or inside FlashInfer's trace-dump decorator.
        codes = [value.__code__] + [
            c.cell_contents.__code__ for c in value.__closure__ or ()
            if hasattr(getattr(c, "cell_contents", None), "__code__")]
        form = "packing"
        for code in codes:
            if code.co_filename.startswith("<dynafold dispatcher"):
                form = "exact"
            elif "_dynafold_keywords" in code.co_varnames:
                form = "in place"
        forms[f"{cls.__name__}.{attr}"] = form
    return forms


def main():
    args = sys.argv[1:]
    # `--dynamic-global`: only `dynamic=True` with the wrapper a global, over 20 plans (10 up,
    # 10 down: past Dynamo's recompile limit of 8), the other releases' check at less CI
    # time; the full matrix and 50 plans run on the newest.
    few = "--dynamic-global" in args
    if few:
        SIZES[:] = list(range(5, 15)) + list(range(14, 4, -1))
    wanted = [a for a in args if not a.startswith("--")] or list(FAMILIES)
    modes = ("dynamic",) if few else ("static", "mark_dynamic", "dynamic")
    holdings = ("global",) if few else ("global", "argument")
    out = {}
    absent = [f for f in wanted if not NEEDS.get(f, lambda: True)()]
    for family in wanted:
        if family in absent:
            continue
        for mode in modes:
            for holding in holdings:
                out[f"{family}/{mode}/{holding}"] = check(family, mode, holding)
    ops = sys.modules.get("_dynafold_ops.engine.wake")
    status = ops.status() if ops is not None else {}
    print("RESULT " + json.dumps({"cases": out, "absent": absent,
                                 "runs": status.get("wrapper runs"),
                                 "dispatch": dispatch_forms()}),
          flush=True)


if __name__ == "__main__":
    main()
