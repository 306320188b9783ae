"""Why an op fails to trace, named from its error: the first rule whose pattern the error
matches gives the reason. Each says whether the failure is one a GPU run has too (a Dynamo
break in FlashInfer's Python or a missing operator boundary) or a limit of this CPU machine
(a package or the driver it lacks)."""
import re
import sys

RULES = [
    (r"jit_module\.(\w+)",
     "reaches FlashInfer's JIT module function `{0}` directly, outside any op declaration "
     "(register_custom_op): no operator boundary, so Dynamo meets the opaque tvm_ffi call, a "
     "break on a GPU too; needs a dynafold boundary"),
    # The table's environment has cuDNN's Python frontend since 2026-12-02 (scripts/lib/env.sh
    # CUTLASS_EXTRAS: nvidia-cudnn-frontend --no-deps, over torch's own libcudnn), for the
    # fake check's eager run; the ops that reach it trace through their operators, so this
    # rule names only an environment without it. (Tried 2026-12-01, before those operators:
    # traces into the frontend stopped at its pybind graph objects, a break on a GPU too.)
    (r"cuDNN is not available",
     "needs cuDNN's Python frontend (nvidia-cudnn-frontend), not installed in this "
     "environment: not traced here"),
    (r"CuTe-DSL backend, which is not available|No module named 'cutlass'",
     "needs the CuTe DSL (nvidia-cutlass-dsl), not importable in this environment: not traced "
     "here"),
    (r"deprecated forward\(\) of an attention-sink wrapper passes no sink tensor",
     "FlashInfer's deprecated forward() has no place for the sink tensor and sm_scale its JIT "
     "variant reads; called as its signature allows, it crashes in paged_run on the H200 "
     "(segfault, docs/gpu-runs/gpu-run-2026-12-01-api-status-4): no valid call to trace"),
    # `int(t.data_ptr())` (0.7.4's Cake KDA/GDP alignment flags) fails as the int() call itself.
    (r"unsupported operand type\(s\) for ([%|&]|//): 'int' and 'int'|data_ptr|"
     r"The type int has an nb_int C slot",
     "checks a tensor's data_ptr() alignment on the traced path: Dynamo cannot read an "
     "address, a break on a GPU too"),
    # Before the general setattr rule: Python's functools.partialmethod.__get__ sets
    # `__self__` on the partial it makes, which is where Dynamo meets a partial's setattr.
    (r"setattr\(\) is not supported on type partial",
     "calls a functools.partialmethod outside the attention wrappers dynafold makes plain "
     "(hooks/ops/mechanisms/partial_methods.py): its __get__ sets `__self__` on the partial it makes, which "
     "Dynamo cannot (Dynamo's limit), a break on a GPU too"),
    (r"setattr\(\) is not supported on type (\w+)",
     "sets an attribute of a `{0}` on the traced path (Dynamo cannot), a break on a GPU too"),
    (r"Invalid call to __build_class__",
     "defines a class on the traced path (FlashInfer's autotuner runners, built per call), a "
     "break on a GPU too"),
    (r"importlib/resources",
     "reads package data (importlib.resources) on the traced path, in a functools.cache'd "
     "loader Dynamo traces into (0.7.4's concat_mla_kv_quant_fp8: mla_kv_pack._load_allowlist, "
     "the fused kernels' workload allowlist), a break on a GPU too"),
    (r"method `__new__` of class `type`",
     "calls `type.__new__` on the traced path (a class made with type(), or an instance of a C "
     "extension type such as cuda-python's driver structs built per call), a break on a GPU "
     "too"),
    (r"Failed to get checksums\.txt",
     "its JIT module needs FlashInfer's trtllm-gen cubins, downloaded when built (this "
     "machine has no network): not traced here"),
    (r"method `now` of class",
     "builds a JIT module on the traced path (a cached loader that is not a `get_*module*` "
     "one, which dynafold makes transparent: FlashInfer's JIT spec registry reads the clock, "
     "datetime.now), a break on a GPU too; needs a dynafold boundary"),
    (r"the function `(frozenset|set|list|dict|tuple)\[",
     "subscripts a builtin type (`{0}[...]`, a type annotation evaluated at call time) on the "
     "traced path, a break on a GPU too"),
    (r"got an unexpected keyword argument '(\w+)'|missing \d+ required \w+ argument|"
     r"Unsupported backend for",
     "this release's signature differs from the builder's call (written for 0.7.4): not "
     "traced here"),
    (r"trace the Python builtin `_warnings\.warn`",
     "warns (warnings.warn) on the traced path, a break on a GPU too"),
    (r"SourcelessBuilder\.create does not know how to wrap <class '[\w.]*_Built'>",
     "carries FlashInfer's JIT module object itself through the traced path (no operator "
     "boundary around its kernels), a break on a GPU too"),
    (r"Unexpected keyword arguments: \[([^\]]+)\]",
     "the called function takes no keyword argument(s) {0} (Dynamo's binding raises the "
     "TypeError eager Python raises too): the builder's call does not fit this release's "
     "signature, not traced here"),
    # Before the general context-manager rule: 0.7.4's KDA prefill wrapper runs under its
    # planner's threading.Lock (experimental/kda_prefill_wrapper `with self._lock`).
    (r"enter a `lock` context manager",
     "takes a threading lock (`with self._lock`) on the traced path, a break on a GPU too"),
    (r"Unsupported context manager",
     "enters a context manager Dynamo cannot trace (FlashInfer's autotuner or device scope) on "
     "the traced path, a break on a GPU too"),
    (r"sys\._getframe|inspect\.currentframe",
     "inspects the caller's frame (a deprecation warning) on the traced path, a break on a "
     "GPU too"),
    # Also an H200's reason for an op that traces on a later stand-in (its `sm90_reason`:
    # 0.7.2's mm_fp8, whose trtllm_low_latency backend runs on SM100 only).
    (r"does not support backend '(\w+)' with capability (\d+)",
     "FlashInfer's own backend check refuses backend {0} on sm{1}, a device it does not build "
     "that backend for: a refusal of the device, not a break"),
    # 0.6.x's deprecated MLA decode wrapper (decode.py BatchDecodeMlaWithPagedKVCacheWrapper.run:
    # `if device_arch != 80: raise GPUArchitectureError`).
    (r"Supported architecture: SM80",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100): its run() takes SM80 "
     "(A100) alone, a device this machine has no stand-in for: not traced here"),
    (r"requires SM(\d+)|requires a Blackwell GPU|requires SM100",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100)"),
    (r"Found no NVIDIA driver|CUDA driver version is insufficient|NVIDIA driver library",
     "asks the CUDA driver on its path (no driver on this machine): not traced here"),
    (r"does not support compute capability 100; supported compute capabilities: "
     r"\[(12\d(?:, 12\d)*)\]",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100): built for compute "
     "capabilities {0} only (GeForce Blackwell, DGX Spark)"),
    (r"posix\.lstat",
     "builds and loads its JIT module (source paths resolved on disk, os.lstat) on the traced "
     "path, outside any op declaration: a break on a GPU too; needs a dynafold boundary"),
    (r"_hashlib\.openssl_sha256",
     "hashes its CuTe DSL kernel's sources (hashlib) to find the compiled kernel on the traced "
     "path, outside any op declaration: a break on a GPU too; needs a dynafold boundary"),
    (r"method `format_map` of class `str`",
     "compiles its CuTe DSL kernel (cute.compile) on the traced path, outside any op "
     "declaration: a break on a GPU too; needs a dynafold boundary"),
    (r"DataDependentOutputException: aten\._local_scalar_dense",
     "reads a tensor's value back to the host (.item()) on the traced path: data dependent, "
     "a break on a GPU too"),
    (r"nb_int_impl not implemented",
     "converts a value Dynamo cannot read to int on the traced path (int(tensor.data_ptr()), an "
     "alignment check), a break on a GPU too"),
    (r"callable object with no traceable __call__",
     "calls an object Dynamo cannot trace (a CuTe DSL object: the device's HardwareInfo or a "
     "compiled kernel) on the traced path, outside any op declaration: a break on a GPU too; "
     "needs a dynafold boundary"),
    (r"No module named 'cuda\.tile'",
     "needs cuTile (cuda.tile, the cuda-tile package), not installed in this environment: not "
     "traced here"),
    # 0.6.16's mxfp8_grouped_quantize, with cuda-tile installed (scripts/lib/env.sh
    # ensure_cutile): FlashInfer's is_cuda_tile_available() is not cached, so every call asks
    # for the tileiras package, then runs `tileiras --help` (cutile/cutile_common.py).
    (r"No package metadata was found for nvidia-cuda-tileiras",
     "checks for cuTile's compiler in its public body before its declared op "
     "(is_cuda_tile_available: importlib.metadata, then a `tileiras --help` subprocess, on "
     "every call), outside any op declaration: a break on a GPU too; needs a dynafold "
     "boundary (0.7.x's, mxfp8_grouped_quantize_public, takes the `backend` this release "
     "lacks)"),
    # The stand-ins answer torch.cuda.is_available() for FlashInfer (standins.py, 9): past it,
    # the check refuses the sm100 stand-in only where the installed CuTe DSL cannot target it.
    (r"Config not supported by Prims-TS .*requires an SM100",
     "FlashInfer's Prims-TS support check refuses both stand-ins (sm90; sm100: the installed "
     "CuTe DSL cannot target it) on the traced path: not traced here"),
    (r"method `__new__` of class `PyCSimpleType`",
     "makes a ctypes value on the traced path (ctypes.c_float: FlashInfer checks that a Python "
     "float survives fp32 rounding), a break on a GPU too"),
    (r"b12x fused MoE requires CUDA (\d+)",
     "FlashInfer's b12x MoE asks for CUDA {0} (this machine's stand-in nvcc says 12.8) and "
     "builds for SM120/SM121 only, which neither stand-in is: not traced here"),
    # 0.7.4's GDN-2 and GDP prefill run cuDNN's fused engine only.
    (r"requires the cudnn Python frontend",
     "needs cuDNN's Python frontend (nvidia-cudnn-frontend), not installed in this "
     "environment: not traced here"),
    # 0.7.4's GDN prefill (CuTe DSL CP kernels: `torch.cuda.current_stream(device).cuda_stream`
    # for a cuda.bindings launch): Dynamo stops at the stream lookup; past it is the C launch.
    (r"bad device argument to torch\.accelerator\.current_stream",
     "launches its kernel from FlashInfer's Python on the traced path (the current CUDA "
     "stream's raw handle for a CuTe DSL or tvm_ffi launch), outside any op declaration: no "
     "operator boundary, a break on a GPU too"),
    # (0.7.4's sm110_gqa_decode, past the SM110 stand-in: its Cake manifest's read_text)
    (r"builtin `posix\.(stat|getcwd|listdir|open)|builtin operator `open`",
     "reads the file system on the traced path (a Cake kernel manifest or the CuTe DSL "
     "compile cache: the kernel's loader is outside any op declaration), a break on a GPU too"),
    # jit/cute_dsl_core.py build_and_load_cute_dsl_kernel hashes its kernel's source files
    # (0.7.2's KDA decode), a cached loader no op declaration holds.
    (r"builtin `_hashlib\.",
     "builds its CuTe DSL kernel on the traced path (hashes the kernel's sources for its "
     "cache key), outside any op declaration: no operator boundary, a break on a GPU too"),
    (r"only supported on (SM1\d\w*(?:/SM1\d+)?) GPUs",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100): built for {0} only, "
     "a device this machine has no stand-in for"),
    (r"requires compute capability (\d+)\.(\d+)",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100): built for sm{0}{1} "
     "only, a device this machine has no stand-in for"),
    (r"function `import_module`",
     "imports a package (importlib.import_module, cuDNN's frontend for QSA) on the traced "
     "path: Dynamo does not trace imports, a break on a GPU too"),
    (r"DataDependentOutputException|_local_scalar_dense",
     "reads a tensor's values on the host (a slice bound or .item()) on the traced path: data "
     "dependent, a break on a GPU too"),
]


