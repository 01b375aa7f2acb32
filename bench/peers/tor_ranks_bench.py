#!/usr/bin/env python3
"""GPU ranks of the MPI reconstructor against the one-process GPU reconstructor (issue 9).

`halfscope --device cuda ao reconstructor SYSTEM -o R.npy` in one process (Cmm and Ctm generated
on the device, tile Cholesky and solves there) and under `mpirun -np R` (GPU ranks: Cmm's tiles
and each rank's rows of Ctm generated on the host's cores, the factorization 2D block-cyclic on
the ranks' devices, each rank solving its rows of R on its device with a copy of L assembled from
the panel broadcasts), for each factor / solve policy pair. Times are the report's "times:" line
(covariance, factor, solves; for ranks the slowest rank's per phase) and the wall clock of the
whole command (process start, MPI, the write of R included). Ranks beyond the host's devices share
them: the figures are then the rank path's overhead, not scaling. Each ranks run names its grid
(the squarest P x Q), which a job of one rank needs to take the rank path. Accuracy: each ranks R
against the one-process R, max |dR| / max |R|, and with --evaluate the OTF Strehl ratio of every
R next to the FP64 R's (one more run per configuration, not timed). The launcher runs with
--bind-to none: Open MPI binds each of 1 or 2 ranks to one core by default, which leaves a rank's
host work (tile checks, staging copies) one thread. Writes the benchmark JSON schema of
bench/README.md.

    python3 bench/peers/tor_ranks_bench.py --cli build/release/apps/halfscope/halfscope \\
        --json OUT.json [--systems preset:mid] [--ranks 1,2,4]
"""
import argparse
import os
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cholesky_ranks_bench import cli_devices, grid_of, max_rel_diff, save  # noqa: E402

TIMES = re.compile(r"^times: covariance ([0-9.]+) ms, factor ([0-9.]+) ms, solves ([0-9.]+) ms",
                   re.M)
STREHL = re.compile(r"^  (this R|FP64 R) .* OTF ([0-9.]+)", re.M)
TRAFFIC = re.compile(r"received (\d+) bytes in the factorization, (\d+) in the solves")


def reconstruct(command, out, repeats):
    """Per phase median / min / max over `repeats` runs, and the last run's stdout."""
    phases = {"covariance": [], "factor": [], "solves": [], "wall": []}
    text = ""
    for _ in range(repeats):
        start = time.perf_counter()
        res = subprocess.run([*command, "-o", str(out)], capture_output=True, text=True)
        wall = (time.perf_counter() - start) * 1e3
        if res.returncode != 0:
            sys.exit(f"tor_ranks_bench: {' '.join(command)} failed:\n{res.stderr}")
        text = res.stdout
        found = TIMES.search(text)
        if not found:
            sys.exit(f"tor_ranks_bench: no times line in:\n{text}")
        for key, value in zip(("covariance", "factor", "solves"), found.groups()):
            phases[key].append(float(value))
        phases["wall"].append(wall)
    stats = {f"{key}_ms": {"median": statistics.median(v), "min": min(v), "max": max(v)}
             for key, v in phases.items()}
    stats["median_ms"] = statistics.median(
        [c + f + s for c, f, s in zip(phases["covariance"], phases["factor"], phases["solves"])])
    stats["repeats"] = repeats
    return stats, text


