"""Issue 18: every declaration FlashInfer ships, woken by dynafold, gives eager's values compiled.

Not a sample: helpers/declaration_sweep.py makes each `register_custom_op` of the release again
exactly as FlashInfer's source writes it (name, `mutates_args`, signature, declaring module and
qualified name, the fake declared beside it), with the declared function's body, which is the
kernel call, replaced by a CPU stand-in that writes exactly what the op audit says the kernel
writes (docs/op-audit, read from FlashInfer's C++/CUDA) and draws from the generator as the
kernel does. dynafold's own declarations of public functions that call a JIT kernel outside any
(hooks/dormant_ops.py `EXTRA_DECLARATIONS`, those with an audit row) are made again the same way.
dynafold wakes them as it wakes FlashInfer's; one function calling every woken
declaration is compiled with real inductor, `fullgraph=True`, static and `dynamic=True`, and its
results, argument states and generator position are compared with eager.

A declaration dynafold leaves as FlashInfer ships it (traced, a graph break at its kernel, never
a wrong value) must say why, with one of the reasons below.

It runs on CPython 3.12 (the SGLang environment, torch 2.14.1): FlashInfer's `flashinfer.comm`
does not import on 3.11 (`array.array[int]` in fd_exchange.py), and a third of 0.7.4's
declarations are there.
"""
import os

import pytest

from conftest import CACHE, ROOT, result_of, run
from test_cute_dsl_fake import CUTLASS_PYTHON
from test_op_semantics import standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "declaration_sweep.py"
PYTHON = CACHE / "venv-sglang0.5.23-torch2.14.1" / "bin" / "python"

# Why a declaration may stay as FlashInfer ships it; anything else fails the test.
LEFT_AS_SHIPPED = (
    # hooks/op_corrections.py: no schema says "the caller's buffer when given, else new".
    "result is the caller's output only when one is given",
    "result is (or holds) the caller's output",
    # Host-side helpers (workspace sizes, IPC handles, init/dispose) that return ints or
    # handles and declare no fake: nothing a compiled forward calls.
    "returns a value and has no fake",
    # Declarations torch's schemas cannot say: variadic JIT run functions, an Enum, `Any`,
    # ints declared mutable (the comm ops' pointer arguments). (XQA's two Unions are woken as
    # one operator per combination of members, hooks/op_narrowing.py.)
    "schema not expressible",
    # 0.6.16's top_k_page_table_transform (TOP_K_07).
    "correction names parameters the kernel lacks (out_raw_indices, out)",
)
# Declarations whose module does not import here, and why that is not dynafold's to answer.
NOT_IMPORTABLE = {
    # 0.6.16's all_gather_matmul imports NVIDIA's cuTile (`cuda.tile`, an optional dependency
    # of FlashInfer's, CUDA-only) at module level; 0.7.x imports it lazily and is swept.
    "flashinfer.comm.all_gather_matmul.all_gather_matmul:all_gather_matmul":
        "not rebuilt: ModuleNotFoundError: No module named 'cuda.tile'",
}
# dynafold's declarations of CuTe DSL drivers and functions: their modules import `cutlass`
# (nvidia-cutlass-dsl), which the SGLang environment lacks; swept in the CuTe DSL one instead
# (test_cute_dsl_declarations_equal_eager_compiled).
CUTE_DSL = [
    "flashinfer.quantization.kernels.nvfp4_quantize:silu_and_mul_nvfp4_quantize_cute_dsl",
    "flashinfer.quantization.kernels.mxfp4_quantize:mxfp4_quantize_cute_dsl",
    "flashinfer.quantization.kernels.mxfp8_quantize:mxfp8_quantize_cute_dsl",
    "flashinfer.quantization.kernels.nvfp4_quantize:nvfp4_quantize_per_token_cute_dsl",
    "flashinfer.quantization.kernels.nvfp4_quantize:nvfp4_quantize_cute_dsl",
    "flashinfer.cute_dsl.rmsnorm_fp4quant:rmsnorm_fp4quant",
    "flashinfer.cute_dsl.add_rmsnorm_fp4quant:add_rmsnorm_fp4quant",
    # GDN prefill (every release; gdn_prefill.py imports its CuTe DSL kernels at load).
    "flashinfer.gdn_prefill:chunk_gated_delta_rule",
    # (0.6.16's package imports `cutlass` on the way; 0.7.4's is swept in both environments)
    "flashinfer.fused_moe.cute_dsl.b12x_moe:b12x_fused_moe",
    # The SM100 NVFP4 CuTe DSL MoE (every release; 0.7.x's deprecated alias of
    # cute_dsl_fused_moe).
    "flashinfer.fused_moe.cute_dsl.fused_moe:cute_dsl_fused_moe_nvfp4",
    # Its wrapper's `run` (every release), a wrapper method called by the object's key
    # (hooks/method_boundaries.py).
    "flashinfer.fused_moe.cute_dsl.fused_moe:CuteDslMoEWrapper.run",
]
# Those only 0.7.x has: the SM90 CuTe DSL MoE, the SM100 one's general entry and its
# deprecated MXFP8 x MXFP4 entry and wrapper.
CUTE_DSL_0_7 = ["flashinfer.fused_moe.cute_dsl.sm90_fused_moe:cute_dsl_fused_moe_bf16",
               "flashinfer.fused_moe.cute_dsl.fused_moe:cute_dsl_fused_moe_mxfp8_mxfp4",
               "flashinfer.fused_moe.cute_dsl.fused_moe:cute_dsl_fused_moe",
               "flashinfer.fused_moe.cute_dsl.fused_moe:CuteDslMxfp8Mxfp4MoEWrapper.run"]
