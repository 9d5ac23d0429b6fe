//! Row deletion on the device (docs/algorithms.md#row-deletion,
//! docs/algorithms.md#thin-row-deletion, docs/algorithms.md#thin-q-updates-on-the-gpu,
//! docs/algorithms.md#updates-without-q): the full kind's rotations (or the data for a
//! refactorisation), the thin kind's completion from the small side (shared with the window
//! step) and the explicit one, the R-only kind's block downdate. Each reads the state's
//! [`Factors`] and returns new buffers; the operation (`ops/delete_rows/`) swaps them in.

use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::RowRemoval;
use crate::base::refusal::ThinFailure;
use crate::gpu::algo::factors::Factors;
use crate::gpu::algo::rank::check_rank;
use crate::gpu::algo::reduced::{
    cholesky_lower, downdate_small, residual_norms, solve_lower, upper_solve, DowndateRefusal,
};
use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf, thin};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// The factors after a row deletion: R′, d′, Q′ (or Q₁′), and for a thin state b′.
pub(crate) struct RowsDeleted<T> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// Q′ ((m−p)×(m−p)) or Q₁′ ((m−p)×n).
    pub(crate) q: DevMat<T>,
    /// The thin kind's kept b without the rows.
    pub(crate) b: Option<DevMat<T>>,
}

/// The R-only kind's factors after a row deletion.
pub(crate) struct RowsDeletedReduced<T> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// The residual norms.
    pub(crate) rho: Vec<T>,
    /// The kept A and b without the rows, where kept.
    pub(crate) kept: Option<(DevMat<T>, DevMat<T>)>,
}

/// Whether deleting p of m rows (n columns, Q kept, elements of `elem` bytes) is
/// cheaper on the GPU by refactorising A′ = Q(kept, 0:n)·R than by the rotations
/// (`RowRemoval::Auto`'s choice): only where p ≥ m/16, and where a time model in
/// milliseconds from the H100 measurements in docs/performance.md
/// says so. f64: the rotations 2.3·10⁻⁹·p·m·(m + n) ms (the ACC row deletions at
/// p = 100–500, windowed); the factorisation with its m′×m′ Q 6.15·10⁻³·n ms (panel
/// chain) plus (2m′n² + 4m′²n) flops at 30.7 TFLOP/s (fitted to cuqr's 2048×1024 and
/// 4096×2048 factorisations with Q), plus the 2m′n² of A′'s GEMM. f32: rotations
/// 1.08× (the f32/f64 ratio of the ACC rotations at p = 300, where the choice is close;
/// at p = 500–900 they were 1.35–1.48× slower, so the factor errs towards rotating) and
/// refactorisation 0.88× (ACC p = 500) those.
pub(crate) fn refactorising_pays(m: usize, n: usize, p: usize, elem: usize) -> bool {
    if 16 * p < m || p >= m {
        return false;
    }
    let (mp, m, n, p) = ((m - p) as f64, m as f64, n as f64, p as f64);
    let (rot, refac) = if elem == 4 { (1.08, 0.88) } else { (1.0, 1.0) };
    let rotations_ms = rot * 2.3e-9 * p * m * (m + n);
    let flops = 2.0 * mp * n * n + 4.0 * mp * mp * n + 2.0 * mp * n * n;
    let refactorise_ms = refac * (6.15e-3 * n + flops / 3.07e10);
    refactorise_ms < rotations_ms
}

/// The data of a refactorising row deletion of a full state: A′ = Q(kept, 0:n)·R(0:n, :)
/// (R's rows n.. are zero) and b′ = Q(kept, :)·d (b = Q·d, Q square), by the two row blocks
/// of Q that are kept; the caller factorises them again.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn refactorised_data<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    (k0, p): (usize, usize),
) -> Result<(DevMat<T>, DevMat<T>)> {
    let (m, n, nrhs) = (f.dims.m, f.dims.n, f.dims.q);
    let mp = m - p;
    let q_old = f.q.expect("the full kind holds Q");
    let mut a = DevMat::<T>::zeros(gpu, mp, n)?;
    let mut b = DevMat::<T>::zeros(gpu, mp, nrhs)?;
    for (src, dst, rows) in [(0, 0, k0), (k0 + p, k0, m - k0 - p)] {
        if rows == 0 {
            continue;
        }
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q_old.block(src, 0, rows, n),
            &f.r.block(0, 0, n, n),
            T::ZERO,
            &mut a.block_mut(dst, 0, rows, n),
        )?;
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q_old.block(src, 0, rows, m),
            &f.d.view(),
            T::ZERO,
            &mut b.block_mut(dst, 0, rows, nrhs),
        )?;
    }
    gpu.stage_mark("A' and b'");
    Ok((a, b))
}

