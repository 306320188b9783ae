"""A JIT module the caller passes in, held by key (hooks/ops/mechanisms/attention_plans.py `_hold`): 0.7.4's
single_{decode,prefill}_with_kv_cache_with_jit_module compile whole with inductor, their
module's `run` an operator; each module object is its own graph (the key is guarded on the
object's identity), the same object reuses its graph, and compiled equals eager, `lse`
included.

The modules are CPU stand-ins that write what FlashInfer's kernels write (`o`, `lse` when
given, the split-KV scratch), each its own way, so a graph reusing another module's key would
give the other module's values."""

from conftest import run, result_of
from test_fold import PYTHON, flashinfer_env

SCRIPT = r"""
import json, torch
import torch._dynamo.utils as dynamo_utils
from flashinfer import decode, prefill

out = {}


class Module:
    '''A built single decode/prefill module: `run` writes o (and lse) from q, k, v and the
    variant's trailing scalars, scaled by this module's own factor.'''

    def __init__(self, factor):
        self.factor = factor
        self.calls = 0

    def run(self, q, k, v, tmp, o, lse, *rest):
        self.calls += 1
        scalars = [x for x in rest if isinstance(x, float)]
        tmp.fill_(7)
        o.copy_((q * self.factor + k.sum(0).mean() - v.mean() + sum(scalars)).to(o.dtype))
        if lse is not None:
            lse.copy_(q.float().sum(-1) * self.factor)


a, b = Module(2.0), Module(3.0)
extra = (None, 0.0, 0.5, 1.0, 1e-4)
q, k, v = torch.randn(4, 8), torch.randn(16, 4, 8), torch.randn(16, 4, 8)


def dec(m, q, k, v):
    return decode.single_decode_with_kv_cache_with_jit_module(m, q, k, v, *extra) * 2


pq = torch.randn(5, 4, 8)


def pre(m, q, k, v):
    o, lse = prefill.single_prefill_with_kv_cache_with_jit_module(
        m, q, k, v, None, None, None, None, *extra[1:], return_lse=True)
    return o + 1, lse


targets = []


def recording(gm, inputs):
    targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    return gm.forward


torch.compile(dec, fullgraph=True, backend=recording)(a, q, k, v)
torch.compile(pre, fullgraph=True, backend=recording)(a, pq, k, v)
out["targets"] = sorted({t for t in targets if "single_" in t})

a.calls = b.calls = 0
compiled = torch.compile(dec, fullgraph=True)
dynamo_utils.counters.clear()
out["decode_a"] = torch.equal(compiled(a, q, k, v), dec(a, q, k, v))
out["decode_b"] = torch.equal(compiled(b, q, k, v), dec(b, q, k, v))
out["decode_a_again"] = torch.equal(compiled(a, q, k, v), dec(a, q, k, v))
out["decode_graphs"] = dynamo_utils.counters["stats"]["unique_graphs"]
out["calls"] = [a.calls, b.calls]

compiled = torch.compile(pre, fullgraph=True)
got, want = compiled(b, pq, k, v), pre(b, pq, k, v)
out["prefill_b"] = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
got, want = compiled(a, pq, k, v), pre(a, pq, k, v)
out["prefill_a"] = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
print("RESULT " + json.dumps(out))
"""


