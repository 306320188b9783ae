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
    (r"unsupported operand type\(s\) for [%|&]: 'int' and 'int'|data_ptr",
     "checks a tensor's data_ptr() alignment on the traced path: Dynamo cannot read an "
     "address, a break on a GPU too"),
    # Before the general setattr rule: Python's functools.partialmethod.__get__ sets
    # `__self__` on the partial it makes, which is where Dynamo meets a partial's setattr.
    (r"setattr\(\) is not supported on type partial",
     "calls a functools.partialmethod (FlashInfer's `run_return_lse = partialmethod(run, "
     "return_lse=True)`): its __get__ sets `__self__` on the partial it makes, which Dynamo "
     "cannot (Dynamo's limit: any partialmethod called through an instance, without FlashInfer "
     "or dynafold), a break on a GPU too"),
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
    (r"Unexpected keyword arguments: \[([^\]]+)\]",
     "the called function takes no keyword argument(s) {0} (Dynamo's binding raises the "
     "TypeError eager Python raises too): the builder's call does not fit this release's "
     "signature, not traced here"),
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
    (r"_hashlib\.openssl_sha256",
     "builds its CuTe DSL kernel on the traced path (build_and_load_cute_dsl_kernel hashes "
     "the kernel's sources) and calls the compiled kernel outside any op declaration: no "
     "operator boundary, a break on a GPU too; needs a dynafold boundary"),
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
    for pattern, text in RULES:
        m = re.search(pattern, error or "")
        if m:
            return text.format(*m.groups()).replace(
                "function `a_function_of_it`", "function (which one: the eager run stops "
                "before it)")
    return None
