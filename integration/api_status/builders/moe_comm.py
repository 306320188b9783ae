"""Fused MoE: the NVFP4 experts as SGLang 0.5.23 calls them (trtllm-gen FP4 MoE, routed by
logits or by packed top-k ids; cutlass fused MoE), the calls and sizes of the fp4-layer
branch's tests/python/helpers/trace_fp4_layer.py (its hooks make these operators; without
them the table names the missing boundary)."""
import torch

M, H, I, E, TOP_K = 4, 256, 256, 8, 2
U8, F32, FP8, BF16 = torch.uint8, torch.float32, torch.float8_e4m3fn, torch.bfloat16


def _fp4_weights(t):
    g1_scale_c, g1_alphas, g2_alphas = (t(E, dtype=F32) for _ in range(3))
    return dict(
        hidden_states=t(M, H // 2, dtype=U8), hidden_states_scale=t(M, H // 16, dtype=FP8),
        gemm1_weights=t(E, 2 * I, H // 2, dtype=U8),
        gemm1_weights_scale=t(E, 2 * I, H // 16, dtype=FP8), gemm1_bias=None, gemm1_alpha=None,
        gemm1_beta=None, gemm1_clamp_limit=None, gemm2_weights=t(E, H, I // 2, dtype=U8),
        gemm2_weights_scale=t(E, H, I // 16, dtype=FP8), gemm2_bias=None,
        output1_scale_scalar=g1_scale_c, output1_scale_gate_scalar=g1_alphas,
        output2_scale_scalar=g2_alphas, per_token_scale=None, num_experts=E, top_k=TOP_K,
        n_group=0, topk_group=0, intermediate_size=I, local_expert_offset=0,
        local_num_experts=E, do_finalize=True, activation_type=3,  # Swiglu
        tune_max_num_tokens=4, enable_pdl=False)


def _trtllm_fp4(t, fi):
    weights = _fp4_weights(t)

    def moe(router_logits):
        output = torch.empty(M, H, dtype=BF16, device="cuda")
        return fi.trtllm_fp4_block_scale_moe(
            routing_logits=router_logits, routing_bias=None, routed_scaling_factor=None,
            routing_method_type=1, output=output, **weights)[0]  # Renormalize
    return moe, (t(M, E, dtype=F32),)


def _trtllm_fp4_routed(t, fi):
    weights = _fp4_weights(t)

    def moe(topk_ids):  # packed (expert id << 16 | bf16 weight)
        output = torch.empty(M, H, dtype=BF16, device="cuda")
        return fi.trtllm_fp4_block_scale_routed_moe(
            topk_ids=topk_ids, routing_bias=None, routed_scaling_factor=None,
            routing_method_type=1, output=output, **weights)[0]
    return moe, (t(M, TOP_K, dtype=torch.int32),)


def _cutlass_fp4(t, fi):
    from flashinfer import fused_moe
    topk_weights, topk_ids = t(M, TOP_K, dtype=F32), t(M, TOP_K, dtype=torch.int32)
    quant_scales = [t(1, dtype=F32), t(E, 2 * I, H // 16, dtype=torch.int32), t(E, dtype=F32),
                    t(1, dtype=F32), t(E, H, I // 16, dtype=torch.int32), t(E, dtype=F32)]
    fc1, fc2 = t(E, 2 * I, H // 16, dtype=torch.long), t(E, H, I // 16, dtype=torch.long)

    def moe(x):
        output = torch.empty(M, H, dtype=BF16, device="cuda")
        return fi.cutlass_fused_moe(
            output=output, input=x, token_selected_experts=topk_ids,
            token_final_scales=topk_weights, fc1_expert_weights=fc1, fc2_expert_weights=fc2,
            output_dtype=BF16, input_sf=None, quant_scales=quant_scales, swiglu_alpha=None,
            swiglu_beta=None, swiglu_limit=None, ep_size=1, ep_rank=0, tp_size=1, tp_rank=0,
            tune_max_num_tokens=4, activation_type=fused_moe.ActivationType.Swiglu,
            enable_alltoall=False, use_fused_finalize=True)[0]
    return moe, (t(M, H, dtype=BF16),)


def _topk_deepseek(t, fi):
    """DeepSeek-V3 routing: 256 experts in 8 groups, 4 groups kept, top 8."""
    from flashinfer import fused_moe

    def f(scores, bias, values, indices):
        fused_moe.fused_topk_deepseek(scores, bias, 8, 4, 8, 2.5, values, indices,
                                      launch_with_pdl=False)
        return values, indices
    return f, (t(M, 256, dtype=F32), t(256, dtype=F32), t(M, 8, dtype=F32),
               t(M, 8, dtype=torch.int32))


BUILDERS = {
    "trtllm_fp4_block_scale_moe": _trtllm_fp4,
    "trtllm_fp4_block_scale_routed_moe": _trtllm_fp4_routed,
    "cutlass_fused_moe": _cutlass_fp4,
    "fused_topk_deepseek": _topk_deepseek,
}
