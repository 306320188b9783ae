"""The stand-ins SGLang's CPU runs share, one function each, named for what it stands in for:
only what this machine has no GPU (or no GPU package) for. Which run uses which, and under
what number, is in each runner's docstring (helpers/sglang_compile.py for 0.5.23's compile
code, helpers/sglang_piecewise.py for 0.5.9's and 0.5.12's piecewise runner).
"""
import contextlib
import sys
import types

import torch

import nvfp4

# torch.library registrations last as long as their Library object: (namespace, kind) -> it.
_LIBRARIES = {}


def _library(namespace, kind):
    if (namespace, kind) not in _LIBRARIES:
        _LIBRARIES[namespace, kind] = torch.library.Library(namespace, kind)
    return _LIBRARIES[namespace, kind]


def ipython_display():
    """`IPython.display` (sglang/utils.py imports `HTML` and `display`; IPython, a heavy
    dependency the paths driven here never use, is not installed)."""
    ipython = types.ModuleType("IPython")
    display = types.ModuleType("IPython.display")
    display.HTML = type("HTML", (), {"__init__": lambda self, *a, **k: None})
    display.display = lambda *args, **kwargs: None
    ipython.display = display
    sys.modules["IPython"] = ipython
    sys.modules["IPython.display"] = display


def weak_ref_tensor(module_name):
    """SGLang's weak_ref_tensor module (raises at import without CUDA): its functions raise if
    called (only CUDA graph capture calls them)."""
    weak = types.ModuleType(module_name)

    def no_capture(*args, **kwargs):
        raise RuntimeError("weak_ref_tensor stand-in called: SGLang tried to capture a CUDA graph on CPU")

    weak.weak_ref_tensor = no_capture
    weak.weak_ref_tensors = no_capture
    sys.modules[module_name] = weak


def graph_pool_handle():
    """`torch.cpu.graph_pool_handle` (SGLang's runner asks its device module for a CUDA graph
    memory pool): torch.cuda's, an id that needs no GPU to make."""
    torch.cpu.graph_pool_handle = torch.cuda.graph_pool_handle


def sglang_gpu_answers(arch):
    """SGLang's `is_sm120_supported` / `is_sm100_supported` / `is_blackwell_supported` /
    `is_blackwell` answer for the chosen GPU; called before SGLang's quantization module reads
    them at import."""
    import sglang.srt.utils.common as sglang_common

    answers = {"is_sm120_supported": arch == "sm120", "is_sm100_supported": arch == "sm100",
               "is_blackwell_supported": True, "is_blackwell": True}
    for name, value in answers.items():
        setattr(sglang_common, name, (lambda v: lambda *a, **k: v)(value))
        if hasattr(sys.modules["sglang.srt.utils"], name):
            setattr(sys.modules["sglang.srt.utils"], name, getattr(sglang_common, name))


def cuda_device_capability(capability):
    """`torch.cuda.get_device_capability` answers `capability` (this machine has no GPU):
    SGLang 0.5.9's ServerArgs derives GLM-5's NSA defaults from it (FP8 KV cache from SM100
    on) and its NSA attention backend reads it when built."""
    torch.cuda.get_device_capability = lambda device=None: capability


def compute_capability(fp4_module, capability):
    """FlashInfer's fp4 module's `get_compute_capability`, which accepts CUDA devices only,
    answers `capability` for CPU devices and defers to FlashInfer's own otherwise."""
    flashinfer_capability = fp4_module.get_compute_capability

    def answer(device):
        if device.type == "cpu":
            return capability
        return flashinfer_capability(device)

    fp4_module.get_compute_capability = answer