/// The full kind (docs/algorithms.md#row-deletion): the rotations on copies of Q, R and d
/// (`row_removal`: two-phase, or the seed composite / separate-streams designs), then
/// Q̃ = Q(rows ∉ block, p:m), R̃ = R(p:m, :) with exact zeros below the diagonal and
/// d̃ = d(p:m, :) gathered into new buffers, and the rank check.
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn full<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    row_removal: RowRemoval,
    (k0, p): (usize, usize),
) -> Result<RowsDeleted<T>> {
    let (m, n, nrhs) = (f.dims.m, f.dims.n, f.dims.q);
    let mp = m - p;
    let q_old = f.q.expect("the full kind holds Q");
    let mut q = q_old.dup(gpu)?;
    let mut r = f.r.dup(gpu)?;
    let mut d = f.d.dup(gpu)?;
    gpu.stage_mark("copies");
    match row_removal {
        RowRemoval::Composite => {
            wf::delete_rows_rotate_composite(gpu, &mut q, &mut r, &mut d, k0, p)?
        }
        RowRemoval::SeparateStreams => {
            wf::delete_rows_rotate_separate(gpu, &mut q, &mut r, &mut d, k0, p)?
        }
        // (Refactorise does not come here)
        RowRemoval::TwoPhase | RowRemoval::Auto | RowRemoval::Refactorise => {
            tp::delete_rows_rotate_two_phase(gpu, &mut q, &mut r, &mut d, k0, p)?
        }
    }
    gpu.stage_mark("rotations");
    let qn = gpu.two_phase_copy_new(&q.block(0, p, m, mp), k0..k0 + p, false)?;
    let rn = gpu.two_phase_copy_new(&r.block(p, 0, mp, n), 0..0, true)?;
    let dn = gpu.two_phase_copy_new(&d.block(p, 0, mp, nrhs), 0..0, false)?;
    gpu.stage_mark("drop rows");
    check_rank(gpu, &rn, n, f.rank_tol)?;
    Ok(RowsDeleted {
        r: rn,
        d: dn,
        q: qn,
        b: None,
    })
}

/// The thin kind by completing the deleted rows explicitly
/// (docs/algorithms.md#thin-row-deletion), the path for rows of high leverage: the deleted
/// rows' unit vectors E are completed against Q₁ by Gram–Schmidt twice (Z = E −
/// Q₁Q₁(rows, :)ᵀ, then Z −= Q₁(Q₁ᵀZ)) and the thin QR Z = V·G (a |G_jj| ≤ `tol` means the
/// rows left do not determine the factorisation: `Ok(Err(..))`); then the two-phase
/// rotations of the full case on [Q₁ V] (m×(n+p)), [R; 0] and [d; Vᵀb], and
/// Q₁′ = [Q₁ V](kept rows, p:n+p), R′ and d′ their rows p.., b′ = b(kept rows).
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn thin_completed<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    (k0, p): (usize, usize),
    tol: f64,
) -> Result<std::result::Result<RowsDeleted<T>, ThinFailure>> {
    let (m, n, nq) = (f.dims.m, f.dims.n, f.dims.q);
    let q1 = f.q1();
    // Z = E − Q₁·Q₁(k0..k0+p, :)ᵀ, E the deleted rows' unit vectors
    let mut z = DevMat::<T>::zeros(gpu, m, p)?;
    gpu.panel_set_identity(&mut z.block_mut(k0, 0, p, p))?;
    gpu.gemm(
        Op::N,
        Op::T,
        -T::ONE,
        &q1.view(),
        &q1.block(k0, 0, p, n),
        T::ONE,
        &mut z.view_mut(),
    )?;
    // the second pass: Z −= Q₁(Q₁ᵀZ)
    let mut c2 = DevMat::<T>::zeros(gpu, n, p)?;
    thin::tall_tn(gpu, &q1.view(), &z.view(), &mut c2.view_mut())?;
    gpu.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        &q1.view(),
        &c2.view(),
        T::ONE,
        &mut z.view_mut(),
    )?;
    drop(c2);
    gpu.stage_mark("completion: Gram-Schmidt twice");
    let (v, g) = thin::thin_qr(gpu, z)?;
    gpu.stage_mark("completion: thin QR");
    for (j, gjj) in thin::diagonal(gpu, &g)?.into_iter().enumerate() {
        if gjj.is_nan() || gjj <= tol {
            return Ok(Err(ThinFailure::IllDeterminedCompletion {
                row: j,
                norm: gjj,
            }));
        }
    }
    let np = n + p;
    let mut r = thin::stacked(gpu, &f.r.view(), None, p)?;
    let mut d = thin::stacked(gpu, &f.d.view(), None, p)?;
    let b = f.kept_b();
    thin::tall_tn(gpu, &v.view(), &b.view(), &mut d.block_mut(n, 0, p, nq))?;
    let mut qa = thin::side_by_side(gpu, &q1.view(), &v.view())?;
    drop(v);
    gpu.stage_mark("[Q1 V], [R; 0], [d; Vᵀb]");
    tp::delete_rows_rotate_two_phase(gpu, &mut qa, &mut r, &mut d, k0, p)?;
    let qn = gpu.two_phase_copy_new(&qa.block(0, p, m, n), k0..k0 + p, false)?;
    drop(qa);
    let rn = gpu.two_phase_copy_new(&r.block(p, 0, n, n), 0..0, true)?;
    let dn = gpu.two_phase_copy_new(&d.block(p, 0, n, nq), 0..0, false)?;
    let bn = gpu.two_phase_copy_new(&b.view(), k0..k0 + p, false)?;
    gpu.stage_mark("drop rows");
    debug_assert_eq!(r.nrows(), np);
    check_rank(gpu, &rn, n, f.rank_tol)?;
    Ok(Ok(RowsDeleted {
        r: rn,
        d: dn,
        q: qn,
        b: Some(bn),
    }))
}

