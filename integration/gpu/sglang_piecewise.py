"""Issue 11, item 2, on the GPU machine (by hand, never in CI): SGLang 0.5.23's own piecewise
CUDA graph path over forwards that call FlashInfer directly, with FlashInfer's real JIT builds,
SGLang's `CUDAPiecewiseBackend` capturing and replaying a CUDA graph per piece and size.

    python3 sglang_piecewise.py [MODELS] [COMPILERS]    # defaults: fp4,ops eager,inductor

Run by sglang.sh, without and with dynafold's preload. Prints one `SGLANG_ENV {json}` line, then
per case one `SGLANG {json}` line (everything measured) and one short `SUMMARY` line.

The sequence is SGLang's; its own functions are called wherever they run without a server, and
the control flow around them is copied from the file named where they do not:
  compile pass (runner_backend/tc_piecewise_cuda_graph_backend.py, `_run_compile_pass`): inside
    `enable_tc_piecewise_cuda_graph()`, one eager dummy forward at the smallest size (FlashInfer
    builds its JIT modules here), `get_or_create_global_graph_memory_pool(torch.cuda)`,
    `set_graph_pool_id(pool)`, `install_torch_compiled(model, compile_config=CompilationConfig(
    SIZES, compiler), graph_pool=pool, fullgraph=True)`, then inside
    `enable_torch_compile_warmup()` one forward per size, largest first.
  capture (runner/prefill_cuda_graph_runner.py `_capture`, distributed/parallel_state.py
    `GroupCoordinator.graph_capture`, `TcPiecewiseCudaGraphBackend.capture_session` and
    `capture_one`): gc frozen, SGLang's global capture stream
    (`get_or_create_global_graph_capture_stream()`) made current after it waits for the current
    one, inside `enable_tc_piecewise_cuda_graph()` and `set_pcg_capture_stream(stream)`, per size
    (largest first) two forwards over the static input buffers: `CUDAPiecewiseBackend` runs each
    piece once more and captures it on the second call, on SGLang's graph pool.
  replay (`TcPiecewiseCudaGraphBackend.replay` / `replay_session`): new values copied into the
    static input buffers, then the forward inside `enable_tc_piecewise_cuda_graph()`;
    `CUDAPiecewiseBackend` replays each piece's graph and the split op runs eagerly in between.
The compile is SGLang's: `SGLangBackend` splits the Dynamo graph at the split op, compiles each
piece with SGLang's `EagerAdapter` or `InductorAdaptor` and wraps it in `CUDAPiecewiseBackend`.
`TcPiecewiseCudaGraphBackend` itself is not instantiated: its constructor needs a model runner and
published server arguments, and its package imports SGLang's model configs (transformers).

Stand-ins (nothing of SGLang, FlashInfer, torch or dynafold is replaced):
  1. `IPython.display`: a stub module with `HTML` and `display`; SGLang's `sglang/utils.py`
     imports them, and IPython is a heavy dependency that the compile path never uses.
  2. `sgl_kernel`, with `weak_ref_tensor` only: SGLang's `runner_backend_utils/weak_ref_tensor.py`
     imports it on CUDA, and `CUDAPiecewiseBackend` calls it on each captured piece's outputs.
     The real sgl-kernel wheel (hundreds of MB, compiled kernels) is over what one call may carry
     to the GPU machine (64 MiB). The stand-in does what sgl-kernel's C++ does
     (`torch::from_blob` over the tensor's data pointer, no deleter: a tensor on the same memory
     that does not keep it alive), with torch's own non-owning storage
     (`torch._C._construct_storage_from_data_pointer`, which Inductor's CUDA graph trees use for
     the same purpose), so SGLang's memory handling of graph outputs is exercised as shipped.
Not SGLang's, by necessity: the two models below, the split op standing for attention (registered
through SGLang's `register_custom_op` / `register_split_op`), the static input buffers (SGLang's
runner keeps them in its ForwardBatch) and a 1-rank gloo group (`SGLangBackend` asks the rank).

On sm90, FlashInfer's fp4 kernels write nothing (their bodies are compiled for sm100+ only;
docs/gpu-run.md), so the fp4 outputs are uninitialised memory there. Each run measures that
once (marker bytes, as writes_check.py); the fp4 outputs' comparison with eager is reported
apart (`replay_equal_fp4`, null where the kernel does not write), and `replay_equal` /
`warmup_equal` cover the other outputs, bit for bit. For the same reason no output is computed
from the fp4 outputs (no dequantization).
"""
import gc
import glob
import importlib.machinery
import json
import os
import re
import sys
import tempfile
import time
import traceback
import types

