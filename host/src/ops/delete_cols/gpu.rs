//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU path of [`run_cpu`] (docs/algorithms.md#column-deletion,
/// docs/algorithms.md#column-deletion-block-height): validates with the same `plan`,
/// moves the kept columns into a new R with two device-to-device copies (with the
/// padded ld, columns k0+p..n are contiguous), then runs the banded blocked reflectors
/// (length p+1, blocks of p+n_b rows) on copies of d and Q. A state without Q whose
/// band fits the device (p ≤ 256, every block of columns resident) takes one
/// cooperative launch instead (`row_insert_band_qr`: the reflectors one at a time, as
/// the unblocked algorithm; the block size does not apply). The state is swapped in
/// only after the rank check passes.
///
/// A thin state (docs/algorithms.md#thin-q-updates-on-the-gpu) accumulates the same
/// reflectors on an n×n identity, keeps R's and d's first n−p rows, and forms Q₁′ =
/// [Q₁(:, 0:k0) | Q₁(:, k0:n)·H(k0:n, k0:n−p)] by one GEMM.
///
/// Fast path k0 = n−p: R's first n−p columns are kept **in place**
/// (`DevMat::truncate_cols`: no allocation, no copy, no launch,
/// no synchronisation) and there is no rank check: the kept columns and
/// their diagonal are unchanged and ‖R‖_F can only shrink, so a state that passed
/// its rank test (every GPU state did, at its own tolerance: factorisation and every
/// update check it) still passes it. The CPU path keeps its (cheap) check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    run_gpu_path(st, k0, p, true)
}