CUTE_DSL += CUTE_DSL_0_7
# 0.7.4's paged GDN functions (gdn_paged.py imports the GDN decode's CuTe DSL kernels at load):
# swept in the CuTe DSL environment on 0.7.4 only.
CUTE_DSL_074 = ["flashinfer.gdn_paged:" + name for name in (
    "chunk_gated_delta_rule_paged", "gated_delta_rule_decode_paged")] + [
    # 0.7.x's SM12x CuTe DSL MoE GEMMs (FC1 + activation + quantize, FC2 + finalize): the
    # target-arch query, tile choice, compile and launch in the public body.
    f"flashinfer.fused_moe.cute_dsl.blackwell_sm12x.{module}:cute_dsl_sm12x_{function}"
    for module, function in (("moe_fp8_fc1_act_q1", "fc1_act_q1_fp8"),
                             ("moe_mxfp8_mxfp4_fc1_act_q1", "fc1_act_q1_mxfp8_mxfp4"),
                             ("moe_fp8_fc2_finalize", "fc2_finalize_fp8"),
                             ("moe_mxfp8_mxfp4_fc2_finalize", "fc2_finalize_mxfp8_mxfp4"))] + [
    # 0.7.x's masked grouped GEMM (SM count, arch, a compiled CuTe DSL kernel object).
    "flashinfer.gemm.kernels.grouped_gemm_masked_wrapper:grouped_gemm_nt_masked"]
# 0.6.16's masked grouped GEMM (0.7.x's is CUTE_DSL_074's, in its wrapper module): swept in
# the CuTe DSL environment on 0.6.16 only.
CUTE_DSL_0616 = ["flashinfer.gemm.kernels.grouped_gemm_masked_blackwell:grouped_gemm_nt_masked"]
NOT_IMPORTABLE.update({key: "not rebuilt: ModuleNotFoundError: No module named 'cutlass'"
                       for key in CUTE_DSL + CUTE_DSL_074 + CUTE_DSL_0616})


# Equal, but Dynamo inlined the declared function instead of calling its operator: the
# declaration's narrowing does not take the call this sweep's generic arguments make. Named, so
# that no other declaration passes this way unnoticed.
NOT_THROUGH_THE_OPERATOR = set()


# dynafold's own declarations the sweep makes again, per release.
NORMS = ["flashinfer.norm:" + name for name in (
    "fused_rmsnorm_silu", "fused_dit_gate_residual_layernorm_gamma_beta",
    "fused_dit_gate_residual_layernorm_scale_shift", "fused_dit_residual_layernorm_scale_shift")]
