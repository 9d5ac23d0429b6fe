#!/usr/bin/env python3
"""Side-by-side markdown tables from the CSVs of `cuqr bench cpu --csv` and
`scripts/scipy_qr_bench.py --csv` (the same shapes and thread counts):

    python3 scripts/cpu_vs_scipy.py CUQR.csv SCIPY.csv

Per shape and thread count, one row per operation and p: cuqr's time for each state kind
next to SciPy's in the matching mode (full <-> full, thin <-> economic; factorize also
<-> NumPy, and the R-only kind <-> mode r), "x" = SciPy / cuqr (above 1: cuqr faster), and
cuqr's speed-up over refactorising with faer ("x refactor", f64 only).
"""

import csv
import sys


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main(cuqr_csv, scipy_csv):
    cu = [r for r in load(cuqr_csv) if r["precision"] == "f64"]
    sp = load(scipy_csv)
    cu_t = {(r["m"], r["n"], r["threads"], r["kind"], r["op"], r["p"]): r for r in cu}
    sp_t = {(r["m"], r["n"], r["threads"], r["library"], r["mode"], r["op"], r["p"]): float(r["ms"]) for r in sp}
    keys = []
    for r in cu:
        k = (r["m"], r["n"], r["threads"])
        if k not in keys:
            keys.append(k)
    for m, n, t in keys:
        print(f"\n**{m}×{n}, {t} thread{'s' if t != '1' else ''}** (f64, ms; x = SciPy / cuqr)\n")
        print("| op | p | full | SciPy full | x | thin | SciPy economic | x | R only | SciPy r | x | x refactor (full / thin / none) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        ops = []
        for r in cu:
            if (r["m"], r["n"], r["threads"]) == (m, n, t) and (r["op"], r["p"]) not in ops:
                ops.append((r["op"], r["p"]))
        for op, p in ops:
            cells = [op, p]
            xr = []
            for kind, mode in (("full", "full"), ("thin", "economic"), ("none", "r")):
                c = cu_t.get((m, n, t, kind, op, p))
                s = sp_t.get((m, n, t, "scipy", mode, op, p))
                if op == "factorize":
                    nmode = {"full": "complete", "economic": "reduced", "r": "r"}[mode]
                    s2 = sp_t.get((m, n, t, "numpy", nmode, op, p))
                    if s is not None and s2 is not None:
                        s = min(s, s2)
                cm = float(c["cuqr_ms"]) if c else None
                cells.append(f"{cm:.3f}" if cm is not None else "—")
                cells.append(f"{s:.3f}" if s is not None else "—")
                cells.append(f"{s / cm:.2f}" if (s is not None and cm) else "—")
                xr.append(f"{float(c['x_refactor']):.1f}" if c and c["x_refactor"] else "—")
            cells.append(" / ".join(xr))
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
