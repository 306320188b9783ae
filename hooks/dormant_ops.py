"""Wakes FlashInfer's dormant op declarations, for Dynamo only.

FlashInfer's kernel wrappers carry `@register_custom_op("flashinfer::NAME", mutates_args=...)`
and `@register_fake_op("flashinfer::NAME")`, and `flashinfer/utils.py` makes both the identity
(FlashInfer PR #709), because `torch.library.custom_op` costs microseconds on every eager call.
So Dynamo traces into each kernel's Python wrapper, meets the JIT loader (`os.stat`, file
locks, ninja) and the opaque FFI call, and the compile dies.

This module keeps the eager path exactly as FlashInfer ships it and gives Dynamo the op:

1. Right after `flashinfer.utils` executes, its two decorators are replaced by ones that still
   return the decorated function itself (so FlashInfer's eager calls are unchanged, at no
   cost) and record the declaration and its fake.
2. At the start of every compile (a Dynamo start callback, so a process that never compiles
   pays nothing), each declaration recorded since the last one is woken: a torch operator
   `dynafold_flashinfer::NAME` is defined with FlashInfer's schema (its `schema=` or its
   annotations), whose real implementation is FlashInfer's function and whose fake is
   FlashInfer's `register_fake_op` function, dynafold's override where FlashInfer's is wrong
   (hooks/op_fakes.py), or, for an op that returns nothing, one that returns nothing (several of
   FlashInfer's no-result fakes rotted: parameters missing); then
   `torch._dynamo.substitute_in_graph(fn)` makes Dynamo call the operator wherever it meets
   `fn`. `fn` itself is untouched.
3. A declaration whose full signature no torch schema can say (FlashInfer's sampling ops: a
   `Generator`, `Union[int, Tensor]` seeds, a result that is a tensor or a tuple) is woken
   narrowed to how serving code calls it (hooks/op_narrowing.py); Dynamo then calls the
   operator for a call that fits and traces FlashInfer's function as shipped for any other. A declaration that cannot become a correct operator at all
   (schema not expressible, tensors returned without a fake, a fake that does not take the
   kernel's parameters, a name that is not an identifier) stays as FlashInfer ships it, with
   one debug line; `status()` says per module what was woken and why not.
4. Each fake is checked against its kernel the first time the operator runs for real in the
   process, before that result is returned (hooks/fake_check.py); the verdicts are in
   `status()`.
5. Every `functools.cache`d JIT loader (`get_*module*`, `_get_*module*`) of a woken module is made trace-
   transparent: under compile Dynamo calls it outside the trace (as a constant), so the
   module it returns is the one the eager path built, or is built then, outside the graph.
6. FlashInfer's attention wrappers keep their plan as a tvm_ffi Array, which Dynamo cannot pass
   to an operator; from a process's first compile on it is a list (hooks/attention_plans.py).
7. With `FLASHINFER_LOGLEVEL` >= 1, FlashInfer's `flashinfer_api` wraps each public function in
   a logger (timestamps, file dumps, locks). Right after `flashinfer.api_logging` executes, its
   decorator is replaced by one that makes the same wrapper and remembers what it wraps; at
   compile start Dynamo is told to call the wrapped function instead, so eager calls log as
   before and the logging stays out of the traced path. 0.7.4's `flashinfer_experimental_api`
   (a warning on an experimental op's first call) is kept out the same way.
8. FlashInfer 0.7.4's per-stream scratch lookup (`_get_stream_cache_buf`) becomes a run-time
   operator under compile (hooks/stream_scratch.py says why).
9. A wrapper method whose body holds what no trace can (the AutoTuner's lock, a prepared
   program's launch) is a row of EXTRA_DECLARATIONS named `Class.method`: under compile it
   calls dynafold's declaration taking the object's key (hooks/method_boundaries.py).

Nothing user-supplied reaches generated source: there is no generated source.
"""

import enum
import functools
import inspect
import logging
import sys
import typing

import torch

# dynafold's other hooks, loaded before this one (src/python/src/dormant_ops.rs).
import _dynafold_attention_plans as attention_plans
import _dynafold_fake_check as fake_check
import _dynafold_method_boundaries as method_boundaries
import _dynafold_op_corrections as op_corrections
import _dynafold_op_fakes as op_fakes
import _dynafold_op_narrowing as op_narrowing
import _dynafold_partial_methods as partial_methods
import _dynafold_stream_scratch as stream_scratch

_log = logging.getLogger("dynafold")

NAMESPACE = "dynafold_flashinfer"
_lib = None
# Declarations (_Declared) in declaration order, not yet woken.
_pending = []
# Every declaration recorded, woken or not (for status and tests), in declaration order.
_declarations = []
# "flashinfer::NAME" -> fakes declared before their op (paired with the next declaration).
_unpaired = {}
# module name -> {"woken": n, "skipped": {reason: n}}
_status = {}
# "flashinfer::NAME" -> [(operator, FlashInfer's function)], once defined.
_ops = {}
_armed = False
# (logging wrapper, the function it wraps) made by flashinfer_api, not yet substituted.
_api_pending = []

NOT_BUILT = (
    "dynafold: torch.compile reached FlashInfer's {loader}({args}), whose JIT module is not built "
    "in this process and could not be built outside the trace ({error}). Call the FlashInfer "
    "op once eagerly on the same device before compiling (SGLang's warm-up forward does this)."
)
_transparent = set()


# Declarations left as FlashInfer ships them by the library's settings, by declared name ->
# why (e.g. DYNAFOLD_FP4_OPAQUE=0 for fp4_quantize's kernel); filled before any is woken.
LEFT_ALONE = {}

