#!/bin/bash
# session 9, calls C/D: new2 steps next to torch.compile, same call. MODELS=a,b
set -u
R=$OUT/r; mkdir -p $R
python3 -c "import tarfile; tarfile.open('.devrun-s9/new2.tar.xz').extractall('/tmp/s9new2')"
MODELS=$MODELS MODES=compile INIT=torch STEPS=20 TIMEOUT=240 timeout 560 bash bench/models/run.sh /tmp/s9new2 $R/cmp > $R/cmp.log 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/cmp/table.md