GPU_BREAK = "a break on a GPU too"


def breaks_on_a_gpu(named):
    """Whether a named reason is a break a GPU run has too (not this machine's lack, not
    FlashInfer refusing the device)."""
    return bool(named) and GPU_BREAK in named


# Where FlashInfer's Python stopped (trace_all.frames: `file.py:function`, outermost first)
# names the cause better than a Dynamo break's first line; tried before RULES, for breaks only
# (an exception FlashInfer raised is its own reason).
FRAME_RULES = [
    (r"^moe_kernel_builder\.py:dsl_targets_sm12x$",
     "asks the CuTe DSL for its target arch (CuTeDSL._get_dsl(): its settings from the "
     "environment and os.getcwd) in the kernel choice made on every call (the op's "
     "can_implement, where a functools.lru_cache holds it Dynamo traces through the cache), a "
     "break on a GPU too; the kernels are built for SM120/SM121 "
     "only, which neither stand-in is"),
    (r"^bgmv_moe\.py:fill_w_ptr$",
     "builds the LoRA pointer table from the adapter weights' addresses on every call "
     "(fill_w_ptr: data_ptr()), a break on a GPU too"),
    (r"^autotuner\.py:",
     "runs FlashInfer's AutoTuner (a lock, the tactic choice) in `{fn}` itself, with no operator "
     "declaration around it and the kernels it picks: a break on a GPU too; needs a dynafold "
     "boundary (a declaration of `{fn}`)"),
]


