"""`halfscope mfilter` and `halfscope simulate seismic` against an independent NumPy implementation
of Fast Matched Filter's formula, ObsPy-written MiniSEED and SAC data, and simulated ground truth.

Tolerances: the CPU direct method in `double` is the FP64 reference, so it agrees with NumPy's
FP64 to about 2 K u64 (a K-term dot product and two energies), far below anything float32 shows.
The output is float32 in every precision, so `double` results carry one more rounding:
u32 |CC| (u32 = 2^-24, round to nearest). In `single` each channel's CC carries about 2 K u32 (gamma_K on the numerator and,
through the square root, half of it on each energy); the stack adds sum_c |w| of those.
"""
import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
CLI = os.environ.get("HALFSCOPE_CLI")
pytestmark = pytest.mark.skipif(not CLI, reason="HALFSCOPE_CLI is not set (run through ctest)")
SEISMIC = Path(__file__).resolve().parents[1] / "data" / "seismic"
U32 = 2.0 ** -24
FLAT_RELATIVE = 1e-12  # src/mfilter/backends.hpp kFlatRelative


def run(*args):
    return subprocess.run([CLI, "-q", *map(str, args)], capture_output=True, text=True, timeout=300)


def fmf_reference(templates, data, moveouts=None, weights=None, step=1, normalize="short",
                  network_sum=True):
    """Fast Matched Filter's matched_filter written from its definition, in float64."""
    templates = np.asarray(templates, np.float64)
    data = np.atleast_2d(np.asarray(data, np.float64))
    T, C, K = templates.shape
    L = data.shape[1]
    n = (L - K) // step + 1
    moveouts = np.zeros((T, C), np.int64) if moveouts is None else moveouts
    weights = np.ones((T, C)) if weights is None else weights
    cc = np.zeros((T, C, n))
    for c in range(C):
        windows = np.lib.stride_tricks.sliding_window_view(data[c], K)
        for t in range(T):
            tmpl = templates[t, c].copy()
            raw_t = tmpl @ tmpl
            if normalize == "full":
                tmpl -= tmpl.mean()
            tt = tmpl @ tmpl
            if tt <= FLAT_RELATIVE * raw_t or tt == 0:
                continue
            starts = np.arange(n) * step + moveouts[t, c]
            ok = (starts >= 0) & (starts + K <= L)
            w = windows[starts[ok]]
            raw = (w * w).sum(axis=1)
            if normalize == "full":
                w = w - w.mean(axis=1, keepdims=True)
            ee = (w * w).sum(axis=1)
            flat = (ee <= FLAT_RELATIVE * raw) | (ee == 0)
            with np.errstate(invalid="ignore", divide="ignore"):
                v = np.where(flat, 0.0, (w @ tmpl) / np.sqrt(tt * ee))
            cc[t, c, ok] = np.clip(v, -1, 1)
    if not network_sum:
        return cc
    return (weights[:, :, None] * cc).sum(axis=1)


def problem(tmp_path, T=3, C=4, K=40, L=900, seed=1):
    rng = np.random.default_rng(seed)
    templates = rng.uniform(-1, 1, (T, C, K))
    data = rng.uniform(-50, 50, (C, L))
    # Moveouts that push some windows off either end of the data (they must give 0).
    moveouts = rng.integers(-30, 60, (T, C)).astype(np.int64)
    weights = rng.uniform(0, 1, (T, C))
    weights[0, 1] = 0.0
    paths = {}
    for name, a in (("t", templates), ("d", data), ("m", moveouts), ("w", weights)):
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], a)
    return templates, data, moveouts, weights, paths


@pytest.mark.parametrize("normalize", ["short", "full"])
@pytest.mark.parametrize("step", [1, 3])
def test_network_stack_matches_numpy(tmp_path, normalize, step):
    templates, data, moveouts, weights, p = problem(tmp_path)
    K = templates.shape[2]
    ref = fmf_reference(templates, data, moveouts, weights, step, normalize)
    scale = max(1.0, np.abs(ref).max())
    for precision, tol in (("double", U32 * scale),
                           ("single", 2 * K * U32 * weights.sum(axis=1).max() + U32 * scale)):
        out = tmp_path / f"cc-{precision}.npy"
        r = run("--device", "cpu", "mfilter", p["t"], p["d"], "-o", out, "--moveouts", p["m"],
                "--weights", p["w"], "--step", step, "--normalize", normalize,
                "--precision", precision)
        assert r.returncode == 0, r.stderr
        cc = np.load(out)
        assert cc.dtype == np.float32 and cc.shape == ref.shape
        assert np.abs(cc - ref).max() <= tol, (precision, np.abs(cc - ref).max())


