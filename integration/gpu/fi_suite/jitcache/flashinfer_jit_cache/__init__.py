"""Stand-in for FlashInfer's flashinfer-jit-cache package (integration/gpu/fi_suite): its
get_jit_cache_dir() is where prebuild.py's modules were unpacked ($FI_AOT_DIR), so FlashInfer
loads them without ninja and the tests' JIT warm-up fixtures stay off. Modules not there are
JIT-built as usual."""
import os
from importlib.metadata import version

__version__ = version("flashinfer-python")


def get_jit_cache_dir():
    return os.environ["FI_AOT_DIR"]
