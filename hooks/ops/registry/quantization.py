"""Quantization: FP4, MXFP4, MXFP8 and FP8 quantizers, their scale layouts."""

import torch

from _dynafold_ops.engine.record import PLANS, Correction, Declare, Fake, Family, Fresh, Op, Sweep
from _dynafold_ops.registry._shapes import _round_up

OPS = []


def _fp4_quantize_sm100(values):
    """`fp4_quantize_sm100`'s results as its wrapper allocates them: packed values
    (*shape[:-1], K/2) uint8; scale factors 1-D uint8, rows padded to 128 (8 for the 8x4 layout)
    and columns to 4 when swizzled, M * K / sf_vec_size otherwise. (FlashInfer's own fake gives
    int64/int32 tensors of the unswizzled size, and lacks parameters added since.)"""
    input = values["input"]
    k = input.shape[-1]
    m = input.numel() // k
    sf_vec_size = values["sf_vec_size"]
    if values["is_sf_swizzled_layout"]:
        rows = 8 if values.get("is_sf_8x4_layout", False) else 128
        sf_size = _round_up(m, rows) * _round_up(k // sf_vec_size, 4)
    else:
        sf_size = m * k // sf_vec_size
    return (input.new_empty((*input.shape[:-1], k // 2), dtype=torch.uint8),
            input.new_empty((sf_size,), dtype=torch.uint8))


OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp4_quantization",
    function="get_fp4_quantization_module.<locals>.fp4_quantize_sm100",
    name="flashinfer::fp4_quantize_sm100",
    fake=Fake(_fp4_quantize_sm100, ("input", "sf_vec_size", "is_sf_swizzled_layout")),
))


def _block_scale_interleave_sm100(values):
    """As its kernel wrapper allocates (0.6.16-0.7.x): per expert (a 3-D input) the rows padded
    to 128 and the columns to 4, flattened, in the input's dtype. (FlashInfer's fake gives
    rows * columns / 16 bytes of uint8.)"""
    sf = values["unswizzled_sf"]
    experts = sf.shape[0] if sf.dim() == 3 else 1
    size = _round_up(sf.shape[-2], 128) * _round_up(sf.shape[-1], 4)
    return sf.new_empty((experts * size,), dtype=sf.dtype)


OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp4_quantization",
    function="get_fp4_quantization_module.<locals>.block_scale_interleave_sm100",
    name="flashinfer::block_scale_interleave_sm100",
    fake=Fake(_block_scale_interleave_sm100, ("unswizzled_sf",)),
))


