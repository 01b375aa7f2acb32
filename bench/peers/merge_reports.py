#!/usr/bin/env python3
"""Merges several halfscope benchmark reports of one benchmark, run on one device in one session,
into one file (the cases concatenated; the first report's header kept).

    python3 bench/peers/merge_reports.py OUT.json IN1.json IN2.json ...
"""
import json
import sys
from pathlib import Path


def main():
    out, *inputs = sys.argv[1:]
    reports = [json.loads(Path(p).read_text()) for p in inputs]
    merged = reports[0]
    for r in reports[1:]:
        if r["benchmark"] != merged["benchmark"] or r["device"]["name"] != merged["device"]["name"]:
            sys.exit(f"merge_reports: {r['benchmark']} on {r['device']['name']} does not match "
                     f"{merged['benchmark']} on {merged['device']['name']}")
        merged["cases"] += r["cases"]
    Path(out).write_text(json.dumps(merged, indent=2) + "\n")


if __name__ == "__main__":
    main()
