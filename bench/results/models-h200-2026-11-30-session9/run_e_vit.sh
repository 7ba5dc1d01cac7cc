#!/bin/bash
set -u
R=$OUT/r; mkdir -p $R
MODELS=vit_s16 MODES=compile INIT=torch STEPS=20 TIMEOUT=240 timeout 500 bash bench/models/run.sh .devrun-vit $R/cmp > $R/cmp.log 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/cmp/table.md
