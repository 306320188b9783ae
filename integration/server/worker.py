"""One worker, as an SGLang scheduler process: at start-up it compiles a function that takes
FlashInfer's CUDA-version branch under torch.compile(fullgraph=True) (CPU, eager backend),
then FlashInfer's fp4 JIT-spec path under fullgraph=False, then answers requests."""
import os
import sys
import traceback


def version_branch(x):
    # SGLang picks kernels like this; without dynafold each call starts nvcc at trace time.
    from flashinfer.jit.cpp_ext import get_cuda_version, is_cuda_version_at_least

    if is_cuda_version_at_least("12.8"):
        return x * get_cuda_version().major
    return x - 1


def fp4_spec(x):
    # FlashInfer's fp4 module factory: the version checks fold, a datetime.now() breaks.
    from flashinfer.jit.fp4_quantization import gen_fp4_quantization_module

    gen_fp4_quantization_module([], "100")
    return x + 1


def start():
    """Compiles at start-up; returns (status dict, compiled function or None)."""
    import torch

    status = {"pid": os.getpid(), "first_finder": type(sys.meta_path[0]).__name__}
    try:
        import flashinfer.jit.cpp_ext as cpp_ext

        status["dynafold"] = hasattr(cpp_ext, "__dynafold__")
        compiled = torch.compile(version_branch, fullgraph=True, backend="eager")
        status["warmup"] = compiled(torch.ones(2)).tolist()
        torch.compile(fp4_spec, fullgraph=False, backend="eager")(torch.ones(2))
        status["ok"] = True
        return status, compiled
    except Exception as e:  # the start-up failure is the worker's answer
        status["ok"] = False
        status["error"] = f"{type(e).__name__}: {e}"
        status["traceback"] = traceback.format_exc()[-4000:]
        return status, None


def main(conn):
    """Runs in the spawned process: one status message, then one reply per request until
    told to stop or the server goes away."""
    import torch

    parent = os.getppid()
    status, compiled = start()
    conn.send(status)
    if compiled is None:
        return
    while True:
        # Poll so a server that died without saying goodbye (SIGKILL) does not leave us behind.
        if not conn.poll(0.5):
            if os.getppid() != parent:
                return
            continue
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        conn.send({"pid": os.getpid(), "y": compiled(torch.tensor([float(msg)])).tolist()})
