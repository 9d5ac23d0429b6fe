//! Rolling and recursive least squares (cuqr::rolling) against a direct least-squares
//! solve (faer's QR) of every window: shared and per-series designs, expanding windows,
//! min_nobs, rank-deficient windows, missing observations, the refactorisation after a
//! refused downdate, and forgetting against weighted least squares.
//!
//! Tolerances from each window's conditioning: a backward-stable least-squares method has
//! a relative error of order u·(κ + κ²·‖r‖/(‖X‖‖β‖)); the checks allow 1e3 times that
//! (the window's downdates add drift, bounded by the refactorisation every `window`
//! steps) and 1e-10 where that is smaller. The random designs here have κ of a few units,
//! so that bound is 1e-10 for all but the deliberately ill-conditioned windows.

use cuqr::rolling::{
    recursive_lstsq, rolling_lstsq, Missing, RecursiveParams, RollingData, RollingParams,
    RollingResult,
};
use cuqr::{Device, Error};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Uniform entries in [−1, 1).
fn uniform(g: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| g.random::<f64>() * 2.0 - 1.0).collect()
}

/// y (nobs × series) = X β_s + noise·e for a design shared (nobs × k) or per series.
fn problem(
    seed: u64,
    nobs: usize,
    series: usize,
    k: usize,
    per_series: bool,
    noise: f64,
) -> (Vec<f64>, Vec<f64>) {
    let mut g = StdRng::seed_from_u64(seed);
    let x_len = if per_series {
        nobs * series * k
    } else {
        nobs * k
    };
    let x = uniform(&mut g, x_len);
    let betas = uniform(&mut g, series * k);
    let e = uniform(&mut g, nobs * series);
    let mut y = vec![0.0; nobs * series];
    for t in 0..nobs {
        for s in 0..series {
            let at = if per_series {
                (t * series + s) * k
            } else {
                t * k
            };
            let row = &x[at..at + k];
            let fit: f64 = row.iter().zip(&betas[s * k..]).map(|(a, b)| a * b).sum();
            y[t * series + s] = fit + noise * e[t * series + s];
        }
    }
    (y, x)
}

/// The direct solve of one window.
struct Direct {
    beta: Vec<f64>,
    rss: f64,
    /// κ₂ of the (weighted) design.
    kappa: f64,
    /// ‖r‖/(‖X‖₂‖β‖).
    eta: f64,
    /// ‖y‖² of the window (scales the residual's rounding where the fit is exact).
    yy: f64,
}

impl Direct {
    /// The least-squares perturbation bound c·u·(κ + κ²η) with c = 1e3 (the window's
    /// downdates), and 1e-10 where that is smaller.
    fn tol(&self) -> f64 {
        let u = f64::EPSILON / 2.0;
        (1e3 * u * (self.kappa + self.kappa * self.kappa * self.eta)).max(1e-10)
    }
}

