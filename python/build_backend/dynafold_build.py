"""PEP 517 backend: maturin, after building the two libraries maturin does not build.

maturin builds one crate per wheel (here the `dynafold` binary); the preload library and
the pyo3 library are other workspace members. They are built with cargo and copied into the
`dynafold` Python package, where `python -m dynafold` and the binary look for them.

Everything in the wheel is linked by zig (the `ziglang` package, maturin's `zig` extra)
against glibc 2.28's symbol versions, whatever glibc the build machine has, so the wheel is a
manylinux_2_28 wheel (torch's own baseline): the libraries through maturin's `zig cc` wrapper
as cargo's linker, the binary through `maturin --zig --compatibility manylinux_2_28`. Both go
to target/<triple>/release, never target/release, built by cargo runs that see the same
toolchain (see _zig_env): they share every crate they have in common, and a second build in
the same tree recompiles only what changed.

The source distribution is maturin's with the whole workspace put back: maturin keeps only the
binary crate and its path dependencies and rewrites the workspace's `members` to those, which
drops the two library crates (and breaks `--locked` against Cargo.lock). build_sdist restores
the workspace manifest and adds every member crate and everything the crates read at compile
time, so the sdist builds with only Rust and pip.
"""
import gzip
import io
import json
import os
import pathlib
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile

import maturin
from maturin import *  # noqa: F403  (every hook maturin implements)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "dynafold"
LIBS = ("libdynafold.so", "libdynafold_python.so")
# The wheel's platform tag and the glibc whose symbol versions zig links against.
COMPATIBILITY = "manylinux_2_28"
GLIBC = "2.28"

# maturin warns when pyproject.toml's build-backend is not "maturin", since pip would then
# build without it; here pip runs this backend, which runs maturin, so the warning is wrong.
# maturin 1.7+ honours this variable (pip's isolated build installs the newest 1.x).
os.environ.setdefault("MATURIN_NO_MISSING_BUILD_BACKEND_WARNING", "1")


def _triple():
    machine = platform.machine()
    if sys.platform != "linux" or machine not in ("x86_64", "aarch64"):
        raise RuntimeError(f"dynafold builds for Linux x86_64 and aarch64 only, not {sys.platform} {machine}")
    return f"{machine}-unknown-linux-gnu"


