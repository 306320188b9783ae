"""Drives SGLang's own compile path (sglang 0.5.23, unmodified) over forwards that call FlashInfer
directly, on CPU, and prints one JSON line per case. Run by test_sglang.py, with and without
dynafold's preload, in the CPython 3.12 / torch 2.14.1 environment of scripts/lib/env.sh.

The sequence is SGLang's `TcPiecewiseCudaGraphBackend._run_compile_pass`: inside
`enable_tc_piecewise_cuda_graph()`, one eager dummy forward at the smallest size (SGLang's "JIT
kernel warm-up"), then `install_torch_compiled(model, compile_config=CompilationConfig(sizes,
compiler), graph_pool=..., fullgraph=True)`, then inside `enable_torch_compile_warmup()` one
forward per size, largest first. The compile is SGLang's: `SGLangBackend` splits the graph at the
split op (registered through SGLang's `register_custom_op` / `register_split_op`), compiles each
piece with SGLang's `EagerAdapter` or `InductorAdaptor` and wraps it in `CUDAPiecewiseBackend`.

Stand-ins, only where this machine has no GPU (nothing else of SGLang, FlashInfer, torch or
dynafold is replaced; 1-4 are functions of helpers/sglang_standins.py, shared with the 0.5.9
and 0.5.12 runners):
  1. `IPython.display`: a stub module with `HTML` and `display` (SGLang's `sglang/utils.py`
     imports them; IPython, one of SGLang's heavy dependencies, was not installed until the
     real server's packages joined the environment, issue 21; the stub is kept so this path
     stays as measured).
  2. `sglang.srt.model_executor.runner_backend_utils.weak_ref_tensor`: SGLang's module raises
     NotImplementedError at import without CUDA; the stand-in's functions raise if called
     (SGLang calls them only while capturing a CUDA graph, which never happens on CPU).
  3. The compute capability of a CPU tensor: FlashInfer's fp4 module asks
     `get_compute_capability(input.device)`, which accepts CUDA devices only; the stand-in
     answers (9, 0) (an H200, SGLang's SM90 branch) for CPU devices and defers to FlashInfer's
     own function otherwise.
  4. The JIT build of three FlashInfer modules: `JitSpecNvcc.build` (ninja + nvcc) and
     `JitSpecNvcc.load` (tvm_ffi.load_module), for the specs named fp4_quantization_90, norm
     and silu_and_mul only (any other spec goes to FlashInfer's own): the build compiles
     nothing and the load returns a CPU module with the built module's function names and
     signatures, computed in torch (an NVFP4 reference quantizer, helpers/nvfp4.py, writing
     the linear scale layout FlashInfer asks for here; RMSNorm; fused add + RMSNorm;
     SiLU-and-mul), opaque to Dynamo (`torch._dynamo.disable`) as the built module's tvm_ffi
     functions are. Everything around them runs as FlashInfer
     ships it: the JIT spec generators, `JitSpec.build_and_load` (try_load, FileLock),
     `get_fp4_quantization_module`, `get_norm_module` and `get_act_and_mul_module`.
  5. The CPU kernel of the test's own split op: SGLang's `register_custom_op` registers the
     function for the CUDA dispatch key only; the same function is also registered for CPU.
"""
import glob
import json
import os
import sys
import tempfile
import time

STARTED = time.monotonic()

import sglang_standins as standins  # noqa: E402 (torch, after the clock starts)
from process_log import ProcessLog  # noqa: E402

# -- stand-in 1: IPython.display
standins.ipython_display()
# -- stand-in 2: weak_ref_tensor (raises at import without a GPU)
standins.weak_ref_tensor("sglang.srt.model_executor.runner_backend_utils.weak_ref_tensor")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import flashinfer  # noqa: E402
from flashinfer.jit.core import JitSpecNvcc  # noqa: E402

