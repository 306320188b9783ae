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
  operator gets `torch.Tag.nondeterministic_seeded` (parameters named generator/seed/offset
  already do).

Each entry names where the audit found it (docs/op-audit: FlashInfer's C++/CUDA source per
release). The first real run of every woken operator checks what its kernel wrote, whether a
result shares storage with an input and whether the generator moved (hooks/fake_check.py), so an
entry missing here stops a compiled graph at its first run instead of giving a wrong answer.
"""

# (module, qualified name) -> {field: value}
CORRECTIONS = {
    # 0.6.x decode.py get_single_decode_module, 0.7.x the same: the kernel writes `maybe_lse`
    # when it is given (csrc/single_decode.cu: `maybe_lse.value().data_ptr()`).
    ("flashinfer.decode", "get_single_decode_module.<locals>.run_single_decode"): {
        "also_mutates": ("maybe_lse",),
    },
    # 0.7.4 topk.py: declared `-> torch.Tensor` and `return out`, `out` also declared mutable.
    ("flashinfer.topk", "get_topk_module.<locals>.cub_topk_page_table_transform"): {
        "returns_argument": "out",
    },
}

# Parameter names that mean the kernel draws from the random generator.
SEEDED_PARAMETERS = frozenset({"generator", "seed", "offset"})


def of(fn):
    """The correction for FlashInfer's declared function `fn` (empty when there is none)."""
    key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
    return CORRECTIONS.get(key, {})
