"""Traces FlashInfer's public ops with torch.compile(fullgraph=True) on fake CUDA tensors
(no GPU needed) and prints one JSON line: per case, whether it compiled, the graph's call
targets, the error otherwise, and the processes started and JIT files opened while tracing.

Run by test_ops.py with and without dynafold's preload; nothing here stands in for FlashInfer,
torch or Dynamo."""
import json
import os
import sys

import torch
import flashinfer
from torch._subclasses.fake_tensor import FakeTensorMode

from fullgraph_trace import trace

WORKSPACE = os.environ["FLASHINFER_WORKSPACE_BASE"]
# While a case is being compiled: its name, and what it started or opened.
tracing = [None]
events = {}


def audit(event, args):
    name = tracing[0]
    if name is None:
        return
    if event == "subprocess.Popen":
        events[name]["processes"].append(str(args[1])[:200])
    elif event == "open" and isinstance(args[0], str) and args[0].startswith(WORKSPACE):
        events[name]["jit_files"].append(args[0])


sys.addaudithook(audit)


def cases(t):
    x, w = t(4, 128), t(128)
    head, tokens = 64, 4
    q, k = t(tokens, 2 * head), t(tokens, head)
    cache = t(32, head, dtype=torch.float32)
    pos = torch.zeros(tokens, device="cuda", dtype=torch.int32)

    def fused(op):
        def f(x, r, w):
            op(x, r, w, 1e-6, enable_pdl=False)
            return x, r
        return f, (x, torch.empty_like(x), w)

    def rope_inplace(q, k):
        flashinfer.apply_rope_with_cos_sin_cache_inplace(pos, q, k, head, cache, True)
        return q, k

    return {
        "rmsnorm": (lambda x, w: flashinfer.rmsnorm(x, w, 1e-6, enable_pdl=False), (x, w)),
        "gemma_rmsnorm": (lambda x, w: flashinfer.gemma_rmsnorm(x, w, 1e-6, enable_pdl=False),
                          (x, w)),
        "fused_add_rmsnorm": fused(flashinfer.fused_add_rmsnorm),
        "gemma_fused_add_rmsnorm": fused(flashinfer.gemma_fused_add_rmsnorm),
        "apply_rope_with_cos_sin_cache": (
            lambda q, k: flashinfer.apply_rope_with_cos_sin_cache(pos, q, k, head, cache, True),
            (q, k)),
        "apply_rope_with_cos_sin_cache_inplace": (rope_inplace, (q, k)),
        # Its JIT loader sits outside the op: never built here, so the compile must stop with
        # dynafold's message saying what to do.
        "silu_and_mul": (lambda a: flashinfer.silu_and_mul(a, enable_pdl=False), (t(4, 256),)),
    }


def main():
    out = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        def t(*shape, dtype=torch.bfloat16):
            return torch.empty(*shape, device="cuda", dtype=dtype)

        for name, (fn, args) in cases(t).items():
            events[name] = {"processes": [], "jit_files": []}
            tracing[0] = name
            try:
                _, out[name] = trace(fn, *args, error_chars=2000)
            finally:
                tracing[0] = None
    if os.environ.get("FLASHINFER_LOGLEVEL", "0") != "0":
        # An eager call, to show FlashInfer's API logging still logs it (the kernel itself
        # cannot run on CPU tensors; the log line comes first).
        try:
            flashinfer.rmsnorm(torch.ones(2, 64), torch.ones(64), 1e-6, enable_pdl=False)
        except Exception:
            pass
    utils = sys.modules["flashinfer.utils"]

    def probe(x):
        return x

    print("RESULT " + json.dumps({
        "cases": out,
        "events": events,
        # FlashInfer's declarations still hand back FlashInfer's own function (eager path).
        "declared_is_own": utils.register_custom_op("t::probe", mutates_args=())(probe) is probe,
        "rmsnorm_op_runs": _rmsnorm_op_runs(),
        "woken": sorted(getattr(sys.modules.get("_dynafold_ops.engine.wake"), "_ops", {})),
    }), flush=True)


def _rmsnorm_op_runs():
    """What the woken rmsnorm operator's real implementation is: FlashInfer's function, still
    the very object its module holds (so eager calls are untouched)."""
    ops = getattr(sys.modules.get("_dynafold_ops.engine.wake"), "_ops", {})
    if "flashinfer::rmsnorm" not in ops:
        return None
    fn = ops["flashinfer::rmsnorm"][0][1]
    return {
        "file": fn.__code__.co_filename,
        "module_holds_it": getattr(sys.modules[fn.__module__], fn.__name__, None) is fn,
    }


main()
