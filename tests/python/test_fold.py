"""Issue 3, through the real preload path: FlashInfer's CUDA checks, folded at import time,
answer exactly what unmodified FlashInfer answers in the same environment, without starting
a process after import."""
import concurrent.futures
import os
import pathlib
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, clean_env, run, result_of

CACHE = pathlib.Path(os.environ.get("DYNAFOLD_CACHE", pathlib.Path.home() / ".cache/dynafold-dev"))
PYTHON = CACHE / f"venv-torch{os.environ.get('DYNAFOLD_TORCH', '2.15.0')}" / "bin" / "python"
RELEASES = os.environ.get("DYNAFOLD_FLASHINFER_RELEASES", "0.5.3 0.6.16 0.7.4").split()
# A 0.6.x release older than 0.6.16 whose layouts differ (scripts/lib/env.sh OLD_LAYOUT_RELEASE):
# only the tests of what those layouts touch run on it.
OLD_LAYOUT_RELEASE = os.environ.get("DYNAFOLD_OLD_LAYOUT_RELEASE", "0.6.7.post3")
HELPER = ROOT / "tests" / "python" / "helpers" / "cuda_answers.py"


def nvcc_script(body):
    # Every run leaves a line in $NVCC_CALLS when the test sets it: proof that a process ran.
    return '#!/bin/sh\n[ -z "$NVCC_CALLS" ] || echo run >> "$NVCC_CALLS"\n' + body + "\n"


def release_text(v):
    return nvcc_script(
        'echo "nvcc: NVIDIA (R) Cuda compiler driver"\n'
        f'echo "Cuda compilation tools, release {v}, V{v}.1"\n'
        f'echo "Build cuda_{v}.r{v}/compiler.0_0"'
    )


def toolkit(tmp, name, script):
    home = tmp / name
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(script)
    nvcc.chmod(0o755)
    return str(home)


def flashinfer_path(version):
    p = CACHE / "flashinfer" / version
    assert (p / ".complete").exists(), f"{p} missing: run scripts/test"
    return str(p)


