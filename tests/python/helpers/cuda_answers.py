"""Prints, as JSON, what flashinfer.jit.cpp_ext answers in this process: run once with and once
without dynafold in the same environment, the two outputs must be equal."""
import json
import os
import sys

AT_LEAST = ["11.8", "12.0", "12.6", "12.8", "12.9", "13.0", "13.2", "14"]


def answer(f, *args):
    try:
        v = f(*args)
        return ["value", type(v).__name__, str(v)]
    except Exception as e:  # the exception itself is part of the answer
        return ["raise", type(e).__name__, str(e)]


def nvcc_runs():
    """How many times a fake nvcc ran in this process tree: each appends a line to
    $NVCC_CALLS (the audit hook below sees only Python's own process starts)."""
    try:
        with open(os.environ["NVCC_CALLS"]) as f:
            return len(f.read().splitlines())
    except (KeyError, FileNotFoundError):
        return 0


import flashinfer.jit.cpp_ext as c  # noqa: E402

nvcc_at_import = nvcc_runs()
popens = []
sys.addaudithook(lambda ev, args: popens.append(args[0]) if ev == "subprocess.Popen" else None)
out = {
    "get_cuda_path": answer(c.get_cuda_path) if hasattr(c, "get_cuda_path") else None,
    "get_cuda_version": answer(c.get_cuda_version),
    "at_least": {x: answer(c.is_cuda_version_at_least, x) for x in AT_LEAST},
}
result = {
    "answers": out,
    "version_type": f"{type(c.get_cuda_version()).__module__}" if out["get_cuda_version"][0] == "value" else None,
    "subprocesses_after_import": len(popens),
    "nvcc_runs_during_import": nvcc_at_import,
    "nvcc_runs_after_import": nvcc_runs() - nvcc_at_import,
    "dynafold": getattr(c, "__dynafold__", None),
}
print("RESULT " + json.dumps(result))
