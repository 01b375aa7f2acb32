"""`halfscope ao reconstructor` under an MPI launcher against the plain CLI on the same system.

Over ranks, Cmm is generated tile by tile where it is owned (the same FP32 value per element),
factored by the MPI tile Cholesky (the one-process factor bit for bit) and each rank solves its
block of R's rows with the factor's panels broadcast to it, applying the same kernels to each row
in the same order as the one-process solve, and writes its rows into one file: the file written
under mpirun is compared byte for byte with the plain CLI's (docs/scaling.md). Both runs use a
single-threaded OpenBLAS: its own thread count changes the last bits of the one-process R
(measured on preset mid), and a launcher binding each rank to one core gives the ranks one thread.
On x86-64 both also pin OpenBLAS's Sandybridge kernels: its FMA kernels (Haswell, Zen) pick edge
kernels by the shape of a call, so the ranks' row blocks of other heights round differently from
the one-process solve (seen on an AMD EPYC: R differed by up to 1.7e-5, all five comparisons
failed), while with one kernel per element the bytes show that halfscope applies the same
operations in the same order.
Failures end every rank with one message and no file.
"""
import json
import os
import platform
import re
import shlex
import subprocess

import pytest

np = pytest.importorskip("numpy")
CLI = os.environ.get("HALFSCOPE_CLI")
MPIEXEC = os.environ.get("HALFSCOPE_MPIEXEC")
pytestmark = pytest.mark.skipif(
    not CLI or not MPIEXEC,
    reason="HALFSCOPE_CLI and HALFSCOPE_MPIEXEC (the MPI launcher with its flags) are not set")

SYSTEM, N, M = "preset:check", 912, 152


# One OpenBLAS kernel per element whatever the call's shape (module docstring).
BLAS_KERNELS = ({"OPENBLAS_CORETYPE": "Sandybridge"}
                if platform.machine() in ("x86_64", "AMD64") else {})