/// [`run_gpu`] with the one-launch band (`row_insert_band_qr`, states without Q)
/// allowed or not (tests compare the two paths).
pub(crate) fn run_gpu_path<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
    one_launch: bool,
) -> Result<()> {
    use crate::gpu::algo::householder::blocked_qr_band;
    use crate::gpu::algo::rank::check_rank_dev;
    use crate::gpu::runtime::DevMat;
    let plan = plan(st.dims, k0, p)?;
    let nn = plan.n_new;
    let nb = resolve_block_size(OP, st.params.block_size, nn - k0)?;
    let thin = st.dims.policy == QPolicy::Thin;
    let reduced = st.dims.policy == QPolicy::None;
    if plan.is_truncation() {
        if reduced {
            let (r, d) = (st.r.dup(&st.gpu)?, st.d.dup(&st.gpu)?);
            return finish_reduced(st, r, d, k0, p);
        }
        if thin {
            // R and d are n rows high: their first nn rows are copied (allocations
            // first, so that out of memory leaves the state as it was); Q₁ loses its
            // last p columns in place
            let (r, d) = st.guarded(|| {
                let g = &*st.gpu;
                let nq = st.dims.q;
                Ok((
                    g.two_phase_copy_new(&st.r.block(0, 0, nn, nn), 0..0, true)?,
                    g.two_phase_copy_new(&st.d.block(0, 0, nn, nq), 0..0, false)?,
                ))
            })?;
            st.r = r;
            st.d = d;
            st.q.as_mut()
                .expect("a thin state holds Q₁")
                .truncate_cols(nn);
        } else {
            st.r.truncate_cols(nn);
        }
        st.dims.n = nn;
        return Ok(());
    }
    let gpu = st.gpu.clone();
    let n = st.dims.n;
    // R's stored rows: m under the full kind, n under the thin kind
    let rows = st.r.nrows();
    let ld = st.r.ld();
    let mut r = DevMat::<T>::zeros(&gpu, rows, nn)?;
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
            .memcpy_dtod(&st.r.buf().slice(src), &mut r.buf_mut().slice_mut(dst))
            .map_err(crate::gpu::runtime::driver_err(
                "delete_cols: moving R's columns",
            ))?;
    }
    let mut d = st.d.dup(&gpu)?;
    // A thin state accumulates the reflectors on an n×n identity and applies their product
    // to Q₁ at the end (one GEMM over the columns they touch) instead of copying Q₁ and
    // running the blocked reflectors over its m rows.
    let mut q = match st.q.as_ref() {
        Some(_) if thin => Some(crate::gpu::algo::thin::identity::<T>(&gpu, n)?),
        Some(qm) => Some(qm.dup(&gpu)?),
        None => None,
    };
    gpu.stage_mark("copies");
    // Without Q, the band's reflectors are needed by nothing after the re-triangularisation,
    // so they run as one chain in one launch (`row_insert_band_qr`, unblocked: n_b does not
    // apply) where the columns fit the device, as row insertion does
    // (docs/algorithms.md#column-deletion, docs/algorithms.md#row-insertion).
    let one_launch = match (&q, one_launch) {
        (None, true) => gpu.band_qr_plan::<T>(nn - k0, st.dims.q, p)?,
        _ => None,
    };
    match one_launch {
        Some(shape) => {
            let mut v = DevMat::<T>::zeros(&gpu, p, nn - k0)?;
            gpu.row_insert_band_qr(&mut r, k0, k0, &mut d, nn - k0, p, &mut v, shape)?;
            gpu.stage_mark("band QR, one launch");
        }
        None => {
            blocked_qr_band(
                &gpu,
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
    check_rank_dev(&gpu, &r, nn, st.rank_tol)?;
    gpu.stage_mark("rank check");
    if reduced {
        return finish_reduced(st, r, d, k0, p);
    }
    if thin {
        // R and d keep their first nn rows, Q₁ its first nn columns
        let nq = st.dims.q;
        r = gpu.two_phase_copy_new(&r.block(0, 0, nn, nn), 0..0, true)?;
        d = gpu.two_phase_copy_new(&d.block(0, 0, nn, nq), 0..0, false)?;
        // Q₁′ = [Q₁(:, 0:k0) | Q₁(:, k0:n)·H(k0:n, k0:nn)]
        let h = q.as_ref().expect("a thin state holds Q₁");
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let m = q1.nrows();
        let mut qn = DevMat::<T>::for_overwrite(&gpu, m, nn)?;
        if k0 > 0 {
            gpu.panel_copy(&q1.block(0, 0, m, k0), &mut qn.block_mut(0, 0, m, k0))?;
        }
        gpu.gemm(
            crate::gpu::ffi::blas::Op::N,
            crate::gpu::ffi::blas::Op::N,
            T::ONE,
            &q1.block(0, k0, m, n - k0),
            &h.block(k0, k0, n - k0, nn - k0),
            T::ZERO,
            &mut qn.block_mut(0, k0, m, nn - k0),
        )?;
        gpu.stage_mark("Q1' = Q1·H");
        q = Some(qn);
    }
    st.r = r;
    st.d = d;
    st.q = q;
    st.dims.n = nn;
    Ok(())
}

/// The R-only kind's end of a column deletion (docs/algorithms.md#updates-without-q): `r`
/// (n×(n−p)) and `d` (n×q) after the reflectors; the residual norms take d's rows n−p..n
/// (ρ′² = ρ² + ‖d(n−p.., k)‖²), R and d keep their first n − p rows, and the kept A (if
/// any) loses columns k0..k0+p.
fn finish_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    r: crate::gpu::runtime::DevMat<T>,
    d: crate::gpu::runtime::DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    use crate::gpu::algo::{reduced, thin};
    let Dims { n, q, .. } = st.dims;
    let nn = n - p;
    let g = &*st.gpu;
    let extra = thin::column_norms(g, &d.block(nn, 0, p, q))?;
    let rho: Vec<T> = st
        .rho
        .iter()
        .zip(extra)
        .map(|(r0, x)| T::from_f64(r0.to_f64().hypot(x)))
        .collect();
    let r = g.two_phase_copy_new(&r.block(0, 0, nn, nn), 0..0, true)?;
    let d = g.two_phase_copy_new(&d.block(0, 0, nn, q), 0..0, false)?;
    let a =
        st.a.as_ref()
            .map(|a| reduced::with_cols_deleted(g, a, k0, p))
            .transpose()?;
    if a.is_some() {
        st.a = a;
    }
    st.r = r;
    st.d = d;
    st.rho = rho;
    st.dims.n = nn;
    Ok(())
}
