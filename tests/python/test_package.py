"""The pip package, as the README's install section says word for word (read out of the README
and run as written in a fresh venv, in the clone: one build, which every test here then uses),
and both entry points used as a user would. Slow (a release build of the binary).

The wheel is one users can install: manylinux_2_28 (torch's own baseline), as tagged,
as `auditwheel show` sees it and as every ELF file in it asks of glibc.

The source distribution (`python -m build --sdist`) holds the whole workspace, and
`pip install dynafold-*.tar.gz` builds and installs from that file alone."""
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import venv

import pytest

from conftest import CACHE, ROOT, TARGET, clean_env, run
from test_preload import assert_programs_untouched

# The newest glibc the wheel may need: manylinux_2_28's.
MANYLINUX = (2, 28)
# glibc's own libraries (before 2.34 libpthread and libdl were separate files).
GLIBC_LIBS = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libm.so.6"}

# The build requirements' wheels, downloaded by scripts/test (ensure_build_wheelhouse).
WHEELHOUSE = CACHE / "build-wheelhouse"

PROBE = "import os, sys; print('FIRST', type(sys.meta_path[0]).__name__); print('PRELOAD', os.environ['LD_PRELOAD'])"


def install_commands():
    """The README's "## Install" code block, line by line, as written."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n\n((?: {4}.*\n)+)", section)
    assert block, "the README's Install section has no code block"
    return [line[4:] for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """A fresh venv, "activated" as `source venv/bin/activate` does it (PATH, VIRTUAL_ENV), in
    which the README's install line ran word for word, in the clone: `(venv, env)`. Only the
    environment stands in for a user's machine: pip's isolated build takes `maturin[zig]` from
    the wheels scripts/test downloaded (PIP_FIND_LINKS, PIP_NO_INDEX) instead of PyPI, and
    cargo builds into the tree's target folder."""
    tmp = tmp_path_factory.mktemp("package")
    venv.create(tmp / "venv", with_pip=True)
    assert (WHEELHOUSE / ".complete").exists(), f"{WHEELHOUSE} missing: run scripts/test (ensure_build_wheelhouse)"
    unset = {k: None for k in os.environ if k.startswith(("PYTHON", "PIP_"))}
    env = clean_env(**{**unset, "PATH": f"{tmp / 'venv' / 'bin'}:{os.environ['PATH']}",
                       "VIRTUAL_ENV": str(tmp / "venv"), "PIP_NO_INDEX": "1",
                       "PIP_FIND_LINKS": str(WHEELHOUSE), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                       "CARGO_TARGET_DIR": str(TARGET.parent.resolve())})
    install = install_commands()[0]
    assert install.startswith("pip wheel . -w dist && pip install dist/dynafold-*.whl"), install
    # The clone's dist/ is the command's output: an earlier run's wheel would match the glob too.
    for old in (ROOT / "dist").glob("dynafold-*.whl"):
        old.unlink()
    r = subprocess.run(["bash", "-c", install], cwd=ROOT, env=env, capture_output=True, timeout=1800)
    assert r.returncode == 0, f"{install}\n{r.stdout.decode()[-3000:]}\n{r.stderr.decode()[-3000:]}"
    return tmp / "venv", env


@pytest.fixture(scope="module")
def wheel(readme):
    """The wheel the README's install line built (a copy: dist/ is the clone's)."""
    (built,) = (ROOT / "dist").glob("dynafold-*.whl")
    kept = readme[0].parent / built.name
    shutil.copy2(built, kept)
    return kept


@pytest.fixture(scope="module")
def installed(readme):
    return readme[0]


def test_the_readme_install_section_word_for_word(readme):
    """The README's install section, every line as written, in the venv its first line made
    (the `readme` fixture). The run lines name SGLang, which a fresh venv lacks: they must end
    as Python ends without it (status 1, `No module named 'sglang'`), passed through dynafold."""
    env_dir, env = readme
    for command in install_commands()[1:]:
        assert "run" in command.split() and "sglang.launch_server" in command, command
        r = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, timeout=300)
        err = r.stderr.decode()
        assert r.returncode == 1 and "No module named 'sglang'" in err, f"{command}: {r.returncode}\n{err[-2000:]}"
        assert not [line for line in err.splitlines() if line.startswith("dynafold")], err
    # Those lines ran under the preload the install put in the venv.
    probe = "import os, sys; print(type(sys.meta_path[0]).__name__, os.environ['LD_PRELOAD'])"
    r = subprocess.run(["bash", "-c", f"dynafold run -- python -c \"{probe}\""], cwd=ROOT, env=env,
                       capture_output=True, timeout=300)
    lib = package_dir(env_dir) / "libdynafold.so"
    assert r.returncode == 0 and r.stdout.decode().split() == ["DynafoldFinder", str(lib)], r.stdout + r.stderr


