//! Device building blocks of the R-only updates (docs/algorithms.md#updates-without-q):
//! the corrected semi-normal equations against the kept A, the residual norms of the kept
//! data, and the block downdate of [R d] by deleted rows. Only the kept data are m rows
//! high; R, d and everything computed from them are n or p rows.

use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::gpu::algo::householder::{blocked_qr_with, merges_trailing, BlockedQrParams, QrOutputs};
use crate::gpu::algo::thin::{product, tall_tn};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// x ← op(R)⁻¹·x (`Side::Left`) or x·R⁻¹ (`Side::Right`, `Op::N`) in place, for the
/// upper triangular R with a nonzero diagonal (cuBLAS TRSM).
///
/// # Errors
/// [`crate::Error::InvalidParam`], [`crate::Error::Cublas`].
pub(crate) fn upper_solve<T: GpuScalar>(
    gpu: &Gpu,
    side: Side,
    op: Op,
    r: &DevMatView<'_, T>,
    x: &mut DevMatViewMut<'_, T>,
) -> Result<()> {
    gpu.trsm(side, Uplo::Upper, op, Diag::NonUnit, T::ONE, r, x)
}

/// x = R⁻¹d for the n×n upper triangular R and n×q d (cuBLAS TRSM on a copy of d).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Cublas`].
pub(crate) fn solve_r<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMatView<'_, T>,
    d: &DevMatView<'_, T>,
) -> Result<DevMat<T>> {
    let mut x = DevMat::<T>::for_overwrite(gpu, d.nrows(), d.ncols())?;
    gpu.panel_copy(d, &mut x.view_mut())?;
    upper_solve(gpu, Side::Left, Op::N, r, &mut x.view_mut())?;
    Ok(x)
}

/// y = R⁻ᵀc (TRSM on a copy of c).
fn solve_rt<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMatView<'_, T>,
    c: &DevMatView<'_, T>,
) -> Result<DevMat<T>> {
    let mut y = DevMat::<T>::for_overwrite(gpu, c.nrows(), c.ncols())?;
    gpu.panel_copy(c, &mut y.view_mut())?;
    upper_solve(gpu, Side::Left, Op::T, r, &mut y.view_mut())?;
    Ok(y)
}

/// The residual b − A·R⁻¹d of the kept data (m×q).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Cublas`].
pub(crate) fn residual<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    b: &DevMat<T>,
    r: &DevMat<T>,
    d: &DevMat<T>,
) -> Result<DevMat<T>> {
    let x = solve_r(gpu, &r.view(), &d.view())?;
    let mut res = b.dup(gpu)?;
    product(
        gpu,
        Op::N,
        -T::ONE,
        &a.view(),
        &x.view(),
        T::ONE,
        &mut res.view_mut(),
    )?;
    Ok(res)
}

/// The residual norms ‖b_k − A·R⁻¹d_k‖ of the kept data.
///
/// # Errors
/// As [`residual`].
pub(crate) fn residual_norms<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    b: &DevMat<T>,
    r: &DevMat<T>,
    d: &DevMat<T>,
) -> Result<Vec<T>> {
    let res = residual(gpu, a, b, r, d)?;
    Ok(crate::gpu::algo::thin::column_norms(gpu, &res.view())?
        .into_iter()
        .map(T::from_f64)
        .collect())
}

/// Q̃ᵀU and U − Q̃(Q̃ᵀU) for Q̃ = A R⁻¹ without forming Q̃: C = R⁻ᵀ(AᵀU) and one step
/// of refinement from the residual (the corrected semi-normal equations,
/// docs/algorithms.md#updates-without-q). Returns (C n×p, Z m×p).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Cublas`].
pub(crate) fn csne_project<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    r: &DevMat<T>,
    u: &DevMatView<'_, T>,
) -> Result<(DevMat<T>, DevMat<T>)> {
    let (m, n, p) = (a.nrows(), a.ncols(), u.ncols());
    let mut z = DevMat::<T>::for_overwrite(gpu, m, p)?;
    gpu.panel_copy(u, &mut z.view_mut())?;
    let mut atu = DevMat::<T>::zeros(gpu, n, p)?;
    let mut c = DevMat::<T>::zeros(gpu, n, p)?;
    for pass in 0..2 {
        // C_pass = R⁻ᵀ(AᵀZ); Z −= A·R⁻¹C_pass; C += C_pass
        tall_tn(gpu, &a.view(), &z.view(), &mut atu.view_mut())?;
        let cp = solve_rt(gpu, &r.view(), &atu.view())?;
        let y = solve_r(gpu, &r.view(), &cp.view())?;
        product(
            gpu,
            Op::N,
            -T::ONE,
            &a.view(),
            &y.view(),
            T::ONE,
            &mut z.view_mut(),
        )?;
        if pass == 0 {
            c = cp;
        } else {
            gpu.axpy(T::ONE, &cp.buf().slice(..), &mut c.buf_mut().slice_mut(..))?;
        }
    }
    Ok((c, z))
}