# Boundaries FlashInfer forgot: public paths that reach the JIT machinery, the autotuner
# (threading locks, classes defined per call) or an FFI call outside any declared op.
# (module, function, declared name, mutated parameters, schema or None for the annotations'),
# woken like FlashInfer's own declarations once its module is loaded.
EXTRA_DECLARATIONS = [
    # bmm_fp8 -> fp8_gemm_sm100: AutoTuner.choose_one and runner classes built per call. Its
    # `List[str]` parameter is not one torch infers, hence the schema.
    ("flashinfer.gemm.gemm_base", "fp8_gemm_sm100", "flashinfer::fp8_gemm_sm100",
     ("out", "workspace_buffer"),
     "(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor(a4!) out, "
     "Tensor(a5!) workspace_buffer, str[] runner_names) -> ()"),
    # fp4_quantize(..., backend="cute-dsl") -> _fp4_quantize_cute_dsl (0.6.16 on, SM100; SGLang
    # selects it there): is_cute_dsl_available() (importlib), per-call environment reads and a
    # CuTe DSL kernel compiled at call time (file locks), then a tvm_ffi launch. Its fake is
    # hooks/op_fakes.py's; 0.7.2's `nvfp4_4over6` recipe object is narrowed to None (off).
    ("flashinfer.quantization.fp4_quantization", "_fp4_quantize_cute_dsl",
     "flashinfer::fp4_quantize_cute_dsl", (), None),
    # silu_and_mul_nvfp4_quantize (0.6.16 on, SM100; SwiGLU then NVFP4) ->
    # silu_and_mul_nvfp4_quantize_cute_dsl, the CuTe DSL driver: it clones the input when its
    # data_ptr() is not 16-byte aligned (no trace can read an address), reads the environment
    # and compiles its kernel at call time (file locks), then launches it. The driver allocates
    # both results and the kernel writes only them (docs/op-audit); its fake is
    # hooks/op_fakes.py's. The resolved "4over6" recipe (0.7.2 on) is narrowed to None (off),
    # which the public function passes when the recipe is off.
    ("flashinfer.quantization.kernels.nvfp4_quantize", "silu_and_mul_nvfp4_quantize_cute_dsl",
     "flashinfer::silu_and_mul_nvfp4_quantize_cute_dsl", (), None),
    # silu_and_mul_mxfp8_quantize and its backward (0.7.2 on, SM100 family): the public
    # function's argument checks read gated_input's (and grad_output's) data_ptr() alignment
    # before the kernel, in the public body (0.7.2) or in the Cake backend it calls, outside
    # FlashInfer's own declaration, which 0.7.4 no longer calls (cake_gated_act_mxfp8_backend:
    # per-call program choice and loading). So the public function is the boundary. Its four
    # results are fresh (empty_outputs), the kernel writes only them (docs/op-audit); the fake
    # is hooks/op_fakes.py's. Named `_public`: FlashInfer declares the plain names.
    *(("flashinfer.gated_act_mxfp8", name, f"flashinfer::{name}_public", (), None)
      for name in ("silu_and_mul_mxfp8_quantize", "silu_and_mul_mxfp8_quantize_backward")),
    # 0.7.4's masked MXFP8 experts quantizers (SM100; the MoE's grouped GEMM operands): the
    # public body checks `a`'s data_ptr() alignment (silu_and_mul_mxfp8_experts_quantize
    # always, mxfp8_grouped_quantize for backend="cuda") before FlashInfer's declared op, and
    # mxfp8_grouped_quantize picks its backend (cuTile, Cake or CUDA, each its own operator or
    # program) in that body. So the public function is the boundary. Every backend returns
    # fresh (x_q, sf) of one layout and writes nothing else (docs/op-audit); the fake is
    # hooks/op_fakes.py's. mxfp8_grouped_quantize's schema says its Literal `backend` as a str
    # (0.7.2's (a, mask, backend) takes it too; 0.6.16's has no backend and keeps its path).
    # Named `_public`: FlashInfer declares the plain mxfp8_grouped_quantize (its cuTile op).
    ("flashinfer.quantization.fp8_quantization", "silu_and_mul_mxfp8_experts_quantize",
     "flashinfer::silu_and_mul_mxfp8_experts_quantize_public", (), None),
    ("flashinfer.quantization.fp8_quantization", "mxfp8_grouped_quantize",
     "flashinfer::mxfp8_grouped_quantize_public", (),
     "(Tensor a, Tensor mask, str backend=\"cutile\") -> (Tensor, Tensor)"),
    # flashinfer.cute_dsl's fused RMSNorm + FP4 quantizers (0.6.16 on, SM100): the public body
    # compiles its CuTe DSL kernel at call time (`_get_compiled_kernel`: cute.compile, source
    # formatting) and launches the compiled closure; no private function holds the launch with
    # the outputs' allocation, so the public function is the boundary. Woken for the call that
    # gives no output buffer (hooks/op_corrections.py `fresh_only`), whose results are fresh;
    # add_rmsnorm_fp4quant also writes `residual` in place (residual += input), declared
    # mutated. The kernels write only those (docs/op-audit); the fakes are hooks/op_fakes.py's.
    ("flashinfer.cute_dsl.rmsnorm_fp4quant", "rmsnorm_fp4quant",
     "flashinfer::rmsnorm_fp4quant", (), None),
    ("flashinfer.cute_dsl.add_rmsnorm_fp4quant", "add_rmsnorm_fp4quant",
     "flashinfer::add_rmsnorm_fp4quant", ("residual",), None),
    # The public MXFP4 and MXFP8 CuTe DSL quantizers (flashinfer.quantization, 0.6.16 on,
    # SM100): each compiles its kernel at call time (cute.compile, source formatting and
    # hashing, file locks), mxfp8's 0.7.x body also clones an input whose data_ptr() is not
    # 16-byte aligned (no trace can read an address), then launches it. Each allocates its
    # two results and the kernels write only them (docs/op-audit); the fakes are
    # hooks/op_fakes.py's.
    ("flashinfer.quantization.kernels.mxfp4_quantize", "mxfp4_quantize_cute_dsl",
     "flashinfer::mxfp4_quantize_cute_dsl", (), None),
    ("flashinfer.quantization.kernels.mxfp8_quantize", "mxfp8_quantize_cute_dsl",
     "flashinfer::mxfp8_quantize_cute_dsl", (), None),
    # The public per-token NVFP4 CuTe DSL quantizer (0.6.16 on) likewise compiles its kernel
    # at call time (source hashing, cute.compile) and launches it in its body. It allocates its
    # three results (fp4, block scales, per-token scales; `out_scale` is only read) and the
    # kernel writes only them (docs/op-audit); the fake is hooks/op_fakes.py's. Its
    # `nvfp4_4over6` (0.7.x) is narrowed to None, or left at its `_UNSET` default ("read the
    # environment"), which FlashInfer's function then gets (hooks/op_narrowing.py variants).
    ("flashinfer.quantization.kernels.nvfp4_quantize", "nvfp4_quantize_per_token_cute_dsl",
     "flashinfer::nvfp4_quantize_per_token_cute_dsl", (), None),
    # ... and the public NVFP4 one (0.6.16 on), whose body picks its TMA or vector kernel from
    # shape and arch, compiles it and launches it: it allocates both results (or, 0.7.4, writes
    # the caller's `out` pair, narrowed to None: hooks/op_narrowing.py) and the kernels write
    # only them. 0.7.x's `global_scale: float | Tensor` gives an operator per member, each with
    # `nvfp4_4over6` None or left at `_UNSET`. The fake is hooks/op_fakes.py's.
    ("flashinfer.quantization.kernels.nvfp4_quantize", "nvfp4_quantize_cute_dsl",
     "flashinfer::nvfp4_quantize_cute_dsl", (), None),
    # mm_fp4 (SGLang's NVFP4 linear GEMM, every backend) as one operator, its backend checks
    # included: they import cuDNN and the CuTe DSL (importlib) and the body builds runners,
    # cuDNN graphs and JIT modules and takes the autotuner's lock. Its result is `out`, the
    # caller's when given (hooks/op_corrections.py); its fake is hooks/op_fakes.py's.
    ("flashinfer.gemm.gemm_base", "mm_fp4", "flashinfer::mm_fp4", (), None),
    # The other autotuned dense GEMMs reach the same machinery in their public body (0.6.16 on):
    # backend checks that import cuDNN and the CuTe DSL, runner classes built per call, the
    # autotuner's lock, cuDNN graphs and JIT modules. Each is one operator like mm_fp4: mm_bf16
    # and bmm_bf16 (every backend, `batch_invariant` too), mm_mxfp8 (vLLM's MXFP8 linear) and
    # tgv_gemm_sm100 (dense and, 0.7.2 on, block-scaled). Each kernel writes only `out` (its
    # workspace is FlashInfer's per-stream scratch, no argument) and each returns `out`, the
    # caller's when given (hooks/op_corrections.py); fakes are hooks/op_fakes.py's.
    *(("flashinfer.gemm.gemm_base", name, f"flashinfer::{name}", (), None)
      for name in ("mm_bf16", "bmm_bf16", "mm_mxfp8", "tgv_gemm_sm100")),
    # bmm_mxfp8 (0.6.16 on) checks for cuDNN (`CUDNN_AVAILABLE`) and builds cuDNN graphs or
    # loads the SM120 CUTLASS module in its body; the grouped GEMMs for MoE (grouped_mm_bf16,
    # _fp8, _mxfp8, _fp4; 0.6.16 on) check the cuDNN frontend's version (cudnn.backend_version,
    # an import) and build and cache a cuDNN graph per shape (grouped_mm/cudnn/core.py), or
    # launch 0.7.4's experimental Cake program (grouped_mm_bf16 backend="cake"). Each writes
    # only `out` (its workspace is FlashInfer's per-stream scratch) and returns it, the caller's
    # when given (hooks/op_corrections.py); fakes are hooks/op_fakes.py's.
    ("flashinfer.gemm.gemm_base", "bmm_mxfp8", "flashinfer::bmm_mxfp8", (), None),
    *(("flashinfer.grouped_mm.core", name, f"flashinfer::{name}", (), None)
      for name in ("grouped_mm_bf16", "grouped_mm_fp8", "grouped_mm_mxfp8", "grouped_mm_fp4")),
    # cudnn_frost_grouped_gemm1_swiglu (0.7.2 on): the public body runs FlashInfer's AutoTuner
    # over cuDNN Frost's generated kernels (a lock, the tactic choice, imports) and launches
    # the chosen one; it writes `out` (the caller's, or a fresh bfloat16 one) and the caller's
    # `workspace`, and returns `out` (fused_moe/backends/cudnn_frost/bf16/runtime.py forward:
    # `return inputs[5]`). Its `tactic: Any` is an int to the operator (hooks/op_narrowing.py).
    ("flashinfer.fused_moe.cudnn_frost_selected", "cudnn_frost_grouped_gemm1_swiglu",
     "flashinfer::cudnn_frost_grouped_gemm1_swiglu", ("workspace",), None),
    # The FP8/FP4 groupwise GEMMs (0.6.16 on) call their JIT module's function in the public
    # function's own body (no private function holds the call): `get_gemm_sm100_module()...`,
    # the trtllm-gen runner or a CuTe DSL / cuTile kernel, so the boundary is the public
    # function. gemm_fp8_nt_blockscaled is gemm_fp8_nt_groupwise with a fixed granularity and
    # goes through this operator; group_gemm_mxfp4_nt_groupwise is FlashInfer's other name for
    # group_gemm_mxfp8_mxfp4_nt_groupwise. fp8_blockscale_gemm_sm90 (the H200's) builds its JIT
    # runner through a loader that reads the clock (FlashInfer's JIT spec registry). Each
    # writes only `out` (its workspaces are FlashInfer's per-stream scratch, or a local one)
    # and returns it, the caller's when given (hooks/op_corrections.py).
    *(("flashinfer.gemm.gemm_base", name, f"flashinfer::{name}", (), None)
      for name in ("gemm_fp8_nt_groupwise", "group_gemm_fp8_nt_groupwise",
                   "group_gemm_mxfp8_mxfp4_nt_groupwise", "group_gemm_nvfp4_nt_groupwise",
                   "fp8_blockscale_gemm_sm90")),
    # The DeepGEMM grouped FP8 GEMMs (0.6.16 on, SM100 family) and 0.7.x's contiguous CuTe DSL
    # one call their kernel in the public function's own body: deep_gemm.py builds
    # cuda-python driver structs per call (cuTensorMapEncodeTiled: `type.__new__`, which
    # Dynamo cannot trace) and loads its runtime-compiled kernel;
    # group_gemm_fp8_nt_groupwise_contiguous checks every tensor's data_ptr() alignment and
    # compiles its CuTe DSL kernel; 0.7.x batch_deepgemm_fp8_nt_groupwise's "cake" backend
    # builds its program per call. Each kernel writes only `out` (DeepGEMM's transformed
    # scales and the Cake workspace are fresh per call) and each returns `out`, the caller's
    # when given (hooks/op_corrections.py); fakes are hooks/op_fakes.py's.
    *(("flashinfer.gemm.gemm_base", name, f"flashinfer::{name}", (), None)
      for name in ("group_deepgemm_fp8_nt_groupwise", "batch_deepgemm_fp8_nt_groupwise",
                   "group_gemm_fp8_nt_groupwise_contiguous")),
    # 0.7.4's Cake LoRA GEMMs (cake_quant_lora_gemm.py: FP8 on SM90/SM100, NVFP4 on SM100)
    # pick their generated program from shape, arch and SM count and build and load its JIT
    # module (os.lstat on its sources) in the public body (`_run`), outside any declared op,
    # so the public function is the boundary. The program stores only `out` (the LoRA carrier
    # it passes without an adapter is FlashInfer's zeroed per-device cache, never read) and
    # the function returns `out`, the caller's when given (hooks/op_corrections.py).
    # mm_nvfp4_lora's prepared adapter (a dataclass) is narrowed to None (hooks/op_narrowing.py).
    *(("flashinfer.gemm.cake_quant_lora_gemm", name, f"flashinfer::{name}", (), None)
      for name in ("mm_fp8_lora", "mm_nvfp4_lora")),
    # mm_bf16_fp4 (W4A16, 0.6.16 on) dispatches on `backend` in its body to a cuDNN graph, a
    # CuTe DSL kernel (a class defined per call, cute.compile) or, 0.7.x, the native CuTe DSL
    # runner and the Blackwell generated programs (JIT modules loaded per call, os.lstat),
    # outside any declared op, so the public function is the boundary. Every backend writes
    # only `out` (workspaces and split-K partials are FlashInfer's caches or per-call
    # tensors) and returns it, the caller's when given (hooks/op_corrections.py); the fake
    # is hooks/op_fakes.py's. Its required keyword-only `backend` follows `alpha=None`
    # (hooks/op_narrowing.py takes it positionally).
    ("flashinfer.gemm.gemm_bf16_fp4", "mm_bf16_fp4", "flashinfer::mm_bf16_fp4", (), None),
    # SVDQuant (0.6.16 on): mm_nvfp4_svdquant builds autotuner runners per call (one operator,
    # like mm_fp4: writes and returns `out`); nvfp4_quantize_smooth checks data_ptr()
    # alignment and calls its JIT kernel in its body, two fresh results. svdquant_linear is
    # the two with a torch.mm between, and traces through both operators.
    ("flashinfer.gemm.gemm_svdquant", "mm_nvfp4_svdquant", "flashinfer::mm_nvfp4_svdquant",
     (), None),
    ("flashinfer.gemm.gemm_svdquant", "nvfp4_quantize_smooth",
     "flashinfer::nvfp4_quantize_smooth", (), None),
    # tinygemm_bf16 (0.7.4) chooses its Cake program from data_ptr() alignment in the public
    # body before reaching FlashInfer's declared tinygemm2 ops: one operator that writes `out`
    # and returns nothing (0.6.16 and 0.7.2 have the same kernels and contract).
    ("flashinfer.gemm.routergemm", "tinygemm_bf16", "flashinfer::tinygemm_bf16", ("out",), None),
    # flashinfer.norm's fused norms for diffusion models (0.6.16 on) call their JIT kernel
    # (`rmsnorm_silu`, `fused_dit_layernorm`) in the public function's own body: no private
    # function holds the call, so the boundary is the public function, its argument checks and
    # its JIT loader (file locks, ninja) included. Woken for the call that gives no output
    # buffer, whose results are fresh (hooks/op_corrections.py `fresh_only`); their fakes are
    # hooks/op_fakes.py's. The kernels write only those outputs (docs/op-audit).
    ("flashinfer.norm", "fused_rmsnorm_silu", "flashinfer::fused_rmsnorm_silu", (), None),
    *(("flashinfer.norm", name, f"flashinfer::{name}", (), None)
      for name in ("fused_dit_gate_residual_layernorm_gamma_beta",
                   "fused_dit_gate_residual_layernorm_scale_shift",
                   "fused_dit_residual_layernorm_scale_shift")),
    # fused_qk_rmsnorm_rope (0.6.16 on; video DiT attention): the public function calls its JIT
    # module's function in its own body (`_get_fused_qk_rmsnorm_rope_module()`), outside any
    # declaration, so the public function (with its backend_requirement checks) is the
    # boundary. Woken for the call that gives no output buffer (hooks/op_corrections.py
    # `fresh_only`): the kernel writes only q_out, k_out and v_out, then fresh
    # (docs/op-audit). Its keyword-only parameters reach the operator positionally
    # (hooks/op_narrowing.py). The fake is hooks/op_fakes.py's.
    ("flashinfer.norm", "fused_qk_rmsnorm_rope", "flashinfer::fused_qk_rmsnorm_rope", (), None),
    # 0.7.4's fused norms for hidden size 8192 / head dim 64 (SM100 family) check every
    # tensor's data_ptr() alignment in the public function's body and pick the backend (Cake
    # program or CuTe DSL kernel) from it there, before calling their declared op: no trace
    # can read an address, and the choice belongs to each call's real pointers. So the
    # boundary is the public function, checks and choice included. gated_residual_rmsnorm and
    # gated_residual_next_rmsnorm are woken for the call that gives no output buffer, whose
    # results are fresh (hooks/op_corrections.py `fresh_only`; their fakes are
    # hooks/op_fakes.py's); rmsnorm_sigmoid_gate writes `input` in place and returns nothing.
    # Its schema is given: its `backend` is a Literal, which torch infers no type for (a
    # narrowing makes it a str for the other two). The kernels write only those outputs
    # (docs/op-audit). Named `_public`: FlashInfer declares the private ops by the plain names.
    ("flashinfer.norm", "gated_residual_rmsnorm", "flashinfer::gated_residual_rmsnorm_public",
     (), None),
    ("flashinfer.norm", "gated_residual_next_rmsnorm",
     "flashinfer::gated_residual_next_rmsnorm_public", (), None),
    ("flashinfer.norm", "rmsnorm_sigmoid_gate", "flashinfer::rmsnorm_sigmoid_gate_public",
     ("input",), "(Tensor(a0!) input, Tensor gate, float eps=1e-05, *, bool enable_pdl=True, "
     "str backend=\"auto\") -> ()"),
    # per_token_group_quant_8bit(backend="cuda") (0.7.4) -> _per_token_group_quant_8bit_cuda:
    # its argument checks, two fresh outputs and the JIT call, nothing else; the kernel only
    # reads `x` (docs/op-audit). Its fake is hooks/op_fakes.py's. 0.7.2 has no such backend.
    ("flashinfer.quantization.fp8_quantization", "_per_token_group_quant_8bit_cuda",
     "flashinfer::per_token_group_quant_8bit_cuda", (), None),
    # top_k (0.6.16 on) picks its backend in the public body from the shape, the arch and
    # FLASHINFER_TOPK_ALGO; on an sm90, 0.7.x's CUB path asks the JIT module for its workspace
    # size (`cub_topk_workspace_size`, an FFI call) and takes a per-device cached workspace,
    # outside any declared op. A size read at trace time would be wrong for the next shape, so
    # the boundary is the public function, choice included. Its results are fresh; the kernels
    # write only them and FlashInfer's own cached scratch (docs/op-audit). Its schema is given:
    # `tie_break`'s default is an IntEnum, which torch cannot write in a schema.
    ("flashinfer.topk", "top_k", "flashinfer::top_k_public", (),
     "(Tensor input, int k, bool sorted=False, bool deterministic=False, int tie_break=0, "
     "bool dsa_graph_safe=False) -> (Tensor, Tensor)"),
    # The DSA top-k transforms (every release; SGLang's NSA backend) pick CUB, clusters or
    # radix in the public body the same way, and 0.7.4 asks there whether a CUDA graph is
    # being captured (topk.py is_cub_*_beneficial: `torch.cuda.is_current_stream_capturing()`,
    # an in-graph torch.cuda function whose bool breaks fullgraph=True on a GPU; the H200
    # found it, 2026-12-02). The choice belongs to the run, not the trace: a compiled graph is
    # captured later. The kernels write the result (`out` when given) and `out_raw_indices`
    # when given, besides FlashInfer's own cached scratch (docs/op-audit). The ragged form's
    # schema is given (`tie_break` defaults to an IntEnum); the page-table form's comes from
    # its annotations, as its `out` needs hooks/op_corrections.py.
    ("flashinfer.topk", "top_k_page_table_transform",
     "flashinfer::top_k_page_table_transform_public", (), None),
    ("flashinfer.topk", "top_k_ragged_transform", "flashinfer::top_k_ragged_transform_public",
     (), "(Tensor input, Tensor offsets, Tensor lengths, int k, bool deterministic=False, "
     "int tie_break=0, bool dsa_graph_safe=False, Tensor? row_starts=None) -> Tensor"),
    # The multi-LoRA MoE BGMV kernels (0.6.16 on) are called from the public functions' own
    # bodies (`_get_bgmv_moe_module().bgmv_moe_shrink(...)`), no declaration around them; the
    # LoRA delta helpers (0.7.x moe_lora_delta.py) call these functions. The kernels write `y`
    # only (csrc/bgmv_moe/moe_bgmv_ops.cu: every other tensor const); they also read the LoRA
    # weights through the int64 pointer table `w_ptr` (fill_w_ptr), which no schema can name
    # (docs/op-audit). Named `_public` beside the JIT functions' names.
    ("flashinfer.fused_moe.bgmv_moe", "bgmv_moe_shrink", "flashinfer::bgmv_moe_shrink_public",
     ("y",), None),
    ("flashinfer.fused_moe.bgmv_moe", "bgmv_moe_expand", "flashinfer::bgmv_moe_expand_public",
     ("y",), None),
    # bgmv_moe (shrink + expand in one call) builds both pointer tables from the LoRA banks'
    # addresses in its body (fill_w_ptr: data_ptr()), which no trace can read: the boundary is
    # the public function, its result fresh (hooks/op_fakes.py) and the banks its arguments.
    ("flashinfer.fused_moe.bgmv_moe", "bgmv_moe", "flashinfer::bgmv_moe_public", (), None),
    # bgmv_moe_gemm2_lora_delta (moe_lora_delta.py) gathers the permuted activation with a
    # boolean mask (`a_exp[valid] = ...`: a data-dependent shape, aten.nonzero) before its
    # kernels: the boundary is the public function, every buffer it writes its own, its
    # result fresh (hooks/op_fakes.py).
    ("flashinfer.fused_moe.moe_lora_delta", "bgmv_moe_gemm2_lora_delta",
     "flashinfer::bgmv_moe_gemm2_lora_delta", (), None),
    # mono_moe (0.6.16 on, SM90) calls its JIT kernel (`monomoe_topk`) in the public function's
    # own body after its shape checks and the up weights' repack (cached on the weight tensor
    # as an attribute): the boundary is the public function. The kernel writes `out` (its
    # result: the caller's when given, else allocated, hooks/op_corrections.py) and the
    # `scratchpad` it self-maintains (counters, flags), the caller's when given (docs/op-audit).
    ("flashinfer.fused_moe.monomoe", "mono_moe", "flashinfer::mono_moe", ("scratchpad",),
     None),
    # AlphaMoE's NVFP4 entry points (0.7.x, SM100/SM103) check every tensor's data_ptr()
    # alignment in the public function before calling FlashInfer's own torch.library ops
    # (`flashinfer::alphamoe_nvfp4_aligned_moe`, `..._routed_moe`, declared by those names,
    # hence `_public`): `_check_alphamoe_nvfp4_supported`, its backend_requirement check for
    # the aligned call, and the routed call's prepared-weight checks and route choice
    # (`_alphamoe_complete_route_id`, from the pointers' alignment). No trace can read an
    # address, and the choice belongs to each call's real pointers, so the boundary is the
    # public function. The aligned call adds into the caller's `out` and returns nothing; the
    # routed one also writes the plan buffers it is given (sorted_token_ids, expert_ids,
    # num_tokens_post_padded, cumsum_buffer) and returns `out` (hooks/op_corrections.py
    # `returns_argument`). They write nothing else of the caller's (docs/op-audit).
    ("flashinfer.fused_moe.alphamoe_nvfp4_sm100", "alphamoe_nvfp4_aligned_moe",
     "flashinfer::alphamoe_nvfp4_aligned_moe_public", ("out",), None),
    ("flashinfer.fused_moe.alphamoe_nvfp4_sm100", "alphamoe_nvfp4_routed_moe",
     "flashinfer::alphamoe_nvfp4_routed_moe_public",
     ("sorted_token_ids", "expert_ids", "num_tokens_post_padded", "cumsum_buffer", "out"), None),
    # cute_dsl_fused_moe_bf16 (0.7.x, SM90 CuTe DSL MoE) validates its SwiGLU constants with
    # ctypes.c_float (moe_utils.py _is_finite_fp32) and builds its autotuner runner, takes the
    # AutoTuner's lock and choice in the public body: the boundary is the public function
    # (CuteDslBf16MoEWrapper.run allocates its `moe_output` and calls it, so it traces
    # through this operator). The kernels write `moe_output` (the result: the caller's when
    # given, else allocated, hooks/op_corrections.py) and `intermediate_buffer` when the caller
    # gives one (GEMM1's output), nothing else of the caller's (docs/op-audit). Its
    # `tactic` tuple is narrowed to None, the autotuner's choice (hooks/op_narrowing.py).
    ("flashinfer.fused_moe.cute_dsl.sm90_fused_moe", "cute_dsl_fused_moe_bf16",
     "flashinfer::cute_dsl_fused_moe_bf16", ("intermediate_buffer",), None),
    # cute_dsl_fused_moe_mxfp8_mxfp4 (0.7.x, SM100 CuTe DSL MoE) warns that it is deprecated
    # (warnings.warn, a DeprecationWarning on every call, before anything else) and calls
    # cute_dsl_fused_moe with quant_mode="w4a8", whose body builds its runner and takes the
    # AutoTuner's lock and choice: the boundary is the deprecated public function, its warning
    # inside the operator (raised when it runs, as eagerly). The kernels write `moe_output`
    # (zeroed, then the finalize scatter-reduce: the result, the caller's when given, else
    # allocated, hooks/op_corrections.py) and nothing else of the caller's (docs/op-audit).
    # Its `aux_stream` (a Stream) and `tactic` tuple are narrowed to None, as serving code
    # calls it (hooks/op_narrowing.py).
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "cute_dsl_fused_moe_mxfp8_mxfp4",
     "flashinfer::cute_dsl_fused_moe_mxfp8_mxfp4", (), None),
    # cute_dsl_fused_moe (0.7.x, SM100 CuTe DSL MoE: NVFP4 W4A4, W4A8, W4A16, 0.7.4's MXFP8)
    # builds its runner and takes the AutoTuner's lock and choice in its own body, then runs
    # the chosen runner's CuTe DSL kernels; cute_dsl_fused_moe_nvfp4 is its deprecated alias in
    # 0.7.x (warnings.warn, a DeprecationWarning on every call, first thing; the warning then
    # runs inside the operator, as eagerly) and in 0.6.16 the NVFP4 MoE itself (the same
    # runner build and AutoTuner choice in its body). The kernels write `moe_output` (zeroed,
    # then the finalize scatter-reduce, or moe_unpermute; the result, the caller's when given,
    # else allocated, hooks/op_corrections.py) and nothing else of the caller's (docs/op-audit).
    # `aux_stream`, `tactic` and 0.7.4's `localized_*` (Rubin localization: lists and streams)
    # are narrowed to None, and 0.7.4's `nvfp4_4over6=_UNSET` left at its default gets its own
    # "_default" operators, as serving code calls it (hooks/op_narrowing.py).
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "cute_dsl_fused_moe",
     "flashinfer::cute_dsl_fused_moe", (), None),
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "cute_dsl_fused_moe_nvfp4",
     "flashinfer::cute_dsl_fused_moe_nvfp4", (), None),
    # CuteDslMoEWrapper.run (every release; SGLang's flashinfer_cutedsl FP4 MoE on Blackwell)
    # allocates its `moe_output` (num_tokens, self.hidden_size) of self.output_dtype, then
    # takes the AutoTuner's lock and choice and runs the chosen runner (the wrapper's own,
    # built in __init__) in its own body, with no declared op around it. A wrapper method:
    # the operator takes the object's key (hooks/method_boundaries.py) and calls the method.
    # The runner's _moe_core_impl (the functional cute_dsl_fused_moe's, given this fresh
    # `moe_output`) writes only it and returns it whole (moe_output[:num_tokens]); its other
    # buffers are fresh per call or FlashInfer's per-device stream/event resources, nothing
    # the wrapper returns or a later call reads (docs/op-audit). `tactic` is narrowed to None
    # (the AutoTuner's choice), and 0.7.4's `nvfp4_4over6=_UNSET` gets its "_default"
    # operators, as for cute_dsl_fused_moe (hooks/op_narrowing.py); the fake reads the
    # wrapper's hidden_size and output_dtype (hooks/op_fakes.py).
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "CuteDslMoEWrapper.run",
     "flashinfer::cute_dsl_moe_wrapper_run", (), None),
    # CuteDslMxfp8Mxfp4MoEWrapper.run (0.7.x), its deprecated W4A8 subclass, overrides run:
    # super().run(...) with no fc2_input_scale, the same body, writes and fresh result.
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "CuteDslMxfp8Mxfp4MoEWrapper.run",
     "flashinfer::cute_dsl_mxfp8_mxfp4_moe_wrapper_run", (), None),
    # RecurrentKDAPrefillWrapper.run (0.7.x, packed recurrent KDA prefill planned once per
    # batch outside the compiled forward; a wrapper method, hooks/method_boundaries.py) takes
    # its planner's threading lock and calls recurrent_kda(backend="cute-dsl") with the
    # planner's buffers (cu_seqlens copied by plan(); the sequence order, chunk prefix and
    # workspace the kernel regenerates on every run, scratch): the CuTe DSL compile, the
    # workspace lock and the raw-stream launch in its body. Woken for the call that gives
    # `output`, asks for no final state and no checkpoints (hooks/op_corrections.py
    # `result_is_given`, form "pair"): the kernel writes `output` and updates `initial_state`
    # in place (the pool's rows by ssm_state_indices, the final state), and the result is
    # `(output, None)` (docs/op-audit).
    ("flashinfer.kda", "RecurrentKDAPrefillWrapper.run",
     "flashinfer::recurrent_kda_prefill_wrapper_run", ("initial_state",), None),
    # PreparedGroupGemmFp8NtGroupwiseContiguous.launch (0.7.x, SM100 Cake grouped FP8 GEMM for
    # MoE experts; a wrapper method, hooks/method_boundaries.py) checks its replacement
    # operands' data_ptr() alignment (_require_tensor, and `out`'s alignment class) and
    # launches its prepared tvm_ffi program in its own body. Each of a, a_scale, m_indices and
    # out it is not given is the one bound at preparation (wrapper state the program reads or
    # writes unseen by the graph, and `self._out` returned): woken only for the call that gives
    # all four (hooks/op_corrections.py `result_is_given`, when), where the program writes
    # `out` alone, the result, and reads the given operands and the weights bound at
    # preparation (b, b_scale); with fill_padding it forward-fills m_indices into the wrapper's
    # own scratch first (docs/op-audit).
    ("flashinfer.gemm.cake_grouped_fp8_gemm", "PreparedGroupGemmFp8NtGroupwiseContiguous.launch",
     "flashinfer::prepared_group_gemm_fp8_nt_groupwise_contiguous_launch", (), None),
    # Its fused gate_up + SwiGLU + FP8-quant sibling (0.7.4,
    # PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch) the same way: woken for the
    # call that gives all five operands, where the programs write `out_q` and `out_s`, the
    # pair it returns (hooks/op_corrections.py `result_is_given`, form "pair").
    ("flashinfer.gemm.cake_grouped_fp8_fused_silu_quant",
     "PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch",
     "flashinfer::prepared_group_gemm_fp8_nt_groupwise_contiguous_silu_quant_launch",
     ("out_s",), None),
    # fused_kda_decode (0.7.2 on): kda_kernels/fused_kda_decode.py run_fused_kda_decode checks
    # `conv_state.data_ptr() % 8` (no trace can read an address), compiles its CuTe DSL kernel
    # and launches it; FlashInfer's module holds it as an alias imported at load, so the
    # boundary is the public function. The kernel updates both caches in place, `conv_state`
    # and `state` (rows whose slot is non-positive untouched), and writes `output`; woken for
    # the call that gives no `output`, whose result is fresh (hooks/op_corrections.py
    # `fresh_only`; its fake is hooks/op_fakes.py's).
    ("flashinfer.kda_decode", "fused_kda_decode", "flashinfer::fused_kda_decode",
     ("conv_state", "state"), None),
    # packed_kda_decode (0.7.2 on, SM100 family): kda_kernels/cake_packed_kda_decode.py
    # run_packed_kda_decode (an alias imported at load, so the public function is the
    # boundary) picks its Cake program from data_ptr() alignment and launches it on the raw
    # stream handle. The kernel updates `state` in place (rows whose slot is -1 untouched) and
    # writes `output`; woken for the call that gives no `output` (hooks/op_corrections.py
    # `fresh_only`; its fake is hooks/op_fakes.py's).
    ("flashinfer.kda_decode", "packed_kda_decode", "flashinfer::packed_kda_decode",
     ("state",), None),
    # qsa_sparse_paged_attention (0.7.4, experimental; SM80-SM120): the public body picks the
    # backend from the cache dtype and the device (the reference kernel on SM8x/SM9x, Cake on
    # SM100/SM120), and the reference backend checks every tensor's data_ptr() alignment
    # (experimental/qsa_nvfp4/backend.py _check_aligned: math.gcd of the address), reads the
    # SM count and the kernel's resident CTAs (a JIT call, ctas_per_sm) for its split count,
    # then calls its JIT kernel: no trace can read an address, so the public function, choice
    # included, is the boundary. It writes `out` (the caller's, or empty_like(q)) and returns
    # it (hooks/op_corrections.py `result_is_given`); the fake is hooks/op_fakes.py's.
    ("flashinfer.sparse", "qsa_sparse_paged_attention",
     "flashinfer::qsa_sparse_paged_attention", (), None),
    # qsa_forward and qsa_indexed_forward (0.7.4; SM100): the public body imports cuDNN's
    # frontend (importlib.import_module under functools.cache, a version check) and calls its
    # op, which allocates its three results ("cuDNN allocates outputs and scratch", qsa.py
    # docstrings) and writes nothing of the caller's; so the public function is the boundary,
    # its results fresh (hooks/op_fakes.py, from the docstrings' shapes).
    ("flashinfer.qsa", "qsa_forward", "flashinfer::qsa_forward", (), None),
    ("flashinfer.qsa", "qsa_indexed_forward", "flashinfer::qsa_indexed_forward", (), None),
    # chunk_gated_delta_rule2 (GDN-2 prefill, 0.7.2 on; SM100): the public function calls
    # cuDNN's fused linear-attention engine (flashinfer/cudnn/linear_attention.py: the
    # frontend's check, a graph built and cached per shape, launched on the raw stream). Woken
    # for the call that keeps the final state in new buffers (hooks/op_corrections.py
    # `fresh_only`): with no output, output_state or state pool the engine writes only the
    # output and final state it allocates; initial_state is read (written only with a state
    # pool, `overwrite`). The fake is hooks/op_fakes.py's.
    ("flashinfer.gdn2_prefill", "chunk_gated_delta_rule2",
     "flashinfer::chunk_gated_delta_rule2", (), None),
    # chunk_gated_delta_product (GDP prefill, 0.7.2 on) reaches the same cuDNN engine with
    # backend="auto" (0.7.4's "cake" backend reads cu_seqlens on the host and has its own
    # buffers: a call naming it is traced as shipped), woken for the same call.
    ("flashinfer.gdp_prefill", "chunk_gated_delta_product",
     "flashinfer::chunk_gated_delta_product", (), None),
    # fmha_v2_prefill_sm120 and fmha_v2_prefill_deepseek (0.7.2 on, SM120/SM121) ->
    # prefill._fmha_v2_prefill_sm120_run: its scale checks, the JIT loader and
    # `module.run(...)`, no op declared. The kernel writes `out` and, when given, `lse`
    # (zeroed first), both the caller's; the result is `out` itself (hooks/op_corrections.py
    # `result_is_given`, for the call without return_lse).
    ("flashinfer.prefill", "_fmha_v2_prefill_sm120_run",
     "flashinfer::fmha_v2_prefill_sm120_run", ("out", "lse"), None),
    # trtllm_batch_context_with_kv_cache (0.6.16 on) calls its JIT module's tvm_ffi function in
    # the public body (`get_trtllm_gen_fmha_module().trtllm_paged_attention_context`; 0.7.4's
    # backend "cake": the Cake context module, after its route choice and host reads of device
    # scales), no op declared. The kernel writes `out`, `lse` when given (even without
    # return_lse), its softmax stats in `workspace_buffer` (Cake: its expanded sequence
    # arrays) and, Cake's persistent scheduler, a counter in `multi_ctas_kv_counter_buffer`
    # (csrc/trtllm_fmha_kernel_launcher.cu, cake_fmha/jit/cake_fmha_context_*_jit_binding.cu).
    # Woken for the call that gives no `out` and returns it alone, not as an FP4Tensor
    # (hooks/op_corrections.py `fresh_only`, hooks/op_narrowing.py `out_dtype`), `lse`, the
    # workspace and the counter buffer declared mutable. Fake: hooks/op_fakes.py.
    ("flashinfer.prefill", "trtllm_batch_context_with_kv_cache",
     "flashinfer::trtllm_batch_context_with_kv_cache",
     ("workspace_buffer", "lse", "multi_ctas_kv_counter_buffer"), None),
    # trtllm_fmha_v2_prefill (0.6.16 on; SGLang's skip-softmax attention on SM90) builds its
    # fmha_v2 JIT module and calls its tvm_ffi `run` in the public body, no op declared. The
    # kernel writes `out` (allocated unless given), the softmax stats it allocates with
    # save_softmax_stats, and scratch, barriers and a tile counter its dynamic scheduler
    # carries across calls (atomicInc wrapping back) in `workspace_buffer`
    # (csrc/fmha_v2_run.cu fmha_v2_run). Woken for the call that gives no `out` and returns it
    # alone (hooks/op_corrections.py `fresh_only`), the workspace declared mutable. Fake:
    # hooks/op_fakes.py.
    ("flashinfer.prefill", "trtllm_fmha_v2_prefill", "flashinfer::trtllm_fmha_v2_prefill",
     ("workspace_buffer",), None),
    # cudnn_batch_decode_with_kv_cache (0.6.16 on; woken 0.7.x) builds and caches a cuDNN SDPA
    # graph and executes it, or without the cuDNN frontend calls its cubin JIT module's
    # tvm_ffi `decode`, in the public body, no op declared. Either writes `out` (allocated
    # unless given), `lse` only with return_lse (allocated unless given), and its scratch in
    # `workspace_buffer` (the cubin path's TMA descriptors and partial outputs,
    # csrc/cudnn_sdpa_kernel_launcher.cu decode; the graph's workspace). Woken for the call
    # that gives no `out` and returns it alone (hooks/op_corrections.py `fresh_only`; 0.6.16
    # has no `return_lse`, so its call stays as shipped and the audit has no 0.6.16 row),
    # `lse` and the workspace declared mutable. Fake: hooks/op_fakes.py.
    ("flashinfer.cudnn.decode", "cudnn_batch_decode_with_kv_cache",
     "flashinfer::cudnn_batch_decode_with_kv_cache", ("workspace_buffer", "lse"), None),
    # sm110_gqa_decode (0.7.x, exact SM110) loads its kernel on the traced path: 0.7.2 the
    # JIT module of its route, 0.7.4 a Cake kernel whose manifest it reads from disk, after
    # a device check, then launches it on the torch stream, no op declared. The public
    # function is the boundary (its backend is imported in its body). The kernel writes only
    # `out` (allocated unless given) and, 0.7.4's split routes, partials and counters
    # allocated per call (experimental/sm110_gqa_decode/backend.py); woken for the call
    # without `out` (hooks/op_corrections.py `fresh_only`), nothing declared mutable. Fake:
    # hooks/op_fakes.py.
    ("flashinfer.decode", "sm110_gqa_decode", "flashinfer::sm110_gqa_decode", (), None),
    # fmha_varlen (0.6.16 on; BatchPrefillWithRaggedKVCacheWrapper's cutlass backend, SM100)
    # builds its CUTLASS FMHA JIT module and calls its tvm_ffi `run` in the body, no op
    # declared. The kernel writes `out` and, when given, `lse` (csrc/fmha_cutlass_sm100.cu
    # FMHACutlassSM100Run; its workspace is FlashInfer's own cached buffer, no argument), and
    # the function returns the pair `(out, lse)`, `lse` None when neither given nor asked
    # for. Woken for the call that gives `out` and does not ask return_lse, whose result is
    # the caller's `out` and `lse` (or None) as given (hooks/op_corrections.py
    # `result_is_given`, form "pair"): both declared mutable, the operator returns nothing.
    ("flashinfer.prefill", "fmha_varlen", "flashinfer::fmha_varlen", ("lse",), None),
    # trtllm_ragged_attention_deepseek (0.6.16 on) calls its JIT module's tvm_ffi function in
    # the public body (`get_trtllm_gen_fmha_module().trtllm_ragged_attention`; backend
    # "cute-dsl": the CuTe DSL compile and launch), no op declared; 0.7.x's empty-row check
    # reads the indptrs on the host (`.item()`). The kernel writes `out`, `lse` when given
    # (the caller's even without return_lse) and its softmax stats in `workspace_buffer`
    # (csrc/trtllm_fmha_kernel_launcher.cu trtllm_ragged_attention_launcher); woken for the
    # call that gives no `out` and returns it alone (hooks/op_corrections.py `fresh_only`),
    # `lse` and the workspace declared mutable. Fake: hooks/op_fakes.py.
    ("flashinfer.prefill", "trtllm_ragged_attention_deepseek",
     "flashinfer::trtllm_ragged_attention_deepseek", ("workspace_buffer", "lse"), None),
    # trtllm_sage_attention_quantize (0.6.16 on; woken 0.7.x) calls its JIT module's tvm_ffi
    # function in the public body (`get_trtllm_gen_fmha_module().trtllm_sage_attention_quantize`),
    # no op declared. The kernel writes only the six (seven with smooth_k) tensors the body
    # allocates (csrc/trtllm_sage_quant.cu); woken for the call without smooth_k, whose six
    # results are fresh (hooks/op_corrections.py `fresh_only`; 0.6.16 has no `smooth_k`, so its
    # call stays as shipped), fake hooks/op_fakes.py's.
    ("flashinfer.prefill", "trtllm_sage_attention_quantize",
     "flashinfer::trtllm_sage_attention_quantize", (), None),
    # nvfp4_attention_sm120.py (0.6.16 on, SM120/SM121): both public functions call their JIT
    # module's tvm_ffi functions in their own bodies, no op declared. quantize_qkv centres and
    # pads Q/K/V (torch ops), allocates its seven results and runs the three scaled_fp4_quant
    # kernels on them: every result fresh, nothing of the caller's written. fwd writes `out`
    # and `lse` (allocated unless given); woken for the call that gives neither and returns
    # both (0.7.x `return_lse`, its default; 0.6.16's fwd has no `return_lse`, so its call
    # stays as shipped). Fakes: hooks/op_fakes.py.
    ("flashinfer.nvfp4_attention_sm120", "nvfp4_attention_sm120_quantize_qkv",
     "flashinfer::nvfp4_attention_sm120_quantize_qkv", (), None),
    ("flashinfer.nvfp4_attention_sm120", "nvfp4_attention_sm120_fwd",
     "flashinfer::nvfp4_attention_sm120_fwd", (), None),
    # fp8_paged_mqa_logits and fp4_paged_mqa_logits (0.7.x attn_scores, DeepSeek-V3.2's
    # indexer): the public bodies compile their CuTe DSL kernels at call time (the compile
    # cache hashes the kernel's sources) and launch them, no op declared. The kernel writes
    # only the logits buffer (its aligned padding too); woken for the call that gives no `out`,
    # whose result is a [:, :max_seq_len] view of a fresh (rows, 256-aligned) buffer
    # (hooks/op_corrections.py `fresh_only`; fakes hooks/op_fakes.py's, with that stride).
    *[("flashinfer.attn_scores.attn_scores", name, f"flashinfer::{name}", (), None)
      for name in ("fp8_paged_mqa_logits", "fp4_paged_mqa_logits")],
    # packed_fused_kda_decode (0.7.2 on): the speculative (T >= 1) form of fused_kda_decode.
    # Its T=1 path calls run_fused_kda_decode (the `conv_state.data_ptr() % 8` check, CuTe DSL
    # compile and launch), its T>1 path kda_kernels/fused_kda_decode_multitoken.py (CuTe DSL
    # compile and launch on the raw stream handle); both are aliases imported at load, so the
    # boundary is the public function. Either kernel updates `conv_state` and `state` in place
    # (null rows untouched) and writes `output`; woken for the call that gives no `output`
    # (hooks/op_corrections.py `fresh_only`; its fake is hooks/op_fakes.py's).
    ("flashinfer.kda_decode", "packed_fused_kda_decode", "flashinfer::packed_fused_kda_decode",
     ("conv_state", "state"), None),
    # concat_mla_kv_quant_fp8 (0.7.4): its body reads the fused kernels' workload allowlist
    # from package data (mla_kv_pack._load_allowlist, importlib.resources under
    # functools.cache, which Dynamo traces into), reads FLASHINFER_SPECIALIZED_KERNEL_DISABLE,
    # picks its backend from shape, alignment and arch, and launches a JIT or Cake program (or
    # the composable torch copy) outside any declared op: the boundary is the public function.
    # Every path writes only `key` and `value`; woken for the call that gives neither, whose
    # results are fresh (hooks/op_corrections.py `fresh_only`; fake in hooks/op_fakes.py).
    ("flashinfer.mla_kv_pack", "concat_mla_kv_quant_fp8", "flashinfer::concat_mla_kv_quant_fp8",
     (), None),
    # gdn_fused_decode_step (0.7.2 on): its body asks the specialized kernels' registry, read
    # from package data (gdn_fused_decode_specialized.load_gdn_fused_decode_registry,
    # importlib.resources), and launches an SM120 CUDA or CuTe DSL kernel, else runs the
    # composable torch path, outside any declared op: the boundary is the public function.
    # Every path updates both pools, `conv_state` and `ssm_state`, in place (padded rows
    # untouched) and writes `out`; its result is `(output, conv_state, ssm_state)`. Woken for
    # the call that gives no `out`: the operator returns the fresh output, and what Dynamo
    # calls hands the two pools back after it (hooks/op_corrections.py `fresh_only`, `then`).
    ("flashinfer.gdn_kernels.experimental.gdn_fused_decode", "gdn_fused_decode_step",
     "flashinfer::gdn_fused_decode_step", ("conv_state", "ssm_state"), None),
    # cake_gated_delta_product_mtp (0.7.4): cake_gdp_backend checks q's, k's and the pool's
    # data_ptr() alignment, picks its Cake program and launches it on the current stream, all
    # in a body Dynamo would trace: the boundary is the public function. The kernel updates the
    # pool `initial_state` in place (writeback or per-token scatter; none with
    # disable_state_update) and writes the output; its result is `(output, initial_state)`.
    # Woken for the call that gives no `output`: the operator returns the fresh output and
    # what Dynamo calls hands the pool back after it (hooks/op_corrections.py `then`).
    ("flashinfer.cake_gdp", "cake_gated_delta_product_mtp",
     "flashinfer::cake_gated_delta_product_mtp", ("initial_state",), None),
    # chunk_gated_delta_rule_paged and gated_delta_rule_decode_paged (0.7.4, gdn_paged.py):
    # their bodies compute the page slots (a launch) and call chunk_gated_delta_rule or
    # gated_delta_rule_decode_pretranspose, whose backend choice reads the Cake GDN manifest or
    # the CuTe DSL compile cache from the file system, outside any declared op: the boundary is
    # the public function. The kernels update `state_pool` in place (the prefill's initial,
    # checkpoint and final states all live there) and write the output; woken for the call that
    # gives no `output` nor `slots` (hooks/op_corrections.py `fresh_only`, hooks/op_narrowing.py
    # `slots`; fakes in hooks/op_fakes.py).
    ("flashinfer.gdn_paged", "chunk_gated_delta_rule_paged",
     "flashinfer::chunk_gated_delta_rule_paged", ("state_pool",), None),
    ("flashinfer.gdn_paged", "gated_delta_rule_decode_paged",
     "flashinfer::gated_delta_rule_decode_paged", ("state_pool",), None),
    # flashinfer.cake_top_k_top_p_sampling_from_probs (0.7.4, cake_sampling.py
    # top_k_top_p_sampling_from_probs): its body plans the launch, loads the Cake sampling
    # module (its manifest read from the file system) and launches it on the raw stream handle,
    # or falls back to flashinfer.sampling's sampler, outside any declared op: the boundary is
    # the public function. It draws its Philox seed and offset from the generator (seeded, as
    # FlashInfer's sampling ops; `generator` narrowed to None) and writes `out` (and the
    # caller's `renorm_out` and slab `workspace` when given, else its own cached slab); woken
    # for the call that gives none of them (hooks/op_corrections.py `fresh_only`,
    # hooks/op_narrowing.py `workspace`), one operator per member of `top_k` and `top_p`.
    ("flashinfer.cake_sampling", "top_k_top_p_sampling_from_probs",
     "flashinfer::cake_top_k_top_p_sampling_from_probs", (), None),
    # chunk_gated_delta_rule (gdn_prefill.py, 0.6.16 on): its body picks a backend (Cake GDN
    # from its manifest, cuDNN, CP or the per-arch CuTe DSL kernels, whose compile cache and
    # raw-stream launch are its own Python) outside any declared op: the boundary is the public
    # function. The kernels write the output, the final states (`output_state`, rows of the
    # pool with `state_indices`) and `state_checkpoints`; `initial_state` is declared mutable
    # too (the paged form passes one pool in all three roles). Woken for the call that gives
    # no `output` and asks for the final state in the caller's `output_state` (SGLang's
    # extend): the operator returns the fresh output and what Dynamo calls hands the state
    # back after it (hooks/op_corrections.py `fresh_only`, `then`; `use_cp` and
    # `cu_seqlens_cpu` narrowed, hooks/op_narrowing.py).
    ("flashinfer.gdn_prefill", "chunk_gated_delta_rule", "flashinfer::chunk_gated_delta_rule",
     ("initial_state", "state_checkpoints"), None),
    # b12x_fused_moe (0.6.16 on, SM120/SM121 NVFP4/MXFP4/W4A16 fused MoE): the public body
    # asks nvcc for the CUDA version (get_cuda_version, folded to a constant under compile),
    # then blackwell_sm12x/moe_dispatch.py launch_sm120_moe picks micro, static or dynamic from
    # the routed row count, caches weight views and workspaces keyed by the weights'
    # data_ptr() (no trace can read an address), compiles its CuTe DSL kernels and launches
    # them: the public function is the boundary. Every path writes only `output` (the
    # caller's, or the (num_tokens, hidden_size) bfloat16 tensor the body allocates) and
    # returns it; the workspaces and converted scales are FlashInfer's own module-level
    # caches, never a caller's tensor (hooks/op_corrections.py `result_is_given`, woken with
    # and without `output`; the fake is hooks/op_fakes.py's).
    ("flashinfer.fused_moe.cute_dsl.b12x_moe", "b12x_fused_moe",
     "flashinfer::b12x_fused_moe", (), None),
    # 0.7.x's SM12x CuTe DSL MoE GEMMs (fused_moe/cute_dsl/blackwell_sm12x, SM120/SM121 only):
    # FC1 + activation + quantize and FC2 + finalize, FP8 and MXFP8xMXFP4. Each body picks its
    # tile from the SM count, builds its op object (`_op`, a functools.lru_cache Dynamo traces
    # through), whose can_implement asks the CuTe DSL for its target arch
    # (moe_kernel_builder.py dsl_targets_sm12x: CuTeDSL._get_dsl(), settings read from the
    # environment and os.getcwd), then compiles its kernel (cute.compile, cached per tactic)
    # and launches it on from_dlpack views: no private function holds all of it, so the
    # boundary is the public function. FC1's kernel writes only `(q, sf)` (woken for the call
    # that gives neither `out_q` nor `out_sf`: hooks/op_corrections.py `fresh_only`); FC2's
    # only `out`, which it returns, the caller's when given (`result_is_given`). Their
    # unannotated tensors and `tile` are typed by hooks/op_corrections.py `annotations`;
    # `epi` (an EpiMethod) is left at its default (hooks/op_narrowing.py). Fakes:
    # hooks/op_fakes.py.
    *((f"flashinfer.fused_moe.cute_dsl.blackwell_sm12x.{module}", name,
       f"flashinfer::{name}", (), None)
      for module, name in (
          ("moe_fp8_fc1_act_q1", "cute_dsl_sm12x_fc1_act_q1_fp8"),
          ("moe_mxfp8_mxfp4_fc1_act_q1", "cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4"),
          ("moe_fp8_fc2_finalize", "cute_dsl_sm12x_fc2_finalize_fp8"),
          ("moe_mxfp8_mxfp4_fc2_finalize", "cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4"))),
    # grouped_gemm_nt_masked (0.6.16's in grouped_gemm_masked_blackwell, 0.7.x's in
    # grouped_gemm_masked_wrapper; SGLang's CuTe DSL masked MoE GEMM, SM100/SM103/SM107):
    # the public body asks the SM count (get_num_sm) and the arch, then the Blackwell or
    # Rubin runner compiles its CuTe DSL kernel (cached per shape) and calls the compiled
    # object, which Dynamo cannot trace: the boundary is the public function. It writes `out`
    # and returns it (hooks/op_corrections.py `returns_argument`); woken for the plain GEMM,
    # without combine fusion or signals (`when`), its operands' (tensor, scales) pairs a
    # Tensor[] each (hooks/op_narrowing.py), `alpha`/`alpha_dtype` from its `**kwargs`.
    *((f"flashinfer.gemm.kernels.{module}", "grouped_gemm_nt_masked",
       "flashinfer::grouped_gemm_nt_masked", ("out",), None)
      for module in ("grouped_gemm_masked_wrapper", "grouped_gemm_masked_blackwell")),
    # prims_ts_fp8_block_scale_routed_moe (0.7.x, SM100/SM103/SM107): unlike its unrouted
    # sibling (FlashInfer's declared prims_ts_fp8_block_scale_moe) it calls the private
    # _prims_ts_fp8_block_scale_moe_impl itself, which reads the Prims-TS configs from package
    # data (importlib.resources), runs FlashInfer's support check and AutoTuner and launches
    # the CuTe DSL kernels, outside any declared op: the boundary is the public function. With
    # do_finalize (and no LoRA delta, which it refuses) its result is `output`, the caller's
    # when given, else a fresh bfloat16 one; the caller's packed top-k ids are only read
    # (hooks/op_corrections.py `result_is_given`; the unpacked (ids, weights) pair is traced as
    # shipped, hooks/op_narrowing.py `topk_ids`).
    ("flashinfer.fused_moe.backends.prims_ts.fp8_op", "prims_ts_fp8_block_scale_routed_moe",
     "flashinfer::prims_ts_fp8_block_scale_routed_moe", (), None),
    # BatchMLAPagedAttentionWrapper.run (SGLang's flashinfer_mla backend; FA2/FA3) calls its
    # JIT module's tvm_ffi `run` itself, outside any declared op (0.6.16 mla/_core.py:1942,
    # 0.7.2 mla/_batch_mla/_backends/_fa_common.py:762, 0.7.4 :777). Under compile that
    # module's `run` is dynafold's `mla_run` (hooks/attention_plans.py): the operator takes the
    # module's key, the plan as a tensor and the trailing scalars and tensors packed
    # (`variadic`, hooks/op_corrections.py). `out` and `lse` are allocated (or checked) by
    # FlashInfer's traced Python before the call: the operator writes them, never returns one.
    ("_dynafold_attention_plans", "mla_run", "flashinfer::mla_run_jit",
     ("float_workspace_buffer", "o", "maybe_lse"), None),
    # BatchAttention.run calls `self.module.run(...)`, its JIT module's tvm_ffi function, the
    # same way (attention/_core.py, 0.6.16 :302, 0.7.2 :358, 0.7.4 :359): `holistic_run`.
    ("_dynafold_attention_plans", "holistic_run", "flashinfer::holistic_run_jit",
     ("float_workspace_buffer", "o", "maybe_lse"), None),
    # single_{decode,prefill}_with_kv_cache_with_jit_module call `jit_module.run(...)` on the
    # module the caller passes in (decode.py, prefill.py, 0.6.16 to 0.7.4). Under compile
    # Dynamo traces their body given a stand-in (hooks/attention_plans.py REBUILT) whose `run`
    # is one of these: the module's key, FlashInfer's arguments, the variant's trailing
    # arguments packed (`variadic`). `tmp`, `o` and `lse` are allocated by the traced body.
    *(("_dynafold_attention_plans", f"single_{kind}_run", f"flashinfer::single_{kind}_run_jit",
       ("tmp", "o", "maybe_lse"), None) for kind in ("decode", "prefill")),
    # PODWithPagedKVCacheWrapper.run and BatchPODWithPagedKVCacheWrapper.run call their JIT
    # module's tvm_ffi function (`get_pod_module(...).run_tensor`, flashinfer/pod.py, 0.6.16 to
    # 0.7.4) outside any declared op. Under compile the loader gives a stand-in whose
    # `run_tensor` is dynafold's declaration (hooks/attention_plans.py); the kernels' C++
    # signatures are the same in the three releases. `out`/`lse` are allocated by FlashInfer's
    # traced Python before the call: the operators write them, never return one.
    ("_dynafold_attention_plans", "pod_run", "flashinfer::pod_run_jit",
     ("tmp_p", "o_p", "maybe_lse_p", "float_workspace_buffer_d", "o_d", "maybe_lse_d"), None),
    ("_dynafold_attention_plans", "batch_pod_run", "flashinfer::batch_pod_run_jit",
     ("float_workspace_buffer_p", "o_p", "maybe_lse_p", "float_workspace_buffer_d", "o_d",
      "maybe_lse_d", "sm_aware_sched"), None),
    # expand_csf_scales (0.7.4) calls its JIT module's tvm_ffi `csf_expand` in its own body
    # (`get_quantization_module().csf_expand(...)`, quantization/csf.py), outside any declared
    # op, with the matrices held in a CsfScales NamedTuple no schema can take. Under compile
    # the loader gives a stand-in whose `csf_expand` is dynafold's declaration
    # (hooks/attention_plans.py); the kernel writes only `out`, its view declared mutable.
    ("_dynafold_attention_plans", "csf_expand", "flashinfer::csf_expand_jit", ("out",), None),
    # MiniMax-H3's packed-varlen attentions (prefill.py; BF16 and NVFP4 0.7.2 on, the two FP8
    # ones 0.7.4; SM100/SM103, experimental): each public function imports its one-shot Cake
    # entry (experimental/minimax_h3_varlen_attention/cake_backend.py), which checks every
    # tensor's data_ptr() alignment (_check_thd `% 16`, the NVFP4 route's `% 32`; no trace can
    # read an address), reads cu_seqlens on the host unless cu_seqlens_host is given, plans
    # (the BF16/FP8 plan cache keyed by the offsets' values and the stream) and launches its
    # programs through tvm_ffi, no op declared. The four share no inner launcher of tensors
    # (each prepares a runner object), so each public function is the boundary. The kernels
    # write `out` (the caller's, or a fresh BF16 [T, H, 128]) and FlashInfer's own scratch
    # (plan tables, the FP8 copies and descales, the NVFP4 workspace), never the caller's
    # query, key, value or descales; the result is `out` itself (hooks/op_corrections.py
    # `result_is_given`); the fake is hooks/op_fakes.py's.
    *(("flashinfer.prefill", name, f"flashinfer::{name}", (), None)
      for name in ("minimax_h3_varlen_attention", "minimax_h3_varlen_fp8_attention",
                   "minimax_h3_varlen_fp8_attention_bf16", "minimax_h3_varlen_nvfp4_attention")),
    # populate_trtllm_moe_routing_metadata_ (0.7.2 on) calls the trtllm-gen fused-MoE
    # namespace's tvm_ffi `populate_routing_metadata_multi_tile` in its own body
    # (`get_trtllm_moe_sm100_module().populate_routing_metadata_multi_tile(...)`, core.py),
    # outside any declared op, with the tensors it fills held in a TrtllmMoERoutingMetadata
    # (frozen dataclasses) no schema can take. Under compile the cached loader
    # (`_get_trtllm_moe_sm100_module_impl`) gives a stand-in whose function is dynafold's
    # declaration (hooks/attention_plans.py); the public body's own flattening
    # (`flat_tensors()`) hands it the slots' tensors, all declared mutable: the kernel fills
    # them and writes nothing else (`topk_ids`, `topk_weights` read; docs/op-audit).
    ("_dynafold_attention_plans", "trtllm_moe_populate_routing_metadata",
     "flashinfer::trtllm_moe_populate_routing_metadata_jit", ("flat_routing_metadata",), None),
    # alphamoe_nvfp4_finalize_deferred (0.7.2 on) calls the AlphaMoE module's tvm_ffi
    # `nvfp4_complete_routed_finalize_op` in its body, outside any declared op, with the
    # tensors and route id held in the deferred call's AlphaMoeNvfp4DeferredOutput (no schema
    # can take it). Under compile the cached loader gives a stand-in whose function is
    # dynafold's declaration (hooks/attention_plans.py): the public body unpacks the object
    # itself. The kernel writes only `out` (the caller's, or `seed` itself), declared mutable.
    ("_dynafold_attention_plans", "alphamoe_complete_routed_finalize",
     "flashinfer::alphamoe_complete_routed_finalize_jit", ("out",), None),
    # kimi_k3_fused_router (0.7.2 on, experimental; SM100/SM103) checks data_ptr() alignment
    # and that its tensors do not overlap (from their addresses) in the body it reaches
    # (cake_backend.py prepare_kimi_k3_fused_router), then launches its generated program; it
    # returns a KimiK3RoutePlan NamedTuple and takes one as `plan`, which no schema can say.
    # Under compile Dynamo traces dynafold's Python for it (hooks/attention_plans.py REBUILT),
    # which calls these two with the plan's eight tensors: without a plan, fresh (the plan
    # FlashInfer allocates, its fake hooks/op_fakes.py's); with the caller's, all eight
    # declared mutable. The kernel writes only the plan (docs/op-audit).
    ("_dynafold_attention_plans", "kimi_k3_route", "flashinfer::kimi_k3_route", (), None),
    # kimi_k3_fp8_projection (0.7.4, SM100/SM103) takes its prepared weight and workspace as
    # Python objects and picks its programs from data_ptr() alignment: under compile Dynamo
    # traces dynafold's Python, which holds both by key (hooks/attention_plans.py REBUILT) and
    # calls this declaration. It writes `out` and returns it, the caller's when given
    # (hooks/op_corrections.py `result_is_given`).
    ("_dynafold_attention_plans", "kimi_k3_project", "flashinfer::kimi_k3_project", (), None),
    ("_dynafold_attention_plans", "kimi_k3_route_into", "flashinfer::kimi_k3_route_into",
     ("topk_weights", "topk_ids", "sorted_token_ids", "expert_ids", "num_tokens_post_padded",
      "expert_counts", "expert_offsets", "expert_scatter_offsets"), None),
]