def tool_env():
    """PATH with the test venv's own commands (maturin) first, as pip's build environment has."""
    bindir = pathlib.Path(sys.executable).parent
    assert (bindir / "maturin").exists(), f"{bindir}/maturin missing: the test venv lacks maturin (scripts/lib/env.sh)"
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    """`python -m build --sdist` from the tree, as the README says (without build isolation:
    the build requirements are the test venv's, the tests run without the network)."""
    tmp = tmp_path_factory.mktemp("sdist")
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp / "dist"),
                        str(ROOT)], env=tool_env(), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
    (sdist,) = (tmp / "dist").glob("dynafold-*.tar.gz")
    return sdist


@pytest.fixture(scope="module")
def from_sdist(sdist):
    """A fresh venv with dynafold installed by `pip install <the sdist file>`: pip unpacks it
    and builds the wheel from it alone (the tree is not involved). The build runs in the test
    venv, where maturin and ziglang are (pip's isolated build would fetch them), and installs
    into the fresh venv (--prefix). cargo's target folder is the tree's, so the registry crates
    built there are reused; the workspace's own crates are built afresh from the sdist's copy."""
    tmp = sdist.parent.parent
    venv.create(tmp / "venv", with_pip=True)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
                        "--ignore-installed", "--prefix", str(tmp / "venv"), str(sdist)],
                       cwd=tmp, env=dict(tool_env(), CARGO_TARGET_DIR=str(target)), capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
    return tmp / "venv"


def include_str_paths():
    """Every file a workspace crate reads at compile time (include_str!/include_bytes!)."""
    for rs in (ROOT / "src").rglob("*.rs"):
        for rel in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', rs.read_text()):
            yield (rs.parent / rel).resolve().relative_to(ROOT).as_posix()


def test_sdist_carries_the_whole_workspace(sdist):
    with tarfile.open(sdist) as t:
        prefix = t.getnames()[0].split("/", 1)[0]
        names = {n[len(prefix) + 1:] for n in t.getnames()}
        manifest = t.extractfile(f"{prefix}/Cargo.toml").read()
        pkg_info = t.extractfile(f"{prefix}/PKG-INFO").read().decode()
    tracked = subprocess.run(["git", "ls-files", "src", "hooks", "python", "Cargo.lock", "Cargo.toml",
                              ".cargo", "pyproject.toml", "README.md", "LICENSE"],
                             cwd=ROOT, capture_output=True, check=True).stdout.decode().split()
    assert {"src/preload/Cargo.toml", "src/python/Cargo.toml", "src/values/Cargo.toml", "LICENSE"} <= set(tracked)
    assert not set(tracked) - names, sorted(set(tracked) - names)
    includes = set(include_str_paths())
    assert includes and includes <= names, sorted(includes - names)
    # The workspace manifest as written (maturin's own sdist keeps only src/values as a member).
    assert manifest == (ROOT / "Cargo.toml").read_bytes()
    assert not [n for n in names if n.endswith((".so", ".pyc"))], names
    assert "License: Apache-2.0" in pkg_info and "Description-Content-Type: text/markdown" in pkg_info
    assert "Classifier: Programming Language :: Python :: 3.13" in pkg_info


def test_sdist_installs_with_pip(sdist, from_sdist):
    """`dynafold --version` and `python -m dynafold --help` from the venv the sdist went into,
    and the libraries built from it activate dynafold."""
    py = str(from_sdist / "bin" / "python")
    r = run([str(from_sdist / "bin" / "dynafold"), "--version"], clean_env())
    version = sdist.name[len("dynafold-"):-len(".tar.gz")]
    assert r.returncode == 0 and r.stdout.decode().split() == ["dynafold", version], r.stdout + r.stderr
    r = run([py, "-m", "dynafold", "--help"], clean_env())
    assert r.returncode == 0 and "run" in r.stdout.decode(), r.stdout + r.stderr
    r = run([py, "-m", "dynafold", "run", "--", py, "-c", PROBE], clean_env())
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]
    assert lines(r, "PRELOAD") == [str(package_dir(from_sdist) / "libdynafold.so")]


def lines(r, prefix):
    return [line.split(" ", 1)[1] for line in r.stdout.decode().splitlines() if line.startswith(prefix + " ")]


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


