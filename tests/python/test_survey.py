"""Issue 38: survey mode (`dynafold run --survey`, `DYNAFOLD_SURVEY`). A compile that asks for
fullgraph=True carries on past its graph breaks, however it asked, and every break is recorded
once per site with its owner; each process says once that survey mode changed fullgraph. Off,
nothing changes.

Run with each supported torch (scripts/test: 2.15.0 and 2.9.1; SGLang 0.5.12's and 0.5.23's
compile entries on 2.11.0 and 2.14.1 are in test_sglang0512.py and test_sglang.py):
  ~/.cache/dynafold-dev/venv-torch2.15.0/bin/python -m pytest tests/python/test_survey.py
  ~/.cache/dynafold-dev/venv-torch2.9.1/bin/python -m pytest tests/python/test_survey.py
"""

import functools
import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch._dynamo

from conftest import DYNAFOLD, clean_env, results_of, run

REPO = Path(__file__).resolve().parents[2]
SURVEY = REPO / "hooks" / "survey" / "fullgraph_survey.py"
OBSERVER = REPO / "hooks" / "observer" / "dynamo_observer.py"
WARNING = "survey mode (DYNAFOLD_SURVEY): a compile that asked for fullgraph=True carries on"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def survey():
    """The observer and survey mode, as the library starts them in a process; yields the
    records and the warnings said."""
    observer = load(OBSERVER, "_dynafold_observer")
    records, warnings = [], []
    assert observer.install(records.append) is True
    mode = load(SURVEY, "_dynafold_survey")
    assert mode.install(warnings.append) is None
    torch._dynamo.reset()
    try:
        yield records, warnings
    finally:
        mode.uninstall()
        observer.uninstall()
        torch._dynamo.reset()


def two_breaks(x):
    x = x + 1
    print("survey")  # gb0059
    x = x * 2
    return x + x.sum().item()  # gb0124


def compile_positionally(fn, fullgraph):
    """A wrapper that passes fullgraph on, as SGLang's install_torch_compiled does."""
    return torch.compile(fn, backend="eager", fullgraph=fullgraph)


ENTRIES = {
    "torch.compile": lambda f: torch.compile(f, fullgraph=True, backend="eager"),
    "optimize(nopython=True)": lambda f: torch._dynamo.optimize("eager", nopython=True)(f),
    "partial": lambda f: functools.partial(torch.compile, fullgraph=True, backend="eager")(f),
    "positional": lambda f: compile_positionally(f, True),
    "decorator": lambda f: torch.compile(fullgraph=True, backend="eager")(f),
}


def breaks_of(records):
    return sorted(r["break_type"] for r in records)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_fullgraph_compile_carries_on_past_every_break(survey, entry):
    records, warnings = survey
    x = torch.ones(3)
    out = ENTRIES[entry](two_breaks)(x)
    assert torch.equal(out, two_breaks(x))
    assert breaks_of(records) == ["gb0059", "gb0124"], records
    for r in records:
        assert r["survey"] is True and r["fullgraph"] is False, r
        assert r["owner"] == __file__, r
    # Said once in this process, however many compiles it changes.
    ENTRIES[entry](two_breaks)(torch.ones(4))
    assert len(warnings) == 1 and warnings[0].startswith(WARNING), warnings


def test_a_program_that_catches_unsupported_itself(survey):
    """Its own except block is not reached: the compile does not fail, and every break it would
    have stopped at is recorded."""
    records, _ = survey
    try:
        out = torch.compile(two_breaks, fullgraph=True, backend="eager")(torch.ones(3))
        caught = False
    except torch._dynamo.exc.Unsupported:
        caught = True
    assert not caught and torch.equal(out, two_breaks(torch.ones(3)))
    assert breaks_of(records) == ["gb0059", "gb0124"], records


def test_compiles_that_did_not_ask_are_left_alone(survey):
    records, warnings = survey
    torch.compile(two_breaks, backend="eager")(torch.ones(3))
    assert breaks_of(records) == ["gb0059", "gb0124"]
    assert all(r["survey"] is False for r in records), records
    # A disabled compile compiles nothing: nothing to say.
    torch.compile(two_breaks, fullgraph=True, backend="eager", disable=True)(torch.ones(3))
    assert warnings == []


