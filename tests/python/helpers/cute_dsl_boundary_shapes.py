"""dynafold's fakes for its other CuTe DSL boundaries (their records in hooks/ops/registry/)
against FlashInfer's own Python: `mxfp4_quantize_cute_dsl`, `mxfp8_quantize_cute_dsl`,
`silu_and_mul_nvfp4_quantize_cute_dsl`, `rmsnorm_fp4quant` and `add_rmsnorm_fp4quant`, run for
real on fake CUDA tensors over 2-D and 3-D sizes, every scale layout, alignment, block size and
scale format, as an SM100. Prints one JSON line: the cases run and every case whose results'
shapes, dtypes or strides differ from the fake's.

Run as cute_dsl_shapes.py is (test_cute_dsl_fake.py), with the same stand-ins, each only for
what needs a GPU: the compiled-kernel getters (`_get_compiled_kernel*`) return a kernel that
launches nothing (callable itself, as the norms' getters return, or unpacked with a block unit,
as the quantizers'); the SM count answers 148 and the SM version 100; the device check of the
norms passes; the device's shared memory per block (the norms' cluster size) is the B200's.
"""
import importlib
import inspect
import json
import os
import sys
import types

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashinfer.utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_source import engine

# Each boundary's fake, by its declared name.
FAKES = engine("registry").BY_NAME


def fake_of(name):
    return FAKES[f"flashinfer::{name}"][0]


MXFP4 = importlib.import_module("flashinfer.quantization.kernels.mxfp4_quantize")
MXFP8 = importlib.import_module("flashinfer.quantization.kernels.mxfp8_quantize")
NVFP4 = importlib.import_module("flashinfer.quantization.kernels.nvfp4_quantize")
NORM = importlib.import_module("flashinfer.cute_dsl.rmsnorm_fp4quant")
ADD_NORM = importlib.import_module("flashinfer.cute_dsl.add_rmsnorm_fp4quant")


class Compiled(tuple):
    def __call__(self, *args, **kwargs):
        return None


def compiled(*args, **kwargs):
    return Compiled((lambda *a, **k: None, 4))


flashinfer.utils.get_compute_capability = lambda device=None: (10, 0)
torch.cuda.get_device_properties = lambda *a: types.SimpleNamespace(
    shared_memory_per_block_optin=232448, multi_processor_count=148)
torch.cuda.current_device = lambda: 0
ANSWERS = {"get_num_sm": lambda device=None: 148, "get_device_sm_count": lambda device=None: 148,
           "get_sm_version": lambda device=None: 100,
           "_require_cute_dsl_arch_for": lambda device=None: None}
for module in (MXFP4, MXFP8, NVFP4, NORM, ADD_NORM):
    for name in list(vars(module)):
        if name.startswith("_get_compiled_kernel"):
            setattr(module, name, compiled)
        elif name in ANSWERS:
            setattr(module, name, ANSWERS[name])

SHAPES = [(1, 64), (5, 128), (127, 512), (128, 256), (129, 4096), (2, 3, 256)]
cases, differ = 0, []


def describe(tensors):
    return [[list(t.shape), str(t.dtype), list(t.stride())] for t in tensors]


def check(name, fn, fake, **kwargs):
    global cases
    bound = inspect.signature(fn).bind(**kwargs)
    bound.apply_defaults()
    real, ours = describe(fn(**kwargs)), describe(fake(dict(bound.arguments)))
    cases += 1
    if real != ours:
        differ.append({"op": name, "args": {k: list(v.shape) if isinstance(v, torch.Tensor)
                                            else v for k, v in kwargs.items()},
                       "real": real, "fake": ours})


def main():
    recipe = ({"nvfp4_4over6": None} if "nvfp4_4over6" in
              inspect.signature(NVFP4.silu_and_mul_nvfp4_quantize_cute_dsl).parameters else {})
    with FakeTensorMode(allow_non_fake_inputs=True):
        def t(*shape, dtype=torch.bfloat16):
            return torch.empty(*shape, device="cuda", dtype=dtype)
        for shape in SHAPES:
            for layout in (0, 1, 2):
                check("mxfp4", MXFP4.mxfp4_quantize_cute_dsl, fake_of("mxfp4_quantize_cute_dsl"),
                      input=t(*shape), sf_layout=layout, enable_pdl=False)
                check("silu_nvfp4", NVFP4.silu_and_mul_nvfp4_quantize_cute_dsl,
                      fake_of("silu_and_mul_nvfp4_quantize_cute_dsl"),
                      input=t(*shape[:-1], 2 * shape[-1]),
                      global_scale=t(1, dtype=torch.float32), sf_layout=layout,
                      enable_pdl=False, **recipe)
            for swizzled, is_8x4 in ((True, False), (True, True), (False, False)):
                for alignment in (32, 128):
                    check("mxfp8", MXFP8.mxfp8_quantize_cute_dsl,
                          fake_of("mxfp8_quantize_cute_dsl"), input=t(*shape),
                          is_sf_swizzled_layout=swizzled, alignment=alignment,
                          enable_pdl=False, is_sf_8x4_layout=is_8x4)
            for block_size in (16, 32):
                for swizzled in (False, True):
                    for scale_format in (None, "e4m3", "ue8m0"):
                        common = dict(block_size=block_size, is_sf_swizzled_layout=swizzled,
                                      scale_format=scale_format, enable_pdl=False)
                        check("rmsnorm_fp4quant", NORM.rmsnorm_fp4quant,
                              fake_of("rmsnorm_fp4quant"), input=t(*shape),
                              weight=t(shape[-1]), **common)
                        check("add_rmsnorm_fp4quant", ADD_NORM.add_rmsnorm_fp4quant,
                              fake_of("add_rmsnorm_fp4quant"), input=t(*shape),
                              residual=t(*shape), weight=t(shape[-1]), **common)
    print("RESULT " + json.dumps({"cases": cases, "differ": differ}), flush=True)


main()
sys.exit(0)
