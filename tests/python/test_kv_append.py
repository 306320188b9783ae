"""Issue 30 finding 1: `append_paged_kv_cache` given its single paged cache [pages, 2, ...]
writes both halves compiled as eagerly, with the token dimension static, marked dynamic and
`dynamic=True` (SGLang compiles with it dynamic), NHD and HND, on every release installed; and so
do the NVFP4 appends given stacked 5-D value and scale caches, on the releases that have them.

On main before the fix, `dynamic=True` wrote 6 K rows and 0 V rows where eager writes 6 and 6:
FlashInfer's declaration takes the K and V views of one tensor, and inductor regenerates each
mutated view at storage offset 0 (docs/upstream/torch-two-views.md). The NVFP4 appends hand
their declarations the K and V views of two such tensors, values and scales, and lost the V
write of both the same way. FlashInfer's real public functions and declarations; the page
kernels CPU stand-ins writing what the real ones write."""
import pytest

from conftest import ROOT, result_of, run
from test_fold import PYTHON, RELEASES
from test_op_semantics import standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "kv_append.py"


# The releases installed whose flashinfer/page.py has nvfp4_quantize_append_paged_kv_cache and
# its _with_slot_mapping form (0.6.16 on; 0.5.3 has neither).
NVFP4_RELEASES = {"0.6.16", "0.7.4"}
NVFP4_CASES = 11
# dynafold's operators of the NVFP4 appends given stacked caches: the slot-mapping form has one
# per combination of its scales' members (`Union[float, Tensor]` each), as the test calls it.
NVFP4_OPS = ("flashinfer::nvfp4_quantize_append_paged_kv_cache_public",
             "flashinfer::nvfp4_quantize_append_paged_kv_cache_with_slot_mapping_public "
             "(k_scale_float_v_scale_float)",
             "flashinfer::nvfp4_quantize_append_paged_kv_cache_with_slot_mapping_public")


@pytest.mark.parametrize("release", RELEASES)
def test_single_paged_cache_append_writes_k_and_v_compiled_as_eagerly(preload, release,
                                                                      tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=900)
    got = result_of(r)
    cases = got["cases"]
    nvfp4 = {name for name in cases if name.startswith("nvfp4")}
    assert len(nvfp4) == (NVFP4_CASES if release in NVFP4_RELEASES else 0), sorted(nvfp4)
    assert len(cases) == 8 + len(nvfp4), cases
    for name, case in cases.items():
        assert case["ok"], f"{name}: {case.get('error')}\n{r.stderr.decode()[-1500:]}"
        # (values, scales) for NVFP4, each (K rows, V rows)
        rows = [[6, 6], [6, 6]] if name in nvfp4 else [6, 6]
        assert case["eager_rows"] == rows, (name, case)
        assert case["equal"] and case["compiled_rows"] == rows, (name, case)
    # The single caches through dynafold's operators for the whole caches, the pairs through
    # FlashInfer's declarations; each first run agreed with its kernel.
    checks = got["checks"]
    assert checks.get("flashinfer::append_paged_kv_cache_public") == "agrees", checks
    if release in NVFP4_RELEASES:
        assert all(checks.get(op) == "agrees" for op in NVFP4_OPS), checks
    assert set(checks.values()) == {"agrees"}, checks
