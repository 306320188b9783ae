"""One process of bench/host_path.py: FlashInfer's attention wrappers and KV append on the host
path, timed call by call, with CPU stand-in kernels that do (almost) nothing, so that what is
timed is the Python around them: FlashInfer's, and dynafold's where it is loaded.

Per wrapper family SGLang uses (decode with CUDA cores and with tensor cores, paged and
ragged prefill, MLA) and for `append_paged_kv_cache`: `plan()` then `run()` (a decode step's
order), and the append, timed each call, ROUNDS calls; first in a process that has never
compiled, then again after a `torch.compile` of a trivial function has run (what turns on
dynafold's compile-time mechanisms for the rest of the process: plans as data, the run
operator). Prints one `BENCH {...}` line: per state, per family and call, the median
microseconds per call.

The kernels stand in at FlashInfer's JIT specs, as tests/python/helpers/standin_kernels.py
does, but as plain functions (no `torch._dynamo.disable`, which costs more per call than the
kernels here): nothing compiles them. Each plan returns a tvm_ffi Array of as many ints as the
real scheduler's plan info (DecodePlanInfo 10, PrefillPlanInfo 15, MLAPlanInfo 18).
"""
import json
import statistics
import sys
import time
import types

import torch

import flashinfer  # the package's own imports, as a server makes them
import flashinfer.decode as decode
import flashinfer.page as page
import flashinfer.prefill as prefill
import standin_kernels

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 400
HEADS, KV_HEADS, DIM, PAGE, PAGES, BS = 8, 2, 64, 16, 64, 8


def _array(n):
    ints = list(range(n))
    try:
        import tvm_ffi
        return tvm_ffi.convert(ints)
    except ImportError:  # before FlashInfer 0.6: a list
        return ints


def _spec(**kernels):
    class Spec:
        def build_and_load(self):
            return types.SimpleNamespace(**kernels)
    return Spec()


def _nothing(*args):
    return None


def _plan(n):
    plan = _array(n)
    return lambda *args: plan


_DECODE = _spec(plan=_plan(10), run=_nothing)
_PREFILL = _spec(plan=_plan(15), paged_run=_nothing, ragged_run=_nothing)
_MLA = _spec(plan=_plan(18), run=_nothing)
decode.gen_batch_decode_module = lambda *a, **k: _DECODE
for _name in ("gen_batch_prefill_module", "_gen_batch_prefill_primary_module",
              "_gen_batch_prefill_independent_paged_module"):
    if hasattr(prefill, _name):
        setattr(prefill, _name, lambda *a, **k: _PREFILL)
page.gen_page_module = lambda *a, **k: _spec(append_paged_kv_cache=_nothing)


def _mla_wrapper():
    """The MLA wrapper, its module's JIT spec stood in; None where the release's wrapper asks
    for a GPU at plan() (0.7.x)."""
    import importlib
    found = False
    for name in ("flashinfer.mla", "flashinfer.mla._core"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "gen_batch_mla_module"):
            module.gen_batch_mla_module = lambda *a, **k: _MLA
            found = True
    if not found:
        return None
    import flashinfer.mla as mla
    return mla.BatchMLAPagedAttentionWrapper


def _workspace():
    return torch.empty(1 << 20, dtype=torch.uint8)


def _pages():
    indptr = torch.arange(0, 2 * BS + 1, 2, dtype=torch.int32)
    indices = torch.arange(2 * BS, dtype=torch.int32)
    last = torch.full((BS,), 3, dtype=torch.int32)
    return indptr, indices, last


def decode_family(tensor_cores):
    with standin_kernels.unpinned():
        w = decode.BatchDecodeWithPagedKVCacheWrapper(
            _workspace(), "NHD", use_tensor_cores=tensor_cores, backend="fa2")
    indptr, indices, last = _pages()
    cache = (torch.zeros(PAGES, PAGE, KV_HEADS, DIM).half(),
             torch.zeros(PAGES, PAGE, KV_HEADS, DIM).half())
    q = torch.zeros(BS, HEADS, DIM).half()

    def plan():
        w.plan(indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, data_type=torch.float16)

    def run():
        w.run(q, cache)
    return plan, run


