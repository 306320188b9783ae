"""The pip package: `maturin build` a wheel, install it into a fresh venv without the network,
and use both entry points as a user would. Slow (a release build of the binary)."""
import os
import pathlib
import shutil
import subprocess
import sys
import venv

import pytest

from conftest import ROOT, clean_env, run

PROBE = "import os, sys; print('FIRST', type(sys.meta_path[0]).__name__); print('PRELOAD', os.environ['LD_PRELOAD'])"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("package")
    maturin = pathlib.Path(sys.executable).parent / "maturin"
    assert maturin.exists(), f"{maturin} missing: the test venv lacks maturin (scripts/lib/env.sh installs it)"
    env = dict(os.environ, PATH=f"{maturin.parent}:{os.environ['PATH']}")
    # The in-tree backend builds the libraries maturin does not; `maturin build` alone skips
    # it, so the wheel is built through the same PEP 517 hook pip uses.
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp / "dist"), str(ROOT)],
                       env=env, capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
    (wheel,) = (tmp / "dist").glob("dynafold-*.whl")
    venv.create(tmp / "venv", with_pip=True)
    py = tmp / "venv" / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return tmp / "venv"


def lines(r, prefix):
    return [l.split(" ", 1)[1] for l in r.stdout.decode().splitlines() if l.startswith(prefix + " ")]


def package_dir(v):
    (d,) = (v / "lib").glob("python3*/site-packages/dynafold")
    return d


def test_wheel_carries_both_libraries_side_by_side(installed):
    d = package_dir(installed)
    assert (d / "libdynafold.so").is_file() and (d / "libdynafold_python.so").is_file()
    assert os.access(installed / "bin" / "dynafold", os.X_OK)


def test_dynafold_command(installed):
    py = str(installed / "bin" / "python")
    # Not on PATH: as a user calling it by path from a fresh shell.
    r = run([str(installed / "bin" / "dynafold"), "run", "--", py, "-c", PROBE], clean_env())
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]
    assert lines(r, "PRELOAD") == [str(package_dir(installed).resolve() / "libdynafold.so")]


def test_python_dash_m(installed):
    py = str(installed / "bin" / "python")
    r = run([py, "-m", "dynafold", "run", "--", py, "-c", PROBE], clean_env())
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]
    assert lines(r, "PRELOAD") == [str(package_dir(installed) / "libdynafold.so")]
    r = run([py, "-m", "dynafold", "run", "--", py, "-c", "import sys; sys.exit(3)"], clean_env())
    assert r.returncode == 3


def test_doctor_from_the_package(installed):
    py = str(installed / "bin" / "python")
    r = run([py, "-m", "dynafold", "doctor", "--python", py], clean_env())
    out = r.stdout.decode()
    assert "DynafoldFinder is first on sys.meta_path" in out
    # A bare venv: no torch, no FlashInfer, and the doctor says so.
    assert r.returncode == 1
    assert any("FlashInfer is not importable" in l for l in out.splitlines())
