"""PEP 517 backend: maturin, after building the two libraries maturin does not build.

maturin builds one crate per wheel (here the `dynafold` binary); the preload library and
the pyo3 library are other workspace members. They are built with cargo and copied into the
`dynafold` Python package, where `python -m dynafold` and the binary look for them.
"""
import os
import pathlib
import shutil
import subprocess

import maturin
from maturin import *  # noqa: F401,F403  (every hook maturin implements)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "dynafold"
LIBS = ("libdynafold.so", "libdynafold_python.so")


def _build_libraries():
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-p", "dynafold-preload", "-p", "dynafold-python"],
        cwd=ROOT, check=True,
    )
    for name in LIBS:
        shutil.copy2(target / "release" / name, PACKAGE / name)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _build_libraries()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _build_libraries()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
