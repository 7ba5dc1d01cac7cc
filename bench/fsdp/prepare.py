#!/usr/bin/env python3
"""Issue 34's parameter-sharding benchmark, here (no GPU): the LLaMA-style
decoder of bench/models/torch_models.py at ~1.5B parameters, imported with
tcc.from_torch and compiled for 2 ranks twice: --shard-parameters 2
(ZeRO-3) and --data-parallel (every rank holds everything), bf16, sm_90.

    prepare.py OUT [--ranks 2] [--layers 32] [--bin build/bin]

OUT/model.pb, OUT/z3.so, OUT/dp.so, OUT/info_*.txt (trun --info),
OUT/reports/ (tg-shard-parameters and kern-schedule-collectives reports),
OUT/meta.json (the config and parameter count, which fsdp_bench.py reads).
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "python"))
sys.path.insert(0, os.path.join(root, "bench", "models"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tcc  # noqa: E402
import torch_models as M  # noqa: E402

# ~1.5B parameters: LLaMA-style, GQA 16 query / 4 kv heads of 128, SwiGLU
# 5632, tied embeddings, T = 2048.
CONFIG = dict(vocab=32000, context=2048, layers=32, dim=2048, heads=16, kv_heads=4,
              hidden=5632, batch=4)


def build(cfg):
    return M.Llama(vocab=cfg["vocab"], context=cfg["context"], layers=cfg["layers"],
                   dim=cfg["dim"], heads=cfg["heads"], kv_heads=cfg["kv_heads"],
                   hidden=cfg["hidden"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--layers", type=int, default=CONFIG["layers"])
    p.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = dict(CONFIG, layers=a.layers)
    torch.manual_seed(0)
    module = build(cfg)
    params = sum(p.numel() for p in module.parameters() if p.requires_grad)
    opt = M._adamw(module)
    B, T, V = cfg["batch"], cfg["context"], cfg["vocab"]
    data = torch.randint(0, V, (B, T + 1))
    t0 = time.perf_counter()
    model = tcc.from_torch(module, (data[:, :-1].contiguous(),), loss=F.cross_entropy,
                           target=data[:, 1:].contiguous(), optimizer=opt, grad_clip=1.0)
    model.save(os.path.join(a.out, "model.pb"))
    meta = dict(config=cfg, params=params, ranks=a.ranks, import_s=round(time.perf_counter() - t0, 1))
    del module, model
    tcc_bin = os.path.join(a.bin, "tcc")
    for name, flags in (("z3", ["--shard-parameters", str(a.ranks)]), ("dp", ["--data-parallel"])):
        with tempfile.TemporaryDirectory(prefix="tcc-dump-") as dump:
            cmd = [tcc_bin, "compile", "--target", "cuda", "--arch", "sm_90", "--precision", "bf16",
                   os.path.join(a.out, "model.pb"), "-o", os.path.join(a.out, name + ".so"),
                   "--dump-dir", dump] + flags
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            meta[name + "_compile_s"] = round(time.perf_counter() - t0, 1)
            meta[name + "_compile_cmd"] = " ".join(["tcc"] + cmd[1:]).replace(a.out + "/", "")
            os.makedirs(os.path.join(a.out, "reports"), exist_ok=True)
            for r in glob.glob(os.path.join(dump, "*shard-parameters-report.txt")) + \
                    glob.glob(os.path.join(dump, "*schedule-collectives-report.txt")):
                shutil.copy(r, os.path.join(a.out, "reports", name + "-" + os.path.basename(r)))
        info = subprocess.run([os.path.join(a.bin, "trun"), os.path.join(a.out, name + ".so"),
                               "--info"], stdout=subprocess.PIPE, text=True, check=True).stdout
        open(os.path.join(a.out, "info_%s.txt" % name), "w").write(info)
    json.dump(meta, open(os.path.join(a.out, "meta.json"), "w"), indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
