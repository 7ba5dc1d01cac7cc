#!/usr/bin/env bash
# Here (no GPU): builds what tests/gpu/workloads_checks.sh runs on the device
# machine for issue 17's workloads, into one git-ignored folder (about 35
# MiB: Fashion-MNIST travels with it, so it is a call of its own, not part
# of prepare.sh's folder):
#
#   bash tests/gpu/prepare_workloads.sh [DIR]   (default DIR: .devrun-workloads)
#
# DIR/bin/trun + DIR/lib.tar.gz, DIR/data (Fashion-MNIST's idx files),
# DIR/steps: the frozen-encoder sample and a frozen ViT with a trainable
# head, both compiled --cache-frozen for cuda (encode / train_cached
# entries); the CNN and ViT samples for cuda (bf16, the default).
# Then on the device machine (carry=[DIR]):
#   bash tests/gpu/workloads_checks.sh DIR "$OUT/workloads"
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${TCC_BUILD_DIR:-$root/build}"
dir="${1:-$root/.devrun-workloads}"
arch="${ARCH:-sm_90}"
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"/{bin,lib,data,steps}
cp "$build/bin/trun" "$dir/bin/"
source "$root/tests/gpu/trun_libs.sh"
copy_trun_libs "$dir/bin/trun" "$dir/lib"
tar -C "$dir" -czf "$dir/lib.tar.gz" lib && rm -rf "$dir/lib"
cp /usr/share/datasets/fashion-mnist/*.gz "$dir/data/"
s="$dir/steps"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
"$py" "$root/samples/frozen_encoder/model.py" -o "$s/fe.pbtxt"
# A frozen ViT (the vit sample's model, every parameter but the head frozen).
"$py" - "$root/samples/vit/model.py" "$s/fvit.pbtxt" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("vit", sys.argv[1])
vit = importlib.util.module_from_spec(spec); spec.loader.exec_module(vit)
m = vit.build(batch=64)
m.freeze(*[p.name for p in m.params() if not p.name.startswith("head.")])
m.save(sys.argv[2])
PY
"$py" "$root/samples/cnn/model.py" -o "$s/cnn.pbtxt"
"$py" "$root/samples/vit/model.py" -o "$s/vit.pbtxt"
for m in fe fvit; do
  nice -n 19 "$build/bin/tcc" compile --target cuda --arch "$arch" --cache-frozen "$s/$m.pbtxt" \
    -o "$s/${m}_cuda.so" --dump-dir "$s/dump_$m"
  cp "$s"/dump_$m/*cache-frozen-report.txt "$s/${m}_cut.txt"; rm -rf "$s/dump_$m"
done
for m in cnn vit; do
  nice -n 19 "$build/bin/tcc" compile --target cuda --arch "$arch" "$s/$m.pbtxt" -o "$s/${m}_cuda.so"
done
du -sh "$dir"
