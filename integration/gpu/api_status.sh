#!/usr/bin/env bash
# Issue 20 on the GPU machine (by hand, never in CI): the ops the public-API table says trace on
# fake tensors as an sm90 (integration/api_status/tables/RELEASE.json), on the H200: eager,
# compiled with inductor, captured in a CUDA graph, compared with eager bit for bit
# (integration/gpu/api_status_check.py). Run once per release, e.g. for 0.6.16 and 0.7.2:
#   integration/gpu/api_status.sh OUT_DIR RELEASE WHEEL...
# then copy OUT_DIR to integration/h200/gpu-run-DATE-api-status/RELEASE/, write the run up in
# docs/gpu-runs/gpu-run-DATE-api-status/README.md and rerun scripts/api-status: its PASS lines
# turn those ops' status into "H200". Budget: about 4 minutes per release on 16
# cores (4 shards build FlashInfer's JIT modules side by side; each shard stops at
# $CHECK_TIMEOUT s, 200 by default, so two releases stay within ~8 minutes).
# NAMES=FILE (one public name per line): those ops only, one process each (an illegal memory
# access or a segfault poisons the rest of its process), JOBS side by side (6), each stopped at
# CHECK_TIMEOUT s (300), the whole at TOTAL s (540, the GPU tool's 10 minutes a call); ops left
# unrun print "no verdict": run them again (0.7.4's run, 2026-12-02).
set -uo pipefail
out=$(realpath -m "${1:?OUT_DIR}")
names=${NAMES:+$(realpath "$NAMES")}
release=${2:?RELEASE}
shift 2 || exit 2
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
site=${SITE:-/tmp/site-$(basename "$1" .whl)}
use_wheels "$site" "$@" || exit 1
cd "$root/integration/gpu"
table="$root/integration/api_status/tables/$release.json"
[ -f "$table" ] || { echo "no table $table" >&2; exit 1; }
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"
if [ -n "$names" ]; then
  export lib table
  grep -v '^#' "$names" | grep . | timeout "${TOTAL:-540}" xargs -P "${JOBS:-6}" -I{} sh -c \
    'LD_PRELOAD="$lib" timeout "${CHECK_TIMEOUT:-300}" python3 api_status_check.py "$table" 0/1 "$1" 2>&1 \
       | grep "^SWEEP" || echo "SWEEP $1 FAIL no verdict (timed out or crashed)"' _ {} \
    > "$out/check-each.log"
else
  for i in 0 1 2 3; do
    LD_PRELOAD="$lib" timeout "${CHECK_TIMEOUT:-200}" python3 api_status_check.py "$table" "$i/4" \
      > "$out/check-$i.log" 2>&1 &
  done
  wait
fi
cat "$out"/check-*.log | grep '^SWEEP' | sort > "$out/lines.txt"
echo "== $release: $(grep -c ' PASS ' "$out/lines.txt") of $(wc -l < "$out/lines.txt") pass"
grep ' FAIL ' "$out/lines.txt" | cut -c1-300
