"""Lets Dynamo trace `flashinfer.fp4_quantize` once its JIT module is built.

Folding the CUDA version checks is not enough for the fp4 path: between the Python wrapper and
the kernel, FlashInfer's `get_fp4_quantization_module(backend)` goes through the JIT machinery
(Path.exists, FileLock, ninja, tvm_ffi.load_module) and the kernel itself is an opaque FFI
function. dynafold's import hook runs `install(module)` right after the FlashInfer module that
defines `get_fp4_quantization_module` has executed, and changes exactly two things:

1. A trace-transparent path to the built module. `get_fp4_quantization_module` is replaced by
   a function that, in eager mode, calls the original (building on first use, as before) and
   remembers the result per backend in a plain dict; under `torch.compile` it only reads that
   dict, so Dynamo never enters the JIT machinery.
2. An opaque kernel call. The built module's `fp4_quantize_sm100` is exposed through a
   `dynafold::fp4_quantize_sm100_<n>` operator defined from the installed release's real
   signature (every parameter, in order, with its own type), with a fake implementation that
   gives the shapes and dtypes the real function returns. FlashInfer's own fake for that op is
   not used: it returns int64/int32 tensors of the wrong size for the swizzled layout.

The rest of `fp4_quantize` (argument checks, layout reshapes, transposes) stays FlashInfer's
own code and is traced as it is. Nothing user-supplied reaches generated source: the operator
schema is built from parameter names that must be Python identifiers and from a fixed table
of types; anything else and nothing is installed.
"""

import functools
import inspect
import itertools
import keyword
import logging
import typing

import torch

_log = logging.getLogger("dynafold")
_counter = itertools.count()
# Library objects must outlive the process's use of the ops they define.
_libraries = []

NOT_WARMED = (
    "dynafold: flashinfer.fp4_quantize was traced by torch.compile before its JIT module was "
    "built in this process (backend sm{backend}). Call flashinfer.fp4_quantize once eagerly on "
    "the same device before compiling (SGLang's warm-up forward does this); dynafold keeps "
    "Dynamo out of FlashInfer's JIT build, which cannot be traced."
)

_SCHEMA_TYPES = {
    torch.Tensor: "Tensor",
    typing.Optional[torch.Tensor]: "Tensor?",
    int: "int",
    typing.Optional[int]: "int?",
    bool: "bool",
    typing.Optional[bool]: "bool?",
    float: "float",
    typing.Optional[float]: "float?",
    str: "str",
}


def _round_up(x, m):
    return (x + m - 1) // m * m


class Unsupported(Exception):
    """The installed release does not look as expected: leave it alone."""


def _schema_params(fn):
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params = []
    for p in sig.parameters.values():
        if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise Unsupported(f"parameter {p.name} is not positional-or-keyword")
        if not p.name.isidentifier() or keyword.iskeyword(p.name) or p.name.startswith("_"):
            raise Unsupported(f"parameter name {p.name!r}")
        ty = _SCHEMA_TYPES.get(hints.get(p.name))
        if ty is None:
            raise Unsupported(f"parameter {p.name} has type {hints.get(p.name)!r}")
        params.append((p.name, ty, p.default))
    if not params or params[0][1] != "Tensor":
        raise Unsupported("first parameter is not a tensor")
    return params


