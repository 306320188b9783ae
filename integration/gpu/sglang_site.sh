# Sourced by the GPU scripts that run SGLang 0.5.12's packages (sglang_server.sh, host_path.sh):
# the carried site (.sglang0512/site-0.5.12.tar.xz, integration/gpu/sglang_server_bundle.sh)
# unpacked once per machine into /tmp/sg0512, and FlashInfer's JIT cache carried in and out, since
# its attention builds take minutes and a machine starts bare.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
carry="$root/.sglang0512"
state=/tmp/sg0512
site=$state/site
mkdir -p "$state"
export PYTHONPATH=$site PYTHONUNBUFFERED=1 FLASHINFER_WORKSPACE_BASE=$state/fi-ws
log() { echo "[$(date -u +%T)] $*"; }

# unpack_site: the site, then a JIT cache an earlier call returned (.sglang0512/jit/fi-ws.tar.xz.*)
unpack_site() {
  if [ ! -f "$site/.done" ]; then
    log "unpacking SGLang 0.5.12 and what it needs into $site"
    mkdir -p "$site" && python3 -c 'import sys, tarfile
tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' "$carry/site-0.5.12.tar.xz" "$site" || return 1
    touch "$site/.done"
  fi
  if [ ! -d "$state/fi-ws" ] && ls "$carry"/jit/fi-ws.tar.xz.* >/dev/null 2>&1; then
    log "unpacking the carried FlashInfer JIT cache"
    mkdir -p "$state/fi-ws" && cat "$carry"/jit/fi-ws.tar.xz.* | python3 -c \
      'import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1], filter="data")' "$state/fi-ws"
  fi
}

# pack_jit DIR: the JIT cache whole (ninja rebuilds a module whose objects are missing), xz, in
# 15 MiB parts (the device returns files of 16 MiB at most); copied to .sglang0512/jit/, they are
# carried next time.
pack_jit() {
  mkdir -p "$1" && tar -C "$state/fi-ws" -cf - . | xz -6 -T0 | split -b 15m - "$1/fi-ws.tar.xz."
  ls -l "$1"
}
