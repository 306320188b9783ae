"""The compile the demo runs, as a model would: `fullgraph` branches on FlashInfer's
is_cuda_version_at_least("12.8") under torch.compile(fullgraph=True); `breaks` calls
FlashInfer's fp4 JIT-spec factory under fullgraph=False, which still breaks (datetime.now)."""
import sys

import torch
from flashinfer.jit.cpp_ext import is_cuda_version_at_least
from flashinfer.jit.fp4_quantization import gen_fp4_quantization_module


def pick_kernel(x):
    if is_cuda_version_at_least("12.8"):
        return x * 2
    return x - 1


def build_fp4(x):
    gen_fp4_quantization_module([], "100")
    return x + 1


mode = sys.argv[1] if len(sys.argv) > 1 else "fullgraph"
if mode == "fullgraph":
    y = torch.compile(pick_kernel, fullgraph=True, backend="eager")(torch.ones(2))
    print(f"fullgraph=True compile OK: pick_kernel(ones) = {y.tolist()}")
else:
    y = torch.compile(build_fp4, fullgraph=False, backend="eager")(torch.ones(2))
    print(f"fullgraph=False compile OK with graph breaks: build_fp4(ones) = {y.tolist()}")
