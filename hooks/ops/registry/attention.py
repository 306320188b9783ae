"""Attention: FlashInfer's decode, prefill, MLA, POD, XQA and sparse attention, their JIT run
functions and dynafold's declarations of the attention entry points that call a kernel in
their public body."""

import typing

import torch

from _dynafold_ops.engine.record import (
    PLANS,
    Correction,
    Declare,
    Fake,
    Family,
    Form,
    Fresh,
    Given,
    Op,
    Positional,
    Sweep,
)
from _dynafold_ops.registry._shapes import _round_up

OPS = []

OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.decode",
    function="get_single_decode_module.<locals>.run_single_decode",
    # The kernel writes `maybe_lse` when it is given (csrc/single_decode.cu:81), every release.
    correction=Correction(also_mutates=("maybe_lse",)),
))

OPS += [
    Op(
        family=Family.ATTENTION,
        module="flashinfer.prefill",
        function=f"get_batch_prefill_jit_module.<locals>.{run}",
        # The JIT run functions of a wrapper built from `jit_args` (the attention-sink and
        # causal-bidirectional wrappers, a user's own variant) end in `*args`: the variant's
        # additional tensors, then its additional scalars (prefill.py get_batch_prefill_jit_module,
        # decode.py get_batch_decode_jit_module, 0.6.16-0.7.4). A variant's additional tensors are
        # plain `T*` in its params (jit/attention/utils.py generate_additional_params), so a
        # variant may write them: the operator declares them mutable (docs/op-audit notes).
        correction=Correction(variadic=True),
    )
    for run in ("paged_run", "ragged_run")
]
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.decode",
    function="get_batch_decode_jit_module.<locals>.run_batch_decode",
    correction=Correction(variadic=True),
))

OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.xqa",
    function="_get_xqa_module_cached.<locals>.xqa",
    # XQA counts work items in `semaphores` with atomics that wrap back to 0
    # (csrc/xqa/mha.cu:2762, mha_sm90.cu:1431, mla_sm120.cu:1502).
    correction=Correction(also_mutates=("semaphores",)),
))
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.xqa",
    function="get_xqa_module_mla.<locals>.xqa_mla",
    correction=Correction(also_mutates=("semaphores",)),
))

OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.xqa",
    function="get_xqa_module.<locals>.xqa",
    # 0.6.1-0.6.7.post3 declare XQA in get_xqa_module itself (0.6.16: _get_xqa_module_cached):
    # the same atomics (0.6.7.post3 csrc/xqa/mha.cu:2616, mha_sm90.cu:1431).
    correction=Correction(also_mutates=("semaphores",)),
    sweep=Sweep(old_layout="equal"),
))

OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="get_batch_prefill_module.<locals>.paged_run",
    by_release={
        # Tensor-core decode calls the prefill module's paged_run with 43 positional arguments
        # in its own order (decode.py:1384-1444): `paged_kv_cache` at 31, where paged_run has
        # `num_qo_heads`, then its head counts, block tables, KV lengths, page size and
        # `max_kv_len`, without `max_q_len`, `batch_size` or the cumulative lengths. The
        # FA2/FA3 path reads none of them (prefill.py:678, only the trtllm-gen branch does).
        "0.6.7.post3": Correction(
            positional=Positional(
                count=43,
                start=31,
                names=(None, "num_qo_heads", "num_kv_heads", "block_tables", "kv_lens_buffer",
                       "page_size", "max_kv_len", "sinks", "key_block_scales", "value_block_scales",
                       "skip_softmax_threshold_scale_factor", "uses_shared_paged_kv_idx"),
            ),
        ),
    },
))


def _merge_states(v, s):
    # FlashInfer's own fake allocates on the CPU.
    seq_len, _, num_heads, head_dim = v.size()
    return (v.new_empty(seq_len, num_heads, head_dim),
            s.new_empty(seq_len, num_heads, dtype=torch.float32))


OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.cascade",
    function="merge_states",
    name="flashinfer::merge_states",
    fake=Fake(_merge_states),
))

# append_paged_kv_cache (every release) given its documented single paged cache
# [pages, 2, ...] unbinds it into K and V views and hands both to FlashInfer's declaration,
# which writes both. Compiled with `dynamic=True` (the cache's page size and head dims
# symbolic), inductor regenerates each mutated view at storage offset 0: the V write lands
# on K (torch 2.9.1 to 2.15.0; docs/upstream/torch-two-views.md). So the public function
# is the boundary for that call: one operator that writes the whole cache tensor, split
# inside (hooks/ops/engine/narrowing.py `paged_kv_cache`); a (K, V) pair is traced as shipped.
# The kernel writes only the appended rows of both halves (docs/op-audit).
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.page",
    function="append_paged_kv_cache",
    name="flashinfer::append_paged_kv_cache_public",
    declare=Declare(mutates=("paged_kv_cache",)),
))

