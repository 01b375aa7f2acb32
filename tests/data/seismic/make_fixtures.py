#!/usr/bin/env python3
"""Writes the matched-filtering fixtures with ObsPy and NumPy (independent of halfscope).

example.mseed  ObsPy's bundled example stream (obspy.read(): BW.RJOB..EH[ZNE], 100 Hz, 3000
               samples, a local earthquake), with samples [1200, 1300) of EHN cut out so the file
               has a gap; float64 samples (MiniSEED FLOAT64 encoding).
example.npy    what ObsPy makes of example.mseed for matched filtering: the channels sorted by id
               (EHE, EHN, EHZ), merged with the gap zero-filled (Stream.merge(fill_value=0)),
               shape (3, 3000) float64. The CLI must read example.mseed into exactly this.
example.json   ids, start time, rate and the gap as ObsPy reports it (Stream.get_gaps()).

The demo uses example.npy as its "real" data. Run: .venv/bin/python tests/data/seismic/make_fixtures.py
"""
import json
import os

import numpy as np
import obspy

HERE = os.path.dirname(os.path.abspath(__file__))
GAP = (1200, 1300)


def main():
    st = obspy.read()
    for tr in st:
        tr.data = np.ascontiguousarray(tr.data, dtype=np.float64)
        tr.stats.pop("response", None)
    ehn = st.select(channel="EHN")[0]
    before, after = ehn.copy(), ehn.copy()
    before.data = ehn.data[: GAP[0]].copy()
    after.data = ehn.data[GAP[1]:].copy()
    after.stats.starttime = ehn.stats.starttime + GAP[1] / ehn.stats.sampling_rate
    gapped = obspy.Stream([t for t in st if t.stats.channel != "EHN"] + [before, after])
    path = os.path.join(HERE, "example.mseed")
    gapped.write(path, format="MSEED", encoding="FLOAT64", reclen=4096)

    back = obspy.read(path)
    gaps = back.get_gaps()
    merged = back.copy().merge(fill_value=0)
    merged.sort(keys=["network", "station", "location", "channel"])
    data = np.stack([tr.data.astype(np.float64) for tr in merged])
    np.save(os.path.join(HERE, "example.npy"), data)
    info = {
        "ids": [tr.id for tr in merged],
        "start": str(merged[0].stats.starttime),
        "sampling_rate": merged[0].stats.sampling_rate,
        "shape": list(data.shape),
        "gaps": [{"id": ".".join(g[:4]), "start": str(g[4]), "end": str(g[5]),
                  "samples": int(g[7])} for g in gaps],
    }
    with open(os.path.join(HERE, "example.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
