//! The device bodies behind the composite operations (`ops/compose/`): A and b rebuilt from
//! the factors, one column of A, A += UVᵀ before a refactorisation, the drift measurements
//! and the re-orthogonalisation of Q (docs/algorithms.md#drift-control).

use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::params::QPolicy;
use crate::gpu::algo::factors::Factors;
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};

/// A (m×n) and b (m×q) in new device buffers from a state holding Q: Q·R, and the kept b
/// (thin) or Q·d (full).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn data_from_q<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
) -> Result<(DevMat<T>, DevMat<T>)> {
    let Dims { m, n, q, .. } = f.dims;
    let qm = f.q.expect("a state holding Q");
    let mut a = DevMat::<T>::for_overwrite(g, m, n)?;
    g.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &qm.block(0, 0, m, n),
        &f.r.block(0, 0, n, n),
        T::ZERO,
        &mut a.view_mut(),
    )?;
    let b = match f.b {
        Some(b) => b.dup(g)?,
        None => {
            let mut b = DevMat::<T>::for_overwrite(g, m, q)?;
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qm.view(),
                &f.d.view(),
                T::ZERO,
                &mut b.view_mut(),
            )?;
            b
        }
    };
    Ok((a, b))
}

/// Copies of the kept data's m logical rows in new buffers.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn data_copied<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (a, b): (DevMatView<'_, T>, DevMatView<'_, T>),
) -> Result<(DevMat<T>, DevMat<T>)> {
    let Dims { m, n, q, .. } = f.dims;
    let mut a2 = DevMat::<T>::for_overwrite(g, m, n)?;
    let mut b2 = DevMat::<T>::for_overwrite(g, m, q)?;
    g.panel_copy(&a, &mut a2.view_mut())?;
    g.panel_copy(&b, &mut b2.view_mut())?;
    Ok((a2, b2))
}

/// Column j of A: Q(:, 0:k)·R(0:k, j) (k = min(j + 1, m)) where Q is held, else the kept
/// A's column `kept` (its buffer and first logical row); `None` with neither.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn column_of_a<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    kept: Option<(&DevMat<T>, usize)>,
    j: usize,
) -> Result<Option<Vec<T>>> {
    let m = f.dims.m;
    let mut col = DevMat::<T>::zeros(g, m, 1)?;
    match (f.q, kept) {
        (Some(qm), _) => {
            let k = (j + 1).min(m);
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &qm.block(0, 0, m, k),
                &f.r.block(0, j, k, 1),
                T::ZERO,
                &mut col.view_mut(),
            )?;
        }
        (None, Some((a, row0))) => g.panel_copy(&a.block(row0, j, m, 1), &mut col.view_mut())?,
        _ => return Ok(None),
    }
    Ok(Some(col.to_host(g)?.col(0).to_vec()))
}

/// A += U·Vᵀ on the device (U m×k and V n×k uploaded).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn add_product<T: GpuScalar>(
    g: &Gpu,
    a: &mut DevMat<T>,
    u: crate::base::mat::MatRef<'_, T>,
    v: crate::base::mat::MatRef<'_, T>,
) -> Result<()> {
    let ud = DevMat::from_host(g, u)?;
    let vd = DevMat::from_host(g, v)?;
    g.gemm(
        Op::N,
        Op::T,
        T::ONE,
        &ud.view(),
        &vd.view(),
        T::ONE,
        &mut a.view_mut(),
    )
}

/// A sampled ‖QᵀQ − I‖_F over the columns `cols` of Q (m rows): one GEMV a column.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn q_drift<T: GpuScalar>(
    g: &Gpu,
    qm: &DevMat<T>,
    m: usize,
    cols: &[usize],
) -> Result<f64> {
    let k = qm.ncols();
    let mut y = DevVec::<T>::zeros(g, k)?;
    let mut sum = 0.0f64;
    for &c in cols {
        g.gemv(
            Op::T,
            T::ONE,
            &qm.view(),
            &qm.col(c, 0..m),
            T::ZERO,
            &mut y.view_mut(),
        )?;
        for (j, x) in y.to_vec(g)?.into_iter().enumerate() {
            let e = x.to_f64() - f64::from(u8::from(j == c));
            sum += e * e;
        }
    }
    Ok((sum * k as f64 / cols.len() as f64).sqrt())
}

/// ‖Aᵀ(Az) − Rᵀ(Rz)‖/(‖R‖_F²‖z‖) for the probe z: a sample of ‖AᵀA − RᵀR‖/‖A‖² (two GEMVs
/// over the kept A).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn gram_drift<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    a: &DevMatView<'_, T>,
    z: &[T],
) -> Result<f64> {
    let Dims { m, n, .. } = f.dims;
    let zd = DevVec::from_slice(g, z)?;
    let mut az = DevVec::<T>::zeros(g, m)?;
    let mut s = DevVec::<T>::zeros(g, n)?;
    let mut rz = DevVec::<T>::zeros(g, n)?;
    let rr = f.r.block(0, 0, n, n);
    g.gemv(Op::N, T::ONE, a, &zd.view(), T::ZERO, &mut az.view_mut())?;
    g.gemv(Op::T, T::ONE, a, &az.view(), T::ZERO, &mut s.view_mut())?;
    g.gemv(Op::N, T::ONE, &rr, &zd.view(), T::ZERO, &mut rz.view_mut())?;
    g.gemv(Op::T, -T::ONE, &rr, &rz.view(), T::ONE, &mut s.view_mut())?;
    let diff = g.nrm2(&s.view())?;
    let r2: f64 = thin::column_norms(g, &rr)?.iter().map(|x| x * x).sum();
    let zn = z.iter().map(|x| x.to_f64().powi(2)).sum::<f64>().sqrt();
    Ok(if r2 > 0.0 { diff / (r2 * zn) } else { 0.0 })
}

/// Q re-orthogonalised: Q = Q′·R₂ with Q′ orthonormal (thin QR), then A = Q′·(R₂R) and
/// d′ = Q′ᵀb (thin: the kept b) or R₂d. Returns (R′, d′, Q′).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn reorthogonalized<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
) -> Result<(DevMat<T>, DevMat<T>, DevMat<T>)> {
    let Dims { n, q, policy, .. } = f.dims;
    let qm = f.q.expect("a state holding Q");
    // Q = Q′·R₂ with Q′ orthonormal: A = Q′·(R₂R), d′ = Q′ᵀb (thin: the kept b) or R₂d
    let k = qm.ncols();
    let (q2, r2) = thin::thin_qr(g, qm.dup(g)?)?;
    let rows = f.r.nrows();
    let mut r = DevMat::<T>::zeros(g, rows, n)?;
    g.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &r2.view(),
        &f.r.block(0, 0, k, n),
        T::ZERO,
        &mut r.block_mut(0, 0, k, n),
    )?;
    let mut d = DevMat::<T>::zeros(g, f.d.nrows(), q)?;
    match (policy, f.b) {
        (QPolicy::Thin, Some(b)) => thin::tall_tn(g, &q2.view(), &b.view(), &mut d.view_mut())?,
        _ => g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &r2.view(),
            &f.d.block(0, 0, k, q),
            T::ZERO,
            &mut d.block_mut(0, 0, k, q),
        )?,
    }
    Ok((r, d, q2))
}
