//! Row deletion from a thin state on the device, from the small side
//! (docs/algorithms.md#thin-q-updates-on-the-gpu): the completion of the deleted rows from
//! W = Q₁(rows, :) alone, shared by `delete_rows` and the window step.

use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::gpu::algo::factors::Factors;
use crate::gpu::algo::rank::check_rank;
use crate::gpu::algo::reduced::{cholesky_lower, solve_lower};
use crate::gpu::algo::{givens_two_phase as tp, thin};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{Gpu, GpuScalar};

/// The small side of a thin row deletion: R′, d′ and the n×n M with Q₁′ = Q₁(kept rows)·M.
pub(crate) struct ThinDeleted<T> {
    /// R′ (n×n, exact zeros below the diagonal, rank-checked).
    pub(crate) r: DevMat<T>,
    /// d′ (n×q).
    pub(crate) d: DevMat<T>,
    /// M (n×n).
    pub(crate) m: DevMat<T>,
}

/// What [`thin_small_side`] found.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ThinSmallSide<T> {
    /// The completion from the small side holds.
    Ready(ThinDeleted<T>),
    /// The rows cannot be deleted: the completion's pivot `row` has norm `norm`, at or
    /// below the completion tolerance.
    Refused {
        /// The pivot's index among the deleted rows.
        row: usize,
        /// Its norm.
        norm: f64,
    },
    /// A deleted row has leverage above ½: the explicit completion must run.
    Completed,
}

/// The small side of a thin row deletion of rows k0..k0+p (docs/algorithms.md#thin-q-updates-on-the-gpu):
/// from W = Q₁(rows, :) (p×n), L with LLᵀ = I − WWᵀ (a pivot ≤ `tol` refuses), t = L⁻¹(e − Wd),
/// the two-phase rotations of [W L] applied to [R; 0], [d; t] and an identity, and
/// M = G(0:n, p:) − WᵀL⁻ᵀ·G(n:, p:). Touches nothing of height m but the p rows of Q₁ and
/// b it reads.
///
/// # Errors
/// Device errors, [`crate::Error::RankDeficient`] (R′ fails the rank test).
pub(crate) fn thin_small_side<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (k0, p): (usize, usize),
    tol: f64,
) -> Result<ThinSmallSide<T>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let q1 = f.q1();
    let b = f.kept_b();
    let w = g.two_phase_copy_new(&q1.block(k0, 0, p, n), 0..0, false)?;
    let mut gram = DevMat::<T>::zeros(g, p, p)?;
    g.gemm(
        Op::N,
        Op::T,
        T::ONE,
        &w.view(),
        &w.view(),
        T::ZERO,
        &mut gram.view_mut(),
    )?;
    let mut ewd = g.two_phase_copy_new(&b.block(k0, 0, p, nq), 0..0, false)?;
    g.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        &w.view(),
        &f.d.view(),
        T::ONE,
        &mut ewd.view_mut(),
    )?;
    let gram = thin::to_host_f64(g, &gram.view())?;
    let complement = Mat::from_fn(p, p, |i, j| f64::from(u8::from(i == j)) - gram[(i, j)]);
    let (l, pivots) = match cholesky_lower(&complement, |_| tol) {
        Ok(x) => x,
        Err((row, norm2)) => {
            return Ok(ThinSmallSide::Refused {
                row,
                norm: norm2.max(0.0).sqrt(),
            })
        }
    };
    if pivots.iter().any(|&x| x < 0.5) {
        return Ok(ThinSmallSide::Completed);
    }
    let t = solve_lower(&l, &thin::to_host_f64(g, &ewd.view())?);
    // L⁻¹W (p×n, on the device); K = −(L⁻¹W)ᵀ
    let ldev = thin::from_host_f64::<T>(g, &l)?;
    let mut kt = g.two_phase_copy_new(&w.view(), 0..0, false)?;
    g.trsm(
        Side::Left,
        Uplo::Lower,
        Op::N,
        Diag::NonUnit,
        T::ONE,
        &ldev.view(),
        &mut kt.view_mut(),
    )?;
    let np = n + p;
    // [W L] over the identity: the rotations' product lands in rows p..
    let mut z = DevMat::<T>::zeros(g, p + np, np)?;
    g.panel_copy(&w.view(), &mut z.block_mut(0, 0, p, n))?;
    g.panel_copy(&ldev.view(), &mut z.block_mut(0, n, p, p))?;
    g.panel_set_identity(&mut z.block_mut(p, 0, np, np))?;
    let td = thin::from_host_f64::<T>(g, &t)?;
    let mut ra = thin::stacked(g, &f.r.view(), None, p)?;
    let mut da = thin::stacked(g, &f.d.view(), Some(&td.view()), p)?;
    g.stage_mark("small side: W, L, t");
    tp::delete_rows_rotate_two_phase(g, &mut z, &mut ra, &mut da, 0, p)?;
    // M = G(0:n, p:) + K·G(n:, p:)
    let mut mm = g.two_phase_copy_new(&z.block(p, p, n, n), 0..0, false)?;
    g.gemm(
        Op::T,
        Op::N,
        -T::ONE,
        &kt.view(),
        &z.block(p + n, p, p, n),
        T::ONE,
        &mut mm.view_mut(),
    )?;
    let rn = g.two_phase_copy_new(&ra.block(p, 0, n, n), 0..0, true)?;
    let dn = g.two_phase_copy_new(&da.block(p, 0, n, nq), 0..0, false)?;
    check_rank(g, &rn, n, f.rank_tol)?;
    g.stage_mark("small side: rotations, M");
    Ok(ThinSmallSide::Ready(ThinDeleted {
        r: rn,
        d: dn,
        m: mm,
    }))
}
