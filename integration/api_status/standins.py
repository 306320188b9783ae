"""What this CPU-only machine answers in place of a GPU, each named, for tracing FlashInfer's
public ops on fake CUDA tensors. Nothing here stands in for FlashInfer's Python, torch or
Dynamo; the kernels are never run (under FakeTensorMode the operators' fakes answer).

1. The device: `torch.cuda.get_device_properties` / `get_device_capability` answer an H200
   (sm90, 132 SMs) or, for ops FlashInfer builds for SM100 and newer only, a B200 (sm100, 148
   SMs); for the few ops whose own device check names only SM120/SM121 or SM110 (and refuses
   both of those), an RTX PRO 6000 Blackwell (sm120, 188 SMs, 99 KiB shared memory per block)
   or a Jetson Thor (sm110, 20 SMs). FlashInfer's cached device queries are cleared when the
   answer changes.
2. The JIT build: every `JitSpec.build_and_load()` returns a module whose functions (and the
   module itself, called as a CuTe DSL kernel) are opaque to Dynamo (as a built module's
   tvm_ffi functions are) and raise if called, so a traced
   call that reaches one is a graph break exactly where the real kernel's would be, and the
   declarations FlashInfer makes inside its loaders (after the build) are made.
3. A JIT module's `plan` (the attention schedulers, which run on the host) returns a plan of
   ints, as FlashInfer's scheduler does (its values only reach kernels that never run here).
4. No CUDA graph is being captured (`torch.cuda.is_current_stream_capturing()` is False: it
   asks the driver, which this machine lacks). The answer is given underneath, by the C
   binding the function calls, so that Dynamo still meets PyTorch's function, an in-graph
   torch.cuda function whose bool result is a break under fullgraph=True, as on a GPU (the
   H200 found 0.7.4's top-k row-state lookup asking it, 2026-12-02, where a Python stand-in
   had let the trace through).
5. Triton finds a GPU (`torch.utils._triton.has_triton()` is True, as on the H200): Dynamo
   recognises a Triton kernel launch (FlashInfer's Triton kernels: page indices, segment
   GEMM) and puts it in the graph as its kernel wrapper only where it does; without a GPU it
   traces into Triton's launcher instead (environment reads, a break no GPU run has).
6. The trtllm-gen modules' builds (`gen_*fused_moe*_module`, `gen_trtllm_gen_*_module`: cubins
   FlashInfer downloads before it builds, and this machine has no network) give a spec whose
   `build_and_load` is (2)'s and no cubin library paths; `setup_cubin_loader` does nothing.
   FlashInfer's loaders around them run as shipped and declare their ops (as the fp4-layer
   branch's tests/python/helpers/blackwell_standins.py does for the fused MoE). So do 0.7.x's
   CuTe DSL MoE routing-sort build (`gen_moe_utils_module`, which downloads the same
   trtllm-gen headers) and 0.7.4's
   SM120 fmha_v2 build (`gen_trtllm_fmha_v2_sm120_module`), whose spec generates its kernel
   sources by compiling and running a traits printer with nvcc, which this machine lacks.
7. The device switch Dynamo makes at trace time for `with torch.cuda.device(...)` (a driver
   call) answers device 0, the only one.
8. No network: FlashInfer's cubin download (`download_file`) fails at once, where it would
   retry with backoff for minutes; what needs the cubins then fails as it would offline.
9. A CUDA device is there (`torch.cuda.is_available()` is True) in the code Dynamo traces: the
   device of (1), which FlashInfer asks about before its arch (0.7.x's Prims-TS MoE support
   check, prims_ts/moe/support.py `_device_supports_prims_ts`; the runtime's False made it
   refuse the SM100 stand-in as no device). Code run eagerly gets the runtime's answer:
   Dynamo's own frame set-up (it saves the CUDA RNG state when a device is there, which asks
   the driver) and the eager shape run (where FlashInfer, told of a device, goes on to ask the
   driver: mxfp4_dequantize, the NVFP4 slot-mapping KV append).
10. A wrapper FlashInfer makes only with a newer toolkit than the stand-in nvcc's 12.8 (the
   b12x MoE's B12xMoEWrapper: `get_cuda_version().major < 13` raises, and its kernels are
   built for SM120/SM121 alone) is made by its builder as on that device with that toolkit
   (`made_as`: the device answered as it and jit/cpp_ext.py's get_cuda_version answering that
   version while the constructor runs); the call is then traced as the other stand-ins answer.
"""
import collections
import contextlib
import functools
import re
import sys
import types

