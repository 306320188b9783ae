#!/usr/bin/env bash
# Issue 40 on the GPU machine, by hand (never in CI): the host path of a serving step with
# FlashInfer's real kernels, with and without dynafold, processes alternated. SGLang 0.5.12's
# FlashInfer (0.6.11.post1), carried in its site (integration/gpu/sglang_site.sh).
#   integration/gpu/host_path.sh OUT_DIR STEP...
# STEP: build (each family's JIT modules, a process each, at once), bench (bench/host_path.py
# --cuda: plan(), run() and the append per wrapper family, ROUNDS shuffled pairs), layer
# (decoder_layer.py --sglang-tc as issue 40 measured it, LAYERS processes of each kind
# alternated: the eager forward, plan() and the replayed graph; each process with dynafold then
# runs the same steps again in blocks alternating its dispatchers with the methods as shipped),
# layer-pinned (the same, each process on one core: does the eager forward's spread come from
# where it runs?), startup (bench/run.py's start-up benchmark, `import torch, flashinfer`, on
# this host's CPUs: a second machine's noise beside the CPU machine's).
set -uo pipefail
out=$1
shift
mkdir -p "$out" && out=$(cd "$out" && pwd)
source "$(dirname "$0")/sglang_site.sh"
lib="$root/target/release/libdynafold.so"
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a}
deadline=${DEADLINE:-$(( $(date +%s) + 3600 ))}
unpack_site || exit 1
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"
child="$root/bench/host_path_child.py"
layer=(python3 "$root/integration/gpu/decoder_layer.py" --sglang-tc 12 --bs 3,24 --ctx 700
       --tensor-cores --iters 50)

layers() {  # NAME PREFIX...: LAYERS rounds, one process with dynafold and one without, shuffled
  local name=$1 i kind
  shift
  for i in $(seq "${LAYERS:-3}"); do
    for kind in $(printf 'with\nwithout\n' | shuf); do
      [ "$(date +%s)" -lt $((deadline - 60)) ] || { log "deadline: $name stops at round $i"; return; }
      if [ "$kind" = with ]; then
        LD_PRELOAD="$lib" timeout 150 "$@" "${layer[@]}" > "$out/$name-$i-with.txt" 2>&1
      else
        timeout 150 "$@" "${layer[@]}" > "$out/$name-$i-without.txt" 2>&1
      fi
      echo "$name round $i $kind rc=$?: $(grep -h -e 'per-step forward' -e 'in-process' "$out/$name-$i-$kind.txt")"
    done
  done
}

for step in "$@"; do
  log "== $step"
  case $step in
    build)
      for f in decode decode_tensor_cores mla; do
        timeout 420 python3 "$child" 1 --cuda --family=$f > "$out/build-$f.txt" 2>&1 &
      done
      for m in norm rope act; do
        timeout 300 python3 "$root/integration/gpu/decoder_layer.py" --prebuild $m > "$out/build-$m.txt" 2>&1 &
      done
      wait
      grep -L '^BENCH' "$out"/build-{decode,decode_tensor_cores,mla}.txt && tail -n 5 "$out"/build-*.txt
      ;;
    bench)
      python3 "$root/bench/host_path.py" --cuda --preload "$lib" --flashinfer "$site" \
        -n "${ROUNDS:-4}" --calls "${CALLS:-400}" --raw "$out/host-path.json" 2>&1 | tee "$out/host-path.md"
      ;;
    startup)
      python3 "$root/bench/run.py" --preload "$lib" --dynafold "$root/target/release/dynafold" \
        --flashinfer "$site" --only 1 -n "${STARTUP_N:-8}" --startup-import flashinfer \
        --real-cuda 2>&1 | tee "$out/startup.md"
      ;;
    layer) layers layer ;;
    layer-pinned) layers pinned taskset -c 3 ;;
  esac
done
log "done"
