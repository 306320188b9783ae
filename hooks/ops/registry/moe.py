"""Mixture of experts: the fused MoE ops (trtllm-gen, CUTLASS, CuTe DSL, Prims-TS, AlphaMoE,
b12x, MonoMoE), their routing and LoRA pieces."""

import functools
import sys
import typing

import torch

from _dynafold_ops.engine.record import (
    PLANS,
    Correction,
    Declare,
    Fake,
    Family,
    Form,
    Fresh,
    Given,
    Holds,
    Op,
    Sweep,
)
from _dynafold_ops.mechanisms import method_boundaries

# The SM12x CuTe DSL MoE GEMMs' unannotated parameters (their `annotations` below).
_SM12X_TENSORS = {**{name: torch.Tensor for name in (
    "a_q", "a_scale", "b_q", "b_scale", "m_indptr")}, "tile": typing.Optional[typing.List[int]]}

OPS = []

OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.backends.prims_ts.bf16_op",
    function="prims_ts_bf16_moe_op",
    # Prims-TS MoE (0.7.2, 0.7.4): the result is the caller's `output` when one is given and the
    # call is finalized (BF16 and NVFP4: `[output]`, shared/inputs.py unpack_trtllm_moe_output,
    # 0.7.4 bf16_op.py:287, 0.7.2 :232, fp4_op.py:403; FP8: `output` itself, 0.7.4 fp8_op.py:486,
    # :1453, 0.7.2 :393, :975), else a new tensor or routing-sized ones: woken for the call that
    # gives `output`, finalized, as the trtllm-gen ops are. The staged routing kernel reads the
    # caller's top-k weights and never writes them: FlashInfer passes them down only for unpacked
    # routing (runner.py _staged_routing_io, fp4_op.py/fp8_op.py _resolve_routing_inputs; packed
    # routing gets a fresh empty placeholder), where the kernel takes the ids from
    # mPtrPrecomputedExpertIds and stores no weights (trtllm_fused_moe_kernel_launcher.cu
    # makePrecomputedRoutingData, RoutingKernel.cuh:618-626). 0.7.4's BF16 declaration also serves
    # the partitioned call (weight shards, caller streams): that one is traced as shipped
    # (hooks/ops/engine/narrowing.py NARROWED, partition_resources).
    correction=Correction(
        result_is_given=Given(
            argument="output",
            form=Form.LIST,
            when={"do_finalize": True, "gemm1_lora_delta": None},
        ),
    ),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.backends.prims_ts.fp4_op",
    function="prims_ts_fp4_block_scale_moe",
    correction=Correction(
        result_is_given=Given(
            argument="output",
            form=Form.LIST,
            when={"do_finalize": True, "gemm1_lora_delta": None},
        ),
    ),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.backends.prims_ts.fp8_op",
    function="prims_ts_fp8_block_scale_moe",
    correction=Correction(
        result_is_given=Given(
            argument="output",
            when={"do_finalize": True, "gemm1_lora_delta": None},
        ),
    ),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.backends.prims_ts.fp8_op",
    function="prims_ts_fp8_per_tensor_scale_moe",
    correction=Correction(
        result_is_given=Given(
            argument="output",
            when={"do_finalize": True, "gemm1_lora_delta": None},
        ),
    ),
))

OPS += [
    Op(
        family=Family.MOE,
        module="flashinfer.fused_moe.core",
        function=f"{loader}.<locals>.trtllm_fp4_block_scale_moe_op",
        # NVFP4 MoE as SGLang calls it (0.6.16-0.7.4, the same body): with `output` given and
        # finalized, the result is `[output]` (0.7.x fused_moe/shared/inputs.py
        # unpack_trtllm_moe_output; 0.6.16 inline); routing buffers the caller does not give are
        # allocated inside. Not finalized, it holds routing-sized tensors and may hold the
        # caller's `topk_weights`: traced as shipped.
        # The routing kernel writes the top-k ids and weights when the caller gives buffers
        # for them (docs/op-audit; the declaration lists neither).
        correction=Correction(
            also_mutates=("topk_ids", "topk_weights"),
            result_is_given=Given(
                argument="output",
                form=Form.LIST,
                when={"do_finalize": True, "gemm1_lora_delta": None},
            ),
        ),
    )
    for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
]

OPS += [
    Op(
        family=Family.MOE,
        module="flashinfer.fused_moe.core",
        function=f"{loader}.<locals>.{op}",
        # The other trtllm-gen MoE ops (0.6.16-0.7.4) end the same way: with `output` given,
        # finalized and no LoRA delta the result is `[output]` (fused_moe/shared/inputs.py
        # unpack_trtllm_moe_output, 0.7.4 :185, 0.7.2 :186; 0.6.16 core.py:1378
        # _unpack_trtllm_moe_output; 0.6.16's per-tensor op returns `[output]` itself,
        # core.py:2182). The routing kernel writes the caller's `expert_weights` when it is given
        # with packed `topk_ids` (include/flashinfer/trtllm/fused_moe/RoutingKernel.cuh:625, 0.6.16
        # :593; the BF16, block-FP8 and MXINT4 launchers point mPtrTopKWeights at it, 0.7.4
        # csrc/trtllm_fused_moe_kernel_launcher.cu:1985-1990, 4483, 4980); the Python body replaces
        # both routing tensors by empty ones when `routing_logits` is given, so `topk_ids` is only
        # read. The per-tensor FP8 launcher points it at the caller's weights only for unpacked
        # routing, where the kernel reads them (:3821-3828): no undeclared write.
        correction=Correction(
            also_mutates=("expert_weights",),
            result_is_given=Given(
                argument="output",
                form=Form.LIST,
                when={"do_finalize": True, "gemm1_lora_delta": None},
            ),
        ),
    )
    for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
    for op in ("trtllm_bf16_moe_op", "trtllm_fp8_block_scale_moe_op",
               "trtllm_mxint4_block_scale_moe_op")
]
OPS += [
    Op(
        family=Family.MOE,
        module="flashinfer.fused_moe.core",
        function=f"{loader}.<locals>.{op}",
        # Per-tensor FP8 (0.7.x): finalized, `[output]`, the caller's when given, else the one
        # the body allocates (core.py _alloc_trtllm_moe_output): SGLang 0.5.12's and 0.5.23's
        # calls give none (layers/moe/flashinfer_trtllm_moe.py
        # trtllm_fp8_per_tensor_scale_moe_wrapper), so that call is an operator too.
        correction=Correction(
            result_is_given=Given(argument="output", form=Form.LIST, when={"do_finalize": True},
                                  fresh_otherwise=True),
        ),
    )
    for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
    for op in ("trtllm_fp8_per_tensor_scale_moe_op", "trtllm_fp8_per_tensor_scale_routed_moe_op")
]


