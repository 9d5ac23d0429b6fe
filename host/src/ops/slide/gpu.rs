//! The GPU window step: the thin and R-only kinds in level-3 form
//! (docs/algorithms.md#r-only-window-step, docs/algorithms.md#thin-window-step), the full kind
//! and the rare cases those decline by the composed primitive updates.
#![forbid(unsafe_code)]

use super::{plan, Plan, OP};
use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};
use crate::state::gpu::GpuQr;

/// One window step on the device (docs/algorithms.md#sliding-window).
///
/// # Errors
/// As [`super::run`].
pub(crate) fn run_gpu<T: GpuScalar>(
    st: &mut GpuQr<T>,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    drop: usize,
) -> Result<()> {
    let dims = st.dims;
    if level3(st) {
        let plan = plan(dims, rows, rhs, drop, st.params)?;
        if plan.drop_first(dims.n) {
            let g = st.gpu.clone();
            let (an, en) = (
                DevMat::from_host_async(&g, rows)?,
                DevMat::from_host_async(&g, rhs)?,
            );
            if dims.policy == QPolicy::Thin {
                if run_gpu_thin(st, plan, &an.view(), &en.view())?
                    || run_gpu_thin_householder(st, plan, &an.view(), &en.view())?
                {
                    return Ok(());
                }
            } else {
                return run_gpu_reduced(st, plan, &an.view(), &en.view());
            }
        }
    }
    st.settle_kept()?;
    super::run(st, rows, rhs, drop)
}

/// Whether the state takes the level-3 window step: thin, or R-only with kept data.
fn level3<T: GpuScalar>(st: &GpuQr<T>) -> bool {
    st.dims.policy == QPolicy::Thin || (st.dims.policy == QPolicy::None && st.a.is_some())
}

/// [`run_gpu`] with the new rows and their right-hand sides already in device memory
/// (`GpuQr::slide_device`): no upload. The non-finite check runs on the device; the paths
/// that take host rows (the full kind, and the composed step where the level-3 forms decline)
/// download them.
///
/// # Errors
/// As [`super::run`].
pub(crate) fn run_gpu_device<T: GpuScalar>(
    st: &mut GpuQr<T>,
    rows: &DevMatView<'_, T>,
    rhs: &DevMatView<'_, T>,
    drop: usize,
) -> Result<()> {
    let dims = st.dims;
    let plan = super::plan_shape(
        dims,
        (rows.nrows(), rows.ncols()),
        (rhs.nrows(), rhs.ncols()),
        drop,
        st.params,
    )?;
    for (what, x) in [("rows", rows), ("rhs", rhs)] {
        if x.nrows() == 0 || x.ncols() == 0 {
            continue;
        }
        if let Some((row, col)) = st.gpu.first_non_finite(x)? {
            return Err(Error::NonFinite {
                op: OP,
                what,
                row,
                col,
            });
        }
    }
    if level3(st) && plan.drop_first(dims.n) {
        if dims.policy == QPolicy::Thin {
            if run_gpu_thin(st, plan, rows, rhs)? || run_gpu_thin_householder(st, plan, rows, rhs)?
            {
                return Ok(());
            }
        } else {
            return run_gpu_reduced(st, plan, rows, rhs);
        }
    }
    let g = st.gpu.clone();
    let (rh, eh) = (rows.to_host(&g)?, rhs.to_host(&g)?);
    run_gpu(st, rh.as_ref(), eh.as_ref(), drop)
}

