"""`dynafold rewrite --diff`: the dry run honours the same settings as the preload library.

Issue 19: it waited a hard-coded 10 s for `nvcc --version`, whatever DYNAFOLD_NVCC_TIMEOUT
said."""
import time

from conftest import DYNAFOLD, clean_env, run
from test_fold import flashinfer_path, nvcc_script, toolkit


def test_rewrite_honours_the_nvcc_timeout(tmp_path):
    # An nvcc that hangs: only the timeout ends the probe.
    cuda = toolkit(tmp_path, "cuda", nvcc_script("sleep 30"))
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    env = clean_env(CUDA_HOME=cuda, DYNAFOLD_NVCC_TIMEOUT="1", PATH="/usr/bin:/bin")
    started = time.monotonic()
    r = run([str(DYNAFOLD), "rewrite", "--diff", source, "--module", "flashinfer.jit.cpp_ext"],
            env, timeout=60)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr.decode()
    assert took < 8, f"took {took:.1f} s: DYNAFOLD_NVCC_TIMEOUT=1 not honoured"


def test_rewrite_file_is_the_plain_form_with_a_hint_when_no_version_is_known(tmp_path):
    """`rewrite FILE`: the module read from the path, the diff named as a package path (not
    `a//abs/path`), and, when nothing folds for want of a CUDA version, what to pass."""
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    env = clean_env(PATH="/usr/bin:/bin", CUDA_HOME=str(tmp_path / "none"))
    r = run([str(DYNAFOLD), "rewrite", source, "--cuda-version", "12.8"], env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().splitlines()
    assert out[:2] == ["--- a/flashinfer/jit/cpp_ext.py", "+++ b/flashinfer/jit/cpp_ext.py"], out[:2]
    r = run([str(DYNAFOLD), "rewrite", source], env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "would be loaded unchanged" in out and "hint: " in out and "--cuda-version" in out, out
