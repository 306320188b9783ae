# STAND-IN, continued: the torch operators of sglang-kernel-cpu that SGLang 0.5.23's Intel AMX
# path calls for a Llama model (sglang/srt: layers/{layernorm,activation,linear,
# logits_processor}.py, layers/rotary_embedding/base.py, layers/attention/intel_amx_backend.py,
# mem_cache/memory_pool.py, distributed/bootstrap.py), in plain torch, registered under
# `torch.ops.sgl_kernel` as the real extension registers them. SGLang takes the AMX path (and its
# CPU graph runner, which `--enable-torch-compile` starts, needs that attention backend) when
# `torch.ops.sgl_kernel.convert_weight_packed` exists on a CPU with AMX tiles. Each operator
# writes what SGLang's callers read from the real one; layouts internal to the real kernels (the
# VNNI weight packing, the attention split buffer) are not reproduced. SGLang registers the fakes
# itself (cpu_graph_runner.register_fake_ops) when it compiles, as it does for the real extension,
# so none is registered here.
import torch as _torch

_LIB = _torch.library.Library("sgl_kernel", "FRAGMENT")


def _op(schema, key="CPU"):
    name = schema.split("(", 1)[0]
    _LIB.define(schema)

    def register(fn):
        _LIB.impl(name, fn, key)
        return fn
    return register


@_op("convert_weight_packed(Tensor weight) -> Tensor")
def _convert_weight_packed(weight):
    # The real kernel repacks to VNNI; weight_packed_linear below reads this copy as (N, K).
    return weight.contiguous().clone()


@_op("weight_packed_linear(Tensor mat1, Tensor mat2, Tensor? bias, bool is_vnni) -> Tensor")
def _weight_packed_linear(mat1, mat2, bias, is_vnni):
    return _torch.nn.functional.linear(mat1, mat2.to(mat1.dtype), bias)


def _rmsnorm(x, weight, eps):
    # SGLang's RMSNorm.forward_native: fp32 variance, scaled by the weight, cast back once.
    xf = x.float()
    xf = xf * _torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * weight).to(x.dtype)


@_op("rmsnorm_cpu(Tensor input, Tensor weight, float eps) -> Tensor")
def _rmsnorm_cpu(input, weight, eps):
    return _rmsnorm(input, weight, eps)


@_op("fused_add_rmsnorm_cpu(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float eps) -> ()")
def _fused_add_rmsnorm_cpu(input, residual, weight, eps):
    # residual <- input + residual; input <- rmsnorm(residual), both in place.
    summed = input.float() + residual.float()
    residual.copy_(summed.to(residual.dtype))
    input.copy_(_rmsnorm(summed, weight, eps).to(input.dtype))


@_op("silu_and_mul_cpu(Tensor input) -> Tensor")
def _silu_and_mul_cpu(input):
    d = input.shape[-1] // 2
    return _torch.nn.functional.silu(input[..., :d]) * input[..., d:]


@_op("rotary_embedding_cpu(Tensor positions, Tensor query, Tensor key, int head_size, "
     "Tensor cos_sin_cache, bool is_neox) -> (Tensor, Tensor)")
def _rotary_embedding_cpu(positions, query, key, head_size, cos_sin_cache, is_neox):
    cos, sin = cos_sin_cache.index_select(0, positions.flatten()).chunk(2, dim=-1)
    rot = cos.shape[-1] * 2

    def apply(x):
        x = x.view(positions.numel(), -1, head_size)
        xr = x[..., :rot]
        c, s = cos.unsqueeze(-2).to(x.dtype), sin.unsqueeze(-2).to(x.dtype)
        x1, x2 = (xr.chunk(2, dim=-1) if is_neox else (xr[..., ::2], xr[..., 1::2]))
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        out = _torch.cat((o1, o2), -1) if is_neox else _torch.stack((o1, o2), -1).flatten(-2)
        return _torch.cat((out, x[..., rot:]), dim=-1)

    q, k = apply(query), apply(key)
    if query.dim() == 3:
        return q, k
    # 2-D query and key (SGLang's Llama) are rotated in place and returned, as SGLang's fake
    # for this operator says.
    query.copy_(q.reshape(query.shape))
    key.copy_(k.reshape(key.shape))
    return query, key