# 0.7.4's fused norms for the SM100 family (data_ptr() checks before their declared ops).
GATED_NORMS = ["flashinfer.norm:" + name for name in (
    "gated_residual_rmsnorm", "gated_residual_next_rmsnorm", "rmsnorm_sigmoid_gate")]
# top_k and the DSA transforms (every release): their backend choice, CUB workspace query and
# (0.7.4) capture query in the public body. The page-table form's correction describes 0.7.x's
# `out` and `out_raw_indices`; 0.6.16 has neither and traces it as shipped.
TOP_K = ["flashinfer.topk:top_k", "flashinfer.topk:top_k_ragged_transform"]
TOP_K_07 = ["flashinfer.topk:top_k_page_table_transform"]
# The GEMMs whose public function calls its JIT kernel (0.6.16 on; tinygemm_bf16 reads
# data_ptr() on 0.7.4; the DeepGEMM ones build cuda-python driver structs), and SVDQuant's
# smooth quantizer.
GEMMS = ["flashinfer.gemm.gemm_base:" + name for name in (
    "gemm_fp8_nt_groupwise", "group_gemm_fp8_nt_groupwise", "group_gemm_mxfp8_mxfp4_nt_groupwise",
    "group_gemm_nvfp4_nt_groupwise", "fp8_blockscale_gemm_sm90",
    "group_deepgemm_fp8_nt_groupwise", "batch_deepgemm_fp8_nt_groupwise")] + [
    "flashinfer.gemm.gemm_svdquant:nvfp4_quantize_smooth", "flashinfer.gemm.routergemm:tinygemm_bf16",
    "flashinfer.gemm.gemm_bf16_fp4:mm_bf16_fp4"]
# 0.7.x's public fused SwiGLU MXFP8 quantizers (data_ptr() checks before the kernel).
GATED_ACT = ["flashinfer.gated_act_mxfp8:" + name for name in (
    "silu_and_mul_mxfp8_quantize", "silu_and_mul_mxfp8_quantize_backward")]
# 0.7.4's masked MXFP8 experts quantizers (data_ptr() checks, backend choice).
EXPERTS = ["flashinfer.quantization.fp8_quantization:" + name for name in (
    "silu_and_mul_mxfp8_experts_quantize", "mxfp8_grouped_quantize")]
QK_NORM_ROPE = ["flashinfer.norm:fused_qk_rmsnorm_rope"]
# The multi-LoRA MoE BGMV functions (0.6.16 on): JIT kernels called in their bodies, pointer
# tables, a mask gather.
BGMV = ["flashinfer.fused_moe.bgmv_moe:" + name for name in (
    "bgmv_moe_shrink", "bgmv_moe_expand", "bgmv_moe")] + [
    "flashinfer.fused_moe.moe_lora_delta:bgmv_moe_gemm2_lora_delta"]
# MonoMoE (0.6.16 on): its JIT kernel called in the public body; the result is `out`, the
# caller's when given.
MONO = ["flashinfer.fused_moe.monomoe:mono_moe"]
# The attention wrappers' JIT module calls (MLA, BatchAttention, POD) and a caller's own single
# decode/prefill module, dynafold's declarations in hooks/attention_plans.py.
JIT_CALLS = ["_dynafold_attention_plans:" + name for name in (
    "mla_run", "holistic_run", "pod_run", "batch_pod_run", "single_decode_run",
    "single_prefill_run")]
# 0.7.x's KDA decode steps (data_ptr() checks, CuTe DSL or Cake launches in the public body).
KDA = ["flashinfer.kda_decode:fused_kda_decode", "flashinfer.kda_decode:packed_kda_decode",
       "flashinfer.kda_decode:packed_fused_kda_decode"]
