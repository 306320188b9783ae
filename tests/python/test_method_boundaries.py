"""A wrapper method as an operator (hooks/ops/mechanisms/method_boundaries.py), on 0.7.4's prepared contiguous
grouped FP8 GEMM: eager calls run FlashInfer's method as they are; a compiled call goes
through dynafold's operator, by the object's key, and runs the method at run time; a call the
operator does not take (an operand left to the prepared one) is traced as FlashInfer ships it;
each object is its own graph; a graph whose object is gone says so.

The method's body is replaced by a CPU stand-in (FlashInfer's launches a Blackwell program),
and its boundary made again over it, as the import made it over FlashInfer's."""

from conftest import run, result_of
from test_fold import PYTHON, flashinfer_env

SCRIPT = r"""
import gc, json, sys, torch
import flashinfer.gemm.cake_grouped_fp8_gemm as m

boundaries = sys.modules["_dynafold_ops.mechanisms.method_boundaries"]
cls = m.PreparedGroupGemmFp8NtGroupwiseContiguous
out = {"dispatcher": getattr(vars(cls)["launch"], "_dynafold_dispatcher", False),
       "init_holds": getattr(cls.__init__, "_dynafold_holds", False)}
ran = []


def launch(self, a=None, a_scale=None, m_indices=None, out=None) -> torch.Tensor:
    ran.append(torch.compiler.is_compiling())
    if out is None:
        return self.bound_out
    out.copy_(a * a_scale + m_indices + self.weight)
    return out


from typing import Optional
launch.__annotations__ = {name: Optional[torch.Tensor]
                          for name in ("a", "a_scale", "m_indices", "out")}
launch.__annotations__["return"] = torch.Tensor
cls.launch = launch
boundaries.install(m, [("PreparedGroupGemmFp8NtGroupwiseContiguous", "launch")])


def prepared(weight):
    obj = cls.__new__(cls)
    obj.weight, obj.bound_out = weight, torch.zeros(4, 2)
    boundaries.hold(obj)
    return obj


p, q = prepared(1.0), prepared(2.0)
a, s, i = torch.randn(4, 2), torch.randn(4, 2), torch.ones(4, 2)
eager = p.launch(a, s, i, torch.empty(4, 2))
out["eager_ran_eagerly"] = ran == [False]
graphs = []


def backend(gm, inputs):
    graphs.append(sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}))
    return gm.forward


f = torch.compile(lambda w, a, s, i: w.launch(a, s, i, torch.empty(4, 2)) * 2,
                  fullgraph=True, backend=backend)
ran.clear()
got = f(p, a, s, i)
out["compiled_equal"] = torch.equal(got, eager * 2)
out["compiled_ran_at_run_time"] = ran == [False]
out["targets"] = graphs[-1]
out["other_object"] = torch.equal(f(q, a, s, i), (a * s + i + 2.0) * 2)
out["graphs"] = len(graphs)
ran.clear()
try:
    torch.compile(lambda w: w.launch() + 1, fullgraph=True, backend="eager")(p)
    out["bound_operands"] = "traced" if ran == [True] else f"ran {ran}"
except Exception as e:  # a break there (fullgraph): not the operator either
    out["bound_operands"] = "break" if not ran else f"ran {ran}"
key = p._dynafold_key
del p
gc.collect()
try:
    boundaries.held(key)
    out["gone"] = None
except RuntimeError as e:
    out["gone"] = str(e)
print("RESULT " + json.dumps(out))
"""


