"""One process of bench/host_path.py: FlashInfer's attention wrappers and KV append on the host
path, timed call by call, with CPU stand-in kernels that do (almost) nothing, so that what is
timed is the Python around them: FlashInfer's, and dynafold's where it is loaded.

Per wrapper family SGLang uses (decode with CUDA cores and with tensor cores, paged and
ragged prefill, MLA) and for `append_paged_kv_cache`: `plan()` then `run()` (a decode step's
order), then the call as SGLang 0.5.12 makes it (`sglang`: the deprecated `forward()` with its
keywords, which calls `run()`; MLA's `run(..., out=)`), and the append, timed each call,
ROUNDS calls; first in a process that has never
compiled, then again after a `torch.compile` of a trivial function has run (what turns on
dynafold's compile-time mechanisms for the rest of the process: plans as data, the run
operator). With dynafold loaded, the same calls then again in blocks alternating its
dispatchers with the methods as shipped (`in_process`). Prints one `BENCH {...}` line: per
state, per family and call, the median microseconds per call.

The kernels stand in at FlashInfer's JIT specs, as tests/python/helpers/standin_kernels.py
does, but as plain functions (no `torch._dynamo.disable`, which costs more per call than the
kernels here): nothing compiles them. Each plan returns a tvm_ffi Array of as many ints as the
real scheduler's plan info (DecodePlanInfo 10, PrefillPlanInfo 15, MLAPlanInfo 18).

With `--cuda` (integration/gpu/host_path.sh, on the H200) nothing stands in: FlashInfer's real
kernels, on SGLang's shapes (bf16, head dim 128, GQA 4; MLA with DeepSeek's 512 + 64), the
index tensors on the GPU as SGLang passes them. run() is timed on the host, as a step's launch
costs it: the kernels queue behind it.
"""
import contextlib
import json
import statistics
import sys
import time
import types

import torch

import flashinfer  # the package's own imports, as a server makes them
import flashinfer.decode as decode
import flashinfer.page as page
import flashinfer.prefill as prefill

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
CUDA = "--cuda" in sys.argv
if CUDA:
    DEVICE, DTYPE = "cuda", torch.bfloat16
    HEADS, KV_HEADS, DIM, PAGE, PAGES, BS = 32, 8, 128, 16, 256, 8
    MLA_HEADS, CKV, KPE = 16, 512, 64
    BACKEND = "auto"  # SGLang's: FlashInfer picks FA3 on the H200
else:
    import standin_kernels
    DEVICE, DTYPE = "cpu", torch.float16
    HEADS, KV_HEADS, DIM, PAGE, PAGES, BS = 8, 2, 64, 16, 64, 8
    MLA_HEADS, CKV, KPE = 4, 128, 64
    BACKEND = "fa2"  # the stand-ins replace the FA2 modules' specs


SCALE = DIM ** -0.5


def _zeros(*shape):
    return torch.zeros(*shape, dtype=DTYPE, device=DEVICE)


def _ints(t):
    return t.to(DEVICE)


def _array(n):
    ints = list(range(n))
    try:
        import tvm_ffi
        return tvm_ffi.convert(ints)
    except ImportError:  # before FlashInfer 0.6: a list
        return ints


def _spec(**kernels):
    class Spec:
        def build_and_load(self):
            return types.SimpleNamespace(**kernels)
    return Spec()


def _nothing(*args):
    return None


def _plan(n):
    plan = _array(n)
    return lambda *args: plan


