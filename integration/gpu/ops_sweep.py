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
    x, w = t(8, 4096), t(4096)
    logits = t(8, 32000, dtype=torch.float32)
    probs = torch.softmax(logits, dim=-1)
    head, nq, nk, tokens = 128, 8, 2, 8
    q, k = t(tokens, nq * head), t(tokens, nk * head)
    cache = t(4096, head, dtype=torch.float32)
    pos = torch.arange(tokens, device=DEV, dtype=torch.int32)
    qr, kr = t(tokens, nq, head), t(tokens, nk, head)
    indptr = torch.tensor([0, tokens], device=DEV, dtype=torch.int32)
    offsets = torch.zeros(1, device=DEV, dtype=torch.int32)
    va, sa, vb, sb = t(8, 4, 128), t(8, 4, dtype=torch.float32), t(8, 4, 128), t(8, 4, dtype=torch.float32)
    bits = torch.rand(1000, device=DEV) > 0.5
    yield "rmsnorm", lambda: flashinfer.rmsnorm(x, w, 1e-6), ()
    yield "gemma_rmsnorm", lambda: flashinfer.gemma_rmsnorm(x, w, 1e-6), ()
    yield "fused_add_rmsnorm", fused_add(flashinfer.fused_add_rmsnorm, x, w), ()
    yield "gemma_fused_add_rmsnorm", fused_add(flashinfer.gemma_fused_add_rmsnorm, x, w), ()
    a = t(8, 2 * 4096)
    yield "silu_and_mul", lambda: flashinfer.silu_and_mul(a), ()
    yield "gelu_and_mul", lambda: flashinfer.gelu_and_mul(a), ()
    yield "gelu_tanh_and_mul", lambda: flashinfer.gelu_tanh_and_mul(a), ()
    yield "apply_rope_with_cos_sin_cache", lambda: flashinfer.apply_rope_with_cos_sin_cache(
        pos, q, k, head, cache, True), ()
    yield "apply_rope_with_cos_sin_cache_inplace", rope_inplace(q, k, head, cache, pos), ()
    yield "apply_rope", lambda: flashinfer.apply_rope(qr, kr, indptr, offsets), ()
    yield "apply_llama31_rope", lambda: flashinfer.apply_llama31_rope(qr, kr, indptr, offsets), ()
    yield "sampling.softmax", lambda: flashinfer.sampling.softmax(logits, 1.0), ()
    yield "top_k_renorm_probs", lambda: flashinfer.sampling.top_k_renorm_probs(probs, 50), ()
    yield "top_p_renorm_probs", lambda: flashinfer.sampling.top_p_renorm_probs(probs, 0.9), ()
    yield "top_k_mask_logits", lambda: flashinfer.sampling.top_k_mask_logits(logits, 50), ()
    yield "merge_state", lambda: flashinfer.merge_state(va, sa, vb, sb), ()
    yield "packbits", lambda: flashinfer.packbits(bits, "little"), ()
    fa, fb = t(4, 64, 128).to(torch.float8_e4m3fn), t(4, 256, 128).to(torch.float8_e4m3fn).transpose(-2, -1)
    one = torch.ones(1, device=DEV, dtype=torch.float32)
    yield "bmm_fp8", lambda: flashinfer.bmm_fp8(fa, fb, one, one, torch.bfloat16), ()


def fused_add(op, x, w):
    def f():
        a, r = x.clone(), x.clone()
        op(a, r, w, 1e-6)
        return a, r
    return f


def rope_inplace(q, k, head, cache, pos):
    def f():
        qq, kk = q.clone(), k.clone()
        flashinfer.apply_rope_with_cos_sin_cache_inplace(pos, qq, kk, head, cache, True)
        return qq, kk
    return f


def same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(a, b)
    return a == b


def sweep():
    passed = total = 0
    only = os.environ.get("SWEEP_ONLY")
    for name, fn, _ in cases():
        if only and name not in only.split(","):
            continue
        total += 1
        step = "eager"
        try:
            ref = fn()
            torch.cuda.synchronize()
            step = "compile"
            torch._dynamo.reset()
            compiled = torch.compile(fn, fullgraph=True, backend="inductor")
            out = compiled()
            torch.cuda.synchronize()
            if not same(out, ref):
                print(f"SWEEP {name} FAIL compiled output differs from eager", flush=True)
                continue
            step = "cudagraph"
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                compiled()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                captured = compiled()
            g.replay()
            torch.cuda.synchronize()
            if not same(captured, ref):
                print(f"SWEEP {name} FAIL replayed output differs from eager", flush=True)
                continue
            passed += 1
            print(f"SWEEP {name} PASS compiled+captured, bit-identical", flush=True)
        except Exception as e:
            msg = " ".join(str(e).split())[:3000]
            print(f"SWEEP {name} FAIL at {step}: {type(e).__name__}: {msg}", flush=True)
    print(f"SWEEP TOTAL {passed} of {total}", flush=True)
    mod = sys.modules.get("_dynafold_dormant_ops")
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
