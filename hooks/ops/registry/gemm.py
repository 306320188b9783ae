"""GEMMs: dense, batched, grouped and block-scaled, the autotuned public functions and the
prepared (Cake) programs."""

import importlib
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
    Given,
    Op,
    Sweep,
)
from _dynafold_ops.mechanisms import attention_plans

OPS = []

# bmm_fp8 -> fp8_gemm_sm100: AutoTuner.choose_one and runner classes built per call. Its
# `List[str]` parameter is not one torch infers, hence the schema.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="fp8_gemm_sm100",
    name="flashinfer::fp8_gemm_sm100",
    declare=Declare(
        mutates=("out", "workspace_buffer"),
        schema="(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor(a4!) out, "
               "Tensor(a5!) workspace_buffer, str[] runner_names) -> ()",
    ),
))


# mm_fp8's default backend (0.6.3-0.7.4, 0.7.4's "auto" with the prepared 3-D weight) calls
# trtllm_low_latency_gemm, whose body builds its JIT module (trtllm-gen cubins) and takes the
# autotuner's lock (choose_one) outside any declared op: one operator around it. Its kernel
# writes only `out` (the workspace is FlashInfer's cached buffer, no argument) and the function
# returns `out` though annotated `-> None` (the correction). `global_scale` is mm_fp8's `alpha`,
# None by default, which the kernel refuses at its FFI call (a TensorView it reads,
# csrc/trtllm_low_latency_gemm_runner.cu): an optional tensor in the schema, so such a call
# compiles and fails at run where eager fails, in FlashInfer's own call.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.trtllm_low_latency_gemm",
    function="trtllm_low_latency_gemm",
    name="flashinfer::trtllm_low_latency_gemm",
    declare=Declare(mutates=("out",)),
    correction=Correction(returns_argument="out",
                          annotations={"global_scale": typing.Optional[torch.Tensor]}),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _mm_fp4(values):
    """`mm_fp4`'s fresh result (no `out` given), as its body allocates it on every backend:
    (a.shape[0], b.shape[1]) of `out_dtype`, contiguous."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[1]), dtype=values["out_dtype"])


# mm_fp4 (SGLang's NVFP4 linear GEMM, every backend) as one operator, its backend checks included:
# they import cuDNN and the CuTe DSL (importlib) and the body builds runners, cuDNN graphs and JIT
# modules and takes the autotuner's lock. Its result is `out`, the caller's when given (the
# correction); its fake is the record's.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="mm_fp4",
    name="flashinfer::mm_fp4",
    declare=Declare(),
    # dynafold's own declaration of `mm_fp4`: returns `out`, the caller's when given, else one it
    # allocates.
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's own declaration of the public mm_fp4, called without `out` (with it, its operator
    # returns nothing: the correction).
    fake=Fake(_mm_fp4, ("a", "b", "out_dtype")),
))


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


# The other autotuned dense GEMMs reach the same machinery in their public body (0.6.16 on): backend
# checks that import cuDNN and the CuTe DSL, runner classes built per call, the autotuner's lock,
# cuDNN graphs and JIT modules. Each is one operator like mm_fp4: mm_bf16 and bmm_bf16 (every
# backend, `batch_invariant` too), mm_mxfp8 (vLLM's MXFP8 linear) and tgv_gemm_sm100 (dense and,
# 0.7.2 on, block-scaled). Each kernel writes only `out` (its workspace is FlashInfer's per-stream
# scratch, no argument) and each returns `out`, the caller's when given (the correction); fakes are
# the records'.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="mm_bf16",
    name="flashinfer::mm_bf16",
    declare=Declare(),
    # dynafold's declarations of the other autotuned dense GEMMs and of the groupwise and SVDQuant
    # ones: each returns `out`, the caller's when given, else one it allocates (every backend's path
    # ends `return out`, or a runner's result, which is `out`).
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's declarations of the other autotuned dense GEMMs, called without `out`:
    # mm_bf16 and mm_mxfp8 allocate as mm_fp4 does.
    fake=Fake(_mm_fp4, ("a", "b", "out_dtype")),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="bmm_bf16",
    name="flashinfer::bmm_bf16",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_bmm_bf16, ("A", "B", "out_dtype")),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="mm_mxfp8",
    name="flashinfer::mm_mxfp8",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_mm_fp4, ("a", "b", "out_dtype")),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="tgv_gemm_sm100",
    name="flashinfer::tgv_gemm_sm100",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_tgv_gemm_sm100, ("a", "b", "bias")),
))


def _bmm_mxfp8(values):
    """`bmm_mxfp8`'s fresh result (no `out`), as its body allocates it (0.6.16-0.7.4):
    (A.shape[0], A.shape[1], B.shape[2]) of `dtype`."""
    a, b = values["A"], values["B"]
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]), dtype=values["dtype"])


# bmm_mxfp8 (0.6.16 on) checks for cuDNN (`CUDNN_AVAILABLE`) and builds cuDNN graphs or loads the
# SM120 CUTLASS module in its body; the grouped GEMMs for MoE (grouped_mm_bf16, _fp8, _mxfp8, _fp4;
# 0.6.16 on) check the cuDNN frontend's version (cudnn.backend_version, an import) and build and
# cache a cuDNN graph per shape (grouped_mm/cudnn/core.py), or launch 0.7.4's experimental Cake
# program (grouped_mm_bf16 backend="cake"). Each writes only `out` (its workspace is FlashInfer's
# per-stream scratch) and returns it, the caller's when given (the correction); fakes are the
# records'.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="bmm_mxfp8",
    name="flashinfer::bmm_mxfp8",
    declare=Declare(),
    # dynafold's declarations of bmm_mxfp8, the grouped GEMMs and cuDNN Frost's GEMM1 + SwiGLU:
    # each returns `out`, the caller's when given, else one it allocates.
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's own declarations of bmm_mxfp8, the grouped GEMMs and cuDNN Frost's GEMM1 + SwiGLU,
    # called without `out`. The grouped GEMMs allocate as mm_fp4 does: (cum_m, n) = (a.shape[0],
    # b.shape[1]) of `out_dtype` (grouped_mm/cudnn/core.py).
    fake=Fake(_bmm_mxfp8, ("A", "B", "dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS += [
    Op(
        family=Family.GEMM,
        module="flashinfer.grouped_mm.core",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
        fake=Fake(_mm_fp4, ("a", "b", "out_dtype")),
        sweep=Sweep(equal=("0.6.16", "0.7.4")),
    )
    for name in ("grouped_mm_bf16", "grouped_mm_fp8", "grouped_mm_mxfp8", "grouped_mm_fp4")
]


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


def _fp8_blockscale_gemm_sm90(values):
    """`fp8_blockscale_gemm_sm90`'s fresh result (no `out`): (M, N) of `out_dtype` or
    bfloat16, `weight` being (N, K)."""
    input, weight = values["input"], values["weight"]
    return input.new_empty((input.shape[0], weight.shape[0]), dtype=_out_dtype_or_bf16(values))


# The FP8/FP4 groupwise GEMMs (0.6.16 on) call their JIT module's function in the public function's
# own body (no private function holds the call): `get_gemm_sm100_module()...`, the trtllm-gen runner
# or a CuTe DSL / cuTile kernel, so the boundary is the public function. gemm_fp8_nt_blockscaled is
# gemm_fp8_nt_groupwise with a fixed granularity and goes through this operator;
# group_gemm_mxfp4_nt_groupwise is FlashInfer's other name for group_gemm_mxfp8_mxfp4_nt_groupwise.
# fp8_blockscale_gemm_sm90 (the H200's) builds its JIT runner through a loader that reads the clock
# (FlashInfer's JIT spec registry). Each writes only `out` (its workspaces are FlashInfer's
# per-stream scratch, or a local one) and returns it, the caller's when given (the correction).
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="gemm_fp8_nt_groupwise",
    name="flashinfer::gemm_fp8_nt_groupwise",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_gemm_fp8_nt_groupwise, ("a", "b", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS += [
    Op(
        family=Family.GEMM,
        module="flashinfer.gemm.gemm_base",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
        fake=Fake(_group_gemm_nt_groupwise, ("a", "b", "out_dtype")),
        sweep=Sweep(equal=("0.6.16", "0.7.4")),
    )
    for name in ("group_gemm_fp8_nt_groupwise", "group_gemm_mxfp8_mxfp4_nt_groupwise",
                 "group_gemm_nvfp4_nt_groupwise")
]
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="fp8_blockscale_gemm_sm90",
    name="flashinfer::fp8_blockscale_gemm_sm90",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_fp8_blockscale_gemm_sm90, ("input", "weight", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _batch_deepgemm_fp8_nt_groupwise(values):
    """`batch_deepgemm_fp8_nt_groupwise`'s fresh result (no `out`): (batch, m, n) with `a`
    (batch, m, k) and `b` (batch, n, k), of `out_dtype` or bfloat16 (0.6.16-0.7.4, both
    backends: gemm_base.py `torch.empty(a.shape[0], a.shape[1], b.shape[1])`)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=_out_dtype_or_bf16(values))


