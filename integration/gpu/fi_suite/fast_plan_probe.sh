#!/usr/bin/env bash
# Issue 30: test_batch_decode_with_paged_kv_cache_with_fast_plan's `out=` check under inductor
# (by hand, on the GPU machine, after fi_suite.sh has installed the bundle into /tmp/site and
# /tmp/fi): the failing case alone, after the head_dim-128 case, and with aot_eager, each in a
# process of its own with Dynamo's recompile reasons, the FX graphs and inductor's code logged.
#   fast_plan_probe.sh OUT [SECONDS per process, 100] [TEST_ID]
# With TEST_ID (ids separated by spaces): those tests with inductor (logged), aot_eager and eager instead.
set -uo pipefail
out=$(realpath -m "$1")
secs=${2:-100}
bundle=$(realpath "${BUNDLE:-dist/gpu}")
mkdir -p "$out"
t=tests/attention/test_batch_decode_kernels.py::test_batch_decode_with_paged_kv_cache_with_fast_plan
bad="$t[True-kv_dtype0-q_dtype0-True-0.0-ROPE_LLAMA-NHD-256-32-4-8-54-12]"
first="$t[True-kv_dtype0-q_dtype0-True-0.0-NONE-NHD-128-32-4-8-54-12]"
run() {
  local name=$1 backend=$2
  shift 2
  (cd /tmp/fi && FLASHINFER_TEST_TORCH_COMPILE=1 FLASHINFER_TEST_TORCH_COMPILE_BACKEND=$backend \
    TORCH_LOGS=${PROBE_LOGS-recompiles,graph_code,output_code} LD_PRELOAD="$bundle/libdynafold.so" \
    timeout "$secs" python3 -m pytest -p no:cacheprovider -q -rfE --tb=short "$@") \
    > "$out/probe-$name.log" 2>&1
  echo "PROBE $name ($backend): rc=$? $(grep -E '^(FAILED|PASSED|ERROR)|passed|failed' "$out/probe-$name.log" | tr '\n' ' ' | cut -c1-400)"
}
if [ -n "${3:-}" ]; then
  set -f
  run inductor inductor $3
  PROBE_LOGS=recompiles run aot_eager aot_eager $3
  PROBE_LOGS=recompiles run eager eager $3
  exit
fi
run alone inductor "$bad"
run after128 inductor "$first" "$bad"
run aot_eager aot_eager "$first" "$bad"
