//! Insert p rows U (p×n) with right-hand-side rows e (p×q) at row k0 (spec §1.9; S0 §2.4.3,
//! §4.3; S2 §3.3). Compact-WY row addition: reflector j acts on R's row j and the p rows of
//! U only, so V = [I; 0; V_U] and T comes from V_UᵀV_U alone. Cost ≈ 2pn² + O(n²),
//! independent of m (plus O(m·p·n) to carry Q). Q optional; with Q, Q̃ = Pᵀ diag(Q, I_p)
//! H₁⋯H_n puts the new rows at k0..k0+p. Errata E14 (τ ≥ 0) and E16 (U update) fixed.
#![forbid(unsafe_code)]

use crate::cpu::householder::house;
use crate::cpu::wy::{larft_from_gram, resolve_block_size};
use crate::cpu::{check_rank_of, CpuQr, Dims};
use crate::error::{Error, Result};
use crate::mat::{Mat, MatRef};
use crate::scalar::Scalar;

const OP: &str = "insert_rows";

/// A validated row insertion (spec §1.9): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Row position of the first new row in Ã (0-based, ≤ m).
    pub k0: usize,
    /// Number of new rows.
    pub p: usize,
    /// Rows after the update, m + p.
    pub m_new: usize,
}

/// Validates inserting the p×n block `u` with right-hand-side rows `e` (p×q) as rows
/// k0..k0+p (spec §1.9, §0.2: k0 ∈ [0, m]). Pure; Q is not required.
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::Shape`] (u not p×n, e not p×q),
/// [`Error::OutOfRange`] (k0 > m; reported with `n` = m), [`Error::NonFinite`]
/// (naming "u" or "e" and the entry).
pub(crate) fn plan<T: Scalar>(
    dims: Dims,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<Plan> {
    let p = u.nrows();
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    for (what, got, expected) in [
        ("columns of u", u.ncols(), dims.n),
        ("rows of e", e.nrows(), p),
        ("columns of e", e.ncols(), dims.q),
    ] {
        if got != expected {
            return Err(Error::Shape {
                op: OP,
                what,
                got,
                expected,
            });
        }
    }
    if k0 > dims.m {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.m,
        });
    }
    for (what, x) in [("u", u), ("e", e)] {
        if let Some((row, col)) = x.first_non_finite() {
            return Err(Error::NonFinite {
                op: OP,
                what,
                row,
                col,
            });
        }
    }
    Ok(Plan {
        k0,
        p,
        m_new: dims.m + p,
    })
}

/// Inserts the rows `u` (p×n) and right-hand-side rows `e` (p×q) so that they become rows
/// k0..k0+p of Ã and b̃ (spec §1.9). Afterwards R̃ is (m+p)×n, d̃ = Q̃ᵀb̃ (the residual
/// includes the transformed e) and, when held, Q̃ is (m+p)×(m+p) with Q̃R̃ = Ã.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (the result is built in new buffers first).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(6, 3, |i, j| ((i + 2 * j) % 4) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// st.insert_row(2, &[1.0, -2.0, 0.5], &[3.0]).unwrap();
/// assert_eq!(st.nrows(), 7);
/// ```
pub fn run_cpu<T: Scalar>(
    st: &mut CpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    let plan = plan(st.dims, k0, u, e)?;
    let Dims { m, n, q, .. } = st.dims;
    let p = plan.p;
    let nb = resolve_block_size(OP, st.params.block_size, n)?;
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    let mut uw = u.to_owned();
    let mut ew = e.to_owned();
    // M = diag(Q, I_p), accumulated as M·H₁⋯H_n; rows permuted at the end.
    let mut mq = st.q.as_ref().map(|qm| {
        let mut mm = Mat::<T>::zeros(m + p, m + p);
        for j in 0..m {
            mm.col_mut(j)[..m].copy_from_slice(qm.col(j));
        }
        for i in 0..p {
            mm[(m + i, m + i)] = T::ONE;
        }
        mm
    });

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        let mut vu = Mat::<T>::zeros(p, jb);
        let mut tau = Vec::with_capacity(jb);
        // Phase 1: reduce the block column by column (level 2).
        for j in j0..j0 + jb {
            let i = j - j0;
            let (beta, t) = house(r[(j, j)], uw.col_mut(j));
            r[(j, j)] = beta;
            vu.col_mut(i).copy_from_slice(uw.col(j));
            uw.col_mut(j).fill(T::ZERO);
            tau.push(t);
            if t == T::ZERO {
                continue;
            }
            let v = vu.col(i);
            for c in j + 1..j0 + jb {
                // w = R[j, c] + vᵀU[:, c]; R[j, c] −= τw; U[:, c] −= τ v w.
                let uc = uw.col_mut(c);
                let mut w = r[(j, c)];
                for (vk, &x) in v.iter().zip(uc.iter()) {
                    w = vk.mul_add(x, w);
                }
                let tw = t * w;
                r[(j, c)] -= tw;
                for (x, &vk) in uc.iter_mut().zip(v) {
                    *x = (-tw).mul_add(vk, *x);
                }
            }
        }
        // Phase 2: T from V_U only (the identity rows of V are orthogonal off the diagonal).
        let mut s = Mat::<T>::zeros(jb, jb);
        for b in 0..jb {
            for a in 0..b {
                let mut acc = T::ZERO;
                for (&x, &y) in vu.col(a).iter().zip(vu.col(b)) {
                    acc = x.mul_add(y, acc);
                }
                s[(a, b)] = acc;
            }
        }
        let t = larft_from_gram(&s, &tau);
        // Phase 3: trailing R rows and U, then d and e (both "R₁ + V_UᵀU₂" patterns).
        apply_block_rows(&vu, &t, &mut r, &mut uw, j0, j0 + jb..n);
        apply_block_rows(&vu, &t, &mut d, &mut ew, j0, 0..q);
        if let Some(mm) = mq.as_mut() {
            apply_block_q(&vu, &t, mm, j0, m);
        }
        j0 += jb;
    }

    // R̃ = [R; 0]: U has been reduced to exact zeros.
    let mut r_new = Mat::<T>::zeros(m + p, n);
    for j in 0..n {
        r_new.col_mut(j)[..m].copy_from_slice(r.col(j));
    }
    check_rank_of(&r_new, n, st.rank_tol)?;
    let mut d_new = Mat::<T>::zeros(m + p, q);
    for c in 0..q {
        d_new.col_mut(c)[..m].copy_from_slice(d.col(c));
        d_new.col_mut(c)[m..].copy_from_slice(ew.col(c));
    }
    // Q̃ = Pᵀ M: M's rows m..m+p move to k0..k0+p, its rows k0..m move down by p.
    let q_new = mq.map(|mm| {
        let src_row = |i: usize| {
            if i < k0 {
                i
            } else if i < k0 + p {
                m + (i - k0)
            } else {
                i - p
            }
        };
        Mat::from_fn(m + p, m + p, |i, j| mm[(src_row(i), j)])
    });
    st.r = r_new;
    st.d = d_new;
    st.q = q_new;
    st.dims.m = plan.m_new;
    Ok(())
}