import torch

DEVICES = {
    90: dict(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132,
             total_memory=150_000_000_000, shared_memory_per_block_optin=232448,
             shared_memory_per_multiprocessor=233472,
             L2_cache_size=52428800, max_threads_per_multi_processor=2048,
             regs_per_multiprocessor=65536, warp_size=32, uuid="standin-h200",
             is_integrated=False, gcnArchName="", multi_processor_count_per_gpc=0),
    100: dict(name="NVIDIA B200", major=10, minor=0, multi_processor_count=148,
              total_memory=190_000_000_000, shared_memory_per_block_optin=232448,
              shared_memory_per_multiprocessor=233472,
              L2_cache_size=132120576, max_threads_per_multi_processor=2048,
              regs_per_multiprocessor=65536, warp_size=32, uuid="standin-b200",
              is_integrated=False, gcnArchName="", multi_processor_count_per_gpc=0),
    # Tried only after sm90 and sm100 both fail with a device check naming it (trace_all.py
    # EXTRA_DEVICES): the ops FlashInfer builds for these archs alone.
    110: dict(name="NVIDIA Thor", major=11, minor=0, multi_processor_count=20,
              total_memory=128_000_000_000, shared_memory_per_block_optin=232448,
              shared_memory_per_multiprocessor=233472,
              L2_cache_size=33554432, max_threads_per_multi_processor=1536,
              regs_per_multiprocessor=65536, warp_size=32, uuid="standin-thor",
              is_integrated=True, gcnArchName="", multi_processor_count_per_gpc=0),
    120: dict(name="NVIDIA RTX PRO 6000 Blackwell Server Edition", major=12, minor=0,
              multi_processor_count=188, total_memory=100_000_000_000,
              shared_memory_per_block_optin=101376, shared_memory_per_multiprocessor=102400,
              L2_cache_size=134217728, max_threads_per_multi_processor=1536,
              regs_per_multiprocessor=65536, warp_size=32, uuid="standin-rtx-pro-6000",
              is_integrated=False, gcnArchName="", multi_processor_count_per_gpc=0),
}
current = [90]


# A namedtuple: Dynamo wraps one of constants without a source (it constant-folds the
# device query and wraps its result; a plain object it cannot). Its fields are DEVICES' keys,
# which the type checker cannot read.
Properties = collections.namedtuple("Properties", sorted(DEVICES[90]))  # type: ignore[misc]
PROPERTIES = {sm: Properties(**d) for sm, d in DEVICES.items()}


def _properties(device=None):
    return PROPERTIES[current[0]]


def _capability(device=None):
    d = DEVICES[current[0]]
    return d["major"], d["minor"]


def answer_as(sm):
    """Makes the stand-in device an sm`sm`; clears FlashInfer's cached device answers."""
    if current[0] == sm:
        return
    current[0] = sm
    _clear_device_caches()
    _dsl_arch(sm)


# The public modules of 0.7.x's SM12x CuTe DSL MoE GEMMs (their eager shape run, below).
SM12X_GEMMS = "flashinfer.fused_moe.cute_dsl.blackwell_sm12x.moe_"
# The CuTe DSL's own target arch before the SM120 stand-in changed it (None: unchanged).
_dsl_arch_before = [None]


def _dsl_arch(sm):
    """As the SM120 stand-in, the CuTe DSL targets what it detects on that device, sm_120a
    (cutlass base_dsl env_manager.py detect_gpu_arch: `sm_{major}{minor}a`); with no device it
    says its default, sm_100a. 0.7.x's SM12x MoE GEMMs ask it (moe_kernel_builder.py
    dsl_targets_sm12x). Other stand-ins keep the DSL's own answer."""
    dsl_module = sys.modules.get("cutlass.cutlass_dsl")
    if dsl_module is None:
        return
    envar = dsl_module.CuTeDSL._get_dsl().envar
    if sm == 120:
        if _dsl_arch_before[0] is None:
            _dsl_arch_before[0] = envar.arch
        envar.arch = "sm_120a"
    elif _dsl_arch_before[0] is not None:
        envar.arch, _dsl_arch_before[0] = _dsl_arch_before[0], None


