# Sourced by tests/gpu/run.sh, tests/gpu/remat_checks.sh and, when run
# alone, tests/gpu/amp_checks.sh, with $1 the prepared DIR
# (tests/gpu/prepare.sh or prepare_remat.sh) and $2 the optional OUT:
# sets dir, out, here (this folder), trun, unpacks lib/steps/data, puts the
# bundled libraries on LD_LIBRARY_PATH, and starts the summary (`note LINE`;
# `status` 0, set to 1 by a failed check).
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: $(basename "$0") DIR [OUT]   (DIR: what tests/gpu/prepare.sh made)" >&2
  exit 2
fi
dir="$(cd "$1" && pwd)"
out="${2:-$dir/out}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
source "$here/unpack_parts.sh"
unpack_parts "$dir" lib steps data bin vision
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuDNN (cuda steps open libcudnn.so.9 for attention at run time): on the
# device machine it comes with PyTorch's wheels, off the loader's path.
source "$here/cudnn_path.sh"
trun="$dir/bin/trun"
declare -a summary
status=0
note() { summary+=("$1"); }
