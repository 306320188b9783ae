"""Does FlashInfer's fp4_quantize read memory outside its input? The same input rows, placed
at the start of a larger buffer whose remaining rows are changed between calls."""
import json
import torch
import flashinfer

K = 2048
gs = torch.tensor([336.0], device="cuda")
for pdl in (None, False):
    for bs in (1, 8, 64):
        g = torch.Generator(device="cpu").manual_seed(bs)
        rows = torch.randn(bs, K, generator=g).to("cuda", torch.bfloat16)
        buf = torch.zeros(bs + 256, K, device="cuda", dtype=torch.bfloat16)
        buf[:bs] = rows
        h = buf[:bs]
        a = [t.clone() for t in flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)]
        a2 = [t.clone() for t in flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)]
        buf[bs:] = torch.randn(256, K, device="cuda", dtype=torch.bfloat16) * 100
        b = [t.clone() for t in flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)]
        # Same rows, in a fresh standalone tensor.
        c = [t.clone() for t in flashinfer.fp4_quantize(rows.clone(), gs, is_sf_swizzled_layout=False, enable_pdl=pdl)]
        torch.cuda.synchronize()
        frac = lambda x, y: round(float((x.view(torch.uint8) == y.view(torch.uint8)).float().mean()), 4)  # noqa: E731
        print("BOUNDS " + json.dumps({"enable_pdl": pdl, "bs": bs,
              "q_same_call_twice": frac(a[0], a2[0]), "q_after_changing_rows_beyond": frac(a[0], b[0]),
              "q_standalone_copy": frac(a[0], c[0]), "sf_same_call_twice": frac(a[1], a2[1]),
              "sf_after_changing_rows_beyond": frac(a[1], b[1]), "sf_standalone_copy": frac(a[1], c[1])}), flush=True)
