#!/usr/bin/env python3
"""Data parallelism end to end on the CPU, with MPI ranks (Open MPI's
mpirun, which trun --nproc runs for a cpu step), on the gpt_char sample:

  * 2 ranks x batch 4 (a step compiled with --data-parallel, trun --nproc 2)
    give the losses of 1 rank x batch 8 over 50 steps, within 10x the
    distance between two 1-rank runs rounded differently (the step compiled
    with --cpu-arch none and run on another OpenBLAS core) + 1.9e-6: the
    ranks' gradient sums are the same mathematics in another order
    (tests/numerics/rounding_envelope.py);
    rank 0 alone prints and writes the metrics; likewise an image
    classifier (the MLP sample on Fashion-MNIST, 2 x 32 against 1 x 64,
    30 steps, the same test accuracy to the images rounding can flip);
  * synchronized batch norm (tcc compile --sync-batch-norm): the CNN
    sample at 2 ranks x 32 gives the losses of 1 rank x 64 (20 steps, the
    same limit), and without the flag (per-rank statistics) it does not;
  * ZeRO-1 (tcc compile --shard-optimizer 2): 2 ranks x batch 4, each
    keeping half of the AdamW state, give the same losses (50 steps, the
    same limit) with half the optimizer state per rank (trun --info);
  * ZeRO-3 (tcc compile --shard-parameters 2): each rank also holds half of
    every parameter, gathered before each use: the same losses and
    validation losses, half the parameters per rank (trun --info), a
    checkpoint at the last step, --save-weights (whole tensors: a 1-rank
    step and the ZeRO-3 step start from them alike) and sampling, which
    every rank runs;
  * a 2-rank checkpoint resumes on 1 rank (batch 8) and a 1-rank one on 2
    ranks, each continuing with the losses of the uninterrupted run; the
    same with the 2 ranks sharding their optimizer state (ZeRO-1) or their
    parameters (ZeRO-3);
  * killing rank 1 ends the job within 60 s, and mpirun names rank 1;
    stopping rank 1 (alive, silent) ends it through rank 0's watchdog
    (TCC_DIST_TIMEOUT=5);
  * bad input, each a clear error: a --global-batch the ranks do not make,
    a ZeRO-1 step for 2 ranks on 1 rank or in one process, a ZeRO-3 step
    for 2 ranks on 1,
    a step compiled for one rank, ranks running different step libraries,
    ranks resuming from different checkpoints, ranks given different flags,
    a cpu step under torchrun's variables, mpirun or the MPI plugin missing.

usage: data_parallel_cpu_test.py TCC TCC_DATA TRUN GPT_CHAR_PBTXT WORKDIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from e2e_steps import fail, losses, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numerics"))
import rounding_envelope as R  # noqa: E402

TCC, TCC_DATA, TRUN, MODEL, WORK = map(os.path.abspath, sys.argv[1:6])
STEPS = 50
FORTUNES = "/usr/share/games/fortunes"


def mpirun_flags():
    flags = ["--oversubscribe", "--bind-to", "none"]
    return flags + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def trun(args, tag, **extra_env):
    """trun with `args`, its metrics into WORK/tag.jsonl; returns (losses, stdout)."""
    metrics = os.path.join(WORK, tag + ".jsonl")
    env = dict(os.environ, **extra_env)
    result = subprocess.run([TRUN] + args + ["--seed", "3", "--log-every", "10", "--metrics", metrics],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        fail("trun %s exited %d:\n%s%s" % (" ".join(args), result.returncode, result.stdout,
                                           result.stderr))
    return losses(metrics), result.stdout


def rank_pid(rank, step):
    """The pid of the trun process of MPI rank `rank` running `step`."""
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if (b"OMPI_COMM_WORLD_RANK=%d" % rank) in env and cmd and cmd[0].endswith(b"trun") \
                and step.encode() in cmd:
            return int(pid)
    return None


def expect_error(args, needle, env=None, what=""):
    result = subprocess.run(args, capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, **(env or {})))
    text = result.stdout + result.stderr
    if result.returncode == 0 or needle not in text:
        fail("%s: expected a failure saying '%s', got exit %d:\n%s" % (what, needle, result.returncode, text))
    print("ok: %s: %s" % (what, next(l for l in text.splitlines() if needle in l).strip()[:200]))


def val_losses(tag):
    records = [json.loads(l) for l in open(os.path.join(WORK, tag + ".jsonl"))]
    return [r["val_loss"] for r in records if r.get("kind") == "eval" and "val_loss" in r]


def close(a, b, what, other):
    """Losses `a` against `b` (1 rank), within K times the distance of
    `other` (b's computation rounded another way) from b, + FLOOR, at every
    step (tests/numerics/rounding_envelope.py)."""
    failures = R.check_losses(what, a, b, [other], ref_name="1 rank", verbose=False)
    if failures:
        fail("%s:\n  %s\n%s\n%s\n%s" % (what, "\n  ".join(failures), a, b, other))
    worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    print("ok: %s: %d steps, max relative difference %.3g" % (what, len(a), worst))


def half_per_rank(step, prefix, what, tensors):
    """`trun STEP --info`'s line starting with `prefix` ends with the bytes
    per rank and whole: 2 ranks hold half each."""
    info = subprocess.run([TRUN, step, "--info"], capture_output=True, text=True, check=True).stdout
    line = next((l for l in info.splitlines() if l.startswith(prefix)), None)
    if not line:
        fail("trun --info of a %s step has no '%s' line:\n%s" % (what, prefix, info))
    per_rank, whole = [int(w) for w in line.replace("(", " ").split() if w.isdigit()][-2:]
    if per_rank * 2 != whole:
        fail("%s over 2 ranks should hold half of %s per rank: %s" % (what, tensors, line))
    print("ok: " + line)


def main():
    if not shutil.which("mpirun"):
        fail("mpirun is not installed: bash scripts/setup.sh installs Open MPI (openmpi-bin)")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    texts = sorted(os.path.join(FORTUNES, n) for n in os.listdir(FORTUNES)
                   if not n.endswith(".dat") and os.path.isfile(os.path.join(FORTUNES, n)))
    shards = os.path.join(WORK, "fortunes")
    run([TCC_DATA, "tokenize", "--level", "char", "--val-fraction", "0.1", "-o", shards] + texts)
    data, val = shards + "_train.bin", shards + "_val.bin"
    one = os.path.join(WORK, "b8.so")
    dp = os.path.join(WORK, "b4_dp.so")
    dp_other = os.path.join(WORK, "b4_dp_other.so")
    run([TCC, "compile", "--target", "cpu", "--batch", "8", MODEL, "-o", one])
    # The 1-rank step rounded another way (no -march, another BLAS core): how
    # far two honest float32 runs of it drift apart sets the limit.
    one_other = os.path.join(WORK, "b8_other.so")
    run([TCC, "compile", "--target", "cpu", "--cpu-arch", "none", "--batch", "8", MODEL,
         "-o", one_other])
    core = R.other_openblas_core()
    run([TCC, "compile", "--target", "cpu", "--batch", "4", "--data-parallel", MODEL, "-o", dp])
    zero = os.path.join(WORK, "b4_zero2.so")
    run([TCC, "compile", "--target", "cpu", "--batch", "4", "--shard-optimizer", "2", MODEL, "-o", zero])
    fsdp = os.path.join(WORK, "b4_fsdp2.so")
    run([TCC, "compile", "--target", "cpu", "--batch", "4", "--shard-parameters", "2", MODEL, "-o", fsdp])
    # Another data-parallel step with inputs of the same shape (it keeps the
    # model's batch of 32 by accumulating 8 micro-batches of 4): the
    # fingerprint check must tell the two apart.
    run([TCC, "compile", "--target", "cpu", "--batch", "4", "--data-parallel", "--keep-global-batch",
         MODEL, "-o", dp_other])

    # 1. The same steps.
    single, _ = trun([one, "--data", data, "--steps", str(STEPS), "--val", val, "--eval-every", "25",
                      "--eval-batches", "2"], "single")
    double, text = trun([dp, "--nproc", "2", "--data", data, "--steps", str(STEPS), "--val", val,
                         "--eval-every", "25", "--eval-batches", "2"], "double")
    other, _ = trun([one_other, "--data", data, "--steps", str(STEPS), "--val", val,
                     "--eval-every", "25", "--eval-batches", "2"], "single_other",
                    OPENBLAS_CORETYPE=core)
    print("reference: 1 rank rounded another way (--cpu-arch none, OpenBLAS %s): %d of %d "
          "losses bit-identical to the first" % (core, sum(a == b for a, b in zip(other, single)),
                                                 len(single)))
    close(double, single, "2 ranks x batch 4 vs 1 rank x batch 8", other)
    if text.count("ranks: 2, MPI") != 1 or text.count("trained %d steps" % STEPS) != 1:
        fail("rank 0 alone should print (one 'ranks:' line, one summary):\n" + text)
    # Validation: each rank its rows of the same batches, the mean over ranks.
    close(val_losses("double"), val_losses("single"), "validation, 2 ranks vs 1",
          val_losses("single_other"))

    # 1a. ZeRO-1: the same steps with each rank updating half of every
    # parameter and keeping half of the AdamW state.
    sharded, text = trun([zero, "--nproc", "2", "--data", data, "--steps", str(STEPS), "--val", val,
                          "--eval-every", "25", "--eval-batches", "2"], "zero")
    close(sharded, single, "ZeRO-1: 2 ranks x batch 4 vs 1 rank x batch 8", other)
    close(val_losses("zero"), val_losses("single"), "ZeRO-1: validation, 2 ranks vs 1",
          val_losses("single_other"))
    half_per_rank(zero, "optimizer sharded", "ZeRO-1", "the optimizer state")

    # 1a'. ZeRO-3: each rank also holds half of every parameter and gathers
    # it before each use; with a checkpoint at the last step (every rank must
    # agree no further one is due), --save-weights and sampling, which every
    # rank runs (the eval entry gathers the parameters).
    fsdp_ckpt = os.path.join(WORK, "ckpt_fsdp")
    fsdp_weights = os.path.join(WORK, "fsdp.safetensors")
    sharded3, text = trun([fsdp, "--nproc", "2", "--data", data, "--steps", str(STEPS), "--val", val,
                           "--eval-every", "25", "--eval-batches", "2", "--ckpt-dir", fsdp_ckpt,
                           "--ckpt-every", "25", "--save-weights", fsdp_weights, "--sample", "8"],
                          "fsdp")
    close(sharded3, single, "ZeRO-3: 2 ranks x batch 4 vs 1 rank x batch 8", other)
    close(val_losses("fsdp"), val_losses("single"), "ZeRO-3: validation, 2 ranks vs 1",
          val_losses("single_other"))
    if "saved weights:" not in text or "sample:" not in text:
        fail("ZeRO-3: rank 0 should save the weights and sample:\n" + text)
    half_per_rank(fsdp, "parameters sharded (ZeRO-3)", "ZeRO-3", "the parameters")
    # The saved weights are whole: a plain 1-rank step starts from them as
    # from its own, and so does the ZeRO-3 step (each rank cuts its shards).
    from_one, _ = trun([one, "--data", data, "--steps", "5", "--init-from", fsdp_weights], "init_one")
    from_fsdp, _ = trun([fsdp, "--nproc", "2", "--data", data, "--steps", "5", "--init-from",
                         fsdp_weights], "init_fsdp")
    close(from_fsdp, from_one, "ZeRO-3 --init-from the weights it saved, vs 1 rank", from_one)

    # 1b. An image classifier (the MLP sample on Fashion-MNIST): 2 ranks x
    # 32 images train like 1 x 64; the test split's accuracy is the same.
    mlp = os.path.join(os.path.dirname(os.path.dirname(MODEL)), "mlp", "mlp.pbtxt")
    mlp_one = os.path.join(WORK, "mlp64.so")
    mlp_dp = os.path.join(WORK, "mlp32_dp.so")
    run([TCC, "compile", "--target", "cpu", "--batch", "64", mlp, "-o", mlp_one])
    mlp_one_other = os.path.join(WORK, "mlp64_other.so")
    run([TCC, "compile", "--target", "cpu", "--cpu-arch", "none", "--batch", "64", mlp,
         "-o", mlp_one_other])
    run([TCC, "compile", "--target", "cpu", "--batch", "32", "--data-parallel", mlp, "-o", mlp_dp])
    images = "/usr/share/datasets/fashion-mnist"
    mlp_single, one_text = trun([mlp_one, "--data", images, "--steps", "30"], "mlp_single")
    mlp_double, two_text = trun([mlp_dp, "--nproc", "2", "--data", images, "--steps", "30"], "mlp_double")
    mlp_other, other_text = trun([mlp_one_other, "--data", images, "--steps", "30"], "mlp_other",
                        OPENBLAS_CORETYPE=core)
    close(mlp_double, mlp_single, "MLP: 2 ranks x batch 32 vs 1 rank x batch 64", mlp_other)
    # Rounding flips only the images on a decision boundary: the counts of
    # correct test images may differ by K times the other-rounded run's
    # difference, and by 2 images of 10000 where that is 0.
    def correct(text):
        line = next((l for l in text.splitlines() if l.startswith("test accuracy")), None)
        if line is None:
            fail("trun printed no test accuracy:\n" + text)
        return int(line.split("(")[1].split("/")[0])
    c1, c2, c_other = correct(one_text), correct(two_text), correct(other_text)
    limit = R.K * abs(c_other - c1) + 2
    if abs(c2 - c1) > limit:
        fail("MLP: test images correct: 1 rank %d, 2 ranks %d (limit %d apart; rounded another "
             "way %d)" % (c1, c2, limit, c_other))
    print("ok: MLP: test images correct: 1 rank %d, 2 ranks %d, rounded another way %d "
          "(limit %d apart)" % (c1, c2, c_other, limit))

    # 1c. Synchronized batch norm (tcc compile --sync-batch-norm): the CNN
    # sample (two BatchNorm2d) at 2 ranks x 32 images trains like 1 rank x
    # 64, since each rank normalizes with the global batch's statistics; the
    # same step without the flag (each rank its own 32 images' statistics)
    # does not, which shows the comparison can fail.
    samples = os.path.dirname(os.path.dirname(MODEL))
    cnn = os.path.join(WORK, "cnn.pbtxt")
    run([sys.executable, os.path.join(samples, "cnn", "model.py"), "-o", cnn, "--channels", "8,16",
         "--steps", "2000"],
        env=dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(samples), "python")))
    cnn_steps = {}
    for tag, flags in (("cnn64", ["--batch", "64"]),
                       ("cnn64_other", ["--batch", "64", "--cpu-arch", "none"]),
                       ("cnn32_sync", ["--batch", "32", "--data-parallel", "--sync-batch-norm"]),
                       ("cnn32_local", ["--batch", "32", "--data-parallel"])):
        cnn_steps[tag] = os.path.join(WORK, tag + ".so")
        run([TCC, "compile", "--target", "cpu"] + flags + [cnn, "-o", cnn_steps[tag]])
    cnn_args = ["--data", images, "--steps", "20"]
    cnn_single, _ = trun([cnn_steps["cnn64"]] + cnn_args, "cnn_single")
    cnn_other, _ = trun([cnn_steps["cnn64_other"]] + cnn_args, "cnn_other", OPENBLAS_CORETYPE=core)
    cnn_sync, _ = trun([cnn_steps["cnn32_sync"], "--nproc", "2"] + cnn_args, "cnn_sync")
    cnn_local, _ = trun([cnn_steps["cnn32_local"], "--nproc", "2"] + cnn_args, "cnn_local")
    close(cnn_sync, cnn_single, "CNN, synchronized batch norm: 2 ranks x batch 32 vs 1 rank x "
          "batch 64", cnn_other)
    apart = R.check_losses("CNN, per-rank batch norm", cnn_local, cnn_single, [cnn_other],
                           ref_name="1 rank", verbose=False)
    if not apart:
        fail("CNN: per-rank batch norm statistics (no --sync-batch-norm) gave the 1-rank losses "
             "too: the synchronized comparison above cannot tell the two apart\n%s\n%s"
             % (cnn_local, cnn_single))
    print("ok: CNN, per-rank batch norm: %d of %d losses outside the limit, max relative "
          "difference %.3g" % (len(apart), len(cnn_single),
                               max(abs(x - y) / abs(y) for x, y in zip(cnn_local, cnn_single))))

    # 2. Resume across world sizes (the same global batch).
    half = STEPS // 2
    for first, then, tag in (([dp, "--nproc", "2"], [one], "2to1"), ([one], [dp, "--nproc", "2"], "1to2"),
                             ([zero, "--nproc", "2"], [one], "zero2to1"),
                             ([one], [zero, "--nproc", "2"], "1tozero2"),
                             ([fsdp, "--nproc", "2"], [one], "fsdp2to1"),
                             ([one], [fsdp, "--nproc", "2"], "1tofsdp2")):
        ckpt = os.path.join(WORK, "ckpt_" + tag)
        trun(first + ["--data", data, "--steps", str(half), "--ckpt-dir", ckpt], tag + "_a")
        resumed, out = trun(then + ["--data", data, "--steps", str(STEPS), "--ckpt-dir", ckpt, "--resume"],
                            tag + "_b")
        if "resumed from" not in out:
            fail(tag + ": no 'resumed from' line:\n" + out)
        close(resumed, single[half:], "resume " + tag, other[half:])

    # 3. A dead rank, and a hung one (stopped: alive but silent), end the
    # job: the first through mpirun, the second through the other rank's
    # watchdog (TCC_DIST_TIMEOUT, here 5 s).
    for how, sig, needle in (("killed", signal.SIGKILL, "rank 1"),
                             ("stopped", signal.SIGSTOP, "no exchange with the other ranks finished for 5 s")):
        metrics = os.path.join(WORK, "%s.jsonl" % how)
        job = subprocess.Popen([TRUN, dp, "--nproc", "2", "--data", data, "--steps", "100000",
                                "--log-every", "0", "--metrics", metrics],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, TCC_DIST_TIMEOUT="5"))
        deadline = time.time() + 120
        while time.time() < deadline and (not os.path.exists(metrics) or
                                          sum(1 for _ in open(metrics)) < 3):
            time.sleep(0.2)
        victim = rank_pid(1, dp)
        if victim is None:
            job.kill()
            fail("could not find rank 1 of the running job")
        os.kill(victim, sig)
        hit_at = time.time()
        try:
            _, err = job.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
            os.kill(victim, signal.SIGKILL)
            fail("the job still ran 60 s after rank 1 was %s" % how)
        took = time.time() - hit_at
        if job.returncode == 0 or needle not in err:
            fail("after rank 1 was %s: exit %d, stderr:\n%s" % (how, job.returncode, err))
        print("ok: rank 1 %s: the job ended in %.1f s: %s" %
              (how, took, next(l for l in err.splitlines() if needle in l).strip()))

    # 4. Bad input.
    common = ["--data", data, "--steps", "2"]
    expect_error([TRUN, dp, "--nproc", "2", "--global-batch", "6"] + common,
                 "2 ranks x the step's batch 4 is 8; compile the step at batch 3",
                 what="--global-batch 6 on 2 ranks")
    expect_error([TRUN, dp, "--nproc", "2", "--global-batch", "9"] + common,
                 "2 ranks do not divide a global batch of 9", what="--global-batch 9 on 2 ranks")
    expect_error([TRUN, one, "--nproc", "2"] + common, "was compiled for one rank",
                 what="a one-rank step under --nproc")
    expect_error([TRUN, zero, "--nproc", "1"] + common,
                 "shards its optimizer state over exactly 2 ranks (tcc compile --shard-optimizer 2)",
                 what="a ZeRO-1 step for 2 ranks on 1")
    expect_error([TRUN, zero] + common, "started as one process, but step",
                 what="a ZeRO-1 step for 2 ranks in one process")
    expect_error([TRUN, fsdp, "--nproc", "1"] + common,
                 "shards its parameters and optimizer state over exactly 2 ranks (tcc compile "
                 "--shard-parameters 2)", what="a ZeRO-3 step for 2 ranks on 1")
    expect_error(["mpirun", "-np", "1"] + mpirun_flags() + [TRUN, dp] + common + [":", "-np", "1"] +
                 [TRUN, dp_other] + common,
                 "the ranks loaded different step libraries", what="different step libraries")
    # Rank 1 cannot see rank 0's checkpoints (as on a machine without the
    # shared file system): the same --ckpt-dir, run from two directories
    # (mpirun -wdir), one holding rank 0's checkpoints. Refused, not a
    # silent divergence.
    seen, unseen = os.path.join(WORK, "wdir_seen"), os.path.join(WORK, "wdir_unseen")
    os.makedirs(seen)
    os.makedirs(os.path.join(unseen, "ckpt"))
    os.symlink(os.path.join(WORK, "ckpt_2to1"), os.path.join(seen, "ckpt"))
    resume = [TRUN, dp, "--ckpt-dir", "ckpt", "--resume", "--data", data, "--steps", str(STEPS + 2)]
    expect_error(["mpirun", "-np", "1", "-wdir", seen] + mpirun_flags() + resume +
                 [":", "-np", "1", "-wdir", unseen] + resume,
                 "the ranks start from different steps (rank 0 at step %d, rank 1 at step 0)" % STEPS,
                 what="ranks resuming from different checkpoints")
    expect_error(["mpirun", "-np", "1"] + mpirun_flags() + [TRUN, dp] + common +
                 [":", "-np", "1", TRUN, dp, "--seed", "5"] + common,
                 "rank 1 has another --seed than rank 0", what="ranks given different flags")
    expect_error([TRUN, dp] + common, "a cpu step trains across ranks with MPI",
                 env={"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                      "MASTER_PORT": "29511"}, what="a cpu step under torchrun")
    expect_error([TRUN, dp, "--nproc", "2"] + common, "mpirun was not found",
                 env={"TCC_MPIRUN": "/nonexistent/mpirun"}, what="mpirun missing")
    expect_error([TRUN, dp, "--nproc", "1"] + common, "cannot load trun's MPI back end",
                 env={"TCC_MPI_PLUGIN": "/nonexistent/libtcc_mpi.so"}, what="MPI plugin missing")
    print("PASS")


main()
