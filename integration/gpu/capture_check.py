"""Is FlashInfer's fp4 kernel really inside the captured CUDA graph? fp4_quantize compiled
fullgraph=True (through dynafold) and run (a) as plain FX pieces and (b) replayed from CUDA
graphs, on a first input and then on a second one: a replay whose output still matches the
first input would mean the kernel ran at capture time only."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from piecewise import PiecewiseBackend

from fp4_block import quantizer

gs = torch.tensor([336.0], device="cuda")


def same(a, b):
    return round(float((a.contiguous().view(torch.uint8) == b.contiguous().view(torch.uint8)).float().mean()), 4)


for graphs in (False, True):
    for pdl in (None, False):
        quantize = quantizer(gs, pdl)
        quantize(torch.randn(8, 2048, device="cuda", dtype=torch.bfloat16))
        torch._dynamo.reset()
        compiled = torch.compile(quantize, fullgraph=True, backend=PiecewiseBackend(cuda_graphs=graphs), dynamic=False)
        for bs in (1, 8, 64):
            h1 = torch.randn(bs, 2048, device="cuda", dtype=torch.bfloat16)
            h2 = torch.randn(bs, 2048, device="cuda", dtype=torch.bfloat16)
            e1 = [t.clone() for t in quantize(h1)]
            e2 = [t.clone() for t in quantize(h2)]
            c1 = [t.clone() for t in compiled(h1)]
            c2 = [t.clone() for t in compiled(h2)]
            c1b = [t.clone() for t in compiled(h1)]
            torch.cuda.synchronize()
            print("CAPTURE " + json.dumps({
                "cuda_graphs": graphs, "enable_pdl": pdl, "bs": bs,
                "q_c1_vs_e1": same(c1[0], e1[0]), "q_c2_vs_e2": same(c2[0], e2[0]),
                "q_c2_vs_e1": same(c2[0], e1[0]), "q_c1again_vs_e1": same(c1b[0], e1[0]),
                "sf_c1_vs_e1": same(c1[1], e1[1]), "sf_c2_vs_e2": same(c2[1], e2[1]),
                "q_e1_vs_e2": same(e1[0], e2[0])}), flush=True)
