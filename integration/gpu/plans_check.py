"""Issue 18 on the GPU (by hand): plans are graph data. A batch-decode wrapper planned by
FlashInfer's `plan()` or by `fast_decode_plan` (what SGLang's FlashInfer backend sets as
`begin_forward` for CUDA-graph decode), then `run()` compiled once with inductor and
`fullgraph=True`, the batch dimension dynamic as SGLang compiles it, over 20 batch sizes each
with a new plan: one compiled frame, each result bit-identical to eager, and each batch size's
compiled run captured in a CUDA graph and replayed equal.

    python3 plans_check.py plan|fast_decode_plan
One line: PLANS <planner> frames=<n> unequal=[...] captured_unequal=[...] sizes=<n>.
"""
import sys

import torch
import flashinfer
from flashinfer.decode import fast_decode_plan
from torch._dynamo.utils import counters

HEAD, NQ, NK, PAGE = 128, 8, 2, 16
DEV = "cuda"


def main(planner):
    torch.manual_seed(0)
    ws = torch.zeros(128 * 1024 * 1024, device=DEV, dtype=torch.uint8)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    kv = torch.randn(512, 2, PAGE, NK, HEAD, device=DEV, dtype=torch.bfloat16)

    def plan(bs, how):
        g = torch.Generator().manual_seed(bs)
        lens = torch.randint(1, 9, (bs,), generator=g)
        indptr = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0).int()]).to(DEV)
        indices = torch.randperm(512, generator=g)[: int(lens.sum())].int().to(DEV)
        last = torch.randint(1, PAGE + 1, (bs,), generator=g).int().to(DEV)
        how(wrapper, indptr, indices, last, NQ, NK, HEAD, PAGE,
            q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        q = torch.randn(bs, NQ, HEAD, generator=g).to(DEV, torch.bfloat16)
        for t in (q, wrapper._paged_kv_indptr_buf, wrapper._paged_kv_indices_buf,
                  wrapper._paged_kv_last_page_len_buf):
            torch._dynamo.mark_dynamic(t, 0)
        return q

    def f(q):
        return wrapper.run(q, kv) * 2

    real_plan = type(wrapper).plan
    plan(4, real_plan)  # the first plan builds the JIT module (fast_decode_plan needs it)
    how = real_plan if planner == "plan" else fast_decode_plan
    counters.clear()
    compiled = torch.compile(f, fullgraph=True, backend="inductor")
    unequal, captured_unequal = [], []
    sizes = [2, 3, 5, 8, 13, 21, 34, 55, 7, 4, 16, 32, 64, 9, 11, 6, 27, 48, 10, 3]
    for bs in sizes:
        q = plan(bs, how)
        eager = f(q)
        got = compiled(q)
        torch.cuda.synchronize()
        if not torch.equal(eager, got):
            unequal.append(bs)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            compiled(q)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = compiled(q)
        graph.replay()
        torch.cuda.synchronize()
        if not torch.equal(eager, captured):
            captured_unequal.append(bs)
    print(f"PLANS {planner} frames={counters['stats'].get('unique_graphs', 0)} "
          f"unequal={unequal} captured_unequal={captured_unequal} sizes={len(sizes)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