def prefill_paged_family():
    with standin_kernels.unpinned():
        w = prefill.BatchPrefillWithPagedKVCacheWrapper(_workspace(), "NHD", backend="fa2")
    indptr, indices, last = _pages()
    qo_indptr = torch.arange(0, 3 * BS + 1, 3, dtype=torch.int32)
    cache = torch.zeros(PAGES, 2, PAGE, KV_HEADS, DIM).half()
    q = torch.zeros(3 * BS, HEADS, DIM).half()

    def plan():
        w.plan(qo_indptr, indptr, indices, last, HEADS, KV_HEADS, DIM, PAGE, causal=True,
               q_data_type=torch.float16)

    def run():
        w.run(q, cache)
    return plan, run


def prefill_ragged_family():
    with standin_kernels.unpinned():
        w = prefill.BatchPrefillWithRaggedKVCacheWrapper(_workspace(), "NHD", backend="fa2")
    qo_indptr = torch.arange(0, 3 * BS + 1, 3, dtype=torch.int32)
    kv_indptr = torch.arange(0, 5 * BS + 1, 5, dtype=torch.int32)
    q = torch.zeros(3 * BS, HEADS, DIM).half()
    k = torch.zeros(5 * BS, KV_HEADS, DIM).half()
    v = torch.zeros(5 * BS, KV_HEADS, DIM).half()

    def plan():
        w.plan(qo_indptr, kv_indptr, HEADS, KV_HEADS, DIM, causal=True,
               q_data_type=torch.float16)

    def run():
        # SGLang's extend path: the lse too, to merge with the paged part.
        w.run_return_lse(q, k, v)
    return plan, run


def mla_family():
    cls = _mla_wrapper()
    if cls is None:
        return None
    heads, ckv, kpe = 4, 128, 64
    with standin_kernels.unpinned():
        w = cls(_workspace(), backend="fa2")
    indptr, indices, _ = _pages()
    kv_len = torch.full((BS,), 2 * PAGE - 3, dtype=torch.int32)
    qo_indptr = torch.arange(BS + 1, dtype=torch.int32)
    ckv_cache = torch.zeros(PAGES, PAGE, ckv).half()
    kpe_cache = torch.zeros(PAGES, PAGE, kpe).half()
    q_nope = torch.zeros(BS, heads, ckv).half()
    q_pe = torch.zeros(BS, heads, kpe).half()

    def plan():
        w.plan(qo_indptr, indptr, indices, kv_len, heads, ckv, kpe, PAGE, False, 0.1,
               torch.float16, torch.float16)

    def run():
        w.run(q_nope, q_pe, ckv_cache, kpe_cache)
    return plan, run


def append_call():
    indptr, indices, last = _pages()
    k = torch.zeros(BS, KV_HEADS, DIM).half()
    v = torch.zeros(BS, KV_HEADS, DIM).half()
    cache = torch.zeros(PAGES, 2, PAGE, KV_HEADS, DIM).half()
    batch_indices = torch.arange(BS, dtype=torch.int32)
    positions = torch.full((BS,), 2 * PAGE - 1, dtype=torch.int32)

    def append():
        flashinfer.append_paged_kv_cache(k, v, batch_indices, positions, cache, indices, indptr,
                                         last)
    return append


FAMILIES = {
    "decode": lambda: decode_family(False),
    "decode_tensor_cores": lambda: decode_family(True),
    "prefill_paged": prefill_paged_family,
    "prefill_ragged": prefill_ragged_family,
    "mla": mla_family,
}


def time_calls(calls, rounds):
    """Median microseconds per call of each of `calls` (name -> function), called in turn
    `rounds` times (after a few untimed rounds)."""
    clock = time.perf_counter_ns
    times = {name: [] for name in calls}
    for i in range(rounds + 20):
        for name, call in calls.items():
            t0 = clock()
            call()
            t1 = clock()
            if i >= 20:
                times[name].append(t1 - t0)
    return {name: statistics.median(ts) / 1e3 for name, ts in times.items()}


def measure(made):
    out = {}
    for family, calls in made.items():
        if calls is None:
            continue
        plan, run = calls
        got = time_calls({"plan": plan, "run": run}, ROUNDS)
        for call, us in got.items():
            out[f"{family}.{call}"] = us
    out["append"] = time_calls({"append": append_call()}, ROUNDS)["append"]
    return out


def main():
    made = {name: make() for name, make in FAMILIES.items()}
    result = {"fresh": measure(made)}
    # Any compile turns on what dynafold does once a process compiles.
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    result["compiled"] = measure(made)
    finder = sys.meta_path[0]
    result["dynafold"] = type(finder).__name__ == "DynafoldFinder"
    print("BENCH " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
