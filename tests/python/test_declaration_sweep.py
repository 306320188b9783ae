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
]
NOT_IMPORTABLE.update({key: "not rebuilt: ModuleNotFoundError: No module named 'cutlass'"
                       for key in CUTE_DSL})


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
# top_k (every release): its backend choice and CUB workspace query in the public body.
TOP_K = ["flashinfer.topk:top_k"]
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
# The attention wrappers' JIT module calls (MLA, BatchAttention, POD), dynafold's declarations
# in hooks/attention_plans.py.
JIT_CALLS = ["_dynafold_attention_plans:" + name for name in (
    "mla_run", "holistic_run", "pod_run", "batch_pod_run")]
# 0.7.x's KDA decode steps (data_ptr() checks, CuTe DSL or Cake launches in the public body).
KDA = ["flashinfer.kda_decode:fused_kda_decode", "flashinfer.kda_decode:packed_kda_decode"]
# Both sweep releases have these; 0.7.4 the rest.
BOTH = NORMS + TOP_K + GEMMS + QK_NORM_ROPE + BGMV + JIT_CALLS
# 0.7.x's contiguous CuTe DSL grouped GEMM (data_ptr() checks in the public body) and 0.7.4's
# Cake LoRA GEMMs (program choice and JIT loading in the public body).
GEMMS_07 = ["flashinfer.gemm.gemm_base:group_gemm_fp8_nt_groupwise_contiguous"] + [
    "flashinfer.gemm.cake_quant_lora_gemm:" + name for name in ("mm_fp8_lora", "mm_nvfp4_lora")]
# 0.7.4's expand_csf_scales: its quantization JIT module's `csf_expand`, called in its body.
CSF = ["_dynafold_attention_plans:csf_expand"]
OWN = {"0.6.16": BOTH, "0.7.4": BOTH + GATED_NORMS + GATED_ACT + EXPERTS + KDA + GEMMS_07 + CSF + [
    "flashinfer.quantization.fp8_quantization:_per_token_group_quant_8bit_cuda"]}


# While a boundary is built: `DYNAFOLD_SWEEP_ONLY=name,... pytest -k subset` sweeps just those
# declarations (substrings of their keys), with the same checks minus the totals.
ONLY = [o for o in os.environ.get("DYNAFOLD_SWEEP_ONLY", "").split(",") if o]


@pytest.mark.skipif(not ONLY, reason="DYNAFOLD_SWEEP_ONLY is not set")
@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
def test_subset(preload, release, tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER), *ONLY], env, timeout=1200)
    got = result_of(r)
    status = got["status"]
    print(status)
    assert status, "no declaration matched"
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
    r = run([str(CUTLASS_PYTHON), "-W", "error::UserWarning", str(HELPER),
             *(key.split(":")[1] for key in CUTE_DSL)], env, timeout=900)
    got = result_of(r)
    assert got["release"] == release
    status = {k: v for k, v in got["status"].items() if k in CUTE_DSL}
    assert status == {key: "equal" for key in CUTE_DSL}, status
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]