def _silu_and_mul_scaled_nvfp4_experts_quantize_sm100(values):
    """As its kernel wrapper returns them (0.6.16-0.7.x): the packed values (M, K/2, experts)
    and the scales (32, 4, M/128, 4, K/64, experts) in e4m3, both permuted views of
    expert-major buffers. (FlashInfer's fake leaves the values unpermuted.)"""
    input = values["input"]
    experts, m, k_by_2 = input.shape
    k = k_by_2 // 2
    padded_k = _round_up(k // 16, 4)
    padded_m = _round_up(m, 128)
    output = input.new_empty((experts, m, k // 2), dtype=torch.uint8).permute(1, 2, 0)
    scales = input.new_empty((experts, padded_m, padded_k // 4), dtype=torch.int32)
    scales = scales.view(torch.float8_e4m3fn).view(
        experts, padded_m // 128, padded_k // 4, 32, 4, 4).permute(3, 4, 1, 5, 2, 0)
    return output, scales


OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp4_quantization",
    function="get_fp4_quantization_module.<locals>.silu_and_mul_scaled_nvfp4_experts_quantize_sm100",
    name="flashinfer::silu_and_mul_scaled_nvfp4_experts_quantize_sm100",
    fake=Fake(_silu_and_mul_scaled_nvfp4_experts_quantize_sm100, ("input",)),
))


def _mxfp8_quantize_sm100(values):
    """`mxfp8_quantize_sm100`'s `(values, scales)` as its body allocates them (0.6.3-0.7.4),
    `sf_swizzle_layout` compared as FlashInfer's SfLayout ints (128x4 = 0, 8x4 = 1, linear = 2);
    0.6.3 (flashinfer/fp8_quantization.py) has the bool `is_sf_swizzled_layout` instead, True
    being 128x4 and False linear. On a GPU: float8_e4m3fn values (*shape[:-1], K rounded up to
    `alignment`) and 1-D uint8 scales, rows padded to 128 (8) and K/32 columns to 4 when
    swizzled, M * K/32 when linear. On the CPU (the host kernel): uint8 values of the input's
    shape, scales as above on the unpadded K (no 8x4 there). (FlashInfer's fake gives
    int64/int32 of other sizes and lacks `enable_pdl`.)"""
    input = values["input"]
    if "sf_swizzle_layout" in values:
        layout = int(values["sf_swizzle_layout"])
    else:
        layout = 0 if values["is_sf_swizzled_layout"] else 2
    k = input.shape[-1]
    if input.device.type == "cpu":
        m, padded_k = input.shape[0], k
        quantized = input.new_empty(input.shape, dtype=torch.uint8)
    else:
        m, padded_k = input.numel() // k, _round_up(k, values["alignment"])
        quantized = input.new_empty((*input.shape[:-1], padded_k), dtype=torch.float8_e4m3fn)
    if layout == 2:
        size = (input.numel() // 32 if input.device.type == "cpu" else m * padded_k // 32)
    else:
        size = _round_up(m, 128 if layout == 0 else 8) * _round_up(padded_k // 32, 4)
    return quantized, input.new_empty((size,), dtype=torch.uint8)


OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp8_quantization",
    function="get_mxfp8_quantization_sm100_module.<locals>.mxfp8_quantize_sm100",
    name="flashinfer::mxfp8_quantize_sm100",
    # Its layout parameter is read by either name (0.6.3's bool, later SfLayout).
    fake=Fake(_mxfp8_quantize_sm100, ("input", "alignment")),
))


def _fp4_quantize_cute_dsl(values):
    """`_fp4_quantize_cute_dsl`'s results (FlashInfer 0.6.16-0.7.x, NVFP4 and MXFP4 kernels):
    packed values (M, K/2) uint8 (inputs of more dimensions come back 2-D); scale factors
    (rows, columns) uint8, K/sf_vec_size columns padded to 4 and rows padded to 128 (8 for the
    8x4 layout) when swizzled, (M, K/sf_vec_size) otherwise. The same on every path its kernels
    take (TMA or not, 4over6 or not), with one exception the fake check catches at first run:
    0.6.16/0.7.0's NVFP4 TMA kernel, reached only with FLASHINFER_NVFP4_QUANTIZE_USE_TMA=1,
    pads the 8x4 layout's rows to 16."""
    input = values["input"]
    k = input.shape[-1]
    m = input.numel() // k
    columns = k // values["sf_vec_size"]
    if not values["is_sf_swizzled_layout"]:
        rows = m
    else:
        rows = _round_up(m, 8 if values.get("is_sf_8x4_layout", False) else 128)
        columns = _round_up(columns, 4)
    return (input.new_empty((m, k // 2), dtype=torch.uint8),
            input.new_empty((rows, columns), dtype=torch.uint8))


# fp4_quantize(..., backend="cute-dsl") -> _fp4_quantize_cute_dsl (0.6.16 on, SM100; SGLang selects
# it there): is_cute_dsl_available() (importlib), per-call environment reads and a CuTe DSL kernel
# compiled at call time (file locks), then a tvm_ffi launch. Its fake is the record's; 0.7.2's
# `nvfp4_4over6` recipe object is narrowed to None (off).
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp4_quantization",
    function="_fp4_quantize_cute_dsl",
    name="flashinfer::fp4_quantize_cute_dsl",
    declare=Declare(),
    # dynafold's own declaration.
    fake=Fake(
        _fp4_quantize_cute_dsl,
        ("input", "sf_vec_size", "is_sf_swizzled_layout", "is_sf_8x4_layout"),
    ),
))


def _cute_dsl_fp4(sf_vec_size, silu_and_mul):
    def fake(values):
        """The NVFP4/MXFP4 CuTe DSL drivers' results as they allocate them (0.6.16-0.7.4;
        `silu_and_mul_nvfp4_quantize_cute_dsl`, `mxfp4_quantize_cute_dsl`): the input (...,
        K) ((..., 2K) for SwiGLU) flattened to M rows; packed values (M, K/2) uint8; scales
        (rows, columns) uint8, K/sf_vec_size columns, padded to 4 and the rows to 128 (8 for
        the 8x4 layout) unless the layout is linear (`sf_layout` 2). `nvfp4_quantize_cute_dsl`
        the same on its TMA and vector paths (a linear TMA result is cut back to M rows)."""
        input = values["input"]
        k = input.shape[-1] // 2 if silu_and_mul else input.shape[-1]
        m = 1
        for size in input.shape[:-1]:
            m *= size
        columns = k // sf_vec_size
        layout = values["sf_layout"]
        if layout == 2:
            rows = m
        else:
            rows = _round_up(m, 8 if layout == 1 else 128)
            columns = _round_up(columns, 4)
        return (input.new_empty((m, k // 2), dtype=torch.uint8),
                input.new_empty((rows, columns), dtype=torch.uint8))
    return fake


# silu_and_mul_nvfp4_quantize (0.6.16 on, SM100; SwiGLU then NVFP4) ->
# silu_and_mul_nvfp4_quantize_cute_dsl, the CuTe DSL driver: it clones the input when its data_ptr()
# is not 16-byte aligned (no trace can read an address), reads the environment and compiles its
# kernel at call time (file locks), then launches it. The driver allocates both results and the
# kernel writes only them (docs/op-audit); its fake is the record's. The resolved "4over6" recipe
# (0.7.2 on) is narrowed to None (off), which the public function passes when the recipe is off.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.nvfp4_quantize",
    function="silu_and_mul_nvfp4_quantize_cute_dsl",
    name="flashinfer::silu_and_mul_nvfp4_quantize_cute_dsl",
    declare=Declare(),
    # dynafold's own declaration of silu_and_mul_nvfp4_quantize's CuTe DSL driver.
    fake=Fake(_cute_dsl_fp4(16, True), ("input", "sf_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))


def _silu_and_mul_mxfp8_quantize(backward):
    def fake(values):
        """`silu_and_mul_mxfp8_quantize(_backward)`'s `(row_output, col_output, row_scales,
        col_scales)` as `empty_outputs`/`logical_outputs` give them (0.7.2, 0.7.4): (M, N)
        float8_e4m3fn row-major and column-major (strides (1, M)) values, N = K forward and 2K
        backward; E8M0 scales (M, N/32) and (N * M/32,); a disabled orientation's pair
        zero-size."""
        gated_input = values["gated_input"]
        m, n = gated_input.shape[0], gated_input.shape[1]
        if not backward:
            n = n // 2
        rowwise, colwise = values["rowwise"], values["colwise"]
        fp8, e8m0 = torch.float8_e4m3fn, torch.float8_e8m0fnu
        empty = gated_input.new_empty
        row_output = empty((m, n), dtype=fp8) if rowwise else empty(0, dtype=fp8)
        col_output = (empty((n, m), dtype=fp8).t() if colwise else empty(0, dtype=fp8))
        row_scales = empty((m, n // 32), dtype=e8m0) if rowwise else empty(0, dtype=e8m0)
        col_scales = empty((n * (m // 32),), dtype=e8m0) if colwise else empty(0, dtype=e8m0)
        return row_output, col_output, row_scales, col_scales
    return fake


# silu_and_mul_mxfp8_quantize and its backward (0.7.2 on, SM100 family): the public function's
# argument checks read gated_input's (and grad_output's) data_ptr() alignment before the kernel, in
# the public body (0.7.2) or in the Cake backend it calls, outside FlashInfer's own declaration,
# which 0.7.4 no longer calls (cake_gated_act_mxfp8_backend: per-call program choice and loading).
# So the public function is the boundary. Its four results are fresh (empty_outputs), the kernel
# writes only them (docs/op-audit); the fake is the record's. Named `_public`: FlashInfer declares
# the plain names.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.gated_act_mxfp8",
    function="silu_and_mul_mxfp8_quantize",
    name="flashinfer::silu_and_mul_mxfp8_quantize_public",
    declare=Declare(),
    # dynafold's own declarations of the public fused SwiGLU MXFP8 quantizers.
    fake=Fake(_silu_and_mul_mxfp8_quantize(False), ("gated_input", "rowwise", "colwise")),
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.gated_act_mxfp8",
    function="silu_and_mul_mxfp8_quantize_backward",
    name="flashinfer::silu_and_mul_mxfp8_quantize_backward_public",
    declare=Declare(),
    fake=Fake(_silu_and_mul_mxfp8_quantize(True), ("gated_input", "rowwise", "colwise")),
    sweep=Sweep(equal=("0.7.4",)),
))


def _mxfp8_experts(silu_and_mul):
    def fake(values):
        """0.7.4's masked MXFP8 experts quantizers' `(x_q, sf)` (`_mxfp8_experts_outputs`,
        `_to_masked_gemm_layout`; the cuTile and Cake ops allocate the same): for `a` (B, M,
        K) (2K with SwiGLU), float8_e4m3fn (B, M, padded_K) seen as (M, padded_K, B) and
        uint8 (B, padded_M, padded_K/32) seen as (32, 4, padded_M/128, 4, padded_K/128, B),
        K and M padded to 128."""
        a = values["a"]
        b, m, k = a.shape
        if silu_and_mul:
            k = k // 2
        padded_k, padded_m = _round_up(k, 128), _round_up(m, 128)
        x_q = a.new_empty((b, m, padded_k), dtype=torch.float8_e4m3fn).permute(1, 2, 0)
        sf = a.new_empty((b, padded_m, padded_k // 32), dtype=torch.uint8)
        sf = sf.view(b, padded_m // 128, padded_k // 128, 32, 4, 4).permute(3, 4, 1, 5, 2, 0)
        return x_q, sf
    return fake


# 0.7.4's masked MXFP8 experts quantizers (SM100; the MoE's grouped GEMM operands): the public body
# checks `a`'s data_ptr() alignment (silu_and_mul_mxfp8_experts_quantize always,
# mxfp8_grouped_quantize for backend="cuda") before FlashInfer's declared op, and
# mxfp8_grouped_quantize picks its backend (cuTile, Cake or CUDA, each its own operator or program)
# in that body. So the public function is the boundary. Every backend returns fresh (x_q, sf) of one
# layout and writes nothing else (docs/op-audit); the fake is the record's. mxfp8_grouped_quantize's
# schema says its Literal `backend` as a str (0.7.2's (a, mask, backend) takes it too; 0.6.16's has
# no backend and keeps its path). Named `_public`: FlashInfer declares the plain
# mxfp8_grouped_quantize (its cuTile op).
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp8_quantization",
    function="silu_and_mul_mxfp8_experts_quantize",
    name="flashinfer::silu_and_mul_mxfp8_experts_quantize_public",
    declare=Declare(),
    # dynafold's own declarations of 0.7.4's public masked MXFP8 experts quantizers.
    fake=Fake(_mxfp8_experts(True), ("a",)),
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp8_quantization",
    function="mxfp8_grouped_quantize",
    name="flashinfer::mxfp8_grouped_quantize_public",
    declare=Declare(schema="(Tensor a, Tensor mask, str backend=\"cutile\") -> (Tensor, Tensor)"),
    fake=Fake(_mxfp8_experts(False), ("a",)),
    sweep=Sweep(equal=("0.7.4",)),
))


def _mxfp8_quantize_cute_dsl(values):
    """`mxfp8_quantize_cute_dsl`'s results as it allocates them (0.6.11.post1-0.7.4): the input
    (..., K) flattened to M rows, K rounded up to `alignment`; float8_e4m3fn values (M,
    padded_K); 1-D uint8 scales, padded_K/32 columns padded to 4 and the rows to 128 (8 for the
    8x4 layout, 0.6.16's `is_sf_8x4_layout`; 0.6.11.post1 has 128x4 alone) when swizzled,
    M * padded_K/32 otherwise."""
    input = values["input"]
    k = input.shape[-1]
    m = 1
    for size in input.shape[:-1]:
        m *= size
    padded_k = _round_up(k, values["alignment"])
    if values["is_sf_swizzled_layout"]:
        rows = _round_up(m, 8 if values.get("is_sf_8x4_layout", False) else 128)
        size = rows * _round_up(padded_k // 32, 4)
    else:
        size = m * (padded_k // 32)
    return (input.new_empty((m, padded_k), dtype=torch.float8_e4m3fn),
            input.new_empty((size,), dtype=torch.uint8))


# The public MXFP4 and MXFP8 CuTe DSL quantizers (flashinfer.quantization, 0.6.16 on, SM100; the
# MXFP8 one from 0.6.11.post1, before `is_sf_8x4_layout`, which its fake reads where given): each
# compiles its kernel at call time (cute.compile, source formatting and hashing, file locks),
# mxfp8's 0.7.x body also clones an input whose data_ptr() is not 16-byte aligned (no trace can read
# an address), then launches it. Each allocates its two results and the kernels write only them
# (docs/op-audit); the fakes are the records'.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.mxfp4_quantize",
    function="mxfp4_quantize_cute_dsl",
    name="flashinfer::mxfp4_quantize_cute_dsl",
    declare=Declare(),
    # dynafold's own declarations of the public MXFP4 and MXFP8 CuTe DSL quantizers.
    fake=Fake(_cute_dsl_fp4(32, False), ("input", "sf_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.mxfp8_quantize",
    function="mxfp8_quantize_cute_dsl",
    name="flashinfer::mxfp8_quantize_cute_dsl",
    declare=Declare(),
    fake=Fake(
        _mxfp8_quantize_cute_dsl,
        ("input", "alignment", "is_sf_swizzled_layout"),
    ),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))


def _nvfp4_quantize_per_token_cute_dsl(values):
    """`nvfp4_quantize_per_token_cute_dsl`'s (fp4, scales, per-token scales): uint8 [M, K/2],
    uint8 [scale_rows, padded_sf_cols] and float32 [M] (quantization/kernels/nvfp4_quantize.py,
    0.6.16-0.7.4): linear keeps M rows and K/16 columns, 8x4 and 128x4 pad the rows to 8 or
    128 and the columns to 4; 0.7.4's row groups (`rows_per_group` with `sf_rows_per_group`)
    give each group of rows `sf_rows_per_group` scale rows."""
    input, layout = values["input"], values["sf_layout"]
    m, k = input.shape
    sf_cols = k // 16
    if layout == 2:  # SF_LAYOUT_LINEAR
        rows = m
    else:
        tile = 8 if layout == 1 else 128  # SF_LAYOUT_8x4, SF_LAYOUT_128x4
        rows = (m + tile - 1) // tile * tile
        sf_cols = (sf_cols + 3) // 4 * 4
    group, sf_group = values.get("rows_per_group"), values.get("sf_rows_per_group")
    if sf_group is not None:
        rows = (m + group - 1) // group * sf_group
    return (input.new_empty((m, k // 2), dtype=torch.uint8),
            input.new_empty((rows, sf_cols), dtype=torch.uint8),
            input.new_empty((m,), dtype=torch.float32))


# The public per-token NVFP4 CuTe DSL quantizer (0.6.16 on) likewise compiles its kernel at call
# time (source hashing, cute.compile) and launches it in its body. It allocates its three results
# (fp4, block scales, per-token scales; `out_scale` is only read) and the kernel writes only them
# (docs/op-audit); the fake is the record's. Its `nvfp4_4over6` (0.7.x) is narrowed to None, or left
# at its `_UNSET` default ("read the environment"), which FlashInfer's function then gets
# (hooks/ops/engine/narrowing.py variants).
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.nvfp4_quantize",
    function="nvfp4_quantize_per_token_cute_dsl",
    name="flashinfer::nvfp4_quantize_per_token_cute_dsl",
    declare=Declare(),
    fake=Fake(_nvfp4_quantize_per_token_cute_dsl, ("input", "sf_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))

# ... and the public NVFP4 one (0.6.16 on), whose body picks its TMA or vector kernel from shape and
# arch, compiles it and launches it: it allocates both results (or, 0.7.4, writes the caller's `out`
# pair, narrowed to None: hooks/ops/engine/narrowing.py) and the kernels write only them. 0.7.x's
# `global_scale: float | Tensor` gives an operator per member, each with `nvfp4_4over6` None or left
# at `_UNSET`. The fake is the record's.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.nvfp4_quantize",
    function="nvfp4_quantize_cute_dsl",
    name="flashinfer::nvfp4_quantize_cute_dsl",
    declare=Declare(),
    fake=Fake(_cute_dsl_fp4(16, False), ("input", "sf_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))


def _nvfp4_quantize_smooth(values):
    """`nvfp4_quantize_smooth`'s `(xq, sf)`: (m, n/2) uint8 and the 1-D uint8 128x4-swizzled
    scales, m padded to 128 and n/16 to 4 (`_swizzled_sf_size`; the CuTe DSL path's
    (padded m, padded columns) buffer flattened is the same size)."""
    x = values["x"]
    m, n = x.shape
    return (x.new_empty((m, n // 2), dtype=torch.uint8),
            x.new_empty((_round_up(m, 128) * _round_up(n // 16, 4),), dtype=torch.uint8))


OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.gemm.gemm_svdquant",
    function="nvfp4_quantize_smooth",
    name="flashinfer::nvfp4_quantize_smooth",
    declare=Declare(),
    # dynafold's declaration of nvfp4_quantize_smooth: its two results are always fresh (it
    # takes no output buffer); declared so that its `backend` Literal is a str to the schema.
    correction=Correction(fresh_only=Fresh(when={}, results=2)),
    fake=Fake(_nvfp4_quantize_smooth, ("x",)),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _per_token_group_quant_8bit_cuda(values):
    """`_per_token_group_quant_8bit_cuda`'s `(x_q, x_s)` as it allocates them (0.7.4), and
    `per_token_group_quant_8bit_cutile`'s (0.7.2, 0.7.4; its `dst_dtype` None is
    float8_e4m3fn): `x_q` like `x` in `dst_dtype`; float32 scales, (*x.shape[:-1], groups)
    row-major, or with column-major scales (2-D `x` only) the transpose of a (groups, stride)
    buffer's first `tokens` columns, the stride rounded up to 4 when TMA-aligned."""
    x, group_size = values["x"], values["group_size"]
    dtype = values["dst_dtype"]
    x_q = torch.empty_like(x, dtype=torch.float8_e4m3fn if dtype is None else dtype)
    groups = x.shape[-1] // group_size
    if not values["column_major_scales"]:
        return x_q, x.new_empty((*x.shape[:-1], groups), dtype=torch.float32)
    tokens = x.shape[0]
    stride = _round_up(tokens, 4) if values["scale_tma_aligned"] else tokens
    storage = x.new_empty((groups, stride), dtype=torch.float32)
    return x_q, storage[:, :tokens].t()


# Both backends allocate alike (the cuTile one's outputs are the CUDA one's): one fake.
_PER_TOKEN_GROUP_FAKE = Fake(
    _per_token_group_quant_8bit_cuda,
    ("x", "group_size", "dst_dtype", "column_major_scales", "scale_tma_aligned"),
)

# per_token_group_quant_8bit(backend="cuda") (0.7.4) -> _per_token_group_quant_8bit_cuda: its
# argument checks, two fresh outputs and the JIT call, nothing else; the kernel only reads `x`
# (docs/op-audit). Its fake is the record's. 0.7.2 has no such backend.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.fp8_quantization",
    function="_per_token_group_quant_8bit_cuda",
    name="flashinfer::per_token_group_quant_8bit_cuda",
    declare=Declare(),
    # dynafold's own declaration of per_token_group_quant_8bit's CUDA backend.
    fake=_PER_TOKEN_GROUP_FAKE,
    sweep=Sweep(equal=("0.7.4",)),
))

# per_token_group_quant_8bit(backend="cutile") (0.7.2's only backend, 0.7.4's default) ->
# per_token_group_quant_8bit_cutile: a cuTile kernel launched from FlashInfer's Python
# (`ct.launch` on the current stream's handle, a break under compile), after its argument checks
# and two fresh outputs; each program scatters one group's quantized values into `x_q` and its
# scale into `x_s` and reads only `x` (the kernels above the launch in the same file).
OPS.append(Op(
    family=Family.QUANTIZATION,
    module="flashinfer.quantization.kernels.cutile.per_token_group_quant_8bit_cutile",
    function="per_token_group_quant_8bit_cutile",
    name="flashinfer::per_token_group_quant_8bit_cutile",
    declare=Declare(),
    # dynafold's own declaration of per_token_group_quant_8bit's cuTile backend.
    fake=_PER_TOKEN_GROUP_FAKE,
))

# expand_csf_scales (0.7.4) calls its JIT module's tvm_ffi `csf_expand` in its own body
# (`get_quantization_module().csf_expand(...)`, quantization/csf.py), outside any declared op, with
# the matrices held in a CsfScales NamedTuple no schema can take. Under compile the loader gives a
# stand-in whose `csf_expand` is dynafold's declaration (hooks/ops/mechanisms/attention_plans.py);
# the kernel writes only `out`, its view declared mutable.
OPS.append(Op(
    family=Family.QUANTIZATION,
    module=PLANS,
    function="csf_expand",
    name="flashinfer::csf_expand_jit",
    declare=Declare(mutates=("out",)),
    sweep=Sweep(equal=("0.7.4",)),
))
