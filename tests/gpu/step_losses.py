"""The per-step losses of a trun metrics file (JSON lines, kind "step"),
in step order; [] when the file is missing (a run that failed)."""
import json


def step_losses(path):
    by_step = {}
    try:
        for line in open(path):
            d = json.loads(line)
            if d.get("kind") == "step":
                by_step[d["step"]] = d["loss"]
    except OSError:
        pass
    return [by_step[k] for k in sorted(by_step)]
