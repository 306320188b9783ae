"""dynafold's fake for fp4_quantize's cute-dsl kernel (its record in hooks/ops/registry/quantization.py) against FlashInfer's own
Python: `_fp4_quantize_cute_dsl` -> `nvfp4_quantize_cute_dsl` / `mxfp4_quantize_cute_dsl`, run for
real on fake CUDA tensors (`FakeTensorMode`) over a grid of sizes, NVFP4 and MXFP4, the three
scale layouts, with and without FLASHINFER_NVFP4_QUANTIZE_USE_TMA=1, as an SM100 and an SM107.
Prints one JSON line: the cases run, the kernel paths FlashInfer's code took, and every case
whose results' shapes, dtypes or strides differ from the fake's.

Needs nvidia-cutlass-dsl (the kernel modules import `cutlass`); run by test_cute_dsl_fake.py in
that environment, one FlashInfer release on PYTHONPATH. Stand-ins, only for what needs a GPU,
each named: the compiled-kernel getters (`_get_compiled_kernel_*`: the CuTe DSL compile for the
device) return a kernel that launches nothing; the SM count (`get_num_sm` /
`get_device_sm_count`) answers 148; `flashinfer.utils.get_compute_capability` answers the case's
(10, 0) or (10, 7). Everything that decides the results' sizes (padding, the TMA and tile
choices, allocation, trimming, reshape) is FlashInfer's own code.
"""
import inspect
import json
import os
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashinfer.utils
from flashinfer.quantization import fp4_quantization
from flashinfer.quantization.kernels import mxfp4_quantize, nvfp4_quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_source import engine

op_fakes = engine("engine.fakes")

KERNEL = fp4_quantization._fp4_quantize_cute_dsl
FAKE = op_fakes.override("flashinfer::fp4_quantize_cute_dsl", KERNEL)
# Sizes: around the 128-row tile, the TMA crossovers (m >= 1024, k % 512 == 0, and with the
# override log2 m + log2 k >= 25), m = 0, and one 3-D input.
SIZES = [(m, k) for m in (0, 1, 5, 127, 128, 129, 1024, 4096) for k in (64, 512, 4096)] + [
    (m, 8192) for m in (4096, 8193, 8200, 16385)] + [((1, 5), 64)]
FORMATS = {"nvfp4": (16, False), "mxfp4": (32, True)}
LAYOUTS = {"128x4": (True, False), "8x4": (True, True), "linear": (False, False)}

capability = [(10, 0)]
paths = {}


def getter(name):
    def compiled(*args, **kwargs):
        paths[name] = paths.get(name, 0) + 1
        return (lambda *a, **k: None), 4  # (kernel, rows per block or tiles)
    return compiled


flashinfer.utils.get_compute_capability = lambda device=None: capability[0]
for module in (nvfp4_quantize, mxfp4_quantize):
    for name in list(vars(module)):
        if name.startswith("_get_compiled_kernel_"):
            setattr(module, name, getter(name))
    for name in ("get_num_sm", "get_device_sm_count"):
        if hasattr(module, name):
            setattr(module, name, lambda device=None: 148)


def describe(tensors):
    return [[list(t.shape), str(t.dtype), list(t.stride())] for t in tensors]


def main():
    takes_recipe = "nvfp4_4over6" in inspect.signature(KERNEL).parameters
    cases, differ = 0, []
    for cc in ((10, 0), (10, 7)):
        capability[0] = cc
        for tma in (None, "1"):
            os.environ.pop("FLASHINFER_NVFP4_QUANTIZE_USE_TMA", None)
            if tma:
                os.environ["FLASHINFER_NVFP4_QUANTIZE_USE_TMA"] = tma
            for fmt, (vec, ue8m0) in FORMATS.items():
                for layout, (swizzled, is_8x4) in LAYOUTS.items():
                    for m, k in SIZES:
                        shape = (*m, k) if isinstance(m, tuple) else (m, k)
                        with FakeTensorMode(allow_non_fake_inputs=True):
                            x = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
                            scale = torch.ones(1, device="cuda") if fmt == "nvfp4" else None
                            args = [x, scale, vec, ue8m0, swizzled, is_8x4, False]
                            args += [None] if takes_recipe else []
                            real, fake = describe(KERNEL(*args)), describe(FAKE(*args))
                        cases += 1
                        if real != fake:
                            differ.append({"cc": cc, "tma": tma, "format": fmt, "layout": layout,
                                           "shape": shape, "real": real, "fake": fake})
    print("RESULT " + json.dumps({"cases": cases, "paths": paths, "differ": differ}), flush=True)


main()
sys.exit(0)
