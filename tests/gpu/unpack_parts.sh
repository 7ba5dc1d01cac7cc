# Sourced: unpack_parts DIR PART... unpacks each PART.tar.xz or PART.tar.gz
# of a prepared folder (tests/gpu/prepare.sh's lib, steps, data, bin,
# vision) into DIR, unless DIR/PART is there already. .tar.xz (half of
# gzip's bytes, under the 64 MiB the device tool carries) goes through
# Python's lzma, whatever tools the device machine has.
unpack_parts() {
  local dir=$1 part
  shift
  for part in "$@"; do
    [ -d "$dir/$part" ] && continue
    if [ -f "$dir/$part.tar.xz" ]; then
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$dir/$part.tar.xz" "$dir"
    elif [ -f "$dir/$part.tar.gz" ]; then
      tar -C "$dir" -xzf "$dir/$part.tar.gz"
    fi
  done
}