def test_a_process_that_sets_dynamo_config_itself(survey):
    """Survey mode changes no config value a process may set, patch or reset: its own settings
    stand (capture_scalar_outputs=True here takes `.item()` into the graph), and a process that
    made graph breaks errors (error_on_graph_break, torch 2.9+) is surveyed too."""
    records, _ = survey
    torch._dynamo.config.suppress_errors = False
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        errors = getattr(torch._dynamo, "error_on_graph_break", None)
        with errors(True) if errors else torch._dynamo.config.patch():
            out = torch.compile(two_breaks, fullgraph=True, backend="eager")(torch.ones(3))
    assert torch.equal(out, two_breaks(torch.ones(3)))
    assert breaks_of(records) == ["gb0059"], records


def test_compiles_in_threads(survey):
    records, warnings = survey
    outs = {}

    def work(n):
        outs[n] = torch.compile(two_breaks, fullgraph=True, backend="eager")(torch.ones(n))

    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert sorted(outs) == [3, 5]
    assert {r["break_type"] for r in records} == {"gb0059", "gb0124"}
    assert all(r["survey"] for r in records) and len(warnings) == 1


# Through the preload, as a user runs it: the main process compiles in itself and in a thread,
# then starts a multiprocessing child (spawn) and a subprocess that compile too.
PROGRAM = r'''
import multiprocessing, subprocess, sys, threading, torch

def two_breaks(x):
    x = x + 1
    print("survey")
    x = x * 2
    return x + x.sum().item()

def compile_once(n):
    out = torch.compile(two_breaks, fullgraph=True, backend="eager")(torch.ones(n))
    assert torch.equal(out, two_breaks(torch.ones(n)))

if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        compile_once(6)
        sys.exit(0)
    compile_once(3)
    t = threading.Thread(target=compile_once, args=(4,)); t.start(); t.join()
    p = multiprocessing.get_context("spawn").Process(target=compile_once, args=(5,))
    p.start(); p.join()
    subprocess.run([sys.executable, __file__, "child"], check=True)
    sys.exit(p.exitcode)
'''


