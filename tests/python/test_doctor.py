"""`dynafold doctor` against real interpreters, real torch and a real FlashInfer release."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import DYNAFOLD, clean_env, run

CACHE = pathlib.Path(os.environ.get("DYNAFOLD_CACHE", pathlib.Path.home() / ".cache/dynafold-dev"))
FLASHINFER = CACHE / "flashinfer" / "0.6.16"
PY = sys.executable  # the venv's python: torch is installed there
BASE_PATH = "/usr/bin:/bin"


@pytest.fixture
def cuda_home(tmp_path):
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n')
    nvcc.chmod(0o755)
    return str(tmp_path / "cuda")


def doctor(*args, **env):
    e = clean_env(PATH=BASE_PATH)
    for var in ("CUDA_HOME", "CUDA_PATH", "PYTHONPATH"):
        e.pop(var, None)
    e.update(env)
    r = run([str(DYNAFOLD), "doctor", *args], e, timeout=180)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def problems(out):
    return [line for line in out.splitlines() if line.startswith("problem: ")]


def test_good_environment(cuda_home):
    assert (FLASHINFER / ".complete").exists(), "run scripts/test first"
    code, out, err = doctor("--python", PY, "--ops", CUDA_HOME=cuda_home, PYTHONPATH=str(FLASHINFER))
    assert code == 0, out + err
    assert problems(out) == []
    # Not a terminal: no progress line.
    assert err == "", err
    # --ops: grouped by status under a one-line legend, rows cut to a terminal's width, and
    # nothing an installed dynafold lacks (docs/, scripts/) cited.
    table = out.split("FlashInfer 0.6.16 public API under torch.compile(fullgraph=True)\n", 1)[1]
    table = table.split("\nNo problems", 1)[0]
    assert "H200: " in table.splitlines()[1] and "| fails: " in table.splitlines()[1], table[:500]
    # Issue 41, item 9: every status is explained, "untried" too.
    assert "| untried: " in table.splitlines()[1], table.splitlines()[1]
    # The groups' headers, below the legend (which now ends in a parenthesis too).
    groups = [line.strip().split(" (")[0] for line in table.splitlines()[2:] if line.startswith("  ") and not line.startswith("    ")
              and line.rstrip().endswith(")")]
    assert groups == [g for g in ("H200", "fake", "by design", "out of scope", "fails", "untried") if g in groups]
    assert len(groups) >= 4, groups
    assert max(len(line) for line in table.splitlines()[2:]) <= 160
    assert "docs/" not in out and "scripts/" not in out
    assert "CPython 3." in out and "(supported)" in out
    assert f"0.6.16 at {FLASHINFER / 'flashinfer'}" in out
    assert "torch " in out and "site-packages/torch" in out
    assert f"{cuda_home} -> nvcc --version: 12.8" in out
    assert "torch.version.cuda" in out and "DYNAFOLD_CUDA_VERSION" in out
    rules = [line for line in out.splitlines() if line.strip().startswith("flashinfer.")]
    assert any("flashinfer.jit.cpp_ext" in line and "cpp_ext.is_cuda_version_at_least" in line
               and "-> CUDA 12.8" in line for line in rules), rules
    assert any("flashinfer.jit.fp4_quantization" in line and "folded" in line for line in rules), rules
    assert "DynafoldFinder is first on sys.meta_path" in out
    # Per module, FlashInfer's op declarations a compile would wake, and why not the others.
    section = out.split("FlashInfer op declarations (woken for torch.compile)\n", 1)[1]
    norm = [line for line in section.splitlines() if line.strip().startswith("flashinfer.norm ")]
    # The fp8-quant norms' `Union[float, Tensor]` scale is split into one operator per member
    # (8), and dynafold's own boundaries for the fused diffusion norms add 4 and
    # fused_qk_rmsnorm_rope 1 (0.6.16).
    assert norm and norm[0].rstrip().endswith("13 woken"), section
    assert any(line.strip().startswith("flashinfer.rope ") and " woken" in line
               for line in section.splitlines()), section
    # Nothing ran in the doctor's process: no operator is said to agree (issue 30, finding 7).
    assert any(line.strip().startswith("first-run check ") and "never checked" in line
               for line in section.splitlines()), section


def test_missing_flashinfer(cuda_home):
    code, out, _ = doctor("--python", PY, CUDA_HOME=cuda_home)
    assert code == 1
    assert "FlashInfer" in out and "not installed" in out
    found = problems(out)
    assert len(found) == 1, found
    assert "FlashInfer is not importable" in found[0] and "pip install flashinfer-python" in found[0]
    # The rest is still checked.
    assert "DynafoldFinder is first on sys.meta_path" in out


def test_wrong_python_path():
    code, out, _ = doctor("--python", "/nonexistent/bin/python3")
    assert code == 1
    found = problems(out)
    assert len(found) == 1 and "/nonexistent/bin/python3" in found[0] and "--python" in found[0]


def test_not_a_python(tmp_path):
    code, out, _ = doctor("--python", "/bin/false")
    assert code == 1
    assert any("/bin/false" in p for p in problems(out))


def test_unknowable_cuda_version_is_a_problem_with_a_fix(tmp_path):
    # nvcc fails and DYNAFOLD_CUDA_VERSION is junk: cpp_ext cannot be folded against the
    # CUDA torch (version.py) fallback only when torch has no CUDA; here the junk override is
    # the problem reported.
    code, out, _ = doctor("--python", PY, PYTHONPATH=str(FLASHINFER),
                          DYNAFOLD_CUDA_VERSION="twelve")
    assert code == 1
    assert any("DYNAFOLD_CUDA_VERSION" in p and "MAJOR.MINOR" in p for p in problems(out))


def test_default_python_is_python3_on_path(tmp_path, cuda_home):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # A wrapper, not a symlink: a symlink would lose the venv (pyvenv.cfg is looked up beside it).
    (bindir / "python3").write_text(f'#!/bin/sh\nexec {PY} "$@"\n')
    (bindir / "python3").chmod(0o755)
    code, out, _ = doctor(CUDA_HOME=cuda_home, PYTHONPATH=str(FLASHINFER),
                          PATH=f"{bindir}:{BASE_PATH}")
    assert f"{bindir / 'python3'} (python3 on PATH)" in out
    assert code == 0, out


@pytest.mark.parametrize("value,off", [("1", True), ("TRUE", True), ("Yes", True), ("on", True),
                                       ("0", False), ("FALSE", False), ("", False)])
def test_disable_is_read_as_the_processes_read_it(value, off):
    _, out, _ = doctor("--python", "/nonexistent/bin/python3", DYNAFOLD_DISABLE=value)
    said = [p for p in problems(out) if "DYNAFOLD_DISABLE" in p]
    assert len(said) == int(off) and all("stays off" in p for p in said), out


@pytest.mark.parametrize("var,value", [
    ("DYNAFOLD_OPS", "garbage"), ("DYNAFOLD_FP4_OPAQUE", "garbage"), ("DYNAFOLD_LOG", "garbage"),
    ("DYNAFOLD_NVCC_TIMEOUT", "garbage"), ("DYNAFOLD_NVCC_TIMEOUT", "0"),
    ("DYNAFOLD_CUDA_VERSION", "twelve"), ("DYNAFOLD_DISABLE", "maybe"),
    ("DYNAFOLD_REPORT_DIR", "/dev/null"), ("DYNAFOLD_CACHE_DIR", "/dev/null"),
    ("DYNAFOLD_OPS", "0"), ("DYNAFOLD_FP4_OPAQUE", "0"), ("DYNAFOLD_OPTS", "1")])
def test_every_setting_is_read_as_run_reads_it(var, value):
    """Each bad (or switching-off) setting is one problem line naming it, and doctor fails; a
    bad value's words are those `dynafold run` (and every process) warns with."""
    code, out, _ = doctor("--python", "/nonexistent/bin/python3", **{var: value})
    said = [p for p in problems(out) if var in p]
    assert code == 1 and len(said) == 1, out
    if value not in ("0", "1") and var != "DYNAFOLD_REPORT_DIR":
        r = run([str(DYNAFOLD), "run", "--", "/bin/true"], clean_env(**{var: value}))
        warning = r.stderr.decode().strip()
        assert warning.startswith("dynafold: ") and warning[len("dynafold: "):] in said[0], (warning, said)


