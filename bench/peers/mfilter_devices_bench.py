#!/usr/bin/env python3
"""Strong scaling of matched filtering over the CUDA devices of one host (issue 9).

The network case of bench mfilter (case b: 1000 templates x 30 channels x 256 samples against
4.32e6 samples per channel, moveouts in [0, 100], weights in [0.5, 1), templates cut from the
data at known origins) through hs.matched_filter_detect on host data, split precision, an
absolute threshold of 8 (a planted copy stacks to sum(w) ~ 22, noise to ~0.3): on 1, 2, 4 ...
devices (MfOptions::devices: each device takes a contiguous group of templates; the data go to
the first device once and peer to the others; each device searches its stack). The one-device
line is devices=[0], the same path on one device. Times are the wall clock around the
whole call (the call returns when every device is done; CUDA events cannot span devices), median
of --repeats after one warm-up; efficiency = t_1 / (n t_n). The detections of every device count
must equal the one-device detections exactly (templates are independent). Writes the benchmark
JSON schema of bench/README.md.

    PYTHONPATH=build/release/python python3 bench/peers/mfilter_devices_bench.py --json OUT.json
"""
import argparse
import datetime
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peer_common import time_stats, write_report  # noqa: E402


def network_case(templates, channels, length, samples, seed):
    """Uniform data, templates cut from it at known origins along per-channel moveouts."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(-1.0, 1.0, (channels, samples)).astype(np.float32)
    moveouts = rng.integers(0, 101, (templates, channels)).astype(np.int64)
    weights = rng.uniform(0.5, 1.0, (templates, channels))
    origins = rng.integers(0, samples - length - 101, templates)
    t = np.empty((templates, channels, length), np.float32)
    for i, o in enumerate(origins):
        for c in range(channels):
            s = o + moveouts[i, c]
            t[i, c] = data[c, s:s + length]
    return t, moveouts, weights, data, origins


def timed(fn, repeats):
    """Median / min / max wall-clock ms of fn() after one warm-up call; the last result."""
    result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return time_stats(times), result


def commit():
    if os.environ.get("HALFSCOPE_COMMIT"):
        return os.environ["HALFSCOPE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True, help="report to write")
    ap.add_argument("--templates", type=int, default=1000)
    ap.add_argument("--channels", type=int, default=30)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--samples", type=int, default=4_320_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", default="split")
    args = ap.parse_args(argv)

    import halfscope as hs

    info = hs.info()
    count = len(info["devices"])
    if count < 1:
        sys.exit("mfilter_devices_bench: no CUDA device")
    sizes = [n for n in (1, 2, 4, 8) if n <= count]
    t, mo, w, data, origins = network_case(args.templates, args.channels, args.length,
                                           args.samples, 4_320_000)
    params = {"templates": args.templates, "channels": args.channels, "length": args.length,
              "samples": args.samples, "step": 1, "normalize": "short", "network_sum": True,
              "threshold": "8 absolute", "min_separation": 100, "data": "host float32",
              "moveouts": "uniform integers in [0, 100]", "weights": "uniform [0.5, 1)"}
    cases, base, reference = [], None, None
    for n in sizes:
        devices = list(range(n))
        stats, found = timed(lambda: hs.matched_filter_detect(
            t, mo, w, data, 1, arch="gpu", threshold=8.0, threshold_type="absolute",
            min_separation=100, precision=args.precision, devices=devices), args.repeats)
        if reference is None:
            base, reference = stats["median_ms"], found
        identical = bool(np.array_equal(found, reference))
        planted = np.isin(origins, found["sample"]).mean()
        case = {"implementation": "halfscope", "method": "tensor+detect-host",
                "precision": args.precision, "params": dict(params, devices=n), **stats,
                "efficiency": base / (n * stats["median_ms"]), "detections": int(found.size),
                "identical_to_one_device": identical, "planted_found_fraction": float(planted)}
        cases.append(case)
        print(f"{n} device(s): {stats['median_ms']:.1f} ms, efficiency "
              f"{case['efficiency']:.3f}, {found.size} detections, identical {identical}",
              flush=True)
    # The plain one-GPU call (no devices: host data streamed through two pipeline slots in the
    # detection's time chunks rather than placed on the device first).
    stats, found = timed(lambda: hs.matched_filter_detect(
        t, mo, w, data, 1, arch="gpu", threshold=8.0, threshold_type="absolute",
        min_separation=100, precision=args.precision), args.repeats)
    same = bool(np.array_equal(found[["template", "index", "channels_used"]],
                               reference[["template", "index", "channels_used"]]))
    cases.append({"implementation": "halfscope", "method": "tensor+detect-host",
                  "precision": args.precision,
                  "params": dict(params, devices="none (plain call)"), **stats,
                  "detections": int(found.size), "same_detections_as_one_device": same})
    print(f"plain call: {stats['median_ms']:.1f} ms, {found.size} detections, same {same}",
          flush=True)
    # The per-call cost that does not shrink with the template count: the same call with 8
    # templates (the data's conversion, movement to the devices and window statistics).
    for n in sizes:
        devices = list(range(n))
        stats, found = timed(lambda: hs.matched_filter_detect(
            t[:8], mo[:8], w[:8], data, 1, arch="gpu", threshold=8.0, threshold_type="absolute",
            min_separation=100, precision=args.precision, devices=devices), args.repeats)
        cases.append({"implementation": "halfscope", "method": "tensor+detect-host",
                      "precision": args.precision,
                      "params": dict(params, templates=8, devices=n, what="per-call cost"),
                      **stats, "detections": int(found.size)})
        print(f"8 templates, {n} device(s): {stats['median_ms']:.1f} ms", flush=True)
    d0 = info["devices"][0]
    report = {"benchmark": "mfilter-devices", "date": datetime.date.today().isoformat(),
              "commit": commit(), "device": {"name": d0["name"], "cc": d0["cc"], "count": count},
              "cases": cases}
    write_report(pathlib.Path(args.json), report)
    return 0 if all(c.get("identical_to_one_device", True) for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