/// The thin window step where the one-Cholesky form declines (docs/algorithms.md#thin-window-step):
/// one pass over Q₁ all the same. The small side of the row deletion gives R′, d′ and M_d with Q₁′ = Q₁(rows k..m)·M_d; after the
/// scaling by √λ, one Householder QR [R′; A_n] = Q_s·R″ (`geqrf`, with Q_s ((n + p)×n) formed
/// by `orgqr`) gives R″, d″ = Q_sᵀ[d′; e_n](0:n) and Q₁″ = [Q₁(k.., :)·(M_d·Q_s(0:n, :));
/// Q_s(n:n+p, :)]: one GEMM over Q₁ instead of one for each half. Returns `false` (nothing
/// changed) where the deletion needs the explicit completion (a leaving row of leverage above
/// ½): the composed step runs then.
///
/// # Errors
/// As [`super::run`]. On error the state is unchanged.
fn run_gpu_thin_householder<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    an: &DevMatView<'_, T>,
    en: &DevMatView<'_, T>,
) -> Result<bool> {
    use crate::ops::delete_rows::{
        thin_small_side, Plan as DeletePlan, ThinDeleted, ThinSmallSide,
    };
    let Dims { n, q, .. } = st.dims;
    let Plan { m, p, drop, forget } = plan;
    let g = &*st.gpu.clone();
    // 1. the rows that leave: R′, d′, M_d (nothing of height m touched)
    let ThinDeleted {
        r: mut r1,
        d: mut d1,
        m: md,
    } = if drop > 0 {
        let dp = DeletePlan {
            m,
            n,
            p: drop,
            k0: 0,
        };
        match thin_small_side(st, dp)? {
            ThinSmallSide::Ready(x) => x,
            ThinSmallSide::Refused(e) => return Err(e),
            ThinSmallSide::Completed => return Ok(false),
        }
    } else {
        ThinDeleted {
            r: st.r.dup(g)?,
            d: st.d.dup(g)?,
            m: thin::identity::<T>(g, n)?,
        }
    };
    // 2. forgetting
    if forget < 1.0 {
        let s = T::from_f64(forget.sqrt());
        g.scal(s, &mut r1.buf_mut().slice_mut(..))?;
        g.scal(s, &mut d1.buf_mut().slice_mut(..))?;
    }
    // 3. the new rows: [R′; A_n] = Q_s·R″, d″ = Q_sᵀ[d′; e_n]
    let (r2, d2, mmat, qs) = if p > 0 {
        let (stack, tau, dstack) = stacked_qr(g, (&r1, &d1), (an, en))?;
        let r2 = g.two_phase_copy_new(&stack.block(0, 0, n, n), 0..0, true)?;
        let d2 = g.two_phase_copy_new(&dstack.block(0, 0, n, q), 0..0, false)?;
        let mut qs = stack;
        g.orgqr(&mut qs.view_mut(), n, &tau.view())?;
        let mut mmat = DevMat::<T>::for_overwrite(g, n, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &md.view(),
            &qs.block(0, 0, n, n),
            T::ZERO,
            &mut mmat.view_mut(),
        )?;
        (r2, d2, mmat, Some(qs))
    } else {
        (r1, d1, md, None)
    };
    crate::gpu::algo::givens_two_phase::check_rank(g, &r2, n, st.rank_tol)?;
    g.stage_mark("window: small side");
    // 4. Q₁″ and the kept b
    let m_new = m - drop + p;
    let q1 = st.q.as_ref().expect("a thin state holds Q₁");
    let mut qn = DevMat::<T>::for_overwrite(g, m_new, n)?;
    if m > drop {
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q1.block(drop, 0, m - drop, n),
            &mmat.view(),
            T::ZERO,
            &mut qn.block_mut(0, 0, m - drop, n),
        )?;
    }
    let b = st.kept_b();
    let mut bn = DevMat::<T>::for_overwrite(g, m_new, q)?;
    if m > drop {
        g.panel_copy(
            &b.block(drop, 0, m - drop, q),
            &mut bn.block_mut(0, 0, m - drop, q),
        )?;
        if forget < 1.0 {
            g.scal(T::from_f64(forget.sqrt()), &mut bn.buf_mut().slice_mut(..))?;
        }
    }
    if let Some(qs) = qs {
        g.panel_copy(&qs.block(n, 0, p, n), &mut qn.block_mut(m - drop, 0, p, n))?;
        g.panel_copy(en, &mut bn.block_mut(m - drop, 0, p, q))?;
    }
    g.stage_mark("window: Q1'' = Q1·M");
    st.r = r2;
    st.d = d2;
    st.q = Some(qn);
    st.b = Some(bn);
    st.dims.m = m_new;
    Ok(true)
}

