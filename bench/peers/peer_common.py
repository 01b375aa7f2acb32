"""Shared by the peer scripts of bench/peers: CUDA-event timing of a PyTorch / CuPy call and the
atomic rewrite of a halfscope benchmark report (same JSON schema, bench/README.md)."""
import json
import statistics


def cuda_time(fn, repeats, torch, max_ms):
    """Median, min and max of `fn` timed call by call with a pair of CUDA events, after two
    warm-up calls (cuDNN autotuning, cuBLAS heuristics, FFT plans); stops early, after at least
    3 calls, once the timed calls have taken `max_ms` in all."""
    fn()
    fn()
    times = []
    for i in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
        if i >= 2 and sum(times) > max_ms:
            break
    return time_stats(times)


def time_stats(times):
    """Median, min, max (ms) and count of a list of timings, as the benchmark schema names them."""
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "repeats": len(times)}


def write_report(report_path, report):
    """Rewrites the report through a temporary file and a rename: never half-written."""
    tmp = report_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(report_path)
