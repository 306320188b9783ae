"""CPU stand-ins for FlashInfer's CUDA kernels, for checking declarations on values.

This machine has no GPU, so FlashInfer's JIT modules cannot be built. Each stand-in replaces
one JIT module (the `gen_*_module` spec its loader builds) with Python functions that take the
kernel's arguments in the kernel's order and write exactly the tensors the real kernel writes
(per FlashInfer's C++/CUDA source, docs/op-audit), with a deterministic function of the
inputs; they do not compute the op. Everything above the kernel call is FlashInfer's own: its
public functions, wrappers, declarations and loaders.

Two more stand-ins, named where they are used: the CUDA default generator FlashInfer's
sampling reads as (seed, offset) (`PhiloxState`), and the pinned host memory of the attention
wrappers' constructors (`unpinned`, plain host memory: pinning needs a CUDA driver).
"""

import contextlib
import math
import types

import torch


class _Module(types.SimpleNamespace):
    """A built module's functions; any other name is a kernel not stood in (it raises if
    called, so a check never passes on a kernel that did not run)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _unbuilt(name)


def _spec(**kernels):
    # Opaque to Dynamo, as the built module's tvm_ffi functions are: a traced call of one is a
    # graph break, exactly where the real kernel's would be.
    opaque = {name: torch._dynamo.disable(kernel) for name, kernel in kernels.items()}

    class Spec:
        def build_and_load(self):
            return _Module(**opaque)
    return Spec()


def _mix(*tensors):
    """A deterministic value per call, from every input (so a stale input shows)."""
    total = 0.0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            total = total + t.float().sum().item() * 1e-3
    return total


# --- norm (flashinfer/jit/norm.py; csrc/norm.cu) ------------------------------------------


def _rms(x, w):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()


def _scale_of(scale):
    return scale.float().reshape(-1)[0] if isinstance(scale, torch.Tensor) else float(scale)


def rmsnorm(out, input, weight, eps, enable_pdl):
    out.copy_(_rms(input, weight).to(out.dtype))


def fused_add_rmsnorm(input, residual, weight, eps, enable_pdl):
    residual.add_(input)
    input.copy_(_rms(residual, weight).to(input.dtype))


def rmsnorm_quant(out, input, weight, scale, eps, enable_pdl):
    out.copy_((_rms(input, weight) / _scale_of(scale)).clamp(-448, 448).to(out.dtype))


def fused_add_rmsnorm_quant(out, input, residual, weight, scale, eps, enable_pdl):
    residual.add_(input)
    out.copy_((_rms(residual, weight) / _scale_of(scale)).clamp(-448, 448).to(out.dtype))


NORM = dict(rmsnorm=rmsnorm, fused_add_rmsnorm=fused_add_rmsnorm, rmsnorm_quant=rmsnorm_quant,
            fused_add_rmsnorm_quant=fused_add_rmsnorm_quant)


# --- decode (csrc/single_decode.cu, batch_decode.cu) --------------------------------------


def single_decode_run(q, k, v, tmp, o, maybe_lse, *rest):
    """Writes `o`, `tmp` (scratch) and, when given, `maybe_lse` (csrc/single_decode.cu:81)."""
    s = torch.einsum("hd,nhd->hn", q.float(), k.float())
    o.copy_(torch.einsum("hn,nhd->hd", s.softmax(-1), v.float()).to(o.dtype))
    tmp.view(-1)[:1].fill_(1)
    if maybe_lse is not None:
        maybe_lse.copy_(torch.logsumexp(s, -1))


def batch_decode_plan(float_ws, int_ws, pinned, indptr_host, batch_size, *rest):
    """The plan as FlashInfer's scheduler makes it: it holds the batch's sizes
    (include/flashinfer/attention/scheduler.cuh), as a tvm_ffi Array from 0.6 on."""
    plan = [batch_size, (batch_size + 7) // 8 * 8, int(indptr_host[-1]), 0, 1]
    try:
        import tvm_ffi
        return tvm_ffi.convert(plan)
    except ImportError:
        return plan


def batch_decode_run(float_ws, int_ws, plan_info, q, k_cache, v_cache, indptr, indices,
                     last_page_len, o, lse, *rest):
    """Writes `o` (and `lse` when given) from q, the request's pages and the plan's ints."""
    plan_info = [int(v) for v in plan_info]
    n = plan_info[0]
    pages = k_cache[indices.long()].float().mean(dim=tuple(range(1, k_cache.dim())))
    per_request = torch.stack([pages[int(indptr[i]):int(indptr[i + 1])].sum() for i in range(n)])
    o.copy_((q.float() * plan_info[1] + per_request[:, None, None] + plan_info[2]).to(o.dtype))
    if lse is not None:
        lse.copy_(q.float().sum(-1) + plan_info[2])


# --- sampling (csrc/sampling.cu) ----------------------------------------------------------


def _draw(probs, seed_arr, seed, offset_arr, offset):
    """Indices that depend on the probabilities and on the random stream's position."""
    if seed_arr is not None:
        seed, offset = int(seed_arr.reshape(-1)[0]), int(offset_arr.reshape(-1)[0])
    key = (seed * 31 + offset) % probs.size(-1)
    return (probs.float().argmax(-1) + key) % probs.size(-1)