/// The triangular factor G (p×p, exact zeros below the diagonal) of the m×p block `z`
/// (ZᵀZ = GᵀG) and the columns' norms ‖z_j‖: from the Gram matrix ZᵀZ (one pass over Z)
/// and its Cholesky factor where every pivot keeps at least half of its column's ‖z_j‖²
/// (Z well conditioned, so the Gram matrix loses nothing that matters); else by blocked
/// Householder QR of Z (no Q). `z` is consumed.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`], [`crate::Error::Cublas`].
pub(crate) fn r_factor<T: GpuScalar>(gpu: &Gpu, mut z: DevMat<T>) -> Result<(DevMat<T>, Vec<f64>)> {
    let (m, p) = (z.nrows(), z.ncols());
    let mut gram = DevMat::<T>::zeros(gpu, p, p)?;
    tall_tn(gpu, &z.view(), &z.view(), &mut gram.view_mut())?;
    let gram = crate::gpu::algo::thin::to_host_f64(gpu, &gram.view())?;
    let norms: Vec<f64> = (0..p).map(|j| gram[(j, j)].max(0.0).sqrt()).collect();
    if let Ok((l, _)) = cholesky_lower(&gram, |j| 0.5 * gram[(j, j)]) {
        return Ok((
            crate::gpu::algo::thin::from_host_f64(gpu, &l.transpose())?,
            norms,
        ));
    }
    let nb = crate::base::params::default_block_size(p);
    let params = BlockedQrParams {
        merge_trailing: merges_trailing::<T>(p),
        ..BlockedQrParams::new(0..m, 0..p, nb)
    };
    blocked_qr_with(gpu, &mut z, QrOutputs::default(), &params)?;
    Ok((
        gpu.two_phase_copy_new(&z.block(0, 0, p, p), 0..0, true)?,
        norms,
    ))
}

/// L (p×p lower triangular), t (p×q) and the new residual norms of a block downdate.
pub(crate) type DowndateParts = (Mat<f64>, Mat<f64>, Vec<f64>);

/// Why a block downdate was refused.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DowndateRefusal {
    /// Row `row` of the block is not determined by the rows left: the pivot 1 − ‖z‖² of
    /// the Cholesky factor of I − WWᵀ is `alpha2` ≤ √u.
    NotPositiveDefinite { row: usize, alpha2: f64 },
    /// Right-hand side `rhs` of the deleted rows exceeds the residual it leaves.
    Residual { rhs: usize },
}

/// From this order on, [`cholesky_lower`] uses faer's blocked Cholesky factorisation (the
/// loop below it costs p³/3 scalar steps: 0.3 s at p = 1000).
const BLOCKED_CHOLESKY_FROM: usize = 64;

/// The Cholesky factor L (lower, p×p) of the symmetric p×p `m` = LLᵀ, in f64 on the host,
/// with its pivots (L_jj²). The first pivot that is NaN or ≤ `floor(j)` stops it:
/// `Err((j, pivot))`.
pub(crate) fn cholesky_lower(
    m: &Mat<f64>,
    floor: impl Fn(usize) -> f64,
) -> core::result::Result<(Mat<f64>, Vec<f64>), (usize, f64)> {
    let p = m.nrows();
    if p >= BLOCKED_CHOLESKY_FROM {
        // faer's blocked factorisation; its pivots are L_jj², checked in order against the
        // floors (a failure or an offending pivot falls through to the loop, which reports
        // the first offending pivot exactly as computed there)
        let fm = faer::Mat::<f64>::from_fn(p, p, |i, j| m[(i, j)]);
        if let Ok(llt) = fm.llt(faer::Side::Lower) {
            let lf = llt.L();
            let pivots: Vec<f64> = (0..p).map(|j| lf[(j, j)] * lf[(j, j)]).collect();
            if pivots.iter().enumerate().all(|(j, &s)| s > floor(j)) {
                let l = Mat::from_fn(p, p, |i, j| if i >= j { lf[(i, j)] } else { 0.0 });
                return Ok((l, pivots));
            }
        }
    }
    let mut l = Mat::<f64>::zeros(p, p);
    let mut pivots = Vec::with_capacity(p);
    for j in 0..p {
        let mut s = m[(j, j)];
        for k in 0..j {
            s -= l[(j, k)] * l[(j, k)];
        }
        if s.is_nan() || s <= floor(j) {
            return Err((j, s));
        }
        pivots.push(s);
        let ljj = s.sqrt();
        l[(j, j)] = ljj;
        for i in j + 1..p {
            let mut t = m[(i, j)];
            for k in 0..j {
                t -= l[(i, k)] * l[(j, k)];
            }
            l[(i, j)] = t / ljj;
        }
    }
    Ok((l, pivots))
}

