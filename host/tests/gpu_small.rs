//! Small states on the GPU (`cuqr::small::GpuSmallState`, docs/algorithms.md#small-states):
//! every step's solution against faer's least-squares solution of the same rows, the
//! kept rows bit for bit, the recursive state against weighted least squares, and refused
//! steps leaving the state as it was. Skipped without a GPU (`CUQR_REQUIRE_GPU=1` fails).
//!
//! Tolerances (docs/algorithms.md#accuracy-measures): with u the unit roundoff, k the steps
//! since the rows were last factorised afresh, τ = 10·(m + n)·u·(1 + k) (k backward-stable
//! steps of O((m + n)·u) each), ΔA = τ·‖A‖_F and Δb = τ·‖b‖: to first order the solution is
//! within 2·((ΔA·‖x‖ + Δb)/σ_n + ΔA·‖r‖/σ_n²) of the exact one and the residual norm within
//! 2·(ΔA·‖x‖ + Δb) (the factor 2 for the f64 reference's own error).

mod common;

use std::sync::Arc;

use cuqr::small::{GpuSmallState, SmallParams};
use cuqr::{DevMat, DevVec, Error, Gpu, GpuScalar, Mat};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;

/// Rows of a rolling problem: x (rows × n, row-major) and y, uniform(−1, 1) never zero.
fn rows(rng: &mut StdRng, count: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    (
        common::random_vec(rng, count * n),
        common::random_vec(rng, count),
    )
}

fn cast<T: GpuScalar>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

/// Checks x and ρ² against the least-squares solution of rows `lo..hi` (weights w_i on
/// the rows when given), k steps after the last fresh factorisation.
#[allow(clippy::too_many_arguments)]
fn check_step<T: GpuScalar>(
    what: &str,
    x: &[f64],
    y: &[f64],
    (lo, hi): (usize, usize),
    weights: Option<&[f64]>,
    n: usize,
    k: usize,
    got_x: &[f64],
    got_rss: f64,
) {
    let m = hi - lo;
    let w = |i: usize| weights.map_or(1.0, |w| w[i - lo].sqrt());
    let a = faer::Mat::<f64>::from_fn(m, n, |i, j| w(lo + i) * x[(lo + i) * n + j]);
    let b = faer::Mat::<f64>::from_fn(m, 1, |i, _| w(lo + i) * y[lo + i]);
    let xr = a.qr().solve_lstsq(&b);
    let r = &b - &a * &xr;
    let (na, nb, nx, nr) = (a.norm_l2(), b.norm_l2(), xr.norm_l2(), r.norm_l2());
    let sigma = *common::singular_values(&a)
        .last()
        .expect("n ≥ 1 singular values");
    let tau = 10.0 * (m + n) as f64 * common::u::<T>() * (1.0 + k as f64);
    let (da, db) = (tau * na, tau * nb);
    let x_tol = 2.0 * ((da * nx + db) / sigma + da * nr / (sigma * sigma));
    let ex = (0..n)
        .map(|j| (got_x[j] - xr[(j, 0)]).powi(2))
        .sum::<f64>()
        .sqrt();
    assert!(
        ex <= x_tol,
        "{what}: rows {lo}..{hi}: ‖x − x_ref‖ = {ex:e} > {x_tol:e} (k = {k})"
    );
    let rho_tol = 2.0 * (da * nx + db);
    let erho = (got_rss.max(0.0).sqrt() - nr).abs();
    assert!(
        erho <= rho_tol,
        "{what}: rows {lo}..{hi}: |ρ − ‖r‖| = {erho:e} > {rho_tol:e}"
    );
}

