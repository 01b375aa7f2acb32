"""`halfscope mfilter` under an MPI launcher against the plain CLI on the same inputs.

The CPU direct method computes every element of the correlation by the same arithmetic whether
the call runs whole or split over ranks (templates in groups, correlation times in parts: see
docs/scaling.md), and the detections are merged exactly, so the files written under mpirun are
compared byte for byte with the plain CLI's. Failures: a rank failing in its computation (the
HALFSCOPE_FAULT_RANK test hook, thrown or crashing) ends the job within seconds with a non-zero
status and leaves existing outputs untouched.
"""
import os
import shlex
import subprocess
import time

import pytest

np = pytest.importorskip("numpy")
CLI = os.environ.get("HALFSCOPE_CLI")
MPIEXEC = os.environ.get("HALFSCOPE_MPIEXEC")
pytestmark = pytest.mark.skipif(
    not CLI or not MPIEXEC,
    reason="HALFSCOPE_CLI and HALFSCOPE_MPIEXEC (the MPI launcher with its flags) are not set")


def run(args, ranks=None, env=None, timeout=120):
    launcher = shlex.split(MPIEXEC) + ["-n", str(ranks)] if ranks else []
    return subprocess.run(launcher + [CLI, "-q", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def assert_ranks_equal_plain(d, args, min_lines, splits=((2, []), (4, ["--time-parts", "4"]))):
    """`args` run plainly and under each (ranks, extra arguments): the correlation .npy and the
    detections CSV byte for byte the plain CLI's. Returns the plain CSV, of at least `min_lines`
    lines (header included)."""
    plain = run([*args, "-o", d / "plain.npy", "--detections", d / "plain.csv"])
    assert plain.returncode == 0, plain.stderr
    csv = (d / "plain.csv").read_bytes()
    assert csv.count(b"\n") >= min_lines, csv
    for ranks, split in splits:
        out, found = d / f"mpi{ranks}.npy", d / f"mpi{ranks}.csv"
        r = run([*args, *split, "-o", out, "--detections", found], ranks=ranks)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == (d / "plain.npy").read_bytes()
        assert found.read_bytes() == csv
    return csv


def assert_ranks_write_plain(d, args, stem,
                             splits=((2, []), (4, []), (4, ["--time-parts", "2"]))):
    """`args` run plainly and under each (ranks, extra arguments): the correlation .npy byte for
    byte the plain CLI's."""
    plain = run([*args, "-o", d / f"{stem}_plain.npy"])
    assert plain.returncode == 0, plain.stderr
    for ranks, split in splits:
        out = d / f"{stem}_mpi{ranks}{len(split)}.npy"
        r = run([*args, *split, "-o", out], ranks=ranks)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == (d / f"{stem}_plain.npy").read_bytes()


def assert_reported_once(args, rank, message, never):
    """`args` under 4 ranks end with status 2, `message` printed once as rank `rank`'s, nothing
    written at `never`; the plain CLI fails with status 2 and the same message."""
    r = run(args, ranks=4)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count(f"MPI rank {rank}: {message}") == 1, r.stderr
    assert not never.exists()
    one = run(args)
    assert one.returncode == 2
    assert message in one.stderr


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """20 templates (two tiles of 16: on 4 ranks a grid of 2 template groups x 2 time parts),
    3 channels, moveouts from -4 to 18 samples, templates planted on the borders of the parts."""
    d = tmp_path_factory.mktemp("mpi_mfilter")
    rng = np.random.default_rng(9)
    T, C, K, L = 20, 3, 32, 6000
    data = rng.standard_normal((C, L))
    templates = rng.standard_normal((T, C, K))
    moveouts = ((np.arange(T)[:, None] * 3 + np.arange(C)[None, :] * 5) % 23 - 4).astype(np.int64)
    n = L - K + 1
    # n = 5969 correlation times: 4 time parts start at 1493, 2985 and 4477, 2 parts at 2985, so
    # peaks at n // 4, n // 2 and 3 n // 4 lie one before a border and n // 2 + 1 on it.
    for t, at in enumerate([n // 4, n // 2, 3 * n // 4, n // 2 + 1, 100]):
        for c in range(C):
            s = at + moveouts[t, c]
            data[c, s:s + K] += 3 * templates[t, c]
    np.save(d / "templates.npy", templates)
    np.save(d / "data.npy", data)
    np.save(d / "moveouts.npy", moveouts)
    np.save(d / "weights.npy", rng.uniform(0.5, 1.0, (T, C)))
    common = [d / "templates.npy", d / "data.npy", "--moveouts", d / "moveouts.npy", "--weights",
              d / "weights.npy", "--device", "cpu"]
    return d, common


DETECT = ["--detect", "--threshold", "7", "--threshold-type", "mad", "--min-separation", "20"]


@pytest.mark.parametrize("precision", ["single", "split"])
def test_stack_and_detections_equal_the_plain_cli(inputs, precision):
    d, common = inputs
    args = ["mfilter", *common, "--precision", precision, *DETECT]
    plain = run([*args, "-o", d / f"plain_{precision}.npy", "--detections",
                 d / f"plain_{precision}.csv"])
    assert plain.returncode == 0, plain.stderr
    csv = (d / f"plain_{precision}.csv").read_bytes()
    assert csv.count(b"\n") >= 5, csv  # the planted templates were found
    # 2 ranks: two template groups; 4: 2 groups x 2 time parts; 4 with --time-parts 4: one
    # group in 4 time parts, whose borders pass through the planted events.
    for ranks, split in ((2, []), (4, []), (4, ["--time-parts", "4"])):
        out, found = d / f"mpi{ranks}_{precision}.npy", d / f"mpi{ranks}_{precision}.csv"
        r = run([*args, *split, "-o", out, "--detections", found], ranks=ranks)
        assert r.returncode == 0, r.stderr
        assert out.read_bytes() == (d / f"plain_{precision}.npy").read_bytes()
        assert found.read_bytes() == csv
    # Detections to standard output are printed once, by rank 0.
    r = run(args, ranks=4)
    assert r.returncode == 0, r.stderr
    assert r.stdout.encode() == csv


def check_line(stderr):
    return [line for line in stderr.splitlines() if line.startswith("check against FP64")]


def test_ranks_without_a_shared_file_system_gather_the_result(inputs):
    """A .npy result is written by every rank into one file; a rank that cannot open it (here
    HALFSCOPE_UNSHARED_RANK pretends so) makes the call gather it on rank 0: same bytes."""
    d, common = inputs
    args = ["mfilter", *common, "--precision", "single"]
    plain = run([*args, "-o", d / "plain_shared.npy"])
    assert plain.returncode == 0, plain.stderr
    r = run([*args, "-o", d / "mpi_unshared.npy"], ranks=4, env={"HALFSCOPE_UNSHARED_RANK": "2"})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("1 rank(s) cannot open") == 1, r.stderr  # the fallback, said once
    assert (d / "mpi_unshared.npy").read_bytes() == (d / "plain_shared.npy").read_bytes()
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".")) == []


def test_per_channel_result_and_check_equal_the_plain_cli(inputs):
    d, common = inputs
    args = ["mfilter", *common, "--precision", "single", "--per-channel", "--normalize", "full",
            "--check"]
    plain = run([*args, "-o", d / "plain_pc.npy"])
    assert plain.returncode == 0, plain.stderr
    r = run([*args, "-o", d / "mpi_pc.npy"], ranks=4)
    assert r.returncode == 0, r.stderr
    assert "cannot open" not in r.stderr  # written by the ranks, not gathered
    assert (d / "mpi_pc.npy").read_bytes() == (d / "plain_pc.npy").read_bytes()
    # The FP64 reference over the ranks gives the same largest difference, printed once.
    assert len(check_line(plain.stderr)) == 1
    assert check_line(r.stderr) == check_line(plain.stderr)


@pytest.mark.parametrize("fault", ["1", "1:abort"])
def test_a_failing_rank_ends_the_job_and_leaves_outputs_alone(inputs, fault):
    d, common = inputs
    out, found = d / "kept.npy", d / "kept.csv"
    out.write_bytes(b"an earlier result")
    found.write_bytes(b"earlier detections")
    start = time.monotonic()
    r = run(["mfilter", *common, *DETECT, "-o", out, "--detections", found], ranks=4,
            env={"HALFSCOPE_FAULT_RANK": fault}, timeout=60)
    assert time.monotonic() - start < 30
    assert r.returncode != 0
    if fault == "1":  # an agreed error: printed once, by rank 0, naming the failing rank
        assert r.stderr.count("halfscope: error: MPI rank 1: HALFSCOPE_FAULT_RANK=1: fault "
                              "injected on MPI rank 1") == 1, r.stderr
    assert out.read_bytes() == b"an earlier result"
    assert found.read_bytes() == b"earlier detections"
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".")) == []  # no temporaries


