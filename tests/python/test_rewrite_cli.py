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
