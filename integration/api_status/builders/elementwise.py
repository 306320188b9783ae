"""Norms (incl. quant and layernorm), activations, rope (every form)."""
import inspect

import torch

from . import fit

FP8 = torch.float8_e4m3fn
H, EPS = 128, 1e-6


def _norm_op(fi, name):
    """The norm `name`, where the release exports it: `flashinfer.NAME`, or only
    `flashinfer.norm.NAME` (0.6.3's fp8-quant norms, 0.6.11.post1's fused DiT norms)."""
    found = getattr(fi, name, None)
    if found is None:
        from flashinfer import norm
        found = getattr(norm, name)
    return found


def _norm(name):
    return lambda t, fi: (lambda x, w: getattr(fi, name)(x, w, EPS, enable_pdl=False),
                          (t(4, H), t(H)))


def _fused(name):
    def build(t, fi):
        def f(x, r, w):
            getattr(fi, name)(x, r, w, EPS, enable_pdl=False)
            return x, r
        return f, (t(4, H), t(4, H), t(H))
    return build


def _scale(t, op):
    """The fp8-quant norms' `scale`: a device tensor where the release takes one, else the
    host float 0.6.3 (SGLang 0.5.9's pin) declares (`scale: float`), a constant of the call."""
    if inspect.signature(op).parameters["scale"].annotation in (float, "float"):
        return lambda: 0.5, ()
    return lambda s: s, (t(1, dtype=torch.float32),)


def _rmsnorm_quant(t, fi):
    rmsnorm_quant = _norm_op(fi, "rmsnorm_quant")
    scale, given = _scale(t, rmsnorm_quant)

    def f(out, x, w, *s):
        rmsnorm_quant(out, x, w, scale(*s), EPS, enable_pdl=False)
        return out
    return f, (t(4, H, dtype=FP8), t(4, H), t(H), *given)


def _fused_add_rmsnorm_quant(t, fi):
    fused_add_rmsnorm_quant = _norm_op(fi, "fused_add_rmsnorm_quant")
    scale, given = _scale(t, fused_add_rmsnorm_quant)

    def f(out, x, r, w, *s):
        fused_add_rmsnorm_quant(out, x, r, w, scale(*s), EPS, enable_pdl=False)
        return out, r
    return f, (t(4, H, dtype=FP8), t(4, H), t(4, H), t(H), *given)


def _layernorm(t, fi):
    return (lambda x, g, b: fi.layernorm(x, g, b, EPS),
            (t(4, H), t(H, dtype=torch.float32), t(H, dtype=torch.float32)))


def _layernorm_quant(t, fi):
    # `enable_pdl` is 0.7.4's; 0.6.16 and 0.7.2 refuse it (TypeError, eagerly too).
    pdl = ({"enable_pdl": False}
           if "enable_pdl" in inspect.signature(fi.layernorm_quant).parameters else {})

    def f(out, x, g, b, s):
        fi.layernorm_quant(out, x, g, b, s, EPS, **pdl)
        return out
    return f, (t(4, H, dtype=FP8), t(4, H), t(H, dtype=torch.float32),
               t(H, dtype=torch.float32), t(1, dtype=torch.float32))


