//! Sliding-window update: p new rows in at the end, the oldest `drop` rows out, with an
//! optional forgetting factor (docs/algorithms.md#sliding-window).
#![forbid(unsafe_code)]

mod gpu;

pub(crate) use crate::gpu::algo::window::stacked_qr;
pub(crate) use gpu::{gram_from_products, reduced_rows_step, run_gpu, run_gpu_device};

use crate::base::dims::{check_finite, Dims};
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::UpdateParams;
use crate::base::scalar::Scalar;
use crate::ops::compose::{atomically, Composite};

pub(crate) const OP: &str = "slide";

/// A validated window step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    /// Rows held before the step.
    pub m: usize,
    /// Rows that enter.
    pub p: usize,
    /// Rows that leave (the oldest, rows 0..drop).
    pub drop: usize,
    /// The forgetting factor λ ∈ (0, 1].
    pub forget: f64,
}

impl Plan {
    /// Rows held after the step.
    pub fn m_new(&self) -> usize {
        self.m + self.p - self.drop
    }
    /// Whether the oldest rows can leave before the new ones enter: the rows left in
    /// between still number at least n.
    pub fn drop_first(&self, n: usize) -> bool {
        self.m - self.drop >= n
    }
}

/// Validates a window step on a state of `dims`: `rows` p×n and `rhs` p×q (p may be 0 when
/// `drop` > 0), `drop` ≤ m, at least n rows after the step, λ = `params.forget` in (0, 1],
/// finite entries.
///
/// # Errors
/// [`Error::EmptyBlock`] (nothing enters or leaves), [`Error::Shape`],
/// [`Error::InvalidParam`] (`drop` > m, λ outside (0, 1]), [`Error::Underdetermined`] (a
/// window shorter than n), [`Error::NonFinite`].
pub(crate) fn plan<T: Scalar>(
    dims: Dims,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    drop: usize,
    params: UpdateParams,
) -> Result<Plan> {
    let plan = plan_shape(
        dims,
        (rows.nrows(), rows.ncols()),
        (rhs.nrows(), rhs.ncols()),
        drop,
        params,
    )?;
    check_finite(OP, [("rows", rows), ("rhs", rhs)])?;
    Ok(plan)
}

/// [`plan`] from the shapes alone (the entries are checked where they live).
///
/// # Errors
/// As [`plan`] but [`Error::NonFinite`].
pub(crate) fn plan_shape(
    dims: Dims,
    (p, rows_cols): (usize, usize),
    (rhs_rows, rhs_cols): (usize, usize),
    drop: usize,
    params: UpdateParams,
) -> Result<Plan> {
    if p == 0 && drop == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    for (what, got, expected) in [
        ("columns of rows", rows_cols, dims.n),
        ("rows of rhs", rhs_rows, p),
        ("columns of rhs", rhs_cols, dims.q),
    ] {
        if got != expected && !(p == 0 && what != "rows of rhs") {
            return Err(Error::Shape {
                op: OP,
                what,
                got,
                expected,
            });
        }
    }
    let forget = params.forget;
    if !(forget > 0.0 && forget <= 1.0) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "forget",
            why: format!("the forgetting factor must lie in (0, 1], got {forget}"),
        });
    }
    if drop > dims.m {
        return Err(Error::InvalidParam {
            op: OP,
            what: "drop",
            why: format!("{drop} rows to drop, but the window holds {}", dims.m),
        });
    }
    let plan = Plan {
        m: dims.m,
        p,
        drop,
        forget,
    };
    if plan.m_new() < dims.n {
        return Err(Error::Underdetermined {
            op: OP,
            m: plan.m_new(),
            n: dims.n,
        });
    }
    Ok(plan)
}

/// The error of a window step that must drop rows on an R-only state without kept data.
pub(crate) fn needs_rows() -> Error {
    Error::NeedsData {
        op: OP,
        what: "the rows that leave: an R-only state keeps them with FactorParams::keep_data",
    }
}