/// A window of m rows slid `steps` times with the solution of every step in a column of
/// a NaN-poisoned (n+1) × steps matrix; each checked column against faer.
fn window_run<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    m: usize,
    n: usize,
    steps: usize,
    refresh: Option<usize>,
) {
    let what = format!(
        "{} window {m}×{n} refresh {refresh:?}",
        std::any::type_name::<T>()
    );
    let mut rng = common::rng(seed);
    let (x64, y64) = rows(&mut rng, m + steps, n);
    let (x, y): (Vec<T>, Vec<T>) = (cast(&x64), cast(&y64));
    let (x64, y64): (Vec<f64>, Vec<f64>) = (
        x.iter().map(|v| v.to_f64()).collect(),
        y.iter().map(|v| v.to_f64()).collect(),
    );
    let a = Mat::from_fn(m, n, |i, j| x[i * n + j]);
    let params = SmallParams {
        refresh_every: refresh,
        ..SmallParams::default()
    };
    let mut st = GpuSmallState::window(gpu, a.as_ref(), &y[..m], &params).unwrap();
    let first = st.solve().unwrap();
    let first_x: Vec<f64> = first.x.iter().map(|v| v.to_f64()).collect();
    check_step::<T>(
        &what,
        &x64,
        &y64,
        (0, m),
        None,
        n,
        0,
        &first_x,
        first.rss.to_f64(),
    );
    let mut out = DevMat::<T>::zeros(gpu, n + 1, steps).unwrap();
    out.upload(
        gpu,
        Mat::from_fn(n + 1, steps, |_, _| T::from_f64(f64::NAN)).as_ref(),
    )
    .unwrap();
    for t in 0..steps {
        let i = m + t;
        st.slide_solve(&x[i * n..(i + 1) * n], y[i], &mut out, t)
            .unwrap();
    }
    let report = st.sync().unwrap();
    assert_eq!(report.steps, steps as u64, "{what}");
    assert_eq!(report.refused, 0, "{what}: {report:?}");
    assert_eq!(report.solves_refused, 0, "{what}");
    let sol = out.to_host(gpu).unwrap();
    let every = refresh.filter(|&e| e > 0).unwrap_or(usize::MAX);
    let stride = if m * n > 10_000 { 10 } else { 1 };
    for t in (0..steps).filter(|t| t % stride == 0 || *t == steps - 1) {
        let got: Vec<f64> = (0..n).map(|j| sol[(j, t)].to_f64()).collect();
        // Steps since the last refresh (the refresh runs after step `every`, 2·every, …).
        let k = if every == usize::MAX {
            t + 1
        } else {
            t % every + 1
        };
        check_step::<T>(
            &what,
            &x64,
            &y64,
            (t + 1, t + 1 + m),
            None,
            n,
            k,
            &got,
            sol[(n, t)].to_f64(),
        );
    }
    // The kept rows are the last m rows, bit for bit, oldest first.
    let (ka, kb) = st.kept_rows().unwrap().expect("a window keeps its rows");
    for i in 0..m {
        let src = steps + i;
        assert_eq!(
            kb[i].to_f64().to_bits(),
            y64[src].to_bits(),
            "{what}: kept b[{i}]"
        );
        for j in 0..n {
            assert_eq!(
                ka[(i, j)].to_f64().to_bits(),
                x64[src * n + j].to_bits(),
                "{what}: kept A[{i},{j}]"
            );
        }
    }
}

#[test]
fn gpu_small_window_steps_match_least_squares() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (seed, m, n, steps) in [
        (1u64, 252usize, 5usize, 400usize),
        (2, 1000, 50, 120),
        (3, 70, 64, 90),
        (4, 37, 33, 75),
        (5, 3, 1, 40),
        (6, 45, 31, 60),
    ] {
        window_run::<f64>(&gpu, seed, m, n, steps, Some(0));
    }
    window_run::<f32>(&gpu, 7, 252, 5, 300, Some(0));
    window_run::<f32>(&gpu, 8, 200, 40, 60, Some(0));
}

#[test]
fn gpu_small_window_refresh_keeps_accuracy() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    window_run::<f64>(&gpu, 11, 60, 7, 500, Some(13));
    window_run::<f64>(&gpu, 12, 300, 40, 100, None);
}

