"""GLM-5 whole (`glm5`): SGLang 0.5.9's `GlmMoeDsaForCausalLM` (2 layers, the second MoE, tiny
dims, random weights, a ModelOpt NVFP4 checkpoint config) through
`ModelRunner.init_piecewise_cuda_graphs`, with the server arguments 0.5.9 derives for it on
the GPU the CPU answers as. One of helpers/sglang_piecewise_startup.py's cases (see
helpers/sglang_piecewise.py for the start-up, the stand-ins and the slice not run).

What is 0.5.9's own here, unmodified:
  - the checkpoint's config.json (written to the working folder) read by SGLang's
    `ModelConfig`, and `ServerArgs._handle_model_specific_adjustments`, which for GLM-5 on
    Blackwell picks the `nsa` attention backend (DeepSeek sparse attention), page size 64, an
    FP8 (e4m3) KV cache and FlashMLA (`flashmla_auto` prefill, `flashmla_kv` decode), and forces
    MLA prefill (SGLANG_NSA_FORCE_MLA);
  - `ModelRunner.configure_kv_cache_dtype`, its `NSATokenToKVPool` (the KV cache dim from
    `calculate_mla_kv_cache_dim`) and `_get_attention_backend`, which builds
    `NativeSparseAttnBackend` from the registry and sets the prefill/decode backends globally;
  - the piecewise runner's compile warm-up: its own EXTEND batch, the NSA backend's
    `init_forward_metadata`, then the forward under `install_torch_compiled(fullgraph=True)`.

The config's model_type is `deepseek_v3`: 0.5.9's transformers pin (4.57.1) has no
`glm_moe_dsa`, and SGLang's model class reads the DeepSeek-V3 fields (GLM-5's own config
carries the same ones).

The slice not run besides capture: the eager forwards before the piecewise runner (the decode
CUDA graph runner's), which would need the DSA indexer's and FlashMLA's GPU kernels. What they
leave in the model that the compiled forward reads is set as they set it
(`after_eager_forwards`). No fp4 module is built before the trace: without dynafold Dynamo
traces into FlashInfer's JIT spec generator whether it is built or not; with dynafold it is
built when Dynamo first meets the quantizer. Nor is `post_load_weights` run (the
checkpoint loader's split of kv_b_proj into w_kc/w_vc, read only after the indexer).
"""
import json
import os

import torch

import sglang_standins as standins
from sglang_piecewise import CAPABILITY
from sglang_piecewise_startup import GLM5_CONFIG, GLM5_EXTRA, QUANT_CONFIG, build_model, init_parallel

# GLM-5's own DSA dims (DeepSeek V3.2's), which SGLang's FP8 NSA cache is laid out for: the
# indexer's head dim 128 (the pool asserts it), the latent rank 512 (four 128-wide FP8 scale
# blocks), rope 64; index_topk 2048.
GLM5_DSA = dict(kv_lora_rank=512, qk_rope_head_dim=64, index_head_dim=128, index_topk=2048)


def write_checkpoint_config(folder):
    """A GLM-5 NVFP4 checkpoint's config.json (no weights: the model gets random ones)."""
    os.makedirs(folder, exist_ok=True)
    config = {**GLM5_CONFIG, **GLM5_EXTRA, **GLM5_DSA, "model_type": "deepseek_v3",
              "quantization_config": QUANT_CONFIG}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


def derive_server_args(args, capability):
    """0.5.9's model-specific derivation, on a GPU answering `capability`."""
    # -- stand-in 12: the GPU's capability, as torch.cuda answers it
    standins.cuda_device_capability(capability)
    # As a user starts it: no attention backend, KV cache dtype or page size of their own.
    args.attention_backend = None
    from sglang.srt.server_args import ServerArgs

    ServerArgs._handle_model_specific_adjustments(args)
    from sglang.srt.environ import envs

    return {"attention_backend": args.attention_backend, "page_size": args.page_size,
            "kv_cache_dtype": args.kv_cache_dtype,
            "nsa_prefill_backend": args.nsa_prefill_backend,
            "nsa_decode_backend": args.nsa_decode_backend,
            "nsa_force_mla": bool(envs.SGLANG_NSA_FORCE_MLA.get())}


