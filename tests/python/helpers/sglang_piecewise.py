"""Drives SGLang's piecewise CUDA graph start-up over SGLang's own model classes, on CPU
answering as SM120 (the seed's RTX PRO 6000) or SM100, and prints one JSON line. Shared by the
releases' runners, which hold what differs as data (`Release`): sglang059_runner.py (0.5.9,
`--enable-piecewise-cuda-graph`, the seed's release) and sglang0512_runner.py (0.5.12, where
the runner is on by default). Run by test_sglang059.py and test_sglang0512.py, with and without
dynafold's preload, each in its release's environment (scripts/lib/env.sh
`ensure_sglang_release_venv`).

    python sglang<release>_runner.py ARCH MODEL   # ARCH and MODEL: as the release lists them

The model is SGLang's `LlamaForCausalLM` (2 layers, tiny dims, random weights), with SGLang's
`ModelOptFp4Config` read from a ModelOpt NVFP4 checkpoint config (every projection is SGLang's
`ModelOptFp4LinearMethod`) or without one (bf16); attention is SGLang's `TorchNativeAttnBackend`
over its own `ReqToTokenPool` / `MHATokenToKVPool`. The start-up is SGLang's, unmodified:
`ModelRunner.init_piecewise_cuda_graphs` (collects the attention layers, builds
`PiecewiseCudaGraphRunner`), whose `__init__` installs the compiled forward
(`install_torch_compiled(..., fullgraph=True)`, `SGLangBackend`, compiler "eager", the flag's
default) and runs the compile warm-up once per capture size, largest first ("Compiling num
tokens"): that is where Dynamo traces the forward and SGLang splits and compiles it. Before it,
one eager forward stands for the decode CUDA graph runner, which runs the model eagerly on CUDA
before the piecewise runner starts (FlashInfer builds its fp4 module there).

The slice not run: `PiecewiseCudaGraphRunner.capture()` (CUDA graph capture needs a GPU). The
runner replaces it with a recorder of the sizes it was asked to capture; after it, each size's
forward is run the way capture's first (warm-up) pass runs it, through SGLang's
`CUDAPiecewiseBackend` inside `enable_piecewise_cuda_graph_compile()` (which calls the compiled
pieces directly), and compared with the eager forward.

GLM-5 whole (`glm5`, helpers/sglang_glm5.py): SGLang's `GlmMoeDsaForCausalLM` (2 layers, random
weights, the NVFP4 config) through the same `init_piecewise_cuda_graphs`, with the server
arguments 0.5.9 derives for it on Blackwell (`nsa` attention backend, FP8 KV cache, FlashMLA)
and SGLang's `NativeSparseAttnBackend` over its `NSATokenToKVPool`. No eager forward runs (its
DeepSeek sparse attention needs the DSA indexer's and FlashMLA's GPU kernels: deep_gemm's fp8
MQA logits, triton act_quant, FlashMLA), and its forward does not compile (with dynafold the
trace stops in SGLang's DSA indexer), so no output is compared; what Dynamo traced before it
stopped is recorded (`traced_ops`, an observer of Dynamo's graph building, not a stand-in).

GLM-5's MoE layer (`glm5-moe`): SGLang's `GlmMoeDsaForCausalLM` (2 layers, the second MoE, tiny
dims, random weights, the same NVFP4 config, `--moe-runner-backend flashinfer_cutlass`) is built
whole on CPU; the whole forward's trace stops in layer 0's DSA indexer, before any MoE layer,
and its attention cannot run eagerly here (above), so its MoE layer
(`DeepseekV2MoE`: router, grouped top-k, `FusedMoE` with `ModelOptNvFp4FusedMoEMethod`, an
NVFP4 shared expert) is compiled alone the way the runner compiles the model: inside
`enable_piecewise_cuda_graph()`, `install_torch_compiled(..., fullgraph=True)` with SGLang's
backend, one forward per capture size inside `enable_piecewise_cuda_graph_compile()` and
`set_forward_context` with the MoE layers by layer id, as the runner passes them.

Stand-ins, only where this machine has no GPU (named; nothing else of SGLang, FlashInfer, torch
or dynafold is replaced; each is a function of helpers/sglang_standins.py):
  1. `IPython.display`: a stub module (sglang/utils.py imports it; IPython is not installed).
  2. `sglang.srt.compilation.weak_ref_tensor`: raises at import without CUDA; its functions
     raise if called (only CUDA graph capture calls them).
  3. The GPU's answers: SGLang's `is_sm120_supported` / `is_sm100_supported` /
     `is_blackwell_supported` (sglang.srt.utils.common, read when modelopt_quant is imported)
     answer for the chosen GPU, and FlashInfer's `get_compute_capability` answers (12, 0) or
     (10, 0) for CPU tensors.
  4. FlashInfer's JIT build of the fp4 module (`JitSpec.build` / `.load` for the release's spec
     `fp4_quantization_120...` or `_100...` only): nothing is compiled and the load returns a
     CPU module whose `fp4_quantize` takes the built kernel's arguments (the release's list) and
     writes NVFP4 values and UE4M3 scales (swizzled 128x4 or linear layout) into the caller's
     buffers, opaque to Dynamo as the tvm_ffi function is. The JIT spec generator,
     `is_cuda_version_at_least` (through a fake nvcc answering 12.8) and `build_and_load` run
     as shipped.
  5. The CPU kernel of SGLang's `sglang::fp4_gemm` op (SGLang registers its ops for the CUDA key
     only; its body calls `flashinfer.mm_fp4`, a GPU GEMM): dequantizes both NVFP4 operands
     from their swizzled scales and multiplies, times alpha.
  6. The CPU dispatch key of SGLang's operators registered for the CUDA key only (the
     release's list: the split op `sglang::unified_attention_with_output`, and in 0.5.12
     `sglang::flashinfer_fp4_quantize`): a CPU kernel that calls SGLang's own, as registered for
     the CUDA key.
  7. `Tensor.cuda()` while the model is built and its weights processed
     (`ModelOptFp4LinearMethod.process_weights_after_loading` and the MoE method's
     `create_weights` move swizzled scales with `.cuda()`): the tensor stays on the CPU.
  8. `sgl_kernel` (SGLang's CUDA kernel package, not installed): a package with two modules.
     `sgl_kernel.kvcacheio` (hierarchical-cache transfer kernels, imported unconditionally by
     the model runner's imports through mem_cache/memory_pool_host.py): its functions raise
     if called. On SM100 only, `sgl_kernel.scaled_fp4_quant` (SM100's quantizer in SGLang
     0.5.9), allocating as sgl_kernel 0.3.21's Python does and calling its torch op
     `sgl_kernel::scaled_fp4_quant`, defined here with a CPU kernel (stand-in 4's quantizer)
     and a fake. On SM120 `sgl_kernel` has nothing else: `from sgl_kernel import X` fails as
     without it.
  9. `torch.cpu.graph_pool_handle` (the runner asks its device module for a CUDA graph memory
     pool): torch.cuda.graph_pool_handle, an id that needs no GPU to make.
  10. (glm5-moe) FlashInfer's `cutlass_fused_moe` as modelopt_quant.py holds it
     (`flashinfer_cutlass_fused_moe`): SGLang calls it eagerly inside its MoE operator, so the
     whole function stands in: NVFP4 activations and experts, SwiGLU, the top-k weighted sum,
     written into `output`.
  11. (glm5-moe) The CPU key of `sglang::moe_forward_piecewise_cuda_graph_impl`: a kernel that
     calls SGLang's own, registered for the CUDA key (as 6).
  12. (glm5) The GPU's answers, further: `torch.cuda.get_device_capability` answers (12, 0) or
     (10, 0) (0.5.9's ServerArgs derives GLM-5's NSA defaults from it; the NSA backend reads it).
  13. (glm5) The NSA backend's sgl_kernel modules, `sgl_kernel.flash_attn` (imported) and
     `sgl_kernel.flash_mla`: their attention kernels raise if called; FlashMLA's
     `get_mla_metadata` (its tile scheduler, a GPU kernel the backend calls in
     `init_forward_metadata` for its flashmla_kv decode) returns int32 zeros of its outputs'
     shapes, read by FlashMLA's kernels only.
  14. (glm5) The DSA indexer's platform dispatch: SGLang picks `Indexer.forward_cuda` when it
     finds CUDA at import, and the indexer has no CPU path; each indexer runs `forward_cuda`.
  15. (glm5) The DSA indexer's rotary embedding, as its CUDA path computes it: the CUDA kernel
     rotates a [tokens, rope_dim] key whatever its rank, the native path (the CPU's) assumes
     [tokens, heads, dim]; the native rotation runs on [tokens, 1, dim]. Reached only past the
     indexer's `.item()`, under survey mode (test_sglang059.py), as are 16-18.
  16. (glm5) `x.is_cuda` inside SGLang's Hadamard kernel wrappers (sglang/jit_kernel/
     hadamard.py, which raise for a tensor not on CUDA), as Dynamo answers it
     (`TensorVariable.method_attr_is_cuda`): True for a CPU tensor in that module's frames
     only, as for the GPU's tensor.
  17. (glm5) `torch.cuda.current_device` answers 0 (SGLang's JIT loader reads the GPU's
     architecture, `_get_cuda_arch_list`), registered with Dynamo as the real one is: folded
     into a constant, guarded.
  18. (glm5) tvm_ffi's build and load of SGLang's Hadamard JIT module, at the two calls that
     need the toolkit and the GPU: the ninja + nvcc build compiles nothing, and the C loader
     (`_ffi_api.ModuleLoadFromFile` / `ModuleGlobalsAdd`) returns a CPU module whose
     `hadamard_transform(x, out, scale)` writes what the kernel writes (the Walsh-Hadamard
     transform of each row, Sylvester order, times `scale`, in fp32, cast to `out`'s dtype),
     opaque to Dynamo as the C loader and tvm_ffi's functions are. SGLang's `load_jit`,
     tvm_ffi's `load_inline` and `load_module` run as shipped.
Stand-ins 1-4, 8 and 9 are installed below, before SGLang is imported; 5-7, 10 and 11 in
helpers/sglang_piecewise_startup.py, which imports it; 12-18 in helpers/sglang_glm5.py.
"""
import dataclasses
import sys
import time