/// Phase 3 of spec §1.9 on columns `cols` of a pair (top rows j0..j0+jb of `top`, all
/// rows of `bot`): W = Tᵀ(top[j0.., J] + V_Uᵀ bot[:, J]); top −= W; bot −= V_U W.
fn apply_block_rows<T: Scalar>(
    vu: &Mat<T>,
    t: &Mat<T>,
    top: &mut Mat<T>,
    bot: &mut Mat<T>,
    j0: usize,
    cols: core::ops::Range<usize>,
) {
    let jb = vu.ncols();
    let mut w = vec![T::ZERO; jb];
    let mut w2 = vec![T::ZERO; jb];
    for c in cols {
        let bc = bot.col_mut(c);
        let tc = &mut top.col_mut(c)[j0..j0 + jb];
        for (i, wi) in w.iter_mut().enumerate() {
            let mut acc = tc[i];
            for (&x, &y) in vu.col(i).iter().zip(bc.iter()) {
                acc = x.mul_add(y, acc);
            }
            *wi = acc;
        }
        for (i, w2i) in w2.iter_mut().enumerate() {
            let mut acc = T::ZERO;
            for (r, &wr) in w.iter().enumerate().take(i + 1) {
                acc = t[(r, i)].mul_add(wr, acc);
            }
            *w2i = acc;
        }
        for (i, &wi) in w2.iter().enumerate() {
            tc[i] -= wi;
            if wi == T::ZERO {
                continue;
            }
            for (x, &vk) in bc.iter_mut().zip(vu.col(i)) {
                *x = (-wi).mul_add(vk, *x);
            }
        }
    }
}