@_op("store_cache_cpu(Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, "
     "Tensor indices, int row_dim) -> ()")
def _store_cache_cpu(k, v, k_cache, v_cache, indices, row_dim):
    k_cache.view(-1, row_dim)[indices] = k.reshape(-1, row_dim).to(k_cache.dtype)
    v_cache.view(-1, row_dim)[indices] = v.reshape(-1, row_dim).to(v_cache.dtype)


def _attend(q, keys, values, sm_scale, logit_cap, causal_from=None):
    """q (Lq, H, D) over keys/values (Lk, Hkv, D); query i sees keys [0, causal_from + i]."""
    group = q.shape[1] // keys.shape[1]
    k = keys.float().repeat_interleave(group, dim=1)
    v = values.float().repeat_interleave(group, dim=1)
    s = _torch.einsum("qhd,khd->hqk", q.float(), k) * sm_scale
    if logit_cap > 0:
        s = logit_cap * _torch.tanh(s / logit_cap)
    if causal_from is not None:
        qi = _torch.arange(q.shape[0]).unsqueeze(1)
        ki = _torch.arange(keys.shape[0]).unsqueeze(0)
        s = s.masked_fill(ki > causal_from + qi, float("-inf"))
    return _torch.einsum("hqk,khd->qhd", s.softmax(dim=-1), v)


@_op("decode_attention_cpu(Tensor query, Tensor(a!) k_cache, Tensor(b!) v_cache, float k_scale, "
     "float v_scale, Tensor(c!) output, Tensor? key, Tensor? value, Tensor? loc, "
     "Tensor attn_logits, Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, "
     "float sm_scale, float logit_cap, bool is_cross_attention, int sliding_window_size, "
     "Tensor? encoder_lens, Tensor? sinks) -> ()")
def _decode_attention_cpu(query, k_cache, v_cache, k_scale, v_scale, output, key, value, loc,
                          attn_logits, req_to_token, req_pool_indices, seq_lens, sm_scale,
                          logit_cap, is_cross_attention, sliding_window_size, encoder_lens,
                          sinks):
    if is_cross_attention or sinks is not None or sliding_window_size > 0:
        raise NotImplementedError("sgl_kernel.decode_attention_cpu stand-in: plain causal only")
    if key is not None:
        # The kernel writes this step's K and V into the cache itself.
        k_cache[loc] = key.to(k_cache.dtype)
        v_cache[loc] = value.to(v_cache.dtype)
    for i, (row, n) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist())):
        slots = req_to_token[row, :n].long()
        out = _attend(query[i:i + 1], k_cache[slots], v_cache[slots], sm_scale, logit_cap)
        output[i] = out[0].to(output.dtype)


@_op("extend_attention_cpu(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, "
     "Tensor(a!) o_extend, Tensor k_buffer, Tensor v_buffer, float k_scale, float v_scale, "
     "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor extend_seq_lens, "
     "Tensor extend_start_loc, int? max_len_extend, float sm_scale, float logit_cap, "
     "bool is_cross_attention, int sliding_window_size, Tensor? encoder_lens, Tensor? sinks, "
     "Tensor? tree_mask, bool is_causal) -> ()")
def _extend_attention_cpu(q_extend, k_extend, v_extend, o_extend, k_buffer, v_buffer, k_scale,
                          v_scale, req_to_token, req_pool_indices, seq_lens, extend_seq_lens,
                          extend_start_loc, max_len_extend, sm_scale, logit_cap,
                          is_cross_attention, sliding_window_size, encoder_lens, sinks,
                          tree_mask, is_causal):
    if (is_cross_attention or sinks is not None or tree_mask is not None or not is_causal
            or sliding_window_size > 0):
        raise NotImplementedError("sgl_kernel.extend_attention_cpu stand-in: plain causal only")
    for row, n, m, start in zip(req_pool_indices.tolist(), seq_lens.tolist(),
                                extend_seq_lens.tolist(), extend_start_loc.tolist()):
        # The prefix from the cache, this extend's own K and V from its arguments.
        slots = req_to_token[row, :n - m].long()
        keys = _torch.cat((k_buffer[slots].to(k_extend.dtype), k_extend[start:start + m]))
        values = _torch.cat((v_buffer[slots].to(v_extend.dtype), v_extend[start:start + m]))
        out = _attend(q_extend[start:start + m], keys, values, sm_scale, logit_cap,
                      causal_from=n - m)
        o_extend[start:start + m] = out.to(o_extend.dtype)


