//! Blocked Householder QR on the device (spec §1.3–§1.4; docs/design.md
//! "Shared building blocks"): per panel column the `householder_house` kernel and
//! `panel_apply`, V extracted with explicit unit diagonal and zeros by
//! `panel_extract_v` (which also leaves exact zeros below R's diagonal), T by
//! `wy_build_t` (LAPACK larft, τ ≥ 0, erratum E14), and the trailing matrix, d and
//! Q updated with three cuBLAS GEMMs each: C −= V·(Tᵀ·(VᵀC)), Q −= ((QV)T)Vᵀ.
//! A `band` limits each reflector to band+1 rows (column deletion, spec §1.8).

use core::ops::Range;

use super::blas::Op;
use super::kernels::BUILD_T_MAX_K;
use super::matrix::{DevMat, DevVec};
use super::{Gpu, GpuScalar};
use crate::error::{Error, Result};

/// One block reflector I − V T Vᵀ acting on rows `row0 .. row0 + v.nrows()`,
/// kept for backward accumulation of Q (spec §4.3 lesson 1).
pub(crate) struct Block<T> {
    /// First row the block acts on.
    pub row0: usize,
    /// V (ℓ×jb, unit lower trapezoidal, explicit 1s and 0s).
    pub v: DevMat<T>,
    /// T (jb×jb upper triangular).
    pub t: DevMat<T>,
}

/// Workspace of [`blocked_qr`]: τ, T, V and the GEMM intermediates.
struct Work<T> {
    tau: DevVec<T>,
    t: DevMat<T>,
    v: DevMat<T>,
    w: DevMat<T>,
    w2: DevMat<T>,
    wq: Option<(DevMat<T>, DevMat<T>)>,
}

/// Triangularises A[rows, cols] in place (β on the diagonal, exact zeros below),
/// applying the reflectors to A[rows, cols.end..] (trailing columns), to d[rows, :]
/// from the left (Qᵀ side) and to Q[:, rows] from the right (Q := Q·H), with
/// compact-WY blocks of `nb` reflectors (spec §1.4).
///
/// # Errors
/// [`Error::InvalidParam`] for nb = 0 (nb > 256 is clamped to 256), [`Error::OutOfMemory`] for the
/// workspace, [`Error::Driver`], [`Error::Cublas`].
///
/// # Panics
/// If the ranges do not fit `a`, or d / Q do not match its rows (a cuqr bug).
pub fn blocked_qr<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    d: Option<&mut DevMat<T>>,
    q: Option<&mut DevMat<T>>,
    nb: usize,
) -> Result<()> {
    blocked_qr_band(gpu, a, rows, cols, None, d, q, nb, None)
}