/// The weighted least-squares solution of rows `rows` of series `s` (row i weighted by
/// `weight(i)`); `None` when fewer than k rows are finite.
fn direct(
    data: &RollingData<'_, f64>,
    y: &[f64],
    x: &[f64],
    s: usize,
    rows: std::ops::RangeInclusive<usize>,
    weight: impl Fn(usize) -> f64,
) -> Option<Direct> {
    let (ns, k) = (data.series(), data.k());
    let at = |t: usize| {
        if data.has_per_series_x() {
            (t * ns + s) * k
        } else {
            t * k
        }
    };
    let kept: Vec<usize> = rows
        .filter(|&t| y[t * ns + s].is_finite() && x[at(t)..at(t) + k].iter().all(|v| v.is_finite()))
        .collect();
    if kept.len() < k {
        return None;
    }
    let m = kept.len();
    let a = faer::Mat::from_fn(m, k, |i, j| weight(kept[i]).sqrt() * x[at(kept[i]) + j]);
    let b = faer::Mat::from_fn(m, 1, |i, _| weight(kept[i]).sqrt() * y[kept[i] * ns + s]);
    let sv = a.singular_values().expect("svd");
    let beta = a.qr().solve_lstsq(&b);
    let r = &b - &a * &beta;
    let rss: f64 = (0..m).map(|i| r[(i, 0)] * r[(i, 0)]).sum();
    let bn: f64 = (0..k)
        .map(|j| beta[(j, 0)] * beta[(j, 0)])
        .sum::<f64>()
        .sqrt();
    Some(Direct {
        beta: (0..k).map(|j| beta[(j, 0)]).collect(),
        rss,
        kappa: sv[0] / sv[k - 1],
        eta: rss.sqrt() / (sv[0] * bn).max(f64::MIN_POSITIVE),
        yy: (0..m).map(|i| b[(i, 0)] * b[(i, 0)]).sum(),
    })
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum();
    let den: f64 = b.iter().map(|q| q * q).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Compares every window that has estimates with the direct solve of its rows, and
/// checks that the others are NaN exactly where `expect_estimate` says no estimate.
fn check_all(
    res: &RollingResult<f64>,
    data: &RollingData<'_, f64>,
    (y, x): (&[f64], &[f64]),
    window: usize,
    forget: f64,
    expect_estimate: impl Fn(usize, usize) -> bool,
) {
    let (nt, ns, _) = res.shape();
    let (mut worst, mut max_kappa) = (0.0f64, 0.0f64);
    for s in 0..ns {
        for t in 0..nt {
            let p = res.params_at(t, s);
            if !expect_estimate(t, s) {
                assert!(
                    p.iter().all(|v| v.is_nan()),
                    "t={t} s={s}: expected NaN, got {p:?}"
                );
                assert!(res.rss_at(t, s).is_nan());
                continue;
            }
            let lo = (t + 1).saturating_sub(window);
            let d = direct(data, y, x, s, lo..=t, |i| forget.powi((t - i) as i32)).expect("rows");
            let e = rel(p, &d.beta);
            let er = (res.rss_at(t, s) - d.rss).abs() / d.rss.max(f64::EPSILON * d.yy);
            assert!(
                e < d.tol(),
                "t={t} s={s}: params relative error {e:e} (κ {:e})",
                d.kappa
            );
            assert!(
                er < 10.0 * d.tol(),
                "t={t} s={s}: rss relative error {er:e}"
            );
            max_kappa = max_kappa.max(d.kappa);
            worst = worst.max(e);
        }
    }
    println!("worst params relative error {worst:e}, largest κ {max_kappa:e}");
}

#[test]
fn shared_design_matches_direct_solves() {
    let (nt, ns, k, w) = (203, 3, 5, 37);
    let (y, x) = problem(1, nt, ns, k, false, 0.1);
    let data = RollingData::shared(&y, &x, nt, ns, k);
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    assert_eq!(res.shape(), (nt, ns, k));
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
    // Every w downdates a scheduled refactorisation; none refused.
    assert_eq!(res.refactorisations.after_failed_downdate, 0);
    assert_eq!(res.refactorisations.scheduled, ns * ((nt - w) / w));
}

#[test]
fn per_series_designs_match_direct_solves() {
    let (nt, ns, k, w) = (150, 4, 3, 20);
    let (y, x) = problem(2, nt, ns, k, true, 0.5);
    let data = RollingData::per_series(&y, &x, nt, ns, k);
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
}

#[test]
fn many_series_in_parallel_equal_one_at_a_time() {
    let (nt, ns, k, w) = (203, 90, 5, 33);
    let (y, x) = problem(3, nt, ns, k, true, 0.1);
    let data = RollingData::per_series(&y, &x, nt, ns, k);
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    for s in [0, 41, 89] {
        let ys: Vec<f64> = (0..nt).map(|t| y[t * ns + s]).collect();
        let xs: Vec<f64> = (0..nt)
            .flat_map(|t| x[(t * ns + s) * k..(t * ns + s + 1) * k].to_vec())
            .collect();
        let one = rolling_lstsq(
            &RollingData::shared(&ys, &xs, nt, 1, k),
            w,
            &Default::default(),
        )
        .unwrap();
        for t in 0..nt {
            let (a, b) = (res.params_at(t, s), one.params_at(t, 0));
            assert!(a
                .iter()
                .zip(b)
                .all(|(p, q)| p == q || (p.is_nan() && q.is_nan())));
        }
    }
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
}

#[test]
fn expanding_and_min_nobs() {
    let (nt, ns, k, w) = (101, 2, 4, 40);
    let (y, x) = problem(4, nt, ns, k, false, 0.2);
    let data = RollingData::shared(&y, &x, nt, ns, k);
    let p = RollingParams {
        min_nobs: Some(9),
        expanding: true,
        ..Default::default()
    };
    let res = rolling_lstsq(&data, w, &p).unwrap();
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= 9);
    // min_nobs without expanding changes nothing on complete data (as RollingOLS).
    let p = RollingParams {
        min_nobs: Some(9),
        ..Default::default()
    };
    let res = rolling_lstsq(&data, w, &p).unwrap();
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
}

