"""FlashInfer's per-stream scratch buffers (0.7.4 on, FlashInfer PR #3618), looked up at run time.

`flashinfer.utils._get_stream_cache_buf(name, num_bytes, device, zero_init)` keys a global dict
by `torch._C._cuda_getCurrentRawStream(index)`, so that kernels on different streams never
share a buffer they leave in a known state (top-k's zeroed row states, GEMM workspaces). Dynamo
puts that C call in the graph, and on a GPU its int result is "a torch.* op returned
non-Tensor": a break under fullgraph=True in every op that reaches it (the top-k sampling
paths, bmm_fp8, the low-latency and cuDNN GEMMs). The first call also builds a MemPool.

Baking the trace-time stream's buffer into the graph would bring back the sharing PR #3618
removed, so the lookup stays a run-time call: Dynamo meets `dynafold_flashinfer::stream_scratch`,
an operator whose kernel is FlashInfer's own function (the current stream's buffer, made in
FlashInfer's pool on first use, also under CUDA graph capture as FlashInfer intends) and whose
fake is the buffer's shape. FlashInfer's function itself is untouched; eager calls never see
the operator.
"""

import logging
import sys

import torch

_log = logging.getLogger("dynafold")

OP = "dynafold_flashinfer::stream_scratch"
_substituted = set()
_op = []
# FlashInfer's lookup, the latest seen: the operator is defined once per process.
_lookup = []


def _operator():
    if _op:
        return _op[0]

    @torch.library.custom_op(OP, mutates_args=())
    def stream_scratch(name: str, num_bytes: int, device: torch.device,
                       zero_init: bool) -> torch.Tensor:
        return _lookup[-1](name, num_bytes, device, zero_init)

    @stream_scratch.register_fake
    def _(name, num_bytes, device, zero_init):
        return torch.empty(num_bytes, dtype=torch.uint8, device=device)

    _op.append(torch.ops.dynafold_flashinfer.stream_scratch.default)
    return _op[0]


def make_opaque():
    """Has Dynamo call the operator wherever it meets FlashInfer's lookup; a no-op before
    `flashinfer.utils` is loaded, for releases without the lookup, and once done."""
    utils = sys.modules.get("flashinfer.utils")
    lookup = getattr(utils, "_get_stream_cache_buf", None) if utils is not None else None
    if lookup is None or id(lookup) in _substituted:
        return
    _substituted.add(id(lookup))
    _lookup.append(lookup)
    try:
        op = _operator()

        def stand_in(name, num_bytes, device, zero_init=False):
            return op(name, num_bytes, torch.device(device), zero_init)

        torch._dynamo.substitute_in_graph(lookup, skip_signature_check=True)(stand_in)
    except Exception as e:  # the lookup stays traced: the op breaks as it would without us
        _log.debug("dynafold: flashinfer.utils._get_stream_cache_buf stays traced: %s", e)
