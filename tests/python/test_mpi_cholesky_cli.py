"""`HALFSCOPE_MPIEXEC -np N halfscope cholesky` against the one-process command.

The MPI factorization applies the same kernels to the same operands in the same order as the
one-process CPU factorization (docs/cholesky.md), so L.npy must be identical byte for byte, for a
policy mixing variants and for every grid shape, whether the ranks write their tiles' rows into
it or rank 0 gathers L; the report must give the same tile counts plus the ranks, the grid and
the bytes moved. Both runs get OPENBLAS_NUM_THREADS=1: OpenBLAS's
multithreaded POTRF blocks differently from its single-threaded one, so even the one-process
factor changes bits with the BLAS thread count, and mpirun binds ranks to fewer cores than a
process started alone sees. Bad input exits 2 with one message (printed once, by
rank 0), and an existing output is left untouched when the run fails."""
import json
import os
import shlex
import subprocess

import pytest

np = pytest.importorskip("numpy")
from ao_helpers import CLI, run  # noqa: E402

MPIEXEC = os.environ.get("HALFSCOPE_MPIEXEC")
pytestmark = pytest.mark.skipif(
    not CLI or not MPIEXEC, reason="HALFSCOPE_CLI / HALFSCOPE_MPIEXEC unset (run through ctest)")

N, TILE = 300, 64  # 5 x 5 tiles, the last one short
POLICY = "band:DP=1,SP=2,HP1=3,BF16=rest"  # every off-diagonal distance class present


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENBLAS_NUM_THREADS", "1")
        yield


