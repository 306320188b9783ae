"""STAND-IN, written as `sitecustomize.py` beside the AMX `sgl_kernel` stand-in (on the compile
server's PYTHONPATH only): the CPU's answer to "has AMX tiles?", as the GPU tests answer "SM120".
SGLang 0.5.23 reads it once, when `sglang.srt.utils.common` is imported
(`is_amx_tile_supported = torch.cpu._is_amx_tile_supported()`), and selects its Intel AMX
attention backend, the only one with a CPU graph runner, only when it is true. The operators
behind that backend are the stand-in's plain torch, so no AMX instruction runs; inductor's own
ISA detection (torch._C) is left alone. The answer is set on SGLang's module right after its
body runs, before any other SGLang module reads it; nothing else is touched."""
import importlib.machinery
import sys

_MODULE = "sglang.srt.utils.common"


class _AmxAnswer:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(cls)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_body = spec.loader.exec_module

        def exec_module(module):
            run_body(module)
            module.is_amx_tile_supported = True

        spec.loader.exec_module = exec_module
        return spec


# Ahead of the path finder, behind any finder already there (dynafold's stays first).
_at = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
           len(sys.meta_path))
sys.meta_path.insert(_at, _AmxAnswer)
