"""Quantization (fp4/mxfp4/mxfp8/fp8) and GEMM (bmm_fp8, mm_fp4, mm_fp8, grouped, segment)."""
import torch

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
    return (lambda a, b, alpha: fi.mm_fp8(a, b, alpha),
            (t(M, K, dtype=FP8), t(N, K, dtype=FP8).t(), t(1, dtype=F32)))


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


def _experts(name, *extra):
    """The masked per-expert quantizers (MoE activations): (experts, tokens, hidden) and
    the count of valid tokens per expert."""
    def build(t, fi):
        e, m, h = 4, 128, 512
        mask = torch.full((e,), m, device="cuda", dtype=torch.int32)
        scale = (t(e, dtype=F32),) if extra else ()
        return (lambda a, mask, *s: getattr(fi, name)(a, mask, *s),
                (t(e, m, h), mask, *scale))
    return build


def _nvfp4_batched_quantize(t, fi):
    return lambda a, s: fi.nvfp4_batched_quantize(a, s), (t(4, M, K), t(4, dtype=F32))


def _mxfp8_bshd(t, fi):
    from flashinfer import quantization
    return lambda x: quantization.mxfp8_quantize_bshd(x), (t(2, 64, 4, 128),)


def _per_token_group(t, fi):
    from flashinfer import quantization
    return (lambda x: quantization.per_token_group_quant_8bit(x, 128, dst_dtype=FP8,
                                                              backend="cuda"),
            (t(M, K),))


def _make_global_scale(t, fi):
    return lambda x: fi.make_nvfp4_global_scale(x, False), (t(M, K),)


def _bf16_gemm(name, batched):
    def build(t, fi):
        if batched:
            return (lambda a, b: getattr(fi, name)(a, b), (t(2, M, K), t(2, K, N)))
        return (lambda a, b: getattr(fi, name)(a, b), (t(M, K), t(K, N)))
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
    "silu_and_mul_mxfp8_experts_quantize": _experts("silu_and_mul_mxfp8_experts_quantize"),
    "mxfp8_grouped_quantize": _experts("mxfp8_grouped_quantize"),
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