def test_per_channel_matches_numpy(tmp_path):
    templates, data, moveouts, _, p = problem(tmp_path, seed=2)
    ref = fmf_reference(templates, data, moveouts, step=2, network_sum=False)
    out = tmp_path / "cc.npy"
    r = run("--device", "cpu", "mfilter", p["t"], p["d"], "-o", out, "--moveouts", p["m"],
            "--step", 2, "--per-channel", "--precision", "double")
    assert r.returncode == 0, r.stderr
    cc = np.load(out)
    assert cc.shape == ref.shape
    assert np.abs(cc - ref).max() <= U32
    assert (ref == 0).any()  # some windows really ran off the data


def test_check_prints_the_error_against_fp64(tmp_path):
    _, _, _, _, p = problem(tmp_path, seed=3)
    r = run("--device", "cpu", "mfilter", p["t"], p["d"], "-o", tmp_path / "cc.npy", "--check")
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stderr.splitlines() if "max |CC - CC_fp64|" in x]
    assert len(line) == 1, r.stderr  # on standard error: standard output may carry the CSV
    err = float(line[0].split()[-1])
    assert 0 < err <= 2 * 40 * U32 * 4  # single, K = 40, weights 1 on 4 channels


def read_detections(path_or_text):
    text = Path(path_or_text).read_text() if isinstance(path_or_text, Path) else path_or_text
    return list(csv.DictReader(text.splitlines()))


def simulate(tmp_path, *extra, events=4):
    out = tmp_path / "sim"
    r = run("simulate", "seismic", "-o", out, "--channels", 3, "--samples", 60000, "--templates",
            2, "--template-length", 200, "--events", events, "--cc", "0.75,0.9", "--seed", 11,
            *extra)
    assert r.returncode == 0, r.stderr
    return out


def test_detection_finds_every_planted_event_and_nothing_else(tmp_path):
    sim = simulate(tmp_path, "--mseed")
    events = read_detections(sim / "events.csv")
    assert len(events) == 8 and all(float(e["cc"]) > 0.7 for e in events)
    det = tmp_path / "det.csv"
    common = ["--moveouts", sim / "moveouts.npy", "--weights", sim / "weights.npy", "--detect",
              "--threshold", 10, "--threshold-type", "mad", "--min-separation", 250]
    r = run("mfilter", sim / "templates.npy", sim / "data.mseed", *common, "--detections", det)
    assert r.returncode == 0, r.stderr
    found = read_detections(det)
    span = 200 + 50  # template length + max moveout: the reach of one planted event
    for d in found:  # nothing on noise: every detection sits on a planted event (its own, or
        # another template's, which correlated templates can pick up, as in EQcorrscan)
        assert any(abs(int(d["sample"]) - int(e["sample"])) <= span for e in events), d
    for e in events:
        match = [d for d in found if d["template"] == e["template"]
                 and abs(int(d["sample"]) - int(e["sample"])) <= 2]
        assert len(match) == 1, (e, found)
        d = match[0]
        assert d["time"] == e["time"]  # the MiniSEED start time carried through
        assert int(d["channels_used"]) == 3
        if d["sample"] == e["sample"]:  # the planted window: CC exactly as planted, to FP32
            assert abs(float(d["cc_sum"]) - float(e["cc_sum"])) <= 2 * 200 * U32
    # The planted CC at every event's own sample, whether or not the detection peak sits there
    # (a neighbouring sample may correlate slightly higher): the CPU in single, K = 200, weights
    # summing to 1, so the stack carries about 2 K u32 (module docstring).
    cc_out = tmp_path / "cc.npy"
    r = run("--device", "cpu", "mfilter", sim / "templates.npy", sim / "data.npy", "-o", cc_out,
            "--precision", "single", *common)
    assert r.returncode == 0, r.stderr
    cc = np.load(cc_out)
    for e in events:
        got = cc[int(e["template"]), int(e["sample"])]
        assert abs(got - float(e["cc_sum"])) <= 2 * 200 * U32, (e, got)
    # Both outputs of one run: -o and the same detections as the run without -o.
    with_o = read_detections(r.stdout)
    assert [(d["template"], d["sample"]) for d in with_o] == [(d["template"], d["sample"]) for d in found]
    # Detection only (no -o): the same detections from the streaming path.
    r = run("mfilter", sim / "templates.npy", sim / "data.npy", *common)
    assert r.returncode == 0, r.stderr
    again = read_detections(r.stdout)
    assert [(d["template"], d["sample"]) for d in again] == [(d["template"], d["sample"]) for d in found]