# 0.7.4's MLA K/V pack: the workload allowlist read from package data, backend choice, launch.
MLA_KV_PACK = ["flashinfer.mla_kv_pack:concat_mla_kv_quant_fp8"]
# 0.7.x's linear-attention steps returning their state pools after a fresh output: the fused
# GDN decode step (package-data registry, SM120 kernels) and 0.7.4's Cake GDP MTP decode
# (data_ptr() checks).
STATE_POOLS = ["flashinfer.gdn_kernels.experimental.gdn_fused_decode:gdn_fused_decode_step",
               "flashinfer.cake_gdp:cake_gated_delta_product_mtp"]
# 0.7.4's Cake top-k/top-p sampler (Cake module load, raw-stream launch; seeded).
CAKE_SAMPLING = ["flashinfer.cake_sampling:top_k_top_p_sampling_from_probs"]
# The cuDNN GEMMs: bmm_mxfp8 and the grouped GEMMs for MoE (graph build and cache in the body).
CUDNN_GEMMS = ["flashinfer.gemm.gemm_base:bmm_mxfp8"] + [
    "flashinfer.grouped_mm.core:" + name for name in (
        "grouped_mm_bf16", "grouped_mm_fp8", "grouped_mm_mxfp8", "grouped_mm_fp4")]
# 0.7.4's QSA attention: the experimental sparse paged one (backend choice, data_ptr()
# checks) and the cuDNN ones (the frontend's import).
QSA = ["flashinfer.sparse:qsa_sparse_paged_attention", "flashinfer.qsa:qsa_forward",
       "flashinfer.qsa:qsa_indexed_forward"]
# The cuDNN linear-attention prefills (GDN-2, GDP) and cuDNN Frost's GEMM1 + SwiGLU (0.7.x).
CUDNN_0_7 = ["flashinfer.gdn2_prefill:chunk_gated_delta_rule2",
             "flashinfer.gdp_prefill:chunk_gated_delta_product",
             "flashinfer.fused_moe.cudnn_frost_selected:cudnn_frost_grouped_gemm1_swiglu"]
# The attention entry points whose public (or runner) function calls its JIT module's tvm_ffi
# function outside any declared op: SM120 NVFP4 attention's quantizer (every release), its
# forward, the Sage quantizer and the SM120 fmha_v2 runner (0.7.x: 0.6.16 lacks the runner,
# and the flags their woken calls are keyed on); 0.7.x's paged MQA logits (CuTe DSL kernels
# compiled in the public body; the module imports without `cutlass`).
NVFP4_ATTN = ["flashinfer.nvfp4_attention_sm120:nvfp4_attention_sm120_quantize_qkv"]
ATTN_JIT = ["flashinfer.nvfp4_attention_sm120:nvfp4_attention_sm120_fwd",
            "flashinfer.prefill:trtllm_sage_attention_quantize",
            "flashinfer.prefill:_fmha_v2_prefill_sm120_run"] + [
    "flashinfer.attn_scores.attn_scores:" + name
    for name in ("fp8_paged_mqa_logits", "fp4_paged_mqa_logits")]
# The trtllm-gen attention entry points that call their JIT module's tvm_ffi function in the
# public body (every release): ragged (DeepSeek) prefill, paged context, fmha_v2 prefill and
# the CUTLASS varlen FMHA.
TRTLLM_ATTN = ["flashinfer.prefill:" + name for name in (
    "trtllm_ragged_attention_deepseek", "trtllm_batch_context_with_kv_cache",
    "trtllm_fmha_v2_prefill", "fmha_varlen")]
# cuDNN batch decode (0.7.x: 0.6.16 lacks the return_lse its woken call is keyed on): graph
# build and cache, or its cubin JIT call, in the public body.
CUDNN_DECODE = ["flashinfer.cudnn.decode:cudnn_batch_decode_with_kv_cache"]
# 0.7.x's SM110 GQA decode: device check, kernel loader (0.7.4: a Cake manifest read from disk)
# and launch in the public body.
SM110_DECODE = ["flashinfer.decode:sm110_gqa_decode"]
# 0.7.x's AlphaMoE NVFP4 entry points (data_ptr() checks and route choice before their ops).
ALPHAMOE = ["flashinfer.fused_moe.alphamoe_nvfp4_sm100:" + name for name in (
    "alphamoe_nvfp4_aligned_moe", "alphamoe_nvfp4_routed_moe")]
