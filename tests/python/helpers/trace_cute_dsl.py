"""Traces `flashinfer.fp4_quantize(..., backend="cute-dsl")` with torch.compile(fullgraph=True)
on fake CUDA tensors (no GPU needed) and prints one JSON line: per case, whether it compiled,
the graph's call targets and the results' shapes, dtypes and strides as traced, or the error;
and the processes started while tracing.

Run by test_ops.py with and without dynafold's preload. One stand-in, named: the compute
capability FlashInfer asks of the input's device (`flashinfer.utils.get_compute_capability`,
which needs a GPU) answers (10, 0), an SM100, where SGLang selects this backend. The CuTe DSL
kernels themselves are never reached: they need a GPU and nvidia-cutlass-dsl.
"""
import json
import sys

import torch
import flashinfer
from torch._subclasses.fake_tensor import FakeTensorMode

from fullgraph_trace import trace

# -- the stand-in: an SM100's compute capability --------------------------------------------
for name in ("flashinfer.utils", flashinfer.fp4_quantize.__module__):
    module = sys.modules[name]
    if hasattr(module, "get_compute_capability"):
        module.get_compute_capability = lambda device: (10, 0)

tracing = [None]
processes = []
sys.addaudithook(lambda ev, a: processes.append(str(a[1])[:200])
                 if ev == "subprocess.Popen" and tracing[0] else None)


def cases(t):
    scale = torch.ones(1, device="cuda", dtype=torch.float32)
    x, x3 = t(5, 64), t(2, 3, 64)

    def quantize(**options):
        return lambda x: flashinfer.fp4_quantize(x, scale, backend="cute-dsl", enable_pdl=False,
                                                 **options)

    return {
        "nvfp4_128x4": (quantize(), (x,)),
        "nvfp4_8x4": (quantize(is_sf_8x4_layout=True), (x,)),
        "nvfp4_linear": (quantize(is_sf_swizzled_layout=False), (x,)),
        "nvfp4_3d": (quantize(), (x3,)),
        "mxfp4_128x4": (quantize(sf_vec_size=32, sf_use_ue8m0=True), (x,)),
        "mxfp4_linear": (quantize(sf_vec_size=32, sf_use_ue8m0=True,
                                  is_sf_swizzled_layout=False), (x,)),
    }


def main():
    out = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        def t(*shape):
            return torch.empty(*shape, device="cuda", dtype=torch.bfloat16)

        for name, (fn, args) in cases(t).items():
            tracing[0] = name
            try:
                result, out[name] = trace(fn, *args, error_chars=1500)
            finally:
                tracing[0] = None
            if result is not None:
                out[name]["results"] = [[list(r.shape), str(r.dtype), list(r.stride())]
                                        for r in result]
    print("RESULT " + json.dumps({"cases": out, "processes": processes}), flush=True)


main()