_DECODE = _spec(plan=_plan(10), run=_nothing)
_PREFILL = _spec(plan=_plan(15), paged_run=_nothing, ragged_run=_nothing)
_MLA = _spec(plan=_plan(18), run=_nothing)
if not CUDA:
    decode.gen_batch_decode_module = lambda *a, **k: _DECODE
    for _name in ("gen_batch_prefill_module", "_gen_batch_prefill_primary_module",
                  "_gen_batch_prefill_independent_paged_module"):
        if hasattr(prefill, _name):
            setattr(prefill, _name, lambda *a, **k: _PREFILL)
    page.gen_page_module = lambda *a, **k: _spec(append_paged_kv_cache=_nothing)
    import flashinfer.activation as activation
    import flashinfer.norm as norm
    import flashinfer.rope as rope
    norm.gen_norm_module = lambda *a, **k: _spec(rmsnorm=_nothing, fused_add_rmsnorm=_nothing)
    activation.gen_act_and_mul_module = lambda *a, **k: _spec(silu_and_mul=_nothing)
    rope.gen_rope_module = lambda *a, **k: _spec(apply_rope_pos_ids_cos_sin_cache=_nothing)
    # fast_decode_plan's tensor-core path enters the wrapper's device, which no CPU has.
    torch.cuda.device = lambda device: contextlib.nullcontext()


def _mla_wrapper():
    """The MLA wrapper, its module's JIT spec stood in; None where the release's wrapper asks
    for a GPU at plan() (0.7.x)."""
    import importlib
    found = False
    for name in ("flashinfer.mla", "flashinfer.mla._core"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "gen_batch_mla_module"):
            if not CUDA:
                module.gen_batch_mla_module = lambda *a, **k: _MLA
            found = True
    if not found:
        return None
    import flashinfer.mla as mla
    return mla.BatchMLAPagedAttentionWrapper


def _workspace():
    return torch.empty(128 << 20 if CUDA else 1 << 20, dtype=torch.uint8, device=DEVICE)


def _unpinned():
    """FlashInfer's wrappers pin host buffers; a CPU-only torch cannot."""
    return contextlib.nullcontext() if CUDA else standin_kernels.unpinned()


def _pages():
    indptr = torch.arange(0, 2 * BS + 1, 2, dtype=torch.int32)
    indices = torch.arange(2 * BS, dtype=torch.int32)
    last = torch.full((BS,), 3, dtype=torch.int32)
    return _ints(indptr), _ints(indices), _ints(last)


def decode_family(tensor_cores):
    with _unpinned():
        w = decode.BatchDecodeWithPagedKVCacheWrapper(
            _workspace(), "NHD", use_tensor_cores=tensor_cores, backend=BACKEND)
    indptr, indices, last = _pages()
    cache = (_zeros(PAGES, PAGE, KV_HEADS, DIM),
             _zeros(PAGES, PAGE, KV_HEADS, DIM))
    q = _zeros(BS, HEADS, DIM)

    def plan():
        w.plan(indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, q_data_type=DTYPE,
               kv_data_type=DTYPE)

    def run():
        w.run(q, cache)

    def sglang():
        # SGLang 0.5.12's decode call (flashinfer_backend.py forward_decode), which runs run().
        w.forward(q, cache, sm_scale=SCALE, logits_soft_cap=0.0, k_scale=1.0, v_scale=1.0)
    return plan, run, sglang


def prefill_paged_family():
    with _unpinned():
        w = prefill.BatchPrefillWithPagedKVCacheWrapper(_workspace(), "NHD", backend=BACKEND)
    indptr, indices, last = _pages()
    qo_indptr = _ints(torch.arange(0, 3 * BS + 1, 3, dtype=torch.int32))
    cache = _zeros(PAGES, 2, PAGE, KV_HEADS, DIM)
    q = _zeros(3 * BS, HEADS, DIM)

    def plan():
        w.plan(qo_indptr, indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, causal=True,
               q_data_type=DTYPE, kv_data_type=DTYPE)

    def run():
        w.run(q, cache)

    def sglang():
        # SGLang 0.5.12's extend call over the paged cache (forward_extend).
        w.forward(q, cache, causal=True, sm_scale=SCALE, window_left=-1, logits_soft_cap=0.0,
                  k_scale=1.0, v_scale=1.0)
    return plan, run, sglang


