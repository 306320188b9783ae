# Sourced by the GPU scripts (`source "$(dirname "$0")/wheels.sh"`): the repository root, the
# preload library, and the wheels. The GPU machine has no network: what it lacks travels as
# wheels and is installed into a folder of its own, put on PYTHONPATH.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lib="$root/target/release/libdynafold.so"

#   install_wheels SITE WHEEL...
install_wheels() {
  local site=$1
  shift
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$site" "$@"
}

# use_wheels SITE WHEEL...: installs them into SITE; Python then runs from there, unbuffered.
use_wheels() {
  install_wheels "$@" || return 1
  export PYTHONPATH=$1 PYTHONUNBUFFERED=1
}
