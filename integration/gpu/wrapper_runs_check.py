"""Issue 30 on the GPU (by hand, never in CI): a wrapper's plan stays out of the graph.
FlashInfer's `BatchAttention` (holistic: prefill and decode requests in one launch) or POD
(`PODWithPagedKVCacheWrapper`: one prefill and a batch of decodes in one launch), planned by
its own `plan()` for each of PLANS batches (batch size, query and KV lengths all changing), its
`run()` compiled once with inductor and `fullgraph=True`, the wrapper a global as a serving
backend holds it. Per plan: eager and compiled bit-identical, and the compiled call captured in
a CUDA graph and replayed equal. Without dynafold the trace reaches the JIT module's `run` (a
tvm_ffi function) and fails.

    python3 wrapper_runs_check.py batch_attention|pod dynamic|mark_dynamic [PLANS]
dynamic: `dynamic=True`; mark_dynamic: the token dimension of the queries marked dynamic
(static shapes would recompile once for the token count, which changes with every plan, not
for the plan).
One line: <FAMILY> <mode> ok=<bool> frames=<n> recompiles=<n> unequal=[...]
captured_unequal=[...] plans=<n> (or error=<first line>).
"""
import sys

import torch
from torch._dynamo.utils import counters

import flashinfer

NQ, NK, HEAD, PAGE, PAGES = 32, 8, 128, 16, 2048
DEV = "cuda"
wrapper = None
kv = None


def plan_batch_attention(i):
    """Plan i: 1-16 requests, each 1-8 new tokens over 0-300 tokens already cached."""
    g = torch.Generator().manual_seed(i)
    bs = int(torch.randint(1, 17, (1,), generator=g))
    qo = torch.randint(1, 9, (bs,), generator=g)
    kv_len = qo + torch.randint(0, 301, (bs,), generator=g)
    pages = (kv_len + PAGE - 1) // PAGE
    qo_indptr = torch.cat([torch.zeros(1, dtype=torch.int64), qo.cumsum(0)]).int()
    kv_indptr = torch.cat([torch.zeros(1, dtype=torch.int64), pages.cumsum(0)]).int()
    kv_indices = torch.randperm(PAGES, generator=g)[: int(pages.sum())].int()
    wrapper.plan(qo_indptr.to(DEV), kv_indptr.to(DEV), kv_indices.to(DEV),
                 kv_len.int().to(DEV), NQ, NK, HEAD, HEAD, PAGE, causal=True,
                 q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    return (torch.randn(int(qo.sum()), NQ, HEAD, generator=g).to(DEV, torch.bfloat16),)


def plan_pod(i):
    """Plan i: 1-16 decode requests over 1-300 cached tokens each (the wrapper's plan), and one
    prefill of 2-64 tokens with its own K and V (POD's prefill is not paged)."""
    g = torch.Generator().manual_seed(i)
    bs = int(torch.randint(1, 17, (1,), generator=g))
    kv_len = torch.randint(1, 301, (bs,), generator=g)
    pages = (kv_len + PAGE - 1) // PAGE
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), pages.cumsum(0)]).int()
    indices = torch.randperm(PAGES, generator=g)[: int(pages.sum())].int()
    last = (kv_len - 1) % PAGE + 1
    wrapper.plan(indptr.to(DEV), indices.to(DEV), last.int().to(DEV), NQ, NK, HEAD, PAGE,
                 q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    lp = int(torch.randint(2, 65, (1,), generator=g))

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(DEV, torch.bfloat16)

    return randn(lp, NQ, HEAD), randn(lp, NK, HEAD), randn(lp, NK, HEAD), randn(bs, NQ, HEAD)


def f_batch_attention(q):
    out, lse = wrapper.run(q, kv)
    return out * 2, lse


def f_pod(q_p, k_p, v_p, q_d):
    out_p, out_d = wrapper.run(q_p, k_p, v_p, q_d, kv, causal_p=True)
    return out_p * 2, out_d * 2


def make_wrapper(family):
    if family == "pod":
        ws = torch.zeros(128 * 1024 * 1024, device=DEV, dtype=torch.uint8)
        return flashinfer.PODWithPagedKVCacheWrapper(ws, "NHD")
    return flashinfer.BatchAttention(kv_layout="NHD", device=DEV)


def main(family, mode, plans):
    global wrapper, kv
    torch.manual_seed(0)
    plan = plan_pod if family == "pod" else plan_batch_attention
    f = f_pod if family == "pod" else f_batch_attention
    wrapper = make_wrapper(family)
    kv = torch.randn(PAGES, 2, PAGE, NK, HEAD, device=DEV, dtype=torch.bfloat16)
    f(*plan(0))  # the first plan and run build the JIT modules, before the compile
    counters.clear()
    compiled = torch.compile(f, fullgraph=True, backend="inductor",
                             dynamic=True if mode == "dynamic" else None)
    unequal, captured_unequal = [], []
    try:
        for i in range(1, plans + 1):
            args = plan(i)
            if mode == "mark_dynamic":
                for t in args:
                    torch._dynamo.mark_dynamic(t, 0)
            eager = f(*args)
            got = compiled(*args)
            torch.cuda.synchronize()
            if not all(torch.equal(a, b) for a, b in zip(eager, got)):
                unequal.append(i)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                compiled(*args)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = compiled(*args)
            graph.replay()
            torch.cuda.synchronize()
            if not all(torch.equal(a, b) for a, b in zip(eager, captured)):
                captured_unequal.append(i)
    except Exception as e:  # the line says how the run ended
        first = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        print(f"{family.upper()} {mode} ok=False error={first}", flush=True)
        return
    recompiles = sum(counters["recompiles"].values()) if "recompiles" in counters else 0
    print(f"{family.upper()} {mode} ok=True frames={counters['stats'].get('unique_graphs', 0)} "
          f"recompiles={recompiles} unequal={unequal} captured_unequal={captured_unequal} "
          f"plans={plans}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
