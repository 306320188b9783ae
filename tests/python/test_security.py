"""Issue 7, security: cache and report files are created without following symlinks and
without clobbering other users' files in a shared folder; cache entries written by another
user (or writable by others, or corrupt) are never trusted; environment input is validated
with one warning per bad variable."""
import os
import re
import socket
import subprocess
import sys

from conftest import ROOT, run
from test_faults import BREAK, IMPORT, base_env, lines, py
from test_fold import PYTHON, flashinfer_path

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from engine_source import module_names

NOBODY = 65534


def cache_files(cache):
    return sorted(p for p in cache.iterdir() if p.name.endswith(".pyc"))


# FlashInfer's import and one compile: the op records and the engine reading them load at the
# first compile start (hooks/ops/engine/wake.py COMPILE_TIME), so only then are all of
# dynafold's own modules in the cache.
IMPORT_AND_COMPILE = IMPORT + (
    "import torch\n"
    "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))\n"
)


def warm_cache(preload, tmp_path):
    """Three rewritten FlashInfer modules and dynafold's own hooks (op declarations and their
    parts, loaders, the graph-break observer), in sorted order: the hooks first (`_dynafold_...`), then the FlashInfer modules."""
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o1777)  # like /tmp
    env = base_env(tmp_path, LD_PRELOAD=preload, DYNAFOLD_CACHE_DIR=str(cache))
    r = py(IMPORT_AND_COMPILE, env)
    assert "OK True True" in r.stdout.decode(), r.stderr.decode()
    files = cache_files(cache)
    assert sorted(f.name.split(".cpython")[0] for f in files) == sorted(module_names() + [
        "_dynafold_loaders", "_dynafold_observer", "flashinfer.jit.cpp_ext", "flashinfer.jit.fp4_quantization",
        "flashinfer.quantization.fp4_quantization"]), files
    return cache, env, files


