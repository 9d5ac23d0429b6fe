//! The CPU side of the composed updates' hooks (docs/algorithms.md#drift-control): A and b
//! rebuilt from the factors, A + UVᵀ, the drift estimates and the product of a
//! reorthogonalisation. The hooks themselves (`ops/compose/cpu.rs`) pick the state's parts.
#![forbid(unsafe_code)]

use crate::base::mat::{Mat, MatRef};
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;

/// A = Q₁·R₁ (m×n) from Q (m×m or the m×n Q₁) and R, and b: the kept `b` where given,
/// else Q·d.
pub(crate) fn data_from_q<T: Scalar>(
    q: &Mat<T>,
    r: &Mat<T>,
    d: &Mat<T>,
    kept_b: Option<&Mat<T>>,
) -> (Mat<T>, Mat<T>) {
    let (m, n) = (q.nrows(), r.ncols());
    let q1 = Mat::from_fn(m, n, |i, j| q[(i, j)]);
    let r1 = Mat::from_fn(n, n, |i, j| r[(i, j)]);
    let a = q1.matmul(&r1);
    let b = match kept_b {
        Some(b) => b.clone(),
        None => q.matmul(d),
    };
    (a, b)
}

/// Column `j` of A = Q·R (m entries).
pub(crate) fn column_from_q<T: Scalar>(q: &Mat<T>, r: &Mat<T>, j: usize) -> Vec<T> {
    let m = q.nrows();
    (0..m)
        .map(|i| (0..=j.min(m - 1)).fold(T::ZERO, |s, k| q[(i, k)].mul_add(r[(k, j)], s)))
        .collect()
}

/// A += U·Vᵀ (U m×k, V n×k).
pub(crate) fn add_product<T: Scalar>(a: &mut Mat<T>, u: MatRef<'_, T>, v: MatRef<'_, T>) {
    let (m, n, k) = (a.nrows(), a.ncols(), u.ncols());
    for j in 0..n {
        for i in 0..m {
            a[(i, j)] = (0..k).fold(a[(i, j)], |s, c| u.get(i, c).mul_add(v.get(j, c), s));
        }
    }
}

/// A sample of ‖QᵀQ − I‖_F: the rows `cols` of QᵀQ − I, scaled to all of Q's columns, in f64.
pub(crate) fn q_drift<T: Scalar>(q: &Mat<T>, cols: &[usize]) -> f64 {
    let (m, k) = (q.nrows(), q.ncols());
    let mut sum = 0.0f64;
    for &c in cols {
        let qc = q.col(c);
        for j in 0..k {
            let dot: f64 = (0..m).map(|i| qc[i].to_f64() * q[(i, j)].to_f64()).sum();
            let e = dot - f64::from(u8::from(j == c));
            sum += e * e;
        }
    }
    (sum * k as f64 / cols.len() as f64).sqrt()
}

/// ‖Aᵀ(Az) − Rᵀ(Rz)‖/(‖R‖_F²‖z‖) for the probe z: a sample of ‖AᵀA − RᵀR‖/‖A‖², in f64.
pub(crate) fn gram_drift<T: Scalar>(a: &Mat<T>, r: &Mat<T>, z: &[f64]) -> f64 {
    let (m, n) = (a.nrows(), a.ncols());
    let az: Vec<f64> = (0..m)
        .map(|i| (0..n).map(|j| a[(i, j)].to_f64() * z[j]).sum())
        .collect();
    let rz: Vec<f64> = (0..n)
        .map(|i| (i..n).map(|j| r[(i, j)].to_f64() * z[j]).sum())
        .collect();
    let diff2: f64 = (0..n)
        .map(|j| {
            let ata: f64 = (0..m).map(|i| a[(i, j)].to_f64() * az[i]).sum();
            let rtr: f64 = (0..=j).map(|i| r[(i, j)].to_f64() * rz[i]).sum();
            (ata - rtr).powi(2)
        })
        .sum();
    let zn = z.iter().map(|x| x * x).sum::<f64>().sqrt();
    let r2 = r.norm_fro().powi(2);
    if r2 > 0.0 {
        diff2.sqrt() / (r2 * zn)
    } else {
        0.0
    }
}

/// R and d after a reorthogonalisation Q = Q′·R₂ (R₂ the k×k leading block of `fresh_r`,
/// k = Q's columns): R₂R with its zeros below the diagonal exact, and R₂d (full kind) or
/// the fresh d = Q′ᵀb.
pub(crate) fn reorthogonalized<T: Scalar>(
    policy: QPolicy,
    r: &Mat<T>,
    d: &Mat<T>,
    fresh_r: &Mat<T>,
    fresh_d: &Mat<T>,
    k: usize,
) -> (Mat<T>, Mat<T>) {
    let n = r.ncols();
    let r2 = match policy {
        QPolicy::Full => fresh_r.clone(),
        _ => Mat::from_fn(k, k, |i, j| fresh_r[(i, j)]),
    };
    let mut r_new = r2.matmul(r);
    // R₂R is upper triangular in exact arithmetic; keep its zeros exact
    for j in 0..n {
        for i in j + 1..r_new.nrows() {
            r_new[(i, j)] = T::ZERO;
        }
    }
    let d_new = match policy {
        QPolicy::Full => r2.matmul(d),
        _ => fresh_d.clone(),
    };
    (r_new, d_new)
}
