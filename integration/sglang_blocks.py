"""The two forwards SGLang's own compile path is driven over: on CPU by
tests/python/helpers/sglang_compile.py (test_sglang.py), on the GPU by
integration/gpu/sglang_piecewise.py. Both call FlashInfer directly, as SGLang's model code does,
around a split op (where SGLang cuts the graph: attention in a real model) that the driver
registers through SGLang's own `register_split_op` and passes in.

    Fp4Block(attention, hidden, device)   # a projection, NVFP4 quantization, the split op
    OpsBlock(attention, hidden, device)   # rmsnorm, split, fused_add_rmsnorm, silu_and_mul, fp4
"""
import flashinfer
import torch

# The outputs of each block, by name: the packed values and scale factors come first in both.
OUTPUT_NAMES = {"fp4": ("fp4", "sf", "out"), "ops": ("fp4", "sf", "act", "res")}
INPUTS = {"fp4": 1, "ops": 2}


def quantize_like_sglang_sm90(tensor, global_scale):
    """SGLang 0.5.23's kvfp4_tensor.py SM90 branch: flashinfer.fp4_quantize called directly."""
    global_scale_inv = 1.0 / global_scale
    return flashinfer.fp4_quantize(
        tensor,
        global_scale_inv,
        sf_vec_size=16,
        sf_use_ue8m0=False,
        is_sf_swizzled_layout=False,
        is_sf_8x4_layout=False,
        enable_pdl=None,
    )


def _frozen(t, device):
    return torch.nn.Parameter(t.to(device, torch.bfloat16), requires_grad=False)


def _weight(g, rows, cols, device):
    return _frozen(torch.randn(rows, cols, generator=g) / rows ** 0.5, device)


class Fp4Block(torch.nn.Module):
    """The activation side of an FP4 linear: a bf16 projection, its NVFP4 quantization through
    flashinfer.fp4_quantize, the split op and a residual add."""

    def __init__(self, attention, hidden, device):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.attention = attention
        self.proj = _weight(g, hidden, hidden, device)
        self.register_buffer("global_scale", torch.tensor([1.0 / 8.0], device=device))

    def forward(self, x: torch.Tensor):
        h = x @ self.proj
        fp4, sf = quantize_like_sglang_sm90(h, self.global_scale)
        out = torch.empty_like(h)
        self.attention(h, out)
        return fp4, sf, out + h


class OpsBlock(torch.nn.Module):
    """A decoder layer's FlashInfer calls: input RMSNorm, the split op, fused add + RMSNorm,
    SiLU-and-mul over a gate/up projection, and the NVFP4 quantization of the result."""

    def __init__(self, attention, hidden, device):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.attention = attention
        self.input_norm = _frozen(torch.rand(hidden, generator=g) + 0.5, device)
        self.post_norm = _frozen(torch.rand(hidden, generator=g) + 0.5, device)
        self.gate_up = _weight(g, hidden, 4 * hidden, device)
        self.register_buffer("global_scale", torch.tensor([1.0 / 8.0], device=device))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = flashinfer.rmsnorm(x, self.input_norm, 1e-6)
        attn = torch.empty_like(h)
        self.attention(h, attn)
        res = residual.clone()
        flashinfer.fused_add_rmsnorm(attn, res, self.post_norm, 1e-6)
        act = flashinfer.silu_and_mul(attn @ self.gate_up)
        fp4, sf = quantize_like_sglang_sm90(act, self.global_scale)
        return fp4, sf, act, res


BLOCKS = {"fp4": Fp4Block, "ops": OpsBlock}


def inputs(name, n, hidden, device, seed):
    """Fresh inputs for `n` tokens (made on the CPU so they do not depend on CUDA's RNG)."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(n, hidden, generator=g).to(device, torch.bfloat16)
                 for _ in range(INPUTS[name]))