def _dormant(frame_list):
    """(function, why) of the first traced frame that is a FlashInfer op declaration dynafold
    leaves dormant (its record's correction `dormant`, hooks/ops/registry/), or None."""
    corrections = getattr(sys.modules.get("_dynafold_ops.engine.corrections"), "CORRECTIONS", {})
    for frame in frame_list:
        file, _, fn = frame.partition(":")
        for (module, qualname), fields in corrections.items():
            if ("dormant" in fields and f"{module.rsplit('.', 1)[-1]}.py" == file
                    and qualname.rsplit(".", 1)[-1] == fn):
                return fn, fields["dormant"]
    return None


def _by_frames(error, frame_list):
    if not frame_list or "Observed exception" in (error or ""):
        return None
    dormant = _dormant(frame_list)
    if dormant:
        return (f"FlashInfer declares `{dormant[0]}` as an op, but dynafold leaves the "
                f"declaration dormant (its record's correction: {dormant[1]}), so Dynamo traces "
                f"its body and breaks there (at {frame_list[-1]}): a break on a GPU too; needs a "
                "dynafold boundary (a `result_is_given` correction, as "
                "trtllm_fp4_block_scale_moe_op has)")
    public = next((f.partition(":")[2] for f in frame_list[1:]
                   if not f.startswith(("api_logging.py", "utils.py"))), "the op")
    for pattern, text in FRAME_RULES:
        if any(re.search(pattern, f) for f in frame_list):
            return text.format(fn=public)
    return None


