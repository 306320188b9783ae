"""Issue 12, item 4: dynafold's fake for fp4_quantize's cute-dsl kernel (its record in hooks/ops/registry/quantization.py), a
boundary FlashInfer did not declare, against FlashInfer's own Python on every cute-dsl release
the tests install: helpers/cute_dsl_shapes.py runs `_fp4_quantize_cute_dsl` and its CuTe DSL
wrappers for real on fake CUDA tensors (nothing but the device-bound kernel compile, SM count
and compute capability stands in) over 696 cases each, and compares the results' shapes,
dtypes and strides with the fake's. The kernels are SM100-only, so this, and the fake check at
the operator's first real run, is what checks the fake here (the lent GPU is an sm90).
"""
import os

import pytest

from conftest import ROOT, clean_env, run, result_of
from test_fold import CACHE, RELEASES, flashinfer_path

HELPER = ROOT / "tests" / "python" / "helpers" / "cute_dsl_shapes.py"
# scripts/lib/env.sh: CUTLASS_VENV.
CUTLASS_PYTHON = (CACHE / f"venv-cutlass-dsl4.8.1-torch{os.environ.get('DYNAFOLD_TORCH', '2.15.0')}"
                  / "bin" / "python")
# The cute-dsl backend arrived in 0.6.16; SGLang's pin (0.7.2) is installed for test_sglang.py.
CUTE_DSL_RELEASES = [r for r in RELEASES if r != "0.5.3"] + ["0.7.2"]


def known_difference(case):
    """FlashInfer 0.6.16's NVFP4 TMA kernel (reached only with FLASHINFER_NVFP4_QUANTIZE_USE_TMA=1)
    pads the 8x4 layout's rows to 16, not 8 (0.7.2 on: 8). The fake says 8; the fake check
    raises at that operator's first real run, before its result is used."""
    (values, scales), (_, fake_scales) = case["real"], case["fake"]
    m = values[0][0]
    return (case["format"], case["layout"], case["tma"]) == ("nvfp4", "8x4", "1") and \
        scales[0][0] == (m + 15) // 16 * 16 and fake_scales[0][0] == (m + 7) // 8 * 8 and \
        case["real"][0] == case["fake"][0]


@pytest.mark.parametrize("release", CUTE_DSL_RELEASES)
def test_cute_dsl_fake_matches_flashinfers_own_shapes(release):
    assert CUTLASS_PYTHON.exists(), f"{CUTLASS_PYTHON} missing: run scripts/test"
    r = run([str(CUTLASS_PYTHON), str(HELPER)], clean_env(PYTHONPATH=flashinfer_path(release)),
            timeout=600)
    got = result_of(r)
    assert got["cases"] == 696, got["cases"]
    # FlashInfer's code took its kernel paths: the vector kernels, and TMA under the override.
    assert got["paths"].get("_get_compiled_kernel_nvfp4_tma", 0) > 0, got["paths"]
    unexplained = [c for c in got["differ"] if not (release == "0.6.16" and known_difference(c))]
    assert unexplained == [], unexplained[:5]
    if release == "0.6.16":
        assert len(got["differ"]) == 6, got["differ"]


BOUNDARIES = ROOT / "tests" / "python" / "helpers" / "cute_dsl_boundary_shapes.py"


@pytest.mark.parametrize("release", CUTE_DSL_RELEASES)
def test_cute_dsl_boundary_fakes_match_flashinfers_own_shapes(release):
    """dynafold's other CuTe DSL boundaries (the MXFP4/MXFP8 quantizers, the SwiGLU NVFP4
    driver, the fused RMSNorm + FP4 quantizers): their fakes against FlashInfer's own Python,
    216 cases each release."""
    assert CUTLASS_PYTHON.exists(), f"{CUTLASS_PYTHON} missing: run scripts/test"
    r = run([str(CUTLASS_PYTHON), str(BOUNDARIES)],
            clean_env(PYTHONPATH=flashinfer_path(release)), timeout=600)
    got = result_of(r)
    assert got["cases"] == 216, got["cases"]
    assert got["differ"] == [], got["differ"][:5]
