#!/usr/bin/env bash
# api_status.sh, one process per op (by hand, on the GPU machine): an illegal memory access or a
# segfault in one call poisons the rest of its process, so each op gets its own, JOBS side by
# side, each stopped at CHECK_TIMEOUT seconds (JIT builds included).
#   integration/gpu/api_status_each.sh OUT_DIR RELEASE NAMES_FILE WHEEL...
# NAMES_FILE: one public name per line (rows of docs/api-status/RELEASE.json).
set -uo pipefail
out=$(realpath -m "${1:?OUT_DIR}")
release=${2:?RELEASE}
names=$(realpath "${3:?NAMES_FILE}")
shift 3 || exit 2
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
site=${SITE:-/tmp/site-$(basename "$1" .whl)}
use_wheels "$site" "$@" || exit 1
cd "$root/integration/gpu"
table="$root/docs/api-status/$release.json"
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"
export lib table
grep -v '^#' "$names" | grep . | timeout "${TOTAL:-540}" xargs -P "${JOBS:-6}" -I{} sh -c \
  'LD_PRELOAD="$lib" timeout "${CHECK_TIMEOUT:-300}" python3 api_status_check.py "$table" 0/1 "$1" 2>&1 \
     | grep "^SWEEP" || echo "SWEEP $1 FAIL no verdict (timed out or crashed)"' _ {} \
  > "$out/lines.unsorted"
sort "$out/lines.unsorted" > "$out/lines.txt" && rm -f "$out/lines.unsorted"
echo "== $release: $(grep -c ' PASS ' "$out/lines.txt") of $(wc -l < "$out/lines.txt") pass"
grep ' FAIL ' "$out/lines.txt" | cut -c1-300
