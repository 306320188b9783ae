"""Issue 12's prize on the GPU, by hand: an SGLang-shaped decoder layer made of FlashInfer ops.

    python3 decoder_layer.py [--bs 1,8,64] [--ctx 512] [--iters 200] [--rounds 5]
                             [--attn auto|traced|opaque] [--modes piecewise,whole]
                             [--tensor-cores]

The layer (Llama-8B sizes, bf16, one decode token per request, a paged KV cache with page size
16 holding --ctx random tokens per request):

    rmsnorm -> qkv linear -> rope (cos/sin cache, in place) -> KV-cache write
      -> [attention: BatchDecodeWithPagedKVCacheWrapper.run(), planned eagerly]
      -> o_proj -> fused_add_rmsnorm -> gate_up linear -> silu_and_mul -> down linear

run three ways, per batch size, on the same inputs:
  eager      the Python forward as is;
  piecewise  torch.compile(fullgraph=True) with a backend shaped like SGLang's piecewise CUDA
             graph runner: the FX graph is split at the attention op, each piece between split
             points is compiled by inductor and captured in a CUDA graph, attention runs eagerly
             between them;
  whole      torch.compile(fullgraph=True, backend="inductor") of the whole layer, captured in one
             torch.cuda.CUDAGraph (the decode wrapper is made with use_cuda_graph=True and fixed
             indptr/indices/last_page_len buffers and planned before capture, as SGLang's CUDA
             graph runner does).
All three use the same wrapper and plan, so their outputs must be bit-identical.

Attention, under Dynamo: `traced` calls the wrapper's run() inside the compiled forward, so
Dynamo must trace FlashInfer's Python run() down to the woken `dynafold_flashinfer::<uri>_run`
op (what dynafold promises); `opaque` hides run() behind this script's own custom op
(`decoder_bench::decode_attention`, the way SGLang hides attention behind its own op). `auto`
tries traced, then opaque, and says which one compiled. (FlashInfer's plan() keeps its plan info
as a tvm_ffi.Array, which Dynamo cannot pass to an operator; dynafold keeps it as a list of ints
once the process compiles.) The KV write (FlashInfer's append_paged_kv_cache) belongs to
attention: the piecewise backend cuts there too, as SGLang writes the cache inside its
attention op.

One line per finding on stdout:
  ENV ..., OPS <mode> bs=.. attn=..: <FlashInfer ops in the graph>, BREAKS ...,
  LAYER bs=.. <mode> compile failed: <type>: <first line>,
  LAYER bs=8 eager_us=.. piecewise_us=.. whole_us=.. piecewise_x=.. whole_x=.. identical=True
Times are per layer forward (us), from CUDA events around --iters back-to-back calls (so host
overhead counts where the GPU waits for it), median of --rounds interleaved rounds; _x is eager
time over the mode's time.
"""
import argparse
import pathlib
import re
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F
from torch.fx.passes.split_module import split_module

try:  # absent where only the split logic is checked (CPU)
    import flashinfer
except ImportError:
    flashinfer = None

HIDDEN, NQ, NKV, HEAD, INTER, PAGE = 4096, 32, 8, 128, 14336, 16
Q_SIZE, KV_SIZE = NQ * HEAD, NKV * HEAD
EPS, ROPE_THETA = 1e-5, 500000.0
WORKSPACE_BYTES = 128 * 1024 * 1024
DEV = "cuda"

WOKEN_NS = "dynafold_flashinfer"  # dynafold's namespace for FlashInfer's woken declarations
BENCH_NS = "decoder_bench"        # this script's opaque attention op


# ---------------------------------------------------------------------------------------------
# Split predicate and the piecewise backend (building the split needs no GPU; checked on CPU
# with a toy graph).

def op_name(target):
    """(namespace, op name) of a torch operator call target, else (None, None)."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        # str() is "ns.name.overload" (OpOverload) or "ns.name" (packet).
        ns, _, rest = str(target).partition(".")
        return ns, rest.split(".")[0]
    return None, None


def is_attention(node):
    """Where the layer is cut: the woken attention op, found by shape rather than by its full
    name, which embeds FlashInfer's JIT uri (dtypes, head dims, ...) and differs across
    releases and options: `<uri>_run` (decode), `<uri>_paged_run` (tensor-core decode goes
    through the prefill module), or this script's opaque op."""
    if node.op != "call_function":
        return False
    ns, name = op_name(node.target)
    if ns == BENCH_NS:
        return True
    if ns == WOKEN_NS and name == "append_paged_kv_cache":
        return True  # the KV write belongs to attention (SGLang does it inside its op)
    return (ns == WOKEN_NS and name.endswith("run")
            and any(word in name for word in ("decode", "prefill", "attention")))


def flashinfer_ops(gm):
    """FlashInfer's (woken) and this script's ops in an FX graph, in order, once each."""
    seen = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            ns, name = op_name(node.target)
            if ns in (WOKEN_NS, BENCH_NS) and f"{ns}::{name}" not in seen:
                seen.append(f"{ns}::{name}")
    return seen


