//! The level-3 window steps of the GPU (docs/algorithms.md#sliding-window): the thin kind's
//! one-Cholesky step and its Householder form (docs/algorithms.md#thin-window-step), the
//! R-only kind's R, d and residual norms (docs/algorithms.md#r-only-window-step), and the
//! Gram-matrix machinery they share. Nothing of the state changes here: each step returns
//! the new factors for the operation (`ops/slide`) to swap in.

use crate::base::error::{Error, Result};
use crate::gpu::algo::delete_rows::ThinDeleted;
use crate::gpu::algo::factors::Factors;
use crate::gpu::algo::rank::{check_rank, check_rank_dev};
use crate::gpu::algo::reduced::upper_solve;
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::{Op, Side};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};

/// The operation's name in the errors the window step raises.
const OP: &str = "slide";

/// The largest ‖V‖₂² the one-Cholesky step takes for the R-only kind: the TRSM that forms V
/// perturbs the new rows by u‖V‖₂‖R‖ at most, 4u‖R‖ here.
const MAX_V2_REDUCED: f64 = 16.0;
/// The largest ‖V‖₂² the one-Cholesky step takes for the thin kind (Q₁′ loses orthogonality
/// in proportion to the condition of M, at most 2(1 + ‖V‖₂²)/λ with the pivot floor below).
const MAX_V2_THIN: f64 = 1.0;
/// Power-iteration steps of the ‖V‖₂² estimate (a lower bound, taken with a margin of 1.25).
const POWER_STEPS: usize = 10;

/// The rows a window step moves: the oldest `drop` leave, the new rows (given to each step
/// as views) enter, and what stays is scaled by √`forget`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowParams {
    /// Rows that leave (the oldest, rows 0..drop).
    pub(crate) drop: usize,
    /// The forgetting factor λ ∈ (0, 1].
    pub(crate) forget: f64,
}

/// A thin state's factors after a window step.
pub(crate) struct ThinWindowed<T> {
    /// R′ (n×n).
    pub(crate) r: DevMat<T>,
    /// d′ (n×q).
    pub(crate) d: DevMat<T>,
    /// Q₁′ (m′×n).
    pub(crate) q: DevMat<T>,
    /// The kept b′ (m′×q).
    pub(crate) b: DevMat<T>,
    /// m′, the rows held after the step.
    pub(crate) m: usize,
}

/// The thin window step in the Householder form, where the one-Cholesky form declines
/// (docs/algorithms.md#thin-window-step): one pass over Q₁ all the same. `small` is the
/// small side of the row deletion (R′, d′ and M_d with Q₁′ = Q₁(rows k..m)·M_d; `None` when
/// no rows leave); after the scaling by √λ, one Householder QR [R′; A_n] = Q_s·R″ (`geqrf`,
/// with Q_s ((n + p)×n) formed by `orgqr`) gives R″, d″ = rows 0:n of Q_sᵀ[d′; e_n] and
/// Q₁″ = [Q₁(k.., :)·(M_d·Q_s(0:n, :)); Q_s(n:n+p, :)]: one GEMM over Q₁ instead of one for
/// each half.
///
/// # Errors
/// [`Error::RankDeficient`], device errors.
pub(crate) fn thin_householder_step<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    small: Option<ThinDeleted<T>>,
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    WindowParams { drop, forget }: WindowParams,
) -> Result<ThinWindowed<T>> {
    let (m, n, q, p) = (f.dims.m, f.dims.n, f.dims.q, an.nrows());
    // 1. the rows that leave: R′, d′, M_d (nothing of height m touched)
    let ThinDeleted {
        r: mut r1,
        d: mut d1,
        m: md,
    } = match small {
        Some(x) => x,
        None => ThinDeleted {
            r: f.r.dup(g)?,
            d: f.d.dup(g)?,
            m: thin::identity::<T>(g, n)?,
        },
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
    check_rank(g, &r2, n, f.rank_tol)?;
    g.stage_mark("window: small side");
    // 4. Q₁″ and the kept b
    let m_new = m - drop + p;
    let q1 = f.q1();
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
    let b = f.kept_b();
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
    Ok(ThinWindowed {
        r: r2,
        d: d2,
        q: qn,
        b: bn,
        m: m_new,
    })
}

/// The thin window step in one Cholesky factor (docs/algorithms.md#thin-window-step): with
/// W = Q₁(0:k, :) and V = A_n·R⁻¹, GᵀG = M = λ(I − WᵀW) + VᵀV gives R′ = G·R,
/// d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n) and Q₁′ = [√λ·Q₁(k:m, :); V]·G⁻¹ (G⁻¹ formed, then one GEMM
/// over Q₁). `None` where M is not comfortably positive definite (a pivot G_jj² < λ/2: a
/// leaving row of high leverage) or ‖V‖₂ > 1 (estimated): the Householder form runs then.
///
/// # Errors
/// [`Error::RankDeficient`], device errors.
pub(crate) fn thin_gram_step<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    WindowParams { drop, forget }: WindowParams,
) -> Result<Option<ThinWindowed<T>>> {
    let (m, n, q, p) = (f.dims.m, f.dims.n, f.dims.q, an.nrows());
    let q1 = f.q1();
    let b = f.kept_b();
    let gram = Gram {
        f,
        w: Leaving::QRows(q1.block(0, 0, drop, n)),
        eo: b.block(0, 0, drop, q),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: true,
    };
    let Some(fac) = gram.step(g, Some(MAX_V2_THIN))? else {
        return Ok(None);
    };
    check_rank(g, &fac.r, n, f.rank_tol)?;
    g.stage_mark("window: small side");
    let m_new = m - drop + p;
    let qn = thin_q_times_ginv(g, q1, &fac, (drop, m - drop, p), forget)?;
    let bn = slid_rows(g, b, en, drop, forget)?;
    g.stage_mark("window: Q1' = Q1·G⁻¹ (GEMM)");
    Ok(Some(ThinWindowed {
        r: fac.r,
        d: fac.d,
        q: qn,
        b: bn,
        m: m_new,
    }))
}

