"""dynafold's fakes, where FlashInfer's are wrong or missing, by declared name.

Data beside the rules in hooks/dormant_ops.py: each entry is the shape arithmetic of FlashInfer's
own kernel wrapper, written once, and is checked against the kernel at its first real run like
every other fake (hooks/fake_check.py). A fake "by parameter name" takes the declaration's
arguments as a dict, so one rule serves every release's signature of the same kernel (FlashInfer
appends parameters that do not change a result's shape, e.g. `is_global_scale_inversed`,
`nvfp4_4over6_code`).
"""

import functools
import inspect
import sys

import torch


def _round_up(x, m):
    return (x + m - 1) // m * m


def _merge_states(v, s):
    # FlashInfer's own fake allocates on the CPU.
    seq_len, _, num_heads, head_dim = v.size()
    return (v.new_empty(seq_len, num_heads, head_dim),
            s.new_empty(seq_len, num_heads, dtype=torch.float32))


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
        rows = _round_up(m, 8 if values["is_sf_8x4_layout"] else 128)
        columns = _round_up(columns, 4)
    return (input.new_empty((m, k // 2), dtype=torch.uint8),
            input.new_empty((rows, columns), dtype=torch.uint8))


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


def _mxfp8_quantize_cute_dsl(values):
    """`mxfp8_quantize_cute_dsl`'s results as it allocates them (0.6.16-0.7.4): the input
    (..., K) flattened to M rows, K rounded up to `alignment`; float8_e4m3fn values (M,
    padded_K); 1-D uint8 scales, padded_K/32 columns padded to 4 and the rows to 128 (8 for the
    8x4 layout) when swizzled, M * padded_K/32 otherwise."""
    input = values["input"]
    k = input.shape[-1]
    m = 1
    for size in input.shape[:-1]:
        m *= size
    padded_k = _round_up(k, values["alignment"])
    if values["is_sf_swizzled_layout"]:
        rows = _round_up(m, 8 if values["is_sf_8x4_layout"] else 128)
        size = rows * _round_up(padded_k // 32, 4)
    else:
        size = m * (padded_k // 32)
    return (input.new_empty((m, padded_k), dtype=torch.float8_e4m3fn),
            input.new_empty((size,), dtype=torch.uint8))


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


def _rmsnorm_fp4quant(values):
    """`rmsnorm_fp4quant` / `add_rmsnorm_fp4quant`'s `(y_fp4, block_scale)` with no buffers
    given and one scale layout (the only call woken), as their bodies allocate them (0.6.16-
    0.7.4): float4_e2m1fn_x2 (*input.shape[:-1], H/2); scales uint8 for "ue8m0" (the default
    with block_size 32), else float8_e4m3fn: swizzled, flat 512 bytes per 128-row by 4-column
    tile; otherwise (*input.shape[:-1], H/block_size)."""
    input, block_size = values["input"], values["block_size"]
    hidden = input.shape[-1]
    rows = input.numel() // hidden
    scale_format = values["scale_format"] or ("ue8m0" if block_size == 32 else "e4m3")
    scale_dtype = torch.uint8 if scale_format == "ue8m0" else torch.float8_e4m3fn
    columns = hidden // block_size
    y_fp4 = input.new_empty((*input.shape[:-1], hidden // 2), dtype=torch.float4_e2m1fn_x2)
    if values["is_sf_swizzled_layout"]:
        size = _round_up(rows, 128) // 128 * (_round_up(columns, 4) // 4) * 512
        return y_fp4, input.new_empty((size,), dtype=scale_dtype)
    return y_fp4, input.new_empty((*input.shape[:-1], columns), dtype=scale_dtype)


def _mm_fp4(values):
    """`mm_fp4`'s fresh result (no `out` given), as its body allocates it on every backend:
    (a.shape[0], b.shape[1]) of `out_dtype`, contiguous."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[1]), dtype=values["out_dtype"])


def _b12x_fused_moe(values):
    """`b12x_fused_moe`'s fresh result (no `output` given), as its body allocates it
    (0.6.16-0.7.4 cute_dsl/b12x_moe.py): torch.empty((num_tokens, hidden_size), output_dtype),
    num_tokens = token_selected_experts.size(0), hidden_size = x.size(1) (FlashInfer refuses
    any output_dtype but bfloat16)."""
    x = values["x"]
    return x.new_empty((values["token_selected_experts"].size(0), x.size(1)),
                       dtype=values["output_dtype"])


def _bmm_bf16(values):
    """`bmm_bf16`'s fresh result (no `out` given), as its body allocates it (0.6.16-0.7.4):
    (A.shape[0], A.shape[1], B.shape[2]) of `out_dtype`, contiguous."""
    a, b = values["A"], values["B"]
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]), dtype=values["out_dtype"])


def _tgv_gemm_sm100(values):
    """`tgv_gemm_sm100`'s fresh result (no `out` given): (a.shape[0], b.shape[1]), in `a`'s
    dtype for dense bf16/fp16 inputs, in `bias`'s for block-scaled FP4/FP8 ones (0.7.2 on)."""
    a, b = values["a"], values["b"]
    dense = a.dtype in (torch.bfloat16, torch.float16)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=a.dtype if dense else values["bias"].dtype)


def _out_dtype_or_bf16(values):
    return values["out_dtype"] or torch.bfloat16


def _gemm_fp8_nt_groupwise(values):
    """`gemm_fp8_nt_groupwise`'s fresh result (no `out`): (a.shape[0], b.shape[0]), b being
    (n, k), of `out_dtype` or bfloat16 (0.6.16-0.7.4)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[0]), dtype=_out_dtype_or_bf16(values))


def _group_gemm_nt_groupwise(values):
    """The grouped FP8 / MXFP4 / NVFP4 GEMMs' fresh result (no `out`): (cum_m, n) with `b`
    (batch, n, k or k/2), of `out_dtype` or bfloat16 (0.6.16-0.7.4; DeepGEMM's contiguous one
    and 0.7.x's contiguous CuTe DSL one allocate the same)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[1]), dtype=_out_dtype_or_bf16(values))


def _batch_deepgemm_fp8_nt_groupwise(values):
    """`batch_deepgemm_fp8_nt_groupwise`'s fresh result (no `out`): (batch, m, n) with `a`
    (batch, m, k) and `b` (batch, n, k), of `out_dtype` or bfloat16 (0.6.16-0.7.4, both
    backends: gemm_base.py `torch.empty(a.shape[0], a.shape[1], b.shape[1])`)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=_out_dtype_or_bf16(values))


def _cake_lora_gemm(values):
    """0.7.4's `mm_fp8_lora` / `mm_nvfp4_lora` fresh result (no `out`): `_run`'s
    `torch.empty((m, n), dtype=torch.bfloat16)`, m = a.shape[0], n = b.shape[0]
    (gemm/cake_quant_lora_gemm.py)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


def _mm_bf16_fp4(values):
    """`mm_bf16_fp4`'s fresh result (no `out`): (a.shape[0], n) of `out_dtype` or a's dtype,
    n as each backend reads it from its prepared weight: b.shape[1] // 2 for the packed
    [K/tile, 2N] layouts (blackwell-tiled; cute-dsl off the SM100 family, and always on
    0.6.16, which has no `_cute_dsl_uses_sm100_layout`), else b.shape[0] ([N, K/2]: cudnn,
    cute-dsl on SM100/103/107, cute-dsl-native, blackwell-native)."""
    a, b, backend = values["a"], values["b"], values["backend"]
    packed = backend == "blackwell-tiled"
    if backend == "cute-dsl":
        uses_sm100 = getattr(sys.modules["flashinfer.gemm.gemm_bf16_fp4"],
                             "_cute_dsl_uses_sm100_layout", None)
        if uses_sm100 is None:
            packed = True
        else:
            from flashinfer.utils import get_compute_capability
            packed = not uses_sm100(*get_compute_capability(a.device))
    n = b.shape[1] // 2 if packed else b.shape[0]
    return a.new_empty((a.shape[0], n), dtype=values["out_dtype"] or a.dtype)


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


def _fp8_blockscale_gemm_sm90(values):
    """`fp8_blockscale_gemm_sm90`'s fresh result (no `out`): (M, N) of `out_dtype` or
    bfloat16, `weight` being (N, K)."""
    input, weight = values["input"], values["weight"]
    return input.new_empty((input.shape[0], weight.shape[0]), dtype=_out_dtype_or_bf16(values))


def _mm_nvfp4_svdquant(values):
    """`mm_nvfp4_svdquant`'s fresh result (no `out`): (a.shape[0], b.shape[0]) bfloat16."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


def _nvfp4_quantize_smooth(values):
    """`nvfp4_quantize_smooth`'s `(xq, sf)`: (m, n/2) uint8 and the 1-D uint8 128x4-swizzled
    scales, m padded to 128 and n/16 to 4 (`_swizzled_sf_size`; the CuTe DSL path's
    (padded m, padded columns) buffer flattened is the same size)."""
    x = values["x"]
    m, n = x.shape
    return (x.new_empty((m, n // 2), dtype=torch.uint8),
            x.new_empty((_round_up(m, 128) * _round_up(n // 16, 4),), dtype=torch.uint8))


def _fused_kda_decode(values):
    """`fused_kda_decode`'s result with no `output` given, the only call woken: its
    `torch.empty((1, num_rows, H, 128), dtype=x.dtype)`, `x` being [num_rows, 3 * H * 128]
    (0.7.2, 0.7.4: kda_kernels/fused_kda_decode.py run_fused_kda_decode)."""
    x = values["x"]
    return x.new_empty((1, x.shape[0], x.shape[1] // (3 * 128), 128))


def _packed_kda_decode(values):
    """`packed_kda_decode`'s result with no `output` given, the only call woken: its
    `mixed_qkv.new_empty((batch, 1, 12, 128))` (0.7.2, 0.7.4:
    kda_kernels/cake_packed_kda_decode.py run_packed_kda_decode; 12 heads of 128, fixed)."""
    mixed_qkv = values["mixed_qkv"]
    return mixed_qkv.new_empty((mixed_qkv.shape[0], 1, 12, 128))


def _trtllm_batch_context_with_kv_cache(values):
    """`trtllm_batch_context_with_kv_cache`'s result with no `out` given, no return_lse and a
    dtype (or None) for `out_dtype`, the only call woken: its
    `torch.empty_like(query, dtype=out_dtype)`, `out_dtype` None being the query's dtype
    (0.6.16-0.7.4 prefill.py)."""
    query = values["query"]
    return torch.empty_like(query, dtype=values["out_dtype"] or query.dtype)


def _trtllm_fmha_v2_prefill(values):
    """`trtllm_fmha_v2_prefill`'s result with no `out` given and no save_softmax_stats, `qkv`
    a flat tuple (the only call woken): its `torch.empty((query.shape[0], num_qo_heads,
    head_dim_v), dtype=o_dtype)` (0.6.16-0.7.4 prefill.py), the query `qkv[0]`
    [tokens, heads, D], `head_dim_v` the last dim of the last member (stacked KV
    [tokens, 2, H, D], paged KV [pages, 2, ..., D], V [tokens, H, Dv]), `o_dtype` `out_dtype`
    (a dtype, hooks/op_narrowing.py) or the query's."""
    qkv = values["qkv"]
    query = qkv[0]
    return query.new_empty((query.shape[0], query.shape[1], qkv[-1].shape[-1]),
                           dtype=values["out_dtype"] or query.dtype)


def _cudnn_batch_decode_with_kv_cache(values):
    """`cudnn_batch_decode_with_kv_cache`'s result with no `out` given and no return_lse, the
    only call woken: its `torch.empty(rows, h_qo, d_vo, dtype=q.dtype)`, rows and heads the
    query's first two dims, d_vo `v_cache.shape[3]` (0.7.x cudnn/decode.py
    _normalize_decode_inputs)."""
    q = values["q"]
    return q.new_empty((q.shape[0], q.shape[1], values["v_cache"].shape[3]))


def _sm110_gqa_decode(values):
    """`sm110_gqa_decode`'s result with no `out` given, the only call woken: its
    `torch.empty_like(q)` (0.7.x experimental/sm110_gqa_decode/backend.py)."""
    return torch.empty_like(values["q"])


def _trtllm_ragged_attention_deepseek(values):
    """`trtllm_ragged_attention_deepseek`'s result with no `out` given and no return_lse, the
    only call woken: its `torch.empty(query.shape[0], query.shape[1], value.shape[2])`,
    bfloat16 for an FP8 or INT8 query, else the query's dtype (0.6.16-0.7.4 prefill.py)."""
    query, value = values["query"], values["value"]
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.int8)
    return query.new_empty((query.shape[0], query.shape[1], value.shape[2]),
                           dtype=torch.bfloat16 if query.dtype in fp8 else query.dtype)


def _trtllm_sage_attention_quantize(values):
    """`trtllm_sage_attention_quantize` without smooth_k, the only call woken (0.7.x
    prefill.py): q/k quantized like `query`/`key` in `qk_quant_dtype`, v in float8_e4m3fn;
    float32 scales (heads, ceil(tokens / block) + batch - 1) for Q and K, (heads, head_dim)
    for V, batch from `cum_seq_lens_q` (1 when it is None)."""
    query, key, value = values["query"], values["key"], values["value"]
    cum = values["cum_seq_lens_q"]
    batch = 1 if cum is None else cum.numel() - 1
    dtype = values["qk_quant_dtype"]
    qb, kb = values["q_block_size"], values["k_block_size"]
    f32 = torch.float32
    return (query.new_empty(query.shape, dtype=dtype), key.new_empty(key.shape, dtype=dtype),
            value.new_empty(value.shape, dtype=torch.float8_e4m3fn),
            query.new_empty((query.shape[1], (query.shape[0] + qb - 1) // qb + batch - 1),
                            dtype=f32),
            query.new_empty((key.shape[1], (key.shape[0] + kb - 1) // kb + batch - 1),
                            dtype=f32),
            query.new_empty((value.shape[1], value.shape[2]), dtype=f32))


def _nvfp4_attention_sm120_quantize_qkv(values):
    """`nvfp4_attention_sm120_quantize_qkv`'s seven fresh results (0.6.16-0.7.4
    nvfp4_attention_sm120.py): Q padded to M_pad = round_up(M, 128), K/V to N_pad; packed FP4
    values (uint8, head_dim / 2 wide; V transposed), float8_e4m3fn scales (head_dim / 16; V's
    transposed, N_pad / 16 wide) and the float32 QK correction [B, Hq, M_pad / 128 (1 without
    per_block_mean), N_pad]."""
    q, k = values["q"], values["k"]
    b, hq, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    m_pad, n_pad = _round_up(m, 128), _round_up(n, 128)
    groups = m_pad // 128 if values["per_block_mean"] else 1
    u8, f8 = torch.uint8, torch.float8_e4m3fn
    return (q.new_empty((b, hq, m_pad, d // 2), dtype=u8),
            q.new_empty((b, hk, n_pad, d // 2), dtype=u8),
            q.new_empty((b, hk, d, n_pad // 2), dtype=u8),
            q.new_empty((b, hq, m_pad, d // 16), dtype=f8),
            q.new_empty((b, hk, n_pad, d // 16), dtype=f8),
            q.new_empty((b, hk, d, n_pad // 16), dtype=f8),
            q.new_empty((b, hq, groups, n_pad), dtype=torch.float32))


def _nvfp4_attention_sm120_fwd(values):
    """`nvfp4_attention_sm120_fwd` with neither `out` nor `lse` given and return_lse (0.7.x):
    `out` (B, Hq, M_pad, head_dim) in `out_dtype`, head_dim twice `q_fp4`'s packed width, and
    `lse` (B, Hq, M_pad) float32."""
    q = values["q_fp4"]
    b, hq, m, half = q.shape
    return (q.new_empty((b, hq, m, half * 2), dtype=values["out_dtype"]),
            q.new_empty((b, hq, m), dtype=torch.float32))


def _paged_mqa_logits(values):
    """`fp8_paged_mqa_logits` / `fp4_paged_mqa_logits` with no `out` (0.7.x
    attn_scores/attn_scores.py): `torch.empty((B * next_n, padded), output_dtype)[:,
    :max_seq_len]`, padded = max_seq_len rounded up to _SPLIT_KV (256): a view whose row
    stride is the padded width."""
    q = values["q"]
    rows = q.shape[0] * q.shape[1]
    max_seq_len = values["max_seq_len"]
    padded = (max_seq_len + 255) // 256 * 256
    return q.new_empty((rows, padded), dtype=values["output_dtype"])[:, :max_seq_len]
def _packed_fused_kda_decode(values):
    """`packed_fused_kda_decode`'s result with no `output` given, the only call woken: both of
    its paths allocate `torch.empty((1, num_rows, H, 128), bfloat16)`, `x` being
    [num_rows, 3 * H * 128] (0.7.2, 0.7.4: T=1 kda_kernels/fused_kda_decode.py
    run_fused_kda_decode, T>1 fused_kda_decode_multitoken.py:1095-:1099)."""
    x = values["x"]
    return x.new_empty((1, x.shape[0], x.shape[1] // (3 * 128), 128), dtype=torch.bfloat16)


def _concat_mla_kv_quant_fp8(values):
    """`concat_mla_kv_quant_fp8`'s `(key, value)` with neither given, the only call woken:
    float8_e4m3fn [num_tokens, num_heads, nope_dim + rope_dim] and [num_tokens, num_heads,
    kv_dim - nope_dim], `kv_nope` being [num_tokens, num_heads, kv_dim] and `k_pe`
    [num_tokens, rope_dim] or [num_tokens, 1, rope_dim] (0.7.4 mla_kv_pack.py:639-:664)."""
    kv_nope, k_pe, nope_dim = values["kv_nope"], values["k_pe"], values["nope_dim"]
    num_tokens, num_heads, kv_dim = kv_nope.shape
    fp8 = torch.float8_e4m3fn
    return (kv_nope.new_empty((num_tokens, num_heads, nope_dim + k_pe.shape[-1]), dtype=fp8),
            kv_nope.new_empty((num_tokens, num_heads, kv_dim - nope_dim), dtype=fp8))


def _gdn_fused_decode_step(values):
    """`gdn_fused_decode_step`'s fresh output with no `out` given, the only call woken (the
    two pools it also returns are its arguments): [B, 1, HV, D] bfloat16, B from
    `hidden_states`, HV from `A_log`, D the state's last dim (0.7.2, 0.7.4: the composable
    path's `attn_out.unsqueeze(1).to(torch.bfloat16)`, the kernels' `execute`
    torch.empty((B, 1, hv, d), bfloat16))."""
    hidden_states = values["hidden_states"]
    return hidden_states.new_empty(
        (hidden_states.shape[0], 1, values["A_log"].shape[0], values["ssm_state"].shape[-1]),
        dtype=torch.bfloat16)


def _cake_gated_delta_product_mtp(values):
    """`cake_gated_delta_product_mtp`'s fresh output with no `output` given, the only call
    woken (the pool it also returns is its argument): [B, T, HV, 64] in q's dtype, B and T
    from `q`, HV from `v` [B, T, n, HV, 64] (0.7.4 cake_gdp_backend/__init__.py:387
    out_shape, :391 torch.zeros in bfloat16, :451 converted to q's dtype)."""
    q, v = values["q"], values["v"]
    return q.new_empty((q.shape[0], q.shape[1], v.shape[3], 64))


def _chunk_gated_delta_rule_paged(values):
    """`chunk_gated_delta_rule_paged`'s output with none given, the only call woken:
    chunk_gated_delta_rule's `torch.empty((total_seq_len, num_o_heads, head_size), q.dtype)`,
    num_o_heads = max(q's heads, v's heads) (0.7.4 gdn_prefill.py:1722, :1881)."""
    q, v = values["q"], values["v"]
    return q.new_empty((q.shape[0], max(q.shape[1], v.shape[1]), q.shape[2]))


def _gated_delta_rule_decode_paged(values):
    """`gated_delta_rule_decode_paged`'s output with none given, the only call woken:
    gated_delta_rule_decode_pretranspose's [B, 1, HV, V] in q's dtype, v being [B, 1, HV, V]
    (0.7.4 gdn_decode.py: `target_dtype = q.dtype`, the kernels' [B, T, HV, V] output)."""
    q, v = values["q"], values["v"]
    return q.new_empty(tuple(v.shape))


def _cake_top_k_top_p_sampling_from_probs(values):
    """The Cake top-k/top-p sampler's samples with no `out` given, the only call woken: int32
    [batch] (0.7.4 cake_sampling.py top_k_top_p_sampling_from_probs: `torch.empty(batch,
    int32)`, and the fallback route's result `.to(torch.int32)`)."""
    probs = values["probs"]
    return probs.new_empty((probs.shape[0],), dtype=torch.int32)


def _chunk_gated_delta_rule(values):
    """chunk_gated_delta_rule's output with none given, the only call woken (the final state
    it also returns is the caller's `output_state`): `torch.empty((total_seq_len, num_o_heads,
    head_size), q.dtype)`, num_o_heads = max(q's heads, v's heads) (0.6.16-0.7.4
    gdn_prefill.py; 0.7.4 :1722, :1881)."""
    q, v = values["q"], values["v"]
    return q.new_empty((q.shape[0], max(q.shape[1], v.shape[1]), q.shape[2]))


def _sm12x_fc1_act_q1(values, module):
    """0.7.x's SM12x FC1 + activation + quantize's `(q, sf)` with neither `out_q` nor
    `out_sf` given, the only call woken: `torch.empty(m, n, out_dtype)` and
    `torch.zeros(out_sf_shape(m, n, num_experts))`, float32 (FP8) or int32 (MXFP8xMXFP4), with
    m = a_q.shape[0], n = b_q.shape[1] // 2, num_experts = b_q.shape[0] and FlashInfer's own
    `out_sf_shape` (fused_moe/cute_dsl/blackwell_sm12x/moe_fp8_fc1_act_q1.py:51,
    moe_mxfp8_mxfp4_fc1_act_q1.py:67, both releases)."""
    out_sf_shape = sys.modules[
        f"flashinfer.fused_moe.cute_dsl.blackwell_sm12x.{module}"].out_sf_shape
    a_q, b_q = values["a_q"], values["b_q"]
    m, n, experts = a_q.shape[0], b_q.shape[1] // 2, b_q.shape[0]
    sf_dtype = torch.int32 if "mxfp4" in module else torch.float32
    return (a_q.new_empty((m, n), dtype=values["out_dtype"]),
            a_q.new_empty(out_sf_shape(m, n, experts), dtype=sf_dtype))


def _sm12x_fc2_finalize(values):
    """0.7.x's SM12x FC2 + finalize's result with no `out` given: the body's
    `torch.zeros(num_tokens, n, dtype=torch.bfloat16)`, n = b_q.shape[1]
    (moe_fp8_fc2_finalize.py:187, moe_mxfp8_mxfp4_fc2_finalize.py:206 in 0.7.4, :204 in 0.7.2)."""
    return values["a_q"].new_empty((values["num_tokens"], values["b_q"].shape[1]),
                                   dtype=torch.bfloat16)


def _prims_ts_fp8_block_scale_routed_moe(values):
    """0.7.x prims_ts_fp8_block_scale_routed_moe's finalized result with no `output` given:
    alloc_trtllm_moe_output(num_tokens, hidden_size, True) (fused_moe/shared/inputs.py:87), a
    bfloat16 [num_tokens, hidden_size] from hidden_states' shape."""
    hidden_states = values["hidden_states"]
    return hidden_states.new_empty((hidden_states.shape[0], hidden_states.shape[-1]),
                                   dtype=torch.bfloat16)


def _fused_rmsnorm_silu(values):
    """`fused_rmsnorm_silu`'s result with no `out` (nor `block_scale`) given, the only call
    woken: the function's `torch.empty_like(input)`, bfloat16 like the input it requires."""
    return torch.empty_like(values["input"])


def _fused_dit_layernorm(values):
    """The three fused DiT layernorms' `(residual_out, norm_out)` with no buffers given (the only
    call woken), as `_dit_ln_prepare_outputs` allocates them (0.6.16-0.7.4): `empty_like(input)`,
    and `norm_out` (batch, rows, hidden) bfloat16, or packed into int32: hidden/8 columns for
    NVFP4, hidden/4 for MXFP8."""
    input = values["input"]
    batch, rows, hidden = input.shape
    if values["use_nvfp4"]:
        norm = input.new_empty((batch, rows, hidden // 8), dtype=torch.int32)
    elif values["use_mxfp8"]:
        norm = input.new_empty((batch, rows, hidden // 4), dtype=torch.int32)
    else:
        norm = input.new_empty((batch, rows, hidden), dtype=torch.bfloat16)
    return torch.empty_like(input), norm


def _gated_residual_rmsnorm(values):
    """0.7.4's `gated_residual_rmsnorm` with no `out` given (the only call woken): the
    function's `torch.empty_like(residual)`, float32 (rows, 8192) like the residual it
    requires."""
    return torch.empty_like(values["residual"])


def _gated_residual_next_rmsnorm(values):
    """0.7.4's `gated_residual_next_rmsnorm` with neither output given (the only call woken):
    `(torch.empty_like(residual), torch.empty_like(branch))`, float32 and bfloat16."""
    return torch.empty_like(values["residual"]), torch.empty_like(values["branch"])


def _fused_qk_rmsnorm_rope(values):
    """`fused_qk_rmsnorm_rope`'s `(q_out, k_out, v_out)` with no buffers given (the only call
    woken), as its body allocates them (0.6.16-0.7.4): float8_e4m3fn with `output_fp8`, else
    bfloat16; (batch, ppf*pph*ppw, heads, head_dim) for a 3-D qkv, (tokens, heads, head_dim)
    for a 2-D one, per num_heads_q/k/v."""
    qkv, head_dim = values["qkv"], values["head_dim"]
    dtype = torch.float8_e4m3fn if values["output_fp8"] else torch.bfloat16
    if qkv.dim() == 3:
        rows = (qkv.shape[0], values["ppf"] * values["pph"] * values["ppw"])
    else:
        rows = (qkv.shape[0],)
    return tuple(qkv.new_empty((*rows, values[heads], head_dim), dtype=dtype)
                 for heads in ("num_heads_q", "num_heads_k", "num_heads_v"))


def _bgmv_moe(values):
    """`bgmv_moe`'s result (0.6.16 on): `y.to(x.dtype)` of a fresh float32
    (tokens, total_feat_out) accumulator, total_feat_out `output_dim` when given, else the sum
    of the LoRA-B banks' output widths (dim 2)."""
    x = values["x"]
    total = values["output_dim"]
    if total is None:
        total = sum(b.size(2) for b in values["lora_b_weights"])
    return x.new_empty((x.size(0), total))


def _bgmv_moe_gemm2_lora_delta(values):
    """`bgmv_moe_gemm2_lora_delta`'s result (0.6.16 on): a fresh (tokens, hidden_size)
    float32 accumulator, scaled, `.to(out_dtype)`; tokens is topk_ids' dim 0."""
    tokens = values["topk_ids"].shape[0]
    return values["gemm1_activation_output"].new_empty(
        (tokens, values["hidden_size"]), dtype=values["out_dtype"])


def _mono_moe(values):
    """`mono_moe` with no `out` given: `torch.empty(m, K, bfloat16)`, m and K those of
    `activations_in` (its shape check requires [m, K=2048]; 0.7.4 monomoe.py:353)."""
    x = values["activations_in"]
    return x.new_empty((x.shape[0], x.shape[1]), dtype=torch.bfloat16)


def _cute_dsl_fused_moe_bf16(values):
    """`cute_dsl_fused_moe_bf16` with no `moe_output` given: `torch.empty(num_tokens, hidden,
    dtype=x.dtype)`, x being [num_tokens, hidden] (0.7.x sm90_fused_moe.py:394, 0.7.2 :389)."""
    x = values["x"]
    return x.new_empty((x.shape[0], x.shape[1]))


def _cute_dsl_fused_moe_mxfp8_mxfp4(values):
    """`cute_dsl_fused_moe_mxfp8_mxfp4` with no `moe_output` given: cute_dsl_fused_moe's
    `torch.empty((num_tokens, hidden_size), dtype=torch.bfloat16)`, num_tokens
    token_selected_experts' rows, hidden_size `w2_weight.size(1)` (0.7.4 fused_moe.py:1988-
    :1991; 0.7.2 :1350-:1353)."""
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), values["w2_weight"].size(1)),
        dtype=torch.bfloat16)


def _cute_dsl_fused_moe(values):
    """`cute_dsl_fused_moe` (and `cute_dsl_fused_moe_nvfp4`) with no `moe_output` given:
    `torch.empty((num_tokens, hidden_size), dtype=output_dtype)`, num_tokens
    token_selected_experts' rows, hidden_size `w2_weight.size(1)` (localized shards narrowed
    away) (0.7.4 fused_moe.py:1988-:1995, :218 _moe_hidden_size; 0.7.2 :1351-:1358; 0.6.16
    :947-:955)."""
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), values["w2_weight"].size(1)),
        dtype=values["output_dtype"])


def _cute_dsl_moe_wrapper_run(values):
    """CuteDslMoEWrapper.run (and CuteDslMxfp8Mxfp4MoEWrapper.run, which calls it): its
    `torch.empty((num_tokens, self.hidden_size), dtype=self.output_dtype)`, num_tokens
    token_selected_experts' rows, read from the wrapper the key holds
    (hooks/method_boundaries.py); the runner returns it whole (0.7.4 fused_moe.py:1489,
    0.7.2 :1026, 0.6.16 :721)."""
    wrapper = sys.modules["_dynafold_method_boundaries"].held(values["wrapper_key"])
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), wrapper.hidden_size),
        dtype=wrapper.output_dtype)


def _per_token_group_quant_8bit_cuda(values):
    """`_per_token_group_quant_8bit_cuda`'s `(x_q, x_s)` as it allocates them (0.7.4): `x_q`
    like `x` in `dst_dtype`; float32 scales, (*x.shape[:-1], groups) row-major, or with
    column-major scales (2-D `x` only) the transpose of a (groups, stride) buffer's first
    `tokens` columns, the stride rounded up to 4 when TMA-aligned."""
    x, group_size = values["x"], values["group_size"]
    x_q = torch.empty_like(x, dtype=values["dst_dtype"])
    groups = x.shape[-1] // group_size
    if not values["column_major_scales"]:
        return x_q, x.new_empty((*x.shape[:-1], groups), dtype=torch.float32)
    tokens = x.shape[0]
    stride = _round_up(tokens, 4) if values["scale_tma_aligned"] else tokens
    storage = x.new_empty((groups, stride), dtype=torch.float32)
    return x_q, storage[:, :tokens].t()


def _top_k(values):
    """`top_k`'s (values, indices): (rows, k) of the input's dtype and int64, on every path it
    takes (CUB, clusters, radix; sorted or not: its sort and gather keep the shape)."""
    input, k = values["input"], values["k"]
    rows = input.size(0)
    return (input.new_empty((rows, k)), input.new_empty((rows, k), dtype=torch.int64))


def _bmm_mxfp8(values):
    """`bmm_mxfp8`'s fresh result (no `out`), as its body allocates it (0.6.16-0.7.4):
    (A.shape[0], A.shape[1], B.shape[2]) of `dtype`."""
    a, b = values["A"], values["B"]
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]), dtype=values["dtype"])


def _cudnn_frost_gemm1(values):
    """cuDNN Frost GEMM1 + SwiGLU's fresh result (no `out`), as cudnn_frost_selected.py
    allocates it (0.7.2-0.7.4): (grouped_tokens.shape[0], gate_weights.shape[1]) bfloat16."""
    tokens, gate = values["grouped_tokens"], values["gate_weights"]
    return tokens.new_empty((tokens.shape[0], gate.shape[1]), dtype=torch.bfloat16)


def _chunk_gated_delta_rule2(values):
    """GDN-2 prefill's fresh (output, final_state), as cudnn_chunk_gated_delta_rule2 allocates
    them (0.7.2-0.7.4): output (total, H, V) of q's dtype, H = max(q heads, v heads); final
    state (sequences, H, V, K) of initial_state's dtype, float32 without one (_state_out)."""
    q, v, cu = values["q"], values["v"], values["cu_seqlens"]
    initial = values.get("initial_state")
    total, heads, head_dim = q.shape
    heads = max(heads, v.shape[1])
    v_dim = v.shape[2]
    dtype = torch.float32 if initial is None else initial.dtype
    return (q.new_empty((total, heads, v_dim)),
            q.new_empty((cu.shape[0] - 1, heads, v_dim, head_dim), dtype=dtype))


def _qsa_sparse_paged_attention(values):
    """`qsa_sparse_paged_attention`'s fresh result (no `out`): torch.empty_like(q), on both
    backends (experimental/qsa_nvfp4/backend.py, cake_qsa_nvfp4/cake_backend.py)."""
    return torch.empty_like(values["q"])


def _minimax_h3_varlen_attention(values):
    """MiniMax-H3 packed-varlen attention's fresh result (no `out`), on every route (BF16, FP8,
    FP8 from BF16, NVFP4): `torch.empty((total_tokens, num_heads, HEAD_DIM), bfloat16)`, the
    query's [T, H, 128] (0.7.2, 0.7.4: experimental/minimax_h3_varlen_attention/cake_backend.py
    _prepare_bf16, _prepare_nvfp4, prepare_minimax_h3_varlen_fp8_attention)."""
    query = values["query"]
    return query.new_empty(tuple(query.shape), dtype=torch.bfloat16)


def _qsa_forward(values):
    """cuDNN QSA's (out, out_fp32, lse) (qsa.py docstrings): bfloat16 and float32 [T, Hq, 256]
    outputs and the float32 [Hq, T] natural-log normaliser."""
    q = values["q"]
    T, Hq, D = q.shape
    return (q.new_empty((T, Hq, D), dtype=torch.bfloat16),
            q.new_empty((T, Hq, D), dtype=torch.float32),
            q.new_empty((Hq, T), dtype=torch.float32))


def _top_k_transform(values):
    """The DSA top-k transforms' fresh indices: (rows, k) int32 on every path (topk.py: CUB's
    and radix's `torch.empty(num_rows, k, dtype=torch.int32)`, the clusters kernel's own)."""
    input, k = values["input"], values["k"]
    return input.new_empty((input.size(0), k), dtype=torch.int32)


def _mxfp8_quantize_sm100(values):
    """`mxfp8_quantize_sm100`'s `(values, scales)` as its body allocates them (0.6.16-0.7.4),
    `sf_swizzle_layout` compared as FlashInfer's SfLayout ints (128x4 = 0, 8x4 = 1, linear = 2).
    On a GPU: float8_e4m3fn values (*shape[:-1], K rounded up to `alignment`) and 1-D uint8
    scales, rows padded to 128 (8) and K/32 columns to 4 when swizzled, M * K/32 when linear. On
    the CPU (the host kernel): uint8 values of the input's shape, scales as above on the
    unpadded K (no 8x4 there). (FlashInfer's fake gives int64/int32 of other sizes and lacks
    `enable_pdl`.)"""
    input, layout = values["input"], int(values["sf_swizzle_layout"])
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


def _cutlass_fused_moe_scratch(values):
    """The three tensors `cutlass_fused_moe`'s kernel allocates and returns after `output`
    outside min-latency mode: active experts per node (1,) int32, expert-to-token scores
    (experts on this rank, tokens) float32, active expert ids (experts on this rank,) int32."""
    input, experts = values["input"], values["fc2_expert_weights"].shape[0]
    return (input.new_empty((1,), dtype=torch.int32),
            input.new_empty((experts, input.shape[0]), dtype=torch.float32),
            input.new_empty((experts,), dtype=torch.int32))


def _block_scale_interleave_sm100(values):
    """As its kernel wrapper allocates (0.6.16-0.7.x): per expert (a 3-D input) the rows padded
    to 128 and the columns to 4, flattened, in the input's dtype. (FlashInfer's fake gives
    rows * columns / 16 bytes of uint8.)"""
    sf = values["unswizzled_sf"]
    experts = sf.shape[0] if sf.dim() == 3 else 1
    size = _round_up(sf.shape[-2], 128) * _round_up(sf.shape[-1], 4)
    return sf.new_empty((experts * size,), dtype=sf.dtype)


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


def _kimi_k3_route(values):
    """The KimiK3RoutePlan kimi_k3_fused_router allocates without a plan (0.7.2, 0.7.4:
    experimental/kimi_k3_fused_router/cake_backend.py allocate_kimi_k3_route_plan): 16 routes
    of 896 experts per token; `blocks = max_route_blocks(num_tokens, block_m)`, the
    worst-case count of block_m-row route blocks (min(896, pairs) + (pairs - that) //
    block_m); float32 weights, everything else int32."""
    logits, block_m = values["logits"], values["block_m"]
    tokens, top_k, experts = logits.shape[0], 16, 896
    pairs = tokens * top_k
    nonempty = torch.sym_min(experts, pairs)
    blocks = nonempty + (pairs - nonempty) // block_m

    def new(*shape, dtype=torch.int32):
        return logits.new_empty(shape, dtype=dtype)
    return (new(tokens, top_k, dtype=torch.float32), new(tokens, top_k), new(blocks * block_m),
            new(blocks), new(1), new(experts), new(experts + 1), new(experts))


def _kimi_k3_project(values):
    """kimi_k3_fp8_projection's fresh result (no `out` given, 0.7.4 cake_backend.py:4288):
    bfloat16 (M, n_valid), n_valid from the prepared weight, held by its key while the
    trace runs (hooks/attention_plans.py `_hold`)."""
    import sys
    prepared = sys.modules["_dynafold_attention_plans"].held(values["prepared"])
    x = values["x"]
    return x.new_empty((x.shape[0], int(prepared.n_valid)), dtype=torch.bfloat16)


# Declared name -> a fake taking the kernel's own parameters.
PLAIN = {
    "flashinfer::merge_states": _merge_states,
}
# Declared name -> (a fake taking the arguments by parameter name, the parameters it reads).
BY_NAME = {
    "flashinfer::fp4_quantize_sm100": (
        _fp4_quantize_sm100, ("input", "sf_vec_size", "is_sf_swizzled_layout")),
    "flashinfer::block_scale_interleave_sm100": (
        _block_scale_interleave_sm100, ("unswizzled_sf",)),
    "flashinfer::silu_and_mul_scaled_nvfp4_experts_quantize_sm100": (
        _silu_and_mul_scaled_nvfp4_experts_quantize_sm100, ("input",)),
    # dynafold's own declaration (hooks/dormant_ops.py, EXTRA_DECLARATIONS).
    "flashinfer::fp4_quantize_cute_dsl": (
        _fp4_quantize_cute_dsl,
        ("input", "sf_vec_size", "is_sf_swizzled_layout", "is_sf_8x4_layout")),
    # dynafold's own declaration (hooks/dormant_ops.py) of silu_and_mul_nvfp4_quantize's
    # CuTe DSL driver.
    "flashinfer::silu_and_mul_nvfp4_quantize_cute_dsl": (
        _cute_dsl_fp4(16, True), ("input", "sf_layout")),
    # ... and of the public MXFP4 and MXFP8 CuTe DSL quantizers.
    "flashinfer::mxfp4_quantize_cute_dsl": (_cute_dsl_fp4(32, False), ("input", "sf_layout")),
    "flashinfer::nvfp4_quantize_cute_dsl": (_cute_dsl_fp4(16, False), ("input", "sf_layout")),
    "flashinfer::nvfp4_quantize_per_token_cute_dsl": (
        _nvfp4_quantize_per_token_cute_dsl, ("input", "sf_layout")),
    "flashinfer::mxfp8_quantize_cute_dsl": (
        _mxfp8_quantize_cute_dsl,
        ("input", "alignment", "is_sf_swizzled_layout", "is_sf_8x4_layout")),
    # dynafold's own declarations (hooks/dormant_ops.py) of the public fused SwiGLU MXFP8
    # quantizers.
    "flashinfer::silu_and_mul_mxfp8_quantize_public": (
        _silu_and_mul_mxfp8_quantize(False), ("gated_input", "rowwise", "colwise")),
    "flashinfer::silu_and_mul_mxfp8_quantize_backward_public": (
        _silu_and_mul_mxfp8_quantize(True), ("gated_input", "rowwise", "colwise")),
    # dynafold's own declarations (hooks/dormant_ops.py) of 0.7.4's public masked MXFP8
    # experts quantizers.
    "flashinfer::silu_and_mul_mxfp8_experts_quantize_public": (_mxfp8_experts(True), ("a",)),
    "flashinfer::mxfp8_grouped_quantize_public": (_mxfp8_experts(False), ("a",)),
    # dynafold's own declarations (hooks/dormant_ops.py) of the CuTe DSL RMSNorm + FP4
    # quantizers, woken for the call that gives no output buffer (hooks/op_corrections.py).
    **{f"flashinfer::{name}": (
        _rmsnorm_fp4quant, ("input", "block_size", "scale_format", "is_sf_swizzled_layout"))
       for name in ("rmsnorm_fp4quant", "add_rmsnorm_fp4quant")},
    # dynafold's own declaration of the public mm_fp4 (hooks/dormant_ops.py), called without
    # `out` (with it, its operator returns nothing: hooks/op_corrections.py).
    "flashinfer::mm_fp4": (_mm_fp4, ("a", "b", "out_dtype")),
    # dynafold's own declaration of 0.7.x's prims_ts_fp8_block_scale_routed_moe
    # (hooks/dormant_ops.py), its finalized call without `output`.
    "flashinfer::prims_ts_fp8_block_scale_routed_moe": (
        _prims_ts_fp8_block_scale_routed_moe, ("hidden_states",)),
    # dynafold's own declarations of 0.7.x's SM12x CuTe DSL MoE GEMMs (hooks/dormant_ops.py):
    # FC1 woken with no output buffers, FC2's fresh call without `out`.
    **{f"flashinfer::cute_dsl_sm12x_fc1_act_q1_{kind}": (
        functools.partial(_sm12x_fc1_act_q1, module=module), ("a_q", "b_q", "out_dtype"))
       for kind, module in (("fp8", "moe_fp8_fc1_act_q1"),
                            ("mxfp8_mxfp4", "moe_mxfp8_mxfp4_fc1_act_q1"))},
    **{f"flashinfer::cute_dsl_sm12x_fc2_finalize_{kind}": (
        _sm12x_fc2_finalize, ("a_q", "b_q", "num_tokens")) for kind in ("fp8", "mxfp8_mxfp4")},
    # dynafold's own declaration of b12x_fused_moe (hooks/dormant_ops.py), called without
    # `output` (with it, the operator writes the caller's: hooks/op_corrections.py).
    "flashinfer::b12x_fused_moe": (
        _b12x_fused_moe, ("x", "token_selected_experts", "output_dtype")),
    # dynafold's declarations of the other autotuned dense GEMMs, called without `out`:
    # mm_bf16 and mm_mxfp8 allocate as mm_fp4 does.
    "flashinfer::mm_bf16": (_mm_fp4, ("a", "b", "out_dtype")),
    "flashinfer::mm_mxfp8": (_mm_fp4, ("a", "b", "out_dtype")),
    "flashinfer::bmm_bf16": (_bmm_bf16, ("A", "B", "out_dtype")),
    "flashinfer::tgv_gemm_sm100": (_tgv_gemm_sm100, ("a", "b", "bias")),
    "flashinfer::gemm_fp8_nt_groupwise": (_gemm_fp8_nt_groupwise, ("a", "b", "out_dtype")),
    **{f"flashinfer::{name}": (_group_gemm_nt_groupwise, ("a", "b", "out_dtype"))
       for name in ("group_gemm_fp8_nt_groupwise", "group_gemm_mxfp8_mxfp4_nt_groupwise",
                    "group_gemm_nvfp4_nt_groupwise", "group_deepgemm_fp8_nt_groupwise",
                    "group_gemm_fp8_nt_groupwise_contiguous")},
    **{f"flashinfer::{name}": (_cake_lora_gemm, ("a", "b"))
       for name in ("mm_fp8_lora", "mm_nvfp4_lora")},
    "flashinfer::mm_bf16_fp4": (_mm_bf16_fp4, ("a", "b", "backend", "out_dtype")),
    "flashinfer::batch_deepgemm_fp8_nt_groupwise": (
        _batch_deepgemm_fp8_nt_groupwise, ("a", "b", "out_dtype")),
    "flashinfer::fp8_blockscale_gemm_sm90": (
        _fp8_blockscale_gemm_sm90, ("input", "weight", "out_dtype")),
    "flashinfer::mm_nvfp4_svdquant": (_mm_nvfp4_svdquant, ("a", "b")),
    "flashinfer::nvfp4_quantize_smooth": (_nvfp4_quantize_smooth, ("x",)),
    # dynafold's own declaration of fused_kda_decode (hooks/dormant_ops.py), woken for the
    # call that gives no `output` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::fused_kda_decode": (_fused_kda_decode, ("x",)),
    # dynafold's own declaration of trtllm_batch_context_with_kv_cache (hooks/dormant_ops.py),
    # woken for the call that gives no `out` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::trtllm_batch_context_with_kv_cache": (
        _trtllm_batch_context_with_kv_cache, ("query", "out_dtype")),
    # dynafold's own declaration of trtllm_fmha_v2_prefill (hooks/dormant_ops.py), woken for
    # the call that gives no `out` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::trtllm_fmha_v2_prefill": (_trtllm_fmha_v2_prefill, ("qkv", "out_dtype")),
    # dynafold's own declaration of cudnn_batch_decode_with_kv_cache (hooks/dormant_ops.py),
    # woken for the call that gives no `out` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::cudnn_batch_decode_with_kv_cache": (
        _cudnn_batch_decode_with_kv_cache, ("q", "v_cache")),
    # dynafold's own declaration of sm110_gqa_decode (hooks/dormant_ops.py), woken for the
    # call that gives no `out` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::sm110_gqa_decode": (_sm110_gqa_decode, ("q",)),
    # dynafold's own declaration of trtllm_ragged_attention_deepseek (hooks/dormant_ops.py),
    # woken for the call that gives no `out` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::trtllm_ragged_attention_deepseek": (
        _trtllm_ragged_attention_deepseek, ("query", "value")),
    # dynafold's own declarations (hooks/dormant_ops.py) of the Sage quantizer and the SM120
    # NVFP4 attention functions, woken for the calls whose results are all fresh
    # (hooks/op_corrections.py `fresh_only`).
    "flashinfer::trtllm_sage_attention_quantize": (
        _trtllm_sage_attention_quantize,
        ("query", "key", "value", "q_block_size", "k_block_size", "qk_quant_dtype",
         "cum_seq_lens_q")),
    "flashinfer::nvfp4_attention_sm120_quantize_qkv": (
        _nvfp4_attention_sm120_quantize_qkv, ("q", "k", "per_block_mean")),
    "flashinfer::nvfp4_attention_sm120_fwd": (_nvfp4_attention_sm120_fwd, ("q_fp4", "out_dtype")),
    # dynafold's own declarations of the paged MQA logits functions, called without `out`.
    **{f"flashinfer::{name}": (_paged_mqa_logits, ("q", "max_seq_len", "output_dtype"))
       for name in ("fp8_paged_mqa_logits", "fp4_paged_mqa_logits")},
    "flashinfer::packed_kda_decode": (_packed_kda_decode, ("mixed_qkv",)),
    "flashinfer::packed_fused_kda_decode": (_packed_fused_kda_decode, ("x",)),
    # dynafold's own declaration of concat_mla_kv_quant_fp8 (hooks/dormant_ops.py), woken for
    # the call that gives neither `key` nor `value` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::concat_mla_kv_quant_fp8": (
        _concat_mla_kv_quant_fp8, ("kv_nope", "k_pe", "nope_dim")),
    # dynafold's own declaration of gdn_fused_decode_step (hooks/dormant_ops.py), woken for
    # the call that gives no `out` (hooks/op_corrections.py `fresh_only`): the output only.
    "flashinfer::gdn_fused_decode_step": (
        _gdn_fused_decode_step, ("hidden_states", "A_log", "ssm_state")),
    # ... and of cake_gated_delta_product_mtp, its output only the same way.
    "flashinfer::cake_gated_delta_product_mtp": (_cake_gated_delta_product_mtp, ("q", "v")),
    # dynafold's own declarations of the paged GDN functions (hooks/dormant_ops.py), woken for
    # the call that gives no `output` (hooks/op_corrections.py `fresh_only`).
    "flashinfer::chunk_gated_delta_rule_paged": (_chunk_gated_delta_rule_paged, ("q", "v")),
    "flashinfer::gated_delta_rule_decode_paged": (_gated_delta_rule_decode_paged, ("q", "v")),
    # dynafold's own declaration of the Cake top-k/top-p sampler (hooks/dormant_ops.py), woken
    # for the call that gives no buffers (hooks/op_corrections.py `fresh_only`).
    "flashinfer::cake_top_k_top_p_sampling_from_probs": (
        _cake_top_k_top_p_sampling_from_probs, ("probs",)),
    # dynafold's own declaration of chunk_gated_delta_rule (hooks/dormant_ops.py), woken for the
    # call that gives no `output` (hooks/op_corrections.py `fresh_only`): the output only.
    "flashinfer::chunk_gated_delta_rule": (_chunk_gated_delta_rule, ("q", "v")),
    # dynafold's own declarations of the fused diffusion norms (hooks/dormant_ops.py), woken
    # for the call that gives no output buffer (hooks/op_corrections.py `fresh_only`).
    "flashinfer::fused_rmsnorm_silu": (_fused_rmsnorm_silu, ("input", "out")),
    **{f"flashinfer::{name}": (_fused_dit_layernorm, ("input", "use_nvfp4", "use_mxfp8"))
       for name in ("fused_dit_gate_residual_layernorm_gamma_beta",
                    "fused_dit_gate_residual_layernorm_scale_shift",
                    "fused_dit_residual_layernorm_scale_shift")},
    "flashinfer::fused_qk_rmsnorm_rope": (
        _fused_qk_rmsnorm_rope, ("qkv", "head_dim", "output_fp8", "ppf", "pph", "ppw",
                                 "num_heads_q", "num_heads_k", "num_heads_v")),
    # dynafold's own declarations of 0.7.4's gated residual norms (hooks/dormant_ops.py),
    # woken for the call that gives no output buffer (hooks/op_corrections.py `fresh_only`).
    "flashinfer::gated_residual_rmsnorm_public": (_gated_residual_rmsnorm, ("residual", "out")),
    "flashinfer::gated_residual_next_rmsnorm_public": (
        _gated_residual_next_rmsnorm, ("residual", "branch")),
    # dynafold's own declaration (hooks/dormant_ops.py) of per_token_group_quant_8bit's CUDA
    # backend.
    "flashinfer::per_token_group_quant_8bit_cuda": (
        _per_token_group_quant_8bit_cuda,
        ("x", "group_size", "dst_dtype", "column_major_scales", "scale_tma_aligned")),
    # dynafold's own declarations (hooks/dormant_ops.py) of bmm_mxfp8, the grouped GEMMs and
    # cuDNN Frost's GEMM1 + SwiGLU, called without `out`. The grouped GEMMs allocate as mm_fp4
    # does: (cum_m, n) = (a.shape[0], b.shape[1]) of `out_dtype` (grouped_mm/cudnn/core.py).
    "flashinfer::bmm_mxfp8": (_bmm_mxfp8, ("A", "B", "dtype")),
    **{f"flashinfer::{name}": (_mm_fp4, ("a", "b", "out_dtype"))
       for name in ("grouped_mm_bf16", "grouped_mm_fp8", "grouped_mm_mxfp8", "grouped_mm_fp4")},
    "flashinfer::cudnn_frost_grouped_gemm1_swiglu": (
        _cudnn_frost_gemm1, ("grouped_tokens", "gate_weights")),
    "flashinfer::chunk_gated_delta_rule2": (
        _chunk_gated_delta_rule2, ("q", "v", "cu_seqlens", "initial_state")),
    # cudnn_chunk_gated_delta_product allocates the same (its k and v on the sub-token rows).
    "flashinfer::chunk_gated_delta_product": (
        _chunk_gated_delta_rule2, ("q", "v", "cu_seqlens", "initial_state")),
    # dynafold's own declarations (hooks/dormant_ops.py) of 0.7.4's QSA attention.
    "flashinfer::qsa_sparse_paged_attention": (_qsa_sparse_paged_attention, ("q",)),
    # dynafold's own declarations of MiniMax-H3's packed-varlen attentions (hooks/dormant_ops.py),
    # woken for the call that gives no `out` (and, as a mutation, for one that does).
    **{f"flashinfer::{name}": (_minimax_h3_varlen_attention, ("query",))
       for name in ("minimax_h3_varlen_attention", "minimax_h3_varlen_fp8_attention",
                    "minimax_h3_varlen_fp8_attention_bf16", "minimax_h3_varlen_nvfp4_attention")},
    "flashinfer::qsa_forward": (_qsa_forward, ("q",)),
    "flashinfer::qsa_indexed_forward": (_qsa_forward, ("q",)),
    # dynafold's own declaration (hooks/dormant_ops.py) of the public top_k.
    "flashinfer::top_k_public": (_top_k, ("input", "k")),
    **{f"flashinfer::top_k_{form}_transform_public": (_top_k_transform, ("input", "k"))
       for form in ("page_table", "ragged")},
    "flashinfer::mxfp8_quantize_sm100": (
        _mxfp8_quantize_sm100, ("input", "sf_swizzle_layout", "alignment")),
    # dynafold's own declarations (hooks/dormant_ops.py) of the multi-LoRA MoE BGMV functions
    # that return a fresh tensor.
    "flashinfer::bgmv_moe_public": (_bgmv_moe, ("x", "lora_b_weights", "output_dim")),
    # dynafold's own declaration of the SM90 CuTe DSL MoE, called without `moe_output`.
    "flashinfer::cute_dsl_fused_moe_bf16": (_cute_dsl_fused_moe_bf16, ("x",)),
    # dynafold's declarations of the SM100 CuTe DSL MoE wrappers' run (hooks/dormant_ops.py,
    # hooks/method_boundaries.py): the result is always fresh.
    **{name: (_cute_dsl_moe_wrapper_run, ("wrapper_key", "x", "token_selected_experts"))
       for name in ("flashinfer::cute_dsl_moe_wrapper_run",
                    "flashinfer::cute_dsl_mxfp8_mxfp4_moe_wrapper_run")},
    "flashinfer::cute_dsl_fused_moe_mxfp8_mxfp4": (
        _cute_dsl_fused_moe_mxfp8_mxfp4, ("x", "token_selected_experts", "w2_weight")),
    **{f"flashinfer::{name}": (
        _cute_dsl_fused_moe, ("x", "token_selected_experts", "w2_weight", "output_dtype"))
       for name in ("cute_dsl_fused_moe", "cute_dsl_fused_moe_nvfp4")},
    # dynafold's own declaration of mono_moe, called without `out`.
    "flashinfer::mono_moe": (_mono_moe, ("activations_in",)),
    "flashinfer::bgmv_moe_gemm2_lora_delta": (
        _bgmv_moe_gemm2_lora_delta,
        ("gemm1_activation_output", "topk_ids", "hidden_size", "out_dtype")),
    # cutlass_fused_moe's kernel with `output` given: what it returns besides `output`
    # (hooks/op_corrections.py, form "list+").
    "flashinfer::cutlass_fused_moe:scratch": (
        _cutlass_fused_moe_scratch, ("input", "fc2_expert_weights")),
    # dynafold's own declaration (hooks/dormant_ops.py) of the Kimi-K3 fused router without a
    # plan: the plan's eight tensors (hooks/attention_plans.py makes the NamedTuple again).
    "flashinfer::kimi_k3_route": (_kimi_k3_route, ("logits", "block_m")),
    # dynafold's own declaration of kimi_k3_fp8_projection, called without `out`.
    "flashinfer::kimi_k3_project": (_kimi_k3_project, ("x", "prepared")),
}


def override(name, kernel):
    """dynafold's fake for the declaration `name` of `kernel`, or None when there is none (or
    `kernel` lacks a parameter the fake reads: the declaration then keeps FlashInfer's fake,
    whose own checks decide)."""
    fake = PLAIN.get(name)
    if fake is not None:
        return fake
    entry = BY_NAME.get(name)
    if entry is None:
        return None
    rule, reads = entry
    try:
        sig = inspect.signature(kernel)
    except (TypeError, ValueError):
        return None
    if not set(reads) <= set(sig.parameters):
        return None

    def fake(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return rule(bound.arguments)

    fake.__signature__ = sig
    fake.__name__ = f"dynafold_fake_{kernel.__name__}"
    return fake