def split_at(gm, predicate):
    """`gm` split into pieces: each node matching `predicate` alone in its own submodule,
    everything between two of them in one. Returns (split module, names of the split-point
    submodules)."""
    part, current, cut = {}, 0, set()
    for node in gm.graph.nodes:
        if predicate(node):
            current += 1
            part[node] = current
            cut.add(current)
            current += 1
        else:
            part[node] = current
    split = split_module(gm, None, lambda n: part[n], keep_original_order=True)
    return split, {f"submod_{i}" for i in cut}


def _scratch_like(a):
    """A copy of `a` with the same sizes and strides (inductor's code checks strides), for the
    warm-up runs; `a` itself where it cannot be copied (overlapping memory)."""
    if not isinstance(a, torch.Tensor):
        return a
    try:
        b = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
        b.copy_(a)
        return b
    except RuntimeError:
        return a


class Piece(torch.nn.Module):
    """One piece between split points: compiled by `compile_piece` on its first call (with that
    call's real inputs), then, with CUDA graphs, captured once per input shape and replayed.

    The graph reads its inputs where they were at capture. Unlike integration/piecewise.py, the
    inputs are not cloned into private buffers: in a decoder layer they are the weights, the
    KV cache and the previous piece's (static) outputs, whose addresses never change, and
    copying ~470 MB of weights per call would be the whole cost. An input that arrives at
    another address (e.g. attention's output, allocated eagerly) is copied in before replay;
    the captured tensors are kept referenced, so their memory cannot be handed out again.
    Warm-up runs use scratch copies, so a piece that mutates its inputs (fused_add_rmsnorm's
    residual) runs exactly once on this call's real inputs: in the replay."""

    def __init__(self, gm, compile_piece, cuda_graphs, pool):
        super().__init__()
        self.gm = gm
        self.compile_piece = compile_piece
        self.cuda_graphs = cuda_graphs
        self.pool = pool
        self.compiled = None
        self.entries = {}  # input shapes -> (static inputs, graph, static outputs)

    def forward(self, *args):
        if self.compiled is None:
            self.compiled = self.compile_piece(self.gm, list(args)) if self.compile_piece \
                else self.gm
        if not self.cuda_graphs:
            return self.compiled(*args)
        key = tuple((a.shape, a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                    for a in args)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = self._capture(args)
        static_in, graph, static_out = entry
        for dst, src in zip(static_in, args):
            if isinstance(src, torch.Tensor) and src.data_ptr() != dst.data_ptr():
                dst.copy_(src)
        graph.replay()
        return static_out

    def _capture(self, args):
        scratch = [_scratch_like(a) for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # Triton's and cuBLAS's first-call work, outside the capture
                self.compiled(*scratch)
        torch.cuda.current_stream().wait_stream(stream)
        del scratch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            static_out = self.compiled(*args)
        return list(args), graph, static_out


def inductor_piece(gm, example_inputs):
    from torch._inductor import compile as inductor_compile
    return inductor_compile(gm, example_inputs)


class PiecewiseBackend:
    """torch.compile backend shaped like SGLang's piecewise CUDA graph runner: splits at
    `predicate` (attention), runs the split points eagerly (their FX code calls the op
    directly), compiles every other piece with inductor and replays it from a CUDA graph.

    integration/piecewise.py is not reused: it cuts only at its own marker op, runs the pieces
    as plain FX code (no inductor) and clones every input into the graph's buffers on each
    call, which here would copy all the weights per forward."""

    def __init__(self, predicate=is_attention, compile_piece=inductor_piece, cuda_graphs=True):
        self.predicate = predicate
        self.compile_piece = compile_piece
        self.cuda_graphs = cuda_graphs
        self.pool = torch.cuda.graph_pool_handle() if cuda_graphs else None
        self.ops = []     # FlashInfer ops of the latest graph
        self.splits = 0   # split points in the latest graph
        self.pieces = 0   # compiled pieces in the latest graph

    def __call__(self, gm, example_inputs):
        self.ops = flashinfer_ops(gm)
        split, cut = split_at(gm, self.predicate)
        self.splits, self.pieces = len(cut), 0
        for name, sub in list(split.named_children()):
            if name in cut:
                continue
            self.pieces += 1
            setattr(split, name, Piece(sub, self.compile_piece, self.cuda_graphs, self.pool))
        return split


class RecordingInductor:
    """backend="inductor", remembering which FlashInfer ops the graph holds."""

    def __init__(self):
        self.ops = []

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx
        self.ops = flashinfer_ops(gm)
        return compile_fx(gm, example_inputs)


# ---------------------------------------------------------------------------------------------
# The layer.

class Attn:
    """One batch size's attention state: KV cache, the new token's slots and positions, and
    the decode wrapper, made for CUDA graphs and planned here, once, for all three modes (the
    plan decides the kernel's split of the KV, so sharing it is what makes outputs equal)."""

    def __init__(self, bs, ctx, tensor_cores, seed):
        g = torch.Generator(device=DEV).manual_seed(seed)
        kv_len = ctx + 1  # the context plus the token being decoded, written by the layer
        pages_per_req = -(-kv_len // PAGE)
        num_pages = bs * pages_per_req
        shape = (num_pages, PAGE, NKV, HEAD)  # NHD
        self.k_cache = torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16)
        self.v_cache = torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16)
        # Pages in random order, as an allocator's free list would hand them out.
        indices = torch.randperm(num_pages, generator=g, device=DEV).to(torch.int32)
        indptr = torch.arange(bs + 1, device=DEV, dtype=torch.int32) * pages_per_req
        last_len = kv_len - (pages_per_req - 1) * PAGE
        last_page_len = torch.full((bs,), last_len, device=DEV, dtype=torch.int32)
        self.positions = torch.full((bs,), ctx, device=DEV, dtype=torch.int64)
        # Where FlashInfer's append_paged_kv_cache writes the new token: request b, position ctx
        # (the last slot of its last page).
        self.batch_indices = torch.arange(bs, device=DEV, dtype=torch.int32)
        self.append_positions = self.positions.to(torch.int32)
        self.indices, self.indptr, self.last_page_len = indices, indptr, last_page_len

        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=DEV),
            "NHD",
            use_cuda_graph=True,
            use_tensor_cores=tensor_cores,
            paged_kv_indptr_buffer=torch.empty(bs + 1, dtype=torch.int32, device=DEV),
            paged_kv_indices_buffer=torch.empty(num_pages, dtype=torch.int32, device=DEV),
            paged_kv_last_page_len_buffer=torch.empty(bs, dtype=torch.int32, device=DEV),
        )
        self.wrapper.plan(indptr, indices, last_page_len, NQ, NKV, HEAD, PAGE,
                          pos_encoding_mode="NONE", q_data_type=torch.bfloat16,
                          kv_data_type=torch.bfloat16)
        self.bs = bs
        _ATTN[bs] = self