from sglang.srt.compilation.compilation_config import CompilationConfig, register_split_op  # noqa: E402
from sglang.srt.compilation.compilation_counter import compilation_counter  # noqa: E402
from sglang.srt.compilation.compile import install_torch_compiled  # noqa: E402
from sglang.srt.compilation.compile_phase import enable_torch_compile_warmup  # noqa: E402
from sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph import (  # noqa: E402
    enable_tc_piecewise_cuda_graph,
)
from sglang.srt.utils.custom_op import register_custom_op  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "integration"))
from sglang_blocks import BLOCKS, inputs  # noqa: E402

IMPORTED_S = time.monotonic() - STARTED
FP4_MODULE = sys.modules[flashinfer.fp4_quantize.__module__]

# -- stand-in 3: the compute capability of a CPU tensor: (9, 0), an H200 (SGLang's SM90 branch)
standins.compute_capability(FP4_MODULE, (9, 0))

# -- stand-in 4: the JIT build of the fp4, norm and activation modules ------------------------
# The built fp4 module's `fp4_quantize` arguments, in the order FlashInfer 0.7.2 passes them.
FP4_KERNEL_ARGS = ("input", "global_scale", "out_val", "out_sf", "sf_vec_size", "sf_use_ue8m0",
                   "is_sf_swizzled_layout", "is_sf_8x4_layout", "is_global_scale_inversed",
                   "enable_pdl", "nvfp4_4over6_code")


