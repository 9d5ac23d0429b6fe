//! A state from a Q and an R computed elsewhere, and the factors back out of a state
//! (docs/algorithms.md#states-from-factors): what SciPy-style `qr_insert(Q, R, …)` calls and
//! Cholesky up- and downdates are built on. The state gets one right-hand side, b = 0
//! (so d = 0), which its updates carry along at no cost that matters.
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorsParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{Gpu, GpuScalar};
use crate::ops::factorize::resolve_rank_tol;
use crate::state::cpu::{CpuQr, KeptData};
use crate::state::gpu::GpuQr;

const OP: &str = "from_factors";

/// Validated dimensions and the resolved rank tolerance.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub dims: Dims,
    pub rank_tol: f64,
}

/// Checks the shapes of Q (`None` for an R-only state) and R against the kind, and the
/// parameters: Q m×m and R m×n under [`QPolicy::Full`], Q m×n and R n×n under
/// [`QPolicy::Thin`], no Q and R n×n under [`QPolicy::None`] (m is then the caller's, the
/// number of rows the factor stands for); always 1 ≤ n ≤ m.
///
/// # Errors
/// [`Error::Shape`], [`Error::Underdetermined`], [`Error::NeedsQ`] (Q missing for a full or
/// thin state), [`Error::InvalidParam`] (Q given for an R-only state, or a bad rank_tol).
pub(crate) fn plan<T: Scalar>(
    policy: QPolicy,
    m: usize,
    q: Option<(usize, usize)>,
    r: (usize, usize),
    params: FactorsParams,
) -> Result<Plan> {
    let shape = |what, got, expected| Error::shape(OP, what, got, expected);
    let n = r.1;
    if n == 0 {
        return Err(shape("columns of R", 0, 1));
    }
    let r_rows = if policy == QPolicy::Full { m } else { n };
    if r.0 != r_rows {
        return Err(shape("rows of R", r.0, r_rows));
    }
    if m < n {
        return Err(Error::Underdetermined { op: OP, m, n });
    }
    match (policy, q) {
        (QPolicy::None, Some(_)) => {
            return Err(Error::InvalidParam {
                op: OP,
                what: "Q",
                why: "an R-only state takes no Q".into(),
            })
        }
        (QPolicy::None, None) => {}
        (_, None) => return Err(Error::NeedsQ { op: OP, policy }),
        (_, Some((qm, qn))) => {
            let q_cols = if policy == QPolicy::Full { m } else { n };
            if qm != m {
                return Err(shape("rows of Q", qm, m));
            }
            if qn != q_cols {
                return Err(shape("columns of Q", qn, q_cols));
            }
        }
    }
    let rank_tol = resolve_rank_tol::<T>(OP, params.rank_tol, m, n)?;
    Ok(Plan {
        dims: Dims { m, n, q: 1, policy },
        rank_tol,
    })
}

fn non_finite(what: &'static str, (row, col): (usize, usize)) -> Error {
    Error::NonFinite {
        op: OP,
        what,
        row,
        col,
    }
}

/// The CPU state from host factors (copied; R's strictly lower part is taken as zero).
///
/// # Errors
/// As [`plan`], and [`Error::NonFinite`] when `params.check_finite` finds NaN or ±∞.
pub fn run_cpu<T: Scalar>(
    policy: QPolicy,
    m: usize,
    q: Option<MatRef<'_, T>>,
    r: MatRef<'_, T>,
    params: FactorsParams,
) -> Result<CpuQr<T>> {
    let plan = plan::<T>(policy, m, q.as_ref().map(|q| q.shape()), r.shape(), params)?;
    if params.check_finite {
        if let Some(at) = q.as_ref().and_then(|q| q.first_non_finite()) {
            return Err(non_finite("Q", at));
        }
        if let Some(at) = upper_first_non_finite(r) {
            return Err(non_finite("R", at));
        }
    }
    let Dims { n, .. } = plan.dims;
    let r = Mat::from_fn(
        r.nrows(),
        n,
        |i, j| if i <= j { r.get(i, j) } else { T::ZERO },
    );
    let d_rows = if policy == QPolicy::Full { m } else { n };
    let data = match policy {
        QPolicy::Thin => Some(KeptData {
            a: None,
            b: Mat::zeros(m, 1),
        }),
        _ => None,
    };
    Ok(CpuQr {
        dims: plan.dims,
        r,
        d: Mat::zeros(d_rows, 1),
        q: q.map(|q| q.to_owned()),
        rho: if policy == QPolicy::None {
            vec![T::ZERO]
        } else {
            Vec::new()
        },
        data,
        params: UpdateParams::default(),
        rank_tol: plan.rank_tol,
        drift: Default::default(),
    })
}