def flashinfer_env(version, tmp_path, **extra):
    """A clean environment importing FlashInfer `version`, its nvcc a stand-in saying CUDA 12.8
    and its JIT workspace under `tmp_path`."""
    return clean_env(PYTHONPATH=flashinfer_path(version),
                     CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                     FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"), **extra)


BASE_PATH = "/usr/bin:/bin"


def scenarios(tmp):
    """name -> extra environment. Built fresh per test: each has its own fake toolkit."""
    t = lambda n, s: toolkit(tmp, n, s)  # noqa: E731
    on_path = t("onpath", release_text("13.0"))
    return {
        "CUDA_HOME 12.8": {"CUDA_HOME": t("c128", release_text("12.8"))},
        "CUDA_HOME 11.8": {"CUDA_HOME": t("c118", release_text("11.8"))},
        "CUDA_HOME 12.6": {"CUDA_HOME": t("c126", release_text("12.6"))},
        "CUDA_HOME 13.0": {"CUDA_HOME": t("c130", release_text("13.0"))},
        "CUDA_PATH only": {"CUDA_PATH": t("cpath", release_text("12.6"))},
        "empty CUDA_HOME, CUDA_PATH": {"CUDA_HOME": "", "CUDA_PATH": t("cpath2", release_text("12.8"))},
        "nvcc only on PATH": {"PATH": on_path + "/bin:" + BASE_PATH},
        "no nvcc, CUDA torch": {},
        "nvcc exits non-zero": {"CUDA_HOME": t("fail", nvcc_script("echo broken >&2; exit 1"))},
        "nvcc prints garbage": {"CUDA_HOME": t("garbage", nvcc_script("echo 'hello world'"))},
        "nvcc not executable": {"CUDA_HOME": toolkit(tmp, "noexec", release_text("12.8"))},
    }


def answers(release, env, preload=None, extra=None):
    e = clean_env(PATH=BASE_PATH, PYTHONPATH=flashinfer_path(release))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        e.pop(var, None)
    e.update(env)
    if preload:
        e["LD_PRELOAD"] = preload
    e.update(extra or {})
    e = {k: v for k, v in e.items() if v is not None}  # None: leave the variable unset
    with tempfile.TemporaryDirectory() as calls:
        e["NVCC_CALLS"] = os.path.join(calls, "nvcc")
        r = run([str(PYTHON), str(HELPER)], e, timeout=300)
    return result_of(r), r.stderr.decode()


# FlashInfer raises PermissionError from every call here; a folded module could only raise it
# at import, which FlashInfer does not, so dynafold leaves the module as it is and says why.
NOT_FOLDED = {"nvcc not executable": "get_cuda_version cannot be folded: get_cuda_version would raise"}
# No nvcc that can run: FlashInfer still tries to start one, but no fake nvcc can count it.
NO_NVCC_RUNS = {"no nvcc, CUDA torch", "nvcc not executable"}


@pytest.mark.parametrize("release", RELEASES)
def test_folded_answers_equal_flashinfer(preload, release, tmp_path):
    cases = scenarios(tmp_path)
    os.chmod(pathlib.Path(cases["nvcc not executable"]["CUDA_HOME"]) / "bin" / "nvcc", 0o644)
    # 22 independent interpreters, each importing torch and FlashInfer: two at a time (each
    # run has its own toolkit and its own nvcc call log), as CI's two cores allow.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = {name: (pool.submit(answers, release, env), pool.submit(answers, release, env,
                                                                       preload))
                for name, env in cases.items()}
    for name in cases:
        plain, _ = runs[name][0].result()
        ours, err = runs[name][1].result()
        assert ours["answers"] == plain["answers"], (name, ours, plain)
        assert ours["version_type"] == plain["version_type"], name
        assert plain["dynafold"] is None
        # The baseline: asked after import, unmodified FlashInfer starts a process, and where
        # an nvcc can run, that nvcc really runs.
        assert plain["subprocesses_after_import"] >= 1, (name, plain)
        assert (plain["nvcc_runs_after_import"] >= 1) == (name not in NO_NVCC_RUNS), (name, plain)
        assert plain["nvcc_runs_during_import"] == 0, (name, plain)
        warnings = [line for line in err.splitlines() if line.startswith("dynafold[")]
        if name in NOT_FOLDED:
            assert ours["dynafold"] is None, (name, ours)
            assert len(warnings) == 1, (name, err)
            assert "flashinfer.jit.cpp_ext: loaded unchanged:" in warnings[0], (name, err)
            assert NOT_FOLDED[name] in warnings[0], (name, err)
            continue
        # Folded: nvcc ran once, while importing (dynafold's probe), and never again; no
        # process starts when FlashInfer's checks are asked.
        assert ours["dynafold"] is not None, (name, err)
        assert warnings == [] and "DynafoldLoader" not in err, (name, err)
        assert ours["subprocesses_after_import"] == 0, (name, ours)
        assert ours["nvcc_runs_after_import"] == 0, (name, ours)
        assert ours["nvcc_runs_during_import"] == (0 if name in NO_NVCC_RUNS else 1), (name, ours)


def test_dynafold_metadata_says_what_and_where(preload, tmp_path):
    home = toolkit(tmp_path, "c", release_text("12.8"))
    ours, _ = answers(RELEASES[-1], {"CUDA_HOME": home}, preload)
    info = ours["dynafold"]
    rules = {r["rule"] for r in info["rules"]}
    assert {"cpp_ext.get_cuda_path", "cpp_ext.get_cuda_version", "cpp_ext.is_cuda_version_at_least"} <= rules
    assert info["values"]["__dynafold_cuda_version__"]["value"] == "12.8"
    assert "nvcc --version" in info["values"]["__dynafold_cuda_version__"]["source"]
    assert info["values"]["__dynafold_cuda_path__"] == {"value": home, "source": "CUDA_HOME"}
    assert ours["version_type"] == "packaging.version"