# nvfp4_quantize_append_paged_kv_cache and its _with_slot_mapping form (0.6.16 on) given their
# stacked caches, values [pages, 2, ..., head_dim // 2] uint8 and scales [pages, 2, ...,
# head_dim // 16] float8_e4m3fn: the body unbinds each into K and V views and hands all four to
# FlashInfer's declaration, so compiled with `dynamic=True` the V writes land on K, of values
# and scales alike (eager 6 K and 6 V rows, compiled 6 and 0: tests/python/test_kv_append.py),
# as for append_paged_kv_cache above. So the public function is the boundary for the stacked
# call, both caches written whole (engine/narrowing.py `paged_kv_cache`, `kv_cache_sf`); a call
# with (K, V) pairs is traced as shipped. The kernels write only the appended rows' E2M1 bytes
# and E4M3 block scales, K and V (include/flashinfer/page.cuh
# NVFP4QuantizeAppendPagedKVCache[WithSlotMapping]Kernel). The slot-mapping form's scales
# (`Union[float, Tensor]` each) give one operator per combination of members. Its
# `_is_stream_capturing_on_device` now runs in the operator at run time, not in a trace
# (mechanisms/stream_scratch.py answers only there, for the pairs): a float scale during a CUDA
# graph capture is refused as eagerly, as FlashInfer documents.
OPS += [
    Op(
        family=Family.ATTENTION,
        module="flashinfer.page",
        function=name,
        name=f"flashinfer::{name}_public",
        declare=Declare(mutates=("paged_kv_cache", "kv_cache_sf")),
    )
    for name in ("nvfp4_quantize_append_paged_kv_cache",
                 "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping")
]


def _qsa_sparse_paged_attention(values):
    """`qsa_sparse_paged_attention`'s fresh result (no `out`): torch.empty_like(q), on both
    backends (experimental/qsa_nvfp4/backend.py, cake_qsa_nvfp4/cake_backend.py)."""
    return torch.empty_like(values["q"])


# qsa_sparse_paged_attention (0.7.4, experimental; SM80-SM120): the public body picks the backend
# from the cache dtype and the device (the reference kernel on SM8x/SM9x, Cake on SM100/SM120), and
# the reference backend checks every tensor's data_ptr() alignment
# (experimental/qsa_nvfp4/backend.py _check_aligned: math.gcd of the address), reads the SM count
# and the kernel's resident CTAs (a JIT call, ctas_per_sm) for its split count, then calls its JIT
# kernel: no trace can read an address, so the public function, choice included, is the boundary. It
# writes `out` (the caller's, or empty_like(q)) and returns it (the correction's `result_is_given`);
# the fake is the record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.sparse",
    function="qsa_sparse_paged_attention",
    name="flashinfer::qsa_sparse_paged_attention",
    declare=Declare(),
    # dynafold's declaration of qsa_sparse_paged_attention (0.7.4): returns `out`, the caller's
    # when given, else empty_like(q) (sparse.py and both backends end `return out`).
    correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
    # dynafold's own declarations of 0.7.4's QSA attention.
    fake=Fake(_qsa_sparse_paged_attention, ("q",)),
    sweep=Sweep(equal=("0.7.4",)),
))


def _qsa_forward(values):
    """cuDNN QSA's (out, out_fp32, lse) (qsa.py docstrings): bfloat16 and float32 [T, Hq, 256]
    outputs and the float32 [Hq, T] natural-log normaliser."""
    q = values["q"]
    T, Hq, D = q.shape
    return (q.new_empty((T, Hq, D), dtype=torch.bfloat16),
            q.new_empty((T, Hq, D), dtype=torch.float32),
            q.new_empty((Hq, T), dtype=torch.float32))


# qsa_forward and qsa_indexed_forward (0.7.4; SM100): the public body imports cuDNN's frontend
# (importlib.import_module under functools.cache, a version check) and calls its op, which allocates
# its three results ("cuDNN allocates outputs and scratch", qsa.py docstrings) and writes nothing of
# the caller's; so the public function is the boundary, its results fresh (the record's fake, from
# the docstrings' shapes).
OPS += [
    Op(
        family=Family.ATTENTION,
        module="flashinfer.qsa",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        # dynafold's declarations of the cuDNN QSA forwards (0.7.4): three fresh results.
        correction=Correction(fresh_only=Fresh(when={}, results=3)),
        fake=Fake(_qsa_forward, ("q",)),
        sweep=Sweep(equal=("0.7.4",)),
    )
    for name in ("qsa_forward", "qsa_indexed_forward")
]

# fmha_v2_prefill_sm120 and fmha_v2_prefill_deepseek (0.7.2 on, SM120/SM121) ->
# prefill._fmha_v2_prefill_sm120_run: its scale checks, the JIT loader and `module.run(...)`, no op
# declared. The kernel writes `out` and, when given, `lse` (zeroed first), both the caller's; the
# result is `out` itself (the correction's `result_is_given`, for the call without return_lse).
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="_fmha_v2_prefill_sm120_run",
    name="flashinfer::fmha_v2_prefill_sm120_run",
    declare=Declare(mutates=("out", "lse")),
    # dynafold's declaration of the SM120 fmha_v2 runner: returns `out`, the caller's (required), or
    # `(out, lse)` with return_lse; the kernel writes `out` and `lse`
    # (csrc/trtllm_fmha_v2_binding.cu TRTLLMFMHAv2Run), both declared mutable.
    correction=Correction(result_is_given=Given(argument="out", when={"return_lse": False})),
    # 0.6.16 lacks the runner.
    sweep=Sweep(equal=("0.7.4",)),
))

# fmha_v2_prefill_deepseek (0.6.3 on, SM120/SM12x): before 0.7.2's runner above, the public
# function loads its JIT module and calls `module.run(...)` in its own body (0.6.3 and
# 0.6.11.post1 prefill.py), no op declared; from 0.7.2 it checks its arguments and calls the
# runner. The kernel writes `out`, the caller's (required), and `lse` when given
# (csrc/trtllm_fmha_v2_binding.cu TRTLLMFMHAv2Run); the result is `out` itself, or `(out, lse)`
# with return_lse. Woken for the call without return_lse (the correction's `result_is_given`),
# `out` and `lse` declared mutable; its device check runs with the kernel.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="fmha_v2_prefill_deepseek",
    name="flashinfer::fmha_v2_prefill_deepseek_public",
    declare=Declare(mutates=("out", "lse")),
    # dynafold's declaration of fmha_v2_prefill_deepseek: returns `out`, the caller's, or
    # `(out, lse)` with return_lse; the kernel writes both, declared mutable.
    correction=Correction(result_is_given=Given(argument="out", when={"return_lse": False})),
))


