"""Issue 39: per_token_group_quant_8bit's cuTile backend (0.7.2's only one, 0.7.4's default) is
one dynafold operator, and compiled equals eager on values.

FlashInfer's public function and its cuTile body as shipped, over NVIDIA's cuda-tile package
(scripts/lib/env.sh CUTILE_DIR), the one cuTile launch a CPU stand-in writing what the two
kernels write (helpers/cutile_quant.py); each scale layout compiled with real inductor,
`fullgraph=True`, static and dynamic, its results (their strides too: the column-major scales
are a transposed view) and input compared with eager, and the operator's fake checked against
its kernel's first real run."""
import pytest

from conftest import CACHE, ROOT, each_outcome, result_of, run
from test_op_semantics import standin_env
from test_fold import PYTHON

HELPER = ROOT / "tests" / "python" / "helpers" / "cutile_quant.py"
CUTILE = CACHE / "cuda-tile1.7.0"


@pytest.mark.parametrize("release", ["0.7.2", "0.7.4"])
def test_cutile_quantizer_is_one_operator_equal_to_eager(preload, release, tmp_path):
    assert (CUTILE / ".complete").exists(), f"{CUTILE} missing: run scripts/test"
    env = standin_env(release, tmp_path, preload)
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{CUTILE}"
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=600)
    got = result_of(r)
    outcomes = each_outcome(got, 4, "dynafold_flashinfer.per_token_group_quant_8bit_cutile.default")
    for name, mode, outcome in outcomes:
        assert outcome["equal"] and outcome["strides"], (name, mode, outcome)
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]
