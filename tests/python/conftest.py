"""Shared fixtures: the built libraries and the interpreters the tests drive.

Every test here starts real processes with `LD_PRELOAD` set exactly as a user would.
"""
import os
import pathlib
import shutil
import sys
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
PRELOAD = TARGET / "libdynafold.so"
DYNAFOLD = TARGET / "dynafold"

# A CPython with a shared libpython (pyenv's) and one with a static one (Debian's
# /usr/bin/python3.11, which exports its symbols from the executable).
SHARED_PYTHON = os.environ.get("DYNAFOLD_SHARED_PYTHON") or os.path.realpath(sys.executable)
STATIC_PYTHON = os.environ.get("DYNAFOLD_STATIC_PYTHON", "/usr/bin/python3.11")


def interpreters():
    found = []
    for label, exe in (("shared", SHARED_PYTHON), ("static", STATIC_PYTHON)):
        if exe and os.path.exists(exe):
            found.append(pytest.param(os.path.realpath(exe), id=label))
    return found


@pytest.fixture(scope="session")
def preload():
    assert PRELOAD.exists(), f"{PRELOAD} missing: run cargo build --release first (scripts/test does)"
    return str(PRELOAD)


def clean_env(**extra):
    """The test process's environment without any dynafold or preload setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAFOLD_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, timeout=kw.pop("timeout", 120), **kw)
