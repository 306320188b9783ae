"""Declarations whose full signature no torch schema can say, woken narrowed.

FlashInfer's sampling declarations take a `Generator` (no schema type), `Union[int, Tensor]`
seeds and return a tensor or a tuple (`return_valid`). Each is woken narrowed to how serving
code calls it: the operator leaves out what cannot be said (given back to FlashInfer's function
with the one value that fits) and narrows the rest; Dynamo calls the operator for a call whose
values fit, and traces FlashInfer's function as shipped for any other. The fake FlashInfer
wrote is called with the parameters it takes (some rotted without the seeds, which cannot change
a result's shape). fp4_quantize's cute-dsl kernel (dynafold's own declaration) is narrowed the
same way: its NVFP4 "4over6" recipe object is left out, and a call with a recipe is traced as
shipped.

A third kind: a result that is the caller's own buffer when one is given (`mm_fp4`'s `out`, the
fused MoE ops' `output`), which no operator may return (`given_result`). The call that gives
the buffer is woken as an operator that writes it and returns nothing (or only its other,
fresh results), and what Dynamo calls hands back the caller's buffer as FlashInfer does; a call
without one may be an operator of its own returning the fresh result; any other call is traced
as shipped. A public function that allocates its outputs unless given buffers (the fused
DiT norms) is woken for the call that gives none (`fresh_result`).

A sampling call with the caller's own `generator=` or with `return_valid=True` has an operator of
its own too (`draw`, one per combination the declaration has): the generator reaches it as a
key (a constant of the graph, one graph per generator; `generator_key`), and its kernel gives
FlashInfer's function that generator, which advances it at run time exactly as an eager call
does; `return_valid=True` makes the result the (samples, valid) pair.

An IntEnum parameter (the mxfp8 quantizers' `SfLayout`, cutlass_fused_moe's `ActivationType`)
is an int to the operator, and the kernel gives FlashInfer's function the enum again.

Two more kinds: a `Union[float, Tensor]` parameter (the fp8-quant norms' `scale`) gives one
operator per member, and Dynamo calls the one the argument fits (several such parameters, as
xqa's `q_scale` and `kv_scale`: one operator per combination of members); the attention run kernels'
`List[int] plan_info_vec` reaches its operator as an int64 CPU tensor, graph data rather than
guarded constants, so a new plan does not recompile.
"""

import enum
import inspect
import itertools
import sys
import types
import typing

import torch

from _dynafold_ops.engine.record import Holds

# What `typing.get_origin` gives a Union: `Union[...]`, and from 3.10 also `X | Y`
# (`types.UnionType`, which 3.9 lacks: naming it there raised at every check).
if sys.version_info >= (3, 10):
    _UNION_ORIGINS: typing.Tuple[object, ...] = (typing.Union, types.UnionType)
else:
    _UNION_ORIGINS = (typing.Union,)


def _object_default():
    """In a call check, a parameter left at a default that is an object (not a constant): no
    narrowing's value (None, False, True, a tensor) is it, so the call is traced as shipped."""


def _fits_object_default(value):
    """A parameter left at its object default (`_object_default` in the call check)."""
    return value is _object_default


def fits_none(value):
    return value is None


def _fits_false(value):
    return value is False


def _fits_not_a_tensor(value):
    return not isinstance(value, torch.Tensor)


def _fits_a_tensor(value):
    return isinstance(value, torch.Tensor)


def _fits_a_tensor_pair(value):
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(v, torch.Tensor) for v in value)


def _is_tensor_pair(hint):
    """A `Tuple[Tensor, Tensor]`."""
    return typing.get_origin(hint) is tuple and typing.get_args(hint) == (
        torch.Tensor, torch.Tensor)


def _fits_an_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _fits(value):
    """A check that a parameter's value is exactly `value` (a constant: True, False, None, or a
    backend name), or, for `torch.Tensor` itself, that it is a tensor (a prepared wrapper's
    operand given, not left to the one bound at preparation), or, for a `Holds`
    (engine/record.py), that the object a wrapper key holds has those attribute values."""
    if value is torch.Tensor:
        return _fits_a_tensor
    if isinstance(value, Holds):
        return _holds(value.attributes)
    if type(value) is int:
        # (a count whose 0 says "off": RecurrentKDAPrefillWrapper.run's
        # checkpoint_every_n_tokens)
        def fits_int(given):
            return type(given) is int and given == value
        return fits_int
    if value is None:
        return fits_none
    if value is False:
        return _fits_false
    if value is True:
        return _fits_true
    if isinstance(value, str):
        def fits_name(given):
            return isinstance(given, str) and given == value
        return fits_name
    raise ValueError(f"no check for {value!r}")


def _fits_true(value):
    return value is True


def _holds(attributes):
    """The check of a `Holds`: given a wrapper key (a constant of the graph, which Dynamo
    guards on), whether the object it holds has `attributes`, answered at trace time (a
    constant of the graph too: the attributes are its constructor's)."""
    def holds(key):
        if type(key) is not int:
            return False
        boundaries = sys.modules["_dynafold_ops.mechanisms.method_boundaries"]
        obj = boundaries.held(key)
        return all(getattr(obj, name, _holds) == want for name, want in attributes)
    return _constant(holds)


def _fits_given(value):
    return value is not None


# key -> weak reference to a caller's random generator, held for the draws compiled for it;
# id(generator) -> its key while it lives.
_generators: typing.Dict[int, typing.Any] = {}
_generator_keys: typing.Dict[int, int] = {}
_next_generator = itertools.count(1)


def generator_key(generator):
    """The key of a caller's generator (given it now if it has none). Dynamo calls this at
    trace time as a constant function (`through_ops`), so the key is a constant of the graph,
    guarded: one graph per generator, as a server has one."""
    import weakref
    key = _generator_keys.get(id(generator))
    if key is not None and _generators[key]() is generator:
        return key
    key = next(_next_generator)

    # The id is taken now, while the generator lives; the callback runs once it is gone.
    def forget(_, key=key, ident=id(generator)):  # noqa: B008
        _generators.pop(key, None)
        if _generator_keys.get(ident) == key:
            del _generator_keys[ident]
    _generators[key] = weakref.ref(generator, forget)
    _generator_keys[id(generator)] = key
    return key


def generator_of(key):
    """The generator a compiled draw was traced for (`generator_key`)."""
    ref = _generators.get(int(key))
    generator = ref() if ref is not None else None
    if generator is None:
        raise RuntimeError(f"dynafold: the random generator of key {key} no longer exists; a "
                           "graph compiled for it cannot run")
    return generator


def _constants_take_objects():
    """Whether Dynamo hands a constant function (`generator_key`) an object argument itself,
    guarded on its identity: torch 2.14 on (2.14.1 and 2.15.0 checked). 2.9.1 refuses ("is
    not a constant", an internal error failing the compile), so there a call with a generator
    stays traced as shipped, as before."""
    try:
        return tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 14)
    except ValueError:
        return False


