#!/usr/bin/env python3
"""The tile Cholesky's panel solve X L^T = A (rows x nb, FP32) done four ways, timed apart from
the factorization (docs/cholesky.md, "Known limits"): one cuBLAS strsm (what the GPU
factorization calls), the same in 8 row chunks on 8 streams, L^-1 by a strsm on I then one GEMM,
and blocked inverses of 128 / 256 (GEMM updates between them); FP32 with TF32 off (PyTorch).
Errors ||X - X_64|| / ||X_64|| against an FP64 solve. Also one 1024^3 GEMM and a batch of 96
(the diagonal tiles' update as GEMMs). Writes the benchmark JSON schema of bench/README.md.

    python3 bench/peers/panel_trsm_bench.py --json OUT.json
"""
import argparse
import datetime
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from peer_common import cuda_time, write_report  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--nb", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev, nb = torch.device("cuda"), args.nb
    g = torch.Generator(device=dev).manual_seed(1)
    m = torch.randn(nb, nb, device=dev, dtype=torch.float64, generator=g)
    spd = m @ m.T / nb + 0.05 * torch.eye(nb, device=dev, dtype=torch.float64)
    l64 = torch.linalg.cholesky(spd)
    lf = l64.float()
    eye = torch.eye(nb, device=dev)
    cases = []

    def inverse_gemm(a):
        return a @ torch.linalg.solve_triangular(lf, eye, upper=False).T

    def blocked(a, b):
        x = a.clone()
        for c0 in range(0, nb, b):
            inv = torch.linalg.solve_triangular(lf[c0:c0 + b, c0:c0 + b], eye[:b, :b], upper=False)
            x[:, c0:c0 + b] = x[:, c0:c0 + b] @ inv.T
            if c0 + b < nb:
                x[:, c0 + b:] -= x[:, c0:c0 + b] @ lf[c0 + b:, c0:c0 + b].T
        return x

    streams = [torch.cuda.Stream() for _ in range(8)]

    def chunked(a):
        x, ch, cur = torch.empty_like(a), (a.shape[0] + 7) // 8, torch.cuda.current_stream()
        for i, st in enumerate(streams):
            st.wait_stream(cur)
            with torch.cuda.stream(st):
                x[i * ch:(i + 1) * ch] = torch.linalg.solve_triangular(
                    lf.T, a[i * ch:(i + 1) * ch], upper=True, left=False)
        for st in streams:
            cur.wait_stream(st)
        return x

    for rows in (97280, 49152, 8192):
        a = torch.randn(rows, nb, device=dev, generator=g)
        ref = torch.linalg.solve_triangular(l64.T, a.double(), upper=True, left=False)
        ways = {"strsm": lambda: torch.linalg.solve_triangular(lf.T, a, upper=True, left=False),
                "strsm-8-streams": lambda: chunked(a), "inverse+gemm": lambda: inverse_gemm(a),
                "blocked-inverse-128": lambda: blocked(a, 128),
                "blocked-inverse-256": lambda: blocked(a, 256)}
        for name, fn in ways.items():
            stats = cuda_time(fn, args.repeats, torch, 1e4)
            err = float((fn().double() - ref).norm() / ref.norm())
            cases.append({"implementation": "pytorch", "method": name, "precision": "single",
                          "params": {"rows": rows, "nb": nb}, **stats, "error": {"relative": err}})
            print(f"{rows} {name}: {stats['median_ms']:.3f} ms, error {err:.2e}", flush=True)
    c, b = torch.randn(nb, nb, device=dev), torch.randn(nb, nb, device=dev)
    cb, bb = torch.randn(96, nb, nb, device=dev), torch.randn(96, nb, nb, device=dev)
    gemms = {"gemm 1 tile": lambda: torch.addmm(c, b, b.T, alpha=-1),
             "gemm 96 tiles": lambda: torch.baddbmm(cb, bb, bb.transpose(1, 2), alpha=-1)}
    for name, fn in gemms.items():
        stats = cuda_time(fn, args.repeats, torch, 1e4)
        cases.append({"implementation": "pytorch", "method": name, "precision": "single",
                      "params": {"nb": nb}, **stats})
        print(f"{name}: {stats['median_ms']:.3f} ms", flush=True)
    report = {"benchmark": "panel-trsm", "date": datetime.date.today().isoformat(),
              "device": {"name": torch.cuda.get_device_name()}, "cases": cases}
    write_report(pathlib.Path(args.json), report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