def test_live_check_honours_disable():
    code, out, _ = doctor("--python", PY, DYNAFOLD_DISABLE="1")
    assert code == 1
    assert "DynafoldFinder is first" not in out, out
    assert "off (DYNAFOLD_DISABLE)" in out, out
    assert len([p for p in problems(out) if "DYNAFOLD_DISABLE" in p]) == 1, out


def test_ops_json_parses_and_filters(cuda_home):
    import json
    code, out, err = doctor("--python", PY, "--ops", "--json", "--status", "fails",
                            CUDA_HOME=cuda_home, PYTHONPATH=str(FLASHINFER))
    assert code == 0, out + err
    got = json.loads(out)
    assert got["schema"] == 1 and got["flashinfer"] == "0.6.16" and got["problems"] == []
    assert got["ops"] and all(row["status"] == "fails" for row in got["ops"].values()), got["ops"]
    assert "docs/" not in out
    code, out, _ = doctor("--python", "/nonexistent/bin/python3", "--json")
    got = json.loads(out)
    assert code == 1 and len(got["problems"]) == 1 and "ops" not in got


def test_ops_on_a_release_with_no_table_traces_it_live(cuda_home):
    """Issue 39, item 5: `--ops` on a release dynafold ships no table for (0.6.7.post3, the old
    layouts') traces its public ops here, one progress line per op on stderr, and says so."""
    import json
    release = "0.6.7.post3"
    path = CACHE / "flashinfer" / release
    assert (path / ".complete").exists(), "run scripts/test first"
    code, out, err = doctor("--python", PY, "--ops", "--json", CUDA_HOME=cuda_home,
                            PYTHONPATH=str(path))
    assert code == 0, out + err
    got = json.loads(out)
    assert got["flashinfer"] == release
    assert "traced live here" in got["table"] and "none shipped" in got["table"], got["table"]
    statuses = [row["status"] for row in got["ops"].values()]
    assert len(statuses) > 100 and statuses.count("fake") > 50, statuses
    progress = [line for line in err.splitlines() if f"tracing FlashInfer {release} live: " in line]
    assert len(progress) == len(got["ops"]), err[-2000:]
    assert re.search(rf"live: {len(statuses)}/{len(statuses)} \S+: \w", progress[-1]), progress[-1]