@contextlib.contextmanager
def made_as(sm, cuda):
    """The device answered as an sm`sm` and FlashInfer's get_cuda_version (jit/cpp_ext.py,
    which its constructors import when called) as CUDA `cuda` ("13.0"), inside; both restored
    after (10. above)."""
    from packaging.version import Version
    cpp_ext = sys.modules["flashinfer.jit.cpp_ext"]
    before_sm, before_version = current[0], vars(cpp_ext)["get_cuda_version"]
    answer_as(sm)
    cpp_ext.get_cuda_version = lambda: Version(cuda)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        cpp_ext.get_cuda_version = before_version  # type: ignore[attr-defined]
        answer_as(before_sm)


def _clear_device_caches():
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for value in list(vars(module).values()):
            if callable(value) and hasattr(value, "cache_clear") and getattr(
                    value, "__module__", "").startswith("flashinfer"):
                try:
                    value.cache_clear()
                except Exception:
                    pass


class _Built(types.SimpleNamespace):
    # FlashInfer caches per module object (a dict key); SimpleNamespace is unhashable.
    __hash__ = object.__hash__  # type: ignore[assignment]
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _kernel(name)

    def __getitem__(self, name):  # a tvm_ffi module's function by name (0.7.x's moe_sort)
        return _kernel(name)

    def __call__(self, *args, **kwargs):
        # A CuTe DSL kernel built by FlashInfer's JIT (0.7.4's `build_and_load_cute_dsl_kernel`:
        # the fused gated norms) is the loaded module called itself.
        return _kernel("__call__")(*args, **kwargs)


