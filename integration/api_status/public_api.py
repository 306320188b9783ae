"""Which of a FlashInfer release's callables are its public tensor ops.

Public: (1) every name `import flashinfer` binds without a leading underscore, lazy exports
included (`dir(flashinfer)`), and (2) the public names of the submodules FlashInfer's API
reference documents per family whose functions are not all re-exported at the top (SUBMODULES):
their `__all__` where they define one, else each function or class defined in that module
itself. Only objects defined under `flashinfer.` count (re-exported torch or typing names
do not), and one object reached by several names is one entry, under its shortest name.

Of a public class, the ops are its public methods defined in FlashInfer's classes (its own
body and FlashInfer base classes): `plan`, `run`, `forward`, ...; constructors are not ops
(they allocate buffers once, outside any forward). An alias inside a class (`forward = run`)
is one entry.

Takes tensors: some parameter is annotated with a type that names torch's `Tensor`
(`torch.Tensor`, `Optional[Tensor]`, `List[Tensor]`, a string annotation), or, unannotated, is
documented as `name : torch.Tensor` in the docstring (numpydoc, as FlashInfer writes them).
A CuTe DSL tensor (`cute.Tensor`: the device-side parameters of the kernel classes FlashInfer's
gemm and quantization modules export, `kernel`, `mma_warp`, ...) is not a torch tensor: those
methods run inside a CuTe kernel, never from Python on torch tensors.
"""
import importlib
import inspect
import re
import sys
import typing

import torch

# The families' modules (issue 20) whose functions are not all re-exported by `flashinfer`.
SUBMODULES = ["activation", "cascade", "comm", "decode", "gemm", "mla", "norm", "page", "pod",
              "prefill", "quantization", "rope", "sampling", "sparse", "fused_moe", "topk"]


def _defined_in_flashinfer(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == "flashinfer" or module.startswith("flashinfer.")


def _names(module):
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return [n for n in declared if not n.startswith("_")]
    return [n for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]


def _documented_tensor(doc, name):
    return bool(doc) and re.search(rf"^\s*{re.escape(name)}\s*:\s*[^\n]*Tensor", doc, re.M)


# `Tensor` or `torch.Tensor`, not a dotted other module's (`cute.Tensor`) nor `FP4Tensor`.
_TORCH_TENSOR = re.compile(r"(?<![\w.])(?:torch\.)?Tensor\b")


def _names_torch_tensor(ann):
    if isinstance(ann, str):
        return _TORCH_TENSOR.search(ann) is not None
    if ann is torch.Tensor:
        return True
    if isinstance(ann, typing.ForwardRef):
        return _names_torch_tensor(ann.__forward_arg__)
    return any(_names_torch_tensor(a) for a in typing.get_args(ann))


def takes_tensors(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    doc = inspect.getdoc(fn) or ""
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        ann = p.annotation
        if ann is not inspect.Parameter.empty:
            if _names_torch_tensor(ann):
                return True
        elif _documented_tensor(doc, p.name):
            return True
    return False


def _methods(cls):
    """(name, function) of the public methods of `cls` defined by FlashInfer's classes."""
    seen = {}
    for klass in reversed(cls.__mro__):
        if not _defined_in_flashinfer(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            fn = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if inspect.isfunction(fn):
                seen[name] = fn
    out, ids = [], set()
    for name, fn in seen.items():
        if id(fn) not in ids:  # `forward = run`: one entry, the first name
            ids.add(id(fn))
            out.append((name, fn))
    return out


def enumerate_ops(flashinfer):
    """{name: {"module", "kind", "object"}}: every public tensor op, named `func` or
    `Class.method` (submodule-only names: `submodule.func`)."""
    candidates = [(n, getattr(flashinfer, n, None)) for n in dir(flashinfer)
                  if not n.startswith("_")]
    for sub in SUBMODULES:
        try:
            module = importlib.import_module(f"flashinfer.{sub}")
        except Exception:  # absent from this release, or needs what this machine lacks
            continue
        candidates += [(f"{sub}.{n}", getattr(module, n, None)) for n in _names(module)]
    by_object: dict[int, tuple[str, typing.Any]] = {}  # id: (shortest public name, object)
    for name, obj in candidates:
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if not _defined_in_flashinfer(obj):
            continue
        best = by_object.get(id(obj))
        if best is None or len(name) < len(best[0]):
            by_object[id(obj)] = (name, obj)
    ops = {}
    for name, obj in sorted(by_object.values(), key=lambda item: item[0]):
        if inspect.isclass(obj):
            for method, fn in _methods(obj):
                if takes_tensors(fn):
                    ops[f"{name}.{method}"] = {"module": obj.__module__, "kind": "method",
                                               "object": fn}
        elif takes_tensors(obj):
            ops[name] = {"module": obj.__module__, "kind": "function", "object": obj}
    return ops


if __name__ == "__main__":
    import flashinfer
    found = enumerate_ops(flashinfer)
    for name, entry in found.items():
        print(entry["module"], name)
    print(len(found), "ops", file=sys.stderr)
