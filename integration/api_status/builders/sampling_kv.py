"""Sampling (every form, incl. joint and from logits), top-k, cascade merges, paged KV append
(incl. MLA and nvfp4 KV), packbits."""
import torch

B, V = 4, 128
I32 = torch.int32


def _i(*shape, fill=0):
    return torch.full(shape, fill, device="cuda", dtype=I32)


def _probs(t):
    return t(B, V, dtype=torch.float32)


def _sample(name, *extra, **kw):
    return lambda t, fi: (lambda p: getattr(fi, name)(p, *extra, **kw), (_probs(t),))


def _chain(t, fi):
    draft = t(B, 3, V, dtype=torch.float32)
    ids = _i(B, 3)
    target = t(B, 4, V, dtype=torch.float32)
    return lambda d, i, tg: fi.chain_speculative_sampling(d, i, tg), (draft, ids, target)


def _top_k(t, fi):
    return lambda x: fi.top_k(x, 8), (t(B, 1024, dtype=torch.float32),)


def _top_k_page_table(t, fi):
    return (lambda x, pt, n: fi.top_k_page_table_transform(x, pt, n, 8),
            (t(B, 1024, dtype=torch.float32), _i(B, 1024), _i(B, fill=1024)))


def _top_k_ragged(t, fi):
    return (lambda x, o, n: fi.top_k_ragged_transform(x, o, n, 8),
            (t(B, 1024, dtype=torch.float32), _i(B), _i(B, fill=1024)))


def _merge_state(t, fi):
    return (lambda va, sa, vb, sb: fi.merge_state(va, sa, vb, sb),
            (t(8, 4, 128), t(8, 4, dtype=torch.float32), t(8, 4, 128),
             t(8, 4, dtype=torch.float32)))


def _merge_state_in_place(t, fi):
    def f(v, s, vo, so):
        fi.merge_state_in_place(v, s, vo, so)
        return v, s
    return f, (t(8, 4, 128), t(8, 4, dtype=torch.float32), t(8, 4, 128),
               t(8, 4, dtype=torch.float32))


def _merge_states(t, fi):
    return lambda v, s: fi.merge_states(v, s), (t(8, 3, 4, 128), t(8, 3, 4, dtype=torch.float32))


PAGES, PAGE, KVH, D = 8, 16, 2, 128


def _kv_indexing(nnz=4):
    # Each token at a position of its own (all in request 0's first page): tokens sharing a
    # slot race on a GPU, so eager and compiled would each keep another token's values.
    positions = torch.arange(nnz, device="cuda", dtype=I32)
    return (_i(nnz), positions, _i(PAGES), _i(B + 1), _i(B, fill=1))


def _append_paged_kv_cache(t, fi):
    k, v = t(4, KVH, D), t(4, KVH, D)
    cache = t(PAGES, 2, PAGE, KVH, D)

    def f(k, v, cache, bi, pos, idx, indptr, last):
        fi.append_paged_kv_cache(k, v, bi, pos, cache, idx, indptr, last)
        return cache
    return f, (k, v, cache, *_kv_indexing())


def _append_paged_mla_kv_cache(t, fi):
    ckv, kpe = t(4, 512), t(4, 64)
    ckv_cache, kpe_cache = t(PAGES, PAGE, 512), t(PAGES, PAGE, 64)

    def f(ckv, kpe, cc, kc, bi, pos, idx, indptr, last):
        fi.append_paged_mla_kv_cache(ckv, kpe, bi, pos, cc, kc, idx, indptr, last)
        return cc, kc
    return f, (ckv, kpe, ckv_cache, kpe_cache, *_kv_indexing())


