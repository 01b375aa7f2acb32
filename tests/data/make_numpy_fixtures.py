#!/usr/bin/env python3
"""Writes the NumPy-made fixtures that tests/io/test_npy.cpp and test_npz.cpp read.

NumPy, not halfscope, writes every file here, so the C++ tests check the reader against an
independent writer. expected.csv describes each array without NumPy: its dtype name, shape
("2x3"; "-" for 0-d), whether the file is Fortran-ordered, and the element bytes in little-endian
C order as hex (exact for NaN, -0.0 and extreme integers alike).

Run from anywhere: python3 tests/data/make_numpy_fixtures.py  (rewrites tests/data/numpy/).
"""
import pathlib

import numpy as np
from numpy.lib import format as npformat

OUT = pathlib.Path(__file__).resolve().parent / "numpy"

FLOATS = ["f2", "f4", "f8"]
INTS = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]


def values(code):
    """A 2x3 array exercising the edges of each dtype."""
    dt = np.dtype(code)
    if dt.kind == "f":
        return np.array([[-1.5, 1 / 3, 65504.0], [-0.0, np.inf, np.nan]], dtype=dt)
    info = np.iinfo(dt)
    if dt.kind == "i":
        return np.array([[info.min, -1, 0], [1, 123, info.max]], dtype=dt)
    return np.array([[0, 1, 123], [info.max // 2 + 1, info.max - 1, info.max]], dtype=dt)


def shape_text(shape):
    return "x".join(str(n) for n in shape) if shape else "-"


def row(file, member, a, fortran):
    le = a.astype(a.dtype.newbyteorder("<"))
    return ",".join([file, member, le.dtype.name, shape_text(a.shape), str(int(fortran)),
                     le.tobytes(order="C").hex()])


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    rows = []

    def save(file, a, version=None):
        with open(OUT / file, "wb") as f:
            npformat.write_array(f, a, version=version)
        fortran = a.flags.f_contiguous and not a.flags.c_contiguous
        rows.append(row(file, "", a, fortran))

    for code in FLOATS + INTS:
        if np.dtype(code).itemsize == 1:
            save(f"{code}.npy", values(code))
        else:
            save(f"{code}_le.npy", values(code).astype("<" + code))
            save(f"{code}_be.npy", values(code).astype(">" + code))
    save("f8_fortran.npy", np.asfortranarray(np.arange(12.0).reshape(3, 4) * 1.5))
    save("i4_be_fortran.npy", np.asfortranarray((np.arange(12) - 6).reshape(2, 3, 2).astype(">i4")))
    save("scalar_f8.npy", np.array(3.5))
    save("empty_f4.npy", np.zeros((0,), "<f4"))
    save("empty_2d_i2.npy", np.zeros((2, 0), "<i2"))
    save("u2_v2.npy", np.arange(5, dtype="<u2") * 1000, version=(2, 0))
    save("f4_v3.npy", np.linspace(-1, 1, 4, dtype="<f4"), version=(3, 0))

    members = {"image": values("f8"), "counts": np.arange(7, dtype="<i2") - 3,
               "scalar": np.array(2.5, dtype="<f4")}
    np.savez(OUT / "savez.npz", **members)
    np.savez_compressed(OUT / "savez_compressed.npz", **members)
    for file in ("savez.npz", "savez_compressed.npz"):
        for name, a in members.items():
            rows.append(row(file, name, a, False))

    (OUT / "expected.csv").write_text(
        "file,member,dtype,shape,fortran_order,data_hex\n" + "\n".join(rows) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