# The SM120/SM121 b12x fused MoE (0.6.16 on): CUDA version check, data_ptr()-keyed caches and
# CuTe DSL launches in the public body. 0.7.4's module imports without `cutlass` (swept
# here too); 0.6.16's package imports it on the way (cute_dsl/utils.py): CUTE_DSL.
B12X = ["flashinfer.fused_moe.cute_dsl.b12x_moe:b12x_fused_moe"]
# 0.7.x's contiguous CuTe DSL grouped GEMM (data_ptr() checks in the public body) and 0.7.4's
# Cake LoRA GEMMs (program choice and JIT loading in the public body).
GEMMS_07 = ["flashinfer.gemm.gemm_base:group_gemm_fp8_nt_groupwise_contiguous"] + [
    "flashinfer.gemm.cake_quant_lora_gemm:" + name for name in ("mm_fp8_lora", "mm_nvfp4_lora")]
# 0.7.x's prepared contiguous grouped FP8 GEMM's launch (a wrapper method: data_ptr() checks
# and the tvm_ffi launch in its body), woken for the call giving every operand.
PREPARED_GEMMS = ["flashinfer.gemm.cake_grouped_fp8_gemm:"
                  "PreparedGroupGemmFp8NtGroupwiseContiguous.launch",
                  "flashinfer.gemm.cake_grouped_fp8_fused_silu_quant:"
                  "PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch"]
# 0.7.x's planned packed KDA prefill's run (a wrapper method: its planner's lock, the CuTe DSL
# compile and launch), woken for the call giving `output` without a final state.
KDA_PREFILL = ["flashinfer.kda:RecurrentKDAPrefillWrapper.run"]
# 0.7.4's expand_csf_scales: its quantization JIT module's `csf_expand`, called in its body.
CSF = ["_dynafold_attention_plans:csf_expand"]
# 0.7.x's MiniMax-H3 packed-varlen attentions (data_ptr() checks, plan and Cake launches in
# their one-shot entries; 0.6.16 has none).
MINIMAX_H3 = ["flashinfer.prefill:" + name for name in (
    "minimax_h3_varlen_attention", "minimax_h3_varlen_fp8_attention",
    "minimax_h3_varlen_fp8_attention_bf16", "minimax_h3_varlen_nvfp4_attention")]
# 0.7.x's populate_trtllm_moe_routing_metadata_: the fused-MoE namespace's
# `populate_routing_metadata_multi_tile`, called in its body on the slots' flattened tensors.
ROUTING_METADATA = ["_dynafold_attention_plans:trtllm_moe_populate_routing_metadata"]
# 0.7.x's Kimi-K3 fused router (data_ptr() checks; a KimiK3RoutePlan NamedTuple in and out):
# dynafold's declarations of its call without and with the caller's plan.
KIMI_K3 = ["_dynafold_attention_plans:" + name for name in (
    "kimi_k3_route", "kimi_k3_route_into", "kimi_k3_project")]
# 0.7.x's alphamoe_nvfp4_finalize_deferred: the AlphaMoE module's
# `nvfp4_complete_routed_finalize_op`, called in its body on the deferred object's tensors.
ALPHAMOE_FINALIZE = ["_dynafold_attention_plans:alphamoe_complete_routed_finalize"]
# 0.7.x's Prims-TS routed FP8 block-scale MoE: its private impl (package-data configs, support
# check, AutoTuner, CuTe DSL launch) called in the public body.
PRIMS_TS = ["flashinfer.fused_moe.backends.prims_ts.fp8_op:prims_ts_fp8_block_scale_routed_moe"]
# Both sweep releases have these; 0.7.4 the rest.
BOTH = (NORMS + TOP_K + GEMMS + QK_NORM_ROPE + BGMV + MONO + JIT_CALLS + CUDNN_GEMMS
        + NVFP4_ATTN + TRTLLM_ATTN)
