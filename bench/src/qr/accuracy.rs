//! The accuracy measures of `cuqr bench qr`, on the device: ‖QR − A‖_F/‖A‖_F and
//! ‖QᵀQ − I‖_F (always in f64, f32 data widened exactly), ‖RᵀR − AᵀA‖_F/‖A‖²_F where
//! Q is not kept, and whether R is exactly zero below its diagonal.

use cuqr::internals::gpu::{DevMat, DevMatView, DevVec, GpuScalar, Op};
use cuqr::Gpu;

/// Columns per block of the accuracy products (bounds their scratch memory).
pub(super) const ACC_BLOCK: usize = 1024;

/// Output columns per pass of the widened (f32 → f64) orthogonality check: every pass
/// widens all of Q once, so wider passes convert less.
pub(super) const ORTH_BLOCK: usize = 4096;

/// ‖C‖²_F of an m×w block on the device: the diagonal of the Gram matrix CᵀC
/// (cuBLAS GEMM), read by one `panel_col_norms` launch (2w values downloaded).
fn fro_sq<T: GpuScalar>(gpu: &Gpu, c: &DevMatView<'_, T>) -> cuqr::Result<f64> {
    let w = c.ncols();
    if w == 0 || c.nrows() == 0 {
        return Ok(0.0);
    }
    let mut g = DevMat::<T>::zeros(gpu, w, w)?;
    gpu.gemm(Op::T, Op::N, T::ONE, c, c, T::ZERO, &mut g.view_mut())?;
    let mut out = DevVec::<T>::zeros(gpu, 2 * w)?;
    gpu.panel_col_norms(&g.view(), &mut out.view_mut())?;
    let h = out.to_vec(gpu)?;
    Ok(h[w..].iter().map(|x| x.to_f64()).sum())
}

/// ‖QR − A‖_F/‖A‖_F and ‖QᵀQ − I‖_F for an m×m Q and m×n R, by blocks of columns on
/// the device, always in f64: f32 data is widened block by block (exactly) before
/// the DGEMMs, so the check's own rounding (f32 dot products over m rows, ≈ u a
/// product, m² of them) does not masquerade as the factorisation's error.
pub(super) fn kerr_norms<T: GpuScalar>(
    gpu: &Gpu,
    q: &DevMat<T>,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<(f64, f64)> {
    if core::mem::size_of::<T>() == 4 {
        return Ok((
            residual_widened(gpu, q, r, a, a_fro)?,
            orthogonality(gpu, q)?,
        ));
    }
    let (m, n) = (a.nrows(), a.ncols());
    let w = ACC_BLOCK.min(n.max(1));
    let mut c = DevMat::<T>::zeros(gpu, m, w)?;
    let mut res = 0.0;
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        let mut cv = c.block_mut(0, 0, m, wb);
        gpu.panel_copy(&a.block(0, c0, m, wb), &mut cv)?;
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q.view(),
            &r.block(0, c0, m, wb),
            -T::ONE,
            &mut cv,
        )?;
        res += fro_sq(gpu, &c.block(0, 0, m, wb))?;
    }
    drop(c);
    Ok((res.sqrt() / a_fro, orthogonality(gpu, q)?))
}

/// dst(0..r, 0..c) := src (r×c), widened to f64 through the f32 staging `st`: exact
/// for f32 data (`convert_to_f32` then `convert_from_f32`). Not for f64 data.
fn widen<T: GpuScalar>(
    gpu: &Gpu,
    src: &DevMatView<'_, T>,
    st: &mut DevMat<f32>,
    dst: &mut DevMat<f64>,
) -> cuqr::Result<()> {
    debug_assert_eq!(core::mem::size_of::<T>(), 4);
    let (r, c) = (src.nrows(), src.ncols());
    gpu.convert_to_f32(src, T::ONE, &mut st.block_mut(0, 0, r, c))?;
    gpu.convert_from_f32::<f64>(&st.block(0, 0, r, c), 1.0, &mut dst.block_mut(0, 0, r, c))
}

/// ‖QR − A‖_F/‖A‖_F for f32 Q, R, A, in f64: for each block of A's columns, A's
/// block minus Σ_k Q(:, k-block)·R(k-block, block) over the k < n that R's upper
/// triangle reaches (R's rows ≥ n and below the diagonal are exact zeros).
fn residual_widened<T: GpuScalar>(
    gpu: &Gpu,
    q: &DevMat<T>,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<f64> {
    let (m, n) = (a.nrows(), a.ncols());
    let w = ACC_BLOCK.min(n.max(1));
    let mut st = DevMat::<f32>::zeros(gpu, m, w)?;
    let mut c = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut qk = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut rk = DevMat::<f64>::zeros(gpu, w, w)?;
    let mut res = 0.0;
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        widen(gpu, &a.block(0, c0, m, wb), &mut st, &mut c)?;
        for k0 in (0..c0 + wb).step_by(w) {
            let kb = w.min(c0 + wb - k0);
            widen(gpu, &q.block(0, k0, m, kb), &mut st, &mut qk)?;
            widen(gpu, &r.block(k0, c0, kb, wb), &mut st, &mut rk)?;
            gpu.gemm(
                Op::N,
                Op::N,
                -1.0,
                &qk.block(0, 0, m, kb),
                &rk.block(0, 0, kb, wb),
                1.0,
                &mut c.block_mut(0, 0, m, wb),
            )?;
        }
        res += fro_sq(gpu, &c.block(0, 0, m, wb))?;
    }
    Ok(res.sqrt() / a_fro)
}

