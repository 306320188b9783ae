"""The graph-break observer (hooks/observer/dynamo_observer.py) against real torch and real Dynamo.

Run with each supported torch, e.g.
  ~/.cache/dynafold-dev/venv-torch2.15.0/bin/python -m pytest tests/python/test_reporter.py
  ~/.cache/dynafold-dev/venv-torch2.9.1/bin/python -m pytest tests/python/test_reporter.py
FlashInfer cases need a release on disk (DYNAFOLD_FLASHINFER_DIR, default
$DYNAFOLD_CACHE/flashinfer/0.6.16 as scripts/test installs it) and fail without it.
"""

import importlib.util
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch._dynamo

from conftest import CACHE

REPO = Path(__file__).resolve().parents[2]
OBSERVER = REPO / "hooks" / "observer" / "dynamo_observer.py"
FLASHINFER = Path(os.environ.get("DYNAFOLD_FLASHINFER_DIR", CACHE / "flashinfer" / "0.6.16"))
FAKE_NVCC = """#!/bin/sh
echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Cuda compilation tools, release 12.8, V12.8.93"
"""


def load_observer():
    spec = importlib.util.spec_from_file_location("_dynafold_observer", OBSERVER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def records():
    obs = load_observer()
    got = []
    assert obs.install(got.append) is True
    torch._dynamo.reset()
    try:
        yield got
    finally:
        obs.uninstall()
        torch._dynamo.reset()


def run_compiled(fn, fullgraph, *args):
    """Compiles and calls fn; under fullgraph=True the Unsupported is caught here, as a
    caller would, and must still be reported."""
    compiled = torch.compile(fn, fullgraph=fullgraph, backend="eager")
    try:
        compiled(*args)
    except torch._dynamo.exc.Unsupported:
        assert fullgraph, "fullgraph=False must not raise"
        return "unsupported"
    assert not fullgraph, "a fullgraph compile of a breaking function must fail"
    return "ok"


def line_of(fn, snippet):
    src, first = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if snippet in line:
            return first + i
    raise AssertionError(f"{snippet!r} not in {fn.__name__}")


def breaks_print(x):
    x = x + 1
    print("dynafold test")
    return x * 2


def breaks_subprocess(x):
    x = x + 1
    subprocess.run(["true"])
    return x * 2


def breaks_exists(x):
    if os.path.exists("/"):
        return x + 1
    return x - 1


CASES = {
    # fn: (call snippet, break type, reason contains, library file suffix or None, package, hint)
    "print": (breaks_print, 'print("dynafold test")', "gb0059", "`print`", None, None, "print"),
    "subprocess": (breaks_subprocess, "subprocess.run", "gb0007", "_thread.allocate_lock",
                   "subprocess.py", "subprocess", "subprocess"),
    "exists": (breaks_exists, "os.path.exists", "gb0007", "posix.stat", "genericpath",
               "genericpath", "file-system"),
}


@pytest.mark.parametrize("fullgraph", [False, True], ids=["fullgraph=False", "fullgraph=True"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_known_break_is_reported_once_with_frames(records, case, fullgraph):
    fn, snippet, gb, reason, lib_file, package, hint = CASES[case]
    run_compiled(fn, fullgraph, torch.ones(3))
    assert len(records) == 1, records
    r = records[0]
    assert r["break_type"] == gb
    assert reason in r["reason"]
    assert "\n" not in r["reason"]
    assert r["fullgraph"] is fullgraph
    assert r["exception"] == "Unsupported"
    assert r["source"] == ("compilation_metrics" if fullgraph else "graph_breaks")
    assert r["user_frame"] == {"file": __file__, "line": line_of(fn, snippet),
                               "function": fn.__name__}
    if lib_file is None:
        assert r["library_frame"] is None
    else:
        lib = r["library_frame"]
        assert lib["file"].endswith(lib_file) or lib["file"] == f"<frozen {lib_file}>"
        assert lib["package"] == package and lib["stdlib"] is True
        assert lib["line"] > 0
    assert hint in r["hint"]
    assert r["pid"] == os.getpid()
    # The break is in this file or in the standard library under it: this file owns it.
    assert r["owner"] == __file__ and r["survey"] is False
    assert r["torch"] == torch.__version__
    assert r["stack"][0].startswith(f"{__file__}:{line_of(fn, snippet)} in ")


def test_rank_comes_from_the_environment(records, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    run_compiled(breaks_print, False, torch.ones(3))
    assert records[0]["rank"] == 3


def test_each_occurrence_is_reported(records):
    # Two distinct compiles hitting the same line: the sink counts them, the observer must
    # not deduplicate across compiles.
    run_compiled(breaks_print, False, torch.ones(3))
    torch._dynamo.reset()
    run_compiled(breaks_print, False, torch.ones(3))
    assert len(records) == 2
    assert records[0]["user_frame"] == records[1]["user_frame"]


@pytest.fixture
def fake_cuda_home(tmp_path, monkeypatch):
    assert (FLASHINFER / "flashinfer" / "jit" / "cpp_ext.py").exists(), \
        f"no FlashInfer release at {FLASHINFER}: run scripts/test (or set DYNAFOLD_FLASHINFER_DIR)"
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.syspath_prepend(str(FLASHINFER))
    return tmp_path / "cuda"


def calls_flashinfer_version_check(x):
    from flashinfer.jit import cpp_ext

    if cpp_ext.is_cuda_version_at_least("12.8"):
        return x + 1
    return x - 1


@pytest.mark.parametrize("fullgraph", [False, True], ids=["fullgraph=False", "fullgraph=True"])
def test_flashinfer_unfolded_version_check(records, fake_cuda_home, fullgraph):
    from flashinfer.jit import cpp_ext

    assert cpp_ext.is_cuda_version_at_least("12.8")  # eager: the fake nvcc answers 12.8
    cpp_ext.get_cuda_version.cache_clear()
    run_compiled(calls_flashinfer_version_check, fullgraph, torch.ones(3))
    # fullgraph=False: after the break in the user's frame Dynamo compiles FlashInfer's own
    # frames as they run, and breaks again inside them; those are sites of their own.
    assert len(records) == 1 if fullgraph else len(records) >= 1, records
    for later in records[1:]:
        assert later["user_frame"]["file"] == cpp_ext.__file__
        assert later["library_frame"]["file"].endswith("subprocess.py")
    r = records[0]
    assert r["break_type"] == "gb0007"
    assert "allocate_lock" in r["reason"]
    assert r["user_frame"]["line"] == line_of(calls_flashinfer_version_check,
                                              'is_cuda_version_at_least("12.8")')
    assert r["user_frame"]["file"] == __file__
    assert r["library_frame"]["file"].endswith("subprocess.py")
    assert r["library_frame"]["package"] == "subprocess"
    via = r["via_frame"]
    assert via["file"] == cpp_ext.__file__
    assert via["function"] == "get_cuda_version"
    assert via["package"] == "flashinfer"
    assert via["line"] == line_of(cpp_ext.get_cuda_version.__wrapped__, "subprocess.check_output")
    assert any(s.endswith(" in is_cuda_version_at_least") for s in r["stack"])
    # subprocess.py broke, but FlashInfer's frame called it: FlashInfer owns the break.
    assert all(rec["owner"] == "flashinfer" for rec in records), records
    assert "subprocess" in r["hint"]


SCRIPT = textwrap.dedent("""
    import importlib.util, sys, torch, torch._dynamo
    def f(x):
        x = x + 1
        print("inside")
        return x
    got = []
    if sys.argv[1] == "observe":
        spec = importlib.util.spec_from_file_location("_dynafold_observer", sys.argv[2])
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        m.install(got.append)
    torch.compile(f, backend="eager")(torch.ones(2))
    try:
        torch.compile(f, backend="eager", fullgraph=True)(torch.ones(3, 3))
    except torch._dynamo.exc.Unsupported:
        pass
    sys.stdout.write("RECORDS %d\\n" % len(got))
""")


def _run(mode, env_extra):
    env = dict(os.environ, **env_extra)
    env.pop("RANK", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT, mode, str(OBSERVER)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.parametrize("torch_logs", ["", "graph_breaks"])
def test_torch_output_is_unchanged(torch_logs):
    env = {"TORCH_LOGS": torch_logs} if torch_logs else {}
    plain = _run("plain", env)
    observed = _run("observe", env)

    def strip(text):
        # Log lines carry time and pid; compare what they say.
        return [ln.split("] ", 1)[-1] for ln in text.splitlines()]

    assert strip(observed.stderr) == strip(plain.stderr)
    assert observed.stdout.replace("RECORDS 2", "RECORDS 0") == plain.stdout
    if torch_logs:
        assert "Graph break" in plain.stderr
    else:
        assert "Graph break" not in plain.stderr


def test_handlers_added_later_see_no_extra_records(records):
    # pytest's own log capture attaches handlers after the observer: they must still see
    # only what the loggers passed before the observer lowered their levels.
    import logging

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)

    keep = Keep(logging.DEBUG)
    loggers = [logging.getLogger("torch._utils_internal"),
               logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")]
    for lg in loggers:
        lg.addHandler(keep)
    try:
        run_compiled(breaks_print, True, torch.ones(3))
        run_compiled(breaks_print, False, torch.ones(4, 4))
    finally:
        for lg in loggers:
            lg.removeHandler(keep)
    assert len(records) == 2
    assert [r for r in seen if r.levelno < logging.WARNING] == []


def test_observation_survives_torch_resetting_its_loggers(records):
    import logging

    torch._logging.set_logs(dynamo=logging.WARNING)  # resets every artifact logger's level
    try:
        run_compiled(breaks_print, False, torch.ones(3))
    finally:
        torch._logging.set_logs()
    assert len(records) == 1


def _branch_helper(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def breaks_in_helper(x):
    x = x * 2
    return _branch_helper(x)


def test_repeat_logged_without_exception_is_attributed(records):
    # The break in the inlined helper is logged with the live exception; when Dynamo then
    # compiles the helper as its own frame, it logs the same break again as a "duplicate"
    # outside its except block. Both must name the same line.
    run_compiled(breaks_in_helper, False, torch.ones(3))
    line = line_of(_branch_helper, "if x.sum() > 0")
    assert len(records) >= 2, records
    assert [r["break_type"] for r in records] == ["gb0170"] * len(records)
    assert records[0]["user_frame"]["line"] == line_of(breaks_in_helper, "return _branch_helper")
    assert records[0]["library_frame"]["line"] == line
    for r in records[1:]:
        assert r["user_frame"] == {"file": __file__, "line": line, "function": "_branch_helper"}
        assert r["reason"] == records[0]["reason"]
