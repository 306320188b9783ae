"""Issue 7, faults: an unreadable FlashInfer file, a read-only site-packages copy, a full or
read-only cache folder, an unwritable report folder, nvcc hanging or crashing. Each degrades
to what FlashInfer does on its own and the process lives. Where dynafold gives up (the file,
the report folder, a hanging nvcc) it says so in exactly one line; where it still folds and only
its cache is lost (read-only site-packages, cache faults) or the fold gives FlashInfer's own
error (a crashing nvcc) it prints nothing, and says per module at debug level what was not
written.

The tests run as root here, and root ignores file modes; "unreadable" and "read-only" cases run
the child with CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH/CAP_FOWNER dropped (setpriv), so the modes
apply to it as they would to an ordinary server account. "Full" is a file-size limit
(RLIMIT_FSIZE: writes fail with EFBIG as they fail with ENOSPC on a full disk; CPython ignores
SIGXFSZ)."""
import os
import re
import resource
import shutil
import subprocess
import textwrap

import pytest

from conftest import clean_env, run
from test_fold import PYTHON, answers, flashinfer_path, nvcc_script, release_text, toolkit

UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
IMPORT = (
    "import flashinfer.jit.fp4_quantization, flashinfer.jit.cpp_ext as c\n"
    "print('OK', c.is_cuda_version_at_least('12.8'), '__dynafold__' in vars(c))\n"
)
FOLDED = ("flashinfer.jit.cpp_ext", "flashinfer.jit.fp4_quantization", "flashinfer.quantization.fp4_quantization")
DYNAFOLD_LINE = re.compile(r"^dynafold\[\d+\] (\w+): (.*)$", re.M)


def lines(stderr, level=None):
    return [m for m in DYNAFOLD_LINE.findall(stderr) if level is None or m[0] == level]


def not_written(stderr):
    """The cache files the debug lines say were not written; each must be named once."""
    paths = [re.match(r"bytecode cache (\S+): not written", m).group(1)
             for _, m in lines(stderr, "DEBUG") if "not written" in m]
    assert len(paths) == len(set(paths)), paths
    return paths