def test_symlinks_at_cache_names_are_not_followed(preload, tmp_path):
    cache, env, files = warm_cache(preload, tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for i, f in enumerate(files):
        f.unlink()
        os.symlink(victim, f)
        if i == 0:  # one planted by another user: left alone entirely
            os.lchown(f, NOBODY, NOBODY)
    r = py(IMPORT_AND_COMPILE, dict(env, DYNAFOLD_LOG="debug"))
    assert "OK True True" in r.stdout.decode(), r.stderr.decode()
    assert victim.read_text() == "precious"
    assert os.path.islink(files[0]) and os.lstat(files[0]).st_uid == NOBODY
    for f in files[1:]:  # ours: replaced by a regular file, atomically
        assert not os.path.islink(f) and f.stat().st_uid == os.geteuid()
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_entries_of_another_user_or_writable_or_corrupt_are_not_trusted(preload, tmp_path):
    cache, env, files = warm_cache(preload, tmp_path)
    hook = next(f for f in files if f.name.startswith("_dynafold_ops.engine.wake."))
    foreign, writable, corrupt = files[-3:]
    os.chown(foreign, NOBODY, NOBODY)
    writable.chmod(0o666)
    before = foreign.read_bytes()
    corrupt.write_bytes(corrupt.read_bytes()[:60] + b"\x00garbage" * 50)
    r = py(IMPORT, dict(env, DYNAFOLD_LOG="debug"))
    err = r.stderr.decode()
    assert "OK True True" in r.stdout.decode(), err
    debug = " | ".join(m for _, m in lines(err, "DEBUG"))
    assert "owned by another user" in debug and "group or world writable" in debug, debug
    assert "corrupt" in debug or "not this key" in debug, debug
    assert not lines(err, "WARN"), err
    assert foreign.read_bytes() == before and foreign.stat().st_uid == NOBODY
    assert corrupt.stat().st_uid == os.geteuid()
    # The hook's code is rewritten too if its entry is corrupt: the op declarations still record.
    hook.write_bytes(hook.read_bytes()[:60] + b"\x00garbage" * 50)
    r = py(IMPORT, dict(env, DYNAFOLD_LOG="debug"))
    assert "OK True True" in r.stdout.decode(), r.stderr.decode()
    assert "FlashInfer's op declarations recorded" in r.stderr.decode()
    assert not lines(r.stderr.decode(), "WARN")


def test_report_file_never_follows_a_planted_symlink(preload, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    reports.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"
    planted = []

    def plant():
        # Runs in the child between fork and exec: the name the sink will try first.
        name = reports / f"dynafold-{host}-{os.getpid()}.jsonl"
        os.symlink(victim, name)
        planted.append(name)

    env = base_env(tmp_path, LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))

    r = run([str(PYTHON), "-c", BREAK], env, preexec_fn=plant)
    assert r.returncode == 0, r.stderr.decode()
    assert victim.read_text() == "precious"
    links = [p for p in reports.iterdir() if p.is_symlink()]
    files = [p for p in reports.iterdir() if not p.is_symlink()]
    assert len(links) == 1, list(reports.iterdir())
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600, files
    assert "break" in files[0].read_text() or files[0].stat().st_size > 0


def test_bad_environment_gets_one_warning_each(preload, tmp_path):
    env = base_env(
        tmp_path,
        LD_PRELOAD=preload,
        DYNAFOLD_NVCC_TIMEOUT="ten",
        DYNAFOLD_CACHE_DIR="relative/cache",
        DYNAFOLD_REPORT_DIR="relative/reports",
        DYNAFOLD_CUDA_VERSION='12.8"); import os; os.system("touch PWNED")#',
        # The ignored cache folder means the default one (this test's own XDG_CACHE_HOME).
        PYTHONDONTWRITEBYTECODE="1",
    )
    r = py(IMPORT + BREAK, env, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 0 and "OK True True" in r.stdout.decode(), err
    warns = [m for _, m in lines(err, "WARN")]
    for var in ("DYNAFOLD_NVCC_TIMEOUT", "DYNAFOLD_CACHE_DIR", "DYNAFOLD_REPORT_DIR", "DYNAFOLD_CUDA_VERSION"):
        assert len([w for w in warns if var in w]) == 1, (var, err)
    assert len(warns) == 4, err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "relative").exists()


def test_superseded_cache_entries_are_pruned(preload, tmp_path):
    """Issue 19, issue 33: an entry written for an earlier FlashInfer build at the same path
    (here: 0.6.16, then 0.7.4 installed over it) is removed when its successor is written, so a
    cache folder holds one entry per module, source file and interpreter, not one per build
    ever seen."""
    cache = tmp_path / "cache"
    cache.mkdir()
    site = tmp_path / "site"
    names = {}
    for release in ("0.6.16", "0.7.4"):
        # An upgrade in place: the same folder, the other release's files.
        subprocess.run(["rm", "-rf", str(site)], check=True)
        subprocess.run(["cp", "-rs", flashinfer_path(release), str(site)], check=True)
        (tmp_path / release).mkdir()
        env = base_env(tmp_path / release, release, LD_PRELOAD=preload, PYTHONPATH=str(site),
                       DYNAFOLD_CACHE_DIR=str(cache))
        r = py(IMPORT, env)
        assert "OK True True" in r.stdout.decode(), r.stderr.decode()
        names[release] = [p.name for p in cache_files(cache)]
    stems = [n.split(".dynafold-")[0] for n in names["0.7.4"]]
    assert len(stems) == len(set(stems)), names["0.7.4"]
    # The other release's cpp_ext has another key: its entry replaced the first one.
    cpp_ext = [n for n in names["0.7.4"] if n.startswith("flashinfer.jit.cpp_ext.")]
    assert len(cpp_ext) == 1 and cpp_ext[0] not in names["0.6.16"], names


def test_entries_of_a_removed_source_are_pruned(preload, tmp_path):
    """Issue 33: entries made for source files that are gone (an uninstalled FlashInfer, a
    removed environment) are removed when the cache is next written to."""
    cache = tmp_path / "cache"
    cache.mkdir()
    sites = {release: tmp_path / f"site-{release}" for release in ("0.6.16", "0.7.4")}
    names = {}
    for release, site in sites.items():
        subprocess.run(["cp", "-rs", flashinfer_path(release), str(site)], check=True)
        (tmp_path / release).mkdir()
        env = base_env(tmp_path / release, release, LD_PRELOAD=preload, PYTHONPATH=str(site),
                       DYNAFOLD_CACHE_DIR=str(cache))
        r = py(IMPORT, env)
        assert "OK True True" in r.stdout.decode(), r.stderr.decode()
        names[release] = {p.name for p in cache_files(cache)}
        if release == "0.6.16":
            # Its environment goes away before the next one writes to the cache.
            subprocess.run(["rm", "-rf", str(site)], check=True)
    first = {n for n in names["0.6.16"] if n.startswith("flashinfer.")}
    assert len(first) == 3, names
    assert not first & names["0.7.4"], names
    assert len([n for n in names["0.7.4"] if n.startswith("flashinfer.")]) == 3, names


def test_the_runtime_cache_lives_apart_from_the_development_environments(tmp_path):
    """Issue 19: scripts/test's 5 GB environments shared ~/.cache/dynafold with the runtime
    bytecode cache; they now live in ~/.cache/dynafold-dev."""
    import subprocess
    home = tmp_path / "home"
    home.mkdir()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run(["bash", "-c", "source scripts/lib/env.sh; echo \"$DYNAFOLD_CACHE\""],
                       cwd=root, capture_output=True, timeout=30,
                       env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    dev = r.stdout.decode().strip()
    runtime = str(home / ".cache" / "dynafold")
    assert dev == str(home / ".cache" / "dynafold-dev"), dev
    assert not (dev + "/").startswith(runtime + "/"), (dev, runtime)