# The DeepGEMM grouped FP8 GEMMs (0.6.16 on, SM100 family) and 0.7.x's contiguous CuTe DSL one call
# their kernel in the public function's own body: deep_gemm.py builds cuda-python driver structs per
# call (cuTensorMapEncodeTiled: `type.__new__`, which Dynamo cannot trace) and loads its
# runtime-compiled kernel; group_gemm_fp8_nt_groupwise_contiguous checks every tensor's data_ptr()
# alignment and compiles its CuTe DSL kernel; 0.7.x batch_deepgemm_fp8_nt_groupwise's "cake" backend
# builds its program per call. Each kernel writes only `out` (DeepGEMM's transformed scales and the
# Cake workspace are fresh per call) and each returns `out`, the caller's when given (the
# correction); fakes are the records'.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="group_deepgemm_fp8_nt_groupwise",
    name="flashinfer::group_deepgemm_fp8_nt_groupwise",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_group_gemm_nt_groupwise, ("a", "b", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="batch_deepgemm_fp8_nt_groupwise",
    name="flashinfer::batch_deepgemm_fp8_nt_groupwise",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_batch_deepgemm_fp8_nt_groupwise, ("a", "b", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_base",
    function="group_gemm_fp8_nt_groupwise_contiguous",
    name="flashinfer::group_gemm_fp8_nt_groupwise_contiguous",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_group_gemm_nt_groupwise, ("a", "b", "out_dtype")),
    sweep=Sweep(equal=("0.7.4",)),
))


