"""PEP 517 backend: maturin, after building the two libraries maturin does not build.

maturin builds one crate per wheel (here the `dynafold` binary); the preload library and
the pyo3 library are other workspace members. They are built with cargo and copied into the
`dynafold` Python package, where `python -m dynafold` and the binary look for them.

Everything in the wheel is linked by zig (the `ziglang` package, maturin's `zig` extra)
against glibc 2.28's symbol versions, whatever glibc the build machine has, so the wheel is a
manylinux_2_28 wheel (torch's own baseline): the libraries through maturin's `zig cc` wrapper
as cargo's linker, the binary through `maturin --zig --compatibility manylinux_2_28`. Both go
to target/<triple>/release, never target/release.
"""
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys

import maturin
from maturin import *  # noqa: F401,F403  (every hook maturin implements)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "dynafold"
LIBS = ("libdynafold.so", "libdynafold_python.so")
# The wheel's platform tag and the glibc whose symbol versions zig links against.
COMPATIBILITY = "manylinux_2_28"
GLIBC = "2.28"


def _triple():
    machine = platform.machine()
    if sys.platform != "linux" or machine not in ("x86_64", "aarch64"):
        raise RuntimeError(f"dynafold builds for Linux x86_64 and aarch64 only, not {sys.platform} {machine}")
    return f"{machine}-unknown-linux-gnu"


def _zig_env(target, triple):
    """cargo's environment for linking `triple` with zig against glibc GLIBC."""
    try:
        import ziglang
    except ImportError as e:
        raise RuntimeError("the `ziglang` package is missing: pip install 'maturin[zig]' (or ziglang)") from e
    maturin_exe = shutil.which("maturin") or shutil.which("maturin", path=os.path.dirname(sys.executable))
    if not maturin_exe:
        raise RuntimeError("the `maturin` command is not on PATH")
    # maturin's `zig cc` wrapper (cargo-zigbuild's) adapts rustc's linker arguments to zig;
    # cargo wants a single executable as linker, hence the script, with maturin's own flags.
    wrapper = target / "zig" / f"zigcc-{triple}.{GLIBC}.sh"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    zig_target = f"{platform.machine()}-linux-gnu.{GLIBC}"
    text = (f"#!/bin/sh\nexec {shlex.quote(maturin_exe)} zig cc -- "
            f"-g -fno-sanitize=all -target {zig_target} \"$@\"\n")
    if not wrapper.exists() or wrapper.read_text() != text:
        wrapper.write_text(text)
        wrapper.chmod(0o755)
    # The zig binary the ziglang package ships, for the wrapper and for maturin --zig alike
    # (otherwise they look for `zig` on PATH, then `python3 -m ziglang`).
    os.environ.setdefault("CARGO_ZIGBUILD_ZIG_PATH", str(pathlib.Path(ziglang.__file__).with_name("zig")))
    return {**os.environ, f"CARGO_TARGET_{triple.upper().replace('-', '_')}_LINKER": str(wrapper)}


def _require_cargo():
    """pip prints a backend's exception as a traceback; a missing toolchain deserves one line."""
    if not shutil.which("cargo"):
        sys.exit("dynafold: building dynafold needs Rust's cargo (Rust 1.95+) on PATH; "
                 "cargo was not found (install it from https://rustup.rs)")


def _build_libraries():
    _require_cargo()
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    triple = _triple()
    env = _zig_env(target, triple)
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "--target", triple,
         "-p", "dynafold-preload", "-p", "dynafold-python"],
        cwd=ROOT, check=True, env=env,
    )
    for name in LIBS:
        shutil.copy2(target / triple / "release" / name, PACKAGE / name)
    return triple


def _maturin_settings(config_settings, triple):
    """The caller's maturin arguments plus ours: zig and the manylinux_2_28 tag (maturin then
    checks the binary against that policy)."""
    args = maturin.get_maturin_pep517_args(config_settings)
    ours = ["--zig", "--target", triple, "--compatibility", COMPATIBILITY]
    return {**(config_settings or {}), "maturin.build-args": ours + args}


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    triple = _build_libraries()
    return maturin.build_wheel(wheel_directory, _maturin_settings(config_settings, triple), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    triple = _build_libraries()
    return maturin.build_editable(wheel_directory, _maturin_settings(config_settings, triple), metadata_directory)
