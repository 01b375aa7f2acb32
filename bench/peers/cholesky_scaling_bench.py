#!/usr/bin/env python3
"""Cost and effect of the Cholesky's power-of-two scaling for FP16 variants (CholeskyOptions::scale).

`halfscope --device cuda cholesky A.npy --check` on s * A0 for each policy, s = 1 (inside the
unscaled band: nothing scaled), 1e-20 and 1e5 (scaled by 4^34 and 4^-8: one read and write of
the lower triangle on the device each way), each also with --no-scale (the variants on A as
given, as study 002). A0_ij = exp(-|i - j| / 256) + [i == j], largest diagonal entry 2 (SPD,
kappa < 300). Time: the report's factor_ms over the repeats (the factorization call, the scaling included; the
matrix is on the device before it). Accuracy: the report's backward error ||L L^T - A||_F /
||A||_F in FP64 (one more run, with --check); a failed run (a pivot lost to FP16 underflow, an FP16 overflow) is recorded with
its message. Writes the benchmark JSON schema of bench/README.md.

    python3 bench/peers/cholesky_scaling_bench.py --cli build/release/apps/halfscope/halfscope \\
        --json OUT.json
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cholesky_ranks_bench import cli_devices, save  # noqa: E402
from peer_common import time_stats  # noqa: E402


def write_matrix(path, n, scale, block=2048):
    a = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, n))
    j = np.arange(n)
    for r0 in range(0, n, block):
        i = np.arange(r0, min(n, r0 + block))
        rows = np.exp(-np.abs(i[:, None] - j[None, :]) / 256.0)
        rows[np.arange(i.size), i] += 1.0
        a[r0:r0 + i.size] = scale * rows
    a.flush()
    del a


def run(command, repeats):
    """Median / min / max factor_ms and the last report, or the error line of a failed run."""
    times, report = [], None
    for repeat in range(repeats + 1):  # the last one checked, not timed
        with tempfile.NamedTemporaryFile(suffix=".json") as r, \
                tempfile.NamedTemporaryFile(suffix=".npy") as out:
            res = subprocess.run([*command, "-o", out.name, "--report", r.name]
                                 + (["--check"] if repeat == repeats else []),
                                 capture_output=True, text=True)
            if res.returncode == 1:
                return None, res.stderr.strip().splitlines()[-1]
            if res.returncode != 0:
                sys.exit(f"cholesky_scaling_bench: {' '.join(command)} failed:\n{res.stderr}")
            report = json.loads(pathlib.Path(r.name).read_text())
        if repeat < repeats:
            times.append(report["factor_ms"])
    return time_stats(times), report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="the halfscope executable")
    ap.add_argument("--json", required=True, help="report to write")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--tile", type=int, default=1024)
    ap.add_argument("--scales", default="1,1e-20,1e5")
    ap.add_argument("--policies", default="uniform:HP1;uniform:HP3;band:SP=1,HP1=rest",
                    help="separated by ';' (a band policy holds commas)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu (a smoke run)")
    args = ap.parse_args(argv)

    devices = (cli_devices(args.cli, "cholesky_scaling_bench") if args.device == "cuda" else
               [{"name": "cpu", "compute_capability": None}])
    work = pathlib.Path(tempfile.mkdtemp(prefix="hs-chol-scaling-"))
    cases = []
    for scale in map(float, args.scales.split(",")):
        a = work / "A.npy"
        write_matrix(a, args.n, scale)
        for policy in args.policies.split(";"):
            for scaled in (True, False):
                command = [args.cli, "--device", args.device, "cholesky", str(a), "--tile",
                           str(args.tile), "--policy", policy] + ([] if scaled else ["--no-scale"])
                stats, report = run(command, args.repeats)
                params = {"n": args.n, "tile": args.tile, "policy": policy, "matrix_scale": scale,
                          "scale": scaled, "matrix": "s (exp(-|i-j|/256) + I), float32 .npy",
                          "time": "report factor_ms, matrix on the device"}
                if stats is None:
                    cases.append({"implementation": "halfscope", "method": "tile-cholesky",
                                  "precision": policy, "params": params, "error": report})
                    print(f"s {scale:g} {policy} scale={scaled}: {report}", flush=True)
                    continue
                cases.append({"implementation": "halfscope", "method": "tile-cholesky",
                              "precision": policy, "params": params, **stats,
                              "scaling_exponent": report["scaling_exponent"],
                              "backward_error": report["backward_error"],
                              "attempts": report["attempts"]})
                print(f"s {scale:g} {policy} scale={scaled}: {stats['median_ms']:.2f} ms, k "
                      f"{report['scaling_exponent']}, backward {report['backward_error']:.2e}",
                      flush=True)
        a.unlink()
    save(args.json, "cholesky-scaling", devices, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