def _trtllm_moe_finalized(values):
    """A trtllm-gen MoE op's finalized result, `[output]`: like the caller's `output` when given,
    else the body's bfloat16 [num_tokens, hidden_size], hidden_size doubled for packed FP4
    (uint8) hidden states (0.6.7.post3 fused_moe/core.py:1219, :1378, :1763-:1771, :1975).
    0.6.3's BF16 and FP8 ops, which have no `do_finalize` (always finalized), return the
    kernel's own result, one tensor, not a list: their launchers return `Tensor`, the fresh
    output they allocate (0.6.3 data/csrc/trtllm_fused_moe_kernel_launcher.cu:1482, :1553,
    :1644, `alloc_tensor` at :481, :655, :926), and the ops `return result` (core.py:1373,
    :1513, :1687); FlashInfer's fakes there say `[tensor]`."""
    output, hidden_states = values.get("output"), values["hidden_states"]
    if isinstance(output, torch.Tensor):
        result = torch.empty_like(output)
    else:
        hidden = hidden_states.shape[-1] * (2 if hidden_states.dtype == torch.uint8 else 1)
        result = hidden_states.new_empty((hidden_states.shape[0], hidden), dtype=torch.bfloat16)
    return result if "do_finalize" not in values else [result]


OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_trtllm_moe_sm100_module.<locals>.trtllm_bf16_moe_op",
    name="flashinfer::trtllm_bf16_moe",
    # The trtllm-gen MoE ops of 0.6.7.post3, declared in get_trtllm_moe_sm100_module itself
    # (docs/op-audit). BF16 and block-FP8 take no buffer for their output (block-FP8's `output`
    # parameter is rebound to a new tensor in the body, core.py:1547): finalized, the result is
    # `[fresh output]`, woken as one fresh tensor handed back as a list; the routing kernel
    # writes the caller's `expert_weights` when given with packed `topk_ids` (its launcher
    # points mPtrTopKWeights at it and mPtrTopKIds is never set: RoutingKernel.cuh:244). FP4 and
    # MXINT4 write and return the caller's `output` when given; FP4's routing writes the
    # caller's `topk_ids` and `expert_weights` (from logits both, packed the weights).
    # Per-tensor FP8 writes nothing of the caller's: woken for the finalized call only, as
    # FlashInfer's fake gives one tensor where the unfinalized kernel returns three. (0.6.1's
    # ops of these names lack `topk_ids`/`expert_weights`: traced as shipped there.)
    correction=Correction(
        also_mutates=("expert_weights",),
        fresh_only=Fresh(when={"do_finalize": True}, results=1, form=Form.LIST),
    ),
    by_release={
        # 0.6.3 (SGLang 0.5.9's pin): no `topk_ids`, `expert_weights` nor `do_finalize`; the
        # body allocates its output and routing buffers itself (core.py:1304-1312) and
        # returns the kernel's result, the fresh output tensor itself (not a list:
        # `_trtllm_moe_finalized`), nothing of the caller's.
        "0.6.3": Correction(fresh_only=Fresh(when={}, results=1)),
    },
    # The trtllm-gen MoE ops whose FlashInfer fakes lag their signatures in 0.6.7.post3 (BF16's says
    # `expert_indices` for `topk_ids` and lacks `routed_scaling_factor`; per-tensor FP8's lacks
    # `tune_max_num_tokens`; FP4's and MXINT4's take `local_num_experts` where the op has
    # `num_local_experts`): woken there for the finalized call (the correction).
    fake=Fake(_trtllm_moe_finalized, ("hidden_states",)),
    sweep=Sweep(old_layout="equal"),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_trtllm_moe_sm100_module.<locals>.trtllm_fp8_block_scale_moe_op",
    name="flashinfer::trtllm_fp8_block_scale_moe",
    correction=Correction(
        also_mutates=("expert_weights",),
        fresh_only=Fresh(when={"do_finalize": True}, results=1, form=Form.LIST),
    ),
    by_release={
        # 0.6.3: no `do_finalize`, always finalized; `output` rebound to a fresh tensor in the
        # body (core.py:1594), the kernel's own fresh output returned as the tensor itself
        # (`_trtllm_moe_finalized`), and the caller's `expert_weights` written by the routing
        # as in 0.6.7.post3 (core.py:1604-1611 pass it through).
        "0.6.3": Correction(also_mutates=("expert_weights",),
                            fresh_only=Fresh(when={}, results=1)),
        # 0.6.11.post1 (SGLang 0.5.12's pin): `output` is no longer rebound: the body allocates
        # one only when none is given (core.py:1870) and the kernel writes the one it gets,
        # which the public function always gives (core.py:2898, its own `torch.empty`);
        # finalized, the result is `[output]` (:1999). Before this entry the operator said it
        # returned a fresh tensor and wrote nothing: SGLang 0.5.12's FP8 block-scale call
        # failed at inductor, and its kernel's write of `output` was undeclared
        # (tests/python/test_moe_values.py).
        "0.6.11.post1": Correction(
            also_mutates=("expert_weights",),
            result_is_given=Given(argument="output", form=Form.LIST, when={"do_finalize": True},
                                  fresh_otherwise=True),
        ),
    },
    fake=Fake(_trtllm_moe_finalized, ("hidden_states",)),
    sweep=Sweep(old_layout="equal"),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_trtllm_moe_sm100_module.<locals>.trtllm_fp8_per_tensor_scale_moe_op",
    name="flashinfer::trtllm_fp8_per_tensor_scale_moe",
    correction=Correction(fresh_only=Fresh(when={"do_finalize": True}, results=1, form=Form.LIST)),
    # 0.6.3: no `do_finalize`, always finalized, its output the body's own, returned as the
    # tensor itself (`_trtllm_moe_finalized`).
    by_release={"0.6.3": Correction(fresh_only=Fresh(when={}, results=1))},
    fake=Fake(_trtllm_moe_finalized, ("hidden_states",)),
    sweep=Sweep(old_layout="equal"),
))

OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_trtllm_moe_sm100_module.<locals>.trtllm_fp4_block_scale_moe_op",
    name="flashinfer::trtllm_fp4_block_scale_moe",
    correction=Correction(
        also_mutates=("topk_ids", "expert_weights"),
        result_is_given=Given(argument="output", form=Form.LIST, when={"do_finalize": True}),
    ),
    fake=Fake(_trtllm_moe_finalized, ("hidden_states",)),
    sweep=Sweep(old_layout="equal"),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_trtllm_moe_sm100_module.<locals>.trtllm_mxint4_block_scale_moe_op",
    name="flashinfer::trtllm_mxint4_block_scale_moe",
    correction=Correction(
        result_is_given=Given(argument="output", form=Form.LIST, when={"do_finalize": True}),
    ),
    fake=Fake(_trtllm_moe_finalized, ("hidden_states",)),
    sweep=Sweep(old_layout="equal"),
))

OPS += [
    Op(
        family=Family.MOE,
        module="flashinfer.fused_moe.core",
        function=f"{loader}.<locals>.trtllm_fp8_per_channel_scale_moe_op",
        # FP8 per-channel MoE (0.7.2, 0.7.4) has no `output` parameter: it allocates the output
        # itself (0.7.4 core.py:3265, 0.7.2 :2906), so finalized the result is `[fresh output]`
        # (shared/inputs.py unpack_trtllm_moe_output). Its routing kernel writes the caller's
        # `expert_weights` given with packed `topk_ids` (RoutingKernel.cuh:625), which the public
        # functions never give (core.py:6145, :6299 pass None). Woken for that call, finalized: an
        # operator returning the one fresh tensor (0.7.4's declared-mutable `workspace_buffer`
        # rules out a Tensor[] result), handed back as a list. Not finalized, the result may be the
        # caller's `expert_weights`, and FlashInfer's fake gives one tensor where the kernel gives
        # three: traced as shipped.
        correction=Correction(
            fresh_only=Fresh(
                when={"do_finalize": True, "expert_weights": None},
                results=1,
                form=Form.LIST,
            ),
        ),
    )
    for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
]


def _cutlass_fused_moe_scratch(values):
    """The three tensors `cutlass_fused_moe`'s kernel allocates and returns after `output`
    outside min-latency mode: active experts per node (1,) int32, expert-to-token scores
    (experts on this rank, tokens) float32, active expert ids (experts on this rank,) int32."""
    input, experts = values["input"], values["fc2_expert_weights"].shape[0]
    return (input.new_empty((1,), dtype=torch.int32),
            input.new_empty((experts, input.shape[0]), dtype=torch.float32),
            input.new_empty((experts,), dtype=torch.int32))


OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.core",
    function="get_cutlass_fused_moe_module.<locals>.cutlass_fused_moe",
    # Outside min-latency mode (which the public function refuses on every arch it builds)
    # the kernel returns `[output, three scratch tensors it allocates]`; FlashInfer's fake
    # gives one tensor. Woken as a write of `output` returning the three (dynafold's fake).
    correction=Correction(
        result_is_given=Given(
            argument="output",
            form=Form.LIST_PLUS,
            when={"min_latency_mode": False},
            rest=3,
            rest_fake="flashinfer::cutlass_fused_moe:scratch",
        ),
    ),
    fakes={
        # cutlass_fused_moe's kernel with `output` given: what it returns besides `output` (the
        # correction, form "list+").
        "flashinfer::cutlass_fused_moe:scratch": Fake(
            _cutlass_fused_moe_scratch,
            ("input", "fc2_expert_weights"),
        ),
    },
    sweep=Sweep(old_layout="equal"),
))


def _cudnn_frost_gemm1(values):
    """cuDNN Frost GEMM1 + SwiGLU's fresh result (no `out`), as cudnn_frost_selected.py
    allocates it (0.7.2-0.7.4): (grouped_tokens.shape[0], gate_weights.shape[1]) bfloat16."""
    tokens, gate = values["grouped_tokens"], values["gate_weights"]
    return tokens.new_empty((tokens.shape[0], gate.shape[1]), dtype=torch.bfloat16)


# cudnn_frost_grouped_gemm1_swiglu (0.7.2 on): the public body runs FlashInfer's AutoTuner
# over cuDNN Frost's generated kernels (a lock, the tactic choice, imports) and launches
# the chosen one; it writes `out` (the caller's, or a fresh bfloat16 one) and the caller's
# `workspace`, and returns `out` (fused_moe/backends/cudnn_frost/bf16/runtime.py forward:
# `return inputs[5]`). Its `tactic: Any` is an int to the operator (hooks/ops/engine/narrowing.py).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cudnn_frost_selected",
    function="cudnn_frost_grouped_gemm1_swiglu",
    name="flashinfer::cudnn_frost_grouped_gemm1_swiglu",
    declare=Declare(mutates=("workspace",)),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_cudnn_frost_gemm1, ("grouped_tokens", "gate_weights")),
    sweep=Sweep(equal=("0.7.4",)),
))

# The multi-LoRA MoE BGMV kernels (0.6.16 on) are called from the public functions' own
# bodies (`_get_bgmv_moe_module().bgmv_moe_shrink(...)`), no declaration around them; the
# LoRA delta helpers (0.7.x moe_lora_delta.py) call these functions. The kernels write `y`
# only (csrc/bgmv_moe/moe_bgmv_ops.cu: every other tensor const); they also read the LoRA
# weights through the int64 pointer table `w_ptr` (fill_w_ptr), which no schema can name
# (docs/op-audit). Named `_public` beside the JIT functions' names.
OPS += [
    Op(
        family=Family.MOE,
        module="flashinfer.fused_moe.bgmv_moe",
        function=name,
        name=f"flashinfer::{name}_public",
        declare=Declare(mutates=("y",)),
        sweep=Sweep(equal=("0.6.16", "0.7.4")),
    )
    for name in ("bgmv_moe_shrink", "bgmv_moe_expand")
]