#[test]
fn rank_deficient_windows_are_nan_and_flagged() {
    let (nt, k, w) = (120, 3, 15);
    let (y, mut x) = problem(5, nt, 1, k, false, 0.1);
    // Column 2 is zero on rows 30..60: windows inside that stretch cannot determine it.
    for t in 30..60 {
        x[t * k + 2] = 0.0;
    }
    let data = RollingData::shared(&y, &x, nt, 1, k);
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    let inside = |t: usize| t + 1 >= 30 + w && t < 60;
    for t in 0..nt {
        assert_eq!(res.rank_deficient[t], inside(t), "t={t}");
    }
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| {
        t + 1 >= w && !inside(t)
    });
}

#[test]
fn missing_observations_drop_skip_raise() {
    let (nt, ns, k, w) = (90, 2, 3, 12);
    let (mut y, mut x) = problem(6, nt, ns, k, false, 0.1);
    y[20 * ns + 1] = f64::NAN; // series 1 only
    x[50 * k] = f64::INFINITY; // both series
    let data = RollingData::shared(&y, &x, nt, ns, k);
    // Drop (the default): windows use their finite rows.
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
    // Skip: a window holding a non-finite observation has no estimate.
    let p = RollingParams {
        missing: Missing::Skip,
        ..Default::default()
    };
    let res = rolling_lstsq(&data, w, &p).unwrap();
    let holds = |t: usize, bad: usize| bad <= t && t < bad + w;
    check_all(&res, &data, (&y, &x), w, 1.0, |t, s| {
        t + 1 >= w && !holds(t, 50) && !(s == 1 && holds(t, 20))
    });
    // Raise: refused, naming the first entry.
    let p = RollingParams {
        missing: Missing::Raise,
        ..Default::default()
    };
    match rolling_lstsq(&data, w, &p) {
        Err(Error::NonFinite { what, row, col, .. }) => assert_eq!((what, row, col), ("y", 20, 1)),
        other => panic!("expected NonFinite, got {other:?}"),
    }
    // Too few finite rows in a window for min_nobs: NaN.
    let mut y2 = y.clone();
    for t in 60..70 {
        y2[t * ns] = f64::NAN;
    }
    let data2 = RollingData::shared(&y2, &x, nt, ns, k);
    let p = RollingParams {
        min_nobs: Some(5),
        ..Default::default()
    };
    let res = rolling_lstsq(&data2, w, &p).unwrap();
    // Windows ending at t ∈ 67..=73 hold at most 4 finite rows of series 0.
    let finite = |t: usize| {
        ((t + 1 - w)..=t)
            .filter(|&i| !(60..70).contains(&i))
            .count()
    };
    check_all(&res, &data2, (&y2, &x), w, 1.0, |t, s| {
        t + 1 >= w && (s == 1 || finite(t) >= 5)
    });
}

