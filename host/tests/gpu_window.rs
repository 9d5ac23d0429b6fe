//! The composed updates on the GPU backend, every state kind, f32 and f64: the sliding window
//! (composed for the kinds with Q, the level-3 block path for the R-only kind with kept
//! data, docs/algorithms.md#r-only-window-step), with and without forgetting; rank-k, column
//! replacement and shift; drift control; against the f64 faer model of the same data with
//! the bounds of `host/tests/common/model.rs` (ε = 10·m·u per update). Error paths leave the state
//! unchanged bit for bit. Without a GPU every test prints "skipped"; `CUQR_REQUIRE_GPU=1`
//! makes that a failure.

mod common;

use common::{
    assert_long_window_accuracy, assert_slide_refuses_drops, check_state, drift_refreshes_run,
    random_mat, rank_k_step, replace_cols_step, rng, scale_model, shared_gpu, shift_col_step,
    slide_sweep, snapshot, DriftCase, Model, SlideSweep, StateKind, ALL_KINDS,
};
use cuqr::{diagnostics, Error, GpuScalar, Mat, QrUpdate, Scalar, UpdateParams};

fn slide_sequences<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    slide_sweep::<T, _>(
        &SlideSweep {
            dims: (301, 23, 2),
            blocks: &[(1, 1), (16, 16), (3, 0), (0, 2), (40, 45)],
            steps: 6,
            min_rows: 0,
            seed: |p, drop| 100 + p as u64 * 3 + drop as u64,
        },
        |kind, a, b| kind.gpu(&g, a, b),
    );
}

#[test]
fn gpu_slide_sequences_f64() {
    slide_sequences::<f64>();
}
#[test]
fn gpu_slide_sequences_f32() {
    slide_sequences::<f32>();
}

fn slide_errors<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    for kind in ALL_KINDS {
        let mut r = rng(7);
        let (m, n, q) = (70, 9, 1);
        let mut a = random_mat::<T>(&mut r, m, n);
        for i in 2..m {
            a[(i, 0)] = T::ZERO;
        }
        let b = random_mat::<T>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let before = snapshot(&st);
        let mut rows = random_mat::<T>(&mut r, 2, n);
        rows[(0, 0)] = T::ZERO;
        rows[(1, 0)] = T::ZERO;
        let rhs = random_mat::<T>(&mut r, 2, q);
        assert_slide_refuses_drops(&mut st, rows.as_ref(), rhs.as_ref());
        // dropping the only rows that carry column 0
        let e = st.slide(rows.as_ref(), rhs.as_ref(), 2).unwrap_err();
        match kind {
            StateKind::NoneBare => assert!(matches!(e, Error::NeedsData { .. }), "{e}"),
            _ => assert!(
                matches!(
                    e,
                    Error::DowndateFailed { .. } | Error::RankDeficient { .. }
                ),
                "{kind:?}: {e}"
            ),
        }
        st.set_params(UpdateParams {
            forget: 0.0,
            ..UpdateParams::default()
        });
        let e = st.slide(rows.as_ref(), rhs.as_ref(), 0).unwrap_err();
        assert!(
            matches!(e, Error::InvalidParam { what: "forget", .. }),
            "{e}"
        );
        assert_eq!(snapshot(&st), before, "{kind:?}");
        assert!(!st.is_poisoned());
    }
}

#[test]
fn gpu_slide_errors_f64() {
    slide_errors::<f64>();
}
#[test]
fn gpu_slide_errors_f32() {
    slide_errors::<f32>();
}

fn verbs<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    for kind in ALL_KINDS {
        let mut r = rng(13);
        let (m, n, q) = (203, 17, 2);
        let a = random_mat::<T>(&mut r, m, n);
        let b = random_mat::<T>(&mut r, m, q);
        for k in [1usize, 3, 17] {
            let mut st = kind.gpu(&g, &a, &b);
            let u = random_mat::<T>(&mut r, m, k);
            let v = random_mat::<T>(&mut r, n, k);
            let what = format!("{kind:?} rank_k {k}");
            rank_k_step(&mut st, kind, (&a, &b), (&u, &v), None, &what);
        }
        for (k0, p) in [(0, 1), (5, 4), (13, 4)] {
            let mut st = kind.gpu(&g, &a, &b);
            let u = random_mat::<T>(&mut r, m, p);
            let what = format!("{kind:?} replace {k0}");
            replace_cols_step(&mut st, kind, (&a, &b), k0, &u, &what);
        }
        // every move is a real one (from ≠ to): the kinds without Q or data refuse each
        for (from, to) in [(0, 16), (16, 0), (4, 9)] {
            let mut st = kind.gpu(&g, &a, &b);
            let what = format!("{kind:?} shift {from}->{to}");
            shift_col_step(&mut st, kind, (&a, &b), (from, to), &what);
        }
        // a dependent replacement is refused; the state is unchanged
        let mut st = kind.gpu(&g, &a, &b);
        let before = snapshot(&st);
        if kind.capable() {
            let dup = Mat::<T>::from_fn(m, 1, |i, _| a[(i, 1)]);
            let e = st.replace_cols(7, dup.as_ref()).unwrap_err();
            assert!(matches!(e, Error::RankDeficient { .. }), "{kind:?}: {e}");
        }
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}

