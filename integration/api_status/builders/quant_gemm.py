"""Quantization (fp4/mxfp4/mxfp8/fp8) and GEMM (bmm_fp8, mm_fp4, mm_fp8, grouped, segment)."""
import importlib

import torch

from . import fit

from .elementwise import _blackwell_only

BF16, FP8, U8, F32 = torch.bfloat16, torch.float8_e4m3fn, torch.uint8, torch.float32
M, K, N = 128, 256, 256


def _fp4_quantize(t, fi):
    return (lambda x, s: fi.fp4_quantize(x, s, enable_pdl=False),
            (t(M, K), t(1, dtype=F32)))


def _nvfp4_quantize(t, fi):
    return lambda x, s: fi.nvfp4_quantize(x, s, enable_pdl=False), (t(M, K), t(1, dtype=F32))


def _mxfp4_quantize(t, fi):
    return lambda x: fi.mxfp4_quantize(x), (t(M, K),)


def _mxfp8_quantize(t, fi):
    return lambda x: fi.mxfp8_quantize(x, enable_pdl=False), (t(M, K),)


def _mxfp4_dequantize(t, fi):
    return lambda a, s: fi.mxfp4_dequantize(a, s), (t(M, K // 2, dtype=U8), t(M * K // 32,
                                                                              dtype=U8))


def _bmm_fp8(t, fi):
    return (lambda a, b, sa, sb: fi.bmm_fp8(a, b, sa, sb, BF16),
            (t(2, M, K, dtype=FP8), t(2, N, K, dtype=FP8).transpose(-2, -1),
             t(1, dtype=F32), t(1, dtype=F32)))


