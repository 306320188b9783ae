"""Issue 12, on CPU: FlashInfer's public ops trace under torch.compile(fullgraph=True) once
dynafold wakes FlashInfer's own dormant op declarations for Dynamo, on every installed release.

Real torch, real FlashInfer from PyPI, fake CUDA tensors (`FakeTensorMode`): Dynamo traces the
public functions exactly as on a GPU, and the operators' fakes stand in for the kernels. The
same script runs without the preload as the baseline: there every case fails.
"""
import json

import pytest

from conftest import ROOT, clean_env, run
from test_fold import PYTHON, RELEASES, flashinfer_path, release_text, toolkit

HELPER = ROOT / "tests" / "python" / "helpers" / "trace_ops.py"
TRACED = ["rmsnorm", "gemma_rmsnorm", "fused_add_rmsnorm", "gemma_fused_add_rmsnorm",
          "apply_rope_with_cos_sin_cache", "apply_rope_with_cos_sin_cache_inplace"]
# The operator each public op must reach in the graph (FlashInfer's declared name).
OPS = {
    "rmsnorm": "rmsnorm", "gemma_rmsnorm": "gemma_rmsnorm",
    "fused_add_rmsnorm": "fused_add_rmsnorm",
    "gemma_fused_add_rmsnorm": "gemma_fused_add_rmsnorm",
    "apply_rope_with_cos_sin_cache": "apply_rope_pos_ids_cos_sin_cache",
    "apply_rope_with_cos_sin_cache_inplace": "apply_rope_pos_ids_cos_sin_cache",
}


def trace(release, tmp_path, preload=None, **extra):
    env = clean_env(
        PYTHONPATH=flashinfer_path(release),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"),
        **extra,
    )
    if preload:
        env["LD_PRELOAD"] = preload
    r = run([str(PYTHON), str(HELPER)], env, timeout=600)
    lines = [l for l in r.stdout.decode().splitlines() if l.startswith("RESULT ")]
    assert lines, r.stderr.decode()[-3000:]
    result = json.loads(lines[0][7:])
    result["stdout"] = r.stdout.decode()
    return result, r.stderr.decode()


@pytest.mark.parametrize("release", RELEASES)
def test_public_ops_trace_with_flashinfers_own_declarations(preload, release, tmp_path):
    plain, _ = trace(release, tmp_path / "plain")
    for name in TRACED:
        assert not plain["cases"][name]["ok"], f"{name} traced without dynafold: {plain}"

    ours, err = trace(release, tmp_path / "ours", preload)
    for name in TRACED:
        case = ours["cases"][name]
        assert case["ok"], f"{name}: {case.get('error')}\n{err[-2000:]}"
        assert f"dynafold_flashinfer.{OPS[name]}.default" in case["targets"], case
        # Nothing of FlashInfer's JIT machinery ran while tracing: no process, no JIT file.
        assert ours["events"][name] == {"processes": [], "jit_files": []}, name
    # The eager path is FlashInfer's own: declarations return FlashInfer's function itself.
    assert ours["declared_is_own"] is True
    # A boundary FlashInfer forgot, from dynafold's own declarations: bmm_fp8's autotuned gemm.
    assert "flashinfer::fp8_gemm_sm100" in ours["woken"], ours["woken"]
    runs = ours["rmsnorm_op_runs"]
    assert runs["module_holds_it"] is True and "/flashinfer/" in runs["file"], runs


@pytest.mark.parametrize("release", RELEASES)
def test_compile_before_the_jit_module_exists_says_what_to_do(preload, release, tmp_path):
    ours, _ = trace(release, tmp_path, preload)
    case = ours["cases"]["silu_and_mul"]
    assert not case["ok"]
    assert "dynafold: torch.compile reached FlashInfer's get_act_and_mul_module" in case["error"]
    assert "Call the FlashInfer op once eagerly" in case["error"]


# FlashInfer's API logging arrived in 0.6; 0.5.3 has none to keep out of the trace.
@pytest.mark.parametrize("release", [r for r in RELEASES if r != "0.5.3"])
def test_flashinfer_api_logging_stays_out_of_the_trace(preload, release, tmp_path):
    ours, err = trace(release, tmp_path, preload, FLASHINFER_LOGLEVEL="1")
    for name in TRACED:
        case = ours["cases"][name]
        assert case["ok"], f"{name}: {case.get('error')}\n{err[-2000:]}"
        assert f"dynafold_flashinfer.{OPS[name]}.default" in case["targets"], case
    # Eager calls are still logged by FlashInfer.
    assert "FlashInfer API Call: rmsnorm" in ours["stdout"] + err