/// Q₁′ = [√λ·Q₁(k:m); V]·G⁻¹ of [`thin_gram_step`] for the `kept` rows of Q₁ after the
/// `drop` leaving ones and `p` new rows: G⁻¹ (n×n, TRSM on the identity) and one GEMM over Q₁
/// (cuBLAS's TRSM over a tall Q₁ ran at a fraction of the GEMM's rate: 1,000,000×256 took
/// 14 ms against 3.4 ms, H200 f64).
///
/// # Errors
/// [`Error::OutOfMemory`], device errors.
fn thin_q_times_ginv<T: GpuScalar>(
    g: &Gpu,
    q1: &DevMat<T>,
    fac: &Factored<T>,
    (drop, kept, p): (usize, usize, usize),
    forget: f64,
) -> Result<DevMat<T>> {
    let n = q1.ncols();
    let mut ginv = thin::identity::<T>(g, n)?;
    upper_solve(g, Side::Right, Op::N, &fac.g.view(), &mut ginv.view_mut())?;
    let mut qn = DevMat::<T>::for_overwrite(g, kept + p, n)?;
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
            &fac.v.view(),
            &ginv.view(),
            T::ZERO,
            &mut qn.block_mut(kept, 0, p, n),
        )?;
    }
    Ok(qn)
}

