"""Issue 18: every declaration FlashInfer ships is audited against its C++/CUDA source, and
every difference the audit found is answered by the op's record, hooks/ops/registry/ (or needs
no answer).

integration/op_audit/audit.json holds, per release and declaring function, what the kernel
writes, what its result is and whether it draws random numbers (read from FlashInfer's source,
with file:line evidence). Here, on the installed releases: every declaration in FlashInfer's
source has an audit row, and each row whose truth differs from its declaration is corrected."""
import json
import sys

import pytest

from conftest import ROOT
from test_fold import OLD_LAYOUT_RELEASE, flashinfer_path

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from declarations import declarations
from engine_source import engine

AUDIT = json.loads((ROOT / "integration" / "op_audit" / "audit.json").read_text())
corrections = engine("engine.corrections")


@pytest.mark.parametrize("release", [OLD_LAYOUT_RELEASE, "0.6.16", "0.7.2", "0.7.4"])
def test_every_declaration_is_audited(release):
    audited = {(r["module"], r["function"]) for r in AUDIT if r["release"] == release}
    shipped = {(d["module"], d["function"]) for d in declarations(flashinfer_path(release))}
    assert shipped, release
    assert shipped <= audited, sorted(shipped - audited)


@pytest.mark.parametrize("release", [OLD_LAYOUT_RELEASE, "0.6.16", "0.7.2", "0.7.4"])
def test_every_difference_the_audit_found_is_corrected(release):
    unanswered = []
    for row in (r for r in AUDIT if r["release"] == release):
        fix = corrections.entry(release, row["module"], row["function"])
        if fix.get("dormant"):
            continue
        missing = set(row["writes"]) - set(row["declared_mutates"]) - set(
            fix.get("also_mutates", ()))
        returns = row["returns"]
        # Prefill's run kernels are declared `-> None` and `return o`: dynafold drops what an
        # operator declared to return nothing returns (hooks/ops/engine/wake.py _result_dropped).
        alias = returns.startswith("alias:") and returns != "alias:o"
        # A result that is the caller's `output` when given (fused MoE, mm_fp4): woken only for
        # the call that gives it, as a write of it (a correction's result_is_given).
        given = fix.get("result_is_given", {}).get("argument")
        if given:
            missing.discard(given)
            if f"alias:{given}" in returns:
                alias = False
        # dynafold's declaration of a public function that allocates its outputs unless given
        # buffers: woken only for the call that gives none (a correction's
        # fresh_only), where nothing of the caller's is written.
        missing -= set(fix.get("fresh_only", {}).get("when", ()))
        if alias and fix.get("returns_argument") != returns.split(":", 1)[1]:
            unanswered.append((row["module"], row["function"], "result", returns))
        if missing:
            unanswered.append((row["module"], row["function"], "writes", sorted(missing)))
    assert not unanswered, unanswered


# SGLang 0.5.9's and 0.5.12's FlashInfer (issue 39): not audited row by row, but a correction
# written for a newer body must not leave their declarations dormant (`by_release` answers).
SGLANG_PINS = ["0.6.3", "0.6.11.post1"]


@pytest.mark.parametrize("release", [*SGLANG_PINS, OLD_LAYOUT_RELEASE, "0.6.16", "0.7.2", "0.7.4"])
def test_every_correction_fits_its_release_declaration(release):
    """A correction keyed to a declaring function names only parameters that release's function
    has: one written for a newer release's body (an older release with the same module and
    qualified name) leaves the declaration traced as shipped, its operator never woken
    (hooks/ops/engine/wake.py "correction names parameters the kernel lacks")."""
    misfits = []
    for d in declarations(flashinfer_path(release)):
        fix = corrections.entry(release, d["module"], d["function"])
        given, fresh = fix.get("result_is_given", {}), fix.get("fresh_only", {})
        named = [*fix.get("also_mutates", ()), fix.get("returns_argument"),
                 given.get("argument"), *fresh.get("when", ()), *fresh.get("then", ()),
                 *fix.get("positional", {}).get("names", ())]
        missing = [n for n in named if n and n not in d["params"]]
        if missing:
            misfits.append((d["module"], d["function"], missing))
    assert not misfits, misfits