#[test]
fn refused_downdate_refactorises() {
    let (nt, k, w) = (100, 3, 25);
    let (_, mut x) = problem(7, nt, 1, k, false, 0.0);
    // Column 1 is small except one row that carries nearly all of it: removing that row
    // leaves 1 − ‖z‖² ≈ 1e-12, below the refusal threshold √u.
    for t in 0..nt {
        x[t * k + 1] *= 0.1;
    }
    x[40 * k + 1] = 1e5;
    let mut g = StdRng::seed_from_u64(8);
    let y: Vec<f64> = (0..nt)
        .map(|t| {
            x[t * k] - 2.0 * x[t * k + 1] + 0.5 * x[t * k + 2] + 0.01 * (g.random::<f64>() - 0.5)
        })
        .collect();
    let data = RollingData::shared(&y, &x, nt, 1, k);
    let res = rolling_lstsq(&data, w, &RollingParams::default()).unwrap();
    assert!(
        res.refactorisations.after_failed_downdate >= 1,
        "{:?}",
        res.refactorisations
    );
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
}

#[test]
fn forgetting_in_a_window_is_weighted_least_squares() {
    let (nt, ns, k, w, lambda) = (80, 2, 3, 30, 0.97);
    let (y, x) = problem(9, nt, ns, k, false, 0.3);
    let data = RollingData::shared(&y, &x, nt, ns, k);
    let p = RollingParams {
        forget: Some(lambda),
        ..Default::default()
    };
    let res = rolling_lstsq(&data, w, &p).unwrap();
    check_all(&res, &data, (&y, &x), w, lambda, |t, _| t + 1 >= w);
}

#[test]
fn recursive_least_squares_is_weighted_least_squares() {
    let (nt, ns, k, lambda) = (131, 3, 4, 0.95);
    let (y, x) = problem(10, nt, ns, k, true, 0.3);
    let data = RollingData::per_series(&y, &x, nt, ns, k);
    let res = recursive_lstsq(&data, lambda, &RecursiveParams::default()).unwrap();
    check_all(&res, &data, (&y, &x), nt, lambda, |t, _| t + 1 >= k);
    assert_eq!(res.refactorisations, Default::default());
    // λ = 1: ordinary least squares of everything so far.
    let res = recursive_lstsq(&data, 1.0, &RecursiveParams::default()).unwrap();
    check_all(&res, &data, (&y, &x), nt, 1.0, |t, _| t + 1 >= k);
}

#[test]
fn recursive_waits_for_full_rank() {
    let (nt, k) = (20, 2);
    // The first five rows are all [1, 0]: the second coefficient is undetermined.
    let x: Vec<f64> = (0..nt)
        .flat_map(|t| [1.0, if t < 5 { 0.0 } else { t as f64 }])
        .collect();
    let y: Vec<f64> = (0..nt).map(|t| 2.0 + 0.5 * x[2 * t + 1]).collect();
    let res = recursive_lstsq(
        &RollingData::shared(&y, &x, nt, 1, k),
        0.9,
        &Default::default(),
    )
    .unwrap();
    for t in 0..nt {
        let p = res.params_at(t, 0);
        if t < 5 {
            assert!(p[0].is_nan() && p[1].is_nan());
            assert_eq!(res.rank_deficient[t], t >= 1);
        } else {
            assert!(
                (p[0] - 2.0).abs() < 1e-12 && (p[1] - 0.5).abs() < 1e-12,
                "{p:?}"
            );
        }
    }
}