/// M ← M (I − V T Vᵀ) for V = [I at rows j0..j0+jb; V_U at rows m..m+p] (spec §1.9 [EXT]):
/// W = (M[:, j0..j0+jb] + M[:, m..] V_U) T; M[:, j0..j0+jb] −= W; M[:, m..] −= W V_Uᵀ.
fn apply_block_q<T: Scalar>(vu: &Mat<T>, t: &Mat<T>, mm: &mut Mat<T>, j0: usize, m: usize) {
    let (p, jb) = (vu.nrows(), vu.ncols());
    let rows = mm.nrows();
    let mut w = Mat::<T>::zeros(rows, jb);
    for i in 0..jb {
        w.col_mut(i).copy_from_slice(mm.col(j0 + i));
        for k in 0..p {
            let s = vu[(k, i)];
            if s == T::ZERO {
                continue;
            }
            let (dst, src) = (w.col_mut(i), mm.col(m + k));
            for (dv, &x) in dst.iter_mut().zip(src) {
                *dv = x.mul_add(s, *dv);
            }
        }
    }
    for i in (0..jb).rev() {
        let tii = t[(i, i)];
        for x in w.col_mut(i).iter_mut() {
            *x *= tii;
        }
        for r in 0..i {
            let s = t[(r, i)];
            if s == T::ZERO {
                continue;
            }
            let (dst, src) = w.two_cols_mut(i, r);
            for (dv, &x) in dst.iter_mut().zip(src.iter()) {
                *dv = x.mul_add(s, *dv);
            }
        }
    }
    for i in 0..jb {
        let (dst, src) = (mm.col_mut(j0 + i), w.col(i));
        for (dv, &x) in dst.iter_mut().zip(src) {
            *dv -= x;
        }
    }
    for k in 0..p {
        let dst = mm.col_mut(m + k);
        for i in 0..jb {
            let s = vu[(k, i)];
            if s == T::ZERO {
                continue;
            }
            for (dv, &x) in dst.iter_mut().zip(w.col(i)) {
                *dv = (-s).mul_add(x, *dv);
            }
        }
    }
}

/// Most rows of a stacked row-insertion panel (jb + p) that `run_gpu` gives the one-block
/// panel rather than the cooperative one (measured: see `run_gpu_path`).
const SMALL_PANEL_ROW_INSERT_MAX_ROWS: usize = 272;

/// GPU path of [`run_cpu`] (spec §1.9, erratum E16): validates with the same `plan`,
/// then the compact-WY row addition on the device: phase 1 per column (`house` on
/// R(j, j) and U(:, j), `panel_apply` on the block's rest of R's row j and U), phase 2
/// T by `wy_build_t` on V_U, phase 3 by GEMMs (W = R₁ + V_UᵀU₂; R₁ −= TᵀW;
/// U₂ −= V_U(TᵀW)), d and e likewise; with Q, Q̃ = Pᵀ·diag(Q, I_p)·H₁⋯H_n with the
/// new rows at k0. Everything is built in new buffers and swapped in after the rank
/// check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    run_gpu_path(st, k0, u, e, true)
}