def test_a_wrapper_method_is_an_operator_by_its_objects_key(preload, tmp_path):
    env = flashinfer_env("0.7.4", tmp_path, LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", SCRIPT], env, timeout=300))
    assert got["dispatcher"] is True and got["init_holds"] is True, got
    assert got["eager_ran_eagerly"] is True, got
    assert got["compiled_equal"] is True and got["compiled_ran_at_run_time"] is True, got
    assert any("prepared_group_gemm_fp8_nt_groupwise_contiguous_launch" in t
               for t in got["targets"]), got
    # A second object: its own graph (the key is guarded), its own state.
    assert got["other_object"] is True and got["graphs"] == 2, got
    # launch() leaving its operands to the prepared ones is no call the operator takes.
    assert got["bound_operands"] in ("traced", "break"), got
    assert "no longer exists" in got["gone"], got


def test_every_method_boundary_module_is_hooked_after_import():
    """An op record declaring a `Class.method` (hooks/ops/registry) is installed by the
    post-import hook of its module (src/python/src/post_import.rs FLASHINFER_PLANNERS): a
    record whose module the hook does not list would silently stay as FlashInfer ships it."""
    import re
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
    from engine_source import engine
    modules = {op.module for op in engine("registry").OPS
               if op.declare is not None and op.function.count(".") == 1}
    rust = (ROOT / "src" / "python" / "src" / "post_import.rs").read_text()
    listed = re.search(r"FLASHINFER_PLANNERS: &\[&str\] = &\[(.*?)\];", rust, re.S).group(1)
    hooked = set(re.findall(r'"([\w.]+)"', listed))
    assert modules, "no record declares a Class.method"
    assert modules <= hooked, sorted(modules - hooked)


def test_the_boundaries_installed_at_import_are_the_records():
    """FlashInfer's import installs each `Class.method` boundary from
    method_boundaries.BOUNDARIES, without executing the op records (they wait for the first
    compile, hooks/ops/engine/wake.py COMPILE_TIME): the table names exactly the records that
    declare a `Class.method`, no more and no fewer."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
    from engine_source import engine
    records = {(op.module, *op.function.split(".")) for op in engine("registry").OPS
               if op.declare is not None and op.function.count(".") == 1}
    table = engine("mechanisms.method_boundaries").BOUNDARIES
    installed = {(module, *pair) for module, pairs in table.items() for pair in pairs}
    assert records, "no record declares a Class.method"
    assert installed == records, (sorted(installed - records), sorted(records - installed))


B12X_SCRIPT = r"""
import json, sys, torch
import flashinfer.fused_moe.cute_dsl.b12x_moe as m

boundaries = sys.modules["_dynafold_ops.mechanisms.method_boundaries"]
cls = m.B12xMoEWrapper
ran = []


def run(self, x, w1_weight, w1_weight_sf, w2_weight, w2_weight_sf, token_selected_experts,
        token_final_scales, *, w1_alpha, w2_alpha, fc2_input_scale=None,
        input_global_scale=None):
    ran.append(torch.compiler.is_compiling())
    rows = token_selected_experts.size(0)
    if self.use_cuda_graph:
        out = self._moe_output[:rows]
    else:
        out = torch.empty((rows, self.hidden_size), dtype=self.output_dtype)
    out.copy_(x * w1_alpha.sum() + token_final_scales.sum(1, keepdim=True))
    return out


from typing import Optional
run.__annotations__ = {name: torch.Tensor for name in (
    "x", "w1_weight", "w1_weight_sf", "w2_weight", "w2_weight_sf", "token_selected_experts",
    "token_final_scales", "w1_alpha", "w2_alpha")}
run.__annotations__.update(fc2_input_scale=Optional[torch.Tensor],
                           input_global_scale=Optional[torch.Tensor], **{"return": torch.Tensor})
cls.run = run
boundaries.install(m, [("B12xMoEWrapper", "run")])


def wrapper(use_cuda_graph):
    obj = cls.__new__(cls)
    obj.use_cuda_graph, obj.hidden_size, obj.output_dtype = use_cuda_graph, 2, torch.float32
    obj._moe_output = torch.zeros(8, 2)
    boundaries.hold(obj)
    return obj


x, w, scales = torch.randn(4, 2), torch.randn(4, 2), torch.rand(4, 3)
ids = torch.zeros(4, 3, dtype=torch.int32)
out = {}
for graph in (False, True):
    obj = wrapper(graph)
    targets = []

    def backend(gm, inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    f = torch.compile(lambda o, x, ids, s, a: o.run(x, w, w, w, w, ids, s, w1_alpha=a,
                                                    w2_alpha=a) * 2, backend=backend)
    eager = run(obj, x, w, w, w, w, ids, scales, w1_alpha=w[0], w2_alpha=w[0]) * 2
    ran.clear()
    got = f(obj, x, ids, scales, w[0])
    out[str(graph)] = {"equal": torch.equal(got, eager), "ran": ran[:],
                       "operator": any("b12x_moe_wrapper_run" in t for t in targets)}
print("RESULT " + json.dumps(out))
"""


def test_b12x_wrapper_run_is_an_operator_only_without_use_cuda_graph(preload, tmp_path):
    """B12xMoEWrapper.run's boundary (hooks/ops/registry/moe.py) takes a wrapper built without
    use_cuda_graph, whose result is fresh (the record's `when`, a `Holds` on the object); one
    built with use_cuda_graph=True returns a view of its own buffer, which no operator may
    return: that call is no operator and runs as FlashInfer ships it. The method's body is a
    CPU stand-in with FlashInfer's two result forms."""
    env = flashinfer_env("0.7.4", tmp_path, LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", B12X_SCRIPT], env, timeout=300))
    assert got["False"] == {"equal": True, "ran": [False], "operator": True}, got
    assert got["True"]["equal"] is True and got["True"]["operator"] is False, got
    # Traced as shipped (this stand-in) or run eagerly past a break (FlashInfer's own run
    # breaks at its API-logging wrapper): one call either way, never the operator.
    assert got["True"]["ran"] in ([True], [False]), got