def test_simulated_truth_matches_numpy(tmp_path):
    sim = simulate(tmp_path, "--normalize", "full", "--colour", "0.5")
    data, templates = np.load(sim / "data.npy"), np.load(sim / "templates.npy")
    moveouts, weights = np.load(sim / "moveouts.npy"), np.load(sim / "weights.npy")
    assert data.shape == (3, 60000) and templates.shape == (2, 3, 200)
    assert moveouts.dtype == np.int64 and (moveouts.min(axis=1) == 0).all()
    assert np.allclose(weights, 1 / 3)
    events = read_detections(sim / "events.csv")
    for e in events:
        t, i = int(e["template"]), int(e["sample"])
        cc = fmf_reference(templates[t:t + 1], data[:, i:i + 200 + moveouts[t].max()],
                           moveouts[t:t + 1], normalize="full", network_sum=False)[0, :, 0]
        # Planted in FP64 and re-evaluated here in FP64: agreement to ~8 K u64 (< 1e-12).
        assert np.abs(cc - float(e["cc"])).max() < 1e-12, (e, cc)


def test_templates_cut_from_other_data(tmp_path):
    sim = simulate(tmp_path)
    data = np.load(sim / "data.npy")
    np.save(tmp_path / "other.npy", data[:, :5000])
    picks = tmp_path / "picks.csv"
    picks.write_text("a,0,100\na,2,130\n")
    out = tmp_path / "cc.npy"
    r = run("mfilter", "--template-times", picks, "--template-length", 50, "--template-data",
            tmp_path / "other.npy", sim / "data.npy", "-o", out, "--precision", "double")
    assert r.returncode == 0, r.stderr
    templates = np.zeros((1, 3, 50))
    templates[0, 0], templates[0, 2] = data[0, 100:150], data[2, 130:180]
    weights = np.array([[1.0, 0.0, 1.0]])
    expect = fmf_reference(templates, data, np.array([[0, 0, 30]]), weights)
    cc = np.load(out)
    assert np.abs(cc - expect).max() <= 2 * U32
    assert abs(cc[0, 100] - 2.0) <= 2 * U32  # the template finds itself on its 2 channels


