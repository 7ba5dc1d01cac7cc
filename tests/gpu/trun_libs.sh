# Sourced by tests/gpu/prepare.sh and prepare_remat.sh:
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