STARTED = time.monotonic()

import torch  # noqa: E402

if not torch.cuda.is_available():  # SGLang's CUDA imports below need one, and so does the run
    sys.exit("sglang_piecewise.py: needs a CUDA GPU (torch.cuda.is_available() is False)")


def _stub_module(name, **attrs):
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec() accepts it
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


# -- stand-in 1: IPython.display -------------------------------------------------------------
_stub_module("IPython").display = _stub_module(
    "IPython.display",
    HTML=type("HTML", (), {"__init__": lambda self, *a, **k: None}),
    display=lambda *args, **kwargs: None)


# -- stand-in 2: sgl_kernel.weak_ref_tensor -----------------------------------------------------
def weak_ref_tensor(tensor):
    """sgl-kernel's weak_ref_tensor: same device, dtype, sizes, strides and memory as `tensor`,
    owning none of it (the memory stays the graph pool's; SGLang keeps it valid)."""
    if not isinstance(tensor, torch.Tensor):  # the real op's schema takes a Tensor only
        raise TypeError(f"weak_ref_tensor expects a Tensor, got {type(tensor).__name__}")
    if not tensor.is_cuda:
        raise RuntimeError("Tensor must be on CUDA device")  # sgl-kernel's own check
    storage = tensor.untyped_storage()
    alias = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), tensor.device,
                                                          storage.nbytes())
    # A 0-element tensor allocates nothing (safe inside a capture); set_ only sets metadata.
    return torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
        alias, tensor.storage_offset(), tensor.size(), tensor.stride())


_stub_module("sgl_kernel", weak_ref_tensor=weak_ref_tensor)

import torch.distributed as dist  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import flashinfer  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sglang_blocks import (  # noqa: E402
    BLOCKS, INPUTS, OUTPUT_NAMES, inputs, quantize_like_sglang_sm90)

from sglang.srt.compilation.compilation_config import CompilationConfig, register_split_op  # noqa: E402
from sglang.srt.compilation.compilation_counter import compilation_counter  # noqa: E402
from sglang.srt.compilation.compile import install_torch_compiled  # noqa: E402
from sglang.srt.compilation.compile_phase import (  # noqa: E402
    enable_torch_compile_warmup,
    set_pcg_capture_stream,
)
from sglang.srt.compilation.cuda_piecewise_backend import CUDAPiecewiseBackend  # noqa: E402
from sglang.srt.distributed.device_communicators.pynccl_allocator import set_graph_pool_id  # noqa: E402
from sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph import (  # noqa: E402
    enable_tc_piecewise_cuda_graph,
)
from sglang.srt.model_executor.runner_utils.pool import (  # noqa: E402
    get_or_create_global_graph_capture_stream,
    get_or_create_global_graph_memory_pool,
)
from sglang.srt.utils.custom_op import register_custom_op  # noqa: E402

IMPORTED_S = time.monotonic() - STARTED
DEV = "cuda"

# -- the split op, through SGLang's own registration ------------------------------------------
SPLIT_OP = "dynafold_gpu_attention"


def dynafold_gpu_attention(q: torch.Tensor, output: torch.Tensor) -> None:
    """Where SGLang cuts the graph (attention in a real model): the pieces around it are
    captured, the op itself runs eagerly between the graphs."""
    output.copy_(q)


dynafold_gpu_attention = register_custom_op(mutates_args=["output"])(
    register_split_op()(dynafold_gpu_attention))

HIDDEN = 2048
# Members of SGLang's own prefill capture list (generate_prefill_cuda_graph_batch_sizes:
# 4..32 step 4, 48..256 step 16). All >= 2: Dynamo specialises sizes 0 and 1, and SGLang's list
# starts at 4.
SIZES = [4, 16, 64]


FP4_OUTPUTS = (0, 1)  # the packed values and scale factors, in both models


def make(name):
    return BLOCKS[name](dynafold_gpu_attention, HIDDEN, DEV)


def values(name, n, seed):
    """Fresh inputs for `n` tokens (made on the CPU so they do not depend on CUDA's RNG)."""
    return inputs(name, n, HIDDEN, DEV, seed)


def load(static, vals):
    """Copies `vals` into the front of the static buffers, as SGLang's runner fills its
    ForwardBatch buffers, and returns the views the forward gets (same addresses per size)."""
    n = vals[0].shape[0]
    for buf, v in zip(static, vals):
        buf[:n].copy_(v)
    return tuple(buf[:n] for buf in static)


def snapshot(outputs):
    return tuple(t.clone() for t in outputs)


STAGE = ["setup"]