def _trtllm_batch_context_with_kv_cache(values):
    """`trtllm_batch_context_with_kv_cache`'s result with no `out` given, no return_lse and a
    dtype (or None) for `out_dtype`, the only call woken: its
    `torch.empty_like(query, dtype=out_dtype)`, `out_dtype` None being the query's dtype
    (0.6.16-0.7.4 prefill.py)."""
    query = values["query"]
    return torch.empty_like(query, dtype=values["out_dtype"] or query.dtype)


# trtllm_batch_context_with_kv_cache (0.6.16 on) calls its JIT module's tvm_ffi function in the
# public body (`get_trtllm_gen_fmha_module().trtllm_paged_attention_context`; 0.7.4's backend
# "cake": the Cake context module, after its route choice and host reads of device scales), no op
# declared. The kernel writes `out`, `lse` when given (even without return_lse), its softmax stats
# in `workspace_buffer` (Cake: its expanded sequence arrays) and, Cake's persistent scheduler, a
# counter in `multi_ctas_kv_counter_buffer` (csrc/trtllm_fmha_kernel_launcher.cu,
# cake_fmha/jit/cake_fmha_context_*_jit_binding.cu). Woken for the call that gives no `out` and
# returns it alone, not as an FP4Tensor (the correction's `fresh_only`,
# hooks/ops/engine/narrowing.py `out_dtype`), `lse`, the workspace and the counter buffer declared
# mutable. Fake: the record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="trtllm_batch_context_with_kv_cache",
    name="flashinfer::trtllm_batch_context_with_kv_cache",
    declare=Declare(mutates=("workspace_buffer", "lse", "multi_ctas_kv_counter_buffer")),
    # dynafold's declaration of trtllm_batch_context_with_kv_cache: besides `lse`, the workspace and
    # the counter buffer it declares mutable, the kernel writes only `out`
    # (csrc/trtllm_fmha_kernel_launcher.cu trtllm_paged_attention_context), the caller's when given,
    # else allocated; the result is `out`, or `(out, lse)` with return_lse (an FP4Tensor for
    # "nvfp4", which hooks/ops/engine/narrowing.py leaves out).
    correction=Correction(fresh_only=Fresh(when={"out": None, "return_lse": False}, results=1)),
    # 0.6.3 and 0.6.11.post1 (SGLang 0.5.9's and 0.5.12's pins) have no `lse` nor `return_lse`:
    # their result is `out` alone (prefill.py `return out if out_dtype != "nvfp4" else
    # FP4Tensor(...)`), woken for the call that gives none.
    by_release={release: Correction(fresh_only=Fresh(when={"out": None}, results=1))
                for release in ("0.6.3", "0.6.11.post1")},
    # dynafold's own declaration of trtllm_batch_context_with_kv_cache, woken for the call that
    # gives no `out` (the correction's `fresh_only`).
    fake=Fake(_trtllm_batch_context_with_kv_cache, ("query", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _trtllm_mla_decode(values):
    """`trtllm_batch_decode_with_kv_cache_mla`'s result with no `out` given, the only call
    woken: `torch.empty(query.shape[:-1] + (kv_lora_rank,), dtype=torch.bfloat16)` on both its
    backends (0.6.3 mla.py, and xqa_batch_decode_with_kv_cache_mla's the same)."""
    query = values["query"]
    return query.new_empty((*query.shape[:-1], values["kv_lora_rank"]), dtype=torch.bfloat16)


# trtllm_batch_decode_with_kv_cache_mla (0.6.3's flashinfer/mla.py; SGLang 0.5.9's trtllm_mla
# backend) picks its backend by the device and, for trtllm-gen (SM100), calls its JIT module's
# tvm_ffi function in the public body (`get_trtllm_gen_fmha_module().trtllm_paged_attention_decode`),
# no op declared; for XQA (SM120) it goes through xqa_batch_decode_with_kv_cache_mla to the
# declared xqa_mla. Either kernel writes `out` (allocated unless given) and its multi-block
# semaphores in `workspace_buffer` (its docstring: "used for multi_block mode. Must be initialized
# to 0"; XQA's semaphores and scratch are slices of it). Woken for the call that gives no `out`
# (the correction's `fresh_only`), the workspace declared mutable. Later releases define it in
# flashinfer.mla._core, another key.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.mla",
    function="trtllm_batch_decode_with_kv_cache_mla",
    name="flashinfer::trtllm_batch_decode_with_kv_cache_mla",
    declare=Declare(mutates=("workspace_buffer",)),
    # dynafold's declaration of trtllm_batch_decode_with_kv_cache_mla: the result is `out`, the
    # caller's when given, else allocated; only the call without one (and without sinks) is
    # woken. `enable_pdl` is written `bool = None` (None: the device decides) and the scales
    # `Union[float, Tensor] = 1.0`, which no schema takes: woken for the float scales serving
    # code passes (SGLang 0.5.9's trtllm_mla backend), a tensor scale traced as shipped.
    correction=Correction(fresh_only=Fresh(when={"out": None, "sinks": None}, results=1),
                          annotations={"enable_pdl": typing.Optional[bool], "bmm1_scale": float,
                                       "bmm2_scale": float}),
    fake=Fake(_trtllm_mla_decode, ("query", "kv_lora_rank")),
))