def _plan(*args, **kwargs):
    plan = [2, 8, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    try:
        import tvm_ffi
        return tvm_ffi.convert(plan)
    except ImportError:
        return plan


# While True, a kernel returns None instead of raising: FlashInfer's Python then runs to its end
# on fake tensors and returns the results it allocated itself (its own shape arithmetic), which
# trace_all.py compares with what the traced operators' fakes gave.
eager_shapes = [False]
_runtime_is_available = torch.cuda.is_available


def _is_available():
    # Dynamo folds `is_dynamo_compiling()` to True in the code it traces (FlashInfer's); what
    # runs eagerly (Dynamo's frame set-up, the eager shape run) gets the runtime's answer (9).
    return torch.compiler.is_dynamo_compiling() or _runtime_is_available()


# FlashInfer's getters of a CuTe DSL kernel compiled for the device: `_get_compiled_kernel*`
# (the quantizers'), `_get_compiled_<op>_kernel*` (0.6/0.7.2's CuTe DSL norms: rmsnorm,
# fused_add_rmsnorm, layernorm and their quant forms; the TGV GEMM's `cute_ext` kernel), the
# BF16 x FP4 GEMM's (0.7.4 `_get_sm100_bf16_fp4_kernel`, 0.6.16 `_get_cute_dsl_bf16_fp4_gemm`),
# `(get_)cached_compile` (0.7.x's GDN prefill: kernels compiled through a cache of its own).
# Not 0.7.4's GDN decode `_get_compiled_decode_kernel`: it returns a per-shape dict that its
# caller compiles into.
COMPILED_KERNEL_GETTER = re.compile(
    r"(?!_get_compiled_decode_kernel$)_get_compiled_(\w+_)?kernel(_\w+)?$|"
    r"_get_sm100_bf16_fp4_kernel$|_get_cute_dsl_bf16_fp4_gemm$|(get_)?cached_compile$")


@contextlib.contextmanager
def eager_shape_run(kernels_return=True):
    """FlashInfer's Python run eagerly to its end on fake tensors: kernels return nothing, a
    Triton or cuTile launch does nothing, and what asks the driver answers without it: the per-stream
    scratch lookup (the stream) gives a fresh buffer of the size asked, the sampling seed and
    offset (the CUDA generator) are 0, a device switch (torch.cuda.device) switches nothing, a
    CuTe DSL kernel compiled for the device (COMPILED_KERNEL_GETTER) launches nothing, the
    current stream's raw handle is 0, streams and events (made or used) order nothing, and
    cuDNN's graphs skip the steps that ask the device. With kernels_return False the kernels
    still raise, naming themselves: the run stops at the first one, past the driver
    questions."""
    def scratch(name, num_bytes, device, zero_init=False):
        return torch.empty(num_bytes, dtype=torch.uint8, device=device)

    # The Kimi-K3 fused router's check that no two of its tensors overlap, from their
    # addresses (cake_backend.py `_require_nonoverlapping`): fake tensors have no storage,
    # every one at address 0, so the check cannot say; nothing it allocates depends on it.
    answers = {"_get_stream_cache_buf": scratch,
               "get_seed_and_offset": lambda increment, generator=None, device=None: (0, 0),
               "_require_nonoverlapping": lambda tensors: None}
    patched = []

    def replace(owner, attr, answer):
        patched.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, answer)

    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("flashinfer"):
            continue
        for attr, answer in answers.items():
            if hasattr(module, attr):
                replace(module, attr, answer)
        for attr in [a for a in vars(module) if COMPILED_KERNEL_GETTER.match(a)]:
            # A CuTe DSL kernel compiled for the device (cute.compile needs its driver)
            replace(module, attr, _compiled_cute_dsl_kernel)
        if module.__name__ == "flashinfer.deep_gemm":
            # DeepGEMM's TMA descriptors (encoded by the driver) and its kernel runtime (a
            # downloaded cubin, loaded by the driver): a runtime that launches nothing.
            replace(module, "make_tma_xd_desc", lambda *args, **kwargs: None)
            replace(module, "load", lambda name, code: lambda **kwargs: None)
        if callable(vars(module).get("get_cute_dsl_compiled_masked_gemm_kernel")):
            # 0.7.x's masked grouped GEMM (Blackwell, Rubin): the kernel compiled for the
            # device, whose wrapper returns the output it wrote, `c_tensor_gpu`
            replace(module, "get_cute_dsl_compiled_masked_gemm_kernel", _masked_gemm_kernel)
        if module.__name__.startswith(SM12X_GEMMS) and callable(
                vars(module).get("compiled_kernel")) and callable(vars(module).get("make_args")):
            # 0.7.x's SM12x MoE GEMMs: their launch arguments (from_dlpack views) and the
            # kernel compiled for them, after the body has allocated its results
            replace(module, "make_args", lambda *args, **kwargs: ())
            replace(module, "compiled_kernel", _compiled_cute_dsl_kernel)
        if "_cuda_graph_resources" in vars(module):
            # The streams and events FlashInfer keeps per process (0.7.x's CuTe DSL MoE), made
            # before or left half made by a run that met the driver (a dict holding the events
            # and no stream: KeyError 'aux_stream'): made again from the stand-ins below.
            made = module._cuda_graph_resources
            replace(module, "_cuda_graph_resources", {} if isinstance(made, dict) else None)
    # `with torch.cuda.device(...)` switches the driver's current device
    for attr in ("_exchange_device", "_maybe_exchange_device"):
        replace(torch.cuda, attr, lambda device: 0)
    # the raw stream handle a Cake or CuTe DSL launch passes (0.7.x's packed KDA decode):
    # the null stream's, 0; streams and events FlashInfer makes to overlap work (0.7.x's CuTe
    # DSL fused MoE zeroes its output on an aux stream) order nothing with no kernel running
    replace(torch.cuda, "current_stream", lambda device=None: _Stream())
    replace(torch.cuda, "Stream", _Stream)
    replace(torch.cuda, "Event", _Event)
    replace(torch.cuda, "stream", lambda stream=None: contextlib.nullcontext())
    replace(torch.Tensor, "record_stream", lambda self, stream: None)
    # the cuBLAS handle 0.6.16's FP8 GEMM runner passes its kernel (raw, like the stream's)
    replace(torch.cuda, "current_blas_handle", lambda: 0)
    _cudnn_without_device(replace)
    dsl = sys.modules.get("cutlass.cute")
    if dsl is not None and hasattr(dsl, "compile"):
        # a CuTe DSL kernel compiled inline (`cute.compile(...)`, `cute.compile[opts](...)`,
        # 0.7.4's contiguous grouped FP8 GEMM) launches nothing, as the getters' do
        replace(dsl, "compile", _Compile())
    dsl_utils = sys.modules.get("cutlass.utils")
    if dsl_utils is not None and hasattr(dsl_utils, "HardwareInfo"):
        # the CuTe DSL's occupancy queries (the driver's), answered for the stand-in device
        replace(dsl_utils, "HardwareInfo", _HardwareInfo)
    jit = sys.modules.get("triton.runtime.jit")
    if jit is not None:
        replace(jit.JITFunction, "run", lambda self, *args, **kwargs: None)
    tile = sys.modules.get("cuda.tile")
    if tile is not None and kernels_return:
        # a cuTile kernel launch (`ct.launch(stream, grid, kernel, args)`: 0.7.x's per-token
        # group quantizer) compiles for the device and launches: here, nothing, as a Triton one
        replace(tile, "launch", lambda *args, **kwargs: None)
    eager_shapes[0] = kernels_return
    try:
        yield
    finally:
        eager_shapes[0] = False
        for owner, attr, value in reversed(patched):
            setattr(owner, attr, value)


