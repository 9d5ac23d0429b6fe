//! Column deletion on the device (docs/algorithms.md#column-deletion,
//! docs/algorithms.md#column-deletion-block-height, docs/algorithms.md#thin-q-updates-on-the-gpu,
//! docs/algorithms.md#updates-without-q): the kept columns moved into a new R, the banded
//! reflectors (blocked, or one launch without Q), the thin kind's Q₁′ by one GEMM and the
//! R-only kind's residual norms. Each step reads the state's [`Factors`] and returns new
//! buffers; the operation (`ops/delete_cols/`) swaps them in.

use crate::base::error::Result;
use crate::gpu::algo::factors::{Factors, NewFactors};
use crate::gpu::algo::householder::blocked_qr_band;
use crate::gpu::algo::rank::check_rank_dev;
use crate::gpu::algo::{reduced, thin};
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Where the columns leave and how the band is reduced.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColDeleteParams {
    /// The first deleted column.
    pub(crate) k0: usize,
    /// The number of deleted columns.
    pub(crate) p: usize,
    /// Block size of the blocked band reflectors.
    pub(crate) nb: usize,
    /// Whether a state without Q may take the one-launch band (`row_insert_band_qr`).
    pub(crate) one_launch: bool,
}

/// The R-only kind's factors after the deletion.
pub(crate) struct ColsDeletedReduced<T> {
    /// R′ ((n−p)×(n−p)).
    pub(crate) r: DevMat<T>,
    /// d′ ((n−p)×q).
    pub(crate) d: DevMat<T>,
    /// The kept A without the columns, where kept.
    pub(crate) a: Option<DevMat<T>>,
    /// The residual norms.
    pub(crate) rho: Vec<T>,
}

/// The thin kind's truncation (k0 = n−p): R's and d's first n−p rows copied into new
/// buffers (Q₁ loses its last p columns in place, by the caller).
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn thin_truncated<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    nn: usize,
) -> Result<(DevMat<T>, DevMat<T>)> {
    let nq = f.dims.q;
    Ok((
        g.two_phase_copy_new(&f.r.block(0, 0, nn, nn), 0..0, true)?,
        g.two_phase_copy_new(&f.d.block(0, 0, nn, nq), 0..0, false)?,
    ))
}

/// Moves the kept columns into a new R with two device-to-device copies (with the padded
/// ld, columns k0+p..n are contiguous), then runs the banded blocked reflectors (length
/// p+1, blocks of p+n_b rows) on copies of d and Q. A state without Q whose band fits the
/// device (p ≤ 256, every block of columns resident) takes one cooperative launch instead
/// where `params.one_launch` allows it (`row_insert_band_qr`: the reflectors one at a time,
/// as the unblocked algorithm; the block size does not apply). A thin state accumulates the
/// reflectors on an n×n identity instead of Q₁ (H). The rank check ends it. R′ keeps the
/// stored rows (× (n − p) columns).
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn band<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    params: ColDeleteParams,
) -> Result<NewFactors<T>> {
    let ColDeleteParams { k0, p, nb, .. } = params;
    let n = f.dims.n;
    let nn = n - p;
    let thin = f.dims.policy == crate::base::params::QPolicy::Thin;
    // R's stored rows: m under the full kind, n under the thin kind
    let rows = f.r.nrows();
    let ld = f.r.ld();
    let mut r = DevMat::<T>::zeros(gpu, rows, nn)?;
    debug_assert_eq!(r.ld(), ld);
    for (src, dst) in [
        (0..k0 * ld, 0..k0 * ld),
        ((k0 + p) * ld..n * ld, k0 * ld..nn * ld),
    ] {
        if src.is_empty() {
            continue;
        }
        gpu.count_launch();
        gpu.stream()
            .memcpy_dtod(&f.r.buf().slice(src), &mut r.buf_mut().slice_mut(dst))
            .map_err(crate::gpu::runtime::driver_err(
                "delete_cols: moving R's columns",
            ))?;
    }
    let mut d = f.d.dup(gpu)?;
    // A thin state accumulates the reflectors on an n×n identity and applies their product
    // to Q₁ at the end (one GEMM over the columns they touch) instead of copying Q₁ and
    // running the blocked reflectors over its m rows.
    let mut q = match f.q {
        Some(_) if thin => Some(thin::identity::<T>(gpu, n)?),
        Some(qm) => Some(qm.dup(gpu)?),
        None => None,
    };
    gpu.stage_mark("copies");
    // Without Q, the band's reflectors are needed by nothing after the re-triangularisation,
    // so they run as one chain in one launch (`row_insert_band_qr`, unblocked: n_b does not
    // apply) where the columns fit the device, as row insertion does
    // (docs/algorithms.md#column-deletion, docs/algorithms.md#row-insertion).
    let one_launch = match (&q, params.one_launch) {
        (None, true) => gpu.band_qr_plan::<T>(nn - k0, f.dims.q, p)?,
        _ => None,
    };
    match one_launch {
        Some(shape) => {
            let mut v = DevMat::<T>::zeros(gpu, p, nn - k0)?;
            gpu.row_insert_band_qr(&mut r, k0, k0, &mut d, nn - k0, p, &mut v, shape)?;
            gpu.stage_mark("band QR, one launch");
        }
        None => {
            blocked_qr_band(
                gpu,
                &mut r,
                k0..n,
                k0..nn,
                Some(p),
                Some(&mut d),
                q.as_mut(),
                nb,
                None,
            )?;
            gpu.stage_mark("band QR");
        }
    }
    check_rank_dev(gpu, &r, nn, f.rank_tol)?;
    gpu.stage_mark("rank check");
    Ok(NewFactors { r, d, q })
}