def test_help(tmp_path):
    for sub in (["mfilter"], ["simulate", "seismic"]):
        r = run(*sub, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout, r.stderr


def test_no_detection_on_noise_only(tmp_path):
    sim = simulate(tmp_path, events=0)
    r = run("mfilter", sim / "templates.npy", sim / "data.npy", "--moveouts", sim / "moveouts.npy",
            "--weights", sim / "weights.npy", "--detect", "--threshold", 10,
            "--min-separation", 250)
    assert r.returncode == 0, r.stderr
    assert read_detections(r.stdout) == []


def test_obspy_miniseed_with_gap_reads_like_obspy(tmp_path):
    ref = np.load(SEISMIC / "example.npy")
    info = json.loads((SEISMIC / "example.json").read_text())
    # Templates cut by time from the ObsPy file must equal NumPy cuts of ObsPy's merged array.
    picks = tmp_path / "picks.csv"
    picks.write_text("template,channel,start\n"
                     "ev,BW.RJOB..EHZ,2009-08-24T00:20:07.5Z\nev,BW.RJOB..EHE,380\n"
                     "ev,1,2009-08-24T00:20:07.7Z\n")
    out = tmp_path / "cc.npy"
    r = run("mfilter", "--template-times", picks, "--template-length", 100, SEISMIC / "example.mseed",
            "-o", out, "--per-channel", "--precision", "double")
    assert r.returncode == 0, r.stderr
    gap = info["gaps"][0]
    warning = [x for x in r.stderr.splitlines() if "gap" in x]
    assert len(warning) == 1 and gap["id"] in warning[0] and gap["end"][:22] in warning[0]
    assert f"({gap['samples']} samples zero-filled)" in warning[0]
    templates = np.zeros((1, 3, 100))
    templates[0, 0] = ref[0, 380:480]   # EHE by sample
    templates[0, 1] = ref[1, 470:570]   # EHN by index, 00:20:07.7
    templates[0, 2] = ref[2, 450:550]   # EHZ by time, 00:20:07.5
    moveouts = np.array([[0, 90, 70]])  # offsets from the earliest pick
    expect = fmf_reference(templates, ref, moveouts, network_sum=False)
    cc = np.load(out)
    assert np.abs(cc - expect).max() <= U32
    assert cc[0, 1, 1200 - 90] == 0 and expect[0, 1, 1200 - 90] == 0  # the window on the gap


def test_obspy_sac_list(tmp_path):
    obspy = pytest.importorskip("obspy")
    st = obspy.read()
    paths = []
    for tr in st:
        p = tmp_path / f"{tr.stats.channel}.sac"
        tr.data = tr.data.astype(np.float32)
        tr.write(str(p), format="SAC")
        paths.append(str(p))
    data = np.stack([tr.data for tr in sorted(st, key=lambda t: t.id)]).astype(np.float64)
    templates = data[None, :, 500:564].copy()
    np.save(tmp_path / "t.npy", templates)
    out = tmp_path / "cc.npy"
    r = run("mfilter", tmp_path / "t.npy", ",".join(paths), "-o", out, "--precision", "double")
    assert r.returncode == 0, r.stderr
    expect = fmf_reference(templates, data)
    assert np.abs(np.load(out) - expect).max() <= 3 * U32
    assert abs(np.load(out)[0, 500] - 3.0) <= 3 * U32  # the template found itself on 3 channels


def assert_bad(r, out, *words):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert not out.exists()


def test_bad_inputs_exit_2_with_one_line_and_no_output(tmp_path):
    _, data, _, _, p = problem(tmp_path, T=2, C=3, K=20, L=100)
    out = tmp_path / "cc.npy"

    def expect_bad(r, *words):
        assert_bad(r, out, *words)

    np.save(tmp_path / "t2.npy", np.ones((2, 2, 20)))
    expect_bad(run("mfilter", tmp_path / "t2.npy", p["d"], "-o", out), "t2.npy", "2 channels",
               "expected 3")
    np.save(tmp_path / "long.npy", np.ones((2, 3, 101)))
    expect_bad(run("mfilter", tmp_path / "long.npy", p["d"], "-o", out), "long.npy", "101",
               "100 samples")
    bad = data.copy()
    bad[1, 17] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    expect_bad(run("mfilter", p["t"], tmp_path / "nan.npy", "-o", out), "nan.npy", "channel 1",
               "sample 17", "NaN")
    np.save(tmp_path / "m.npy", np.zeros((3, 2), np.int64))
    expect_bad(run("mfilter", p["t"], p["d"], "-o", out, "--moveouts", tmp_path / "m.npy"),
               "m.npy", "(2, 3)")
    np.save(tmp_path / "mf.npy", np.zeros((2, 3)))
    expect_bad(run("mfilter", p["t"], p["d"], "-o", out, "--moveouts", tmp_path / "mf.npy"),
               "mf.npy", "integers")
    expect_bad(run("mfilter", p["t"], p["d"], "-o", out, "--method", "magic"), "magic")
    expect_bad(run("mfilter", p["t"], p["d"]), "-o")
    expect_bad(run("mfilter", p["t"], p["d"], "--detect", "--per-channel"), "--per-channel")
    picks = tmp_path / "picks.csv"
    picks.write_text("a,XX.NOPE..HHZ,0\n")
    expect_bad(run("mfilter", "--template-times", picks, "--template-length", 10, p["d"], "-o",
                   out), "picks.csv line 1", "XX.NOPE..HHZ")


def test_outputs_never_replace_inputs_or_each_other(tmp_path):
    """An output named like an input (however spelled) or like another output is refused before
    any work, every file as it was; text outputs named like array files too; and options that
    only the correlation would have caught (a per-channel CSV, a bad threshold) fail up front."""
    _, _, _, _, p = problem(tmp_path, T=2, C=3, K=20, L=100)
    weights = tmp_path / "w.npy"
    np.save(weights, np.ones((2, 3)))
    picks = tmp_path / "picks.csv"
    picks.write_text("a,0,0\n")
    before = {f: f.read_bytes() for f in (Path(p["t"]), Path(p["d"]), weights, picks)}
    same_data = tmp_path / "sub" / ".." / Path(p["d"]).name
    (tmp_path / "sub").mkdir()
    cases = [
        (["-o", p["d"]], ["-o", "DATA"]),
        (["-o", same_data], ["-o", "DATA"]),
        (["-o", p["t"]], ["-o", "TEMPLATES"]),
        (["-o", weights, "--weights", weights], ["-o", "--weights"]),
        (["--detect", "--detections", p["d"]], ["--detections", "DATA"]),
        (["-o", tmp_path / "x.npy", "--detect", "--detections", tmp_path / "x.npy"],
         ["--detections", "the same file as -o", "(another output)"]),
        (["--detect", "--detections", tmp_path / "det.npy"], ["--detections", "CSV", ".npy"]),
        (["-o", tmp_path / "cc.csv", "--per-channel"], ["cc.csv", "3-D", "--per-channel"]),
        (["-o", tmp_path / "cc.npy", "--detect", "--threshold", "-1"], ["--threshold", ">= 0"]),
        (["-o", tmp_path / "cc.npy", "--detect", "--threshold", "nan"], ["--threshold"]),
    ]
    for extra, words in cases:
        r = run("--device", "cpu", "mfilter", p["t"], p["d"], *extra)
        assert r.returncode == 2, (extra, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        for w in words:
            assert w in lines[0], (extra, lines[0])
    r = run("--device", "cpu", "mfilter", "--template-times", picks, "--template-length", 10,
            p["d"], "--detect", "--detections", picks)
    assert r.returncode == 2 and "--template-times" in r.stderr, r.stderr
    for f, content in before.items():
        assert f.read_bytes() == content, f
    assert not (tmp_path / "x.npy").exists() and not (tmp_path / "det.npy").exists()
    assert not (tmp_path / "cc.csv").exists() and not (tmp_path / "cc.npy").exists()


def test_mismatched_sampling_rates_exit_2(tmp_path):
    obspy = pytest.importorskip("obspy")
    st = obspy.read()
    st[1].stats.sampling_rate = 50.0
    st.write(str(tmp_path / "rates.mseed"), format="MSEED")
    np.save(tmp_path / "t.npy", np.ones((1, 3, 10)))
    out = tmp_path / "cc.npy"
    assert_bad(run("mfilter", tmp_path / "t.npy", tmp_path / "rates.mseed", "-o", out), out,
               "rates.mseed", "50", "100")


def test_simulate_seismic_bad_options(tmp_path):
    r = run("simulate", "seismic", "-o", tmp_path / "s", "--cc", "1.2")
    assert r.returncode == 2 and "event CC" in r.stderr
    assert not (tmp_path / "s").exists()  # options are checked before the folder is made


def test_simulate_seismic_failure_leaves_the_earlier_run_whole(tmp_path):
    out = tmp_path / "sim"
    args = ["simulate", "seismic", "-o", out, "--channels", 2, "--samples", 5000, "--templates", 1,
            "--template-length", 50, "--events", 2, "--mseed"]
    r = run(*args, "--seed", 1)
    assert r.returncode == 0, r.stderr
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    assert set(before) == {"data.npy", "templates.npy", "moveouts.npy", "weights.npy",
                           "data.mseed", "events.csv"}
    (out / "data.mseed").unlink()
    (out / "data.mseed").mkdir()  # the last data file cannot be replaced
    del before["data.mseed"]
    r = run(*args, "--seed", 2)
    assert r.returncode == 2, r.stderr
    assert "data.mseed" in r.stderr
    after = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    assert after == before  # no file of seed 2, no temporary left behind


def test_detections_on_stdout_and_outputs_all_or_nothing(tmp_path):
    sim = simulate(tmp_path)
    common = ["--device", "cpu", "mfilter", sim / "templates.npy", sim / "data.npy", "--moveouts",
              sim / "moveouts.npy", "--weights", sim / "weights.npy", "--detect", "--threshold", 10,
              "--min-separation", 250]
    # --check with the detections on standard output: the CSV stays pure (the check line goes to
    # standard error).
    r = run(*common, "--check")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("template,correlation_index,"), r.stdout
    on_stdout = read_detections(r.stdout)
    assert len(on_stdout) >= 8  # at least the planted events
    assert "max |CC - CC_fp64|" in r.stderr
    # -o and --detections: both written by one run...
    cc, det = tmp_path / "cc.npy", tmp_path / "det.csv"
    r = run(*common, "-o", cc, "--detections", det)
    assert r.returncode == 0, r.stderr
    assert cc.exists() and read_detections(det) == on_stdout
    # ...and neither when one of them cannot be written.
    cc2, det2 = tmp_path / "cc2.npy", tmp_path / "det2.csv"
    (tmp_path / "blocked.csv").mkdir()
    r = run(*common, "-o", cc2, "--detections", tmp_path / "blocked.csv")
    assert r.returncode == 2 and "blocked.csv" in r.stderr, r.stderr
    assert not cc2.exists()
    r = run(*common, "-o", tmp_path / "blocked.csv" / "x" / "cc.npy", "--detections", det2)
    assert r.returncode == 2, r.stderr
    assert not det2.exists()
    r = run(*common, "-o", tmp_path / "cc.mseed", "--detections", det2)  # CC is no waveform
    assert r.returncode == 2 and "cc.mseed" in r.stderr and "array file" in r.stderr, r.stderr
    assert not det2.exists() and not (tmp_path / "cc.mseed").exists()
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")]  # no temporaries


def test_devices_on_a_cpu_call_exit_2(tmp_path):
    """--devices spreads templates over GPUs; on a CPU call it is bad usage, said in one line,
    with no output written."""
    _, _, _, _, p = problem(tmp_path, T=2, C=3, K=20, L=100)
    out = tmp_path / "cc.npy"
    assert_bad(run("--device", "cpu", "mfilter", p["t"], p["d"], "-o", out, "--devices", "0,1"),
               out, "devices", "runs on the CPU")


def test_level_step_in_sixteen_bit_full_normalization_exits_1_naming_the_window(tmp_path):
    # A step of 3e4 noise levels: FP16 / BF16 operands of full normalization would round to the
    # level (CC errors of order 1, clamped to +-1); the call is a numerical failure, written
    # nowhere, and split runs the same data within float32-grade error.
    rng = np.random.default_rng(4)
    templates = rng.standard_normal((2, 2, 50))
    data = rng.standard_normal((2, 2000))
    data[1, 1000:] += 3e4
    np.save(tmp_path / "t.npy", templates)
    np.save(tmp_path / "d.npy", data)
    out = tmp_path / "cc.npy"
    for precision in ("half", "mixed", "bf16"):
        r = run("--device", "cpu", "mfilter", tmp_path / "t.npy", tmp_path / "d.npy", "-o", out,
                "--normalize", "full", "--precision", precision)
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        for word in ("channel 1", "at sample", precision, "split or single"):
            assert word in lines[0], lines[0]
        assert not out.exists()
    r = run("--device", "cpu", "mfilter", tmp_path / "t.npy", tmp_path / "d.npy", "-o", out,
            "--normalize", "full", "--precision", "split")
    assert r.returncode == 0, r.stderr
    ref = fmf_reference(templates, data.astype(np.float32).astype(np.float64), normalize="full")
    # Split's operands carry ~22 bits: errors ~u32 x the level over the noise (~1.5e4), K = 50.
    assert np.abs(np.load(out) - ref).max() < 2e-2