def draw_forms(fn, hints):
    """The sampling call forms besides the default one (no generator given, `return_valid`
    False), each an operator of its own: (generator given, return_valid True) pairs the
    declaration has parameters for."""
    try:
        names = set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []
    given = ("generator" in names and is_generator(hints.get("generator"))
             and _constants_take_objects())
    valid = "return_valid" in names
    return [(g, v) for g in (False, True) for v in (False, True)
            if (g or v) and (given or not g) and (valid or not v)]


def _any_hint(hint):
    return True


def _is_int_list(hint):
    return typing.get_origin(hint) in (list, typing.List) and typing.get_args(hint) == (int,)


def _as_ints(plan):
    return plan.tolist()


def _is_optional_stream(hint):
    """An `Optional[torch.cuda.Stream]`."""
    members = [m for m in typing.get_args(hint) if m is not type(None)]
    return (len(members) == 1 and members[0] is torch.cuda.Stream
            and type(None) in typing.get_args(hint))


def _is_opaque_tuple(hint):
    """An `Optional[Tuple[Any, ...]]` (or bare `Optional[Tuple]`): a tuple of anything."""
    members = [m for m in typing.get_args(hint) if m is not type(None)]
    if len(members) != 1 or typing.get_origin(members[0]) not in (tuple, typing.Tuple) and \
            members[0] not in (tuple, typing.Tuple):
        return False
    inner = typing.get_args(members[0])
    return not inner or typing.Any in inner


class Rule:
    """How one parameter is narrowed: its annotation in the operator (None: left out of it),
    the values that fit, the value a left-out parameter is given back to FlashInfer's function
    with, which annotations it applies to, and how the kernel turns the operator's value back
    into FlashInfer's (None: unchanged)."""
    __slots__ = ("annotation", "fits", "given_back", "applies", "restore")

    def __init__(self, annotation, fits, given_back=None, applies=_any_hint, restore=None):
        self.annotation = annotation
        self.fits = fits
        self.given_back = given_back
        self.applies = applies
        self.restore = restore


