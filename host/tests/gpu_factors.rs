//! States built from factors computed elsewhere (docs/algorithms.md#states-from-factors) on
//! both backends: each kind from the Q and R of a factorisation, then a sequence of updates,
//! against the f64 faer model of the changed matrix (tolerances of `host/tests/common/model.rs`); the
//! validation errors; and the device copy of foreign memory in column- and row-major
//! layouts. Without a GPU the GPU tests print "skipped"; `CUQR_REQUIRE_GPU=1` makes that a
//! failure.

mod common;

use std::sync::Arc;

use common::{
    eps, exceeds, normalise_row_signs, random_mat, random_vec, rng, singular_values, to_faer, Model,
};
use cuqr::{
    CpuQr, DevMat, Error, FactorParams, FactorsParams, Gpu, GpuQr, GpuScalar, Mat, QPolicy,
    QrUpdate,
};

const KINDS: [QPolicy; 3] = [QPolicy::Full, QPolicy::Thin, QPolicy::None];

/// Q (or none) and R of A from cuqr's CPU factorisation, R's strictly lower part filled
/// with garbage that `from_factors` must ignore.
fn factors<T: GpuScalar>(a: &Mat<T>, policy: QPolicy) -> (Option<Mat<T>>, Mat<T>) {
    let b = Mat::<T>::zeros(a.nrows(), 1);
    let st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
    let (q, mut r) = st.into_factors();
    for j in 0..r.ncols() {
        for i in j + 1..r.nrows() {
            r[(i, j)] = T::from_f64(1e3 + i as f64);
        }
    }
    (q, r)
}

/// The state against the model: R against faer's R of the model's A up to row signs (the
/// R tolerance of `host/tests/common/model.rs`, 2√(2n)·κ·ε·‖A‖), and with Q, e_Q = ‖QᵀQ − I‖_F ≤ √c·ε and
/// e_A = ‖QR − A‖_F/‖A‖_F ≤ ε (ε = 10·m·u). The right-hand side is b = 0, so x is not checked.
fn check_state<T: GpuScalar>(st: &dyn QrUpdate<T>, model: &Model) -> Result<(), String> {
    let a = &model.a;
    let (m, n) = (a.nrows(), a.ncols());
    if (st.nrows(), st.ncols()) != (m, n) {
        return Err(format!(
            "dims {:?}, model {:?}",
            (st.nrows(), st.ncols()),
            (m, n)
        ));
    }
    let e = eps::<T>(m);
    let r = to_faer(&st.r().map_err(|e| e.to_string())?);
    let r_ref = a.qr().R().to_owned();
    let s = singular_values(a);
    let (kappa, a_norm) = (s[0] / s[n - 1], s[0]);
    let d = (&normalise_row_signs(&r, n) - &normalise_row_signs(&r_ref, n)).norm_l2();
    let tol = 2.0 * (2.0 * n as f64).sqrt() * kappa * e * a_norm;
    if exceeds(d, tol) {
        return Err(format!("‖R − R_ref‖ = {d:e} > {tol:e}"));
    }
    if let Some(q) = st.q().map_err(|e| e.to_string())? {
        let q = to_faer(&q);
        let c = q.ncols();
        let e_q = (q.transpose() * &q - faer::Mat::<f64>::identity(c, c)).norm_l2();
        if exceeds(e_q, (c as f64).sqrt() * e) {
            return Err(format!("e_Q = {e_q:e}"));
        }
        let rr = r.subrows(0, c);
        let e_a = (&q * rr - a).norm_l2() / a.norm_l2();
        if exceeds(e_a, e) {
            return Err(format!("e_A = {e_a:e}"));
        }
    }
    Ok(())
}

