"""What the `halfscope ao` / `simulate ao-system` CLI tests share: running the CLI, the exit-2
check, the von Karman constants and the valid-subaperture geometry, written once here from the
model's definitions (never taken from halfscope). pytest puts this folder on sys.path (the tests
are rootdir-less modules), so the test files import it directly."""
import math
import os
import signal
import subprocess

CLI = os.environ.get("HALFSCOPE_CLI")


def run(*args, cwd=None, timeout=600, file_limit=None):
    """Runs the CLI with `args` (str()-ed) and returns the CompletedProcess. With `file_limit`
    (bytes) a write beyond that size fails with EFBIG (SIGXFSZ ignored, so the writer sees the
    error instead of the process being killed; POSIX only)."""

    def limit():
        import resource  # imported here: only the tests that pass file_limit need it

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, preexec_fn=limit if file_limit else None)


def assert_bad_input(result, *words):
    """Exit 2 with a one-line message that contains every one of `words`."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for w in words:
        assert w in lines[0], lines[0]


# The von Karman constants: D(r) = K1 (L0/r0)^(5/3) G(x), x = 2 pi r / L0, with
# G(x) = G0 - x^nu K_nu(x), nu = 5/6, G0 = Gamma(5/6) 2^(-1/6) (the value of x^nu K_nu at 0).
NU = 5.0 / 6.0
K1 = 2 * math.gamma(11 / 6) * 2 ** (-5 / 6) * math.pi ** (-8 / 3) * (24 / 5 * math.gamma(6 / 5)) ** (5 / 6)
G0 = math.gamma(NU) * 2 ** (-1 / 6)


def valid_centres(diameter, obstruction, nssp):
    """Subaperture centres (x, y) in metres, slope order: pitch d = D / Nssp grid centred on the
    pupil, valid when (D obs / 2)^2 <= r^2 < (D / 2)^2, row by row (y outer, x inner)."""
    import numpy as np  # the callers importorskip NumPy first

    d = diameter / nssp
    c = (np.arange(nssp) + 0.5) * d - diameter / 2
    y, x = np.meshgrid(c, c, indexing="ij")
    r2 = x ** 2 + y ** 2
    keep = ((diameter * obstruction / 2) ** 2 <= r2) & (r2 < (diameter / 2) ** 2)
    return np.stack([x[keep], y[keep]], axis=1)