def _trtllm_fmha_v2_prefill(values):
    """`trtllm_fmha_v2_prefill`'s result with no `out` given and no save_softmax_stats, `qkv`
    a flat tuple (the only call woken): its `torch.empty((query.shape[0], num_qo_heads,
    head_dim_v), dtype=o_dtype)` (0.6.16-0.7.4 prefill.py), the query `qkv[0]`
    [tokens, heads, D], `head_dim_v` the last dim of the last member (stacked KV
    [tokens, 2, H, D], paged KV [pages, 2, ..., D], V [tokens, H, Dv]), `o_dtype` `out_dtype`
    (a dtype, hooks/ops/engine/narrowing.py) or the query's."""
    qkv = values["qkv"]
    query = qkv[0]
    return query.new_empty((query.shape[0], query.shape[1], qkv[-1].shape[-1]),
                           dtype=values["out_dtype"] or query.dtype)


# trtllm_fmha_v2_prefill (0.6.16 on; SGLang's skip-softmax attention on SM90) builds its fmha_v2 JIT
# module and calls its tvm_ffi `run` in the public body, no op declared. The kernel writes `out`
# (allocated unless given), the softmax stats it allocates with save_softmax_stats, and scratch,
# barriers and a tile counter its dynamic scheduler carries across calls (atomicInc wrapping back)
# in `workspace_buffer` (csrc/fmha_v2_run.cu fmha_v2_run). Woken for the call that gives no `out`
# and returns it alone (the correction's `fresh_only`), the workspace declared mutable. Fake: the
# record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="trtllm_fmha_v2_prefill",
    name="flashinfer::trtllm_fmha_v2_prefill",
    declare=Declare(mutates=("workspace_buffer",)),
    # dynafold's declaration of trtllm_fmha_v2_prefill: besides the workspace it declares mutable,
    # the kernel writes `out`, the caller's when given, else allocated, and the softmax stats the
    # body allocates with save_softmax_stats, returned then as `(out, lse)` (csrc/fmha_v2_run.cu).
    correction=Correction(
        fresh_only=Fresh(when={"out": None, "save_softmax_stats": False}, results=1),
    ),
    # dynafold's own declaration of trtllm_fmha_v2_prefill, woken for the call that gives no `out`
    # (the correction's `fresh_only`).
    fake=Fake(_trtllm_fmha_v2_prefill, ("qkv", "out_dtype")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _cudnn_batch_decode_with_kv_cache(values):
    """`cudnn_batch_decode_with_kv_cache`'s result with no `out` given and no return_lse, the
    only call woken: its `torch.empty(rows, h_qo, d_vo, dtype=q.dtype)`, rows and heads the
    query's first two dims, d_vo `v_cache.shape[3]` (0.7.x cudnn/decode.py
    _normalize_decode_inputs)."""
    q = values["q"]
    return q.new_empty((q.shape[0], q.shape[1], values["v_cache"].shape[3]))


# cudnn_batch_decode_with_kv_cache (0.6.16 on; woken 0.7.x) builds and caches a cuDNN SDPA graph and
# executes it, or without the cuDNN frontend calls its cubin JIT module's tvm_ffi `decode`, in the
# public body, no op declared. Either writes `out` (allocated unless given), `lse` only with
# return_lse (allocated unless given), and its scratch in `workspace_buffer` (the cubin path's TMA
# descriptors and partial outputs, csrc/cudnn_sdpa_kernel_launcher.cu decode; the graph's
# workspace). Woken for the call that gives no `out` and returns it alone (the correction's
# `fresh_only`; 0.6.16 has no `return_lse`, so its call stays as shipped and the audit has no 0.6.16
# row), `lse` and the workspace declared mutable. Fake: the record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.cudnn.decode",
    function="cudnn_batch_decode_with_kv_cache",
    name="flashinfer::cudnn_batch_decode_with_kv_cache",
    declare=Declare(mutates=("workspace_buffer", "lse")),
    # dynafold's declaration of cudnn_batch_decode_with_kv_cache: besides `lse` and the workspace it
    # declares mutable, the graph (or cubin kernel) writes `out`, the caller's when given, else
    # allocated (cudnn/decode.py); the result is `out`, or `(out, lse)` with return_lse.
    correction=Correction(fresh_only=Fresh(when={"out": None, "return_lse": False}, results=1)),
    # 0.6.3 and 0.6.11.post1 (SGLang 0.5.9's and 0.5.12's pins) have no `lse` nor `return_lse`:
    # the result is `out` (cudnn/decode.py `return out`), woken for the call that gives none.
    by_release={release: Correction(fresh_only=Fresh(when={"out": None}, results=1))
                for release in ("0.6.3", "0.6.11.post1")},
    # dynafold's own declaration of cudnn_batch_decode_with_kv_cache, woken for the call that gives
    # no `out` (the correction's `fresh_only`).
    fake=Fake(_cudnn_batch_decode_with_kv_cache, ("q", "v_cache")),
    # 0.6.16 lacks the return_lse its woken call is keyed on.
    sweep=Sweep(equal=("0.7.4",)),
))


def _sm110_gqa_decode(values):
    """`sm110_gqa_decode`'s result with no `out` given, the only call woken: its
    `torch.empty_like(q)` (0.7.x experimental/sm110_gqa_decode/backend.py)."""
    return torch.empty_like(values["q"])


