"""One op's record: everything dynafold knows about one FlashInfer op, in one place.

An op is keyed by its declaring function, (module, qualified name): the function FlashInfer's
`register_custom_op` decorates, or the public function dynafold declares an operator of
(`declare`). The key is the function, not the declared name, because the declared name of many
ops carries a JIT uri that changes with every build
(`flashinfer::single_decode_with_kv_cache_dtype_q_..._run`).

A record says how the engine treats its op: dynafold's own declaration (`declare`), where
FlashInfer's declaration says less than its kernel does (`correction`, and `by_release` for a
release whose function of that key does something else), the fake that replaces FlashInfer's
(`fake`), and where the declaration sweep checks it (`sweep`). Each correction names where the
audit found it (docs/op-audit: FlashInfer's C++/CUDA source per release). The records live in
`registry/`, one file per family, each op's fake beside it; `registry/__init__.py` derives the
tables the engine reads.

Plain data: importing this module imports neither torch nor the rest of the engine.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

# The module that holds dynafold's own declarations of JIT calls (mechanisms/attention_plans.py).
PLANS = "_dynafold_ops.mechanisms.attention_plans"

# Keyword-only where the interpreter has it (3.10 on): a record reads as `field=value`.
_KEYWORDS = {"frozen": True, **({"kw_only": True} if sys.version_info >= (3, 10) else {})}


class Family(enum.Enum):
    """The registry file an op's record lives in."""

    ATTENTION = "attention"
    GEMM = "gemm"
    MOE = "moe"
    QUANTIZATION = "quantization"
    SAMPLING = "sampling"
    NORM_ACTIVATION = "norm_activation"
    LINEAR_ATTENTION = "linear_attention"
    COMM = "comm"


class Form(str, enum.Enum):
    """How FlashInfer's result holds what the operator does not return as declared (a str, so
    that the engine's comparisons with "itself", "list", "list+" and "pair" hold)."""

    # The caller's buffer itself.
    ITSELF = "itself"
    # `[buffer]`; for `Fresh`, the list of its fresh tensors.
    LIST = "list"
    # `[buffer, *fresh tensors]`.
    LIST_PLUS = "list+"
    # `(buffer, the `second` parameter's value as given: fmha_varlen's `(out, lse)`)`; without
    # `second`, `(buffer, None)`: recurrent KDA's `(output, None)`.
    PAIR = "pair"


@dataclasses.dataclass(**_KEYWORDS)
class Declare:
    """dynafold's own declaration of the op's function: a boundary FlashInfer forgot, a public
    path that reaches the JIT machinery, the autotuner (threading locks, classes defined per
    call) or an FFI call outside any declared op. Woken like FlashInfer's own declarations once
    its module is loaded (engine/wake.py EXTRA_DECLARATIONS); a `Class.method` function is a
    wrapper method (mechanisms/method_boundaries.py)."""

    # The parameters the function writes (its `mutates_args`).
    mutates: Tuple[str, ...] = ()
    # The operator's schema where the annotations cannot say it (None: the annotations').
    schema: Optional[str] = None


@dataclasses.dataclass(**_KEYWORDS)
class Given:
    """`result_is_given`: the declared result is the caller's buffer when one is given, which
    no operator may return. The call that gives the buffer (and fits `when`) becomes an
    operator that writes it (declared mutable) and returns nothing or only the fresh tensors;
    what Dynamo calls hands back the buffer as FlashInfer does (engine/narrowing.py,
    `given_result`). Any other call is traced as FlashInfer ships it."""

    # The buffer's parameter.
    argument: str
    form: Form = Form.ITSELF
    # {parameter: value that must hold (torch.Tensor: a tensor given)}.
    when: Optional[Mapping[str, Any]] = None
    # With form PAIR: the parameter FlashInfer returns beside the buffer, as given.
    second: Optional[str] = None
    # With form LIST_PLUS: how many fresh tensors follow the buffer, and the name of their
    # fake (one of the record's `fakes`).
    rest: Optional[int] = None
    rest_fake: Optional[str] = None
    # A call without a buffer is an operator too, returning the fresh result as declared
    # (with form LIST, `[the one fresh tensor]`: the operator returns the tensor).
    fresh_otherwise: bool = False

    def entry(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"argument": self.argument, "form": self.form}
        if self.when is not None:
            out["when"] = dict(self.when)
        if self.second is not None:
            out["second"] = self.second
        if self.rest is not None:
            out["rest"] = self.rest
        if self.rest_fake is not None:
            out["rest_fake"] = self.rest_fake
        if self.fresh_otherwise:
            out["fresh_otherwise"] = True
        return out


