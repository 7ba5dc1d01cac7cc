#!/bin/bash
# session 9, call B: new (call A's steps) vs new2 (+ ew8 with broadcasts), tcc alone, same call; vision checks
set -u
R=$OUT/r; mkdir -p $R
python3 -c "import tarfile; tarfile.open('.devrun-s9/new.tar.xz').extractall('/tmp/s9new'); tarfile.open('.devrun-s9/new2.tar.xz').extractall('/tmp/s9new2'); tarfile.open('.devrun-s9/vision.tar.xz').extractall('/tmp/s9v')"
M=unet_gn,unet,resnet18_cifar,resnet50,unet_convt
MODELS=$M MODES= INIT=tcc STEPS=20 TIMEOUT=120 timeout 170 bash bench/models/run.sh /tmp/s9new $R/new > $R/new.log 2>&1
MODELS=$M MODES= INIT=tcc STEPS=20 TIMEOUT=120 timeout 170 bash bench/models/run.sh /tmp/s9new2 $R/new2 > $R/new2.log 2>&1
timeout 200 bash tests/gpu/vision_checks.sh /tmp/s9v/.devrun-s9v $R/vision > $R/vision.log 2>&1; echo "vision rc=$?" >> $R/vision.log
D=/tmp/s9new2; export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
for m in unet_gn resnet50; do data=$(python3 bench/models/make_data.py $D/$m); timeout 60 $D/bin/trun $D/$m/step.so --data $data --steps 10 --profile > $R/prof_$m.txt 2>&1; done
tar czf $OUT/r.tgz -C $OUT r
echo "== new"; cat $R/new/table.md; echo "== new2"; cat $R/new2/table.md
python3 - <<'PY'
import json,os
R=os.environ["OUT"]+"/r"
for tag in ("new","new2"):
    for l in open(f"{R}/{tag}/results.jsonl"):
        r=json.loads(l); print(tag, r.get("model"), r.get("system"), "loss", r.get("final_loss", r.get("loss")), "ms", r.get("ms_per_step", r.get("ms")))
PY
tail -15 $R/vision.log