_ATTN = {}  # batch size -> Attn, for the opaque op


def _define_opaque_op():
    @torch.library.custom_op(f"{BENCH_NS}::decode_attention", mutates_args=())
    def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         bs: int) -> torch.Tensor:
        return _ATTN[bs].wrapper.run(q, (k_cache, v_cache))

    @decode_attention.register_fake
    def _(q, k_cache, v_cache, bs):
        return torch.empty_like(q)


class Layer:
    def __init__(self, seed=0):
        g = torch.Generator(device=DEV).manual_seed(seed)

        def w(*shape, scale):
            return (torch.randn(shape, generator=g, device=DEV) * scale).to(torch.bfloat16)

        self.ln1 = 1 + w(HIDDEN, scale=0.1)
        self.ln2 = 1 + w(HIDDEN, scale=0.1)
        self.w_qkv = w(Q_SIZE + 2 * KV_SIZE, HIDDEN, scale=HIDDEN ** -0.5)
        self.w_o = w(HIDDEN, Q_SIZE, scale=Q_SIZE ** -0.5)
        self.w_gate_up = w(2 * INTER, HIDDEN, scale=HIDDEN ** -0.5)
        self.w_down = w(HIDDEN, INTER, scale=INTER ** -0.5)
        inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD, 2, device=DEV).float() / HEAD)
        freqs = torch.outer(torch.arange(8192, device=DEV).float(), inv_freq)
        self.cos_sin_cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1)  # float32

    def forward(self, x, attn, opaque):
        residual = x.clone()  # fused_add_rmsnorm writes it; the layer's input stays as given
        h = flashinfer.rmsnorm(x, self.ln1, EPS)
        qkv = F.linear(h, self.w_qkv)
        q, k, v = qkv.split([Q_SIZE, KV_SIZE, KV_SIZE], dim=-1)
        flashinfer.apply_rope_with_cos_sin_cache_inplace(
            attn.positions, q, k, HEAD, self.cos_sin_cache, True)
        # SGLang's set_kv_buffer, with FlashInfer's op: the new token's K and V into its slot of
        # the paged cache (part of attention: SGLang writes the cache inside its attention op).
        flashinfer.append_paged_kv_cache(
            k.contiguous().view(-1, NKV, HEAD), v.contiguous().view(-1, NKV, HEAD),
            attn.batch_indices, attn.append_positions, (attn.k_cache, attn.v_cache),
            attn.indices, attn.indptr, attn.last_page_len)
        q = q.contiguous().view(-1, NQ, HEAD)
        if opaque:
            o = torch.ops.decoder_bench.decode_attention(q, attn.k_cache, attn.v_cache, attn.bs)
        else:
            o = attn.wrapper.run(q, (attn.k_cache, attn.v_cache))
        h = F.linear(o.view(-1, Q_SIZE), self.w_o)
        flashinfer.fused_add_rmsnorm(h, residual, self.ln2, EPS)
        gate_up = F.linear(h, self.w_gate_up)
        act = flashinfer.silu_and_mul(gate_up)
        return F.linear(act, self.w_down), residual


# ---------------------------------------------------------------------------------------------
# The benchmark.

def first_line(e):
    """`Type: first line`, plus what Dynamo's Unsupported says on its 'Explanation:' line and
    the user-defined objects it could not put in the graph, when it says so."""
    message = str(e)
    text = " ".join(message.split("\n")[0].split()) or "(no message)"
    for line in message.splitlines()[1:]:
        if "Explanation:" in line:
            text += " | " + " ".join(line.split())
            break
    objects = sorted(set(re.findall(r"UserDefinedObjectVariable\((\w+)\)", message)))
    if objects:
        text += " | objects: " + ", ".join(objects)
    return f"{type(e).__name__}: {text}"[:500]