OWN = {"0.6.16": BOTH, "0.7.4": BOTH + GATED_NORMS + GATED_ACT + EXPERTS + KDA + QSA + CUDNN_0_7
       + ATTN_JIT + CUDNN_DECODE + SM110_DECODE + B12X + ALPHAMOE + MLA_KV_PACK + STATE_POOLS
       + CAKE_SAMPLING + GEMMS_07 + CSF + TOP_K_07 + MINIMAX_H3 + ROUTING_METADATA + KIMI_K3
       + ALPHAMOE_FINALIZE + PREPARED_GEMMS + KDA_PREFILL + PRIMS_TS + [
    "flashinfer.quantization.fp8_quantization:_per_token_group_quant_8bit_cuda"]}


# While a boundary is built: `DYNAFOLD_SWEEP_ONLY=name,... pytest -k subset` sweeps just those
# declarations (substrings of their keys), with the same checks minus the totals.
ONLY = [o for o in os.environ.get("DYNAFOLD_SWEEP_ONLY", "").split(",") if o]


# Defined only when asked for: the suite allows no skips (conftest.ALLOWED_SKIPS), and a run
# without DYNAFOLD_SWEEP_ONLY has nothing for this test to do.
if ONLY:
    @pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
    def test_subset(preload, release, tmp_path):
        env = standin_env(release, tmp_path, preload)
        # CuTe DSL declarations (CUTE_DSL) are swept in the environment that imports `cutlass`.
        cute = any(o in key for o in ONLY for key in CUTE_DSL + CUTE_DSL_074 + CUTE_DSL_0616)
        python = CUTLASS_PYTHON if cute else PYTHON
        r = run([str(python), "-W", "error::UserWarning", str(HELPER), *ONLY], env, timeout=1200)
        got = result_of(r)
        status = got["status"]
        # A name may exist in one release only; that release's half has nothing to check.
        print(status or f"no declaration of {release} matches {ONLY}")
        assert all(v == "equal" or NOT_IMPORTABLE.get(k) == v for k, v in status.items()), status
        assert set(got["checks"].values()) <= {"agrees"}, got["checks"]


@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
def test_every_woken_declaration_equals_eager_compiled(preload, release, tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=1200)
    got = result_of(r)
    assert got["release"] == release
    status = got["status"]
    equal = [k for k, v in status.items() if v == "equal"]
    shipped = {k: v for k, v in status.items() if v.startswith("not woken: ")}
    wrong = {k: v for k, v in status.items()
             if v != "equal" and k not in shipped and NOT_IMPORTABLE.get(k) != v
             and not (v == "equal, traced as shipped" and k in NOT_THROUGH_THE_OPERATOR)}
    unexplained = {k: v for k, v in shipped.items()
                   if not any(v[len("not woken: "):].startswith(why) for why in LEFT_AS_SHIPPED)}
    assert not wrong, wrong
    assert not unexplained, unexplained
    own = OWN[release]
    assert all(status.get(k) == "equal" for k in own), {k: status.get(k) for k in own}
    # Most of what FlashInfer declares is woken and checked on values (0.6.16: 80 of 119
    # declaring functions, 0.7.4: 152 of 204, on 2026-12-01).
    assert len(equal) >= {"0.6.16": 80, "0.7.4": 152}[release], (len(equal), shipped)
    # Every woken operator that ran was checked at its first real run, and agreed.
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]


@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
def test_cute_dsl_declarations_equal_eager_compiled(preload, release, tmp_path):
    """dynafold's declarations whose modules import the CuTe DSL (CUTE_DSL), swept the same way
    in the environment that has nvidia-cutlass-dsl (scripts/lib/env.sh CUTLASS_VENV)."""
    env = standin_env(release, tmp_path, preload)
    keys = CUTE_DSL + (CUTE_DSL_074 if release == "0.7.4" else CUTE_DSL_0616)
    r = run([str(CUTLASS_PYTHON), "-W", "error::UserWarning", str(HELPER),
             *(key.split(":")[1] for key in keys)], env, timeout=900)
    got = result_of(r)
    assert got["release"] == release
    status = {k: v for k, v in got["status"].items() if k in keys}
    assert status == {key: "equal" for key in keys
                      if release != "0.6.16" or key not in CUTE_DSL_0_7}, status
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]

