#!/usr/bin/env bash
# Issue 37, on the GPU machine, by hand (never in CI): SGLang 0.5.12's real server, its own CUDA
# graphs, with and without dynafold. From the repository root:
#   integration/gpu/sglang_server.sh OUT_DIR STEP...
# STEP is CONFIG:MODE. CONFIG: a (0.5.12's defaults: piecewise CUDA graphs for prefill/extend,
# decode CUDA graphs), b (the same with --enable-torch-compile), c (block-wise FP8 with
# --fp8-gemm-backend flashinfer_deepgemm: FlashInfer inside the piecewise-compiled region).
# MODE: plain (no dynafold) or dynafold (`dynafold run --report-dir`).
# Each step starts the server on a random-weight Llama (sglang_server/model.py), waits for
# /health, asks the fixed greedy prompt set, then the load (sglang_server/client.py), stops the
# server with SIGTERM, and keeps its log, the client's JSON, the graphs SGLang and inductor wrote
# and dynafold's report under OUT_DIR/CONFIG-MODE/.
# Carried (git-ignored): .sglang0512/site-0.5.12.tar.xz (integration/gpu/sglang_server_bundle.sh),
# optionally .sglang0512/jit/fi-ws.tar.xz.* (a FlashInfer JIT cache an earlier call returned),
# and target/release/{dynafold,libdynafold.so,libdynafold_python.so}.
# What a step builds stays in /tmp/sg0512 while the machine is warm (the installed packages, the
# models, FlashInfer's JIT cache), so a later call on the same machine skips it. The call's whole
# output is OUT_DIR; bundle it with `tar` into $OUT (the device returns 8 files at most).
set -uo pipefail
out=$1
shift
mkdir -p "$out" && out=$(cd "$out" && pwd)
source "$(dirname "$0")/sglang_site.sh"
# DEADLINE (seconds since the epoch): no step starts within 90 s of it and a server still not up
# then is given up, so a call ends inside the device's 10 minutes with its results.
deadline=${DEADLINE:-$(( $(date +%s) + 3600 ))}

unpack_site || exit 1
python3 "$root/integration/gpu/sglang_server/imports.py" > "$out/imports.txt" 2>&1
if ! grep -q '^imports ok' "$out/imports.txt"; then log "SGLang does not import:"; tail -n 20 "$out/imports.txt"; exit 1; fi
[ -d "$state/models/qwen3-fp8-block" ] || python3 "$root/integration/gpu/sglang_server/model.py" "$state/models" || exit 1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  python3 -c 'import sys, torch, flashinfer, sglang, sgl_kernel
print("python", sys.version.split()[0], "torch", torch.__version__, "flashinfer", flashinfer.__version__,
      "sglang", sglang.__version__, "sgl_kernel", sgl_kernel.__version__)'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

healthy() {  # PORT: /health answers 200
  python3 -c 'import sys, urllib.request
sys.exit(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=5).status != 200)' "$1" 2>/dev/null
}
free_port() {  # below 55535: SGLang also listens on the port + 10000
  python3 -c 'import random, socket
while True:
    p = random.randrange(20000, 40000)
    with socket.socket() as s:
        try: s.bind(("127.0.0.1", p)); print(p); break
        except OSError: pass'
}

step() {  # CONFIG MODE
  local config=$1 mode=$2 dir="$out/$1-$2" port model pid rc t0=$SECONDS
  local -a args wrap=()
  if [ $(( $(date +%s) + 90 )) -gt "$deadline" ]; then log "$config $mode: skipped, too close to the deadline"; return 0; fi
  mkdir -p "$dir"
  port=$(free_port)
  model=$state/models/llama-bf16
  args=(--skip-tokenizer-init --attention-backend flashinfer --host 127.0.0.1 --port "$port"
        --mem-fraction-static 0.4 --cuda-graph-max-bs 64 --grammar-backend none --log-level info)
  case $config in
    a) ;;
    b) args+=(--enable-torch-compile --torch-compile-max-bs 2) ;;
    # FlashInfer's SM90 block-scale GEMM JIT-builds a DeepGEMM kernel per shape it meets: fewer
    # capture sizes keep the first start inside one call.
    c) model=$state/models/qwen3-fp8-block
       args+=(--fp8-gemm-backend flashinfer_deepgemm --cuda-graph-max-bs 16 --piecewise-cuda-graph-max-tokens 512) ;;
    *) log "unknown configuration $config"; return 1 ;;
  esac
  [ "$mode" = dynafold ] && wrap=("$root/target/release/dynafold" run --log info --report-dir "$dir/report" --)
  log "== $config $mode: ${wrap[*]} python3 -m sglang.launch_server --model-path $model ${args[*]}"
  # Each run compiles into caches of its own, so that what inductor and SGLang wrote is this run's.
  SGLANG_CACHE_DIR=$dir/sglang-cache TORCHINDUCTOR_CACHE_DIR=$state/inductor-$config-$mode \
    setsid "${wrap[@]}" python3 -m sglang.launch_server --model-path "$model" "${args[@]}" \
    > "$dir/server.log" 2>&1 &
  pid=$!
  rc=1
  for _ in $(seq 1 400); do
    if [ $(( $(date +%s) + 45 )) -gt "$deadline" ]; then log "not up before the deadline"; break; fi
    if ! kill -0 "$pid" 2>/dev/null; then log "server exited before /health"; break; fi
    if healthy "$port"; then rc=0; break; fi
    sleep 1
  done
  echo "$((SECONDS - t0))" > "$dir/startup_s"
  if [ "$rc" = 0 ]; then
    log "up after $((SECONDS - t0)) s"
    python3 "$root/integration/gpu/sglang_server/client.py" greedy "$port" "$dir/greedy.json" || rc=2
    python3 "$root/integration/gpu/sglang_server/client.py" load "$port" "$dir/load.json" || rc=3
  fi
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "$rc" > "$dir/rc"
  grep -iE "capture|compil|error|exception|Traceback" "$dir/server.log" | grep -v "^\s*$" | tail -n 8 | cut -c1-300
  [ "$mode" = dynafold ] && "$root/target/release/dynafold" report "$dir/report" > "$dir/report.txt" 2>&1 \
    && "$root/target/release/dynafold" report --json "$dir/report" > "$dir/report.json" 2>&1
  # What the traced code reached: SGLang's split graphs and inductor's generated code.
  mkdir -p "$dir/graphs"
  find "$dir/sglang-cache" "$state/inductor-$config-$mode" -name '*.py' 2>/dev/null | while read -r f; do
    grep -l -E 'flashinfer|sgl_kernel|torch\.ops\.' "$f" >/dev/null 2>&1 && cp "$f" "$dir/graphs/$(echo "${f#/}" | tr / _).txt"
  done
  log "$config $mode: rc $rc after $((SECONDS - t0)) s"
}

for s in "$@"; do
  step "${s%%:*}" "${s##*:}"
done
