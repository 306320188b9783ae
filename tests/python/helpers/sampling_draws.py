"""Issue 30 finding 8 (sampling): FlashInfer's sampling with the caller's own `generator=` and
with `return_valid=True`, compiled (inductor, fullgraph=True) against eager: results equal, and
the caller's generator and the default one advanced exactly as eagerly. FlashInfer's real public
functions and declarations; CPU stand-in kernels (standin_kernels.py); the generators are
stand-ins of CUDA's Philox generator as FlashInfer reads it. Prints one JSON line."""
import json
import sys

import torch

import flashinfer  # noqa: F401  (the package's own imports, as a user's program makes them)
import flashinfer.sampling as sampling
import standin_kernels as standins
from value_compare import same

standins.install({"sampling": sampling})
DEFAULT = standins.PhiloxState()
sampling.get_default_generators = lambda device: DEFAULT


def cases():
    probs = torch.softmax(torch.randn(4, 100), -1)
    logits = torch.randn(4, 100)
    return {
        "generator_from_probs": (
            lambda p, g: sampling.sampling_from_probs(p, generator=g) + 1, probs),
        "generator_joint_from_logits": (
            lambda x, g: sampling.top_k_top_p_sampling_from_logits(
                x, 10, 0.9, filter_apply_order="joint", generator=g) + 1, logits),
        "generator_joint_from_probs": (
            lambda p, g: sampling.top_k_top_p_sampling_from_probs(
                p, 10, 0.9, filter_apply_order="joint", generator=g), probs),
        "return_valid_from_probs": (
            lambda p, g: sampling.sampling_from_probs(p, return_valid=True), probs),
        "return_valid_joint_from_probs": (
            lambda p, g: sampling.top_k_top_p_sampling_from_probs(
                p, 10, 0.9, filter_apply_order="joint", return_valid=True), probs),
        "generator_and_return_valid": (
            lambda p, g: sampling.sampling_from_probs(p, generator=g, return_valid=True), probs),
    }


def positions(g):
    return [g.position(), DEFAULT.position()]


def check(fn, x):
    """Two calls, each with a generator of its own (the compiled function's second is another
    graph: one per generator), against eager on generators in the same states."""
    DEFAULT.set_state(standins.PhiloxState(5).get_state())
    gens = [standins.PhiloxState(11), standins.PhiloxState(12)]
    eager = [(fn(x, g), positions(g)) for g in gens]
    DEFAULT.set_state(standins.PhiloxState(5).get_state())
    gens = [standins.PhiloxState(11), standins.PhiloxState(12)]
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="inductor")
    try:
        got = [(compiled(x, g), positions(g)) for g in gens]
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}
    return {"ok": True, "equal": same([r for r, _ in eager], [r for r, _ in got]),
            "positions": {"eager": [p for _, p in eager], "compiled": [p for _, p in got]}}


def main():
    wanted = sys.argv[1:]
    out = {name: check(fn, x) for name, (fn, x) in cases().items()
           if not wanted or name in wanted}
    ops = sys.modules.get("_dynafold_ops.engine.wake")
    status = ops.status() if ops is not None else {}
    print("RESULT " + json.dumps({
        "cases": out, "checks": status.get("fake checks", {}),
        "module": status.get("flashinfer.sampling"),
        "others": [k for k in status.get("never checked", []) if "sampling" in k]}), flush=True)


if __name__ == "__main__":
    main()