/// One window step composed of the primitive updates (docs/algorithms.md#sliding-window):
/// the oldest rows leave, R and d are scaled by √λ, the new rows enter at the end; where
/// fewer than n rows would be left in between, the new rows enter first. The step runs on a
/// snapshot that replaces the state only when every part succeeded, so a refusal of either
/// half (a failed downdate, a rank test after the new rows) leaves the state as it was.
///
/// # Errors
/// As [`plan`]; [`Error::NeedsData`] for an R-only state without kept data that must drop
/// rows; the errors of row deletion ([`Error::DowndateFailed`]) and row insertion. On
/// error the state is unchanged.
pub(crate) fn run<T: Scalar, S: Composite<T>>(
    st: &mut S,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    drop: usize,
) -> Result<()> {
    let dims = st.dims();
    let plan = plan(dims, rows, rhs, drop, st.update_params())?;
    if drop > 0 && !st.holds_q() && !st.keeps_a() {
        return Err(needs_rows());
    }
    let scale = T::from_f64(plan.forget.sqrt());
    if plan.drop_first(dims.n) {
        let m_mid = plan.m - drop;
        return atomically(st, |w| {
            if drop > 0 {
                w.delete_rows_raw(0, drop)?;
            }
            if plan.forget < 1.0 {
                w.scale(scale)?;
            }
            if plan.p > 0 {
                w.insert_rows_raw(m_mid, rows, rhs)?;
            }
            Ok(())
        });
    }
    atomically(st, |w| {
        if plan.forget < 1.0 {
            w.scale(scale)?;
        }
        w.insert_rows_raw(plan.m, rows, rhs)?;
        w.delete_rows_raw(0, drop)
    })
}

#[cfg(test)]
mod tests {
    use crate::backend::QrUpdate;
    use crate::base::error::Error;
    use crate::base::mat::Mat;
    use crate::base::params::{FactorParams, QPolicy};
    use crate::ops::factorize::tests::rand_mat;
    use crate::state::cpu::CpuQr;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// A window step whose new row makes the other columns numerically dependent (an entry
    /// of 1e300 against entries of order one) is refused by the rank test of its insertion
    /// half, after the deletion half ran; the state must be as before, bit for bit, and
    /// usable, in every kind and in both orders of the halves.
    #[test]
    fn refused_insertion_half_leaves_the_state_unchanged() {
        let mut rng = StdRng::seed_from_u64(41);
        let (n, q) = (3, 2);
        let kinds = [
            (QPolicy::Full, false),
            (QPolicy::Thin, false),
            (QPolicy::None, true),
        ];
        for (policy, keep) in kinds {
            // m = 9: dropping 2 leaves 7 ≥ n (deletion first); m = 4 with drop 2 leaves
            // 2 < n (insertion first).
            for (m, drop) in [(9, 2), (4, 2)] {
                let a = rand_mat::<f64>(&mut rng, m, n);
                let b = rand_mat::<f64>(&mut rng, m, q);
                let params = FactorParams {
                    keep_data: keep,
                    ..FactorParams::default()
                };
                let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params).unwrap();
                let before = st.clone();
                let mut row = rand_mat::<f64>(&mut rng, 1, n);
                row[(0, 0)] = 1e300;
                let rhs = rand_mat::<f64>(&mut rng, 1, q);
                let err = st.slide(row.as_ref(), rhs.as_ref(), drop).unwrap_err();
                assert!(
                    matches!(err, Error::RankDeficient { .. }),
                    "{policy:?} m={m}: {err}"
                );
                assert!(
                    st.r == before.r && st.d == before.d && st.q == before.q,
                    "{policy:?} m={m}: a refused step changed the factors"
                );
                assert_eq!(st.dims, before.dims, "{policy:?} m={m}");
                let ok_row: Mat<f64> = rand_mat(&mut rng, 1, n);
                let ok_rhs: Mat<f64> = rand_mat(&mut rng, 1, q);
                st.slide(ok_row.as_ref(), ok_rhs.as_ref(), 1).unwrap();
                assert_eq!(st.dims.m, m, "{policy:?}: the next step works");
            }
        }
    }
}
