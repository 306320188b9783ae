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
