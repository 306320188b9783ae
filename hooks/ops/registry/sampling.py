"""Sampling and top-k: the Cake sampler and the public top-k and DSA transforms."""

import torch

from _dynafold_ops.engine.record import Correction, Declare, Fake, Family, Fresh, Given, Op, Sweep

OPS = []

OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.topk",
    function="get_topk_module.<locals>.cub_topk_page_table_transform",
    # 0.7.x topk.py: declared `-> torch.Tensor` and `return out`, `out` also declared mutable.
    correction=Correction(returns_argument="out"),
))


def _min_p_sampling_from_probs(values):
    """`min_p_sampling_from_probs`'s samples as its body allocates them: one per row of `probs`
    (per entry of `indices` when given), int32 (`indices`' dtype when given), and with 0.6.11's
    `return_valid` a bool per sample besides (0.6.3-0.7.4 sampling.py; FlashInfer's own fake
    from 0.6.11 says the same, 0.6.3 has none)."""
    probs, indices = values["probs"], values["indices"]
    rows = indices.size(0) if indices is not None else probs.size(0)
    samples = probs.new_empty(rows, dtype=indices.dtype if indices is not None else torch.int32)
    if values.get("return_valid", False):
        return samples, probs.new_empty(rows, dtype=torch.bool)
    return samples


# FlashInfer's min-p sampling kernel declaration: 0.6.3 (SGLang 0.5.9's pin) registers no fake
# for it (sampling.py registers one for every other sampler), so it stayed as shipped and Dynamo
# traced its body into the default generator's torch.cuda.init(). Fake: the record's.
OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.sampling",
    function="get_sampling_module.<locals>.min_p_sampling_from_probs",
    name="flashinfer::min_p_sampling_from_probs",
    fake=Fake(_min_p_sampling_from_probs, ("probs", "indices")),
))


def _top_k(values):
    """`top_k`'s (values, indices): (rows, k) of the input's dtype and int64, on every path it
    takes (CUB, clusters, radix; sorted or not: its sort and gather keep the shape)."""
    input, k = values["input"], values["k"]
    rows = input.size(0)
    return (input.new_empty((rows, k)), input.new_empty((rows, k), dtype=torch.int64))


