"""A JIT module the caller passes in, held by key (hooks/attention_plans.py `_hold`): 0.7.4's
single_{decode,prefill}_with_kv_cache_with_jit_module compile whole with inductor, their
module's `run` an operator; each module object is its own graph (the key is guarded on the
object's identity), the same object reuses its graph, and compiled equals eager, `lse`
included.

The modules are CPU stand-ins that write what FlashInfer's kernels write (`o`, `lse` when
given, the split-KV scratch), each its own way, so a graph reusing another module's key would
give the other module's values."""

from conftest import clean_env, run, result_of
from test_fold import PYTHON, flashinfer_path, release_text, toolkit

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
    env = clean_env(PYTHONPATH=flashinfer_path("0.7.4"),
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                    FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"),
                    LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", SCRIPT], env, timeout=600))
    assert got["targets"] == ["dynafold_flashinfer.single_decode_run_jit.default",
                              "dynafold_flashinfer.single_prefill_run_jit.default"], got
    assert got["decode_a"] and got["decode_b"] and got["decode_a_again"], got
    # One graph per module object: b's call recompiled, a's second call reused a's graph.
    assert got["decode_graphs"] == 2, got
    # Each compiled call ran its module once, at run time, beside the eager call.
    assert got["calls"] == [4, 2], got
    assert got["prefill_a"] and got["prefill_b"], got