/// L⁻¹X for the lower triangular L (forward substitution, f64).
pub(crate) fn solve_lower(l: &Mat<f64>, x: &Mat<f64>) -> Mat<f64> {
    let (p, q) = (l.nrows(), x.ncols());
    let mut t = x.clone();
    for k in 0..q {
        for i in 0..p {
            let mut s = t[(i, k)];
            for j in 0..i {
                s -= l[(i, j)] * t[(j, k)];
            }
            t[(i, k)] = s / l[(i, i)];
        }
    }
    t
}

/// The deleted rows' part of the block downdate (docs/algorithms.md#r-only-updates-on-the-gpu),
/// computed on the host from p×p and p×q data: L with LLᵀ = I − WWᵀ (W = rows·R⁻¹, p×n,
/// `gram` = WWᵀ) and t = L⁻¹(e − W d) (`e_wd`), in f64; the new residual norms
/// ρ′² = ρ² − ‖t‖². `d_norms` are the columns' ‖d‖ for the residual test's slack.
///
/// # Errors
/// [`DowndateRefusal`].
pub(crate) fn downdate_small(
    gram: &Mat<f64>,
    e_wd: &Mat<f64>,
    rho: &[f64],
    d_norms: &[f64],
    n: usize,
    unit_roundoff: f64,
) -> core::result::Result<DowndateParts, DowndateRefusal> {
    let p = gram.nrows();
    let q = e_wd.ncols();
    // pivot j of I − WWᵀ is row j's 1 − ‖z‖² once rows 0..j are gone
    let complement = Mat::from_fn(p, p, |i, j| f64::from(u8::from(i == j)) - gram[(i, j)]);
    let (l, _) = cholesky_lower(&complement, |_| unit_roundoff.sqrt())
        .map_err(|(row, alpha2)| DowndateRefusal::NotPositiveDefinite { row, alpha2 })?;
    let t = solve_lower(&l, e_wd);
    let mut new_rho = Vec::with_capacity(q);
    for k in 0..q {
        let tn2: f64 = (0..p).map(|i| t[(i, k)] * t[(i, k)]).sum();
        let (rk, dn) = (rho[k], d_norms[k]);
        let slack = 100.0 * (n as f64 + p as f64) * unit_roundoff * (dn * dn + rk * rk);
        if tn2 > rk * rk + slack {
            return Err(DowndateRefusal::Residual { rhs: k });
        }
        new_rho.push((rk * rk - tn2).max(0.0).sqrt());
    }
    Ok((l, t, new_rho))
}

/// An R-only update's R and d (k + p rows high) cut to their first k rows (R k×k), with
/// the residual norms grown by what d's rows k..k+p hold: ρ′² = ρ² + ‖d(k.., j)‖².
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn trimmed<T: GpuScalar>(
    g: &Gpu,
    rho: &[T],
    (r, d): (DevMat<T>, DevMat<T>),
    (k, p): (usize, usize),
) -> Result<(DevMat<T>, DevMat<T>, Vec<T>)> {
    let q = d.ncols();
    let extra = crate::gpu::algo::thin::column_norms(g, &d.block(k, 0, p, q))?;
    let rho: Vec<T> = rho
        .iter()
        .zip(extra)
        .map(|(r0, x)| T::from_f64(r0.to_f64().hypot(x)))
        .collect();
    let r = g.two_phase_copy_new(&r.block(0, 0, k, k), 0..0, true)?;
    let d = g.two_phase_copy_new(&d.block(0, 0, k, q), 0..0, false)?;
    Ok((r, d, rho))
}

/// `a` with the rows of `u` inserted at k0 (a new buffer, three copies).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn with_rows_inserted<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    k0: usize,
    u: &DevMatView<'_, T>,
) -> Result<DevMat<T>> {
    let (m, n, p) = (a.nrows(), a.ncols(), u.nrows());
    assert!(k0 <= m && u.ncols() == n);
    let mut out = DevMat::<T>::for_overwrite(gpu, m + p, n)?;
    if n == 0 {
        return Ok(out);
    }
    if k0 > 0 {
        gpu.panel_copy(&a.block(0, 0, k0, n), &mut out.block_mut(0, 0, k0, n))?;
    }
    if k0 < m {
        gpu.panel_copy(
            &a.block(k0, 0, m - k0, n),
            &mut out.block_mut(k0 + p, 0, m - k0, n),
        )?;
    }
    if p > 0 {
        gpu.panel_copy(u, &mut out.block_mut(k0, 0, p, n))?;
    }
    Ok(out)
}