def _script(path, text):
    """Writes an executable script, leaving it alone when unchanged."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        path.chmod(0o755)
    return str(path)


def _zig_env(target, triple):
    """cargo's environment for building `triple` with zig against glibc GLIBC, set in this
    process's environment so that maturin's cargo run, after the libraries', inherits it.

    Both runs must see the same toolchain paths, which cargo keeps in its fingerprints, or
    each rebuilds every crate the other built. maturin --zig (cargo-zigbuild inside it) sets
    the linker and CC/CXX/AR/RANLIB only where unset, to wrappers in a folder named after
    maturin's own path, which pip's isolated build puts in a new temporary folder each time:
    left to it, every build started from scratch. The wrappers here live in the target
    folder under fixed names instead (rewritten when maturin moves; cargo tracks the path,
    not the content)."""
    try:
        import ziglang
    except ImportError as e:
        raise RuntimeError("the `ziglang` package is missing: pip install 'maturin[zig]' (or ziglang)") from e
    maturin_exe = shutil.which("maturin") or shutil.which("maturin", path=os.path.dirname(sys.executable))
    if not maturin_exe:
        raise RuntimeError("the `maturin` command is not on PATH")
    # maturin's zig wrappers (cargo-zigbuild's) adapt rustc's and cc's arguments to zig; cargo
    # and cc want a single executable each, hence the scripts, with cargo-zigbuild's flags.
    wrappers = target / "zig"
    wrappers.mkdir(parents=True, exist_ok=True)
    maturin_zig = f"#!/bin/sh\nexec {shlex.quote(maturin_exe)} zig"
    zig_target = f"{platform.machine()}-linux-gnu.{GLIBC}"
    cc_flags = f"-g -fno-sanitize=all -target {zig_target}"
    cc = _script(wrappers / f"zigcc-{triple}.{GLIBC}.sh", f'{maturin_zig} cc -- {cc_flags} "$@"\n')
    cxx = _script(wrappers / f"zigcxx-{triple}.{GLIBC}.sh", f'{maturin_zig} c++ -- {cc_flags} "$@"\n')
    ar = _script(wrappers / "zigar.sh", f'{maturin_zig} ar -- "$@"\n')
    ranlib = _script(wrappers / "zigranlib.sh", f'{maturin_zig} ranlib -- "$@"\n')
    lower = triple.replace("-", "_")
    os.environ.update({
        f"CARGO_TARGET_{lower.upper()}_LINKER": cc,
        f"CC_{lower}": cc,
        f"CXX_{lower}": cxx,
        f"AR_{lower}": ar,
        f"RANLIB_{lower}": ranlib,
        # What cargo-zigbuild sets, unconditionally, when the target is the host's own triple:
        # the linker above then applies to the target only, and build scripts and proc-macros
        # link with the host's cc (target-applies-to-host is unstable, hence the channel).
        "CARGO_UNSTABLE_TARGET_APPLIES_TO_HOST": "true",
        "CARGO_TARGET_APPLIES_TO_HOST": "false",
        "__CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS": "nightly",
    })
    # The zig binary the ziglang package ships, for the wrappers and for maturin --zig alike
    # (otherwise they look for `zig` on PATH, then `python3 -m ziglang`).
    os.environ.setdefault("CARGO_ZIGBUILD_ZIG_PATH", str(pathlib.Path(ziglang.__file__).with_name("zig")))
    return os.environ


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


# Beyond the workspace members: the files the crates include_str! (hooks/, and
# integration/api_status/: the public-API tables `doctor --ops` ships and the program it runs
# live on a release with none), cargo's own settings (.cargo/config.toml: pyo3 must not link
# libpython), and the Python side.
SDIST_TREES = ("hooks", "integration/api_status", ".cargo", "python/dynafold",
               "python/build_backend")
SKIPPED = {"target", "__pycache__", ".git"}


def _workspace_members():
    """The member crates' folders, relative to ROOT (the root package itself excluded)."""
    _require_cargo()
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--offline", "--format-version", "1"],
                         cwd=ROOT, check=True, stdout=subprocess.PIPE).stdout
    meta = json.loads(out)
    root = pathlib.Path(meta["workspace_root"]).resolve()
    dirs = [pathlib.Path(p["manifest_path"]).resolve().parent for p in meta["packages"]
            if p["id"] in meta["workspace_members"]]
    return [d.relative_to(root) for d in dirs if d != root]


def _files_under(rel):
    for dirpath, dirnames, filenames in os.walk(ROOT / rel):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED)
        for name in sorted(filenames):
            path = pathlib.Path(dirpath) / name
            # Build outputs the package folder may hold after a local build.
            if name.endswith((".so", ".pyc")) or not path.is_file():
                continue
            yield path.relative_to(ROOT).as_posix()


def _contents(tar, member):
    """A regular file's bytes; None for a folder or a link."""
    f = tar.extractfile(member) if member.isfile() else None
    return f.read() if f is not None else None


def build_sdist(sdist_directory, config_settings=None):
    members = _workspace_members()
    with tempfile.TemporaryDirectory() as tmp:
        name = maturin.build_sdist(tmp, config_settings)
        with tarfile.open(os.path.join(tmp, name), "r:gz") as src:
            entries = [(m, _contents(src, m)) for m in src.getmembers()]
    prefix = entries[0][0].name.split("/", 1)[0]
    mtime = entries[0][0].mtime
    out = []
    for member, data in entries:
        if member.name == f"{prefix}/Cargo.toml":
            # The workspace manifest as written, members and default-members intact.
            data = (ROOT / "Cargo.toml").read_bytes()
            member.size = len(data)
        out.append((member, data))
    have = {m.name for m, _ in out}
    for rel in [str(m) for m in members] + list(SDIST_TREES):
        for path in _files_under(rel):
            arcname = f"{prefix}/{path}"
            if arcname in have:
                continue
            data = (ROOT / path).read_bytes()
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime = len(data), mtime
            info.mode = 0o755 if os.access(ROOT / path, os.X_OK) else 0o644
            out.append((info, data))
            have.add(arcname)
    missing = [p for p in ("Cargo.lock", "Cargo.toml", "pyproject.toml", "PKG-INFO", "LICENSE", "README.md")
               if f"{prefix}/{p}" not in have]
    if missing:
        raise RuntimeError(f"the sdist would lack {', '.join(missing)}")
    # Same layout as maturin's: gzip'd ustar-ish tar, fixed mtime, root-owned files.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in out:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    target = os.path.join(sdist_directory, name)
    with open(target, "wb") as f, gzip.GzipFile(filename="", fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(buf.getvalue())
    return name