def mpirun(ranks, *args):
    return subprocess.run([*shlex.split(MPIEXEC), "-np", str(ranks), CLI, *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def spd(n, seed=3):
    """KMS covariance (decaying with |i - j|) plus R R^T / n: symmetric positive definite."""
    i = np.arange(n)
    r = np.random.default_rng(seed).uniform(-1.0, 1.0, (n, n))
    return np.exp(-np.abs(i[:, None] - i[None, :]) / 16.0) + r @ r.T / n


def errors(result):
    """The halfscope error lines (the launcher adds its own lines about the exit status)."""
    return [line for line in result.stderr.splitlines() if line.startswith("halfscope: error:")]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The one-process factor and report of spd(N)."""
    d = tmp_path_factory.mktemp("one")
    np.save(d / "A.npy", spd(N))
    res = run("--device", "cpu", "cholesky", d / "A.npy", "-o", d / "L.npy", "--tile", TILE,
              "--policy", POLICY, "--report", d / "r.json")
    assert res.returncode == 0, res.stderr
    return d, np.load(d / "L.npy"), json.loads((d / "r.json").read_text())


@pytest.mark.parametrize("ranks,grid", [(2, None), (2, "2x1"), (1, "1x1")])
def test_factor_equals_the_one_process_factor(tmp_path, one_process, ranks, grid):
    """Over ranks (and on one rank that names its grid, which takes the rank path) L is the
    one-process factor byte for byte, and the report adds the ranks' figures."""
    d, want, report = one_process
    args = ["cholesky", d / "A.npy", "-o", tmp_path / "L.npy", "--tile", TILE, "--policy", POLICY,
            "--report", tmp_path / "r.json"] + (["--grid", grid] if grid else [])
    res = mpirun(ranks, *args)
    assert res.returncode == 0, res.stderr
    got = np.load(tmp_path / "L.npy")
    assert got.dtype == want.dtype == np.float32
    assert got.tobytes() == want.tobytes()  # bit for bit
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["tiles"] == report["tiles"]
    assert sum(1 for v in r["tiles"].values() if v > 0) == 4  # DP, SP, HP1, BF16
    assert r["ranks"] == ranks
    assert r["grid"] == {"2x1": [2, 1], "1x1": [1, 1], None: [1, 2]}[grid]
    assert r["bytes_moved"] == sum(r["bytes_sent_per_rank"])
    # Several ranks each send panel tiles to the others; one rank sends nothing.
    assert all(b > 0 for b in r["bytes_sent_per_rank"]) == (ranks > 1)
    # The one-process report's fields are all there.
    assert set(report) <= set(r)


@pytest.mark.parametrize("ranks,extra,env", [
    (4, ["--grid", "2x2"], {}),                       # written by the ranks, four of them
    (3, [], {"HALFSCOPE_UNSHARED_RANK": "1"}),        # a rank without the file: gathered
    (2, ["--check"], {}),                             # gathered for the backward error
])
def test_l_written_by_the_ranks_or_gathered_is_the_same(tmp_path, one_process, monkeypatch, ranks,
                                                        extra, env):
    """Every rank writes the rows of its tiles of L into one file (upper triangle zero); with a
    rank that cannot open it (the test hook) L is gathered on rank 0 instead, with one warning,
    and with --check it is gathered for the FP64 backward error: the same bytes each way."""
    d, want, _ = one_process
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "L.npy"
    res = mpirun(ranks, "cholesky", d / "A.npy", "-o", out, "--tile", TILE, "--policy", POLICY,
                 *extra)
    assert res.returncode == 0, res.stderr
    assert np.load(out).tobytes() == want.tobytes()
    assert res.stderr.count("cannot open") == (1 if env else 0), res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L.npy"]


@pytest.mark.parametrize("layout", ["float64", "fortran", "big-endian"])
def test_each_rank_reads_its_tiles_of_any_npy_layout(tmp_path, layout):
    """Every rank reads only its tiles of A (and their mirrors) from the file, a line at a time:
    float64, Fortran-ordered and big-endian files give the one-process factor byte for byte."""
    a = spd(N)
    a = {"float64": a, "fortran": np.asfortranarray(a.astype(np.float32)),
         "big-endian": a.astype(">f4")}[layout]
    np.save(tmp_path / "A.npy", a)
    args = ["cholesky", tmp_path / "A.npy", "--tile", TILE, "--policy", POLICY]
    one = run("--device", "cpu", *args, "-o", tmp_path / "one.npy")
    assert one.returncode == 0, one.stderr
    res = mpirun(3, *args, "-o", tmp_path / "ranks.npy")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "one.npy").read_bytes() == (tmp_path / "ranks.npy").read_bytes()


@pytest.mark.parametrize("entry", ["nan", "asymmetric-late", "int"])
def test_input_errors_are_the_one_process_message(tmp_path, entry):
    """Checked tile by tile on the ranks that own them, a bad entry is named exactly as the
    one-process command names it (the first in its order, over every rank)."""
    a = spd(N)
    if entry == "nan":
        a[250, 10] = np.nan  # tile (3, 0); the mirror (10, 250) stays finite
        a[280, 270] = np.inf  # a later one, on another rank's tile
    elif entry == "asymmetric-late":
        a[299, 100] += 1.0
    else:
        a = (a * 100).astype(np.int32)
    np.save(tmp_path / "A.npy", a)
    out = tmp_path / "L.npy"
    one = run("--device", "cpu", "cholesky", tmp_path / "A.npy", "-o", out, "--tile", TILE)
    res = mpirun(4, "cholesky", tmp_path / "A.npy", "-o", out, "--tile", TILE)
    assert one.returncode == res.returncode == 2, res.stderr
    assert len(errors(res)) == 1 and len(errors(one)) == 1, res.stderr
    assert errors(res)[0].endswith(errors(one)[0].removeprefix("halfscope: error: ")), res.stderr
    assert not out.exists()


def test_bad_input_exits_2_once_and_keeps_the_output(tmp_path):
    a = spd(40)
    a[3, 30] += 1.0  # no longer symmetric
    np.save(tmp_path / "A.npy", a)
    out = tmp_path / "L.npy"
    out.write_bytes(b"an older result")
    res = mpirun(2, "cholesky", tmp_path / "A.npy", "-o", out)
    assert res.returncode == 2, res.stderr
    lines = errors(res)
    assert len(lines) == 1, res.stderr
    assert "A.npy" in lines[0] and "symmetric" in lines[0] and "A(30, 3)" in lines[0], lines[0]
    assert out.read_bytes() == b"an older result"
    # A grid that does not match the rank count: named, before any data is read.
    res = mpirun(2, "cholesky", tmp_path / "A.npy", "-o", out, "--grid", "2x2")
    assert res.returncode == 2 and len(errors(res)) == 1, res.stderr
    assert "--grid 2x2" in errors(res)[0] and "2 MPI rank" in errors(res)[0]
    # GPU ranks on a host without a device: refused by name, not run on the CPU.
    if cuda_devices() == 0:
        res = mpirun(2, "--device", "cuda", "cholesky", tmp_path / "A.npy", "-o", out)
        assert res.returncode == 2 and len(errors(res)) == 1, res.stderr
        assert "--device cuda" in errors(res)[0] and "expected a CUDA device" in errors(res)[0]
        assert out.read_bytes() == b"an older result"


def cuda_devices():
    """How many CUDA devices halfscope itself can use (`halfscope info --json`)."""
    res = run("info", "--json")
    assert res.returncode == 0, res.stderr
    return len(json.loads(res.stdout)["devices"])


@pytest.mark.parametrize("ranks,grid", [(2, "1x2"), (4, "2x2")])
def test_gpu_ranks_factor_within_fp32_accuracy(tmp_path, ranks, grid):
    """`--device cuda` over ranks: each rank factors its tiles on a GPU of its host (ranks share
    them round-robin); L within the FP32 bounds of NumPy's FP64 factor, as the one-process GPU
    run (tests/python/test_cholesky_cli.py), and the report names each rank's device."""
    count = cuda_devices()
    if count == 0:
        pytest.skip("no CUDA device")
    n = 2000
    g = np.random.default_rng(9).standard_normal((n, n // 4))
    a = np.eye(n) + g @ g.T / n  # kappa ~ 3: every bound below is about the arithmetic
    np.save(tmp_path / "A.npy", a)
    out, report = tmp_path / "L.npy", tmp_path / "r.json"
    res = mpirun(ranks, "--device", "cuda", "cholesky", tmp_path / "A.npy", "-o", out, "--tile",
                 128, "--grid", grid, "--check", "--report", report)
    assert res.returncode == 0, res.stderr
    L = np.load(out).astype(np.float64)
    assert not np.triu(L, 1).any()
    a32 = a.astype(np.float32).astype(np.float64)
    u32 = 2.0 ** -24
    backward = np.linalg.norm(L @ L.T - a32) / np.linalg.norm(a32)
    assert backward <= 2 * (n + 1) * u32 * np.trace(a32) / np.linalg.norm(a32), backward
    ref = np.linalg.cholesky(a)
    assert np.linalg.norm(L - ref) / np.linalg.norm(ref) <= 1e-4
    r = json.loads(report.read_text())
    assert r["device"] == "cuda", r
    # One host: rank k is the host's rank k, on device k mod count.
    assert r["device_per_rank"] == [k % count for k in range(ranks)], r
    assert r["ranks"] == ranks and r["bytes_moved"] > 0, r


@pytest.mark.parametrize("args,words", [
    (["--devices", "0,1"], ["--devices 0,1", "expected one process", "found 2 MPI ranks"]),
    (["--device-memory", "1G"], ["--device-memory 1G", "expected one process", "2 MPI ranks"]),
    (["--device-memory", "1.5G"], ["--device-memory", "K, M, G or T", "found '1.5G'"]),
])
def test_gpu_options_refused_over_ranks(tmp_path, args, words):
    """--devices / --device-memory are one-process options (GPU ranks take --device cuda), so
    every rank refuses them alike (one message, exit 2) before reading the input."""
    np.save(tmp_path / "A.npy", spd(40))
    out = tmp_path / "L.npy"
    out.write_bytes(b"an older result")
    res = mpirun(2, "cholesky", tmp_path / "A.npy", "-o", out, *args)
    assert res.returncode == 2 and len(errors(res)) == 1, res.stderr
    for w in words:
        assert w in errors(res)[0], errors(res)[0]
    assert out.read_bytes() == b"an older result"


def test_a_matrix_that_is_not_positive_definite_fails_everywhere(tmp_path):
    a = spd(N)
    a[200, 200] = -1.0  # tile (3, 3)
    np.save(tmp_path / "A.npy", a)
    out = tmp_path / "L.npy"
    out.write_bytes(b"an older result")
    res = mpirun(2, "cholesky", tmp_path / "A.npy", "-o", out, "--tile", TILE)
    one = run("--device", "cpu", "cholesky", tmp_path / "A.npy", "-o", out, "--tile", TILE)
    assert res.returncode == one.returncode != 0, res.stderr
    lines = errors(res)
    assert len(lines) == 1, res.stderr
    # The one-process message, after the rank that met it.
    assert len(errors(one)) == 1, one.stderr
    assert lines[0].endswith(errors(one)[0].removeprefix("halfscope: error: ")), lines[0]
    assert "tile (3, 3)" in lines[0]
    assert out.read_bytes() == b"an older result"