def _fake_outputs(input, values):
    """Shapes and dtypes of `fp4_quantize_sm100`'s results, as its own code computes them:
    packed values (*shape[:-1], K/2) uint8; scale factors 1-D uint8, rows padded to 128 (8 for
    the 8x4 layout) and columns to 4 when swizzled, m * K / sf_vec_size otherwise."""
    k = input.shape[-1]
    m = input.numel() // k
    sf_vec_size = values.get("sf_vec_size", 16)
    if values.get("is_sf_swizzled_layout", True):
        rows = 8 if values.get("is_sf_8x4_layout", False) else 128
        sf_size = _round_up(m, rows) * _round_up(k // sf_vec_size, 4)
    else:
        sf_size = m * k // sf_vec_size
    out_val = input.new_empty((*input.shape[:-1], k // 2), dtype=torch.uint8)
    return out_val, input.new_empty((sf_size,), dtype=torch.uint8)


def _define_op(kernel_params, eager_modules):
    """Defines dynafold::fp4_quantize_sm100_<n>(str backend, <kernel params>) -> (Tensor, Tensor)."""
    name = f"fp4_quantize_sm100_{next(_counter)}"
    args = ", ".join(f"{ty} {pname}" for pname, ty, _ in kernel_params)
    lib = torch.library.Library("dynafold", "FRAGMENT")
    lib.define(f"{name}(str backend, {args}) -> (Tensor, Tensor)")
    names = [p for p, _, _ in kernel_params]

    def real(backend, *values):
        module = eager_modules.get(backend)
        if module is None:
            raise RuntimeError(NOT_WARMED.format(backend=backend))
        return tuple(module.fp4_quantize_sm100(*values))

    def fake(backend, *values):
        if backend not in eager_modules:
            raise RuntimeError(NOT_WARMED.format(backend=backend))
        return _fake_outputs(values[0], dict(zip(names, values)))

    lib.impl(name, real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"dynafold::{name}", fake, lib=lib)
    _libraries.append(lib)
    return getattr(torch.ops.dynafold, name).default


class _TracedModule:
    """What `get_fp4_quantization_module(backend)` returns under torch.compile: the built
    module, with `fp4_quantize_sm100` going through the opaque operator."""

    def __init__(self, backend, op, names, defaults, built_module):
        self._backend = backend
        self._op = op
        self._names = names
        self._defaults = defaults
        self._built = built_module

    def fp4_quantize_sm100(self, *args, **kwargs):
        values = list(args)
        for name in self._names[len(args):]:
            values.append(kwargs[name] if name in kwargs else self._defaults[name])
        return self._op(self._backend, *values)

    def __getattr__(self, attr):
        # Other kernels of the module keep FlashInfer's own path (eager use).
        return getattr(self._built, attr)


def install(module):
    """Installs both changes into `module`; returns a one-line description, or None when the
    module does not define `get_fp4_quantization_module` (a re-export stub, the JIT-spec
    module). Raises Unsupported when it does but not in a shape this code understands."""
    original = module.__dict__.get("get_fp4_quantization_module")
    if original is None or getattr(original, "__module__", None) != module.__name__:
        return None
    if getattr(original, "__dynafold__", False):
        return None
    if not hasattr(original, "cache_info"):
        raise Unsupported("get_fp4_quantization_module is not functools-cached")

    eager_modules = {}  # backend -> the module FlashInfer built (its own object)
    traced = {}  # backend -> _TracedModule over it
    ops = {}
    # Defined now: nothing may be registered while Dynamo traces.
    cold = _cold_op()

    def traced_module(backend, eager_module):
        kernel = getattr(eager_module, "fp4_quantize_sm100", None)
        if kernel is None:
            raise Unsupported("the built module has no fp4_quantize_sm100")
        key = id(type(eager_module)), tuple(inspect.signature(kernel).parameters)
        if key not in ops:
            params = _schema_params(kernel)
            ops[key] = (_define_op(params, eager_modules), [p for p, _, _ in params],
                        {p: d for p, _, d in params if d is not inspect.Parameter.empty})
        op, names, defaults = ops[key]
        return _TracedModule(backend, op, names, defaults, eager_module)

    def get_fp4_quantization_module(backend: str = "100"):
        if torch.compiler.is_compiling():
            module = traced.get(backend)
            # Not warmed up: tracing the cold module's kernel call raises NOT_WARMED.
            return _Cold(backend, cold) if module is None else module
        # Eager: FlashInfer's own function and object, exactly as before.
        module = original(backend)
        if backend not in traced:
            traced[backend] = traced_module(backend, module)
            eager_modules[backend] = module
        return module

    functools.update_wrapper(get_fp4_quantization_module, original)
    get_fp4_quantization_module.__dynafold__ = True
    get_fp4_quantization_module.cache_info = original.cache_info
    get_fp4_quantization_module.cache_clear = original.cache_clear
    module.get_fp4_quantization_module = get_fp4_quantization_module
    return "fp4: get_fp4_quantization_module trace-transparent, fp4_quantize_sm100 behind a dynafold:: custom op"


class _Cold:
    """Stands for a module never built in this process. Its kernel call is an operator whose
    fake implementation raises NOT_WARMED, so the compile fails with that message rather
    than somewhere inside FlashInfer's JIT machinery."""

    def __init__(self, backend, op):
        self._backend = backend
        self._op = op

    def fp4_quantize_sm100(self, input, *args, **kwargs):
        return self._op(self._backend, input)


_COLD_OP = []


def _cold_op():
    if not _COLD_OP:
        lib = torch.library.Library("dynafold", "FRAGMENT")
        lib.define("fp4_not_warmed(str backend, Tensor input) -> Tensor")

        def fail(backend, input):
            raise RuntimeError(NOT_WARMED.format(backend=backend))

        lib.impl("fp4_not_warmed", fail, "CompositeExplicitAutograd")
        # A Meta kernel rather than register_fake: fake tensors fall back to it, and it costs
        # a tenth (0.4 ms against 5 ms), paid by every process that imports the fp4 module.
        lib.impl("fp4_not_warmed", fail, "Meta")
        _libraries.append(lib)
        _COLD_OP.append(torch.ops.dynafold.fp4_not_warmed.default)
    return _COLD_OP[0]