#[test]
fn single_precision_runs() {
    let (nt, ns, k, w) = (70, 2, 3, 20);
    let (y, x) = problem(11, nt, ns, k, false, 0.1);
    let (yf, xf): (Vec<f32>, Vec<f32>) = (
        y.iter().map(|&v| v as f32).collect(),
        x.iter().map(|&v| v as f32).collect(),
    );
    let d64 = RollingData::shared(&y, &x, nt, ns, k);
    let r64 = rolling_lstsq(&d64, w, &RollingParams::default()).unwrap();
    let r32 = rolling_lstsq(
        &RollingData::shared(&yf, &xf, nt, ns, k),
        w,
        &Default::default(),
    )
    .unwrap();
    for (a, b) in r32.params.iter().zip(&r64.params) {
        assert!(
            (*a as f64 - b).abs() < 1e-4 || (a.is_nan() && b.is_nan()),
            "{a} vs {b}"
        );
    }
}

#[test]
fn devices_are_chosen_and_reasons_given() {
    let (y, x) = problem(12, 30, 1, 2, false, 0.1);
    let data = RollingData::shared(&y, &x, 30, 1, 2);
    let cpu = RollingParams {
        device: Device::Cpu,
        ..Default::default()
    };
    assert!(rolling_lstsq(&data, 10, &cpu).unwrap().fallback.is_none());
    // Auto keeps a small problem on the CPU and says why.
    let why = rolling_lstsq(&data, 10, &RollingParams::default())
        .unwrap()
        .fallback
        .expect("a reason");
    assert!(why.contains("auto") && why.contains("CPU"), "{why}");
    // A GPU asked for runs there, or the call fails when none opens.
    let p = RollingParams {
        device: Device::Gpu(0),
        ..Default::default()
    };
    match rolling_lstsq(&data, 10, &p) {
        Ok(res) => assert!(res.fallback.is_none()),
        Err(Error::NoDevice(_)) => {}
        Err(e) => panic!("expected a result or NoDevice, got {e:?}"),
    }
}

#[test]
fn invalid_arguments_are_refused() {
    let (y, x) = problem(13, 30, 2, 3, false, 0.1);
    let data = RollingData::shared(&y, &x, 30, 2, 3);
    let bad = |w: usize, p: RollingParams| match rolling_lstsq(&data, w, &p) {
        Err(Error::InvalidParam { what, .. }) => what,
        other => panic!("expected InvalidParam, got {other:?}"),
    };
    assert_eq!(bad(0, Default::default()), "window");
    let min = |n| RollingParams {
        min_nobs: Some(n),
        ..Default::default()
    };
    assert_eq!(bad(10, min(2)), "min_nobs");
    assert_eq!(bad(10, min(11)), "min_nobs");
    for f in [0.0, -0.5, 1.5, f64::NAN] {
        let p = RollingParams {
            forget: Some(f),
            ..Default::default()
        };
        assert_eq!(bad(10, p), "forget");
    }
    let p = RollingParams {
        refresh: Some(0),
        ..Default::default()
    };
    assert_eq!(bad(10, p), "refresh");
    assert!(matches!(
        recursive_lstsq(&data, 0.0, &Default::default()),
        Err(Error::InvalidParam { what: "forget", .. })
    ));
    // Shapes.
    let short = RollingData::shared(&y[1..], &x, 30, 2, 3);
    assert!(matches!(
        rolling_lstsq(&short, 5, &Default::default()),
        Err(Error::Shape { .. })
    ));
    let per = RollingData::per_series(&y, &x, 30, 2, 3);
    assert!(matches!(
        rolling_lstsq(&per, 5, &Default::default()),
        Err(Error::Shape { .. })
    ));
    let none = RollingData::shared(&y, &x, 30, 2, 0);
    assert!(matches!(
        rolling_lstsq(&none, 5, &Default::default()),
        Err(Error::Shape { .. })
    ));
}

