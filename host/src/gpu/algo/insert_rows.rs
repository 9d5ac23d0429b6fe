//! Row insertion on the device (docs/algorithms.md#row-insertion,
//! docs/algorithms.md#row-insertion-listing): the one-launch path (`row_insert_qr`, states
//! without Q) and the blocked compact-WY row addition — phase 1 per column (`house` on
//! R(j, j) and U(:, j), `panel_apply` on the block's rest of R's row j and U), phase 2 T by
//! `wy_build_t` on V_U, phase 3 by GEMMs (W = R₁ + V_UᵀU₂; R₁ −= TᵀW; U₂ −= V_U(TᵀW)), d and
//! e likewise; with Q, Q̃ = Pᵀ·diag(Q, I_p)·H₁⋯H_n with the new rows at k0. Everything is
//! built in new buffers; the operation swaps them in.

use crate::base::error::Result;
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::gpu::algo::factors::{Factors, NewFactors};
use crate::gpu::algo::rank::check_rank_dev;
use crate::gpu::algo::reduced;
use crate::gpu::ffi::blas::{Op, Side};
use crate::gpu::launch::fused_panel::{FusedPanelWork, FUSED_MAX_JB};
use crate::gpu::runtime::matrix::{DevMat, DevVec};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Most rows of a stacked row-insertion panel (jb + p) that the blocked path gives the
/// one-block panel rather than the cooperative one. The one-block panel (`small_panel_qr`)
/// makes its reflectors by one warp, so its column step grows with the rows, and against
/// the cooperative panel it won at 164 rows and tied at 264 but lost at 364 (H100 f64,
/// `cuqr bench updates`, ACC/AR-n p = 100, 200, 300 with nb = 64; narrower panels that fit
/// lost more, by their extra launches: docs/performance.md).
pub(crate) const SMALL_PANEL_ROW_INSERT_MAX_ROWS: usize = 272;

/// Where and how the new rows enter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowInsertParams {
    /// The new rows' first index.
    pub(crate) k0: usize,
    /// Block size of the compact-WY panels (at most `BUILD_T_MAX_K` and n).
    pub(crate) nb: usize,
}

/// The one-launch path of a state without Q (docs/algorithms.md#row-insertion): the
/// reflectors of [R d; U e] flow between blocks that own its columns. `None` where the
/// shape does not fit the kernel. R and d come back n + p rows high, rank-checked.
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn one_launch<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<Option<(DevMat<T>, DevMat<T>)>> {
    let (n, q, p) = (f.dims.n, f.dims.q, u.nrows());
    let Some(shape) = g.row_insert_plan::<T>(n, q, p)? else {
        return Ok(None);
    };
    let rows = f.r.nrows();
    let mut r = DevMat::<T>::zeros(g, rows + p, n)?;
    let mut d = DevMat::<T>::zeros(g, rows + p, q)?;
    let mut uw = DevMat::from_host_async(g, u)?;
    let mut ew = DevMat::from_host_async(g, e)?;
    g.panel_copy(&f.r.view(), &mut r.block_mut(0, 0, rows, n))?;
    g.panel_copy(&f.d.view(), &mut d.block_mut(0, 0, rows, q))?;
    g.stage_mark("upload, copies");
    g.row_insert_qr(&mut r, &mut d, &mut uw, &mut ew, n, q, p, shape)?;
    g.stage_mark("row_insert_qr");
    g.panel_copy(&ew.view(), &mut d.block_mut(rows, 0, p, q))?;
    check_rank_dev(g, &r, n, f.rank_tol)?;
    g.stage_mark("rank check");
    Ok(Some((r, d)))
}