#[test]
fn gpu_verbs_f64() {
    verbs::<f64>();
}
#[test]
fn gpu_verbs_f32() {
    verbs::<f32>();
}

/// Drift control with a zero threshold refreshes at every check, and the refreshed state
/// still represents the data.
fn drift<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    for kind in ALL_KINDS {
        let mut r = rng(17);
        let (m, n, q) = (150, 12, 1);
        let a = random_mat::<T>(&mut r, m, n);
        let b = random_mat::<T>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let mut model = Model::new(&a, &b);
        let case = DriftCase {
            check_every: 2,
            steps: 5,
            rows: 3,
        };
        drift_refreshes_run(&mut st, kind, &mut model, &mut r, &case);
    }
}

#[test]
fn gpu_drift_f64() {
    drift::<f64>();
}
#[test]
fn gpu_drift_f32() {
    drift::<f32>();
}

/// 1,000 window steps of 4 rows on 5,000×30 (f64): Q₁ orthonormal and QR = A within 100·m·u,
/// RᵀR = AᵀA within 100·m·u·‖A‖², x within the least-squares bound.
#[test]
fn gpu_long_window() {
    let Some(g) = shared_gpu() else { return };
    for kind in [StateKind::Thin, StateKind::NoneKeep] {
        let mut r = rng(23);
        let (m, n, q, p) = (5000, 30, 1, 4);
        let a = random_mat::<f64>(&mut r, m, n);
        let b = random_mat::<f64>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let mut am = a.clone();
        let mut bm = b.clone();
        for _ in 0..1000 {
            let rows = random_mat::<f64>(&mut r, p, n);
            let rhs = random_mat::<f64>(&mut r, p, q);
            st.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
            am = Mat::from_fn(m, n, |i, j| {
                if i < m - p {
                    am[(i + p, j)]
                } else {
                    rows[(i + p - m, j)]
                }
            });
            bm = Mat::from_fn(m, q, |i, j| {
                if i < m - p {
                    bm[(i + p, j)]
                } else {
                    rhs[(i + p - m, j)]
                }
            });
        }
        let dg = diagnostics(&st, am.as_ref(), bm.as_ref()).unwrap();
        assert_long_window_accuracy(&dg, kind, m, 1e4 * n as f64 * f64::UNIT_ROUNDOFF);
        for (mine, fresh) in dg.residual {
            assert!(
                (mine - fresh).abs() <= 1e-8 * fresh,
                "{kind:?}: residual {mine} vs {fresh}"
            );
        }
    }
}

/// A leaving row of leverage near 1 (it alone carries most of column 0): the thin step takes
/// the composed path with the explicit completion, the R-only step its Householder fallback
/// when the new rows carry the direction instead. Both against the model.
fn slide_high_leverage<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    for kind in [StateKind::Thin, StateKind::NoneKeep, StateKind::Full] {
        let mut r = rng(29);
        let (m, n, q) = (120, 7, 1);
        let mut a = random_mat::<T>(&mut r, m, n);
        a[(0, 0)] = T::from_f64(300.0);
        let b = random_mat::<T>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let mut model = Model::new(&a, &b);
        let mut rows = random_mat::<T>(&mut r, 2, n);
        rows[(1, 0)] = T::from_f64(250.0);
        let rhs = random_mat::<T>(&mut r, 2, q);
        st.slide(rows.as_ref(), rhs.as_ref(), 2)
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        model.delete_rows(0, 2);
        let mm = model.m();
        model.insert_rows(mm, &rows, &rhs);
        check_state(&st, &model).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
}

#[test]
fn gpu_slide_high_leverage_f64() {
    slide_high_leverage::<f64>();
}
#[test]
fn gpu_slide_high_leverage_f32() {
    slide_high_leverage::<f32>();
}