/// The largest ‖V‖₂² the one-Cholesky step takes for the R-only kind: the TRSM that forms V
/// perturbs the new rows by u‖V‖₂‖R‖ at most, 4u‖R‖ here.
const MAX_V2_REDUCED: f64 = 16.0;
/// The largest ‖V‖₂² the one-Cholesky step takes for the thin kind (Q₁′ loses orthogonality
/// in proportion to the condition of M, at most 2(1 + ‖V‖₂²)/λ with the pivot floor below).
const MAX_V2_THIN: f64 = 1.0;
/// Power-iteration steps of the ‖V‖₂² estimate (a lower bound, taken with a margin of 1.25).
const POWER_STEPS: usize = 10;

/// The R-only window step with kept data (docs/algorithms.md#r-only-window-step): one
/// Cholesky factor G of M = λ(I − WᵀW) + VᵀV (W = A_o·R⁻¹, V = A_n·R⁻¹) gives
/// R′ = G·R and d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n), where ‖V‖₂ ≤ 4 (estimated); otherwise the
/// rows leave by the same formulas with V = 0 and the new rows enter by one Householder QR
/// of [R₁; A_n] (`geqrf`, `ormqr`). The kept A and b then lose the oldest rows and take the
/// new ones (one copy), and R′ passes the rank test before anything is swapped in.
///
/// # Errors
/// [`Error::DowndateFailed`] (a pivot G_jj² ≤ √u·λ: the rows left do not determine R; or a
/// right-hand side of the leaving rows exceeds the residual), [`Error::RankDeficient`],
/// device errors. On error the state is unchanged.
fn run_gpu_reduced<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    an: &DevMatView<'_, T>,
    en: &DevMatView<'_, T>,
) -> Result<()> {
    let Dims { n, q, .. } = st.dims;
    let Plan { m, p, drop, forget } = plan;
    let g = &*st.gpu.clone();
    let (a, b) = st.kept_views().expect("checked by the caller");
    let (r2, d2, rho2) = reduced_rows_step(
        g,
        st,
        (&a.block(0, 0, drop, n), &b.block(0, 0, drop, q)),
        (an, en),
        forget,
    )?;
    g.stage_mark("window: R and d");
    crate::gpu::algo::givens_two_phase::check_rank(g, &r2, n, st.rank_tol)?;
    slide_kept(st, (an, en), drop, forget)?;
    g.stage_mark("window: kept data");
    st.r = r2;
    st.d = d2;
    st.rho = rho2
        .into_iter()
        .map(|x| T::from_f64(x.max(0.0).sqrt()))
        .collect();
    st.dims.m = m - drop + p;
    Ok(())
}

/// The R-only window step's R′, d′ and squared residual norms for leaving rows `ao` (with
/// right-hand sides `eo`) and entering rows `an` (`en`), all in device memory on the state's
/// GPU (docs/algorithms.md#r-only-window-step): one Cholesky factor of the window's Gram
/// matrix, or, where the new rows weigh too much, the downdate alone followed by one
/// Householder QR of [R₁; A_n]. Nothing of the state is changed.
///
/// # Errors
/// As [`run_gpu_reduced`].
pub(crate) fn reduced_rows_step<T: GpuScalar>(
    g: &Gpu,
    st: &GpuQr<T>,
    (ao, eo): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
) -> Result<(DevMat<T>, DevMat<T>, Vec<f64>)> {
    let (n, q, p) = (st.dims.n, st.dims.q, an.nrows());
    let gram = Gram {
        w: Leaving::Rows(ao.reborrow()),
        eo: eo.reborrow(),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: false,
    };
    if let Some(f) = gram.step(g, st, Some(MAX_V2_REDUCED))? {
        return Ok((f.r, f.d, f.rho2));
    }
    // the new rows weigh too much: downdate alone, then Householder QR of [R₁; A_n]
    let down = Gram {
        w: Leaving::Rows(ao.reborrow()),
        eo: eo.reborrow(),
        an: an.block(0, 0, 0, n),
        en: en.block(0, 0, 0, q),
        forget,
        thin: false,
    };
    let f = down
        .step(g, st, None)?
        .expect("without new rows nothing declines");
    let (r1, d1, mut rho2) = (f.r, f.d, f.rho2);
    g.stage_mark("window: downdate");
    let (stack, _, dstack) = stacked_qr(g, (&r1, &d1), (an, en))?;
    let extra = thin::column_norms(g, &dstack.block(n, 0, p, q))?;
    rho2.iter_mut().zip(extra).for_each(|(x, e)| *x += e * e);
    Ok((
        g.two_phase_copy_new(&stack.block(0, 0, n, n), 0..0, true)?,
        g.two_phase_copy_new(&dstack.block(0, 0, n, q), 0..0, false)?,
        rho2,
    ))
}