#[test]
fn gpu_small_recursive_matches_weighted_least_squares() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (m0, n, steps, forget) = (20usize, 7usize, 300usize, 0.98f64);
    let mut rng = common::rng(21);
    let (x, y) = rows(&mut rng, m0 + steps, n);
    let a = Mat::from_fn(m0, n, |i, j| x[i * n + j]);
    let mut st = GpuSmallState::<f64>::recursive(
        &gpu,
        a.as_ref(),
        &y[..m0],
        forget,
        &SmallParams::default(),
    )
    .unwrap();
    let mut out = DevMat::<f64>::zeros(&gpu, n + 1, steps).unwrap();
    for t in 0..steps {
        let i = m0 + t;
        st.push_solve(&x[i * n..(i + 1) * n], y[i], &mut out, t)
            .unwrap();
    }
    assert_eq!(st.sync().unwrap().refused, 0);
    assert_eq!(st.nrows(), m0 + steps);
    let sol = out.to_host(&gpu).unwrap();
    for t in [0, 1, 50, 150, steps - 1] {
        let total = m0 + t + 1;
        // Row i weighs forget^(pushes after it): the first m0 rows all t + 1 pushes.
        let w: Vec<f64> = (0..total)
            .map(|i| forget.powi(if i < m0 { t + 1 } else { m0 + t - i } as i32))
            .collect();
        let got: Vec<f64> = (0..n).map(|j| sol[(j, t)]).collect();
        check_step::<f64>(
            "recursive",
            &x,
            &y,
            (0, total),
            Some(&w),
            n,
            t + 1,
            &got,
            sol[(n, t)],
        );
    }
}

#[test]
fn gpu_small_refusals_leave_the_state_unchanged() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (m, n) = (6usize, 3usize);
    let mut rng = common::rng(31);
    let (mut x, y) = rows(&mut rng, m + 3, n);
    // Column 2 is non-zero only in row 0 (the oldest) and in the last new row: removing
    // row 0 while the first new row enters leaves column 2 empty, which the downdate
    // refuses.
    for i in 1..m + 2 {
        x[i * n + 2] = 0.0;
    }
    let a = Mat::from_fn(m, n, |i, j| x[i * n + j]);
    let mut st =
        GpuSmallState::<f64>::window(&gpu, a.as_ref(), &y[..m], &SmallParams::default()).unwrap();
    let snapshot = |st: &GpuSmallState<f64>| {
        let r = st.r().unwrap();
        let (d, rho) = st.d_rho().unwrap();
        let (ka, kb) = st.kept_rows().unwrap().unwrap();
        let mut bits: Vec<u64> = (0..n * n).map(|k| r[(k / n, k % n)].to_bits()).collect();
        bits.extend(d.iter().map(|v| v.to_bits()));
        bits.push(rho.to_bits());
        bits.extend((0..m * n).map(|k| ka[(k / n, k % n)].to_bits()));
        bits.extend(kb.iter().map(|v| v.to_bits()));
        bits
    };
    let before = snapshot(&st);
    let mut out = DevMat::<f64>::zeros(&gpu, n + 1, 4).unwrap();
    st.slide_solve(&x[m * n..(m + 1) * n], y[m], &mut out, 0)
        .unwrap();
    let rep = st.sync().unwrap();
    assert_eq!(
        (rep.steps, rep.refused, rep.first_refused),
        (1, 1, Some(0)),
        "{rep:?}"
    );
    assert!(rep.last_reason.unwrap().contains("downdate"));
    assert_eq!(snapshot(&st), before, "a refused step changed the state");
    let sol = out.to_host(&gpu).unwrap();
    assert!(
        (0..=n).all(|i| sol[(i, 0)].is_nan()),
        "a refused step's solution is NaN"
    );

    // A non-finite host row: refused before anything is queued.
    let mut bad = x[m * n..(m + 1) * n].to_vec();
    bad[1] = f64::INFINITY;
    assert!(matches!(st.slide(&bad, 1.0), Err(Error::NonFinite { .. })));
    assert!(matches!(st.slide(&bad[..2], 1.0), Err(Error::Shape { .. })));
    assert!(matches!(
        st.push(&x[..n], 1.0),
        Err(Error::InvalidParam { .. })
    ));
    // A non-finite row read from device memory: refused on the device.
    let cols = Mat::from_fn(n, 1, |i, _| bad[i]);
    let xd = DevMat::from_host(&gpu, cols.as_ref()).unwrap();
    let yd = DevVec::from_slice(&gpu, &[1.0]).unwrap();
    st.slide_column(&xd, &yd, 0, Some((&mut out, 1))).unwrap();
    let rep = st.sync().unwrap();
    assert_eq!((rep.steps, rep.refused), (2, 2), "{rep:?}");
    assert!(rep.last_reason.unwrap().contains("not finite"));
    assert_eq!(
        snapshot(&st),
        before,
        "a refused device row changed the state"
    );
    assert!(matches!(
        st.slide_column(&xd, &yd, 1, None),
        Err(Error::Shape { .. })
    ));

    // The window's next valid step is accepted (the new row brings column 2 back).
    let i = m + 2;
    st.slide_solve(&x[i * n..(i + 1) * n], y[i], &mut out, 2)
        .unwrap();
    let rep = st.sync().unwrap();
    assert_eq!((rep.steps, rep.refused), (3, 2), "{rep:?}");
    let sol = out.to_host(&gpu).unwrap();
    let got: Vec<f64> = (0..n).map(|j| sol[(j, 2)]).collect();
    // Rows kept now: 1..m and row m + 2.
    let keep: Vec<usize> = (1..m).chain([m + 2]).collect();
    let kx: Vec<f64> = keep
        .iter()
        .flat_map(|&i| x[i * n..(i + 1) * n].to_vec())
        .collect();
    let ky: Vec<f64> = keep.iter().map(|&i| y[i]).collect();
    check_step::<f64>(
        "after refusals",
        &kx,
        &ky,
        (0, m),
        None,
        n,
        1,
        &got,
        sol[(n, 2)],
    );
}