# Parameters torch's schemas cannot express, or that must reach the graph as data, narrowed to
# the form serving code calls them with. A call whose values fit goes through the operator; any
# other call is traced as FlashInfer ships it.
NARROWED = {
    # FlashInfer's sampling ops: `generator` (no schema type for a Generator), `seed`/`offset`
    # (Union[int, Tensor]) and `return_valid` (it turns the Tensor result into a tuple).
    "generator": Rule(None, fits_none),
    "seed": Rule(typing.Optional[int], _fits_not_a_tensor, applies=lambda h: is_union(h)),
    "offset": Rule(typing.Optional[int], _fits_not_a_tensor, applies=lambda h: is_union(h)),
    "return_valid": Rule(None, _fits_false, False),
    # fp4_quantize's cute-dsl kernel (0.7.2 on): the resolved NVFP4 "4over6" recipe, a dataclass
    # (no schema type); None is the recipe off, FlashInfer's default. Not a `bool` of that name
    # (0.7.4's slot-mapping NVFP4 KV append kernel takes `nvfp4_4over6 is not None`), which a
    # schema says as it is: narrowed to None, no call would fit and each would be traced as
    # shipped, into the JIT kernel.
    "nvfp4_4over6": Rule(None, fits_none, applies=lambda hint: hint is not bool),
    # The attention run kernels' plan (`List[int] plan_info_vec`): as `int[]` each int would be
    # a constant of the graph, guarded, so every new batch would recompile. It reaches the
    # operator as an int64 CPU tensor (hooks/ops/mechanisms/attention_plans.py keeps it one under compile) and
    # the kernel gives FlashInfer its list.
    "plan_info_vec": Rule(torch.Tensor, _fits_a_tensor, applies=_is_int_list, restore=_as_ints),
    # 0.7.4's Prims-TS MoE declarations (bf16_op.py prims_ts_bf16_moe_op, fp8_op.py's impl)
    # also serve the two-partition form: a pair of weight shards per weight
    # (Union[Tensor, Sequence[Tensor]]), the caller's streams and events (a
    # MoePartitionResources, no schema type) and the strategy. Narrowed to the unpartitioned
    # call (one weight tensor, no resources); a partitioned call is traced as shipped.
    "partition_resources": Rule(None, fits_none),
    # An explicit autotuner tactic, by its annotation (the first rule that applies):
    # - 0.7.x cute_dsl_fused_moe_bf16's `Optional[Tuple[Any, ...]]` (no schema type): None is
    #   the AutoTuner's choice, as serving code calls it; a call with a tactic is traced as
    #   shipped;
    # - 0.7.x cudnn_frost_grouped_gemm1_swiglu's `Any`: an int to the operator (-1, the
    #   heuristic's choice, is what serving code passes); any other tactic object is traced
    #   as shipped.
    "tactic": (Rule(None, fits_none, applies=_is_opaque_tuple),
               Rule(int, _fits_an_int, applies=lambda hint: hint is typing.Any)),
    # The CuTe DSL MoE's auxiliary stream for its output memset (0.7.x
    # cute_dsl_fused_moe_mxfp8_mxfp4's `Optional[torch.cuda.Stream]`, no schema type): None,
    # FlashInfer's own per-device stream (_get_cuda_graph_resources); a call giving one is
    # traced as shipped.
    "aux_stream": Rule(None, fits_none, applies=_is_optional_stream),
    # 0.7.4 cute_dsl_fused_moe's (and its deprecated alias cute_dsl_fused_moe_nvfp4's)
    # locality-domain localization (Rubin W4A4 only): per-domain weight-shard dicts and
    # green-context streams (`Optional[list]`) and a memset stream (`Optional[torch.cuda.Stream]`),
    # no schema type for any. Narrowed to None, FlashInfer's default (the unlocalized path, as
    # serving code calls it); a localized call is traced as shipped.
    "localized_weights": Rule(None, fits_none, applies=lambda hint: "list" in str(hint)),
    "localized_streams": Rule(None, fits_none, applies=lambda hint: "list" in str(hint)),
    "localized_memset_stream": Rule(None, fits_none, applies=_is_optional_stream),
    "partition_strategy": Rule(None, fits_none),
    **{name: Rule(torch.Tensor, _fits_a_tensor, applies=lambda hint: is_union(hint))
       for name in ("gemm1_weights", "gemm2_weights", "gemm1_weights_scale",
                    "gemm2_weights_scale")},
    # 0.7.4's paged GDN functions (gdn_paged.py): the slot rows a step may precompute once for
    # every layer (a GDNPagedPrefillSlots or GDNPagedDecodeSlots NamedTuple, no schema type).
    # Narrowed to None, the call that computes them itself; one that gives them is traced as
    # shipped.
    "slots": Rule(None, fits_none, applies=lambda hint: "GDNPaged" in str(hint)),
    # chunk_gated_delta_rule (gdn_prefill.py, 0.6.16 on): `use_cp: Literal["auto"] | bool`
    # (context parallelism: chosen, forced or refused) and 0.7.4's `cu_seqlens_cpu` (a host
    # copy of cu_seqlens, a list or a CPU tensor): Unions no schema says. Narrowed to "auto"
    # and None, FlashInfer's defaults; another call is traced as shipped.
    "use_cp": Rule(None, _fits("auto"), "auto", applies=lambda hint: is_union(hint)),
    "cu_seqlens_cpu": Rule(None, fits_none, applies=lambda hint: is_union(hint)),
    # 0.7.4's Cake top-k/top-p sampler (cake_sampling.py): the caller's stage-1 slab buffers, a
    # tuple of three tensors (no schema type for it). Narrowed to None, the call that uses the
    # sampler's own cached workspace; one that gives buffers is traced as shipped. (Every
    # `workspace` FlashInfer declares is a Tensor, which this rule leaves alone.)
    "workspace": Rule(None, fits_none, applies=lambda hint: "tuple[" in str(hint)),
    # The POD kernels' prefill and decode plans (dynafold's declarations,
    # hooks/ops/mechanisms/attention_plans.py), the same.
    **{f"plan_info_vec_{part}": Rule(torch.Tensor, _fits_a_tensor, applies=_is_int_list,
                                     restore=_as_ints) for part in ("p", "d")},
    # 0.7.4's nvfp4_quantize_cute_dsl (dynafold's declaration): its optional pair of caller
    # destinations `out` (no schema type), narrowed to None: the results are then fresh; a
    # call that gives buffers is traced as shipped. Only a parameter of that type.
    # trtllm_batch_context_with_kv_cache's (dynafold's declaration, 0.6.16 on)
    # `Optional[Union[Tensor, FP4Tensor]]`, narrowed to None too: the call whose result the
    # function allocates; one giving a buffer is traced as shipped.
    "out": (Rule(None, fits_none, applies=lambda hint: _is_optional_tensor_tuple(hint)),
            Rule(None, fits_none, applies=lambda hint: "FP4Tensor" in str(hint))),
    # 0.7.x's grouped_gemm_nt_masked (dynafold's declaration): its operands with their scale
    # factors, `lhs=(A, SFA)` and `rhs=(B, SFB)` (`Tuple[Tensor, Tensor]`, no schema type): a
    # Tensor[] of the two to the operator, the pair again to FlashInfer's function.
    **{name: Rule(typing.List[torch.Tensor], _fits_a_tensor_pair, applies=_is_tensor_pair,
                  restore=tuple) for name in ("lhs", "rhs")},
    # 0.7.x's prims_ts_fp8_block_scale_routed_moe (dynafold's declaration): its routing, the
    # packed top-k ids (a Tensor) or an unpacked (ids, weights) pair
    # (`Union[Tensor, Tuple[Tensor, Tensor]]`, no schema type). Narrowed to the packed tensor;
    # a pair is traced as shipped.
    "topk_ids": Rule(torch.Tensor, _fits_a_tensor, applies=lambda hint: is_union(hint)),
    # 0.7.x's SM12x CuTe DSL MoE GEMMs (dynafold's declarations): the epilogue, an EpiMethod
    # (a plain Enum, no schema type) whose default differs per function. Left at that default
    # (its `_default` operator: FlashInfer's function gets the default itself); a call naming
    # an epilogue is traced as shipped.
    "epi": Rule(None, fits_none, applies=lambda hint: _is_plain_enum(hint)),
    # 0.7.4's mm_nvfp4_lora (dynafold's declaration): its prepared LoRA adapter, a dataclass
    # holding device tensors (no schema type), narrowed to None (no adapter, FlashInfer's
    # default); a call with an adapter is traced as shipped.
    "lora_adapter": Rule(None, fits_none),
    # trtllm_batch_context_with_kv_cache and trtllm_fmha_v2_prefill (dynafold's declarations,
    # 0.6.16 on; the second has `out_dtype` and `sinks` alike): Unions and a
    # list no schema says, each narrowed to the form serving code passes; another call is
    # traced as shipped:
    # - `kv_cache: Union[Tensor, Tuple[Tensor, Tensor]]`: the one paged tensor
    #   [pages, 1 or 2, ...] (the body unbinds K and V itself);
    # - `out_dtype: Optional[Union[torch.dtype, str]]`: a dtype or None (the string "nvfp4"
    #   makes the result an FP4Tensor, no tensor);
    # - `kv_cache_sf: Optional[Union[Tensor, Tuple[Tensor, Tensor]]]`: None or the one tensor;
    # - `sinks: Optional[List[Tensor]]`: None or one tensor, what the body hands its kernel
    #   (csrc/trtllm_fmha_kernel_launcher.cu: `Optional<TensorView> attention_sinks`).
    "kv_cache": Rule(torch.Tensor, _fits_a_tensor, applies=lambda hint: is_union(hint)),
    # append_paged_kv_cache and the NVFP4 appends (dynafold's declarations of the public
    # functions): `paged_kv_cache: Union[Tensor, Tuple[Tensor, Tensor]]`, narrowed to the one
    # paged tensor [pages, 2, ...], which the operator writes whole (hooks/ops/registry/
    # attention.py says why); a (K, V) pair is traced as shipped, into FlashInfer's own
    # declaration.
    "paged_kv_cache": Rule(torch.Tensor, _fits_a_tensor, applies=lambda hint: is_union(hint)),
    "out_dtype": Rule(typing.Optional[torch.dtype],
                      lambda value: value is None or isinstance(value, torch.dtype),
                      applies=lambda hint: is_union(hint) and str in typing.get_args(hint)),
    # The NVFP4 appends' (dynafold's declarations, 0.6.16 on) `kv_cache_sf: Union[Tensor,
    # Tuple[Tensor, Tensor]]`, no None: the one stacked scale cache, beside `paged_kv_cache`.
    "kv_cache_sf": (Rule(torch.Tensor, _fits_a_tensor,
                         applies=lambda hint: is_union(hint) and not _is_optional(hint)),
                    Rule(typing.Optional[torch.Tensor],
                         lambda value: value is None or isinstance(value, torch.Tensor),
                         applies=lambda hint: is_union(hint))),
    "sinks": Rule(typing.Optional[torch.Tensor],
                  lambda value: value is None or isinstance(value, torch.Tensor),
                  applies=lambda hint: "List" in str(hint)),
    # trtllm_fmha_v2_prefill (dynafold's declaration, 0.6.16 on): `qkv`, a tensor
    # (PACKED_QKV) or a tuple of two or three (Q with stacked KV or a paged cache, or separate
    # Q, K, V; a paged (K, V) pair nested), no schema type for the Union. Narrowed to the flat
    # tuple, a Tensor[] to the operator and the tuple again to FlashInfer's function; the
    # packed tensor and the nested pair are traced as shipped. Its `pos_encoding_mode: str =
    # None` is an optional str to the operator.
    # fmha_varlen (dynafold's declaration, 0.6.16 on): its `plan_info`, the four plan tensors
    # fmha_varlen_plan returns (`Optional[List[Tensor]]`, no schema type), a Tensor[] to the
    # operator for the call that gives them (the ragged wrapper's cutlass backend, planned in
    # plan()); a call without (it plans itself) is traced as shipped.
    "plan_info": Rule(typing.List[torch.Tensor],
                      lambda value: isinstance(value, (list, tuple)) and all(
                          isinstance(v, torch.Tensor) for v in value),
                      applies=lambda hint: "List[torch.Tensor]" in str(hint)),
    "qkv": Rule(typing.List[torch.Tensor],
                lambda value: isinstance(value, tuple) and len(value) in (2, 3) and all(
                    isinstance(v, torch.Tensor) for v in value),
                applies=lambda hint: is_union(hint), restore=tuple),
    "pos_encoding_mode": Rule(typing.Optional[str],
                              lambda value: value is None or isinstance(value, str),
                              applies=lambda hint: hint is str),
    # trtllm_ragged_attention_deepseek's SageAttention scale factors (dynafold's declaration,
    # 0.6.16 on): a tuple of four optional tensors (no schema type), narrowed to FlashInfer's
    # default `(None, None, None, None)` (SageAttention off, as serving code calls it); a call
    # giving scale factors is traced as shipped.
    "sage_attn_sfs": Rule(None, lambda value: _fits_object_default(value) or (
        isinstance(value, tuple) and len(value) == 4 and all(v is None for v in value)),
        (None, None, None, None)),
}
# Parameters a fake may lack (added to the kernel after its fake was written) because they cannot
# change the result's shape, dtype or strides: the random stream's position.
FAKE_MAY_LACK = {"seed", "offset"}