def _bgmv_moe(values):
    """`bgmv_moe`'s result (0.6.16 on): `y.to(x.dtype)` of a fresh float32
    (tokens, total_feat_out) accumulator, total_feat_out `output_dim` when given, else the sum
    of the LoRA-B banks' output widths (dim 2)."""
    x = values["x"]
    total = values["output_dim"]
    if total is None:
        total = sum(b.size(2) for b in values["lora_b_weights"])
    return x.new_empty((x.size(0), total))


# bgmv_moe (shrink + expand in one call) builds both pointer tables from the LoRA banks' addresses
# in its body (fill_w_ptr: data_ptr()), which no trace can read: the boundary is the public
# function, its result fresh (the record's fake) and the banks its arguments.
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.bgmv_moe",
    function="bgmv_moe",
    name="flashinfer::bgmv_moe_public",
    declare=Declare(),
    # dynafold's own declarations of the multi-LoRA MoE BGMV functions that return a fresh tensor.
    fake=Fake(_bgmv_moe, ("x", "lora_b_weights", "output_dim")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _bgmv_moe_gemm2_lora_delta(values):
    """`bgmv_moe_gemm2_lora_delta`'s result (0.6.16 on): a fresh (tokens, hidden_size)
    float32 accumulator, scaled, `.to(out_dtype)`; tokens is topk_ids' dim 0."""
    tokens = values["topk_ids"].shape[0]
    return values["gemm1_activation_output"].new_empty(
        (tokens, values["hidden_size"]), dtype=values["out_dtype"])


# bgmv_moe_gemm2_lora_delta (moe_lora_delta.py) gathers the permuted activation with a boolean mask
# (`a_exp[valid] = ...`: a data-dependent shape, aten.nonzero) before its kernels: the boundary is
# the public function, every buffer it writes its own, its result fresh (the record's fake).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.moe_lora_delta",
    function="bgmv_moe_gemm2_lora_delta",
    name="flashinfer::bgmv_moe_gemm2_lora_delta",
    declare=Declare(),
    fake=Fake(
        _bgmv_moe_gemm2_lora_delta,
        ("gemm1_activation_output", "topk_ids", "hidden_size", "out_dtype"),
    ),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _mono_moe(values):
    """`mono_moe` with no `out` given: `torch.empty(m, K, bfloat16)`, m and K those of
    `activations_in` (its shape check requires [m, K=2048]; 0.7.4 monomoe.py:353)."""
    x = values["activations_in"]
    return x.new_empty((x.shape[0], x.shape[1]), dtype=torch.bfloat16)


# mono_moe (0.6.16 on, SM90) calls its JIT kernel (`monomoe_topk`) in the public function's own body
# after its shape checks and the up weights' repack (cached on the weight tensor as an attribute):
# the boundary is the public function. The kernel writes `out` (its result: the caller's when given,
# else allocated, the correction) and the `scratchpad` it self-maintains (counters, flags), the
# caller's when given (docs/op-audit).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.monomoe",
    function="mono_moe",
    name="flashinfer::mono_moe",
    declare=Declare(mutates=("scratchpad",)),
    # dynafold's own declaration of `mono_moe`: returns `out`, the caller's when given, else one it
    # allocates (monomoe.py:353, :371; 0.6.16 :340, :360).
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's own declaration of mono_moe, called without `out`.
    fake=Fake(_mono_moe, ("activations_in",)),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))

# AlphaMoE's NVFP4 entry points (0.7.x, SM100/SM103) check every tensor's data_ptr() alignment in
# the public function before calling FlashInfer's own torch.library ops
# (`flashinfer::alphamoe_nvfp4_aligned_moe`, `..._routed_moe`, declared by those names, hence
# `_public`): `_check_alphamoe_nvfp4_supported`, its backend_requirement check for the aligned call,
# and the routed call's prepared-weight checks and route choice (`_alphamoe_complete_route_id`, from
# the pointers' alignment). No trace can read an address, and the choice belongs to each call's real
# pointers, so the boundary is the public function. The aligned call adds into the caller's `out`
# and returns nothing; the routed one also writes the plan buffers it is given (sorted_token_ids,
# expert_ids, num_tokens_post_padded, cumsum_buffer) and returns `out` (the correction's
# `returns_argument`). They write nothing else of the caller's (docs/op-audit).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.alphamoe_nvfp4_sm100",
    function="alphamoe_nvfp4_aligned_moe",
    name="flashinfer::alphamoe_nvfp4_aligned_moe_public",
    declare=Declare(mutates=("out",)),
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.alphamoe_nvfp4_sm100",
    function="alphamoe_nvfp4_routed_moe",
    name="flashinfer::alphamoe_nvfp4_routed_moe_public",
    declare=Declare(
        mutates=("sorted_token_ids", "expert_ids", "num_tokens_post_padded", "cumsum_buffer",
                 "out"),
    ),
    # dynafold's own declaration of AlphaMoE's routed NVFP4 call: it updates the caller's required
    # `out` in place and returns it (0.7.4 alphamoe_nvfp4_sm100.py:1097, 0.7.2 :1081).
    correction=Correction(returns_argument="out"),
    sweep=Sweep(equal=("0.7.4",)),
))


def _cute_dsl_fused_moe_bf16(values):
    """`cute_dsl_fused_moe_bf16` with no `moe_output` given: `torch.empty(num_tokens, hidden,
    dtype=x.dtype)`, x being [num_tokens, hidden] (0.7.x sm90_fused_moe.py:394, 0.7.2 :389)."""
    x = values["x"]
    return x.new_empty((x.shape[0], x.shape[1]))