def test_progress_on_a_terminal_after_a_second(tmp_path):
    """A slow doctor says on a terminal which check runs; the report on stdout is unchanged."""
    import pty
    slow = tmp_path / "python3"
    slow.write_text(f'#!/bin/sh\nsleep 1\nexec {PY} "$@"\n')
    slow.chmod(0o755)
    main, sub = pty.openpty()
    e = clean_env(PATH=BASE_PATH)
    e.pop("PYTHONPATH", None)
    p = subprocess.run([str(DYNAFOLD), "doctor", "--python", str(slow)], env=e, stdout=subprocess.PIPE,
                       stderr=sub, timeout=180)
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert b"dynafold doctor: " in seen and b"..." in seen, seen
    assert b"dynafold doctor: " not in p.stdout.replace(b"dynafold doctor\n", b"")


def test_empty_variables_are_unset():
    """Issue 41, item 1: an empty variable is an unset one. DYNAFOLD_LIB= made doctor exit 125
    ("a value is required for '--lib <PATH>'"); DYNAFOLD_REPORT_DIR= was shown as relative and
    DYNAFOLD_CUDA_VERSION= as ignored. The one problem left is the missing Python."""
    empty = {v: "" for v in ("DYNAFOLD_LIB", "DYNAFOLD_REPORT_DIR", "DYNAFOLD_CACHE_DIR",
                              "DYNAFOLD_CUDA_VERSION", "DYNAFOLD_DISABLE")}
    code, out, err = doctor("--python", "/nonexistent/bin/python3", **empty)
    assert code == 1 and len(problems(out)) == 1 and "/nonexistent" in problems(out)[0], out + err
    for var in empty:
        shown = [" ".join(line.split()) for line in out.splitlines() if line.strip().startswith(var + " ")]
        assert f'{var} "": empty, read as unset' in shown, (var, shown)
    assert "DYNAFOLD_CUDA_VERSION (empty: unset)" in [" ".join(line.split()) for line in out.splitlines()], out
    assert "relative" not in out and "ignored" not in out, out


@pytest.mark.parametrize("release", ["0.6.3", "0.6.7.post3"])
def test_a_reason_is_not_cut_mid_sentence(cuda_home, release):
    """Issue 41, item 9: a declaration's reason was cut at 80 characters
    (`...were not found in the )`); it is given whole, up to its first sentence's end. Its
    example, GDN prefill's `state_checkpoints` on releases older than that parameter, is woken
    since issue 39 (dynafold's declaration leaves out what the release lacks), so these
    releases' census has nothing left, and the cut is checked on the error torch gave."""
    code, out, err = doctor("--python", PY, CUDA_HOME=cuda_home, PYTHONPATH=str(CACHE / "flashinfer" / release))
    assert code == 0, out + err
    section = out.split("FlashInfer op declarations (woken for torch.compile)\n", 1)[1]
    assert re.search(r"^  flashinfer\.gdn_prefill +1 woken$", section, re.M), section
    assert "schema not expressible" not in section, section
    sys.path.insert(0, str(pathlib.Path(__file__).parent / "helpers"))
    from engine_source import engine
    error = ("infer_schema(func): {'state_checkpoints'} in mutates_args were not found in the "
             "custom op's signature. mutates_args should contain the names of all args that the "
             "custom op mutates, or just the string 'unknown' if you don't know.")
    assert engine("engine.wake")._first_sentence(error) == (
        "infer_schema(func): {'state_checkpoints'} in mutates_args were not found in the custom "
        "op's signature.")
