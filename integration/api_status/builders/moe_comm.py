"""Fused MoE: the NVFP4 experts as SGLang 0.5.23 calls them (trtllm-gen FP4 MoE, routed by
logits or by packed top-k ids; cutlass fused MoE), the calls and sizes of the fp4-layer
branch's tests/python/helpers/trace_fp4_layer.py (its hooks make these operators; without
them the table names the missing boundary)."""
import inspect

import torch

from . import fit

M, H, I, E, TOP_K = 4, 256, 256, 8, 2  # noqa: E741  (I: intermediate size, as MoE kernels name it)
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
    fn = fi.trtllm_fp4_block_scale_moe
    kwargs = fit.accepted(fn, dict(routing_bias=None, routed_scaling_factor=None,
                                   routing_method_type=1, **_fp4_weights(t)))  # Renormalize
    given = fit.takes(fn, "output")

    def moe(router_logits):
        extra = {"output": torch.empty(M, H, dtype=BF16, device="cuda")} if given else {}
        return fit.first(fn(routing_logits=router_logits, **kwargs, **extra))
    return moe, (t(M, E, dtype=F32),)


def _trtllm_fp4_routed(t, fi):
    fn = fi.trtllm_fp4_block_scale_routed_moe
    kwargs = fit.accepted(fn, dict(routing_bias=None, routed_scaling_factor=None,
                                   routing_method_type=1, **_fp4_weights(t)))
    given = fit.takes(fn, "output")

    def moe(topk_ids):  # packed (expert id << 16 | bf16 weight)
        extra = {"output": torch.empty(M, H, dtype=BF16, device="cuda")} if given else {}
        return fit.first(fn(topk_ids=topk_ids, **kwargs, **extra))
    return moe, (t(M, TOP_K, dtype=torch.int32),)


