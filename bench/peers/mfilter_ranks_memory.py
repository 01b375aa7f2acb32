#!/usr/bin/env python3
"""Peak memory and time of `halfscope mfilter` over MPI ranks against one process (issue 9).

Since the ranks read a .npy DATA by windows and a .npy TEMPLATES by template groups
(docs/scaling.md, "Matched filtering over MPI ranks"), a rank holds its share of the
whole-channel scan, its own window of the day and its own templates instead of the whole day and
the whole bank (and, since they read the network's .npy tables by template groups too, its rows
of the moveouts and weights instead of the whole network). This runs `halfscope mfilter TEMPLATES DATA --detect ...` on generated inputs
(T templates and C channels x L float32 samples of noise with the templates planted; a large
bank with `--templates 20000 --length 128 --samples 1024`; `--network` adds moveouts and
weights files; `--cut` cuts the templates from DATA at the planted events with a pick table)
in one process and under
`mpirun -np N`, each process started through a small Python wrapper that records its child's
peak resident memory (getrusage RUSAGE_CHILDREN, ru_maxrss), and reports per run the largest and
the mean peak over the ranks, the wall clock of the whole command (a fresh process per run:
start-up, reading and writing included) and whether the detections CSV equals the one-process
CSV byte for byte. `--baseline-cli` runs another build the same way (for example the commit
before the windowed reading), so both lines come from one machine in one run.

    python3 bench/peers/mfilter_ranks_memory.py --cli build/release/apps/halfscope/halfscope \\
        --json OUT.json [--device cuda] [--baseline-cli OLD/halfscope]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peer_common import write_report  # noqa: E402
from mfilter_devices_bench import commit  # noqa: E402

# Each process's peak resident memory (KiB) into PREFIX.<rank>, then the command's status.
WRAPPER = ("import os, resource, subprocess, sys; "
           "status = subprocess.run(sys.argv[2:]).returncode; "
           "rank = os.environ.get('OMPI_COMM_WORLD_RANK', os.environ.get('PMI_RANK', '0')); "
           "open(sys.argv[1] + '.' + rank, 'w').write("
           "str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
           "sys.exit(status)")


def make_inputs(work, templates, channels, samples, length, network=False, random_picks=False,
                seed=5):
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((templates, channels, length)).astype(np.float32)
    # With a network: moveouts (int64) in [0, length) and weights (float64) in [0.5, 1), as
    # .npy files of (T, C); the events are planted at their templates' moveouts.
    moveouts = np.zeros((templates, channels), dtype=np.int64)
    if network:
        moveouts = rng.integers(0, length, (templates, channels), dtype=np.int64)
        np.save(work / "moveouts.npy", moveouts)
        np.save(work / "weights.npy", rng.uniform(0.5, 1.0, (templates, channels)))
    data = np.lib.format.open_memmap(work / "data.npy", mode="w+", dtype=np.float32,
                                     shape=(channels, samples))
    for c in range(channels):
        data[c] = rng.standard_normal(samples, dtype=np.float32)
    # One event per template spread over the day, or, for a bank too large for that (events at
    # least 2 template lengths apart), as many events of templates spread over the bank. With
    # random_picks: every template's channels picked at random starts in the noise, nothing
    # planted (a catalogue's pick table of T x C lines against a short day).
    events = 0 if random_picks else min(templates, samples // (2 * length))
    picks = ["template,channel,start"]
    if random_picks:
        starts = rng.integers(0, samples - length + 1, (templates, channels))
        picks += [f"ev{e},{c},{starts[e, c]}" for e in range(templates) for c in range(channels)]
    for e in range(events):
        at, k = (e + 1) * samples // (events + 1), e * templates // events
        for c in range(channels):
            s = min(at + moveouts[k, c], samples - length)
            data[c, s:s + length] += 4 * t[k, c]
            picks.append(f"ev{e},{c},{s}")
    data.flush()
    del data
    np.save(work / "templates.npy", t)
    # The events' windows as a pick table: `--cut` cuts the templates from the data with it.
    (work / "picks.csv").write_text("\n".join(picks) + "\n")


def write_waveform_channels(work, channels, fmt, files_per_channel=1):
    """The data as waveform files (ObsPy), 100 Hz: SAC (float32, the same samples) or MiniSEED
    (the samples times 1000 rounded to int32, Steim-2 in 4096-byte records, as a seismometer's
    counts are stored), each channel in `files_per_channel` consecutive files (as an archive of
    hourly files holds a day). The DATA argument is their comma-separated list."""
    import obspy  # only for --data-format sac / mseed
    data = np.load(work / "data.npy", mmap_mode="r")
    t0 = obspy.UTCDateTime("2024-03-01T00:00:00")
    names = []
    for c in range(channels):
        x = np.ascontiguousarray(data[c])
        cuts = np.linspace(0, x.size, files_per_channel + 1).astype(np.int64)
        for f, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            tr = obspy.Trace(data=x[a:b] if fmt == "sac"
                             else np.rint(x[a:b] * 1000).astype(np.int32))
            tr.stats.network, tr.stats.station, tr.stats.channel = "XX", f"S{c:03d}", "HHZ"
            tr.stats.sampling_rate = 100.0
            tr.stats.starttime = t0 + int(a) / 100.0
            names.append(str(work / f"c{c:03d}-{f:02d}.{fmt}"))
            if fmt == "sac":
                tr.write(names[-1], format="SAC")
            else:
                tr.write(names[-1], format="MSEED", encoding="STEIM2", reclen=4096)
    return ",".join(names)


def device_name(cli, device):
    if device == "cuda":
        info = json.loads(subprocess.run([cli, "info", "--json"], capture_output=True, text=True,
                                         check=True).stdout)
        if not info["devices"]:
            sys.exit("mfilter_ranks_memory: no CUDA device")
        return info["devices"][0]["name"]
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs)"
    return platform.processor()


def run_once(launcher, cli, args, work, tag):
    prefix = work / f"rss-{tag}"
    for old in work.glob(f"rss-{tag}.*"):
        old.unlink()
    start = time.perf_counter()
    res = subprocess.run([*launcher, sys.executable, "-c", WRAPPER, str(prefix), cli, *args],
                         capture_output=True, text=True)
    wall = (time.perf_counter() - start) * 1e3
    if res.returncode != 0:
        sys.exit(f"mfilter_ranks_memory: {tag} failed:\n{res.stderr}")
    peaks = [int(p.read_text()) * 1024 for p in sorted(work.glob(f"rss-{tag}.*"))]
    return wall, peaks


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--baseline-cli", default=None, help="another build to measure alike")
    ap.add_argument("--mpiexec", default=os.environ.get("HALFSCOPE_MPIEXEC",
                                                        "mpirun --oversubscribe --bind-to none"))
    ap.add_argument("--json", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--templates", type=int, default=16)
    ap.add_argument("--channels", type=int, default=30)
    ap.add_argument("--samples", type=int, default=4_320_000)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--time-parts", default="0",
                    help="comma list of --time-parts values to run the ranks with (0: automatic)")
    ap.add_argument("--threshold", default="8", help="absolute threshold of the stack")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--data-format", default="npy", choices=["npy", "sac", "mseed"],
                    help="DATA as one .npy, or as SAC or MiniSEED files of one channel each "
                    "(needs ObsPy)")
    ap.add_argument("--files-per-channel", type=int, default=1,
                    help="with --data-format sac / mseed: each channel in this many consecutive "
                    "files")
    ap.add_argument("--cut", action="store_true",
                    help="templates cut from DATA at the planted events (--template-times) "
                    "instead of TEMPLATES")
    ap.add_argument("--random-picks", action="store_true",
                    help="with --cut: every template picked on every channel at random starts "
                    "(T x C lines), nothing planted")
    ap.add_argument("--network", action="store_true",
                    help="also --moveouts and --weights .npy files of (T, C)")
    args = ap.parse_args(argv)

    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="hs-mf-ranks-"))
    work.mkdir(parents=True, exist_ok=True)
    make_inputs(work, args.templates, args.channels, args.samples, args.length, args.network,
                args.random_picks)
    network = ["--moveouts", str(work / "moveouts.npy"), "--weights",
               str(work / "weights.npy")] if args.network else []
    network_bytes = sum((work / f).stat().st_size for f in ("moveouts.npy", "weights.npy")
                        if args.network)
    data_arg = str(work / "data.npy")
    if args.data_format != "npy":
        data_arg = write_waveform_channels(work, args.channels, args.data_format,
                                           args.files_per_channel)
    data_bytes = sum(pathlib.Path(p).stat().st_size for p in data_arg.split(","))
    templates_bytes = None if args.cut else (work / "templates.npy").stat().st_size
    method = ["--method", "tensor", "--precision", "mixed"] if args.device == "cuda" else [
        "--method", "direct", "--precision", "single"]
    templates = ["--template-times", str(work / "picks.csv"), "--template-length",
                 str(args.length)] if args.cut else [str(work / "templates.npy")]
    common = ["--device", args.device, "mfilter", *templates,
              data_arg, *method, *network, "--detect", "--threshold", args.threshold,
              "--threshold-type", "abs", "--min-separation", "1000"]
    params = {"templates": args.templates, "channels": args.channels, "samples": args.samples,
              "template_length": args.length,
              "data": {"npy": "float32 .npy", "sac": "float32 SAC",
                       "mseed": "int32 Steim-2 MiniSEED (4096-byte records)"}[args.data_format],
              "files_per_channel": args.files_per_channel if args.data_format != "npy" else None,
              "data_bytes": data_bytes,
              "templates_file": ("cut from DATA by a pick table at random starts"
                                 if args.random_picks else
                                 "cut from DATA by a pick table at the planted events")
              if args.cut else "float32 .npy", "templates_bytes": templates_bytes,
              "pick_table_bytes": (work / "picks.csv").stat().st_size if args.cut else None,
              "network": "int64 moveouts and float64 weights, .npy (T, C)" if args.network
              else "none", "network_bytes": network_bytes,
              "device": args.device, "method": " ".join(method), "detect": f"abs {args.threshold}",
              "time": "wall clock of the whole command, fresh processes",
              "memory": "peak resident memory per process (ru_maxrss)"}
    builds = [("this", args.cli)] + ([("baseline", args.baseline_cli)] if args.baseline_cli else [])
    cases, reference = [], None
    runs = [(1, 0)] + [(r, p) for p in map(int, args.time_parts.split(","))
                       for r in map(int, args.ranks.split(","))]
    for build, cli in builds:
        for ranks, parts in runs:
            launcher = [] if ranks == 1 else [*shlex.split(args.mpiexec), "-np", str(ranks)]
            split = ["--time-parts", str(min(parts, ranks))] if parts else []
            csv = work / f"found-{build}-{ranks}-{parts}.csv"
            walls, peaks = [], []
            for i in range(args.repeats):
                wall, peaks = run_once(launcher, cli,
                                       [*common, *split, "--detections", str(csv)], work,
                                       f"{build}-{ranks}-{parts}-{i}")
                walls.append(wall)
            found = csv.read_bytes()
            reference = reference if reference is not None else found
            case = {"implementation": f"halfscope ({build} build)", "method": "mfilter-cli",
                    "precision": method[-1],
                    "params": dict(params, ranks=ranks if ranks > 1 else "one process",
                                   time_parts=min(parts, ranks) if parts else "automatic"),
                    "median_ms": statistics.median(walls), "min_ms": min(walls),
                    "max_ms": max(walls), "repeats": len(walls),
                    "peak_rss_bytes_max": max(peaks),
                    "peak_rss_bytes_mean": statistics.mean(peaks),
                    "peak_rss_over_data": max(peaks) / data_bytes,
                    "detections": found.count(b"\n") - 1,
                    "detections_equal_one_process": found == reference}
            cases.append(case)
            print(f"{build} build, {ranks} process(es), time parts {parts or 'auto'}: "
                  f"{case['median_ms']:.0f} ms, peak RSS "
                  f"max {max(peaks) / 2**20:.0f} MiB ({case['peak_rss_over_data']:.2f} x data), "
                  f"{case['detections']} detections, same as one process: "
                  f"{case['detections_equal_one_process']}", flush=True)
    report = {"benchmark": "mfilter-ranks-memory", "date": datetime.date.today().isoformat(),
              "commit": commit(), "device": {"name": device_name(args.cli, args.device)},
              "cases": cases}
    write_report(pathlib.Path(args.json), report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
