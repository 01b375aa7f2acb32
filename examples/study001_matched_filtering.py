#!/usr/bin/env python3
"""Study 001, matched filtering: Fast Matched Filter's call on simulated network data with planted
events, its accuracy in every precision, detections against the ground truth, the EQcorrscan
backend and ObsPy streams.

The one-line switch for a Fast Matched Filter (FMF) user:

    from halfscope import matched_filter      # instead of: from fast_matched_filter import matched_filter
    cc_sum = matched_filter(templates, moveouts, weights, data, step, arch="gpu")

hs.simulate.seismic plants events whose per-channel CC is exactly 0.8 (weights 1/C, so the stack
is the mean CC and equals 0.8 at each event). The script prints max |CC - CC_fp64| against an
independent NumPy implementation of FMF's formula, the detections of hs.detect against the
planted events, the EQcorrscan-style array_xcorr against NumPy, and the same correlation from an
ObsPy Stream round-tripped through MiniSEED.

    python examples/study001_matched_filtering.py [--quick] [--out DIR] [--gpu]
"""
import numpy as np

from example_common import Backend, emit, import_halfscope, median_ms, parse_args, pyplot, write_json

# Precisions the CPU's `direct` method emulates (docs/mfilter.md); the GPU has the same ladder.
PRECISIONS = ("double", "single", "split", "mixed", "bf16", "half")
MAX_MOVEOUT = 50  # samples: the largest moveout hs.simulate.seismic draws


def fmf_reference(templates, moveouts, weights, data, step=1):
    """FMF's short-normalized network stack in NumPy FP64, written from its formula:
    cc_sum[t, i] = sum_c w[t,c] sum_k T[t,c,k] S[c, s+k] / sqrt(sum_k T^2 sum_k S[c, s+k]^2),
    s = i*step + moveout[t,c]; a window off the data or of zero energy contributes 0."""
    T, C, K = templates.shape
    L = data.shape[1]
    n_corr = (L - K) // step + 1
    out = np.zeros((T, n_corr))
    for c in range(C):
        windows = np.lib.stride_tricks.sliding_window_view(data[c].astype(np.float64), K)
        energy = np.einsum("ij,ij->i", windows, windows)        # (L - K + 1,)
        for t in range(T):
            tmpl = templates[t, c].astype(np.float64)
            num = windows @ tmpl
            s = np.arange(n_corr) * step + int(moveouts[t, c])
            ok = (s >= 0) & (s + K <= L)
            den = np.sqrt(tmpl @ tmpl * energy[s[ok]])
            cc = np.zeros(n_corr)
            cc[ok] = np.where(den > 0, num[s[ok]] / np.where(den > 0, den, 1.0), 0.0)
            out[t] += weights[t, c] * cc
    return out


def normxcorr_reference(templates, trace):
    """EQcorrscan's fully normalized correlation (demeaned template and window) in NumPy FP64."""
    K = templates.shape[1]
    windows = np.lib.stride_tricks.sliding_window_view(trace.astype(np.float64), K)
    windows = windows - windows.mean(axis=1, keepdims=True)
    tm = templates.astype(np.float64) - templates.mean(axis=1, keepdims=True)
    num = tm @ windows.T
    den = np.sqrt(np.sum(tm * tm, axis=1)[:, None] * np.sum(windows * windows, axis=1)[None, :])
    return num / den


def match_detections(det, events, tolerance, cross_tolerance):
    """(matched, cross, false) detections. Matched: an unmatched planted event of the detection's
    own template within `tolerance` samples. Cross: another template's planted event within
    `cross_tolerance` samples (the templates share a waveform family, so an event also correlates
    with the other templates; their moveouts differ, hence the wider window). False: neither."""
    left = [(e["template"], e["sample"]) for e in events]
    matched = cross = 0
    for d in det:
        hit = next((e for e in left if e[0] == d["template"] and abs(e[1] - d["sample"]) <= tolerance), None)
        if hit is not None:
            left.remove(hit)
            matched += 1
        elif any(abs(e["sample"] - d["sample"]) <= cross_tolerance for e in events):
            cross += 1
    return matched, cross, len(det) - matched - cross


def eqcorrscan_section(hs, sim):
    """hs.eqcorrscan.array_xcorr against NumPy on channel 0, then (EQcorrscan installed) the same
    function through EQcorrscan's backend registry."""
    templates = np.ascontiguousarray(sim.templates[:, 0, :], dtype=np.float32)
    trace = sim.data[0].astype(np.float32)
    pads = [0] * templates.shape[0]
    ccc, used = hs.eqcorrscan.array_xcorr(templates, trace, pads)
    ref = normxcorr_reference(templates, trace)
    emit("ACCURACY", what="eqcorrscan_array_xcorr", max_abs=float(np.abs(ccc - ref).max()),
         used=int(np.sum(used)))
    try:
        from eqcorrscan.utils.correlate import get_array_xcorr
    except ImportError:
        print("EQcorrscan is not installed: plug-in snippet skipped "
              "(hs.eqcorrscan.register(); get_array_xcorr('halfscope'))")
        return
    hs.eqcorrscan.register()              # name 'halfscope': Tribe.detect(..., xcorr_func='halfscope')
    xcorr = get_array_xcorr("halfscope")
    ccc2, _ = xcorr(templates, trace, pads)
    emit("ACCURACY", what="eqcorrscan_registry", max_abs=float(np.abs(ccc2 - ref).max()))