/// One Householder QR of [R₁; A_n] ((n + p)×n, `geqrf`) and its reflectors on [d₁; e_n]
/// (`ormqr`): the stacked factor (R″ in its upper triangle, the reflectors below), τ, and the
/// transformed right-hand sides, whose rows n.. are what the new rows add to the residual.
///
/// # Errors
/// [`Error::OutOfMemory`], device errors.
pub(crate) fn stacked_qr<T: GpuScalar>(
    g: &Gpu,
    (r1, d1): (&DevMat<T>, &DevMat<T>),
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
) -> Result<(DevMat<T>, DevVec<T>, DevMat<T>)> {
    let (n, p) = (r1.ncols(), an.nrows());
    let mut stack = thin::stacked(g, &r1.view(), Some(an), p)?;
    let mut dstack = thin::stacked(g, &d1.view(), Some(en), p)?;
    let mut tau = DevVec::<T>::zeros(g, n)?;
    g.geqrf(&mut stack.view_mut(), &mut tau.view_mut())?;
    g.ormqr(
        Side::Left,
        Op::T,
        &stack.view(),
        n,
        &tau.view(),
        &mut dstack.view_mut(),
    )?;
    Ok((stack, tau, dstack))
}

/// Rows of room a window step leaves below the kept data when it must move them: a quarter of
/// the window, at least eight steps' rows.
fn kept_room(m: usize, p: usize) -> usize {
    (m / 4).max(8 * p)
}

/// The kept A and b after a window step (docs/algorithms.md#r-only-window-step): the oldest
/// `drop` rows leave by moving the first logical row, the new rows are written below the
/// window where the buffers have room, and the rows are scaled by √λ in place; where there is
/// no room, the window moves to new buffers with [`kept_room`] rows to spare (one copy,
/// amortised over the steps that room lasts). Call only once the step cannot fail otherwise.
///
/// # Errors
/// [`Error::OutOfMemory`], device errors (a fault there poisons the state: the caller's
/// guard).
fn slide_kept<T: GpuScalar>(
    st: &mut GpuQr<T>,
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    drop: usize,
    forget: f64,
) -> Result<()> {
    let g = st.gpu.clone();
    let (m, n, q) = (st.dims.m, st.dims.n, st.dims.q);
    let p = an.nrows();
    let m_new = m - drop + p;
    let cap = st.a.as_ref().map_or(0, DevMat::nrows);
    let start = st.kept_row0 + drop;
    if start + m_new > cap {
        let room = kept_room(m_new, p);
        let (av, bv) = st.kept_views().expect("an R-only state keeps A with b");
        let mut a2 = DevMat::<T>::for_overwrite(&g, m_new + room, n)?;
        let mut b2 = DevMat::<T>::for_overwrite(&g, m_new + room, q)?;
        if m > drop {
            g.panel_copy(
                &av.block(drop, 0, m - drop, n),
                &mut a2.block_mut(0, 0, m - drop, n),
            )?;
            g.panel_copy(
                &bv.block(drop, 0, m - drop, q),
                &mut b2.block_mut(0, 0, m - drop, q),
            )?;
        }
        st.a = Some(a2);
        st.b = Some(b2);
        st.kept_row0 = 0;
    } else {
        st.kept_row0 = start;
    }
    let r0 = st.kept_row0;
    let (a, b) = (st.a.as_mut().expect("kept"), st.b.as_mut().expect("kept"));
    if forget < 1.0 {
        // every row of the buffers, live or not: the live ones are the window's
        let s = T::from_f64(forget.sqrt());
        g.scal(s, &mut a.buf_mut().slice_mut(..))?;
        g.scal(s, &mut b.buf_mut().slice_mut(..))?;
    }
    if p > 0 {
        g.panel_copy(an, &mut a.block_mut(r0 + m - drop, 0, p, n))?;
        g.panel_copy(en, &mut b.block_mut(r0 + m - drop, 0, p, q))?;
    }
    Ok(())
}

