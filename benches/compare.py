#!/usr/bin/env python3
"""Side-by-side comparison of ctf-reader with its peers (issue 7, README "Performance").

Usage (from the repository root; needs cargo, python3 with venv, and the generator at
../shared/bench/gen_ctf.py or $CTF_GEN_SCRIPT):

    python3 benches/compare.py [--mb 100] [--runs 5] [--no-venv] [--venv DIR] [--keep]

What it does, in a temporary directory removed at the end:
  1. builds `ctf` and `examples/naive_parse` in release mode;
  2. generates about --mb MB of each gen_ctf.py shape (dense, sparse, seq, ragged) and its
     reader config (`--config-only`), a CSV rendering of dense and an svmlight rendering of
     sparse, and seed 004's data: 10,000 int32 sequences of length 100-199 (numpy
     default_rng(1234), as in the seed) as a TFRecord and as CTF;
  3. installs pandas, scikit-learn, xgboost and tensorflow-cpu with pip into a throwaway venv
     (each one skipped with a note when it cannot be installed);
  4. runs every contender of a workload in turn, --runs times (alternating, after one
     unmeasured warm-up round so the page cache is warm), and prints ONE table of medians and
     ratios: how many times faster ctf-reader is than each contender on the same data.

Timings: native tools (`ctf bench`, `wc -l`, naive_parse) are timed as whole processes
(wall clock, process start included); the Python loaders time their own load call, so their
interpreter start and imports are not counted; tf.data times a full pass over the dataset
after a first, unmeasured pass in the same process (graph tracing excluded). Like is compared
with like: ctf-reader's ratio to a process-timed tool uses its process wall clock, and its
ratio to a self-timed Python loader uses the time `ctf bench` reports for itself
(`elapsed_s`: from the start of its `main`, before the configuration is read, to the last
minibatch, the index build included; the process's exec and exit are not counted, as the
Python loaders' interpreter start is not). The table shows both ctf-reader times.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ["dense", "sparse", "seq", "ragged"]
SEED004_BATCH = 512


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def target_dir():
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(meta)["target_directory"]


def build():
    log("building ctf and naive_parse (release)...")
    run(["cargo", "build", "--release", "--quiet", "--bin", "ctf", "--example", "naive_parse"],
        cwd=ROOT)
    t = target_dir()
    return os.path.join(t, "release", "ctf"), os.path.join(t, "release", "examples", "naive_parse")


def generator():
    gen = os.environ.get("CTF_GEN_SCRIPT") or os.path.join(ROOT, "..", "shared", "bench", "gen_ctf.py")
    if not os.path.exists(gen):
        sys.exit(f"error: no generator at {gen} (set CTF_GEN_SCRIPT)")
    return gen


def generate(gen, shape, tmp, target_mb):
    """About target_mb MB of `shape`; N scaled from a small sample of the same generator."""
    probe = os.path.join(tmp, f"probe-{shape}.ctf")
    run([sys.executable, gen, shape, probe, "--n", "500"], stderr=subprocess.DEVNULL)
    per_seq = os.path.getsize(probe) / 500
    os.remove(probe)
    n = max(1, int(target_mb * 1e6 / per_seq))
    path = os.path.join(tmp, f"{shape}.ctf")
    log(f"generating {shape}: {n} sequences...")
    run([sys.executable, gen, shape, path, "--n", str(n)], stderr=subprocess.DEVNULL)
    config = subprocess.run([sys.executable, gen, shape, path, "--config-only"],
                            check=True, capture_output=True, text=True).stdout
    cfg = os.path.join(tmp, f"{shape}.cntk")
    with open(cfg, "w") as f:
        f.write(config)
    return path, cfg


def dense_to_csv(src, dst):
    """`|labels <10> |features <784>` lines to 794 comma-separated integers."""
    with open(src) as fi, open(dst, "w") as fo:
        for line in fi:
            fo.write(",".join(line.replace("|labels", "").replace("|features", "").split()))
            fo.write("\n")


def sparse_to_svmlight(src, dst):
    """`|src i:v ... |tgt i:v ...` lines to `0 <src i+1>:v ... <tgt 100000+i+1>:v` (ascending)."""
    with open(src) as fi, open(dst, "w") as fo:
        for line in fi:
            out = ["0"]
            offset = 0
            for tok in line.split():
                if tok == "|src":
                    offset = 1
                elif tok == "|tgt":
                    offset = 100001
                else:
                    i, v = tok.split(":")
                    out.append(f"{int(i) + offset}:{v}")
            fo.write(" ".join(out))
            fo.write("\n")


def make_venv(tmp, existing=None):
    """A venv with what pip can install: throwaway in `tmp`, or `existing` (created there
    when it holds no venv yet, and kept); returns (python, installed set)."""
    venv = existing or os.path.join(tmp, "venv")
    try:
        if not os.path.exists(os.path.join(venv, "bin", "python")):
            run([sys.executable, "-m", "venv", venv], stdout=subprocess.DEVNULL)
    except (subprocess.CalledProcessError, OSError) as e:
        log(f"note: no venv ({e}); pandas, scikit-learn, xgboost and tf.data are skipped")
        return None, set()
    py = os.path.join(venv, "bin", "python")
    installed = set()
    for pkg, module in [("numpy", "numpy"), ("pandas", "pandas"), ("scikit-learn", "sklearn"),
                        ("xgboost", "xgboost"), ("tensorflow-cpu", "tensorflow")]:
        log(f"pip install {pkg}...")
        r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", pkg],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ok = r.returncode == 0 and subprocess.run(
            [py, "-c", f"import {module}"], capture_output=True).returncode == 0
        if ok:
            installed.add(module)
        else:
            log(f"note: {pkg} could not be installed; its comparison is skipped\n{r.stderr[-400:]}")
    return py, installed


# Python snippets run in the venv; each prints the seconds of its own load on stdout.
PANDAS = """
import sys, time, pandas as pd
t = time.perf_counter(); df = pd.read_csv(sys.argv[1], header=None)
s = time.perf_counter() - t; assert df.shape[1] == 794; print(s)
"""
SKLEARN = """
import sys, time
from sklearn.datasets import load_svmlight_file
t = time.perf_counter(); X, y = load_svmlight_file(sys.argv[1], n_features=200001)
s = time.perf_counter() - t; assert X.nnz > 0; print(s)
"""
XGBOOST = """
import sys, time, xgboost as xgb
t = time.perf_counter(); d = xgb.DMatrix(sys.argv[1] + "?format=libsvm")
s = time.perf_counter() - t; assert d.num_row() > 0; print(s)
"""
# Seed 004's data and its batch-decoding pipeline (the seed's code, the same parameters).
TF_WRITE = """
import sys, numpy as np, tensorflow as tf
rnd = np.random.default_rng(seed=1234)
lengths = rnd.integers(low=100, high=200, size=(10000,))
with tf.io.TFRecordWriter(sys.argv[1]) as writer, open(sys.argv[2], "w") as ctf:
    for k, l in enumerate(lengths):
        x = rnd.integers(low=0, high=100000, size=(l,), dtype=np.int32)
        ex = tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.tobytes()]))}))
        writer.write(ex.SerializeToString())
        ctf.write("%d |n 1 |x %d\\n" % (k, x[0]))
        ctf.write("".join("%d |x %d\\n" % (k, v) for v in x[1:]))