def test_a_callers_jit_module_is_an_operator_keyed_by_the_module(preload, tmp_path):
    env = flashinfer_env("0.7.4", tmp_path, LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", SCRIPT], env, timeout=600))
    assert got["targets"] == ["dynafold_flashinfer.single_decode_run_jit.default",
                              "dynafold_flashinfer.single_prefill_run_jit.default"], got
    assert got["decode_a"] and got["decode_b"] and got["decode_a_again"], got
    # One graph per module object: b's call recompiled, a's second call reused a's graph.
    assert got["decode_graphs"] == 2, got
    # Each compiled call ran its module once, at run time, beside the eager call.
    assert got["calls"] == [4, 2], got
    assert got["prefill_a"] and got["prefill_b"], got


PROJECTION = r"""
import json, types, torch
import torch._dynamo.utils as dynamo_utils
from flashinfer import gemm
from flashinfer.experimental.kimi_k3_fp8_projection import cake_backend

out = {}
ran = []


def projection(x, prepared, out=None, *, workspace=None):
    '''CPU stand-in for the Cake programs: out[:, :n_valid] = bf16(x @ weight.T); the workspace
    is scratch of the call.'''
    ran.append(torch.compiler.is_compiling())
    if out is None:
        out = torch.empty((x.shape[0], prepared.n_valid), dtype=torch.bfloat16)
    if workspace is not None:
        workspace.scratch.fill_(1)
    out[:, :prepared.n_valid] = (x.float() @ prepared.weight.T).to(torch.bfloat16)
    return out


cake_backend.kimi_k3_fp8_projection = projection


class Prepared:
    '''A PreparedProjectionWeight's fields the stand-in reads (weakly referable, as the
    dataclass is).'''

    def __init__(self, weight, n_valid):
        self.weight, self.n_valid, self.device = weight, n_valid, torch.device("cpu")


def prepared(seed, n):
    g = torch.Generator().manual_seed(seed)
    return Prepared(torch.randn(n, 64, generator=g), n)


p, r = prepared(0, 32), prepared(1, 48)
ws = types.SimpleNamespace(scratch=torch.zeros(8))
x = torch.randn(6, 64).to(torch.bfloat16)


def fresh(x, w):
    return gemm.kimi_k3_fp8_projection(x, w) * 2


def given(x, w, ws):
    buffer = torch.zeros(x.shape[0], 64, dtype=torch.bfloat16)
    return gemm.kimi_k3_fp8_projection(x, w, buffer[:, :w.n_valid], workspace=ws) + 1, buffer


targets = []


def recording(gm, inputs):
    targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    return gm.forward


torch.compile(fresh, fullgraph=True, backend=recording)(x, p)
out["targets"] = sorted({t for t in targets if "kimi" in t})
compiled = torch.compile(fresh, fullgraph=True)
dynamo_utils.counters.clear()
ran.clear()
out["fresh_p"] = torch.equal(compiled(x, p), fresh(x, p))
out["fresh_r"] = torch.equal(compiled(x, r), fresh(x, r))
out["fresh_p_again"] = torch.equal(compiled(x, p), fresh(x, p))
out["graphs"] = dynamo_utils.counters["stats"]["unique_graphs"]
out["ran_at_run_time"] = ran == [False] * 6
compiled = torch.compile(given, fullgraph=True)
got, want = compiled(x, r, ws), given(x, r, ws)
out["given"] = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
# Held weakly: a prepared weight the caller drops is freed (its device tensors with it).
import gc, weakref
gone = weakref.ref(r)
del r
gc.collect()
out["freed"] = gone() is None
print("RESULT " + json.dumps(out))
"""


def test_a_prepared_weight_is_held_by_key(preload, tmp_path):
    """0.7.4's kimi_k3_fp8_projection: its prepared weight and workspace (Python objects) held
    by key, the call one operator, compiled equals eager with and without `out`, one graph per
    prepared weight. The Cake programs (SM100) are a CPU stand-in writing what they write."""
    env = flashinfer_env("0.7.4", tmp_path, LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", PROJECTION], env, timeout=600))
    assert got["targets"] == ["dynafold_flashinfer.kimi_k3_project_fresh.default"], got
    assert got["fresh_p"] and got["fresh_r"] and got["fresh_p_again"], got
    assert got["graphs"] == 2 and got["ran_at_run_time"], got
    assert got["given"], got
    assert got["freed"], got


FRESH_SCHEMAS = r"""
import json, torch
import flashinfer
from flashinfer import gemm

torch.compile(lambda x: x + 1, fullgraph=True, backend="eager")(torch.ones(1))  # wakes them
ns = torch.ops.dynafold_flashinfer
out = {}
for name in ("mm_fp4", "mm_bf16", "mm_mxfp8"):
    for suffix in ("", "_fresh"):
        schema = getattr(ns, name + suffix).default._schema
        out[name + suffix] = sorted(a.name for a in schema.arguments
                                    if a.alias_info is not None and a.alias_info.is_write)
print("RESULT " + json.dumps(out))
"""


def test_a_fresh_operator_marks_no_none_only_buffer_mutable(preload, tmp_path):
    """The operator of a call that gives no buffer (`out=None`: SGLang's mm_fp4) takes `out`
    only as None: its schema must not mark it mutable, since inductor cannot lower an operator
    whose only mutable argument is None (torch 2.9-2.15, "getitem is not an OpOverload"; the
    projection test above compiles one with inductor). The call that gives `out` writes it."""
    env = flashinfer_env("0.7.4", tmp_path, LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", FRESH_SCHEMAS], env, timeout=300))
    for name in ("mm_fp4", "mm_bf16", "mm_mxfp8"):
        assert got[name] == ["out"], got
        assert got[name + "_fresh"] == [], got
