#!/bin/bash
# session 9, call A: base vs new (tcc alone, same call), new vs torch.compile for unet_gn and resnet50
set -u
R=$OUT/r; mkdir -p $R
python3 -c "import tarfile; tarfile.open('.devrun-s9/base.tar.xz').extractall('/tmp/s9base'); tarfile.open('.devrun-s9/new.tar.xz').extractall('/tmp/s9new')"
cp -r /tmp/s9new/bin /tmp/s9new/lib.tar.gz /tmp/s9base/
D=/tmp/s9new
M=unet_gn,unet,resnet18_cifar,resnet50,unet_convt
MODELS=$M MODES= INIT=tcc STEPS=20 TIMEOUT=120 timeout 170 bash bench/models/run.sh /tmp/s9base $R/base > $R/base.log 2>&1
MODELS=$M MODES= INIT=tcc STEPS=20 TIMEOUT=120 timeout 170 bash bench/models/run.sh $D $R/new > $R/new.log 2>&1
MODELS=unet_gn,resnet50 MODES=compile INIT=torch STEPS=20 TIMEOUT=200 timeout 300 bash bench/models/run.sh $D $R/cmp1 > $R/cmp1.log 2>&1
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
data=$(python3 bench/models/make_data.py $D/unet_gn)
timeout 60 $D/bin/trun $D/unet_gn/step.so --data $data --steps 10 --profile > $R/prof_unet_gn.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
echo "== base"; cat $R/base/table.md; echo "== new"; cat $R/new/table.md; echo "== vs compile"; cat $R/cmp1/table.md
