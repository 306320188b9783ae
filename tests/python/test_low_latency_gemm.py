"""Issue 39: mm_fp8's default backend, trtllm_low_latency_gemm (its JIT module and the
autotuner's choose_one in its body), is one dynafold operator, and compiled equals eager on
values.

FlashInfer's public mm_fp8 and trtllm_low_latency_gemm as shipped, the JIT module its runner
builds a CPU stand-in that writes what the real kernel writes (helpers/low_latency_gemm.py);
with and without `alpha` (FlashInfer's default None, which its kernel refuses: compiled
must refuse it where eager does) and `out`, compiled with real inductor,
`fullgraph=True`, static and dynamic, results and arguments compared with eager. Every release
shipping it has the same signature and body around the kernel (0.6.3-0.7.4)."""
import pytest

from conftest import each_outcome, result_of, run
from test_op_semantics import HELPER, standin_env
from test_fold import PYTHON

GEMM = HELPER.parent / "low_latency_gemm.py"


@pytest.mark.parametrize("release", ["0.6.3", "0.6.16", "0.7.2", "0.7.4"])
def test_low_latency_gemm_is_one_operator_equal_to_eager(preload, release, tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(GEMM)], env, timeout=600)
    got = result_of(r)
    outcomes = each_outcome(got, 4, "dynafold_flashinfer.trtllm_low_latency_gemm.default")
    for name, mode, outcome in outcomes:
        assert outcome["equal"] and outcome["finite"], (name, mode, outcome)
        # FlashInfer's kernel takes its scale as a tensor (TensorView): mm_fp8's default
        # `alpha=None` is refused at the kernel's call, compiled as eagerly.
        assert outcome["refused"] == name.startswith("no_alpha"), (name, mode, outcome)
    assert got["checks"] and set(got["checks"].values()) == {"agrees"}, got["checks"]