def prefill_ragged_family():
    with _unpinned():
        w = prefill.BatchPrefillWithRaggedKVCacheWrapper(_workspace(), "NHD", backend=BACKEND)
    qo_indptr = _ints(torch.arange(0, 3 * BS + 1, 3, dtype=torch.int32))
    kv_indptr = _ints(torch.arange(0, 5 * BS + 1, 5, dtype=torch.int32))
    q = _zeros(3 * BS, HEADS, DIM)
    k = _zeros(5 * BS, KV_HEADS, DIM)
    v = _zeros(5 * BS, KV_HEADS, DIM)

    def plan():
        w.plan(qo_indptr, kv_indptr, HEADS, KV_HEADS, DIM, causal=True,
               q_data_type=DTYPE, kv_data_type=DTYPE)

    def run():
        # SGLang's extend path: the lse too, to merge with the paged part.
        w.run_return_lse(q, k, v)

    def sglang():
        # SGLang 0.5.12's extend call over the new tokens, merged with the paged part's lse.
        w.forward_return_lse(q, k, v, causal=True, sm_scale=SCALE, logits_soft_cap=0.0)
    return plan, run, sglang


def mla_family():
    cls = _mla_wrapper()
    if cls is None:
        return None
    heads, ckv, kpe = MLA_HEADS, CKV, KPE
    with _unpinned():
        w = cls(_workspace(), backend=BACKEND)
    indptr, indices, _ = _pages()
    kv_len = _ints(torch.full((BS,), 2 * PAGE - 3, dtype=torch.int32))
    qo_indptr = _ints(torch.arange(BS + 1, dtype=torch.int32))
    ckv_cache = _zeros(PAGES, PAGE, ckv)
    kpe_cache = _zeros(PAGES, PAGE, kpe)
    q_nope = _zeros(BS, heads, ckv)
    q_pe = _zeros(BS, heads, kpe)

    def plan():
        w.plan(qo_indptr, indptr, indices, kv_len, heads, ckv, kpe, PAGE, False, 0.1,
               DTYPE, DTYPE)

    def run():
        w.run(q_nope, q_pe, ckv_cache, kpe_cache)

    out = torch.empty_like(q_nope)

    def sglang():
        # SGLang 0.5.12's MLA decode call (flashinfer_mla_backend.py forward_decode).
        w.run(q_nope, q_pe, ckv_cache, kpe_cache, out=out)
    return plan, run, sglang


def decode_graph_family():
    """SGLang's CUDA-graph decode (tensor cores, as it picks for GQA 4): a wrapper over fixed
    buffers, planned every step by FlashInfer's fast_decode_plan (SGLang's begin_forward)."""
    indptr, indices, last = _pages()
    with _unpinned():
        w = decode.BatchDecodeWithPagedKVCacheWrapper(
            _workspace(), "NHD", use_cuda_graph=True, use_tensor_cores=True, backend=BACKEND,
            paged_kv_indptr_buffer=indptr.clone(), paged_kv_indices_buffer=indices.clone(),
            paged_kv_last_page_len_buffer=last.clone())
    cache = (_zeros(PAGES, PAGE, KV_HEADS, DIM), _zeros(PAGES, PAGE, KV_HEADS, DIM))
    q = _zeros(BS, HEADS, DIM)
    indptr_host = indptr.cpu()
    w.plan(indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, q_data_type=DTYPE,
           kv_data_type=DTYPE)

    def plan():
        decode.fast_decode_plan(w, indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE,
                                q_data_type=DTYPE, kv_data_type=DTYPE, non_blocking=True,
                                global_override_indptr_cpu=indptr_host)

    def run():
        w.run(q, cache)
    return plan, run


def layer_calls():
    """The decoder layer's other FlashInfer calls (integration/gpu/decoder_layer.py): the two
    norms, RoPE from a cos/sin cache in place, SiLU-and-mul."""
    hidden, tokens = HEADS * DIM, BS
    x, residual = _zeros(tokens, hidden), _zeros(tokens, hidden)
    weight = _zeros(hidden)
    gate_up = _zeros(tokens, 4 * hidden)
    q, k = _zeros(tokens, HEADS * DIM), _zeros(tokens, KV_HEADS * DIM)
    cos_sin = torch.zeros(64, DIM, device=DEVICE)
    positions = _ints(torch.zeros(tokens, dtype=torch.int64))
    return {
        "rmsnorm": lambda: flashinfer.rmsnorm(x, weight, 1e-6),
        "fused_add_rmsnorm": lambda: flashinfer.fused_add_rmsnorm(x, residual, weight, 1e-6),
        "rope": lambda: flashinfer.apply_rope_with_cos_sin_cache_inplace(
            positions, q, k, DIM, cos_sin, True),
        "silu_and_mul": lambda: flashinfer.silu_and_mul(gate_up),
    }