class _Declared:
    """One `register_custom_op` declaration and the fake declared with it: a second build of a
    loader declares the same name again with its own function and its own fake, so a fake
    belongs to a declaration, not to a name."""
    __slots__ = ("name", "fn", "mutates_args", "schema", "module", "fake")

    def __init__(self, name, fn, mutates_args, schema):
        self.name = name
        self.fn = fn
        self.mutates_args = mutates_args
        self.schema = schema
        self.module = getattr(fn, "__module__", None) or "?"
        self.fake = None


def _declare(declared):
    waiting = _unpaired.get(declared.name)
    if waiting:
        declared.fake = waiting.pop(0)
    _pending.append(declared)
    _declarations.append(declared)


def _declare_fake(name, fake):
    """Pairs `fake` with the latest declaration of `name` that has none (FlashInfer declares the
    fake right after its op, inside the same loader call), else keeps it for the next one."""
    for declared in reversed(_declarations):
        if declared.name == name:
            if declared.fake is None:
                declared.fake = fake
                return
            break
    _unpaired.setdefault(name, []).append(fake)


def declared_fake(name, index=0):
    """The fake FlashInfer declared with the `index`-th declaration of `name` (for tests)."""
    matches = [d.fake for d in _declarations if d.name == name] + _unpaired.get(name, [])
    return matches[index] if index < len(matches) else None


