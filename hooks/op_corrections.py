"""Where FlashInfer's declarations say less than its kernels do, by declaring function.

Data beside hooks/op_fakes.py. FlashInfer's `mutates_args` are not exercised by FlashInfer (its
declarations are switched off) and some have rotted: a kernel that writes a tensor the
declaration does not list gives a compiled graph that reads the buffer before the write (NaN
where eager is right). Each entry is keyed by the declaring function, (module, qualified name),
because the declared name of many ops carries a JIT uri that changes with every build
(`flashinfer::single_decode_with_kv_cache_dtype_q_..._run`).

Fields (each optional):
- `also_mutates`: parameters the kernel (or the Python body) writes that `mutates_args` leaves
  out; the operator declares them mutable too.
- `returns_argument`: the parameter the declared result is (an aliased result, which a custom
  operator cannot return). The operator is then defined as a mutation of that parameter that
  returns nothing, and what Dynamo calls returns the argument itself.
- `seeded`: the kernel draws from the random generator although no parameter says so; the
  operator gets `torch.Tag.nondeterministic_seeded` and an ordered effect (a `generator`
  parameter already says so).
- `result_is_given`: the declared result is the caller's buffer when one is given, which no
  operator may return: `{"argument": the buffer's parameter, "when": {parameter: value that
  must hold (torch.Tensor: a tensor given)}, "form": "itself" | "list" ([buffer]) | "list+"
  ([buffer, *fresh tensors]) | "pair" ((buffer, the `second` parameter's value as given:
  fmha_varlen's `(out, lse)`; without `second`, None: recurrent KDA's `(output, None)`)),
  "rest_fake": the hooks/op_fakes.py name of the fresh tensors' fake (form "list+"),
  "fresh_otherwise": whether a call without a buffer is an operator too}`. The call that gives
  the buffer (and fits `when`) becomes an operator that writes it (declared mutable) and
  returns nothing or only the fresh tensors; what Dynamo calls hands back the buffer as
  FlashInfer does (hooks/op_narrowing.py, `given_result`). Any other call is traced as
  FlashInfer ships it.
- `fresh_only`: `{"when": {parameter: None, ...}, "results": n, "form": "list" (optional)}`,
  for dynafold's declaration of a public function that allocates its outputs unless the caller
  gives buffers for them: the call whose `when` parameters are all None becomes an operator
  that returns the n fresh tensors and writes nothing of the caller's (with no buffer given
  there is none to write); a call that gives one is traced as FlashInfer ships it
  (hooks/op_narrowing.py, `fresh_result`). `when` may also hold True/False for a flag the
  fresh result depends on, or the backend name whose path it describes; with form "list" the declared result is a list of the n fresh
  tensors, which the operator returns as a tensor or tuple and what Dynamo calls makes a list
  again. `then` (optional): the parameters FlashInfer's result holds after the fresh tensors
  (state pools updated in place and returned, 0.7.4's gdn_fused_decode_step): declared
  mutable, not returned by the operator, and handed back after its results by what Dynamo
  calls.
  `object_defaults` (optional): True where a parameter hooks/op_narrowing.py NARROWED leaves
  out has an object default (0.7.x's SM12x MoE GEMMs' `epi`): the call that leaves it there
  is an operator too, FlashInfer's function getting that default back (as `variants` does).
- `variadic`: True for a JIT run function ending in `*args` (a JIT variant's additional
  tensors and scalars): the operator takes them packed, the tensors declared mutable
  (hooks/op_narrowing.py, VARIADIC).
- `annotations`: {parameter: annotation} for parameters FlashInfer wrote no annotation for
  (0.7.x's SM12x CuTe DSL MoE GEMMs: their tensors and `tile`), the types its callers pass;
  the operator's schema reads them as if FlashInfer had written them.
- `keywords`: {name: annotation} of the entries a trailing `**kwargs` takes (0.7.x
  grouped_gemm_nt_masked's `alpha`, `alpha_dtype`): operator parameters defaulting to None,
  given to FlashInfer's function only when not None; a call passing another keyword is traced
  as shipped. `when`: {parameter: value} that must hold for a call to go through the operator
  (else traced as shipped), for a declaration woken with neither `result_is_given` nor
  `fresh_only`.
- `dormant`: why the declaration cannot become a correct operator at all (it stays as
  FlashInfer ships it: traced, a graph break where it reaches the kernel, never a wrong value).

Each entry names where the audit found it (docs/op-audit: FlashInfer's C++/CUDA source per
release). The first real run of every woken operator checks what its kernel wrote, whether a
result shares storage with an input and whether the generator moved (hooks/fake_check.py), so an
entry missing here stops a compiled graph at its first run instead of giving a wrong answer.
"""

import typing

import torch

# The SM12x CuTe DSL MoE GEMMs' unannotated parameters (their `annotations` below).
_SM12X_TENSORS = {**{name: torch.Tensor for name in (
    "a_q", "a_scale", "b_q", "b_scale", "m_indptr")}, "tile": typing.Optional[typing.List[int]]}

