"""Issue 20 on the H200, by hand: the ops the public-API table says trace on fake tensors (as
an sm90), now on the GPU: eager once (builds the JIT module, as a server's warm-up does), then
torch.compile(fullgraph=True) with inductor, then a CUDA-graph capture and replay, each output
compared with eager bit for bit. The calls are the table's own (integration/api_status/
builders), with real tensors: random values, index tensors as the builders make them.

    python3 api_status_check.py TABLE.json [SHARD/SHARDS] [NAME...]

NAMEs narrow the run to those ops (api_status.sh with NAMES gives one per process: a bad call's
illegal memory access poisons the rest of its process).

One line per op, in the sweep's format (integration/api_status/evidence.py reads it):
SWEEP NAME PASS compiled+captured, bit-identical, ops: ... | SWEEP NAME FAIL at STEP: error.
"""
import json
import os
import sys
import time

import torch
import flashinfer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api_status"))
from builders import BUILDERS
from trace_all_keys import builder_key
from ops_sweep import recording_inductor, graph_ops, same, _GRAPH_OPS


def t(*shape, dtype=torch.bfloat16):
    if dtype.is_floating_point and dtype.itemsize >= 2:
        return torch.randn(*shape, device="cuda", dtype=dtype)
    if dtype.is_floating_point:  # fp8: random values, cast
        return torch.randn(*shape, device="cuda").to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device="cuda").bool()
    return torch.randint(0, 4, shape, device="cuda", dtype=dtype)


def cloned(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def check(name, fn, args):
    step, started = "eager", time.monotonic()
    try:
        torch.manual_seed(1234)
        ref = fn(*cloned(args))
        torch.cuda.synchronize()
        step = "compile"
        torch._dynamo.reset()
        _GRAPH_OPS.clear()
        compiled = torch.compile(fn, fullgraph=True, backend=recording_inductor)
        torch.manual_seed(1234)
        if not same(compiled(*cloned(args)), ref):
            return f"SWEEP {name} FAIL compiled output differs from eager"
        step = "cudagraph"
        inputs = cloned(args)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.manual_seed(1234)
            compiled(*cloned(args))
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        torch.manual_seed(1234)
        with torch.cuda.graph(g):
            captured = compiled(*inputs)
        fresh = cloned(args)
        for dst, src in zip(inputs, fresh):  # mutated inputs back to their first values
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        torch.manual_seed(1234)
        g.replay()
        torch.cuda.synchronize()
        if not same(captured, ref):
            return f"SWEEP {name} FAIL replayed output differs from eager"
        return (f"SWEEP {name} PASS compiled+captured, bit-identical, ops: {graph_ops()} "
                f"({time.monotonic() - started:.0f} s)")
    except Exception as e:
        return f"SWEEP {name} FAIL at {step}: {type(e).__name__}: {' '.join(str(e).split())[:1500]}"


def main():
    with open(sys.argv[1]) as f:
        table = json.load(f)
    shard, shards = (int(p) for p in (sys.argv[2] if len(sys.argv) > 2 else "0/1").split("/"))
    names = sorted(n for n, r in table["ops"].items()
                   if r["status"] in ("fake", "H200") and r.get("sm", 90) == 90)
    if len(sys.argv) > 3:
        names = [n for n in names if n in sys.argv[3:]]
    for index, name in enumerate(names):
        if index % shards != shard:
            continue
        row = table["ops"][name]
        _, build = BUILDERS[builder_key(name, row["kind"])]
        try:
            made = build(t, flashinfer)
        except Exception as e:
            print(f"SWEEP {name} FAIL at set-up: {type(e).__name__}: {e}", flush=True)
            continue
        calls = made if isinstance(made, dict) else {"": made}
        for label, (fn, args) in calls.items():
            print(check(f"{name}({label})" if label else name, fn, args), flush=True)


main()
