"""What the benchmarks' child processes start from (bench/run.py, memory.py, host_path.py): the
caller's environment without dynafold, and on a machine with no CUDA a stand-in nvcc for
FlashInfer's version checks to ask."""
import os


def unpatched_env():
    """The caller's environment less dynafold's variables and any preload: the run without."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("DYNAFOLD_") and k != "LD_PRELOAD"}


def fake_cuda_home(work):
    """A CUDA_HOME under `work` whose nvcc answers 12.8."""
    home = work / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n')
    nvcc.chmod(0o755)
    return home
