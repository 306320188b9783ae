"""Why an op fails to trace, named from its error: the first rule whose pattern the error
matches gives the reason. Each says whether the failure is one a GPU run has too (a Dynamo
break in FlashInfer's Python or a missing operator boundary) or a limit of this CPU machine
(a package or the driver it lacks)."""
import re

RULES = [
    (r"jit_module\.(\w+)",
     "reaches FlashInfer's JIT module function `{0}` directly, outside any op declaration "
     "(register_custom_op): no operator boundary, so Dynamo meets the opaque tvm_ffi call, a "
     "break on a GPU too; needs a dynafold boundary"),
    (r"cuDNN is not available",
     "needs cuDNN's Python frontend (nvidia-cudnn-frontend), not installed in this "
     "environment: not traced here"),
    (r"CuTe-DSL backend, which is not available|No module named 'cutlass'",
     "needs the CuTe DSL (nvidia-cutlass-dsl), not importable in this environment: not traced "
     "here"),
    # `int(t.data_ptr())` (0.7.4's Cake KDA/GDP alignment flags) fails as the int() call itself.
    (r"unsupported operand type\(s\) for ([%|&]|//): 'int' and 'int'|data_ptr|"
     r"The type int has an nb_int C slot",
     "checks a tensor's data_ptr() alignment on the traced path: Dynamo cannot read an "
     "address, a break on a GPU too"),
    (r"setattr\(\) is not supported on type (\w+)",
     "sets an attribute of a `{0}` on the traced path (Dynamo cannot), a break on a GPU too"),
    (r"Invalid call to __build_class__",
     "defines a class on the traced path (FlashInfer's autotuner runners, built per call), a "
     "break on a GPU too"),
    (r"importlib/resources",
     "reads package resources (importlib.resources) on the traced path: a kernel loaded "
     "outside any transparent loader, a break on a GPU too"),
    (r"method `__new__` of class `type`",
     "creates a class with type() on the traced path, a break on a GPU too"),
    (r"Failed to get checksums\.txt",
     "its JIT module needs FlashInfer's trtllm-gen cubins, downloaded when built (this "
     "machine has no network): not traced here"),
    (r"method `now` of class",
     "reads the clock (datetime.now, a timing log) on the traced path, a break on a GPU too"),
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
    (r"Unexpected keyword arguments: \['(\w+)'\]",
     "under Dynamo, binding the keyword argument `{0}` raises TypeError where eager Python "
     "does not (FlashInfer's backend_requirement wrapper passes it on): a break on a GPU too; "
     "the cause, Dynamo's or dynafold's, not yet found"),
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
    (r"does not support backend '(\w+)' with capability (\d+)",
     "FlashInfer refuses backend {0} on sm{1} and on the sm100 stand-in: the call's arguments "
     "fit no device here"),
    (r"requires SM(\d+)|requires a Blackwell GPU|requires SM100",
     "FlashInfer's own device check refuses both stand-ins (sm90, sm100)"),
    (r"Found no NVIDIA driver|CUDA driver version is insufficient|NVIDIA driver library",
     "asks the CUDA driver on its path (no driver on this machine): not traced here"),
    # 0.7.4's GDN prefill (CuTe DSL CP kernels: `torch.cuda.current_stream(device).cuda_stream`
    # for a cuda.bindings launch) and MiniMax-H3's prepared programs (`tvm_ffi.
    # use_torch_stream()`): Dynamo stops at the stream lookup; past it is the C launch.
    # 0.7.4's GDN-2 and GDP prefill run cuDNN's fused engine only.
    (r"requires the cudnn Python frontend",
     "needs cuDNN's Python frontend (nvidia-cudnn-frontend), not installed in this "
     "environment: not traced here"),
    (r"bad device argument to torch\.accelerator\.current_stream",
     "launches its kernel from FlashInfer's Python on the traced path (the current CUDA "
     "stream's raw handle for a CuTe DSL or tvm_ffi launch), outside any op declaration: no "
     "operator boundary, a break on a GPU too"),
    (r"builtin `posix\.(stat|getcwd|listdir|open)",
     "reads the file system on the traced path (a Cake kernel manifest or the CuTe DSL "
     "compile cache: the kernel's loader is outside any op declaration), a break on a GPU too"),
    # 0.7.2's MiniMax-H3 MXFP8 pre-attention ships programs per token count (0.7.4: any).
    (r"no exact MiniMax-H3 \w+ route for M=(\d+)",
     "this release's programs cover fixed token counts only, none the builder's M={0} (its "
     "arguments are 0.7.4's, which takes any): not traced here"),
    # jit/cute_dsl_core.py build_and_load_cute_dsl_kernel hashes its kernel's source files
    # (0.7.2's KDA decode), a cached loader no op declaration holds.
    (r"builtin `_hashlib\.",
     "builds its CuTe DSL kernel on the traced path (hashes the kernel's sources for its "
     "cache key), outside any op declaration: no operator boundary, a break on a GPU too"),
    # cute.compile's diagnostics (cutlass base_dsl/diagnostics.py) format their messages.
    (r"method `format_map` of class `str`",
     "compiles its CuTe DSL kernel (cute.compile) on the traced path, outside any op "
     "declaration: no operator boundary, a break on a GPU too"),
]


def reason(error, eager=()):
    """The named reason for `error` (a string), or None. `eager`: where FlashInfer's Python,
    run eagerly, stopped (trace_all.eager_error): where the trace died inside dynafold's
    kernel stand-in without its name, the kernel the eager run reached names it."""
    if "was called inside a compiled region" in (error or ""):
        # Only the stand-in kernels are disabled functions, made when a JIT module's attribute
        # is read: the trace reached one outside any declared op, named or not.
        error = "jit_module.a_function_of_it"
        for line in eager:
            m = re.match(r"NotImplementedError: (\w+): a JIT kernel", line or "")
            if m:
                error = f"jit_module.{m.group(1)}"
    if re.search(r"Unexpected keyword arguments", error or "") and any(
            re.search(r"got an unexpected keyword argument", line or "") for line in eager):
        # Dynamo's binding error, but eager Python refuses the call too: the release's
        # signature lacks the argument (0.6.16's recurrent_kda has no `backend`).
        error = next(line for line in eager if "got an unexpected keyword argument" in line)
    for pattern, text in RULES:
        m = re.search(pattern, error or "")
        if m:
            return text.format(*m.groups()).replace(
                "function `a_function_of_it`", "function (which one: the eager run stops "
                "before it)")
    return None