# (module, qualified name) -> {field: value}
CORRECTIONS = {
    # The kernel writes `maybe_lse` when it is given (csrc/single_decode.cu:81), every release.
    ("flashinfer.decode", "get_single_decode_module.<locals>.run_single_decode"): {
        "also_mutates": ("maybe_lse",),
    },
    # The JIT run functions of a wrapper built from `jit_args` (the attention-sink and
    # causal-bidirectional wrappers, a user's own variant) end in `*args`: the variant's
    # additional tensors, then its additional scalars (prefill.py get_batch_prefill_jit_module,
    # decode.py get_batch_decode_jit_module, 0.6.16-0.7.4). A variant's additional tensors are
    # plain `T*` in its params (jit/attention/utils.py generate_additional_params), so a
    # variant may write them: the operator declares them mutable (docs/op-audit notes).
    **{("flashinfer.prefill", f"get_batch_prefill_jit_module.<locals>.{run}"): {
        "variadic": True} for run in ("paged_run", "ragged_run")},
    ("flashinfer.decode", "get_batch_decode_jit_module.<locals>.run_batch_decode"): {
        "variadic": True,
    },
    # dynafold's declaration of the MLA JIT module's `run` (hooks/attention_plans.py): its
    # trailing scalars differ per release (0.7.x adds `ckv_scale_arr`) and the profiler build
    # adds `profiler_buffer`, which the kernel writes.
    ("_dynafold_attention_plans", "mla_run"): {"variadic": True},
    # dynafold's declaration of BatchAttention's JIT `run`: its trailing arguments differ per
    # release (0.7.x's NVFP4 scale-factor tensors) and the profiler build adds a buffer.
    ("_dynafold_attention_plans", "holistic_run"): {"variadic": True},
    # dynafold's declarations of a caller's single decode/prefill JIT module `run`: a variant's
    # additional tensors and scalars trail FlashInfer's arguments.
    ("_dynafold_attention_plans", "single_decode_run"): {"variadic": True},
    ("_dynafold_attention_plans", "single_prefill_run"): {"variadic": True},
    # 0.7.x topk.py: declared `-> torch.Tensor` and `return out`, `out` also declared mutable.
    ("flashinfer.topk", "get_topk_module.<locals>.cub_topk_page_table_transform"): {
        "returns_argument": "out",
    },
    # XQA counts work items in `semaphores` with atomics that wrap back to 0
    # (csrc/xqa/mha.cu:2762, mha_sm90.cu:1431, mla_sm120.cu:1502).
    ("flashinfer.xqa", "_get_xqa_module_cached.<locals>.xqa"): {
        "also_mutates": ("semaphores",),
    },
    ("flashinfer.xqa", "get_xqa_module_mla.<locals>.xqa_mla"): {
        "also_mutates": ("semaphores",),
    },
    # include/flashinfer/comm/trtllm_moe_allreduce_fusion.cuh:815 writes moe_allreduce_out.
    ("flashinfer.comm.trtllm_ar", "get_trtllm_comm_module.<locals>.trtllm_moe_allreduce_fusion"): {
        "also_mutates": ("moe_allreduce_out",),
    },
    # 0.6.16/0.7.2 trtllm_alltoall: the FIFO and its counters, the prepare workspace.
    ("flashinfer.comm.trtllm_alltoall", "get_comm_alltoall_module.<locals>.moe_comm"): {
        "also_mutates": ("all_workspaces",),
    },
    ("flashinfer.comm.trtllm_alltoall", "get_comm_alltoall_module.<locals>.moe_prepare"): {
        "also_mutates": ("workspace",),
    },
    # Quantized combine writes its block scales (csrc/trtllm_moe_alltoall.cu:486-524).
    **{("flashinfer.comm.trtllm_moe_alltoall", f"{loader}.<locals>.{op}"): {
        "also_mutates": ("output_scales",)}
       for loader in ("get_moe_alltoall_module", "_get_moe_alltoall_module_for_target")
       for op in ("moe_a2a_combine", "moe_a2a_combine_into")},
    # Prims-TS MoE (0.7.2, 0.7.4): the result is the caller's `output` when one is given and
    # the call is finalized (BF16 and NVFP4: `[output]`, shared/inputs.py
    # unpack_trtllm_moe_output, 0.7.4 bf16_op.py:287, 0.7.2 :232, fp4_op.py:403; FP8: `output`
    # itself, 0.7.4 fp8_op.py:486, :1453, 0.7.2 :393, :975), else a new tensor or routing-sized ones: woken for the call that
    # gives `output`, finalized, as the trtllm-gen ops are. The staged routing kernel reads the
    # caller's top-k weights and never writes them: FlashInfer passes them down only for
    # unpacked routing (runner.py _staged_routing_io, fp4_op.py/fp8_op.py
    # _resolve_routing_inputs; packed routing gets a fresh empty placeholder), where the kernel
    # takes the ids from mPtrPrecomputedExpertIds and stores no weights
    # (trtllm_fused_moe_kernel_launcher.cu makePrecomputedRoutingData,
    # RoutingKernel.cuh:618-626). 0.7.4's BF16 declaration also serves the partitioned call
    # (weight shards, caller streams): that one is traced as shipped (hooks/op_narrowing.py
    # NARROWED, partition_resources).
    **{(f"flashinfer.fused_moe.backends.prims_ts.{module}", op): {
        "result_is_given": {"argument": "output", "form": form,
                            "when": {"do_finalize": True, "gemm1_lora_delta": None}}}
       for module, op, form in (("bf16_op", "prims_ts_bf16_moe_op", "list"),
                                ("fp4_op", "prims_ts_fp4_block_scale_moe", "list"),
                                ("fp8_op", "prims_ts_fp8_block_scale_moe", "itself"),
                                ("fp8_op", "prims_ts_fp8_per_tensor_scale_moe", "itself"))},
    # NVFP4 MoE as SGLang calls it (0.6.16-0.7.4, the same body): with `output` given and
    # finalized, the result is `[output]` (0.7.x fused_moe/shared/inputs.py
    # unpack_trtllm_moe_output; 0.6.16 inline); routing buffers the caller does not give are
    # allocated inside. Not finalized, it holds routing-sized tensors and may hold the
    # caller's `topk_weights`: traced as shipped.
    **{("flashinfer.fused_moe.core", f"{loader}.<locals>.trtllm_fp4_block_scale_moe_op"): {
        "result_is_given": {"argument": "output", "form": "list",
                            "when": {"do_finalize": True, "gemm1_lora_delta": None}},
        # The routing kernel writes the top-k ids and weights when the caller gives buffers
        # for them (docs/op-audit; the declaration lists neither).
        "also_mutates": ("topk_ids", "topk_weights")}
       for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")},
    # The other trtllm-gen MoE ops (0.6.16-0.7.4) end the same way: with `output` given,
    # finalized and no LoRA delta the result is `[output]` (fused_moe/shared/inputs.py
    # unpack_trtllm_moe_output, 0.7.4 :185, 0.7.2 :186; 0.6.16 core.py:1378 _unpack_trtllm_moe_output; 0.6.16's
    # per-tensor op returns `[output]` itself, core.py:2182). The routing kernel writes the
    # caller's `expert_weights` when it is given with packed `topk_ids`
    # (include/flashinfer/trtllm/fused_moe/RoutingKernel.cuh:625, 0.6.16 :593; the BF16,
    # block-FP8 and MXINT4 launchers point mPtrTopKWeights at it, 0.7.4
    # csrc/trtllm_fused_moe_kernel_launcher.cu:1985-1990, 4483, 4980); the Python body replaces
    # both routing tensors by empty ones when `routing_logits` is given, so `topk_ids` is only
    # read. The per-tensor FP8 launcher points it at the caller's weights only for unpacked
    # routing, where the kernel reads them (:3821-3828): no undeclared write.
    **{("flashinfer.fused_moe.core", f"{loader}.<locals>.{op}"): {
        "result_is_given": {"argument": "output", "form": "list",
                            "when": {"do_finalize": True, "gemm1_lora_delta": None}},
        "also_mutates": ("expert_weights",)}
       for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
       for op in ("trtllm_bf16_moe_op", "trtllm_fp8_block_scale_moe_op",
                  "trtllm_mxint4_block_scale_moe_op")},
    **{("flashinfer.fused_moe.core", f"{loader}.<locals>.{op}"): {
        "result_is_given": {"argument": "output", "form": "list",
                            "when": {"do_finalize": True}}}
       for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")
       for op in ("trtllm_fp8_per_tensor_scale_moe_op",
                  "trtllm_fp8_per_tensor_scale_routed_moe_op")},
    # FP8 per-channel MoE (0.7.2, 0.7.4) has no `output` parameter: it allocates the output
    # itself (0.7.4 core.py:3265, 0.7.2 :2906), so finalized the result is `[fresh output]`
    # (shared/inputs.py unpack_trtllm_moe_output). Its routing kernel writes the caller's
    # `expert_weights` given with packed `topk_ids` (RoutingKernel.cuh:625), which the public
    # functions never give (core.py:6145, :6299 pass None). Woken for that call, finalized: an
    # operator returning the one fresh tensor (0.7.4's declared-mutable `workspace_buffer`
    # rules out a Tensor[] result), handed back as a list. Not finalized, the result may be the
    # caller's `expert_weights`, and FlashInfer's fake gives one tensor where the kernel gives
    # three: traced as shipped.
    **{("flashinfer.fused_moe.core", f"{loader}.<locals>.trtllm_fp8_per_channel_scale_moe_op"): {
        "fresh_only": {"when": {"do_finalize": True, "expert_weights": None}, "results": 1,
                       "form": "list"}}
       for loader in ("_build_trtllm_moe_namespace", "_get_trtllm_moe_sm100_module_impl")},
    # Outside min-latency mode (which the public function refuses on every arch it builds)
    # the kernel returns `[output, three scratch tensors it allocates]`; FlashInfer's fake
    # gives one tensor. Woken as a write of `output` returning the three (dynafold's fake).
    ("flashinfer.fused_moe.core", "get_cutlass_fused_moe_module.<locals>.cutlass_fused_moe"): {
        "result_is_given": {"argument": "output", "form": "list+",
                            "when": {"min_latency_mode": False}, "rest": 3,
                            "rest_fake": "flashinfer::cutlass_fused_moe:scratch"},
    },
    # dynafold's own declaration of `mm_fp4` (hooks/dormant_ops.py): returns `out`, the
    # caller's when given, else one it allocates.
    ("flashinfer.gemm.gemm_base", "mm_fp4"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's own declaration of `mono_moe` (hooks/dormant_ops.py): returns `out`, the
    # caller's when given, else one it allocates (monomoe.py:353, :371; 0.6.16 :340, :360).
    ("flashinfer.fused_moe.monomoe", "mono_moe"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declaration of kimi_k3_fp8_projection (hooks/attention_plans.py): returns
    # `out`, the caller's when given, else one it allocates (0.7.4 experimental/
    # kimi_k3_fp8_projection/cake_backend.py:4288, :4296).
    ("_dynafold_attention_plans", "kimi_k3_project"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's own declaration of AlphaMoE's routed NVFP4 call (hooks/dormant_ops.py): it
    # updates the caller's required `out` in place and returns it (0.7.4
    # alphamoe_nvfp4_sm100.py:1097, 0.7.2 :1081).
    ("flashinfer.fused_moe.alphamoe_nvfp4_sm100", "alphamoe_nvfp4_routed_moe"): {
        "returns_argument": "out",
    },
    # dynafold's own declaration of cute_dsl_fused_moe_bf16 (hooks/dormant_ops.py): returns
    # `moe_output`, the caller's when given, else one it allocates (0.7.4 sm90_fused_moe.py:394,
    # :427; 0.7.2 :389, :422).
    ("flashinfer.fused_moe.cute_dsl.sm90_fused_moe", "cute_dsl_fused_moe_bf16"): {
        "result_is_given": {"argument": "moe_output", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's own declaration of cute_dsl_fused_moe_mxfp8_mxfp4 (hooks/dormant_ops.py):
    # returns `moe_output[:num_tokens]` of the caller's `moe_output` when given (which must
    # have num_tokens rows: the whole buffer), else of one it allocates (0.7.4 fused_moe.py
    # :1991, :583, :1005; 0.7.2 :1353, :423, :608).
    ("flashinfer.fused_moe.cute_dsl.fused_moe", "cute_dsl_fused_moe_mxfp8_mxfp4"): {
        "result_is_given": {"argument": "moe_output", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's own declarations of cute_dsl_fused_moe and cute_dsl_fused_moe_nvfp4
    # (hooks/dormant_ops.py): `moe_output[:num_tokens]` of the caller's `moe_output` when given
    # (num_tokens rows: the whole buffer; the W4A16 runner returns `moe_output` itself, its
    # shape checked equal), else of one they allocate (0.7.4 fused_moe.py:1991, :583, :1005,
    # blackwell/moe_w4a16.py:529; 0.7.2 :1354, :423, :608; 0.6.16 :950, :243, :390).
    **{("flashinfer.fused_moe.cute_dsl.fused_moe", name): {
        "result_is_given": {"argument": "moe_output", "form": "itself", "fresh_otherwise": True},
    } for name in ("cute_dsl_fused_moe", "cute_dsl_fused_moe_nvfp4")},
    # dynafold's declarations of the other autotuned dense GEMMs and of the groupwise and SVDQuant
    # ones (hooks/dormant_ops.py): each returns `out`, the caller's when given, else one it
    # allocates (every backend's path ends `return out`, or a runner's result, which is `out`).
    **{("flashinfer.gemm.gemm_base", name): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True}}
       for name in ("mm_bf16", "bmm_bf16", "mm_mxfp8", "tgv_gemm_sm100",
                    "gemm_fp8_nt_groupwise", "group_gemm_fp8_nt_groupwise",
                    "group_gemm_mxfp8_mxfp4_nt_groupwise", "group_gemm_nvfp4_nt_groupwise",
                    "fp8_blockscale_gemm_sm90", "group_deepgemm_fp8_nt_groupwise",
                    "batch_deepgemm_fp8_nt_groupwise", "group_gemm_fp8_nt_groupwise_contiguous")},
    # dynafold's declarations of 0.7.4's Cake LoRA GEMMs: `_run` returns `out`, the caller's
    # when given, else a bfloat16 (m, n) it allocates (cake_quant_lora_gemm.py).
    **{("flashinfer.gemm.cake_quant_lora_gemm", name): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True}}
       for name in ("mm_fp8_lora", "mm_nvfp4_lora")},
    # dynafold's declaration of mm_bf16_fp4: every backend returns `out`, the caller's when
    # given, else one it allocates (gemm_bf16_fp4_cudnn.py, _cute_dsl.py, _blackwell.py,
    # kernels/native_bf16_fp4/runner.py: `return out`).
    ("flashinfer.gemm.gemm_bf16_fp4", "mm_bf16_fp4"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declaration of top_k_page_table_transform (0.7.2 on: `out`, `out_raw_indices`):
    # the result is `out`, the caller's when given, else one it allocates; `out_raw_indices`
    # is written when given (topk.py: cub_topk_page_table_transform and
    # radix_topk_page_table_transform take both). 0.6.16 has neither and is left as shipped.
    ("flashinfer.topk", "top_k_page_table_transform"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
        "also_mutates": ("out_raw_indices",),
    },
    ("flashinfer.gemm.gemm_svdquant", "mm_nvfp4_svdquant"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declaration of b12x_fused_moe (hooks/dormant_ops.py): every backend
    # (micro, static, dynamic, W4A16) ends `return scatter_output`, which is `output`, the
    # caller's when given, else the one the public body allocates
    # (fused_moe/cute_dsl/blackwell_sm12x/moe_dispatch.py, moe_w4a16_kernel.py run_w4a16_moe).
    ("flashinfer.fused_moe.cute_dsl.b12x_moe", "b12x_fused_moe"): {
        "result_is_given": {"argument": "output", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declarations of bmm_mxfp8, the grouped GEMMs and cuDNN Frost's GEMM1 + SwiGLU:
    # each returns `out`, the caller's when given, else one it allocates.
    ("flashinfer.gemm.gemm_base", "bmm_mxfp8"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    **{("flashinfer.grouped_mm.core", name): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True}}
       for name in ("grouped_mm_bf16", "grouped_mm_fp8", "grouped_mm_mxfp8", "grouped_mm_fp4")},
    ("flashinfer.fused_moe.cudnn_frost_selected", "cudnn_frost_grouped_gemm1_swiglu"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declaration of chunk_gated_delta_rule2 (0.7.2 on): (output, final_state), both
    # allocated when output and output_state are not given (cudnn/linear_attention.py
    # cudnn_chunk_gated_delta_rule2, _state_out). A state pool (0.7.4 state_indices) needs an
    # explicit output_state when the final state is kept, so it is never such a call.
    ("flashinfer.gdn2_prefill", "chunk_gated_delta_rule2"): {
        "fresh_only": {"when": {"output": None, "output_state": None,
                                "output_final_state": True}, "results": 2},
    },
    # dynafold's declaration of chunk_gated_delta_product (0.7.2 on): the same, through
    # cudnn_chunk_gated_delta_product, for backend "auto" (0.7.4; 0.7.2 has only cuDNN).
    ("flashinfer.gdp_prefill", "chunk_gated_delta_product"): {
        "fresh_only": {"when": {"output": None, "output_state": None,
                                "output_final_state": True, "backend": "auto"}, "results": 2},
    },
    # dynafold's declaration of qsa_sparse_paged_attention (0.7.4): returns `out`, the caller's
    # when given, else empty_like(q) (sparse.py and both backends end `return out`).
    ("flashinfer.sparse", "qsa_sparse_paged_attention"): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True},
    },
    # dynafold's declarations of MiniMax-H3's packed-varlen attentions (prefill.py, 0.7.2 on):
    # each returns `out`, the caller's when given, else the BF16 [T, H, 128] its Cake entry
    # allocates (experimental/minimax_h3_varlen_attention/cake_backend.py: the runners'
    # `launch` ends `return self.out`).
    **{("flashinfer.prefill", name): {
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True}}
       for name in ("minimax_h3_varlen_attention", "minimax_h3_varlen_fp8_attention",
                    "minimax_h3_varlen_fp8_attention_bf16", "minimax_h3_varlen_nvfp4_attention")},
    # dynafold's declarations of the cuDNN QSA forwards (0.7.4): three fresh results.
    **{("flashinfer.qsa", name): {"fresh_only": {"when": {}, "results": 3}}
       for name in ("qsa_forward", "qsa_indexed_forward")},
    # dynafold's declaration of nvfp4_quantize_smooth: its two results are always fresh (it
    # takes no output buffer); declared so that its `backend` Literal is a str to the schema.
    ("flashinfer.gemm.gemm_svdquant", "nvfp4_quantize_smooth"): {
        "fresh_only": {"when": {}, "results": 2},
    },
    # dynafold's declarations of flashinfer.norm's fused diffusion norms (0.6.16-0.7.4): the
    # kernels write only the outputs (csrc/rmsnorm_silu.cu: `output`, and `scale_row_out`,
    # FlashInfer's `block_scale`, for NVFP4 only; fused_dit_layernorm.cuh: `residual_out`,
    # `norm_out`, `sf_out`), each the caller's when given, else allocated by the function.
    # fused_rmsnorm_silu returns `out`, or `(out, block_scale)` when `out` is NVFP4: with
    # neither given the output is bfloat16, one fresh tensor.
    ("flashinfer.norm", "fused_rmsnorm_silu"): {
        "fresh_only": {"when": {"out": None, "block_scale": None}, "results": 1},
    },
    **{("flashinfer.norm", name): {
        "fresh_only": {"when": {"residual_out": None, "norm_out": None, "sf_out": None},
                       "results": 2}}
       for name in ("fused_dit_gate_residual_layernorm_gamma_beta",
                    "fused_dit_gate_residual_layernorm_scale_shift",
                    "fused_dit_residual_layernorm_scale_shift")},
    # dynafold's declaration of fused_qk_rmsnorm_rope (0.6.16-0.7.4): the kernel writes only
    # q_out, k_out and v_out (csrc/norm.cu fused_qk_rmsnorm_rope; docs/op-audit), each the
    # caller's when given, else allocated by the function.
    ("flashinfer.norm", "fused_qk_rmsnorm_rope"): {
        "fresh_only": {"when": {"q_out": None, "k_out": None, "v_out": None}, "results": 3},
    },
    # dynafold's declarations of 0.7.4's gated residual norms (hooks/dormant_ops.py): the
    # kernels write only `out` (`residual_out`, `ffn_input`), each the caller's when given, else
    # allocated by the function (norm/kernels/gated_residual_rmsnorm.py,
    # gated_residual_next_rmsnorm.py; docs/op-audit).
    ("flashinfer.norm", "gated_residual_rmsnorm"): {
        "fresh_only": {"when": {"out": None}, "results": 1},
    },
    ("flashinfer.norm", "gated_residual_next_rmsnorm"): {
        "fresh_only": {"when": {"residual_out": None, "ffn_input": None}, "results": 2},
    },
    # dynafold's declarations of flashinfer.cute_dsl's fused RMSNorm + FP4 quantizers
    # (0.6.16-0.7.4): the kernels write `y_fp4` and `block_scale` (and add_rmsnorm_fp4quant
    # `residual`, declared mutated, `block_scale_unswizzled` with both layouts, `y_out` when
    # given), each the caller's when given, else allocated by the function; with none given
    # and one scale layout the result is the two fresh tensors (docs/op-audit).
    ("flashinfer.cute_dsl.rmsnorm_fp4quant", "rmsnorm_fp4quant"): {
        "fresh_only": {"when": {"y_fp4": None, "block_scale": None}, "results": 2},
    },
    ("flashinfer.cute_dsl.add_rmsnorm_fp4quant", "add_rmsnorm_fp4quant"): {
        "fresh_only": {"when": {"y_fp4": None, "block_scale": None,
                                "output_both_sf_layouts": False,
                                "block_scale_unswizzled": None, "y_out": None},
                       "results": 2},
    },
    # dynafold's declaration of fused_kda_decode (hooks/dormant_ops.py): besides the two
    # caches it declares mutable, the kernel writes only `output`
    # (kda_kernels/fused_kda_decode.py), the caller's when given, else allocated.
    ("flashinfer.kda_decode", "fused_kda_decode"): {
        "fresh_only": {"when": {"output": None}, "results": 1},
    },
    # dynafold's declaration of packed_kda_decode (hooks/dormant_ops.py): besides `state`,
    # declared mutable, the kernel writes only `output` (csrc/kda/cake_kda_packed_t1_binding.cuh
    # Run), the caller's when given, else allocated.
    ("flashinfer.kda_decode", "packed_kda_decode"): {
        "fresh_only": {"when": {"output": None}, "results": 1},
    },
    # dynafold's declaration of the SM120 fmha_v2 runner (hooks/dormant_ops.py): returns
    # `out`, the caller's (required), or `(out, lse)` with return_lse; the kernel writes `out`
    # and `lse` (csrc/trtllm_fmha_v2_binding.cu TRTLLMFMHAv2Run), both declared mutable.
    ("flashinfer.prefill", "_fmha_v2_prefill_sm120_run"): {
        "result_is_given": {"argument": "out", "form": "itself",
                            "when": {"return_lse": False}},
    },
    # dynafold's declaration of trtllm_batch_context_with_kv_cache (hooks/dormant_ops.py):
    # besides `lse`, the workspace and the counter buffer it declares mutable, the kernel
    # writes only `out` (csrc/trtllm_fmha_kernel_launcher.cu trtllm_paged_attention_context),
    # the caller's when given, else allocated; the result is `out`, or `(out, lse)` with
    # return_lse (an FP4Tensor for "nvfp4", which hooks/op_narrowing.py leaves out).
    ("flashinfer.prefill", "trtllm_batch_context_with_kv_cache"): {
        "fresh_only": {"when": {"out": None, "return_lse": False}, "results": 1},
    },
    # dynafold's declaration of trtllm_fmha_v2_prefill (hooks/dormant_ops.py): besides the
    # workspace it declares mutable, the kernel writes `out`, the caller's when given, else
    # allocated, and the softmax stats the body allocates with save_softmax_stats, returned
    # then as `(out, lse)` (csrc/fmha_v2_run.cu).
    ("flashinfer.prefill", "trtllm_fmha_v2_prefill"): {
        "fresh_only": {"when": {"out": None, "save_softmax_stats": False}, "results": 1},
    },
    # dynafold's declaration of cudnn_batch_decode_with_kv_cache (hooks/dormant_ops.py):
    # besides `lse` and the workspace it declares mutable, the graph (or cubin kernel) writes
    # `out`, the caller's when given, else allocated (cudnn/decode.py); the result is `out`,
    # or `(out, lse)` with return_lse.
    ("flashinfer.cudnn.decode", "cudnn_batch_decode_with_kv_cache"): {
        "fresh_only": {"when": {"out": None, "return_lse": False}, "results": 1},
    },
    # dynafold's declaration of sm110_gqa_decode (hooks/dormant_ops.py): the kernel writes
    # only `out`, the caller's when given, else allocated (experimental/sm110_gqa_decode/
    # backend.py), and returns it.
    ("flashinfer.decode", "sm110_gqa_decode"): {
        "fresh_only": {"when": {"out": None}, "results": 1},
    },
    # dynafold's declaration of fmha_varlen (hooks/dormant_ops.py): returns `(out, lse)`,
    # `out` the caller's when given (else a slice of a padded buffer it allocates) and `lse`
    # the caller's, one allocated with return_lse, or None; the kernel writes both
    # (csrc/fmha_cutlass_sm100.cu). Woken for the call giving `out` without return_lse.
    ("flashinfer.prefill", "fmha_varlen"): {
        "result_is_given": {"argument": "out", "form": "pair", "second": "lse",
                            "when": {"return_lse": False}},
    },
    # dynafold's declaration of trtllm_ragged_attention_deepseek (hooks/dormant_ops.py):
    # besides `lse` and the workspace it declares mutable, the kernel writes only `out`
    # (csrc/trtllm_fmha_kernel_launcher.cu trtllm_ragged_attention), the caller's when given,
    # else allocated; the result is `out`, or `(out, lse)` with return_lse.
    ("flashinfer.prefill", "trtllm_ragged_attention_deepseek"): {
        "fresh_only": {"when": {"out": None, "return_lse": False}, "results": 1},
    },
    # dynafold's declaration of trtllm_sage_attention_quantize (hooks/dormant_ops.py): the
    # kernel writes only the tensors the body allocates (csrc/trtllm_sage_quant.cu); six fresh
    # results without smooth_k, seven with it (k_mean appended).
    ("flashinfer.prefill", "trtllm_sage_attention_quantize"): {
        "fresh_only": {"when": {"smooth_k": False}, "results": 6},
    },
    # dynafold's declarations of the SM120 NVFP4 attention functions (hooks/dormant_ops.py):
    # quantize_qkv's seven results are all allocated in its body; fwd's kernel writes only
    # `out` and `lse` (csrc/nvfp4_attention_sm120/nvfp4_attention_sm120_binding.cu fwd), the
    # caller's when given, else allocated, and returns both with return_lse (its default).
    ("flashinfer.nvfp4_attention_sm120", "nvfp4_attention_sm120_quantize_qkv"): {
        "fresh_only": {"when": {}, "results": 7},
    },
    ("flashinfer.nvfp4_attention_sm120", "nvfp4_attention_sm120_fwd"): {
        "fresh_only": {"when": {"out": None, "lse": None, "return_lse": True}, "results": 2},
    },
    # dynafold's declarations of the paged MQA logits functions (hooks/dormant_ops.py): the
    # CuTe DSL kernel writes only the logits, a view of the caller's `out` when given, else of
    # a buffer the body allocates (attn_scores/attn_scores.py).
    **{("flashinfer.attn_scores.attn_scores", name): {
        "fresh_only": {"when": {"out": None}, "results": 1}}
       for name in ("fp8_paged_mqa_logits", "fp4_paged_mqa_logits")},
    # dynafold's declaration of packed_fused_kda_decode (hooks/dormant_ops.py): besides the two
    # caches it declares mutable, either kernel (T=1: kda_kernels/fused_kda_decode.py, T>1:
    # fused_kda_decode_multitoken.py) writes only `output`, the caller's when given, else
    # allocated.
    ("flashinfer.kda_decode", "packed_fused_kda_decode"): {
        "fresh_only": {"when": {"output": None}, "results": 1},
    },
    # dynafold's declaration of concat_mla_kv_quant_fp8 (hooks/dormant_ops.py): every backend
    # (csrc/mla_kv_pack_fp8.cu, the Cake programs, the torch fallback) writes only `key` and
    # `value`, the caller's when given, else allocated (mla_kv_pack.py:657-:664).
    ("flashinfer.mla_kv_pack", "concat_mla_kv_quant_fp8"): {
        "fresh_only": {"when": {"key": None, "value": None}, "results": 2},
    },
    # dynafold's declaration of gdn_fused_decode_step (hooks/dormant_ops.py): besides the two
    # pools it declares mutable (and returns after its output), every path writes only `out`,
    # the caller's when given, else allocated (gdn_fused_decode.py:300-:304, the kernels'
    # `execute`).
    ("flashinfer.gdn_kernels.experimental.gdn_fused_decode", "gdn_fused_decode_step"): {
        "fresh_only": {"when": {"out": None}, "results": 1,
                       "then": ("conv_state", "ssm_state")},
    },
    # dynafold's declaration of cake_gated_delta_product_mtp (hooks/dormant_ops.py): besides
    # the pool it declares mutable (and returns after its output), the kernel writes only
    # `output`, the caller's when given, else allocated as zeros (cake_gdp_backend
    # __init__.py:391).
    ("flashinfer.cake_gdp", "cake_gated_delta_product_mtp"): {
        "fresh_only": {"when": {"output": None}, "results": 1, "then": ("initial_state",)},
    },
    # dynafold's declarations of the paged GDN functions (hooks/dormant_ops.py): besides the
    # pool they declare mutable, the kernels write only `output`, the caller's when given, else
    # allocated (gdn_prefill.py:1881, gdn_decode.py's pretranspose decode).
    **{("flashinfer.gdn_paged", name): {"fresh_only": {"when": {"output": None}, "results": 1}}
       for name in ("chunk_gated_delta_rule_paged", "gated_delta_rule_decode_paged")},
    # dynafold's declaration of the Cake top-k/top-p sampler (hooks/dormant_ops.py): the kernels
    # write `out`, `renorm_out` and the slab `workspace` when given (csrc/cake_sampling
    # RadixTopK / RadixTopKSample), else a fresh `out` and the sampler's own cached slab.
    ("flashinfer.cake_sampling", "top_k_top_p_sampling_from_probs"): {
        "fresh_only": {"when": {"out": None, "renorm_out": None, "workspace": None},
                       "results": 1},
    },
    # dynafold's declaration of chunk_gated_delta_rule (hooks/dormant_ops.py): besides the
    # states it declares mutable, the kernels write only `output`, the caller's when given,
    # else allocated; with `output_final_state` the result is `(output, output_state)`.
    ("flashinfer.gdn_prefill", "chunk_gated_delta_rule"): {
        "fresh_only": {"when": {"output": None, "output_final_state": True}, "results": 1,
                       "then": ("output_state",)},
    },
    # dynafold's declaration of the prepared contiguous grouped FP8 GEMM's launch
    # (hooks/dormant_ops.py, a wrapper method): with a, a_scale, m_indices and out all given
    # (none left to the ones bound at preparation), the program writes `out` only and launch
    # returns it (0.7.4 gemm/cake_grouped_fp8_gemm.py:1546-:1547, 0.7.2 :563-:564).
    ("flashinfer.gemm.cake_grouped_fp8_gemm",
     "PreparedGroupGemmFp8NtGroupwiseContiguous.launch"): {
        "result_is_given": {"argument": "out", "form": "itself",
                            "when": {"a": torch.Tensor, "a_scale": torch.Tensor,
                                     "m_indices": torch.Tensor}},
    },
    # dynafold's declaration of the prepared fused gate_up + SwiGLU + FP8-quant grouped GEMM's
    # launch (0.7.4; 0.7.2's takes no operands): with a, a_scale, m_indices, out_q and out_s
    # all given, the programs write `out_q` and `out_s` and launch returns the pair (0.7.4
    # gemm/cake_grouped_fp8_fused_silu_quant.py:993); the BF16 GEMM workspace of the GEMM +
    # activation routes and the padding scratch are the prepared object's own, written and
    # read within the call.
    ("flashinfer.gemm.cake_grouped_fp8_fused_silu_quant",
     "PreparedGroupGemmFp8NtGroupwiseContiguousSiluQuant.launch"): {
        "result_is_given": {"argument": "out_q", "form": "pair", "second": "out_s",
                            "when": {"a": torch.Tensor, "a_scale": torch.Tensor,
                                     "m_indices": torch.Tensor, "out_s": torch.Tensor}},
    },
    # dynafold's declaration of RecurrentKDAPrefillWrapper.run (hooks/dormant_ops.py, a wrapper
    # method): with `output` given, no final state asked for and no checkpoints, the CuTe DSL
    # prefill returns `(output, None)` (0.7.4 and 0.7.2 kda_prefill_cute.py:383, :585/:589).
    ("flashinfer.kda", "RecurrentKDAPrefillWrapper.run"): {
        "result_is_given": {"argument": "output", "form": "pair",
                            "when": {"output_final_state": False, "state_checkpoints": None,
                                     "checkpoint_cu_starts": None,
                                     "checkpoint_every_n_tokens": 0,
                                     "checkpoint_state_indices": None}},
    },
    # dynafold's declarations of 0.7.x's SM12x CuTe DSL MoE GEMMs (hooks/dormant_ops.py,
    # fused_moe/cute_dsl/blackwell_sm12x/moe_*_fc1_act_q1.py and moe_*_fc2_finalize.py): their
    # tensors and `tile` (None, or the (bm, bn, bk) a caller picks; FlashInfer takes
    # `tuple(tile)`) carry no annotation, the mxfp8 ones' `tune` neither (None or a bool,
    # tested `is not False`). FC1 writes only its `(q, sf)`, the caller's `out_q`/`out_sf` when
    # given, else the `torch.empty`/`torch.zeros` the body allocates: woken for the call that
    # gives neither. FC2 writes only `out` and returns it, the caller's when given, else the
    # `torch.zeros` the body allocates. `epi` (an EpiMethod, no schema type) is left at its
    # default (hooks/op_narrowing.py NARROWED).
    **{(f"flashinfer.fused_moe.cute_dsl.blackwell_sm12x.{module}", function): {
        "annotations": {**_SM12X_TENSORS, **extra},
        "fresh_only": {"when": {"out_q": None, "out_sf": None}, "results": 2,
                       "object_defaults": True}}
       for module, function, extra in (
           ("moe_fp8_fc1_act_q1", "cute_dsl_sm12x_fc1_act_q1_fp8", {}),
           ("moe_mxfp8_mxfp4_fc1_act_q1", "cute_dsl_sm12x_fc1_act_q1_mxfp8_mxfp4",
            {"tune": typing.Optional[bool]}))},
    **{(f"flashinfer.fused_moe.cute_dsl.blackwell_sm12x.{module}", function): {
        "annotations": {**_SM12X_TENSORS, "src_token": torch.Tensor,
                        "pair_scales": torch.Tensor, **extra},
        "result_is_given": {"argument": "out", "form": "itself", "fresh_otherwise": True}}
       for module, function, extra in (
           ("moe_fp8_fc2_finalize", "cute_dsl_sm12x_fc2_finalize_fp8", {}),
           ("moe_mxfp8_mxfp4_fc2_finalize", "cute_dsl_sm12x_fc2_finalize_mxfp8_mxfp4",
            {"tune": typing.Optional[bool]}))},
    # dynafold's declaration of grouped_gemm_nt_masked (hooks/dormant_ops.py): the
    # kernel writes `out` and returns it (gemm/kernels/grouped_gemm_masked_blackwell.py: the
    # compiled kernel's wrapper `return c_tensor_gpu`; grouped_gemm_masked_rubin.py the same).
    # Woken for the plain GEMM: no combine fusion, whose kernel stores through `out_ptrs`
    # (other ranks' buffers, raw addresses) and the barrier flags, and no `dst_signals` (which
    # the kernel writes); its `**kwargs` entries `alpha` and `alpha_dtype` (SGLang's CuTe DSL
    # MoE passes them) are parameters of the operator; a call passing `mma_tiler_mn` or
    # `cluster_shape_mn` is traced as shipped.
    # (0.6.16's is grouped_gemm_masked_blackwell's own, the same body.)
    **{(f"flashinfer.gemm.kernels.{module}", "grouped_gemm_nt_masked"): {
        "returns_argument": "out",
        "keywords": {"alpha": typing.Optional[torch.Tensor],
                     "alpha_dtype": typing.Optional[str]},
        "when": {"is_combine_fusion": False, "out_ptrs": None, "dst_signals": None,
                 "barrier_flag_local": None, "barrier_flag_multicast": None}}
       for module in ("grouped_gemm_masked_wrapper", "grouped_gemm_masked_blackwell")},
    # dynafold's declaration of 0.7.x's prims_ts_fp8_block_scale_routed_moe
    # (hooks/dormant_ops.py): finalized, its result is `output`, the caller's when given, else
    # alloc_trtllm_moe_output's (0.7.4 fp8_op.py:1289, returned at :1453; 0.7.2 :857, :975);
    # unfinalized a list, traced as shipped. It refuses a LoRA delta (NotImplementedError).
    ("flashinfer.fused_moe.backends.prims_ts.fp8_op", "prims_ts_fp8_block_scale_routed_moe"): {
        "result_is_given": {"argument": "output", "form": "itself", "fresh_otherwise": True,
                            "when": {"do_finalize": True, "gemm1_lora_delta": None}},
    },
    ("flashinfer.comm.quantized_allreduce", "quantized_all_reduce"): {
        "dormant": "result is the caller's output only when one is given",
    },
}

# Parameter names that mean the kernel draws from the random generator.
SEEDED_PARAMETERS = frozenset({"generator", "seed", "offset"})


def of(fn):
    """The correction for FlashInfer's declared function `fn` (empty when there is none)."""
    key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
    return CORRECTIONS.get(key, {})