STARTED = time.monotonic()

import sglang_standins as standins  # noqa: E402 (torch, after the clock starts)

CAPABILITY = {"sm120": (12, 0), "sm100": (10, 0)}


@dataclasses.dataclass(frozen=True)
class Release:
    """What differs between the SGLang releases driven here."""

    # The GPUs the CPU answers as.
    archs: tuple
    # MODEL on the command line -> (the case of sglang_piecewise_startup.CASES, NVFP4 or not).
    models: dict
    # The name of FlashInfer's fp4 JIT spec after fp4_quantization_<major><minor>.
    fp4_spec_suffix: str
    # The built fp4 module's `fp4_quantize` arguments, in the order FlashInfer passes them.
    fp4_kernel_args: tuple
    # ServerArgs that reach the piecewise runner, besides the defaults and the CPU's own.
    server_flags: dict
    # The compiled forward runs only inside `set_compiled(True)` (0.5.9), or whenever
    # `enable_piecewise_cuda_graph()` is active (0.5.12).
    set_compiled: bool
    # SGLang's operators registered for the CUDA key only, given a CPU kernel (stand-in 6).
    cuda_only_ops: tuple


def run(release):
    arch, model = sys.argv[1], sys.argv[2]
    if arch not in release.archs or model not in release.models:
        sys.exit(f"usage: ARCH MODEL, ARCH one of {release.archs}, MODEL one of "
                 f"{list(release.models)}")
    capability = CAPABILITY[arch]
    # -- stand-in 1: IPython.display
    standins.ipython_display()
    # -- stand-in 2: weak_ref_tensor
    standins.weak_ref_tensor("sglang.srt.compilation.weak_ref_tensor")
    # -- stand-in 9: the CUDA graph memory pool of the device module
    standins.graph_pool_handle()
    # -- stand-in 3: the GPU's answers, before SGLang's quantization module reads them
    standins.sglang_gpu_answers(arch)
    import flashinfer
    from flashinfer.jit.core import JitSpec

    standins.compute_capability(sys.modules[flashinfer.fp4_quantize.__module__], capability)
    # -- stand-in 4: FlashInfer's fp4 module
    spec = f"fp4_quantization_{capability[0]}{capability[1]}{release.fp4_spec_suffix}"
    built = standins.flashinfer_jit(
        JitSpec, {spec: lambda: standins.CpuFp4Module(release.fp4_kernel_args)})
    # -- stand-in 8: sgl_kernel
    standins.sgl_kernel(arch)
    # SGLang's own modules, only now.
    import sglang_piecewise_startup

    imported_s = time.monotonic() - STARTED
    sglang_piecewise_startup.main(release, arch, model, built, imported_s)