# cute_dsl_fused_moe_bf16 (0.7.x, SM90 CuTe DSL MoE) validates its SwiGLU constants with
# ctypes.c_float (moe_utils.py _is_finite_fp32) and builds its autotuner runner, takes the
# AutoTuner's lock and choice in the public body: the boundary is the public function
# (CuteDslBf16MoEWrapper.run allocates its `moe_output` and calls it, so it traces through this
# operator). The kernels write `moe_output` (the result: the caller's when given, else allocated,
# the correction) and `intermediate_buffer` when the caller gives one (GEMM1's output), nothing else
# of the caller's (docs/op-audit). Its `tactic` tuple is narrowed to None, the autotuner's choice
# (hooks/ops/engine/narrowing.py).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.sm90_fused_moe",
    function="cute_dsl_fused_moe_bf16",
    name="flashinfer::cute_dsl_fused_moe_bf16",
    declare=Declare(mutates=("intermediate_buffer",)),
    # dynafold's own declaration of cute_dsl_fused_moe_bf16: returns `moe_output`, the caller's when
    # given, else one it allocates (0.7.4 sm90_fused_moe.py:394, :427; 0.7.2 :389, :422).
    correction=Correction(result_is_given=Given(argument="moe_output", fresh_otherwise=True)),
    # dynafold's own declaration of the SM90 CuTe DSL MoE, called without `moe_output`.
    fake=Fake(_cute_dsl_fused_moe_bf16, ("x",)),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))


def _cute_dsl_fused_moe_mxfp8_mxfp4(values):
    """`cute_dsl_fused_moe_mxfp8_mxfp4` with no `moe_output` given: cute_dsl_fused_moe's
    `torch.empty((num_tokens, hidden_size), dtype=torch.bfloat16)`, num_tokens
    token_selected_experts' rows, hidden_size `w2_weight.size(1)` (0.7.4 fused_moe.py:1988-
    :1991; 0.7.2 :1350-:1353)."""
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), values["w2_weight"].size(1)),
        dtype=torch.bfloat16)


# cute_dsl_fused_moe_mxfp8_mxfp4 (0.7.x, SM100 CuTe DSL MoE) warns that it is deprecated
# (warnings.warn, a DeprecationWarning on every call, before anything else) and calls
# cute_dsl_fused_moe with quant_mode="w4a8", whose body builds its runner and takes the AutoTuner's
# lock and choice: the boundary is the deprecated public function, its warning inside the operator
# (raised when it runs, as eagerly). The kernels write `moe_output` (zeroed, then the finalize
# scatter-reduce: the result, the caller's when given, else allocated, the correction) and nothing
# else of the caller's (docs/op-audit). Its `aux_stream` (a Stream) and `tactic` tuple are narrowed
# to None, as serving code calls it (hooks/ops/engine/narrowing.py).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.fused_moe",
    function="cute_dsl_fused_moe_mxfp8_mxfp4",
    name="flashinfer::cute_dsl_fused_moe_mxfp8_mxfp4",
    declare=Declare(),
    # dynafold's own declaration of cute_dsl_fused_moe_mxfp8_mxfp4: returns
    # `moe_output[:num_tokens]` of the caller's `moe_output` when given (which must have num_tokens
    # rows: the whole buffer), else of one it allocates (0.7.4 fused_moe.py :1991, :583, :1005;
    # 0.7.2 :1353, :423, :608).
    correction=Correction(result_is_given=Given(argument="moe_output", fresh_otherwise=True)),
    fake=Fake(_cute_dsl_fused_moe_mxfp8_mxfp4, ("x", "token_selected_experts", "w2_weight")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))


def _cute_dsl_fused_moe(values):
    """`cute_dsl_fused_moe` (and `cute_dsl_fused_moe_nvfp4`) with no `moe_output` given:
    `torch.empty((num_tokens, hidden_size), dtype=output_dtype)`, num_tokens
    token_selected_experts' rows, hidden_size `w2_weight.size(1)` (localized shards narrowed
    away) (0.7.4 fused_moe.py:1988-:1995, :218 _moe_hidden_size; 0.7.2 :1351-:1358; 0.6.16
    :947-:955)."""
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), values["w2_weight"].size(1)),
        dtype=values["output_dtype"])


# cute_dsl_fused_moe (0.7.x, SM100 CuTe DSL MoE: NVFP4 W4A4, W4A8, W4A16, 0.7.4's MXFP8) builds its
# runner and takes the AutoTuner's lock and choice in its own body, then runs the chosen runner's
# CuTe DSL kernels; cute_dsl_fused_moe_nvfp4 is its deprecated alias in 0.7.x (warnings.warn, a
# DeprecationWarning on every call, first thing; the warning then runs inside the operator, as
# eagerly) and in 0.6.16 the NVFP4 MoE itself (the same runner build and AutoTuner choice in its
# body). The kernels write `moe_output` (zeroed, then the finalize scatter-reduce, or moe_unpermute;
# the result, the caller's when given, else allocated, the correction) and nothing else of the
# caller's (docs/op-audit). `aux_stream`, `tactic` and 0.7.4's `localized_*` (Rubin localization:
# lists and streams) are narrowed to None, and 0.7.4's `nvfp4_4over6=_UNSET` left at its default
# gets its own "_default" operators, as serving code calls it (hooks/ops/engine/narrowing.py).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.fused_moe",
    function="cute_dsl_fused_moe",
    name="flashinfer::cute_dsl_fused_moe",
    declare=Declare(),
    # dynafold's own declarations of cute_dsl_fused_moe and cute_dsl_fused_moe_nvfp4:
    # `moe_output[:num_tokens]` of the caller's `moe_output` when given (num_tokens rows: the whole
    # buffer; the W4A16 runner returns `moe_output` itself, its shape checked equal), else of one
    # they allocate (0.7.4 fused_moe.py:1991, :583, :1005, blackwell/moe_w4a16.py:529; 0.7.2 :1354,
    # :423, :608; 0.6.16 :950, :243, :390).
    correction=Correction(result_is_given=Given(argument="moe_output", fresh_otherwise=True)),
    fake=Fake(_cute_dsl_fused_moe, ("x", "token_selected_experts", "w2_weight", "output_dtype")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.fused_moe",
    function="cute_dsl_fused_moe_nvfp4",
    name="flashinfer::cute_dsl_fused_moe_nvfp4",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="moe_output", fresh_otherwise=True)),
    fake=Fake(_cute_dsl_fused_moe, ("x", "token_selected_experts", "w2_weight", "output_dtype")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))


