//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU path of [`run_cpu`] (docs/algorithms.md#row-insertion,
/// docs/algorithms.md#row-insertion-listing): validates with the same `plan`,
/// then the compact-WY row addition on the device: phase 1 per column (`house` on
/// R(j, j) and U(:, j), `panel_apply` on the block's rest of R's row j and U), phase 2
/// T by `wy_build_t` on V_U, phase 3 by GEMMs (W = R₁ + V_UᵀU₂; R₁ −= TᵀW;
/// U₂ −= V_U(TᵀW)), d and e likewise; with Q, Q̃ = Pᵀ·diag(Q, I_p)·H₁⋯H_n with the
/// new rows at k0. Everything is built in new buffers and swapped in after the rank
/// check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    run_gpu_path(st, k0, u, e, true)
}

/// [`run_gpu`] with the one-launch path (`row_insert_qr`, states without Q) allowed or
/// not; `false` always takes the blocked compact-WY path (tests compare the two).
///
/// Long because the blocked path's panel loop runs all three phases on R, U, d, e and Q
/// with about a dozen device buffers allocated once up front; splitting it would pass
/// them all between the pieces.
pub(crate) fn run_gpu_path<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
    one_launch: bool,
) -> Result<()> {
    use crate::gpu::algo::householder::check_rank_dev;
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::launch::fused_panel::{FusedPanelWork, FUSED_MAX_JB};
    use crate::gpu::launch::BUILD_T_MAX_K;
    use crate::gpu::runtime::matrix::{DevMat, DevVec};
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
            // Without Q the whole update is one cooperative launch
            // (docs/algorithms.md#row-insertion): the
            // reflectors of [R d; U e] flow between blocks that own its columns.
            let rows = st.r.nrows();
            let mut r = DevMat::<T>::zeros(g, rows + p, n)?;
            let mut d = DevMat::<T>::zeros(g, rows + p, q)?;
            let mut uw = DevMat::from_host_async(g, u)?;
            let mut ew = DevMat::from_host_async(g, e)?;
            g.panel_copy(&st.r.view(), &mut r.block_mut(0, 0, rows, n))?;
            g.panel_copy(&st.d.view(), &mut d.block_mut(0, 0, rows, q))?;
            g.stage_mark("upload, copies");
            g.row_insert_qr(&mut r, &mut d, &mut uw, &mut ew, n, q, p, shape)?;
            g.stage_mark("row_insert_qr");
            g.panel_copy(&ew.view(), &mut d.block_mut(rows, 0, p, q))?;
            check_rank_dev(g, &r, n, st.rank_tol)?;
            g.stage_mark("rank check");
            return finish_reduced(st, r, d, k0, u, e);
        }
    }
    // R's and d's stored rows (m, or n for a thin state) and the first of the new rows'
    // unit columns in Q̃ (m, or n for a thin state's [Q₁ 0; 0 I_p])
    let thin = st.dims.policy == QPolicy::Thin;
    let rows = st.r.nrows();
    let ucol = st.q.as_ref().map_or(m, |qo| qo.ncols());
    let mut r = DevMat::<T>::zeros(g, rows + p, n)?;
    let mut d = DevMat::<T>::zeros(g, rows + p, q)?;
    let mut qn = match st.q.as_ref() {
        // a thin state accumulates the reflectors' product H (n+p)×(n+p) on the identity
        // and applies it to Q₁ at the end (one GEMM), instead of updating the m+p rows
        Some(_) if thin => Some(DevMat::<T>::zeros(g, n + p, n + p)?),
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
    let qrows = if thin { n + p } else { m + p };
    let mut wq = match qn.as_ref() {
        Some(_) => Some((
            DevMat::<T>::zeros(g, qrows, nb)?,
            DevMat::<T>::zeros(g, qrows, nb)?,
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
    g.panel_copy(&st.r.view(), &mut r.block_mut(0, 0, rows, n))?;
    g.panel_copy(&st.d.view(), &mut d.block_mut(0, 0, rows, q))?;
    if let (Some(qo), Some(qm)) = (st.q.as_ref(), qn.as_mut()) {
        if thin {
            g.panel_set_identity(&mut qm.view_mut())?;
        } else {
            g.panel_embed_q(&qo.view(), k0, &mut qm.view_mut())?;
        }
    }

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
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
        // Q̃[:, j0..j0+jb] and Q̃[:, ucol..ucol+p] := (those columns)·(I − V T Vᵀ).
        if let (Some(qm), Some((wa, wb))) = (qn.as_mut(), wq.as_mut()) {
            let mp = qrows;
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
        j0 += jb;
    }
    // d̃ = [d; e]; R̃ = [R; 0] (rows m.. were never written).
    g.panel_copy(&ew.view(), &mut d.block_mut(rows, 0, p, q))?;
    check_rank_dev(g, &r, n, st.rank_tol)?;
    if thin {
        // R and d keep their first n rows (e's rows left over feed only the residual,
        // which the kept b gives), Q₁ its first n columns, and b takes e's rows at k0
        r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        d = g.two_phase_copy_new(&d.block(0, 0, n, q), 0..0, false)?;
        g.stage_mark("reflectors on R, d and H");
        // Q₁′ = P·[Q₁·H(0:n, 0:n); H(n:n+p, 0:n)], the new rows at k0
        let h = qn.as_ref().expect("a thin state holds Q₁");
        let qo = st.q.as_ref().expect("a thin state holds Q₁");
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
        qn = Some(q1);
        let eo = DevMat::from_host_async(g, e)?;
        let b = crate::gpu::algo::reduced::with_rows_inserted(g, st.kept_b(), k0, &eo.view())?;
        st.b = Some(b);
    } else if st.dims.policy == QPolicy::None {
        return finish_reduced(st, r, d, k0, u, e);
    }
    st.r = r;
    st.d = d;
    st.q = qn;
    st.dims.m = m + p;
    Ok(())
}

/// The R-only kind's end of a row insertion (docs/algorithms.md#updates-without-q): `r` and
/// `d` are n + p rows high after the reflectors; the residual norms take what the new
/// rows left in d's rows n.. (ρ′² = ρ² + ‖d(n.., k)‖²), R and d keep their first n rows,
/// and the kept A and b (if any) take the new rows at k0.
fn finish_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    r: crate::gpu::runtime::DevMat<T>,
    d: crate::gpu::runtime::DevMat<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    use crate::gpu::algo::{reduced, thin};
    use crate::gpu::runtime::DevMat;
    let Dims { m, n, q, .. } = st.dims;
    let p = u.nrows();
    let g = &*st.gpu;
    let extra = thin::column_norms(g, &d.block(n, 0, p, q))?;
    let rho: Vec<T> = st
        .rho
        .iter()
        .zip(extra)
        .map(|(r0, x)| T::from_f64(r0.to_f64().hypot(x)))
        .collect();
    let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&d.block(0, 0, n, q), 0..0, false)?;
    let kept = match (st.a.as_ref(), st.b.as_ref()) {
        (Some(a), Some(b)) => Some((
            reduced::with_rows_inserted(g, a, k0, &DevMat::from_host_async(g, u)?.view())?,
            reduced::with_rows_inserted(g, b, k0, &DevMat::from_host_async(g, e)?.view())?,
        )),
        _ => None,
    };
    if let Some((a, b)) = kept {
        st.a = Some(a);
        st.b = Some(b);
    }
    st.r = r;
    st.d = d;
    st.rho = rho;
    st.dims.m = m + p;
    Ok(())
}