/// The drift estimate of a GPU state agrees with the CPU backend's on the same state (same
/// sample): both at the level of rounding, neither exactly zero for these random data.
#[test]
fn gpu_drift_estimate_matches_cpu() {
    let Some(g) = shared_gpu() else { return };
    for kind in [StateKind::Thin, StateKind::NoneKeep, StateKind::Full] {
        let mut r = rng(31);
        let (m, n, q) = (150, 12, 1);
        let a = random_mat::<f64>(&mut r, m, n);
        let b = random_mat::<f64>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let mut cpu = st.to_cpu().unwrap();
        let e_gpu = st.check_drift().unwrap().estimate.unwrap();
        let e_cpu = cpu.check_drift().unwrap().estimate.unwrap();
        assert!(
            e_gpu > 0.0 && e_cpu > 0.0 && e_gpu < 1e-12 && e_cpu < 1e-12,
            "{kind:?}: gpu {e_gpu:e}, cpu {e_cpu:e}"
        );
    }
}

/// The R-only kind's kept rows stay in place across window steps (a taller buffer with room)
/// and are moved back before any other update: 40 steps of 3 rows (the buffers move a few
/// times), then a column insertion, a row deletion and a rank-one change, a copy to the host
/// and a clone, each against the model.
fn ring_then_other_updates<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    let mut r = rng(37);
    let (m, n, q) = (200, 9, 2);
    let a = random_mat::<T>(&mut r, m, n);
    let b = random_mat::<T>(&mut r, m, q);
    let mut st = StateKind::NoneKeep.gpu(&g, &a, &b);
    st.set_params(UpdateParams {
        forget: 0.95,
        ..UpdateParams::default()
    });
    let mut model = Model::new(&a, &b);
    for step in 0..40 {
        let rows = random_mat::<T>(&mut r, 3, n);
        let rhs = random_mat::<T>(&mut r, 3, q);
        st.slide(rows.as_ref(), rhs.as_ref(), 3).unwrap();
        model.delete_rows(0, 3);
        scale_model(&mut model, 0.95f64.sqrt());
        let mm = model.m();
        model.insert_rows(mm, &rows, &rhs);
        if step % 13 == 0 {
            check_state(&st, &model).unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }
    let kept_a = st.a_dev().unwrap().to_host(&g).unwrap();
    let want: Mat<T> = Mat::from_fn(m, n, |i, j| T::from_f64(model.a[(i, j)]));
    let worst = (0..n)
        .flat_map(|j| (0..m).map(move |i| (i, j)))
        .map(|(i, j)| (kept_a[(i, j)].to_f64() - want[(i, j)].to_f64()).abs())
        .fold(0.0f64, f64::max);
    assert!(worst <= 100.0 * T::UNIT_ROUNDOFF, "kept A off by {worst:e}");
    let cpu = st.to_cpu().unwrap();
    check_state(&cpu, &model).unwrap_or_else(|e| panic!("to_cpu: {e}"));
    let clone = st.try_clone().unwrap();
    check_state(&clone, &model).unwrap_or_else(|e| panic!("clone: {e}"));
    let u = random_mat::<T>(&mut r, m, 2);
    st.insert_cols(4, u.as_ref()).unwrap();
    model.insert_cols(4, &u);
    check_state(&st, &model).unwrap_or_else(|e| panic!("insert_cols: {e}"));
    st.delete_rows(17, 5).unwrap();
    model.delete_rows(17, 5);
    check_state(&st, &model).unwrap_or_else(|e| panic!("delete_rows: {e}"));
    let (uu, vv) = (
        random_mat::<T>(&mut r, m - 5, 1),
        random_mat::<T>(&mut r, n + 2, 1),
    );
    st.rank_one(uu.col(0), vv.col(0)).unwrap();
    model.rank_one(uu.col(0), vv.col(0));
    check_state(&st, &model).unwrap_or_else(|e| panic!("rank_one: {e}"));
}

#[test]
fn gpu_ring_then_other_updates_f64() {
    ring_then_other_updates::<f64>();
}
#[test]
fn gpu_ring_then_other_updates_f32() {
    ring_then_other_updates::<f32>();
}