# FlashInfer's JIT run functions (`get_batch_prefill_jit_module`'s paged_run and ragged_run,
# `get_batch_decode_jit_module`'s run) end in `*args`: the variant's additional tensors (None
# for an absent `maybe_*` one), then its additional scalars (`double`/`int64_t`, or bool),
# in the order the JIT module declares them. The operator takes them packed, in the same order:
# the tensors (declared mutable: a variant's additional tensors are plain `T*` in its params,
# jit/attention/utils.py generate_additional_params, so a variant may write them), the floats,
# the ints and bools, and one letter per argument saying which list it is in ("t", "n" for
# None, "f", "i", "b"), so the kernel gives FlashInfer's function the same arguments.
VARIADIC = (("args_tensors", typing.List[torch.Tensor]), ("args_floats", typing.List[float]),
            ("args_ints", typing.List[int]), ("args_kinds", str))


def pack_variadic(extra):
    """`*args` as the operator takes them (VARIADIC); Dynamo inlines it."""
    tensors, floats, ints, kinds = [], [], [], ""
    for value in extra:
        if isinstance(value, torch.Tensor):
            tensors.append(value)
            kinds += "t"
        elif value is None:
            kinds += "n"
        elif isinstance(value, bool):
            ints.append(int(value))
            kinds += "b"
        elif isinstance(value, int):
            ints.append(value)
            kinds += "i"
        else:
            floats.append(float(value))
            kinds += "f"
    return [tensors, floats, ints, kinds]


def unpack_variadic(tensors, floats, ints, kinds):
    """The operator's packed arguments as FlashInfer's `*args` again."""
    sources = {"t": iter(tensors), "f": iter(floats), "i": iter(ints), "b": iter(ints)}
    out: typing.List[typing.Any] = []
    for kind in kinds:
        if kind == "n":
            out.append(None)
        elif kind == "b":
            out.append(bool(next(sources["b"])))
        else:
            out.append(next(sources[kind]))
    return tuple(out)


def is_generator(hint):
    """A Generator, bare or Optional: torch infers no schema type for it."""
    return hint is not None and "Generator" in str(hint)


def is_union(hint):
    """A Union other than Optional, which torch's schemas cannot express (written
    `Union[float, Tensor]` or, 0.7.x's nvfp4_quantize_cute_dsl `global_scale`,
    `float | torch.Tensor`)."""
    return typing.get_origin(hint) in _UNION_ORIGINS and len(
        [a for a in typing.get_args(hint) if a is not type(None)]) > 1


def _is_optional(hint):
    return type(None) in typing.get_args(hint)


def _is_optional_tensor_tuple(hint):
    """`Optional[Tuple[Tensor, ...]]` (0.7.4 nvfp4_quantize_cute_dsl's `out`, the caller's
    destinations), which no schema type says."""
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) not in _UNION_ORIGINS or len(members) != 1 \
            or len(members) == len(typing.get_args(hint)):
        return False
    inner = typing.get_args(members[0])
    return typing.get_origin(members[0]) is tuple and bool(inner) and all(
        a is torch.Tensor or a is Ellipsis for a in inner)


def _schema_hint(hint):
    """The annotation an operator's schema can say for `hint`: a Literal of strings (a backend
    name) is a str, an Optional one (0.7.x fused_kda_decode's `state_indices_mode`) an
    Optional[str]; anything else unchanged."""
    if typing.get_origin(hint) is typing.Literal and all(
            isinstance(a, str) for a in typing.get_args(hint)):
        return str
    # An Optional one (0.6.16-0.7.4 gemm_fp8_nt_groupwise's `scale_major_mode`, 0.7.x
    # fused_kda_decode's `state_indices_mode`): an optional str.
    members = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and len(members) == 2 and type(None) in members:
        inner = next(m for m in members if m is not type(None))
        if _schema_hint(inner) is str and inner is not str:
            return typing.Optional[str]
    return hint


def _is_int_tuple(hint):
    """A `Tuple[int, ...]` or `Tuple[int, int, int]` (the groupwise GEMMs'
    `scale_granularity_mnk`), which torch infers no schema type for."""
    members = typing.get_args(hint)
    return (typing.get_origin(hint) is tuple and bool(members)
            and all(m is int or m is Ellipsis for m in members))


def _int_enum(hint):
    """The IntEnum class `hint` is, else None."""
    return hint if isinstance(hint, type) and issubclass(hint, enum.IntEnum) else None


def _is_plain_enum(hint):
    """An Enum class that is no IntEnum (no schema type says it)."""
    import enum
    return isinstance(hint, type) and issubclass(hint, enum.Enum) and _int_enum(hint) is None