/// [`blocked_qr`] with an optional `band`: reflector j touches at most band+1 rows
/// (its column is zero below that, spec §1.8), so V blocks have ≤ band + nb rows and
/// only those rows of the trailing columns, d and Q's columns change. With `keep`,
/// every block's V and T are kept (for backward accumulation of Q).
#[allow(clippy::too_many_arguments)]
pub(crate) fn blocked_qr_band<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    band: Option<usize>,
    mut d: Option<&mut DevMat<T>>,
    mut q: Option<&mut DevMat<T>>,
    nb: usize,
    mut keep: Option<&mut Vec<Block<T>>>,
) -> Result<()> {
    if nb == 0 {
        return Err(Error::InvalidParam {
            op: "blocked_qr",
            what: "block size",
            why: "must be at least 1".into(),
        });
    }
    // T is built by one block of wy_build_t: at most 256 reflectors per block.
    let nb = nb.min(BUILD_T_MAX_K);
    assert!(rows.end <= a.nrows() && cols.end <= a.ncols());
    assert!(cols.len() <= rows.len(), "more columns than rows");
    if let Some(dm) = d.as_deref() {
        assert_eq!(dm.nrows(), a.nrows());
    }
    if let Some(qm) = q.as_deref() {
        assert_eq!(qm.ncols(), a.nrows());
    }
    if cols.is_empty() {
        return Ok(());
    }
    let nb = nb.min(cols.len());
    let span_rows = |r0: usize, jb: usize| -> usize {
        let l = rows.end - r0;
        band.map_or(l, |b| l.min(b + jb))
    };
    let lmax = span_rows(rows.start, nb);
    let qcols = d.as_deref().map_or(0, |x| x.ncols());
    let wcols = (a.ncols() - cols.start).max(qcols).max(1);
    let mut ws = Work {
        tau: DevVec::zeros(gpu, nb)?,
        t: DevMat::zeros(gpu, nb, nb)?,
        v: DevMat::zeros(gpu, if keep.is_some() { 1 } else { lmax }, nb)?,
        w: DevMat::zeros(gpu, nb, wcols)?,
        w2: DevMat::zeros(gpu, nb, wcols)?,
        wq: match q.as_deref() {
            Some(qm) => Some((
                DevMat::zeros(gpu, qm.nrows(), nb)?,
                DevMat::zeros(gpu, qm.nrows(), nb)?,
            )),
            None => None,
        },
    };
    let mut j0 = cols.start;
    while j0 < cols.end {
        let jb = nb.min(cols.end - j0);
        let r0 = rows.start + (j0 - cols.start);
        let l = span_rows(r0, jb);
        // Panel (level 2): house + apply per column.
        for i in 0..jb {
            let (j, rj) = (j0 + i, r0 + i);
            let len = band.map_or(rows.end - rj - 1, |b| b.min(rows.end - rj - 1));
            gpu.house_at(a, rj, j, len, &mut ws.tau, i)?;
            gpu.panel_apply_in(a, j, rj, len, j + 1..j0 + jb, &ws.tau, i)?;
        }
        // V (explicit 1s/0s; exact zeros left below R's diagonal) and T.
        let mut kept = if keep.is_some() {
            Some((DevMat::zeros(gpu, l, jb)?, DevMat::zeros(gpu, jb, jb)?))
        } else {
            None
        };
        let (v, t) = match kept.as_mut() {
            Some((v, t)) => (v, t),
            None => (&mut ws.v, &mut ws.t),
        };
        gpu.panel_extract_v(
            &mut a.block_mut(r0, j0, l, jb),
            &mut v.block_mut(0, 0, l, jb),
        )?;
        gpu.wy_build_t(
            &v.block(0, 0, l, jb),
            &ws.tau.slice(0..jb),
            &mut t.block_mut(0, 0, jb, jb),
        )?;
        let (vv, tv) = (v.block(0, 0, l, jb), t.block(0, 0, jb, jb));
        // Trailing columns and d: C −= V (Tᵀ (Vᵀ C)).
        let nc = a.ncols() - (j0 + jb);
        if nc > 0 {
            larfb_left(
                gpu,
                &vv,
                &tv,
                true,
                a,
                r0,
                j0 + jb..a.ncols(),
                &mut ws.w,
                &mut ws.w2,
            )?;
        }
        if let Some(dm) = d.as_deref_mut() {
            let qc = dm.ncols();
            larfb_left(gpu, &vv, &tv, true, dm, r0, 0..qc, &mut ws.w, &mut ws.w2)?;
        }
        // Q[:, r0..r0+l] −= ((Q V) T) Vᵀ.
        if let (Some(qm), Some((wq, wq2))) = (q.as_deref_mut(), ws.wq.as_mut()) {
            let mq = qm.nrows();
            let mut w = wq.block_mut(0, 0, mq, jb);
            gpu.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qm.block(0, r0, mq, l),
                &vv,
                T::ZERO,
                &mut w,
            )?;
            let mut w2 = wq2.block_mut(0, 0, mq, jb);
            gpu.gemm(Op::N, Op::N, T::ONE, &w.as_view(), &tv, T::ZERO, &mut w2)?;
            gpu.gemm(
                Op::N,
                Op::T,
                -T::ONE,
                &w2.as_view(),
                &vv,
                T::ONE,
                &mut qm.block_mut(0, r0, mq, l),
            )?;
        }
        if let (Some(list), Some((v, t))) = (keep.as_deref_mut(), kept) {
            list.push(Block { row0: r0, v, t });
        }
        j0 += jb;
    }
    Ok(())
}

