"""What the CPU end-to-end tests share: failing with a message, running a
tool (its output shown when it fails), and reading per-step losses from a
trun --metrics file."""
import json
import subprocess
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(args, env=None):
    result = subprocess.run(args, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(args), result.returncode,
                                      result.stdout, result.stderr))
    return result


def losses(metrics):
    """The step records' losses, in step order."""
    out = {}
    with open(metrics) as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "step":
                out[record["step"]] = record["loss"]
    return [out[s] for s in sorted(out)]