class CpuFp4Module:
    """The built fp4 module's `fp4_quantize`, taking the kernel's arguments in the order the
    FlashInfer release passes them (`params`, names as in FlashInfer's C++): NVFP4 values and
    UE4M3 scales (the swizzled 128x4 or the linear layout) written into the caller's buffers."""

    def __init__(self, params):
        self._params = params

    def fp4_quantize(self, *args):
        if len(args) != len(self._params):
            raise TypeError(f"fp4_quantize takes {len(self._params)} arguments "
                            f"({', '.join(self._params)}), got {len(args)}")
        a = dict(zip(self._params, args))
        if a["sf_vec_size"] != 16 or a["sf_use_ue8m0"] or a["is_sf_8x4_layout"]:
            raise NotImplementedError("CPU stand-in: NVFP4 with 128x4 or linear scales only")
        scale = a["global_scale"]
        if a.get("is_global_scale_inversed"):
            scale = 1.0 / scale.float()
        x, out_val, out_sf = a["input"], a["out_val"], a["out_sf"]
        packed, sf = nvfp4.quantize(x.reshape(-1, x.shape[-1]), scale)
        out_val.copy_(packed.reshape(out_val.shape))
        sf_bytes = sf.view(torch.uint8)
        if a["is_sf_swizzled_layout"]:
            out_sf.zero_()
            out_sf[nvfp4.swizzle_offsets(*sf.shape).reshape(-1)] = sf_bytes.reshape(-1)
        else:
            out_sf[:sf_bytes.numel()].copy_(sf_bytes.reshape(-1))


def flashinfer_jit(spec_class, cpu_modules):
    """FlashInfer's JIT build and load (`spec_class.build`: ninja + nvcc; `.load`:
    tvm_ffi.load_module) for the specs named in `cpu_modules` only (name -> a factory of the
    CPU module): the build compiles nothing, the load returns the CPU module's public functions,
    opaque to Dynamo as the built module's tvm_ffi functions are (a compile that reaches the
    kernel call fails instead of tracing the CPU code into the graph). Every other spec, and
    everything around the two calls (the spec generators, `build_and_load`), is FlashInfer's
    own. Returns the list of spec names built, in order."""
    flashinfer_build, flashinfer_load = spec_class.build, spec_class.load
    built = []

    def build(self, *args, **kwargs):
        if self.name not in cpu_modules:
            return flashinfer_build(self, *args, **kwargs)
        built.append(self.name)  # nothing to compile: the module is CPU Python

    def load(self, *args, **kwargs):
        if self.name not in cpu_modules:
            return flashinfer_load(self, *args, **kwargs)
        cpu = cpu_modules[self.name]()
        return types.SimpleNamespace(**{name: torch._dynamo.disable(getattr(cpu, name))
                                        for name in dir(cpu) if not name.startswith("_")})

    spec_class.build, spec_class.load = build, load
    return built


def sgl_kernel(arch):
    """`sgl_kernel` (SGLang's CUDA kernel package, not installed): a package with
    `sgl_kernel.kvcacheio` (hierarchical-cache transfer kernels, imported by the model runner's
    imports), whose functions raise if called, and on SM100 `scaled_fp4_quant`, SM100's
    quantizer in SGLang 0.5.9: it allocates as sgl_kernel 0.3.21's Python does and calls its
    torch op `sgl_kernel::scaled_fp4_quant`, defined here with a CPU kernel (the NVFP4
    reference) and a fake. Elsewhere `from sgl_kernel import X` fails as without it."""
    package = types.ModuleType("sgl_kernel")
    package.__path__ = []
    kvcacheio = types.ModuleType("sgl_kernel.kvcacheio")

    def kvcacheio_attr(name):
        if name.startswith("__"):
            raise AttributeError(name)

        def transfer(*args, **kwargs):
            raise RuntimeError(f"sgl_kernel.kvcacheio.{name} stand-in called (hierarchical cache)")
        return transfer

    kvcacheio.__getattr__ = kvcacheio_attr
    package.kvcacheio = kvcacheio
    sys.modules["sgl_kernel"] = package
    sys.modules["sgl_kernel.kvcacheio"] = kvcacheio
    if arch == "sm100":
        package.scaled_fp4_quant = _scaled_fp4_quant()


