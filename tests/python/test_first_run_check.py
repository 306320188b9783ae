"""Issue 30 finding 7: each woken operator's declaration is checked at the first real run of each
call form (which optional tensor arguments are given), and an operator that never ran says
"never checked", never "agrees".

On main before the fix the check was per operator: with single decode's correction removed, a
first compiled call without `return_lse` recorded "agrees" and the later call with it (whose
kernel writes `maybe_lse`, undeclared) ran unchecked; an operator whose result the graph
dropped was simply absent from `status()`. FlashInfer's real public functions and
declarations; CPU stand-in kernels (helpers/standin_kernels.py)."""
import pytest

from conftest import ROOT, result_of, run
from test_fold import PYTHON
from test_op_semantics import RELEASES, standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "first_run_forms.py"


@pytest.mark.parametrize("release", RELEASES)
def test_each_call_form_is_checked_at_its_own_first_run(preload, release, tmp_path):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), "-W", "error::UserWarning", str(HELPER)], env, timeout=600)
    got = result_of(r)

    # The norm's result dropped: its operator never ran, and says so.
    dropped = got["dropped"]
    assert dropped["ok"], dropped
    verdicts, never = dropped["checks"]
    assert verdicts == {} and "flashinfer::rmsnorm" in never, dropped

    # Without return_lse: one form, checked, agrees.
    without = got["without_lse"]
    assert without["ok"], without
    verdicts, never = without["checks"]
    assert len(verdicts) == 1 and set(verdicts.values()) == {"agrees"}, verdicts
    (plain,) = verdicts
    assert "given" not in plain and plain not in never, without

    # With return_lse: a form of its own, checked at its first run, its write found.
    with_lse = got["with_lse"]
    assert not with_lse["ok"], with_lse
    assert f"{plain} [given: maybe_lse] does not describe its kernel" in with_lse["error"]
    assert "the kernel wrote maybe_lse" in with_lse["error"], with_lse
    verdicts, _ = with_lse["checks"]
    assert verdicts[plain] == "agrees", verdicts
    assert "maybe_lse" in verdicts[f"{plain} [given: maybe_lse]"], verdicts