# Ops whose JIT module call dynafold holds by the module's key only where this torch lets
# `assume_constant_result` take the module object (2.14 on) and the release's body is the one
# hooks/ops/mechanisms/attention_plans.py copies; elsewhere the trace reaches the module's function.
CALLER_HELD_MODULES = {
    # decode.py / prefill.py: `jit_module.run(q, k, v, tmp, o, lse, ..., *args)` on the module
    # object the caller built and passes in (`jit_module: Any`).
    name: "calls `run` of the JIT module object the caller passes in (`jit_module: Any`, "
          "built by the caller from a gen_*_module factory): dynafold holds it by key "
          "(hooks/ops/mechanisms/attention_plans.py `_hold`) only on torch 2.14 on, whose "
          "assume_constant_result takes a Python object, and for the body it copies; a break "
          "on a GPU too"
    for name in ("single_decode_with_kv_cache_with_jit_module",
                 "single_prefill_with_kv_cache_with_jit_module")
}


# Ops whose break (a GPU has it too) needs an operator boundary that no operator schema can
# say, by op name: where the named reason would ask for a dynafold boundary, this says why
# there is none.
NO_SCHEMA = {
    # 0.7.x gemm/kimi_k3_fp8_projection.py -> experimental/kimi_k3_fp8_projection/
    # cake_backend.py kimi_k3_fp8_projection.
    "gemm.kimi_k3_fp8_projection":
        "checks data_ptr() alignment (the activations' `% 16`, 0.7.4; the workspace scale "
        "buffer's `% 256`) and picks its store route from `out`'s address on the traced "
        "path, a break on a GPU too; dynafold's boundary holds its `prepared` weight and "
        "`workspace` (Python objects) by key (hooks/ops/mechanisms/attention_plans.py `_hold`) only on torch "
        "2.14 on, whose assume_constant_result takes a Python object",
    # 0.7.x kda.py recurrent_kda, SGLang 0.5.23's Kimi-Linear extend call (backend="cute-dsl").
    "recurrent_kda":
        "checks data_ptr() alignment in its backend choice on the traced path "
        "(kda_prefill_cute.py _is_cute_dsl_kda_prefill_eligible: `beta.data_ptr() % 16`, "
        "`initial_state.data_ptr() % 16`), a break on a GPU too; no dynafold boundary: the "
        "public function dispatches over eight backends whose writes differ per backend and "
        "call form (the state pool in place at ssm_state_indices, state_checkpoints, "
        "correction_cache and kg_cache, output), takes a RecurrentKDAPrefillWorkspace object, "
        "and returns (output, None), (output, final_state) or a triple by its arguments (a "
        "Union of tuples, one holding None): no operator schema returns None in a tuple, and "
        "no dynafold narrowing gives such a result back",
}


