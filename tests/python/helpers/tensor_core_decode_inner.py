"""Tensor-core decode's run() traced as FlashInfer ships it, without dynafold's wrapper-run
operator (hooks/ops/mechanisms/wrapper_runs.py keeps FlashInfer's method): its inner
`self._cached_module.paged_run(*run_args)` reaches the woken prefill declaration with
FlashInfer's own positional layout (0.6.1-0.6.7.post3: 43 arguments, `paged_kv_cache` at 31,
where paged_run declares `num_qo_heads`). One plan, the stand-in kernels of attention_runs.py,
inductor, `fullgraph=True`; compared with eager. Prints one JSON line."""
import json
import sys

import torch

import attention_runs as runs
from value_compare import same


def main():
    wrapper, plan, _ = runs.decode_family(True)
    (q,) = plan(3, 1, None)
    cache = (torch.randn(runs.PAGES, runs.PAGE, runs.KV_HEADS, runs.DIM).half(),
             torch.randn(runs.PAGES, runs.PAGE, runs.KV_HEADS, runs.DIM).half())
    boundary = sys.modules["_dynafold_ops.mechanisms.wrapper_runs"]
    shipped = boundary._originals[("flashinfer.decode", "BatchDecodeWithPagedKVCacheWrapper",
                                   "run")]
    # What the run dispatcher does before it lets a trace into FlashInfer's run() (a call its
    # operator cannot hold): the wrapper's plan and JIT module become graph data.
    sys.modules["_dynafold_ops.mechanisms.attention_plans"].set_deferred(type(wrapper))

    def call(q):
        o, lse = shipped(wrapper, q, cache, return_lse=True)
        return o * 2, lse

    eager = call(q)
    out = {}
    try:
        compiled = torch.compile(call, fullgraph=True)(q)
        out.update(ok=True, equal=bool(same(eager, compiled)))
    except Exception as e:
        out.update(ok=False, error=f"{type(e).__name__}: {str(e)[:400]}")
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