def _cutlass_fp4(t, fi):
    from flashinfer import fused_moe
    topk_weights, topk_ids = t(M, TOP_K, dtype=F32), t(M, TOP_K, dtype=torch.int32)
    quant_scales = [t(1, dtype=F32), t(E, 2 * I, H // 16, dtype=torch.int32), t(E, dtype=F32),
                    t(1, dtype=F32), t(E, H, I // 16, dtype=torch.int32), t(E, dtype=F32)]
    fc1, fc2 = t(E, 2 * I, H // 16, dtype=torch.long), t(E, H, I // 16, dtype=torch.long)

    fn = fi.cutlass_fused_moe
    # use_fused_finalize: 0.6.12 on; older releases finalize as it asks anyway.
    kwargs = fit.accepted(fn, dict(
        token_selected_experts=topk_ids, token_final_scales=topk_weights,
        fc1_expert_weights=fc1, fc2_expert_weights=fc2, output_dtype=BF16, input_sf=None,
        quant_scales=quant_scales, swiglu_alpha=None, swiglu_beta=None, swiglu_limit=None,
        ep_size=1, ep_rank=0, tp_size=1, tp_rank=0, tune_max_num_tokens=4,
        activation_type=fused_moe.ActivationType.Swiglu, enable_alltoall=False,
        use_fused_finalize=True))

    def moe(x):
        output = torch.empty(M, H, dtype=BF16, device="cuda")
        return fit.first(fn(output=output, input=x, **kwargs))
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


# The trtllm-gen MoE family: one call per op, routed from logits (Renormalize, as Qwen3's
# SGLang layer) or by packed top-k ids (expert id << 16 | bf16 weight), output allocated by
# the caller as SGLang's *_out wrappers do. Only the precision's weights differ.
I32 = torch.int32


def _routing(t, routed):
    """The routing arguments: (name, tensor) for logits or packed top-k ids."""
    return ("topk_ids", t(M, TOP_K, dtype=I32)) if routed else \
        ("routing_logits", t(M, E, dtype=BF16))


def _common():
    return dict(num_experts=E, top_k=TOP_K, n_group=None, topk_group=None,
                intermediate_size=I, local_expert_offset=0, local_num_experts=E,
                routed_scaling_factor=None, routing_method_type=1, enable_pdl=False,
                tune_max_num_tokens=4, routing_bias=None)  # no bias: Qwen3's router


def _bf16_weights(t):
    # BlockMajorK: [K / 64, Mn, 64] per expert (128-byte blocks of bf16)
    return dict(hidden_states=t(M, H, dtype=BF16), gemm1_weights=t(E, H // 64, 2 * I, 64),
                gemm2_weights=t(E, I // 64, H, 64), use_shuffled_weight=True,
                weight_layout=2)


def _fp8_block_weights(t):
    # DeepSeek FP8: 128x128 weight blocks, per-token 128-wide activation blocks
    return dict(hidden_states=t(M, H, dtype=FP8), hidden_states_scale=t(H // 128, M, dtype=F32),
                gemm1_weights=t(E, 2 * I, H, dtype=FP8),
                gemm1_weights_scale=t(E, 2 * I // 128, H // 128, dtype=F32),
                gemm2_weights=t(E, H, I, dtype=FP8),
                gemm2_weights_scale=t(E, H // 128, I // 128, dtype=F32),
                use_shuffled_weight=False, weight_layout=0)


def _fp8_block_shuffled(t):
    # Prims-TS's FP8 block-scale path takes the weights shuffled (prims_ts/moe/support.py:
    # "expects shuffled weights"), as a server preparing them for it does
    return {**_fp8_block_weights(t), "use_shuffled_weight": True}


def _fp8_tensor_weights(t):
    # per-tensor FP8 (Llama-4 style checkpoints): per-expert output scales
    return dict(hidden_states=t(M, H, dtype=FP8), gemm1_weights=t(E, 2 * I, H, dtype=FP8),
                output1_scales_scalar=t(E, dtype=F32), output1_scales_gate_scalar=t(E, dtype=F32),
                gemm2_weights=t(E, H, I, dtype=FP8), output2_scales_scalar=t(E, dtype=F32),
                use_routing_scales_on_input=False)


def _fp8_channel_weights(t):
    # per-token activation scales, per-channel weight scales
    return dict(hidden_states=t(M, H, dtype=FP8), hidden_states_scale=t(M, 1, dtype=F32),
                gemm1_weights=t(E, 2 * I, H, dtype=FP8),
                gemm1_per_channel_weight_scale=t(E, 2 * I, dtype=F32),
                output1_scale_scalar=t(E, dtype=F32), output1_scale_gate_scalar=t(E, dtype=F32),
                gemm2_weights=t(E, H, I, dtype=FP8),
                gemm2_per_channel_weight_scale=t(E, H, dtype=F32),
                output2_scale_scalar=t(E, dtype=F32), use_routing_scales_on_input=False)


def _mxint4_weights(t):
    # W4A16: packed int4 weights, bf16 scales per 32 along K
    return dict(hidden_states=t(M, H, dtype=BF16), gemm1_weights=t(E, 2 * I, H // 2, dtype=U8),
                gemm1_weights_scale=t(E, 2 * I, H // 32, dtype=BF16), gemm1_alpha=None,
                gemm1_beta=None, gemm1_clamp_limit=None,
                gemm2_weights=t(E, H, I // 2, dtype=U8),
                gemm2_weights_scale=t(E, H, I // 32, dtype=BF16))


def _trtllm(op, weights, routed, output=True):
    """A builder for the MoE `op` (flashinfer.<op> or fused_moe.<op>) with `weights(t)`;
    `output`: the op takes the caller's output buffer. Of the shared arguments, those the
    op's signature names are passed (the prims_ts ops drop use_shuffled_weight, the routed
    ones routing_bias)."""
    def build(t, fi):
        from flashinfer import fused_moe
        fn = getattr(fused_moe, op, None) or getattr(fi, op)
        names = inspect.signature(fn).parameters
        kwargs = {k: v for k, v in {**_common(), **weights(t)}.items() if k in names}
        key, routing = _routing(t, routed)

        # (0.6.3's and 0.6.11.post1's BF16 and FP8 entry points allocate their own output.)
        given = output and fit.takes(fn, "output")

        def moe(routing):
            extra = {"output": torch.empty(M, H, dtype=BF16, device="cuda")} if given else {}
            return fn(**{key: routing}, **kwargs, **extra)
        return moe, (routing,)
    return build


def _prims_partitioned(op, weights):
    """The Prims-TS two-partition form (SM107 only): each weight and its scale as two shards
    (halves of dim 1; strategy "tp_n_tp_n"), the partitions' streams made before capture as
    the docstring asks (MoePartitionResources, whose streams need the driver here)."""
    def build(t, fi):
        from flashinfer.prims_ts.moe.partition import MoePartitionResources
        resources = MoePartitionResources(streams=[torch.cuda.Stream(), torch.cuda.Stream()])
        fn = getattr(fi, op)
        names = inspect.signature(fn).parameters
        kwargs = {k: v for k, v in {**_common(), **weights(t)}.items() if k in names}
        for k in list(kwargs):
            if k.startswith(("gemm1_weights", "gemm2_weights")):
                kwargs[k] = list(torch.chunk(kwargs[k], 2, dim=1))
        kwargs.update(topk_ids=None, expert_weights=None, topk_weights=None)
        kwargs = {k: v for k, v in kwargs.items() if k in names}

        def moe(routing_logits):
            return fn(routing_logits=routing_logits, partition_resources=resources,
                      partition_strategy="tp_n_tp_n", **kwargs)
        return moe, (t(M, E, dtype=BF16),)
    return build


# CuTe DSL fused MoE (SM100 and, for b12x, SM120): routed by top-k ids and weights, as
# SGLang's flashinfer_cutedsl runner calls CuteDslMoEWrapper.run (NVFP4 activations quantized
# with linear scale factors, packed FP4 weights with E4M3 block scales per 16; the W4A8 ones'
# E8M0 scales in the strided MMA layout FlashInfer checks).
def _routed(t):
    return dict(token_selected_experts=t(M, TOP_K, dtype=I32),
                token_final_scales=t(M, TOP_K, dtype=F32))


def _cute_nvfp4(t):
    return dict(x=t(M, H // 2, dtype=U8), x_sf=t(M, H // 16, dtype=FP8),
                w1_weight=t(E, 2 * I, H // 2, dtype=U8),
                w1_weight_sf=t(E, 2 * I, H // 16, dtype=FP8), w1_alpha=t(E, dtype=F32),
                fc2_input_scale=t(1, dtype=F32), w2_weight=t(E, H, I // 2, dtype=U8),
                w2_weight_sf=t(E, H, I // 16, dtype=FP8), w2_alpha=t(E, dtype=F32))


def _mma_scales(rows, columns, vec=32, dtype=U8):
    """Weight scales (one per `vec` columns; E8M0 per 32 by default) in the MMA layout
    FlashInfer's W4A8 check asks for (a strided [32, 4, row tiles, 4, K tiles, E] view,
    fused_moe.py validate_w4a8_inputs) and b12x reads (E4M3 per 16: moe_dispatch.py
    _get_weight_views, convert_sf_from_mma_layout)."""
    m_tiles, k_tiles = rows // 128, columns // (vec * 4)
    return torch.empty_strided((32, 4, m_tiles, 4, k_tiles, E),
                               (16, 4, k_tiles * 512, 1, 512, m_tiles * k_tiles * 512),
                               dtype=dtype, device="cuda")


def _cute_mxfp8_mxfp4(t):
    # MXFP8 activations (E8M0 scales per 32, uint8), MXFP4 weights
    return dict(x=t(M, H, dtype=FP8), x_sf=t(M, H // 32, dtype=U8),
                w1_weight=t(E, 2 * I, H // 2, dtype=U8), w1_weight_sf=_mma_scales(2 * I, H),
                w1_alpha=t(E, dtype=F32), w2_weight=t(E, H, I // 2, dtype=U8),
                w2_weight_sf=_mma_scales(H, I), w2_alpha=t(E, dtype=F32))


def _cute_bf16(t):
    return dict(x=t(M, H, dtype=BF16), w1_weight=t(E, 2 * I, H, dtype=BF16),
                w2_weight=t(E, H, I, dtype=BF16))


def _b12x_nvfp4(t):
    # bf16 activations quantized inside; FP4 weights with NVFP4 scales (E4M3 per 16) in the
    # MMA layout
    return dict(x=t(M, H, dtype=BF16), w1_weight=t(E, 2 * I, H // 2, dtype=U8),
                w1_weight_sf=_mma_scales(2 * I, H, vec=16, dtype=FP8),
                w2_weight=t(E, H, I // 2, dtype=U8),
                w2_weight_sf=_mma_scales(H, I, vec=16, dtype=FP8),
                w1_alpha=t(E, dtype=F32), w2_alpha=t(E, dtype=F32),
                fc2_input_scale=t(E, dtype=F32))


def _cute_function(op, weights, **options):
    """flashinfer.<op>(**weights, routing, num_experts, top_k, moe_output given)."""
    def build(t, fi):
        fn = getattr(fi, op)
        kwargs = {**weights(t), **options}
        out = "output" if "output" in inspect.signature(fn).parameters else "moe_output"

        def moe(token_selected_experts, token_final_scales):
            moe_output = torch.empty(M, H, dtype=BF16, device="cuda")
            return fn(token_selected_experts=token_selected_experts,
                      token_final_scales=token_final_scales, num_experts=E, top_k=TOP_K,
                      **{out: moe_output}, **kwargs)
        return moe, tuple(_routed(t).values())
    return build


def _b12x_function(t, fi):
    """b12x_fused_moe as a caller with its own output buffer calls it (as _cute_function
    does), and without one (the result FlashInfer allocates): dynafold's boundary takes both
    (their records' corrections, hooks/ops/registry/moe.py)."""
    given = _cute_function("b12x_fused_moe", _b12x_nvfp4)(t, fi)
    kwargs = _b12x_nvfp4(t)

    def moe(token_selected_experts, token_final_scales):
        return fi.b12x_fused_moe(token_selected_experts=token_selected_experts,
                                 token_final_scales=token_final_scales, num_experts=E,
                                 top_k=TOP_K, **kwargs)
    return {"output given": given, "no output": (moe, given[1])}


def _cute_given_and_fresh(op, weights, **options):
    """flashinfer.<op> called with a `moe_output` buffer (as _cute_function does) and without
    one (the result FlashInfer allocates): dynafold's boundaries of cute_dsl_fused_moe and
    cute_dsl_fused_moe_nvfp4 take both (their records' corrections, hooks/ops/registry/moe.py)."""
    def build(t, fi):
        given = _cute_function(op, weights, **options)(t, fi)
        kwargs = {**weights(t), **options}

        def moe(token_selected_experts, token_final_scales):
            return getattr(fi, op)(token_selected_experts=token_selected_experts,
                                   token_final_scales=token_final_scales, num_experts=E,
                                   top_k=TOP_K, **kwargs)
        return {"output given": given, "no output": (moe, given[1])}
    return build


def _cute_wrapper(cls, weights, **config):
    """A wrapper made at load time (sized for up to 16 tokens where it asks), then run()."""
    def build(t, fi):
        names = inspect.signature(getattr(fi, cls)).parameters
        sizing = {k: v for k, v in dict(max_num_tokens=16, device="cuda").items() if k in names}
        # A release whose constructor lacks a setting has only its default (0.6.16's
        # CuteDslMoEWrapper is NVFP4 W4A4 alone, with no `quant_mode`).
        config_here = {k: v for k, v in config.items() if k in names}
        wrapper = getattr(fi, cls)(num_experts=E, top_k=TOP_K, hidden_size=H,
                                   intermediate_size=I, **sizing, **config_here)
        kwargs = weights(t)

        def moe(token_selected_experts, token_final_scales):
            return wrapper.run(token_selected_experts=token_selected_experts,
                               token_final_scales=token_final_scales, **kwargs)
        return moe, tuple(_routed(t).values())
    return build


def _b12x_wrapper(t, fi):
    """B12xMoEWrapper made as FlashInfer makes it on an SM120 device with CUDA 13 (it asks for
    both: standins.py `made_as`), without use_cuda_graph: dynafold's boundary of run() takes
    that wrapper only (hooks/ops/registry/moe.py; one built with use_cuda_graph=True returns a
    view of its own buffer, traced as shipped)."""
    import standins
    with standins.made_as(120, "13.0"):
        call = _cute_wrapper("B12xMoEWrapper", _b12x_nvfp4, use_cuda_graph=False)(t, fi)
    return {"use_cuda_graph=False": call}


# AlphaMoE (SM100): experts over a vLLM/SGLang `moe_align_block_size` plan, padded per
# expert to BLOCK_M with worst-case capacity (the plan buffers a server allocates once).
BLOCK_M = 8
PLAN = M * TOP_K + E * (BLOCK_M - 1)


def _plan(t, m=M, e=E, top_k=TOP_K):
    plan = m * top_k + e * (BLOCK_M - 1)
    return dict(sorted_token_ids=t(plan, dtype=I32), expert_ids=t(plan // BLOCK_M, dtype=I32),
                num_tokens_post_padded=t(1, dtype=I32), topk_weights=t(m, top_k, dtype=F32))


def _alphamoe_fp8(t, fi):
    from flashinfer import fused_moe
    weights = dict(hidden_states_scale=t(M, H // 128, dtype=F32),
                   gemm1_weights=t(E, 2 * I, H, dtype=FP8),
                   gemm1_weights_scale=t(E, 2 * I // 128, H // 128, dtype=F32),
                   gemm2_weights=t(E, H, I, dtype=FP8),
                   gemm2_weights_scale=t(E, H // 128, I // 128, dtype=F32), **_plan(t))

    def moe(hidden_states):
        out = torch.zeros(M, H, dtype=BF16, device="cuda")  # reduce-added into
        return fused_moe.alphamoe_fp8_block_scale_aligned_moe(
            hidden_states, top_k=TOP_K, block_m=BLOCK_M, out=out, **weights)
    return moe, (t(M, H, dtype=FP8),)


def _alphamoe_nvfp4_weights(t, m=M, e=E, top_k=TOP_K):
    # packed FP4 with linear E4M3 scales per 16; FC2 [E, K, N / 4] with N = 2 * I
    return dict(hidden_states_scale=t(m, H // 16, dtype=FP8),
                gemm1_weights=t(e, 2 * I, H // 2, dtype=U8),
                gemm1_weights_scale=t(e, 2 * I, H // 16, dtype=FP8),
                gemm2_weights=t(e, H, I // 2, dtype=U8),
                gemm2_weights_scale=t(e, H, I // 16, dtype=FP8),
                output1_scale_gate_scalar=t(e, dtype=F32), output1_scale_scalar=t(e, dtype=F32),
                output2_scale_scalar=t(e, dtype=F32), **_plan(t, m, e, top_k))


# The routed entry points serve only the sizes their fused alignment companion was built for
# (alphamoe_nvfp4_sm100.py is_alphamoe_nvfp4_small_alignment_seed_supported: 256 or 512
# experts, top-8, 1 or 8 tokens; anything else raises "routed companion requires supported
# route metadata"): 8 decode tokens over 256 experts, as a DeepSeek-sized server routes them.
ROUTED_M, ROUTED_E, ROUTED_TOP_K = 8, 256, 8


def _alphamoe_nvfp4(op, routed):
    def build(t, fi):
        from flashinfer import fused_moe
        m, e, top_k = (ROUTED_M, ROUTED_E, ROUTED_TOP_K) if routed else (M, E, TOP_K)
        weights = _alphamoe_nvfp4_weights(t, m, e, top_k)
        if routed:
            # cumsum_buffer: "at least E + 2 entries" (the routed call's docstring)
            weights.update(topk_ids=t(m, top_k, dtype=I32), cumsum_buffer=t(e + 2, dtype=I32))

        def moe(hidden_states):
            out = torch.zeros(m, H, dtype=BF16, device="cuda")
            result = getattr(fused_moe, op)(hidden_states=hidden_states, out=out, top_k=top_k,
                                            block_m=BLOCK_M, **weights)
            if result is None:  # written into out
                return out
            if isinstance(result, torch.Tensor):
                return result
            # deferred: the contributions held for the finalize
            return tuple(getattr(result, k) for k in ("route_accumulator", "route_experts")
                         if getattr(result, k) is not None) or (result.out,)
        return moe, (t(m, H // 2, dtype=U8),)
    return build


def _alphamoe_finalize(t, fi):
    """The deferred routed MoE's finalize, seeded by the shared expert's output: the
    deferred contributions as the complete-route path leaves them (route 1: per-route fp32
    accumulators and experts), made by AlphaMoeNvfp4DeferredOutput's own constructor."""
    from flashinfer.fused_moe import alphamoe_nvfp4_sm100 as alphamoe
    deferred = alphamoe.AlphaMoeNvfp4DeferredOutput(
        1, t(M * TOP_K, H, dtype=F32), t(M * TOP_K, dtype=I32), t(M, TOP_K, dtype=F32),
        t(E, dtype=F32), 1.0, TOP_K, None)

    def finalize(seed):
        return alphamoe.alphamoe_nvfp4_finalize_deferred(deferred, seed)
    return finalize, (t(M, H, dtype=BF16),)


# Routers: logits in, top-k (and, for the aligned ones, the block plan) out.
def _alphamoe_router(t, fi):
    from flashinfer import fused_moe

    def route(logits):
        plan = fused_moe.alphamoe_fused_router(logits, top_k=TOP_K, block_m=BLOCK_M)
        return plan.topk_weights, plan.topk_ids, plan.sorted_token_ids, plan.expert_ids
    return route, (t(M, E, dtype=F32),)


def _kimi_k3_router(t, fi):
    """Kimi-K3: 896 experts, top-16 on sigmoid(logits) + bias, aligned plan in one launch."""
    from flashinfer import fused_moe

    def route(logits, bias):
        plan = fused_moe.kimi_k3_fused_router(logits, bias, block_m=BLOCK_M)
        # the whole KimiK3RoutePlan, read by name as callers read it
        return (plan.topk_weights, plan.topk_ids, plan.sorted_token_ids, plan.expert_ids,
                plan.num_tokens_post_padded, plan.expert_counts, plan.expert_offsets,
                plan.expert_scatter_offsets)
    return route, (t(M, 896, dtype=F32), t(896, dtype=F32))


def _hash_topk(t, fi):
    """DeepSeek-V4 hash-MoE layer: experts from the token-to-expert table."""
    from flashinfer import fused_moe
    vocab = 1024

    def route(router_logits, input_ids, tid2eid):
        return fused_moe.hash_topk(router_logits, input_ids, tid2eid, launch_with_pdl=False)
    return route, (t(M, E, dtype=F32), t(M, dtype=torch.int64), t(vocab, TOP_K, dtype=I32))


def _trtllm_gen_routing(t, fi):
    """The trtllm-gen routing kernels alone (Renormalize), as the fused MoE runs them."""
    from flashinfer import fused_moe
    from flashinfer.tllm_enums import RoutingMethodType

    def route(logits):
        result = fused_moe.trtllm_gen_routing(logits, None, RoutingMethodType.Renormalize,
                                              TOP_K, local_num_experts=E, enable_pdl=False)
        return tuple(v for v in vars(result).values() if isinstance(v, torch.Tensor)) \
            if hasattr(result, "__dict__") else tuple(result)
    return route, (t(M, E, dtype=BF16),)


def _populate_routing_metadata(t, fi):
    """Routing metadata slots (allocated before capture, one tile of 8 tokens per CTA)
    filled from this step's packed top-k ids: the in-forward half of the pair."""
    from flashinfer.fused_moe import core
    slot = core.TrtllmMoERoutingMetadataSlot(8, *(t(n, dtype=I32) for n in (
        1, M * TOP_K, PLAN + 1, M * TOP_K, 2 * E, E, PLAN // 8, PLAN // 8, 1)))
    metadata = core.TrtllmMoERoutingMetadata(
        routing_input_mode=core.RoutingInputMode.PackedPrecomputed, num_experts=E,
        top_k=TOP_K, local_expert_offset=0, num_local_experts=E, slots=(slot,))

    def populate(topk_ids):
        core.populate_trtllm_moe_routing_metadata_(metadata, topk_ids)
        return slot.expanded_idx_to_permuted_idx
    return populate, (t(M, TOP_K, dtype=I32),)


def _mono_moe(t, fi):
    """MonoMoE: FP8 128x128 block-scaled experts routed from logits inside; its kernel is
    specialized to one model's sizes (E=256, N=512, K=2048), so those are used here. As a
    server runs it: up weights interleaved at load (interleave_up=False), the scratchpad
    allocated once (alloc_scratchpad asks the kernel library its size, which this machine
    has not built: a 64 MiB buffer stands in, only the kernel reads it)."""
    from flashinfer import fused_moe
    e, n, k = 256, 512, 2048
    w_up, s_up = t(e, 2 * n, k, dtype=FP8), t(e, 2 * n // 128, k // 128, dtype=F32)
    w_down, s_down = t(e, k, n, dtype=FP8), t(e, k // 128, n // 128, dtype=F32)
    scratchpad = t(64 << 20, dtype=U8)

    def moe(x, router_logits):
        return fused_moe.mono_moe(x, router_logits, w_up, s_up, w_down, s_down, 8,
                                  scratchpad=scratchpad, interleave_up=False)
    return moe, (t(M, k, dtype=BF16), t(M, e, dtype=F32))


def _cudnn_frost_gemm1(t, fi):
    """cuDNN Frost GEMM1 + SwiGLU over tokens already grouped by expert (one group each)."""
    rows = M * TOP_K
    gate, up = t(E, I, H, dtype=BF16), t(E, I, H, dtype=BF16)
    offsets, scale = t(E + 1, dtype=I32), t(1, dtype=F32)
    workspace = t(64 << 20, dtype=U8)

    def gemm1(grouped_tokens):
        return fi.cudnn_frost_grouped_gemm1_swiglu(grouped_tokens, gate, up, offsets, scale,
                                                   workspace)
    return gemm1, (t(rows, H, dtype=BF16),)


# Multi-LoRA MoE (BGMV): adapter banks [max_loras, E, rank, feat], their pointer tables
# filled when the adapters load (fill_w_ptr), the routed pairs of a moe_align plan.
LORAS, RANK = 2, 16


def _lora_pairs(t):
    return dict(sorted_token_ids=t(M * TOP_K, dtype=I32), expert_ids=t(M * TOP_K, dtype=I32))


def _bgmv_moe(t, fi):
    from flashinfer import fused_moe
    lora_a = [t(LORAS, E, RANK, H, dtype=BF16)]
    lora_b = [t(LORAS, E, H, RANK, dtype=BF16)]

    def delta(x, lora_indices, topk_weights):
        return fused_moe.bgmv_moe(x, lora_a, lora_b, lora_indices=lora_indices,
                                  topk_weights=topk_weights, num_experts=E, **pairs)
    pairs = _lora_pairs(t)
    return delta, (t(M, H, dtype=BF16), t(M, dtype=I32), t(M * TOP_K, dtype=F32))


def _bgmv_shrink(t, fi):
    from flashinfer import fused_moe
    w_ptr, pairs = t(1, E, dtype=torch.int64), _lora_pairs(t)

    def shrink(x, lora_indices):
        y = torch.zeros(1, M * TOP_K, RANK, dtype=BF16, device="cuda")
        fused_moe.bgmv_moe_shrink(y, x, w_ptr, lora_indices=lora_indices,
                                  lora_stride=E * RANK * H, **pairs)
        return y
    return shrink, (t(M, H, dtype=BF16), t(M, dtype=I32))


def _bgmv_expand(t, fi):
    from flashinfer import fused_moe
    w_ptr, pairs = t(1, E, dtype=torch.int64), _lora_pairs(t)
    slice_start_loc = t(1, dtype=torch.int64)

    def expand(x, lora_indices, topk_weights):
        y = torch.zeros(M, H, dtype=F32, device="cuda")
        fused_moe.bgmv_moe_expand(y, x, w_ptr, topk_weights=topk_weights,
                                  lora_indices=lora_indices, slice_start_loc=slice_start_loc,
                                  output_slices=[H], lora_stride=E * H * RANK, **pairs)
        return y
    return expand, (t(1, M * TOP_K, RANK, dtype=BF16), t(M, dtype=I32),
                    t(M * TOP_K, dtype=F32))


def _lora_gemm1_delta(t, fi):
    """The FC1 LoRA delta the trtllm routed MoE takes (gemm1_lora_delta): gate and up banks."""
    from flashinfer import fused_moe
    w_ptr_a, w_ptr_b = t(2, E, dtype=torch.int64), t(2, E, dtype=torch.int64)

    def delta(hidden_states, topk_ids, lora_ids):
        return fused_moe.bgmv_moe_gemm1_lora_delta(
            hidden_states, w_ptr_a, E * RANK * H, w_ptr_b, E * I * RANK, topk_ids, lora_ids,
            RANK, I)
    return delta, (t(M, H, dtype=BF16), t(M, TOP_K, dtype=I32), t(M, dtype=I32))


def _lora_gemm2_delta(t, fi):
    """The FC2 LoRA delta over the routed MoE's activation output (do_finalize=False)."""
    from flashinfer import fused_moe
    w_ptr_a, w_ptr_b = t(1, E, dtype=torch.int64), t(1, E, dtype=torch.int64)

    def delta(act, expanded_idx_to_permuted_idx, topk_ids, topk_weights, lora_ids):
        return fused_moe.bgmv_moe_gemm2_lora_delta(
            act, expanded_idx_to_permuted_idx, w_ptr_a, E * RANK * I, w_ptr_b, E * H * RANK,
            topk_ids, topk_weights, lora_ids, RANK, H)
    return delta, (t(M * TOP_K, I, dtype=BF16), t(M * TOP_K, dtype=I32), t(M, TOP_K, dtype=I32),
                   t(M, TOP_K, dtype=F32), t(M, dtype=I32))


# SM120 (RTX Blackwell) grouped expert GEMMs over rows already grouped by expert (m_indptr):
# FC1 + activation + requantization, then FC2 + finalize scatter back to tokens. Scales are
# K-major ([K / 128, rows]); the MXFP8 x MXFP4 ones pack four E8M0 scales per int32 (an A
# scale per 128 of K, four to a word: K / 512; a B scale per 32: K / 128).
ROWS = M * TOP_K


def _sm12x_fc1(op, mx):
    def build(t, fi):
        from flashinfer import fused_moe
        if mx:
            b_q, b_scale = t(E, 2 * I, H // 2, dtype=U8), t(E, H // 128, 2 * I, dtype=I32)
            a_scale = t(max(H // 512, 1), ROWS, dtype=I32)
        else:
            b_q, b_scale = t(E, 2 * I, H, dtype=FP8), t(E, H // 128, 2 * I // 128, dtype=F32)
            a_scale = t(H // 128, ROWS, dtype=F32)

        def fc1(a_q, m_indptr):
            return getattr(fused_moe, op)(a_q, a_scale, b_q, b_scale, m_indptr)
        return fc1, (t(ROWS, H, dtype=FP8), t(E + 1, dtype=I32))
    return build


def _sm12x_fc2(op, mx):
    def build(t, fi):
        from flashinfer import fused_moe
        if mx:
            b_q, b_scale = t(E, H, I // 2, dtype=U8), t(E, I // 128, H, dtype=I32)
            a_scale = t(max(I // 512, 1), ROWS, dtype=I32)
        else:
            b_q, b_scale = t(E, H, I, dtype=FP8), t(E, I // 128, H // 128, dtype=F32)
            a_scale = t(I // 128, ROWS, dtype=F32)

        def fc2(a_q, m_indptr, src_token, pair_scales):
            return getattr(fused_moe, op)(a_q, a_scale, b_q, b_scale, m_indptr, src_token,
                                          pair_scales, M)

        def fc2_into(a_q, m_indptr, src_token, pair_scales):
            # as FlashInfer's own SM12x MoE runners call it (fused_moe/runners.py): into the
            # caller's zeroed bfloat16 output
            out = torch.zeros(M, H, dtype=BF16, device="cuda")
            return getattr(fused_moe, op)(a_q, a_scale, b_q, b_scale, m_indptr, src_token,
                                          pair_scales, M, out=out)
        args = (t(ROWS, I, dtype=FP8), t(E + 1, dtype=I32), t(ROWS, dtype=I32),
                t(ROWS, dtype=F32))
        return {"no out": (fc2, args), "out given": (fc2_into, args)}
    return build

# The trtllm-gen and Prims-TS MoE ops by name: (weights, routed, takes the caller's output).
_MOE_OPS = {
    "trtllm_bf16_moe": (_bf16_weights, False),
    "trtllm_bf16_routed_moe": (_bf16_weights, True),
    "trtllm_fp8_block_scale_moe": (_fp8_block_weights, False),
    "trtllm_fp8_block_scale_routed_moe": (_fp8_block_weights, True),
    "trtllm_fp8_per_tensor_scale_moe": (_fp8_tensor_weights, False),
    "trtllm_fp8_per_tensor_scale_routed_moe": (_fp8_tensor_weights, True),
    "trtllm_fp8_per_channel_scale_moe": (_fp8_channel_weights, False, False),
    "trtllm_fp8_per_channel_scale_routed_moe": (_fp8_channel_weights, True, False),
    "trtllm_mxint4_block_scale_moe": (_mxint4_weights, False),
    "trtllm_mxint4_block_scale_routed_moe": (_mxint4_weights, True),
    "prims_ts_bf16_moe": (_bf16_weights, False),
    "prims_ts_bf16_routed_moe": (_bf16_weights, True),
    "prims_ts_fp4_block_scale_moe": (_fp4_weights, False),
    "prims_ts_fp4_block_scale_routed_moe": (_fp4_weights, True),
    "prims_ts_fp8_block_scale_moe": (_fp8_block_weights, False),
    "prims_ts_fp8_per_tensor_scale_moe": (_fp8_tensor_weights, False),
}
# Their Prims-TS two-partition forms, by name: weights.
_PARTITIONED_OPS = {
    "prims_ts_bf16_moe_partitioned": _bf16_weights,
    "prims_ts_fp4_block_scale_moe_partitioned": _fp4_weights,
    "prims_ts_fp8_block_scale_moe_partitioned": _fp8_block_weights,
    "prims_ts_fp8_per_tensor_scale_moe_partitioned": _fp8_tensor_weights,
}

def _prims_fp8_routed(t, fi):
    """prims_ts_fp8_block_scale_routed_moe (packed top-k ids, shuffled FP8 block-scale
    weights) into the caller's output, as _trtllm calls the MoE ops, and without one (the
    bfloat16 output FlashInfer allocates): dynafold's boundary takes both."""
    op = "prims_ts_fp8_block_scale_routed_moe"
    return {"output given": _trtllm(op, _fp8_block_shuffled, True)(t, fi),
            "no output": _trtllm(op, _fp8_block_shuffled, True, output=False)(t, fi)}


BUILDERS = {
    "trtllm_fp4_block_scale_moe": _trtllm_fp4,
    "trtllm_fp4_block_scale_routed_moe": _trtllm_fp4_routed,
    "cutlass_fused_moe": _cutlass_fp4,
    "fused_topk_deepseek": _topk_deepseek,
    **{op: _trtllm(op, *spec) for op, spec in _MOE_OPS.items()},
    **{op: _prims_partitioned(op, weights) for op, weights in _PARTITIONED_OPS.items()},
    "prims_ts_fp8_block_scale_routed_moe": _prims_fp8_routed,
    "cute_dsl_fused_moe": _cute_given_and_fresh("cute_dsl_fused_moe", _cute_nvfp4,
                                                quant_mode="w4a4"),
    "cute_dsl_fused_moe_nvfp4": _cute_given_and_fresh("cute_dsl_fused_moe_nvfp4", _cute_nvfp4),
    "cute_dsl_fused_moe_mxfp8_mxfp4": _cute_function("cute_dsl_fused_moe_mxfp8_mxfp4",
                                                     _cute_mxfp8_mxfp4),
    "cute_dsl_fused_moe_bf16": _cute_function("cute_dsl_fused_moe_bf16", _cute_bf16),
    "b12x_fused_moe": _b12x_function,
    # Without CUDA graphs (SGLang's --disable-cuda-graph): with them, the constructor makes
    # its streams and events, which ask the driver this machine lacks.
    "CuteDslMoEWrapper.run": _cute_wrapper("CuteDslMoEWrapper", _cute_nvfp4,
                                           use_cuda_graph=False, quant_mode="w4a4"),
    "CuteDslMxfp8Mxfp4MoEWrapper.run": _cute_wrapper("CuteDslMxfp8Mxfp4MoEWrapper",
                                                     _cute_mxfp8_mxfp4),
    "CuteDslBf16MoEWrapper.run": _cute_wrapper("CuteDslBf16MoEWrapper", _cute_bf16),
    "B12xMoEWrapper.run": _b12x_wrapper,
    "alphamoe_fp8_block_scale_aligned_moe": _alphamoe_fp8,
    "alphamoe_nvfp4_aligned_moe": _alphamoe_nvfp4("alphamoe_nvfp4_aligned_moe", routed=False),
    "alphamoe_nvfp4_routed_moe": _alphamoe_nvfp4("alphamoe_nvfp4_routed_moe", routed=True),
    "alphamoe_nvfp4_routed_moe_deferred": _alphamoe_nvfp4("alphamoe_nvfp4_routed_moe_deferred",
                                                          routed=True),
    "alphamoe_nvfp4_finalize_deferred": _alphamoe_finalize,
    "alphamoe_fused_router": _alphamoe_router,
    "kimi_k3_fused_router": _kimi_k3_router,
    "hash_topk": _hash_topk,
    "trtllm_gen_routing": _trtllm_gen_routing,
    "populate_trtllm_moe_routing_metadata_": _populate_routing_metadata,
    "mono_moe": _mono_moe,
    "cudnn_frost_grouped_gemm1_swiglu": _cudnn_frost_gemm1,
    "bgmv_moe": _bgmv_moe,
    "bgmv_moe_shrink": _bgmv_shrink,
    "bgmv_moe_expand": _bgmv_expand,
    "bgmv_moe_gemm1_lora_delta": _lora_gemm1_delta,
    "bgmv_moe_gemm2_lora_delta": _lora_gemm2_delta,
    "cute_dsl_sm12x_fc1_act_q1_fp8": _sm12x_fc1("cute_dsl_sm12x_fc1_act_q1_fp8", mx=False),
    "cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4": _sm12x_fc1("cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4",
                                                        mx=True),
    "cute_dsl_sm12x_fc2_finalize_fp8": _sm12x_fc2("cute_dsl_sm12x_fc2_finalize_fp8", mx=False),
    "cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4": _sm12x_fc2(
        "cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4", mx=True),
}
