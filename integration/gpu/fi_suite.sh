#!/usr/bin/env bash
# FlashInfer's own tests on the H200, in their torch.compile mode (issue 30), by hand, never in
# CI. BUNDLE (default ./dist/gpu, made by integration/gpu/fi_suite/bundle.sh) holds whl/
# (FlashInfer and apache-tvm-ffi), fi-tests.tar.gz (FlashInfer's tests at the release's tag, with
# fi_suite/conftest.patch applied), libdynafold.so, scripts/ (this file and fi_suite/) and, once
# built, aot.tar.xz.* (the JIT modules).
#   fi_suite.sh prep OUT      build the sample's JIT modules (fi_suite/prebuild.py) and pack them
#                             into OUT/aot.tar.xz.NN (16 MiB each, the device tool's limit);
#                             meanwhile run the non-attention sample once
#   fi_suite.sh probe OUT     issue 30's fast_plan case (fi_suite/fast_plan_probe.sh) and the
#                             SGLang decode benchmark once; modules built meanwhile packed as
#                             OUT/aot-b.tar.xz.NN
#   fi_suite.sh all OUT       the run of record: both samples, the probes, the benchmark with
#                             dynafold and (time permitting) without
#   fi_suite.sh run OUT SAMPLE...   SAMPLE: other | attention | a file of test ids
# Each sample runs with dynafold preloaded and FLASHINFER_TEST_TORCH_COMPILE=1 (inductor;
# BACKEND=aot_eager|eager to compare), PYTEST_ARGS added; the logs come back in OUT/logs.tgz.
# TOTAL: seconds the whole may take (540), so the call ends inside the tool's 600.
set -uo pipefail
mode=${1:?prep|run}
out=$(realpath -m "${2:?OUT}")
shift 2
bundle=$(realpath "${BUNDLE:-dist/gpu}")
suite=$(cd "$(dirname "$0")" && pwd)/fi_suite
total=${TOTAL:-540}
mkdir -p "$out"
log() { echo "[$SECONDS s] $*" | tee -a "$out/summary.txt"; }

site=/tmp/site
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target "$site" "$bundle"/whl/*.whl || exit 1
export PYTHONPATH=$site PYTHONUNBUFFERED=1
fi=/tmp/fi
mkdir -p "$fi" && tar -xzf "$bundle/fi-tests.tar.gz" -C "$fi" || exit 1
python3 -c 'import torch, flashinfer; print("ENV torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee -a "$out/summary.txt"

other_files="tests/utils/test_norm.py tests/utils/test_activation.py tests/utils/test_sampling.py
  tests/utils/test_quantization.py tests/attention/test_rope.py tests/attention/test_page.py"
attention_files="tests/attention/test_batch_decode_kernels.py
  tests/attention/test_tensor_cores_decode.py tests/attention/test_batch_prefill_kernels.py
  tests/attention/test_single_prefill.py tests/attention/test_shared_prefix_kernels.py"

# ids SAMPLE: the sample's test ids, one a line.
ids() {
  case $1 in
    other | attention)
      local files=$other_files
      [ "$1" = attention ] && files=$attention_files
      (cd "$fi" && python3 -m pytest --collect-only -q -p no:cacheprovider $files 2>/dev/null) \
        > "/tmp/collected-$1.txt"
      python3 "$suite/pick.py" "/tmp/collected-$1.txt" "$1" ;;
    *) cat "$1" ;;
  esac
}

# suite NAME SECONDS SAMPLE: the sample in compile mode with dynafold, log in OUT/NAME.log.
suite() {
  local name=$1 secs=$2
  ids "$3" > "$out/ids-$name.txt"
  log "$name: $(wc -l < "$out/ids-$name.txt") tests, ${secs}s at most"
  (
    set -f
    cd "$fi" && FLASHINFER_TEST_TORCH_COMPILE=1 \
      FLASHINFER_TEST_TORCH_COMPILE_BACKEND=${BACKEND:-inductor} \
      FLASHINFER_TEST_COMPILE_STATS="$out/compiled-$name.json" LD_PRELOAD="$bundle/libdynafold.so" \
      timeout "$secs" python3 -m pytest -p no:cacheprovider -q -rfEs --tb=short \
      ${PYTEST_ARGS:-} $(cat "$out/ids-$name.txt")
  ) > "$out/$name.log" 2>&1
  log "$name: rc=$? $(tail -1 "$out/$name.log")"
}

# The prebuilt modules (aot.tar.xz.*) into /tmp/aot, found through the stand-in package.
unpack_aot() {
  ls "$bundle"/aot*.tar.xz.* > /dev/null 2>&1 || return 0
  for a in $(ls "$bundle"/aot*.tar.xz.* | sed 's/\.[0-9]*$//' | sort -u); do
    cat "$a".* | xz -d | tar -xf - -C /tmp
  done
  export PYTHONPATH=$suite/jitcache:$PYTHONPATH FI_AOT_DIR=/tmp/aot
  log "prebuilt modules: $(ls /tmp/aot | wc -l)"
}

# Modules built in this call (FlashInfer's JIT cache), packed as OUT/NAME.tar.xz.NN.
pack_new() {
  rm -rf /tmp/new && python3 "$suite/prebuild.py" pack /tmp/new/aot > "$out/pack.log" 2>&1
  [ -d /tmp/new/aot ] || return 0
  strip --strip-unneeded /tmp/new/aot/*/*.so 2>/dev/null
  (cd /tmp/new && tar -cf - aot | xz -T0 -6) | split -b 15m -d - "$out/$1.tar.xz."
  ls -l "$out/$1".tar.xz.* | tee -a "$out/summary.txt"
}

