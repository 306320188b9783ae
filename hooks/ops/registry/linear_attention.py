"""Linear attention: GDN, GDP and KDA prefill and decode steps, their state pools."""

import torch

from _dynafold_ops.engine.record import (
    Correction,
    Declare,
    Fake,
    Family,
    Form,
    Fresh,
    Given,
    Op,
    Sweep,
)

OPS = []

OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn_prefill",
    function="get_gdn_prefill_module.<locals>.gdn_prefill",
    # 0.6.7.post3's GDN prefill op (0.6.16 declares none): the SM90 kernel keeps a TMA
    # descriptor per SM in `workspace_buffer` and rewrites it before use
    # (include/flashinfer/flat/hopper/collective/flat_collective_store.hpp:238).
    correction=Correction(also_mutates=("workspace_buffer",)),
    sweep=Sweep(old_layout="equal"),
))

# RecurrentKDAPrefillWrapper.run (0.7.x, packed recurrent KDA prefill planned once per batch outside
# the compiled forward; a wrapper method, hooks/ops/mechanisms/method_boundaries.py) takes its
# planner's threading lock and calls recurrent_kda(backend="cute-dsl") with the planner's buffers
# (cu_seqlens copied by plan(); the sequence order, chunk prefix and workspace the kernel
# regenerates on every run, scratch): the CuTe DSL compile, the workspace lock and the raw-stream
# launch in its body. Woken for the call that gives `output`, asks for no final state and no
# checkpoints (the correction's `result_is_given`, form "pair"): the kernel writes `output` and
# updates `initial_state` in place (the pool's rows by ssm_state_indices, the final state), and the
# result is `(output, None)` (docs/op-audit).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.kda",
    function="RecurrentKDAPrefillWrapper.run",
    name="flashinfer::recurrent_kda_prefill_wrapper_run",
    declare=Declare(mutates=("initial_state",)),
    # dynafold's declaration of RecurrentKDAPrefillWrapper.run (a wrapper method): with `output`
    # given, no final state asked for and no checkpoints, the CuTe DSL prefill returns `(output,
    # None)` (0.7.4 and 0.7.2 kda_prefill_cute.py:383, :585/:589).
    correction=Correction(
        result_is_given=Given(
            argument="output",
            form=Form.PAIR,
            when={"output_final_state": False, "state_checkpoints": None,
                  "checkpoint_cu_starts": None, "checkpoint_every_n_tokens": 0,
                  "checkpoint_state_indices": None},
        ),
    ),
    sweep=Sweep(equal=("0.7.4",)),
))


def _fused_kda_decode(values):
    """`fused_kda_decode`'s result with no `output` given, the only call woken: its
    `torch.empty((1, num_rows, H, 128), dtype=x.dtype)`, `x` being [num_rows, 3 * H * 128]
    (0.7.2, 0.7.4: kda_kernels/fused_kda_decode.py run_fused_kda_decode)."""
    x = values["x"]
    return x.new_empty((1, x.shape[0], x.shape[1] // (3 * 128), 128))


# fused_kda_decode (0.7.2 on): kda_kernels/fused_kda_decode.py run_fused_kda_decode checks
# `conv_state.data_ptr() % 8` (no trace can read an address), compiles its CuTe DSL kernel and
# launches it; FlashInfer's module holds it as an alias imported at load, so the boundary is the
# public function. The kernel updates both caches in place, `conv_state` and `state` (rows whose
# slot is non-positive untouched), and writes `output`; woken for the call that gives no `output`,
# whose result is fresh (the correction's `fresh_only`; its fake is the record's).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.kda_decode",
    function="fused_kda_decode",
    name="flashinfer::fused_kda_decode",
    declare=Declare(mutates=("conv_state", "state")),
    # dynafold's declaration of fused_kda_decode: besides the two caches it declares mutable, the
    # kernel writes only `output` (kda_kernels/fused_kda_decode.py), the caller's when given, else
    # allocated.
    correction=Correction(fresh_only=Fresh(when={"output": None}, results=1)),
    # dynafold's own declaration of fused_kda_decode, woken for the call that gives no `output` (the
    # correction's `fresh_only`).
    fake=Fake(_fused_kda_decode, ("x",)),
    sweep=Sweep(equal=("0.7.4",)),
))