def breaks():
    return sum(torch._dynamo.utils.counters["graph_break"].values())


# Attention variants tried in order under `--attn auto`; see the module docstring.
CHAINS = {"auto": ["traced", "opaque"], "traced": ["traced"], "opaque": ["opaque"]}


def compile_mode(mode, layer, attn, x, chain):
    """Compiles (and for `whole`, captures) `mode` for one batch size, trying the attention
    variants of `chain` in order. Returns (callable running one forward, the variant that
    compiled, the chain for the next batch size), or (None, None, chain) when none compiled.
    The next batch size starts at the variant that compiled (the ones before it fail the same
    way for every batch size); after a total failure it tries only the last one."""
    for label in chain:
        opaque = label == "opaque"
        before = breaks()
        try:
            if mode == "piecewise":
                backend = PiecewiseBackend()
                fn = torch.compile(layer.forward, fullgraph=True, dynamic=False, backend=backend)
                fn(x, attn, opaque)  # compiles, captures the pieces, runs once

                def run(fn=fn, opaque=opaque):
                    return fn(x, attn, opaque)
                shape = f" splits={backend.splits} pieces={backend.pieces}"
            else:
                backend = RecordingInductor()
                fn = torch.compile(layer.forward, fullgraph=True, dynamic=False, backend=backend)
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    for _ in range(3):  # compiles, then Triton/cuBLAS warm-up outside capture
                        fn(x, attn, opaque)
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_out = fn(x, attn, opaque)
                graph.replay()

                def run(graph=graph, static_out=static_out):
                    graph.replay()
                    return static_out
                shape = ""
            torch.cuda.synchronize()
            print(f"OPS {mode} bs={attn.bs} attn={label}{shape}: {', '.join(backend.ops)}",
                  flush=True)
            print(f"BREAKS {mode} bs={attn.bs} attn={label}: {breaks() - before}", flush=True)
            return run, label, chain[chain.index(label):]
        except Exception as e:
            print(f"LAYER bs={attn.bs} {mode} attn={label} compile failed: {first_line(e)}",
                  flush=True)
            traceback.print_exc(file=sys.stderr)
            try:
                torch.cuda.synchronize()
            except Exception:
                pass  # a broken context shows in the next step's error
    return None, None, chain[-1:]


def clone_out(out):
    return tuple(t.clone() for t in out)


def compare(ref, got):
    """(identical, max abs diff over the outputs)."""
    same = all(torch.equal(a, b) for a, b in zip(ref, got))
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(ref, got))
    return same, diff


