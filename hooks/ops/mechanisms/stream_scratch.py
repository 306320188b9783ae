"""FlashInfer's per-stream scratch buffers (0.7.4 on, FlashInfer PR #3618), looked up at run time.

`flashinfer.utils._get_stream_cache_buf(name, num_bytes, device, zero_init)` keys a global dict
by `torch._C._cuda_getCurrentRawStream(index)`, so that kernels on different streams never
share a buffer they leave in a known state (top-k's zeroed row states, GEMM workspaces). Dynamo
puts that C call in the graph, and on a GPU its int result is "a torch.* op returned
non-Tensor": a break under fullgraph=True in every op that reaches it (the top-k sampling
paths, bmm_fp8, the low-latency and cuDNN GEMMs). The first call also builds a MemPool.
Top-k's own lookup, `flashinfer.topk._get_row_states_buffer(name, device, num_bytes)`, asks
first whether a CUDA graph is being captured (`torch.cuda.is_current_stream_capturing()`, the
same kind of break: found on the H200, 2026-12-02) and then gives a fresh zeroed buffer, from
the graph's pool, instead of the stream's.

FlashInfer's paged NVFP4 KV append (`page._is_stream_capturing_on_device`, 0.6.16 on) asks the
same question for validation only: under capture it refuses a scale that is a Python float or
a CPU tensor (turning one into a device tensor there would be a host copy in the capture).
Compiled code makes a float scale's tensor in the graph (no host copy when it runs), and a CPU
tensor scale still stops the trace at its host read (`.item()`), so the refusal has nothing
left to guard: under compile the check answers False (`VALIDATION_ONLY`), and the append's
kernel (a declared op) runs as before. An answer that chose a buffer or a kernel would not be given this way.
That answer serves only the call traced as shipped, the one given (K, V) pairs of caches: given
stacked caches the public function is itself an operator (hooks/ops/registry/attention.py), whose
body asks the question at run time, so a float scale in a CUDA graph capture is refused there as
eagerly.

Baking the trace-time stream's buffer, or the trace-time answer to "capturing?", into the graph
would bring back the sharing PR #3618 removed (a compiled graph is captured later, by SGLang),
so each lookup stays a run-time call: Dynamo meets an operator of dynafold's whose kernel is
FlashInfer's own function (the current stream's buffer, made in FlashInfer's pool on first use,
or the capture's own) and whose fake is the buffer's shape. FlashInfer's functions themselves
are untouched; eager calls never see the operators.
"""

import functools
import inspect
import logging
import sys
import typing

import torch

_log = logging.getLogger("dynafold")

# (module, FlashInfer's lookup, dynafold's operator): each lookup's parameters are
# (name, num_bytes, device, zero_init) or, for top-k, (name, device, num_bytes).
LOOKUPS = (
    ("flashinfer.utils", "_get_stream_cache_buf", "stream_scratch"),
    ("flashinfer.topk", "_get_row_states_buffer", "topk_row_states"),
)
_substituted = set()
_ops: typing.Dict[str, typing.Any] = {}
# FlashInfer's lookups, the latest seen of each: the operators are defined once per process.
_lookups: typing.Dict[str, typing.Callable[..., typing.Any]] = {}


def _prefix(buf, num_bytes):
    # A stream's buffer grown by an earlier, larger call is returned whole by FlashInfer; the
    # operator gives the prefix its fake describes (the same memory, so the same state).
    return buf if buf.size(0) == num_bytes else buf.narrow(0, 0, num_bytes)


def _operator(op_name):
    if op_name in _ops:
        return _ops[op_name]
    if op_name == "stream_scratch":
        @torch.library.custom_op("dynafold_flashinfer::stream_scratch", mutates_args=())
        def stream_scratch(name: str, num_bytes: int, device: torch.device,
                           zero_init: bool) -> torch.Tensor:
            return _prefix(_lookups[op_name](name, num_bytes, device, zero_init), num_bytes)

        @stream_scratch.register_fake
        def _(name, num_bytes, device, zero_init):
            return torch.empty(num_bytes, dtype=torch.uint8, device=device)
    else:
        @torch.library.custom_op("dynafold_flashinfer::topk_row_states", mutates_args=())
        def topk_row_states(name: str, device: torch.device, num_bytes: int) -> torch.Tensor:
            return _prefix(_lookups[op_name](name, device, num_bytes), num_bytes)

        @topk_row_states.register_fake
        def _(name, device, num_bytes):
            return torch.empty(num_bytes, dtype=torch.uint8, device=device)
    _ops[op_name] = getattr(torch.ops.dynafold_flashinfer, op_name).default
    return _ops[op_name]


def _stand_in(op_name, lookup):
    op = _operator(op_name)
    if op_name == "stream_scratch":
        def scratch_stand_in(name, num_bytes, device, zero_init=False):
            return op(name, num_bytes, torch.device(device), zero_init)
        return scratch_stand_in
    default = inspect.signature(lookup).parameters["num_bytes"].default
    if not isinstance(default, int):
        raise TypeError(f"num_bytes defaults to {default!r}, not an int")

    def stand_in(name, device, num_bytes=default):
        return op(name, torch.device(device), num_bytes)
    return stand_in


# (module, FlashInfer's capture query): asked only to refuse, never to choose.
VALIDATION_ONLY = (
    ("flashinfer.page", "_is_stream_capturing_on_device"),
)


def _not_capturing(*args, **kwargs):
    return False


def make_opaque():
    """Has Dynamo call the operators wherever it meets FlashInfer's lookups (and answer its
    validation-only capture queries); a no-op for a module not loaded yet, for releases
    without the function, and once done."""
    for module_name, function, op_name in LOOKUPS:
        lookup = _not_yet_substituted(module_name, function)
        if lookup is not None:
            _lookups[op_name] = lookup
            _substitute(lookup, functools.partial(_stand_in, op_name, lookup), module_name,
                        function)
    for module_name, function in VALIDATION_ONLY:
        query = _not_yet_substituted(module_name, function)
        if query is not None:
            _substitute(query, lambda: _not_capturing, module_name, function)


def _not_yet_substituted(module_name, function):
    """FlashInfer's `module_name.function` if loaded and not substituted yet (now marked so)."""
    module = sys.modules.get(module_name)
    fn = getattr(module, function, None) if module is not None else None
    if fn is None or id(fn) in _substituted:
        return None
    _substituted.add(id(fn))
    return fn


def _substitute(fn, stand_in, module_name, function):
    try:
        torch._dynamo.substitute_in_graph(fn, skip_signature_check=True)(stand_in())
    except Exception as e:  # noqa: BLE001 - it stays traced: a break where it would be without us
        _log.debug("dynafold: %s.%s stays traced: %s", module_name, function, e)
