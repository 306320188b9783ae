# System packages the tests need: Debian's static python3.11 (a second kind of interpreter
# for the preload tests) and ninja (one of the programs FlashInfer's JIT starts).
# Sourced, not executed.

ensure_system_packages() {
  local missing=()
  [ -x /usr/bin/python3.11 ] || missing+=(python3.11)
  command -v ninja >/dev/null || missing+=(ninja-build)
  command -v gcc >/dev/null || missing+=(gcc)
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} with apt-get"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${missing[@]}" >/dev/null; }
}
