"""Data for, and the accuracy check of, a `cuqr window` run (docs/performance.md#sliding-window).

    python scripts/window_drift.py gen DIR M N      # DIR/A.npy (M x N, uniform +-1), DIR/b.npy
    cuqr window --a DIR/A.npy --b DIR/b.npy --window W --step P --out OUT ...
    python scripts/window_drift.py check DIR OUT W  # one JSON line

The check takes the final window (rows steps*P .. steps*P + W of A) and reports
e_Q = ||Q1^T Q1 - I||_2 and e_A = ||A - Q1 R||_2 / ||A||_2 (with Q.npy) or
e_gram = ||R^T R - A^T A||_2 / ||A||_2^2 (R only), and ||x - x_ref|| / ||x_ref|| for the last row of
x.npy against NumPy's least squares, with the bound 100 n u kappa (1 + kappa ||r|| / (||A|| ||x||)).
"""
import json
import sys

import numpy as np


def gen(path, m, n):
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, n))
    b = a @ rng.uniform(-1, 1, n) + 0.1 * rng.uniform(-1, 1, m)
    np.save(f"{path}/A.npy", a)
    np.save(f"{path}/b.npy", b)


def check(path, out, w):
    a = np.load(f"{path}/A.npy")
    b = np.load(f"{path}/b.npy")
    s = json.load(open(f"{out}/summary.json"))
    start = s["steps"] * s["step"]
    aw, bw = a[start:start + w], b[start:start + w]
    m, n = aw.shape
    u = 2.0**-53 if s["precision"] == "f64" else 2.0**-24
    x = np.load(f"{out}/x.npy")[-1]
    xr, *_ = np.linalg.lstsq(aw, bw, rcond=None)
    sv = np.linalg.svd(aw, compute_uv=False)
    kappa, anorm = sv[0] / sv[-1], sv[0]
    r = bw - aw @ xr
    bound = 100 * n * u * kappa * (1 + kappa * np.linalg.norm(r) / (anorm * np.linalg.norm(xr)))
    res = {"kind": s["q_policy"], "steps": s["steps"], "m": m, "n": n,
           "e_x": np.linalg.norm(x - xr) / np.linalg.norm(xr), "x_bound": bound,
           "median_step_ms": s["median_step_ms"], "refreshes": s["refreshes"],
           "drift_estimate": s["drift_estimate"], "bar_100mu": 100 * m * u}
    rr = np.load(f"{out}/R.npy")
    try:
        q = np.load(f"{out}/Q.npy")
        res["e_Q"] = np.linalg.norm(q.T @ q - np.eye(q.shape[1]), 2)
        res["e_A"] = np.linalg.norm(aw - q @ rr[: q.shape[1]], 2) / anorm
    except FileNotFoundError:
        res["e_gram"] = np.linalg.norm(rr.T @ rr - aw.T @ aw, 2) / anorm**2
    print(json.dumps(res))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]))
