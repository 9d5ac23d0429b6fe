//! The CPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Factorises A = QR (A m×n, m ≥ n) and forms d = Qᵀb for the m×q right-hand sides b,
/// by blocked Householder QR (docs/algorithms.md#blocked-householder-qr): faer's kernels
/// (`cpu::blocked`) for f32 and f64. Under [`QPolicy::Full`] the explicit m×m Q is
/// formed, under [`QPolicy::Thin`] the m×n Q₁. R's strictly lower part is exactly 0.
/// The state's update block size is taken from `params.block_size`.
///
/// # Errors
/// [`Error::Shape`], [`Error::Underdetermined`] (m < n), [`Error::NonFinite`],
/// [`Error::InvalidParam`] (see `plan`), and [`Error::RankDeficient`] when some
/// |R_jj| ≤ rank_tol·‖A‖_F (default: [`default_rank_tol`]).
pub fn run_cpu<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<CpuQr<T>> {
    run_cpu_with(a, b, policy, params, true)
}

/// [`run_cpu`] on faer's kernels (`blocked`, where the type has them) or on the reference
/// `wy` loop (tests that compare bit for bit with it). faer's result is kept unless its R
/// has a non-finite diagonal or fails the rank test: the reference (which scales its
/// reflectors for subnormal and huge entries) then decides.
pub(crate) fn run_cpu_with<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
    blocked: bool,
) -> Result<CpuQr<T>> {
    let plan = plan(a, b, policy, params)?;
    let Dims { m, n, .. } = plan.dims;
    let nb = plan.block_size;
    let mut r = a.to_owned();
    let mut d = b.to_owned();
    let q_cols = match policy {
        QPolicy::Full => Some(m),
        QPolicy::Thin => Some(n),
        QPolicy::None => None,
    };
    // faer's blocked kernels for f32 and f64; the reference below for any other type
    let fast = if blocked {
        crate::cpu::blocked::householder_qr(&mut r, &mut d, q_cols, params.block_size)
    } else {
        None
    };
    let q = match fast {
        Some(q) => {
            zero_below_diagonal(&mut r, n);
            if check_rank_of(&r, n, plan.rank_tol).is_ok() {
                q
            } else {
                r = a.to_owned();
                d = b.to_owned();
                reference_factor(&mut r, &mut d, policy, plan, nb)?
            }
        }
        None => reference_factor(&mut r, &mut d, policy, plan, nb)?,
    };
    finish(a, b, policy, params, plan, r, d, q)
}

/// The reference blocked Householder QR (`cpu::wy`): R in `r`, Qᵀb in `d`, and Q (m×m, or
/// the m×n Q₁) by backward accumulation.
fn reference_factor<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    policy: QPolicy,
    plan: Plan,
    nb: usize,
) -> Result<Option<Mat<T>>> {
    let Dims { m, n, .. } = plan.dims;
    let (r, d) = (r, d);
    let keep_q = policy != QPolicy::None;
    // (j0, V, T) per block, kept only to accumulate Q.
    let mut blocks: Vec<(usize, Mat<T>, Mat<T>)> = Vec::new();

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        // Panel (level 2): reflectors stored below the diagonal of r; V (ℓ×jb, unit
        // lower trapezoidal) and the τ's.
        let (v, tau) = factor_panel(r, j0, jb);
        let t = larft(&v, &tau);
        // Block application (level 3): C −= V Tᵀ (Vᵀ C) on the trailing columns and d.
        larfb_left(&v, &t, true, r, j0, j0 + jb..n);
        larfb_left(&v, &t, true, d, j0, 0..plan.dims.q);
        if keep_q {
            blocks.push((j0, v, t));
        }
        j0 += jb;
    }
    // Exact zeros below the diagonal (docs/algorithms.md#exact-zeros-below-the-diagonal).
    zero_below_diagonal(r, n);
    check_rank_of(r, n, plan.rank_tol)?;

    Ok(match policy {
        QPolicy::Full => {
            // Backward accumulation: Q = B₁(B₂(⋯(B_K I))); B_b touches rows/columns j0.. only.
            let mut q = Mat::identity(m);
            for (j0, v, t) in blocks.iter().rev() {
                larfb_left(v, t, false, &mut q, *j0, *j0..m);
            }
            Some(q)
        }
        QPolicy::Thin => {
            // The same on [I_n; 0]: columns j < j0 are eᵢ with zeros in the rows B_b touches.
            let mut q1 = Mat::from_fn(m, n, |i, j| if i == j { T::ONE } else { T::ZERO });
            for (j0, v, t) in blocks.iter().rev() {
                larfb_left(v, t, false, &mut q1, *j0, *j0..n);
            }
            Some(q1)
        }
        _ => None,
    })
}

/// The state from the factorisation: R and d at full height under [`QPolicy::Full`], n
/// rows otherwise (with the residual norms for the R-only kind and the kept data).
#[allow(clippy::too_many_arguments)]
fn finish<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
    plan: Plan,
    r: Mat<T>,
    d: Mat<T>,
    q: Option<Mat<T>>,
) -> Result<CpuQr<T>> {
    let n = plan.dims.n;
    let q_count = plan.dims.q;
    let (r, d, rho, data) = if policy == QPolicy::Full {
        (r, d, Vec::new(), None)
    } else {
        let rho = (0..q_count)
            .map(|k| crate::cpu::householder::nrm2(&d.col(k)[n..]))
            .collect();
        let keep_a = params.keep_data;
        let data = (policy == QPolicy::Thin || keep_a).then(|| KeptData {
            a: keep_a.then(|| a.to_owned()),
            b: b.to_owned(),
        });
        (
            Mat::from_fn(n, n, |i, j| r[(i, j)]),
            Mat::from_fn(n, q_count, |i, k| d[(i, k)]),
            if policy == QPolicy::Thin {
                Vec::new()
            } else {
                rho
            },
            data,
        )
    };
    Ok(CpuQr {
        dims: plan.dims,
        r,
        d,
        q,
        rho,
        data,
        params: UpdateParams {
            block_size: params.block_size,
            ..UpdateParams::default()
        },
        rank_tol: plan.rank_tol,
        drift: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_cpu_example() {
        use crate::{FactorParams, Mat, QPolicy, QrUpdate};
        let a = Mat::<f64>::from_fn(5, 3, |i, j| {
            ((i * 7 + j * 3) % 5) as f64 + (i == j) as u8 as f64
        });
        let b = Mat::<f64>::from_fn(5, 1, |i, _| 1.0 + i as f64);
        let qr = run_cpu(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .unwrap();
        let (r, q) = (qr.r().unwrap(), qr.q().unwrap().unwrap());
        let qr_prod = q.matmul(&r);
        for j in 0..3 {
            for i in 0..5 {
                assert!((qr_prod[(i, j)] - a[(i, j)]).abs() < 1e-13);
                if i > j {
                    assert_eq!(r[(i, j)], 0.0);
                }
            }
        }
    }
}
