"""Issue 30 finding 1: `append_paged_kv_cache` given its single paged cache, eager against
compiled (inductor, fullgraph=True) with the token dimension static, marked dynamic and with
`dynamic=True`, NHD and HND; and, on releases that have them, the NVFP4 appends
(`nvfp4_quantize_append_paged_kv_cache` and its `_with_slot_mapping` form) given the stacked
5-D value and scale caches. FlashInfer's public functions and declarations; the page kernels
CPU stand-ins writing what the real ones write (standin_kernels.py). Prints one JSON line: per
case, whether it compiled, whether the caches equal eager's, and how many K and V rows each
wrote (values and, for NVFP4, scales)."""
import json
import sys

import torch

import flashinfer
import flashinfer.page as page
import standin_kernels as standins
from value_compare import same

standins.install({"page": page})

HEADS, DIM, PAGE, PAGES = 2, 8, 4, 6


def inputs(layout):
    """Six new tokens for two requests (4 and 2), each request's pages already holding the
    space (kv_last_page_len counts the appended tokens)."""
    g = torch.Generator().manual_seed(0)
    k = torch.randn(6, HEADS, DIM, generator=g)
    v = torch.randn(6, HEADS, DIM, generator=g) + 10
    shape = (PAGES, 2, PAGE, HEADS, DIM) if layout == "NHD" else (PAGES, 2, HEADS, PAGE, DIM)
    cache = torch.zeros(shape)
    kv_indices = torch.tensor([3, 1, 4], dtype=torch.int32)
    kv_indptr = torch.tensor([0, 2, 3], dtype=torch.int32)
    last = torch.tensor([1, 2], dtype=torch.int32)  # request 0: 3 + 1 tokens; request 1: 2
    batch_indices = torch.tensor([0, 0, 0, 0, 1, 1], dtype=torch.int32)
    positions = torch.tensor([1, 2, 3, 4, 0, 1], dtype=torch.int32)
    return k, v, batch_indices, positions, cache, kv_indices, kv_indptr, last


def written(cache, layout):
    """(K rows, V rows) holding something: one row per (page, entry)."""
    dims = (2, 3) if layout == "NHD" else (1, 3)
    return tuple(int((half.abs().sum(dim=dims) != 0).sum()) for half in cache.unbind(1))


def check(layout, mode, pair=False):
    def f(k, v, batch_indices, positions, cache, kv_indices, kv_indptr, last):
        # The (K, V) pair form: two tensors, as SGLang-style caches keep them.
        kv = tuple(t.contiguous() for t in cache.unbind(1)) if pair else cache
        flashinfer.append_paged_kv_cache(k, v, batch_indices, positions, kv, kv_indices,
                                         kv_indptr, last, kv_layout=layout)
        if pair:
            cache.copy_(torch.stack(kv, 1))

    args = inputs(layout)
    eager_args = [a.clone() for a in args]
    f(*eager_args)
    got_args = [a.clone() for a in args]
    if mode == "mark_dynamic":
        for t in got_args[:4]:
            torch._dynamo.mark_dynamic(t, 0)
    torch._dynamo.reset()
    try:
        torch.compile(f, fullgraph=True, backend="inductor",
                            dynamic=True if mode == "dynamic=True" else None)(*got_args)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}
    return {"ok": True, "equal": same(eager_args, got_args),
            "eager_rows": written(eager_args[4], layout),
            "compiled_rows": written(got_args[4], layout)}


# NVFP4: head_dim 32, so a row is 16 packed bytes and two E4M3 block scales per head.
FP4_DIM = 32
# The six tokens of `inputs` as flat slots (page * PAGE + entry), then a padding row (-1), which
# the slot-mapping kernel skips.
SLOTS = [13, 14, 15, 4, 16, 17, -1]