def time_us(fn, iters):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bs", default="1,8,64", help="comma-separated decode batch sizes")
    p.add_argument("--ctx", type=int, default=512, help="tokens already in the cache per request")
    p.add_argument("--iters", type=int, default=200, help="forwards per timed loop")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--attn", default="auto", choices=["auto", "traced", "opaque"])
    p.add_argument("--modes", default="piecewise,whole", help="compiled modes to run")
    p.add_argument("--tensor-cores", action="store_true",
                   help="decode through the tensor-core (prefill module) path, as SGLang does "
                        "for GQA group sizes >= 4")
    p.add_argument("--prebuild", choices=["norm", "rope", "act", "decode"],
                   help="only build that FlashInfer JIT module (one eager call) and exit; "
                        "decoder_layer.sh runs the four at once, as a module is a few source "
                        "files and its own build uses few cores")
    p.add_argument("--sglang-tc", type=int, default=0, metavar="STEPS",
                   help="issue 32 item 3: SGLang's --enable-torch-compile decode, one compile and "
                        "one CUDA graph per --bs (the capture sizes), then STEPS steps of changing "
                        "batch size, each with a new plan (fast_decode_plan); then exit")
    p.add_argument("--changing", type=int, default=0, metavar="STEPS",
                   help="issue 18: STEPS decode steps of changing batch (bs up to the largest "
                        "--bs), each with a new plan, from one compile; then exit")
    args = p.parse_args()
    if args.sglang_tc:
        torch.set_grad_enabled(False)
        sglang_tc(Layer(), args.sglang_tc, [int(b) for b in args.bs.split(",")], args.ctx,
                  args.iters, args.tensor_cores)
        return
    if args.changing:
        torch.set_grad_enabled(False)
        changing_batches(Layer(), args.changing, max(int(b) for b in args.bs.split(",")),
                         args.ctx, args.tensor_cores, args.rounds)
        return
    if args.prebuild:
        prebuild(args.prebuild, args.tensor_cores)
        return
    sizes = [int(b) for b in args.bs.split(",")]
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in ("piecewise", "whole") for m in modes) or args.ctx + 2 > 8192:
        p.error("--modes takes piecewise,whole; --ctx must stay below the rope cache (8190)")

    torch.set_grad_enabled(False)
    # One compiled entry per batch size, mode and attention variant on the same forward.
    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)
    _define_opaque_op()
    dynafold = "_dynafold_ops.engine.wake" in sys.modules
    print(f"ENV torch={torch.__version__} flashinfer={flashinfer.__version__} "
          f"device={torch.cuda.get_device_name()} dynafold={'on' if dynafold else 'off'} "
          f"ctx={args.ctx} tensor_cores={args.tensor_cores}", flush=True)

    layer = Layer()
    results = {}
    chains = {mode: CHAINS[args.attn] for mode in modes}
    for bs in sizes:
        attn = Attn(bs, args.ctx, args.tensor_cores, seed=bs)
        x = (torch.randn(bs, HIDDEN, device=DEV,
                         generator=torch.Generator(device=DEV).manual_seed(100 + bs))
             .to(torch.bfloat16))
        # Eager first: builds every JIT module (as SGLang's warm-up forward does).
        eager = lambda x=x, attn=attn: layer.forward(x, attn, False)  # noqa: E731
        ref = clone_out(eager())
        torch.cuda.synchronize()
        runs = {"eager": eager}
        labels = {}
        for mode in modes:
            run, label, chains[mode] = compile_mode(mode, layer, attn, x, chains[mode])
            if run is not None:
                runs[mode], labels[mode] = run, label
        results[bs] = {"x": x, "attn": attn, "runs": runs, "labels": labels, "times": {},
                       "check": check(runs, ref, bs)}

    # Interleaved rounds: every batch size and mode once per round, so drift hits all alike.
    for r in range(args.rounds):
        for bs in sizes:
            runs = results[bs]["runs"]
            names = list(runs)
            names = names[r % len(names):] + names[:r % len(names)]
            for name in names:
                for _ in range(10):
                    runs[name]()
                results[bs]["times"].setdefault(name, []).append(time_us(runs[name], args.iters))

    for bs in sizes:
        res = results[bs]
        # A second input after the timing: the graphs must follow the input, not replay what
        # they captured.
        res["x"].copy_(torch.randn_like(res["x"], dtype=torch.float32).to(torch.bfloat16))
        ref = clone_out(res["runs"]["eager"]())
        second = check(res["runs"], ref, bs)
        times = {name: statistics.median(ts) for name, ts in res["times"].items()}
        fields = [f"LAYER bs={bs}", f"eager_us={times['eager']:.1f}"]
        for mode in modes:
            fields.append(f"{mode}_us={times[mode]:.1f}" if mode in times else f"{mode}_us=-")
        for mode in modes:
            fields.append(f"{mode}_x={times['eager'] / times[mode]:.3f}" if mode in times
                          else f"{mode}_x=-")
        for mode in modes:
            if mode in res["labels"]:
                fields.append(f"{mode}_attn={res['labels'][mode]}")
        checked = [m for m in res["check"] if m in second]
        same = all(res["check"][m][0] and second[m][0] for m in checked)
        fields.append(f"identical={same if checked else '-'}")
        if not same:
            diffs = {m: max(res["check"][m][1], second[m][1]) for m in checked}
            fields.append("max_abs_diff=" + ",".join(f"{m}:{d:g}" for m, d in diffs.items()))
        spread = {name: f"{min(ts):.1f}-{max(ts):.1f}" for name, ts in res["times"].items()}
        fields.append("spread_us=" + ",".join(f"{n}:{s}" for n, s in spread.items()))
        print(" ".join(fields), flush=True)
    print(f"BREAKS total graph_break counter: {breaks()}", flush=True)
    status = getattr(sys.modules.get("_dynafold_ops.engine.wake"), "status", None)
    if status is not None:
        woken = {m: s["woken"] for m, s in status().items() if isinstance(s, dict) and s.get("woken")}
        print(f"WOKEN {woken}", flush=True)


class Batches:
    """Issue 18: a server's decode steps, each with a new batch and so a new plan. One KV cache
    for the largest batch; each step takes `bs` requests with random context lengths, random
    pages, and plans one decode wrapper (not in CUDA-graph mode: the batch changes per step)
    for them, outside the compiled forward, as SGLang's init_forward_metadata does."""

    def __init__(self, max_bs, max_ctx, tensor_cores):
        self.pages_per_req = -(-(max_ctx + 1) // PAGE)
        num_pages = max_bs * self.pages_per_req
        g = torch.Generator(device=DEV).manual_seed(7)
        shape = (num_pages, PAGE, NKV, HEAD)
        self.k_cache = torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16)
        self.v_cache = torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16)
        self.num_pages, self.max_ctx = num_pages, max_ctx
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=DEV), "NHD",
            use_tensor_cores=tensor_cores)

    def step(self, bs, seed):
        g = torch.Generator().manual_seed(seed)
        ctx = torch.randint(1, self.max_ctx, (bs,), generator=g)  # tokens before this one
        kv_len = ctx + 1
        pages = (kv_len + PAGE - 1) // PAGE
        indptr = torch.cat([torch.zeros(1, dtype=torch.int32), pages.cumsum(0).int()])
        perm = torch.randperm(self.num_pages, generator=g)[: int(pages.sum())].int()
        self.indices, self.indptr = perm.to(DEV), indptr.to(DEV)
        self.last_page_len = (kv_len - (pages - 1) * PAGE).int().to(DEV)
        self.positions = ctx.to(DEV)
        self.append_positions = self.positions.to(torch.int32)
        self.batch_indices = torch.arange(bs, device=DEV, dtype=torch.int32)
        self.wrapper.plan(self.indptr, self.indices, self.last_page_len, NQ, NKV, HEAD, PAGE,
                          pos_encoding_mode="NONE", q_data_type=torch.bfloat16,
                          kv_data_type=torch.bfloat16)
        self.bs = bs
        x = torch.randn(bs, HIDDEN, generator=g).to(DEV, torch.bfloat16)
        for t in (x, self.indices, self.indptr, self.last_page_len, self.positions,
                  self.append_positions, self.batch_indices):
            torch._dynamo.mark_dynamic(t, 0)
        return x

