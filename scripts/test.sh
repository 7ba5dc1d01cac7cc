#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install dependencies, build
# everything, run ctest (lit, gtest, gradient checks, end-to-end training).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j"${TCC_TEST_JOBS:-2}" "$@"
