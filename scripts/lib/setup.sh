# Everything scripts/test needs, made in parallel: on a fresh machine the environments are
# mostly downloads (six torch builds, 2-5 GB each), so one after another costs about an hour
# and side by side about twenty minutes. Each job logs to $DYNAFOLD_CACHE/setup-logs/<job>.log;
# a failed job's log is printed and the set-up fails. Sourced after env.sh and system.sh.

# run_jobs NAME... : runs the shell functions of those names in background subshells, waits for
# all of them, and fails if any failed.
run_jobs() {
  local logs="$DYNAFOLD_CACHE/setup-logs" name failed=0
  local -A pids=()
  mkdir -p "$logs"
  for name in "$@"; do
    ( "$name" ) >"$logs/$name.log" 2>&1 &
    pids[$name]=$!
  done
  for name in "$@"; do
    if ! wait "${pids[$name]}"; then
      log "set-up step $name failed; its log:"
      cat "$logs/$name.log" >&2
      failed=1
    fi
  done
  return $failed
}

setup_old_torch() { ensure_venv "$OLD_TORCH_VERSION"; }
setup_sglang059() {
  ensure_sglang_release_venv "$SGLANG059_VERSION" "$SGLANG059_TORCH_VERSION" "$SGLANG059_DEPS"
}
setup_sglang0512() {
  ensure_sglang_release_venv "$SGLANG0512_VERSION" "$SGLANG0512_TORCH_VERSION" "$SGLANG0512_DEPS"
}
# Every FlashInfer release the tests import, SGLang 0.5.12's when WITH_SGLANG0512 is not 0.
setup_flashinfer() {
  local v releases="$FLASHINFER_RELEASES $OLD_LAYOUT_RELEASE $SGLANG_FLASHINFER $SGLANG059_FLASHINFER"
  [ "${WITH_SGLANG0512:-1}" != 0 ] && releases+=" $SGLANG0512_FLASHINFER"
  ensure_flashinfer_wheel >/dev/null || return 1
  for v in $releases; do
    ensure_flashinfer "$v" >/dev/null || return 1
  done
}
setup_corpus() { scripts/fetch-corpus >/dev/null; }

# ensure_all [WITH_SGLANG0512]: every environment's download at once; what is installed with
# the main environment's pip (FlashInfer's releases, the cutlass overlay, cuTile, the build
# wheelhouse) waits for it. The lint environment is not among them: scripts/test makes it first,
# to lint before minutes of set-up.
ensure_all() {
  local jobs
  WITH_SGLANG0512=${1:-1}
  ensure_system_packages || return 1
  jobs=(ensure_venv setup_old_torch ensure_sglang_venv setup_sglang059 setup_corpus)
  [ "$WITH_SGLANG0512" != 0 ] && jobs+=(setup_sglang0512)
  run_jobs "${jobs[@]}" || return 1
  run_jobs ensure_cutlass_venv ensure_cutile ensure_build_wheelhouse setup_flashinfer
}