class CapturedBatch:
    """One capture size of SGLang's CUDA graph runner with --enable-torch-compile (0.5.23:
    model_executor/cuda_graph_runner.py; FlashInfer backend: layers/attention/
    flashinfer_backend.py): static input buffers, a decode wrapper in CUDA-graph mode over
    fixed indptr / indices / last_page_len buffers (tensor cores when --tensor-cores, as SGLang
    picks for GQA >= 4), planned once at capture with plan() and from then on with
    fast_decode_plan (SGLang sets begin_forward to it), the forward compiled by
    torch.compile(dynamic=False) for this size, warmed up twice and captured in one graph."""

    def __init__(self, layer, bs, cache, max_pages, workspace, tensor_cores, pool):
        self.layer, self.bs = layer, bs
        self.k_cache, self.v_cache = cache
        self.x = torch.zeros(bs, HIDDEN, device=DEV, dtype=torch.bfloat16)
        self.positions = torch.zeros(bs, device=DEV, dtype=torch.int64)
        self.append_positions = torch.zeros(bs, device=DEV, dtype=torch.int32)
        self.batch_indices = torch.arange(bs, device=DEV, dtype=torch.int32)
        self.indptr = torch.zeros(bs + 1, device=DEV, dtype=torch.int32)
        self.indices = torch.zeros(max_pages, device=DEV, dtype=torch.int32)
        self.last_page_len = torch.ones(bs, device=DEV, dtype=torch.int32)
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores,
            paged_kv_indptr_buffer=self.indptr, paged_kv_indices_buffer=self.indices,
            paged_kv_last_page_len_buffer=self.last_page_len)
        self.pool = pool
        self.fn = self.graph = self.out = None

    def load(self, step):
        """Copies a step's batch into the static buffers (SGLang's replay_prepare and its
        indices updater write the wrapper's buffers in place)."""
        n = step["indices"].numel()
        self.indptr.copy_(step["indptr"])
        self.indices[:n].copy_(step["indices"])
        self.last_page_len.copy_(step["last_page_len"])
        self.positions.copy_(step["ctx"])
        self.append_positions.copy_(step["ctx"])
        self.x.copy_(step["x"])

    def plan(self, step, first=False):
        args = (self.indptr, self.indices[: step["indices"].numel()], self.last_page_len,
                NQ, NKV, HEAD, PAGE)
        kw = dict(pos_encoding_mode="NONE", q_data_type=torch.bfloat16,
                  kv_data_type=torch.bfloat16)
        if first:
            self.wrapper.plan(*args, **kw)
        else:
            flashinfer.fast_decode_plan(self.wrapper, *args, **kw, non_blocking=True,
                                        global_override_indptr_cpu=step["indptr"].cpu())

    def eager(self):
        return self.layer.forward(self.x, self, False)

    def compiled(self):
        return self.fn(self.x, self, False)

    def capture(self, backend):
        self.fn = torch.compile(self.layer.forward, dynamic=False, backend=backend)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # SGLang's two warm-up runs before capture
                self.compiled()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=self.pool):
            self.out = self.compiled()

    def replay(self):
        self.graph.replay()
        return self.out


def decode_step(bs, max_ctx, num_pages, seed):
    """A decode batch: bs requests with random context lengths and random pages."""
    g = torch.Generator().manual_seed(seed)
    ctx = torch.randint(1, max_ctx, (bs,), generator=g)
    kv_len = ctx + 1
    pages = (kv_len + PAGE - 1) // PAGE
    indptr = torch.cat([torch.zeros(1, dtype=torch.int32), pages.cumsum(0).int()])
    indices = torch.randperm(num_pages, generator=g)[: int(pages.sum())].int()
    x = torch.randn(bs, HIDDEN, generator=g).to(torch.bfloat16)
    return {k: v.to(DEV) for k, v in dict(
        ctx=ctx, indptr=indptr, indices=indices, x=x,
        last_page_len=(kv_len - (pages - 1) * PAGE).int()).items()}


