"""Imports what SGLang 0.5.12's server processes import for a Llama on the FlashInfer backend,
so that a missing package shows in seconds, not after a server start:
    python3 imports.py     prints `imports ok`, or the first missing module and where it was asked
Here (no GPU) it found what the bundle carries (sglang_server_bundle.sh); there, it checks it."""
import importlib
import sys
import traceback

SERVER = [
    "sglang.launch_server", "sglang.srt.entrypoints.http_server", "sglang.srt.entrypoints.engine",
    "sglang.srt.managers.scheduler", "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager", "sglang.srt.model_executor.model_runner",
    "sglang.srt.model_executor.cuda_graph_runner",
    "sglang.srt.model_executor.piecewise_cuda_graph_runner", "sglang.srt.models.llama",
    "sglang.srt.layers.attention.flashinfer_backend", "sglang.srt.layers.quantization.fp8",
    "sglang.srt.layers.quantization.fp8_utils", "sglang.srt.model_loader.loader",
    "sglang.srt.compilation.compile", "sglang.srt.layers.sampler",
]


def main():
    try:
        for mod in SERVER:
            importlib.import_module(mod)
    except ImportError as e:
        traceback.print_exc()
        print(f"missing {e.name} (importing {mod})")
        return 1
    print("imports ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