def test_devices_over_ranks_is_refused_once_with_status_2(inputs):
    d, common = inputs
    r = run(["mfilter", *common, "-o", d / "never.npy", "--devices", "0"], ranks=2)
    assert r.returncode == 2
    assert r.stderr.count("expected no --devices") == 1, r.stderr
    assert not (d / "never.npy").exists()


def test_subcommands_without_mpi_support_refuse_several_ranks(tmp_path):
    """A subcommand that would run whole on every rank (each writing the same outputs) is refused
    on 2 ranks: one message, exit status 2, no output."""
    out = tmp_path / "k.npy"
    r = run(["simulate", "gaussian-kernel", "--width", "5", "-o", out], ranks=2)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("does not run over MPI ranks") == 1, r.stderr
    assert "mfilter, cholesky, ao reconstructor" in r.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def long_day(tmp_path_factory):
    """Four and a half sum blocks of 65536 samples (src/mfilter/data_factors.hpp), so that on 4
    ranks every rank scans blocks of its own: 3 channels of data with an offset 1e3 times the
    noise, written by NumPy big-endian in Fortran order (float64) and as float32."""
    d = tmp_path_factory.mktemp("mpi_long_day")
    rng = np.random.default_rng(12)
    T, C, K, L = 6, 3, 48, 4 * 65536 + 32768 + 77
    data = rng.standard_normal((C, L)) + 1e3
    templates = rng.standard_normal((T, C, K))
    for t, at in enumerate([70000, 140000, 200000, 262000, L - 1000]):
        data[:, at:at + K] += 4 * templates[t]
    np.save(d / "templates.npy", templates)
    np.save(d / "be_fortran.npy", np.asfortranarray(data.astype(">f8")))
    np.save(d / "f32.npy", data.astype(np.float32))
    return d


