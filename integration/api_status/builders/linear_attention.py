"""Linear attention: gated delta rule (GDN, GDN-2, paged GDN, fused decode step), gated delta
product (GDP), Kimi delta attention (KDA) and the MiniMax-H3 prepared pre-attention programs.
Shapes are Qwen3-Next's / Kimi-Linear's per-rank heads at head dim 128, few tokens."""
import torch

from . import fit

BF16, F32, I32, I64 = torch.bfloat16, torch.float32, torch.int32, torch.int64
D = 128             # head dim (GDN on SM100 and KDA require 128)
HQ, HV = 2, 4       # Qwen3-Next GVA: fewer q/k heads than v heads
TOK, SEQS, POOL = 8, 2, 8


def _idx(*values, dtype=I32):
    return torch.tensor(values, device="cuda", dtype=dtype)


def _cu_seqlens(dtype=I64):
    return _idx(0, TOK // 2, TOK, dtype=dtype)


def _gdn_prefill(t, fi):
    """SGLang 0.5.23's Qwen3-Next extend (gdn_flashinfer.py): packed q/k/v, float32 alpha and
    beta, the float32 states gathered from the pool, int64 cu_seqlens, a fresh final state."""
    from flashinfer.gdn_prefill import chunk_gated_delta_rule
    # The checkpoints: 0.6.11 on (0.6.3, SGLang 0.5.9's pin, has none).
    checkpoints = fit.accepted(chunk_gated_delta_rule, dict(
        state_checkpoints=None, checkpoint_cu_starts=None, checkpoint_every_n_tokens=0))

    def f(q, k, v, g, beta, state, out_state, cu):
        return chunk_gated_delta_rule(q=q, k=k, v=v, g=g, beta=beta, scale=None,
                                      initial_state=state, output_final_state=True,
                                      cu_seqlens=cu, use_qk_l2norm_in_kernel=False,
                                      output=None, output_state=out_state, **checkpoints)
    return f, (t(TOK, HQ, D), t(TOK, HQ, D), t(TOK, HV, D), t(TOK, HV, dtype=F32),
               t(TOK, HV, dtype=F32), t(SEQS, HV, D, D, dtype=F32),
               t(SEQS, HV, D, D, dtype=F32), _cu_seqlens())


def _gdn2_prefill(t, fi):
    """GDN-2's channel-wise gates (log decay g, beta and w per channel), fresh output and state."""
    from flashinfer.gdn2_prefill import chunk_gated_delta_rule2

    def f(q, k, v, g, beta, w, state, cu):
        return chunk_gated_delta_rule2(q, k, v, g, beta, w, None, initial_state=state,
                                       output_final_state=True, cu_seqlens=cu)
    return f, (t(TOK, HQ, D), t(TOK, HQ, D), t(TOK, HV, D), t(TOK, HV, D, dtype=F32),
               t(TOK, HV, D), t(TOK, HV, D), t(SEQS, HV, D, D, dtype=F32), _cu_seqlens())


def _gdp_prefill(t, fi):
    """Gated delta product with two Householder steps: k, v and beta on the expanded
    sub-token timeline (TOK * 2 rows), g per real token."""
    from flashinfer.gdp_prefill import chunk_gated_delta_product
    n = 2

    def f(q, k, v, g, beta, state, cu):
        return chunk_gated_delta_product(q, k, v, g, beta, n, None, initial_state=state,
                                         output_final_state=True, cu_seqlens=cu)
    return f, (t(TOK, HQ, D), t(TOK * n, HQ, D), t(TOK * n, HV, D), t(TOK, HV, dtype=F32),
               t(TOK * n, HV, dtype=F32), t(SEQS, HV, D, D, dtype=F32), _cu_seqlens())


PAGE = 64  # the paged GDN page size: a positive multiple of the 64-token chunk


def _page_table():
    """Two sequences, two pages each; the prefill's new tokens fill the last page's first
    TOK // 2 rows."""
    return _idx(0, 1, 2, 3), _idx(0, 2, 4), _idx(TOK // 2, TOK // 2)


def _gdn_prefill_paged(t, fi):
    from flashinfer.gdn_paged import chunk_gated_delta_rule_paged

    def f(q, k, v, g, beta, pool, cu, pages, indptr, last):
        out = chunk_gated_delta_rule_paged(q, k, v, g, beta, None, cu_seqlens=cu,
                                           state_pool=pool, page_indices=pages,
                                           page_indptr=indptr, page_size=PAGE,
                                           last_page_len=last)
        return out, pool
    return f, (t(TOK, HQ, D), t(TOK, HQ, D), t(TOK, HV, D), t(TOK, HV, dtype=F32),
               t(TOK, HV, dtype=F32), t(POOL, HV, D, D, dtype=F32), _cu_seqlens(I32),
               *_page_table())


def _gdn_decode_paged(t, fi):
    from flashinfer.gdn_paged import gated_delta_rule_decode_paged

    def f(q, k, v, A_log, a, dt_bias, b, pool, pages, indptr, last):
        out = gated_delta_rule_decode_paged(q, k, v, A_log, a, dt_bias, b, state_pool=pool,
                                            page_indices=pages, page_indptr=indptr,
                                            last_page_len=last)
        return out, pool
    return f, (t(SEQS, 1, HQ, D), t(SEQS, 1, HQ, D), t(SEQS, 1, HV, D), t(HV, dtype=F32),
               t(SEQS, 1, HV), t(HV, dtype=F32), t(SEQS, 1, HV), t(POOL, HV, D, D, dtype=F32),
               *_page_table())


def _gdn_prefill_slots(t, fi):
    from flashinfer.gdn_paged import gdn_paged_prefill_slots
    return (lambda cu, pages, indptr, last: tuple(gdn_paged_prefill_slots(
        cu, pages, indptr, PAGE, last)), (_cu_seqlens(I32), *_page_table()))


def _gdn_decode_slots(t, fi):
    from flashinfer.gdn_paged import gdn_paged_decode_slots
    return (lambda pages, indptr, last: tuple(gdn_paged_decode_slots(pages, indptr, last)),
            _page_table())


def _gdn_fused_decode_step(t, fi):
    """One Qwen3-Next decode step fused (b/a projection, causal conv, GDN): conv width 4."""
    from flashinfer.gdn_kernels.experimental.gdn_fused_decode import gdn_fused_decode_step
    hidden, width, qkv = 256, 4, (2 * HQ + HV) * D

    def f(h, w_ba, mixed, cw, cb, conv, A_log, dt_bias, ssm, slots):
        return gdn_fused_decode_step(h, w_ba, mixed, cw, cb, conv, A_log, dt_bias, None, ssm,
                                     slots)
    return f, (t(SEQS, hidden), t(hidden, 2 * HV), t(SEQS, qkv), t(qkv, width), t(qkv),
               t(POOL, qkv, width - 1), t(HV, dtype=F32), t(HV), t(POOL, HV, D, D, dtype=F32),
               _idx(1, 2))


def _gdp_mtp(t, fi):
    """Gated delta product verification (MTP): T=2 draft tokens per request, two Householder
    steps, value head dim 64, float32 pool read and written in place; equal q and v heads
    (the Cake kernel takes no GQA/GVA)."""
    from flashinfer.cake_gdp import cake_gated_delta_product_mtp
    steps, n, dv, HQ = 2, 2, 64, HV

    def f(q, k, v, pool, slots, A_log, a, dt_bias, b):
        return cake_gated_delta_product_mtp(q, k, v, pool, slots, A_log, a, dt_bias, b)
    return f, (t(SEQS, steps, HQ, D), t(SEQS, steps, n, HQ, D), t(SEQS, steps, n, HV, dv),
               t(POOL, HV, dv, D, dtype=F32), _idx(1, 2), t(HV, dtype=F32), t(SEQS, steps, HV),
               t(HV, dtype=F32), t(SEQS, steps, n, HV))


KH = 8  # KDA heads per rank (Kimi-Linear's 32 over TP4; the fused decode takes 8 and up)


def _kda_prefill_args(t):
    return (t(1, TOK, KH, D), t(1, TOK, KH, D), t(1, TOK, KH, D), t(1, TOK, KH, D),
            t(1, TOK, KH), t(KH, dtype=F32), t(KH * D, dtype=F32),
            t(POOL, KH, D, D, dtype=F32), _idx(1, 2))


def _recurrent_kda(t, fi):
    """SGLang 0.5.23's Kimi-Linear extend (kda_flashinfer_prefill.py): raw gates and beta
    logits, the state pool indexed by slot, int32 cu_seqlens, the CuTe DSL backend."""
    recurrent_kda = fi.recurrent_kda  # flashinfer.kda in 0.7.x, flashinfer.kda_decode before
    # `backend`: 0.7.x (0.6.16 has the CuTe DSL kernel alone).
    backend = fit.accepted(recurrent_kda, {"backend": "cute-dsl"})

    def f(q, k, v, g, beta, A_log, dt_bias, pool, slots, cu):
        out = recurrent_kda(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias,
                            initial_state=pool, output_final_state=False,
                            use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                            lower_bound=-5.0, cu_seqlens=cu, ssm_state_indices=slots,
                            beta_is_logit=True, **backend)
        return out[0], pool
    return f, (*_kda_prefill_args(t), _cu_seqlens(I32))


def _kda_prefill_wrapper(t, fi):
    """SGLang's graph-captured KDA extend (kda_flashinfer_prefill_graph.py): the wrapper is
    planned once outside the compiled forward (plan copies cu_seqlens into its own buffer,
    reading nothing on the host)."""
    from flashinfer.kda import RecurrentKDAPrefillWrapper
    w = RecurrentKDAPrefillWrapper(torch.device("cuda", 0))
    w.plan(_cu_seqlens(I32))

    def f(q, k, v, g, beta, A_log, dt_bias, pool, slots):
        out = w.run(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias,
                    initial_state=pool, ssm_state_indices=slots, output_final_state=False,
                    use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, lower_bound=-5.0,
                    beta_is_logit=True, output=torch.empty_like(q))
        return out[0], pool
    return f, _kda_prefill_args(t)


KDA_H = 12  # packed_kda_decode's fixed head count (its docstring: 3 * 12 * 128 channels)


def _packed_kda_decode(t, fi):
    from flashinfer.kda_decode import packed_kda_decode

    def f(qkv, gate, beta, A_log, dt_bias, state, slots):
        return packed_kda_decode(qkv, gate, beta, A_log, dt_bias, state, slots), state
    return f, (t(SEQS, 3 * KDA_H * D), t(SEQS, KDA_H * D), t(SEQS, KDA_H), t(KDA_H, dtype=F32),
               t(KDA_H * D, dtype=F32), t(POOL, KDA_H, D, D), _idx(1, 2))


def _fused_kda_args(t):
    """Kimi's fused decode: conv over the packed QKV rows (width 4, SD cache layout), the KDA
    recurrence, then the gated RMSNorm; slot 0 is the null slot."""
    rows, ch = SEQS, 3 * KH * D
    conv = t(POOL, 3, ch).transpose(1, 2)  # [slots, ch, 3] with strides [slot, 1, ch] (SD)
    return (t(rows, ch), t(3, 4, KH * D, dtype=F32), conv, t(1, rows, KH, D), t(1, rows, KH),
            t(KH, dtype=F32), t(KH * D, dtype=F32), _idx(1, 2), t(POOL, KH, D, D, dtype=F32),
            t(1, rows, KH, D), t(D, dtype=F32))


def _fused_kda_decode(t, fi):
    from flashinfer.kda_decode import fused_kda_decode

    def f(x, w, conv, gate, beta, A_log, dt_bias, slots, state, ogate, nw):
        out = fused_kda_decode(x, w, conv, gate, beta, A_log, dt_bias, slots, state, ogate, nw)
        return out, conv, state
    return f, _fused_kda_args(t)


def _packed_fused_kda_decode(t, fi):
    """The speculative (MTP) form: one token per request here (T=1), accepted counts 1."""
    from flashinfer.kda_decode import packed_fused_kda_decode

    def f(x, w, conv, gate, beta, A_log, dt_bias, slots, state, ogate, nw, qsl, acc):
        out = packed_fused_kda_decode(x, w, conv, gate, beta, A_log, dt_bias, slots, state,
                                      ogate, nw, query_start_loc=qsl, num_accepted_tokens=acc)
        return out, conv, state
    args = list(_fused_kda_args(t))
    args[7] = _idx(1, 2).view(SEQS, 1)  # [N, T] slots
    return f, (*args, _idx(0, 1, 2), _idx(1, 1))


# MiniMax-H3 prepared programs: prepared once with the caller's tensors (outside the compiled
# forward, as the class requires), then run on those same tensors.
M, P = 4, 1


# The fixed model: hidden 5376, 56 heads of q, k and v at head dim 128, so 56 * 3 rows of 128
# per token to quantize and pack (the classes' docstrings); scale tiles swizzled 128x4.
HIDDEN, HEADS, WIDTH = 5376, 56, 56 * 3 * D


def _rows(m, p):
    return m * (HEADS // p) * 3


def _round128(n):
    return -(-n // 128) * 128


def _minimax_common(t, m=M):
    hidden, width = HIDDEN, WIDTH
    return dict(x=t(m, hidden), x_norm_weight=t(hidden), adaln_scale=t(9, hidden),
                adaln_shift=t(9, hidden), adaln_index=torch.zeros(m, device="cuda", dtype=I32),
                q_norm_weight=t(D), k_norm_weight=t(D), rope_cos_sin=t(m, 96)), hidden, width


def _mxfp8_route():
    """(M, P) for the MXFP8 pre-attention: 0.7.4's programs take any; 0.7.2's only the exact
    routes it compiled (jit/cake_minimax_h3_mxfp8.py MINIMAX_H3_MXFP8_SHAPES, which has no
    M=4), of which the fewest tokens."""
    import importlib
    try:
        jit = importlib.import_module("flashinfer.jit.cake_minimax_h3_mxfp8")
    except ImportError:
        return M, P
    routes = getattr(jit, "MINIMAX_H3_MXFP8_SHAPES", None)
    if routes is None or (M, P) in routes:
        return M, P
    return min(routes)


def _nvfp4_out(t):
    """NVFP4 destinations: E2M1 nibble pairs [P, M, 56 / P, 3, 64], e4m3 scales (8 per row of
    128) in 128-row tiles, and the static global encode scale."""
    u8 = torch.uint8
    return dict(out_q=t(P, M, HEADS // P, 3, D // 2, dtype=u8),
                out_sf=t(P, _round128(_rows(M, P)) * (D // 16), dtype=u8),
                out_global_scale=t(1, dtype=F32))


def _minimax_mxfp8(t, fi):
    from flashinfer import gemm
    m, p = _mxfp8_route()
    common, hidden, width = _minimax_common(t, m)
    u8 = torch.uint8
    run = dict(common, qkv_weight_q=t(width, hidden, dtype=torch.float8_e4m3fn),
               qkv_weight_sf=t(width * (hidden // 32), dtype=u8),
               out_q=t(p, m, HEADS // p, 3, D, dtype=torch.float8_e4m3fn),
               out_sf=t(p, _round128(_rows(m, p)) * (D // 32), dtype=u8))
    op = fi.MiniMaxH3Mxfp8PreAttention(
        **run, activation_q=t(m, hidden, dtype=torch.float8_e4m3fn),
        activation_sf=t(_round128(m) * (hidden // 32), dtype=u8),
        qkv_bf16=t(m, width), gemm_workspace=t(gemm.gemm_base.DEFAULT_WORKSPACE_SIZE, dtype=u8),
        P=p)
    names = tuple(run)
    return (lambda *a: op.run(**dict(zip(names, a)))), tuple(run.values())


def _minimax_nvfp4(t, fi):
    common, hidden, width = _minimax_common(t)
    u8 = torch.uint8
    run = dict(common, x_global_scale=t(1, dtype=F32), qkv_weight_q=t(width, hidden // 2,
                                                                         dtype=u8),
               qkv_weight_sf=t(width * (hidden // 16), dtype=u8), w_global_scale=t(1, dtype=F32),
               **_nvfp4_out(t))
    op = fi.MiniMaxH3Nvfp4PreAttention(
        **run, activation_q=t(M, hidden // 2, dtype=u8),
        activation_sf=t(_round128(M) * (hidden // 16), dtype=u8), P=P)
    names = tuple(run)
    return (lambda *a: op.run(**dict(zip(names, a)))), tuple(run.values())


def _minimax_qkv_pack(t, fi):
    run = dict(q=t(M, HEADS, D), k=t(M, HEADS, D), v=t(M, HEADS, D), **_nvfp4_out(t))
    op = fi.MiniMaxH3QkvQuantizePack(**run, P=P, format="nvfp4")
    names = tuple(run)
    return (lambda *a: op.run(**dict(zip(names, a)))), tuple(run.values())


BUILDERS = {
    "chunk_gated_delta_rule": _gdn_prefill,
    "chunk_gated_delta_rule2": _gdn2_prefill,
    "chunk_gated_delta_product": _gdp_prefill,
    "chunk_gated_delta_rule_paged": _gdn_prefill_paged,
    "gated_delta_rule_decode_paged": _gdn_decode_paged,
    "gdn_paged_prefill_slots": _gdn_prefill_slots,
    "gdn_paged_decode_slots": _gdn_decode_slots,
    "gdn_fused_decode_step": _gdn_fused_decode_step,
    "cake_gated_delta_product_mtp": _gdp_mtp,
    "recurrent_kda": _recurrent_kda,
    "RecurrentKDAPrefillWrapper.run": _kda_prefill_wrapper,
    "packed_kda_decode": _packed_kda_decode,
    "fused_kda_decode": _fused_kda_decode,
    "packed_fused_kda_decode": _packed_fused_kda_decode,
    "MiniMaxH3Mxfp8PreAttention.run": _minimax_mxfp8,
    "MiniMaxH3Nvfp4PreAttention.run": _minimax_nvfp4,
    "MiniMaxH3QkvQuantizePack.run": _minimax_qkv_pack,
}