def append_call():
    indptr, indices, last = _pages()
    k = _zeros(BS, KV_HEADS, DIM)
    v = _zeros(BS, KV_HEADS, DIM)
    cache = _zeros(PAGES, 2, PAGE, KV_HEADS, DIM)
    batch_indices = _ints(torch.arange(BS, dtype=torch.int32))
    positions = _ints(torch.full((BS,), 2 * PAGE - 1, dtype=torch.int32))

    def append():
        flashinfer.append_paged_kv_cache(k, v, batch_indices, positions, cache, indices, indptr,
                                         last)
    return append


FAMILIES = {
    "decode": lambda: decode_family(False),
    "decode_tensor_cores": lambda: decode_family(True),
    "prefill_paged": prefill_paged_family,
    "prefill_ragged": prefill_ragged_family,
    "mla": mla_family,
    "decode_graph": decode_graph_family,
}


def time_calls(calls, rounds):
    """Median microseconds per call of each of `calls` (name -> function), called in turn
    `rounds` times (after a few untimed rounds)."""
    clock = time.perf_counter_ns
    times = {name: [] for name in calls}
    for i in range(rounds + 20):
        for name, call in calls.items():
            t0 = clock()
            call()
            t1 = clock()
            if i >= 20:
                times[name].append(t1 - t0)
    return {name: statistics.median(ts) / 1e3 for name, ts in times.items()}


def measure(made, layer, append, rounds=ROUNDS):
    out = {}
    for family, calls in made.items():
        if calls is None:
            continue
        got = time_calls(dict(zip(("plan", "run", "sglang"), calls)), rounds)
        for call, us in got.items():
            out[f"{family}.{call}"] = us
    out["append"] = time_calls({"append": append}, rounds)["append"]
    out.update(time_calls(layer, rounds))
    return out


def in_process(made, layer, append, blocks=8):
    """The same calls in one process that has compiled, in blocks alternating dynafold's
    dispatchers with FlashInfer's methods as shipped (ABBA order): what the dispatchers cost,
    free of what differs between processes (a GPU host's 1.2-1.3x from process to process
    where dynafold runs no code, issue 40). Per call, the block medians of each (the methods
    as shipped: tests/python/helpers/dispatched.py's `use`)."""
    from dispatched import dispatched_methods, use  # tests/python/helpers, on bench's PYTHONPATH
    methods = dispatched_methods()
    out = {"dispatched": {}, "shipped": {}}
    for block in range(blocks):
        order = ("dispatched", "shipped") if block % 2 == 0 else ("shipped", "dispatched")
        for kind in order:
            use(methods, kind)
            for call, us in measure(made, layer, append).items():
                out[kind].setdefault(call, []).append(us)
    use(methods, "dispatched")
    out["methods"] = len(methods)
    return out


def main():
    # --family=NAME: that family alone (integration/gpu/host_path.sh builds each family's JIT
    # modules in a process of its own, at once).
    only = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--family=")]
    made = {name: make() for name, make in FAMILIES.items() if not only or name in only}
    layer = layer_calls()
    append = append_call()
    result = {"fresh": measure(made, layer, append)}
    # Any compile turns on what dynafold does once a process compiles.
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    result["compiled"] = measure(made, layer, append)
    finder = sys.meta_path[0]
    result["dynafold"] = type(finder).__name__ == "DynafoldFinder"
    if result["dynafold"]:
        # (Four blocks on the GPU: each is as long as the whole measure above, and a call of
        # integration/gpu/host_path.sh has ten minutes for all its processes.)
        result["in_process"] = in_process(made, layer, append, 4 if CUDA else 8)
    print("BENCH " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
