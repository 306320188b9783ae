"""Issue 39, item 7: the NVFP4 and FP8 MoE entry points SGLang calls on Blackwell (its
flashinfer_trtllm and flashinfer_cutlass MoE backends), compiled with inductor and
`fullgraph=True` under dynafold, equal eager on values, each FlashInfer call one operator in the
graph, on every release SGLang pins or dynafold targets: 0.6.3, 0.6.11.post1, 0.7.2, 0.7.4.
FlashInfer's Python as shipped; the fused-MoE kernel modules stood in at their JIT specs by CPU
functions that write what the kernels write (helpers/moe_standins.py); one subprocess per
release runs every entry point (helpers/moe_values.py).

SGLang's calls, read in each release's wheel (python/sglang/srt/layers/):
  0.5.23 (pins 0.7.2; also checked against 0.7.4): moe/moe_runner/flashinfer_trtllm.py:1593
    `trtllm_fp4_block_scale_routed_moe(**moe_kwargs)` and :1648 `trtllm_fp4_block_scale_moe`
    with `output=`, `[0]` taken; moe/moe_runner/flashinfer_cutlass.py:371
    `cutlass_fused_moe(output=..., ...)[0]`; FP8 through SGLang's own operators
    (moe/flashinfer_trtllm_moe.py): `trtllm_fp8_block_scale_moe_out_wrapper` gives `output=`
    and reads it (:1089), `trtllm_fp8_per_tensor_scale_moe_wrapper` returns the result, copied
    into SGLang's buffer (flashinfer_trtllm.py:845).
  0.5.12 (pins 0.6.11.post1): moe_runner/flashinfer_trtllm.py:895 routed and :942 from logits,
    `output=`, `[0]`; quantization/modelopt_quant.py:2117 cutlass; FP8 through
    moe/flashinfer_trtllm_moe.py's wrappers, no `output=`, the result copied into SGLang's
    buffer (flashinfer_trtllm.py:688, :755).
  0.5.9 (pins 0.6.3): moe_runner/flashinfer_trtllm.py:260 block-scale FP8 and :305 per-tensor
    FP8, the result taken; :443 NVFP4 from logits with `output=`, `[0]`; quantization/
    modelopt_quant.py:1770 cutlass. 0.5.9 has no routed NVFP4 call.
An entry point whose pinned SGLang call the release does not take is checked with the newest
SGLang call it does take (`forms_passed_over` says which and why); the wrappers' bodies are
compiled, as a caller that does not wrap them has Dynamo trace them.

What this found (fixed in hooks/ops/): 0.7.2's and 0.7.4's per-tensor FP8 call without `output`
(SGLang's) was traced as shipped, into the kernel module (a graph break); 0.6.11.post1's
block-scale FP8 op, woken as returning a fresh tensor, writes the `output` its public function
gives it (undeclared) and failed at inductor; 0.6.3's FP8 ops return the kernel's tensor, where
the operator handed back `[tensor]`; and every fresh-result operator whose only declared-mutable
arguments were None (`routing_replay_out`) failed at inductor ("getitem is not an OpOverload").
"""
import pytest

from conftest import ROOT, run, result_of
from test_fold import PYTHON
from test_op_semantics import standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "moe_values.py"
RELEASES = ["0.6.3", "0.6.11.post1", "0.7.2", "0.7.4"]

FP4 = "dynafold_flashinfer.trtllm_fp4_block_scale_moe.default"
CUTLASS = "dynafold_flashinfer.cutlass_fused_moe.default"
FP8_BLOCK = "dynafold_flashinfer.trtllm_fp8_block_scale_moe.default"
PER_TENSOR = "dynafold_flashinfer.trtllm_fp8_per_tensor_scale_moe.default"
# 0.7.x: the call that gives no `output` (the operator of the call that gives one: FP8_BLOCK's).
PER_TENSOR_FRESH = "dynafold_flashinfer.trtllm_fp8_per_tensor_scale_moe_fresh.default"
BOTH = ("sglang_buffer", "caller_buffer")

