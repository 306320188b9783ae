"""The methods dynafold dispatches on FlashInfer's classes (hooks/ops/mechanisms/dispatch.py),
read in the process they were made in: by the attention-runs helper, which reports each one's
form, and by bench/host_path_child.py and integration/gpu/decoder_layer.py, which swap them for
the methods as shipped."""
import sys


def dispatched_methods():
    """(class, name, dynafold's dispatcher) for each method dynafold has dispatched: the
    wrapper runs' (`_dynafold_run`) and the method boundaries' (`_dynafold_dispatcher`). None
    in a process without dynafold, or before its first compile start."""
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("flashinfer"):
            continue
        for cls in list(vars(module).values()):
            if not isinstance(cls, type) or cls.__module__ != name:
                continue
            for attr, value in list(vars(cls).items()):
                if getattr(value, "_dynafold_run", False) or getattr(
                        value, "_dynafold_dispatcher", False):
                    found.append((cls, attr, value))
    return found


def use(methods, kind):
    """Puts on each class of `methods` (dispatched_methods()) dynafold's dispatcher, kind
    "dispatched", or what it wraps, "shipped": FlashInfer's method as its class held it before
    dynafold's first compile start (for a partialmethod, the plain method dynafold made of it
    at import)."""
    for cls, attr, ours in methods:
        setattr(cls, attr, ours if kind == "dispatched" else ours.__wrapped__)