@pytest.mark.parametrize("how", ["--survey", "DYNAFOLD_SURVEY=1"])
def test_every_process_surveys_and_says_so_once(preload, tmp_path, how):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    reports = tmp_path / "reports"
    env = clean_env()
    args = [str(DYNAFOLD), "run", "--report-dir", str(reports)]
    if how.startswith("--"):
        args.append(how)
    else:
        env["DYNAFOLD_SURVEY"] = "1"
    r = run(args + ["--", sys.executable, str(script)], env, timeout=600, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 0, err[-3000:]
    # Three processes compiled (the main one twice, in two threads): three lines.
    assert err.count(WARNING) == 3, err[-3000:]
    out = subprocess.run([str(DYNAFOLD), "report", str(reports), "--json"], capture_output=True,
                         check=True)
    report = json.loads(out.stdout)
    sites = report["sites"]
    # Once per site: the two breaks, each counted in every compile that met it.
    assert sorted(s["record"]["break_type"] for s in sites) == ["gb0059", "gb0124"], sites
    for s in sites:
        assert s["owner"] == str(script) and s["survey"] is True, s
        assert s["count"] == 4 and len(s["pids"]) == 3, s
    assert report["owners"] == [{"owner": str(script), "sites": 2, "count": 8}]
    table = subprocess.run([str(DYNAFOLD), "report", str(reports)], capture_output=True,
                           check=True).stdout.decode()
    assert f"by owner: {script} (your code) 2 sites (8 breaks)" in table, table
    assert "gb0059*" in table and "type* = met by a fullgraph=True compile" in table, table


def test_off_by_default_nothing_changes(preload, tmp_path):
    """Without survey mode (and with --survey=no) the first compile stops at its first break,
    as without dynafold, and no process says anything about fullgraph."""
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    for extra in ([], ["--survey=no"]):
        r = run([str(DYNAFOLD), "run", *extra, "--", sys.executable, str(script)], clean_env(),
                timeout=600, cwd=tmp_path)
        err = r.stderr.decode()
        assert r.returncode == 1 and "Unsupported" in err, err[-3000:]
        assert WARNING not in err


def test_a_bad_value_is_one_clear_line(preload, tmp_path):
    r = run([str(DYNAFOLD), "run", "--survey=maybe", "--", "true"], clean_env(), cwd=tmp_path)
    assert r.returncode == 125
    assert r.stderr.decode().strip().splitlines() == [
        'dynafold: --survey="maybe" is not one of 1/0/true/false/yes/no/on/off']
    r = run([str(DYNAFOLD), "run", "--", "true"], clean_env(DYNAFOLD_SURVEY="maybe"), cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.decode().strip().splitlines() == [
        'dynafold: DYNAFOLD_SURVEY="maybe" is not one of 1/0/true/false/yes/no/on/off; '
        'using the default (0)']


# A break inside a woken FlashInfer op's fake: a FlashInfer package of one declared op, whose
# fake asks for a tensor's value (it cannot, on fake tensors), woken by dynafold like
# FlashInfer's own.
FLASHINFER_UTILS = '''
def register_custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    return lambda x: x


def register_fake_op(name, fn=None):
    return lambda x: x
'''
FLASHINFER_ROWS = '''
import torch

from .utils import register_custom_op, register_fake_op


@register_custom_op("flashinfer::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    return x * limit.max()


@register_fake_op("flashinfer::scale_rows")
def _fake_scale_rows(x: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    if limit.max().item() > 0:  # data-dependent: a break inside the fake
        return torch.empty_like(x)
    return torch.empty_like(x)
'''
FAKE_PROGRAM = '''
import torch, flashinfer

def f(x, limit):
    return flashinfer.scale_rows(x + 1, limit) * 2

x, limit = torch.ones(4), torch.tensor([2.0])
out = torch.compile(f, fullgraph=True, backend="eager")(x, limit)
print("EQUAL", torch.equal(out, f(x, limit)))
'''


def test_a_break_inside_a_woken_flashinfer_ops_fake_is_flashinfers(preload, tmp_path):
    package = tmp_path / "site" / "flashinfer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import utils\nfrom .rows import scale_rows\n")
    (package / "utils.py").write_text(FLASHINFER_UTILS)
    (package / "rows.py").write_text(FLASHINFER_ROWS)
    script = tmp_path / "program.py"
    script.write_text(FAKE_PROGRAM)
    reports = tmp_path / "reports"
    env = clean_env(PYTHONPATH=str(tmp_path / "site"), DYNAFOLD_LOG="warn,dynafold=debug")
    r = run([str(DYNAFOLD), "run", "--survey", "--report-dir", str(reports), "--",
             sys.executable, str(script)], env, timeout=600, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 0 and "EQUAL True" in r.stdout.decode(), err[-3000:]
    assert "op declarations recorded" in err, err[-3000:]
    report = json.loads(subprocess.run([str(DYNAFOLD), "report", str(reports), "--json"],
                                       capture_output=True, check=True).stdout)
    (site,) = report["sites"]
    # Dynamo met the op through dynafold's operator; the break is in its fake, FlashInfer's.
    assert site["record"]["break_type"] == "gb0033", site
    assert site["owner"] == "flashinfer" and site["survey"] is True, site
    assert site["record"]["user_frame"]["file"] == str(script), site


# SGLang's own compile entries (0.5.9, 0.5.12, 0.5.23): each release's test file calls this in
# its environment (test_sglang059.py, test_sglang0512.py, test_sglang.py).
SGLANG_ENTRY = Path(__file__).parent / "helpers" / "sglang_survey_entry.py"


def check_sglang_entry(python, preload, tmp_path, sglang):
    """SGLang's `install_torch_compiled` (fullgraph=True) over a block with two breaks: it stops
    at the first without survey mode, and with it compiles in three graphs equal to eager."""
    results = {}
    for survey in ("0", "1"):
        env = clean_env(LD_PRELOAD=preload, DYNAFOLD_SURVEY=survey)
        r = run([str(python), str(SGLANG_ENTRY)], env, timeout=300, cwd=tmp_path)
        (results[survey],) = results_of(r)
        assert results[survey]["sglang"] == sglang, results[survey]
        assert r.stderr.decode().count(WARNING) == int(survey), r.stderr.decode()[-3000:]
    off, on = results["0"], results["1"]
    assert not off["ok"] and off["error"].startswith("Unsupported: "), off
    assert on["ok"] and on["equal_to_eager"] and on["graphs"] == 3, on