/// C[row0 .. row0+ℓ, cols] := (I − V op(T) Vᵀ) C with op(T) = Tᵀ when `trans`
/// (the Qᵀ side, H_k⋯H_1) or T (H_1⋯H_k, backward accumulation): three GEMMs
/// (spec §1.3(b), LAPACK larfb pattern). `w`, `w2` hold ≥ jb × |cols|.
#[allow(clippy::too_many_arguments)]
pub(crate) fn larfb_left<T: GpuScalar>(
    gpu: &Gpu,
    v: &super::DevMatView<'_, T>,
    t: &super::DevMatView<'_, T>,
    trans: bool,
    c: &mut DevMat<T>,
    row0: usize,
    cols: Range<usize>,
    w: &mut DevMat<T>,
    w2: &mut DevMat<T>,
) -> Result<()> {
    let (l, jb, nc) = (v.nrows(), v.ncols(), cols.len());
    if nc == 0 || jb == 0 {
        return Ok(());
    }
    let mut w = w.block_mut(0, 0, jb, nc);
    gpu.gemm(
        Op::T,
        Op::N,
        T::ONE,
        v,
        &c.block(row0, cols.start, l, nc),
        T::ZERO,
        &mut w,
    )?;
    let mut w2 = w2.block_mut(0, 0, jb, nc);
    let op = if trans { Op::T } else { Op::N };
    gpu.gemm(op, Op::N, T::ONE, t, &w.as_view(), T::ZERO, &mut w2)?;
    gpu.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        v,
        &w2.as_view(),
        T::ONE,
        &mut c.block_mut(row0, cols.start, l, nc),
    )
}

/// Q := H_1⋯H_K applied to the identity, backwards (Q = B₁(B₂(⋯(B_K I)))), each
/// block touching rows and columns row0.. only (spec §4.3 lesson 1).
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
pub(crate) fn accumulate_q_backward<T: GpuScalar>(
    gpu: &Gpu,
    blocks: &[Block<T>],
    q: &mut DevMat<T>,
) -> Result<()> {
    let m = q.nrows();
    gpu.panel_set_identity(&mut q.view_mut())?;
    let nb = blocks.iter().map(|b| b.t.ncols()).max().unwrap_or(1);
    let mut w = DevMat::zeros(gpu, nb, m)?;
    let mut w2 = DevMat::zeros(gpu, nb, m)?;
    for b in blocks.iter().rev() {
        larfb_left(
            gpu,
            &b.v.view(),
            &b.t.view(),
            false,
            q,
            b.row0,
            b.row0..m,
            &mut w,
            &mut w2,
        )?;
    }
    Ok(())
}

/// Rank check of an upper-trapezoidal R on the device (spec §5.2 F19): the first
/// column with |R_jj| ≤ rank_tol·‖R‖_F (or non-finite) is [`Error::RankDeficient`],
/// as `cpu::check_rank_of`. One launch and one download of 2n values.
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn check_rank_dev<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    n: usize,
    rank_tol: f64,
) -> Result<()> {
    let mut out = DevVec::<T>::zeros(gpu, 2 * n)?;
    gpu.panel_col_norms(&r.block(0, 0, r.nrows(), n), &mut out.view_mut())?;
    let h = out.to_vec(gpu)?;
    let norms: Vec<f64> = h[..n].iter().map(|x| x.to_f64()).collect();
    let scale = norms.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let fro = if scale == 0.0 || !scale.is_finite() {
        scale
    } else {
        scale
            * norms
                .iter()
                .map(|x| (x / scale) * (x / scale))
                .sum::<f64>()
                .sqrt()
    };
    let tol = rank_tol * fro;
    for (j, x) in h[n..].iter().enumerate() {
        let rjj = x.to_f64().abs();
        if rjj <= tol || !rjj.is_finite() {
            return Err(Error::RankDeficient {
                column: j,
                r_jj: rjj,
                tol,
            });
        }
    }
    Ok(())
}

/// A device copy of `a` (same shape and ld): one device-to-device memcpy.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn dup_mat<T: GpuScalar>(gpu: &Gpu, a: &DevMat<T>) -> Result<DevMat<T>> {
    let mut b = DevMat::zeros(gpu, a.nrows(), a.ncols())?;
    gpu.count_launch();
    gpu.stream
        .memcpy_dtod(a.buf(), b.buf_mut())
        .map_err(super::driver_err("DevMat copy"))?;
    Ok(b)
}