def _cake_lora_gemm(values):
    """0.7.4's `mm_fp8_lora` / `mm_nvfp4_lora` fresh result (no `out`): `_run`'s
    `torch.empty((m, n), dtype=torch.bfloat16)`, m = a.shape[0], n = b.shape[0]
    (gemm/cake_quant_lora_gemm.py)."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


# 0.7.4's Cake LoRA GEMMs (cake_quant_lora_gemm.py: FP8 on SM90/SM100, NVFP4 on SM100) pick their
# generated program from shape, arch and SM count and build and load its JIT module (os.lstat on its
# sources) in the public body (`_run`), outside any declared op, so the public function is the
# boundary. The program stores only `out` (the LoRA carrier it passes without an adapter is
# FlashInfer's zeroed per-device cache, never read) and the function returns `out`, the caller's
# when given (the correction). mm_nvfp4_lora's prepared adapter (a dataclass) is narrowed to None
# (hooks/ops/engine/narrowing.py).
OPS += [
    Op(
        family=Family.GEMM,
        module="flashinfer.gemm.cake_quant_lora_gemm",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        # dynafold's declarations of 0.7.4's Cake LoRA GEMMs: `_run` returns `out`, the caller's
        # when given, else a bfloat16 (m, n) it allocates (cake_quant_lora_gemm.py).
        correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
        fake=Fake(_cake_lora_gemm, ("a", "b")),
        sweep=Sweep(equal=("0.7.4",)),
    )
    for name in ("mm_fp8_lora", "mm_nvfp4_lora")
]


def _cute_dsl_bf16_fp4_uses_sm100_layout(device):
    """Whether mm_bf16_fp4's cute-dsl backend keeps the [N, K/2] weight on `device`, as the
    release decides it: 0.7.2 on, `_cute_dsl_uses_sm100_layout` (SM100/103/107); 0.7.0 and 0.7.1,
    inline in gemm_bf16_fp4_cute_dsl.py (SM100/103, `_prepare_cute_dsl_sm100`); 0.6.16, which
    has no SM100 path, never."""
    from flashinfer.utils import get_compute_capability
    uses_sm100 = getattr(sys.modules["flashinfer.gemm.gemm_bf16_fp4"],
                         "_cute_dsl_uses_sm100_layout", None)
    if uses_sm100 is not None:
        return uses_sm100(*get_compute_capability(device))
    cute_dsl = importlib.import_module("flashinfer.gemm.gemm_bf16_fp4_cute_dsl")
    if hasattr(cute_dsl, "_prepare_cute_dsl_sm100"):
        return tuple(get_compute_capability(device)) in ((10, 0), (10, 3))
    return False


def _mm_bf16_fp4(values):
    """`mm_bf16_fp4`'s fresh result (no `out`): (a.shape[0], n) of `out_dtype` or a's dtype,
    n as each backend reads it from its prepared weight: b.shape[1] // 2 for the packed
    [K/tile, 2N] layouts (blackwell-tiled; cute-dsl off the SM100 family), else b.shape[0]
    ([N, K/2]: cudnn, cute-dsl on the SM100 family, cute-dsl-native, blackwell-native)."""
    a, b, backend = values["a"], values["b"], values["backend"]
    packed = backend == "blackwell-tiled"
    if backend == "cute-dsl":
        packed = not _cute_dsl_bf16_fp4_uses_sm100_layout(a.device)
    n = b.shape[1] // 2 if packed else b.shape[0]
    return a.new_empty((a.shape[0], n), dtype=values["out_dtype"] or a.dtype)


# mm_bf16_fp4 (W4A16, 0.6.16 on) dispatches on `backend` in its body to a cuDNN graph, a CuTe DSL
# kernel (a class defined per call, cute.compile) or, 0.7.x, the native CuTe DSL runner and the
# Blackwell generated programs (JIT modules loaded per call, os.lstat), outside any declared op, so
# the public function is the boundary. Every backend writes only `out` (workspaces and split-K
# partials are FlashInfer's caches or per-call tensors) and returns it, the caller's when given (the
# correction); the fake is the record's. Its required keyword-only `backend` follows `alpha=None`
# (hooks/ops/engine/narrowing.py takes it positionally).
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_bf16_fp4",
    function="mm_bf16_fp4",
    name="flashinfer::mm_bf16_fp4",
    declare=Declare(),
    # dynafold's declaration of mm_bf16_fp4: every backend returns `out`, the caller's when
    # given, else one it allocates (gemm_bf16_fp4_cudnn.py, _cute_dsl.py, _blackwell.py,
    # kernels/native_bf16_fp4/runner.py: `return out`).
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_mm_bf16_fp4, ("a", "b", "backend", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _mm_nvfp4_svdquant(values):
    """`mm_nvfp4_svdquant`'s fresh result (no `out`): (a.shape[0], b.shape[0]) bfloat16."""
    a, b = values["a"], values["b"]
    return a.new_empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)


