"""Issue 12, item 5, on the GPU, by hand: fp4_quantize's kernel through FlashInfer's own
`fp4_quantize_sm100` declaration woken by dynafold (the general mechanism) against dynafold's
earlier special path (hooks/fp4_opaque.py, `DYNAFOLD_FP4_SPECIAL=1`), one fresh process each.
The special path was removed after this measurement (docs/gpu-runs/gpu-run-2026-11-30-fp4-paths):
its arm needs libraries built from commit 7084b8c, the last that had it; on later builds it
measures the general path twice.

    python3 fp4_paths.py warm   # eager first (as SGLang's warm-up), then compile, capture, replay
    python3 fp4_paths.py cold   # compile before any eager call in the process

Prints one FP4PATH JSON line: eager host time per call (10,000 calls after 1,000), the first
compiled call's time (Dynamo + Inductor, with a fresh Inductor cache: TORCHINDUCTOR_CACHE_DIR),
graph breaks, the operators in the graph, replay time per CUDA graph replay (CUDA events, 2,000
replays), whether the compiled outputs' shapes, dtypes and strides are eager's, and dynafold's
fake-check verdicts. Values are not compared: FlashInfer 0.6.16's fp4 kernel writes nothing on
sm90 (docs/gpu-runs/gpu-run-2026-11-30-sglang).
"""
import json
import os
import sys
import time

import torch

STARTED = time.perf_counter()
import flashinfer  # noqa: E402

IMPORT_S = time.perf_counter() - STARTED
from fp4_block import captured  # noqa: E402
DEV = "cuda"
SCALE = torch.tensor([448.0 * 6.0 / 8.0], device=DEV)


def forward(x):
    """Both scale layouts SGLang uses: linear (its kvfp4 SM90 branch) and swizzled (GEMM input)."""
    q1, sf1 = flashinfer.fp4_quantize(x, SCALE, is_sf_swizzled_layout=False)
    q2, sf2 = flashinfer.fp4_quantize(x * 2, SCALE)
    return q1, sf1, q2, sf2


def layout(ts):
    return [(list(t.shape), str(t.dtype), list(t.stride())) for t in ts]


def eager_us(x, n=10_000):
    for _ in range(1000):
        flashinfer.fp4_quantize(x, SCALE, is_sf_swizzled_layout=False)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        flashinfer.fp4_quantize(x, SCALE, is_sf_swizzled_layout=False)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return round(elapsed / n * 1e6, 3)


def replay_us(compiled, x, n=2000):
    replay = captured(compiled, x)
    for _ in range(50):
        replay()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(n):
        replay()
    end.record()
    torch.cuda.synchronize()
    return round(begin.elapsed_time(end) / n * 1e3, 3)


def main(mode):
    from torch._dynamo.utils import counters

    result = {"mode": mode, "special": os.environ.get("DYNAFOLD_FP4_SPECIAL") == "1",
              "import_s": round(IMPORT_S, 3)}
    x = torch.randn(64, 2048, device=DEV, dtype=torch.bfloat16)
    x1 = torch.randn(1, 2048, device=DEV, dtype=torch.bfloat16)
    if mode == "warm":
        start = time.perf_counter()
        eager = forward(x)
        torch.cuda.synchronize()
        result["first_eager_s"] = round(time.perf_counter() - start, 3)
        result["eager_us"] = eager_us(x1)
    ops = []

    def backend(gm, inputs):
        ops.extend(sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"
                           and "fp4" in str(n.target)}))
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, inputs)

    compiled = torch.compile(forward, fullgraph=True, dynamic=False, backend=backend)
    start = time.perf_counter()
    try:
        out = compiled(x)
        torch.cuda.synchronize()
    except Exception as e:
        result.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:400]}")
        print("FP4PATH " + json.dumps(result), flush=True)
        return
    result.update(ok=True, compile_s=round(time.perf_counter() - start, 3),
                  graph_breaks=sum(counters["graph_break"].values()), graph_ops=ops)
    if mode == "cold":
        eager = forward(x)
    result["layout_equal"] = layout(out) == layout(eager)
    result["replay_us"] = replay_us(compiled, x)
    helper = sys.modules.get("_dynafold_ops.engine.wake")
    if helper is not None:
        result["fake_checks"] = helper.status().get("fake checks", {})
    print("FP4PATH " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
