//! Device building blocks of the thin-Q updates (docs/algorithms.md#thin-q-updates):
//! Gram–Schmidt twice against Q₁ by cuBLAS GEMMs, the explicit thin QR of a tall block
//! (blocked Householder, Q accumulated into an m×p target), and the residual norms of
//! a thin state from its kept right-hand sides. Nothing here is m×m.

use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::gpu::algo::householder::{
    accumulate_q_backward, blocked_qr_with, merges_trailing, BlockedQrParams, QrOutputs,
};
use crate::gpu::ffi::blas::Op;
use crate::gpu::launch::ts_gemm::{TS_GEMM_NARROW_MAX, TS_GEMM_NARROW_MAX_ROWS};
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Rows from which [`tall_tn`] takes the narrow kernel: below, cuBLAS's products are
/// as fast (a launch or two either way).
pub(crate) const NARROW_MIN_ROWS: usize = 1 << 16;

/// W := AᵀB for tall A (m×k) and B (m×nc) with the same rows. For m ≥
/// [`NARROW_MIN_ROWS`] and nc ≤ 8 (Q₁ᵀU, UᵀU, Uᵀb of the thin updates, AᵀU of the R-only
/// ones) `Gpu::ts_gemm_narrow_tn`, which reads A at the copy rate over row chunks on every
/// multiprocessor; otherwise cuBLAS GEMV where B is one column and GEMM else, which run
/// this shape on a few multiprocessors (docs/performance.md#tall-updates).
///
/// # Errors
/// [`crate::Error::InvalidParam`] on mismatched shapes, [`crate::Error::Cublas`],
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn tall_tn<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMatView<'_, T>,
    b: &DevMatView<'_, T>,
    w: &mut DevMatViewMut<'_, T>,
) -> Result<()> {
    let narrow = (NARROW_MIN_ROWS..=TS_GEMM_NARROW_MAX_ROWS).contains(&a.nrows())
        && b.nrows() == a.nrows()
        && (1..=TS_GEMM_NARROW_MAX).contains(&b.ncols())
        && (w.nrows(), w.ncols()) == (a.ncols(), b.ncols());
    if narrow {
        return gpu.ts_gemm_narrow_tn(a, b, w);
    }
    product(gpu, Op::T, T::ONE, a, b, T::ZERO, w)
}

/// C := α·op(A)·B + β·C for a tall A and a narrow B: cuBLAS GEMV where B and C are single
/// columns (a matrix–vector product), GEMM otherwise.
///
/// # Errors
/// [`crate::Error::InvalidParam`] on mismatched shapes, [`crate::Error::Cublas`].
pub(crate) fn product<T: GpuScalar>(
    gpu: &Gpu,
    ta: Op,
    alpha: T,
    a: &DevMatView<'_, T>,
    b: &DevMatView<'_, T>,
    beta: T,
    c: &mut DevMatViewMut<'_, T>,
) -> Result<()> {
    if b.ncols() == 1 && c.ncols() == 1 {
        let x = b.buf().slice(0..b.nrows());
        let rows = c.nrows();
        let mut y = c.buf_mut().slice_mut(0..rows);
        return gpu.gemv(ta, alpha, a, &x, beta, &mut y);
    }
    gpu.gemm(ta, Op::N, alpha, a, b, beta, c)
}

/// C = Q₁ᵀU and Z = U − Q₁C by classical Gram–Schmidt repeated once ("twice is
/// enough", docs/algorithms.md#thin-column-insertion): four GEMMs, each reading Q₁ once.
/// Returns (C n×p, Z m×p).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Cublas`].
pub(crate) fn project_out<T: GpuScalar>(
    gpu: &Gpu,
    q1: &DevMatView<'_, T>,
    u: &DevMatView<'_, T>,
) -> Result<(DevMat<T>, DevMat<T>)> {
    let (m, n, p) = (q1.nrows(), q1.ncols(), u.ncols());
    assert_eq!(u.nrows(), m);
    let mut z = DevMat::<T>::for_overwrite(gpu, m, p)?;
    gpu.panel_copy(u, &mut z.view_mut())?;
    let mut c = DevMat::<T>::zeros(gpu, n, p)?;
    tall_tn(gpu, q1, u, &mut c.view_mut())?;
    product(
        gpu,
        Op::N,
        -T::ONE,
        q1,
        &c.view(),
        T::ONE,
        &mut z.view_mut(),
    )?;
    // the second pass accumulates into C: C += Q₁ᵀZ, Z −= Q₁(Q₁ᵀZ)
    let mut c2 = DevMat::<T>::zeros(gpu, n, p)?;
    tall_tn(gpu, q1, &z.view(), &mut c2.view_mut())?;
    product(
        gpu,
        Op::N,
        -T::ONE,
        q1,
        &c2.view(),
        T::ONE,
        &mut z.view_mut(),
    )?;
    // same shape and leading dimension: one AXPY over the buffers (padding included)
    gpu.axpy(T::ONE, &c2.buf().slice(..), &mut c.buf_mut().slice_mut(..))?;
    Ok((c, z))
}