# The logs in one file (the device tool brings back 8 files at most).
bundle_logs() {
  (cd "$out" && tar -czf logs.tgz --remove-files $(ls | grep -vE '^(summary.txt|logs.tgz)$|\.tar\.xz\.'))
}

# sglang_tc NAME PRELOAD SECONDS: decoder_layer.py --sglang-tc (issue 32 item 3), log in OUT/NAME.log.
sglang_tc() {
  (cd "$suite/.." && LD_PRELOAD=$2 TORCH_LOGS=recompiles timeout "$3" python3 decoder_layer.py \
    --sglang-tc 30 --bs 1,2,4,8,16,32 --ctx 1024 --iters "${TC_ITERS:-50}" --tensor-cores) \
    > "$out/$1.log" 2>&1
  log "$1 rc=$?"; grep -E '^(ENV|SGLANG_TC)' "$out/$1.log" | tee -a "$out/summary.txt"
  log "$1: $(grep -c 'Recompiling function' "$out/$1.log") recompile messages"
}

case $mode in
  all)  # the run of record: both samples and the fast_plan probes side by side, then the
        # SGLang decode benchmark with dynafold and, time permitting, without
    unpack_aot
    bash "$suite/fast_plan_probe.sh" "$out" "${PROBE_SECS:-90}" > "$out/probes.txt" &
    probes=$!
    suite attention $((total - 240 - SECONDS)) attention &
    attention=$!
    suite other $((total - 240 - SECONDS)) other
    wait $attention $probes
    cat "$out/probes.txt" >> "$out/summary.txt"
    for name in attention other; do
      log "$name: compiled calls $(tr -d '\n' < "$out/compiled-$name.json" 2>/dev/null | cut -c1-900)"
      grep -E '^(FAILED|ERROR)' "$out/$name.log" | cut -c1-400 >> "$out/summary.txt"
    done
    sglang_tc sglang-tc-with "$bundle/libdynafold.so" $((total - 40 - SECONDS))
    [ $((total - SECONDS)) -gt 140 ] && sglang_tc sglang-tc-without "" $((total - 10 - SECONDS))
    bundle_logs
    ;;
  case)  # one test id (CASE) alone: inductor (logged), aot_eager, eager
    unpack_aot
    bash "$suite/fast_plan_probe.sh" "$out" "${PROBE_SECS:-90}" "$CASE" | tee -a "$out/summary.txt"
    bundle_logs
    ;;
  probe)  # issue 30's fast_plan case and the SGLang decode benchmark, once, ahead of the run
    unpack_aot
    (timeout $((total - 60)) python3 "$suite/prebuild.py" misc > "$out/build-misc.log" 2>&1
     echo "rc=$?" >> "$out/build-misc.log") &
    build=$!
    bash "$suite/fast_plan_probe.sh" "$out" "${PROBE_SECS:-80}" | tee -a "$out/summary.txt"
    (cd "$suite/.." && LD_PRELOAD="$bundle/libdynafold.so" timeout "${TC_SECS:-130}" \
      python3 decoder_layer.py --sglang-tc 30 --bs 1,2,4,8,16,32 --ctx 1024 --iters 50 \
      --tensor-cores) > "$out/sglang-tc.log" 2>&1
    log "sglang-tc rc=$?"; grep -E '^(ENV|SGLANG_TC)' "$out/sglang-tc.log" | tee -a "$out/summary.txt"
    wait $build
    log "misc modules: $(grep -E '^(BUILT|rc=)' "$out/build-misc.log" | tr '\n' ' ')"
    pack_new aot-b
    bundle_logs
    ;;
  prep)
    (timeout $((total - 100)) python3 "$suite/prebuild.py" attention > "$out/build-attention.log" 2>&1
     echo "rc=$?" >> "$out/build-attention.log") &
    build=$!
    timeout 200 python3 "$suite/prebuild.py" misc > "$out/build-misc.log" 2>&1
    log "misc modules: rc=$? $(grep -c BUILT "$out/build-misc.log")"
    suite other $((total - 110 - SECONDS)) other
    wait $build
    log "attention modules: $(grep -E '^(BUILT|rc=)' "$out/build-attention.log" | tr '\n' ' ')"
    rm -rf /tmp/aot && python3 "$suite/prebuild.py" pack /tmp/aot > "$out/pack.log" 2>&1
    strip --strip-unneeded /tmp/aot/*/*.so 2>/dev/null
    du -sm /tmp/aot | tee -a "$out/summary.txt"
    (cd /tmp && tar -cf - aot | xz -T0 -6) | split -b 15m -d - "$out/aot.tar.xz."
    ls -l "$out"/aot.tar.xz.* | tee -a "$out/summary.txt"
    ;;
  run)
    unpack_aot
    for sample in "$@"; do
      suite "$(basename "$sample" .txt)" $((total - SECONDS)) "$sample"
    done
    bundle_logs
    ;;
esac
log done