def _scaled_fp4_quant():
    lib = _library("sgl_kernel", "FRAGMENT")
    lib.define("scaled_fp4_quant(Tensor(a!) output, Tensor input, Tensor(b!) output_scale, "
               "Tensor input_global_scale) -> ()")

    def cpu_kernel(output, input, output_scale, input_global_scale):
        packed, sf = nvfp4.quantize(input, input_global_scale)
        output.copy_(packed)
        flat = output_scale.view(torch.uint8).reshape(-1)
        flat.zero_()
        flat[nvfp4.swizzle_offsets(*sf.shape).reshape(-1)] = sf.view(torch.uint8).reshape(-1)

    lib.impl("scaled_fp4_quant", cpu_kernel, "CPU")
    lib._register_fake("scaled_fp4_quant", lambda output, input, output_scale, scale: None)

    def scaled_fp4_quant(input, input_global_scale):
        m, n = input.reshape(-1, input.shape[-1]).shape
        input = input.reshape(m, n)
        output = torch.empty((m, n // 2), device=input.device, dtype=torch.uint8)
        scale_n = nvfp4.round_up(n // 16, 4)
        output_scale = torch.empty((nvfp4.round_up(m, 128), scale_n // 4), device=input.device,
                                   dtype=torch.int32)
        torch.ops.sgl_kernel.scaled_fp4_quant.default(output, input, output_scale,
                                                      input_global_scale)
        return output, output_scale.view(torch.float8_e4m3fn)

    scaled_fp4_quant.__module__ = "sgl_kernel"  # it stands in for sgl_kernel's own
    return scaled_fp4_quant


def fp4_gemm_cpu(input, weight, input_sf, weight_sf, alpha, out_dtype, out_features):
    """sglang::fp4_gemm(x_fp4 [m, k/2], w.T [k/2, n], x scales, w scales.T, alpha, dtype, n):
    both NVFP4 operands dequantized from their swizzled scales and multiplied, times alpha."""
    x = nvfp4.dequantize(input, input_sf)
    w = nvfp4.dequantize(weight.t(), weight_sf.t())
    return ((x @ w.t()) * alpha.float()).to(out_dtype)


def sglang_fp4_gemm():
    """The CPU kernel of SGLang's `sglang::fp4_gemm` op (registered for the CUDA key only; its
    body calls `flashinfer.mm_fp4`, a GPU GEMM): `fp4_gemm_cpu`."""
    _library("sglang", "IMPL").impl("fp4_gemm", fp4_gemm_cpu, "CPU")


def sglang_cuda_kernel_on_cpu(name):
    """The CPU dispatch key of SGLang's operator `sglang::<name>`, which SGLang registers for
    the CUDA key only: a kernel that calls SGLang's own function, as registered for CUDA."""
    op = getattr(torch.ops.sglang, name).default

    def cpu_kernel(*args, **kwargs):
        return op._op_dk(torch._C.DispatchKey.CUDA, *args, **kwargs)

    _library("sglang", "IMPL").impl(name, cpu_kernel, "CPU")


@contextlib.contextmanager
def cuda_stays_on_cpu():
    """`Tensor.cuda()` returns the tensor itself (SGLang moves swizzled scales with `.cuda()`
    while it builds a model and processes its weights): the tensor stays on the CPU."""
    cuda = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.Tensor.cuda = cuda


def cutlass_fused_moe_cpu(output, input, token_selected_experts, token_final_scales,
                          fc1_expert_weights, fc2_expert_weights, output_dtype, input_sf,
                          quant_scales, **kwargs):
    """FlashInfer's cutlass_fused_moe as SGLang's ModelOptNvFp4FusedMoEMethod.apply calls it
    (inside SGLang's MoE operator, eagerly): NVFP4 activations and experts, SwiGLU, the top-k
    weighted sum, written into `output`."""
    a1_scale, w1_scales, g1_alphas, a2_scale, w2_scales, g2_alphas = quant_scales
    w1, w2 = fc1_expert_weights.view(torch.uint8), fc2_expert_weights.view(torch.uint8)

    def activations(x, scale):
        packed, sf = nvfp4.quantize(x, scale)
        return (nvfp4.values(packed).reshape(x.shape[0], -1, 16) * sf.float().unsqueeze(-1)
                ).reshape(x.shape) / scale.float()

    out = torch.zeros(input.shape[0], w2.shape[1], dtype=torch.float32)
    for e in range(w1.shape[0]):
        rows, slots = (token_selected_experts == e).nonzero(as_tuple=True)
        if rows.numel():
            h = activations(input[rows].float(), a1_scale.reshape(-1)[0]) @ nvfp4.dequantize(
                w1[e], w1_scales.view(torch.uint8)[e]).t() * g1_alphas[e].float()
            half = h.shape[1] // 2
            act = torch.nn.functional.silu(h[:, half:]) * h[:, :half]
            y = activations(act, a2_scale.reshape(-1)[0]) @ nvfp4.dequantize(
                w2[e], w2_scales.view(torch.uint8)[e]).t() * g2_alphas[e].float()
            out.index_add_(0, rows, y * token_final_scales[rows, slots].float().unsqueeze(-1))
    output.copy_(out.to(output.dtype))
    return [output]


def nsa_kernels():
    """The GPU kernel modules of sgl_kernel that SGLang's NSA attention backend imports
    (`sgl_kernel.flash_attn` at import; FlashMLA's `sgl_kernel.flash_mla` when it runs). One is
    called before a forward: `flash_mla.get_mla_metadata` (FlashMLA's tile scheduler, asked for
    at every `init_forward_metadata` when the decode backend is flashmla_kv), which returns
    int32 zeros of its outputs' shapes, the scheduler's [parts, 8] (one part) and the splits'
    [batch + 1], read by FlashMLA's kernels only. The attention kernels themselves raise if
    called. Needs `sgl_kernel` (stand-in 8) in place."""

    def raising(module, name):
        def kernel(*args, **kwargs):
            raise RuntimeError(f"sgl_kernel.{module}.{name} stand-in called (a GPU kernel)")
        return kernel

    def get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, num_heads_q=None,
                         is_fp8_kvcache=False, topk=None):
        return (torch.zeros((1, 8), dtype=torch.int32, device=cache_seqlens.device),
                torch.zeros((cache_seqlens.shape[0] + 1,), dtype=torch.int32,
                            device=cache_seqlens.device))

    kernels = {"flash_attn": ("flash_attn_varlen_func", "flash_attn_with_kvcache"),
               "flash_mla": ("flash_mla_with_kvcache", "flash_mla_sparse_fwd")}
    for module, names in kernels.items():
        stand_in = types.ModuleType(f"sgl_kernel.{module}")
        for name in names:
            setattr(stand_in, name, raising(module, name))
        setattr(sys.modules["sgl_kernel"], module, stand_in)
        sys.modules[f"sgl_kernel.{module}"] = stand_in
    sys.modules["sgl_kernel.flash_mla"].get_mla_metadata = get_mla_metadata


def indexer_forward_cuda(model):
    """The DSA indexer's platform dispatch: SGLang's `MultiPlatformOp` picks `forward_cuda` when
    it finds CUDA at import, and the `Indexer` has no CPU path (its `forward_native` raises
    NotImplementedError). Each Indexer of `model` runs its own `forward_cuda`, as on the GPU.
    Returns how many there are."""
    from sglang.srt.layers.attention.nsa.nsa_indexer import Indexer

    indexers = [m for m in model.modules() if isinstance(m, Indexer)]
    for indexer in indexers:
        indexer._forward_method = indexer.forward_cuda
    return len(indexers)


def indexer_rotary_on_cpu(model):
    """The DSA indexer's rotary embedding as its CUDA path computes it: on the GPU SGLang's
    `forward_cuda` rotates a key of shape [tokens, rope_dim] in place with a kernel, whatever
    its rank; its native path, the only one on a CPU, assumes [tokens, heads, dim] and
    broadcasts a 2-D key to 3-D. The stand-in runs the native rotation on [tokens, 1, dim] and
    gives the shapes back. Returns how many it replaced."""
    from sglang.srt.layers.attention.nsa.nsa_indexer import Indexer

    count = 0
    for indexer in (m for m in model.modules() if isinstance(m, Indexer)):
        rope = indexer.rotary_emb

        def rotate(positions, query, key, offsets=None, rope=rope):
            q, k = rope.forward_native(positions, query.unsqueeze(-2), key.unsqueeze(-2),
                                       offsets)
            return q.squeeze(-2), k.squeeze(-2)

        rope._forward_method = rotate
        count += 1
    return count


def hadamard_is_cuda():
    """`x.is_cuda` as Dynamo answers it inside SGLang's Hadamard JIT kernel wrappers
    (sglang/jit_kernel/hadamard.py, which refuse a tensor that is not on CUDA): True for a CPU
    tensor there, as for the GPU's tensor; everywhere else Dynamo's own answer. Dynamo answers
    the attribute from the tensor's device (`TensorVariable.method_attr_is_cuda`), never
    through Python, so the answer is given there, for that module's frames only. An eager
    call still refuses the CPU tensor (the GLM-5 runs make none: they reach these wrappers only
    in frames Dynamo compiles)."""
    from torch._dynamo.variables.constant import ConstantVariable
    from torch._dynamo.variables.tensor import TensorVariable

    dynamo_is_cuda = TensorVariable.method_attr_is_cuda

    def is_cuda(self, tx):
        if (tx.f_globals.get("__name__") == "sglang.jit_kernel.hadamard"
                and self.device is not None and self.device.type == "cpu"):
            return ConstantVariable.create(True)
        return dynamo_is_cuda(self, tx)

    TensorVariable.method_attr_is_cuda = is_cuda


def cuda_current_device():
    """`torch.cuda.current_device` answers device 0 (SGLang's JIT loader reads the GPU's
    architecture from it, `_get_cuda_arch_list`; without a GPU it raises). Dynamo folds the
    real function into a constant, guarded on its answer; the stand-in is registered with it
    the same way, so a trace meets it as it meets the real one."""
    from torch._dynamo.variables import torch as dynamo_torch

    def current_device():
        return 0

    torch.cuda.current_device = current_device
    dynamo_torch.constant_fold_functions[current_device] = None
    dynamo_torch.constant_fold_functions_need_guards[current_device] = None


def hadamard_cpu(x, out, scale):
    """The built Hadamard module's `hadamard_transform(x, out, scale)` (SGLang's port of
    fast-hadamard-transform): `out` = the Walsh-Hadamard transform of each row of `x`, in
    Sylvester (natural) order, times `scale`, computed in fp32 and written in `out`'s dtype."""
    dim = x.shape[-1]
    if dim & (dim - 1):
        raise NotImplementedError("CPU stand-in: a power-of-2 width only")
    y = x.float().reshape(-1, dim)
    h = 1
    while h < dim:
        # Each block of 2h: (a, b) -> (a + b, a - b), a the first half, b the second.
        y = y.reshape(y.shape[0], dim // (2 * h), 2, h)
        y = torch.stack((y[:, :, 0] + y[:, :, 1], y[:, :, 0] - y[:, :, 1]), dim=2)
        h *= 2
    out.copy_((y.reshape(out.shape) * scale).to(out.dtype))


def tvm_ffi_jit(prefix, functions):
    """tvm_ffi's build and load of the JIT modules whose name starts with `prefix`, at the two
    calls that need the toolkit and the GPU: the ninja + nvcc build
    (`tvm_ffi.cpp.extension.build_ninja`) compiles nothing, and the C loader tvm_ffi's
    `load_module` calls (`_ffi_api.ModuleLoadFromFile`, then `ModuleGlobalsAdd`) returns
    `functions` (export name -> a CPU function). The loader and the functions are opaque to
    Dynamo, as the C loader and the built module's tvm_ffi functions are. Everything above
    (SGLang's `load_jit`, tvm_ffi's `load_inline` and `load_module`: the source hash, the build
    folder, build.ninja) runs as shipped. Returns the list of module folders built, in order."""
    import os

    from tvm_ffi import _ffi_api
    from tvm_ffi.cpp import extension

    ffi_build = extension.build_ninja
    ffi_load, ffi_keep = _ffi_api.ModuleLoadFromFile, _ffi_api.ModuleGlobalsAdd
    module = types.SimpleNamespace(**{name: torch._dynamo.disable(fn)
                                      for name, fn in functions.items()})
    built = []

    def build_ninja(build_dir, *args, **kwargs):
        if not os.path.basename(build_dir).startswith(prefix):
            return ffi_build(build_dir, *args, **kwargs)
        built.append(os.path.basename(build_dir))  # nothing to compile: the module is CPU Python

    @torch._dynamo.disable
    def load_from_file(path, *args):
        if not os.path.basename(os.path.dirname(path)).startswith(prefix):
            return ffi_load(path, *args)
        return module

    @torch._dynamo.disable
    def keep_alive(mod, *args):
        if mod is not module:
            return ffi_keep(mod, *args)

    extension.build_ninja = build_ninja
    _ffi_api.ModuleLoadFromFile, _ffi_api.ModuleGlobalsAdd = load_from_file, keep_alive
    return built