def sglang_tc(layer, steps, sizes, max_ctx, iters, tensor_cores):
    """Issue 32 item 3. Capture: per size, plan, compile, warm up, capture. Then `steps` decode
    steps whose batch size changes every step: load the batch, fast_decode_plan, and run it
    eagerly (the reference), through the compiled function without its graph (Dynamo's guards
    meet the new plan: a recompile would show in the counters) and by replaying the graph.
    Prints SGLANG_TC with frames and recompiles per phase, equality, and per-step times (CUDA
    events around `iters` back-to-back forwards, median over the steps)."""
    from torch._dynamo.utils import counters
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    dynafold = "_dynafold_ops.engine.wake" in sys.modules
    print(f"ENV torch={torch.__version__} flashinfer={flashinfer.__version__} "
          f"device={torch.cuda.get_device_name()} dynafold={'on' if dynafold else 'off'} "
          f"ctx<={max_ctx} tensor_cores={tensor_cores} gqa={NQ // NKV} sizes={sizes}",
          flush=True)
    max_bs = max(sizes)
    pages_per_req = -(-(max_ctx + 1) // PAGE)
    num_pages = max_bs * pages_per_req
    g = torch.Generator(device=DEV).manual_seed(7)
    shape = (num_pages, PAGE, NKV, HEAD)
    cache = (torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16),
             torch.randn(shape, generator=g, device=DEV, dtype=torch.bfloat16))
    workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=DEV)
    pool = torch.cuda.graph_pool_handle()
    backend = RecordingInductor()
    counters.clear()
    runners = {}
    start = time.perf_counter()
    for bs in sorted(sizes, reverse=True):  # SGLang captures the largest size first
        r = runners[bs] = CapturedBatch(layer, bs, cache, num_pages, workspace, tensor_cores,
                                        pool)
        step = decode_step(bs, max_ctx, num_pages, seed=10_000 + bs)
        r.load(step)
        r.plan(step, first=True)
        try:
            r.capture(backend)
        except Exception as e:
            print(f"SGLANG_TC bs={bs} capture failed: {first_line(e)}", flush=True)
            traceback.print_exc(file=sys.stderr)
            return
    torch.cuda.synchronize()
    frames_capture = counters["stats"].get("unique_graphs", 0)
    breaks_capture = breaks()
    print(f"SGLANG_TC captured sizes={sorted(sizes)} frames={frames_capture} "
          f"graph_breaks={breaks_capture} in {time.perf_counter() - start:.1f}s; "
          f"ops: {', '.join(backend.ops)}", flush=True)

    g = torch.Generator().manual_seed(0)
    order, prev = [], None
    while len(order) < steps:  # a different size every step
        bs = sizes[int(torch.randint(len(sizes), (1,), generator=g))]
        if bs != prev or len(sizes) == 1:
            order.append(bs)
            prev = bs
    unequal, diffs, times = [], [], {"eager": [], "graph": [], "plan": []}
    for i, bs in enumerate(order):
        r = runners[bs]
        step = decode_step(bs, max_ctx, num_pages, seed=i)
        r.load(step)
        t = time.perf_counter()
        r.plan(step)
        times["plan"].append((time.perf_counter() - t) * 1e6)
        ref = clone_out(r.eager())
        got_compiled = clone_out(r.compiled())
        got_graph = clone_out(r.replay())
        torch.cuda.synchronize()
        for name, got in (("compiled", got_compiled), ("graph", got_graph)):
            same, diff = compare(ref, got)
            if not same:
                unequal.append(f"{i}:bs{bs}:{name}")
                diffs.append(diff)
        times["eager"].append(time_us(r.eager, iters))
        times["graph"].append(time_us(r.replay, iters))
    frames = counters["stats"].get("unique_graphs", 0)
    e, c = statistics.median(times["eager"]), statistics.median(times["graph"])
    per_bs = {}
    for bs, te, tg in zip(order, times["eager"], times["graph"]):
        per_bs.setdefault(bs, []).append((te, tg))
    print(f"SGLANG_TC steps={steps} batch_sizes={order} frames_after_steps={frames} "
          f"recompiles_during_steps={frames - frames_capture} "
          f"graph_breaks_during_steps={breaks() - breaks_capture} "
          f"unequal={unequal or 'none'}{' max_abs_diff=%g' % max(diffs) if diffs else ''}",
          flush=True)
    print(f"SGLANG_TC per-step forward: eager_us={e:.1f} graph_us={c:.1f} speedup={e / c:.2f}x "
          f"(median over {steps} steps, {iters} forwards each); plan_us={statistics.median(times['plan']):.0f}",
          flush=True)
    for bs in sorted(per_bs):
        te = statistics.median(t[0] for t in per_bs[bs])
        tg = statistics.median(t[1] for t in per_bs[bs])
        print(f"SGLANG_TC bs={bs} steps={len(per_bs[bs])} eager_us={te:.1f} graph_us={tg:.1f} "
              f"speedup={te / tg:.2f}x", flush=True)
    if dynafold:
        in_process(runners, order, max_ctx, num_pages, iters)


def in_process(runners, order, max_ctx, num_pages, iters, blocks=10):
    """Issue 40 in one process that has compiled: the same steps (plan, then the eager
    forward) again, in blocks alternating dynafold's dispatchers with FlashInfer's methods as
    shipped, in ABBA order, as bench/host_path_child.py's in_process does for single calls.
    This machine's processes differ by 1.2-2.3x where dynafold runs no code, so only a
    comparison inside one process resolves 2%. Prints each block's ratio of medians
    (dispatched over shipped) for the eager forward and for plan()."""
    helpers = pathlib.Path(__file__).resolve().parents[2] / "tests" / "python" / "helpers"
    sys.path.insert(0, str(helpers))
    from dispatched import dispatched_methods, use
    methods = dispatched_methods()
    ratios = {"eager": [], "plan": []}
    for block in range(blocks):
        kinds = ("dispatched", "shipped") if block % 2 == 0 else ("shipped", "dispatched")
        medians = {}
        for kind in kinds:
            use(methods, kind)
            times = {"eager": [], "plan": []}
            for i, bs in enumerate(order):
                r = runners[bs]
                step = decode_step(bs, max_ctx, num_pages, seed=i)
                r.load(step)
                torch.cuda.synchronize()
                t = time.perf_counter()
                r.plan(step)
                times["plan"].append(time.perf_counter() - t)
                times["eager"].append(time_us(r.eager, iters))
            medians[kind] = {k: statistics.median(v) for k, v in times.items()}
        for k in ratios:
            ratios[k].append(medians["dispatched"][k] / medians["shipped"][k])
    use(methods, "dispatched")
    fields = [f"SGLANG_TC in-process methods={len(methods)} blocks={blocks}"]
    for k, rs in ratios.items():
        fields.append(f"{k}_x={statistics.median(rs):.4f} {k}_blocks="
                      + ",".join(f"{r:.4f}" for r in rs))
    print(" ".join(fields), flush=True)