/// The buffers of the blocked path, allocated once up front.
struct Blocked<T> {
    /// R̃ and d̃ (rows + p high).
    r: DevMat<T>,
    d: DevMat<T>,
    /// Q̃ or H, where Q is held.
    qn: Option<DevMat<T>>,
    /// U and e, reduced in place.
    uw: DevMat<T>,
    ew: DevMat<T>,
    /// τ, T and V_U of the current panel.
    tau: DevVec<T>,
    t: DevMat<T>,
    vu: DevMat<T>,
    /// W and TᵀW of phase 3.
    w: DevMat<T>,
    w2: DevMat<T>,
    /// The two scratch blocks of the Q update.
    wq: Option<(DevMat<T>, DevMat<T>)>,
    /// The one-launch panel's work and its staging (panel, V), when nb fits it.
    fused: Option<FusedPanelWork<T>>,
    staging: Option<(DevMat<T>, DevMat<T>)>,
    /// Rows of Q̃ (m + p, or n + p for a thin state's H) and its first unit column of
    /// the new rows.
    qrows: usize,
    ucol: usize,
}

/// The blocked compact-WY row addition (docs/algorithms.md#row-insertion): R̃, d̃ (n + p or
/// m + p rows) and Q̃ (or, for a thin state, H accumulated on the identity, applied to Q₁ by
/// [`thin_finish`]), R̃ rank-checked; `small_panel` picks the one-block panel for phases 1–2.
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn blocked<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    RowInsertParams { k0, nb }: RowInsertParams,
    small_panel: bool,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<NewFactors<T>> {
    let (n, q, p) = (f.dims.n, f.dims.q, u.nrows());
    let mut b = Blocked::new(g, f, (k0, nb), small_panel, u, e)?;
    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        b.factor_panel(g, j0, jb, p)?;
        b.apply_rows(g, j0, jb, (n, q, p))?;
        b.apply_q(g, j0, jb, p)?;
        j0 += jb;
    }
    // d̃ = [d; e]; R̃ = [R; 0] (rows m.. were never written).
    let rows = f.r.nrows();
    g.panel_copy(&b.ew.view(), &mut b.d.block_mut(rows, 0, p, q))?;
    check_rank_dev(g, &b.r, n, f.rank_tol)?;
    Ok(NewFactors {
        r: b.r,
        d: b.d,
        q: b.qn,
    })
}

/// R̃, d̃ and Q̃ before the reflectors (an R-only state has no Q̃).
struct Embedded<T> {
    r: DevMat<T>,
    d: DevMat<T>,
    q: Option<DevMat<T>>,
}

/// R and d in the top of R̃ and d̃ (rows + p high, zeros below; R's and d's stored rows are
/// m, or n for a thin or R-only state); Q̃ = diag(Q, I_p) with the new rows at k0, or, for a
/// thin state, the identity of order n + p on which the reflectors' product H accumulates
/// (applied to Q₁ at the end by one GEMM instead of updating m + p rows).
fn embedded<T: GpuScalar>(g: &Gpu, f: Factors<'_, T>, p: usize, k0: usize) -> Result<Embedded<T>> {
    let (m, n, q) = (f.dims.m, f.dims.n, f.dims.q);
    let rows = f.r.nrows();
    let mut r = DevMat::<T>::zeros(g, rows + p, n)?;
    let mut d = DevMat::<T>::zeros(g, rows + p, q)?;
    g.panel_copy(&f.r.view(), &mut r.block_mut(0, 0, rows, n))?;
    g.panel_copy(&f.d.view(), &mut d.block_mut(0, 0, rows, q))?;
    let qn = match f.q {
        Some(_) if f.dims.policy == QPolicy::Thin => {
            let mut h = DevMat::<T>::zeros(g, n + p, n + p)?;
            g.panel_set_identity(&mut h.view_mut())?;
            Some(h)
        }
        Some(qo) => {
            let mut qm = DevMat::<T>::zeros(g, m + p, m + p)?;
            g.panel_embed_q(&qo.view(), k0, &mut qm.view_mut())?;
            Some(qm)
        }
        None => None,
    };
    Ok(Embedded { r, d, q: qn })
}