def model_runner(args, model_config, model):
    from sglang.srt.distributed import parallel_state
    from sglang.srt.mem_cache.memory_pool import NSATokenToKVPool, ReqToTokenPool
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    runner = object.__new__(ModelRunner)
    layers = model_config.num_hidden_layers
    runner.__dict__.update(
        server_args=args, model=model, device="cpu", gpu_id=0, dtype=torch.bfloat16,
        model_config=model_config, tp_group=parallel_state.get_tp_group(), tp_size=1,
        pp_size=1, dp_size=1, is_draft_worker=False, is_multimodal=False, is_hybrid_swa=False,
        is_generation=True, spec_algorithm=SpeculativeAlgorithm.NONE, page_size=args.page_size,
        start_layer=0, end_layer=layers, num_effective_layers=layers,
        req_to_token_pool=ReqToTokenPool(size=4, max_context_len=model_config.context_len,
                                         device="cpu", enable_memory_saver=False))
    runner.configure_kv_cache_dtype()
    runner.token_to_kv_pool = NSATokenToKVPool(
        4 * args.page_size, page_size=args.page_size, kv_lora_rank=model_config.kv_lora_rank,
        dtype=runner.kv_cache_dtype, qk_rope_head_dim=model_config.qk_rope_head_dim,
        layer_num=layers, device="cpu", index_head_dim=model_config.hf_config.index_head_dim,
        enable_memory_saver=False, kv_cache_dim=runner.calculate_mla_kv_cache_dim())
    runner.attn_backend = runner._get_attention_backend()
    return runner


def after_eager_forwards(model):
    """What the eager forwards before the piecewise runner (not run here) leave in the model,
    set as they set it: each DeepSeek attention's first `forward_prepare` assigns
    `attn_mha.kv_b_proj = kv_b_proj`, a module attribute Dynamo cannot assign while tracing
    (SGLang's own CPU graph runner runs one eager forward before compiling for that reason)."""
    for layer in model.model.layers:
        attn = layer.self_attn
        if attn.attn_mha.kv_b_proj is None:
            attn.attn_mha.kv_b_proj = attn.kv_b_proj


def glm5_case(release, arch, args, quantized, facts):
    """Returns the compile step, the sizes capture() was asked for and (no eager forward here)
    no outputs; what 0.5.9 derived and built goes into `facts`."""
    from sglang.srt.layers.moe import initialize_moe_config
    from sglang.srt.models.glm4_moe import GlmMoeDsaForCausalLM

    args.model_path = write_checkpoint_config(os.path.abspath("glm5-nvfp4"))
    facts["server_args"] = derived = derive_server_args(args, CAPABILITY[arch])
    model_config = args.get_model_config()
    initialize_moe_config(args)
    init_parallel(args, model_config.hf_config, model_config)
    model = build_model(GlmMoeDsaForCausalLM, model_config.hf_config, quantized)
    after_eager_forwards(model)
    # -- stand-in 14: the DSA indexers run their CUDA path
    derived["indexers"] = standins.indexer_forward_cuda(model)
    # -- stand-in 15: the DSA indexer's rotary embedding, with its CUDA path's shapes
    standins.indexer_rotary_on_cpu(model)
    # -- stand-in 13: the NSA backend's sgl_kernel modules (FlashMLA's scheduler metadata)
    standins.nsa_kernels()
    # -- stand-in 16: `x.is_cuda` inside SGLang's Hadamard kernel wrappers, as on the GPU
    standins.hadamard_is_cuda()
    # -- stand-in 17: the current CUDA device, which SGLang's JIT loader reads
    standins.cuda_current_device()
    # -- stand-in 18: the built Hadamard module (the indexer's rotate_activation)
    facts["hadamard_built"] = standins.tvm_ffi_jit(
        "sgl_kernel_jit_hadamard_", {"hadamard_transform": standins.hadamard_cpu})
    runner = model_runner(args, model_config, model)
    derived["attn_backend"] = type(runner.attn_backend).__name__
    derived["kv_pool"] = f"{type(runner.token_to_kv_pool).__name__} {runner.kv_cache_dtype}"
    captured = []
    from sglang.srt.model_executor import piecewise_cuda_graph_runner as pcg

    pcg.PiecewiseCudaGraphRunner.capture = lambda self: captured.extend(reversed(self.capture_num_tokens))

    def compile_step():
        runner.init_piecewise_cuda_graphs()
        assert runner.piecewise_cuda_graph_runner is not None, "SGLang declined piecewise graphs"

    return compile_step, captured, dict
