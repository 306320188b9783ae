"""Norms and fused activations: flashinfer.norm's fused norms and the CuTe DSL RMSNorm + FP4
quantizers."""

import torch

from _dynafold_ops.engine.record import Correction, Declare, Fake, Family, Fresh, Op, Sweep
from _dynafold_ops.registry._shapes import _round_up

OPS = []


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


# flashinfer.cute_dsl's fused RMSNorm + FP4 quantizers (0.6.16 on, SM100): the public body compiles
# its CuTe DSL kernel at call time (`_get_compiled_kernel`: cute.compile, source formatting) and
# launches the compiled closure; no private function holds the launch with the outputs' allocation,
# so the public function is the boundary. Woken for the call that gives no output buffer (the
# correction's `fresh_only`), whose results are fresh; add_rmsnorm_fp4quant also writes `residual`
# in place (residual += input), declared mutated. The kernels write only those (docs/op-audit); the
# fakes are the records'.
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.cute_dsl.rmsnorm_fp4quant",
    function="rmsnorm_fp4quant",
    name="flashinfer::rmsnorm_fp4quant",
    declare=Declare(),
    # dynafold's declarations of flashinfer.cute_dsl's fused RMSNorm + FP4 quantizers
    # (0.6.16-0.7.4): the kernels write `y_fp4` and `block_scale` (and add_rmsnorm_fp4quant
    # `residual`, declared mutated, `block_scale_unswizzled` with both layouts, `y_out` when
    # given), each the caller's when given, else allocated by the function; with none given
    # and one scale layout the result is the two fresh tensors (docs/op-audit).
    correction=Correction(fresh_only=Fresh(when={"y_fp4": None, "block_scale": None}, results=2)),
    # dynafold's own declarations of the CuTe DSL RMSNorm + FP4 quantizers, woken for the call that
    # gives no output buffer (the correction).
    fake=Fake(_rmsnorm_fp4quant, ("input", "block_size", "scale_format", "is_sf_swizzled_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.cute_dsl.add_rmsnorm_fp4quant",
    function="add_rmsnorm_fp4quant",
    name="flashinfer::add_rmsnorm_fp4quant",
    declare=Declare(mutates=("residual",)),
    correction=Correction(
        fresh_only=Fresh(
            when={"y_fp4": None, "block_scale": None, "output_both_sf_layouts": False,
                  "block_scale_unswizzled": None, "y_out": None},
            results=2,
        ),
    ),
    # 0.6.3 and 0.6.11.post1 (SGLang 0.5.9's and 0.5.12's pins) have no `y_out` (the normed
    # output, added later); the same body otherwise (add_rmsnorm_fp4quant.py: `y_fp4`,
    # `block_scale` and `block_scale_unswizzled` allocated unless given, `residual` in place).
    by_release={release: Correction(fresh_only=Fresh(
        when={"y_fp4": None, "block_scale": None, "output_both_sf_layouts": False,
              "block_scale_unswizzled": None},
        results=2,
    )) for release in ("0.6.3", "0.6.11.post1")},
    fake=Fake(_rmsnorm_fp4quant, ("input", "block_size", "scale_format", "is_sf_swizzled_layout")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))


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


# flashinfer.norm's fused norms for diffusion models (0.6.16 on) call their JIT kernel
# (`rmsnorm_silu`, `fused_dit_layernorm`) in the public function's own body: no private function
# holds the call, so the boundary is the public function, its argument checks and its JIT loader
# (file locks, ninja) included. Woken for the call that gives no output buffer, whose results are
# fresh (the correction's `fresh_only`); their fakes are the records'. The kernels write only those
# outputs (docs/op-audit).
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.norm",
    function="fused_rmsnorm_silu",
    name="flashinfer::fused_rmsnorm_silu",
    declare=Declare(),
    # dynafold's declarations of flashinfer.norm's fused diffusion norms (0.6.16-0.7.4): the
    # kernels write only the outputs (csrc/rmsnorm_silu.cu: `output`, and `scale_row_out`,
    # FlashInfer's `block_scale`, for NVFP4 only; fused_dit_layernorm.cuh: `residual_out`,
    # `norm_out`, `sf_out`), each the caller's when given, else allocated by the function.
    # fused_rmsnorm_silu returns `out`, or `(out, block_scale)` when `out` is NVFP4: with
    # neither given the output is bfloat16, one fresh tensor.
    correction=Correction(fresh_only=Fresh(when={"out": None, "block_scale": None}, results=1)),
    # dynafold's own declarations of the fused diffusion norms, woken for the call that gives no
    # output buffer (the correction's `fresh_only`).
    fake=Fake(_fused_rmsnorm_silu, ("input", "out")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS += [
    Op(
        family=Family.NORM_ACTIVATION,
        module="flashinfer.norm",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        correction=Correction(
            fresh_only=Fresh(
                when={"residual_out": None, "norm_out": None, "sf_out": None},
                results=2,
            ),
        ),
        fake=Fake(_fused_dit_layernorm, ("input", "use_nvfp4", "use_mxfp8")),
        sweep=Sweep(equal=("0.6.16", "0.7.4")),
    )
    for name in ("fused_dit_gate_residual_layernorm_gamma_beta",
                 "fused_dit_gate_residual_layernorm_scale_shift",
                 "fused_dit_residual_layernorm_scale_shift")
]


def _fused_qk_rmsnorm_rope(values):
    """`fused_qk_rmsnorm_rope`'s `(q_out, k_out, v_out)` with no buffers given (the only call
    woken), as its body allocates them (0.6.16-0.7.4): float8_e4m3fn with `output_fp8`, else
    bfloat16; (batch, ppf*pph*ppw, heads, head_dim) for a 3-D qkv, (tokens, heads, head_dim)
    for a 2-D one, per num_heads_q/k/v."""
    qkv, head_dim = values["qkv"], values["head_dim"]
    dtype = torch.float8_e4m3fn if values["output_fp8"] else torch.bfloat16
    rows = ((qkv.shape[0], values["ppf"] * values["pph"] * values["ppw"]) if qkv.dim() == 3
            else (qkv.shape[0],))
    return tuple(qkv.new_empty((*rows, values[heads], head_dim), dtype=dtype)
                 for heads in ("num_heads_q", "num_heads_k", "num_heads_v"))


# fused_qk_rmsnorm_rope (0.6.16 on; video DiT attention): the public function calls its JIT module's
# function in its own body (`_get_fused_qk_rmsnorm_rope_module()`), outside any declaration, so the
# public function (with its backend_requirement checks) is the boundary. Woken for the call that
# gives no output buffer (the correction's `fresh_only`): the kernel writes only q_out, k_out and
# v_out, then fresh (docs/op-audit). Its keyword-only parameters reach the operator positionally
# (hooks/ops/engine/narrowing.py). The fake is the record's.
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.norm",
    function="fused_qk_rmsnorm_rope",
    name="flashinfer::fused_qk_rmsnorm_rope",
    declare=Declare(),
    # dynafold's declaration of fused_qk_rmsnorm_rope (0.6.16-0.7.4): the kernel writes only
    # q_out, k_out and v_out (csrc/norm.cu fused_qk_rmsnorm_rope; docs/op-audit), each the
    # caller's when given, else allocated by the function.
    correction=Correction(
        fresh_only=Fresh(when={"q_out": None, "k_out": None, "v_out": None}, results=3),
    ),
    fake=Fake(
        _fused_qk_rmsnorm_rope,
        ("qkv", "head_dim", "output_fp8", "ppf", "pph", "ppw", "num_heads_q", "num_heads_k",
         "num_heads_v"),
    ),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _gated_residual_rmsnorm(values):
    """0.7.4's `gated_residual_rmsnorm` with no `out` given (the only call woken): the
    function's `torch.empty_like(residual)`, float32 (rows, 8192) like the residual it
    requires."""
    return torch.empty_like(values["residual"])


def _gated_residual_next_rmsnorm(values):
    """0.7.4's `gated_residual_next_rmsnorm` with neither output given (the only call woken):
    `(torch.empty_like(residual), torch.empty_like(branch))`, float32 and bfloat16."""
    return torch.empty_like(values["residual"]), torch.empty_like(values["branch"])


# 0.7.4's fused norms for hidden size 8192 / head dim 64 (SM100 family) check every tensor's
# data_ptr() alignment in the public function's body and pick the backend (Cake program or CuTe DSL
# kernel) from it there, before calling their declared op: no trace can read an address, and the
# choice belongs to each call's real pointers. So the boundary is the public function, checks and
# choice included. gated_residual_rmsnorm and gated_residual_next_rmsnorm are woken for the call
# that gives no output buffer, whose results are fresh (the correction's `fresh_only`; their fakes
# are the records'); rmsnorm_sigmoid_gate writes `input` in place and returns nothing. Its schema is
# given: its `backend` is a Literal, which torch infers no type for (a narrowing makes it a str for
# the other two). The kernels write only those outputs (docs/op-audit). Named `_public`: FlashInfer
# declares the private ops by the plain names.
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.norm",
    function="gated_residual_rmsnorm",
    name="flashinfer::gated_residual_rmsnorm_public",
    declare=Declare(),
    # dynafold's declarations of 0.7.4's gated residual norms: the kernels write only `out`
    # (`residual_out`, `ffn_input`), each the caller's when given, else allocated by the function
    # (norm/kernels/gated_residual_rmsnorm.py, gated_residual_next_rmsnorm.py; docs/op-audit).
    correction=Correction(fresh_only=Fresh(when={"out": None}, results=1)),
    # dynafold's own declarations of 0.7.4's gated residual norms, woken for the call that gives no
    # output buffer (the correction's `fresh_only`).
    fake=Fake(_gated_residual_rmsnorm, ("residual", "out")),
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.norm",
    function="gated_residual_next_rmsnorm",
    name="flashinfer::gated_residual_next_rmsnorm_public",
    declare=Declare(),
    correction=Correction(
        fresh_only=Fresh(when={"residual_out": None, "ffn_input": None}, results=2),
    ),
    fake=Fake(_gated_residual_next_rmsnorm, ("residual", "branch")),
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.NORM_ACTIVATION,
    module="flashinfer.norm",
    function="rmsnorm_sigmoid_gate",
    name="flashinfer::rmsnorm_sigmoid_gate_public",
    declare=Declare(
        mutates=("input",),
        schema="(Tensor(a0!) input, Tensor gate, float eps=1e-05, *, bool enable_pdl=True, str "
               "backend=\"auto\") -> ()",
    ),
    sweep=Sweep(equal=("0.7.4",)),
))
