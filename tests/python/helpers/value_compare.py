"""Eager against compiled, on values: copies of arguments and exact equality of results, shared
by the value checks (op_semantics.py, declaration_sweep.py, cutile_quant.py, low_latency_gemm.py),
and the RESULT line they print."""
import json
import sys

import torch


def clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone(v) for v in x)
    return x


def _bytes(t):
    # Packed FP4 (the CuTe DSL FP4 quantizers' values) has no comparison: its bytes.
    return t.view(torch.uint8) if t.dtype == getattr(torch, "float4_e2m1fn_x2", None) else t


def same(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and torch.equal(_bytes(a), _bytes(b)))
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


# The shape modes each case compiles in: fixed sizes, and dynamic=True.
MODES = (("static", False), ("dynamic", True))


def compare_cases(cases, compare):
    """`compare(fn, dynamic)` of each case in each mode, by case name; the names on the command
    line alone when given."""
    return {name: {mode: compare(fn, dynamic) for mode, dynamic in MODES}
            for name, fn in cases.items() if not sys.argv[1:] or name in sys.argv[1:]}


def print_result(cases):
    """The RESULT line a test reads (conftest.result_of): the cases' outcomes and the first-run
    fake checks of dynafold's operators."""
    ops = sys.modules.get("_dynafold_ops.engine.wake")
    status = ops.status() if ops is not None else {}
    print("RESULT " + json.dumps({"cases": cases, "checks": status.get("fake checks", {})}),
          flush=True)