def _nvfp4_caches(t):
    """The NVFP4 appends' stacked caches [pages, 2, page, heads, ...]: packed values (uint8) and
    block scales (e4m3; 0.7.4 checks it), the form their operators take whole (a (K, V) pair
    goes through FlashInfer's own declaration)."""
    return (t(PAGES, 2, PAGE, KVH, D // 2, dtype=torch.uint8),
            t(PAGES, 2, PAGE, KVH, D // 16, dtype=torch.float8_e4m3fn))


def _nvfp4_append(t, fi):
    k, v = t(4, KVH, D), t(4, KVH, D)

    def f(k, v, cache, sf, bi, pos, idx, indptr, last):
        fi.nvfp4_quantize_append_paged_kv_cache(k, v, bi, pos, cache, sf, idx, indptr, last,
                                                1.0, 1.0)
        return cache, sf
    return f, (k, v, *_nvfp4_caches(t), *_kv_indexing())


def _nvfp4_kv_quantize(t, fi):
    return (lambda x, s: fi.nvfp4_kv_quantize(x, s),
            (t(64, D), t(1, dtype=torch.float32)))


def _get_seq_lens(t, fi):
    return lambda indptr, last: fi.get_seq_lens(indptr, last, PAGE), (_i(B + 1), _i(B))


def _batch_indices_positions(t, fi):
    return (lambda indptr, lens: fi.get_batch_indices_positions(indptr, lens, 16),
            (_i(B + 1), _i(B)))


def _packbits(t, fi):
    return lambda x: fi.packbits(x, "little"), (t(64, dtype=torch.bool),)


def _segment_packbits(t, fi):
    return lambda x, p: fi.segment_packbits(x, p, "little"), (t(64, dtype=torch.bool), _i(3))


BUILDERS = {
    "sampling_from_probs": _sample("sampling_from_probs"),
    "sampling_from_logits": _sample("sampling_from_logits"),
    "top_p_sampling_from_probs": _sample("top_p_sampling_from_probs", 0.9),
    "top_k_sampling_from_probs": _sample("top_k_sampling_from_probs", 5),
    "min_p_sampling_from_probs": _sample("min_p_sampling_from_probs", 0.1),
    "top_k_top_p_sampling_from_probs": lambda t, fi: {
        "top_k_first": _sample("top_k_top_p_sampling_from_probs", 5, 0.9)(t, fi),
        "joint": _sample("top_k_top_p_sampling_from_probs", 5, 0.9,
                         filter_apply_order="joint")(t, fi)},
    "top_k_top_p_sampling_from_logits": lambda t, fi: {
        "top_k_first": _sample("top_k_top_p_sampling_from_logits", 5, 0.9)(t, fi),
        "joint": _sample("top_k_top_p_sampling_from_logits", 5, 0.9,
                         filter_apply_order="joint")(t, fi)},
    "top_p_renorm_probs": _sample("top_p_renorm_probs", 0.9),
    "top_k_renorm_probs": _sample("top_k_renorm_probs", 5),
    "top_k_mask_logits": _sample("top_k_mask_logits", 5),
    "softmax": _sample("softmax", enable_pdl=False),
    "chain_speculative_sampling": _chain,
    "top_k": _top_k,
    "top_k_page_table_transform": _top_k_page_table,
    "top_k_ragged_transform": _top_k_ragged,
    "merge_state": _merge_state,
    "merge_state_in_place": _merge_state_in_place,
    "merge_states": _merge_states,
    "append_paged_kv_cache": _append_paged_kv_cache,
    "append_paged_mla_kv_cache": _append_paged_mla_kv_cache,
    "nvfp4_quantize_append_paged_kv_cache": _nvfp4_append,
    "nvfp4_kv_quantize": _nvfp4_kv_quantize,
    "get_seq_lens": _get_seq_lens,
    "get_batch_indices_positions": _batch_indices_positions,
    "packbits": _packbits,
    "segment_packbits": _segment_packbits,
}


def _nvfp4_append_slots(t, fi):
    k, v = t(4, KVH, D), t(4, KVH, D)

    def f(k, v, slots, cache, sf):
        fi.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping(k, v, slots, cache, sf, 1.0,
                                                                  1.0)
        return cache, sf
    # A slot of its own per token (tokens sharing one race on a GPU, as in _kv_indexing).
    slots = torch.arange(4, device="cuda", dtype=torch.int64)
    return f, (k, v, slots, *_nvfp4_caches(t))


def _nvfp4_append_mla(t, fi):
    u8, sf = torch.uint8, torch.float8_e4m3fn
    ckv, kpe = t(4, 512), t(4, 64)
    cc, cs, kc = (t(PAGES, PAGE, 256, dtype=u8), t(PAGES, PAGE, 32, dtype=sf),
                  t(PAGES, PAGE, 64, dtype=sf))

    def f(ckv, kpe, cc, cs, kc, bi, pos, idx, indptr, last):
        fi.nvfp4_quantize_append_paged_mla_kv_cache(ckv, kpe, bi, pos, cc, cs, kc, idx, indptr,
                                                    last, 1.0, 1.0)
        return cc, cs, kc
    return f, (ckv, kpe, cc, cs, kc, *_kv_indexing())


def _concat_mla_kv_quant(t, fi):
    return (lambda kv, kpe: fi.concat_mla_kv_quant_fp8(kv, kpe),
            (t(4, 16, 256), t(4, 1, 64)))


def _top_k_varlen(t, fi):
    return (lambda x, n: fi.top_k_varlen(x, n, 8),
            (t(B, 1024, dtype=torch.float32), _i(B, fill=1024)))


BUILDERS.update({
    "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping": _nvfp4_append_slots,
    "nvfp4_quantize_append_paged_mla_kv_cache": _nvfp4_append_mla,
    "concat_mla_kv_quant_fp8": _concat_mla_kv_quant,
    "top_k_varlen": _top_k_varlen,
})


def _cake_top_k_top_p(t, fi):
    """The cluster radix pipeline at a real vocabulary: scalar k/p, and per-request tensors
    with their host bound (`top_k_max`, so no device sync), as a server's sampler passes."""
    vocab = 151936
    probs = t(B, vocab, dtype=torch.float32)
    fn = fi.cake_top_k_top_p_sampling_from_probs
    return {"scalar": (lambda p: fn(p, 20, 0.9), (probs,)),
            "per_request": (lambda p, k, q: fn(p, k, q, top_k_max=64),
                            (probs, _i(B, fill=20), t(B, dtype=torch.float32)))}


BUILDERS.update({
    "cake_top_k_top_p_sampling_from_probs": _cake_top_k_top_p,
})