/// The dense row addition ([`crate::RowInsertion::Dense`], docs/algorithms.md#row-insertion):
/// one Householder QR (`geqrf`) of the (n + p)×n stack S = [R; U], which ignores the zeros
/// under R's diagonal (its reflectors keep them, as the structured ones do, up to rounding),
/// then its reflectors on [d; e] and on the columns of Q̃ (or H) that meet R's and U's rows
/// (`ormqr`). R̃, d̃ and Q̃ (or H) as [`blocked`] leaves them, R̃ rank-checked.
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn dense<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<NewFactors<T>> {
    let (m, n, q, p) = (f.dims.m, f.dims.n, f.dims.q, u.nrows());
    let rows = f.r.nrows();
    let Embedded {
        mut r,
        mut d,
        q: mut qn,
    } = embedded(g, f, p, k0)?;
    let (uw, ew) = (
        DevMat::from_host_async(g, u)?,
        DevMat::from_host_async(g, e)?,
    );
    let mut s = DevMat::<T>::for_overwrite(g, n + p, n)?;
    let mut ds = DevMat::<T>::for_overwrite(g, n + p, q)?;
    g.panel_copy(&r.block(0, 0, n, n), &mut s.block_mut(0, 0, n, n))?;
    g.panel_copy(&uw.view(), &mut s.block_mut(n, 0, p, n))?;
    g.panel_copy(&d.block(0, 0, n, q), &mut ds.block_mut(0, 0, n, q))?;
    g.panel_copy(&ew.view(), &mut ds.block_mut(n, 0, p, q))?;
    g.stage_mark("upload, copies");
    let mut tau = DevVec::<T>::zeros(g, n)?;
    g.geqrf(&mut s.view_mut(), &mut tau.view_mut())?;
    g.stage_mark("geqrf of [R; U]");
    if q > 0 {
        g.ormqr(
            Side::Left,
            Op::T,
            &s.view(),
            n,
            &tau.view(),
            &mut ds.view_mut(),
        )?;
        g.panel_copy(&ds.block(0, 0, n, q), &mut d.block_mut(0, 0, n, q))?;
        g.panel_copy(&ds.block(n, 0, p, q), &mut d.block_mut(rows, 0, p, q))?;
    }
    // R̃: S's upper triangle, exact zeros under it (the reflectors' tails are there)
    let top = g.two_phase_copy_new(&s.block(0, 0, n, n), 0..0, true)?;
    g.panel_copy(&top.view(), &mut r.block_mut(0, 0, n, n))?;
    if let Some(qm) = qn.as_mut() {
        // Q̃'s columns 0..n and ucol..ucol + p (the new rows' unit columns) times the
        // stack's Q; they are adjacent in a thin state's H.
        let ucol = f.q.map_or(m, |qo| qo.ncols());
        let qrows = qm.nrows();
        if ucol == n {
            g.ormqr(
                Side::Right,
                Op::N,
                &s.view(),
                n,
                &tau.view(),
                &mut qm.block_mut(0, 0, qrows, n + p),
            )?;
        } else {
            let mut x = DevMat::<T>::for_overwrite(g, qrows, n + p)?;
            g.panel_copy(&qm.block(0, 0, qrows, n), &mut x.block_mut(0, 0, qrows, n))?;
            g.panel_copy(
                &qm.block(0, ucol, qrows, p),
                &mut x.block_mut(0, n, qrows, p),
            )?;
            g.ormqr(
                Side::Right,
                Op::N,
                &s.view(),
                n,
                &tau.view(),
                &mut x.view_mut(),
            )?;
            g.panel_copy(&x.block(0, 0, qrows, n), &mut qm.block_mut(0, 0, qrows, n))?;
            g.panel_copy(
                &x.block(0, n, qrows, p),
                &mut qm.block_mut(0, ucol, qrows, p),
            )?;
        }
        g.stage_mark("reflectors on Q");
    }
    check_rank_dev(g, &r, n, f.rank_tol)?;
    g.stage_mark("rank check");
    Ok(NewFactors { r, d, q: qn })
}