def _packed_kda_decode(values):
    """`packed_kda_decode`'s result with no `output` given, the only call woken: its
    `mixed_qkv.new_empty((batch, 1, 12, 128))` (0.7.2, 0.7.4:
    kda_kernels/cake_packed_kda_decode.py run_packed_kda_decode; 12 heads of 128, fixed)."""
    mixed_qkv = values["mixed_qkv"]
    return mixed_qkv.new_empty((mixed_qkv.shape[0], 1, 12, 128))


# packed_kda_decode (0.7.2 on, SM100 family): kda_kernels/cake_packed_kda_decode.py
# run_packed_kda_decode (an alias imported at load, so the public function is the boundary) picks
# its Cake program from data_ptr() alignment and launches it on the raw stream handle. The kernel
# updates `state` in place (rows whose slot is -1 untouched) and writes `output`; woken for the call
# that gives no `output` (the correction's `fresh_only`; its fake is the record's).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.kda_decode",
    function="packed_kda_decode",
    name="flashinfer::packed_kda_decode",
    declare=Declare(mutates=("state",)),
    # dynafold's declaration of packed_kda_decode: besides `state`, declared mutable, the kernel
    # writes only `output` (csrc/kda/cake_kda_packed_t1_binding.cuh Run), the caller's when given,
    # else allocated.
    correction=Correction(fresh_only=Fresh(when={"output": None}, results=1)),
    fake=Fake(_packed_kda_decode, ("mixed_qkv",)),
    sweep=Sweep(equal=("0.7.4",)),
))


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


# chunk_gated_delta_rule2 (GDN-2 prefill, 0.7.2 on; SM100): the public function calls cuDNN's fused
# linear-attention engine (flashinfer/cudnn/linear_attention.py: the frontend's check, a graph built
# and cached per shape, launched on the raw stream). Woken for the call that keeps the final state
# in new buffers (the correction's `fresh_only`): with no output, output_state or state pool the
# engine writes only the output and final state it allocates; initial_state is read (written only
# with a state pool, `overwrite`). The fake is the record's.
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn2_prefill",
    function="chunk_gated_delta_rule2",
    name="flashinfer::chunk_gated_delta_rule2",
    declare=Declare(),
    # dynafold's declaration of chunk_gated_delta_rule2 (0.7.2 on): (output, final_state), both
    # allocated when output and output_state are not given (cudnn/linear_attention.py
    # cudnn_chunk_gated_delta_rule2, _state_out). A state pool (0.7.4 state_indices) needs an
    # explicit output_state when the final state is kept, so it is never such a call.
    correction=Correction(
        fresh_only=Fresh(
            when={"output": None, "output_state": None, "output_final_state": True},
            results=2,
        ),
    ),
    fake=Fake(_chunk_gated_delta_rule2, ("q", "v", "cu_seqlens", "initial_state")),
    sweep=Sweep(equal=("0.7.4",)),
))

# chunk_gated_delta_product (GDP prefill, 0.7.2 on) reaches the same cuDNN engine with
# backend="auto" (0.7.4's "cake" backend reads cu_seqlens on the host and has its own
# buffers: a call naming it is traced as shipped), woken for the same call.
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdp_prefill",
    function="chunk_gated_delta_product",
    name="flashinfer::chunk_gated_delta_product",
    declare=Declare(),
    # dynafold's declaration of chunk_gated_delta_product (0.7.2 on): the same, through
    # cudnn_chunk_gated_delta_product, for backend "auto" (0.7.4; 0.7.2 has only cuDNN).
    correction=Correction(
        fresh_only=Fresh(
            when={"output": None, "output_state": None, "output_final_state": True,
                  "backend": "auto"},
            results=2,
        ),
    ),
    # cudnn_chunk_gated_delta_product allocates the same (its k and v on the sub-token rows).
    fake=Fake(_chunk_gated_delta_rule2, ("q", "v", "cu_seqlens", "initial_state")),
    sweep=Sweep(equal=("0.7.4",)),
))


