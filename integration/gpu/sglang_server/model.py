"""Makes the small random-weight models SGLang serves on the GPU machine (issue 37), with no
network and no tokenizer (the server runs with --skip-tokenizer-init and is sent token ids):
    python3 model.py OUT_DIR
writes OUT_DIR/llama-bf16 and OUT_DIR/qwen3-fp8-block, of the same shapes and seed.

The FP8 one is a block-wise FP8 checkpoint as DeepSeek and Qwen ship them (`quant_method: fp8`,
`weight_block_size: [128, 128]`, dynamic activation scales): it is what makes SGLang 0.5.12 on
SM90 call FlashInfer inside its piecewise-compiled region, through `--fp8-gemm-backend
flashinfer_deepgemm` (`fp8_utils.flashinfer_deepgemm_w8a8_block_fp8_linear_with_fallback` calls
`flashinfer.gemm.fp8_blockscale_gemm_sm90`, not wrapped in a custom op). Its shapes keep every
linear layer on that kernel (N % 64 == 0, K % 128 == 0), not on the Triton fallback. It is a
Qwen3 (a Llama with per-head q/k norms): SGLang 0.5.12's LlamaForCausalLM renames
`weight_scale_inv` to `weight_scale` while loading (models/llama.py), which block-wise FP8 layers
do not have, so it cannot load such a checkpoint; Qwen3ForCausalLM can.

Weights are written as HF Llama names in one safetensors file; 4 query heads per KV head make
SGLang's FlashInfer decode use tensor cores (`should_use_tensor_core`), so the decode and paged
prefill share one JIT module and the JIT builds stay few."""
import json
import os
import sys

import torch
from safetensors.torch import save_file

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "intermediate_size": 5632, "num_hidden_layers": 4, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 32000,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2,
}
FP8_QUANT = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
             "weight_block_size": [128, 128]}
BLOCK = 128
FP8_MAX = torch.finfo(torch.float8_e4m3fn).max


def weights(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d

    def rand(*shape, std=0.02):
        return (torch.randn(*shape, generator=g) * std).to(torch.bfloat16)

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    out = {"model.embed_tokens.weight": rand(v, h), "model.norm.weight": ones(h),
           "lm_head.weight": rand(v, h)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out.update({
            p + "self_attn.q_proj.weight": rand(q, h), p + "self_attn.k_proj.weight": rand(kv, h),
            p + "self_attn.v_proj.weight": rand(kv, h), p + "self_attn.o_proj.weight": rand(h, q),
            p + "mlp.gate_proj.weight": rand(i, h), p + "mlp.up_proj.weight": rand(i, h),
            p + "mlp.down_proj.weight": rand(h, i),
            p + "input_layernorm.weight": ones(h), p + "post_attention_layernorm.weight": ones(h),
        })
    return out


def block_fp8(w):
    """(N, K) bf16 -> (N, K) float8_e4m3fn and (N/128, K/128) float32 `weight_scale_inv`, the
    per-block dequantisation factor: w ~= w_fp8 * scale over each 128 x 128 block."""
    n, k = w.shape
    blocks = w.float().reshape(n // BLOCK, BLOCK, k // BLOCK, BLOCK)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / FP8_MAX
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(n, k), scale.contiguous()


def write(path, cfg, tensors):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)
    save_file({k: t.contiguous() for k, t in tensors.items()},
              os.path.join(path, "model.safetensors"))


def main(out):
    w = weights(CONFIG)
    write(os.path.join(out, "llama-bf16"), CONFIG, w)
    qwen3 = dict(CONFIG, architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                 attention_bias=False, quantization_config=FP8_QUANT)
    for n in range(CONFIG["num_hidden_layers"]):
        for norm in ("q_norm", "k_norm"):
            w[f"model.layers.{n}.self_attn.{norm}.weight"] = torch.ones(
                CONFIG["head_dim"], dtype=torch.bfloat16)
    quantized = {}
    for name, t in w.items():
        if name.endswith("_proj.weight"):
            quantized[name], quantized[name + "_scale_inv"] = block_fp8(t)
        else:
            quantized[name] = t
    write(os.path.join(out, "qwen3-fp8-block"), qwen3, quantized)
    print(f"models in {out}: llama-bf16, qwen3-fp8-block")


if __name__ == "__main__":
    main(sys.argv[1])