# The steps of a cuDNN graph that ask the device (the frontend's validate/heuristics/plan
# build, its execution) and what each answers without one: the graph's own construction
# (tensors, matmul, block-scale dequantize) runs for real in the installed frontend.
CUDNN_DEVICE_STEPS = {
    "validate": None, "build_operation_graph": None, "create_execution_plans": None,
    "check_support": None, "build_plans": None, "build_plan_at_index": None, "build": None,
    "execute": None, "execute_plan_at_index": None,
    "get_workspace_size": 1 << 20, "get_workspace_size_plan_at_index": 1 << 20,
    "get_execution_plan_count": 1,
}


def _cudnn_without_device(replace):
    """cuDNN's Python frontend (nvidia-cudnn-frontend, over the libcudnn torch ships) as
    FlashInfer's cuDNN backends use it, on this machine: a handle needs a device (the
    stand-in handle is None, which the frontend's graph takes), and so do the steps above.
    `replace(owner, attr, answer)`: eager_shape_run's, which puts each back."""
    cudnn = sys.modules.get("cudnn")
    if cudnn is None or not hasattr(cudnn, "pygraph"):
        return
    replace(cudnn, "create_handle", lambda *args, **kwargs: None)
    replace(cudnn, "set_stream", lambda *args, **kwargs: None)
    for step, answer in CUDNN_DEVICE_STEPS.items():
        if hasattr(cudnn.pygraph, step):
            replace(cudnn.pygraph, step, lambda self, *args, _answer=answer, **kwargs: _answer)


class _Compile:
    def __getitem__(self, options):
        return self

    def __call__(self, *args, **kwargs):
        return _compiled_cute_dsl_kernel()


class _HardwareInfo:
    """cutlass.utils.HardwareInfo for the stand-in device: one cluster per `cluster_size` SMs
    active at once, its SM count, its L2 size."""

    def __init__(self, device_id=0):
        pass

    def get_max_active_clusters(self, cluster_size, stream=None):
        return DEVICES[current[0]]["multi_processor_count"] // cluster_size

    def get_device_multiprocessor_count(self):
        return DEVICES[current[0]]["multi_processor_count"]

    def get_l2_cache_size_in_bytes(self):
        return DEVICES[current[0]]["L2_cache_size"]


class _Stream:
    """A stream as eager FlashInfer code uses one: a raw handle, a device, ordering calls."""
    cuda_stream = 0
    device_index = 0
    device_type = 1
    device = torch.device("cuda", 0)

    def __init__(self, *args, **kwargs):
        pass

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        return event or _Event()

    def synchronize(self):
        pass


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


class _CompiledKernel(tuple):
    """What a CuTe DSL kernel getter (COMPILED_KERNEL_GETTER: the quantizers', the fused
    RMSNorm + FP4 ones') gives in an eager shape run: a kernel that launches nothing, called
    itself (the norms' getters return the launcher) or unpacked with the launch's block unit
    (the quantizers' return `(kernel, rows or SF blocks per CTA)`, which sizes only the grid)."""

    def __call__(self, *args, **kwargs):
        return self[0](*args, **kwargs)


def _masked_gemm_kernel(*args, **kwargs):
    return lambda **tensors: tensors["c_tensor_gpu"]


def _compiled_cute_dsl_kernel(*args, **kwargs):
    return _CompiledKernel((_kernel("compiled_cute_dsl_kernel"), 4))