def _packed_fused_kda_decode(values):
    """`packed_fused_kda_decode`'s result with no `output` given, the only call woken: both of
    its paths allocate `torch.empty((1, num_rows, H, 128), bfloat16)`, `x` being
    [num_rows, 3 * H * 128] (0.7.2, 0.7.4: T=1 kda_kernels/fused_kda_decode.py
    run_fused_kda_decode, T>1 fused_kda_decode_multitoken.py:1095-:1099)."""
    x = values["x"]
    return x.new_empty((1, x.shape[0], x.shape[1] // (3 * 128), 128), dtype=torch.bfloat16)


# packed_fused_kda_decode (0.7.2 on): the speculative (T >= 1) form of fused_kda_decode. Its T=1
# path calls run_fused_kda_decode (the `conv_state.data_ptr() % 8` check, CuTe DSL compile and
# launch), its T>1 path kda_kernels/fused_kda_decode_multitoken.py (CuTe DSL compile and launch on
# the raw stream handle); both are aliases imported at load, so the boundary is the public function.
# Either kernel updates `conv_state` and `state` in place (null rows untouched) and writes `output`;
# woken for the call that gives no `output` (the correction's `fresh_only`; its fake is the
# record's).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.kda_decode",
    function="packed_fused_kda_decode",
    name="flashinfer::packed_fused_kda_decode",
    declare=Declare(mutates=("conv_state", "state")),
    # dynafold's declaration of packed_fused_kda_decode: besides the two caches it declares mutable,
    # either kernel (T=1: kda_kernels/fused_kda_decode.py, T>1: fused_kda_decode_multitoken.py)
    # writes only `output`, the caller's when given, else allocated.
    correction=Correction(fresh_only=Fresh(when={"output": None}, results=1)),
    fake=Fake(_packed_fused_kda_decode, ("x",)),
    sweep=Sweep(equal=("0.7.4",)),
))


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


# gdn_fused_decode_step (0.7.2 on): its body asks the specialized kernels' registry, read from
# package data (gdn_fused_decode_specialized.load_gdn_fused_decode_registry, importlib.resources),
# and launches an SM120 CUDA or CuTe DSL kernel, else runs the composable torch path, outside any
# declared op: the boundary is the public function. Every path updates both pools, `conv_state` and
# `ssm_state`, in place (padded rows untouched) and writes `out`; its result is `(output,
# conv_state, ssm_state)`. Woken for the call that gives no `out`: the operator returns the fresh
# output, and what Dynamo calls hands the two pools back after it (the correction's `fresh_only`,
# `then`).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn_kernels.experimental.gdn_fused_decode",
    function="gdn_fused_decode_step",
    name="flashinfer::gdn_fused_decode_step",
    declare=Declare(mutates=("conv_state", "ssm_state")),
    # dynafold's declaration of gdn_fused_decode_step: besides the two pools it declares mutable
    # (and returns after its output), every path writes only `out`, the caller's when given, else
    # allocated (gdn_fused_decode.py:300-:304, the kernels' `execute`).
    correction=Correction(
        fresh_only=Fresh(when={"out": None}, results=1, then=("conv_state", "ssm_state")),
    ),
    # dynafold's own declaration of gdn_fused_decode_step, woken for the call that gives no `out`
    # (the correction's `fresh_only`): the output only.
    fake=Fake(_gdn_fused_decode_step, ("hidden_states", "A_log", "ssm_state")),
    sweep=Sweep(equal=("0.7.4",)),
))


def _cake_gated_delta_product_mtp(values):
    """`cake_gated_delta_product_mtp`'s fresh output with no `output` given, the only call
    woken (the pool it also returns is its argument): [B, T, HV, 64] in q's dtype, B and T
    from `q`, HV from `v` [B, T, n, HV, 64] (0.7.4 cake_gdp_backend/__init__.py:387
    out_shape, :391 torch.zeros in bfloat16, :451 converted to q's dtype)."""
    q, v = values["q"], values["v"]
    return q.new_empty((q.shape[0], q.shape[1], v.shape[3], 64))


# cake_gated_delta_product_mtp (0.7.4): cake_gdp_backend checks q's, k's and the pool's data_ptr()
# alignment, picks its Cake program and launches it on the current stream, all in a body Dynamo
# would trace: the boundary is the public function. The kernel updates the pool `initial_state` in
# place (writeback or per-token scatter; none with disable_state_update) and writes the output; its
# result is `(output, initial_state)`. Woken for the call that gives no `output`: the operator
# returns the fresh output and what Dynamo calls hands the pool back after it (the correction's
# `then`).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.cake_gdp",
    function="cake_gated_delta_product_mtp",
    name="flashinfer::cake_gated_delta_product_mtp",
    declare=Declare(mutates=("initial_state",)),
    # dynafold's declaration of cake_gated_delta_product_mtp: besides the pool it declares mutable
    # (and returns after its output), the kernel writes only `output`, the caller's when given, else
    # allocated as zeros (cake_gdp_backend __init__.py:391).
    correction=Correction(
        fresh_only=Fresh(when={"output": None}, results=1, then=("initial_state",)),
    ),
    # dynafold's own declaration of cake_gated_delta_product_mtp, woken for the call that gives no
    # `output`: its output only, as gdn_fused_decode_step's.
    fake=Fake(_cake_gated_delta_product_mtp, ("q", "v")),
    sweep=Sweep(equal=("0.7.4",)),
))


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