# Per release: entry point -> (the SGLang call it is made as, the variants, the operator).
EXPECTED = {
    "0.6.3": {
        "trtllm_fp4_block_scale_moe": ("0.5.12", BOTH, FP4),
        "trtllm_fp4_block_scale_routed_moe": ("0.5.12", BOTH, FP4),
        "cutlass_fused_moe": ("0.5.9", BOTH, CUTLASS),
        # 0.5.9 takes the result: no buffer of SGLang's.
        "trtllm_fp8_block_scale_moe": ("0.5.9", ("sglang_buffer",), FP8_BLOCK),
    },
    "0.6.11.post1": {
        "trtllm_fp4_block_scale_moe": ("0.5.12", BOTH, FP4),
        "trtllm_fp4_block_scale_routed_moe": ("0.5.12", BOTH, FP4),
        "cutlass_fused_moe": ("0.5.12", BOTH, CUTLASS),
        "trtllm_fp8_block_scale_moe": ("0.5.12", BOTH, FP8_BLOCK),
        "trtllm_fp8_per_tensor_scale_moe": ("0.5.12", BOTH, PER_TENSOR),
    },
    **{release: {
        "trtllm_fp4_block_scale_moe": ("0.5.23", BOTH, FP4),
        "trtllm_fp4_block_scale_routed_moe": ("0.5.23", BOTH, FP4),
        "cutlass_fused_moe": ("0.5.23", BOTH, CUTLASS),
        "trtllm_fp8_block_scale_moe": ("0.5.23", BOTH, FP8_BLOCK),
        "trtllm_fp8_per_tensor_scale_moe": ("0.5.23", BOTH, PER_TENSOR_FRESH),
    } for release in ("0.7.2", "0.7.4")},
}
# Entry points no SGLang call reaches on a release, each with why (asserted word for word in
# part: a new reason is a new finding).
SKIPPED = {
    # FlashInfer 0.6.3's own op body calls `activation_type.value` on the int its public
    # function defaults to (fused_moe/core.py:2220, :1485): every caller that does not pass
    # an ActivationType, SGLang 0.5.9 included, raises before any kernel runs, compiled or not.
    "0.6.3": {"trtllm_fp8_per_tensor_scale_moe":
              "raises eagerly on FlashInfer 0.6.3: AttributeError: 'int' object has no "
              "attribute 'value'"},
}
PASSED_OVER = {
    # SGLang 0.5.9's NVFP4 call passes `tile_tokens_dim`, which its own pin lacks (a TypeError
    # on a Blackwell GPU too); 0.5.23's passes `per_token_scale`, added after 0.6.3.
    "0.6.3": {
        "trtllm_fp4_block_scale_moe": ["SGLang 0.5.9's call passes ['tile_tokens_dim']",
                                       "SGLang 0.5.23's call passes ['per_token_scale']"],
        "trtllm_fp4_block_scale_routed_moe": ["SGLang 0.5.9 does not call it",
                                              "SGLang 0.5.23's call passes ['per_token_scale']"],
    },
}


def moe_values(release, tmp_path, preload):
    # (preload None: no LD_PRELOAD at all, clean_env drops it)
    env = standin_env(release, tmp_path, preload)
    return result_of(run([str(PYTHON), str(HELPER)], env, timeout=600))


def test_without_dynafold_every_call_stops_dynamo(tmp_path):
    """SGLang 0.5.23's pin: without dynafold no case compiles (the MoE loaders' class
    definitions, the CUTLASS module's kernel call), so each pass below is dynafold's."""
    got = moe_values("0.7.2", tmp_path, None)
    assert len(got["cases"]) == 10, sorted(got["cases"])
    for case, c in got["cases"].items():
        assert not c["ok"] and c["error"].startswith("Unsupported"), (case, c)


@pytest.mark.parametrize("release", RELEASES)
def test_sglang_moe_calls_compile_to_one_operator_equal_to_eager(preload, release, tmp_path):
    got = moe_values(release, tmp_path, preload)
    assert got["flashinfer"] == release
    expected = {f"{name}/{variant}": (form, op)
                for name, (form, variants, op) in EXPECTED[release].items()
                for variant in variants}
    assert set(got["cases"]) == set(expected), sorted(got["cases"])
    for case, (form, op) in expected.items():
        c = got["cases"][case]
        assert c["ok"], (case, c.get("error"), c.get("operators"))
        assert c["form"] == form, (case, c["form"])
        # Values: the result and every argument (the caller's buffer included) as eager's,
        # every row written by the stand-in kernel.
        assert c["results_equal"] and c["arguments_equal"], (case, c)
        assert c["written"], case
        # The FlashInfer call is one operator: the graph holds it once and nothing else of
        # FlashInfer's (`fullgraph=True` already failed on any break).
        assert c["operators"] == [op], (case, c["operators"])
    skipped = SKIPPED.get(release, {})
    assert set(got["skipped"]) == set(skipped), got["skipped"]
    for name, reason in skipped.items():
        assert reason in got["skipped"][name], (name, got["skipped"][name])
    passed_over = PASSED_OVER.get(release, {})
    assert set(got["forms_passed_over"]) == set(passed_over), got["forms_passed_over"]
    for name, reasons in passed_over.items():
        for reason, note in zip(reasons, got["forms_passed_over"][name]):
            assert note.startswith(reason), (name, note)
    # Every operator run was checked against its kernel at its first run, and agreed.
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]
    assert not got["core"].get("skipped"), got["core"]