/// The first non-finite entry on or above the diagonal (the part of R that is read).
fn upper_first_non_finite<T: Scalar>(r: MatRef<'_, T>) -> Option<(usize, usize)> {
    (0..r.ncols()).find_map(|j| {
        let col = r.col(j);
        let top = (j + 1).min(r.nrows());
        col[..top]
            .iter()
            .position(|x| !x.to_f64().is_finite())
            .map(|i| (i, j))
    })
}

/// The GPU state taking over device factors (no copy; R's strictly lower part is zeroed on
/// the device).
///
/// # Errors
/// As [`plan`]; [`Error::NonFinite`] when `params.check_finite` finds NaN or ±∞ (a scan
/// on the device); [`Error::OutOfMemory`], [`Error::Driver`].
pub fn run_gpu<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    policy: QPolicy,
    m: usize,
    q: Option<DevMat<T>>,
    mut r: DevMat<T>,
    params: FactorsParams,
) -> Result<GpuQr<T>> {
    let plan = plan::<T>(
        policy,
        m,
        q.as_ref().map(|q| (q.nrows(), q.ncols())),
        (r.nrows(), r.ncols()),
        params,
    )?;
    let n = plan.dims.n;
    gpu.panel_zero_lower(&mut r.view_mut())?;
    if params.check_finite {
        if let Some(q) = q.as_ref() {
            if let Some(at) = gpu.first_non_finite(&q.view())? {
                return Err(non_finite("Q", at));
            }
        }
        if let Some(at) = gpu.first_non_finite(&r.view())? {
            return Err(non_finite("R", at));
        }
    }
    let d_rows = if policy == QPolicy::Full { m } else { n };
    let b = match policy {
        QPolicy::Thin => Some(DevMat::zeros(gpu, m, 1)?),
        _ => None,
    };
    Ok(GpuQr {
        gpu: gpu.clone(),
        dims: plan.dims,
        r,
        d: DevMat::zeros(gpu, d_rows, 1)?,
        q,
        b,
        a: None,
        kept_row0: 0,
        rho: if policy == QPolicy::None {
            vec![T::ZERO]
        } else {
            Vec::new()
        },
        params: UpdateParams::default(),
        rank_tol: plan.rank_tol,
        drift: Default::default(),
        poisoned: std::sync::atomic::AtomicBool::new(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_checks_each_kind_s_shapes() {
        let p = FactorsParams::default();
        assert!(plan::<f64>(QPolicy::Full, 5, Some((5, 5)), (5, 3), p).is_ok());
        assert!(plan::<f64>(QPolicy::Thin, 5, Some((5, 3)), (3, 3), p).is_ok());
        assert!(plan::<f64>(QPolicy::None, 5, None, (3, 3), p).is_ok());
        assert!(matches!(
            plan::<f64>(QPolicy::Full, 5, Some((5, 3)), (5, 3), p),
            Err(Error::Shape {
                what: "columns of Q",
                ..
            })
        ));
        assert!(matches!(
            plan::<f64>(QPolicy::Thin, 5, Some((5, 3)), (5, 3), p),
            Err(Error::Shape {
                what: "rows of R",
                ..
            })
        ));
        assert!(matches!(
            plan::<f64>(QPolicy::Full, 2, Some((2, 2)), (2, 3), p),
            Err(Error::Underdetermined { m: 2, n: 3, .. })
        ));
        assert!(matches!(
            plan::<f64>(QPolicy::Thin, 5, None, (3, 3), p),
            Err(Error::NeedsQ { .. })
        ));
        assert!(matches!(
            plan::<f64>(QPolicy::None, 5, Some((5, 3)), (3, 3), p),
            Err(Error::InvalidParam { what: "Q", .. })
        ));
        let bad = FactorsParams {
            rank_tol: Some(-1.0),
            ..p
        };
        assert!(matches!(
            plan::<f64>(QPolicy::None, 5, None, (3, 3), bad),
            Err(Error::InvalidParam {
                what: "rank_tol",
                ..
            })
        ));
    }
}
