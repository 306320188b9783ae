#!/usr/bin/env bash
# Issue 18 on the GPU machine (by hand, never in CI): the sweep's cases for the declarations
# dynafold now corrects (single decode's lse read by an inductor graph, the fp8-quant norms,
# the joint top-k/top-p paths), the batch-decode run over 20 plans by plan() and by
# fast_decode_plan from one compile, then eager rmsnorm host time per call, without and with.
#   integration/gpu/semantics.sh OUT_DIR WHEEL...
set -uo pipefail
out=${1:-/tmp/dynafold-semantics}
shift || exit 2
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
site=${SITE:-/tmp/site-$(basename "$1" .whl)}
use_wheels "$site" "$@" || exit 1
cd "$root/integration/gpu"
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"
only="single_decode_with_kv_cache,single_decode_with_kv_cache(return_lse),rmsnorm"
only="$only,rmsnorm_quant(tensor scale),rmsnorm_quant(float scale)"
only="$only,fused_add_rmsnorm_quant(tensor scale),fused_add_rmsnorm_quant(float scale)"
only="$only,top_k_top_p_sampling_from_probs,top_k_top_p_sampling_from_probs(joint)"
only="$only,top_k_top_p_sampling_from_logits(joint),top_k_top_p_sampling_from_logits"
only="$only,sampling_from_probs,BatchDecodeWithPagedKVCacheWrapper.run"
for i in 0 1 2 3; do
  SWEEP_ONLY="$only" SWEEP_SHARD="$i/4" LD_PRELOAD="$lib" timeout "${SWEEP_TIMEOUT:-360}" \
    python3 ops_sweep.py sweep > "$out/sweep-$i.log" 2>&1 &
done
wait
cat "$out"/sweep-*.log | grep '^SWEEP' | sort > "$out/sweep.txt"
echo "== sweep with dynafold: $(grep -c ' PASS ' "$out/sweep.txt") of $(grep -cv -e TOTAL -e STATUS "$out/sweep.txt") pass"
grep -v -e STATUS "$out/sweep.txt" | cut -c1-300
for planner in plan fast_decode_plan; do
  LD_PRELOAD="$lib" timeout 150 python3 plans_check.py "$planner" > "$out/plans-$planner.log" 2>&1
  grep -h '^PLANS' "$out/plans-$planner.log" || tail -c 1500 "$out/plans-$planner.log"
done
[ "${ROUNDS:-10}" -gt 0 ] || exit 0
echo "== eager rmsnorm 1x4096, us per call (host), ${ROUNDS:-10} interleaved rounds"
for round in $(seq "${ROUNDS:-10}"); do
  printf 'without %s\n' "$(python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
  printf 'with    %s\n' "$(LD_PRELOAD="$lib" python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
done | tee "$out/eager.txt"