@pytest.mark.parametrize("name", ["be_fortran.npy", "f32.npy"])
def test_ranks_reading_a_long_day_by_windows_equal_the_plain_cli(long_day, name):
    """Each rank reads its share of the .npy DATA (1/N of every channel for the whole-channel
    mean and range, then its window): stack and detections byte for byte the plain CLI's."""
    d = long_day
    args = ["mfilter", d / "templates.npy", d / name, "--device", "cpu", "--precision", "single",
            "--normalize", "full", "--detect", "--threshold", "8", "--min-separation", "100"]
    assert_ranks_equal_plain(d, args, 6)  # the five planted events


def test_ranks_name_a_non_finite_sample_of_the_file_once(long_day):
    d = long_day
    data = np.load(d / "f32.npy")
    data[2, 100000] = np.nan
    data[1, 290000] = np.inf
    np.save(d / "nan.npy", data)
    out = d / "never.npy"
    r = run(["mfilter", d / "templates.npy", d / "nan.npy", "--device", "cpu", "-o", out],
            ranks=4)
    assert r.returncode == 2, r.stderr
    # Channel 1's infinity comes first (the lowest channel), found by the rank whose share of
    # the blocks holds sample 290000 (blocks 3-4 of 0-4: rank 3).
    want = f"MPI rank 3: {d / 'nan.npy'}: channel 1, sample 290000 is infinite: expected finite data"
    assert r.stderr.count(want) == 1, r.stderr
    assert not out.exists()
    # One process reads the file whole and says the same of it.
    one = run(["mfilter", d / "templates.npy", d / "nan.npy", "--device", "cpu", "-o", out])
    assert one.returncode == 2
    assert f"{d / 'nan.npy'}: channel 1, sample 290000 is infinite: expected finite data" in one.stderr


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    """A bank of 70 templates (five tiles of 16: 4 template groups on 4 ranks, each rank reading
    only its group from the file), float32 in Fortran order, events of templates in the first,
    second and last groups."""
    d = tmp_path_factory.mktemp("mpi_bank")
    rng = np.random.default_rng(13)
    T, C, K, L = 70, 2, 24, 5000
    data = rng.standard_normal((C, L))
    templates = rng.standard_normal((T, C, K)).astype(np.float32)
    for t, at in ((0, 700), (20, 2500), (69, 4100)):
        data[:, at:at + K] += 4 * templates[t]
    np.save(d / "bank.npy", np.asfortranarray(templates))
    np.save(d / "data.npy", data)
    return d


