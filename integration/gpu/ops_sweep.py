"""FlashInfer's public ops under torch.compile(fullgraph=True) on the GPU (issue 12), by hand.

    python3 ops_sweep.py sweep      # each op: eager once, then compiled (inductor) and captured
    python3 ops_sweep.py eager-us   # smallest rmsnorm (1 x 4096), host time per eager call

Each case is called eagerly first (that builds its JIT module, as SGLang's warm-up does), then
compiled with fullgraph=True (zero graph breaks or an error), then the compiled function is
captured in a CUDA graph and replayed; outputs are compared with eager bit for bit. One line per
case: SWEEP <name> PASS|FAIL <what>.
"""
import os
import sys
import time

import torch
import flashinfer

DEV = "cuda"
torch.manual_seed(0)


def t(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


def cases():
    """(name, fn) per public op, in families; each fn allocates its own outputs or clones what
    an in-place op mutates, so eager and compiled runs see the same inputs."""
    x, w = t(8, 4096), t(4096)
    yield "rmsnorm", lambda: flashinfer.rmsnorm(x, w, 1e-6)
    yield "gemma_rmsnorm", lambda: flashinfer.gemma_rmsnorm(x, w, 1e-6)
    yield "fused_add_rmsnorm", in_place(
        lambda a, r: flashinfer.fused_add_rmsnorm(a, r, w, 1e-6), x, x)
    yield "gemma_fused_add_rmsnorm", in_place(
        lambda a, r: flashinfer.gemma_fused_add_rmsnorm(a, r, w, 1e-6), x, x)
    wf, bf = t(4096, dtype=torch.float32), t(4096, dtype=torch.float32)
    yield "layernorm", lambda: flashinfer.layernorm(x, wf, bf, 1e-6)
    yield from quant_norm_cases(x, w)
    a = t(8, 2 * 4096)
    yield "silu_and_mul", lambda: flashinfer.silu_and_mul(a)
    yield "gelu_and_mul", lambda: flashinfer.gelu_and_mul(a)
    yield "gelu_tanh_and_mul", lambda: flashinfer.gelu_tanh_and_mul(a)
    yield from rope_cases()
    logits = t(8, 32000, dtype=torch.float32)
    probs = torch.softmax(logits, dim=-1)
    yield "sampling.softmax", lambda: flashinfer.sampling.softmax(logits, 1.0)
    yield "top_k_renorm_probs", lambda: flashinfer.sampling.top_k_renorm_probs(probs, 50)
    yield "top_p_renorm_probs", lambda: flashinfer.sampling.top_p_renorm_probs(probs, 0.9)
    yield "top_k_mask_logits", lambda: flashinfer.sampling.top_k_mask_logits(logits, 50)
    # Sampling under a fixed generator: each run reseeds first, so eager, compiled and
    # captured runs draw from the same Philox offset.
    s = flashinfer.sampling
    yield "sampling_from_probs", Seeded(lambda: s.sampling_from_probs(probs))
    yield "sampling_from_logits", Seeded(lambda: s.sampling_from_logits(logits))
    yield "top_p_sampling_from_probs", Seeded(lambda: s.top_p_sampling_from_probs(probs, 0.9))
    yield "top_k_sampling_from_probs", Seeded(lambda: s.top_k_sampling_from_probs(probs, 50))
    yield "min_p_sampling_from_probs", Seeded(lambda: s.min_p_sampling_from_probs(probs, 0.1))
    yield "top_k_top_p_sampling_from_probs", Seeded(
        lambda: s.top_k_top_p_sampling_from_probs(probs, 50, 0.9))
    # The joint path SGLang's sampler calls, from probs and from logits (issue 18).
    yield "top_k_top_p_sampling_from_probs(joint)", Seeded(
        lambda: s.top_k_top_p_sampling_from_probs(probs, 50, 0.9, filter_apply_order="joint"))
    yield "top_k_top_p_sampling_from_logits(joint)", Seeded(
        lambda: s.top_k_top_p_sampling_from_logits(logits, 50, 0.9, filter_apply_order="joint"))
    yield "top_k_top_p_sampling_from_logits", Seeded(
        lambda: s.top_k_top_p_sampling_from_logits(logits, 50, 0.9))
    va, sa = t(8, 4, 128), t(8, 4, dtype=torch.float32)
    vb, sb = t(8, 4, 128), t(8, 4, dtype=torch.float32)
    yield "merge_state", lambda: flashinfer.merge_state(va, sa, vb, sb)
    yield "merge_state_in_place", in_place(
        lambda v, s: flashinfer.merge_state_in_place(v, s, vb, sb), va, sa)
    vs, ss = t(8, 3, 4, 128), t(8, 3, 4, dtype=torch.float32)
    yield "merge_states", lambda: flashinfer.merge_states(vs, ss)
    bits = torch.rand(1000, device=DEV) > 0.5
    yield "packbits", lambda: flashinfer.packbits(bits, "little")
    seg = torch.tensor([0, 300, 1000], device=DEV, dtype=torch.int32)
    yield "segment_packbits", lambda: flashinfer.segment_packbits(bits, seg, "little")
    fa = t(4, 64, 128).to(torch.float8_e4m3fn)
    fb = t(4, 256, 128).to(torch.float8_e4m3fn).transpose(-2, -1)
    one = torch.ones(1, device=DEV, dtype=torch.float32)
    yield "bmm_fp8", lambda: flashinfer.bmm_fp8(fa, fb, one, one, torch.bfloat16)
    yield from attention_cases()


HEAD, NQ, NK, PAGE = 128, 8, 2, 16


def quant_norm_cases(x, w):
    """The fp8-quant norms SGLang registers itself, with the scale as a tensor and as a float."""
    norm = flashinfer.norm
    for kind, scale in (("tensor", torch.tensor([0.5], device=DEV)), ("float", 0.5)):
        def quant(scale=scale):
            out = torch.empty(x.shape, device=DEV, dtype=torch.float8_e4m3fn)
            norm.rmsnorm_quant(out, x, w, scale, 1e-6)
            return out.view(torch.uint8)
        yield f"rmsnorm_quant({kind} scale)", quant

        def fused(scale=scale):
            out = torch.empty(x.shape, device=DEV, dtype=torch.float8_e4m3fn)
            residual = x.clone()
            norm.fused_add_rmsnorm_quant(out, x, residual, w, scale, 1e-6)
            return out.view(torch.uint8), residual
        yield f"fused_add_rmsnorm_quant({kind} scale)", fused


def rope_cases():
    tokens = 8
    q, k = t(tokens, NQ * HEAD), t(tokens, NK * HEAD)
    cache = t(4096, HEAD, dtype=torch.float32)
    pos = torch.arange(tokens, device=DEV, dtype=torch.int32)
    qr, kr = t(tokens, NQ, HEAD), t(tokens, NK, HEAD)
    indptr = torch.tensor([0, tokens], device=DEV, dtype=torch.int32)
    offsets = torch.zeros(1, device=DEV, dtype=torch.int32)
    yield "apply_rope_with_cos_sin_cache", lambda: flashinfer.apply_rope_with_cos_sin_cache(
        pos, q, k, HEAD, cache, True)
    yield "apply_rope_with_cos_sin_cache_inplace", in_place(
        lambda qq, kk: flashinfer.apply_rope_with_cos_sin_cache_inplace(pos, qq, kk, HEAD, cache, True),
        q, k)
    yield "apply_rope", lambda: flashinfer.apply_rope(qr, kr, indptr, offsets)
    yield "apply_rope_inplace", in_place(
        lambda qq, kk: flashinfer.apply_rope_inplace(qq, kk, indptr, offsets), qr, kr)
    yield "apply_llama31_rope", lambda: flashinfer.apply_llama31_rope(qr, kr, indptr, offsets)
    yield "apply_llama31_rope_inplace", in_place(
        lambda qq, kk: flashinfer.apply_llama31_rope_inplace(qq, kk, indptr, offsets), qr, kr)
    yield "apply_rope_pos_ids", lambda: flashinfer.apply_rope_pos_ids(qr, kr, pos)
    yield "apply_rope_pos_ids_inplace", in_place(
        lambda qq, kk: flashinfer.apply_rope_pos_ids_inplace(qq, kk, pos), qr, kr)
    yield "apply_llama31_rope_pos_ids", lambda: flashinfer.apply_llama31_rope_pos_ids(qr, kr, pos)


def attention_cases():
    """Paged KV append, single and batch attention (wrappers planned eagerly, run compiled),
    as a server's decode and prefill steps use them. FA2 kernels (they run on sm90 and build in
    a fraction of FA3's JIT time)."""
    bs, pages_per_req, qlen = 4, 4, 8
    pages = bs * pages_per_req
    kv = t(pages, 2, PAGE, NK, HEAD)
    kv_indptr = torch.arange(bs + 1, device=DEV, dtype=torch.int32) * pages_per_req
    kv_indices = torch.arange(pages, device=DEV, dtype=torch.int32)
    last = torch.full((bs,), 5, device=DEV, dtype=torch.int32)
    ws = torch.zeros(128 * 1024 * 1024, device=DEV, dtype=torch.uint8)

    seq_lens = (kv_indptr[1:] - kv_indptr[:-1] - 1) * PAGE + last
    append_indptr = torch.arange(bs + 1, device=DEV, dtype=torch.int32) * 2
    batch_idx, positions = flashinfer.get_batch_indices_positions(append_indptr, seq_lens, 2 * bs)
    ak, av = t(2 * bs, NK, HEAD), t(2 * bs, NK, HEAD)

    def append():
        cache = kv.clone()
        flashinfer.append_paged_kv_cache(ak, av, batch_idx, positions, cache, kv_indices,
                                         kv_indptr, last)
        return cache
    yield "append_paged_kv_cache", append

    q1, k1, v1 = t(NQ, HEAD), t(300, NK, HEAD), t(300, NK, HEAD)
    yield "single_decode_with_kv_cache", lambda: flashinfer.single_decode_with_kv_cache(q1, k1, v1)

    def with_lse():
        # An inductor graph that reads the lse the kernel writes (undeclared by FlashInfer).
        o, lse = flashinfer.single_decode_with_kv_cache(q1, k1, v1, return_lse=True)
        return o, lse * 2 + 1
    yield "single_decode_with_kv_cache(return_lse)", with_lse
    qp, kp, vp = t(64, NQ, HEAD), t(300, NK, HEAD), t(300, NK, HEAD)
    yield "single_prefill_with_kv_cache", lambda: flashinfer.single_prefill_with_kv_cache(
        qp, kp, vp, causal=True, backend="fa2")

    def decode():
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        wrapper.plan(kv_indptr, kv_indices, last, NQ, NK, HEAD, PAGE,
                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        qd = t(bs, NQ, HEAD)
        return lambda: wrapper.run(qd, kv)
    yield "BatchDecodeWithPagedKVCacheWrapper.run", Setup(decode)

    qo_indptr = torch.arange(bs + 1, device=DEV, dtype=torch.int32) * qlen
    qq = t(bs * qlen, NQ, HEAD)

    def prefill():
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(torch.zeros_like(ws), "NHD",
                                                                 backend="fa2")
        wrapper.plan(qo_indptr, kv_indptr, kv_indices, last, NQ, NK, HEAD, PAGE, causal=True,
                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        return lambda: wrapper.run(qq, kv)
    yield "BatchPrefillWithPagedKVCacheWrapper.run", Setup(prefill)

    def ragged():
        wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(torch.zeros_like(ws), "NHD",
                                                                  backend="fa2")
        kv_len = 100
        rk_indptr = torch.arange(bs + 1, device=DEV, dtype=torch.int32) * kv_len
        wrapper.plan(qo_indptr, rk_indptr, NQ, NK, HEAD, causal=True,
                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        rk, rv = t(bs * kv_len, NK, HEAD), t(bs * kv_len, NK, HEAD)
        return lambda: wrapper.run(qq, rk, rv)
    yield "BatchPrefillWithRaggedKVCacheWrapper.run", Setup(ragged)


class Setup:
    """A case whose set-up itself runs FlashInfer (a wrapper's eager plan() builds its JIT
    module): made only when the case is selected, before its eager call."""

    def __init__(self, make):
        self.make = make


class Seeded:
    """A sampling case: the sweep reseeds the generator before each run (outside the compiled
    function), so eager, compiled and captured runs draw from the same Philox offset."""

    def __init__(self, fn):
        self.fn = fn




def in_place(op, *tensors):
    def f():
        copies = [x.clone() for x in tensors]
        op(*copies)
        return tuple(copies)
    return f


def same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(a, b)
    return a == b


_GRAPH_OPS = []


def recording_inductor(gm, example_inputs):
    """Inductor, after noting the operators Dynamo put in the graph."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and "dynafold" in str(node.target):
            _GRAPH_OPS.append(str(node.target).split(".")[1])
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


def graph_ops():
    return ",".join(_GRAPH_OPS) or "no dynafold operator"


def sweep():
    passed = total = 0
    only = os.environ.get("SWEEP_ONLY")
    # "i/n": this process takes every n-th case from the i-th, so n processes build FlashInfer's
    # JIT modules side by side.
    shard, shards = (int(p) for p in os.environ.get("SWEEP_SHARD", "0/1").split("/"))
    for index, (name, fn) in enumerate(cases()):
        if only and name not in only.split(","):
            continue
        if index % shards != shard:
            continue
        total += 1
        step = "eager"
        started = time.monotonic()
        try:
            if isinstance(fn, Setup):
                step = "set-up"
                fn = fn.make()
                step = "eager"
            reseed = isinstance(fn, Seeded)
            fn = fn.fn if reseed else fn
            seed = (lambda: torch.manual_seed(1234)) if reseed else (lambda: None)
            seed()
            ref = fn()
            torch.cuda.synchronize()
            step = "compile"
            torch._dynamo.reset()
            _GRAPH_OPS.clear()
            compiled = torch.compile(fn, fullgraph=True, backend=recording_inductor)
            seed()
            out = compiled()
            torch.cuda.synchronize()
            if not same(out, ref):
                print(f"SWEEP {name} FAIL compiled output differs from eager", flush=True)
                continue
            step = "cudagraph"
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                seed()
                compiled()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            seed()
            with torch.cuda.graph(g):
                captured = compiled()
            g.replay()
            torch.cuda.synchronize()
            if not same(captured, ref):
                print(f"SWEEP {name} FAIL replayed output differs from eager", flush=True)
                continue
            passed += 1
            print(f"SWEEP {name} PASS compiled+captured, bit-identical, ops: {graph_ops()} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
        except Exception as e:
            msg = " ".join(str(e).split())[:3000]
            print(f"SWEEP {name} FAIL at {step}: {type(e).__name__}: {msg}", flush=True)
    print(f"SWEEP TOTAL {passed} of {total}", flush=True)
    mod = sys.modules.get("_dynafold_ops.engine.wake")
    if mod is not None:
        print("SWEEP STATUS", mod.status(), flush=True)


def eager_us(calls=10000, repeats=5):
    """Host time per eager call, median of `repeats` loops of `calls` calls."""
    x, w = t(1, 4096), t(4096)
    out = torch.empty_like(x)
    for _ in range(200):
        flashinfer.rmsnorm(x, w, 1e-6, out=out)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            flashinfer.rmsnorm(x, w, 1e-6, out=out)
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    per_call.sort()
    print(f"EAGER_US {per_call[len(per_call) // 2]:.3f}", flush=True)


if __name__ == "__main__":
    {"sweep": sweep, "eager-us": eager_us}[sys.argv[1]]()