/// The thin kind's end after [`thin_small_side`]: Q₁′ = Q₁(kept rows)·M (one GEMM per kept
/// row block) and b′ = b(kept rows).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn thin_finish<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    small: ThinDeleted<T>,
    (k0, p): (usize, usize),
) -> Result<RowsDeleted<T>> {
    let (m, n) = (f.dims.m, f.dims.n);
    let q1 = f.q1();
    let mut qn = DevMat::<T>::for_overwrite(g, m - p, n)?;
    for (src, dst, rows) in [(0, 0, k0), (k0 + p, k0, m - k0 - p)] {
        if rows > 0 {
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &q1.block(src, 0, rows, n),
                &small.m.view(),
                T::ZERO,
                &mut qn.block_mut(dst, 0, rows, n),
            )?;
        }
    }
    let bn = g.two_phase_copy_new(&f.kept_b().view(), k0..k0 + p, false)?;
    g.stage_mark("Q1' = Q1(kept)·M");
    Ok(RowsDeleted {
        r: small.r,
        d: small.d,
        q: qn,
        b: Some(bn),
    })
}

/// Where an R-only state's deleted rows come from.
#[derive(Clone, Copy)]
pub(crate) enum DeletedRows<'a, T> {
    /// The kept A and b.
    Kept(&'a DevMat<T>, &'a DevMat<T>),
    /// Given by the caller (rows of A, their right-hand sides).
    Given(MatRef<'a, T>, MatRef<'a, T>),
}

/// The small side's products for the deleted rows W (p×n): WWᵀ (p×p) in a new buffer,
/// and `ewd` ← e − W·d in place.
fn gram_and_projected_rhs<T: GpuScalar>(
    g: &Gpu,
    w: &DevMat<T>,
    d: &DevMatView<'_, T>,
    ewd: &mut DevMat<T>,
) -> Result<DevMat<T>> {
    let p = w.nrows();
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
    g.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        &w.view(),
        d,
        T::ONE,
        &mut ewd.view_mut(),
    )?;
    Ok(gram)
}