# SVDQuant (0.6.16 on): mm_nvfp4_svdquant builds autotuner runners per call (one operator,
# like mm_fp4: writes and returns `out`); nvfp4_quantize_smooth checks data_ptr()
# alignment and calls its JIT kernel in its body, two fresh results. svdquant_linear is
# the two with a torch.mm between, and traces through both operators.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.gemm_svdquant",
    function="mm_nvfp4_svdquant",
    name="flashinfer::mm_nvfp4_svdquant",
    declare=Declare(),
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    fake=Fake(_mm_nvfp4_svdquant, ("a", "b")),
))

# tinygemm_bf16 (0.7.4) chooses its Cake program from data_ptr() alignment in the public
# body before reaching FlashInfer's declared tinygemm2 ops: one operator that writes `out`
# and returns nothing (0.6.16 and 0.7.2 have the same kernels and contract).
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.routergemm",
    function="tinygemm_bf16",
    name="flashinfer::tinygemm_bf16",
    declare=Declare(mutates=("out",)),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))

# PreparedGroupGemmFp8NtGroupwiseContiguous.launch (0.7.x, SM100 Cake grouped FP8 GEMM for MoE
# experts; a wrapper method, hooks/ops/mechanisms/method_boundaries.py) checks its replacement
# operands' data_ptr() alignment (_require_tensor, and `out`'s alignment class) and launches its
# prepared tvm_ffi program in its own body. Each of a, a_scale, m_indices and out it is not given is
# the one bound at preparation (wrapper state the program reads or writes unseen by the graph, and
# `self._out` returned): woken only for the call that gives all four (the correction's
# `result_is_given`, when), where the program writes `out` alone, the result, and reads the given
# operands and the weights bound at preparation (b, b_scale); with fill_padding it forward-fills
# m_indices into the wrapper's own scratch first (docs/op-audit).
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.cake_grouped_fp8_gemm",
    function="PreparedGroupGemmFp8NtGroupwiseContiguous.launch",
    name="flashinfer::prepared_group_gemm_fp8_nt_groupwise_contiguous_launch",
    declare=Declare(),
    # dynafold's declaration of the prepared contiguous grouped FP8 GEMM's launch (a wrapper
    # method): with a, a_scale, m_indices and out all given (none left to the ones bound at
    # preparation), the program writes `out` only and launch returns it (0.7.4
    # gemm/cake_grouped_fp8_gemm.py:1546-:1547, 0.7.2 :563-:564).
    correction=Correction(
        result_is_given=Given(
            argument="out",
            when={"a": torch.Tensor, "a_scale": torch.Tensor, "m_indices": torch.Tensor},
        ),
    ),
    sweep=Sweep(equal=("0.7.4",)),
))