def changing_batches(layer, steps, max_bs, max_ctx, tensor_cores, rounds):
    """One inductor compile of the whole layer (attention traced, batch dimension dynamic), run
    over `steps` decode steps of changing batch size, each planned anew; against eager on the
    same steps. Prints CHANGING with frames compiled, equality and per-step times."""
    from torch._dynamo.utils import counters
    state = Batches(max_bs, max_ctx, tensor_cores)
    g = torch.Generator().manual_seed(0)
    sizes = [int(b) for b in torch.randint(2, max_bs + 1, (steps,), generator=g)]
    counters.clear()
    compiled = torch.compile(lambda x: layer.forward(x, state, False), fullgraph=True,
                             backend="inductor")
    eager = lambda x: layer.forward(x, state, False)  # noqa: E731
    unequal, times = [], {"eager": [], "compiled": []}
    k_saved, v_saved = state.k_cache.clone(), state.v_cache.clone()
    for r in range(rounds):
        for i, bs in enumerate(sizes):
            # Eager first in the checking round; then the order alternates per round.
            for name, fn in (("eager", eager), ("compiled", compiled))[::(-1 if r % 2 else 1)]:
                x = state.step(bs, seed=i)
                state.k_cache.copy_(k_saved)
                state.v_cache.copy_(v_saved)
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = clone_out(fn(x))
                end.record()
                end.synchronize()
                if r:  # the first round compiles
                    times[name].append(start.elapsed_time(end) * 1000.0)
                if name == "eager":
                    ref = out
                elif r == 0 and not all(torch.equal(a, b) for a, b in zip(ref, out)):
                    unequal.append(bs)
    e, c = statistics.median(times["eager"]), statistics.median(times["compiled"])
    print(f"CHANGING steps={steps} distinct_bs={len(set(sizes))} "
          f"frames={counters['stats'].get('unique_graphs', 0)} unequal={unequal} "
          f"eager_us={e:.1f} compiled_us={c:.1f} compiled_x={e / c:.3f} rounds={rounds - 1}",
          flush=True)


def prebuild(what, tensor_cores):
    x = torch.randn(2, HIDDEN, device=DEV, dtype=torch.bfloat16)
    w = torch.ones(HIDDEN, device=DEV, dtype=torch.bfloat16)
    if what == "norm":
        flashinfer.rmsnorm(x, w, EPS)
        flashinfer.fused_add_rmsnorm(x, x.clone(), w, EPS)
    elif what == "rope":
        qkv = torch.randn(2, Q_SIZE + 2 * KV_SIZE, device=DEV, dtype=torch.bfloat16)
        q, k, _ = qkv.split([Q_SIZE, KV_SIZE, KV_SIZE], dim=-1)
        cache = torch.randn(64, HEAD, device=DEV, dtype=torch.float32)
        pos = torch.zeros(2, device=DEV, dtype=torch.int64)
        flashinfer.apply_rope_with_cos_sin_cache_inplace(pos, q, k, HEAD, cache, True)
    elif what == "act":
        flashinfer.silu_and_mul(torch.randn(2, 2 * INTER, device=DEV, dtype=torch.bfloat16))
    else:
        attn = Attn(1, 16, tensor_cores, seed=0)  # plan() builds the decode module
        kv = torch.randn(1, NKV, HEAD, device=DEV, dtype=torch.bfloat16)
        flashinfer.append_paged_kv_cache(  # and this the page module
            kv, kv, attn.batch_indices, attn.append_positions, (attn.k_cache, attn.v_cache),
            attn.indices, attn.indptr, attn.last_page_len)
    torch.cuda.synchronize()
    print(f"PREBUILD {what} done", flush=True)


def check(runs, ref, bs):
    """Each compiled mode's outputs against eager's `ref`: {mode: (identical, max abs diff)}.
    A mode that fails to run is reported and dropped from `runs`."""
    out = {}
    for name, run in list(runs.items()):
        if name == "eager":
            continue
        try:
            got = clone_out(run())
            torch.cuda.synchronize()
        except Exception as e:
            print(f"LAYER bs={bs} {name} run failed: {first_line(e)}", flush=True)
            traceback.print_exc(file=sys.stderr)
            del runs[name]
            continue
        out[name] = compare(ref, got)
    return out


if __name__ == "__main__":
    main()