#[test]
fn gpu_small_arguments_are_checked() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let p = SmallParams::default();
    let mut rng = common::rng(41);
    let a = common::random_mat::<f64>(&mut rng, 80, 65);
    let b = common::random_vec::<f64>(&mut rng, 80);
    let sub = |c: usize, r: usize| Mat::from_fn(r, c, |i, j| a[(i, j)]);
    assert!(matches!(
        GpuSmallState::window(&gpu, sub(65, 80).as_ref(), &b, &p),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        GpuSmallState::window(&gpu, sub(6, 5).as_ref(), &b[..5], &p),
        Err(Error::Underdetermined { .. })
    ));
    assert!(matches!(
        GpuSmallState::window(&gpu, sub(6, 9).as_ref(), &b[..8], &p),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        GpuSmallState::recursive(&gpu, sub(6, 9).as_ref(), &b[..9], 1.5, &p),
        Err(Error::InvalidParam { .. })
    ));
    let mut dep = sub(6, 9);
    for i in 0..9 {
        dep[(i, 4)] = dep[(i, 1)];
    }
    assert!(matches!(
        GpuSmallState::window(&gpu, dep.as_ref(), &b[..9], &p),
        Err(Error::RankDeficient { column: 4, .. })
    ));
    let mut nan = sub(6, 9);
    nan[(3, 2)] = f64::NAN;
    assert!(matches!(
        GpuSmallState::window(&gpu, nan.as_ref(), &b[..9], &p),
        Err(Error::NonFinite { row: 3, col: 2, .. })
    ));
    let mut rec = GpuSmallState::recursive(&gpu, sub(6, 9).as_ref(), &b[..9], 0.9, &p).unwrap();
    assert!(matches!(
        rec.slide(&b[..6], 1.0),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(rec.refresh(), Err(Error::NeedsData { .. })));
    assert!(rec.kept_rows().unwrap().is_none());
}
