"""An SGLang-shaped FP4 block under piecewise CUDA graphs, on a real GPU.

    python3 fp4_block.py consistency   # eager against eager: where is the kernel deterministic?
    python3 fp4_block.py compile       # warm up, compile fullgraph=True, capture, replay, compare
    python3 fp4_block.py tp2           # the same on two GPUs (torch.multiprocessing spawn)

`compile` prints one JSON line per batch size. Without dynafold it is expected to fail with the
seed's error; run it under `LD_PRELOAD=/abs/libdynafold.so` (or `dynafold run --`) to pass.
Comparisons are honest about FlashInfer 0.6.16's sm90 fp4 kernel, which is not deterministic
call to call: eager is first compared with itself, and compiled output is compared bit for bit
only on the rows where repeated eager calls agree. The block uses the linear scale layout so
no padding (uninitialised in the swizzled layout) is ever consumed.
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from piecewise import PiecewiseBackend, split_marker

import flashinfer

HIDDEN = 2048
# NVFP4's global scale is 448 * 6 / amax; activations here stay well under 8.
GLOBAL_SCALE = 448.0 * 6.0 / 8.0
BATCHES = (1, 8, 64)
# e2m1 code -> value (sign bit 3).
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


class FP4Block(torch.nn.Module):
    """linear -> silu -> [split] -> fp4_quantize -> torch ops on both outputs -> linear."""

    def __init__(self, hidden=HIDDEN, out=HIDDEN, device="cuda", split=True):
        super().__init__()
        self.split = split
        g = torch.Generator(device="cpu").manual_seed(0)
        self.w1 = torch.nn.Parameter((torch.randn(hidden, hidden, generator=g) / hidden**0.5).to(device, torch.bfloat16))
        self.w2 = torch.nn.Parameter((torch.randn(out, hidden, generator=g) / hidden**0.5).to(device, torch.bfloat16))
        self.register_buffer("table", torch.tensor(E2M1, device=device, dtype=torch.bfloat16))
        self.register_buffer("global_scale", torch.tensor([GLOBAL_SCALE], device=device, dtype=torch.float32))

    def forward(self, x):
        h = F.silu(F.linear(x, self.w1))
        if self.split:
            h = split_marker(h)  # where SGLang would run attention outside the graphs
        q, sf = flashinfer.fp4_quantize(h, self.global_scale, is_sf_swizzled_layout=False)
        lo = self.table[(q & 0xF).long()]
        hi = self.table[(q >> 4).long()]
        vals = torch.stack((lo, hi), dim=-1).reshape(q.shape[0], -1)
        scales = sf.view(torch.float8_e4m3fn).to(torch.bfloat16).repeat_interleave(16, dim=1)
        deq = vals * scales / self.global_scale.to(torch.bfloat16)
        return F.linear(deq, self.w2), q, sf, h


def inputs(bs, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(1000 + bs)
    return torch.randn(bs, HIDDEN, generator=g).to(device, torch.bfloat16)


def stable_rows(runs):
    """Rows on which every eager run agrees bit for bit (outputs compared as raw bytes)."""
    ok = None
    for tensors in zip(*runs):
        ref = tensors[0].view(tensors[0].shape[0], -1).view(torch.uint8)
        same = torch.ones(ref.shape[0], dtype=torch.bool, device=ref.device)
        for t in tensors[1:]:
            same &= (t.view(t.shape[0], -1).view(torch.uint8) == ref).all(dim=1)
        ok = same if ok is None else ok & same
    return ok


def byte_agreement(eager_outs, got):
    """Byte-level: the bytes on which all eager runs agree, and how many of those the
    compiled output matches exactly. Raw bytes, so NaN payloads compare too."""
    as_bytes = lambda t: t.contiguous().view(-1).view(torch.uint8)  # noqa: E731
    ref = as_bytes(eager_outs[0])
    stable = torch.ones_like(ref, dtype=torch.bool)
    for t in eager_outs[1:]:
        stable &= as_bytes(t) == ref
    equal = as_bytes(got) == ref
    return {"bytes": ref.numel(), "eager_stable_bytes": int(stable.sum()),
            "compiled_equal_on_stable_bytes": int((equal & stable).sum()),
            "compiled_equal_bytes": int(equal.sum())}


def consistency():
    """Eager against eager, on one fixed input per batch size: rows on which five identical
    calls agree, per scale layout and PDL setting."""
    out = []
    gs = torch.tensor([GLOBAL_SCALE], device="cuda")
    for layout in ("linear", "swizzled"):
        for pdl in (None, False, True):
            for bs in BATCHES:
                x = inputs(bs)
                swz = layout == "swizzled"
                runs = [flashinfer.fp4_quantize(x, gs, is_sf_swizzled_layout=swz, enable_pdl=pdl) for _ in range(5)]
                torch.cuda.synchronize()
                row = {"layout": layout, "enable_pdl": pdl, "bs": bs, "rows": bs,
                       "q_rows_stable": int(stable_rows([(r[0],) for r in runs]).sum())}
                if not swz:  # swizzled scales carry uninitialised padding: never compared
                    row["q_and_sf_rows_stable"] = int(stable_rows(runs).sum())
                out.append(row)
                print("CONSISTENCY " + json.dumps(row), flush=True)
    return out


def _prefill(byte, device="cuda"):
    """Leaves freed memory in the caching allocator filled with `byte`, so a following
    torch.empty of a similar size hands out memory whose old contents are known."""
    junk = torch.full((64 << 20,), byte, dtype=torch.uint8, device=device)
    torch.cuda.synchronize()
    del junk


def quantizer(gs, pdl):
    """fp4_quantize in the linear scale layout with one enable_pdl, as a function of its own per
    setting: each is compiled apart, and none sees a later loop value of `pdl`."""
    def quantize(h):
        return flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)
    return quantize


def written(device="cuda"):
    """Which output bytes does the kernel actually write? Eager calls on the same input with
    freed memory prefilled with 0x00 and with 0xFF: bytes that follow the prefill were never
    written (as good as padding). The compiled output is then compared on the written bytes
    that are also stable across repeats."""
    gs = torch.tensor([GLOBAL_SCALE], device=device)
    out = []
    for pdl in (None, False):
        quantize = quantizer(gs, pdl)
        quantize(inputs(8, device))
        compiled = torch.compile(quantize, fullgraph=True, backend=PiecewiseBackend(cuda_graphs=True), dynamic=False)
        for bs in BATCHES:
            h = inputs(bs, device)
            runs = {}
            for fill in (0x00, 0xFF):
                runs[fill] = []
                for _ in range(3):
                    _prefill(fill, device)
                    runs[fill].append([t.clone() for t in quantize(h)])
            compiled(h)
            got = compiled(h)
            torch.cuda.synchronize()
            row = {"enable_pdl": pdl, "bs": bs}
            for i, name in enumerate(("q", "sf")):
                as_bytes = lambda t: t.contiguous().view(-1).view(torch.uint8)  # noqa: E731
                zero = [as_bytes(r[i]) for r in runs[0x00]]
                ones = [as_bytes(r[i]) for r in runs[0xFF]]
                follows_fill = (zero[0] == 0x00) & (ones[0] == 0xFF)
                stable = torch.ones_like(zero[0], dtype=torch.bool)
                for t in zero[1:] + ones:
                    stable &= t == zero[0]
                written_stable = stable & ~follows_fill
                equal = as_bytes(got[i]) == zero[0]
                row[name] = {"bytes": zero[0].numel(), "unwritten": int(follows_fill.sum()),
                             "written_and_stable": int(written_stable.sum()),
                             "compiled_equal_on_those": int((equal & written_stable).sum())}
            out.append(row)
            print("WRITTEN " + json.dumps(row), flush=True)
    return out


def fp4_only(device="cuda"):
    """fp4_quantize alone, compiled fullgraph=True and replayed from a CUDA graph, against
    eager on the very same input: bit for bit on the rows where eager agrees with itself."""
    gs = torch.tensor([GLOBAL_SCALE], device=device)
    results = []
    for pdl in (None, False):
        quantize = quantizer(gs, pdl)
        quantize(inputs(8, device))  # warm-up: builds the JIT module
        backend = PiecewiseBackend(cuda_graphs=True)
        compiled = torch.compile(quantize, fullgraph=True, backend=backend, dynamic=False)
        for bs in BATCHES:
            h = inputs(bs, device)
            eager_runs = [quantize(h) for _ in range(5)]
            compiled(h)
            got = compiled(h)
            torch.cuda.synchronize()
            stable = stable_rows(eager_runs)
            equal = stable_rows([eager_runs[0], got])
            from torch._dynamo.utils import counters

            row = {"enable_pdl": pdl, "bs": bs, "rows": bs, "graph_breaks": sum(counters["graph_break"].values()),
                   "pieces": backend.pieces, "eager_stable_rows": int(stable.sum()),
                   "compiled_equal_on_stable_rows": int((equal & stable).sum()),
                   "compiled_equal_rows": int(equal.sum()),
                   "q": byte_agreement([r[0] for r in eager_runs], got[0]),
                   "sf": byte_agreement([r[1] for r in eager_runs], got[1]),
                   "shapes_match": [tuple(t.shape) for t in got] == [tuple(t.shape) for t in eager_runs[0]],
                   "dtypes_match": [t.dtype for t in got] == [t.dtype for t in eager_runs[0]]}
            results.append(row)
            print("FP4ONLY " + json.dumps(row), flush=True)
    return results


def time_us(fn, iters=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    samples.sort()
    return samples[len(samples) // 2], samples[len(samples) // 10], samples[(len(samples) * 9) // 10]


def captured(fn, x):
    """`fn(x)` captured into one CUDA graph (after warm-up on a side stream, as capture
    requires); returns a callable that only replays it."""
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(static_x)
    return graph.replay


def latency(device="cuda"):
    """Per-step latency of the block, four ways, in one process: eager; dynafold's piecewise
    CUDA graphs (what SGLang's runner does: guards, split-module glue and input copies in
    Python around each replay); the block compiled fullgraph=True and then captured whole
    into one CUDA graph (replay only: compare with the field notes' probe); and eager
    captured by hand into one CUDA graph, the probe's own setup, which needs no compile."""
    from torch._dynamo.utils import counters

    block = FP4Block(device=device)
    with torch.no_grad():
        block(inputs(8, device))  # warm-up: builds the JIT module
        piecewise = torch.compile(block, fullgraph=True, backend=PiecewiseBackend(cuda_graphs=True), dynamic=False)
        plain = torch.compile(FP4Block(device=device, split=False), fullgraph=True,
                              backend=PiecewiseBackend(cuda_graphs=False), dynamic=False)
        rows = []
        for bs in BATCHES:
            x = inputs(bs, device)
            row = {"bs": bs, "eager_us": time_us(lambda x=x: block(x))}
            try:
                piecewise(x)
                row["piecewise_graphs_us"] = time_us(lambda x=x: piecewise(x))
                row["compiled_captured_whole_us"] = time_us(captured(plain, x))
            except Exception as e:  # without dynafold the compile fails: say so, keep going
                row["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            row["eager_captured_whole_us"] = time_us(captured(block, x))
            row["graph_breaks"] = sum(counters["graph_break"].values())
            row = {k: ([round(v, 1) for v in val] if isinstance(val, tuple) else val) for k, val in row.items()}
            rows.append(row)
            print("LATENCY " + json.dumps(row), flush=True)
    return rows


def kernel_writes_outputs(device="cuda"):
    """False when fp4_quantize leaves its outputs as it found them (FlashInfer 0.6.16 on sm90:
    the kernel body is compiled only for __CUDA_ARCH__ >= 1000). Same-size blocks are filled
    with a marker and freed first, so torch.empty inside fp4_quantize gets them back."""
    h = inputs(8, device)
    gs = torch.tensor([GLOBAL_SCALE], device=device)
    flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False)
    blocks = [torch.full((8, HIDDEN // 2), 0xAB, dtype=torch.uint8, device=device),
              torch.full((16 * HIDDEN // 16,), 0xAB, dtype=torch.uint8, device=device)]
    torch.cuda.synchronize()
    del blocks
    q, sf = flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False)
    torch.cuda.synchronize()
    return not (bool((q == 0xAB).all()) and bool((sf.view(torch.uint8) == 0xAB).all()))


def per_output(eager_runs, got):
    """For each output (out, q, sf): rows where eager agrees with itself, how many of those
    the compiled run matches bit for bit, and how close everything is."""
    stats = {}
    for i, name in enumerate(("out", "q", "sf", "h")):
        runs = [(r[i],) for r in eager_runs]
        stable = stable_rows(runs)
        equal = stable_rows([runs[0], (got[i],)])
        a, b = eager_runs[0][i], got[i]
        if name in ("out", "h"):
            closeness = {"max_abs_diff": float((a.float() - b.float()).abs().max()),
                         "eager_vs_eager_max_abs_diff": float((a.float() - eager_runs[1][i].float()).abs().max())}
        else:
            closeness = {"bytes_equal_frac": round(float((a == b).float().mean()), 6),
                         "eager_vs_eager_bytes_equal_frac": round(float((a == eager_runs[1][i]).float().mean()), 6)}
        stats[name] = {**byte_agreement([r[i] for r in eager_runs], got[i]),
                       "eager_stable_rows": int(stable.sum()),
                       "compiled_equal_on_stable_rows": int((equal & stable).sum()),
                       "compiled_equal_rows": int(equal.sum()), **closeness}
    return stats


def compile_and_compare(device="cuda", quiet=False, split=True):
    block = FP4Block(device=device, split=split)
    # SGLang warms up eagerly before capture: this builds FlashInfer's sm90 fp4 JIT module.
    t = time.time()
    with torch.no_grad():
        block(inputs(8, device))
    torch.cuda.synchronize()
    warm_s = time.time() - t
    writes = kernel_writes_outputs(device)
    if not writes and not quiet:
        print("NOTE the fp4 kernel writes nothing on this GPU: q/sf/out comparisons below compare "
              "uninitialised memory and say nothing about dynafold; h (its input) is the real check", flush=True)
    backend = PiecewiseBackend(cuda_graphs=True)
    compiled = torch.compile(block, fullgraph=True, backend=backend, dynamic=False)
    results = []
    for bs in BATCHES:
        x = inputs(bs, device)
        with torch.no_grad():
            eager_runs = [block(x) for _ in range(5)]
            torch.cuda.synchronize()
            try:
                got = compiled(x)
                got = compiled(x)  # the second call replays the captured graphs
            except Exception as e:
                row = {"bs": bs, "ok": False, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
                print("COMPILE " + json.dumps(row), flush=True)
                return [row]
            torch.cuda.synchronize()
            stable = stable_rows(eager_runs)
            ref = eager_runs[0]
            equal = stable_rows([ref, got])
            from torch._dynamo.utils import counters

            eager_us = time_us(lambda x=x: block(x))
            graph_us = time_us(lambda x=x: compiled(x))
        row = {
            "bs": bs,
            "ok": True,
            "pieces": backend.pieces,
            "graph_breaks": sum(counters["graph_break"].values()),
            "split": split,
            "rows": bs,
            "eager_stable_rows": int(stable.sum()),
            "compiled_equal_on_stable_rows": int((equal & stable).sum()),
            "per_output": per_output(eager_runs, got),
            "eager_us_p50_p10_p90": [round(v, 1) for v in eager_us],
            "graph_us_p50_p10_p90": [round(v, 1) for v in graph_us],
            "speedup_p50": round(eager_us[0] / graph_us[0], 2),
            "warmup_s": round(warm_s, 1),
            "dynafold_active": type(sys.meta_path[0]).__name__ == "DynafoldFinder",
            "fp4_kernel_writes_outputs": writes,
        }
        results.append(row)
        if not quiet:
            print("COMPILE " + json.dumps(row), flush=True)
    return results


def _tp_worker(rank, world, queue):
    torch.cuda.set_device(rank)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.distributed.init_process_group("nccl", rank=rank, world_size=world)
    rows = compile_and_compare(device=f"cuda:{rank}", quiet=True)
    # One collective across the ranks' results: both must have compiled and replayed.
    ok = torch.tensor([int(all(r["ok"] for r in rows))], device=f"cuda:{rank}")
    torch.distributed.all_reduce(ok)
    queue.put({"rank": rank, "active": type(sys.meta_path[0]).__name__ == "DynafoldFinder",
               "all_ranks_ok": int(ok.item()) == world, "rows": rows})
    torch.distributed.destroy_process_group()


def tp2():
    world = 2
    ctx = torch.multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_tp_worker, args=(r, world, queue)) for r in range(world)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=540) for _ in procs]
    for p in procs:
        p.join(60)
    for g in sorted(got, key=lambda g: g["rank"]):
        print("TP " + json.dumps(g), flush=True)


if __name__ == "__main__":
    modes = {
        "consistency": consistency,
        "compile": compile_and_compare,
        "fp4-only": fp4_only,
        "written": written,
        "compile-whole": lambda: compile_and_compare(split=False),
        "tp2": tp2,
        "latency": latency,
    }
    modes[sys.argv[1]]()
