#!/bin/bash
# (1) reduce_bench variants on GPT-2's bias-gradient column sums; (2) the rebuilt GPT-2 step (sm90_family_switch) runs and chooses
cd "$(dirname "$0")"; root=$(cd .. && pwd)
export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
source $root/tests/gpu/cudnn_path.sh
mkdir -p res; tar xJf red.tar.xz
for r in 1 2; do for v in red/rb_V*; do n=$(basename $v); timeout 60 $v red/shapes.txt > res/${n}_$r.jsonl 2>res/${n}_$r.err || echo "$n failed"; done; done
python3 - <<'PY'
import json,glob,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob("res/rb_V*_*.jsonl")):
    v=f.split("/")[-1].split("_")[1]
    for l in open(f):
        r=json.loads(l); rows[(r["shape"],v)].append(r)
for k in sorted(rows):
    rs=rows[k]; print(k[0], k[1], " ".join(f"{r['ms']*1000:.1f}us {r['read_gbps']:.0f}GB/s" for r in rs), "copy", rs[0]["copy_gbps"], "floor_us", round(rs[0]["floor_ms"]*1000,1), rs[0]["phases"])
PY
head -c 600 res/rb_V0_1.jsonl
python3 $root/bench/gpt2/random_tokens.py tokens.bin 2000000 > /dev/null
timeout 120 ./bin/trun steps/gpt2_bf16.so --data tokens.bin --steps 20 --seed 0 --log-every 10 > res/gpt2.log 2>&1; echo gpt2 rc=$?
grep "gpu:\|step 20" res/gpt2.log | cut -c1-400
TCC_GEMM_CUTLASS=0 TCC_ATTENTION_SM90=0 timeout 120 ./bin/trun steps/gpt2_bf16.so --data tokens.bin --steps 10 --seed 0 --log-every 10 > res/gpt2_off.log 2>&1; echo off rc=$?
grep "gpu:" res/gpt2_off.log | cut -c1-300
tar czf $OUT/res.tgz res