/// The thin kind's end (docs/algorithms.md#thin-q-updates-on-the-gpu): R and d keep their
/// first n−p rows, and Q₁′ = [Q₁(:, 0:k0) | Q₁(:, k0:n)·H(k0:n, k0:n−p)] by one GEMM.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn thin_finish<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    out: NewFactors<T>,
    (k0, p): (usize, usize),
) -> Result<NewFactors<T>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let nn = n - p;
    // R and d keep their first nn rows, Q₁ its first nn columns
    let r = gpu.two_phase_copy_new(&out.r.block(0, 0, nn, nn), 0..0, true)?;
    let d = gpu.two_phase_copy_new(&out.d.block(0, 0, nn, nq), 0..0, false)?;
    // Q₁′ = [Q₁(:, 0:k0) | Q₁(:, k0:n)·H(k0:n, k0:nn)]
    let h = out.q.as_ref().expect("a thin state holds Q₁");
    let q1 = f.q1();
    let m = q1.nrows();
    let mut qn = DevMat::<T>::for_overwrite(gpu, m, nn)?;
    if k0 > 0 {
        gpu.panel_copy(&q1.block(0, 0, m, k0), &mut qn.block_mut(0, 0, m, k0))?;
    }
    gpu.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &q1.block(0, k0, m, n - k0),
        &h.block(k0, k0, n - k0, nn - k0),
        T::ZERO,
        &mut qn.block_mut(0, k0, m, nn - k0),
    )?;
    gpu.stage_mark("Q1' = Q1·H");
    Ok(NewFactors { r, d, q: Some(qn) })
}

/// The R-only kind's end (docs/algorithms.md#updates-without-q): `r` (n×(n−p)) and `d`
/// (n×q) after the reflectors; the residual norms take d's rows n−p..n
/// (ρ′² = ρ² + ‖d(n−p.., k)‖²), R and d keep their first n − p rows, and the kept A (if
/// any) loses columns k0..k0+p.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn reduced_finish<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    kept_a: Option<&DevMat<T>>,
    (r, d): (DevMat<T>, DevMat<T>),
    (k0, p): (usize, usize),
) -> Result<ColsDeletedReduced<T>> {
    let nn = f.dims.n - p;
    let (r, d, rho) = reduced::trimmed(g, f.rho, (r, d), (nn, p))?;
    let a = kept_a
        .map(|a| reduced::with_cols_deleted(g, a, k0, p))
        .transpose()?;
    Ok(ColsDeletedReduced { r, d, a, rho })
}