/// The thin window step in one Cholesky factor (docs/algorithms.md#thin-window-step): with
/// W = Q₁(0:k, :) and V = A_n·R⁻¹, GᵀG = M = λ(I − WᵀW) + VᵀV gives R′ = G·R,
/// d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n) and Q₁′ = [√λ·Q₁(k:m, :); V]·G⁻¹ (G⁻¹ formed, then one GEMM
/// over Q₁). Returns `false` (nothing changed) where M is not comfortably positive
/// definite (a pivot G_jj² < λ/2: a leaving row of high leverage) or ‖V‖₂ > 1 (estimated):
/// the Householder form runs then.
///
/// # Errors
/// [`Error::RankDeficient`], device errors. On error the state is unchanged.
fn run_gpu_thin<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    an: &DevMatView<'_, T>,
    en: &DevMatView<'_, T>,
) -> Result<bool> {
    let Dims { n, q, .. } = st.dims;
    let Plan { m, p, drop, forget } = plan;
    let g = &*st.gpu.clone();
    let q1 = st.q.as_ref().expect("a thin state holds Q₁");
    let b = st.kept_b();
    let gram = Gram {
        w: Leaving::QRows(q1.block(0, 0, drop, n)),
        eo: b.block(0, 0, drop, q),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: true,
    };
    let Some(f) = gram.step(g, st, Some(MAX_V2_THIN))? else {
        return Ok(false);
    };
    crate::gpu::algo::givens_two_phase::check_rank(g, &f.r, n, st.rank_tol)?;
    g.stage_mark("window: small side");
    // Q₁′ = [√λ·Q₁(k:m); V]·G⁻¹: G⁻¹ (n×n, TRSM on the identity) and one GEMM over Q₁
    // (cuBLAS's TRSM over a tall Q₁ ran at a fraction of the GEMM's rate: 1,000,000×256 took
    // 14 ms against 3.4 ms, H200 f64)
    let m_new = m - drop + p;
    let kept = m - drop;
    let mut ginv = thin::identity::<T>(g, n)?;
    g.trsm(
        Side::Right,
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        T::ONE,
        &f.g.view(),
        &mut ginv.view_mut(),
    )?;
    let mut qn = DevMat::<T>::for_overwrite(g, m_new, n)?;
    if kept > 0 {
        g.gemm(
            Op::N,
            Op::N,
            T::from_f64(forget.sqrt()),
            &q1.block(drop, 0, kept, n),
            &ginv.view(),
            T::ZERO,
            &mut qn.block_mut(0, 0, kept, n),
        )?;
    }
    if p > 0 {
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &f.v.view(),
            &ginv.view(),
            T::ZERO,
            &mut qn.block_mut(kept, 0, p, n),
        )?;
    }
    let bn = slid_rows(g, b, en, drop, forget)?;
    g.stage_mark("window: Q1' = Q1·G⁻¹ (GEMM)");
    st.r = f.r;
    st.d = f.d;
    st.q = Some(qn);
    st.b = Some(bn);
    st.dims.m = m_new;
    Ok(true)
}

/// The small side of the thin window step (docs/algorithms.md#thin-window-step) from the
/// leaving rows' products alone: G (GᵀG = M = λ(I − WᵀW) + VᵀV), V = A_n·R⁻¹, R′ = G·R and
/// d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n).
pub(crate) struct GramFactor<T> {
    /// G (n×n upper).
    pub(crate) g: DevMat<T>,
    /// V = A_n·R⁻¹ (p×n).
    pub(crate) v: DevMat<T>,
    /// R′ = G·R.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
}