def _expected_shape(original_op, original_fake):
    """FlashInfer's dormant pair, as shipped since PR #709: the signatures FlashInfer has used
    and identity behaviour. Anything else (FlashInfer woke them itself, or changed them) is
    left alone."""
    try:
        op_params = list(inspect.signature(original_op).parameters)
        fake_params = list(inspect.signature(original_fake).parameters)
    except (TypeError, ValueError):
        return False
    if op_params != ["name", "fn", "mutates_args", "device_types", "schema"]:
        return False
    if fake_params != ["name", "fn"]:
        return False

    def probe(x):
        return x

    try:
        return (original_op("dynafold::probe", mutates_args=())(probe) is probe
                and original_fake("dynafold::probe")(probe) is probe)
    except Exception:
        return False


def install_utils(utils):
    """Called once `flashinfer.utils` has executed. Returns a line for the log, or raises
    Unsupported with why the decorators were left alone."""
    original_op = getattr(utils, "register_custom_op", None)
    original_fake = getattr(utils, "register_fake_op", None)
    if original_op is None or original_fake is None:
        raise Unsupported("flashinfer.utils has no register_custom_op/register_fake_op")
    if not _expected_shape(original_op, original_fake):
        raise Unsupported("register_custom_op/register_fake_op are not the dormant pair")

    def register_custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
        def declare(f):
            _declare(_Declared(name, f, mutates_args, schema))
            return f
        return declare

    def register_fake_op(name, fn=None):
        def declare(f):
            _declare_fake(name, f)
            return f
        return declare

    register_custom_op.__doc__ = original_op.__doc__
    register_fake_op.__doc__ = original_fake.__doc__
    utils.register_custom_op = register_custom_op
    utils.register_fake_op = register_fake_op
    if "torch._dynamo" in sys.modules:
        arm()
    return "FlashInfer's op declarations recorded; woken at the start of each compile"