def top_k_top_p_sampling_from_probs(probs, output, valid, indices, top_k_arr, top_k, top_p_arr,
                                    top_p, deterministic, seed_arr, seed, offset_arr, offset):
    output.copy_(_draw(probs, seed_arr, seed, offset_arr, offset).to(output.dtype))
    valid.fill_(True)


def sampling_from_probs(probs, output, valid, indices, deterministic, seed_arr, seed, offset_arr,
                        offset):
    output.copy_(_draw(probs, seed_arr, seed, offset_arr, offset).to(output.dtype))
    valid.fill_(True)


def softmax(workspace, logits, probs, temperature_arr, temperature, enable_pdl, *rest):
    probs.copy_(torch.softmax(logits.float() / (temperature or 1.0), -1))


class PhiloxState:
    """Stands in for the CUDA default generator, as FlashInfer's sampling reads it:
    `get_state()` viewed as int64 is (seed, offset), and the kernels' draws advance the offset
    (flashinfer/sampling.py get_seed_and_offset)."""

    def __init__(self, seed=1234):
        self.state = torch.tensor([seed, 0], dtype=torch.int64).view(torch.uint8)

    def get_state(self):
        return self.state.clone()

    def set_state(self, state):
        self.state = state.clone()

    def position(self):
        return self.state.view(torch.int64).tolist()


# --- topk (0.7.x csrc/topk.cu) ------------------------------------------------------------


def cub_topk_page_table_transform(input, out, src_page_table, lengths, out_raw_indices,
                                  workspace, top_k, *rest):
    """Writes `out` (the kernel's result buffer, which FlashInfer's wrapper returns)."""
    idx = input.float().topk(top_k, dim=-1).indices
    out.copy_(torch.gather(src_page_table.long(), 1, idx).to(out.dtype) + 1)
    if out_raw_indices is not None:
        out_raw_indices.copy_(idx.to(out_raw_indices.dtype))


# --- page (csrc/page.cu) ----------------------------------------------------------------


