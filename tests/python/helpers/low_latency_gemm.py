"""Compiled equals eager, on values, for mm_fp8's default backend (trtllm_low_latency): FlashInfer's
public mm_fp8 and trtllm_low_latency_gemm as shipped (its runner, its autotuner's choose_one),
the JIT module the runner builds replaced by a CPU stand-in whose kernel writes what the real
one writes (csrc/trtllm_low_latency_gemm_runner.cu: only `out`, (m, n) bf16, every element a
function of `A`, the prepared weight and `global_scale`). Its `globalScale` is a TensorView the
kernel reads (data_ptr()), so mm_fp8 without `alpha` (None, its default) is refused at the FFI
call: the stand-in refuses it too, and compiled must fail there as eager does. Compiled with
real inductor, `fullgraph=True`, static and with m dynamic, with and without `alpha` and `out`.
Prints one JSON line: per case and mode, whether it compiled, through which operators, and
whether results and arguments (or the error) equal eager's."""

import torch

import flashinfer
from flashinfer import trtllm_low_latency_gemm as llgemm
from flashinfer.gemm import gemm_base
from value_compare import clone, compare_cases, print_result, same

M, N, K = 5, 48, 256


def _gemm(workspace, a, b, global_scale, out, tactic):
    # b is the prepared weight (k // 128, n, 128); its rows permuted by the preparation, which
    # the stand-in need not undo: it only has to read every input and write all of `out`.
    if not isinstance(global_scale, torch.Tensor):
        # tvm-ffi's conversion of a TensorView argument, as the real module's call refuses None.
        raise TypeError(f"Mismatched type on argument #3: expected Tensor, got {global_scale!r}")
    n = b.shape[1]
    w = b.permute(1, 0, 2).reshape(n, -1).float()
    value = a.float() @ w.t() * global_scale.float()
    out.copy_(value.to(out.dtype))


class _Module:
    def __init__(self):
        self.trtllm_low_latency_gemm = torch._dynamo.disable(_gemm)
        self.trtllm_low_latency_gemm_tactics = lambda m, n, k, ta, tb: [0]
        self.get_workspace_size_in_bytes = lambda m, n, k, tactic: 1024


class _Spec:
    def build_and_load(self):
        return _Module()

    def get_library_paths(self):
        return []

    def get_library_path(self):
        # 0.6.x's loader names its one library for setup_cubin_loader (stubbed below).
        return ""


llgemm.gen_trtllm_low_latency_gemm_module = lambda **kwargs: _Spec()
# The cubin loader the real library calls back into: there is no library.
llgemm.setup_cubin_loader = lambda path: None
# The module loader asks the current device for SM107 (Rubin's own cubins); a B200 here.
llgemm.get_compute_capability = lambda device: (10, 0)
torch.cuda.current_device = lambda: 0
if flashinfer.__version__ == "0.6.3":
    # 0.6.3's runner writes nothing at the untuned fallback tactic (-1: `return out`), so eager
    # itself leaves a fresh `out` uninitialised; the tactic a tuned server's cache gives instead.
    llgemm.AutoTuner.choose_one = lambda self, op, runners, config, inputs, **kw: (runners[0], 0)
if hasattr(llgemm, "_get_stream_cache_buf"):
    # 0.7.4's workspace is per CUDA stream, keyed by the raw stream; host memory here.
    llgemm._get_stream_cache_buf = lambda name, size, device, *args, **kwargs: torch.empty(
        size, dtype=torch.uint8, device=device)


# skip_check: FlashInfer's backend check (0.6.16 on) reads the tensors' device's compute
# capability, which CPU tensors have none of; the call is the same past it.
CHECKS = {"skip_check": True} if hasattr(gemm_base.mm_fp8, "is_backend_supported") else {}


def case(alpha, out):
    def f(a, b, scale, buffer):
        result = gemm_base.mm_fp8(a, b, scale if alpha else None,
                                  out=buffer if out else None, **CHECKS)
        return result if out else (result,)
    return f


CASES = {f"{'alpha' if alpha else 'no_alpha'}_{'out' if out else 'fresh'}": case(alpha, out)
         for alpha in (True, False) for out in (True, False)}


def inputs():
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(M, K, generator=g) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(K // 128, N, 128, generator=g) * 2).to(torch.float8_e4m3fn)
    # The caller's `out` holds a value the kernel never writes, so a stale buffer shows (not NaN,
    # which no comparison finds equal to itself).
    return [a, b, torch.tensor([0.37]), torch.full((M, N), -7.0, dtype=torch.bfloat16)]


def compare(fn, dynamic):
    args = inputs()
    eager_args = clone(args)
    try:
        eager = fn(*eager_args)
    except TypeError as e:
        eager = f"{type(e).__name__}: {e}"
    compiled_args = clone(args)
    if dynamic:
        torch._dynamo.mark_dynamic(compiled_args[0], 0)
        torch._dynamo.mark_dynamic(compiled_args[3], 0)
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    compiled = torch.compile(fn, fullgraph=True, backend=backend)
    try:
        got = compiled(*compiled_args)
    except TypeError as e:
        # Refused where eager is: at the kernel's call, inside the compiled graph's operator.
        got = f"{type(e).__name__}: {e}"
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}
    operators = sorted({str(n.target) for g in graphs for n in g.graph.nodes
                        if n.op == "call_function" and "dynafold" in str(n.target)})
    return {"ok": True, "operators": operators, "refused": isinstance(eager, str),
            "equal": same(eager, got) and same(eager_args, compiled_args),
            "finite": isinstance(got, str) or bool(torch.isfinite(got[0].float()).all())}


def main():
    print_result(compare_cases(CASES, compare))


if __name__ == "__main__":
    main()