def run(args, ranks=None, timeout=120, env=None):
    launcher = shlex.split(MPIEXEC) + ["-n", str(ranks)] if ranks else []
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **BLAS_KERNELS, **(env or {})}
    return subprocess.run(launcher + [CLI, "-q", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("ranks,grid,options", [
    (2, None, ["--policy", "uniform:SP", "--solve-policy", "uniform:SP"]),
    (2, None, ["--policy", "band:SP=1,HP1=rest", "--solve-policy", "uniform:HP1"]),
    (2, None, ["--tiptilt", "direct"]),
    (4, "4x1", ["--policy", "band:SP=1,HP1=rest", "--solve-policy", "uniform:HP1"]),
    # One rank that names a grid takes the rank path (how it is measured against one process).
    (1, "1x1", ["--policy", "uniform:SP", "--solve-policy", "uniform:SP"]),
])
def test_reconstructor_equals_the_plain_cli(tmp_path, ranks, grid, options):
    common = ["--device", "cpu", "ao", "reconstructor", SYSTEM, "--tile", 100, *options]
    plain = run([*common, "-o", tmp_path / "plain.npy"])
    assert plain.returncode == 0, plain.stderr
    extra = ["--grid", grid] if grid else []
    over = run([*common, *extra, "-o", tmp_path / "ranks.npy"], ranks=ranks)
    assert over.returncode == 0, over.stderr
    want, got = np.load(tmp_path / "plain.npy"), np.load(tmp_path / "ranks.npy")
    assert got.dtype == np.float32 and got.shape == (M, N)
    assert np.isfinite(got).all()
    assert np.array_equal(got, want), f"max |difference| {np.abs(got - want).max()}"
    assert (tmp_path / "plain.npy").read_bytes() == (tmp_path / "ranks.npy").read_bytes()
    # The report once (rank 0), with the ranks, the grid and the traffic.
    expect_grid = grid.replace("x", " x ") if grid else "1 x 2"
    assert over.stdout.count("R: 152 x 912 float32") == 1, over.stdout
    assert f"MPI: {ranks} ranks, grid {expect_grid}" in over.stdout, over.stdout
    # Everything but the timings and the MPI line is the plain report.
    assert report(over.stdout) == report(plain.stdout)


def test_ranks_without_a_shared_file_system_gather_r(tmp_path):
    """Every rank writes its own rows of R into rank 0's file; a rank that cannot open it (the test
    hook HALFSCOPE_UNSHARED_RANK pretends so) makes the write gather R on rank 0 instead: the same
    bytes as the plain CLI either way, and one warning."""
    common = ["--device", "cpu", "ao", "reconstructor", SYSTEM, "--tile", 100]
    plain = run([*common, "-o", tmp_path / "plain.npy"])
    assert plain.returncode == 0, plain.stderr
    over = run([*common, "-o", tmp_path / "ranks.npy"], ranks=3,
               env={"HALFSCOPE_UNSHARED_RANK": "2"})
    assert over.returncode == 0, over.stderr
    assert over.stderr.count("1 rank(s) cannot open") == 1, over.stderr
    assert (tmp_path / "plain.npy").read_bytes() == (tmp_path / "ranks.npy").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.npy", "ranks.npy"]


def report(text):
    """The lines of a report that do not depend on the run: all but the timings and MPI's line."""
    return [line for line in text.splitlines() if not line.startswith(("times:", "MPI:"))]


def test_evaluation_on_rank_zero_equals_the_plain_cli(tmp_path):
    """--evaluate under mpirun scores the gathered R on rank 0: the printed tomographic errors and
    Strehl ratios are those of the plain CLI (the same R, the same FP64 evaluation), once."""
    common = ["--device", "cpu", "ao", "reconstructor", SYSTEM, "--tile", 100, "--evaluate"]
    plain = run([*common, "-o", tmp_path / "plain.npy"])
    assert plain.returncode == 0, plain.stderr
    over = run([*common, "-o", tmp_path / "ranks.npy"], ranks=2)
    assert over.returncode == 0, over.stderr
    assert over.stdout.count("evaluation at") == 1, over.stdout
    assert report(over.stdout) == report(plain.stdout)


@pytest.mark.parametrize("args,message", [
    (["--grid", "3x1"], "does not match the 2 MPI rank"),
    (["--policy", "uniform:XX"], "XX"),
    # --devices is the one-process list; GPU ranks take --device cuda.
    (["--devices", "0,1"], "--devices 0,1: expected one process"),
])
def test_errors_end_every_rank_once_and_write_nothing(tmp_path, args, message):
    out = tmp_path / "R.npy"
    out.write_bytes(b"older")
    res = run(["ao", "reconstructor", SYSTEM, "-o", out, *args], ranks=2, timeout=60)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert res.stderr.count("halfscope: error:") == 1, res.stderr
    assert out.read_bytes() == b"older"


def cuda_devices():
    """How many CUDA devices halfscope itself can use (`halfscope info --json`)."""
    res = run(["info", "--json"])
    assert res.returncode == 0, res.stderr
    return len(json.loads(res.stdout)["devices"])


def test_gpu_ranks_refused_without_a_gpu(tmp_path):
    """`--device cuda` over ranks on a host without a usable GPU: every rank refuses alike."""
    if cuda_devices() > 0:
        pytest.skip("this host has a CUDA device")
    out = tmp_path / "R.npy"
    out.write_bytes(b"older")
    res = run(["--device", "cuda", "ao", "reconstructor", SYSTEM, "-o", out], ranks=2, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "no usable CUDA device" in res.stderr
    assert res.stderr.count("halfscope: error:") == 1, res.stderr
    assert out.read_bytes() == b"older"


def evaluation(text):
    """(this R's OTF Strehl, the FP64 R's) from an --evaluate report."""
    found = dict(re.findall(r"^  (this R|FP64 R) .* OTF ([0-9.]+)", text, re.M))
    return float(found["this R"]), float(found["FP64 R"])


@pytest.mark.parametrize("ranks,options,strehl_tolerance", [
    (2, ["--policy", "uniform:SP", "--solve-policy", "uniform:SP"], 1e-4),
    (4, ["--policy", "band:SP=1,HP1=rest", "--solve-policy", "uniform:HP1"], 0.01),
])
def test_gpu_ranks_match_the_one_process_gpu_run(tmp_path, ranks, options, strehl_tolerance):
    """`--device cuda` over ranks (each factors and solves on a GPU of its host, ranks sharing
    them round-robin): R's Strehl ratio within the precision's tolerance of the FP64 R's, as the
    one-process GPU run's (study 002 Fig. 5: 1e-4 in FP32, 0.01 for the mixed policy), the same
    factor and solve tile tables, and each rank's device in the report."""
    count = cuda_devices()
    if count == 0:
        pytest.skip("no CUDA device")
    common = ["--device", "cuda", "ao", "reconstructor", SYSTEM, "--tile", 100, "--evaluate",
              *options]
    plain = run([*common, "-o", tmp_path / "plain.npy"])
    assert plain.returncode == 0, plain.stderr
    over = run([*common, "-o", tmp_path / "ranks.npy"], ranks=ranks, timeout=300)
    assert over.returncode == 0, over.stderr
    got, want = np.load(tmp_path / "ranks.npy"), np.load(tmp_path / "plain.npy")
    assert got.dtype == np.float32 and got.shape == (M, N) and np.isfinite(got).all()
    for text in (over.stdout, plain.stdout):
        strehl, strehl64 = evaluation(text)
        assert abs(strehl - strehl64) <= strehl_tolerance, text
    assert evaluation(over.stdout)[1] == evaluation(plain.stdout)[1]
    devices = " ".join(str(k % count) for k in range(ranks))
    assert f"GPU ranks: CUDA device of each rank {devices}" in over.stdout, over.stdout
    # The policies, tile tables and tip-tilt lines are the one-process GPU run's.
    shown = [line for line in report(over.stdout) if not line.startswith(("GPU ranks", "  "))]
    assert shown == [line for line in report(plain.stdout) if not line.startswith("  ")]