def install_api_logging(api_logging):
    """Called once `flashinfer.api_logging` has executed. Returns a line for the log (None when
    the logging is off and FlashInfer's decorator already returns the function itself), or
    raises Unsupported."""
    level = getattr(api_logging, "_API_LOG_LEVEL", None)
    original = getattr(api_logging, "flashinfer_api", None)
    if original is None or not isinstance(level, int):
        raise Unsupported("flashinfer.api_logging has no flashinfer_api/_API_LOG_LEVEL")
    experimental = _install_experimental(api_logging)
    if level == 0:
        return experimental
    try:
        first = next(iter(inspect.signature(original).parameters))
    except (TypeError, ValueError, StopIteration):
        first = None
    if first != "func":
        raise Unsupported("flashinfer_api does not take the decorated function first")

    def flashinfer_api(func=None, **options):
        if func is not None:
            return _remember_api(original(func, **options), func)
        made = original(**options)

        def decorate(f):
            return _remember_api(made(f), f)
        return decorate

    flashinfer_api.__doc__ = original.__doc__
    api_logging.flashinfer_api = flashinfer_api
    return (f"FLASHINFER_LOGLEVEL={level}: FlashInfer's API logging kept for eager calls, "
            "left out of traced code")


def install_planners(module):
    """Called once a module defining FlashInfer's attention wrappers has executed (see
    hooks/attention_plans.py and hooks/partial_methods.py), or FlashInfer's wrapper classes
    whose methods are dynafold's boundaries (hooks/method_boundaries.py: the rows of
    EXTRA_DECLARATIONS naming a `Class.method` of the module). Returns a line for the log, or
    None."""
    said = [attention_plans.install(module), method_boundaries.install(
        module, [tuple(attr.split(".")) for name, attr, _, _, _ in EXTRA_DECLARATIONS
                 if name == module.__name__ and attr.count(".") == 1])]
    plain = partial_methods.install(module)
    if plain:
        said.append(f"{', '.join(plain)} made plain methods (a partialmethod stops Dynamo)")
    said = [line for line in said if line]
    return "; ".join(said) if said else None