def _as_enum(enum_class):
    def restore(value):
        return enum_class(value)
    return restore


def _rule(name, hint):
    rules = NARROWED.get(name, ())
    return next((r for r in (rules if isinstance(rules, tuple) else (rules,))
                 if r.applies(hint)), None)


def needed(hints):
    """Whether a declaration with these resolved annotations needs narrowing: a Union (its
    result's included), a Generator parameter, one NARROWED applies to, or an IntEnum
    parameter (the mxfp8 quantizers' `SfLayout`: an int to the operator, the enum again to
    FlashInfer's function)."""
    return any(is_union(hint) or (name != "return" and is_generator(hint))
               or (name != "return" and _rule(name, hint) is not None)
               or (name != "return" and _int_enum(hint) is not None)
               for name, hint in hints.items())


def _split_members(hint):
    """The members of a `Union[float, Tensor]`-like parameter, each its own operator: the
    scalar (int, float or bool) and Tensor; None when the Union is not of that kind."""
    members = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = len(members) < len(typing.get_args(hint))
    if len(members) != 2 or torch.Tensor not in members:
        return None
    scalar = next(m for m in members if m is not torch.Tensor)
    if scalar not in (int, float, bool):
        return None
    return [(typing.Optional[m] if optional else m, m) for m in (torch.Tensor, scalar)]


def _union_splits(hints):
    """The `split`s of a function's `Union[scalar, Tensor]` parameters not in NARROWED: one per
    combination of members (xqa's q_scale and kv_scale: four; each combination's checks test
    every Union argument, so a call fits exactly one), a single None without any; or why
    they cannot be split."""
    unions = [name for name, hint in hints.items()
              if name != "return" and is_union(hint) and _rule(name, hint) is None]
    members = [_split_members(hints[name]) for name in unions]
    if any(m is None for m in members):
        return "schema not expressible (a Union parameter)"
    return [dict(zip(unions, combination)) or None
            for combination in itertools.product(*members)]


def variants(fn, hints, variadic=False, fits=None, keywords=None):
    """The narrowings of `fn`, one per combination of members of its `Union[scalar, Tensor]`
    parameters not in NARROWED (FlashInfer's fp8-quant norms' `scale`, xqa's `q_scale` and
    `kv_scale`), or one; a reason when it cannot be narrowed. `fits` and `keywords`: as
    `Narrowing.of`'s (a correction's `when` and `keywords`, engine/record.py)."""
    splits = _union_splits(hints)
    if isinstance(splits, str):
        return splits
    out = _per_split(fn, hints, splits, variadic=variadic, fits=fits, keywords=keywords)
    if isinstance(out, str):
        return out
    for draw in draw_forms(fn, hints):
        more = _per_split(fn, hints, splits, variadic=variadic, fits=fits, keywords=keywords,
                          draw=draw)
        # A form that cannot be an operator stays traced as shipped; the others still are.
        if not isinstance(more, str):
            out += more
    return out


def _per_split(fn, hints, splits, **how):
    """`_with_object_defaults(fn, hints, split=..., **how)` for each of `splits`, in one list;
    the first reason when one cannot be made."""
    out = []
    for split in splits:
        some = _with_object_defaults(fn, hints, split=split, **how)
        if isinstance(some, str):
            return some
        out += some
    return out


def _with_object_defaults(fn, hints, **how):
    """`Narrowing.of(fn, hints, **how)` and, where a parameter NARROWED leaves out has an
    object default (0.7.x's CuTe DSL NVFP4 quantizers' and MoE's `nvfp4_4over6=_UNSET`, "read
    the environment"), one more (suffix "_default") for the call that leaves it there,
    FlashInfer's function getting that default back; a list, or why they cannot be made."""
    out = []
    for object_defaults in (False, True):
        one = Narrowing.of(fn, hints, object_defaults=object_defaults, **how)
        if isinstance(one, str):
            return one
        if one is not None:
            out.append(one)
    return out