# Its fused gate_up + SwiGLU + FP8-quant sibling (0.7.4,
# PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch) the same way: woken for the call that
# gives all five operands, where the programs write `out_q` and `out_s`, the pair it returns (the
# correction's `result_is_given`, form "pair").
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.cake_grouped_fp8_fused_silu_quant",
    function="PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch",
    name="flashinfer::prepared_group_gemm_fp8_nt_groupwise_contiguous_silu_quant_launch",
    declare=Declare(mutates=("out_s",)),
    # dynafold's declaration of the prepared fused gate_up + SwiGLU + FP8-quant grouped GEMM's
    # launch (0.7.4; 0.7.2's takes no operands): with a, a_scale, m_indices, out_q and out_s
    # all given, the programs write `out_q` and `out_s` and launch returns the pair (0.7.4
    # gemm/cake_grouped_fp8_fused_silu_quant.py:993); the BF16 GEMM workspace of the GEMM +
    # activation routes and the padding scratch are the prepared object's own, written and
    # read within the call.
    correction=Correction(
        result_is_given=Given(
            argument="out_q",
            form=Form.PAIR,
            when={"a": torch.Tensor, "a_scale": torch.Tensor, "m_indices": torch.Tensor,
                  "out_s": torch.Tensor},
            second="out_s",
        ),
    ),
    sweep=Sweep(equal=("0.7.4",)),
))