def nvfp4_inputs(layout, rows=6):
    g = torch.Generator().manual_seed(1)
    k = torch.randn(rows, HEADS, FP4_DIM, generator=g).to(torch.bfloat16)
    v = (torch.randn(rows, HEADS, FP4_DIM, generator=g) * 4 + 1).to(torch.bfloat16)

    def stacked(last):
        shape = ((PAGES, 2, PAGE, HEADS, last) if layout == "NHD"
                 else (PAGES, 2, HEADS, PAGE, last))
        return torch.zeros(shape, dtype=torch.uint8)
    return k, v, stacked(FP4_DIM // 2), stacked(FP4_DIM // 16).view(torch.float8_e4m3fn)


def nvfp4_check(layout, mode, form="indices", scales="float"):
    """One NVFP4 append, eager against compiled. `form`: "indices" (batch indices and
    positions), "pair" (the same with (K, V) tuples of both caches) or "slots" (the slot-mapping
    function); `scales`: Python floats written as literals, "variable" floats or one-element
    float32 tensors (slots only)."""
    if form == "slots":
        k, v, cache, sf = nvfp4_inputs(layout, rows=len(SLOTS))
        index_args = [torch.tensor(SLOTS, dtype=torch.int32)]
    else:
        k, v, cache, sf = nvfp4_inputs(layout)
        _, _, batch_indices, positions, _, kv_indices, kv_indptr, last = inputs(layout)
        index_args = [batch_indices, positions, kv_indices, kv_indptr, last]
    tensor_scales = torch.tensor([0.5]), torch.tensor([2.0])
    k_scale, v_scale = 0.5, 2.0

    def f(k, v, cache, sf, *index_args):
        kv, kv_sf = cache, sf
        if form == "pair":
            kv = tuple(t.contiguous() for t in cache.unbind(1))
            kv_sf = tuple(t.contiguous() for t in sf.unbind(1))
        # Float scales as literals, constants of the graph. A float in a variable is a symbolic
        # float under `dynamic=True`: traced as shipped, FlashInfer's `math.isfinite` check
        # cannot take it (a break before any kernel, main before the NVFP4 records); the
        # operator takes it.
        if form == "slots" and scales == "tensor":
            page.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(
                k, v, index_args[0], kv, kv_sf, *tensor_scales, kv_layout=layout)
        elif form == "slots" and scales == "variable":
            page.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(
                k, v, index_args[0], kv, kv_sf, k_scale, v_scale, kv_layout=layout)
        elif form == "slots":
            page.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(
                k, v, index_args[0], kv, kv_sf, 0.5, 2.0, kv_layout=layout)
        else:
            batch_indices, positions, kv_indices, kv_indptr, last = index_args
            page.nvfp4_quantize_append_paged_kv_cache(
                k, v, batch_indices, positions, kv, kv_sf, kv_indices, kv_indptr, last,
                0.5, 2.0, kv_layout=layout)
        if form == "pair":
            cache.copy_(torch.stack(kv, 1))
            sf.copy_(torch.stack(kv_sf, 1))

    args = [k, v, cache, sf, *index_args]
    eager_args = [a.clone() for a in args]
    f(*eager_args)
    got_args = [a.clone() for a in args]
    if mode == "mark_dynamic":
        for t in (got_args[0], got_args[1], got_args[4]):
            torch._dynamo.mark_dynamic(t, 0)
    torch._dynamo.reset()
    try:
        torch.compile(f, fullgraph=True, backend="inductor",
                      dynamic=True if mode == "dynamic=True" else None)(*got_args)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}

    def as_bytes(ts):
        return [t.view(torch.uint8) for t in ts[2:4]]

    def rows(ts):
        return [written(t, layout) for t in as_bytes(ts)]
    return {"ok": True, "equal": same(as_bytes(eager_args), as_bytes(got_args)),
            "eager_rows": rows(eager_args), "compiled_rows": rows(got_args)}


def nvfp4_cases():
    """The NVFP4 appends' cases, on a release that has them (0.6.16 on)."""
    if not hasattr(page, "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping"):
        return {}
    out = {f"nvfp4 {layout} {mode}": nvfp4_check(layout, mode) for layout in ("NHD", "HND")
           for mode in ("static", "mark_dynamic", "dynamic=True")}
    out.update({f"nvfp4 slots {layout} dynamic=True": nvfp4_check(layout, "dynamic=True", "slots")
                for layout in ("NHD", "HND")})
    out["nvfp4 slots NHD dynamic=True tensor scales"] = nvfp4_check(
        "NHD", "dynamic=True", "slots", "tensor")
    out["nvfp4 slots NHD dynamic=True variable scales"] = nvfp4_check(
        "NHD", "dynamic=True", "slots", "variable")
    # The (K, V) pairs go through FlashInfer's own declaration, traced as shipped.
    out["nvfp4 NHD pair dynamic=True"] = nvfp4_check("NHD", "dynamic=True", "pair")
    return out


def main():
    out = {f"{layout} {mode}": check(layout, mode) for layout in ("NHD", "HND")
           for mode in ("static", "mark_dynamic", "dynamic=True")}
    # The (K, V) pair goes through FlashInfer's own declaration, traced past the public
    # function's API wrapper (it broke the graph at `inspect.signature` there).
    out.update({f"NHD pair {mode}": check("NHD", mode, pair=True)
                for mode in ("static", "dynamic=True")})
    out.update(nvfp4_cases())
    ops = sys.modules.get("_dynafold_ops.engine.wake")
    checks = ops.status().get("fake checks", {}) if ops is not None else {}
    print("RESULT " + json.dumps({"cases": out, "checks": checks}), flush=True)


if __name__ == "__main__":
    main()