def base_env(tmp_path, release="0.6.16", **extra):
    """Bytecode writing on, as on a server; dynafold's cache in this test's own folder unless
    `extra` says otherwise (None: unset)."""
    env = clean_env(
        PYTHONPATH=flashinfer_path(release),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def py(code, env, unprivileged=False, **kw):
    cmd = [str(PYTHON), "-c", code]
    return run(UNPRIVILEGED + cmd if unprivileged else cmd, env, **kw)


def shadow_flashinfer(tmp_path, release="0.6.16"):
    """A copy of the release's folder made of symlinks to its files, so single files and
    folder modes can be changed without a 100 MB copy."""
    dst = tmp_path / "site"
    subprocess.run(["cp", "-rs", flashinfer_path(release), str(dst)], check=True)
    return dst


def real_file(path):
    target = os.path.realpath(path)
    os.unlink(path)
    shutil.copyfile(target, path)


def test_unreadable_flashinfer_file_fails_as_flashinfer_does(preload, tmp_path):
    site = shadow_flashinfer(tmp_path)
    victim = site / "flashinfer" / "jit" / "cpp_ext.py"
    real_file(victim)
    victim.chmod(0)
    env = base_env(tmp_path, PYTHONPATH=str(site))
    plain = py(IMPORT, env, unprivileged=True)
    ours = py(IMPORT, dict(env, LD_PRELOAD=preload), unprivileged=True)
    assert plain.returncode == ours.returncode == 1
    last = lambda r: r.stderr.decode().strip().splitlines()[-1]  # noqa: E731
    assert last(ours) == last(plain) and "PermissionError" in last(plain)
    warns = lines(ours.stderr.decode())
    assert len(warns) == 1 and "flashinfer.jit.cpp_ext" in warns[0][1], ours.stderr.decode()


def test_read_only_site_packages(preload, tmp_path):
    """Nothing of dynafold's is written into FlashInfer's folder, so a read-only site-packages
    changes nothing: the rewritten modules' bytecode goes to dynafold's own cache."""
    site = shadow_flashinfer(tmp_path)
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    xdg = tmp_path / "xdg"
    env = base_env(tmp_path, PYTHONPATH=str(site), LD_PRELOAD=preload, DYNAFOLD_CACHE_DIR=None,
                   XDG_CACHE_HOME=str(xdg))
    r = py(IMPORT, env, unprivileged=True)
    assert r.returncode == 0 and "OK True True" in r.stdout.decode(), r.stderr.decode()
    assert r.stderr.decode() == ""
    r = py(IMPORT, dict(env, DYNAFOLD_LOG="debug"), unprivileged=True)
    assert not_written(r.stderr.decode()) == [], r.stderr.decode()
    cached = sorted(p.name.split(".cpython-")[0] for p in (xdg / "dynafold" / "bytecode").iterdir()
                    if p.name.startswith("flashinfer."))
    assert cached == sorted(FOLDED), cached
    assert not [p for p in site.rglob("*dynafold*") if not p.is_symlink()]


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_cache_folder_faults(preload, tmp_path, fault):
    cache = tmp_path / "cache"
    cache.mkdir()
    env = base_env(tmp_path, LD_PRELOAD=preload, DYNAFOLD_CACHE_DIR=str(cache))
    if fault == "read-only":
        cache.chmod(0o555)
        kw = {"unprivileged": True}
    else:
        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        kw = {"preexec_fn": limit}
    r = py(IMPORT, env, **kw)
    assert r.returncode == 0 and "OK True True" in r.stdout.decode(), r.stderr.decode()
    assert r.stderr.decode() == ""
    r = py(IMPORT, dict(env, DYNAFOLD_LOG="debug"), **kw)
    assert "OK True True" in r.stdout.decode(), r.stderr.decode()
    paths = not_written(r.stderr.decode())
    # Read-only: every cache file, the three rewritten modules among them; full: those
    # larger than the limit.
    modules = {os.path.basename(p).split(".cpython-")[0] for p in paths}
    if fault == "read-only":
        assert set(FOLDED) <= modules, paths
    else:
        assert len(paths) >= 2, paths
    if fault == "full":
        # Only whole files, no temp files left behind by a failed write.
        assert all(p.stat().st_size <= 2048 and p.suffix == ".pyc" for p in cache.iterdir())
    else:
        assert list(cache.iterdir()) == []


BREAK = textwrap.dedent(
    """
    import torch
    def f(x):
        print("break")
        return x + 1
    torch.compile(f, backend="eager")(torch.ones(2))
    print("OK")
    """
)


def test_unwritable_report_folder(preload, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir(mode=0o555)
    reports.chmod(0o555)
    env = base_env(tmp_path, LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))
    r = py(BREAK, env, unprivileged=True)
    assert r.returncode == 0 and "OK" in r.stdout.decode(), r.stderr.decode()
    warns = lines(r.stderr.decode())
    assert len(warns) == 1 and "report" in warns[0][1], r.stderr.decode()
    assert list(reports.iterdir()) == []


@pytest.mark.parametrize("kind", ["hangs", "crashes"])
def test_nvcc_hanging_or_crashing(preload, tmp_path, kind):
    body = "sleep 600" if kind == "hangs" else 'kill -SEGV $$'
    home = toolkit(tmp_path, "bad", nvcc_script(body))
    extra = {"DYNAFOLD_NVCC_TIMEOUT": "2"}
    if kind == "crashes":
        # Same answers as FlashInfer itself gives with this nvcc, for every question.
        want, _ = answers("0.6.16", {"CUDA_HOME": home})
        got, err = answers("0.6.16", {"CUDA_HOME": home}, preload=preload, extra=extra)
        assert got["answers"] == want["answers"], (got, want)
        assert got["subprocesses_after_import"] == 0
        assert lines(err) == [], err
        return
    # A hanging nvcc: the import finishes (FlashInfer itself would hang at the first call).
    env = base_env(tmp_path, LD_PRELOAD=preload, CUDA_HOME=home, **extra)
    code = "import flashinfer.jit.fp4_quantization, flashinfer.jit.cpp_ext as c\nprint('OK', '__dynafold__' in vars(c))\n"
    r = py(code, env, timeout=120)
    assert r.returncode == 0 and "OK False" in r.stdout.decode(), r.stderr.decode()
    warns = lines(r.stderr.decode())
    assert len(warns) == 1 and "nvcc" in warns[0][1] and "flashinfer.jit.cpp_ext" in warns[0][1], r.stderr.decode()


def test_overhead_accounts_for_dynafold_time(preload, tmp_path):
    """`sys.meta_path[0].overhead()`, which the start-up benchmark reports: every part is
    there, the loader's share is counted once the targets are imported, the total adds up."""
    code = IMPORT + (
        "import sys\n"
        "o = sys.meta_path[0].overhead()\n"
        "parts = [v for k, v in o.items() if k.endswith('_ms') and k != 'total_ms']\n"
        "print('OV', sorted(o), o['loader_ms'] > 0, o['find_spec_calls'] > 10,\n"
        "      abs(o['total_ms'] - sum(parts)) < 1e-6, min(o.values()) >= 0)\n"
    )
    r = py(code, base_env(tmp_path, LD_PRELOAD=preload))
    out = r.stdout.decode()
    assert "OK True True" in out, r.stderr.decode()
    assert ("OV ['find_spec_calls', 'install_ms', 'loader_ms', 'observer_ms', 'ops_ms', "
            "'total_ms'] True True True True") in out, out
