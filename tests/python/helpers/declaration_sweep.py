"""Every declaration of the installed FlashInfer release, compiled and compared with eager.

For each `register_custom_op` in FlashInfer's source (declarations.py) the declaration is made
again exactly as written: its decorator's name, `mutates_args` and other keywords evaluated in
the declaring module, its signature with its annotations and defaults, its declaring module and
qualified name (which the op records are keyed on) and the fake declared beside it, with
FlashInfer's own body. Only the body of the declared function differs: it is the kernel's CPU
stand-in made from the op audit (audit_standins.py), since the function body is the kernel call
and this machine has no GPU. dynafold wakes these declarations at the next compile as it wakes
FlashInfer's.

Then, per module, one function calls every woken declaration on fresh copies of its arguments
made inside the compiled region and returns its results and its arguments' states, compiled with
real inductor and `fullgraph=True`, static and `dynamic=True`, and compared with eager (and the
random generator's position after, with an unused draw in every seeded op's call). A group
that fails is retried one declaration at a time to name the one.

Prints one JSON line: per declaration its status (compiled both ways and equal; not woken and
why; not rebuilt and why; or what differs)."""
import __future__
import ast
import enum
import inspect
import importlib
import json
import pathlib
import re
import sys
import time
import types
import typing
import zlib

import torch
import torch._inductor.config

import flashinfer
import flashinfer.utils as fi_utils
from audit_standins import StandIn, rows
from declarations import declarations
from value_compare import MODES, clone as _clone, same as _same

ROOT = pathlib.Path(__file__).resolve().parents[3]
AUDIT = json.loads((ROOT / "integration" / "op_audit" / "audit.json").read_text())
RELEASE = flashinfer.__version__.split("+")[0]
STANDIN = "__dynafold_standin__"


class Skip(Exception):
    """Why a declaration could not be rebuilt or given arguments."""


def _namespace(module):
    ns = dict(vars(module))
    return ns


def _rebuild(node, ns, body):
    """`node`'s definition without decorators, with `body`, defined in `ns` (under the
    module's `from __future__ import annotations`, when it has it)."""
    fn = ast.FunctionDef(name=node.name, args=node.args, body=body, decorator_list=[],
                         returns=node.returns, type_comment=None, type_params=[])
    tree = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    future = ns.get("annotations")
    flags = future.compiler_flag if isinstance(future, __future__._Feature) else 0
    exec(compile(tree, f"<sweep {node.name}>", "exec", flags=flags, dont_inherit=True), ns)
    return ns.pop(node.name)


def _standin_body(key):
    # return __dynafold_standin__(key, dict(locals()))  -- the locals are exactly the parameters
    call = ast.Call(func=ast.Name(STANDIN, ast.Load()),
                    args=[ast.Constant(key), ast.Call(ast.Name("dict", ast.Load()),
                                                      [ast.Call(ast.Name("locals", ast.Load()),
                                                                [], [])], [])], keywords=[])
    return [ast.Return(call)]


STANDINS = {}


def _dispatch(key, values):
    return STANDINS[key](values)


def rebuild(decl, row):
    """The declaration made again, with the stand-in as its body: (function, name)."""
    key = f"{decl['module']}:{decl['function']}"
    try:
        fn, ns = _with_standin(decl["module"], decl["function"], decl["node"])
    except NameError as e:
        raise Skip(f"signature uses its loader's locals ({e})") from None
    decorator = decl["decorator"]
    try:
        name = eval(compile(ast.Expression(decorator.args[0]), "<name>", "eval"), ns)
    except Exception:
        # An f-string of the loader's JIT uri: any name in FlashInfer's namespace does.
        name = "flashinfer::sweep_" + re.sub(r"\W", "_", decl["function"])
    try:
        keywords = {k.arg: eval(compile(ast.Expression(k.value), "<kw>", "eval"), ns)
                    for k in decorator.keywords}
    except Exception as e:
        raise Skip(f"decorator keywords use its loader's locals ({e})") from None
    fake = None
    if decl["fake"] is not None:
        fake = _rebuild(decl["fake"], ns, decl["fake"].body)
        fake.__module__ = decl["module"]
    fi_utils.register_custom_op(name, mutates_args=keywords.pop("mutates_args"),
                                **keywords)(fn)
    if fake is not None:
        fi_utils.register_fake_op(name)(fake)
    # The fake the operator gets: dynafold's where FlashInfer's is replaced, else FlashInfer's.
    ops = sys.modules["_dynafold_ops.engine.wake"]
    rest = ops.op_corrections.of(fn).get("result_is_given", {}).get("rest_fake")
    STANDINS[key] = StandIn(row, _lenient(ops.op_fakes.override(name, fn) or fake),
                            _lenient(rest and ops.op_fakes.override(rest, fn)))
    return fn, name