def _install_experimental(api_logging):
    """FlashInfer 0.7.4's `flashinfer_experimental_api` wraps a public function in one that
    warns (`warnings.warn`, ExperimentalWarning) on its first call, then calls the logged
    function; Dynamo cannot trace `warnings.warn`, so an experimental op whose first call is
    compiled stops the trace. The decorator is replaced by one that makes the same wrapper and
    remembers the function it calls (its `__wrapped__`); at compile start Dynamo is told to call
    that instead. Eager calls warn as shipped; a process whose first call is compiled does not
    see the warning. Returns a line for the log, or None where the release has no such
    decorator."""
    original = getattr(api_logging, "flashinfer_experimental_api", None)
    if original is None:
        return None
    try:
        params = list(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        params = []
    if params[:1] != ["func"]:
        return None

    def flashinfer_experimental_api(func=None, **options):
        made = original(**options)

        def decorate(f):
            wrapper = made(f)
            return _remember_api(wrapper, getattr(wrapper, "__wrapped__", wrapper))
        return decorate(func) if func is not None else decorate

    flashinfer_experimental_api.__doc__ = original.__doc__
    api_logging.flashinfer_experimental_api = flashinfer_experimental_api
    return ("FlashInfer's experimental-API warning kept for eager calls, left out of traced "
            "code")


def _remember_api(wrapper, func):
    if wrapper is not func and callable(wrapper):
        _api_pending.append((wrapper, func))
    return wrapper


def _call_through(func):
    def call(*args, **kwargs):
        return func(*args, **kwargs)
    return call


class Unsupported(Exception):
    """FlashInfer does not look as expected: leave it alone."""


def arm():
    """Has `wake_pending` called at the start of every compile, once torch._dynamo is
    imported: through Dynamo's own start callbacks, kept registered across
    `torch._dynamo.reset()` (which clears them), and through the graph-break observer's
    compile-start signal. Neither depends on logging alone: `logging.disable` silences the
    observer's signal, not Dynamo's callbacks."""
    global _armed
    if _armed:
        return
    observer = sys.modules.get("_dynafold_observer")
    if observer is not None:
        observer.on_compile_start(wake_pending)
    from torch._dynamo.callback import callback_handler
    _keep_registered(callback_handler, wake_pending)
    _armed = True


def _keep_registered(handler, callback):
    """Registers `callback` as a compile-start callback of `handler` and again after each of
    its `clear()` calls (`torch._dynamo.reset()` makes one)."""
    handler.register_start_callback(callback)
    clear = handler.clear
    if getattr(clear, "_dynafold_keeps", None) is not None:
        clear._dynafold_keeps.append(callback)
        return

    def clear_then_register(*args, **kwargs):
        result = clear(*args, **kwargs)
        for kept in clear_then_register._dynafold_keeps:
            handler.register_start_callback(kept)
        return result

    clear_then_register._dynafold_keeps = [callback]
    functools.update_wrapper(clear_then_register, clear)
    handler.clear = clear_then_register


def wake_pending(*_args):
    """At each compile start: wakes what was declared since the last one."""
    attention_plans.become_data()
    if not _pending and not _api_pending and len(sys.modules) == _scanned[0]:
        return
    _declare_extras()
    # A wrapper dynafold declares an operator of (an experimental public function that is a
    # boundary) is substituted by that operator, not called through.
    declared = {id(d.fn) for d in _pending}
    while _api_pending:
        wrapper, func = _api_pending.pop(0)
        if id(wrapper) in declared:
            continue
        try:
            torch._dynamo.substitute_in_graph(wrapper, skip_signature_check=True)(
                _call_through(func))
        except Exception as e:
            _log.debug("dynafold: FlashInfer's logging wrapper of %s stays traced: %s",
                       getattr(func, "__qualname__", func), e)
    while _pending:
        declared = _pending.pop(0)
        try:
            why_not = _wake(declared)
        except Exception as e:  # a declaration we cannot wake must not break the compile
            first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
            why_not = f"{type(e).__name__}: {first}"
        entry = _status.setdefault(declared.module, {"woken": 0, "skipped": {}})
        if why_not is None:
            entry["woken"] += 1
        else:
            entry["skipped"][why_not] = entry["skipped"].get(why_not, 0) + 1
            _log.debug("dynafold: %s left as FlashInfer ships it: %s", declared.name, why_not)
    _substitute_rebuilt()
    _make_loaders_transparent()
    _filter_cache_warning()
    # FlashInfer's logger arrives with a module import, which is what brings a compile here.
    _reorder_once_warnings()
    stream_scratch.make_opaque()
    _scanned[0] = len(sys.modules)


def _reorder_once_warnings():
    """FlashInfer's public MoE functions warn once, after their op, that a single-tensor
    result is deprecated (0.7.4 fused_moe/core.py:5458 `logger.warning_once`); Dynamo stops
    at any Logger method it is not told about. FlashInfer's logger's once-methods
    (0.7.4 jit/core.py:80-105: an lru_cache over the message) are listed as reorderable: the
    compiled code makes the same call right after the graph, and the message still shows
    once, as in eager. Done once FlashInfer's logger exists."""
    if _reordered[0]:
        return
    core = sys.modules.get("flashinfer.jit.core")
    cls = getattr(core, "FlashInferJITLogger", None) if core is not None else None
    if cls is None:
        return
    reorderable = getattr(torch._dynamo.config, "reorderable_logging_functions", None)
    if reorderable is None:
        _reordered[0] = True
        return
    for name in ("warning_once", "info_once", "debug_once"):
        method = getattr(cls, name, None)
        if method is not None:
            reorderable.add(method)
    _reordered[0] = True


_reordered = [False]


def _substitute_rebuilt():
    """Public functions that take or return a Python object no schema can say (a NamedTuple of
    tensors), once their module is loaded: Dynamo traces dynafold's Python instead
    (hooks/attention_plans.py REBUILT), which unpacks the object into dynafold's declarations
    and makes it again around their results. The function itself is untouched for eager calls;
    what is substituted is the function FlashInfer's decorators wrap (the experimental and
    logging wrappers call it, hooks above)."""
    for (module_name, attr), (holder, through) in attention_plans.REBUILT.items():
        module = sys.modules.get(module_name)
        fn = getattr(module, attr, None) if module is not None else None
        if fn is None or (module_name, attr) in _rebuilt:
            continue
        _rebuilt.add((module_name, attr))
        try:
            import importlib
            replacement = through(importlib.import_module(holder))
            torch._dynamo.substitute_in_graph(inspect.unwrap(fn), skip_signature_check=True)(
                replacement)
        except Exception as e:  # a release that changed: traced as shipped
            _log.debug("dynafold: %s.%s stays traced: %s", module_name, attr, e)


_rebuilt = set()


def _declare_extras():
    """dynafold's own declarations whose module is now loaded, once each."""
    for module_name, attr, name, mutates, schema in EXTRA_DECLARATIONS:
        module = sys.modules.get(module_name)
        if "." in attr:
            # A wrapper's method (hooks/method_boundaries.py): its declaration, once its
            # class is installed.
            fn = method_boundaries.declaration(module_name, attr) if module is not None else None
        else:
            fn = getattr(module, attr, None) if module is not None else None
        if fn is None or name in _extras_declared:
            continue
        _extras_declared.add(name)
        if not inspect.isfunction(fn):
            _log.debug("dynafold: %s.%s is not a plain function; no boundary", module_name, attr)
            continue
        if schema is not None and list(inspect.signature(fn).parameters) != _schema_names(schema):
            _log.debug("dynafold: %s.%s's parameters changed; no boundary", module_name, attr)
            continue
        _declare(_Declared(name, fn, mutates, schema))


_extras_declared = set()


def _schema_names(schema):
    """The parameter names of a `(Type name[=default], ..., *, ...) -> ...` schema."""
    params = schema[1:schema.rindex(") ->")]
    return [p.split("=")[0].split()[-1] for p in params.split(",")
            if p.strip() and p.strip() != "*"]


# len(sys.modules) at the last scan for loaders: a new FlashInfer module means a new scan.
_scanned = [-1]


def _op_name(declared):
    ns, sep, op = declared.name.partition("::")
    if not sep or not ns.isidentifier() or not op.isidentifier():
        return None
    return f"{ns}_{op}" if ns != "flashinfer" else op


def _library():
    global _lib
    if _lib is None:
        _lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    return _lib


def _hints(fn):
    """`fn`'s resolved annotations; empty when they cannot be resolved."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return {}


def _returns_nothing(hints):
    return "return" in hints and hints["return"] is type(None)


class _Operator:
    """How one declaration becomes operators: its name, its variants (narrowing or None,
    schema, fake; one operator each, several for a Union parameter split by member), the
    parameters it may write, whether it is seeded and which parameter its result is (an
    aliased result, woken as a mutation)."""
    __slots__ = ("name", "variants", "mutable", "seeded", "returns_argument", "renames")

    def __init__(self, **fields):
        for field in self.__slots__:
            setattr(self, field, fields.get(field))


def _mutated(declared, correction, params):
    """The parameters the operator declares mutable: FlashInfer's `mutates_args`, plus what
    hooks/op_corrections.py adds; a reason instead when FlashInfer's cannot be read."""
    mutates = declared.mutates_args
    if isinstance(mutates, str):
        mutates = (mutates,) if mutates != "unknown" else mutates
    if mutates == "unknown":
        return "mutates_args='unknown'"
    # FlashInfer writes `mutates_args=("")` (a string, not a tuple) for "mutates nothing".
    mutates = [m for m in mutates if m]
    extra = list(correction.get("also_mutates", ()))
    if correction.get("returns_argument"):
        extra.append(correction["returns_argument"])
    if correction.get("result_is_given"):
        extra.append(correction["result_is_given"]["argument"])
    # Arguments a fresh-result call returns after its fresh tensors, updated in place.
    extra += list(correction.get("fresh_only", {}).get("then", ()))
    missing = [m for m in extra if m not in params]
    if missing:
        return f"correction names parameters the kernel lacks ({', '.join(missing)})"
    return tuple(dict.fromkeys(mutates + extra))


def _is_seeded(correction, params, hints):
    """Whether the kernel draws from the random generator: it takes one (FlashInfer's sampling
    ops, whose seed and offset default to the generator's), or hooks/op_corrections.py says so."""
    return bool(correction.get("seeded")) or any(
        name == "generator" or op_narrowing.is_generator(hints.get(name)) for name in params)


def _plan(declared):
    """How a declaration becomes correct operators (an _Operator), else the reason it cannot,
    as one short line."""
    fn = declared.fn
    if declared.name in LEFT_ALONE:
        return LEFT_ALONE[declared.name]
    op_name = _op_name(declared)
    if op_name is None:
        return "name is not namespace::identifier"
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "no signature"
    correction = op_corrections.of(fn)
    if correction.get("dormant"):
        return correction["dormant"]
    if correction and declared.schema is not None:
        return "a correction is needed and the declaration gives its own schema"
    mutates = _mutated(declared, correction, params)
    if isinstance(mutates, str):
        return mutates
    returns_argument = correction.get("returns_argument")
    # Annotations FlashInfer left out, as hooks/op_corrections.py gives them.
    hints = {**correction.get("annotations", {}), **_hints(fn)}
    if returns_argument:
        hints = {**hints, "return": type(None)}
    narrowings = [None]
    given = correction.get("result_is_given")
    fresh = correction.get("fresh_only")
    if given and declared.schema is None:
        narrowings = op_narrowing.given_result(fn, hints, given)
        if isinstance(narrowings, str):
            return narrowings
    elif fresh and declared.schema is None:
        narrowings = op_narrowing.fresh_result(fn, hints, fresh)
        if isinstance(narrowings, str):
            return narrowings
    # Checked before asking torch, which logs a warning per Union parameter when asked.
    elif declared.schema is None and (op_narrowing.needed(hints) or correction.get("variadic")
                                      or correction.get("keywords")):
        # A JIT run function's `*args` (hooks/op_corrections.py `variadic`) reach the operator
        # packed, its tensors declared mutable (op_narrowing.VARIADIC); a `**kwargs`'s known
        # entries (`keywords`) as parameters of their own, for calls whose `when` values hold.
        narrowings = op_narrowing.variants(
            fn, hints, variadic=bool(correction.get("variadic")),
            fits={name: op_narrowing._fits(value)
                  for name, value in correction.get("when", {}).items()},
            keywords=correction.get("keywords"))
        if isinstance(narrowings, str):
            return narrowings
        if correction.get("variadic"):
            mutates = mutates + ("args_tensors",)
    enums = [n for n, h in hints.items() if isinstance(h, type) and issubclass(h, enum.Enum)]
    if enums and narrowings == [None]:
        # infer_schema writes `enum.Enum`, which no schema parser takes (a narrowing gives an
        # IntEnum to its operator as an int).
        return f"schema not expressible (an Enum parameter: {', '.join(enums)})"
    nothing = _returns_nothing(hints)
    fake = None
    if not nothing and not given:
        fake = op_fakes.override(declared.name, fn) or declared.fake
        if fake is None:
            return "returns a value and has no fake"
        if narrowings == [None] and not _takes_the_same(fake, fn):
            return "fake's parameters differ from the kernel's"
    renames = tuple((p, p + "_") for p in params if p in TAKEN_BY_TORCH)
    if renames and (narrowings != [None] or set(p for p, _ in renames) & set(mutates)):
        return f"a parameter named {renames[0][0]} (torch's functionalization takes that name)"
    variants = []
    for narrowing in narrowings:
        prototype = (narrowing.prototype if narrowing is not None
                     else _returning_nothing(fn, hints) if returns_argument else fn)
        if renames:
            prototype = _renamed(prototype, dict(renames))
        try:
            schema = declared.schema or torch.library.infer_schema(
                prototype, mutates_args=_mutable_in(narrowing, mutates))
        except Exception as e:
            return f"schema not expressible ({str(e).splitlines()[0][:80]})"
        variant_fake = _variant_fake(declared, fn, narrowing, nothing, fake, given)
        if isinstance(variant_fake, str):
            return variant_fake
        variants.append((narrowing, schema, variant_fake))
    return _Operator(name=op_name, variants=variants, mutable=mutates,
                     seeded=_is_seeded(correction, params, hints),
                     returns_argument=returns_argument, renames=renames)


def _mutable_in(narrowing, mutates):
    """The declared-mutable parameters one operator's schema marks: not those it takes only as
    None (the call that gives no buffer, `result_is_given`'s fresh operator), which it never
    writes, and which inductor cannot lower as the only mutable argument (torch 2.9 to 2.15:
    "getitem is not an OpOverload" for an operator whose only mutable argument is None)."""
    if narrowing is None:
        return mutates
    none_only = {name for _, name, _, fits in narrowing.checks
                 if fits is op_narrowing.fits_none}
    return tuple(m for m in mutates if m not in none_only)


# Parameter names torch's auto_functionalization passes beside an operator's own arguments, by
# name: an operator parameter of that name fails at inductor's lowering ("got multiple values for
# argument 'mode'", FlashInfer 0.7.4's ulysses_a2a). The operator's parameter gets a suffix.
TAKEN_BY_TORCH = frozenset({"mode"})


def _renamed(prototype, renames):
    """A prototype of `prototype` whose parameters in `renames` are renamed."""
    sig = inspect.signature(prototype)
    hints = _hints(prototype)
    params = [p.replace(name=renames.get(p.name, p.name),
                        annotation=hints.get(p.name, p.annotation))
              for p in sig.parameters.values()]
    result = hints.get("return", sig.return_annotation)
    return op_narrowing.prototype_of(prototype, params, None if result is type(None) else result)


def _variant_fake(declared, fn, narrowing, nothing, fake, given):
    """The fake of one operator of a declaration; a reason when there is none that fits.

    An operator with no result needs a fake that returns nothing, whatever FlashInfer's says:
    several of FlashInfer's rotted (a parameter missing), and one kernel declared `-> None`
    returns its output buffer anyway (its callers read the buffer). So does the operator of a
    call whose result is the buffer it gave; one that also returns fresh tensors ("list+")
    takes dynafold's fake of those (`rest_fake`), and the call without a buffer the
    declaration's own."""
    if nothing:
        return _no_result
    if given:
        form = narrowing.gives_back[0] if narrowing.gives_back else None
        if form in ("itself", "list", "pair"):
            return _no_result
        name = given.get("rest_fake") if form == "list+" else declared.name
        fake = op_fakes.override(name, fn) if name else None
        if fake is None and form is None:
            fake = declared.fake
        if fake is None:
            return "returns tensors and has no fake"
    if narrowing is None:
        return fake
    return narrowing.adapt_fake(fake)


def _returning_nothing(fn, hints):
    """A prototype of `fn` whose result is None, for the schema of an aliased-result op."""
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in inspect.signature(fn).parameters.values()]
    return op_narrowing.prototype_of(fn, params, None)