/// Row insertion, column deletion, then (with Q) rank-one, row deletion and column
/// insertion, checked against the model after each.
fn run_sequence<T: GpuScalar>(st: &mut dyn QrUpdate<T>, a: &Mat<T>, seed: u64) {
    let mut g = rng(seed);
    let (m, n) = (a.nrows(), a.ncols());
    let mut model = Model::new(a, &Mat::<T>::zeros(m, 1));
    let with_q = st.q_policy() != QPolicy::None;
    let rows = random_mat::<T>(&mut g, 3, n);
    let zeros = Mat::<T>::zeros(3, 1);
    st.insert_rows(m / 2, rows.as_ref(), zeros.as_ref())
        .unwrap();
    model.insert_rows(m / 2, &rows, &zeros);
    check_state(st, &model).unwrap();
    st.delete_cols(4, 2).unwrap();
    model.delete_cols(4, 2);
    check_state(st, &model).unwrap();
    if with_q {
        let (u, v) = (
            random_vec::<T>(&mut g, m + 3),
            random_vec::<T>(&mut g, n - 2),
        );
        st.rank_one(&u, &v).unwrap();
        model.rank_one(&u, &v);
        check_state(st, &model).unwrap();
        st.delete_rows(7, 4).unwrap();
        model.delete_rows(7, 4);
        check_state(st, &model).unwrap();
        let c = random_mat::<T>(&mut g, m - 1, 2);
        st.insert_cols(1, c.as_ref()).unwrap();
        model.insert_cols(1, &c);
        check_state(st, &model).unwrap();
    }
}

fn cpu_kind<T: GpuScalar>(policy: QPolicy, seed: u64) {
    let (m, n) = (157, 23);
    let a = random_mat::<T>(&mut rng(seed), m, n);
    let (q, r) = factors(&a, policy);
    let mut st = CpuQr::from_factors(
        policy,
        m,
        q.as_ref().map(|q| q.as_ref()),
        r.as_ref(),
        FactorsParams::default(),
    )
    .unwrap();
    assert_eq!((st.nrows(), st.ncols(), st.nrhs()), (m, n, 1));
    run_sequence(&mut st, &a, seed + 1);
}

#[test]
fn cpu_states_from_factors_update_like_factorised_ones() {
    for (i, policy) in KINDS.into_iter().enumerate() {
        cpu_kind::<f64>(policy, 10 + i as u64);
        cpu_kind::<f32>(policy, 20 + i as u64);
    }
}

#[test]
fn cpu_from_factors_validates() {
    let a = random_mat::<f64>(&mut rng(3), 30, 6);
    let (q, r) = factors(&a, QPolicy::Full);
    let (q, r) = (q.unwrap(), r);
    let p = FactorsParams::default();
    let err = CpuQr::from_factors(QPolicy::Thin, 30, Some(q.as_ref()), r.as_ref(), p);
    assert!(matches!(err, Err(Error::Shape { .. })), "{err:?}");
    let err = CpuQr::<f64>::from_factors(QPolicy::Full, 30, None, r.as_ref(), p);
    assert!(matches!(err, Err(Error::NeedsQ { .. })), "{err:?}");
    let mut bad = q.clone();
    bad[(4, 9)] = f64::NAN;
    let err = CpuQr::from_factors(QPolicy::Full, 30, Some(bad.as_ref()), r.as_ref(), p);
    assert!(
        matches!(
            err,
            Err(Error::NonFinite {
                what: "Q",
                row: 4,
                col: 9,
                ..
            })
        ),
        "{err:?}"
    );
    let mut bad_r = r.clone();
    bad_r[(2, 5)] = f64::INFINITY;
    let err = CpuQr::from_factors(QPolicy::Full, 30, Some(q.as_ref()), bad_r.as_ref(), p);
    assert!(
        matches!(err, Err(Error::NonFinite { what: "R", .. })),
        "{err:?}"
    );
    // without the scan the factors are taken as they are
    let lax = FactorsParams {
        check_finite: false,
        ..p
    };
    assert!(CpuQr::from_factors(QPolicy::Full, 30, Some(bad.as_ref()), r.as_ref(), lax).is_ok());
    // an R-only state's m may not be below n
    let (_, r1) = factors(&a, QPolicy::None);
    let err = CpuQr::<f64>::from_factors(QPolicy::None, 5, None, r1.as_ref(), p);
    assert!(matches!(err, Err(Error::Underdetermined { .. })), "{err:?}");
}

