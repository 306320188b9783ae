"""Issue 33, item 8: the program reported not to exit. A graph holding a woken FlashInfer operator
(`fp4_quantize`'s kernel, `dynafold_flashinfer::fp4_quantize_sm100`) compiled by inductor called
from a Python function backend, which warms inductor's compile-worker pool (the sidecar process
and its fork workers) as the string backend does not; run by test_compile_worker_exit.py with
the pool forced and the same TORCHINDUCTOR_CACHE_DIR run after run. Prints one RESULT line, then
exits: what the test times is the exit.

Stand-ins, only where this machine has no GPU (as in sglang_compile.py): the compute capability
of a CPU tensor answers (9, 0), and the JIT build and load of the fp4 module give a CPU module
(a NVFP4 reference quantizer in the linear scale layout), opaque to Dynamo as the built module's
tvm_ffi function is.
"""
import json
import sys
import types

import torch

import flashinfer
import nvfp4
from flashinfer.jit import core as jit_core
from torch._dynamo.backends.registry import lookup_backend

FP4_MODULE = sys.modules[flashinfer.fp4_quantize.__module__]
_flashinfer_capability = FP4_MODULE.get_compute_capability
FP4_MODULE.get_compute_capability = (
    lambda device: (9, 0) if device.type == "cpu" else _flashinfer_capability(device))

def cpu_fp4_quantize(input, global_scale, out_val, out_sf, sf_vec_size, sf_use_ue8m0,
                     is_sf_swizzled_layout, *rest):
    """The kernel's writes for NVFP4 in the linear scale layout (16-element blocks)."""
    packed, sf = nvfp4.quantize(input.reshape(-1, input.shape[-1]), global_scale)
    out_val.copy_(packed.reshape(*input.shape[:-1], -1))
    out_sf[:sf.numel()].copy_(sf.reshape(-1).view(torch.uint8))


# The spec class is JitSpecNvcc from 0.7 on, JitSpec before.
SPEC = getattr(jit_core, "JitSpecNvcc", None) or jit_core.JitSpec
_build, _load = SPEC.build, SPEC.load


def build(self, *args, **kwargs):
    if not self.name.startswith("fp4_quantization"):
        return _build(self, *args, **kwargs)


def load(self, *args, **kwargs):
    if not self.name.startswith("fp4_quantization"):
        return _load(self, *args, **kwargs)
    return types.SimpleNamespace(fp4_quantize=torch._dynamo.disable(cpu_fp4_quantize))


SPEC.build, SPEC.load = build, load

GRAPHS = []


def backend(gm, example_inputs):
    """Records the graph, then hands it to inductor as SGLang's InductorAdaptor does."""
    GRAPHS.append(gm)
    return lookup_backend("inductor")(gm, example_inputs)


def f(x, global_scale):
    h = x * 2 + 1
    q, sf = flashinfer.fp4_quantize(h, global_scale, sf_vec_size=16, sf_use_ue8m0=False,
                                    is_sf_swizzled_layout=False)
    return q.to(torch.int32).sum(-1) + sf.to(torch.int32).sum(), h.relu()


x = torch.randn(8, 64, dtype=torch.bfloat16)
global_scale = torch.tensor([1.0 / 8.0])
eager = f(x, global_scale)
compiled = torch.compile(f, backend=backend, fullgraph=True)(x, global_scale)

from torch._dynamo.utils import counters  # noqa: E402
from torch._inductor import async_compile  # noqa: E402

print("RESULT " + json.dumps({
    "equal": all(torch.equal(a, b) for a, b in zip(eager, compiled)),
    "targets": sorted({str(n.target) for g in GRAPHS for n in g.graph.nodes
                       if n.op == "call_function"}),
    "inductor": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")},
    "pools": sorted(type(p).__name__ for p in async_compile._pool_set),
    "finder": type(sys.meta_path[0]).__name__,
    "python": sys.version.split()[0],
    "torch": torch.__version__,
}), flush=True)
