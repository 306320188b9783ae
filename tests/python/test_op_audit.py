"""Issue 18: every declaration FlashInfer ships is audited against its C++/CUDA source, and
every difference the audit found is answered in hooks/op_corrections.py (or needs no answer).

docs/op-audit/audit.json holds, per release and declaring function, what the kernel writes,
what its result is and whether it draws random numbers (read from FlashInfer's source, with
file:line evidence). Here, on the installed releases: every declaration in FlashInfer's source
has an audit row, and each row whose truth differs from its declaration is corrected."""
import importlib.util
import json
import sys

import pytest

from conftest import ROOT
from test_fold import flashinfer_path

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from declarations import declarations  # noqa: E402

AUDIT = json.loads((ROOT / "docs" / "op-audit" / "audit.json").read_text())
spec = importlib.util.spec_from_file_location("op_corrections",
                                              ROOT / "hooks" / "op_corrections.py")
corrections = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corrections)
CORRECTIONS = corrections.CORRECTIONS


@pytest.mark.parametrize("release", ["0.6.16", "0.7.2", "0.7.4"])
def test_every_declaration_is_audited(release):
    audited = {(r["module"], r["function"]) for r in AUDIT if r["release"] == release}
    shipped = {(d["module"], d["function"]) for d in declarations(flashinfer_path(release))}
    assert shipped, release
    assert shipped <= audited, sorted(shipped - audited)


@pytest.mark.parametrize("release", ["0.6.16", "0.7.2", "0.7.4"])
def test_every_difference_the_audit_found_is_corrected(release):
    unanswered = []
    for row in (r for r in AUDIT if r["release"] == release):
        fix = CORRECTIONS.get((row["module"], row["function"]), {})
        if fix.get("dormant"):
            continue
        missing = set(row["writes"]) - set(row["declared_mutates"]) - set(
            fix.get("also_mutates", ()))
        returns = row["returns"]
        # Prefill's run kernels are declared `-> None` and `return o`: dynafold drops what an
        # operator declared to return nothing returns (hooks/dormant_ops.py _result_dropped).
        alias = returns.startswith("alias:") and returns != "alias:o"
        # A result that is the caller's `output` when given (fused MoE, mm_fp4): woken only for
        # the call that gives it, as a write of it (hooks/op_corrections.py result_is_given).
        given = fix.get("result_is_given", {}).get("argument")
        if given:
            missing.discard(given)
            if f"alias:{given}" in returns:
                alias = False
        # dynafold's declaration of a public function that allocates its outputs unless given
        # buffers: woken only for the call that gives none (hooks/op_corrections.py
        # fresh_only), where nothing of the caller's is written.
        missing -= set(fix.get("fresh_only", {}).get("when", ()))
        if alias and fix.get("returns_argument") != returns.split(":", 1)[1]:
            unanswered.append((row["module"], row["function"], "result", returns))
        if missing:
            unanswered.append((row["module"], row["function"], "writes", sorted(missing)))
    assert not unanswered, unanswered