def compile_pass(model, name, compiler, static):
    """TcPiecewiseCudaGraphBackend._run_compile_pass; returns the compiled outputs per size."""
    config = CompilationConfig(SIZES, compiler)
    warm = {}
    with enable_tc_piecewise_cuda_graph():
        # "Dummy warmup for jit kernel": the original forward (install comes after), smallest size.
        STAGE[0] = "eager dummy forward"
        model(*load(static, values(name, SIZES[0], SIZES[0])))
        pool = get_or_create_global_graph_memory_pool(torch.cuda)
        set_graph_pool_id(pool)
        install_torch_compiled(model, compile_config=config, graph_pool=pool, fullgraph=True,
                               dynamic_arg_dims=None)
        STAGE[0] = "compile (enable_torch_compile_warmup)"
        with enable_torch_compile_warmup():
            for n in reversed(SIZES):
                warm[n] = snapshot(model(*load(static, values(name, n, n))))
    torch.cuda.synchronize()
    return warm


def capture(model, name, static):
    """PrefillCudaGraphRunner._capture over TcPiecewiseCudaGraphBackend (see the docstring)."""
    STAGE[0] = "capture"
    stream = get_or_create_global_graph_capture_stream()
    gc.collect()  # freeze_gc(enable_cudagraph_gc=False), SGLang's default
    gc.freeze()
    try:
        stream.wait_stream(torch.cuda.current_stream())  # GroupCoordinator.graph_capture
        with torch.cuda.stream(stream):
            with enable_tc_piecewise_cuda_graph(), set_pcg_capture_stream(stream):
                for n in reversed(SIZES):
                    args = load(static, values(name, n, n))
                    for _ in range(2):  # capture_one: call 1 warms, call 2 captures
                        torch.cuda.synchronize()
                        dist.barrier()
                        model(*args)
        torch.cuda.synchronize()
    finally:
        gc.unfreeze()
        gc.collect()


def graph_output_ptrs(backends, n):
    """Data pointers of the outputs SGLang's backends keep for their captured graphs at size n."""
    ptrs = set()
    for b in backends:
        entry = b.concrete_size_entries.get(n)
        if entry is None or entry.output is None:
            continue
        outs = entry.output if isinstance(entry.output, (list, tuple)) else [entry.output]
        ptrs.update(t.data_ptr() for t in outs if isinstance(t, torch.Tensor))
    return ptrs


def replay(model, name, static, backends):
    """Per size (smallest first, unlike capture): new inputs into the static buffers, then the
    forward as TcPiecewiseCudaGraphBackend.replay runs it. Returns the outputs per size and
    whether each came out of the graphs' own output memory."""
    STAGE[0] = "replay"
    replayed = {}
    for n in SIZES:
        args = load(static, values(name, n, 1000 + n))
        with enable_tc_piecewise_cuda_graph():
            outputs = model(*args)
        ptrs = graph_output_ptrs(backends, n)
        replayed[n] = (snapshot(outputs), all(t.data_ptr() in ptrs for t in outputs))
    torch.cuda.synchronize()
    return replayed


SEEN_BACKENDS = []  # kept alive so that a later case never mistakes an old one for its own


def new_backends():
    """The CUDAPiecewiseBackend objects SGLang made since the last call (one per piece)."""
    found = [o for o in gc.get_objects() if type(o) is CUDAPiecewiseBackend
             and not any(o is s for s in SEEN_BACKENDS)]
    SEEN_BACKENDS.extend(found)
    return sorted(found, key=lambda b: b.piecewise_compile_index)


FP4_WRITES = {}


def fp4_kernel_writes():
    """Does fp4_quantize write its outputs on this GPU? Same-size blocks are filled with a
    marker and freed so the kernel's torch.empty gets them back (writes_check.py's method)."""
    if FP4_WRITES:
        return FP4_WRITES
    gs = torch.tensor([1.0 / 8.0], device=DEV)
    h = torch.randn(64, HIDDEN, device=DEV, dtype=torch.bfloat16)
    q, sf = quantize_like_sglang_sm90(h, gs)
    shapes = [(t.shape, t.dtype) for t in (q, sf)]
    del q, sf
    torch.cuda.synchronize()
    blocks = [torch.full(s, 0xAB, dtype=torch.uint8, device=DEV).view(d) for s, d in shapes]
    torch.cuda.synchronize()
    del blocks
    q, sf = quantize_like_sglang_sm90(h, gs)
    torch.cuda.synchronize()
    still = [float((t.contiguous().view(torch.uint8) == 0xAB).float().mean()) for t in (q, sf)]
    FP4_WRITES.update(q_frac_still_marker=round(still[0], 4), sf_frac_still_marker=round(still[1], 4),
                      writes=max(still) < 0.5)
    return FP4_WRITES