def _with_standin(module_name, function, node):
    """`node` (a function's AST) made again in its module's namespace with the stand-in as its
    body, named as the original: (function, namespace)."""
    ns = _namespace(importlib.import_module(module_name))
    ns[STANDIN] = _dispatch
    fn = _rebuild(node, ns, _standin_body(f"{module_name}:{function}"))
    fn.__module__, fn.__qualname__ = module_name, function
    return fn, ns


def extra_declarations(audit):
    """dynafold's own declarations (the op records' `declare`, hooks/ops/registry/) that this release
    has and the op audit has a row for, as (key, module, function, declared name, row). The FP4
    layer's (`_fp4_quantize_cute_dsl`, `mm_fp4`) have no row: their kernels are CuTe DSL and
    cuDNN graphs, checked on fake tensors (test_fp4_layer.py)."""
    out = []
    for module, function, name, _, _ in ops_module().EXTRA_DECLARATIONS:
        row = audit.get((module, function))
        if row is not None:
            out.append((f"{module}:{function}", module, function, name, row))
    return out


def rebuild_extra(module_name, function, name, row):
    """An extra declaration's public function made again from its source with the stand-in as
    its body (without its decorators: FlashInfer's API logger), put in its module's place so
    that dynafold declares it at the next compile as it would FlashInfer's own."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        # (the CuTe DSL kernels' modules import `cutlass`, which this environment lacks)
        raise Skip(f"{type(e).__name__}: {e}") from None
    if "." in function:
        return _rebuild_method(module, function, name, row)
    # The last definition of that name: the one the module binds (fmha_varlen's @overload
    # stubs come first).
    node = next((n for n in reversed(ast.parse(_source_path(module).read_text()).body)
                 if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if node is None:
        raise Skip(f"{function} is not a top-level function of {module_name}")
    key = f"{module_name}:{function}"
    fn, _ = _with_standin(module_name, function, node)
    setattr(module, function, fn)
    STANDINS[key] = StandIn(row, _lenient(ops_module().op_fakes.override(name, fn)))
    return fn, name


# What the fakes of dynafold's wrapper-method declarations read of their object
# (their records' fakes, hooks/ops/registry/moe.py), per "module:Class.method".
OBJECT_ATTRIBUTES = {
    **{f"flashinfer.fused_moe.cute_dsl.fused_moe:{cls}.run": {
        "hidden_size": 8, "output_dtype": torch.float32}
       for cls in ("CuteDslMoEWrapper", "CuteDslMxfp8Mxfp4MoEWrapper")},
}
# The objects made for them (kept alive: the registry holds them weakly).
OBJECTS = []


def _rebuild_method(module, function, name, row):
    """dynafold's declaration of a wrapper method (hooks/ops/mechanisms/method_boundaries.py): the method made
    again from its class's source with the stand-in as its body, put in the class, whose
    boundary is then made again (as its module's import makes it); called on an object made
    without its constructor (which asks for a GPU), holding the attributes its fake reads,
    by that object's key."""
    class_name, method = function.split(".")
    tree = ast.parse(_source_path(module).read_text())
    cls_node = next((n for n in tree.body
                     if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    node = cls_node and next((n for n in cls_node.body
                              if isinstance(n, ast.FunctionDef) and n.name == method), None)
    if node is None:
        raise Skip(f"{function} is not a method of {module.__name__}")
    key = f"{module.__name__}:{function}"
    standin, _ = _with_standin(module.__name__, function, node)
    cls = getattr(module, class_name)
    setattr(cls, method, standin)
    boundaries = sys.modules["_dynafold_ops.mechanisms.method_boundaries"]
    boundaries.install(module, [(class_name, method)])
    fn = boundaries.declaration(module.__name__, function)
    obj = cls.__new__(cls)
    for attr, value in OBJECT_ATTRIBUTES.get(key, {}).items():
        setattr(obj, attr, value)
    OBJECTS.append(obj)
    ARGUMENTS[key] = {boundaries.KEY_PARAMETER: boundaries.hold(obj)}
    fake = _lenient(ops_module().op_fakes.override(name, fn))

    def fake_of_method(**values):
        # The stand-in is called with the method's locals: `self`, not the key.
        if "self" in values:
            values[boundaries.KEY_PARAMETER] = boundaries.hold(values.pop("self"))
        return fake(**values)
    STANDINS[key] = StandIn(row, fake_of_method if fake is not None else None)
    return fn, name


def _source_path(module):
    """A module's source file; a dynafold hook's (`<dynafold>/hooks/NAME.py`, loaded from
    the library: dynafold's declaration of the MLA JIT module's run) is the repository's."""
    name = getattr(module, "__file__", None) or ""
    if name.startswith("<dynafold>/"):
        return ROOT / name[len("<dynafold>/"):]
    return pathlib.Path(inspect.getsourcefile(module))


def _lenient(fake):
    """`fake`, given only the parameters it takes (several of FlashInfer's lack parameters
    added to their kernels since, none of which changes a result's shape; dynafold's operators
    call them the same way, hooks/ops/engine/narrowing.py)."""
    if fake is None:
        return None
    takes = inspect.signature(fake).parameters
    if any(p.kind == p.VAR_KEYWORD for p in takes.values()):
        return fake
    return lambda **values: fake(**{k: v for k, v in values.items() if k in takes})


# --- arguments ------------------------------------------------------------------------------

SHAPES = [(4, 64), (4, 4, 64), (2, 4, 4, 64), (64,)]
# Optional tensors some kernels require (the chunked linear-attention prefills raise without
# `cu_seqlens`): given, as callers give them.
REQUIRED_OPTIONALS = {"cu_seqlens"}


def _value(name, hint, shape, writes):
    origin, members = typing.get_origin(hint), typing.get_args(hint)
    if name in ("seed", "offset") and type(None) in members:
        return None  # drawn from the generator, as when a caller gives no seed
    if name in ("plan_info_vec", "plan_info_vec_p", "plan_info_vec_d"):
        # As attention_plans hands it to a compiled graph: an int64 CPU tensor (the POD
        # kernels' prefill and decode plans too).
        return torch.tensor([2, 2], dtype=torch.int64)
    if hint is torch.Tensor:
        g = torch.Generator().manual_seed(zlib.crc32(name.encode()) % 1000)
        return torch.randn(shape, generator=g)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        present = [m for m in members if m is not type(None)]
        if torch.Tensor in present:
            return _value(name, torch.Tensor, shape, writes)
        if not present:
            return None
        return _value(name, present[0], shape, writes)
    if origin in (list, tuple, typing.List, typing.Tuple, typing.Sequence):
        inner = members[0] if members else int
        return [_value(f"{name}{i}", inner, shape, writes) for i in range(2)]
    if hint is int or hint is torch.SymInt:
        return 2
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        # (0.7.x Prims-TS's `Fp8QuantizationType`: an int to the operator, the enum back)
        return next(iter(hint))
    if hint is float:
        return 0.5
    if hint is bool:
        return False
    if hint is str:
        return ""
    if hint is torch.dtype:
        return torch.float32
    if hint is torch.device:
        return torch.device("cpu")
    if hint is torch.Generator:
        return None
    if origin is typing.Literal and members:
        # A backend named by a Literal (mm_bf16_fp4's required `backend`): its first member.
        return members[0]
    raise Skip(f"no argument for {name}: {hint}")


# Scalars a declaration needs other than its default to fit the sweep's tensors: 0.7.4's
# concat_mla_kv_quant_fp8 splits `kv_nope`'s last dim at `nope_dim` (default 128, wider than
# any sweep shape). trtllm_fmha_v2_prefill (dynafold's declaration) takes `qkv` as the flat
# tuple its narrowing wakes (hooks/ops/engine/narrowing.py), here separate Q, K, V.
ARGUMENTS = {"flashinfer.mla_kv_pack:concat_mla_kv_quant_fp8": {"nope_dim": 32},
             "flashinfer.prefill:trtllm_fmha_v2_prefill": {
                 "qkv": tuple(torch.randn((4, 4, 64), generator=torch.Generator().manual_seed(i))
                              for i in range(3)),
                 "input_layout": "SEPARATE_Q_K_V"},
             # fmha_varlen (dynafold's declaration) is woken for the call that gives its plan
             # (hooks/ops/engine/narrowing.py `plan_info`), as the ragged wrapper's cutlass backend does.
             "flashinfer.prefill:fmha_varlen": {
                 "plan_info": [torch.arange(3, dtype=torch.int32) for _ in range(4)]},
             # dynafold's declaration of kimi_k3_fp8_projection takes its prepared weight by
             # key (hooks/ops/mechanisms/attention_plans.py `_hold`, called here as a trace calls it); the
             # fake reads the weight's n_valid.
             "_dynafold_ops.mechanisms.attention_plans:kimi_k3_project": {
                 "prepared": lambda: sys.modules["_dynafold_ops.mechanisms.attention_plans"]._hold(_PREPARED),
                 "workspace": None}}


class _Prepared:
    """A Kimi-K3 prepared projection weight, as much of it as the fake reads."""
    n_valid = 16


_PREPARED = _Prepared()


def _may_be_tensor(hint):
    return hint is torch.Tensor or torch.Tensor in typing.get_args(hint)


def arguments(fn, row, fake, keep_result):
    """Arguments for `fn` its fake accepts, trying a few tensor ranks."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:
        raise Skip(f"annotations unresolvable ({type(e).__name__})") from None
    # Annotations FlashInfer left out, as dynafold's operator takes them (a correction's
    # `annotations`: 0.7.x's SM12x MoE GEMMs' tensors).
    hints = {**ops_module().op_corrections.of(fn).get("annotations", {}), **hints}
    params = inspect.signature(fn).parameters
    last = None
    for shape in SHAPES:
        values = {}
        for p in params.values():
            if p.kind == p.VAR_POSITIONAL:
                # A JIT run function's variant arguments (a correction's `variadic`):
                # a tensor, an absent `maybe_*` tensor, a double and an int64, as the
                # attention-sink and bidirectional wrappers pass them.
                values[VARARGS] = (_value("extra_tensor", torch.Tensor, shape, ()), None,
                                   0.25, 3)
                continue
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY, p.KEYWORD_ONLY):
                continue
            hint = hints.get(p.name, p.annotation)
            if p.default is not p.empty and (not _may_be_tensor(hint) or (
                    p.default is None and p.name not in row["writes"]
                    and p.name not in REQUIRED_OPTIONALS)):
                # As callers call it; an optional buffer the kernel writes is given, to see
                # the write (single decode's `maybe_lse`).
                values[p.name] = p.default
            else:
                values[p.name] = _value(p.name, hint, shape, row["writes"])
        values.update({k: v() if callable(v) else v for k, v in ARGUMENTS.get(
            f"{fn.__module__}:{fn.__qualname__}", {}).items()})
        # The values the operator takes a given-buffer call, or a fresh-result call, with
        # (the op's correction).
        fix = ops_module().op_corrections.of(fn)
        for form in ("result_is_given", "fresh_only"):
            when = fix.get(form, {}).get("when", {})
            # (torch.Tensor: a tensor given, a prepared wrapper's operand replaced)
            values.update({k: _value(k, torch.Tensor, shape, row["writes"])
                           if v is torch.Tensor else v for k, v in when.items() if k in values})
        # A parameter the operator leaves out (hooks/ops/engine/narrowing.py) with the value it gives
        # back, as a call it takes has it (a default that is an object, 0.7.x's
        # `nvfp4_4over6=_UNSET`, is a call it does not take).
        narrowing = ops_module().op_narrowing
        for name in values:
            if name == VARARGS:
                continue
            rule = narrowing._rule(name, hints.get(name, params[name].annotation))
            if rule is not None and rule.annotation is None:
                values[name] = rule.given_back
        if fake is None or not keep_result:
            return values
        try:
            fake(**values)
            return values
        except Exception as e:
            last = e
    raise Skip(f"its fake raised on every shape tried ({type(last).__name__}: "
               f"{str(last).splitlines()[0][:80] if str(last) else ''})")


# --- compile and compare ------------------------------------------------------------------


# The suffix of a declaration's key for its call without the buffer it may be given.
FRESH = " (fresh)"

# The key of a declaration's `*args` among its sweep values (not a parameter name).
VARARGS = "*args"


def _call(fn, values):
    """`fn` on `values`, by name; a declaration ending in `*args` takes every parameter by
    position, then its variant arguments (its parameters come in order, none keyword-only)."""
    if VARARGS not in values:
        return fn(**values)
    return fn(*[v for k, v in values.items() if k != VARARGS], *values[VARARGS])


def _group(entries):
    """One function calling every entry's declaration, on copies made inside it of what its
    kernel writes (a buffer made in the graph and read after the call is where an undeclared
    write shows as a wrong value; what the kernel only reads is passed as it is)."""
    def f(inputs):
        out = []
        for (fn, _, seeded, keep_result, written), values in zip(entries, inputs):
            values = {k: _clone(v) if k in written else v for k, v in values.items()}
            if seeded:
                _call(fn, values)  # a draw whose result is unused still advances the generator
            result = _call(fn, values)
            out.append(((result if keep_result else None), values))
        return out
    return f


def compare(entries, dynamic):
    inputs = [e[1] for e in entries]
    f = _group([(e[0], None, e[2], e[3], e[4]) for e in entries])
    torch.manual_seed(0)
    eager = f([{k: _clone(v) for k, v in i.items()} for i in inputs])
    eager_rng = torch.default_generator.get_state()
    torch._dynamo.reset()
    torch.manual_seed(0)
    try:
        got = torch.compile(f, fullgraph=True, dynamic=dynamic, backend="inductor")(
            [{k: _clone(v) for k, v in i.items()} for i in inputs])
    except Exception as e:
        return [f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"] * len(
            entries)
    rng_same = torch.equal(eager_rng, torch.default_generator.get_state())
    out = []
    for (result_e, args_e), (result_c, args_c) in zip(eager, got):
        if not _same(result_e, result_c):
            out.append("result differs from eager")
        elif not _same(args_e, args_c):
            changed = [k for k in args_e if not _same(args_e[k], args_c[k])]
            out.append(f"argument state differs from eager ({', '.join(changed)})")
        elif not rng_same:
            out.append("generator position differs from eager")
        else:
            out.append("equal")
    return out


def _wake_error(declared):
    try:
        return ops_module()._wake(declared) or "woken on a second try"
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"


def ops_module():
    return sys.modules["_dynafold_ops.engine.wake"]


_START = time.monotonic()


def _phase(what):
    print(f"sweep: {what} at {time.monotonic() - _START:.1f} s", file=sys.stderr, flush=True)


def main():
    # Scalar C++ (no vectorisation): a quarter less compile time on 2 cores, and what is
    # checked (ordering, aliasing and mutation of buffers around each operator) is the same.
    torch._inductor.config.cpp.simdlen = 1
    ops = sys.modules["_dynafold_ops.engine.wake"]
    audit = rows(AUDIT, RELEASE)
    status = {}
    built = []
    only = sys.argv[1:]  # substrings of the declarations to sweep (all by default)
    for decl in declarations(pathlib.Path(flashinfer.__file__).parents[1], nodes=True):
        key = f"{decl['module']}:{decl['function']}"
        if only and not any(o in key for o in only):
            continue
        row = audit.get((decl["module"], decl["function"]))
        if row is None:
            status[key] = "not audited"
            continue
        try:
            fn, name = rebuild(decl, row)
        except Skip as e:
            status[key] = f"not rebuilt: {e}"
            continue
        except Exception as e:
            status[key] = f"not rebuilt: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            continue
        built.append((key, decl, row, fn, name))
    for key, module, function, name, row in extra_declarations(audit):
        if only and not any(o in key for o in only):
            continue
        try:
            fn, name = rebuild_extra(module, function, name, row)
        except Skip as e:
            status[key] = f"not rebuilt: {e}"
            continue
        built.append((key, {"module": module}, row, fn, name))

    _phase("rebuilt")
    # Wake what was declared (as the start of a compile does).
    torch.compile(lambda x: x + 1, fullgraph=True, backend="eager")(torch.ones(1))
    woken = {id(fn) for entries in ops._ops.values() for _, fn in entries}
    groups = {}
    for key, decl, row, fn, _name in built:
        if id(fn) not in woken:
            declared = next(d for d in ops._declarations if d.fn is fn)
            plan = ops._plan(declared)
            status[key] = f"not woken: {plan if isinstance(plan, str) else _wake_error(declared)}"
            continue
        # Prefill's run functions are declared `-> None` and `return o` anyway; what an
        # operator declared to return nothing returns is dropped, and so is not compared.
        keep_result = typing.get_type_hints(fn).get("return", None) is not type(None)
        try:
            values = arguments(fn, row, STANDINS[key].fake, keep_result)
        except Skip as e:
            status[key] = f"no arguments: {e}"
            continue
        groups.setdefault(decl["module"], []).append(
            (key, (fn, values, row["rng"], keep_result, frozenset(row["writes"]))))
        # A declaration whose result is the caller's buffer when given is also an operator
        # for the call that gives none (a correction's `fresh_otherwise`: SGLang's
        # mm_fp4): swept too, under its own key.
        given = ops.op_corrections.of(fn).get("result_is_given", {})
        if given.get("fresh_otherwise") and values.get(given["argument"]) is not None:
            groups[decl["module"]].append((key + FRESH, (
                fn, {**values, given["argument"]: None}, row["rng"], keep_result,
                frozenset(row["writes"]) - {given["argument"]})))

    _phase("woken")
    # One compile for every declaration (inductor on 2 cores costs seconds per compile); a
    # failing set is split by module, then by declaration, to name the one.
    members = [m for ms in groups.values() for m in ms]
    pending = [members]
    while pending:
        batch = pending.pop()
        results = {mode: compare([e for _, e in batch], dynamic) for mode, dynamic in MODES}
        _phase(f"compiled {len(batch)}")
        failed = any(r != "equal" for rs in results.values() for r in rs)
        if failed and len(batch) > 1:
            modules = {key.split(":")[0] for key, _ in batch}
            if len(modules) > 1:
                pending += [[m for m in batch if m[0].split(":")[0] == module]
                            for module in modules]
            else:
                pending += [[m] for m in batch]
            continue
        for i, (key, _) in enumerate(batch):
            verdict = {mode: results[mode][i] for mode in results}
            status[key] = ("equal" if set(verdict.values()) == {"equal"} else
                           "; ".join(f"{m}: {v}" for m, v in verdict.items() if v != "equal"))
            if status[key] == "equal" and STANDINS[key.removesuffix(FRESH)].traced:
                # Dynamo inlined the declared function (a narrowed call that did not fit):
                # equal, but not through the operator.
                status[key] = "equal, traced as shipped"
    checks = ops.status().get("fake checks", {})
    print("RESULT " + json.dumps({"release": RELEASE, "status": status, "checks": checks}),
          flush=True)


if __name__ == "__main__":
    main()