# No tensor argument: dispatched without a device key, as the real ones are (CatchAll).
@_op("init_cpu_threads_env(str cpu_ids) -> str", "CompositeExplicitAutograd")
def _init_cpu_threads_env(cpu_ids):
    # The real one binds OpenMP threads to these cores; on a shared test machine nothing is bound.
    return f"stand-in: OpenMP threads not bound to {cpu_ids}"


@_op("initialize(int size, int rank) -> ()", "CompositeExplicitAutograd")
def _initialize(size, rank):
    # The real one sets up shared-memory all-reduce; one rank needs none.
    if size != 1:
        raise NotImplementedError("sgl_kernel.initialize stand-in: one rank only")


def _not_stood_in(name):
    def kernel(args):
        raise NotImplementedError(f"torch.ops.sgl_kernel.{name}: not in dynafold's stand-in")
    return kernel


# The real extension's other operators that SGLang reaches by name without a Llama running them:
# at import (module-level `torch.ops.sgl_kernel.X` on the AMX path) and in
# cpu_graph_runner.register_fake_ops, which registers a fake for each and needs it to exist.
# Present, as in the real extension, and raising if ever called.
_NOT_STOOD_IN = (
    "apply_multidimensional_rope_cpu", "apply_rotary_pos_emb_cpu", "biased_grouped_topk_cpu",
    "bmm_cpu", "causal_conv1d_fwd_cpu", "causal_conv1d_update_cpu", "chunk_gated_delta_rule_cpu",
    "conv3d_embed_cpu", "flash_attn_varlen_func", "fp8_per_tensor_scaled_mm_cpu",
    "fp8_scaled_mm_cpu", "fused_add_layernorm_cpu", "fused_dual_residual_rmsnorm_cpu",
    "fused_experts_cpu", "fused_gdn_gating_cpu", "fused_input_proj_cpu",
    "fused_linear_sigmoid_mul", "fused_moe_router_cpu", "fused_qk_gemma_rmsnorm_cpu",
    "fused_qk_gemma_rmsnorm_with_gate_cpu", "fused_qk_rmsnorm_apply_from_stats_cpu",
    "fused_qk_rmsnorm_cpu", "fused_qk_rmsnorm_sumsq_cpu",
    "fused_qkvzba_split_reshape_cat_contiguous_cpu", "fused_qkvzba_split_reshape_cat_cpu",
    "fused_rmsnorm_gated_cpu", "fused_sigmoid_gating_delta_rule_update_cpu",
    "fused_sigmoid_mul_cpu", "gelu_and_mul_cpu", "gelu_tanh_and_mul_cpu", "gemma3_rmsnorm_cpu",
    "gemma4_rmsnorm_cpu", "gemma_fused_add_rmsnorm_cpu", "gemma_rmsnorm_cpu", "grouped_topk_cpu",
    "int4_scaled_mm_cpu", "int8_scaled_mm_cpu", "int8_scaled_mm_with_quant", "l2norm_cpu",
    "layernorm_cpu", "multimodal_rotary_embedding_cpu", "mxfp4_scaled_mm_cpu",
    "per_token_quant_int8_cpu", "qkv_proj_with_rope", "qkv_proj_with_rope_fused_weight",
    "shared_expert_cpu", "shm_allgather", "shm_allreduce", "topk_sigmoid_cpu", "topk_softmax_cpu",
)
for _name in _NOT_STOOD_IN:
    _op(f"{_name}(Tensor[] args) -> ()")(_not_stood_in(_name))