fn gpu_kind<T: GpuScalar>(gpu: &Arc<Gpu>, policy: QPolicy, seed: u64) {
    let (m, n) = (157, 23);
    let a = random_mat::<T>(&mut rng(seed), m, n);
    let (q, r) = factors(&a, policy);
    let q = q.map(|q| DevMat::from_host(gpu, q.as_ref()).unwrap());
    let r = DevMat::from_host(gpu, r.as_ref()).unwrap();
    let mut st = GpuQr::from_factors(gpu, policy, m, q, r, FactorsParams::default()).unwrap();
    run_sequence(&mut st, &a, seed + 1);
    let (q1, r1) = st.into_factors();
    assert_eq!(q1.is_some(), policy != QPolicy::None);
    assert_eq!(
        r1.ncols(),
        n - 2 + if policy == QPolicy::None { 0 } else { 2 }
    );
}

#[test]
fn gpu_states_from_factors_update_like_factorised_ones() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (i, policy) in KINDS.into_iter().enumerate() {
        gpu_kind::<f64>(&gpu, policy, 30 + i as u64);
        gpu_kind::<f32>(&gpu, policy, 40 + i as u64);
    }
}

#[test]
fn gpu_from_factors_scans_on_the_device() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let a = random_mat::<f64>(&mut rng(5), 40, 7);
    let (q, r) = factors(&a, QPolicy::Thin);
    let mut bad = q.unwrap();
    bad[(11, 3)] = f64::NAN;
    let err = GpuQr::from_factors(
        &gpu,
        QPolicy::Thin,
        40,
        Some(DevMat::from_host(&gpu, bad.as_ref()).unwrap()),
        DevMat::from_host(&gpu, r.as_ref()).unwrap(),
        FactorsParams::default(),
    );
    assert!(
        matches!(
            err,
            Err(Error::NonFinite {
                what: "Q",
                row: 11,
                col: 3,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn gpu_copies_foreign_column_and_row_major_memory() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (rows, cols) = (37, 13);
    let x = random_mat::<f64>(&mut rng(6), rows, cols);
    // column-major with a padded leading dimension: the DevMat's own layout
    let src = DevMat::from_host(&gpu, x.as_ref()).unwrap();
    let ptr = src.device_address(&gpu);
    // SAFETY: `src` holds rows × cols with leading dimension ld on this device and is not
    // written while the copy runs (the stream is waited for by to_host below).
    let c =
        unsafe { DevMat::<f64>::copy_from_foreign(&gpu, ptr, rows, cols, 1, src.ld() as isize) }
            .unwrap();
    assert_eq!(c.to_host(&gpu).unwrap(), x);
    // row-major: the transpose stored column-major is x in row-major order
    let xt = DevMat::from_host(&gpu, x.transpose().as_ref()).unwrap();
    let ptr = xt.device_address(&gpu);
    // SAFETY: as above: element (i, j) of x is at i·ld + j of `xt`'s allocation.
    let c = unsafe { DevMat::<f64>::copy_from_foreign(&gpu, ptr, rows, cols, xt.ld() as isize, 1) }
        .unwrap();
    assert_eq!(c.to_host(&gpu).unwrap(), x);
    // a column of a matrix as a vector, and a strided layout that is refused
    // SAFETY: as above (column 2 of `src`: rows elements, unit stride).
    let v = unsafe {
        DevMat::<f64>::copy_from_foreign(&gpu, ptr_at(&src, &gpu, 2), rows, 1, 1, rows as isize)
    }
    .unwrap();
    assert_eq!(v.to_host(&gpu).unwrap().col(0), x.col(2));
    // SAFETY: refused before any access.
    let err = unsafe { DevMat::<f64>::copy_from_foreign(&gpu, ptr, rows, cols, 2, 100) };
    assert!(matches!(err, Err(Error::InvalidParam { .. })), "{err:?}");
}

fn ptr_at(m: &DevMat<f64>, gpu: &Gpu, col: usize) -> u64 {
    m.device_address(gpu) + (col * m.ld() * 8) as u64
}