def stream_section(hs, sim, out_dir, arch, cc):
    """Network data as an ObsPy Stream, through MiniSEED and hs.io.from_stream, correlated again."""
    try:
        import obspy
    except ImportError:
        print("ObsPy is not installed: Stream section skipped")
        return
    ids = [f"XX.S{c:04d}..HHZ" for c in range(sim.data.shape[0])]
    st = hs.io.to_stream(sim.data, ids, 100.0, obspy.UTCDateTime(2010, 1, 1))
    st.write(str(out_dir / "data.mseed"), format="MSEED")
    arr = hs.io.from_stream(obspy.read(str(out_dir / "data.mseed")))
    emit("ACCURACY", what="stream_roundtrip",
         max_abs=float(np.abs(arr.data.astype(np.float64) - sim.data.astype(np.float32)).max()),
         ids_match=arr.ids == ids, gaps=len(arr.gaps))
    cc2 = hs.matched_filter(sim.templates, sim.moveouts, sim.weights, arr.data, arch=arch)
    emit("ACCURACY", what="stream_vs_array", max_abs=float(np.abs(np.asarray(cc2) - cc).max()))


def plot(cc, det, events, thresholds, path):
    """The stack of each template with its MAD threshold, the planted and the detected events."""
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(cc.shape[0], 1, figsize=(9, 2.2 * cc.shape[0]), sharex=True, squeeze=False)
    for t, ax in enumerate(axes[:, 0]):
        ax.plot(cc[t], lw=0.4, color="0.3")
        ax.axhline(thresholds[t], color="C1", lw=0.8, label="MAD threshold")
        ev = [e["sample"] for e in events if e["template"] == t]
        ax.plot(ev, cc[t, ev], "o", mfc="none", color="C2", label="planted")
        dt = [d["index"] for d in det if d["template"] == t]
        ax.plot(dt, cc[t, dt], "x", color="C3", label="detected")
        ax.set_ylabel(f"cc_sum, template {t}")
    axes[0, 0].legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("correlation index")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    """Simulate, correlate in every precision, detect, then the EQcorrscan and ObsPy sections."""
    args = parse_args(__doc__.split("\n\n")[0], "out/study001_matched_filtering")
    hs = import_halfscope()
    from halfscope import matched_filter  # the FMF drop-in line
    be = Backend(args.gpu)
    arch = "gpu" if be.name == "cupy" else "cpu"
    samples = 12_000 if args.quick else 60_000
    sim = hs.simulate.seismic(channels=3, samples=samples, templates=2, template_length=200,
                              events_per_template=3, event_cc=(0.8,), max_moveout=MAX_MOVEOUT, seed=1)
    K = sim.templates.shape[2]
    print(f"{sim.data.shape[0]} channels x {samples} samples, {sim.templates.shape[0]} templates of "
          f"{K} samples, {len(sim.events)} planted events, arch {arch}, arrays: {be.name}")
    ref = fmf_reference(sim.templates, sim.moveouts, sim.weights, sim.data)
    t_dev, m_dev, w_dev, d_dev = (be.asarray(a) for a in (sim.templates, sim.moveouts, sim.weights, sim.data))
    results = {"precision": {}, "samples": samples, "arch": arch, "backend": be.name}
    for prec in PRECISIONS:
        def run(prec=prec):
            return matched_filter(t_dev, m_dev, w_dev, d_dev, 1, arch=arch, precision=prec)
        try:
            cc_p = be.host(run())
        except (hs.Unsupported, hs.InvalidInput) as e:
            emit("SKIP", precision=prec, reason=str(e).splitlines()[0][:120])
            continue
        err = float(np.abs(cc_p.astype(np.float64) - ref).max())
        ms = median_ms(run, be.sync, repeats=3)
        results["precision"][prec] = {"max_abs": err, "ms": ms}
        emit("ACCURACY", what="matched_filter", precision=prec, max_abs=err, dtype=str(cc_p.dtype))
        emit("TIME", what="matched_filter", precision=prec, ms=ms)
    cc = be.host(matched_filter(t_dev, m_dev, w_dev, d_dev, 1, arch=arch))   # default precision
    planted = max(abs(float(cc[e["template"], e["sample"]]) - e["expected_cc_sum"]) for e in sim.events)
    emit("ACCURACY", what="planted_cc", max_abs=planted)
    det = hs.detect(cc, threshold=8.0, threshold_type="MAD", min_separation=K)
    matched, cross, false = match_detections(det, sim.events, tolerance=2, cross_tolerance=MAX_MOVEOUT)
    emit("DETECTION", planted=len(sim.events), found=len(det), matched=matched, cross=cross, false=false)
    fused = hs.matched_filter_detect(t_dev, m_dev, w_dev, d_dev, 1, arch=arch, threshold=8.0,
                                     threshold_type="MAD", min_separation=K)
    same = sorted(zip(fused["template"], fused["index"])) == sorted(zip(det["template"], det["index"]))
    emit("DETECTION", what="matched_filter_detect", found=len(fused), same_as_detect=same)
    eqcorrscan_section(hs, sim)
    stream_section(hs, sim, args.out, arch, cc)
    results["detections"] = {"planted": len(sim.events), "found": len(det), "matched": matched,
                             "cross": cross, "false": false}
    write_json(args.out / "results.json", results)
    thresholds = [float(d) for d in (8.0 * np.median(np.abs(cc), axis=1))]
    plot(cc, det, sim.events, thresholds, args.out / "detections.png")
    print(f"wrote results.json, detections.png, data.mseed under {args.out}")


if __name__ == "__main__":
    main()
