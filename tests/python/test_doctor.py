"""`dynafold doctor` against real interpreters, real torch and a real FlashInfer release."""
import os
import pathlib
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
    return [l for l in out.splitlines() if l.startswith("problem: ")]


def test_good_environment(cuda_home):
    assert (FLASHINFER / ".complete").exists(), "run scripts/test first"
    code, out, err = doctor("--python", PY, CUDA_HOME=cuda_home, PYTHONPATH=str(FLASHINFER))
    assert code == 0, out + err
    assert problems(out) == []
    assert "CPython 3." in out and "(supported)" in out
    assert f"0.6.16 at {FLASHINFER / 'flashinfer'}" in out
    assert "torch " in out and "site-packages/torch" in out
    assert f"{cuda_home} -> nvcc --version: 12.8" in out
    assert "torch.version.cuda" in out and "DYNAFOLD_CUDA_VERSION" in out
    rules = [l for l in out.splitlines() if l.strip().startswith("flashinfer.")]
    assert any("flashinfer.jit.cpp_ext" in l and "cpp_ext.is_cuda_version_at_least" in l
               and "-> CUDA 12.8" in l for l in rules), rules
    assert any("flashinfer.jit.fp4_quantization" in l and "folded" in l for l in rules), rules
    assert "DynafoldFinder is first on sys.meta_path" in out
    # Per module, FlashInfer's op declarations a compile would wake, and why not the others.
    section = out.split("FlashInfer op declarations (woken for torch.compile)\n", 1)[1]
    norm = [l for l in section.splitlines() if l.strip().startswith("flashinfer.norm ")]
    # The fp8-quant norms' `Union[float, Tensor]` scale is split into one operator per member
    # (8), and dynafold's own boundaries for the fused diffusion norms add 4 and
    # fused_qk_rmsnorm_rope 1 (0.6.16).
    assert norm and norm[0].rstrip().endswith("13 woken"), section
    assert any(l.strip().startswith("flashinfer.rope ") and " woken" in l
               for l in section.splitlines()), section


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