"""
SEED004_NUMPY = """
import sys, numpy as np
rnd = np.random.default_rng(seed=1234)
lengths = rnd.integers(low=100, high=200, size=(10000,))
with open(sys.argv[1], "w") as ctf:
    for k, l in enumerate(lengths):
        x = rnd.integers(low=0, high=100000, size=(l,), dtype=np.int32)
        ctf.write("%d |n 1 |x %d\\n" % (k, x[0]))
        ctf.write("".join("%d |x %d\\n" % (k, v) for v in x[1:]))
"""
TF_READ = """
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
def parse_batch_example(example):
    features = tf.io.parse_example(example, features={
        "x": tf.io.FixedLenFeature([], dtype=tf.string)})
    x_bin = features["x"]
    x_lengths = tf.strings.length(x_bin)
    x_decoded_flatten = tf.io.decode_raw(tf.strings.reduce_join(x_bin), tf.int32)
    return tf.RaggedTensor.from_row_lengths(x_decoded_flatten, x_lengths // tf.int32.size)
ds = tf.data.TFRecordDataset([sys.argv[1]]).batch(512).map(parse_batch_example)
n = sum(int(b.values.shape[0]) for b in ds)  # first pass: tracing, not measured
t = time.perf_counter(); m = sum(int(b.values.shape[0]) for b in ds); s = time.perf_counter() - t
assert n == m and m > 0
print(s)
"""

SEED004_CONFIG = """reader = [
  readerType = "CNTKTextFormatReader"
  file = "{path}"
  randomize = false
  input = [
    n = [ dim = 1 ; format = "dense" ; definesMBSize = true ]
    x = [ dim = 1 ; format = "dense" ]
  ]
]
"""


class Contender:
    """A command whose run gives seconds: wall clock of the process, or what it prints."""

    def __init__(self, name, cmd, data_bytes, self_timed=False, expect=None):
        self.name, self.cmd, self.bytes, self.self_timed = name, cmd, data_bytes, self_timed
        # `key: value` lines the output must hold (what `ctf bench` read), checked every run.
        self.expect = expect or {}
        self.times = []
        # What the command reported as its own time (`elapsed_s`) in each measured run, and
        # in the last run, for a native command compared with self-timed contenders too.
        self.own_times = []
        self.last_own = None

    def once(self):
        t = time.perf_counter()
        r = subprocess.run(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(self.cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
        got = dict(l.split(": ", 1) for l in r.stdout.splitlines() if ": " in l)
        self.last_own = float(got["elapsed_s"]) if "elapsed_s" in got else None
        if self.expect:
            for key, value in self.expect.items():
                if got.get(key) != str(value):
                    raise RuntimeError(f"{' '.join(self.cmd)}: expected {key}: {value}, "
                                       f"got {got.get(key)}\n{r.stdout}")
        return float(r.stdout.strip().splitlines()[-1]) if self.self_timed else wall

    def median(self):
        return statistics.median(self.times)

    def own_median(self):
        """The median of the times the command reported for itself (`elapsed_s`)."""
        return statistics.median(self.own_times)

    def spread(self):
        """(max - min) / median, in percent: how noisy the runs were."""
        return 100 * (max(self.times) - min(self.times)) / self.median()


LOADAVG = []


def loadavg():
    """The 1-minute load average (other work on the machine), where the system has it."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def measure(ctf_reader, others, runs):
    """One warm-up round, then `runs` rounds alternating ctf-reader and the others."""
    LOADAVG.append(loadavg())
    everyone = [ctf_reader] + others
    for c in everyone:
        c.once()
    for _ in range(runs):
        for c in everyone:
            c.times.append(c.once())
            if c.last_own is not None:
                c.own_times.append(c.last_own)
    LOADAVG.append(loadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=100, help="MB of data per shape (default 100)")
    ap.add_argument("--runs", type=int, default=5, help="measured runs per contender (default 5)")
    ap.add_argument("--no-venv", action="store_true", help="skip the pip-installed peers")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--venv", metavar="DIR",
                    help="use the venv in DIR (created there if missing; kept) instead of a throwaway one")
    args = ap.parse_args()
    if args.runs < 1 or args.mb <= 0:
        sys.exit("error: --runs must be at least 1 and --mb positive")

    ctf, naive = build()
    gen = generator()
    tmp = tempfile.mkdtemp(prefix="ctf-compare-")
    try:
        rows = compare(ctf, naive, gen, tmp, args)
    finally:
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows, args)