/// [`run_gpu`] with the one-launch path (`row_insert_qr`, states without Q) allowed or
/// not; `false` always takes the blocked compact-WY path (tests compare the two).
pub(crate) fn run_gpu_path<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
    one_launch: bool,
) -> Result<()> {
    use crate::gpu::householder::check_rank_dev;
    use crate::gpu::kernels::BUILD_T_MAX_K;
    use crate::gpu::kernels_fused::{FusedPanelWork, FUSED_MAX_JB};
    use crate::gpu::{DevMat, DevVec, Op};
    let plan = plan(st.dims, k0, u, e)?;
    let Dims { m, n, q, .. } = st.dims;
    let p = plan.p;
    let gpu = st.gpu.clone();
    let g = &*gpu;
    let nb = resolve_block_size(OP, st.params.block_size, n)?
        .min(BUILD_T_MAX_K)
        .min(n);
    // The one-block panel (`small_panel_qr`) for short stacked (jb+p)×jb panels: its
    // reflectors are made by one warp, so its column step grows with the rows, and
    // against the cooperative panel it won at 164 rows and tied at 264 but lost at 364
    // (H100 f64, `cuqr bench updates`, ACC/AR-n p = 100, 200, 300 with nb = 64; narrower
    // panels that fit lost more, by their extra launches: docs/performance.md).
    let small_panel =
        nb + p <= SMALL_PANEL_ROW_INSERT_MAX_ROWS && g.small_panel_fits::<T>(nb + p, nb);
    if one_launch && st.q.is_none() {
        if let Some(shape) = g.row_insert_plan::<T>(n, q, p)? {
            // Without Q the whole update is one cooperative launch (spec §1.9): the
            // reflectors of [R d; U e] flow between blocks that own its columns.
            let mut r = DevMat::<T>::zeros(g, m + p, n)?;
            let mut d = DevMat::<T>::zeros(g, m + p, q)?;
            let mut uw = DevMat::from_host_async(g, u)?;
            let mut ew = DevMat::from_host_async(g, e)?;
            g.panel_copy(&st.r.view(), &mut r.block_mut(0, 0, m, n))?;
            g.panel_copy(&st.d.view(), &mut d.block_mut(0, 0, m, q))?;
            g.stage_mark("upload, copies");
            g.row_insert_qr(&mut r, &mut d, &mut uw, &mut ew, n, q, p, shape)?;
            g.stage_mark("row_insert_qr");
            g.panel_copy(&ew.view(), &mut d.block_mut(m, 0, p, q))?;
            check_rank_dev(g, &r, n, st.rank_tol)?;
            g.stage_mark("rank check");
            st.r = r;
            st.d = d;
            st.dims.m = m + p;
            return Ok(());
        }
    }
    let mut r = DevMat::<T>::zeros(g, m + p, n)?;
    let mut d = DevMat::<T>::zeros(g, m + p, q)?;
    let mut qn = match st.q.as_ref() {
        Some(_) => Some(DevMat::<T>::zeros(g, m + p, m + p)?),
        None => None,
    };
    let mut uw = DevMat::from_host_async(g, u)?;
    let mut ew = DevMat::from_host_async(g, e)?;
    let mut tau = DevVec::<T>::zeros(g, nb)?;
    let mut t = DevMat::<T>::zeros(g, nb, nb)?;
    let mut vu = DevMat::<T>::zeros(g, p, nb)?;
    let wc = n.max(q);
    let mut w = DevMat::<T>::zeros(g, nb, wc)?;
    let mut w2 = DevMat::<T>::zeros(g, nb, wc)?;
    let mut wq = match qn.as_ref() {
        Some(_) => Some((
            DevMat::<T>::zeros(g, m + p, nb)?,
            DevMat::<T>::zeros(g, m + p, nb)?,
        )),
        None => None,
    };
    // The one-launch panel and its staging (panel, V) when nb fits it.
    let (mut fused, mut staging) = if small_panel {
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
    g.panel_copy(&st.r.view(), &mut r.block_mut(0, 0, m, n))?;
    g.panel_copy(&st.d.view(), &mut d.block_mut(0, 0, m, q))?;
    if let (Some(qo), Some(qm)) = (st.q.as_ref(), qn.as_mut()) {
        g.panel_embed_q(&qo.view(), k0, &mut qm.view_mut())?;
    }

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        if let Some((sa, sv)) = staging.as_mut() {
            // Phases 1–2 in one launch: the (jb+p)×jb panel [R(j0.., j0..); U(:, j0..)]
            // (upper triangular top, exact zeros below its diagonal, so each reflector
            // touches row j and the p rows of U only) staged contiguously and factored by
            // `fused_panel_qr`, or by `small_panel_qr` when `small_panel` chose it; its V is
            // [I; V_U] and its T that of V_U (spec §1.9).
            g.panel_copy(&r.block(j0, j0, jb, jb), &mut sa.block_mut(0, 0, jb, jb))?;
            g.panel_copy(&uw.block(0, j0, p, jb), &mut sa.block_mut(jb, 0, p, jb))?;
            let (mut vb, mut tb) = (sv.block_mut(0, 0, jb + p, jb), t.block_mut(0, 0, jb, jb));
            match fused.as_mut() {
                Some(fw) => {
                    g.fused_panel_qr(fw, sa, 0, 0, jb + p, jb, None, &mut vb, &mut tau, &mut tb)?
                }
                None => g.small_panel_qr(sa, 0, 0, jb + p, jb, None, &mut vb, &mut tau, &mut tb)?,
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
                g.panel_apply_split(&mut r, j, &mut uw, j, j + 1..j0 + jb, &tau, i)?;
            }
            // Phase 2: V_U (a copy, so U₂ can be written while V_U is read) and T.
            g.panel_copy(&uw.block(0, j0, p, jb), &mut vu.block_mut(0, 0, p, jb))?;
            g.wy_build_t(
                &vu.block(0, 0, p, jb),
                &tau.slice(0..jb),
                &mut t.block_mut(0, 0, jb, jb),
            )?;
        }
        let (vv, tv) = (vu.block(0, 0, p, jb), t.block(0, 0, jb, jb));
        // Phase 3: trailing R rows and U, then d and e.
        for (top, bot, cols) in [(&mut r, &mut uw, j0 + jb..n), (&mut d, &mut ew, 0..q)] {
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
        // Q̃[:, j0..j0+jb] and Q̃[:, m..m+p] := (those columns)·(I − V T Vᵀ).
        if let (Some(qm), Some((wa, wb))) = (qn.as_mut(), wq.as_mut()) {
            let mp = m + p;
            let mut x = wa.block_mut(0, 0, mp, jb);
            g.panel_copy(&qm.block(0, j0, mp, jb), &mut x)?;
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qm.block(0, m, mp, p),
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
                &mut qm.block_mut(0, m, mp, p),
            )?;
        }
        j0 += jb;
    }
    // d̃ = [d; e]; R̃ = [R; 0] (rows m.. were never written).
    g.panel_copy(&ew.view(), &mut d.block_mut(m, 0, p, q))?;
    check_rank_dev(g, &r, n, st.rank_tol)?;
    st.r = r;
    st.d = d;
    st.q = qn;
    st.dims.m = m + p;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::params::{FactorParams, QPolicy, UpdateParams};
    use crate::qr::factorize::tests::{check_against_refactor, rand_mat};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn dims() -> Dims {
        Dims {
            m: 10,
            n: 4,
            q: 2,
            policy: QPolicy::None,
        }
    }

    #[test]
    fn plan_cases() {
        let mut rng = StdRng::seed_from_u64(3);
        let u = rand_mat::<f64>(&mut rng, 3, 4);
        let e = rand_mat::<f64>(&mut rng, 3, 2);
        let pl = plan(dims(), 10, u.as_ref(), e.as_ref()).unwrap();
        assert_eq!((pl.k0, pl.p, pl.m_new), (10, 3, 13));
        assert!(plan(dims(), 0, u.as_ref(), e.as_ref()).is_ok());
        assert!(matches!(
            plan(dims(), 11, u.as_ref(), e.as_ref()),
            Err(Error::OutOfRange { k0: 11, n: 10, .. })
        ));
        let u0 = Mat::<f64>::zeros(0, 4);
        let e0 = Mat::<f64>::zeros(0, 2);
        assert!(matches!(
            plan(dims(), 0, u0.as_ref(), e0.as_ref()),
            Err(Error::EmptyBlock { .. })
        ));
        let u5 = rand_mat::<f64>(&mut rng, 3, 5);
        assert!(matches!(
            plan(dims(), 0, u5.as_ref(), e.as_ref()),
            Err(Error::Shape {
                what: "columns of u",
                ..
            })
        ));
        let e2 = rand_mat::<f64>(&mut rng, 2, 2);
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), e2.as_ref()),
            Err(Error::Shape {
                what: "rows of e",
                ..
            })
        ));
        let e3 = rand_mat::<f64>(&mut rng, 3, 1);
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), e3.as_ref()),
            Err(Error::Shape {
                what: "columns of e",
                ..
            })
        ));
        let mut ub = u.clone();
        ub[(2, 1)] = f64::NEG_INFINITY;
        assert!(matches!(
            plan(dims(), 0, ub.as_ref(), e.as_ref()),
            Err(Error::NonFinite {
                what: "u",
                row: 2,
                col: 1,
                ..
            })
        ));
        let mut eb = e.clone();
        eb[(0, 1)] = f64::NAN;
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), eb.as_ref()),
            Err(Error::NonFinite {
                what: "e",
                row: 0,
                col: 1,
                ..
            })
        ));
    }

    fn run_case<T: Scalar>(seed: u64, m: usize, n: usize, k0: usize, p: usize, nb: Option<usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, 2);
        let u = rand_mat::<T>(&mut rng, p, n);
        let e = rand_mat::<T>(&mut rng, p, 2);
        let insert = |x: &Mat<T>, y: &Mat<T>| {
            Mat::from_fn(m + p, x.ncols(), |i, j| {
                if i < k0 {
                    x[(i, j)]
                } else if i < k0 + p {
                    y[(i - k0, j)]
                } else {
                    x[(i - p, j)]
                }
            })
        };
        let (a_new, b_new) = (insert(&a, &u), insert(&b, &e));
        for policy in [QPolicy::Full, QPolicy::None] {
            let mut st =
                CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
            st.set_params(UpdateParams {
                block_size: nb,
                ..UpdateParams::default()
            });
            st.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
            assert_eq!((st.nrows(), st.ncols()), (m + p, n));
            check_against_refactor(&st, &a_new, &b_new);
            if let Some(q) = st.q.as_ref() {
                // d̃ = Q̃ᵀ b̃ (row order of d consistent with Q̃'s columns).
                let qtb = q.transpose().matmul(&b_new);
                let tol = 10.0 * (m + p) as f64 * T::UNIT_ROUNDOFF * b_new.norm_fro();
                for c in 0..2 {
                    for i in 0..m + p {
                        assert!((qtb[(i, c)] - st.d[(i, c)]).to_f64().abs() <= tol);
                    }
                }
            }
        }
    }

    #[test]
    fn insert_rows_matches_refactor_f64() {
        for &(m, n, k0, p, nb) in &[
            (1usize, 1usize, 0usize, 1usize, None),
            (1, 1, 1, 2, Some(3)),
            (33, 31, 0, 1, None),
            (33, 31, 17, 1, Some(4)),
            (33, 31, 33, 1, None),
            (127, 61, 0, 7, Some(5)),
            (127, 61, 60, 13, Some(100)),
            (127, 61, 127, 33, None),
            (45, 45, 20, 70, Some(8)),
            (257, 127, 3, 5, Some(31)),
        ] {
            run_case::<f64>(m as u64 + 17 * k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn insert_rows_matches_refactor_f32() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (127, 61, 40, 9, Some(3)),
            (127, 61, 127, 2, None),
            (257, 33, 100, 31, Some(64)),
        ] {
            run_case::<f32>(3 * m as u64 + k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut rng = StdRng::seed_from_u64(77);
        let a = rand_mat::<f64>(&mut rng, 37, 11);
        let b = rand_mat::<f64>(&mut rng, 37, 2);
        let u = rand_mat::<f64>(&mut rng, 3, 11);
        let e = rand_mat::<f64>(&mut rng, 3, 2);
        let mut st = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .unwrap();
        let snap = st.clone();
        let same =
            |s: &CpuQr<f64>| s.r == snap.r && s.d == snap.d && s.q == snap.q && s.dims == snap.dims;
        assert!(matches!(
            st.insert_rows(38, u.as_ref(), e.as_ref()),
            Err(Error::OutOfRange { .. })
        ));
        assert!(same(&st));
        assert!(matches!(
            st.insert_rows(2, u.as_ref(), u.as_ref()),
            Err(Error::Shape { .. })
        ));
        assert!(same(&st));
        let mut ub = u.clone();
        ub[(1, 5)] = f64::NAN;
        assert!(matches!(
            st.insert_rows(2, ub.as_ref(), e.as_ref()),
            Err(Error::NonFinite { .. })
        ));
        assert!(same(&st));
        st.params.block_size = Some(0);
        assert!(matches!(
            st.insert_rows(2, u.as_ref(), e.as_ref()),
            Err(Error::InvalidParam { .. })
        ));
        assert!(same(&st));
        st.params.block_size = None;
        // A single huge row raises ‖R̃‖_F by 1e9 but adds rank one only: with a relative
        // tolerance of 1e-6 the update is rejected after it has been computed.
        st.rank_tol = 1e-6;
        let huge = Mat::from_fn(1, 11, |_, j| 1e9 * (1.0 + j as f64));
        let e1 = rand_mat::<f64>(&mut rng, 1, 2);
        assert!(matches!(
            st.insert_rows(5, huge.as_ref(), e1.as_ref()),
            Err(Error::RankDeficient { .. })
        ));
        assert!(same(&st));
        // The same state accepts a sensible row.
        st.insert_rows(5, u.as_ref(), e.as_ref()).unwrap();
        assert_eq!(st.nrows(), 40);
    }
}

/// The one-launch path (`row_insert_qr`) against the CPU update and the blocked GPU
/// path, on the GPU (skips without one).
#[cfg(test)]
mod gpu_tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::gpu::{GpuQr, GpuScalar};
    use crate::params::{FactorParams, QPolicy};
    use crate::qr::factorize::tests::{lower_is_zero, rand_mat, rel_diff};
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::sync::Arc;

    #[allow(clippy::too_many_arguments)]
    fn case<T: GpuScalar>(
        g: &Arc<crate::gpu::Gpu>,
        seed: u64,
        m: usize,
        n: usize,
        q: usize,
        p: usize,
        k0: usize,
    ) {
        let what = format!(
            "{} m={m} n={n} q={q} p={p} k0={k0}",
            core::any::type_name::<T>()
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, q);
        let u = rand_mat::<T>(&mut rng, p, n);
        let e = rand_mat::<T>(&mut rng, p, q);
        assert!(
            g.row_insert_plan::<T>(n, q, p).unwrap().is_some(),
            "{what}: the one-launch path must apply"
        );
        let params = FactorParams::default();
        let mut cs = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
        cs.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
        let tol = 10.0 * (m + p) as f64 * T::UNIT_ROUNDOFF;
        for one_launch in [true, false] {
            let mut gs =
                GpuQr::factorize(g, a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
            run_gpu_path(&mut gs, k0, u.as_ref(), e.as_ref(), one_launch).unwrap();
            assert_eq!(gs.dims.m, m + p, "{what}");
            let (r, d) = (gs.r.to_host(g).unwrap(), gs.d.to_host(g).unwrap());
            assert!(
                lower_is_zero(&r),
                "{what} one_launch={one_launch}: R not upper triangular"
            );
            let er = rel_diff(&r, &cs.r);
            assert!(
                er <= tol,
                "{what} one_launch={one_launch}: R differs from the CPU by {er:.2e} > {tol:.2e}"
            );
            if q > 0 {
                let ed = rel_diff(&d, &cs.d);
                assert!(ed <= tol, "{what} one_launch={one_launch}: d differs from the CPU by {ed:.2e} > {tol:.2e}");
            }
        }
    }

    fn sweep<T: GpuScalar>(g: &Arc<crate::gpu::Gpu>) {
        // (m, n, q, p, k0): p = 1, p < 32, p = 33 (two elements a lane), p = 100;
        // n + q not multiples of 32; sizes up to ~1000 columns (several blocks).
        for (i, &(m, n, q, p, k0)) in [
            (7, 5, 1, 1, 3),
            (60, 37, 2, 20, 0),
            (130, 97, 1, 33, 130),
            (700, 501, 1, 20, 250),
            (1210, 1003, 3, 100, 5),
            (300, 250, 1, 256, 17),
        ]
        .iter()
        .enumerate()
        {
            case::<T>(g, 40 + i as u64, m, n, q, p, k0);
        }
    }

    #[test]
    fn one_launch_row_insertion_matches_cpu_and_blocked_f64() {
        let Some(g) = crate::gpu::householder::tests_gate() else {
            return;
        };
        sweep::<f64>(&Arc::new(g));
    }

    #[test]
    fn one_launch_row_insertion_matches_cpu_and_blocked_f32() {
        let Some(g) = crate::gpu::householder::tests_gate() else {
            return;
        };
        sweep::<f32>(&Arc::new(g));
    }
}