@dataclasses.dataclass(**_KEYWORDS)
class Fresh:
    """`fresh_only`, for dynafold's declaration of a public function that allocates its
    outputs unless the caller gives buffers for them: the call whose `when` parameters are all
    None becomes an operator that returns the `results` fresh tensors and writes nothing of
    the caller's (with no buffer given there is none to write); a call that gives one is traced
    as FlashInfer ships it (engine/narrowing.py, `fresh_result`)."""

    # {parameter: None}; also True/False for a flag the fresh result depends on, or the backend
    # name whose path it describes.
    when: Mapping[str, Any]
    results: int
    # LIST: the declared result is a list of the fresh tensors, which the operator returns as a
    # tensor or tuple and what Dynamo calls makes a list again.
    form: Optional[Form] = None
    # The parameters FlashInfer's result holds after the fresh tensors (state pools updated in
    # place and returned, 0.7.4's gdn_fused_decode_step): declared mutable, not returned by the
    # operator, and handed back after its results by what Dynamo calls.
    then: Tuple[str, ...] = ()
    # True where a parameter engine/narrowing.py NARROWED leaves out has an object default
    # (0.7.x's SM12x MoE GEMMs' `epi`): the call that leaves it there is an operator too,
    # FlashInfer's function getting that default back (as `variants` does).
    object_defaults: bool = False

    def entry(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"when": dict(self.when), "results": self.results}
        if self.form is not None:
            out["form"] = self.form
        if self.then:
            out["then"] = self.then
        if self.object_defaults:
            out["object_defaults"] = True
        return out


@dataclasses.dataclass(frozen=True)
class Holds:
    """A `when` value for a wrapper method's `wrapper_key` (mechanisms/method_boundaries.py):
    the object the key holds has these attribute values, which its constructor sets and
    nothing changes after (B12xMoEWrapper's `use_cuda_graph`). Read once, while Dynamo traces,
    for the key the graph guards on; a call on any other object is traced as shipped."""

    attributes: Tuple[Tuple[str, Any], ...]

    def __init__(self, **attributes: Any) -> None:
        object.__setattr__(self, "attributes", tuple(sorted(attributes.items())))


@dataclasses.dataclass(**_KEYWORDS)
class Positional:
    """For a caller that passes `count` positional arguments laid out its own way (0.6.7.post3's
    tensor-core decode): from position `start` on, what Dynamo calls gives them to the operator
    under `names` (None: dropped); other calls as they come."""

    count: int
    start: int
    names: Tuple[Optional[str], ...]

    def entry(self) -> Dict[str, Any]:
        return {"count": self.count, "from": self.start, "names": self.names}