/// The thin QR Z = Q_z·G of an m×p block (m ≥ p) by blocked Householder QR with
/// Q_z accumulated explicitly (m×p, orthonormal columns to working precision) and G
/// (p×p upper triangular, exact zeros below its diagonal). `z` is consumed.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`], [`crate::Error::Cublas`].
pub(crate) fn thin_qr<T: GpuScalar>(gpu: &Gpu, mut z: DevMat<T>) -> Result<(DevMat<T>, DevMat<T>)> {
    let (m, p) = (z.nrows(), z.ncols());
    assert!(m >= p);
    let nb = crate::base::params::default_block_size(p);
    let mut blocks = Vec::new();
    let params = BlockedQrParams {
        merge_trailing: merges_trailing::<T>(p),
        ..BlockedQrParams::new(0..m, 0..p, nb)
    };
    let out = QrOutputs {
        keep: Some(&mut blocks),
        ..QrOutputs::default()
    };
    blocked_qr_with(gpu, &mut z, out, &params)?;
    let g = gpu.two_phase_copy_new(&z.block(0, 0, p, p), 0..0, true)?;
    drop(z);
    let mut qz = DevMat::<T>::for_overwrite(gpu, m, p)?;
    accumulate_q_backward(gpu, &blocks, &mut qz)?;
    Ok((qz, g))
}

/// |G_jj| for the p×p upper triangular G (downloads p values).
///
/// # Errors
/// [`crate::Error::Driver`].
pub(crate) fn diagonal<T: GpuScalar>(gpu: &Gpu, g: &DevMat<T>) -> Result<Vec<f64>> {
    let host = g.to_host(gpu)?;
    Ok((0..g.ncols().min(g.nrows()))
        .map(|j| host[(j, j)].to_f64().abs())
        .collect())
}

/// The 2-norms of the columns of `a` (one cuBLAS NRM2 each; waits).
///
/// # Errors
/// [`crate::Error::Cublas`].
pub(crate) fn column_norms<T: GpuScalar>(gpu: &Gpu, a: &DevMatView<'_, T>) -> Result<Vec<f64>> {
    if a.nrows() == 0 {
        return Ok(vec![0.0; a.ncols()]);
    }
    (0..a.ncols())
        .map(|j| {
            let col = a.buf().slice(j * a.ld()..j * a.ld() + a.nrows());
            gpu.nrm2(&col)
        })
        .collect()
}

/// The residual norms ‖b_k − Q₁d_k‖ of a thin state (one GEMM into a copy of b).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Cublas`].
pub(crate) fn residual_norms<T: GpuScalar>(
    gpu: &Gpu,
    q1: &DevMat<T>,
    d: &DevMat<T>,
    b: &DevMat<T>,
) -> Result<Vec<f64>> {
    let mut res = b.dup(gpu)?;
    gpu.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        &q1.view(),
        &d.view(),
        T::ONE,
        &mut res.view_mut(),
    )?;
    column_norms(gpu, &res.view())
}

/// [A | B] as one new m×(a + b) matrix (two copies).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn side_by_side<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMatView<'_, T>,
    b: &DevMatView<'_, T>,
) -> Result<DevMat<T>> {
    let (m, na, nb) = (a.nrows(), a.ncols(), b.ncols());
    assert_eq!(b.nrows(), m);
    let mut out = DevMat::<T>::for_overwrite(gpu, m, na + nb)?;
    if na > 0 {
        gpu.panel_copy(a, &mut out.block_mut(0, 0, m, na))?;
    }
    if nb > 0 {
        gpu.panel_copy(b, &mut out.block_mut(0, na, m, nb))?;
    }
    Ok(out)
}

/// [A; B] as one new (a + b)×n matrix (two copies).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn stacked<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMatView<'_, T>,
    b: Option<&DevMatView<'_, T>>,
    b_rows: usize,
) -> Result<DevMat<T>> {
    let (ma, n) = (a.nrows(), a.ncols());
    let mut out = DevMat::<T>::zeros(gpu, ma + b_rows, n)?;
    if ma > 0 && n > 0 {
        gpu.panel_copy(a, &mut out.block_mut(0, 0, ma, n))?;
    }
    if let Some(b) = b {
        assert!(b.nrows() == b_rows && b.ncols() == n);
        if b_rows > 0 && n > 0 {
            gpu.panel_copy(b, &mut out.block_mut(ma, 0, b_rows, n))?;
        }
    }
    Ok(out)
}

/// The k×k identity in a new buffer.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn identity<T: GpuScalar>(gpu: &Gpu, k: usize) -> Result<DevMat<T>> {
    let mut i = DevMat::<T>::for_overwrite(gpu, k, k)?;
    gpu.panel_set_identity(&mut i.view_mut())?;
    Ok(i)
}

/// A small device matrix on the host in f64 (exact for f32 and f64 entries).
///
/// # Errors
/// [`crate::Error::Driver`].
pub(crate) fn to_host_f64<T: GpuScalar>(gpu: &Gpu, x: &DevMatView<'_, T>) -> Result<Mat<f64>> {
    let mut own = DevMat::<T>::for_overwrite(gpu, x.nrows(), x.ncols())?;
    if x.nrows() > 0 && x.ncols() > 0 {
        gpu.panel_copy(x, &mut own.view_mut())?;
    }
    let h = own.to_host(gpu)?;
    Ok(Mat::from_fn(h.nrows(), h.ncols(), |i, j| {
        h[(i, j)].to_f64()
    }))
}

/// A small f64 host matrix on the device in precision T.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn from_host_f64<T: GpuScalar>(gpu: &Gpu, x: &Mat<f64>) -> Result<DevMat<T>> {
    let t = Mat::from_fn(x.nrows(), x.ncols(), |i, j| T::from_f64(x[(i, j)]));
    DevMat::from_host(gpu, t.as_ref())
}
