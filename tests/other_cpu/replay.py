#!/usr/bin/python3
"""The parity tests with tcc's steps run on another machine's CPU — an
AVX-512 Intel Xeon, say, where only trun can run (the device machine has no
MLIR, no Debian PyTorch) — and everything else here (issue 32).

A test is run here three times over, unchanged, with its --bin-dir pointed
at a folder of shims:

  record  tcc is the real one, and every `tcc compile --target cpu ... -o
          X.so` also builds X.so.<arch>.so for each --arch (-march, e.g.
          sapphirerapids, skylake-avx512); trun is the real one, and each
          call is recorded: its arguments and the files of the test's work
          folder it started from (what changed since the previous call
          ended), under DIR/calls/N/.
  device  (on the other machine, no test there) every recorded call again,
          in order, on a work folder rebuilt call by call, with the step
          library replaced by its <arch> build and OPENBLAS_CORETYPE set:
          its output, exit status and the files it wrote, under
          DIR/results/VARIANT/N/.
  check   trun answers each call from DIR/results/VARIANT/N/ (after checking
          the arguments are the recorded ones), so the test compares
          PyTorch's references computed here with tcc's trajectory from the
          other CPU, by its own rules.

usage:
  replay.py record DIR --arch A[,B] -- TEST COMMAND ({bin}, {work} replaced)
  replay.py device DIR --trun TRUN --lib LIBDIR VARIANT=ARCH:CORE ...
  replay.py check DIR VARIANT -- TEST COMMAND
The test command gets {bin} (the shims) and {work} (DIR/work, the test's
--work-dir) filled in.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
WORK_TOKEN = "@WORK@"


def listing(folder):
    """path -> (size, mtime_ns) of every file under folder."""
    out = {}
    for base, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(base, f)
            st = os.lstat(p)
            out[os.path.relpath(p, folder)] = (st.st_size, st.st_mtime_ns)
    return out


def pack(folder, names, tar_path):
    with tarfile.open(tar_path, "w:gz") as t:
        for n in sorted(names):
            t.add(os.path.join(folder, n), arcname=n)


def unpack(tar_path, folder):
    with tarfile.open(tar_path) as t:
        t.extractall(folder)


def apply_start(call_dir, work):
    """Makes `work` the folder call N started from: files the test removed
    since the previous call are removed, files it wrote are unpacked."""
    meta = json.load(open(os.path.join(call_dir, "call.json")))
    for n in meta["removed"]:
        p = os.path.join(work, n)
        if os.path.isfile(p) or os.path.islink(p):
            os.remove(p)
    unpack(os.path.join(call_dir, "start.tar.gz"), work)
    return meta


def make_shims(directory, mode, state):
    """A bin folder: tcc and trun call back into this script; the other
    tools are links to the real ones."""
    shims = os.path.join(directory, "bin")
    shutil.rmtree(shims, ignore_errors=True)
    os.makedirs(shims)
    real = os.path.join(ROOT, "build", "bin")
    for tool in os.listdir(real):
        if tool not in ("tcc", "trun"):
            os.symlink(os.path.join(real, tool), os.path.join(shims, tool))
    for tool in ("tcc", "trun"):
        path = os.path.join(shims, tool)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 %s _%s %s %s \"$@\"\n"
                    % (HERE, tool, mode, state))
        os.chmod(path, 0o755)
    return shims


def run_test(directory, mode, command, extra_state=""):
    work = os.path.join(directory, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    state = os.path.join(directory, "state-" + mode + extra_state)
    shutil.rmtree(state, ignore_errors=True)
    os.makedirs(state)
    shims = make_shims(os.path.join(directory, mode + extra_state), mode, state)
    json.dump({"dir": directory, "work": work, "variant": extra_state.lstrip("-")},
              open(os.path.join(state, "config.json"), "w"))
    cmd = [c.replace("{bin}", shims).replace("{work}", work) for c in command]
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
                          ).returncode


def next_call(state):
    counter = os.path.join(state, "count")
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    return n


def shim_tcc(mode, state, args):
    cfg = json.load(open(os.path.join(state, "config.json")))
    real = os.path.join(ROOT, "build", "bin", "tcc")
    rc = subprocess.run([real] + args).returncode
    if mode == "record" and rc == 0 and args[:1] == ["compile"] and "cpu" in args and "-o" in args:
        out = args[args.index("-o") + 1]
        arches = json.load(open(os.path.join(cfg["dir"], "arches.json")))
        for arch in arches:
            extra = list(args)
            extra[extra.index("-o") + 1] = f"{out}.{arch}.so"
            r = subprocess.run([real] + extra + ["--cpu-arch", arch])
            if r.returncode != 0:
                return r.returncode
    return rc


def this_call(state):
    """(config, work folder, call number, its folder) of a trun call."""
    cfg = json.load(open(os.path.join(state, "config.json")))
    n = next_call(state)
    return cfg, cfg["work"], n, os.path.join(cfg["dir"], "calls", str(n))


def shim_trun_record(state, args):
    cfg, work, n, call = this_call(state)
    os.makedirs(call, exist_ok=True)
    before = listing(work)
    last_path = os.path.join(state, "after.json")
    after_prev = json.load(open(last_path)) if os.path.exists(last_path) else {}
    after_prev = {k: tuple(v) for k, v in after_prev.items()}
    changed = [k for k, v in before.items() if after_prev.get(k) != v]
    removed = [k for k in after_prev if k not in before]
    pack(work, changed, os.path.join(call, "start.tar.gz"))
    json.dump({"args": [a.replace(work, WORK_TOKEN) for a in args], "removed": removed},
              open(os.path.join(call, "call.json"), "w"))
    rc = subprocess.run([os.path.join(ROOT, "build", "bin", "trun")] + args).returncode
    json.dump(listing(work), open(last_path, "w"))
    return rc


def shim_trun_check(state, args):
    cfg, work, n, call = this_call(state)
    meta = json.load(open(os.path.join(call, "call.json")))
    got = [a.replace(work, WORK_TOKEN) for a in args]
    if got != meta["args"]:
        sys.stderr.write(f"replay: trun call {n} differs from the recorded one:\n  {got}\n"
                         f"  {meta['args']}\n")
        return 99
    result = os.path.join(cfg["dir"], "results", cfg["variant"], str(n))
    if not os.path.isdir(result):
        sys.stderr.write(f"replay: no result of call {n} for {cfg['variant']} in {result}\n")
        return 99
    unpack(os.path.join(result, "written.tar.gz"), work)
    sys.stdout.write(open(os.path.join(result, "output.txt")).read())
    return int(open(os.path.join(result, "rc")).read())


def device(directory, trun, lib, variants):
    """Every recorded call, per variant, on its own work folder."""
    calls = sorted(int(c) for c in os.listdir(os.path.join(directory, "calls")))
    summary = []
    for spec in variants:
        name, rest = spec.split("=", 1)
        arch, core = rest.split(":", 1)
        work = os.path.join(directory, "device-work-" + name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        env = dict(os.environ, LD_LIBRARY_PATH=lib)
        if core != "default":
            env["OPENBLAS_CORETYPE"] = core
        failed = 0
        for n in calls:
            call = os.path.join(directory, "calls", str(n))
            meta = apply_start(call, work)
            args = [a.replace(WORK_TOKEN, work) for a in meta["args"]]
            # The step library is trun's first argument: its <arch> build.
            args[0] = f"{args[0]}.{arch}.so"
            before = listing(work)
            r = subprocess.run([trun] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, timeout=600)
            written = [k for k, v in listing(work).items() if before.get(k) != v]
            out = os.path.join(directory, "results", name, str(n))
            os.makedirs(out, exist_ok=True)
            pack(work, written, os.path.join(out, "written.tar.gz"))
            open(os.path.join(out, "output.txt"), "w").write(r.stdout)
            open(os.path.join(out, "rc"), "w").write(str(r.returncode))
            failed += r.returncode != 0
        summary.append(f"{name}: -march={arch} OPENBLAS_CORETYPE={core}: {len(calls)} trun "
                       f"calls, {failed} with a nonzero exit")
    print("\n".join(summary))


def main(argv):
    if argv[0] == "_tcc":
        return shim_tcc(argv[1], argv[2], argv[3:])
    if argv[0] == "_trun":
        return (shim_trun_record if argv[1] == "record" else shim_trun_check)(argv[2], argv[3:])
    mode, directory = argv[0], os.path.abspath(argv[1])
    if mode == "record":
        sep = argv.index("--")
        opts, command = argv[2:sep], argv[sep + 1:]
        arches = opts[opts.index("--arch") + 1].split(",")
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        json.dump(arches, open(os.path.join(directory, "arches.json"), "w"))
        json.dump(command, open(os.path.join(directory, "command.json"), "w"))
        return run_test(directory, "record", command)
    if mode == "device":
        opts = argv[2:]
        trun, lib = opts[opts.index("--trun") + 1], opts[opts.index("--lib") + 1]
        variants = [o for o in opts if "=" in o]
        device(directory, os.path.abspath(trun), os.path.abspath(lib), variants)
        return 0
    if mode == "check":
        variant = argv[2]
        sep = argv.index("--")
        return run_test(directory, "check", argv[sep + 1:], "-" + variant)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
