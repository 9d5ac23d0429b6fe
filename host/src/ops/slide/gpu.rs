//! The GPU window step's dispatch: the thin and R-only kinds take the level-3 steps of
//! `gpu/algo/window.rs` (docs/algorithms.md#r-only-window-step,
//! docs/algorithms.md#thin-window-step), the full kind and the rare cases those decline the
//! composed primitive updates.
#![forbid(unsafe_code)]

use super::{plan, Plan, OP};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::QPolicy;
use crate::gpu::algo::delete_rows::{thin_small_side, ThinSmallSide};
use crate::gpu::algo::rank::check_rank;
use crate::gpu::algo::window::{self, GramFactor, ThinWindowed, WindowParams};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{Gpu, GpuScalar};
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
    if rows.nrows() == 0 && rhs.nrows() == 0 && (rows.ncols(), rhs.ncols()) != (dims.n, dims.q) {
        // Nothing enters: the empty blocks may have any width (`plan_shape`); the algorithms
        // take blocks of the state's widths.
        let (none, no_rhs) = (Mat::<T>::zeros(0, dims.n), Mat::<T>::zeros(0, dims.q));
        return run_gpu(st, none.as_ref(), no_rhs.as_ref(), drop);
    }
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
    if level3(st) && plan.drop_first(dims.n) && plan.p > 0 {
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

/// The thin window step where the one-Cholesky form declines
/// ([`window::thin_householder_step`]): the small side of the row deletion first. Returns
/// `false` (nothing changed) where the deletion needs the explicit completion (a leaving row
/// of leverage above ½): the composed step runs then.
///
/// # Errors
/// As [`super::run`]. On error the state is unchanged.
fn run_gpu_thin_householder<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    an: &DevMatView<'_, T>,
    en: &DevMatView<'_, T>,
) -> Result<bool> {
    use crate::ops::delete_rows::thin_refusal;
    let Plan { drop, forget, .. } = plan;
    let g = &*st.gpu.clone();
    let small = if drop > 0 {
        let tol = crate::base::refusal::completion_tol::<T>();
        match thin_small_side(g, st.factors(), (0, drop), tol)? {
            ThinSmallSide::Ready(x) => Some(x),
            ThinSmallSide::Refused { row, norm } => return Err(thin_refusal::<T>(0, row, norm)),
            ThinSmallSide::Completed => return Ok(false),
        }
    } else {
        None
    };
    let out = window::thin_householder_step(
        g,
        st.factors(),
        small,
        (an, en),
        WindowParams { drop, forget },
    )?;
    swap_in_thin(st, out);
    Ok(true)
}

/// Swaps a thin window step's factors into the state.
fn swap_in_thin<T: GpuScalar>(st: &mut GpuQr<T>, out: ThinWindowed<T>) {
    st.r = out.r;
    st.d = out.d;
    st.q = Some(out.q);
    st.b = Some(out.b);
    st.dims.m = out.m;
}

/// The R-only window step with kept data (docs/algorithms.md#r-only-window-step): R′, d′ and
/// the residual norms by [`window::reduced_rows_step`]; R′ passes the rank test, then the
/// kept A and b lose the oldest rows and take the new ones ([`slide_kept`]) before the
/// swap.
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
    let (n, q) = (st.dims.n, st.dims.q);
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
    check_rank(g, &r2, n, st.rank_tol)?;
    let kept = slide_kept(st, (an, en), drop, forget);
    crate::state::gpu::poison_on_partial_write(&st.poisoned, kept)?;
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

/// [`window::reduced_rows_step`] on the factors of `st`.
///
/// # Errors
/// As [`run_gpu_reduced`].
pub(crate) fn reduced_rows_step<T: GpuScalar>(
    g: &Gpu,
    st: &GpuQr<T>,
    old: (&DevMatView<'_, T>, &DevMatView<'_, T>),
    new: (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
) -> Result<(DevMat<T>, DevMat<T>, Vec<f64>)> {
    window::reduced_rows_step(g, st.factors(), old, new, forget)
}

/// [`window::gram_from_products`] on the factors of `st`.
///
/// # Errors
/// As [`window::gram_from_products`].
pub(crate) fn gram_from_products<T: GpuScalar>(
    g: &Gpu,
    st: &GpuQr<T>,
    products: (&DevMat<T>, &DevMat<T>, f64),
    new: (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
    decline: bool,
) -> Result<Option<GramFactor<T>>> {
    window::gram_from_products(g, st.factors(), products, new, forget, decline)
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
/// [`Error::OutOfMemory`], device errors (the caller poisons the state on them: the kept
/// rows may be half-written).
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

/// The thin window step in one Cholesky factor ([`window::thin_gram_step`]). Returns `false`
/// (nothing changed) where it declines: the Householder form runs then.
///
/// # Errors
/// [`Error::RankDeficient`], device errors. On error the state is unchanged.
fn run_gpu_thin<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    an: &DevMatView<'_, T>,
    en: &DevMatView<'_, T>,
) -> Result<bool> {
    let Plan { drop, forget, .. } = plan;
    let g = &*st.gpu.clone();
    let params = WindowParams { drop, forget };
    let Some(out) = window::thin_gram_step(g, st.factors(), (an, en), params)? else {
        return Ok(false);
    };
    swap_in_thin(st, out);
    Ok(true)
}
