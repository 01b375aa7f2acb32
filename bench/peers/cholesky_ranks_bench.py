#!/usr/bin/env python3
"""GPU ranks of the MPI tile Cholesky against the one-process GPU factorization (issue 9).

`halfscope --device cuda cholesky A.npy` in one process (the matrix copied to the device, the
one-process GPU path: pointer-array batches per step, split16 diagonal updates below FP32) and
under `mpirun -np R` (GPU ranks: each rank's 2D block-cyclic tiles on a device of its host, the
panels broadcast through page-locked host buffers), on the same file, for each policy. The time
is the report's factor_ms (the factorization call; for ranks the slowest rank's, its upload and
download of the rank's tiles included); the file reading and writing are not timed. Ranks beyond
the host's devices share them (the figure is then the overhead of the rank path, not scaling).
Each ranks run names its grid (--grid, the squarest P x Q), which a job of one rank needs to take
the rank path. The one-process runs: the matrix placed on the device before the timer
(--device cuda), and from host memory (--devices 0: the library copies it, as a rank does).
Accuracy: each ranks factor against the one-process factor, max |dL| / max |L|. The matrix:
A_ij = exp(-|i - j| / 256) + [i == j] (SPD, kappa < 300), written in row blocks. Writes the
benchmark JSON schema of bench/README.md.

    python3 bench/peers/cholesky_ranks_bench.py --cli build/release/apps/halfscope/halfscope \\
        --json OUT.json
"""
import argparse
import datetime
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peer_common import time_stats, write_report  # noqa: E402
from mfilter_devices_bench import commit  # noqa: E402


def write_matrix(path, n, block=2048):
    a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, n))
    j = np.arange(n)
    for r0 in range(0, n, block):
        i = np.arange(r0, min(n, r0 + block))
        rows = np.exp(-np.abs(i[:, None] - j[None, :]) / 256.0)
        rows[np.arange(i.size), i] += 1.0
        a[r0:r0 + i.size] = rows
    a.flush()
    del a


def max_rel_diff(x_path, ref_path, block=4096):
    x, ref = np.load(x_path, mmap_mode="r"), np.load(ref_path, mmap_mode="r")
    diff = top = 0.0
    for r0 in range(0, ref.shape[0], block):
        xr, rr = np.asarray(x[r0:r0 + block], np.float64), np.asarray(ref[r0:r0 + block], np.float64)
        diff, top = max(diff, float(np.abs(xr - rr).max())), max(top, float(np.abs(rr).max()))
    return diff / top


def cli_devices(cli, who):
    """`halfscope info --json`'s devices; exits naming `who` when there is none."""
    info = json.loads(subprocess.run([cli, "info", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    if not info["devices"]:
        sys.exit(f"{who}: no CUDA device")
    return info["devices"]


def grid_of(ranks):
    """The squarest P x Q grid of `ranks` with P <= Q."""
    p = max(d for d in range(1, ranks + 1) if ranks % d == 0 and d * d <= ranks)
    return p, ranks // p


def save(path, benchmark, devices, cases):
    """The benchmark report (bench/README.md schema) for the first device of the host."""
    report = {"benchmark": benchmark, "date": datetime.date.today().isoformat(),
              "commit": commit(), "device": {"name": devices[0]["name"],
                                             "cc": devices[0]["compute_capability"],
                                             "count": len(devices)},
              "cases": cases}
    write_report(pathlib.Path(path), report)


def factor(command, out, repeats):
    """Median / min / max of the report's factor_ms over `repeats` runs; the last report."""
    times, report = [], None
    for _ in range(repeats):
        with tempfile.NamedTemporaryFile(suffix=".json") as r:
            res = subprocess.run([*command, "-o", str(out), "--report", r.name],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit(f"cholesky_ranks_bench: {' '.join(command)} failed:\n{res.stderr}")
            report = json.loads(pathlib.Path(r.name).read_text())
        times.append(report["factor_ms"])
    return time_stats(times), report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="the halfscope executable")
    ap.add_argument("--mpiexec", default=os.environ.get("HALFSCOPE_MPIEXEC",
                                                        "mpirun --oversubscribe"))
    ap.add_argument("--json", required=True, help="report to write")
    ap.add_argument("--sizes", default="24576")
    ap.add_argument("--tile", type=int, default=1024)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--policies", default="uniform:SP;band:SP=1,HP1=rest",
                    help="separated by ';' (a band policy holds commas)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", default=None, help="where the matrices go (default: a temp dir)")
    args = ap.parse_args(argv)

    devices = cli_devices(args.cli, "cholesky_ranks_bench")
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="hs-chol-ranks-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = []
    for n in map(int, args.sizes.split(",")):
        a = work / f"A{n}.npy"
        write_matrix(a, n)
        for policy in args.policies.split(";"):
            params = {"n": n, "tile": args.tile, "policy": policy, "matrix":
                      "exp(-|i-j|/256) + I, float32 .npy", "time": "report factor_ms"}
            base = [args.cli, "--device", "cuda", "cholesky", str(a), "--tile", str(args.tile),
                    "--policy", policy]
            one_l = work / "L-one.npy"
            stats, _ = factor([*base, "--devices", "0"], one_l, args.repeats)
            cases.append({"implementation": "halfscope", "method": "tile-cholesky-one-process",
                          "precision": policy,
                          "params": dict(params, ranks="none", matrix_in="host (--devices 0)"),
                          **stats})
            print(f"n {n} {policy}: one process, host matrix {stats['median_ms']:.1f} ms",
                  flush=True)
            stats, _ = factor(base, one_l, args.repeats)
            one_ms = stats["median_ms"]
            cases.append({"implementation": "halfscope", "method": "tile-cholesky-one-process",
                          "precision": policy,
                          "params": dict(params, ranks="none", matrix_in="device"), **stats})
            print(f"n {n} {policy}: one process, device matrix {one_ms:.1f} ms", flush=True)
            for ranks in map(int, args.ranks.split(",")):
                out = work / f"L-{ranks}.npy"
                p, q = grid_of(ranks)
                stats, report = factor([*shlex.split(args.mpiexec), "-np", str(ranks), *base,
                                        "--grid", f"{p}x{q}"], out, args.repeats)
                diff = max_rel_diff(out, one_l)
                cases.append({"implementation": "halfscope", "method": "tile-cholesky-gpu-ranks",
                              "precision": policy,
                              "params": dict(params, ranks=ranks, grid=report["grid"],
                                             devices=report.get("device_per_rank")),
                              **stats, "vs_one_process": one_ms / stats["median_ms"],
                              "bytes_moved": report["bytes_moved"],
                              "mpi_wait_ms_mean": report["mpi_wait_ms_mean"],
                              "workspace_bytes_per_rank": report["workspace_bytes_per_rank"],
                              "max_rel_diff_vs_one_process": diff})
                print(f"n {n} {policy}: {ranks} GPU rank(s) {stats['median_ms']:.1f} ms "
                      f"(one process / ranks {one_ms / stats['median_ms']:.2f}), max |dL|/|L| "
                      f"{diff:.2e}, {report['bytes_moved']} bytes moved", flush=True)
                out.unlink()
            one_l.unlink()
        a.unlink()
    save(args.json, "cholesky-gpu-ranks", devices, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
