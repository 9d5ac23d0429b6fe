#!/usr/bin/env python3
"""Rolling least squares on the CPU: cuqr.rolling_lstsq against statsmodels' RollingOLS
and polars-ols' rolling_ols (docs/performance.md#rolling-least-squares).

    .venv/bin/pip install numpy statsmodels polars polars-ols ./python
    .venv/bin/python scripts/rolling_cpu.py [--nobs 2000] [--k 5] [--window 252] [--series 100]

One series of nobs × k (an intercept and k − 1 standard normal regressors) with a window of
`window` observations, then `series` series sharing the design. Each library's median
wall-clock time over repeated calls (statsmodels loops over the series; polars-ols runs one
expression over a long frame grouped by series, `.over("s")`), the agreement with
statsmodels, and a markdown table.
"""

import argparse
import platform
import time

import numpy as np


def median_time(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def statsmodels_fn(y, X, w):
    from statsmodels.regression.rolling import RollingOLS

    def run():
        if y.ndim == 1:
            return np.asarray(RollingOLS(y, X, window=w).fit(params_only=True).params)
        return np.stack(
            [np.asarray(RollingOLS(y[:, s], X, window=w).fit(params_only=True).params)
             for s in range(y.shape[1])],
            axis=1,
        )

    return run


def polars_fn(y, X, w):
    import polars as pl
    import polars_ols  # noqa: F401  (registers the .least_squares namespace)

    T, k = X.shape
    Y = y.reshape(T, -1)
    S = Y.shape[1]
    cols = {f"x{j}": np.tile(X[:, j], S) for j in range(1, k)}
    df = pl.DataFrame({"s": np.repeat(np.arange(S), T), "y": Y.T.reshape(-1), **cols})
    feats = [pl.col(f"x{j}") for j in range(1, k)]
    expr = pl.col("y").least_squares.rolling_ols(
        *feats, window_size=w, min_periods=w, add_intercept=True, mode="coefficients"
    )
    if S > 1:
        expr = expr.over("s")

    def run():
        out = df.select(expr.alias("c")).unnest("c")
        # polars-ols puts the intercept last: reorder as [const, x1, ..]
        names = ["const"] + [f"x{j}" for j in range(1, k)]
        p = out.select(names).to_numpy().reshape(S, T, k).transpose(1, 0, 2)
        return p[:, 0, :] if y.ndim == 1 else p

    return run


def rel_diff(a, b):
    ok = ~np.isnan(b)
    return float(np.linalg.norm(a[ok] - b[ok]) / np.linalg.norm(b[ok]))


def case(y, X, w, reps):
    import cuqr

    rows = []
    ref = statsmodels_fn(y, X, w)()
    t_sm = median_time(statsmodels_fn(y, X, w), reps["statsmodels"])
    rows.append(("statsmodels RollingOLS", t_sm, 0.0))
    try:
        pf = polars_fn(y, X, w)
        p = pf()
        # polars-ols fills the first window - 1 rows differently: compare full windows
        diff = rel_diff(p[w - 1 :], ref[w - 1 :])
        rows.append(("polars-ols rolling_ols", median_time(pf, reps["polars"]), diff))
    except ImportError as e:
        rows.append((f"polars-ols: {e}", float("nan"), float("nan")))
    cf = lambda: cuqr.rolling_lstsq(y, X, w)  # noqa: E731
    rows.append(("cuqr rolling_lstsq", median_time(cf, reps["cuqr"]), rel_diff(cf(), ref)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nobs", type=int, default=2000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--window", type=int, default=252)
    ap.add_argument("--series", type=int, default=100)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    T, k, w, S = a.nobs, a.k, a.window, a.series
    X = np.column_stack([np.ones(T), rng.standard_normal((T, k - 1))])
    beta = rng.standard_normal((k, S))
    Y = X @ beta + 0.5 * rng.standard_normal((T, S))
    import cuqr

    print(f"{platform.processor() or platform.machine()}, {cuqr.threads()} threads for cuqr\n")
    for label, y, reps in [
        (f"1 series, {T} × {k}, window {w}", Y[:, 0],
         {"statsmodels": 5, "polars": 20, "cuqr": 50}),
        (f"{S} series, {T} × {k} shared design, window {w}", Y,
         {"statsmodels": 1, "polars": 5, "cuqr": 10}),
    ]:
        rows = case(y, X, w, reps)
        t_sm = rows[0][1]
        print(f"**{label}**\n")
        print("| library | time (ms) | statsmodels / this | rel. diff. from statsmodels |")
        print("|---|---:|---:|---:|")
        for name, t, d in rows:
            print(f"| {name} | {t * 1e3:.2f} | {t_sm / t:.1f} | {d:.1e} |")
        print()


if __name__ == "__main__":
    main()