#[test]
fn window_of_one_and_short_series() {
    // k = 1, window = 1: β_t = y_t / x_t, rss = 0.
    let x = [2.0f64, 4.0, 0.0, 1.0];
    let y = [1.0f64, 1.0, 5.0, 3.0];
    let res = rolling_lstsq(
        &RollingData::shared(&y, &x, 4, 1, 1),
        1,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(res.params_at(0, 0), &[0.5]);
    assert_eq!(res.params_at(1, 0), &[0.25]);
    assert!(res.params_at(2, 0)[0].is_nan() && res.rank_deficient[2]);
    assert_eq!(res.params_at(3, 0), &[3.0]);
    // Fewer observations than the window: no estimate at all.
    let res = rolling_lstsq(
        &RollingData::shared(&y, &x, 4, 1, 1),
        9,
        &Default::default(),
    )
    .unwrap();
    assert!(res.params.iter().all(|v| v.is_nan()));
}

// ---- The GPU walk (gpu-kernels/src/rolling.rs): the same checks on GPU 0, and the CPU's
// flags and NaN pattern exactly. Each test prints "skipped" without a GPU
// (`CUQR_REQUIRE_GPU=1` fails instead).

/// `p` on GPU 0, or `None` (after printing why) when no GPU opens.
fn on_gpu(p: &RollingParams) -> Option<RollingParams> {
    match cuqr::Gpu::new(0) {
        Ok(_) => Some(RollingParams {
            device: Device::Gpu(0),
            ..p.clone()
        }),
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// The GPU's result agrees with the CPU's where a window has estimates or not, and its
/// rank flags are the CPU's.
fn same_pattern(gpu: &RollingResult<f64>, cpu: &RollingResult<f64>) {
    assert_eq!(gpu.shape(), cpu.shape());
    assert_eq!(gpu.rank_deficient, cpu.rank_deficient);
    for (i, (a, b)) in gpu.params.iter().zip(&cpu.params).enumerate() {
        assert_eq!(a.is_nan(), b.is_nan(), "entry {i}: GPU {a}, CPU {b}");
    }
    assert!(gpu.fallback.is_none());
}

/// Runs `data` on the CPU and on GPU 0 with `p`, checks the GPU against the direct solves
/// and the CPU's pattern.
fn gpu_case(
    data: &RollingData<'_, f64>,
    yx: (&[f64], &[f64]),
    w: usize,
    p: &RollingParams,
    expect_estimate: impl Fn(usize, usize) -> bool,
) -> Option<RollingResult<f64>> {
    let gp = on_gpu(p)?;
    let cpu = rolling_lstsq(
        data,
        w,
        &RollingParams {
            device: Device::Cpu,
            ..p.clone()
        },
    )
    .unwrap();
    let gpu = rolling_lstsq(data, w, &gp).unwrap();
    same_pattern(&gpu, &cpu);
    check_all(&gpu, data, yx, w, p.forget.unwrap_or(1.0), expect_estimate);
    Some(gpu)
}

#[test]
fn gpu_walk_matches_direct_solves_for_every_k() {
    // k = 1..=8 run the register instances, 9..=16 the general one; many segments a
    // series (nobs ≫ window) and series not a multiple of the block.
    for (case, k) in (1..=16).enumerate() {
        let (nt, ns, w) = (211 + 13 * case, 5 + case % 3, 2 * k + 11);
        let per_series = case % 2 == 1;
        let (y, x) = problem(100 + case as u64, nt, ns, k, per_series, 0.2);
        let data = if per_series {
            RollingData::per_series(&y, &x, nt, ns, k)
        } else {
            RollingData::shared(&y, &x, nt, ns, k)
        };
        if gpu_case(&data, (&y, &x), w, &Default::default(), |t, _| t + 1 >= w).is_none() {
            return;
        }
    }
}

#[test]
fn gpu_walk_long_series_many_segments() {
    let (nt, ns, k, w) = (1531, 67, 5, 41);
    let (y, x) = problem(120, nt, ns, k, true, 0.1);
    let data = RollingData::per_series(&y, &x, nt, ns, k);
    gpu_case(&data, (&y, &x), w, &Default::default(), |t, _| t + 1 >= w);
}

#[test]
fn gpu_walk_expanding_forgetting_and_missing() {
    let (nt, ns, k, w) = (157, 3, 4, 40);
    let (mut y, mut x) = problem(121, nt, ns, k, false, 0.2);
    let p = RollingParams {
        min_nobs: Some(9),
        expanding: true,
        ..Default::default()
    };
    let data = RollingData::shared(&y, &x, nt, ns, k);
    if gpu_case(&data, (&y, &x), w, &p, |t, _| t + 1 >= 9).is_none() {
        return;
    }
    let p = RollingParams {
        forget: Some(0.97),
        ..Default::default()
    };
    gpu_case(&data, (&y, &x), w, &p, |t, _| t + 1 >= w);
    y[20 * ns + 1] = f64::NAN;
    x[50 * k] = f64::INFINITY;
    x[130 * k + 2] = f64::NAN;
    let data = RollingData::shared(&y, &x, nt, ns, k);
    gpu_case(&data, (&y, &x), w, &Default::default(), |t, _| t + 1 >= w);
    let p = RollingParams {
        missing: Missing::Skip,
        ..Default::default()
    };
    let holds = |t: usize, bad: usize| bad <= t && t < bad + w;
    gpu_case(&data, (&y, &x), w, &p, |t, s| {
        let missing = holds(t, 50) || holds(t, 130) || (s == 1 && holds(t, 20));
        t + 1 >= w && !missing
    });
    let p = RollingParams {
        missing: Missing::Raise,
        device: Device::Gpu(0),
        ..Default::default()
    };
    match rolling_lstsq(&data, w, &p) {
        Err(Error::NonFinite { what, row, col, .. }) => assert_eq!((what, row, col), ("y", 20, 1)),
        other => panic!("expected NonFinite, got {other:?}"),
    }
}

#[test]
fn gpu_walk_rank_deficient_and_refused_downdates() {
    let (nt, k, w) = (120, 3, 15);
    let (y, mut x) = problem(5, nt, 1, k, false, 0.1);
    for t in 30..60 {
        x[t * k + 2] = 0.0;
    }
    let data = RollingData::shared(&y, &x, nt, 1, k);
    let inside = |t: usize| t + 1 >= 30 + w && t < 60;
    let Some(res) = gpu_case(&data, (&y, &x), w, &Default::default(), |t, _| {
        t + 1 >= w && !inside(t)
    }) else {
        return;
    };
    for t in 0..nt {
        assert_eq!(res.rank_deficient[t], inside(t), "t={t}");
    }
    let (nt, k, w) = (100, 3, 25);
    let (_, mut x) = problem(7, nt, 1, k, false, 0.0);
    for t in 0..nt {
        x[t * k + 1] *= 0.1;
    }
    x[40 * k + 1] = 1e5;
    let mut g = StdRng::seed_from_u64(8);
    let y: Vec<f64> = (0..nt)
        .map(|t| {
            x[t * k] - 2.0 * x[t * k + 1] + 0.5 * x[t * k + 2] + 0.01 * (g.random::<f64>() - 0.5)
        })
        .collect();
    let data = RollingData::shared(&y, &x, nt, 1, k);
    let res = gpu_case(&data, (&y, &x), w, &Default::default(), |t, _| t + 1 >= w).unwrap();
    assert!(
        res.refactorisations.after_failed_downdate >= 1,
        "{:?}",
        res.refactorisations
    );
}

#[test]
fn gpu_recursive_and_single_precision() {
    let (nt, ns, k, lambda) = (331, 3, 4, 0.95);
    let (y, x) = problem(122, nt, ns, k, true, 0.3);
    let data = RollingData::per_series(&y, &x, nt, ns, k);
    let Some(gp) = on_gpu(&RollingParams::default()) else {
        return;
    };
    let rp = RecursiveParams {
        device: gp.device,
        ..Default::default()
    };
    let res = recursive_lstsq(&data, lambda, &rp).unwrap();
    check_all(&res, &data, (&y, &x), nt, lambda, |t, _| t + 1 >= k);
    let (yf, xf): (Vec<f32>, Vec<f32>) = (
        y.iter().map(|&v| v as f32).collect(),
        x.iter().map(|&v| v as f32).collect(),
    );
    let w = 30;
    let r64 = rolling_lstsq(&data, w, &gp).unwrap();
    let r32 = rolling_lstsq(&RollingData::per_series(&yf, &xf, nt, ns, k), w, &gp).unwrap();
    for (a, b) in r32.params.iter().zip(&r64.params) {
        assert!(
            (*a as f64 - b).abs() < 1e-3 || (a.is_nan() && b.is_nan()),
            "{a} vs {b}"
        );
    }
}

#[test]
fn gpu_device_resident_data() {
    use cuqr::rolling::{rolling_lstsq_device, DeviceRollingData};
    use cuqr::DevVec;
    let Some(_) = on_gpu(&RollingParams::default()) else {
        return;
    };
    let gpu = cuqr::Gpu::new(0).unwrap();
    let (nt, ns, k, w) = (300, 19, 6, 45);
    let (y, x) = problem(123, nt, ns, k, false, 0.1);
    let (yd, xd) = (
        DevVec::from_slice(&gpu, &y).unwrap(),
        DevVec::from_slice(&gpu, &x).unwrap(),
    );
    let ddata = DeviceRollingData::shared(&yd, &xd, nt, ns, k);
    let dres = rolling_lstsq_device(&gpu, &ddata, w, &RollingParams::default()).unwrap();
    let res = dres.to_host(&gpu).unwrap();
    let data = RollingData::shared(&y, &x, nt, ns, k);
    check_all(&res, &data, (&y, &x), w, 1.0, |t, _| t + 1 >= w);
    // The (series·k) × nobs matrix of the device result is the row-major array.
    let pm = dres.params().to_host(&gpu).unwrap();
    assert_eq!((pm.nrows(), pm.ncols()), (ns * k, nt));
    assert!(pm
        .as_slice()
        .iter()
        .zip(&res.params)
        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())));
    // The same data as matrices whose column t is time step t (padded pitches).
    let ym = cuqr::DevMat::from_host(
        &gpu,
        cuqr::Mat::from_col_major(ns, nt, y.clone())
            .unwrap()
            .as_ref(),
    )
    .unwrap();
    let xm = cuqr::DevMat::from_host(
        &gpu,
        cuqr::Mat::from_col_major(k, nt, x.clone())
            .unwrap()
            .as_ref(),
    )
    .unwrap();
    let cols = DeviceRollingData::from_columns(&ym, &xm, k, false);
    let res2 = rolling_lstsq_device(&gpu, &cols, w, &RollingParams::default())
        .unwrap()
        .to_host(&gpu)
        .unwrap();
    assert!(res2
        .params
        .iter()
        .zip(&res.params)
        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan())));
    // Wrong lengths and too many regressors are refused before any launch.
    let short = DeviceRollingData::shared(&yd, &xd, nt + 1, ns, k);
    let wrong_k = DeviceRollingData::from_columns(&ym, &xm, k + 1, false);
    assert!(matches!(
        rolling_lstsq_device(&gpu, &wrong_k, w, &RollingParams::default()),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        rolling_lstsq_device(&gpu, &short, w, &RollingParams::default()),
        Err(Error::Shape { .. })
    ));
    let wide = DevVec::from_slice(&gpu, &vec![1.0f64; nt * 17]).unwrap();
    let many = DeviceRollingData::shared(&yd, &wide, nt, ns, 17);
    assert!(matches!(
        rolling_lstsq_device(&gpu, &many, w, &RollingParams::default()),
        Err(Error::InvalidParam { what: "k", .. })
    ));
}