def _takes_the_same(fake, fn):
    """Whether `fake` accepts every call `fn` accepts, by its parameters' names and order."""
    try:
        ours = [p.name for p in inspect.signature(fn).parameters.values()]
        theirs = inspect.signature(fake).parameters
    except (TypeError, ValueError):
        return False
    return list(theirs)[:len(ours)] == ours and all(
        p.default is not p.empty for p in list(theirs.values())[len(ours):])


def _wake(declared):
    """Defines the operators and substitutes them for `fn` under Dynamo; a reason when not."""
    fn = declared.fn
    existing = _ops.get(declared.name, ())
    if any(known is fn for _, known in existing):
        return None
    operator = _plan(declared)
    if isinstance(operator, str):
        return operator
    op_name, key = operator.name, declared.name
    if existing:
        # Declared again by another build of its loader (fp4_quantize_sm100 per SM backend):
        # operators of its own, whose kernel, fake and checks are that build's.
        op_name = f"{op_name}_{len(existing)}"
        key = f"{declared.name} (build {len(existing) + 1})"
    tags = (torch.Tag.nondeterministic_seeded,) if operator.seeded else ()
    narrowed = []
    op = None
    for narrowing, schema, fake in operator.variants:
        suffix = getattr(narrowing, "suffix", "")
        op = _define(f"{op_name}{suffix}", schema, tags, fn, narrowing, fake,
                     f"{key}{' (' + suffix[1:] + ')' if suffix else ''}", operator)
        narrowed.append((narrowing, op))

    if narrowed[0][0] is None:
        renames = operator.renames or ()

        def through_op(*args, **kwargs):
            for old, new in renames:
                if old in kwargs:
                    kwargs[new] = kwargs.pop(old)
            return op(*args, **kwargs)
    else:
        through_op = op_narrowing.through_ops(narrowed, op_narrowing.as_shipped(fn))
    if operator.returns_argument:
        through_op = _returning_argument(through_op, fn, operator.returns_argument)

    functools.update_wrapper(through_op, fn)
    del through_op.__wrapped__
    torch._dynamo.substitute_in_graph(fn, skip_signature_check=True)(through_op)
    _ops.setdefault(declared.name, []).append((op, fn))
    return None


