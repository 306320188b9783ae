"""How an op's public name finds its argument builder (shared by trace_all.py and the GPU
check): a method by `Class.method`, a function by its own name, whatever submodule the
public name goes through."""


def builder_key(name, kind):
    parts = name.split(".")
    return ".".join(parts[-2:]) if kind == "method" else parts[-1]