def test_pip_install_target(wheel, tmp_path):
    """Issue 41, item 8: `pip install --target DIR` puts the command in DIR/bin and the package
    in DIR/dynafold. `DIR/bin/dynafold` finds the libraries there (it looked in DIR/bin), and
    `python -m dynafold` with DIR on PYTHONPATH finds the command (the wheel's RECORD names it
    relative to pip's temporary prefix: "the command is missing")."""
    target = tmp_path / "target"
    r = run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
            clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"), timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    expected = [str(target / "dynafold" / "libdynafold.so")]
    for cmd, env in (([str(target / "bin" / "dynafold")], clean_env()),
                     ([sys.executable, "-m", "dynafold"], clean_env(PYTHONPATH=str(target)))):
        r = run([*cmd, "run", "--", sys.executable, "-c", PROBE], env)
        assert r.returncode == 0, (cmd, r.stderr.decode())
        assert lines(r, "FIRST") == ["DynafoldFinder"] and lines(r, "PRELOAD") == expected, (cmd, r.stdout)


def test_the_target_layout_without_a_wheel(tmp_path):
    """The same layout made by hand from the cargo build (no wheel to build): the command in
    DIR/bin, the package and its libraries in DIR/dynafold, no distribution record at all; an
    empty DYNAFOLD_LIB is an unset one here too."""
    (tmp_path / "bin").mkdir()
    shutil.copy2(TARGET / "dynafold", tmp_path / "bin" / "dynafold")
    shutil.copytree(ROOT / "python" / "dynafold", tmp_path / "dynafold", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ("libdynafold.so", "libdynafold_python.so"):
        shutil.copy2(TARGET / lib, tmp_path / "dynafold" / lib)
    expected = [str(tmp_path / "dynafold" / "libdynafold.so")]
    for cmd, env in (([str(tmp_path / "bin" / "dynafold")], clean_env()),
                     ([sys.executable, "-m", "dynafold"], clean_env(PYTHONPATH=str(tmp_path))),
                     ([sys.executable, "-m", "dynafold"], clean_env(PYTHONPATH=str(tmp_path), DYNAFOLD_LIB=""))):
        r = run([*cmd, "run", "--", sys.executable, "-c", PROBE], env)
        assert r.returncode == 0, (cmd, r.stderr.decode())
        assert lines(r, "FIRST") == ["DynafoldFinder"] and lines(r, "PRELOAD") == expected, (cmd, r.stdout)


def test_doctor_from_the_package(installed):
    py = str(installed / "bin" / "python")
    r = run([py, "-m", "dynafold", "doctor", "--python", py], clean_env())
    out = r.stdout.decode()
    assert "DynafoldFinder is first on sys.meta_path" in out
    # A bare venv: no torch, no FlashInfer, and the doctor says so.
    assert r.returncode == 1
    assert any("FlashInfer is not importable" in line for line in out.splitlines())


def manylinux_version(tag):
    m = re.fullmatch(rf"manylinux_(\d+)_(\d+)_{platform.machine()}", tag)
    assert m, f"{tag} is not a manylinux_X_Y_{platform.machine()} tag"
    return int(m[1]), int(m[2])


def wheel_tags(wheel):
    # name-version-python-abi-platform.whl; the platform part may be a dotted set.
    return wheel.name[:-len(".whl")].split("-")[-1].split(".")


def elf_files(v):
    d = package_dir(v)
    return [d / "libdynafold.so", d / "libdynafold_python.so", v / "bin" / "dynafold"]


def test_wheel_has_no_fault_injection(installed):
    """DYNAFOLD_TEST_FAULT is a test build's only (cargo feature test-fault)."""
    for lib in ("libdynafold.so", "libdynafold_python.so"):
        assert b"DYNAFOLD_TEST_FAULT" not in (package_dir(installed) / lib).read_bytes(), lib


def test_wheel_tag_is_manylinux_2_28(wheel):
    for tag in wheel_tags(wheel):
        assert manylinux_version(tag) <= MANYLINUX, wheel.name


def test_auditwheel_show_agrees_with_the_tag(wheel):
    # -v: without it, show stops before its external-libraries line once symbols set the tag.
    r = subprocess.run([sys.executable, "-m", "auditwheel", "-v", "show", str(wheel)],
                       capture_output=True, timeout=300)
    out = " ".join(r.stdout.decode().split())
    assert r.returncode == 0, out + r.stderr.decode()
    m = re.search(r'is consistent with the following platform tag: "([^"]+)"', out)
    assert m, out
    # The oldest policy the files allow; the wheel's tag may be that one or a newer one.
    needed = manylinux_version(m[1])
    assert all(needed <= manylinux_version(tag) <= MANYLINUX for tag in wheel_tags(wheel)), out
    # Nothing to bundle: every library the files load is one every manylinux system has.
    assert "The wheel requires no external shared libraries" in out, out


def undefined_symbols(objdump_t):
    """(weak, version or None, name) of each undefined dynamic symbol in `objdump -T` output."""
    for line in objdump_t.splitlines():
        if "*UND*" in line:
            flags, rest = line.split("*UND*", 1)
            fields = rest.split()
            yield " w " in flags, (fields[1] if len(fields) > 2 else None), fields[-1]


def test_no_elf_file_needs_a_newer_glibc(installed):
    for f in elf_files(installed):
        r = subprocess.run(["objdump", "-T", str(f)], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        out = r.stdout.decode()
        versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", out)}
        assert versions and max(versions) <= MANYLINUX, (f.name, sorted(versions)[-3:])
        assert "GLIBC_PRIVATE" not in out, f.name
        # A libc function newer than 2.28 is absent from the glibc zig links against, so it is
        # left unversioned (auditwheel does not see it) and fails on an older system: only
        # weak ones (probed at run time) and CPython's own API may stay unresolved.
        strong = [n for weak, version, n in undefined_symbols(out)
                  if not weak and version is None and not n.startswith(("Py", "_Py"))]
        assert not strong, (f.name, strong)


def test_wheel_preload_depends_on_glibc_only_and_is_inert(installed, tmp_path):
    lib = str(package_dir(installed) / "libdynafold.so")
    r = subprocess.run(["objdump", "-p", lib], capture_output=True, timeout=60)
    needed = set(re.findall(r"NEEDED\s+(\S+)", r.stdout.decode()))
    loader = {n for n in needed if n.startswith("ld-linux")}
    assert needed - loader <= GLIBC_LIBS, needed
    assert_programs_untouched(lib, tmp_path)


def test_a_missing_cargo_is_one_line(tmp_path):
    """Not a Python traceback ending in FileNotFoundError: 'cargo'."""
    code = ("import sys; sys.path.insert(0, 'python/build_backend'); import dynafold_build; "
            "dynafold_build.build_wheel(sys.argv[1])")
    r = run([sys.executable, "-c", code, str(tmp_path)], clean_env(PATH=str(tmp_path)), cwd=ROOT)
    err = [line for line in r.stderr.decode().splitlines() if line.strip()]
    assert r.returncode == 1 and len(err) == 1, err
    assert "needs Rust's cargo" in err[0] and "rustup.rs" in err[0], err


def test_the_toolchain_cargo_sees_stays_put_when_maturin_moves(tmp_path):
    """cargo keeps the linker's and CC's paths in its fingerprints. pip's isolated build puts
    maturin in a new temporary folder each time, and maturin --zig would name its own wrappers
    after that folder: every build in the same tree would then start from scratch. The backend
    sets each of them (maturin keeps what is set) to the same path under the target folder,
    whichever maturin runs them."""
    code = ("import json, pathlib, sys; sys.path.insert(0, 'python/build_backend'); import dynafold_build; "
            "env = dynafold_build._zig_env(pathlib.Path(sys.argv[1]), dynafold_build._triple()); "
            "print(json.dumps({k: v for k, v in env.items() if k.endswith(('_LINKER', '_x86_64_unknown_linux_gnu', "
            "'_aarch64_unknown_linux_gnu', 'APPLIES_TO_HOST'))}))")
    seen = []
    for name in ("first", "second"):
        bindir = tmp_path / name / "bin"
        bindir.mkdir(parents=True)
        (bindir / "maturin").write_text("#!/bin/sh\n")
        (bindir / "maturin").chmod(0o755)
        r = run([sys.executable, "-c", code, str(tmp_path / "target")],
                clean_env(PATH=f"{bindir}:{os.environ['PATH']}"), cwd=ROOT)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        env = json.loads(r.stdout)
        assert str(bindir / "maturin") in (tmp_path / "target" / "zig" / f"zigcc-{platform.machine()}-unknown-linux-gnu.2.28.sh").read_text()
        seen.append(env)
    lower = f"{platform.machine()}_unknown_linux_gnu"
    tools = [f"CARGO_TARGET_{lower.upper()}_LINKER"] + [f"{t}_{lower}" for t in ("CC", "CXX", "AR", "RANLIB")]
    assert all(seen[0].get(t, "").startswith(str(tmp_path / "target" / "zig")) for t in tools), seen[0]
    assert seen[0] == seen[1]
    assert seen[0]["CARGO_TARGET_APPLIES_TO_HOST"] == "false"
