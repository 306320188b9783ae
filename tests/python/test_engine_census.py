"""scripts/engine-census's comparison (issue 31's acceptance record): a difference anywhere is
one row and a non-zero exit; dynafold's modules compare under either spelling. The census
itself needs every release imported whole (minutes): it is run by hand, not here."""
import json
import subprocess
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "integration" / "engine_census"))
import census

RECORD = {"release": "0.7.4", "status": {"flashinfer.norm": {"woken": 20, "skipped": {}}},
          "woken_ops": [{"op": "dynafold_flashinfer::rmsnorm", "mutates": ["out"],
                         "function": {"module": "_dynafold_attention_plans", "qualname": "f"}}],
          "left_as_shipped": [{"declaration": "flashinfer::x", "reason": "why",
                               "function": {"module": "flashinfer.x", "qualname": "x"}}]}


def test_module_names_compare_in_either_spelling():
    moved = json.loads(json.dumps(RECORD).replace(
        "_dynafold_attention_plans", "_dynafold_ops.mechanisms.attention_plans"))
    assert census._normalize(moved, []) == RECORD
    assert census.normalized("_dynafold_ops.engine.wake.status") == "_dynafold_dormant_ops.status"
    # A move the map does not know is named, not passed over.
    assert census._unmapped(["_dynafold_ops.engine.plan"], set()) == {"_dynafold_ops.engine.plan"}


def test_one_change_is_one_row_and_fails(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "0.7.4.json").write_text(json.dumps(RECORD))
    changed = json.loads(json.dumps(RECORD))
    changed["woken_ops"][0]["mutates"] = []
    (b / "0.7.4.json").write_text(json.dumps(changed))
    script = [str(ROOT / "scripts" / "engine-census"), "--compare"]
    same = subprocess.run(script + [str(a), str(a)], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0 and "1 of 1 releases identical" in same.stdout, same.stdout
    r = subprocess.run(script + [str(a), str(b)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "  - woken_ops[dynafold_flashinfer::rmsnorm].mutates[out] = \"out\"" in r.stdout
    assert "  + woken_ops[dynafold_flashinfer::rmsnorm].mutates = []" in r.stdout
    (b / "0.7.2.json").write_text(json.dumps(RECORD))
    r = subprocess.run(script + [str(a), str(b)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "0.7.2.json: only in" in r.stdout