class Narrowing:
    """One declaration narrowed by NARROWED: its operator's prototype (for the schema), the
    call check Dynamo inlines, and its kernel and fake adapted to the operator's parameters."""

    def __init__(self, names, kept, dropped, checks, prototype, restores=(), suffix="",
                 gives_back=None):
        self.names = names          # FlashInfer's parameter names, in order
        self.kept = kept            # (index, name, default) of those the operator takes
        self.dropped = dropped      # (index, value given back) of those left out of it
        self.checks = checks        # (index, name, default, fits) tested per call
        self.prototype = prototype
        self.restores = restores    # (position among kept, operator value -> FlashInfer's)
        self.suffix = suffix        # the operator name's suffix of a Union member's variant
        # (form, position among kept) of a given buffer that is the call's result: "itself",
        # "list" ([buffer]) or "list+" ([buffer, *the operator's results]); None otherwise.
        self.gives_back = gives_back
        self.positional = len(names)  # how many of FlashInfer's parameters take positions
        # The position of FlashInfer's `*args` (a JIT run function's variant arguments), which
        # the operator takes packed (VARIADIC); None when it has none.
        self.variadic: typing.Optional[int] = None
        # the operator's parameters after the kept ones
        self.extra_names: typing.Tuple[str, ...] = ()
        self.keywords: typing.Tuple[str, ...] = ()  # the names taken from FlashInfer's `**kwargs`
        # (position among kept, function of the call's value -> the operator's), applied by
        # what Dynamo calls: a caller's generator becomes its key (`draw`).
        self.converts: typing.Tuple[typing.Tuple[int, str], ...] = ()

    @classmethod
    def of(cls, fn, hints, split=None, fits=None, result=inspect.Parameter.empty,
           variadic=False, object_defaults=False, keywords=None, draw=None):
        """The narrowing of `fn` (with `split`: parameter -> (annotation, member) for a Union
        parameter this variant takes as one member; `fits`: parameter -> check, for parameters
        the operator takes as they are but only with values that pass; `result`: the
        operator's result annotation, when not `fn`'s; `variadic`: a trailing `*args` is taken
        packed, VARIADIC; `keywords`: name -> annotation of the entries a trailing `**kwargs`
        takes, each an operator parameter defaulting to None, given to FlashInfer's function
        only when not None; a call passing any other keyword is traced as shipped; `draw`: a
        sampling call form of `draw_forms`), or why it cannot be narrowed."""
        split = split or {}
        fits = fits or {}
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return "schema not expressible (no signature)"
        names, kept, dropped, checks, params, restores = [], [], [], [], [], []
        converts = []
        suffix = ""
        with_generator, with_valid = draw or (False, False)
        positional = 0
        defaulted = False  # a parameter with a default came before
        # A required keyword-only parameter after a defaulted one (0.7.x's
        # packed_fused_kda_decode: `output=None, *, query_start_loc`): no positional order takes
        # both with their defaults, so the operator's schema gives none (what Dynamo calls
        # passes every kept value, and the kernel gets FlashInfer's defaults from `kept`).
        no_defaults = False
        took_default = False  # (object_defaults) a left-out parameter at its object default
        variadic_at = None
        for index, param in enumerate(sig.parameters.values()):
            if variadic_at is not None:
                return "schema not expressible (parameters after *args)"
            if param.kind == param.VAR_POSITIONAL and variadic:
                variadic_at = index
                continue
            if param.kind == param.VAR_KEYWORD and keywords:
                # (0.7.x grouped_gemm_nt_masked's `alpha`, `alpha_dtype`), after the rest
                for offset, (name, annotation) in enumerate(keywords.items()):
                    names.append(name)
                    kept.append((len(sig.parameters) + offset, name, None))
                    params.append(inspect.Parameter(
                        name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                        annotation=annotation))
                continue
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                positional += 1
            elif param.kind == param.KEYWORD_ONLY:
                # (0.7.4's mm_fp4 `batch_invariant`; fused_qk_rmsnorm_rope's `ppf`, ..., with
                # no default; every parameter of 0.7.x's _prims_ts_fp8_block_scale_moe_impl,
                # the defaulted ones last): the operator takes it positionally, in its place,
                # and FlashInfer's function gets it by name. A required one after a defaulted
                # one: the schema gives no defaults (`no_defaults`).
                no_defaults = no_defaults or (param.default is param.empty and defaulted)
                param = param.replace(kind=param.POSITIONAL_OR_KEYWORD)
            else:
                return "schema not expressible (variadic or keyword-only parameters)"
            names.append(param.name)
            defaulted = defaulted or param.default is not param.empty
            hint = hints.get(param.name, param.annotation)
            default = None if param.default is param.empty else param.default
            if param.name in split:
                annotation, member = split[param.name]
                checks.append((index, param.name, default, _member_fits(member)))
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=annotation))
                if member is not torch.Tensor:
                    # one Union: `_float`, as before; several: which parameter is the scalar
                    suffix += (f"_{member.__name__}" if len(split) == 1
                               else f"_{param.name}_{member.__name__}")
                continue
            if param.name in fits:
                checks.append((index, param.name, default, fits[param.name]))
            if with_generator and param.name == "generator":
                # The caller's generator, as its key (a constant of the graph); the kernel
                # gives FlashInfer's function the generator itself.
                checks.append((index, param.name, default, _fits_given))
                converts.append((len(kept), "generator"))
                restores.append((len(kept), generator_of))
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=typing.Optional[int]))
                suffix += "_generator"
                continue
            if with_valid and param.name == "return_valid":
                checks.append((index, param.name, default, _fits_true))
                dropped.append((index, True))
                suffix += "_valid"
                continue
            rule = _rule(param.name, hint)
            if rule is None:
                hint = _schema_hint(hint)
                enum_class = _int_enum(hint)
                if enum_class is not None:
                    # An IntEnum (cutlass_fused_moe's `ActivationType`) is an int to the
                    # schema, and the kernel gets FlashInfer's enum back.
                    restores.append((len(kept), _as_enum(enum_class)))
                    kept.append((index, param.name, default))
                    params.append(param.replace(annotation=int))
                    continue
                if _is_int_tuple(hint):
                    # An int[] to the schema, and FlashInfer's function gets its tuple back.
                    # Declared optional (default None) only because a schema takes no tuple
                    # default: every call passes it (its default is in `kept`).
                    restores.append((len(kept), tuple))
                    kept.append((index, param.name, default))
                    params.append(param.replace(annotation=typing.Optional[typing.List[int]],
                                                default=None))
                    continue
                if is_union(hint):
                    return "schema not expressible (a Union parameter)"
                if is_generator(hint):
                    return "schema not expressible (a Generator parameter)"
                kept.append((index, param.name, default))
                if isinstance(default, enum.IntEnum):
                    # An int parameter whose default is an IntEnum member (the top-k
                    # functions' `tie_break=TopKTieBreak.NONE`, whose str() is "none"): the
                    # schema writes its value.
                    param = param.replace(default=int(default))
                params.append(param.replace(annotation=hint))
                continue
            if rule.annotation is None and not isinstance(
                    default, (type(None), bool, int, float, str)):
                # A left-out parameter's object default (0.7.x's `nvfp4_4over6=_UNSET`, "read
                # the environment"): Dynamo holds the checks as constants of through_op's
                # closure, which it cannot make of an arbitrary object, so the check sees a
                # stand-in that fits no value the rule gives back.
                if object_defaults:
                    # This variant (`variants`, "_default") takes the call that leaves it at
                    # that default, and its kernel gives FlashInfer's function the default
                    # itself, so the function resolves it per call as it does eagerly.
                    checks.append((index, param.name, _object_default, _fits_object_default))
                    dropped.append((index, param.default))
                    took_default = True
                    continue
                checks.append((index, param.name, _object_default, rule.fits))
            else:
                checks.append((index, param.name, default, rule.fits))
            if rule.annotation is None:
                dropped.append((index, rule.given_back))
            else:
                if rule.restore is not None:
                    restores.append((len(kept), rule.restore))
                kept.append((index, param.name, default))
                params.append(param.replace(annotation=rule.annotation))
        if object_defaults and not took_default:
            return None  # no parameter left at an object default: no such variant
        if took_default:
            suffix += "_default"
        if result is inspect.Parameter.empty:
            result = hints.get("return", sig.return_annotation)
        if result is type(None):  # resolved `-> None`; torch's schemas take None itself
            result = None
        if is_union(result):
            members = [a for a in typing.get_args(result) if a is not type(None)]
            if "return_valid" not in names or members[0] is not torch.Tensor:
                return "schema not expressible (a Union result)"
            # With return_valid=True, FlashInfer's (samples, valid).
            result = typing.Tuple[torch.Tensor, torch.Tensor] if with_valid else torch.Tensor

        if variadic_at is not None:
            params += [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                         annotation=annotation)
                       for name, annotation in VARIADIC]
        # A Tensor[] kept with the default None (0.6.16-0.7.4 fmha_varlen's narrowed
        # `plan_info`): no schema gives a list the default None, so, as for a required
        # keyword-only parameter after a defaulted one, the schema gives no defaults.
        no_defaults = no_defaults or any(
            p.default is None and p.annotation == typing.List[torch.Tensor] for p in params)
        if no_defaults:
            params = [p.replace(default=p.empty) for p in params]
        narrowing = cls(names, kept, dropped, checks, prototype_of(fn, params, result),
                        tuple(restores), suffix)
        narrowing.positional = positional
        narrowing.converts = tuple(converts)
        narrowing.keywords = tuple(keywords or ()) if any(
            p.kind == p.VAR_KEYWORD for p in sig.parameters.values()) else ()
        if variadic_at is not None:
            narrowing.variadic = variadic_at
            narrowing.extra_names = tuple(name for name, _ in VARIADIC)
        return narrowing

    def full_args(self, args):
        """The operator's arguments as FlashInfer's function takes them. The dispatcher leaves
        out trailing arguments equal to their schema default (a sampling call with no seed
        reaches the kernel without `seed` and `offset`): they are put back before the dropped
        parameters are, else each dropped value would land in the place of a missing one."""
        out = list(args)
        out += [default for _, _, default in self.kept[len(out):]]
        for index, value in self.dropped:
            out.insert(index, value)
        return out

    def kernel(self, fn):
        restores = self.restores
        rest_only = self.gives_back is not None and self.gives_back[0] == "list+"
        fresh_list = self.gives_back is not None and self.gives_back[0] == "fresh"
        fresh_then = self.gives_back is not None and self.gives_back[0] == "fresh+"

        variadic = self.variadic is not None
        packed_count = len(self.extra_names)

        def kernel(*args):
            extra = ()
            if variadic:  # the packed `*args` are last and have no defaults
                args, extra = args[:-packed_count], unpack_variadic(*args[-packed_count:])
            # Trailing arguments the dispatcher left out at their default, back first.
            values = list(args) + [default for _, _, default in self.kept[len(args):]]
            if restores:
                for position, restore in restores:
                    values[position] = restore(values[position])
            full = self.full_args(values)
            n = self.positional
            if variadic:
                out = fn(*full, *extra)
            else:
                by_name = dict(zip(self.names[n:], full[n:]))
                for name in self.keywords:  # a `**kwargs` entry the call did not pass
                    if by_name.get(name) is None:
                        by_name.pop(name, None)
                out = fn(*full[:n], **by_name)
            if fresh_list:
                return _unlisted(out, self.gives_back[1])
            if fresh_then:
                return _fresh_of(out, self.gives_back[1], values)
            # The given buffer is handed back by what Dynamo calls, not by the operator.
            return tuple(out)[1:] if rest_only else out
        return kernel

    def adapt_fake(self, fake):
        """FlashInfer's fake, given the parameters it takes by name; a reason when it lacks one
        that could change the result."""
        try:
            takes = set(inspect.signature(fake).parameters)
        except (TypeError, ValueError):
            return "fake has no signature"
        lacking = [n for n in self.names if n not in takes and n not in FAKE_MAY_LACK]
        if lacking:
            return f"fake lacks {', '.join(lacking)}"
        names = self.names
        count = self.gives_back[1] if self.gives_back and self.gives_back[0] == "fresh" else None

        def adapted(*args):
            full = self.full_args(args)
            out = fake(**{n: v for n, v in zip(names, full) if n in takes})
            return out if count is None else _unlisted(out, count)
        return adapted