# Wrapper methods whose state no dynafold boundary can hold, by op name, for the error their
# construction stops at here.
WRAPPER_HELD_STATE = {
    # attn_scores/mqa_topk.py FP8MQATopKWrapper (0.7.4) -> experimental/attn_scores/
    # selective_prefill.py _CapacitySelectiveTopKPlan: plan() needs the driver here. run()
    # copies q and weights into the plan's own buffers (_payload_copies), picks and keeps the
    # engine bound to K's storage (`self._engine = self._engines[key]`), reads those buffers
    # and returns the plan's shared output storage unless `out` is given (its docstring:
    # "Storage is shared across calls unless out is supplied").
    "FP8MQATopKWrapper.run": (
        r"CUDA driver version is insufficient|TopK requires SM100",
        "asks the CUDA driver (none on this machine): not traced here; no dynafold boundary "
        "either: run() without `out` returns the plan's own output storage, shared across "
        "calls (no operator can return that alias of wrapper state), and with `out` it copies "
        "q and weights into the plan's buffers and switches the plan's engine by K's storage, "
        "state a boundary could hold only once checked on a GPU"),
    # 0.7.4's Prims-TS two-partition MoE (fused_moe/backends/prims_ts/*_op.py
    # prims_ts_*_moe_partitioned, SM107 only): the caller's MoePartitionResources
    # (prims_ts/moe/partition.py) holds two green-context CUDA streams, checked at
    # construction with cuStreamGetGreenCtx (the driver), their reusable fork/join events and
    # a host lock; each launch forks onto those streams and joins back.
    **{op: (r"CUDA driver version is insufficient|Found no NVIDIA driver",
            "MoePartitionResources(streams=...) needs two green-context CUDA streams (checked "
            "with the driver's cuStreamGetGreenCtx; the form runs on SM107 only, "
            "partition.py validate_partition_arch), none on this machine; past it no operator "
            "can hold the call: its resources (the caller's streams, reusable fork/join events, "
            "a host lock) are a Python object no operator schema can take, and FlashInfer's "
            "own Prims-TS declarations are woken for the unpartitioned call only "
            "(partition_resources None, hooks/ops/engine/narrowing.py), so the partitioned call is "
            "traced as shipped into its per-partition stream launches, a break on a GPU too")
       for op in ("prims_ts_bf16_moe_partitioned", "prims_ts_fp4_block_scale_moe_partitioned",
                  "prims_ts_fp8_block_scale_moe_partitioned",
                  "prims_ts_fp8_per_tensor_scale_moe_partitioned")},
}


def reason(error, eager=(), frames=(), op=None):
    """The named reason for `error` (a string), or None. `eager`: where FlashInfer's Python,
    run eagerly, stopped (trace_all.eager_error): where the trace died inside dynafold's
    kernel stand-in without its name, the kernel the eager run reached names it. `frames`:
    the traced frames the error names (trace_all.frames). `op`: the op's public name."""
    named = _reason(error, eager, frames, op)
    if op in NO_SCHEMA and named and "a break on a GPU too" in named:
        return NO_SCHEMA[op]
    return named


def _reason(error, eager, frames, op):
    named = _by_frames(error, list(frames))
    if named:
        return named
    if "was called inside a compiled region" in (error or ""):
        # Only the stand-in kernels are disabled functions, made when a JIT module's attribute
        # is read: the trace reached one outside any declared op, named or not.
        error = "jit_module.a_function_of_it"
        for line in eager:
            m = re.match(r"NotImplementedError: (\w+): a JIT kernel", line or "")
            if m:
                error = f"jit_module.{m.group(1)}"
    if "Import failure" in (error or ""):
        # Dynamo says only that an import failed; the eager run names the module (0.7.2's
        # per_token_group_quant_8bit, whose one backend imports cuda.tile).
        error = next((line for line in eager if "No module named" in (line or "")), error)
    if re.search(r"Unexpected keyword arguments", error or "") and any(
            re.search(r"got an unexpected keyword argument", line or "") for line in eager):
        # Dynamo's binding error, but eager Python refuses the call too: the release's
        # signature lacks the argument (0.6.16's recurrent_kda has no `backend`).
        error = next(line for line in eager if "got an unexpected keyword argument" in line)
    if (op or "").rsplit(".", 1)[-1] in CALLER_HELD_MODULES and re.search(
            r"jit_module\.", error or ""):
        return CALLER_HELD_MODULES[op.rsplit(".", 1)[-1]]
    held = WRAPPER_HELD_STATE.get(op or "")
    if held:
        found = re.search(held[0], error or "")
        if found:
            return held[1].format(*found.groups())
    for pattern, text in RULES:
        m = re.search(pattern, error or "")
        if m:
            return text.format(*m.groups()).replace(
                "function `a_function_of_it`", "function (which one: the eager run stops "
                "before it)")
    return None