def test_ranks_reading_the_templates_by_groups_equal_the_plain_cli(bank):
    d = bank
    args = ["mfilter", d / "bank.npy", d / "data.npy", "--device", "cpu", "--precision", "split",
            "--detect", "--threshold", "8", "--min-separation", "100"]
    assert_ranks_equal_plain(d, args, 4, splits=((2, []), (4, [])))  # the three planted events


def test_ranks_name_a_non_finite_template_value_of_the_file_once(bank):
    d = bank
    templates = np.load(d / "bank.npy")
    templates[37, 1, 5] = np.nan
    templates[60, 0, 2] = np.inf
    np.save(d / "bad_bank.npy", templates)
    out = d / "never.npy"
    # Template 37 lies in the second group of four ([32, 48)): rank 1 reads it.
    assert_reported_once(["mfilter", d / "bad_bank.npy", d / "data.npy", "--device", "cpu", "-o",
                          out], 1, f"{d / 'bad_bank.npy'}: template 37, channel 1, sample 5 is "
                         "nan: expected a finite value", out)


def test_ranks_reading_the_network_by_rows_equal_the_plain_cli(bank):
    """Moveouts (int32, Fortran order) and weights (float32) as .npy tables: each rank reads its
    template group's rows of both, and the files equal the plain CLI's byte for byte."""
    d = bank
    T, C = 70, 2
    rng = np.random.default_rng(17)
    moveouts = (np.arange(T)[:, None] * 7 + np.arange(C)[None, :] * 3) % 29 - 5
    np.save(d / "net_moveouts.npy", np.asfortranarray(moveouts.astype(np.int32)))
    np.save(d / "net_weights.npy", rng.uniform(0.5, 1.0, (T, C)).astype(np.float32))
    args = ["mfilter", d / "bank.npy", d / "data.npy", "--device", "cpu", "--precision", "single",
            "--moveouts", d / "net_moveouts.npy", "--weights", d / "net_weights.npy"]
    assert_ranks_write_plain(d, args, "net")
    # A non-finite weight is named once, by the rank whose template group reads it.
    weights = np.load(d / "net_weights.npy")
    weights[37, 1] = np.nan
    np.save(d / "bad_weights.npy", weights)
    bad = [*args[:-1], d / "bad_weights.npy", "-o", d / "never.npy"]
    assert_reported_once(bad, 1, f"{d / 'bad_weights.npy'}: weights [37, 1] is not finite: "
                         "expected a real", d / "never.npy")


def test_ranks_cutting_templates_by_groups_equal_the_plain_cli(bank):
    """40 templates cut by a pick table (2 channels each, picks 3 samples apart): each rank reads
    DATA (or --template-data) by windows and cuts only its template group; the files equal the
    plain CLI's byte for byte, and a flat cut is named once by the rank that cuts it."""
    d = bank
    rows = ["template,channel,start"]
    for t in range(40):
        rows += [f"ev{t},0,{100 + 110 * t}", f"ev{t},1,{103 + 110 * t}"]
    (d / "picks.csv").write_text("\n".join(rows) + "\n")
    other = np.load(d / "data.npy")
    other[1, 4170:4300] = 0  # template 37's channel 1 (from 4173) is flat in the other data
    np.save(d / "other.npy", other)
    cut = ["--template-times", d / "picks.csv", "--template-length", 24, "--device", "cpu",
           "--precision", "single"]
    for extra in ([], ["--template-data", d / "data.npy"]):
        assert_ranks_write_plain(d, ["mfilter", *cut, *extra, d / "data.npy"], "cut")
    bad = ["mfilter", *cut, "--template-data", d / "other.npy", d / "data.npy", "-o",
           d / "never.npy"]
    # Template 37 lies in the third group of 16 ([32, 40)): rank 2 cuts it.
    assert_reported_once(bad, 2, f"{d / 'picks.csv'} line 77: the template window of 1 is all "
                         "zeros", d / "never.npy")