# sm110_gqa_decode (0.7.x, exact SM110) loads its kernel on the traced path: 0.7.2 the JIT module of
# its route, 0.7.4 a Cake kernel whose manifest it reads from disk, after a device check, then
# launches it on the torch stream, no op declared. The public function is the boundary (its backend
# is imported in its body). The kernel writes only `out` (allocated unless given) and, 0.7.4's split
# routes, partials and counters allocated per call (experimental/sm110_gqa_decode/backend.py); woken
# for the call without `out` (the correction's `fresh_only`), nothing declared mutable. Fake: the
# record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.decode",
    function="sm110_gqa_decode",
    name="flashinfer::sm110_gqa_decode",
    declare=Declare(),
    # dynafold's declaration of sm110_gqa_decode: the kernel writes only `out`, the caller's when
    # given, else allocated (experimental/sm110_gqa_decode/backend.py), and returns it.
    correction=Correction(fresh_only=Fresh(when={"out": None}, results=1)),
    # dynafold's own declaration of sm110_gqa_decode, woken for the call that gives no `out` (the
    # correction's `fresh_only`).
    fake=Fake(_sm110_gqa_decode, ("q",)),
    sweep=Sweep(equal=("0.7.4",)),
))

# fmha_varlen (0.6.16 on; BatchPrefillWithRaggedKVCacheWrapper's cutlass backend, SM100) builds its
# CUTLASS FMHA JIT module and calls its tvm_ffi `run` in the body, no op declared. The kernel writes
# `out` and, when given, `lse` (csrc/fmha_cutlass_sm100.cu FMHACutlassSM100Run; its workspace is
# FlashInfer's own cached buffer, no argument), and the function returns the pair `(out, lse)`,
# `lse` None when neither given nor asked for. Woken for the call that gives `out` and does not ask
# return_lse, whose result is the caller's `out` and `lse` (or None) as given (the correction's
# `result_is_given`, form "pair"): both declared mutable, the operator returns nothing.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="fmha_varlen",
    name="flashinfer::fmha_varlen",
    declare=Declare(mutates=("lse",)),
    # dynafold's declaration of fmha_varlen: returns `(out, lse)`, `out` the caller's when given
    # (else a slice of a padded buffer it allocates) and `lse` the caller's, one allocated with
    # return_lse, or None; the kernel writes both (csrc/fmha_cutlass_sm100.cu). Woken for the call
    # giving `out` without return_lse.
    correction=Correction(
        result_is_given=Given(
            argument="out",
            form=Form.PAIR,
            when={"return_lse": False},
            second="lse",
        ),
    ),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _trtllm_ragged_attention_deepseek(values):
    """`trtllm_ragged_attention_deepseek`'s result with no `out` given and no return_lse, the
    only call woken: its `torch.empty(query.shape[0], query.shape[1], value.shape[2])`,
    bfloat16 for an FP8 or INT8 query, else the query's dtype (0.6.16-0.7.4 prefill.py)."""
    query, value = values["query"], values["value"]
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.int8)
    return query.new_empty((query.shape[0], query.shape[1], value.shape[2]),
                           dtype=torch.bfloat16 if query.dtype in fp8 else query.dtype)


