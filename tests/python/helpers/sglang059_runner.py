"""SGLang 0.5.9, the seed's release: `--enable-piecewise-cuda-graph` (off by default) starting
SGLang's piecewise runner, driven by helpers/sglang_piecewise.py (the start-up, the slice not
run and the stand-ins are named there). Run by test_sglang059.py in scripts/lib/env.sh's
0.5.9 environment (CPython 3.12, torch 2.9.1, FlashInfer 0.6.3, sglang 0.5.9).

    python sglang059_runner.py ARCH MODEL    # ARCH: sm120 or sm100; MODEL: llama, glm5, glm5-moe

What is 0.5.9's own:
  - the runner is reached through `--enable-piecewise-cuda-graph`, and its compiled forward
    runs only inside `set_compiled(True)`;
  - on SM120 `ModelOptFp4LinearMethod.apply` calls FlashInfer's own `fp4_quantize` (the seed's
    path), whose JIT module is `fp4_quantization_120` with FlashInfer 0.6.3's arguments; on
    SM100 it calls sgl_kernel's `scaled_fp4_quant` (stand-in 8);
  - every model is NVFP4: SGLang's LlamaForCausalLM (`llama`), GLM-5's GlmMoeDsaForCausalLM
    whole with the server arguments 0.5.9 derives for it (`glm5`: nsa attention, FP8 KV
    cache, FlashMLA) and GLM-5's MoE layer alone (`glm5-moe`).
"""
from sglang_piecewise import Release, run

RELEASE = Release(
    archs=("sm120", "sm100"),
    models={"llama": ("llama", True), "glm5-moe": ("glm5-moe", True), "glm5": ("glm5", True)},
    fp4_spec_suffix="",
    fp4_kernel_args=("input", "global_scale", "out_val", "out_sf", "sf_vec_size", "sf_use_ue8m0",
                     "is_sf_swizzled_layout", "is_sf_8x4_layout", "enable_pdl"),
    server_flags={"enable_piecewise_cuda_graph": True},
    set_compiled=True,
    cuda_only_ops=("unified_attention_with_output",),
)

run(RELEASE)