/// Copies the first `rows` rows of `a`'s columns into `out` around a gap of p columns at
/// k0: columns 0..k0 stay, columns k0.. move right by p. The gap is the caller's to fill.
///
/// # Errors
/// [`crate::Error::Driver`].
pub(crate) fn copy_cols_around<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    rows: usize,
    out: &mut DevMat<T>,
    (k0, p): (usize, usize),
) -> Result<()> {
    let n = a.ncols();
    if k0 > 0 {
        gpu.panel_copy(&a.block(0, 0, rows, k0), &mut out.block_mut(0, 0, rows, k0))?;
    }
    if k0 < n {
        gpu.panel_copy(
            &a.block(0, k0, rows, n - k0),
            &mut out.block_mut(0, k0 + p, rows, n - k0),
        )?;
    }
    Ok(())
}

/// `a` with the columns of `u` inserted at k0 (a new buffer, three copies).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn with_cols_inserted<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    k0: usize,
    u: &DevMatView<'_, T>,
) -> Result<DevMat<T>> {
    let (m, n, p) = (a.nrows(), a.ncols(), u.ncols());
    assert!(k0 <= n && u.nrows() == m);
    let mut out = DevMat::<T>::for_overwrite(gpu, m, n + p)?;
    if m == 0 {
        return Ok(out);
    }
    copy_cols_around(gpu, a, m, &mut out, (k0, p))?;
    if p > 0 {
        gpu.panel_copy(u, &mut out.block_mut(0, k0, m, p))?;
    }
    Ok(out)
}

/// `a` without columns k0..k0+p (a new buffer, two copies).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn with_cols_deleted<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<DevMat<T>> {
    let (m, n) = (a.nrows(), a.ncols());
    assert!(k0 + p <= n);
    let mut out = DevMat::<T>::for_overwrite(gpu, m, n - p)?;
    if m == 0 {
        return Ok(out);
    }
    if k0 > 0 {
        gpu.panel_copy(&a.block(0, 0, m, k0), &mut out.block_mut(0, 0, m, k0))?;
    }
    if k0 + p < n {
        gpu.panel_copy(
            &a.block(0, k0 + p, m, n - k0 - p),
            &mut out.block_mut(0, k0, m, n - k0 - p),
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row: the pivot is 1 − ‖w‖², t = (e − w·d)/√pivot, ρ′² = ρ² − t².
    #[test]
    fn downdate_small_one_row() {
        let gram = Mat::from_fn(1, 1, |_, _| 0.36);
        let e_wd = Mat::from_fn(1, 1, |_, _| 0.4);
        let (l, t, rho) =
            downdate_small(&gram, &e_wd, &[1.0], &[2.0], 3, f64::EPSILON / 2.0).unwrap();
        assert!((l[(0, 0)] - 0.8).abs() < 1e-15);
        assert!((t[(0, 0)] - 0.5).abs() < 1e-15);
        assert!((rho[0] - 0.75f64.sqrt()).abs() < 1e-15);
    }

    /// Two rows of which the second is not determined by the rows left, and a
    /// right-hand side larger than the residual.
    #[test]
    fn downdate_small_refusals() {
        let u = f64::EPSILON / 2.0;
        // W rows (0.6, 0) and (0.6, 0.8): WWᵀ = [0.36 0.36; 0.36 1]
        let gram = Mat::from_fn(2, 2, |i, j| if i == 1 && j == 1 { 1.0 } else { 0.36 });
        let e_wd = Mat::zeros(2, 1);
        let out = downdate_small(&gram, &e_wd, &[1.0], &[1.0], 2, u);
        assert!(
            matches!(out, Err(DowndateRefusal::NotPositiveDefinite { row: 1, alpha2 }) if (alpha2 + 0.2025).abs() < 1e-15),
            "{out:?}"
        );
        let gram = Mat::from_fn(1, 1, |_, _| 0.0);
        let e_wd = Mat::from_fn(1, 1, |_, _| 2.0);
        assert_eq!(
            downdate_small(&gram, &e_wd, &[1.0], &[1.0], 2, u).map(|_| ()),
            Err(DowndateRefusal::Residual { rhs: 0 })
        );
    }
}
