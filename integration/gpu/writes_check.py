"""Does FlashInfer's fp4 kernel write its outputs at all on this GPU? Same-size blocks are
filled with a marker and freed, so fp4_quantize's torch.empty gets them back; outputs still
holding the marker were never written. Then two different inputs are compared."""
import json

import torch

import flashinfer

gs = torch.tensor([336.0], device="cuda")
for pdl in (None, False):
    for bs in (1, 8, 64):
        h = torch.randn(bs, 2048, device="cuda", dtype=torch.bfloat16)
        flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)
        q_shape, sf_shape = (bs, 1024), (bs * 2048 // 16,)
        res = {}
        for marker in (0xAB, 0x5C):
            torch.cuda.synchronize()
            blocks = [torch.full(q_shape, marker, dtype=torch.uint8, device="cuda"),
                      torch.full((max(16, bs + 15) // 16 * 16 * 2048 // 16,), marker, dtype=torch.uint8, device="cuda")]
            torch.cuda.synchronize()
            del blocks
            q, sf = flashinfer.fp4_quantize(h, gs, is_sf_swizzled_layout=False, enable_pdl=pdl)
            torch.cuda.synchronize()
            res[marker] = (float((q == marker).float().mean()), float((sf.contiguous().view(torch.uint8) == marker).float().mean()),
                           int(q.view(torch.uint8).count_nonzero()))
        print("WRITES " + json.dumps({"enable_pdl": pdl, "bs": bs,
              "q_frac_still_marker_AB": round(res[0xAB][0], 4), "sf_frac_still_marker_AB": round(res[0xAB][1], 4),
              "q_frac_still_marker_5C": round(res[0x5C][0], 4), "sf_frac_still_marker_5C": round(res[0x5C][1], 4),
              "q_nonzero_bytes": res[0x5C][2]}), flush=True)
print("CAPABILITY", torch.cuda.get_device_capability())