def _rms(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


class CpuNormModule:
    """The built norm module's `rmsnorm` and `fused_add_rmsnorm` (same arguments, in place)."""

    def rmsnorm(self, out, input, weight, eps, enable_pdl):
        out.copy_(_rms(input, weight, eps))

    def fused_add_rmsnorm(self, input, residual, weight, eps, enable_pdl):
        residual.add_(input)
        input.copy_(_rms(residual, weight, eps))


class CpuActModule:
    """The built activation module's `silu_and_mul(out, input, enable_pdl)`."""

    def silu_and_mul(self, out, input, enable_pdl):
        d = input.shape[-1] // 2
        out.copy_((torch.nn.functional.silu(input[..., :d].float()) * input[..., d:].float()).to(out.dtype))


CPU_MODULES = {"fp4_quantization_90": lambda: standins.CpuFp4Module(FP4_KERNEL_ARGS),
               "norm": CpuNormModule, "silu_and_mul": CpuActModule}
BUILT = standins.flashinfer_jit(JitSpecNvcc, CPU_MODULES)  # the spec names built, in order

# -- the split op, through SGLang's own registration ------------------------------------------
SPLIT_OP = "dynafold_test_attention"


def dynafold_test_attention(q: torch.Tensor, output: torch.Tensor) -> None:
    """Where SGLang cuts the graph (attention in a real model): the pieces around it are
    compiled, the op itself runs eagerly between them."""
    output.copy_(q)


_attention_kernel = dynafold_test_attention
dynafold_test_attention = register_custom_op(mutates_args=["output"])(
    register_split_op()(dynafold_test_attention))
# stand-in 5: the op's kernel for the CPU dispatch key.
_cpu_lib = torch.library.Library("sglang", "IMPL")
_cpu_lib.impl(SPLIT_OP, _attention_kernel, "CPU")

HIDDEN = 64


def make(name):
    return BLOCKS[name](dynafold_test_attention, HIDDEN, "cpu")


def values(name, n):
    return inputs(name, n, HIDDEN, "cpu", n)


SIZES = [4, 8, 16]


# The processes started while SGLang compiles and runs the compiled forwards (Inductor starts
# its C++ compiler; FlashInfer would start nvcc and ninja).
PROCESSES = ProcessLog()


def compile_pass(name, compiler, cache_dir):
    """SGLang's _run_compile_pass over one model; returns the compiled outputs per size."""
    os.environ["SGLANG_CACHE_DIR"] = cache_dir
    model = make(name)
    config = CompilationConfig(SIZES, compiler)
    outputs = {}
    with enable_tc_piecewise_cuda_graph():
        # "Dummy warmup for jit kernel": eager, at the smallest size; FlashInfer builds its
        # modules here.
        model(*values(name, SIZES[0]))
        install_torch_compiled(model, compile_config=config, fullgraph=True,
                               graph_pool=torch.cuda.graph_pool_handle())
        PROCESSES.active = True
        try:
            with enable_torch_compile_warmup():
                for n in reversed(SIZES):
                    outputs[n] = model(*values(name, n))
        finally:
            PROCESSES.active = False
    return model, outputs


def same(a, b):
    return all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def run_case(name, compiler, root):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    before = compilation_counter.clone()
    del PROCESSES.commands[:]
    cache_dir = os.path.join(root, f"{name}-{compiler}")
    started = time.monotonic()
    result = {"model": name, "compiler": compiler}
    try:
        model, compiled = compile_pass(name, compiler, cache_dir)
        result["ok"] = True
    except Exception as e:
        result.update(ok=False, error=f"{type(e).__name__}: {e}"[:6000])
        return result
    finally:
        result["seconds"] = round(time.monotonic() - started, 1)
        result["graph_breaks"] = sum(counters["graph_break"].values())
        result["graph_break_reasons"] = list(counters["graph_break"])[:5]
        result["processes_while_compiling"] = list(PROCESSES.commands)
        result["counter"] = {k: getattr(compilation_counter, k) - getattr(before, k)
                             for k in vars(compilation_counter)}
    # Eager reference: outside enable_tc_piecewise_cuda_graph() SGLang's trampoline runs the
    # original forward.
    eager = {n: model(*values(name, n)) for n in SIZES}
    result["equal_to_eager"] = {n: same(compiled[n], eager[n]) for n in SIZES}
    result["nonzero_fp4"] = {n: int(eager[n][0].count_nonzero()) for n in SIZES}
    # SGLangBackend writes the split graph it compiled to
    # $SGLANG_CACHE_DIR/torch_compile_cache/<compiler hash>/rank_0_0/backbone/.
    graphs = sorted(glob.glob(os.path.join(cache_dir, "torch_compile_cache", "**",
                                           "computation_graph_*.py"), recursive=True))
    result["dumped_graphs"] = len(graphs)
    text = open(graphs[-1]).read() if graphs else ""
    result["graph_ops"] = sorted({line.split("torch.ops.", 1)[1].split("(", 1)[0]
                                  for line in text.splitlines() if "torch.ops." in line})
    if compiler == "inductor":
        # The code Inductor generated for the pieces (SGLang points Inductor's cache there).
        code = ""
        for path in glob.glob(os.path.join(cache_dir, "torch_compile_cache", "**", "*.py"),
                              recursive=True):
            if "computation_graph_" not in path:
                code += open(path, errors="replace").read()
        result["inductor_code_ops"] = sorted({
            w for w in ("dynafold_flashinfer.fp4_quantize_sm100", "dynafold_flashinfer.rmsnorm",
                        "dynafold_flashinfer.fused_add_rmsnorm", "dynafold_flashinfer.silu_and_mul",
                        f"sglang.{SPLIT_OP}") if w in code})
    return result


def main():
    models = sys.argv[1].split(",")
    compilers = sys.argv[2].split(",")
    dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp(prefix='dynafold-gloo-')}",
                            rank=0, world_size=1)
    preload = sys.meta_path and type(sys.meta_path[0]).__name__ == "DynafoldFinder"
    root = os.environ["DYNAFOLD_TEST_SGLANG_CACHE"]
    for compiler in compilers:
        for name in models:
            result = run_case(name, compiler, root)
            result.update(dynafold=bool(preload), python=sys.version.split()[0],
                          torch=torch.__version__, flashinfer=flashinfer.__version__,
                          sglang=__import__("sglang").__version__, import_s=round(IMPORTED_S, 1),
                          built=list(BUILT))
            print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


main()
