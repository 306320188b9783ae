"""Issue 30 finding 7: the first-run check is per call form. With single decode's correction
removed (its kernel writes `maybe_lse` when given, which FlashInfer's declaration leaves out),
a compiled call without `return_lse` runs first and agrees; the later call with it must still be
checked, and stop. An operator whose result the graph drops never runs: "never checked".
FlashInfer's real public functions and declarations, CPU stand-in kernels (standin_kernels.py),
inductor, fullgraph=True. Prints one JSON line."""
import importlib
import json
import sys

import torch

import flashinfer  # noqa: F401  (the package's own imports, as a user's program makes them)
import flashinfer.decode as decode
import flashinfer.norm as norm
import standin_kernels as standins

standins.install({"decode": decode, "norm": norm})
# What the first-run check must catch when the op's record lacks its correction.
importlib.import_module("_dynafold_ops.engine.corrections").CORRECTIONS.pop(
    ("flashinfer.decode", "get_single_decode_module.<locals>.run_single_decode"))
ops = sys.modules["_dynafold_ops.engine.wake"]


def compiled(fn, *args):
    torch._dynamo.reset()
    try:
        return {"ok": True, "result": torch.compile(fn, fullgraph=True, backend="inductor")(*args)}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:800]}


def checks(word):
    status = ops.status()
    return ({k: v for k, v in status.get("fake checks", {}).items() if word in k},
            [k for k in status.get("never checked", []) if word in k])


def main():
    q, k, v = (torch.randn(4, 64).half(), torch.randn(16, 4, 64).half(),
               torch.randn(16, 4, 64).half())
    x, w = torch.randn(6, 128).half(), torch.randn(128).half()
    out = {}

    # The norm's result is dropped: its operator never runs.
    dropped = compiled(lambda x, w: (norm.rmsnorm(x, w), x * 2)[1], x, w)
    out["dropped"] = {"ok": dropped["ok"], "error": dropped.get("error"),
                      "checks": checks("rmsnorm")}

    without = compiled(lambda q, k, v: decode.single_decode_with_kv_cache(q, k, v) * 2, q, k, v)
    out["without_lse"] = {"ok": without["ok"], "error": without.get("error"),
                          "checks": checks("single_decode")}

    def with_lse(q, k, v):
        o, lse = decode.single_decode_with_kv_cache(q, k, v, return_lse=True)
        return o, lse + 1
    got = compiled(with_lse, q, k, v)
    out["with_lse"] = {"ok": got["ok"], "error": got.get("error"),
                       "checks": checks("single_decode")}
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