def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_k_cache,
                          paged_v_cache, kv_indices, kv_indptr, kv_last_page_len, layout):
    """Writes token i's key and value at its request's position: page
    kv_indices[kv_indptr[b] + pos // page_size], entry pos % page_size; layout 0 (NHD) puts the
    entry before the heads, 1 (HND) after (include/flashinfer/page.cuh AppendPagedKVCache).
    Writes nothing else."""
    page_size = paged_k_cache.size(1 if layout == 0 else 2)
    for i in range(append_key.size(0)):
        b, pos = int(batch_indices[i]), int(positions[i])
        page = int(kv_indices[int(kv_indptr[b]) + pos // page_size])
        entry = pos % page_size
        for cache, rows in ((paged_k_cache, append_key), (paged_v_cache, append_value)):
            if layout == 0:
                cache[page, entry] = rows[i]
            else:
                cache[page, :, entry] = rows[i]


def _e2m1(x):
    """nvfp4_append_quantize_e2m1: sign bit 8 and a magnitude code 0-7 by its thresholds (NaN
    and anything not above 0.25 is 0)."""
    mag = x.abs()
    code = sum((mag > 0.25, mag >= 0.75, mag > 1.25, mag >= 1.75, mag > 2.5, mag >= 3.5,
                mag > 5.0), torch.zeros_like(mag, dtype=torch.uint8))
    return code | (torch.signbit(x).to(torch.uint8) << 3)


def _nvfp4_block(rows, global_scale):
    """nvfp4_append_quantize_block over every 16 values of `rows` [..., head_dim]: the packed
    E2M1 bytes [..., head_dim // 2] (even element low nibble) and the E4M3 block scales
    [..., head_dim // 16], amax / (6 * global_scale) rounded to E4M3 (saturating, as the
    kernel's __nv_fp8_e4m3), each value scaled by 1 / (rounded scale * global_scale)."""
    x = rows.float().unflatten(-1, (-1, 16))
    amax = x.abs().amax(-1)
    scale = torch.where(amax > 0, amax / (6.0 * global_scale), 0.0)
    scale = scale.clamp(max=448.0).to(torch.float8_e4m3fn)
    rounded = scale.float()
    inverse = torch.where((amax > 0) & (rounded > 0), 1.0 / (rounded * global_scale), 0.0)
    codes = _e2m1(x * inverse.unsqueeze(-1)).flatten(-2)
    return codes[..., 0::2] | (codes[..., 1::2] << 4), scale


def _global_scale(scale):
    value = float(_scale_of(scale))
    if not (math.isfinite(value) and value > 0):
        raise RuntimeError("trap: a global scale that is not positive finite")
    return value


def _nvfp4_write(caches, rows, k_scale, v_scale, page, entry, layout):
    """Token rows (key, value) quantized into (K values, V values, K scales, V scales) at one
    page and entry: NHD puts the entry before the heads, HND after (both kernels index the
    scale caches with the value caches' layout, csrc/page.cu strides)."""
    k_cache, v_cache, k_sf, v_sf = caches
    for (values, scales), row, scale in (((k_cache, k_sf), rows[0], k_scale),
                                         ((v_cache, v_sf), rows[1], v_scale)):
        packed, sf = _nvfp4_block(row, scale)
        if layout == 0:
            values[page, entry], scales[page, entry] = packed, sf
        else:
            values[page, :, entry], scales[page, :, entry] = packed, sf


def nvfp4_quantize_append_paged_kv_cache(append_key, append_value, batch_indices, positions,
                                         paged_k_cache, paged_v_cache, k_scale_cache,
                                         v_scale_cache, kv_indices, kv_indptr, kv_last_page_len,
                                         k_scale, v_scale, layout):
    """NVFP4QuantizeAppendPagedKVCacheKernel (include/flashinfer/page.cuh): token i's key and
    value quantized at page kv_indices[kv_indptr[b] + pos // page_size], entry pos % page_size,
    packed E2M1 into the value caches and E4M3 block scales into the scale caches. Writes
    nothing else."""
    page_size = paged_k_cache.size(1 if layout == 0 else 2)
    k, v = _global_scale(k_scale), _global_scale(v_scale)
    caches = (paged_k_cache, paged_v_cache, k_scale_cache, v_scale_cache)
    for i in range(append_key.size(0)):
        b, pos = int(batch_indices[i]), int(positions[i])
        page = int(kv_indices[int(kv_indptr[b]) + pos // page_size])
        _nvfp4_write(caches, (append_key[i], append_value[i]), k, v, page, pos % page_size,
                     layout)


def nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(
        append_key, append_value, slot_mapping, paged_k_cache, paged_v_cache, k_scale_cache,
        v_scale_cache, k_scale, v_scale, layout):
    """NVFP4QuantizeAppendPagedKVCacheWithSlotMappingKernel: row i quantized at page
    slot // page_size, entry slot % page_size; a negative or out-of-range slot writes nothing;
    the scales are read from their one-element float32 tensors."""
    page_size = paged_k_cache.size(1 if layout == 0 else 2)
    slots = page_size * paged_k_cache.size(0)
    k, v = _global_scale(k_scale), _global_scale(v_scale)
    caches = (paged_k_cache, paged_v_cache, k_scale_cache, v_scale_cache)
    for i in range(slot_mapping.size(0)):
        slot = int(slot_mapping[i])
        if 0 <= slot < slots:
            _nvfp4_write(caches, (append_key[i], append_value[i]), k, v, slot // page_size,
                         slot % page_size, layout)


def install(modules):
    """Replaces each JIT module's spec in the FlashInfer modules given (name -> module)."""
    decode = modules.get("decode")
    if decode is not None:
        decode.gen_single_decode_module = lambda *a: _spec(run=single_decode_run)
        decode.gen_batch_decode_module = lambda *a: _spec(plan=batch_decode_plan,
                                                          run=batch_decode_run)
    norm = modules.get("norm")
    if norm is not None:
        norm.gen_norm_module = lambda *a: _spec(**NORM)
    sampling = modules.get("sampling")
    if sampling is not None:
        sampling.gen_sampling_module = lambda *a: _spec(
            softmax=softmax, sampling_from_probs=sampling_from_probs,
            top_k_top_p_sampling_from_probs=top_k_top_p_sampling_from_probs)
    page = modules.get("page")
    if page is not None:
        # (0.7.4's gen_page_module(True), the NVFP4 "4over6" build, has no stand-in: any of
        # its kernels raises.)
        page.gen_page_module = lambda *a: _spec() if any(a) else _spec(
            append_paged_kv_cache=append_paged_kv_cache,
            nvfp4_quantize_append_paged_kv_cache=nvfp4_quantize_append_paged_kv_cache,
            nvfp4_quantize_append_paged_kv_cache_with_slot_mapping=(
                nvfp4_quantize_append_paged_kv_cache_with_slot_mapping))
    topk = modules.get("topk")
    if topk is not None and hasattr(topk, "gen_topk_module"):
        topk.gen_topk_module = lambda *a: _spec(
            cub_topk_page_table_transform=cub_topk_page_table_transform)


def _unbuilt(name):
    @torch._dynamo.disable
    def kernel(*args, **kwargs):
        raise NotImplementedError(f"{name}: no CPU stand-in (not part of this check)")
    return kernel


@contextlib.contextmanager
def unpinned():
    """The attention wrappers' constructors allocate pinned host memory, which needs a CUDA
    driver; inside this block it is plain host memory (pinning changes copy speed, not what
    the wrapper computes)."""
    empty = torch.empty

    def host_empty(*args, pin_memory=False, **kwargs):
        return empty(*args, **kwargs)

    torch.empty = host_empty
    try:
        yield
    finally:
        torch.empty = empty