/// ‖QᵀQ − I‖_F of an m×m Q, in f64 (f32 data widened by blocks of rows: each block of
/// output columns E := Σ_k Q(k-rows, :)ᵀ·Q(k-rows, block) − I).
pub(super) fn orthogonality<T: GpuScalar>(gpu: &Gpu, q: &DevMat<T>) -> cuqr::Result<f64> {
    let m = q.nrows();
    let mut orth = 0.0;
    if core::mem::size_of::<T>() == 8 {
        let w = ACC_BLOCK.min(m);
        let mut e = DevMat::<T>::zeros(gpu, m, w)?;
        for c0 in (0..m).step_by(w) {
            let wb = w.min(m - c0);
            // E := I(:, c0..c0+wb), then E := QᵀQ(:, c0..c0+wb) − E
            e.fill(gpu, T::ZERO)?;
            gpu.panel_set_identity(&mut e.block_mut(c0, 0, wb, wb))?;
            let mut ev = e.block_mut(0, 0, m, wb);
            gpu.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &q.view(),
                &q.block(0, c0, m, wb),
                -T::ONE,
                &mut ev,
            )?;
            orth += fro_sq(gpu, &e.block(0, 0, m, wb))?;
        }
        return Ok(orth.sqrt());
    }
    let w = ORTH_BLOCK.min(m);
    let kb_max = ACC_BLOCK.min(m);
    let mut e = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut st = DevMat::<f32>::zeros(gpu, kb_max, m)?;
    let mut qk = DevMat::<f64>::zeros(gpu, kb_max, m)?;
    for c0 in (0..m).step_by(w) {
        let wb = w.min(m - c0);
        e.fill(gpu, 0.0)?;
        gpu.panel_set_identity(&mut e.block_mut(c0, 0, wb, wb))?;
        for (i, k0) in (0..m).step_by(kb_max).enumerate() {
            let kb = kb_max.min(m - k0);
            widen(gpu, &q.block(k0, 0, kb, m), &mut st, &mut qk)?;
            gpu.gemm(
                Op::T,
                Op::N,
                1.0,
                &qk.block(0, 0, kb, m),
                &qk.block(0, c0, kb, wb),
                if i == 0 { -1.0 } else { 1.0 },
                &mut e.block_mut(0, 0, m, wb),
            )?;
        }
        orth += fro_sq(gpu, &e.block(0, 0, m, wb))?;
    }
    Ok(orth.sqrt())
}

/// ‖RᵀR − AᵀA‖_F/‖A‖²_F on the device (R: m×n, its lower part included).
pub(super) fn gram_error<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<f64> {
    let n = a.ncols();
    let mut g = DevMat::<T>::zeros(gpu, n, n)?;
    gpu.gemm(
        Op::T,
        Op::N,
        T::ONE,
        &a.view(),
        &a.view(),
        T::ZERO,
        &mut g.view_mut(),
    )?;
    gpu.gemm(
        Op::T,
        Op::N,
        T::ONE,
        &r.view(),
        &r.view(),
        -T::ONE,
        &mut g.view_mut(),
    )?;
    let mut s = 0.0;
    let w = ACC_BLOCK.min(n);
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        s += fro_sq(gpu, &g.block(0, c0, n, wb))?;
    }
    Ok(s.sqrt() / (a_fro * a_fro))
}

/// Whether R (m×n) is exactly zero strictly below its diagonal: downloaded by blocks
/// of columns (rows c0+1.. of each block) and checked on the host.
pub(super) fn lower_is_zero<T: GpuScalar>(gpu: &Gpu, r: &DevMat<T>) -> cuqr::Result<bool> {
    let (m, n) = (r.nrows(), r.ncols());
    let w = 256.min(n.max(1));
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        let rows = m.saturating_sub(c0 + 1);
        if rows == 0 {
            break;
        }
        let mut t = DevMat::<T>::zeros(gpu, rows, wb)?;
        gpu.panel_copy(&r.block(c0 + 1, c0, rows, wb), &mut t.view_mut())?;
        let h = t.to_host(gpu)?;
        for j in 0..wb {
            // local row i is global row c0+1+i; below the diagonal when c0+1+i > c0+j
            for i in j..rows {
                if h[(i, j)] != T::ZERO {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}