@dataclasses.dataclass(**_KEYWORDS)
class Correction:
    """Where FlashInfer's declaration says less than its kernel does. FlashInfer's
    `mutates_args` are not exercised by FlashInfer (its declarations are switched off) and some
    have rotted: a kernel that writes a tensor the declaration does not list gives a compiled
    graph that reads the buffer before the write (NaN where eager is right). The first real run
    of every woken operator checks what its kernel wrote, whether a result shares storage with
    an input and whether the generator moved (engine/fake_check.py), so a correction missing
    stops a compiled graph at its first run instead of giving a wrong answer.

    Every field is optional; the engine reads `entry()` (engine/corrections.py)."""

    # Parameters the kernel (or the Python body) writes that `mutates_args` leaves out; the
    # operator declares them mutable too.
    also_mutates: Tuple[str, ...] = ()
    # The parameter the declared result is (an aliased result, which a custom operator cannot
    # return). The operator is then defined as a mutation of that parameter that returns
    # nothing, and what Dynamo calls returns the argument itself.
    returns_argument: Optional[str] = None
    # The kernel draws from the random generator although no parameter says so; the operator
    # gets `torch.Tag.nondeterministic_seeded` and an ordered effect (a `generator` parameter
    # already says so).
    seeded: bool = False
    result_is_given: Optional[Given] = None
    fresh_only: Optional[Fresh] = None
    # True for a JIT run function ending in `*args` (a JIT variant's additional tensors and
    # scalars): the operator takes them packed, the tensors declared mutable
    # (engine/narrowing.py, VARIADIC).
    variadic: bool = False
    # {parameter: annotation} for parameters FlashInfer wrote no annotation for (0.7.x's SM12x
    # CuTe DSL MoE GEMMs: their tensors and `tile`), or one its own default contradicts (0.6.3's
    # `enable_pdl: bool = None`, which no schema takes), the types its callers pass; the
    # operator's schema reads them as if FlashInfer had written them.
    annotations: Optional[Mapping[str, Any]] = None
    # {name: annotation} of the entries a trailing `**kwargs` takes (0.7.x
    # grouped_gemm_nt_masked's `alpha`, `alpha_dtype`): operator parameters defaulting to None,
    # given to FlashInfer's function only when not None; a call passing another keyword is
    # traced as shipped.
    keywords: Optional[Mapping[str, Any]] = None
    # {parameter: value} that must hold for a call to go through the operator (else traced as
    # shipped), for a declaration woken with neither `result_is_given` nor `fresh_only`.
    when: Optional[Mapping[str, Any]] = None
    positional: Optional[Positional] = None
    # Why the declaration cannot become a correct operator at all (it stays as FlashInfer ships
    # it: traced, a graph break where it reaches the kernel, never a wrong value).
    dormant: Optional[str] = None

    def entry(self) -> Dict[str, Any]:
        """The correction as engine/corrections.py reads it: only the fields given."""
        out: Dict[str, Any] = {}
        if self.also_mutates:
            out["also_mutates"] = self.also_mutates
        if self.returns_argument is not None:
            out["returns_argument"] = self.returns_argument
        if self.seeded:
            out["seeded"] = True
        if self.result_is_given is not None:
            out["result_is_given"] = self.result_is_given.entry()
        if self.fresh_only is not None:
            out["fresh_only"] = self.fresh_only.entry()
        if self.variadic:
            out["variadic"] = True
        if self.annotations is not None:
            out["annotations"] = dict(self.annotations)
        if self.keywords is not None:
            out["keywords"] = dict(self.keywords)
        if self.when is not None:
            out["when"] = dict(self.when)
        if self.positional is not None:
            out["positional"] = self.positional.entry()
        if self.dormant is not None:
            out["dormant"] = self.dormant
        return out


@dataclasses.dataclass(frozen=True)
class Fake:
    """dynafold's fake, where FlashInfer's is wrong or missing: the shape arithmetic of
    FlashInfer's own kernel wrapper, written once, and checked against the kernel at its first
    real run like every other fake (engine/fake_check.py).

    With `reads`, `fn` takes the declaration's arguments as one dict by parameter name, so one
    rule serves every release's signature of the same kernel (FlashInfer appends parameters
    that do not change a result's shape, e.g. `is_global_scale_inversed`, `nvfp4_4over6_code`),
    and serves only a kernel that has every parameter it reads (else FlashInfer's fake stays).
    Without, `fn` takes the kernel's own parameters."""

    fn: Callable[..., Any]
    reads: Optional[Tuple[str, ...]] = None


@dataclasses.dataclass(**_KEYWORDS)
class Sweep:
    """Where tests/python/test_declaration_sweep.py checks the op (by its key,
    "module:function"): the releases whose sweep in the SGLang environment must find it equal
    to eager compiled; the releases it is swept in the CuTe DSL environment instead (its module
    imports `cutlass`, nvidia-cutlass-dsl, which the SGLang environment lacks); and what the
    older-layout release's sweep (scripts/lib/env.sh OLD_LAYOUT_RELEASE) must find."""

    equal: Tuple[str, ...] = ()
    cute_dsl: Tuple[str, ...] = ()
    old_layout: Optional[str] = None


@dataclasses.dataclass(**_KEYWORDS)
class Op:
    """One op, by its declaring function. `name` is the declared name where it is stable (None
    where a JIT uri is in it), which dynafold's declaration and the fake go by."""

    family: Family
    module: str
    function: str
    name: Optional[str] = None
    declare: Optional[Declare] = None
    correction: Optional[Correction] = None
    # {release: its own correction}, for a release whose declaring function has this module
    # and qualified name but does something else (an empty Correction where it needs none).
    by_release: Mapping[str, Correction] = dataclasses.field(default_factory=dict)
    fake: Optional[Fake] = None
    # Further fakes by name, for parts of a result the op's own fake does not give
    # ("flashinfer::NAME:scratch", named by `Given.rest_fake`).
    fakes: Mapping[str, Fake] = dataclasses.field(default_factory=dict)
    sweep: Optional[Sweep] = None

    def __post_init__(self) -> None:
        if (self.declare is not None or self.fake is not None) and not self.name:
            raise ValueError(f"{self.key}: a declaration or a fake goes by a declared name")

    @property
    def key(self) -> Tuple[str, str]:
        return (self.module, self.function)