# top_k (0.6.16 on) picks its backend in the public body from the shape, the arch and
# FLASHINFER_TOPK_ALGO; on an sm90, 0.7.x's CUB path asks the JIT module for its workspace
# size (`cub_topk_workspace_size`, an FFI call) and takes a per-device cached workspace,
# outside any declared op. A size read at trace time would be wrong for the next shape, so
# the boundary is the public function, choice included. Its results are fresh; the kernels
# write only them and FlashInfer's own cached scratch (docs/op-audit). Its schema is given:
# `tie_break`'s default is an IntEnum, which torch cannot write in a schema.
OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.topk",
    function="top_k",
    name="flashinfer::top_k_public",
    declare=Declare(
        schema="(Tensor input, int k, bool sorted=False, bool deterministic=False, int "
               "tie_break=0, bool dsa_graph_safe=False) -> (Tensor, Tensor)",
    ),
    # dynafold's own declaration of the public top_k.
    fake=Fake(_top_k, ("input", "k")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _top_k_transform(values):
    """The DSA top-k transforms' fresh indices: (rows, k) int32 on every path (topk.py: CUB's
    and radix's `torch.empty(num_rows, k, dtype=torch.int32)`, the clusters kernel's own)."""
    input, k = values["input"], values["k"]
    return input.new_empty((input.size(0), k), dtype=torch.int32)


# The DSA top-k transforms (every release; SGLang's NSA backend) pick CUB, clusters or radix in the
# public body the same way, and 0.7.4 asks there whether a CUDA graph is being captured (topk.py
# is_cub_*_beneficial: `torch.cuda.is_current_stream_capturing()`, an in-graph torch.cuda function
# whose bool breaks fullgraph=True on a GPU; the H200 found it, 2026-12-02). The choice belongs to
# the run, not the trace: a compiled graph is captured later. The kernels write the result (`out`
# when given) and `out_raw_indices` when given, besides FlashInfer's own cached scratch
# (docs/op-audit). The ragged form's schema is given (`tie_break` defaults to an IntEnum); the
# page-table form's comes from its annotations, as its `out` needs the correction.
OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.topk",
    function="top_k_page_table_transform",
    name="flashinfer::top_k_page_table_transform_public",
    declare=Declare(),
    # dynafold's declaration of top_k_page_table_transform (0.7.2 on: `out`, `out_raw_indices`):
    # the result is `out`, the caller's when given, else one it allocates; `out_raw_indices`
    # is written when given (topk.py: cub_topk_page_table_transform and
    # radix_topk_page_table_transform take both). 0.6.16 has neither and is left as shipped.
    correction=Correction(
        also_mutates=("out_raw_indices",),
        result_is_given=Given(argument="out", fresh_otherwise=True),
    ),
    fake=Fake(_top_k_transform, ("input", "k")),
    # 0.6.3 and 0.6.11.post1 (SGLang 0.5.9's and 0.5.12's pins) have neither: the result is
    # the page table the body allocates, nothing of the caller's written (topk.py
    # `output_page_table`), so nothing to correct. 0.6.16 has neither either and traces it
    # as shipped.
    by_release={release: Correction() for release in ("0.6.3", "0.6.11.post1")},
    sweep=Sweep(equal=("0.7.4",)),
))
OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.topk",
    function="top_k_ragged_transform",
    name="flashinfer::top_k_ragged_transform_public",
    declare=Declare(
        schema="(Tensor input, Tensor offsets, Tensor lengths, int k, bool deterministic=False, "
               "int tie_break=0, bool dsa_graph_safe=False, Tensor? row_starts=None) -> Tensor",
    ),
    fake=Fake(_top_k_transform, ("input", "k")),
    sweep=Sweep(equal=("0.6.16", "0.7.4")),
))


def _cake_top_k_top_p_sampling_from_probs(values):
    """The Cake top-k/top-p sampler's samples with no `out` given, the only call woken: int32
    [batch] (0.7.4 cake_sampling.py top_k_top_p_sampling_from_probs: `torch.empty(batch,
    int32)`, and the fallback route's result `.to(torch.int32)`)."""
    probs = values["probs"]
    return probs.new_empty((probs.shape[0],), dtype=torch.int32)


# flashinfer.cake_top_k_top_p_sampling_from_probs (0.7.4, cake_sampling.py
# top_k_top_p_sampling_from_probs): its body plans the launch, loads the Cake sampling module (its
# manifest read from the file system) and launches it on the raw stream handle, or falls back to
# flashinfer.sampling's sampler, outside any declared op: the boundary is the public function. It
# draws its Philox seed and offset from the generator (seeded, as FlashInfer's sampling ops;
# `generator` narrowed to None) and writes `out` (and the caller's `renorm_out` and slab `workspace`
# when given, else its own cached slab); woken for the call that gives none of them (the
# correction's `fresh_only`, hooks/ops/engine/narrowing.py `workspace`), one operator per member of
# `top_k` and `top_p`.
OPS.append(Op(
    family=Family.SAMPLING,
    module="flashinfer.cake_sampling",
    function="top_k_top_p_sampling_from_probs",
    name="flashinfer::cake_top_k_top_p_sampling_from_probs",
    declare=Declare(),
    # dynafold's declaration of the Cake top-k/top-p sampler: the kernels write `out`, `renorm_out`
    # and the slab `workspace` when given (csrc/cake_sampling RadixTopK / RadixTopKSample), else a
    # fresh `out` and the sampler's own cached slab.
    correction=Correction(
        fresh_only=Fresh(when={"out": None, "renorm_out": None, "workspace": None}, results=1),
    ),
    # dynafold's own declaration of the Cake top-k/top-p sampler, woken for the call that gives no
    # buffers (the correction's `fresh_only`).
    fake=Fake(_cake_top_k_top_p_sampling_from_probs, ("probs",)),
    sweep=Sweep(equal=("0.7.4",)),
))
