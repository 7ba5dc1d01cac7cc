#!/usr/bin/env python3
"""Results of bench/models: one JSON record per (model, system[, scenario])
in a results.jsonl, and the markdown tables made from them.

  table.py record --model M --system S --dir PREP/M [--metrics F] [--log L]
                  [--rc N] [--warmup W] [--scenario X] [--threads N]
      prints the record of a run that printed none itself: a tcc run (from
      trun's --metrics file, its log and PREP/M's meta.json / info.txt /
      error.txt), or a PyTorch run that died before printing its line (its
      exit status and the last line of its log)
  table.py brief RESULTS.jsonl   the last record in one line (progress)
  table.py gpu RESULTS.jsonl...  the GPU table (run.sh; several files: the
                                 results of several run.sh calls together)
  table.py cpu RESULTS.jsonl...  the CPU table (cpu.sh)

tcc's ms/step is the median step_ms (trun's train call alone; batches are
loaded by a background thread) of the steps after the warm-up; its peak
memory is the run end's gpu_peak_bytes (the device allocator's peak: weights,
optimizer state, workspace, inputs; trun's "gpu memory: ... peak" line), its
plan the same line's "planned" and trun --info's workspace (activations,
gradients and temporaries as the memory plan lays them out). The PyTorch
records come from torch_bench.py (median over CUDA events; peak:
torch.cuda.max_memory_allocated).
"""
import argparse
import json
import os
import re
import statistics
import sys

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def short_error(text, limit=300):
    """The first line that says something, without from_torch's list of
    every supported op."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    msg = lines[0]
    if msg.startswith("compile:") and len(lines) > 1:
        # tcc's own message is its last error line, not the command
        errs = [ln for ln in lines[1:] if "error" in ln.lower()]
        msg = "compile: " + (errs[0] if errs else lines[-1])
    msg = msg.split(" — supported:")[0]
    return msg[:limit] + ("..." if len(msg) > limit else "")


def last_log_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return "(no log)"
    for ln in reversed(lines):  # an error line if there is one
        if re.search(r"error|Error|failed|timeout|Killed|out of memory", ln):
            return ln[:300]
    return lines[-1][:300] if lines else "(empty log)"


def tcc_record(a):
    rec = dict(model=a.model, system=a.system, scenario=a.scenario)
    if a.round:
        rec["round"] = a.round
    meta_path = os.path.join(a.dir, "meta.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f)
        rec.update(items_per_step=meta.get("items_per_step"), unit=meta.get("unit"),
                   params=meta.get("params"))
        if a.system == "tcc":
            rec.update(target=meta.get("target"), precision=meta.get("precision"))
    err = os.path.join(a.dir, "error.txt")
    if a.system == "tcc" and os.path.exists(err):
        with open(err) as f:
            rec.update(status="error", error=short_error(f.read()))
        return rec
    if a.threads:
        rec["threads"] = a.threads
    if a.rc not in (None, "0"):
        why = {"124": "timeout", "137": "killed (timeout or memory)"}.get(a.rc, f"exit {a.rc}")
        rec.update(status="error", error=f"{why}: {last_log_line(a.log)}")
        return rec
    if a.system != "tcc":
        rec.update(status="error", error=f"no result line: {last_log_line(a.log)}")
        return rec
    try:
        recs = read_jsonl(a.metrics)
    except OSError as e:
        rec.update(status="error", error=f"no metrics: {e}")
        return rec
    ms = [r["step_ms"] for r in recs if r.get("kind") == "step" and r["step"] > a.warmup]
    if not ms:
        rec.update(status="error", error=f"no step after the {a.warmup} warm-up steps: "
                   f"{last_log_line(a.log)}")
        return rec
    med = statistics.median(ms)
    rec.update(status="ok", steps=len(ms), warmup=a.warmup, ms_per_step=round(med, 3),
               ms_per_step_min=round(min(ms), 3), ms_per_step_max=round(max(ms), 3))
    if rec.get("items_per_step"):
        rec["items_per_s"] = round(rec["items_per_step"] / med * 1e3, 1)
    losses = [r["loss"] for r in recs if r.get("kind") == "step" and r.get("loss") is not None]
    if losses:
        rec.update(loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4))
    end = [r for r in recs if r.get("kind") == "run" and r.get("event") == "end"]
    if end and "gpu_peak_bytes" in end[-1]:
        rec["peak_mem_bytes"] = int(end[-1]["gpu_peak_bytes"])
    if a.log and os.path.exists(a.log):
        with open(a.log, errors="replace") as f:
            log = f.read()
        m = re.search(r"gpu memory: .*\(planned ([0-9.]+) (B|KiB|MiB|GiB|TiB)\)", log)
        if m:
            rec["planned_bytes"] = int(float(m.group(1)) * UNITS[m.group(2)])
    info = os.path.join(a.dir, "info.txt")
    if os.path.exists(info):
        with open(info) as f:
            m = re.search(r"^workspace: (\d+) bytes", f.read(), re.M)
        if m:
            rec["workspace_bytes"] = int(m.group(1))
    return rec


def gib(b):
    return f"{b / 2**30:.2f}" if b else "-"


def ratio(num, den):
    """num / den as '1.23x', '-' when either is missing."""
    return f"{num / den:.2f}x" if num and den else "-"


def cell(r):
    """ms/step, or why there is none."""
    if r is None:
        return "not run"
    if r.get("status") == "ok":
        return f"{r['ms_per_step']:.2f}"
    return "**failed**" if r.get("status") == "error" else r.get("status", "?")


def by_model(records):
    models, out = [], {}
    for r in records:
        if r["model"] not in models:
            models.append(r["model"])
        out.setdefault(r["model"], {})[(r["system"], r.get("scenario", ""))] = r
    return models, out


def errors_of(rows):
    notes = []
    for r in rows:
        if r and r.get("status") != "ok" and r.get("error"):
            notes.append(f"{r['system']}: {r['error']}")
    return notes


def gpu_table(records):
    models, got = by_model(records)
    first = next((r for r in records if r.get("device")), {})
    step = next((r for r in records if r.get("precision") and r["system"] == "tcc"), {})
    print(f"One training step per model, {first.get('device', '?')}, torch "
          f"{first.get('torch', '?')}; tcc: trun on the step of tcc compile --target "
          f"{step.get('target', '?')} --precision {step.get('precision', '?')}; PyTorch: "
          f"{first.get('precision', '?')}, channels_last for the conv nets on CUDA, "
          "fused AdamW / foreach SGD on CUDA. Median ms/step.")
    print()
    print("| model | items/step | tcc ms | eager ms | compile ms | tcc vs eager "
          "| tcc vs compile | tcc peak GiB | compile peak GiB | eager peak GiB "
          "| tcc mem / compile | tcc workspace GiB (planned) | tcc items/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for m in models:
        t = got[m].get(("tcc", ""))
        e = got[m].get(("pytorch-eager", ""))
        c = got[m].get(("pytorch-compile", ""))
        ok = lambda r: r if r and r.get("status") == "ok" else None  # noqa: E731
        tm, em, cm = (ok(r)["ms_per_step"] if ok(r) else None for r in (t, e, c))
        tp, cp, ep = (ok(r).get("peak_mem_bytes") if ok(r) else None for r in (t, c, e))
        items = next((r.get("items_per_step") for r in (t, e, c) if r and r.get("items_per_step")), None)
        unit = next((r.get("unit") for r in (t, e, c) if r and r.get("unit")), "")
        ws = t.get("workspace_bytes") if t else None
        print(f"| {m} | {items or '-'} {unit} | {cell(t)} | {cell(e)} | {cell(c)} "
              f"| {ratio(em, tm)} | {ratio(cm, tm)} | {gib(tp)} | {gib(cp)} | {gib(ep)} "
              f"| {ratio(tp, cp)} | {gib(ws)} | {ok(t)['items_per_s'] if ok(t) and ok(t).get('items_per_s') else '-'} |")
        notes += [f"{m}, {n}" for n in errors_of([t, e, c])]
    print()
    print("tcc vs eager / vs compile: PyTorch's ms/step divided by tcc's (above 1: "
          "tcc is faster). tcc mem / compile: tcc's peak over torch.compile's "
          "(above 1: tcc uses more).")
    if notes:
        print()
        print("Failures:")
        print()
        for n in notes:
            print(f"- {n}")


def cpu_table(records):
    """One row per (model, scenario); with several rounds, each cell is the
    median of the rounds' medians and their range, so drift shows."""
    models, scenarios, runs = [], [], {}
    for r in records:
        if r["model"] not in models:
            models.append(r["model"])
        if r.get("scenario") not in scenarios:
            scenarios.append(r.get("scenario"))
        runs.setdefault((r["model"], r.get("scenario"), r["system"]), []).append(r)
    rounds = max(len(v) for v in runs.values())
    print("| model | scenario | tcc ms/step | PyTorch eager ms/step | eager / tcc "
          "| tcc items/s | eager items/s |")
    print("|---|---|---|---|---|---|---|")
    notes = []

    def summary(rs):
        """(median ms or None, cell text, items/s)"""
        if not rs:
            return None, "not run", "-"
        good = [r["ms_per_step"] for r in rs if r.get("status") == "ok"]
        if not good:
            return None, cell(rs[-1]), "-"
        med = statistics.median(good)
        text = f"{med:.2f}"
        if len(good) > 1:
            text += f" ({min(good):.1f}-{max(good):.1f})"
        if len(good) < len(rs):
            text += f", {len(rs) - len(good)} failed"
        items = rs[0].get("items_per_step")
        return med, text, f"{items / med * 1e3:.1f}" if items else "-"

    for m in models:
        for s in scenarios:
            t = runs.get((m, s, "tcc"), [])
            e = runs.get((m, s, "pytorch-eager"), [])
            if not t and not e:
                continue
            tm, tt, ti = summary(t)
            em, et, ei = summary(e)
            print(f"| {m} | {s} | {tt} | {et} | {ratio(em, tm)} | {ti} | {ei} |")
            notes += [f"{m} ({s}), {n}" for n in errors_of(t + e)]
    print()
    print("eager / tcc: PyTorch's ms/step divided by tcc's (above 1: tcc is faster)."
          + (f" Each cell: the median of {rounds} rounds' medians (their range)."
             if rounds > 1 else ""))
    if notes:
        print()
        print("Failures:")
        print()
        for n in dict.fromkeys(notes):
            print(f"- {n}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--model", required=True)
    r.add_argument("--system", default="tcc")
    r.add_argument("--dir", required=True, help="the model's folder from prepare.py")
    r.add_argument("--metrics")
    r.add_argument("--log")
    r.add_argument("--rc", default=None)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--scenario", default="")
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--round", type=int, default=0)
    for name in ("brief", "gpu", "cpu"):
        t = sub.add_parser(name)
        t.add_argument("results", nargs="+")
    a = p.parse_args()
    if a.cmd == "record":
        print(json.dumps(tcc_record(a)))
        return
    records = [r for path in a.results for r in read_jsonl(path)]
    if a.cmd == "brief":
        r = records[-1] if records else {}
        what = (f"{r['ms_per_step']:.2f} ms/step" if r.get("status") == "ok"
                else f"{r.get('status')}: {r.get('error')}")
        print(f"{r.get('model')} {r.get('system')} {r.get('scenario') or ''}: {what}")
        return
    if not records:
        sys.exit(f"table.py: no records in {' '.join(a.results)}")
    (gpu_table if a.cmd == "gpu" else cpu_table)(records)


if __name__ == "__main__":
    main()