@functools.lru_cache(maxsize=None)
def _kernel(name):
    if name == "plan" or name.endswith("_plan"):
        return _planner(name)
    if name.startswith("set_"):  # a loader's set-up call (include dirs, cubin paths)
        return lambda *args, **kwargs: None
    if name == "plan_with_staged_workspace_bytes":  # 0.7.4's MLA: (plan, staged bytes)
        return lambda *args, **kwargs: (_plan(), 0)

    # A host-side size query (0.7.x top_k's `cub_topk_workspace_size`, the low-latency FP8
    # GEMM's `get_workspace_size_in_bytes`) answers a byte count, and
    # an occupancy query (0.7.4 QSA's `ctas_per_sm`, which sets a split count) one CTA, so
    # that FlashInfer's Python allocates its workspace and runs on to its results.
    # A module's `init` makes its runner (the fused MoE's, the SM90 FP8 block-scale GEMM's), an
    # FFI object whose methods are kernels and queries like the module's.
    answer = (1 << 20 if name.endswith(("_workspace_size", "_workspace_size_in_bytes")) else
              1 if name.endswith("_per_sm") else _Built() if name == "init" else None)

    @torch._dynamo.disable
    def kernel(*args, **kwargs):
        if eager_shapes[0]:
            return answer
        raise NotImplementedError(f"{name}: a JIT kernel, not built on this CPU-only machine")
    # Dynamo's message names the function: say which JIT module function the trace reached.
    kernel.__name__ = kernel.__qualname__ = f"jit_module.{name}"
    return kernel


def _planner(name):
    """A JIT module's plan: it answers a plan when called eagerly (a wrapper's plan(), before
    compile); a trace that reaches it meets it as a GPU trace meets the opaque tvm_ffi
    function, named (fmha_varlen plans inside the op), not the stand-in's tvm_ffi Array."""
    @torch._dynamo.disable
    def plan(*args, **kwargs):
        return _plan()
    plan.__name__ = plan.__qualname__ = f"jit_module.{name}"
    return plan


def _build_and_load(self, *args, **kwargs):
    return _Built()


class _Spec:
    def build_and_load(self, *args, **kwargs):
        return _Built()

    def get_library_paths(self):
        return []

    def get_library_path(self):  # 0.6.16
        return ""


NVCC_GENERATED_SPECS = {"gen_trtllm_fmha_v2_sm120_module"}
# Specs that download trtllm-gen headers before they build (0.7.x's CuTe DSL MoE routing sort,
# jit/moe_utils.py: the BMM export headers, checked against checksums.txt; 0.7.2's low-latency
# FP8 GEMM behind mm_fp8, jit/gemm/core.py: its checksums.txt and cubins).
DOWNLOADING_SPECS = {"gen_moe_utils_module", "gen_trtllm_low_latency_gemm_module"}


def _trtllm_gen_builds():
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer") or module is None:
            continue
        for attr in list(vars(module)):
            if attr.startswith("gen_") and attr.endswith("_module") and (
                    "fused_moe" in attr or attr.startswith("gen_trtllm_gen")
                    or attr in NVCC_GENERATED_SPECS or attr in DOWNLOADING_SPECS):
                setattr(module, attr, lambda *args, **kwargs: _Spec())
        if callable(vars(module).get("setup_cubin_loader")):
            # A module object's attributes are unknown to the checker: it has no FlashInfer.
            module.setup_cubin_loader = lambda *args, **kwargs: None  # type: ignore[attr-defined]


def _device_switch():
    try:
        from torch._dynamo.variables.ctx_manager import CUDADeviceVariable
    except ImportError:
        return
    CUDADeviceVariable._exchange_fn = staticmethod(lambda index: 0)
    CUDADeviceVariable._maybe_exchange_fn = staticmethod(lambda index: 0)


def install():
    """Installs the stand-ins; call after `import flashinfer`, and again once its submodules
    are imported (the build stand-ins apply to the modules loaded then)."""
    _trtllm_gen_builds()
    _device_switch()
    for name, module in list(sys.modules.items()):
        if name.startswith("flashinfer") and module is not None and callable(
                vars(module).get("download_file")):
            module.download_file = lambda *args, **kwargs: False  # type: ignore[attr-defined]
    torch.cuda.get_device_properties = _properties
    torch.cuda.get_device_capability = _capability
    torch.cuda.current_device = lambda: 0
    torch.cuda.is_available = _is_available
    torch.cuda.device_count = lambda: 1
    torch.cuda.graphs._cuda_isCurrentStreamCapturing = lambda: False
    import torch.utils._triton as triton_probe
    if triton_probe.has_triton_package():
        triton_probe.has_triton = lambda *, include_cpu=False: True
    _clear_device_caches()
    core = sys.modules.get("flashinfer.jit.core")
    if core is not None and hasattr(core, "JitSpec"):
        stack = [core.JitSpec]
        while stack:
            klass = stack.pop()
            stack.extend(klass.__subclasses__())
            for attr in ("build_and_load", "load"):
                if attr in vars(klass):
                    setattr(klass, attr, _build_and_load)
