"""Argument builders, one module per family: each maps an op's public name to a function
`build(t, fi)` returning `(fn, args)`, a call of the op on fake CUDA tensors as serving code
makes it (`t(*shape, dtype=...)` makes one; `fi` is the imported flashinfer). A builder may
return several calls as {label: (fn, args)}; the op traces only if every call does."""
from . import attention, elementwise, linear_attention, moe_comm, quant_gemm, sampling_kv

BUILDERS = {}
for _family in (elementwise, sampling_kv, quant_gemm, attention, moe_comm, linear_attention):
    for _name, _build in _family.BUILDERS.items():
        BUILDERS[_name] = (_family.__name__.rsplit(".", 1)[-1], _build)
