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
/// `wy` loop (tests that compare bit for bit with it); see `cpu/factorize.rs`.
pub(crate) fn run_cpu_with<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
    blocked: bool,
) -> Result<CpuQr<T>> {
    let plan = plan(a, b, policy, params)?;
    let (r, d, q) = crate::cpu::factorize::factorize(
        a,
        b,
        plan.dims,
        plan.block_size,
        params.block_size,
        plan.rank_tol,
        blocked,
    )?;
    finish(a, b, policy, params, plan, r, d, q)
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