def strehl(command, out):
    """(this R's OTF Strehl, the FP64 R's) from one --evaluate run."""
    res = subprocess.run([*command, "--evaluate", "-o", str(out)], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"tor_ranks_bench: {' '.join(command)} --evaluate failed:\n{res.stderr}")
    found = dict(STREHL.findall(res.stdout))
    return float(found["this R"]), float(found["FP64 R"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True, help="the halfscope executable")
    ap.add_argument("--mpiexec", default=os.environ.get("HALFSCOPE_MPIEXEC",
                                                        "mpirun --oversubscribe --bind-to none"))
    ap.add_argument("--json", required=True, help="report to write")
    ap.add_argument("--systems", default="preset:mid", help="comma-separated")
    ap.add_argument("--tile", type=int, default=1024)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--policies", default="uniform:SP/uniform:SP;band:SP=1,HP1=rest/uniform:SP",
                    help="factor/solve pairs separated by ';' (a band policy holds commas)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--evaluate", action="store_true", help="record each R's Strehl ratio")
    ap.add_argument("--workdir", default=None, help="where R goes (default: a temp dir)")
    args = ap.parse_args(argv)

    devices = cli_devices(args.cli, "tor_ranks_bench")
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="hs-tor-ranks-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = []
    for system in args.systems.split(","):
        for pair in args.policies.split(";"):
            policy, solve_policy = pair.split("/")
            params = {"system": system, "tile": args.tile, "policy": policy,
                      "solve_policy": solve_policy,
                      "time": "the report's covariance + factor + solves ms; wall: whole command"}
            base = [args.cli, "--device", "cuda", "ao", "reconstructor", system, "--tile",
                    str(args.tile), "--policy", policy, "--solve-policy", solve_policy]
            one_r = work / "R-one.npy"
            stats, _ = reconstruct(base, one_r, args.repeats)
            one = stats
            if args.evaluate:
                stats["strehl_otf"], stats["strehl_otf_fp64"] = strehl(base, one_r)
            cases.append({"implementation": "halfscope", "method": "reconstructor-one-process",
                          "precision": pair, "params": dict(params, ranks="none"), **stats})
            print(f"{system} {pair}: one process, factor {stats['factor_ms']['median']:.1f} ms, "
                  f"solves {stats['solves_ms']['median']:.1f} ms, covariance "
                  f"{stats['covariance_ms']['median']:.1f} ms", flush=True)
            for ranks in map(int, args.ranks.split(",")):
                out = work / f"R-{ranks}.npy"
                p, q = grid_of(ranks)
                command = [*shlex.split(args.mpiexec), "-np", str(ranks), *base, "--grid",
                           f"{p}x{q}"]
                stats, text = reconstruct(command, out, args.repeats)
                diff = max_rel_diff(out, one_r)
                if args.evaluate:
                    stats["strehl_otf"], stats["strehl_otf_fp64"] = strehl(command, out)
                moved = TRAFFIC.search(text)
                per_rank = re.search(r"GPU ranks: CUDA device of each rank ([0-9 ]+)", text)
                cases.append({
                    "implementation": "halfscope", "method": "reconstructor-gpu-ranks",
                    "precision": pair,
                    "params": dict(params, ranks=ranks, grid=[p, q],
                                   devices=per_rank.group(1).split() if per_rank else None),
                    **stats,
                    "factor_vs_one_process": one["factor_ms"]["median"] /
                    stats["factor_ms"]["median"],
                    "solves_vs_one_process": one["solves_ms"]["median"] /
                    stats["solves_ms"]["median"],
                    "factor_bytes_received": int(moved.group(1)) if moved else None,
                    "solve_bytes_received": int(moved.group(2)) if moved else None,
                    "max_rel_diff_vs_one_process": diff})
                print(f"{system} {pair}: {ranks} GPU rank(s): factor "
                      f"{stats['factor_ms']['median']:.1f} ms, solves "
                      f"{stats['solves_ms']['median']:.1f} ms, covariance "
                      f"{stats['covariance_ms']['median']:.1f} ms, wall "
                      f"{stats['wall_ms']['median']:.0f} ms; max |dR|/|R| {diff:.2e}"
                      + (f", Strehl {stats['strehl_otf']:.6f} (FP64 {stats['strehl_otf_fp64']:.6f})"
                         if args.evaluate else ""), flush=True)
                out.unlink()
            one_r.unlink()
    save(args.json, "reconstructor-gpu-ranks", devices, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