impl<T: GpuScalar> Blocked<T> {
    /// Allocates the buffers, with R, d and Q embedded ([`embedded`]). The first of the new
    /// rows' unit columns in Q̃ is m, or n for a thin state's [Q₁ 0; 0 I_p].
    fn new(
        g: &Gpu,
        f: Factors<'_, T>,
        (k0, nb): (usize, usize),
        small_panel: bool,
        u: MatRef<'_, T>,
        e: MatRef<'_, T>,
    ) -> Result<Self> {
        let (m, n, q, p) = (f.dims.m, f.dims.n, f.dims.q, u.nrows());
        let thin = f.dims.policy == QPolicy::Thin;
        let ucol = f.q.map_or(m, |qo| qo.ncols());
        let Embedded { r, d, q: qn } = embedded(g, f, p, k0)?;
        let uw = DevMat::from_host_async(g, u)?;
        let ew = DevMat::from_host_async(g, e)?;
        let tau = DevVec::<T>::zeros(g, nb)?;
        let t = DevMat::<T>::zeros(g, nb, nb)?;
        let vu = DevMat::<T>::zeros(g, p, nb)?;
        let wc = n.max(q);
        let w = DevMat::<T>::zeros(g, nb, wc)?;
        let w2 = DevMat::<T>::zeros(g, nb, wc)?;
        let qrows = if thin { n + p } else { m + p };
        let wq = match qn.as_ref() {
            Some(_) => Some((
                DevMat::<T>::zeros(g, qrows, nb)?,
                DevMat::<T>::zeros(g, qrows, nb)?,
            )),
            None => None,
        };
        let (fused, staging) = if small_panel {
            (
                None,
                Some((
                    DevMat::<T>::zeros(g, nb + p, nb)?,
                    DevMat::<T>::zeros(g, nb + p, nb)?,
                )),
            )
        } else if nb <= FUSED_MAX_JB {
            (
                Some(FusedPanelWork::new(g)?),
                Some((
                    DevMat::<T>::zeros(g, nb + p, nb)?,
                    DevMat::<T>::zeros(g, nb + p, nb)?,
                )),
            )
        } else {
            (None, None)
        };
        Ok(Self {
            r,
            d,
            qn,
            uw,
            ew,
            tau,
            t,
            vu,
            w,
            w2,
            wq,
            fused,
            staging,
            qrows,
            ucol,
        })
    }

    /// Phases 1–2 for the block columns j0..j0+jb: the reflectors, V_U and T.
    fn factor_panel(&mut self, g: &Gpu, j0: usize, jb: usize, p: usize) -> Result<()> {
        let Self {
            r,
            uw,
            tau,
            t,
            vu,
            fused,
            staging,
            ..
        } = self;
        if let Some((sa, sv)) = staging.as_mut() {
            // Phases 1–2 in one launch: the (jb+p)×jb panel [R(j0.., j0..); U(:, j0..)]
            // (upper triangular top, exact zeros below its diagonal, so each reflector
            // touches row j and the p rows of U only) staged contiguously and factored by
            // `fused_panel_qr`, or by `small_panel_qr` when `small_panel` chose it; its V is
            // [I; V_U] and its T that of V_U (docs/algorithms.md#row-insertion).
            g.panel_copy(&r.block(j0, j0, jb, jb), &mut sa.block_mut(0, 0, jb, jb))?;
            g.panel_copy(&uw.block(0, j0, p, jb), &mut sa.block_mut(jb, 0, p, jb))?;
            let (mut vb, mut tb) = (sv.block_mut(0, 0, jb + p, jb), t.block_mut(0, 0, jb, jb));
            match fused.as_mut() {
                Some(fw) => {
                    g.fused_panel_qr(fw, sa, 0, 0, jb + p, jb, None, &mut vb, tau, &mut tb)?
                }
                None => g.small_panel_qr(sa, 0, 0, jb + p, jb, None, &mut vb, tau, &mut tb)?,
            }
            g.panel_copy(&sa.block(0, 0, jb, jb), &mut r.block_mut(j0, j0, jb, jb))?;
            g.panel_copy(&sv.block(jb, 0, p, jb), &mut vu.block_mut(0, 0, p, jb))?;
        } else {
            // Phase 1: reduce the block column by column (level 2).
            for j in j0..j0 + jb {
                let i = j - j0;
                {
                    let mut alpha = r.col_mut(j, j..j + 1);
                    let mut x = uw.col_mut(j, 0..p);
                    let mut ti = tau.slice_mut(i..i + 1);
                    g.householder_house(&mut alpha, &mut x, &mut ti)?;
                }
                g.panel_apply_split(r, j, uw, j, j + 1..j0 + jb, tau, i)?;
            }
            // Phase 2: V_U (a copy, so U₂ can be written while V_U is read) and T.
            g.panel_copy(&uw.block(0, j0, p, jb), &mut vu.block_mut(0, 0, p, jb))?;
            g.wy_build_t(
                &vu.block(0, 0, p, jb),
                &tau.slice(0..jb),
                &mut t.block_mut(0, 0, jb, jb),
            )?;
        }
        Ok(())
    }