def given_result(fn, hints, spec, optional=()):
    """The narrowings of a declaration whose result is the caller's buffer `spec["argument"]`
    when one is given (a correction's `result_is_given`, engine/record.py Given): one for calls that give it
    (and whose `spec["when"]` parameters hold the values named), an operator that writes the
    buffer and returns nothing, or only its other results for the form "list+"; with
    `spec["fresh_otherwise"]`, one more for calls without it, returning the fresh result as
    declared (with the form "list", FlashInfer's `[fresh output]`: the operator returns the
    tensor and what Dynamo calls makes the list, as `fresh_result`'s do), split by `_bare`
    over `optional`. A reason when the declaration does not have the parameters named."""
    argument, when = spec["argument"], spec.get("when", {})
    form = spec.get("form", "itself")
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "schema not expressible (no signature)"
    if argument not in names:
        return f"correction names parameters the kernel lacks ({argument})"
    # A condition on a parameter the release lacks holds (0.6.16's MoE has no LoRA delta).
    conditions = {name: _fits(value) for name, value in when.items() if name in names}
    # The other results as a tuple of their count: a mutating operator returning Tensor[]
    # cannot be functionalized (torch's auto_functionalize refuses list results), so inductor
    # would fail where the trace succeeded.
    fresh = spec["rest"] if form == "list+" else 0
    result = typing.Tuple[(torch.Tensor,) * fresh] if form == "list+" else None
    # One per combination of members of its `Union[scalar, Tensor]` parameters, as `variants`
    # makes them (0.7.4's minimax_h3_varlen_fp8_attention: three descales, a float or a
    # Tensor each).
    splits = _union_splits(hints)
    if isinstance(splits, str):
        return splits
    # (0.7.4 cute_dsl_fused_moe: with its `nvfp4_4over6=_UNSET` call too,
    # `_with_object_defaults`.)
    out = _per_split(fn, hints, splits, fits={argument: _fits_a_tensor, **conditions},
                     result=result)
    if isinstance(out, str):
        return out
    for one in out:
        kept = [name for _, name, _ in one.kept]
        one.gives_back = (form, kept.index(argument))
        if form == "pair":
            # (`second`: the parameter FlashInfer returns beside the buffer, as given: a
            # tensor, declared mutable, or None; without one, None.)
            second = kept.index(spec["second"]) if "second" in spec else None
            one.gives_back = (form, (kept.index(argument), second))
    if spec.get("fresh_otherwise"):
        # With the form "itself" the result is the buffer or the one the function allocates
        # in its place: a Tensor, also where FlashInfer wrote no return annotation (the
        # DeepGEMM grouped GEMMs' `return out`) or a Union whose other members belong to calls
        # `when` excludes (0.7.x prims_ts_fp8_block_scale_routed_moe's unfinalized list).
        otherwise_result = (torch.Tensor if form == "list" or form == "itself" and (
            "return" not in hints or is_union(hints["return"])) else inspect.Parameter.empty)
        fits = {argument: fits_none, **conditions}
        for bare, suffix in _bare(fits, optional):
            fresh = _per_split(fn, hints, splits, fits={**fits, **bare}, result=otherwise_result)
            if isinstance(fresh, str):
                return fresh
            for one in fresh:
                one.suffix = "_fresh" + suffix + one.suffix
                if form == "list":
                    one.gives_back = ("fresh", 1)
            out += fresh
    return out


def is_optional(hint):
    return hint is not None and _is_optional(hint)


def _bare(fits, optional):
    """The extra checks of a fresh-result call's operators: first the call that gives none of
    the optional buffers the declaration marks mutable (its operator declares none of them,
    so it has no mutable argument left: torch 2.9-2.15's inductor cannot lower an operator
    whose only mutable arguments are None, "getitem is not an OpOverload"), then any call,
    whose operator's name says so (the common call keeps the operator's name): (checks,
    operator name suffix) pairs. `optional` is empty where a mutable argument is always a
    tensor (wake.py `_plan`)."""
    left = {name: fits_none for name in optional if name not in fits}
    return [(left, ""), ({}, "_with_buffers")] if left else [({}, "")]