def _cute_dsl_moe_wrapper_run(values):
    """CuteDslMoEWrapper.run (and CuteDslMxfp8Mxfp4MoEWrapper.run, which calls it): its
    `torch.empty((num_tokens, self.hidden_size), dtype=self.output_dtype)`, num_tokens
    token_selected_experts' rows, read from the wrapper the key holds
    (hooks/ops/mechanisms/method_boundaries.py); the runner returns it whole (0.7.4 fused_moe.py:1489,
    0.7.2 :1026, 0.6.16 :721). B12xMoEWrapper.run built without use_cuda_graph allocates the
    same (its record, below)."""
    wrapper = method_boundaries.held(values["wrapper_key"])
    return values["x"].new_empty(
        (values["token_selected_experts"].size(0), wrapper.hidden_size),
        dtype=wrapper.output_dtype)


# CuteDslMoEWrapper.run (every release; SGLang's flashinfer_cutedsl FP4 MoE on Blackwell) allocates
# its `moe_output` (num_tokens, self.hidden_size) of self.output_dtype, then takes the AutoTuner's
# lock and choice and runs the chosen runner (the wrapper's own, built in __init__) in its own body,
# with no declared op around it. A wrapper method: the operator takes the object's key
# (hooks/ops/mechanisms/method_boundaries.py) and calls the method. The runner's _moe_core_impl (the
# functional cute_dsl_fused_moe's, given this fresh `moe_output`) writes only it and returns it
# whole (moe_output[:num_tokens]); its other buffers are fresh per call or FlashInfer's per-device
# stream/event resources, nothing the wrapper returns or a later call reads (docs/op-audit).
# `tactic` is narrowed to None (the AutoTuner's choice), and 0.7.4's `nvfp4_4over6=_UNSET` gets its
# "_default" operators, as for cute_dsl_fused_moe (hooks/ops/engine/narrowing.py); the fake reads
# the wrapper's hidden_size and output_dtype (the record's fake).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.fused_moe",
    function="CuteDslMoEWrapper.run",
    name="flashinfer::cute_dsl_moe_wrapper_run",
    declare=Declare(),
    # dynafold's declarations of the SM100 CuTe DSL MoE wrappers' run
    # (hooks/ops/mechanisms/method_boundaries.py): the result is always fresh.
    fake=Fake(_cute_dsl_moe_wrapper_run, ("wrapper_key", "x", "token_selected_experts")),
    sweep=Sweep(cute_dsl=("0.6.16", "0.7.4")),
))

# CuteDslMxfp8Mxfp4MoEWrapper.run (0.7.x), its deprecated W4A8 subclass, overrides run:
# super().run(...) with no fc2_input_scale, the same body, writes and fresh result.
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.fused_moe",
    function="CuteDslMxfp8Mxfp4MoEWrapper.run",
    name="flashinfer::cute_dsl_mxfp8_mxfp4_moe_wrapper_run",
    declare=Declare(),
    fake=Fake(_cute_dsl_moe_wrapper_run, ("wrapper_key", "x", "token_selected_experts")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))


def _b12x_fused_moe(values):
    """`b12x_fused_moe`'s fresh result (no `output` given), as its body allocates it
    (0.6.16-0.7.4 cute_dsl/b12x_moe.py): torch.empty((num_tokens, hidden_size), output_dtype),
    num_tokens = token_selected_experts.size(0), hidden_size = x.size(1) (FlashInfer refuses
    any output_dtype but bfloat16)."""
    x = values["x"]
    return x.new_empty((values["token_selected_experts"].size(0), x.size(1)),
                       dtype=values["output_dtype"])


# b12x_fused_moe (0.6.16 on, SM120/SM121 NVFP4/MXFP4/W4A16 fused MoE): the public body asks nvcc for
# the CUDA version (get_cuda_version, folded to a constant under compile), then
# blackwell_sm12x/moe_dispatch.py launch_sm120_moe picks micro, static or dynamic from the routed
# row count, caches weight views and workspaces keyed by the weights' data_ptr() (no trace can read
# an address), compiles its CuTe DSL kernels and launches them: the public function is the boundary.
# Every path writes only `output` (the caller's, or the (num_tokens, hidden_size) bfloat16 tensor
# the body allocates) and returns it; the workspaces and converted scales are FlashInfer's own
# module-level caches, never a caller's tensor (the correction's `result_is_given`, woken with and
# without `output`; the fake is the record's).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.b12x_moe",
    function="b12x_fused_moe",
    name="flashinfer::b12x_fused_moe",
    declare=Declare(),
    # dynafold's declaration of b12x_fused_moe: every backend (micro, static, dynamic, W4A16) ends
    # `return scatter_output`, which is `output`, the caller's when given, else the one the public
    # body allocates (fused_moe/cute_dsl/blackwell_sm12x/moe_dispatch.py, moe_w4a16_kernel.py
    # run_w4a16_moe).
    correction=Correction(result_is_given=Given(argument="output", fresh_otherwise=True)),
    # dynafold's own declaration of b12x_fused_moe, called without `output` (with it, the operator
    # writes the caller's: the correction).
    fake=Fake(_b12x_fused_moe, ("x", "token_selected_experts", "output_dtype")),
    # 0.7.4's module imports without `cutlass` (swept in both environments); 0.6.16's package
    # imports it on the way (cute_dsl/utils.py).
    sweep=Sweep(equal=("0.7.4",), cute_dsl=("0.6.16", "0.7.4")),
))