    /// Phase 3: the block reflector on R's trailing rows j0..j0+jb with U, then on d with e.
    fn apply_rows(
        &mut self,
        g: &Gpu,
        j0: usize,
        jb: usize,
        (n, q, p): (usize, usize, usize),
    ) -> Result<()> {
        let Self {
            r,
            d,
            uw,
            ew,
            t,
            vu,
            w,
            w2,
            ..
        } = self;
        let (vv, tv) = (vu.block(0, 0, p, jb), t.block(0, 0, jb, jb));
        for (top, bot, cols) in [(r, uw, j0 + jb..n), (d, ew, 0..q)] {
            let nc = cols.len();
            if nc == 0 {
                continue;
            }
            let mut wk = w.block_mut(0, 0, jb, nc);
            g.panel_copy(&top.block(j0, cols.start, jb, nc), &mut wk)?;
            g.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &vv,
                &bot.block(0, cols.start, p, nc),
                T::ONE,
                &mut wk,
            )?;
            let mut wk2 = w2.block_mut(0, 0, jb, nc);
            g.gemm(Op::T, Op::N, T::ONE, &tv, &wk.as_view(), T::ZERO, &mut wk2)?;
            g.gemm(
                Op::T,
                Op::N,
                -T::ONE,
                &tv,
                &wk.as_view(),
                T::ONE,
                &mut top.block_mut(j0, cols.start, jb, nc),
            )?;
            g.gemm(
                Op::N,
                Op::N,
                -T::ONE,
                &vv,
                &wk2.as_view(),
                T::ONE,
                &mut bot.block_mut(0, cols.start, p, nc),
            )?;
        }
        Ok(())
    }

    /// Q̃[:, j0..j0+jb] and Q̃[:, ucol..ucol+p] := (those columns)·(I − V T Vᵀ).
    fn apply_q(&mut self, g: &Gpu, j0: usize, jb: usize, p: usize) -> Result<()> {
        let Self {
            qn,
            wq,
            t,
            vu,
            qrows,
            ucol,
            ..
        } = self;
        let (vv, tv) = (vu.block(0, 0, p, jb), t.block(0, 0, jb, jb));
        let (mp, ucol) = (*qrows, *ucol);
        if let (Some(qm), Some((wa, wb))) = (qn.as_mut(), wq.as_mut()) {
            let mut x = wa.block_mut(0, 0, mp, jb);
            g.panel_copy(&qm.block(0, j0, mp, jb), &mut x)?;
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qm.block(0, ucol, mp, p),
                &vv,
                T::ONE,
                &mut x,
            )?;
            let mut x2 = wb.block_mut(0, 0, mp, jb);
            g.gemm(Op::N, Op::N, T::ONE, &x.as_view(), &tv, T::ZERO, &mut x2)?;
            g.gemm(
                Op::N,
                Op::N,
                -T::ONE,
                &x.as_view(),
                &tv,
                T::ONE,
                &mut qm.block_mut(0, j0, mp, jb),
            )?;
            g.gemm(
                Op::N,
                Op::T,
                -T::ONE,
                &x2.as_view(),
                &vv,
                T::ONE,
                &mut qm.block_mut(0, ucol, mp, p),
            )?;
        }
        Ok(())
    }
}