def fresh_result(fn, hints, spec, optional=()):
    """The narrowing of a public function that allocates its outputs unless the caller gives
    buffers for them (a correction's `fresh_only`, engine/record.py Fresh): one operator for calls whose
    `spec["when"]` parameters are all None, returning the `spec["results"]` fresh tensors and
    writing nothing of the caller's. A call that gives a buffer is traced as shipped: its
    result is then the buffer, or a tuple holding it, by a dtype no check here can test. A
    `Union[scalar, Tensor]` parameter (gated_residual_next_rmsnorm's `alpha`) gives one such
    operator per member (per combination of several), as in `variants`."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "schema not expressible (no signature)"
    then = tuple(spec.get("then", ()))
    missing = [name for name in (*spec["when"], *then) if name not in names]
    if missing:
        return f"correction names parameters the kernel lacks ({', '.join(missing)})"
    count = spec["results"]
    result = torch.Tensor if count == 1 else typing.Tuple[(torch.Tensor,) * count]
    fits = {name: _fits(value) for name, value in spec["when"].items()}
    # The arguments FlashInfer returns after its fresh results (0.7.4's gdn_fused_decode_step:
    # `(output, conv_state, ssm_state)`, its pools updated in place): tensors, which the
    # operator declares mutable (hooks/ops/engine/wake.py) and never returns; what Dynamo calls
    # hands them back after the operator's fresh results.
    fits.update({name: _fits_a_tensor for name in then})
    splits = _union_splits(hints)
    if isinstance(splits, str):
        return splits
    out = []
    for bare, suffix in _bare(fits, optional):
        for split in splits:
            how = dict(split=split, fits={**fits, **bare}, result=result)
            if spec.get("object_defaults"):
                # (0.7.x's SM12x MoE GEMMs' `epi`: the call that leaves it at its default too.)
                ones = _with_object_defaults(fn, hints, **how)
            else:
                ones = [Narrowing.of(fn, hints, **how)]
            if isinstance(ones, str):
                return ones
            for fresh in ones:
                if isinstance(fresh, str):
                    return fresh
                fresh.suffix = suffix + fresh.suffix
                out.append(_fresh_form(fresh, spec, count, then))
    return out


def _fresh_form(fresh, spec, count, then):
    """`fresh` (a narrowing of `fresh_result`) with how its call hands back its result."""
    if then:
        kept = [name for _, name, _ in fresh.kept]
        fresh.gives_back = ("fresh+", (count, tuple(kept.index(name) for name in then)))
    elif spec.get("form") == "list":
        # FlashInfer's result is a list of the fresh tensors: the operator returns them as a
        # Tensor or a tuple (a mutating operator returning Tensor[] cannot be functionalized,
        # and a workspace declared mutable makes one), and what Dynamo calls makes the list.
        fresh.gives_back = ("fresh", count)
    return fresh


def _fresh_of(out, shape, args):
    """The fresh tensors of FlashInfer's result `(*fresh, *arguments)` (`fresh_only`'s `then`),
    as the operator returns them; `shape` is (how many are fresh, the positions among the
    operator's arguments of those it returns after them). Raises when the rest of the result
    is not those arguments themselves: the operator would then hide a result."""
    count, positions = shape
    out = tuple(out)
    given = [args[p] for p in positions]
    if len(out) != count + len(given) or any(o is not g for o, g in zip(out[count:], given)):
        raise RuntimeError(f"expected {count} fresh tensors, then the arguments given")
    return out[0] if count == 1 else out[:count]


def _unlisted(out, count):
    """FlashInfer's list of `count` fresh tensors as the operator returns them: the tensor
    itself for one, else a tuple."""
    out = tuple(out)
    if len(out) != count:
        raise RuntimeError(f"expected {count} fresh tensors, got {len(out)}")
    return out[0] if count == 1 else out


def prototype_of(fn, parameters, result):
    """A stand-in for `fn` with these parameters and result, for `torch.library.infer_schema`
    (which reads only the signature)."""
    def prototype(*args):
        raise NotImplementedError

    # (mypy has no type for an attribute set on a function: python/mypy#2087)
    prototype.__signature__ = inspect.signature(fn).replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=result)
    prototype.__name__ = fn.__name__
    return prototype


def through_ops(narrowed, as_shipped):
    """What Dynamo calls in place of FlashInfer's function: the first of the (narrowing,
    operator) pairs whose checks the call fits, else the function as shipped. (Dynamo inlines
    it with no source for its closure, so the closure holds only tuples, constants and
    functions.)"""
    constant_key = _constant(generator_key)
    variants = tuple((tuple(n.checks), tuple(n.kept), op, n.gives_back, n.variadic,
                      tuple(n.names), tuple((p, constant_key) for p, _ in n.converts))
                     for n, op in narrowed)

    def through_op(*args, **kwargs):
        for checks, kept, op, gives_back, variadic, names, converts in variants:
            # A keyword the operator does not take (one a `**kwargs` passes on): as shipped.
            fit = all(name in names for name in kwargs)
            for index, name, default, fits in checks:
                if not fit:
                    break
                if not fits(args[index] if index < len(args) else kwargs.get(name, default)):
                    fit = False
            if fit:
                values = [args[index] if index < len(args) else kwargs.get(name, default)
                          for index, name, default in kept]
                if variadic is not None:
                    values += pack_variadic(args[variadic:])
                for position, convert in converts:
                    values[position] = convert(values[position])
                out = op(*values)
                if gives_back is None:
                    return out
                form, position = gives_back
                if form == "fresh":
                    # (`position`: how many fresh tensors the operator returns.)
                    return [out] if position == 1 else list(out)
                if form == "fresh+":
                    # (`position`: how many are fresh, the arguments returned after them.)
                    count, positions = position
                    fresh = (out,) if count == 1 else tuple(out)
                    return (*fresh, *[values[p] for p in positions])
                if form == "itself":
                    return values[position]
                if form == "pair":
                    # (`position`: the buffer's and the second given argument's, None when
                    # FlashInfer returns None there: recurrent KDA's `(output, None)`.)
                    buffer, second = position
                    return (values[buffer], None if second is None else values[second])
                if form == "list":
                    return [values[position]]
                return [values[position], *out]
        return as_shipped(*args, **kwargs)
    return through_op


def _constant(fn):
    """`fn` as a function Dynamo calls at trace time, its result a constant of the graph."""
    from torch._dynamo import assume_constant_result
    return assume_constant_result(fn)


def _member_fits(member):
    if member is torch.Tensor:
        return _fits_a_tensor
    return _fits_not_a_tensor


def as_shipped(fn):
    """A copy of `fn` that Dynamo traces as FlashInfer ships it (the substitution is keyed to
    `fn` itself), for the calls a narrowed operator does not take."""
    import types
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