/// The R-only window step's R′, d′ and squared residual norms for leaving rows `ao` (with
/// right-hand sides `eo`) and entering rows `an` (`en`), all in device memory on the state's
/// GPU (docs/algorithms.md#r-only-window-step): one Cholesky factor of the window's Gram
/// matrix M = λ(I − WᵀW) + VᵀV (W = A_o·R⁻¹, V = A_n·R⁻¹) gives R′ = G·R and
/// d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n), where ‖V‖₂ ≤ 4 (estimated); otherwise the rows leave by
/// the same formulas with V = 0 and the new rows enter by one Householder QR of [R₁; A_n]
/// (`geqrf`, `ormqr`). Reads R, d and the residual norms of `f`.
///
/// # Errors
/// [`Error::DowndateFailed`] (a pivot G_jj² ≤ √u·λ: the rows left do not determine R; or a
/// right-hand side of the leaving rows exceeds the residual), device errors.
pub(crate) fn reduced_rows_step<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (ao, eo): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
) -> Result<(DevMat<T>, DevMat<T>, Vec<f64>)> {
    let (n, q, p) = (f.dims.n, f.dims.q, an.nrows());
    let gram = Gram {
        f,
        w: Leaving::Rows(ao.reborrow()),
        eo: eo.reborrow(),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: false,
    };
    if let Some(fac) = gram.step(g, Some(MAX_V2_REDUCED))? {
        return Ok((fac.r, fac.d, fac.rho2));
    }
    // the new rows weigh too much: downdate alone, then Householder QR of [R₁; A_n]
    let down = Gram {
        f,
        w: Leaving::Rows(ao.reborrow()),
        eo: eo.reborrow(),
        an: an.block(0, 0, 0, n),
        en: en.block(0, 0, 0, q),
        forget,
        thin: false,
    };
    let fac = down
        .step(g, None)?
        .expect("without new rows nothing declines");
    let (r1, d1, mut rho2) = (fac.r, fac.d, fac.rho2);
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

/// [`thin_gram_step`]'s small side where only WᵀW (n×n), Wᵀe_o (n×q) and ‖W‖_F² of the
/// leaving rows W of Q₁ are at hand (summed over the ranks of a distributed state), for R
/// and d of `f`. With `decline`, `None` where the thin step declines (‖V‖₂ > 1 estimated, or
/// a pivot G_jj² < λ/2); without, the rows leave as in the R-only step and a pivot
/// G_jj² ≤ √u·λ is refused.
///
/// # Errors
/// [`Error::DowndateFailed`] (without `decline`), device errors.
pub(crate) fn gram_from_products<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (wtw, wte, fro2): (&DevMat<T>, &DevMat<T>, f64),
    (an, en): (&DevMatView<'_, T>, &DevMatView<'_, T>),
    forget: f64,
    decline: bool,
) -> Result<Option<GramFactor<T>>> {
    let gram = Gram {
        f,
        w: Leaving::Products { wtw, wte, fro2 },
        eo: wte.block(0, 0, 0, f.dims.q),
        an: an.reborrow(),
        en: en.reborrow(),
        forget,
        thin: decline,
    };
    let max_v2 = if decline { Some(MAX_V2_THIN) } else { None };
    Ok(gram.step(g, max_v2)?.map(|fac| GramFactor {
        g: fac.g,
        v: fac.v,
        r: fac.r,
        d: fac.d,
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
    Rows(DevMatView<'a, T>),
    /// W directly: the leaving rows of Q₁.
    QRows(DevMatView<'a, T>),
    /// Only WᵀW (n×n), Wᵀe_o (n×q, as `d`'s shape) and ‖W‖_F², for leaving rows of Q₁ that
    /// are spread over the ranks of a distributed state (the products summed over them).
    Products {
        wtw: &'a DevMat<T>,
        wte: &'a DevMat<T>,
        fro2: f64,
    },
}

/// The factors a window step starts from, the rows that leave and enter, and the
/// forgetting factor.
struct Gram<'a, T> {
    f: Factors<'a, T>,
    w: Leaving<'a, T>,
    eo: DevMatView<'a, T>,
    an: DevMatView<'a, T>,
    en: DevMatView<'a, T>,
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

/// V = A_n·R⁻¹ with ‖V‖_F² and VᵀV (n×n).
struct NewRows<T> {
    v: DevMat<T>,
    v_fro2: f64,
    vtv: DevMat<T>,
}

impl<T: GpuScalar> Gram<'_, T> {
    /// The Cholesky factor G of M = λ(I − WᵀW) + VᵀV and what follows from it (see
    /// [`reduced_rows_step`], [`thin_gram_step`]); `None` (declined) when `max_v2` is given
    /// and the estimate of ‖V‖₂² exceeds it, or, for the thin kind, when M is not
    /// comfortably positive definite. Steps: V and VᵀV, W, M, G with its pivot test, d′ and
    /// R′, the residual norms.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`] (R-only kind), device errors.
    fn step(&self, g: &Gpu, max_v2: Option<f64>) -> Result<Option<Factored<T>>> {
        let Some(NewRows { v, v_fro2, vtv }) = self.new_rows(g, max_v2)? else {
            return Ok(None);
        };
        g.stage_mark("window: V = A_n·R⁻¹, VᵀV");
        let (w, w_fro2) = self.leaving_rows(g)?;
        let c = self.gram_matrix(g, &w, vtv)?;
        g.stage_mark("window: W, M");
        let Some(gm) = self.factor(g, c, w_fro2, v_fro2)? else {
            return Ok(None);
        };
        g.stage_mark("window: pivot test");
        let (h, r1) = self.rhs_and_r(g, &w, &v, &gm)?;
        g.stage_mark("window: R′ = G·R, d′");
        let rho2 = self.residual_norms(g, &h, w.nrows())?;
        Ok(Some(Factored {
            g: gm,
            v,
            r: r1,
            d: h,
            rho2,
        }))
    }

    /// X·R⁻¹ (TRSM) for the rows `x`, in a new buffer.
    fn solve(&self, g: &Gpu, x: &DevMatView<'_, T>) -> Result<DevMat<T>> {
        let n = self.f.dims.n;
        let mut w = DevMat::<T>::zeros(g, x.nrows(), n)?;
        if x.nrows() > 0 {
            g.panel_copy(x, &mut w.view_mut())?;
            upper_solve(g, Side::Right, Op::N, &self.f.r.view(), &mut w.view_mut())?;
        }
        Ok(w)
    }

    /// V = A_n·R⁻¹, ‖V‖_F² and VᵀV; `None` where ‖V‖₂² exceeds `max_v2`: ‖V‖₂² ≤ ‖V‖_F² or,
    /// where that bound does not settle it, power iteration.
    fn new_rows(&self, g: &Gpu, max_v2: Option<f64>) -> Result<Option<NewRows<T>>> {
        let n = self.f.dims.n;
        let p = self.an.nrows();
        let v = self.solve(g, &self.an)?;
        let v_fro2 = if p > 0 {
            g.nrm2(&v.buf().slice(..))?.powi(2)
        } else {
            0.0
        };
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
        Ok(Some(NewRows { v, v_fro2, vtv }))
    }

    /// W (k×n; empty where only its products are at hand) and ‖W‖_F².
    fn leaving_rows(&self, g: &Gpu) -> Result<(DevMat<T>, f64)> {
        let n = self.f.dims.n;
        let w = match &self.w {
            Leaving::Rows(ao) => self.solve(g, ao)?,
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
        Ok((w, w_fro2))
    }

    /// M = λ(I − WᵀW) + VᵀV (`vtv` is dropped once added).
    fn gram_matrix(&self, g: &Gpu, w: &DevMat<T>, vtv: DevMat<T>) -> Result<DevMat<T>> {
        let n = self.f.dims.n;
        let (p, lam, k) = (self.an.nrows(), self.forget, w.nrows());
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
        Ok(c)
    }

    /// G (upper, GᵀG = M) by `potrf` and its pivot test; `None` where the thin kind declines.
    /// The pivots G_jj² are tested against a floor through the rank test's
    /// |G_jj| ≤ tol·‖G‖_F, with ‖G‖_F² = trace M = λ(n − ‖W‖_F²) + ‖V‖_F²: √u·λ refuses (the
    /// test of the one-row downdate, docs/algorithms.md#updates-without-q); the thin kind
    /// declines below λ/2.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`] (R-only kind), device errors.
    fn factor(
        &self,
        g: &Gpu,
        mut c: DevMat<T>,
        w_fro2: f64,
        v_fro2: f64,
    ) -> Result<Option<DevMat<T>>> {
        let n = self.f.dims.n;
        let (lam, u) = (self.forget, T::UNIT_ROUNDOFF);
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
        let g_fro = (lam * (n as f64 - w_fro2) + v_fro2)
            .max(f64::MIN_POSITIVE)
            .sqrt();
        let floor = if self.thin { lam / 2.0 } else { u.sqrt() * lam };
        if let Err(Error::RankDeficient { column, r_jj, .. }) =
            check_rank_dev(g, &gm, n, floor.sqrt() / g_fro)
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
        Ok(Some(gm))
    }

    /// h = λ(d − Wᵀe_o) + Vᵀe_n, d′ = G⁻ᵀh and R′ = G·R.
    fn rhs_and_r(
        &self,
        g: &Gpu,
        w: &DevMat<T>,
        v: &DevMat<T>,
        gm: &DevMat<T>,
    ) -> Result<(DevMat<T>, DevMat<T>)> {
        let n = self.f.dims.n;
        let (p, lam, k) = (self.an.nrows(), self.forget, w.nrows());
        let lt = T::from_f64(lam);
        let mut h = self.f.d.dup(g)?;
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
        upper_solve(g, Side::Left, Op::T, &gm.view(), &mut h.view_mut())?;
        let mut r1 = DevMat::<T>::zeros(g, n, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &gm.view(),
            &self.f.r.view(),
            T::ZERO,
            &mut r1.view_mut(),
        )?;
        Ok((h, r1))
    }

    /// The R-only kind's new squared residual norms (empty for the thin kind and for
    /// products): ρ′² = λ(ρ² + ‖d‖² − ‖e_o‖²) + ‖e_n‖² − ‖d′‖², refused below −slack.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`], device errors.
    fn residual_norms(&self, g: &Gpu, h: &DevMat<T>, k: usize) -> Result<Vec<f64>> {
        let (n, q) = (self.f.dims.n, self.f.dims.q);
        let (p, lam, u) = (self.an.nrows(), self.forget, T::UNIT_ROUNDOFF);
        let mut rho2 = Vec::new();
        if !self.thin && !matches!(self.w, Leaving::Products { .. }) {
            let (dn, eon, enn, d1n) = (
                thin::column_norms(g, &self.f.d.view())?,
                thin::column_norms(g, &self.eo)?,
                thin::column_norms(g, &self.en)?,
                thin::column_norms(g, &h.view())?,
            );
            for j in 0..q {
                let r0 = self.f.rho[j].to_f64();
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
        Ok(rho2)
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
