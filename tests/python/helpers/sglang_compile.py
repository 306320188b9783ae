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
dynafold is replaced):
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
     signatures, computed in torch (an NVFP4 reference quantizer for the linear scale layout;
     RMSNorm; fused add + RMSNorm; SiLU-and-mul), opaque to Dynamo (`torch._dynamo.disable`) as
     the built module's tvm_ffi functions are. Everything around them runs as FlashInfer
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
import types

STARTED = time.monotonic()

# -- stand-in 1: IPython.display --------------------------------------------------------------
_ipython = types.ModuleType("IPython")
_display = types.ModuleType("IPython.display")
_display.HTML = type("HTML", (), {"__init__": lambda self, *a, **k: None})
_display.display = lambda *args, **kwargs: None
_ipython.display = _display
sys.modules["IPython"] = _ipython
sys.modules["IPython.display"] = _display

# -- stand-in 2: weak_ref_tensor (raises at import without a GPU) ------------------------------
_weak = types.ModuleType("sglang.srt.model_executor.runner_backend_utils.weak_ref_tensor")


def _no_capture(*args, **kwargs):
    raise RuntimeError("weak_ref_tensor stand-in called: SGLang tried to capture a CUDA graph on CPU")


_weak.weak_ref_tensor = _no_capture
_weak.weak_ref_tensors = _no_capture
sys.modules[_weak.__name__] = _weak

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

# -- stand-in 3: the compute capability of a CPU tensor ---------------------------------------
_flashinfer_capability = FP4_MODULE.get_compute_capability


def _compute_capability(device):
    if device.type == "cpu":
        return 9, 0
    return _flashinfer_capability(device)


FP4_MODULE.get_compute_capability = _compute_capability

# -- stand-in 4: the JIT build of the fp4, norm and activation modules ------------------------
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


class CpuFp4Module:
    """The built fp4 module's `fp4_quantize`, for NVFP4 (16-element blocks, UE4M3 scales) in
    the linear scale layout, written into the caller's buffers as the kernel does."""

    def fp4_quantize(self, input, global_scale, out_val, out_sf, sf_vec_size, sf_use_ue8m0,
                     is_sf_swizzled_layout, is_sf_8x4_layout, is_global_scale_inversed,
                     enable_pdl, nvfp4_4over6_code):
        if sf_vec_size != 16 or sf_use_ue8m0 or is_sf_swizzled_layout:
            raise NotImplementedError("CPU stand-in: NVFP4 in the linear scale layout only")
        k = input.shape[-1]
        blocks = input.reshape(-1, k // 16, 16).float()
        scale = global_scale.float().reshape(())
        if is_global_scale_inversed:
            scale = 1.0 / scale
        sf = (scale * blocks.abs().amax(-1) / 6.0).to(torch.float8_e4m3fn)
        sf_f = sf.float()
        inv = torch.where(sf_f == 0, torch.zeros_like(sf_f), scale / sf_f)
        scaled = (blocks * inv.unsqueeze(-1)).clamp(-6.0, 6.0)
        code = (scaled.abs().unsqueeze(-1) - E2M1).abs().argmin(-1).to(torch.uint8)
        code = code | ((scaled < 0).to(torch.uint8) << 3)
        code = code.reshape(*input.shape[:-1], k)
        out_val.copy_(code[..., 0::2] | (code[..., 1::2] << 4))
        n = sf.numel()
        out_sf[:n].copy_(sf.reshape(-1).view(torch.uint8))


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


CPU_MODULES = {"fp4_quantization_90": CpuFp4Module, "norm": CpuNormModule,
               "silu_and_mul": CpuActModule}
_flashinfer_build = JitSpecNvcc.build
_flashinfer_load = JitSpecNvcc.load
BUILT = []  # the spec names the stand-in built, in order


def _build(self, *args, **kwargs):
    if self.name not in CPU_MODULES:
        return _flashinfer_build(self, *args, **kwargs)
    BUILT.append(self.name)  # nothing to compile: the module is CPU Python


def _load(self, *args, **kwargs):
    if self.name not in CPU_MODULES:
        return _flashinfer_load(self, *args, **kwargs)
    cpu = CPU_MODULES[self.name]()
    # Opaque to Dynamo, as the built module's tvm_ffi functions are: a compile that reaches
    # the kernel call fails instead of tracing this reference into the graph.
    return types.SimpleNamespace(**{name: torch._dynamo.disable(getattr(cpu, name))
                                    for name in dir(cpu) if not name.startswith("_")})


JitSpecNvcc.build = _build
JitSpecNvcc.load = _load

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
COMPILING = [False]
PROCESSES = []


def _audit(event, args):
    if event == "subprocess.Popen" and COMPILING[0]:
        PROCESSES.append(" ".join(map(str, args[1]))[:300] if args[1] else str(args[0]))


sys.addaudithook(_audit)


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
        COMPILING[0] = True
        try:
            with enable_torch_compile_warmup():
                for n in reversed(SIZES):
                    outputs[n] = model(*values(name, n))
        finally:
            COMPILING[0] = False
    return model, outputs


def same(a, b):
    return all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def run_case(name, compiler, root):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    before = compilation_counter.clone()
    del PROCESSES[:]
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
        result["processes_while_compiling"] = list(PROCESSES)
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