def test_ranks_reading_sac_channels_by_windows_equal_the_plain_cli(tmp_path):
    """SAC files (written by ObsPy, starting at different times, some big-endian), channel 0 in
    three files (the second overlapping the first by 40 samples, a gap of 25 before the third),
    channel 2 in a float32 MiniSEED file, listed out of order: each rank reads only its window of
    every file (-v says so); the correlation and the detections CSV (with its times) equal the
    plain CLI's bytes."""
    obspy = pytest.importorskip("obspy")
    rng = np.random.default_rng(14)
    T, C, K = 6, 3, 32
    L = [40000, 38000, 41000]
    templates = rng.standard_normal((T, C, K)).astype(np.float32)
    data = [rng.standard_normal(n).astype(np.float32) for n in L]
    starts = [0.0, 1.5, 0.75]  # seconds after 2024-03-01 at 100 Hz: offsets 0, 150, 75
    for t, at in enumerate([5000, 12000, 20000, 26000, 33000]):
        for c in range(C):
            s = at - int(round(starts[c] * 100))
            data[c][s:s + K] += 4 * templates[t, c]

    def trace(c, first, end, shift=0):
        tr = obspy.Trace(data=data[c][first:end])
        tr.stats.network, tr.stats.station, tr.stats.channel = "XX", f"ST{c}", "HHZ"
        tr.stats.sampling_rate = 100.0
        tr.stats.starttime = (obspy.UTCDateTime("2024-03-01T00:00:00") + starts[c] +
                              (first + shift) / 100.0)
        return tr

    pieces = {"c0a.sac": (trace(0, 0, 14000), "<"),
              "c0b.sac": (trace(0, 13960, 28000), ">"),  # its first 40 samples overlap c0a's
              "c0c.sac": (trace(0, 28000, 40000, 25), "<"),  # 25 samples after c0b's end
              "c1.sac": (trace(1, 0, 38000), ">")}
    for name, (tr, order) in pieces.items():
        tr.write(str(tmp_path / name), format="SAC", byteorder=order)
    trace(2, 0, 41000).write(str(tmp_path / "c2.mseed"), format="MSEED", reclen=512)
    np.save(tmp_path / "templates.npy", templates)
    spec = ",".join(str(tmp_path / n) for n in ["c2.mseed", "c0c.sac", "c0a.sac", "c1.sac",
                                                 "c0b.sac"])
    args = ["mfilter", tmp_path / "templates.npy", spec, "--device", "cpu", "--precision",
            "single", "--normalize", "full", "--detect", "--threshold", "2.5",
            "--min-separation", "100"]
    csv = assert_ranks_equal_plain(tmp_path, args, 6)
    assert b"2024-03-01T00:00:" in csv, csv
    verbose = subprocess.run([*shlex.split(MPIEXEC), "-n", "2", CLI, "-v",
                              *map(str, args)], capture_output=True, text=True, timeout=120)
    assert verbose.returncode == 0, verbose.stderr
    assert f"each rank reads its windows of {spec}" in verbose.stderr, verbose.stderr


@pytest.mark.filterwarnings("ignore:File will be written with more than one different encodings")
def test_ranks_reading_miniseed_by_windows_equal_the_plain_cli(tmp_path):
    """MiniSEED written by ObsPy (Steim-2 integers and float32 records, 512-byte records, a
    channel with a gap and an overlap, one channel continued in a second file): each rank decodes
    only the records of its windows; correlation and detections equal the plain CLI's bytes."""
    obspy = pytest.importorskip("obspy")
    rng = np.random.default_rng(15)
    T, K = 5, 32
    t0 = obspy.UTCDateTime("2024-03-01T00:00:00")
    templates = rng.standard_normal((T, 3, K)).astype(np.float32)

    def trace(sta, start, data):
        tr = obspy.Trace(data=data)
        tr.stats.network, tr.stats.station, tr.stats.channel = "XX", sta, "HHZ"
        tr.stats.sampling_rate = 100.0
        tr.stats.starttime = t0 + start
        return tr

    ints = lambda n: np.cumsum(rng.integers(-300, 300, n)).astype(np.int32)  # noqa: E731
    one = obspy.Stream([trace("A", 0.0, ints(20000)), trace("A", 200.5, ints(9000)),
                        trace("B", 0.3, rng.standard_normal(30000).astype(np.float32))])
    two = obspy.Stream([trace("A", 290.2, ints(8000)),
                        trace("C", 1.0, ints(29000))])
    one.write(str(tmp_path / "one.mseed"), format="MSEED", reclen=512)
    two.write(str(tmp_path / "two.mseed"), format="MSEED", reclen=512)
    np.save(tmp_path / "templates.npy", templates)
    spec = f"{tmp_path / 'two.mseed'},{tmp_path / 'one.mseed'}"
    args = ["mfilter", tmp_path / "templates.npy", spec, "--device", "cpu", "--precision",
            "single", "--normalize", "full", "--detect", "--threshold", "1.2",
            "--min-separation", "500"]
    assert_ranks_equal_plain(tmp_path, args, 2)