def _mm_fp8(t, fi):
    import inspect
    backend = inspect.signature(fi.mm_fp8).parameters.get("backend")
    if backend is not None and "cutlass" in str(backend.annotation):
        # 0.7.4: "auto" picks a runner for the (n, k) weight as it comes; the default
        # (trtllm_low_latency) wants it in its own prepared layout.
        return (lambda a, b, alpha: fi.mm_fp8(a, b, alpha, BF16, backend="auto"),
                (t(M, K, dtype=FP8), t(N, K, dtype=FP8), t(1, dtype=F32)))
    # The default (trtllm_low_latency, the only backend before 0.7.2) takes the weight as
    # prepare_low_latency_gemm_weights leaves it: (k // 128, n, 128).
    return (lambda a, b, alpha: fi.mm_fp8(a, b, alpha),
            (t(M, K, dtype=FP8), t(K // 128, N, 128, dtype=FP8), t(1, dtype=F32)))


def _mm_fp4(backend):
    def build(t, fi):
        return (lambda a, b, sa, sb, alpha: fi.mm_fp4(a, b, sa, sb, alpha, BF16, backend=backend),
                (t(M, K // 2, dtype=U8), t(N, K // 2, dtype=U8).t(), t(M, K // 16, dtype=U8),
                 t(N, K // 16, dtype=U8).t(), t(1, dtype=F32)))
    return build


def _grouped_mm(name, dtype):
    def build(t, fi):
        return (lambda a, b, indptr: getattr(fi, name)(a, b, indptr),
                (t(M, K, dtype=dtype), t(2, N, K, dtype=dtype),
                 torch.zeros(3, device="cuda", dtype=torch.int32)))
    return build


def _segment_gemm(t, fi):
    w = fi.SegmentGEMMWrapper(torch.empty(1 << 20, device="cuda", dtype=U8))
    return (lambda x, wt, lens: w.run(x, wt, 2, True, seg_lens=lens),
            (t(M, K), t(2, N, K), torch.full((2,), M // 2, device="cuda", dtype=torch.int64)))


BUILDERS = {
    "fp4_quantize": _fp4_quantize,
    "nvfp4_quantize": _nvfp4_quantize,
    "mxfp4_quantize": _mxfp4_quantize,
    "mxfp8_quantize": _mxfp8_quantize,
    "mxfp4_dequantize": _mxfp4_dequantize,
    "bmm_fp8": _bmm_fp8,
    "mm_fp8": _mm_fp8,
    "mm_fp4": lambda t, fi: {b: _mm_fp4(b)(t, fi) for b in ("cudnn", "cutlass", "trtllm")},
    "grouped_mm_fp8": _grouped_mm("grouped_mm_fp8", FP8),
    "grouped_mm_bf16": _grouped_mm("grouped_mm_bf16", BF16),
    "SegmentGEMMWrapper.run": _segment_gemm,
}


def _block_scale_interleave(t, fi):
    return lambda sf: fi.block_scale_interleave(sf), (t(M, K // 16, dtype=U8),)


def _e2m1_to_float(t, fi):
    return (lambda v, sf, g: fi.e2m1_and_ufp8sf_scale_to_float(v, sf, g),
            (t(M, K // 2, dtype=U8), t(M * K // 16, dtype=U8), t(1, dtype=F32)))


def _nvfp4_kv_dequantize(t, fi):
    return (lambda v, sf, g: fi.nvfp4_kv_dequantize(v, sf, g),
            (t(M, K // 2, dtype=U8), t(M, K // 16, dtype=FP8), t(1, dtype=F32)))


def _experts(name, *extra, **kw):
    """The masked per-expert quantizers (MoE activations): (experts, tokens, hidden) and
    the count of valid tokens per expert."""
    def build(t, fi):
        e, m, h = 4, 128, 512
        mask = torch.full((e,), m, device="cuda", dtype=torch.int32)
        scale = (t(e, dtype=F32),) if extra else ()
        return (lambda a, mask, *s: getattr(fi, name)(a, mask, *s, **kw),
                (t(e, m, h), mask, *scale))
    return build


def _mxfp8_grouped_quantize(t, fi):
    """The default backend (cuTile), and 0.7.4's CUDA one, which needs no extra package."""
    import inspect
    calls = {"default": _experts("mxfp8_grouped_quantize")(t, fi)}
    backend = inspect.signature(fi.mxfp8_grouped_quantize).parameters.get("backend")
    if backend is not None and "cuda" in str(backend.annotation):
        calls["cuda"] = _experts("mxfp8_grouped_quantize", backend="cuda")(t, fi)
    return calls


def _nvfp4_batched_quantize(t, fi):
    return lambda a, s: fi.nvfp4_batched_quantize(a, s), (t(4, M, K), t(4, dtype=F32))


def _mxfp8_bshd(t, fi):
    from flashinfer import quantization
    return lambda x: quantization.mxfp8_quantize_bshd(x), (t(2, 64, 4, 128),)


# The module of per_token_group_quant_8bit's cuTile backend, which its body imports at the call:
# loaded before compile, as a server's eager warm-up loads it (dynafold wakes the declarations
# of the modules loaded by the time a compile starts).
CUTILE_PER_TOKEN_GROUP = "flashinfer.quantization.kernels.cutile.per_token_group_quant_8bit_cutile"


def _per_token_group(t, fi):
    from flashinfer import quantization
    fn = quantization.per_token_group_quant_8bit
    # The CUDA backend where the release has one (the call the H200 runs checked); 0.7.2's only
    # backend is "cutile".
    backend = fit.choice(fn, "backend", "cuda")
    if backend == "cutile":
        importlib.import_module(CUTILE_PER_TOKEN_GROUP)
    return (lambda x: fn(x, 128, dst_dtype=FP8, backend=backend), (t(M, K),))


def _make_global_scale(t, fi):
    return lambda x: fi.make_nvfp4_global_scale(x, False), (t(M, K),)


def _bf16_gemm(name, batched):
    """mm_bf16 / bmm_bf16 as a linear layer calls them: the (N, K) weight passed transposed
    (column major, which the CUTLASS and Cake backends require), on the default backend
    (cuDNN) and the two that need no extra package (CUTLASS, TGV)."""
    def build(t, fi):
        def call(backend):
            return lambda a, b: getattr(fi, name)(a, b, backend=backend)
        a, b = ((t(2, M, K), t(2, N, K).transpose(-2, -1)) if batched else
                (t(M, K), t(N, K).t()))
        return {backend: (call(backend), (a, b)) for backend in ("cudnn", "cutlass", "tgv")}
    return build


def _mm_mxfp8(t, fi):
    return (lambda a, b, sa, sb: fi.mm_mxfp8(a, b, sa, sb),
            (t(M, K, dtype=FP8), t(N, K, dtype=FP8).t(), t(M * K // 32, dtype=U8),
             t(N * K // 32, dtype=U8)))


def _router_gemm(name, k, n, bf16_out):
    def build(t, fi):
        from flashinfer import gemm

        def f(a, b, out):
            getattr(gemm, name)(a, b, out, launch_with_pdl=False)
            return out
        # FP32 results, except the _bf16 variants and N128 (its kernel writes BF16 only)
        return f, (t(8, k), t(n, k).t(), t(8, n, dtype=BF16 if bf16_out or n == 128 else F32))
    return build


def _tinygemm(t, fi):
    from flashinfer import gemm

    def f(x, w, out):
        gemm.tinygemm_bf16(x, w, out)
        return out
    return f, (t(8, K), t(N, K), t(8, N))


BUILDERS.update({
    "block_scale_interleave": _block_scale_interleave,
    "e2m1_and_ufp8sf_scale_to_float": _e2m1_to_float,
    "nvfp4_kv_dequantize": _nvfp4_kv_dequantize,
    "scaled_fp4_grouped_quantize": _experts("scaled_fp4_grouped_quantize", True),
    "silu_and_mul_scaled_nvfp4_experts_quantize":
        _experts("silu_and_mul_scaled_nvfp4_experts_quantize", True),
    # SM100 and newer (FlashInfer's checks, inside dynafold's operators): traced as a B200.
    "silu_and_mul_mxfp8_experts_quantize": _blackwell_only(
        _experts("silu_and_mul_mxfp8_experts_quantize")),
    "mxfp8_grouped_quantize": _blackwell_only(_mxfp8_grouped_quantize),
    "nvfp4_batched_quantize": _nvfp4_batched_quantize,
    "mxfp8_quantize_bshd": _mxfp8_bshd,
    "per_token_group_quant_8bit": _per_token_group,
    "make_nvfp4_global_scale": _make_global_scale,
    "mm_bf16": _bf16_gemm("mm_bf16", False),
    "bmm_bf16": _bf16_gemm("bmm_bf16", True),
    "mm_mxfp8": _mm_mxfp8,
    "tinygemm_bf16": _tinygemm,
    **{f"mm_M1_16_K{k}_N{n}{sfx}": _router_gemm(f"mm_M1_16_K{k}_N{n}{sfx}", k, n, bool(sfx))
       for k, n, sfx in [(6144, 256, ""), (7168, 128, ""), (7168, 256, ""), (7168, 256, "_bf16"),
                         (7168, 384, ""), (7168, 384, "_bf16"), (7168, 896, ""),
                         (7168, 896, "_bf16")]},
})


def _groupwise(name, **kw):
    """DeepSeek-style FP8 GEMMs: 1 x 128 activation scales, 128 x 128 weight scales."""
    def build(t, fi):
        from flashinfer import gemm
        a, b = t(M, K, dtype=FP8), t(N, K, dtype=FP8)
        sa, sb = t(K // 128, M, dtype=F32), t(K // 128, N // 128, dtype=F32)
        return (lambda a, b, sa, sb: getattr(gemm, name)(a, b, sa, sb, out_dtype=BF16, **kw),
                (a, b, sa, sb))
    return build


def _fp8_blockscale_sm90(t, fi):
    from flashinfer import gemm
    return (lambda x, w, sw: gemm.fp8_blockscale_gemm_sm90(x, w, None, sw, out_dtype=BF16),
            (t(M, K), t(N, K, dtype=FP8), t(N // 128, K // 128, dtype=F32)))


def _group_groupwise(t, fi):
    from flashinfer import gemm
    a, b = t(M, K, dtype=FP8), t(2, N, K, dtype=FP8)
    sa, sb = t(K // 128, M, dtype=F32), t(2, K // 128, N // 128, dtype=F32)
    indptr = torch.tensor([0, M // 2, M], device="cuda", dtype=torch.int32)
    return (lambda a, b, sa, sb, i: gemm.group_gemm_fp8_nt_groupwise(a, b, sa, sb, i,
                                                                     out_dtype=BF16),
            (a, b, sa, sb, indptr))


BUILDERS.update({
    "gemm_fp8_nt_groupwise": _groupwise("gemm_fp8_nt_groupwise", scale_major_mode="MN"),
    "gemm_fp8_nt_blockscaled": _groupwise("gemm_fp8_nt_blockscaled"),
    "fp8_blockscale_gemm_sm90": _fp8_blockscale_sm90,
    "group_gemm_fp8_nt_groupwise": _group_groupwise,
})


# --- Blackwell block-scaled GEMMs (SGLang/vLLM MXFP8/NVFP4 linear and MoE layers) ---

def _swizzled_sf_len(rows, k, vec):
    """Bytes of a 128x4-swizzled block-scale buffer: rows padded to 128, scale columns to 4."""
    return -(-rows // 128) * 128 * -(-(k // vec) // 4) * 4


def _bmm_mxfp8(t, fi):
    # B as the docstring asks: the [b, n, k] weight quantized, passed transposed (column major)
    b = 2
    return (lambda a, w, sa, sw: fi.bmm_mxfp8(a, w, sa, sw, BF16, backend="cudnn"),
            (t(b, M, K, dtype=FP8), t(b, N, K, dtype=FP8).transpose(-2, -1),
             t(b * _swizzled_sf_len(M, K, 32), dtype=U8),
             t(b * _swizzled_sf_len(N, K, 32), dtype=U8)))


def _mm_bf16_fp4(backend):
    """W4A16 (SGLang modelopt/compressed-tensors): the weight prepared once at load for the
    backend (prepare_bf16_fp4_weights), the call per forward. Every backend but
    cute-dsl-native, which is SM12x's."""
    def build(t, fi):
        w, sf, alpha = fi.prepare_bf16_fp4_weights(
            t(N, K // 2, dtype=U8), t(_swizzled_sf_len(N, K, 16), dtype=U8), t(1, dtype=F32),
            backend=backend)
        return (lambda x, w, sf, alpha: fi.mm_bf16_fp4(x, w, sf, alpha, backend=backend,
                                                       out_dtype=BF16),
                (t(M, K), w, sf, alpha))
    return build


def _bf16_fp4_backends(fi):
    """The release's backends (0.6.16 has cuDNN and the CuTe DSL only)."""
    import inspect
    import typing
    annotation = inspect.signature(fi.mm_bf16_fp4).parameters["backend"].annotation
    return [b for b in typing.get_args(annotation) if b != "cute-dsl-native"]


def _grouped_mm_fp4(t, fi):
    e = 2
    indptr = torch.tensor([0, M // 2, M], device="cuda", dtype=torch.int32)
    return (lambda a, b, sa, sb, i, alpha: fi.grouped_mm_fp4(a, b, sa, sb, i, alpha),
            (t(M, K // 2, dtype=U8), t(e, N, K // 2, dtype=U8), t(M, K // 16, dtype=FP8),
             t(e, N, K // 16, dtype=FP8), indptr, t(1, dtype=F32)))


def _grouped_mm_mxfp8(t, fi):
    e = 2
    indptr = torch.tensor([0, M // 2, M], device="cuda", dtype=torch.int32)
    return (lambda a, b, sa, sb, i: fi.grouped_mm_mxfp8(a, b, sa, sb, i),
            (t(M, K, dtype=FP8), t(e, N, K, dtype=FP8), t(M, K // 32, dtype=U8),
             t(e, N, K // 32, dtype=U8), indptr))


def _grouped_gemm_nt_masked(t, fi):
    """SGLang's CuTe DSL masked MoE (flashinfer_cutedsl_moe.py): NVFP4 activations and
    weights laid out [m, k/2, experts] / [n, k/2, experts], output [m, n, experts]."""
    from flashinfer import gemm
    e, m, n, k = 4, 128, 256, 256
    mask = torch.full((e,), m, device="cuda", dtype=torch.int32)

    def f(a, a_sf, w, w_sf, out, mask, alpha):
        gemm.grouped_gemm_nt_masked((a, a_sf), (w.permute(1, 2, 0), w_sf), out, mask,
                                    ab_dtype="float4_e2m1fn", sf_dtype="float8_e4m3fn",
                                    c_dtype="bfloat16", sf_vec_size=16,
                                    alpha=alpha.view(1, 1, e), alpha_dtype="float32")
        return out
    return f, (t(e, m, k // 2, dtype=U8).permute(1, 2, 0),
               t(e, _swizzled_sf_len(m, k, 16), dtype=FP8),
               t(e, n, k // 2, dtype=U8), t(e, _swizzled_sf_len(n, k, 16), dtype=FP8),
               t(e, m, n).permute(1, 2, 0), mask, t(e, dtype=F32))


def _tgv_gemm(t, fi):
    # b (K, N) column major: the (N, K) weight transposed
    return (lambda a, b, bias: fi.tgv_gemm_sm100(a, b, bias),
            (t(M, K), t(N, K).t(), t(N)))


BUILDERS.update({
    "bmm_mxfp8": _bmm_mxfp8,
    "mm_bf16_fp4": lambda t, fi: {b: _mm_bf16_fp4(b)(t, fi) for b in _bf16_fp4_backends(fi)},
    "grouped_mm_fp4": _grouped_mm_fp4,
    "grouped_mm_mxfp8": _grouped_mm_mxfp8,
    "grouped_gemm_nt_masked": _grouped_gemm_nt_masked,
    "tgv_gemm_sm100": _tgv_gemm,
})


# --- DeepGEMM-style FP8 MoE GEMMs: 1 x 128 activation scales, 128 x 128 weight scales ---

E = 2  # experts


def _m_indices():
    return torch.cat([torch.zeros(M // 2, device="cuda", dtype=torch.int32),
                      torch.ones(M // 2, device="cuda", dtype=torch.int32)])


def _group_deepgemm(name, **kw):
    def build(t, fi):
        from flashinfer import gemm
        return (lambda a, b, sa, sb, idx: getattr(gemm, name)(a, b, sa, sb, idx,
                                                              out_dtype=BF16, **kw),
                (t(M, K, dtype=FP8), t(E, N, K, dtype=FP8), t(M, K // 128, dtype=F32),
                 t(E, N // 128, K // 128, dtype=F32), _m_indices()))
    return build


def _batch_deepgemm(t, fi):
    from flashinfer import gemm
    mask = torch.full((E,), M // 2, device="cuda", dtype=torch.int32)
    return (lambda a, b, sa, sb, mask: gemm.batch_deepgemm_fp8_nt_groupwise(
                a, b, sa, sb, mask, M // 2, out_dtype=BF16),
            (t(E, M, K, dtype=FP8), t(E, N, K, dtype=FP8), t(E, M, K // 128, dtype=F32),
             t(E, N // 128, K // 128, dtype=F32), mask))


def _group_gemm_mxfp4(t, fi):
    from flashinfer import gemm
    indptr = torch.tensor([0, M // 2, M], device="cuda", dtype=torch.int32)
    # a_scale: each group's rows (64 here) padded to the 128-row tile
    m_pad = E * 128
    return (lambda a, b, sa, sb, i: gemm.group_gemm_mxfp4_nt_groupwise(a, b, sa, sb, i,
                                                                       out_dtype=BF16),
            (t(M, K, dtype=FP8), t(E, N, K // 2, dtype=U8), t(m_pad, K // 32, dtype=U8),
             t(E, N, K // 32, dtype=U8), indptr))


def _group_gemm_nvfp4(t, fi):
    from flashinfer import gemm
    indptr = torch.tensor([0, M // 2, M], device="cuda", dtype=torch.int32)
    m_pad = E * 128
    return (lambda a, b, sa, sb, i, alpha: gemm.group_gemm_nvfp4_nt_groupwise(
                a, b, sa, sb, i, alpha, out_dtype=BF16),
            (t(M, K // 2, dtype=U8), t(E, N, K // 2, dtype=U8), t(m_pad, K // 16, dtype=U8),
             t(E, N, K // 16, dtype=U8), indptr, t(E, dtype=F32)))


BUILDERS.update({
    "group_deepgemm_fp8_nt_groupwise": _group_deepgemm("group_deepgemm_fp8_nt_groupwise"),
    "group_gemm_fp8_nt_groupwise_contiguous":
        _group_deepgemm("group_gemm_fp8_nt_groupwise_contiguous"),
    "batch_deepgemm_fp8_nt_groupwise": _batch_deepgemm,
    "group_gemm_mxfp4_nt_groupwise": _group_gemm_mxfp4,
    "group_gemm_nvfp4_nt_groupwise": _group_gemm_nvfp4,
})


# --- Cake generated programs (SM100): prepared at load time, launched per forward ---

def _cake_contiguous(t, fi):
    from flashinfer.gemm import cake_grouped_fp8_gemm as cake
    a, sa, idx = t(M, K, dtype=FP8), t(M, K // 128, dtype=F32), _m_indices()
    plan = cake.prepare_group_gemm_fp8_nt_groupwise_contiguous(
        a, t(E, N, K, dtype=FP8), sa, t(E, N // 128, K // 128, dtype=F32), idx)
    # per forward: this step's activations, scales, routing and output rebound (a plan kept
    # per layer launches on the dispatcher's buffers; without `out` launch returns the output
    # bound at preparation, the prepared object's own)
    return (lambda a, sa, idx, out: plan.launch(a, sa, idx, out),
            (a, sa, idx, t(M, N, dtype=BF16)))


def _cake_silu_quant(t, fi):
    from flashinfer.gemm import cake_grouped_fp8_fused_silu_quant as cake
    k, n2 = 512, 256  # K a multiple of 512, 2H of 256
    a, sa, idx = t(M, k, dtype=FP8), t(M, k // 128, dtype=F32), _m_indices()
    h = n2 // 2
    # prepare() launches its small-M grouped GEMM once, on a CUDA stream (the driver, none
    # here): the prepared object as prepare() returns it, with no programs bound (a trace
    # never runs them; dynafold's operator calls launch() at run time).
    plan = cake.PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant(
        route="stand-in", module_name="", grid=(1, 1, 1), out_q=t(M, h, dtype=FP8),
        out_s=t(M, h // 128, dtype=F32), gemm_backend=None, stage_module_names={},
        stage_grids={}, m=M, n2=n2, k=k, fill_padding=False, _entries=(), _gemm=None,
        _gemm_out=None, _padding_source=None, _padding_scratch=None)
    # per forward: the dispatcher's activations, scales, routing and both outputs rebound
    return (lambda a, sa, idx, q, s: plan.launch(a, sa, idx, q, s),
            (a, sa, idx, t(M, h, dtype=FP8), t(M, h // 128, dtype=F32)))


def _kimi_projection(t, fi):
    from flashinfer import gemm
    prepared = gemm.prepare_kimi_k3_fp8_projection_weights(
        t(N, K, dtype=FP8), t(N // 128, K // 128, dtype=F32))
    return lambda x: gemm.kimi_k3_fp8_projection(x, prepared), (t(M, K),)


def _mm_fp8_lora(t, fi):
    r = 64
    return (lambda a, b, sa, sb, d, lb, s: fi.mm_fp8_lora(a, b, sa, sb, d, lb, s),
            (t(M, K, dtype=FP8), t(N, K, dtype=FP8), t(1, dtype=F32), t(1, dtype=F32),
             t(M, r), t(N, r), t(1, dtype=F32)))


def _mm_nvfp4_lora(t, fi):
    r = 64
    return (lambda a, b, sa, sb, alpha, d, lb, s: fi.mm_nvfp4_lora(a, b, sa, sb, alpha, d,
                                                                   lb, s),
            (t(M, K // 2, dtype=U8), t(N, K // 2, dtype=U8),
             t(_swizzled_sf_len(M, K, 16), dtype=U8), t(_swizzled_sf_len(N, K, 16), dtype=U8),
             t(1, dtype=F32), t(M, r), t(N, r), t(1, dtype=F32)))


BUILDERS.update({
    "PreparedGroupGemmFp8NtGroupwiseContiguous.launch": _cake_contiguous,
    "PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch": _cake_silu_quant,
    "kimi_k3_fp8_projection": _kimi_projection,
    "mm_fp8_lora": _mm_fp8_lora,
    "mm_nvfp4_lora": _mm_nvfp4_lora,
})


# --- SVDQuant (NVFP4 residual + rank-r BF16 correction; SGLang's diffusion nunchaku path) ---

R = 32  # LoRA rank


def _nvfp4_quantize_smooth(t, fi):
    return (lambda x, pqs, g: fi.nvfp4_quantize_smooth(x, pqs, g),
            (t(M, K), t(K), t(1, dtype=F32)))


def _mm_nvfp4_svdquant(t, fi):
    return (lambda a, b, sa, sb, alpha, d, l1: fi.mm_nvfp4_svdquant(a, b, sa, sb, alpha, d, l1),
            (t(M, K // 2, dtype=U8), t(N, K // 2, dtype=U8),
             t(_swizzled_sf_len(M, K, 16), dtype=U8), t(_swizzled_sf_len(N, K, 16), dtype=U8),
             t(1, dtype=F32), t(M, R), t(N, R)))


def _svdquant_linear(t, fi):
    return (lambda x, w, sw, alpha, pqs, l2t, l1, g: fi.svdquant_linear(x, w, sw, alpha, pqs,
                                                                       l2t, l1, g),
            (t(M, K), t(N, K // 2, dtype=U8), t(_swizzled_sf_len(N, K, 16), dtype=U8),
             t(1, dtype=F32), t(K), t(K, R), t(N, R), t(1, dtype=F32)))


BUILDERS.update({
    "nvfp4_quantize_smooth": _nvfp4_quantize_smooth,
    "mm_nvfp4_svdquant": _mm_nvfp4_svdquant,
    "svdquant_linear": _svdquant_linear,
})


# --- Quantizers: the CuTe DSL kernels, the NVFP4 paged KV cache, CSF scales ---

def _cute_dsl_quantize(name, *extra):
    def build(t, fi):
        from flashinfer import quantization
        scale = tuple(t(1, dtype=F32) for _ in extra)
        return (lambda x, *s: getattr(quantization, name)(x, *s, enable_pdl=False),
                (t(M, K), *scale))
    return build


def _nvfp4_quantize_paged_kv(t, fi):
    # HND [pages, kv_heads, page_size, head_dim], the global scales given (a serving cache
    # is calibrated; without them FlashInfer reads the amax back to the host)
    pages, heads, page, dim = 4, 2, 16, 128
    return (lambda k, v, gk, gv: fi.nvfp4_quantize_paged_kv_cache(k, v, "HND", gk, gv),
            (t(pages, heads, page, dim), t(pages, heads, page, dim), t(1, dtype=F32),
             t(1, dtype=F32)))


def _nvfp4_kv_dequantize_paged(t, fi):
    pages, page, heads, dim, batch = 8, 16, 2, 128, 2
    tables = torch.arange(8, device="cuda", dtype=torch.int32).view(batch, 4)
    lens = torch.full((batch,), 4 * page, device="cuda", dtype=torch.int32)

    def f(k, v, sk, sv, tables, lens, ks, vs, ok, ov):
        fi.nvfp4_kv_dequantize_paged((k, v), (sk, sv), tables, lens, ks, vs, ok, ov)
        return ok, ov
    cache, sf = (pages, page, heads, dim // 2), (pages, page, heads, dim // 16)
    out = (batch, 4 * page, heads, dim)
    return f, (t(*cache, dtype=U8), t(*cache, dtype=U8), t(*sf, dtype=FP8), t(*sf, dtype=FP8),
               tables, lens, t(1, dtype=F32), t(1, dtype=F32), t(*out), t(*out))


def _expand_csf_scales(t, fi):
    """MoE block scales kept CSF-compressed; expanded per forward for the routed experts."""
    from flashinfer import quantization
    e, rows, cols = 4, 128, 16
    csf = quantization.CsfScales(t(e, rows // 16, 16 * (1 + cols // 2), dtype=U8),
                                 t(64, dtype=torch.uint32),
                                 t(e * rows // 16 + 1, dtype=torch.int32), rows, cols)

    def f(fixed, exc, offs, out, experts):
        quantization.expand_csf_scales(quantization.CsfScales(fixed, exc, offs, rows, cols),
                                       out, experts)
        return out
    return f, (csf.fixed, csf.exceptions, csf.exc_offsets, t(e, rows, cols, dtype=FP8),
               torch.zeros(8, 2, device="cuda", dtype=torch.int32))


BUILDERS.update({
    "mxfp4_quantize_cute_dsl": _cute_dsl_quantize("mxfp4_quantize_cute_dsl"),
    "mxfp8_quantize_cute_dsl": _cute_dsl_quantize("mxfp8_quantize_cute_dsl"),
    "nvfp4_quantize_cute_dsl": _cute_dsl_quantize("nvfp4_quantize_cute_dsl", True),
    "nvfp4_quantize_per_token_cute_dsl": _cute_dsl_quantize("nvfp4_quantize_per_token_cute_dsl",
                                                            True),
    "nvfp4_quantize_paged_kv_cache": _nvfp4_quantize_paged_kv,
    "nvfp4_kv_dequantize_paged": _nvfp4_kv_dequantize_paged,
    "expand_csf_scales": _expand_csf_scales,
})

