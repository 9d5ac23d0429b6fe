//! Accuracy diagnostics of a factorisation state against the matrix it represents
//! (docs/algorithms.md#accuracy-measures): e_Q, e_A (relative to ‖Ã‖,
//! docs/algorithms.md#backward-error-normalisation), ‖L‖, e_gram, e_x against a fresh f64
//! factorisation (docs/algorithms.md#solution-error-reference) and residuals.
//! Everything is computed in f64; cost O(m³) with Q (QᵀQ), O(mn²) without.
#![forbid(unsafe_code)]

use crate::backend::QrUpdate;
use crate::base::dims::check_shapes;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy};
use crate::base::scalar::Scalar;
use crate::base::solution::Diagnostics;
use crate::state::cpu::CpuQr;

const OP: &str = "diagnostics";

fn to_f64<T: Scalar>(a: MatRef<'_, T>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j).to_f64())
}

/// Measures how well `state` represents A = `a` (m×n) with right-hand sides `b` (m×q)
/// (docs/algorithms.md#accuracy-measures): e_Q = ‖QᵀQ − I‖_F and e_A = ‖QR − A‖_F/‖A‖_F (both
/// `None` without Q), ‖L‖_F of R's strictly lower part, e_gram = ‖RᵀR − AᵀA‖_F/‖A‖_F², e_x = maxⱼ
/// ‖xⱼ − x̂ⱼ‖/‖x̂ⱼ‖ with x̂ from a fresh `CpuQr<f64>` factorisation of (A, b), and the
/// pairs (state residual, fresh residual). All norms in f64.
///
/// # Errors
/// [`Error::Shape`](crate::Error::Shape) if `a` is not m×n or `b` not m×q for the state's m, n, q; errors of
/// the state's `r`/`q`/`d`/`solve`; errors of the fresh factorisation
/// ([`Error::NonFinite`](crate::Error::NonFinite), [`Error::RankDeficient`](crate::Error::RankDeficient)).
///
/// # Examples
/// ```
/// use cuqr::{diagnostics, CpuQr, FactorParams, Mat, QPolicy};
/// let a = Mat::<f64>::from_fn(9, 4, |i, j| ((3 * i + 5 * j) % 7) as f64 - 3.0 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(9, 1, |i, _| i as f64);
/// let st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// let dg = diagnostics(&st, a.as_ref(), b.as_ref()).unwrap();
/// assert!(dg.e_q.unwrap() < 1e-13 && dg.e_a.unwrap() < 1e-13 && dg.l_norm == 0.0);
/// ```
pub fn diagnostics<T: Scalar>(
    state: &dyn QrUpdate<T>,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
) -> Result<Diagnostics> {
    let (m, n, q) = (state.nrows(), state.ncols(), state.nrhs());
    check_shapes(
        OP,
        [
            ("rows of A", a.nrows(), m),
            ("columns of A", a.ncols(), n),
            ("rows of b", b.nrows(), m),
            ("columns of b", b.ncols(), q),
        ],
    )?;
    let r = state.r()?;
    let r64 = to_f64(r.as_ref());
    let a64 = to_f64(a);
    let b64 = to_f64(b);
    let a_norm = a64.norm_fro();
    let rel = |x: f64, s: f64| if s > 0.0 { x / s } else { x };

    // ‖L‖: strictly lower part of R.
    let lower: Vec<f64> = (0..n)
        .flat_map(|j| r64.col(j)[(j + 1).min(m)..].to_vec())
        .collect();
    let l_norm = Mat::from_col(&lower).norm_fro();

    // e_Q, e_A.
    let (e_q, e_a) = match state.q()? {
        Some(qm) => {
            let q64 = to_f64(qm.as_ref());
            let mut qtq = q64.transpose().matmul(&q64);
            for i in 0..qtq.nrows() {
                qtq[(i, i)] -= 1.0;
            }
            let mut res = q64.matmul(&r64);
            for j in 0..n {
                for i in 0..m {
                    res[(i, j)] -= a64[(i, j)];
                }
            }
            (Some(qtq.norm_fro()), Some(rel(res.norm_fro(), a_norm)))
        }
        None => (None, None),
    };

    // e_gram = ‖RᵀR − AᵀA‖/‖A‖².
    let mut gram = r64.transpose().matmul(&r64);
    let ata = a64.transpose().matmul(&a64);
    for j in 0..n {
        for i in 0..n {
            gram[(i, j)] -= ata[(i, j)];
        }
    }
    let e_gram = rel(gram.norm_fro(), a_norm * a_norm);

    // e_x and residuals against a fresh f64 factorisation.
    let sol = state.solve()?;
    let fresh = CpuQr::<f64>::factorize(
        a64.as_ref(),
        b64.as_ref(),
        QPolicy::None,
        FactorParams::default(),
    )?;
    let fresh_sol = fresh.solve()?;
    let mut e_x = 0.0f64;
    let mut residual = Vec::with_capacity(q);
    for c in 0..q {
        let diff: Vec<f64> = (0..n)
            .map(|i| sol.x[(i, c)].to_f64() - fresh_sol.x[(i, c)])
            .collect();
        let e = rel(
            Mat::from_col(&diff).norm_fro(),
            Mat::from_col(fresh_sol.x.col(c)).norm_fro(),
        );
        e_x = e_x.max(e);
        residual.push((sol.residual_norms[c], fresh_sol.residual_norms[c]));
    }
    Ok(Diagnostics {
        e_q,
        e_a,
        l_norm,
        e_x,
        e_gram,
        residual,
        drift: state.drift(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Error;
    use crate::ops::factorize::tests::rand_mat;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn check<T: Scalar>(seed: u64, m: usize, n: usize, q: usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, q);
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        for policy in [QPolicy::Full, QPolicy::None] {
            let st =
                CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
            let dg = diagnostics(&st, a.as_ref(), b.as_ref()).unwrap();
            assert_eq!(dg.l_norm, 0.0);
            assert!(dg.e_gram <= tol, "e_gram {:e}", dg.e_gram);
            assert_eq!(dg.residual.len(), q);
            for &(r1, r2) in &dg.residual {
                assert!((r1 - r2).abs() <= tol * b.norm_fro().max(1.0), "{r1} {r2}");
            }
            // Random square-ish matrices are modestly conditioned: e_x ≤ 10·κ·u with κ ≲ 10³.
            assert!(dg.e_x <= 1e4 * tol, "e_x {:e}", dg.e_x);
            match policy {
                QPolicy::Full => {
                    assert!(dg.e_q.unwrap() <= tol && dg.e_a.unwrap() <= tol);
                }
                _ => assert!(dg.e_q.is_none() && dg.e_a.is_none()),
            }
        }
        // A corrupted R is noticed: ‖L‖ and e_A grow.
        let mut st = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .unwrap();
        if m > 1 {
            st.r[(m - 1, 0)] = T::ONE;
            let dg = diagnostics(&st, a.as_ref(), b.as_ref()).unwrap();
            assert!(dg.l_norm == 1.0 && dg.e_a.unwrap() > 1e-3);
        }
    }

    #[test]
    fn diagnostics_of_fresh_factorisations() {
        check::<f64>(1, 33, 31, 2);
        check::<f64>(2, 127, 33, 1);
        check::<f32>(3, 127, 31, 2);
        check::<f32>(4, 1, 1, 1);
    }

    #[test]
    fn diagnostics_shape_errors() {
        let mut rng = StdRng::seed_from_u64(8);
        let a = rand_mat::<f64>(&mut rng, 9, 4);
        let b = rand_mat::<f64>(&mut rng, 9, 2);
        let st = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .unwrap();
        let a2 = rand_mat::<f64>(&mut rng, 9, 5);
        let b2 = rand_mat::<f64>(&mut rng, 9, 1);
        assert!(matches!(
            diagnostics(&st, a2.as_ref(), b.as_ref()),
            Err(Error::Shape {
                got: 5,
                expected: 4,
                ..
            })
        ));
        assert!(matches!(
            diagnostics(&st, a.as_ref(), b2.as_ref()),
            Err(Error::Shape {
                got: 1,
                expected: 2,
                ..
            })
        ));
    }
}