def compare(a, b):
    """Bit equality and the largest absolute difference (bytes for the fp4/fp8 outputs)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return {"equal": False, "why": f"{tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"}
    if a.dtype in (torch.uint8, torch.float8_e4m3fn, torch.float8_e5m2):
        x, y = a.view(torch.uint8).int(), b.view(torch.uint8).int()
    else:
        x, y = a.float(), b.float()
    diff = float((x - y).abs().max()) if x.numel() else 0.0
    return {"equal": bool(torch.equal(a.view(torch.uint8) if a.dtype.itemsize == 1 else a,
                                      b.view(torch.uint8) if b.dtype.itemsize == 1 else b)),
            "max_abs_diff": diff}


def compare_all(name, got, want):
    return {key: compare(got[i], want[i]) for i, key in enumerate(OUTPUT_NAMES[name])}


def all_equal(per_size, fp4):
    """Whether every output (fp4=False: the others; fp4=True: the fp4 ones) is bit-equal."""
    fp4_keys = {OUTPUT_NAMES["fp4"][i] for i in FP4_OUTPUTS}
    return all(c["equal"] for per in per_size.values() for key, c in per.items()
               if (key in fp4_keys) == fp4)


def ops_in(text):
    return sorted(set(re.findall(r"torch\.ops\.(\w+\.\w+)", text)))


def run_case(name, compiler, root):
    torch._dynamo.reset()
    counters.clear()
    before = compilation_counter.clone()
    cache_dir = os.path.join(root, f"{name}-{compiler}")
    os.environ["SGLANG_CACHE_DIR"] = cache_dir  # SGLangBackend's dump and Inductor's cache
    STAGE[0] = "setup"
    started = time.monotonic()
    result = {"model": name, "compiler": compiler, "sizes": SIZES}
    timings = {}
    try:
        model = make(name)
        # SGLang's runner allocates its input buffers once, at the largest size.
        static = [torch.zeros(max(SIZES), HIDDEN, device=DEV, dtype=torch.bfloat16)
                  for _ in range(INPUTS[name])]
        warm = compile_pass(model, name, compiler, static)
        timings["compile_s"] = round(time.monotonic() - started, 1)
        backends = new_backends()  # SGLangBackend made them while compiling
        capture(model, name, static)
        timings["capture_s"] = round(time.monotonic() - started - timings["compile_s"], 1)
        replayed = replay(model, name, static, backends)
        result["ok"] = True
    except Exception as e:
        traceback.print_exc()
        new_backends()  # a failed case's backends are not the next case's
        message = f"{type(e).__module__}.{type(e).__name__}: {e}"
        result.update(ok=False, stage=STAGE[0], error=message[:3000],
                      seed_error="_thread.allocate_lock" in message)
        return result
    finally:
        result["seconds"] = round(time.monotonic() - started, 1)
        result.update(timings)
        result["graph_breaks"] = sum(counters["graph_break"].values())
        result["graph_break_reasons"] = list(counters["graph_break"])[:5]
        result["dynamo_unique_graphs"] = counters["stats"].get("unique_graphs", 0)
        result["counter"] = {k: getattr(compilation_counter, k) - getattr(before, k)
                             for k in vars(compilation_counter)
                             if getattr(compilation_counter, k) != getattr(before, k)}
    result["cudagraphs"] = [
        {"piece": b.piecewise_compile_index, "of": b.total_piecewise_compiles,
         "captured_sizes": sorted(n for n, e in b.concrete_size_entries.items() if e.cudagraph is not None)}
        for b in backends]
    result["captured"] = sum(len(p["captured_sizes"]) for p in result["cudagraphs"])
    writes = fp4_kernel_writes()
    result["fp4_kernel_writes"] = writes
    # Eager reference: outside enable_tc_piecewise_cuda_graph() SGLang's trampoline runs the
    # original forward; fresh tensors, not the static buffers.
    warmup_cmp, replay_cmp = {}, {}
    for n in SIZES:
        warmup_cmp[n] = compare_all(name, warm[n], model(*values(name, n, n)))
        replay_cmp[n] = compare_all(name, replayed[n][0], model(*values(name, n, 1000 + n)))
    result["replay_outputs_from_graphs"] = {n: replayed[n][1] for n in SIZES}
    result["warmup_vs_eager"], result["replay_vs_eager"] = warmup_cmp, replay_cmp
    # The fp4 outputs count only where the kernel writes them (not on sm90: uninitialised).
    result["warmup_equal"] = all_equal(warmup_cmp, False)
    result["replay_equal"] = all_equal(replay_cmp, False)
    result["replay_equal_fp4"] = all_equal(replay_cmp, True) if writes["writes"] else None
    # SGLangBackend writes the split graph it compiled to
    # $SGLANG_CACHE_DIR/torch_compile_cache/<hash>/rank_0_0/backbone/computation_graph_*.py.
    graphs = sorted(glob.glob(os.path.join(cache_dir, "torch_compile_cache", "**",
                                           "computation_graph_*.py"), recursive=True))
    result["dumped_graphs"] = len(graphs)
    result["graph_ops"] = ops_in(open(graphs[-1]).read()) if graphs else []
    if compiler == "inductor":
        code = "".join(open(p, errors="replace").read() for p in glob.glob(
            os.path.join(cache_dir, "torch_compile_cache", "**", "*.py"), recursive=True)
            if "computation_graph_" not in p)
        result["inductor_code_ops"] = ops_in(code)
    return result


def summary(r):
    if not r["ok"]:
        # fullgraph=True raises at the first break, so the error is the break.
        builtin = re.search(r"trace the builtin `([^`]*)`", r["error"])
        return (f"SUMMARY {r['model']}/{r['compiler']} dynafold={r['dynafold']} FAIL at {r['stage']}"
                f" seed_error={r['seed_error']} builtin={builtin.group(1) if builtin else None}: "
                + r["error"].splitlines()[0][:300])
    # PASS: no break, one Dynamo graph, every piece captured at every size, replayed outputs
    # taken from the graphs' memory and equal to eager; CHECK: it ran, but one of those failed.
    good = (r["graph_breaks"] == 0 and r["dynamo_unique_graphs"] == 1
            and r["captured"] == len(r["cudagraphs"]) * len(SIZES) > 0
            and all(r["replay_outputs_from_graphs"].values())
            and r["replay_equal"] and r["warmup_equal"] and r["replay_equal_fp4"] is not False)
    return (f"SUMMARY {r['model']}/{r['compiler']} dynafold={r['dynafold']} {'PASS' if good else 'CHECK'}"
            f" graph_breaks={r['graph_breaks']} dynamo_graphs={r['dynamo_unique_graphs']}"
            f" captured={r['captured']} pieces={len(r['cudagraphs'])}"
            f" counter={json.dumps(r['counter'], separators=(',', ':'))}"
            f" replay_equal={r['replay_equal']} warmup_equal={r['warmup_equal']}"
            f" from_graphs={all(r['replay_outputs_from_graphs'].values())}"
            f" fp4_kernel_writes={r['fp4_kernel_writes']['writes']} replay_equal_fp4={r['replay_equal_fp4']}"
            f" graph_ops={','.join(r['graph_ops'])}"
            f" compile_s={r.get('compile_s')} capture_s={r.get('capture_s')}")


def main():
    models = (sys.argv[1] if len(sys.argv) > 1 else "fp4,ops").split(",")
    compilers = (sys.argv[2] if len(sys.argv) > 2 else "eager,inductor").split(",")
    # SGLangBackend calls torch.distributed.get_rank(); one rank over loopback (no network).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp(prefix='dynafold-gloo-')}",
                            rank=0, world_size=1)
    preload = bool(sys.meta_path) and type(sys.meta_path[0]).__name__ == "DynafoldFinder"
    root = os.environ.get("DYNAFOLD_SGLANG_CACHE") or tempfile.mkdtemp(prefix="dynafold-sglang-")
    import sglang
    env = {"dynafold": preload, "python": sys.version.split()[0], "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "flashinfer": flashinfer.__version__,
           "flashinfer_path": os.path.dirname(flashinfer.__file__), "sglang": sglang.__version__,
           "sglang_path": os.path.dirname(sglang.__file__), "gpu": torch.cuda.get_device_name(),
           "capability": torch.cuda.get_device_capability(), "import_s": round(IMPORTED_S, 1),
           "sizes": SIZES, "hidden": HIDDEN, "cache": root}
    print("SGLANG_ENV " + json.dumps(env), flush=True)
    with torch.no_grad():  # as SGLang's model runner runs its forwards
        for compiler in compilers:
            for name in models:
                try:
                    result = run_case(name, compiler, root)
                except Exception as e:  # in the comparisons, after the case itself ran
                    traceback.print_exc()
                    result = {"model": name, "compiler": compiler, "ok": False,
                              "stage": "comparison", "graph_breaks": None, "seed_error": False,
                              "error": f"{type(e).__name__}: {e}"[:3000]}
                result["dynafold"] = preload
                print("SGLANG " + json.dumps(result), flush=True)
                print(summary(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