# chunk_gated_delta_rule_paged and gated_delta_rule_decode_paged (0.7.4, gdn_paged.py): their bodies
# compute the page slots (a launch) and call chunk_gated_delta_rule or
# gated_delta_rule_decode_pretranspose, whose backend choice reads the Cake GDN manifest or the CuTe
# DSL compile cache from the file system, outside any declared op: the boundary is the public
# function. The kernels update `state_pool` in place (the prefill's initial, checkpoint and final
# states all live there) and write the output; woken for the call that gives no `output` nor `slots`
# (the correction's `fresh_only`, hooks/ops/engine/narrowing.py `slots`; fakes: the records').
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn_paged",
    function="chunk_gated_delta_rule_paged",
    name="flashinfer::chunk_gated_delta_rule_paged",
    declare=Declare(mutates=("state_pool",)),
    # dynafold's declarations of the paged GDN functions: besides the pool they declare mutable, the
    # kernels write only `output`, the caller's when given, else allocated (gdn_prefill.py:1881,
    # gdn_decode.py's pretranspose decode).
    correction=Correction(fresh_only=Fresh(when={"output": None}, results=1)),
    # dynafold's own declarations of the paged GDN functions, woken for the call that gives no
    # `output` (the correction's `fresh_only`).
    fake=Fake(_chunk_gated_delta_rule_paged, ("q", "v")),
    # gdn_paged.py imports the GDN decode's CuTe DSL kernels at load.
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn_paged",
    function="gated_delta_rule_decode_paged",
    name="flashinfer::gated_delta_rule_decode_paged",
    declare=Declare(mutates=("state_pool",)),
    correction=Correction(fresh_only=Fresh(when={"output": None}, results=1)),
    fake=Fake(_gated_delta_rule_decode_paged, ("q", "v")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))


def _chunk_gated_delta_rule(values):
    """chunk_gated_delta_rule's output with none given, the only call woken (the final state
    it also returns is the caller's `output_state`): `torch.empty((total_seq_len, num_o_heads,
    head_size), q.dtype)`, num_o_heads = max(q's heads, v's heads) (0.6.16-0.7.4
    gdn_prefill.py; 0.7.4 :1722, :1881)."""
    q, v = values["q"], values["v"]
    return q.new_empty((q.shape[0], max(q.shape[1], v.shape[1]), q.shape[2]))


# chunk_gated_delta_rule (gdn_prefill.py, 0.6.16 on): its body picks a backend (Cake GDN from its
# manifest, cuDNN, CP or the per-arch CuTe DSL kernels, whose compile cache and raw-stream launch
# are its own Python) outside any declared op: the boundary is the public function. The kernels
# write the output, the final states (`output_state`, rows of the pool with `state_indices`) and
# `state_checkpoints`; `initial_state` is declared mutable too (the paged form passes one pool in
# all three roles). Woken for the call that gives no `output` and asks for the final state in the
# caller's `output_state` (SGLang's extend): the operator returns the fresh output and what Dynamo
# calls hands the state back after it (the correction's `fresh_only`, `then`; `use_cp` and
# `cu_seqlens_cpu` narrowed, hooks/ops/engine/narrowing.py).
OPS.append(Op(
    family=Family.LINEAR_ATTENTION,
    module="flashinfer.gdn_prefill",
    function="chunk_gated_delta_rule",
    name="flashinfer::chunk_gated_delta_rule",
    declare=Declare(mutates=("initial_state", "state_checkpoints")),
    # dynafold's declaration of chunk_gated_delta_rule: besides the states it declares mutable, the
    # kernels write only `output`, the caller's when given, else allocated; with
    # `output_final_state` the result is `(output, output_state)`.
    correction=Correction(
        fresh_only=Fresh(
            when={"output": None, "output_final_state": True},
            results=1,
            then=("output_state",),
        ),
    ),
    # dynafold's own declaration of chunk_gated_delta_rule, woken for the call that gives no
    # `output` (the correction's `fresh_only`): the output only.
    fake=Fake(_chunk_gated_delta_rule, ("q", "v")),
    # gdn_prefill.py imports its CuTe DSL kernels at load (every release).
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))