# B12xMoEWrapper.run (0.6.11.post1 on; the wrapper API of b12x_fused_moe, SM120/SM121) reads the
# weights' data_ptr() for the weight views it caches in the wrapper (no trace can read an
# address). A wrapper method: the operator takes the object's key
# (hooks/ops/mechanisms/method_boundaries.py) and calls run, for a wrapper built without
# use_cuda_graph only (the correction's `when`, a `Holds` on the object: its constructor sets
# `self.use_cuda_graph`, nothing changes it after). Then run allocates its result, `torch.empty(
# (num_tokens, self.hidden_size), dtype=self.output_dtype)`, num_tokens token_selected_experts'
# rows (0.7.4 b12x_moe.py:790, 0.7.2 :771, 0.6.16 :534, 0.6.11.post1 :361), leaves the workspace to
# launch_sm120_moe (`workspace = None`, 0.7.4 :805: FlashInfer's module-level cache, as for
# b12x_fused_moe), keeps the weight views and the folded FC1 alpha (0.7.x, with
# input_global_scale) in the wrapper, no caller's tensor, and returns launch_sm120_moe(
# scatter_output=moe_output) (0.7.4 :886, :902), which writes and returns that buffer on every
# backend (b12x_fused_moe's record above). Built with use_cuda_graph=True (as a server capturing
# CUDA graphs builds it), run returns `self._moe_output[:num_tokens]` (0.7.4 :783), a view of the
# wrapper's own buffer that the next call overwrites: no operator may return that alias of
# wrapper state (a fresh result would differ from eager once a result is kept across calls), so
# that call is no operator. Dynamo goes on, as for any call a boundary's `when` does not take,
# through dynafold's declaration (method_boundaries.py `call`) into FlashInfer's run, and breaks
# at its API-logging wrapper (an inspect.Signature Dynamo cannot wrap there; before this boundary
# the break was at run's data_ptr() reads): run() then runs eagerly, as FlashInfer ships it.
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.b12x_moe",
    function="B12xMoEWrapper.run",
    name="flashinfer::b12x_moe_wrapper_run",
    declare=Declare(),
    # dynafold's declaration of B12xMoEWrapper.run, woken for a wrapper built without
    # use_cuda_graph, whose result is the fresh buffer run allocates.
    correction=Correction(when={"wrapper_key": Holds(use_cuda_graph=False)}),
    fake=Fake(_cute_dsl_moe_wrapper_run, ("wrapper_key", "x", "token_selected_experts")),
))


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


# 0.7.x's SM12x CuTe DSL MoE GEMMs (fused_moe/cute_dsl/blackwell_sm12x, SM120/SM121 only): FC1 +
# activation + quantize and FC2 + finalize, FP8 and MXFP8xMXFP4. Each body picks its tile from the
# SM count, builds its op object (`_op`, a functools.lru_cache Dynamo traces through), whose
# can_implement asks the CuTe DSL for its target arch (moe_kernel_builder.py dsl_targets_sm12x:
# CuTeDSL._get_dsl(), settings read from the environment and os.getcwd), then compiles its kernel
# (cute.compile, cached per tactic) and launches it on from_dlpack views: no private function holds
# all of it, so the boundary is the public function. FC1's kernel writes only `(q, sf)` (woken for
# the call that gives neither `out_q` nor `out_sf`: the correction's `fresh_only`); FC2's only
# `out`, which it returns, the caller's when given (`result_is_given`). Their unannotated tensors
# and `tile` are typed by the correction's `annotations`; `epi` (an EpiMethod) is left at its
# default (hooks/ops/engine/narrowing.py). Fakes: the records'.
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.blackwell_sm12x.moe_fp8_fc1_act_q1",
    function="cute_dsl_sm12x_fc1_act_q1_fp8",
    name="flashinfer::cute_dsl_sm12x_fc1_act_q1_fp8",
    declare=Declare(),
    # dynafold's declarations of 0.7.x's SM12x CuTe DSL MoE GEMMs
    # (fused_moe/cute_dsl/blackwell_sm12x/moe_*_fc1_act_q1.py and moe_*_fc2_finalize.py): their
    # tensors and `tile` (None, or the (bm, bn, bk) a caller picks; FlashInfer takes `tuple(tile)`)
    # carry no annotation, the mxfp8 ones' `tune` neither (None or a bool, tested `is not False`).
    # FC1 writes only its `(q, sf)`, the caller's `out_q`/`out_sf` when given, else the
    # `torch.empty`/`torch.zeros` the body allocates: woken for the call that gives neither. FC2
    # writes only `out` and returns it, the caller's when given, else the `torch.zeros` the body
    # allocates. `epi` (an EpiMethod, no schema type) is left at its default
    # (hooks/ops/engine/narrowing.py NARROWED).
    correction=Correction(
        fresh_only=Fresh(when={"out_q": None, "out_sf": None}, results=2, object_defaults=True),
        annotations={**_SM12X_TENSORS},
    ),
    # dynafold's own declarations of 0.7.x's SM12x CuTe DSL MoE GEMMs: FC1 woken with no output
    # buffers, FC2's fresh call without `out`.
    fake=Fake(
        functools.partial(_sm12x_fc1_act_q1, module="moe_fp8_fc1_act_q1"),
        ("a_q", "b_q", "out_dtype"),
    ),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.blackwell_sm12x.moe_mxfp8_mxfp4_fc1_act_q1",
    function="cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4",
    name="flashinfer::cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4",
    declare=Declare(),
    correction=Correction(
        fresh_only=Fresh(when={"out_q": None, "out_sf": None}, results=2, object_defaults=True),
        annotations={**_SM12X_TENSORS, "tune": typing.Optional[bool]},
    ),
    fake=Fake(
        functools.partial(_sm12x_fc1_act_q1, module="moe_mxfp8_mxfp4_fc1_act_q1"),
        ("a_q", "b_q", "out_dtype"),
    ),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.blackwell_sm12x.moe_fp8_fc2_finalize",
    function="cute_dsl_sm12x_fc2_finalize_fp8",
    name="flashinfer::cute_dsl_sm12x_fc2_finalize_fp8",
    declare=Declare(),
    correction=Correction(
        result_is_given=Given(argument="out", fresh_otherwise=True),
        annotations={**_SM12X_TENSORS, "src_token": torch.Tensor, "pair_scales": torch.Tensor},
    ),
    fake=Fake(_sm12x_fc2_finalize, ("a_q", "b_q", "num_tokens")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.cute_dsl.blackwell_sm12x.moe_mxfp8_mxfp4_fc2_finalize",
    function="cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4",
    name="flashinfer::cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4",
    declare=Declare(),
    correction=Correction(
        result_is_given=Given(argument="out", fresh_otherwise=True),
        annotations={**_SM12X_TENSORS, "src_token": torch.Tensor, "pair_scales": torch.Tensor,
                     "tune": typing.Optional[bool]},
    ),
    fake=Fake(_sm12x_fc2_finalize, ("a_q", "b_q", "num_tokens")),
    sweep=Sweep(cute_dsl=("0.7.4",)),
))