/// The R-only kind, as a block downdate of [R d] (docs/algorithms.md#updates-without-q):
/// with the deleted rows A_r (p×n) and their right-hand sides e, W = A_r·R⁻¹ (TRSM); on the
/// host from p×p and p×q data, L with LLᵀ = I − WWᵀ (a refusal comes back as `Ok(Err(..))`)
/// and t = L⁻¹(e − Wd); then the rows [W L] (p×(n+p), orthonormal) are rotated out of
/// [R; 0] and [d; t] by the two-phase rotations of the full case, leaving R′ and d′ in rows
/// p... The residual norms come from the kept data when there are any, else
/// ρ′² = ρ² − ‖t‖².
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn r_only<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    rows: DeletedRows<'_, T>,
    (k0, p): (usize, usize),
) -> Result<std::result::Result<RowsDeletedReduced<T>, DowndateRefusal>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let (mut w, mut ewd) = match rows {
        DeletedRows::Kept(a, b) => (
            g.two_phase_copy_new(&a.block(k0, 0, p, n), 0..0, false)?,
            g.two_phase_copy_new(&b.block(k0, 0, p, nq), 0..0, false)?,
        ),
        DeletedRows::Given(rows, rhs) => (DevMat::from_host(g, rows)?, DevMat::from_host(g, rhs)?),
    };
    // W = A_r·R⁻¹, WWᵀ, e − W d
    upper_solve(g, Side::Right, Op::N, &f.r.view(), &mut w.view_mut())?;
    let gram = gram_and_projected_rhs(g, &w, &f.d.view(), &mut ewd)?;
    let widen = |x: Mat<T>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)].to_f64());
    let rho: Vec<f64> = f.rho.iter().map(|x| x.to_f64()).collect();
    let d_norms = thin::column_norms(g, &f.d.view())?;
    let small = downdate_small(
        &widen(gram.to_host(g)?),
        &widen(ewd.to_host(g)?),
        &rho,
        &d_norms,
        n,
        T::UNIT_ROUNDOFF,
    );
    let (l, t, rho_down) = match small {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    let (rn, dn) = r_only_rotate(g, f, &w, (&l, &t), p)?;
    let kept = match rows {
        DeletedRows::Kept(a, b) => Some((
            g.two_phase_copy_new(&a.view(), k0..k0 + p, false)?,
            g.two_phase_copy_new(&b.view(), k0..k0 + p, false)?,
        )),
        DeletedRows::Given(..) => None,
    };
    let rho = match &kept {
        // the kept data give the residual norms without the downdate's cancellation
        Some((a, b)) => residual_norms(g, a, b, &rn, &dn)?,
        None => rho_down.into_iter().map(T::from_f64).collect(),
    };
    Ok(Ok(RowsDeletedReduced {
        r: rn,
        d: dn,
        rho,
        kept,
    }))
}

/// The R-only downdate's rotations: the rows [W L] rotated out of [R; 0] and [d; t]; R′ and
/// d′ are rows p.. of the results, rank-checked.
fn r_only_rotate<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    w: &DevMat<T>,
    (l, t): (&Mat<f64>, &Mat<f64>),
    p: usize,
) -> Result<(DevMat<T>, DevMat<T>)> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let narrow = |x: &Mat<f64>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| T::from_f64(x[(i, j)]));
    let np = n + p;
    let mut za = DevMat::<T>::zeros(g, p, np)?;
    g.panel_copy(&w.view(), &mut za.block_mut(0, 0, p, n))?;
    let ld = DevMat::from_host(g, narrow(l).as_ref())?;
    g.panel_copy(&ld.view(), &mut za.block_mut(0, n, p, p))?;
    let td = DevMat::from_host(g, narrow(t).as_ref())?;
    let mut ra = thin::stacked(g, &f.r.view(), None, p)?;
    let mut da = thin::stacked(g, &f.d.view(), Some(&td.view()), p)?;
    g.stage_mark("downdate: W, L, t");
    tp::delete_rows_rotate_two_phase(g, &mut za, &mut ra, &mut da, 0, p)?;
    let rn = g.two_phase_copy_new(&ra.block(p, 0, n, n), 0..0, true)?;
    let dn = g.two_phase_copy_new(&da.block(p, 0, n, nq), 0..0, false)?;
    check_rank(g, &rn, n, f.rank_tol)?;
    Ok((rn, dn))
}

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
    let mut ewd = g.two_phase_copy_new(&b.block(k0, 0, p, nq), 0..0, false)?;
    let gram = gram_and_projected_rhs(g, &w, &f.d.view(), &mut ewd)?;
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

#[cfg(test)]
mod tests {
    use super::refactorising_pays;

    #[test]
    fn refactorising_only_for_large_p() {
        // the seeds' grids: ACC (4000×2000) from p = 500 in f64 and from
        // p = 300 in f32 (there the rotations are slower and the factorisation faster);
        // none of RR-seq, RR-n, RR-m, RR-comp (p ≤ 100)
        for elem in [4, 8] {
            assert!(!refactorising_pays(4000, 2000, 100, elem));
            for p in [500, 700, 900] {
                assert!(refactorising_pays(4000, 2000, p, elem), "ACC p = {p}");
            }
            for p in [20, 40, 60, 80, 100] {
                for m in [2000, 4000, 6000] {
                    assert!(!refactorising_pays(m, 1000, p, elem), "RR-seq {m} {p}");
                }
                for n in [6000, 8000, 10000] {
                    assert!(!refactorising_pays(12000, n, p, elem), "RR-n {n} {p}");
                }
                for m in [8000, 12000, 16000] {
                    assert!(!refactorising_pays(m, 6000, p, elem), "RR-m {m} {p}");
                }
            }
            for n in [1000, 2000, 3000, 4000] {
                assert!(!refactorising_pays(5000, n, 50, elem), "RR-comp n = {n}");
            }
            assert!(!refactorising_pays(10, 4, 10, elem));
        }
        assert!(!refactorising_pays(4000, 2000, 300, 8));
        assert!(refactorising_pays(4000, 2000, 300, 4));
    }
}
