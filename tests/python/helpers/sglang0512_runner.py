"""SGLang 0.5.12's default path: piecewise CUDA graphs are on by default on CUDA since 0.5.12
(`--disable-piecewise-cuda-graph` turns them off), driven by helpers/sglang_piecewise.py (the
start-up, the slice not run and the stand-ins are named there) over SGLang's own
`LlamaForCausalLM`, on CPU answering as SM120. Run by test_sglang0512.py in scripts/lib/env.sh's
0.5.12 environment (CPython 3.12, torch 2.11.0, FlashInfer 0.6.11.post1, sglang 0.5.12).

    python sglang0512_runner.py sm120 MODEL    # MODEL: fp4 (ModelOpt NVFP4) or bf16

What 0.5.12 changes from 0.5.9:
  - the piecewise runner is SGLang's default: the ServerArgs are the defaults
    (`disable_piecewise_cuda_graph=False`, compiler "eager") with the capture sizes set;
    `warmup_compile` compiles once per size, and the compiled forward is used whenever
    `enable_piecewise_cuda_graph()` is active (no `set_compiled` switch any more);
  - `fp4_quantize` is SGLang's own operator, `sglang::flashinfer_fp4_quantize`
    (fp4_utils.py, `register_custom_op_from_extern`), whose body calls FlashInfer's; on SM120 it
    asks for backend "cuda", FlashInfer 0.6.11's JIT module `fp4_quantization_120f`, whose
    `fp4_quantize` takes `is_global_scale_inversed` too;
  - SGLang registers that operator for the CUDA key only, like its attention op: stand-in 6
    gives both a CPU kernel that calls SGLang's own, as registered for CUDA.
  - MODEL bf16: the same model class without a quantization config (stand-ins 4, 5 and 7 are
    then never reached).
SM100 is not driven: there 0.5.12 asks FlashInfer's cute-dsl backend (nvidia-cutlass-dsl, not
in this environment).
"""
from sglang_piecewise import Release, run

RELEASE = Release(
    archs=("sm120",),
    models={"fp4": ("llama", True), "bf16": ("llama", False)},
    fp4_spec_suffix="f",
    fp4_kernel_args=("input", "global_scale", "out_val", "out_sf", "sf_vec_size", "sf_use_ue8m0",
                     "is_sf_swizzled_layout", "is_sf_8x4_layout", "is_global_scale_inversed",
                     "enable_pdl"),
    server_flags={},
    set_compiled=False,
    cuda_only_ops=("unified_attention_with_output", "flashinfer_fp4_quantize"),
)

run(RELEASE)