# trtllm_ragged_attention_deepseek (0.6.16 on) calls its JIT module's tvm_ffi function in the public
# body (`get_trtllm_gen_fmha_module().trtllm_ragged_attention`; backend "cute-dsl": the CuTe DSL
# compile and launch), no op declared; 0.7.x's empty-row check reads the indptrs on the host
# (`.item()`). The kernel writes `out`, `lse` when given (the caller's even without return_lse) and
# its softmax stats in `workspace_buffer` (csrc/trtllm_fmha_kernel_launcher.cu
# trtllm_ragged_attention_launcher); woken for the call that gives no `out` and returns it alone
# (the correction's `fresh_only`), `lse` and the workspace declared mutable. Fake: the record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="trtllm_ragged_attention_deepseek",
    name="flashinfer::trtllm_ragged_attention_deepseek",
    declare=Declare(mutates=("workspace_buffer", "lse")),
    # dynafold's declaration of trtllm_ragged_attention_deepseek: besides `lse` and the workspace it
    # declares mutable, the kernel writes only `out` (csrc/trtllm_fmha_kernel_launcher.cu
    # trtllm_ragged_attention), the caller's when given, else allocated; the result is `out`, or
    # `(out, lse)` with return_lse.
    correction=Correction(fresh_only=Fresh(when={"out": None, "return_lse": False}, results=1)),
    # dynafold's own declaration of trtllm_ragged_attention_deepseek, woken for the call that gives
    # no `out` (the correction's `fresh_only`).
    fake=Fake(_trtllm_ragged_attention_deepseek, ("query", "value")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _trtllm_sage_attention_quantize(values):
    """`trtllm_sage_attention_quantize` without smooth_k, the only call woken (0.7.x
    prefill.py): q/k quantized like `query`/`key` in `qk_quant_dtype`, v in float8_e4m3fn;
    float32 scales (heads, ceil(tokens / block) + batch - 1) for Q and K, (heads, head_dim)
    for V, batch from `cum_seq_lens_q` (1 when it is None)."""
    query, key, value = values["query"], values["key"], values["value"]
    cum = values["cum_seq_lens_q"]
    batch = 1 if cum is None else cum.numel() - 1
    dtype = values["qk_quant_dtype"]
    qb, kb = values["q_block_size"], values["k_block_size"]
    f32 = torch.float32
    return (query.new_empty(query.shape, dtype=dtype), key.new_empty(key.shape, dtype=dtype),
            value.new_empty(value.shape, dtype=torch.float8_e4m3fn),
            query.new_empty((query.shape[1], (query.shape[0] + qb - 1) // qb + batch - 1),
                            dtype=f32),
            query.new_empty((key.shape[1], (key.shape[0] + kb - 1) // kb + batch - 1),
                            dtype=f32),
            query.new_empty((value.shape[1], value.shape[2]), dtype=f32))


# trtllm_sage_attention_quantize (0.6.16 on; woken 0.7.x) calls its JIT module's tvm_ffi function in
# the public body (`get_trtllm_gen_fmha_module().trtllm_sage_attention_quantize`), no op declared.
# The kernel writes only the six (seven with smooth_k) tensors the body allocates
# (csrc/trtllm_sage_quant.cu); woken for the call without smooth_k, whose six results are fresh (the
# correction's `fresh_only`; 0.6.16 has no `smooth_k`, so its call stays as shipped), fake: the
# record's.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.prefill",
    function="trtllm_sage_attention_quantize",
    name="flashinfer::trtllm_sage_attention_quantize",
    declare=Declare(),
    # dynafold's declaration of trtllm_sage_attention_quantize: the kernel writes only the tensors
    # the body allocates (csrc/trtllm_sage_quant.cu); six fresh results without smooth_k, seven with
    # it (k_mean appended).
    correction=Correction(fresh_only=Fresh(when={"smooth_k": False}, results=6)),
    # dynafold's own declarations of the Sage quantizer and the SM120 NVFP4 attention functions,
    # woken for the calls whose results are all fresh (the correction's `fresh_only`).
    fake=Fake(
        _trtllm_sage_attention_quantize,
        ("query", "key", "value", "q_block_size", "k_block_size", "qk_quant_dtype",
         "cum_seq_lens_q"),
    ),
    # 0.6.16 lacks the flags its woken call is keyed on.
    sweep=Sweep(equal=("0.7.4",)),
))


def _nvfp4_attention_sm120_quantize_qkv(values):
    """`nvfp4_attention_sm120_quantize_qkv`'s seven fresh results (0.6.16-0.7.4
    nvfp4_attention_sm120.py): Q padded to M_pad = round_up(M, 128), K/V to N_pad; packed FP4
    values (uint8, head_dim / 2 wide; V transposed), float8_e4m3fn scales (head_dim / 16; V's
    transposed, N_pad / 16 wide) and the float32 QK correction [B, Hq, M_pad / 128 (1 without
    per_block_mean), N_pad]."""
    q, k = values["q"], values["k"]
    b, hq, m, d = q.shape
    hk, n = k.shape[1], k.shape[2]
    m_pad, n_pad = _round_up(m, 128), _round_up(n, 128)
    groups = m_pad // 128 if values["per_block_mean"] else 1
    u8, f8 = torch.uint8, torch.float8_e4m3fn
    return (q.new_empty((b, hq, m_pad, d // 2), dtype=u8),
            q.new_empty((b, hk, n_pad, d // 2), dtype=u8),
            q.new_empty((b, hk, d, n_pad // 2), dtype=u8),
            q.new_empty((b, hq, m_pad, d // 16), dtype=f8),
            q.new_empty((b, hk, n_pad, d // 16), dtype=f8),
            q.new_empty((b, hk, d, n_pad // 16), dtype=f8),
            q.new_empty((b, hq, groups, n_pad), dtype=torch.float32))


def _nvfp4_attention_sm120_fwd(values):
    """`nvfp4_attention_sm120_fwd` with neither `out` nor `lse` given and return_lse (0.7.x):
    `out` (B, Hq, M_pad, head_dim) in `out_dtype`, head_dim twice `q_fp4`'s packed width, and
    `lse` (B, Hq, M_pad) float32."""
    q = values["q_fp4"]
    b, hq, m, half = q.shape
    return (q.new_empty((b, hq, m, half * 2), dtype=values["out_dtype"]),
            q.new_empty((b, hq, m), dtype=torch.float32))


# nvfp4_attention_sm120.py (0.6.16 on, SM120/SM121): both public functions call their JIT module's
# tvm_ffi functions in their own bodies, no op declared. quantize_qkv centres and pads Q/K/V (torch
# ops), allocates its seven results and runs the three scaled_fp4_quant kernels on them: every
# result fresh, nothing of the caller's written. fwd writes `out` and `lse` (allocated unless
# given); woken for the call that gives neither and returns both (0.7.x `return_lse`, its default;
# 0.6.16's fwd has no `return_lse`, so its call stays as shipped). Fakes: the records'.
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.nvfp4_attention_sm120",
    function="nvfp4_attention_sm120_quantize_qkv",
    name="flashinfer::nvfp4_attention_sm120_quantize_qkv",
    declare=Declare(),
    # dynafold's declarations of the SM120 NVFP4 attention functions: quantize_qkv's seven results
    # are all allocated in its body; fwd's kernel writes only `out` and `lse`
    # (csrc/nvfp4_attention_sm120/nvfp4_attention_sm120_binding.cu fwd), the caller's when given,
    # else allocated, and returns both with return_lse (its default).
    correction=Correction(fresh_only=Fresh(when={}, results=7)),
    fake=Fake(_nvfp4_attention_sm120_quantize_qkv, ("q", "k", "per_block_mean")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.nvfp4_attention_sm120",
    function="nvfp4_attention_sm120_fwd",
    name="flashinfer::nvfp4_attention_sm120_fwd",
    declare=Declare(),
    correction=Correction(
        fresh_only=Fresh(when={"out": None, "lse": None, "return_lse": True}, results=2),
    ),
    fake=Fake(_nvfp4_attention_sm120_fwd, ("q_fp4", "out_dtype")),
    # 0.6.16 lacks the flags its woken call is keyed on.
    sweep=Sweep(equal=("0.7.4",)),
))


def _paged_mqa_logits(values):
    """`fp8_paged_mqa_logits` / `fp4_paged_mqa_logits` with no `out` (0.7.x
    attn_scores/attn_scores.py): `torch.empty((B * next_n, padded), output_dtype)[:,
    :max_seq_len]`, padded = max_seq_len rounded up to _SPLIT_KV (256): a view whose row
    stride is the padded width."""
    q = values["q"]
    rows = q.shape[0] * q.shape[1]
    max_seq_len = values["max_seq_len"]
    padded = (max_seq_len + 255) // 256 * 256
    return q.new_empty((rows, padded), dtype=values["output_dtype"])[:, :max_seq_len]


# fp8_paged_mqa_logits and fp4_paged_mqa_logits (0.7.x attn_scores, DeepSeek-V3.2's indexer): the
# public bodies compile their CuTe DSL kernels at call time (the compile cache hashes the kernel's
# sources) and launch them, no op declared. The kernel writes only the logits buffer (its aligned
# padding too); woken for the call that gives no `out`, whose result is a [:, :max_seq_len] view of
# a fresh (rows, 256-aligned) buffer (the correction's `fresh_only`; fakes the record's, with that
# stride).
OPS += [
    Op(
        family=Family.ATTENTION,
        module="flashinfer.attn_scores.attn_scores",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        # dynafold's declarations of the paged MQA logits functions: the CuTe DSL kernel writes only
        # the logits, a view of the caller's `out` when given, else of a buffer the body allocates
        # (attn_scores/attn_scores.py).
        correction=Correction(fresh_only=Fresh(when={"out": None}, results=1)),
        # dynafold's own declarations of the paged MQA logits functions, called without `out`.
        fake=Fake(_paged_mqa_logits, ("q", "max_seq_len", "output_dtype")),
        sweep=Sweep(equal=("0.7.4",)),
    )
    for name in ("fp8_paged_mqa_logits", "fp4_paged_mqa_logits")
]


def _concat_mla_kv_quant_fp8(values):
    """`concat_mla_kv_quant_fp8`'s `(key, value)` with neither given, the only call woken:
    float8_e4m3fn [num_tokens, num_heads, nope_dim + rope_dim] and [num_tokens, num_heads,
    kv_dim - nope_dim], `kv_nope` being [num_tokens, num_heads, kv_dim] and `k_pe`
    [num_tokens, rope_dim] or [num_tokens, 1, rope_dim] (0.7.4 mla_kv_pack.py:639-:664)."""
    kv_nope, k_pe, nope_dim = values["kv_nope"], values["k_pe"], values["nope_dim"]
    num_tokens, num_heads, kv_dim = kv_nope.shape
    fp8 = torch.float8_e4m3fn
    return (kv_nope.new_empty((num_tokens, num_heads, nope_dim + k_pe.shape[-1]), dtype=fp8),
            kv_nope.new_empty((num_tokens, num_heads, kv_dim - nope_dim), dtype=fp8))


# concat_mla_kv_quant_fp8 (0.7.4): its body reads the fused kernels' workload allowlist from package
# data (mla_kv_pack._load_allowlist, importlib.resources under functools.cache, which Dynamo traces
# into), reads FLASHINFER_SPECIALIZED_KERNEL_DISABLE, picks its backend from shape, alignment and
# arch, and launches a JIT or Cake program (or the composable torch copy) outside any declared op:
# the boundary is the public function. Every path writes only `key` and `value`; woken for the call
# that gives neither, whose results are fresh (the correction's `fresh_only`; fake: the record's).
OPS.append(Op(
    family=Family.ATTENTION,
    module="flashinfer.mla_kv_pack",
    function="concat_mla_kv_quant_fp8",
    name="flashinfer::concat_mla_kv_quant_fp8",
    declare=Declare(),
    # dynafold's declaration of concat_mla_kv_quant_fp8: every backend (csrc/mla_kv_pack_fp8.cu, the
    # Cake programs, the torch fallback) writes only `key` and `value`, the caller's when given,
    # else allocated (mla_kv_pack.py:657-:664).
    correction=Correction(fresh_only=Fresh(when={"key": None, "value": None}, results=2)),
    # dynafold's own declaration of concat_mla_kv_quant_fp8, woken for the call that gives neither
    # `key` nor `value` (the correction's `fresh_only`).
    fake=Fake(_concat_mla_kv_quant_fp8, ("kv_nope", "k_pe", "nope_dim")),
    sweep=Sweep(equal=("0.7.4",)),
))

# BatchMLAPagedAttentionWrapper.run (SGLang's flashinfer_mla backend; FA2/FA3) calls its JIT
# module's tvm_ffi `run` itself, outside any declared op (0.6.16 mla/_core.py:1942, 0.7.2
# mla/_batch_mla/_backends/_fa_common.py:762, 0.7.4 :777). Under compile that module's `run` is
# dynafold's `mla_run` (hooks/ops/mechanisms/attention_plans.py): the operator takes the module's
# key, the plan as a tensor and the trailing scalars and tensors packed (`variadic`, the
# correction). `out` and `lse` are allocated (or checked) by FlashInfer's traced Python before the
# call: the operator writes them, never returns one.
OPS.append(Op(
    family=Family.ATTENTION,
    module=PLANS,
    function="mla_run",
    name="flashinfer::mla_run_jit",
    declare=Declare(mutates=("float_workspace_buffer", "o", "maybe_lse")),
    # dynafold's declaration of the MLA JIT module's `run`
    # (hooks/ops/mechanisms/attention_plans.py): its trailing scalars differ per release (0.7.x adds
    # `ckv_scale_arr`) and the profiler build adds `profiler_buffer`, which the kernel writes.
    correction=Correction(variadic=True),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))

# BatchAttention.run calls `self.module.run(...)`, its JIT module's tvm_ffi function, the
# same way (attention/_core.py, 0.6.16 :302, 0.7.2 :358, 0.7.4 :359): `holistic_run`.
OPS.append(Op(
    family=Family.ATTENTION,
    module=PLANS,
    function="holistic_run",
    name="flashinfer::holistic_run_jit",
    declare=Declare(mutates=("float_workspace_buffer", "o", "maybe_lse")),
    # dynafold's declaration of BatchAttention's JIT `run`: its trailing arguments differ per
    # release (0.7.x's NVFP4 scale-factor tensors) and the profiler build adds a buffer.
    correction=Correction(variadic=True),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))

# single_{decode,prefill}_with_kv_cache_with_jit_module call `jit_module.run(...)` on the module the
# caller passes in (decode.py, prefill.py, 0.6.16 to 0.7.4). Under compile Dynamo traces their body
# given a stand-in (hooks/ops/mechanisms/attention_plans.py REBUILT) whose `run` is one of these:
# the module's key, FlashInfer's arguments, the variant's trailing arguments packed (`variadic`).
# `tmp`, `o` and `lse` are allocated by the traced body.
OPS += [
    Op(
        family=Family.ATTENTION,
        module=PLANS,
        function=name,
        name=f"flashinfer::{name}_jit",
        declare=Declare(mutates=("tmp", "o", "maybe_lse")),
        # dynafold's declarations of a caller's single decode/prefill JIT module `run`: a variant's
        # additional tensors and scalars trail FlashInfer's arguments.
        correction=Correction(variadic=True),
        sweep=Sweep(equal=("0.6.16", "0.7.4")),
    )
    for name in ("single_decode_run", "single_prefill_run")
]

# PODWithPagedKVCacheWrapper.run and BatchPODWithPagedKVCacheWrapper.run call their JIT
# module's tvm_ffi function (`get_pod_module(...).run_tensor`, flashinfer/pod.py, 0.6.16 to
# 0.7.4) outside any declared op. Under compile the loader gives a stand-in whose
# `run_tensor` is dynafold's declaration (hooks/ops/mechanisms/attention_plans.py); the kernels' C++
# signatures are the same in the three releases. `out`/`lse` are allocated by FlashInfer's
# traced Python before the call: the operators write them, never return one.
OPS.append(Op(
    family=Family.ATTENTION,
    module=PLANS,
    function="pod_run",
    name="flashinfer::pod_run_jit",
    declare=Declare(
        mutates=("tmp_p", "o_p", "maybe_lse_p", "float_workspace_buffer_d", "o_d", "maybe_lse_d"),
    ),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))
OPS.append(Op(
    family=Family.ATTENTION,
    module=PLANS,
    function="batch_pod_run",
    name="flashinfer::batch_pod_run_jit",
    declare=Declare(
        mutates=("float_workspace_buffer_p", "o_p", "maybe_lse_p", "float_workspace_buffer_d",
                 "o_d", "maybe_lse_d", "sm_aware_sched"),
    ),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _minimax_h3_varlen_attention(values):
    """MiniMax-H3 packed-varlen attention's fresh result (no `out`), on every route (BF16, FP8,
    FP8 from BF16, NVFP4): `torch.empty((total_tokens, num_heads, HEAD_DIM), bfloat16)`, the
    query's [T, H, 128] (0.7.2, 0.7.4: experimental/minimax_h3_varlen_attention/cake_backend.py
    _prepare_bf16, _prepare_nvfp4, prepare_minimax_h3_varlen_fp8_attention)."""
    query = values["query"]
    return query.new_empty(tuple(query.shape), dtype=torch.bfloat16)


# MiniMax-H3's packed-varlen attentions (prefill.py; BF16 and NVFP4 0.7.2 on, the two FP8 ones
# 0.7.4; SM100/SM103, experimental): each public function imports its one-shot Cake entry
# (experimental/minimax_h3_varlen_attention/cake_backend.py), which checks every tensor's data_ptr()
# alignment (_check_thd `% 16`, the NVFP4 route's `% 32`; no trace can read an address), reads
# cu_seqlens on the host unless cu_seqlens_host is given, plans (the BF16/FP8 plan cache keyed by
# the offsets' values and the stream) and launches its programs through tvm_ffi, no op declared. The
# four share no inner launcher of tensors (each prepares a runner object), so each public function
# is the boundary. The kernels write `out` (the caller's, or a fresh BF16 [T, H, 128]) and
# FlashInfer's own scratch (plan tables, the FP8 copies and descales, the NVFP4 workspace), never
# the caller's query, key, value or descales; the result is `out` itself (the correction's
# `result_is_given`); the fake is the record's.
OPS += [
    Op(
        family=Family.ATTENTION,
        module="flashinfer.prefill",
        function=name,
        name=f"flashinfer::{name}",
        declare=Declare(),
        # dynafold's declarations of MiniMax-H3's packed-varlen attentions (prefill.py, 0.7.2 on):
        # each returns `out`, the caller's when given, else the BF16 [T, H, 128] its Cake entry
        # allocates (experimental/minimax_h3_varlen_attention/cake_backend.py: the runners'
        # `launch` ends `return self.out`).
        correction=Correction(result_is_given=Given(argument="out", fresh_otherwise=True)),
        # dynafold's own declarations of MiniMax-H3's packed-varlen attentions, woken for the call
        # that gives no `out` (and, as a mutation, for one that does).
        fake=Fake(_minimax_h3_varlen_attention, ("query",)),
        sweep=Sweep(equal=("0.7.4",)),
    )
    for name in ("minimax_h3_varlen_attention", "minimax_h3_varlen_fp8_attention",
                 "minimax_h3_varlen_fp8_attention_bf16", "minimax_h3_varlen_nvfp4_attention")
]
