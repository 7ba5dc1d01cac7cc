# Sourced by tests/gpu/prepare.sh, prepare_remat.sh, bench/generate/prepare.sh and
# tests/other_cpu/prepare.sh:
# copy_trun_libs EXE DEST copies the shared libraries EXE links from Debian
# (absl, protobuf, openblas, gomp, ...) into DEST, since the device machine
# runs another distribution. The C/C++ runtime stays its own.
copy_trun_libs() {
  ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
      *) cp -L "$lib" "$2/" ;;
    esac
  done
}

# copy_cpu_step_libs DEST: what a cpu step loads at run time besides the C/C++
# runtime: Debian's OpenBLAS (with its Fortran runtime) and libgomp.
copy_cpu_step_libs() {
  local lib
  for lib in $(ldconfig -p | awk '/libopenblas.so.0 |libgomp.so.1 /{print $NF}' | sort -u); do
    cp -L "$lib" "$1/"
  done
  for lib in $(ldd "$(ldconfig -p | awk '/libopenblas.so.0 /{print $NF; exit}')" | awk '/=> \//{print $3}' | grep -E 'libgfortran|libquadmath' || true); do
    cp -L "$lib" "$1/"
  done
}