/// A thin state's factors after the blocked path: R and d keep their first n rows (e's rows
/// left over feed only the residual, which the kept b gives), Q₁′ = P·[Q₁·H(0:n, 0:n);
/// H(n:n+p, 0:n)] with the new rows at k0, and b takes e's rows at k0.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn thin_finish<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    out: NewFactors<T>,
    k0: usize,
    e: MatRef<'_, T>,
) -> Result<ThinInserted<T>> {
    let (m, n, q, p) = (f.dims.m, f.dims.n, f.dims.q, e.nrows());
    let r = g.two_phase_copy_new(&out.r.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&out.d.block(0, 0, n, q), 0..0, false)?;
    g.stage_mark("reflectors on R, d and H");
    let h = out.q.as_ref().expect("a thin state holds Q₁");
    let qo = f.q1();
    let mut q1 = DevMat::<T>::for_overwrite(g, m + p, n)?;
    for (src, dst, len) in [(0, 0, k0), (k0, k0 + p, m - k0)] {
        if len > 0 {
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qo.block(src, 0, len, n),
                &h.block(0, 0, n, n),
                T::ZERO,
                &mut q1.block_mut(dst, 0, len, n),
            )?;
        }
    }
    g.panel_copy(&h.block(n, 0, p, n), &mut q1.block_mut(k0, 0, p, n))?;
    g.stage_mark("Q1' = Q1·H");
    let eo = DevMat::from_host_async(g, e)?;
    let b = reduced::with_rows_inserted(g, f.kept_b(), k0, &eo.view())?;
    Ok(ThinInserted { r, d, q: q1, b })
}

/// A thin state's factors after a row insertion.
pub(crate) struct ThinInserted<T> {
    /// R′ (n×n).
    pub(crate) r: DevMat<T>,
    /// d′ (n×q).
    pub(crate) d: DevMat<T>,
    /// Q₁′ ((m+p)×n).
    pub(crate) q: DevMat<T>,
    /// The kept b′ ((m+p)×q).
    pub(crate) b: DevMat<T>,
}

/// The R-only kind's factors after the new rows entered (docs/algorithms.md#updates-without-q):
/// `r` and `d` are n + p rows high; the residual norms take what the new rows left in d's
/// rows n.. (ρ′² = ρ² + ‖d(n.., k)‖²), R and d keep their first n rows, and the kept A and b
/// (`kept`, if any) take the new rows at k0.
pub(crate) struct ReducedInserted<T> {
    /// R′ (n×n).
    pub(crate) r: DevMat<T>,
    /// d′ (n×q).
    pub(crate) d: DevMat<T>,
    /// The new residual norms.
    pub(crate) rho: Vec<T>,
    /// The kept A and b with the new rows, where kept.
    pub(crate) kept: Option<(DevMat<T>, DevMat<T>)>,
}

/// [`ReducedInserted`] from the n + p rows high `r` and `d`.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn reduced_finish<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    kept: Option<(&DevMat<T>, &DevMat<T>)>,
    (r, d): (DevMat<T>, DevMat<T>),
    k0: usize,
    (u, e): (MatRef<'_, T>, MatRef<'_, T>),
) -> Result<ReducedInserted<T>> {
    let (n, p) = (f.dims.n, u.nrows());
    let (r, d, rho) = reduced::trimmed(g, f.rho, (r, d), (n, p))?;
    let kept = match kept {
        Some((a, b)) => Some((
            reduced::with_rows_inserted(g, a, k0, &DevMat::from_host_async(g, u)?.view())?,
            reduced::with_rows_inserted(g, b, k0, &DevMat::from_host_async(g, e)?.view())?,
        )),
        None => None,
    };
    Ok(ReducedInserted { r, d, rho, kept })
}