/// `slide_device` (rows already on the device) gives what `slide` gives, for every kind (the
/// full kind through the host path), and refuses a non-finite row with the state unchanged.
fn slide_device_matches<T: GpuScalar>() {
    let Some(g) = shared_gpu() else { return };
    for kind in [StateKind::Thin, StateKind::NoneKeep, StateKind::Full] {
        let mut r = rng(41);
        let (m, n, q) = (260, 11, 2);
        let a = random_mat::<T>(&mut r, m, n);
        let b = random_mat::<T>(&mut r, m, q);
        let mut st = kind.gpu(&g, &a, &b);
        let mut model = Model::new(&a, &b);
        for step in 0..4 {
            let rows = random_mat::<T>(&mut r, 5, n);
            let rhs = random_mat::<T>(&mut r, 5, q);
            let (rd, ed) = (
                cuqr::DevMat::from_host(&g, rows.as_ref()).unwrap(),
                cuqr::DevMat::from_host(&g, rhs.as_ref()).unwrap(),
            );
            st.slide_device(&rd.view(), &ed.view(), 5)
                .unwrap_or_else(|e| panic!("{kind:?} step {step}: {e}"));
            model.delete_rows(0, 5);
            let mm = model.m();
            model.insert_rows(mm, &rows, &rhs);
            check_state(&st, &model).unwrap_or_else(|e| panic!("{kind:?} step {step}: {e}"));
        }
        let before = snapshot(&st);
        let mut bad = random_mat::<T>(&mut r, 5, n);
        bad[(3, 7)] = T::from_f64(f64::INFINITY);
        let (rd, ed) = (
            cuqr::DevMat::from_host(&g, bad.as_ref()).unwrap(),
            cuqr::DevMat::from_host(&g, random_mat::<T>(&mut r, 5, q).as_ref()).unwrap(),
        );
        let e = st.slide_device(&rd.view(), &ed.view(), 5).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NonFinite {
                    what: "rows",
                    row: 3,
                    col: 7,
                    ..
                }
            ),
            "{kind:?}: {e}"
        );
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}

#[test]
fn gpu_slide_device_f64() {
    slide_device_matches::<f64>();
}
#[test]
fn gpu_slide_device_f32() {
    slide_device_matches::<f32>();
}

/// A long run of one-row window steps on 252×5 (the rolling-regression shape), f64, with
/// drift control on (the default: a check every 32 updates, a refresh past the threshold):
/// device memory in use is the same to the byte at every checkpoint after the first, and
/// at each checkpoint the state agrees with the window's data within the long-window
/// bounds. `CUQR_SOAK_STEPS` sets the steps per kind (default 4,000; the soak on the GPU
/// machine runs 10⁶), `CUQR_SOAK_KIND` (`thin` or `none`) keeps one kind.
#[test]
fn gpu_soak_window() {
    let Some(g) = shared_gpu() else { return };
    let steps: usize = std::env::var("CUQR_SOAK_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4_000);
    let only = std::env::var("CUQR_SOAK_KIND").ok();
    if g.memory_in_use().unwrap().is_none() {
        eprintln!("skipped: no stream-ordered allocator to measure memory with");
        return;
    }
    let (m, n) = (252, 5);
    let checkpoints = 10;
    for (kind, name) in [(StateKind::Thin, "thin"), (StateKind::NoneKeep, "none")] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut r = rng(0x50A4);
        let a = random_mat::<f64>(&mut r, m, n);
        let b = random_mat::<f64>(&mut r, m, 1);
        let mut st = kind.gpu(&g, &a, &b);
        let mut rows: std::collections::VecDeque<(Vec<f64>, f64)> = (0..m)
            .map(|i| ((0..n).map(|j| a[(i, j)]).collect(), b[(i, 0)]))
            .collect();
        let mut level = None;
        let started = std::time::Instant::now();
        for step in 1..=steps {
            let row = random_mat::<f64>(&mut r, 1, n);
            let rhs = random_mat::<f64>(&mut r, 1, 1);
            st.slide(row.as_ref(), rhs.as_ref(), 1).unwrap();
            rows.pop_front();
            rows.push_back(((0..n).map(|j| row[(0, j)]).collect(), rhs[(0, 0)]));
            if step % (steps / checkpoints).max(1) != 0 {
                continue;
            }
            let am = Mat::from_fn(m, n, |i, j| rows[i].0[j]);
            let bm = Mat::from_fn(m, 1, |i, _| rows[i].1);
            let dg = diagnostics(&st, am.as_ref(), bm.as_ref()).unwrap();
            let report = st.drift();
            // diagnostics' own buffers are gone once it returns
            let used = g.memory_in_use().unwrap().expect("measured above");
            println!(
                "soak {name}: step {step}: {used} bytes in use, e_gram {:.2e}, e_x {:.2e}, \
                 drift checks {} refreshes {}, {:.1} µs a step",
                dg.e_gram,
                dg.e_x,
                report.checks,
                report.refreshes,
                started.elapsed().as_secs_f64() * 1e6 / step as f64
            );
            assert_long_window_accuracy(&dg, kind, m, 1e4 * n as f64 * f64::UNIT_ROUNDOFF);
            match level {
                None => level = Some(used),
                Some(l) => assert_eq!(used, l, "{name}: device memory moved at step {step}"),
            }
        }
    }
}