def _prims_ts_fp8_block_scale_routed_moe(values):
    """0.7.x prims_ts_fp8_block_scale_routed_moe's finalized result with no `output` given:
    alloc_trtllm_moe_output(num_tokens, hidden_size, True) (fused_moe/shared/inputs.py:87), a
    bfloat16 [num_tokens, hidden_size] from hidden_states' shape."""
    hidden_states = values["hidden_states"]
    return hidden_states.new_empty((hidden_states.shape[0], hidden_states.shape[-1]),
                                   dtype=torch.bfloat16)


# prims_ts_fp8_block_scale_routed_moe (0.7.x, SM100/SM103/SM107): unlike its unrouted sibling
# (FlashInfer's declared prims_ts_fp8_block_scale_moe) it calls the private
# _prims_ts_fp8_block_scale_moe_impl itself, which reads the Prims-TS configs from package data
# (importlib.resources), runs FlashInfer's support check and AutoTuner and launches the CuTe DSL
# kernels, outside any declared op: the boundary is the public function. With do_finalize (and no
# LoRA delta, which it refuses) its result is `output`, the caller's when given, else a fresh
# bfloat16 one; the caller's packed top-k ids are only read (the correction's `result_is_given`; the
# unpacked (ids, weights) pair is traced as shipped, hooks/ops/engine/narrowing.py `topk_ids`).
OPS.append(Op(
    family=Family.MOE,
    module="flashinfer.fused_moe.backends.prims_ts.fp8_op",
    function="prims_ts_fp8_block_scale_routed_moe",
    name="flashinfer::prims_ts_fp8_block_scale_routed_moe",
    declare=Declare(),
    # dynafold's declaration of 0.7.x's prims_ts_fp8_block_scale_routed_moe: finalized, its result
    # is `output`, the caller's when given, else alloc_trtllm_moe_output's (0.7.4 fp8_op.py:1289,
    # returned at :1453; 0.7.2 :857, :975); unfinalized a list, traced as shipped. It refuses a LoRA
    # delta (NotImplementedError).
    correction=Correction(
        result_is_given=Given(
            argument="output",
            when={"do_finalize": True, "gemm1_lora_delta": None},
            fresh_otherwise=True,
        ),
    ),
    # dynafold's own declaration of 0.7.x's prims_ts_fp8_block_scale_routed_moe, its finalized call
    # without `output`.
    fake=Fake(_prims_ts_fp8_block_scale_routed_moe, ("hidden_states",)),
    sweep=Sweep(equal=("0.7.4",)),
))

# populate_trtllm_moe_routing_metadata_ (0.7.2 on) calls the trtllm-gen fused-MoE
# namespace's tvm_ffi `populate_routing_metadata_multi_tile` in its own body
# (`get_trtllm_moe_sm100_module().populate_routing_metadata_multi_tile(...)`, core.py),
# outside any declared op, with the tensors it fills held in a TrtllmMoERoutingMetadata
# (frozen dataclasses) no schema can take. Under compile the cached loader
# (`_get_trtllm_moe_sm100_module_impl`) gives a stand-in whose function is dynafold's
# declaration (hooks/ops/mechanisms/attention_plans.py); the public body's own flattening
# (`flat_tensors()`) hands it the slots' tensors, all declared mutable: the kernel fills
# them and writes nothing else (`topk_ids`, `topk_weights` read; docs/op-audit).
OPS.append(Op(
    family=Family.MOE,
    module=PLANS,
    function="trtllm_moe_populate_routing_metadata",
    name="flashinfer::trtllm_moe_populate_routing_metadata_jit",
    declare=Declare(mutates=("flat_routing_metadata",)),
    sweep=Sweep(equal=("0.7.4",)),
))

# alphamoe_nvfp4_finalize_deferred (0.7.2 on) calls the AlphaMoE module's tvm_ffi
# `nvfp4_complete_routed_finalize_op` in its body, outside any declared op, with the tensors and
# route id held in the deferred call's AlphaMoeNvfp4DeferredOutput (no schema can take it). Under
# compile the cached loader gives a stand-in whose function is dynafold's declaration
# (hooks/ops/mechanisms/attention_plans.py): the public body unpacks the object itself. The kernel
# writes only `out` (the caller's, or `seed` itself), declared mutable.
OPS.append(Op(
    family=Family.MOE,
    module=PLANS,
    function="alphamoe_complete_routed_finalize",
    name="flashinfer::alphamoe_complete_routed_finalize_jit",
    declare=Declare(mutates=("out",)),
    sweep=Sweep(equal=("0.7.4",)),
))


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


# kimi_k3_fused_router (0.7.2 on, experimental; SM100/SM103) checks data_ptr() alignment and that
# its tensors do not overlap (from their addresses) in the body it reaches (cake_backend.py
# prepare_kimi_k3_fused_router), then launches its generated program; it returns a KimiK3RoutePlan
# NamedTuple and takes one as `plan`, which no schema can say. Under compile Dynamo traces
# dynafold's Python for it (hooks/ops/mechanisms/attention_plans.py REBUILT), which calls these two
# with the plan's eight tensors: without a plan, fresh (the plan FlashInfer allocates, its fake the
# record's); with the caller's, all eight declared mutable. The kernel writes only the plan
# (docs/op-audit).
OPS.append(Op(
    family=Family.MOE,
    module=PLANS,
    function="kimi_k3_route",
    name="flashinfer::kimi_k3_route",
    declare=Declare(),
    # dynafold's own declaration of the Kimi-K3 fused router without a plan: the plan's eight
    # tensors (hooks/ops/mechanisms/attention_plans.py makes the NamedTuple again).
    fake=Fake(_kimi_k3_route, ("logits", "block_m")),
    sweep=Sweep(equal=("0.7.4",)),
))

OPS.append(Op(
    family=Family.MOE,
    module=PLANS,
    function="kimi_k3_route_into",
    name="flashinfer::kimi_k3_route_into",
    declare=Declare(
        mutates=("topk_weights", "topk_ids", "sorted_token_ids", "expert_ids",
                 "num_tokens_post_padded", "expert_counts", "expert_offsets",
                 "expert_scatter_offsets"),
    ),
    sweep=Sweep(equal=("0.7.4",)),
))