def _define(op_name, schema, tags, fn, narrowing, fake, key, operator):
    """One operator: FlashInfer's function (through the narrowing) as its kernel, checked at
    its first real run against its fake and what the declaration promises."""
    lib = _library()
    lib.define(op_name + schema, tags=tags)
    kernel = fn if narrowing is None else narrowing.kernel(fn)
    if fake is _no_result:
        kernel = _result_dropped(kernel)
    names = ([name for _, name, _ in narrowing.kept] + list(narrowing.extra_names)
             if narrowing is not None else list(inspect.signature(fn).parameters))
    promise = fake_check.Declared(names, operator.mutable, operator.seeded)
    lib.impl(op_name, fake_check.checked(key, kernel, None if fake is _no_result else fake,
                                         promise), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{op_name}", fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), op_name).default
    if operator.seeded and not operator.mutable:
        _keep_every_draw(op)
    return op


def _keep_every_draw(op):
    """A draw whose result is unused still advances the generator in eager; a compiled graph
    drops an unused pure op, and torch's `nondeterministic_seeded` tag does not stop that (torch
    2.9-2.15 drop it all the same). An ordered effect does (torch 2.14+ with inductor, 2.9+
    with aot_eager), and keeps the draws in program order. (A mutating op is kept anyway.)"""
    try:
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op
        _register_effectful_op(op, _EffectType.ORDERED)
    except Exception as e:  # an older or changed API: the tag alone, as documented
        _log.debug("dynafold: %s: draws not ordered as effects: %s", op, e)


def _returning_argument(call, fn, name):
    """What Dynamo calls for a declaration whose result is its argument `name`: the operator
    (which mutates that argument and returns nothing), then the argument itself."""
    params = list(inspect.signature(fn).parameters.values())
    index = [p.name for p in params].index(name)
    default = params[index].default

    def returning(*args, **kwargs):
        call(*args, **kwargs)
        return args[index] if index < len(args) else kwargs.get(name, default)
    return returning


def census():
    """For `dynafold doctor`: per module, the declarations recorded so far that would be
    woken, and why the others would not; nothing is defined."""
    _declare_extras()
    out = {}
    woken = [_Declared(n, fn, (), None) for n, ops in _ops.items() for _, fn in ops]
    for declared in list(_pending) + woken:
        entry = out.setdefault(declared.module, {"woken": 0, "skipped": {}})
        plan = None if declared.name in _ops else _plan(declared)
        if plan is None or not isinstance(plan, str):
            entry["woken"] += 1
        else:
            entry["skipped"][plan] = entry["skipped"].get(plan, 0) + 1
    return out


def _no_result(*args, **kwargs):
    return None


def _result_dropped(kernel):
    """The kernel of an operator declared to return nothing: what it returns anyway (an output
    buffer its callers already hold) is not passed on."""
    def no_result(*args, **kwargs):
        kernel(*args, **kwargs)

    functools.update_wrapper(no_result, kernel)
    del no_result.__wrapped__
    return no_result


# FlashInfer's cached device queries (flashinfer/utils.py), called on the traced path of most
# public ops: pure functions of the device that Dynamo traces through as before; only its
# warning about their cache wrapper is dropped (under `-W error::UserWarning` it fails the
# compile).
DEVICE_QUERIES = frozenset({
    "device_support_pdl", "get_compute_capability", "get_device_sm_count", "get_device_name",
    "get_gpu_memory_bandwidth", "get_shared_bytes_per_block_optin", "version_at_least",
    "is_confidential_compute",
})


# Parameter names that say "a device" or its compute capability: a cached function of these
# alone answers a question about the device (0.7.2's `_blackwell_softmax_capability(
# device_index)`, utils.py's `get_device_properties(device)`, 0.7.4's `is_sm90a_device`,
# topk_varlen's `_cute_dsl_supports_arch(major, minor)`), whatever FlashInfer names it.
DEVICE_PARAMETERS = frozenset({"device", "device_index", "device_id", "dev", "major", "minor",
                               "capability"})


def _is_device_query(attr, value):
    """A cached question about the device (or the installed libraries) whose answer is a
    value, the same on every call with these arguments: Dynamo tracing what it wraps gives
    that answer, so its warning says nothing."""
    if attr in DEVICE_QUERIES or (attr.startswith("is_sm") and attr.endswith("_supported")):
        return True
    try:
        signature = inspect.signature(getattr(value, "__wrapped__", value))
    except (TypeError, ValueError):
        return False
    params = list(signature.parameters.values())
    about_the_device = [p for p in params if p.name in DEVICE_PARAMETERS]
    # Besides the device, only yes/no switches (`is_cute_dsl_arch_supported(major, minor,
    # native_only: bool = False)`).
    switches = [p for p in params if p.annotation in (bool, "bool")]
    # A cached tensor (`_dummy_nvp(device_index) -> torch.Tensor`) is state, not an answer:
    # its warning stays.
    returns = signature.return_annotation
    if not params:
        # A yes/no probe of the installed libraries (topk_varlen's
        # `_radix_filter_kernel_dsl_ok() -> bool`): one answer per process.
        return returns in (bool, "bool")
    return (bool(about_the_device) and len(about_the_device) + len(switches) == len(params)
            and "Tensor" not in str(returns))


def _is_flashinfer_device_query(wrapper):
    module = getattr(wrapper, "__module__", None) or ""
    return (hasattr(wrapper, "cache_info") and module.split(".")[0] == "flashinfer"
            and _is_device_query(getattr(wrapper, "__name__", ""), wrapper))


def _make_loaders_transparent():
    """Every cached `get_*module*` of a FlashInfer module with woken ops: called outside the
    trace under compile, so Dynamo never enters the JIT machinery. FlashInfer's cached device
    queries stay traced, without Dynamo's warning."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            # `_get_*module*` too: 0.6.16-0.7.x build the fused-MoE module (and declare its
            # ops) in `_get_trtllm_moe_sm100_module_impl`, behind an uncached public getter.
            loader = attr.lstrip("_").startswith("get_") and "module" in attr
            if not (callable(value) and hasattr(value, "cache_info")):
                continue
            if not (loader or _is_device_query(attr, value)):
                continue
            if id(value) in _transparent:
                continue
            _transparent.add(id(value))
            if not loader:
                _allow_cache_wrapper(value)
                continue

            outside_the_trace = _outside_the_trace(value)
            # Dynamo looks through the cache wrapper and traces what it wraps.
            target = getattr(value, "__wrapped__", value)
            try:
                torch._dynamo.substitute_in_graph(target, skip_signature_check=True)(
                    outside_the_trace)
            except Exception as e:
                _log.debug("dynafold: %s.%s stays traced: %s", name, attr, e)
                continue
            _allow_cache_wrapper(value)


# ids of the cache wrappers whose Dynamo warning is dynafold's to silence (torch < 2.14).
_quiet_wrappers = set()


def _allow_cache_wrapper(wrapper):
    """Dynamo warns ("Silent incorrectness is only a potential risk") whenever it meets a
    `functools.cache` wrapper, and the loaders made transparent are met on every trace; what it
    warns of cannot happen here (the substitute calls the cached loader itself). torch 2.14+
    has an allow-list for exactly this; older torch gets a filter on its `warn_once` that
    drops that one warning for these wrappers only, found by the object Dynamo is calling."""
    allow = getattr(torch._dynamo.utils, "allow_lru_cache_wrapper_trace_without_warning", None)
    if allow is not None:
        try:
            allow(wrapper)
            return
        except Exception:  # an allow-list that changed shape: fall back to the filter
            pass
    _quiet_wrappers.add(id(wrapper))
    _filter_cache_warning()


def _filter_cache_warning():
    """A filter on Dynamo's `warn_once` that drops the cache warning for the wrappers above
    (torch < 2.14) and, on every torch, for FlashInfer's device queries in modules first
    imported inside a trace (0.7.2's `cute_dsl/availability.py`, imported by topk_varlen's
    dispatch as it runs), which no scan before the trace can see. The wrapper is the object
    Dynamo is calling (its variable's `wrapper_obj`)."""
    utils = torch._dynamo.utils
    if getattr(utils.warn_once, "_dynafold_filter", False):
        return
    warn_once = utils.warn_once

    def filtered_warn_once(msg, stacklevel=1):
        if isinstance(msg, str) and msg.startswith(LRU_WARNING):
            try:
                caller = sys._getframe(1).f_locals.get("self")
            except Exception:
                caller = None
            wrapper = getattr(caller, "wrapper_obj", None)
            if id(wrapper) in _quiet_wrappers or _is_flashinfer_device_query(wrapper):
                return None
        return warn_once(msg, stacklevel + 1)

    filtered_warn_once._dynafold_filter = True
    functools.update_wrapper(filtered_warn_once, warn_once)
    utils.warn_once = filtered_warn_once


LRU_WARNING = "Dynamo detected a call to a `functools.lru_cache`-wrapped function"


# (id of the loader, *args) -> what the loader returned, for the stand-ins below.
_BUILT = {}


def _outside_the_trace(loader):
    """A stand-in for `loader` that Dynamo inlines. Its `build` is a constant function: Dynamo
    calls it once at trace time, outside the graph (so the loader's JIT machinery never enters
    the trace); the module it built is then read from a global dict, which gives Dynamo a
    source it can guard on (a constant function's own result has none)."""
    from torch._dynamo import assume_constant_result

    key = id(loader)

    @assume_constant_result
    def build(*args, **kwargs):
        try:
            # A loader whose module's functions have dynafold declarations (the POD modules,
            # hooks/attention_plans.py) gives the trace a stand-in calling them.
            _BUILT[(key,) + args + tuple(kwargs.items())] = attention_plans.through_operators(
                loader, loader(*args, **kwargs))
        except Exception as e:
            raise RuntimeError(NOT_BUILT.format(
                loader=getattr(loader, "__qualname__", loader),
                args=", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())]),
                error=f"{type(e).__name__}: {e}")) from e
        # Declarations made by this build (ops declared inside the loader) join this compile.
        wake_pending()
        return True

    # Keywords too: 0.7.4 calls `get_dsv3_fused_routing_module(backend=backend)`, and a
    # stand-in taking positions only made Dynamo refuse the call ("Unexpected keyword
    # arguments") where eager Python builds the module.
    def stand_in(*args, **kwargs):
        build(*args, **kwargs)
        return _BUILT[(key,) + args + tuple(kwargs.items())]

    return stand_in


def status():
    """Per module: how many declarations are woken and why the others are not; per operator
    that has run for real, whether its fake agreed with its kernel."""
    out = {m: {"woken": s["woken"], "skipped": dict(s["skipped"])} for m, s in _status.items()}
    if fake_check.verdicts:
        out["fake checks"] = dict(fake_check.verdicts)
    return out