def compare(ctf, naive, gen, tmp, args):
    py, have = (None, set()) if args.no_venv else make_venv(tmp, args.venv)
    rows = []
    for shape in SHAPES:
        path, cfg = generate(gen, shape, tmp, args.mb)
        size = os.path.getsize(path)
        mine = Contender("ctf-reader (ctf bench, randomized, 256-sample mb)",
                         [ctf, "bench", cfg, "--mb-size", "256"], size,
                         expect={"bytes": size, "sweeps": 1})
        others = [Contender("wc -l (I/O floor)", ["wc", "-l", path], size),
                  Contender("naive single-thread parse", [naive, path], size)]
        if shape == "dense" and "pandas" in have:
            csv = os.path.join(tmp, "dense.csv")
            dense_to_csv(path, csv)
            others.append(Contender("pandas read_csv (CSV rendering)", [py, "-c", PANDAS, csv],
                                    os.path.getsize(csv), self_timed=True))
        if shape == "sparse" and have & {"xgboost", "sklearn"}:
            svm = os.path.join(tmp, "sparse.svm")
            sparse_to_svmlight(path, svm)
            if "xgboost" in have:
                others.append(Contender("xgboost DMatrix libsvm (svmlight rendering)",
                                        [py, "-c", XGBOOST, svm], os.path.getsize(svm), True))
            if "sklearn" in have:
                others.append(Contender("sklearn load_svmlight_file (svmlight rendering)",
                                        [py, "-c", SKLEARN, svm], os.path.getsize(svm), True))
        log(f"measuring {shape} ({size / 1e6:.0f} MB), {args.runs} rounds...")
        measure(mine, others, args.runs)
        rows.append((shape, mine, others))
        for f in os.listdir(tmp):
            if f.startswith(shape) or f in ("dense.csv", "sparse.svm"):
                os.remove(os.path.join(tmp, f))

    # Seed 004: the same 10,000 records as TFRecord (tf.data) and as CTF (ctf-reader).
    ctf_path = os.path.join(tmp, "seed004.ctf")
    with open(os.path.join(tmp, "seed004.cntk"), "w") as f:
        f.write(SEED004_CONFIG.replace("{path}", ctf_path))
    others = []
    if "tensorflow" in have:
        tfr = os.path.join(tmp, "seed004.tfrecord")
        run([py, "-c", TF_WRITE, tfr, ctf_path], stderr=subprocess.DEVNULL)
        others.append(Contender("tf.data TFRecord, batch decoding (seed 004)",
                                [py, "-c", TF_READ, tfr], os.path.getsize(tfr), True))
    elif "numpy" in have:
        run([py, "-c", SEED004_NUMPY, ctf_path])
        log("note: tensorflow unavailable; seed 004 has no tf.data figure")
    else:
        log("note: no numpy in a venv (--no-venv, or pip failed): seed 004 is skipped")
    if os.path.exists(ctf_path):
        mine = Contender("ctf-reader (ctf bench, file order, 512-sequence mb)",
                         [ctf, "bench", os.path.join(tmp, "seed004.cntk"), "--mb-size",
                          str(SEED004_BATCH)], os.path.getsize(ctf_path),
                         expect={"sequences": 10000, "minibatches": -(-10000 // SEED004_BATCH)})
        log(f"measuring seed 004, {args.runs} rounds...")
        measure(mine, others, args.runs)
        rows.append(("seed004", mine, others))
    return rows


def print_table(rows, args):
    print(f"ctf-reader vs peers: medians of {args.runs} alternating runs, warm page cache; "
          f"speedup = peer time / ctf-reader time on the same data (>1: ctf-reader faster), "
          f"against ctf-reader's process wall clock for a process-timed peer and against its "
          f"own elapsed_s for a self-timed one (marked *)")
    print()
    print("| workload | contender | data MB | median s | MB/s | spread % | speedup of ctf-reader |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for shape, mine, others in rows:
        row = lambda name, nbytes, median, spread, speed: print(
            f"| {shape} | {name} | {nbytes / 1e6:.1f} | {median:.3f} | "
            f"{nbytes / 1e6 / median:.1f} | {spread} | {speed} |")
        row(mine.name + ", process wall", mine.bytes, mine.median(), f"{mine.spread():.0f}", "—")
        row(mine.name + ", own elapsed_s*", mine.bytes, mine.own_median(), "", "—")
        for c in others:
            base = mine.own_median() if c.self_timed else mine.median()
            mark = "*" if c.self_timed else ""
            row(c.name + mark, c.bytes, c.median(), f"{c.spread():.0f}",
                f"{c.median() / base:.2f}x")
    loads = [x for x in LOADAVG if x is not None]
    if loads:
        print()
        print(f"1-minute load average before/after each workload: "
              f"{' '.join(f'{x:.2f}' for x in loads)} ({os.cpu_count()} CPUs; this script "
              f"keeps about 1-2 of them busy)")


if __name__ == "__main__":
    main()