/// [`run_gpu_thin`]'s small side where only WᵀW (n×n), Wᵀe_o (n×q) and ‖W‖_F² of the leaving
/// rows W of Q₁ are at hand (summed over the ranks of a distributed state), for R and d of
/// `st`. With `decline`, `None` where the thin step declines (‖V‖₂ > 1 estimated, or a pivot
/// G_jj² < λ/2); without, the rows leave as in the R-only step and a pivot G_jj² ≤ √u·λ is
/// refused.
///
/// # Errors
/// [`Error::DowndateFailed`] (without `decline`), device errors.
pub(crate) fn gram_from_products<T: GpuScalar>(
    g: &Gpu,
    st: &GpuQr<T>,
    (wtw, wte, fro2): (&DevMat<T>, &DevMat<T>, f64),
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
    decline: bool,
) -> Result<Option<GramFactor<T>>> {
    let gram = Gram {
        w: Leaving::Products { wtw, wte, fro2 },
        eo: wte.block(0, 0, 0, st.dims.q),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: decline,
    };
    let max_v2 = if decline { Some(MAX_V2_THIN) } else { None };
    Ok(gram.step(g, st, max_v2)?.map(|f| GramFactor {
        g: f.g,
        v: f.v,
        r: f.r,
        d: f.d,
    }))
}

/// `src` after a window step: its rows `drop`.. scaled by √λ, then the rows of `new`, in a new
/// buffer (one copy).
///
/// # Errors
/// [`Error::OutOfMemory`], device errors.
fn slid_rows<T: GpuScalar>(
    g: &Gpu,
    src: &DevMat<T>,
    new: &DevMatView<'_, T>,
    drop: usize,
    forget: f64,
) -> Result<DevMat<T>> {
    let (m, width, p) = (src.nrows(), src.ncols(), new.nrows());
    let mut dst = DevMat::<T>::for_overwrite(g, m - drop + p, width)?;
    if m > drop {
        g.panel_copy(
            &src.block(drop, 0, m - drop, width),
            &mut dst.block_mut(0, 0, m - drop, width),
        )?;
        if forget < 1.0 {
            // the new rows are not written yet: scaling the whole buffer is safe
            g.scal(T::from_f64(forget.sqrt()), &mut dst.buf_mut().slice_mut(..))?;
        }
    }
    if p > 0 {
        g.panel_copy(new, &mut dst.block_mut(m - drop, 0, p, width))?;
    }
    Ok(dst)
}

/// Where the leaving rows' W = A_o·R⁻¹ comes from.
enum Leaving<'a, T> {
    /// The rows A_o themselves: W by TRSM.
    Rows(crate::gpu::runtime::DevMatView<'a, T>),
    /// W directly: the leaving rows of Q₁.
    QRows(crate::gpu::runtime::DevMatView<'a, T>),
    /// Only WᵀW (n×n), Wᵀe_o (n×q, as `d`'s shape) and ‖W‖_F², for leaving rows of Q₁ that
    /// are spread over the ranks of a distributed state (the products summed over them).
    Products {
        wtw: &'a DevMat<T>,
        wte: &'a DevMat<T>,
        fro2: f64,
    },
}

/// The rows that leave and enter in one window step, and the forgetting factor.
struct Gram<'a, T> {
    w: Leaving<'a, T>,
    eo: crate::gpu::runtime::DevMatView<'a, T>,
    an: crate::gpu::runtime::DevMatView<'a, T>,
    en: crate::gpu::runtime::DevMatView<'a, T>,
    forget: f64,
    /// The thin kind declines (instead of refusing) where M is not comfortably definite.
    thin: bool,
}

/// What one Cholesky factor of the window's Gram matrix gives.
struct Factored<T> {
    /// G (n×n upper, GᵀG = M).
    g: DevMat<T>,
    /// V = A_n·R⁻¹ (p×n).
    v: DevMat<T>,
    /// R′ = G·R.
    r: DevMat<T>,
    /// d′.
    d: DevMat<T>,
    /// The new squared residual norms (R-only kind; empty for the thin kind).
    rho2: Vec<f64>,
}

