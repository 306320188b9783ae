"""Traces FlashInfer's sampling ops with torch.compile(fullgraph=True) on fake CUDA tensors and
prints one JSON line: per case, whether it compiled and the graph's call targets.

FlashInfer declares its sampling ops inside `get_sampling_module()`, after the JIT build, so
the declarations exist only once the module is built. One stand-in, because this machine has
no CUDA to build it: `flashinfer.sampling.gen_sampling_module` (the JIT spec: nvcc and ninja)
returns a spec whose `build_and_load()` gives a module with the built module's function names,
each opaque to Dynamo as the built module's tvm_ffi functions are, and never called (the
operators' fakes stand in for kernels under FakeTensorMode). Everything else is FlashInfer's
own: `get_sampling_module`, its declarations, the public functions."""
import json
import types

import torch
import flashinfer.sampling as sampling
from torch._subclasses.fake_tensor import FakeTensorMode

from fullgraph_trace import trace

KERNELS = ["softmax", "sampling_from_probs", "sampling_from_logits", "top_p_sampling_from_probs",
           "top_k_sampling_from_probs", "min_p_sampling_from_probs",
           "top_k_top_p_sampling_from_probs", "top_p_renorm_probs", "top_k_renorm_probs",
           "top_k_mask_logits", "chain_speculative_sampling"]


@torch._dynamo.disable
def _no_kernel(*args, **kwargs):
    raise RuntimeError("the sampling kernels are not built on this machine")


class _Spec:
    def build_and_load(self):
        return types.SimpleNamespace(**{name: _no_kernel for name in KERNELS})


sampling.gen_sampling_module = _Spec


def cases():
    probs = torch.empty(4, 100, device="cuda")
    return {
        "sampling_from_probs": lambda: sampling.sampling_from_probs(probs),
        "sampling_from_probs_seeded": lambda: sampling.sampling_from_probs(probs, seed=7, offset=8),
        "top_p_sampling_from_probs": lambda: sampling.top_p_sampling_from_probs(probs, 0.9),
        "top_k_sampling_from_probs": lambda: sampling.top_k_sampling_from_probs(probs, 5),
        "min_p_sampling_from_probs": lambda: sampling.min_p_sampling_from_probs(probs, 0.1),
        # A tuple result (samples, valid): an operator of its own (issue 30).
        "return_valid": lambda: sampling.sampling_from_probs(probs, return_valid=True),
    }


def main():
    out = {}
    sampling.get_sampling_module()  # the eager build a server's warm-up makes
    with FakeTensorMode(allow_non_fake_inputs=True):
        for name, fn in cases().items():
            result, out[name] = trace(fn, error_chars=1000)
            if out[name]["ok"]:
                first = result[0] if isinstance(result, tuple) else result
                out[name].update(shape=list(first.shape), dtype=str(first.dtype))
    print("RESULT " + json.dumps(out), flush=True)


main()
