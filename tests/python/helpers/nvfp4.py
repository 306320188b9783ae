"""NVFP4 in plain torch, for the CPU stand-ins of FlashInfer's and SGLang's fp4 kernels:
16-element blocks of E2M1 values, one UE4M3 scale per block, scales in the linear layout or
FlashInfer's and SGLang's swizzled 128x4 one."""
import torch

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def round_up(x, m):
    return (x + m - 1) // m * m


def swizzle_offsets(rows, cols):
    """The 128x4 swizzled layout's byte offset of scale (row, col), padded to 128 rows and 4
    columns (FlashInfer's and SGLang's `[rows//128, cols//4, 32, 4, 4]` blocks)."""
    r = torch.arange(rows).unsqueeze(1)
    c = torch.arange(cols).unsqueeze(0)
    return (((r // 128) * (round_up(cols, 4) // 4) + c // 4) * 512
            + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4)


def unswizzle(sf_swizzled, rows, cols):
    """Scales [rows, cols] (float) from their 128x4 swizzled bytes."""
    flat = sf_swizzled.contiguous().view(torch.uint8).reshape(-1)
    return flat[swizzle_offsets(rows, cols)].view(torch.float8_e4m3fn).float()


def quantize(x, global_scale):
    """NVFP4 of `x` [m, k]: packed codes [m, k/2] (uint8) and the scales [m, k/16]
    (float8_e4m3fn), scale = global_scale * amax / 6."""
    m, k = x.shape
    blocks = x.reshape(m, k // 16, 16).float()
    scale = global_scale.float().reshape(())
    sf = (scale * blocks.abs().amax(-1) / 6.0).to(torch.float8_e4m3fn)
    sf_f = sf.float()
    inv = torch.where(sf_f == 0, torch.zeros_like(sf_f), scale / sf_f)
    scaled = (blocks * inv.unsqueeze(-1)).clamp(-6.0, 6.0)
    code = (scaled.abs().unsqueeze(-1) - E2M1).abs().argmin(-1).to(torch.uint8)
    code = (code | ((scaled < 0).to(torch.uint8) << 3)).reshape(m, k)
    return code[:, 0::2] | (code[:, 1::2] << 4), sf


def values(packed):
    """The E2M1 values of packed codes [m, k/2] -> [m, k] float."""
    codes = torch.stack([packed & 0xF, packed >> 4], -1).reshape(packed.shape[0], -1).long()
    return E2M1[codes & 7] * torch.where(codes >= 8, -1.0, 1.0)


def dequantize(packed, sf_swizzled):
    """Packed codes [rows, k/2] times their swizzled scales -> [rows, k] float."""
    rows, k = packed.shape[0], packed.shape[1] * 2
    return (values(packed).reshape(rows, k // 16, 16)
            * unswizzle(sf_swizzled, rows, k // 16).unsqueeze(-1)).reshape(rows, k)