def _fused_add_rmsnorm_fp8_block_quant(t, fi):
    def f(out, scale, normed, x, r, w):
        fi.fused_add_rmsnorm_fp8_block_quant(out, scale, normed, x, r, w, EPS, enable_pdl=False)
        return out, scale, r
    return f, (t(4, H, dtype=FP8), t(4, H // 128, dtype=torch.float32), t(4, H), t(4, H),
               t(4, H), t(H))


def _fused_rmsnorm_silu(t, fi):
    return lambda x, w: fi.fused_rmsnorm_silu(x, w, EPS), (t(4, H), t(H))


def _act(name):
    return lambda t, fi: (lambda x: getattr(fi, name)(x, enable_pdl=False), (t(4, 2 * H),))


def _silu_mxfp8(t, fi):
    return lambda x: fi.silu_and_mul_mxfp8_quantize(x), (t(128, 2 * H),)


def _silu_nvfp4(t, fi):
    return (lambda x, s: fi.silu_and_mul_nvfp4_quantize(x, s, enable_pdl=False),
            (t(128, 2 * H), t(1, dtype=torch.float32)))


HEAD, TOK = 64, 4


def _qk(t):
    return t(TOK, 2, HEAD), t(TOK, 1, HEAD)


def _rope(name, by_pos, inplace):
    def build(t, fi):
        fn = getattr(fi, name)
        q, k = _qk(t)
        if by_pos:
            where = (torch.zeros(TOK, device="cuda", dtype=torch.int32),)
        else:
            # One request holding every token (indptr [0, TOK]): with [0, 0] the kernel
            # rotates nothing and the out-of-place results are never written.
            where = (torch.tensor([0, TOK], device="cuda", dtype=torch.int32),
                     torch.zeros(1, device="cuda", dtype=torch.int32))
        if inplace:
            def f(q, k, *w):
                fn(q, k, *w)
                return q, k
            return f, (q, k, *where)
        return (lambda q, k, *w: fn(q, k, *w)), (q, k, *where)
    return build


def _cos_sin(name, inplace):
    def build(t, fi):
        fn = getattr(fi, name)
        q, k = t(TOK, 2 * HEAD), t(TOK, HEAD)
        cache = t(32, HEAD, dtype=torch.float32)
        pos = torch.zeros(TOK, device="cuda", dtype=torch.int32)

        def f(q, k, cache, pos):
            out = fn(pos, q, k, HEAD, cache, True)
            return (q, k) if inplace else out
        return f, (q, k, cache, pos)
    return build


def _rope_fp8(t, fi):
    import flashinfer.rope as rope
    qr, kr, qn, kn = t(TOK, 2, 64), t(TOK, 1, 64), t(TOK, 2, 128), t(TOK, 1, 128)
    cache, pos = t(32, 64, dtype=torch.float32), torch.zeros(TOK, device="cuda",
                                                             dtype=torch.int32)
    return (lambda *a: rope.rope_quantize_fp8(*a, is_neox=True, quantize_dtype=FP8),
            (qr, kr, qn, kn, cache, pos))


def _mla_rope_fp8(t, fi):
    import flashinfer.rope as rope
    qr, kr, qn, kn = t(TOK, 2, 64), t(TOK, 64), t(TOK, 2, 512), t(TOK, 512)
    cache, pos = t(32, 64, dtype=torch.float32), torch.zeros(TOK, device="cuda",
                                                             dtype=torch.int32)
    return (lambda *a: rope.mla_rope_quantize_fp8(*a, is_neox=True, quantize_dtype=FP8),
            (qr, kr, qn, kn, cache, pos))


BUILDERS = {
    **{n: _norm(n) for n in ("rmsnorm", "gemma_rmsnorm")},
    **{n: _fused(n) for n in ("fused_add_rmsnorm", "gemma_fused_add_rmsnorm")},
    "rmsnorm_quant": _rmsnorm_quant,
    "fused_add_rmsnorm_quant": _fused_add_rmsnorm_quant,
    "layernorm": _layernorm,
    "layernorm_quant": _layernorm_quant,
    "fused_add_rmsnorm_fp8_block_quant": _fused_add_rmsnorm_fp8_block_quant,
    "fused_rmsnorm_silu": _fused_rmsnorm_silu,
    **{n: _act(n) for n in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")},
    "apply_rope": _rope("apply_rope", False, False),
    "apply_rope_inplace": _rope("apply_rope_inplace", False, True),
    "apply_rope_pos_ids": _rope("apply_rope_pos_ids", True, False),
    "apply_rope_pos_ids_inplace": _rope("apply_rope_pos_ids_inplace", True, True),
    "apply_llama31_rope": _rope("apply_llama31_rope", False, False),
    "apply_llama31_rope_inplace": _rope("apply_llama31_rope_inplace", False, True),
    "apply_llama31_rope_pos_ids": _rope("apply_llama31_rope_pos_ids", True, False),
    "apply_llama31_rope_pos_ids_inplace": _rope("apply_llama31_rope_pos_ids_inplace", True,
                                                True),
    "apply_rope_with_cos_sin_cache": _cos_sin("apply_rope_with_cos_sin_cache", False),
    "apply_rope_with_cos_sin_cache_inplace": _cos_sin("apply_rope_with_cos_sin_cache_inplace",
                                                      True),
    "rope_quantize_fp8": _rope_fp8,
    "mla_rope_quantize_fp8": _mla_rope_fp8,
}


# 0.7.4's newer norms, with the shapes their docstrings give.
def _blackwell_only(build):
    """FlashInfer runs these on the SM100 family only (SM100/103/107, its docstrings; eager
    raises elsewhere): their arguments are refused as an H200, so they are traced, and their
    results checked against FlashInfer's own Python, as a B200."""
    def only(t, fi):
        if torch.cuda.get_device_capability()[0] != 10:
            raise RuntimeError("FlashInfer runs this op on the SM100 family only")
        return build(t, fi)
    return only


def _gated_residual(name, **extra):
    """The default backend ("auto": FlashInfer's Cake program where the package ships one, else
    its CuTe DSL kernel), and the CuTe DSL kernel by name, whose Python runs to its end here
    (the Cake package's probe reads a build manifest 0.7.4's wheel does not ship)."""
    def build(t, fi):
        f32 = torch.float32
        args = (t(4, 8192), t(4, 8192, dtype=f32), t(8192), t(8192, dtype=f32),
                t(8192, dtype=f32))
        fn = getattr(fi, name)
        return {backend: ((lambda b, r, w, a, be, backend=backend: fn(
                    b, r, w, a, be, enable_pdl=False, backend=backend, **extra)), args)
                for backend in ("auto", "cute")}
    return build


_gated_residual_rmsnorm = _gated_residual("gated_residual_rmsnorm", eps=EPS)
_gated_residual_next_rmsnorm = _gated_residual("gated_residual_next_rmsnorm")


def _rmsnorm_sigmoid_gate(t, fi):
    def f(x, g):
        fi.rmsnorm_sigmoid_gate(x, g, EPS, enable_pdl=False)
        return x
    return f, (t(4, 64), t(4, 64))


def _dit(name, gated_scale_shift=False):
    def build(t, fi):
        hidden, rows = 3072, 4
        # WAN's temb.chunk(6, dim=2): each chunk (1, rows, hidden) with row stride 6 * hidden
        chunks = t(1, rows, 6 * hidden).chunk(6, dim=2)
        x = t(1, rows, hidden)
        op = _norm_op(fi, name)
        if name == "fused_dit_residual_layernorm_scale_shift":
            return (lambda x, s, sh: op(x, s, sh), (x, chunks[0], chunks[1]))
        if gated_scale_shift:
            return (lambda x, r, g, s, sh: op(x, r, g, s, sh),
                    (x, t(1, rows, hidden), chunks[0], chunks[1], chunks[2]))
        return (lambda x, r, g, a, b: op(x, r, g, a, b),
                (x, t(1, rows, hidden), chunks[0], t(hidden, dtype=torch.float32),
                 t(hidden, dtype=torch.float32)))
    return build


BUILDERS.update({
    "gated_residual_rmsnorm": _blackwell_only(_gated_residual_rmsnorm),
    "gated_residual_next_rmsnorm": _blackwell_only(_gated_residual_next_rmsnorm),
    "rmsnorm_sigmoid_gate": _blackwell_only(_rmsnorm_sigmoid_gate),
    "fused_dit_residual_layernorm_scale_shift": _dit("fused_dit_residual_layernorm_scale_shift"),
    "fused_dit_gate_residual_layernorm_scale_shift":
        _dit("fused_dit_gate_residual_layernorm_scale_shift", True),
    "fused_dit_gate_residual_layernorm_gamma_beta":
        _dit("fused_dit_gate_residual_layernorm_gamma_beta"),
})


def _fused_qk_rmsnorm_rope(t, fi):
    """WAN's video DiT self-attention: one frame of 2x2 patches, 4 heads each of q/k/v at head
    dim 128, RoPE channels split 44/42/42 over frame/height/width."""
    heads, dim = 4, 128
    grid = dict(ppf=1, pph=2, ppw=2, num_frame_channels=44, num_height_channels=42,
                num_width_channels=42, num_heads_q=heads, num_heads_k=heads,
                num_heads_v=heads, head_dim=dim)
    return (lambda qkv, qw, kw: fi.fused_qk_rmsnorm_rope(qkv, qw, kw, **grid),
            (t(4, 3 * heads * dim), t(heads * dim), t(heads * dim)))


def _rope_fp8_append(t, fi):
    """Fused RoPE + FP8 quantize + paged KV append, as an FP8-KV server's forward calls it:
    GQA (k/v caches, NHD) and MLA (compressed-KV and rope caches, no V)."""
    import flashinfer.rope as rope
    pages, page = 8, 16
    cache = t(32, 64, dtype=torch.float32)
    pos = torch.arange(TOK, device="cuda", dtype=torch.int32)
    # Every token in request 0, each at a position of its own (sampling_kv's _kv_indexing).
    table = (torch.arange(pages, device="cuda", dtype=torch.int32),
             torch.tensor([0, pages], device="cuda", dtype=torch.int32),
             torch.zeros(TOK, device="cuda", dtype=torch.int32), pos)

    def call(qr, kr, qn, kn, v, c0, c1, cache, pos, *table):
        q_rope, q_nope = rope.rope_quantize_fp8_append_paged_kv_cache(
            qr, kr, qn, kn, v, cache, pos, (c0, c1), *table, is_neox=True,
            quantize_dtype=FP8, page_size=page)
        return q_rope, q_nope, c0, c1

    gqa = (t(TOK, 4, 64), t(TOK, 2, 64), t(TOK, 4, 64), t(TOK, 2, 64), t(TOK, 2, 128),
           t(pages, page, 2, 128, dtype=FP8), t(pages, page, 2, 128, dtype=FP8))
    mla = (t(TOK, 4, 64), t(TOK, 64), t(TOK, 4, 512), t(TOK, 512), None,
           t(pages, page, 512, dtype=FP8), t(pages, page, 64, dtype=FP8))
    return {"gqa": (call, (*gqa, cache, pos, *table)),
            "mla": (lambda qr, kr, qn, kn, c0, c1, *rest: call(qr, kr, qn, kn, None, c0, c1,
                                                                *rest),
                    (*mla[:4], *mla[5:], cache, pos, *table))}


def _rmsnorm_fp4quant(t, fi):
    """NVFP4 (16-element blocks, e4m3 scales, a global scale), swizzled scales as an NVFP4
    GEMM reads them."""
    from flashinfer.cute_dsl.rmsnorm_fp4quant import rmsnorm_fp4quant
    # `enable_pdl`: not in 0.6.3 (SGLang 0.5.9's pin), as in its add_rmsnorm_fp4quant.
    pdl = fit.accepted(rmsnorm_fp4quant, {"enable_pdl": False})
    return (lambda x, w, s: rmsnorm_fp4quant(x, w, global_scale=s, eps=EPS,
                                             is_sf_swizzled_layout=True, **pdl),
            (t(4, 2048), t(2048), t(1, dtype=torch.float32)))


def _add_rmsnorm_fp4quant(t, fi):
    from flashinfer.cute_dsl.add_rmsnorm_fp4quant import add_rmsnorm_fp4quant
    pdl = fit.accepted(add_rmsnorm_fp4quant, {"enable_pdl": False})

    def f(x, r, w, s):
        out = add_rmsnorm_fp4quant(x, r, w, global_scale=s, eps=EPS, is_sf_swizzled_layout=True,
                                   **pdl)
        return (*out, r)
    return f, (t(4, 2048), t(4, 2048), t(2048), t(1, dtype=torch.float32))


BUILDERS.update({
    "fused_qk_rmsnorm_rope": _fused_qk_rmsnorm_rope,
    "rope_quantize_fp8_append_paged_kv_cache": _rope_fp8_append,
    # SM100 family only (FlashInfer's checks; the CuTe DSL kernels are built for it): traced
    # and checked as a B200, their device checks being inside their operators.
    "rmsnorm_fp4quant": _blackwell_only(_rmsnorm_fp4quant),
    "add_rmsnorm_fp4quant": _blackwell_only(_add_rmsnorm_fp4quant),
    "silu_and_mul_mxfp8_quantize": _blackwell_only(_silu_mxfp8),
    "silu_and_mul_nvfp4_quantize": _blackwell_only(_silu_nvfp4),
})
