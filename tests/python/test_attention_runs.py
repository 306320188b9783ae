"""Issue 30: plans as data on every attention path. FlashInfer's real wrappers, plan() and run()
as shipped, CPU stand-in kernels (helpers/attention_runs.py), inductor, `fullgraph=True`: per
wrapper family, one compile serves 50 plans of different batch sizes, query and KV lengths, and
every result equals eager's. On the newest release with static shapes, the token dimension
marked dynamic and `dynamic=True`, the wrapper a global or an argument; on the others with
`dynamic=True` and the wrapper a global (as SGLang's backend holds it), over 20 plans (past
Dynamo's recompile limit of 8), for CI time.

On main before hooks/ops/mechanisms/wrapper_runs.py (0.7.4, `dynamic=True`): CUDA-core decode 2 frames,
tensor-core decode 5 (`_max_kv_len` guarded), paged and ragged prefill the recompile limit at
the 9th and 11th plan (`FailOnRecompileLimitHit`). Before BatchAttention, POD and BatchPOD were
families of it (0.7.4): all three the recompile limit under static shapes; with `mark_dynamic`
BatchAttention and POD 2 frames, BatchPOD 3; under `dynamic=True` BatchAttention 2 frames,
POD and BatchPOD `Unsupported` (a SymBool at their JIT loader) on every release, and
BatchAttention `Unsupported` on 0.5.3 and 0.6.7.post3 (its JIT function called in `run()`).
Cascade (two levels merged by merge_state_in_place) runs its levels' prefill wrappers,
operators each: 1 frame before too."""

import pytest

from conftest import ROOT, run, result_of
from test_fold import OLD_LAYOUT_RELEASE, PYTHON
from test_op_semantics import standin_env

HELPER = ROOT / "tests" / "python" / "helpers" / "attention_runs.py"
INNER = ROOT / "tests" / "python" / "helpers" / "tensor_core_decode_inner.py"
FAMILIES = ["decode", "decode_tensor_cores", "prefill_paged", "prefill_ragged", "batch_attention",
            "pod", "batch_pod", "cascade"]


def attention_runs(release, tmp_path, preload, *args):
    env = standin_env(release, tmp_path, preload)
    r = run([str(PYTHON), str(HELPER), *args], env, timeout=900)
    return result_of(r)


def _failing(cases):
    return {name: case for name, case in cases.items()
            if not (case["ok"] and case["equal"] and case["frames"] == 1
                    and case["recompiles"] == 0)}


def test_one_compile_serves_every_plan_in_every_shape_mode(preload, tmp_path):
    got = attention_runs("0.7.4", tmp_path, preload, *FAMILIES)
    assert len(got["cases"]) == len(FAMILIES) * 6, got["cases"]
    assert not _failing(got["cases"])
    wrappers = {w.rsplit(".", 1)[-1] for w in got["runs"]["wrappers"]}
    assert {"BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
            "BatchPrefillWithRaggedKVCacheWrapper", "BatchAttention",
            "PODWithPagedKVCacheWrapper", "BatchPODWithPagedKVCacheWrapper"} <= wrappers, wrappers
    _sglang_calls_in_place(got["dispatch"])


# The MLA wrapper's plan asks for a CUDA device in 0.7.4 (its CPU check is on 0.7.4's
# fa backends); before, it reached its JIT function in its body, which no trace can enter
# ("Skip calling torch.compiler.disable()d function" on 0.6.7.post3's flashinfer/mla.py).
# OLD_LAYOUT_RELEASE (0.6.7.post3): flashinfer/mla.py's layout, and tensor-core decode passing
# `paged_kv_cache` where the prefill module's paged_run declares `num_qo_heads`.
@pytest.mark.parametrize("release", ["0.5.3", OLD_LAYOUT_RELEASE, "0.6.16"])
def test_one_compile_serves_every_plan_on_older_releases(preload, release, tmp_path):
    got = attention_runs(release, tmp_path, preload, "--dynamic-global", *FAMILIES, "mla")
    assert len(got["cases"]) == len(FAMILIES) + 1 - len(got["absent"]), got["cases"]
    assert not _failing(got["cases"])
    if release == "0.6.16":
        _sglang_calls_in_place(got["dispatch"])


# SGLang's calls (its FlashInfer backends): each dispatched as FlashInfer's own code with the
# dispatch first, no frame of dynafold's (issue 40), where the release's file compiles to the
# code that runs, as on every release tested.
SGLANG_CALLS = ["BatchDecodeWithPagedKVCacheWrapper.run", "BatchDecodeWithPagedKVCacheWrapper.forward",
                "BatchPrefillWithPagedKVCacheWrapper.run", "BatchPrefillWithPagedKVCacheWrapper.forward",
                "BatchPrefillWithRaggedKVCacheWrapper.run",
                "BatchPrefillWithRaggedKVCacheWrapper.forward_return_lse",
                "BatchMLAPagedAttentionWrapper.run"]


def _sglang_calls_in_place(forms):
    assert {c: forms.get(c) for c in SGLANG_CALLS} == dict.fromkeys(SGLANG_CALLS, "in place")


def test_batch_pod_with_lse_stays_traced_as_shipped(preload, tmp_path):
    """BatchPOD's `return_lse=True` returns two pairs (four results), more than the operator's
    two slots: that call is traced as FlashInfer ships it. Under `dynamic=True` its float
    attributes are SymFloats, and `logits_soft_cap > 0` reached the JIT loader's stand-in as a
    SymBool, which its constant build cannot take (hooks/ops/engine/wake.py `_specialized`):
    before, every such compile failed (as POD's did, before it was an operator)."""
    got = attention_runs("0.7.4", tmp_path, preload, "--dynamic-global", "batch_pod_lse")
    case = got["cases"]["batch_pod_lse/dynamic/global"]
    assert case["ok"] and case["equal"], case


def test_tensor_core_decode_traced_as_shipped_reaches_its_declaration_right(preload, tmp_path):
    """Finding 4 at the woken declaration, without the wrapper-run operator: 0.6.7.post3's
    tensor-core decode passes paged_run 43 positional arguments in its own order
    (`paged_kv_cache` where the declaration has `num_qo_heads`); its own correction
    (its record's `by_release`, `positional`) gives them to the operator by name.
    Before it, the trace failed making the operator's fake call."""
    env = standin_env(OLD_LAYOUT_RELEASE, tmp_path, preload)
    r = run([str(PYTHON), str(INNER)], env, timeout=600)
    got = result_of(r)
    assert got.get("ok") and got["equal"], got