impl<T: GpuScalar> Gram<'_, T> {
    /// The Cholesky factor G of M = λ(I − WᵀW) + VᵀV and what follows from it (see
    /// [`run_gpu_reduced`], [`run_gpu_thin`]); `None` (declined) when `max_v2` is given and
    /// the estimate of ‖V‖₂² exceeds it, or, for the thin kind, when M is not comfortably
    /// positive definite.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`] (R-only kind), device errors.
    fn step(&self, g: &Gpu, st: &GpuQr<T>, max_v2: Option<f64>) -> Result<Option<Factored<T>>> {
        let Dims { n, q, .. } = st.dims;
        let (p, lam) = (self.an.nrows(), self.forget);
        let u = T::UNIT_ROUNDOFF;
        let solve = |x: &crate::gpu::runtime::DevMatView<'_, T>| -> Result<DevMat<T>> {
            let mut w = DevMat::<T>::zeros(g, x.nrows(), n)?;
            if x.nrows() > 0 {
                g.panel_copy(x, &mut w.view_mut())?;
                g.trsm(
                    Side::Right,
                    Uplo::Upper,
                    Op::N,
                    Diag::NonUnit,
                    T::ONE,
                    &st.r.view(),
                    &mut w.view_mut(),
                )?;
            }
            Ok(w)
        };
        let v = solve(&self.an)?;
        let v_fro2 = if p > 0 {
            g.nrm2(&v.buf().slice(..))?.powi(2)
        } else {
            0.0
        };
        // VᵀV, and ‖V‖₂² ≤ ‖V‖_F² or, where that bound does not settle it, power iteration
        let mut vtv = DevMat::<T>::zeros(g, n, n)?;
        if p > 0 {
            g.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &v.view(),
                &v.view(),
                T::ZERO,
                &mut vtv.view_mut(),
            )?;
            if let Some(limit) = max_v2 {
                if v_fro2 > limit && 1.25 * largest_eigenvalue(g, &vtv)? > limit {
                    return Ok(None);
                }
            }
        }
        g.stage_mark("window: V = A_n·R⁻¹, VᵀV");
        let w = match &self.w {
            Leaving::Rows(ao) => solve(ao)?,
            Leaving::QRows(w) => {
                let mut own = DevMat::<T>::zeros(g, w.nrows(), n)?;
                if w.nrows() > 0 {
                    g.panel_copy(w, &mut own.view_mut())?;
                }
                own
            }
            Leaving::Products { .. } => DevMat::<T>::zeros(g, 0, n)?,
        };
        let k = w.nrows();
        let w_fro2 = match &self.w {
            Leaving::Products { fro2, .. } => *fro2,
            _ if k > 0 => g.nrm2(&w.buf().slice(..))?.powi(2),
            _ => 0.0,
        };
        // M = λ(I − WᵀW) + VᵀV
        let mut c = thin::identity::<T>(g, n)?;
        let lt = T::from_f64(lam);
        if lam < 1.0 {
            g.scal(lt, &mut c.buf_mut().slice_mut(..))?;
        }
        if k > 0 {
            g.gemm(
                Op::T,
                Op::N,
                -lt,
                &w.view(),
                &w.view(),
                T::ONE,
                &mut c.view_mut(),
            )?;
        }
        if let Leaving::Products { wtw, .. } = &self.w {
            g.axpy(-lt, &wtw.buf().slice(..), &mut c.buf_mut().slice_mut(..))?;
        }
        if p > 0 {
            g.axpy(T::ONE, &vtv.buf().slice(..), &mut c.buf_mut().slice_mut(..))?;
        }
        drop(vtv);
        g.stage_mark("window: W, M");
        let bad = g.potrf_upper(&mut c.view_mut())?;
        g.stage_mark("window: potrf");
        if bad != 0 {
            if self.thin {
                return Ok(None);
            }
            return Err(Error::DowndateFailed {
                op: OP,
                row: 0,
                why: format!(
                    "the rows left do not determine R (the window's Gram matrix is not positive definite at order {bad})"
                ),
            });
        }
        let gm = g.two_phase_copy_new(&c.view(), 0..0, true)?;
        drop(c);
        // pivots G_jj² against a floor through the rank test's |G_jj| ≤ tol·‖G‖_F, with
        // ‖G‖_F² = trace M = λ(n − ‖W‖_F²) + ‖V‖_F²: √u·λ refuses (the test of the one-row
        // downdate, docs/algorithms.md#updates-without-q); the thin kind declines below λ/2
        let g_fro = (lam * (n as f64 - w_fro2) + v_fro2)
            .max(f64::MIN_POSITIVE)
            .sqrt();
        let floor = if self.thin { lam / 2.0 } else { u.sqrt() * lam };
        if let Err(Error::RankDeficient { column, r_jj, .. }) =
            crate::gpu::algo::householder::check_rank_dev(g, &gm, n, floor.sqrt() / g_fro)
        {
            if self.thin {
                return Ok(None);
            }
            return Err(Error::DowndateFailed {
                op: OP,
                row: 0,
                why: format!(
                    "the rows left do not determine R (pivot {:e} of the window's Gram factor at column {column})",
                    r_jj * r_jj
                ),
            });
        }
        g.stage_mark("window: pivot test");
        // h = λ(d − Wᵀe_o) + Vᵀe_n, d′ = G⁻ᵀh, R′ = G·R
        let mut h = st.d.dup(g)?;
        if k > 0 {
            g.gemm(
                Op::T,
                Op::N,
                -T::ONE,
                &w.view(),
                &self.eo,
                T::ONE,
                &mut h.view_mut(),
            )?;
        }
        if let Leaving::Products { wte, .. } = &self.w {
            g.axpy(
                -T::ONE,
                &wte.buf().slice(..),
                &mut h.buf_mut().slice_mut(..),
            )?;
        }
        if lam < 1.0 {
            g.scal(lt, &mut h.buf_mut().slice_mut(..))?;
        }
        if p > 0 {
            g.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &v.view(),
                &self.en,
                T::ONE,
                &mut h.view_mut(),
            )?;
        }
        g.trsm(
            Side::Left,
            Uplo::Upper,
            Op::T,
            Diag::NonUnit,
            T::ONE,
            &gm.view(),
            &mut h.view_mut(),
        )?;
        let mut r1 = DevMat::<T>::zeros(g, n, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &gm.view(),
            &st.r.view(),
            T::ZERO,
            &mut r1.view_mut(),
        )?;
        g.stage_mark("window: R′ = G·R, d′");
        let mut rho2 = Vec::new();
        if !self.thin && !matches!(self.w, Leaving::Products { .. }) {
            // ρ′² = λ(ρ² + ‖d‖² − ‖e_o‖²) + ‖e_n‖² − ‖d′‖², refused below −slack
            let (dn, eon, enn, d1n) = (
                thin::column_norms(g, &st.d.view())?,
                thin::column_norms(g, &self.eo)?,
                thin::column_norms(g, &self.en)?,
                thin::column_norms(g, &h.view())?,
            );
            for j in 0..q {
                let r0 = st.rho[j].to_f64();
                let old = r0 * r0 + dn[j] * dn[j];
                let x = lam * (old - eon[j] * eon[j]) + enn[j] * enn[j] - d1n[j] * d1n[j];
                let slack =
                    100.0 * (n + k + p) as f64 * u * (old + eon[j] * eon[j] + enn[j] * enn[j]);
                if x < -slack {
                    return Err(Error::DowndateFailed {
                        op: OP,
                        row: 0,
                        why: format!(
                            "right-hand side {j} of the rows exceeds the residual they leave"
                        ),
                    });
                }
                rho2.push(x.max(0.0));
            }
        }
        Ok(Some(Factored {
            g: gm,
            v,
            r: r1,
            d: h,
            rho2,
        }))
    }
}

/// An estimate of the largest eigenvalue of the symmetric positive semidefinite n×n `s`:
/// [`POWER_STEPS`] steps of power iteration from a fixed positive vector (a lower bound).
///
/// # Errors
/// Device errors.
fn largest_eigenvalue<T: GpuScalar>(g: &Gpu, s: &DevMat<T>) -> Result<f64> {
    let n = s.nrows();
    let start: Vec<T> = (0..n)
        .map(|i| T::from_f64((1.0 + (i % 7) as f64) / (n as f64).sqrt()))
        .collect();
    let mut x = DevVec::from_slice(g, &start)?;
    let mut y = DevVec::<T>::zeros(g, n)?;
    let mut nu = 0.0;
    for _ in 0..POWER_STEPS {
        let xn = g.nrm2(&x.view())?;
        if xn == 0.0 {
            return Ok(0.0);
        }
        g.gemv(
            Op::N,
            T::from_f64(1.0 / xn),
            &s.view(),
            &x.view(),
            T::ZERO,
            &mut y.view_mut(),
        )?;
        nu = g.nrm2(&y.view())?;
        if nu == 0.0 {
            return Ok(0.0);
        }
        core::mem::swap(&mut x, &mut y);
    }
    Ok(nu)
}