def test_hanging_nvcc_never_hangs_the_import(preload, tmp_path):
    home = toolkit(tmp_path, "hang", nvcc_script("sleep 600"))
    code = "import time; t = time.time(); import flashinfer.jit.cpp_ext as c; print('IMPORT', time.time() - t, hasattr(c, '__dynafold__'))"
    e = clean_env(PATH=BASE_PATH, PYTHONPATH=flashinfer_path(RELEASES[-1]), CUDA_HOME=home,
                  LD_PRELOAD=preload, DYNAFOLD_NVCC_TIMEOUT="2")
    t = time.time()
    r = run([str(PYTHON), "-c", code], e, timeout=120)
    assert time.time() - t < 60
    line = [out for out in r.stdout.decode().splitlines() if out.startswith("IMPORT")][0]
    assert line.endswith("False"), line  # left to FlashInfer, which would hang when called
    assert "loaded unchanged" in r.stderr.decode() and "timed out" in r.stderr.decode().lower()


def test_hostile_override_never_executes(preload, tmp_path):
    marker = tmp_path / "pwned"
    home = toolkit(tmp_path, "c", release_text("12.6"))
    hostile = f'12.8"); import os; os.system("touch {marker}")#'
    ours, err = answers(RELEASES[-1], {"CUDA_HOME": home}, preload, {"DYNAFOLD_CUDA_VERSION": hostile})
    assert not marker.exists()
    # One line naming the setting and what is used instead (`run`'s own wording, src/config.rs).
    assert "DYNAFOLD_CUDA_VERSION" in err and "using the default" in err
    assert ours["answers"]["get_cuda_version"] == ["value", "Version", "12.6"]


def test_valid_override_wins(preload, tmp_path):
    home = toolkit(tmp_path, "c", release_text("12.6"))
    ours, _ = answers(RELEASES[-1], {"CUDA_HOME": home}, preload, {"DYNAFOLD_CUDA_VERSION": "12.9"})
    assert ours["answers"]["get_cuda_version"] == ["value", "Version", "12.9"]
    assert ours["dynafold"]["values"]["__dynafold_cuda_version__"]["source"] == "DYNAFOLD_CUDA_VERSION"


def test_no_poisoning_of_the_normal_pycache(preload, tmp_path):
    # dynafold's default cache folder, with bytecode writing on, in a copy of the release made
    # of symlinks (the shared release folder stays untouched).
    site = tmp_path / "site"
    subprocess.run(["cp", "-rs", flashinfer_path(RELEASES[-1]), str(site)], check=True)
    xdg = tmp_path / "xdg"
    defaults = {"PYTHONPATH": str(site), "DYNAFOLD_CACHE_DIR": None, "PYTHONDONTWRITEBYTECODE": None,
                "XDG_CACHE_HOME": str(xdg)}
    home = toolkit(tmp_path, "c", release_text("12.8"))
    ours, _ = answers(RELEASES[-1], {"CUDA_HOME": home}, preload, defaults)
    assert ours["dynafold"] is not None
    assert list((xdg / "dynafold" / "bytecode").glob("flashinfer.jit.cpp_ext.*.dynafold-*.pyc")), \
        "the rewritten module was not cached: nothing here is tested"
    # Nothing of dynafold's in FlashInfer's tree (pip uninstall would leave it behind).
    assert not [p for p in site.rglob("*dynafold*") if not p.is_symlink()]
    pycache = site / "flashinfer" / "jit" / "__pycache__"
    plain, _ = answers(RELEASES[-1], {"CUDA_HOME": home}, extra=defaults)
    assert plain["dynafold"] is None
    assert plain["nvcc_runs_after_import"] >= 1, \
        "unmodified FlashInfer no longer runs nvcc: the rewrite leaked into a cache"
    normal = [p for p in pycache.glob("cpp_ext*.pyc") if "dynafold" not in p.name]
    assert normal, list(pycache.iterdir())
    for pyc in normal:
        assert b"__dynafold" not in pyc.read_bytes(), pyc
