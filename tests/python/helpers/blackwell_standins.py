"""Stand-ins for a Blackwell GPU on a machine without one, for the FP4 layer's helpers
(trace_fp4_layer.py, fp4_layer_shapes.py). Importing this module applies them; `install()`
applies them again to FlashInfer modules imported since.

Stand-ins, each only for what needs a Blackwell GPU here, named:
  1. The compute capability FlashInfer asks of a device (`get_compute_capability`, in
     flashinfer.utils, where `device_support_pdl` and the backend checks read it, and in every
     module that imported it) answers (10, 0), an SM100.
  2. `torch.cuda.current_device()` answers 0 (FlashInfer's `get_trtllm_moe_sm100_module` asks
     it to pick the device whose capability decides the build).
  3. The JIT build of the fused-MoE modules (`gen_trtllm_gen_fused_moe_sm100_module`,
     `gen_cutlass_fused_moe_sm100_module`): a spec whose `build_and_load` returns a module whose
     every function raises if called, and no cubin library paths. FlashInfer's loaders around
     it (`_get_trtllm_moe_sm100_module_impl`, `get_cutlass_fused_moe_module`) run as shipped:
     they declare the kernels' operators. Nothing of the kernels is reached while tracing.
  4. The device switch Dynamo makes at trace time for `with torch.cuda.device(...)`
     (`cutlass_fused_moe` has one): `torch.cuda._exchange_device` answers device 0.
Everything else (argument checks, the autotuner's call, the backend choice) is FlashInfer's.
"""
import sys

import torch

# -- stand-in 1: an SM100's compute capability ------------------------------------------------
SM100 = (10, 0)


def _capability(device=None):
    return SM100


def _stand_in_capability():
    """In flashinfer.utils (where `device_support_pdl` and the backend checks read it) and in
    every FlashInfer module that imported it by name."""
    for name, module in list(sys.modules.items()):
        if name.startswith("flashinfer") and module is not None and \
                getattr(module, "get_compute_capability", None) is not None:
            module.get_compute_capability = _capability


# -- stand-in 2: the current CUDA device --------------------------------------------------------
torch.cuda.current_device = lambda: 0


# -- stand-in 4: the device switch Dynamo makes while tracing `with torch.cuda.device(...)` ----
def _stand_in_device_switch():
    """Dynamo enters `torch.cuda.device` at trace time through `torch.cuda._exchange_device`
    (a CUDA driver call) and records the switch in the graph; here device 0 is the only one."""
    try:
        from torch._dynamo.variables.ctx_manager import CUDADeviceVariable
    except ImportError:
        return
    CUDADeviceVariable._exchange_fn = staticmethod(_exchange_device)
    CUDADeviceVariable._maybe_exchange_fn = staticmethod(_exchange_device)


def _exchange_device(index):
    return 0


# -- stand-in 3: the fused-MoE modules' JIT build ------------------------------------------------
class _Unbuilt:
    """The built module: its functions do nothing, are counted and return another such stub
    (the loaders call set-up functions while they build; the kernels sit inside operators,
    never run while tracing, and run as no-ops where fp4_layer_shapes.py runs FlashInfer's
    Python for its shapes)."""

    def __getattr__(self, name):
        def function(*args, **kwargs):
            module_calls.append(name)
            return _Unbuilt()
        return function

    def __iter__(self):
        return iter(())


module_calls = []


class _Spec:
    def build_and_load(self):
        return _Unbuilt()

    def get_library_paths(self):
        return []

    def get_library_path(self):  # 0.6.16
        return ""


def _stand_in_builds():
    try:
        from flashinfer.fused_moe import core
    except Exception:
        return
    for name in list(vars(core)):
        if name.startswith("gen_") and "fused_moe" in name and name.endswith("_module"):
            setattr(core, name, lambda *args, **kwargs: _Spec())
    if hasattr(core, "setup_cubin_loader"):
        core.setup_cubin_loader = lambda *args, **kwargs: None



def install():
    _stand_in_builds()
    _stand_in_capability()
    _stand_in_device_switch()


install()
