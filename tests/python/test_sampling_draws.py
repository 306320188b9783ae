"""Issue 30 finding 8 (sampling): FlashInfer's sampling with the caller's own `generator=` and
with `return_valid=True` traces under fullgraph=True, compiled equals eager, and the caller's
generator and the default one advance exactly as eagerly (two generators, one compiled
function: a graph each).

On main before the fix each such call was traced as FlashInfer ships it, into its JIT module:
`SourcelessBuilder.create does not know how to wrap tvm_ffi.module.Module` (here the CPU
stand-in's module). FlashInfer's real public functions and declarations; CPU stand-in kernels
and generators (helpers/standin_kernels.py)."""
import pytest

from conftest import ROOT, result_of, run
from test_fold import PYTHON
from test_op_semantics import RELEASES, standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "sampling_draws.py"


@pytest.mark.parametrize("release", RELEASES)
def test_sampling_with_a_generator_or_return_valid_compiles_as_eager(preload, release,
                                                                      tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=600)
    got = result_of(r)
    cases = got["cases"]
    assert len(cases) == 6, cases
    for name, case in cases.items():
        assert case["ok"], f"{name}: {case.get('error')}\n{r.stderr.decode()[-1500:]}"
        assert case["equal"], (name, case)
        eager, compiled = case["positions"]["eager"], case["positions"]["compiled"]
        assert eager == compiled, (name, case)
        mine, default = eager[0]
        # The caller's generator moved when it was given, the default one when it was not.
        assert (mine[1] > 0) == name.startswith("generator"), (name, eager)
        assert (default[1] > 0) != name.startswith("generator"), (name, eager)
    # Through operators of their own, each checked at its first run.
    assert set(got["checks"]) == {
        "flashinfer::sampling_from_probs (generator)",
        "flashinfer::top_k_top_p_sampling_from_probs (generator)",
        "flashinfer::sampling_from_probs (valid)",
        "flashinfer::top_k_top_p_sampling_from_probs (valid)",
        "flashinfer::sampling_from_probs (generator_valid)"}, got["checks"]
    assert set(got["checks"].values()) == {"agrees"}, got["checks"]
    # Every sampling declaration with a generator has its operator (11 woken, none left).
    assert got["module"] == {"woken": 11, "skipped": {}}, got["module"]
    assert "flashinfer::top_p_sampling_from_probs (generator_valid)" in got["others"]