# grouped_gemm_nt_masked (0.6.16's in grouped_gemm_masked_blackwell, 0.7.x's in
# grouped_gemm_masked_wrapper; SGLang's CuTe DSL masked MoE GEMM, SM100/SM103/SM107): the public
# body asks the SM count (get_num_sm) and the arch, then the Blackwell or Rubin runner compiles its
# CuTe DSL kernel (cached per shape) and calls the compiled object, which Dynamo cannot trace: the
# boundary is the public function. It writes `out` and returns it (the correction's
# `returns_argument`); woken for the plain GEMM, without combine fusion or signals (`when`), its
# operands' (tensor, scales) pairs a Tensor[] each (hooks/ops/engine/narrowing.py),
# `alpha`/`alpha_dtype` from its `**kwargs`.
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.kernels.grouped_gemm_masked_wrapper",
    function="grouped_gemm_nt_masked",
    name="flashinfer::grouped_gemm_nt_masked",
    declare=Declare(mutates=("out",)),
    # dynafold's declaration of grouped_gemm_nt_masked: the kernel writes `out` and returns it
    # (gemm/kernels/grouped_gemm_masked_blackwell.py: the compiled kernel's wrapper `return
    # c_tensor_gpu`; grouped_gemm_masked_rubin.py the same). Woken for the plain GEMM: no combine
    # fusion, whose kernel stores through `out_ptrs` (other ranks' buffers, raw addresses) and the
    # barrier flags, and no `dst_signals` (which the kernel writes); its `**kwargs` entries `alpha`
    # and `alpha_dtype` (SGLang's CuTe DSL MoE passes them) are parameters of the operator; a call
    # passing `mma_tiler_mn` or `cluster_shape_mn` is traced as shipped. (0.6.16's is
    # grouped_gemm_masked_blackwell's own, the same body.)
    correction=Correction(
        returns_argument="out",
        keywords={"alpha": typing.Optional[torch.Tensor], "alpha_dtype": typing.Optional[str]},
        when={"is_combine_fusion": False, "out_ptrs": None, "dst_signals": None,
              "barrier_flag_local": None, "barrier_flag_multicast": None},
    ),
    # 0.7.x's is in its wrapper module, 0.6.16's in grouped_gemm_masked_blackwell.
    sweep=Sweep(cute_dsl=("0.7.4",)),
))
OPS.append(Op(
    family=Family.GEMM,
    module="flashinfer.gemm.kernels.grouped_gemm_masked_blackwell",
    function="grouped_gemm_nt_masked",
    name="flashinfer::grouped_gemm_nt_masked",
    declare=Declare(mutates=("out",)),
    correction=Correction(
        returns_argument="out",
        keywords={"alpha": typing.Optional[torch.Tensor], "alpha_dtype": typing.Optional[str]},
        when={"is_combine_fusion": False, "out_ptrs": None, "dst_signals": None,
              "barrier_flag_local": None, "barrier_flag_multicast": None},
    ),
    sweep=Sweep(cute_dsl=("0.6.16",)),
))


def _kimi_k3_project(values):
    """kimi_k3_fp8_projection's fresh result (no `out` given, 0.7.4 cake_backend.py:4288):
    bfloat16 (M, n_valid), n_valid from the prepared weight, held by its key while the
    trace runs (hooks/ops/mechanisms/attention_plans.py `_hold`)."""
    prepared = attention_plans.held(values["prepared"])
    x = values["x"]
    return x.new_empty((x.shape[0], int(prepared.n_valid)), dtype=torch.bfloat16)


# kimi_k3_fp8_projection (0.7.4, SM100/SM103) takes its prepared weight and workspace as Python
# objects and picks its programs from data_ptr() alignment: under compile Dynamo traces dynafold's
# Python, which holds both by key (hooks/ops/mechanisms/attention_plans.py REBUILT) and calls this
# declaration. It writes `out` and returns it, the caller's when given (the correction's
# `result_is_given`).
OPS.append(Op(
    family=Family.GEMM,
    module=PLANS,
    function="kimi_k3_project",
    name="flashinfer::kimi_k3_project",
    declare=Declare(),
    # dynafold's declaration of kimi_k3_fp8_projection (hooks/ops/mechanisms/attention_plans.py):
    # returns `out`, the caller's when given, else one it allocates (0.7.4
    # experimental/kimi_k3_fp8_projection/cake_backend.py:4288, :4296).
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's own declaration of kimi_k3_fp8_projection, called without `out`.
    fake=Fake(_kimi_k3_project, ("x", "prepared")),
    sweep=Sweep(equal=("0.7.4",)),
))
