//! The rank-one update on the device (docs/algorithms.md#rank-one-update,
//! docs/algorithms.md#thin-rank-one-update, docs/algorithms.md#updates-without-q): the full
//! kind's w = Qᵀu and stages A and B; the thin kind's small-side path and its fallback with
//! q̂ formed explicitly; the R-only kind's corrected semi-normal equations. Each reads the
//! state's [`Factors`] and returns the new factors in new buffers; the operation
//! (`ops/rank_one/`) swaps them in.

use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::params::Givens;
use crate::base::refusal::dependence_tol;
use crate::gpu::algo::factors::Factors;
use crate::gpu::algo::rank::check_rank;
use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf, reduced, thin};
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevVec};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// u and v of a rank-one update in device memory, with ‖u‖₂.
pub(crate) struct RankOneInputs<T> {
    /// u (m).
    pub(crate) u: DevVec<T>,
    /// v (n).
    pub(crate) v: DevVec<T>,
    /// ‖u‖₂.
    pub(crate) unorm: f64,
}

impl<T: GpuScalar> RankOneInputs<T> {
    /// Uploads u and v (queued on the stream), with `unorm` = ‖u‖₂ from the caller.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], device errors.
    pub(crate) fn from_host(gpu: &Gpu, u: &[T], v: &[T], unorm: f64) -> Result<Self> {
        let u = DevVec::from_slice_async(gpu, u)?;
        let v = DevVec::from_slice_async(gpu, v)?;
        gpu.stage_mark("upload u, v");
        Ok(Self { u, v, unorm })
    }

    /// Copies u (m×1) and v (n×1) device to device into buffers of their own (the
    /// update may outlive the caller's views); ‖u‖₂ by cuBLAS.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], device errors.
    pub(crate) fn from_device(
        gpu: &Gpu,
        u: &DevMatView<'_, T>,
        v: &DevMatView<'_, T>,
    ) -> Result<Self> {
        let own = |x: &DevMatView<'_, T>| -> Result<DevVec<T>> {
            let mut c = DevMat::<T>::for_overwrite(gpu, x.nrows(), 1)?;
            gpu.panel_copy(x, &mut c.view_mut())?;
            c.into_column_vec()
        };
        let (u, v) = (own(u)?, own(v)?);
        let unorm = gpu.nrm2(&u.view())?;
        gpu.stage_mark("copy u, v");
        Ok(Self { u, v, unorm })
    }
}

/// The factors after the update: R′, d′ and Q′ (m×m, or Q₁′ m×n).
pub(crate) struct RankOneUpdated<T> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// Q′.
    pub(crate) q: DevMat<T>,
}

/// The R-only kind's factors after the rotations, with u and v on the device for
/// [`r_only_finish`].
pub(crate) struct RankOneReduced<T> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// u and v, for the kept data's update.
    pub(crate) inputs: RankOneInputs<T>,
}

/// The full kind (docs/algorithms.md#rank-one-update): w = Qᵀu by cuBLAS GEMV, then stages
/// A and B on copies of R, Q and d (`givens`: two-phase, or the seed wavefront), the rank
/// check. R keeps exact zeros below its diagonal.
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn full<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    givens: Givens,
    x: &RankOneInputs<T>,
) -> Result<RankOneUpdated<T>> {
    let (m, n) = (f.dims.m, f.dims.n);
    let q_old = f.q.expect("the full kind holds Q");
    let (ud, vd) = (&x.u, &x.v);
    let mut w = DevVec::zeros(gpu, m)?;
    gpu.gemv(
        Op::T,
        T::ONE,
        &q_old.view(),
        &ud.view(),
        T::ZERO,
        &mut w.view_mut(),
    )?;
    gpu.stage_mark("w = Q^T u");
    let mut q = q_old.dup(gpu)?;
    let mut r = f.r.dup(gpu)?;
    let mut d = f.d.dup(gpu)?;
    gpu.stage_mark("copies");
    match givens {
        Givens::Wavefront => wf::rank_one_rotate_wavefront(gpu, &w, vd, &mut r, &mut q, &mut d)?,
        Givens::TwoPhase => tp::rank_one_rotate_two_phase(gpu, &mut w, vd, &mut r, &mut q, &mut d)?,
    }
    check_rank(gpu, &r, n, f.rank_tol)?;
    Ok(RankOneUpdated { r, d, q })
}

/// The thin kind with the new direction formed explicitly
/// (docs/algorithms.md#thin-rank-one-update), the path for a u mostly inside range(Q₁):
/// w = Q₁ᵀu and z = u − Q₁w by Gram–Schmidt twice, γ = ‖z‖ and q̂ = z/γ (no new direction
/// where γ ≤ 64u·‖u‖: q̂ = 0, γ = 0), then the two-phase stages A and B of the
/// full case on [Q₁ q̂] (m×(n+1)), [R; 0] and [d; q̂ᵀb] with w′ = [w; γ]; q̂'s column and the
/// last row are dropped.
///
/// # Errors
/// As [`full`].
pub(crate) fn thin_projected<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    x: &RankOneInputs<T>,
) -> Result<RankOneUpdated<T>> {
    let (m, n, nq) = (f.dims.m, f.dims.n, f.dims.q);
    let (unorm, vd) = (x.unorm, &x.v);
    let q1 = f.q1();
    let (c, mut z) = thin::project_out(gpu, &q1.view(), &x.u.as_col())?;
    let gamma = gpu.nrm2(&z.col(0, 0..m))?;
    let has_dir = gamma > dependence_tol::<T>() * unorm && gamma > 0.0;
    let (gamma_t, scale) = if has_dir {
        (T::from_f64(gamma), T::from_f64(1.0 / gamma))
    } else {
        (T::ZERO, T::ZERO)
    };
    gpu.scal(scale, &mut z.col_mut(0, 0..m))?;
    gpu.stage_mark("w, q̂");
    // w′ = [w; γ] (n+1, through the host: n + 1 values)
    let mut w_host: Vec<T> = c.to_host(gpu)?.col(0).to_vec();
    w_host.push(gamma_t);
    let mut w = DevVec::from_slice(gpu, &w_host)?;
    let mut r = thin::stacked(gpu, &f.r.view(), None, 1)?;
    let mut d = thin::stacked(gpu, &f.d.view(), None, 1)?;
    thin::tall_tn(
        gpu,
        &z.view(),
        &f.kept_b().view(),
        &mut d.block_mut(n, 0, 1, nq),
    )?;
    let mut q = thin::side_by_side(gpu, &q1.view(), &z.view())?;
    drop(z);
    gpu.stage_mark("[Q1 q̂], [R; 0], [d; q̂ᵀb]");
    tp::rank_one_rotate_two_phase(gpu, &mut w, vd, &mut r, &mut q, &mut d)?;
    let r = gpu.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
    let d = gpu.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
    q.truncate_cols(n);
    check_rank(gpu, &r, n, f.rank_tol)?;
    Ok(RankOneUpdated { r, d, q })
}

/// The thin kind (docs/algorithms.md#thin-q-updates-on-the-gpu): w = Q₁ᵀu (one pass over
/// Q₁), γ² = ‖u‖² − ‖w‖²; where γ² ≥ ‖u‖²/2 (u is far enough from range(Q₁) for the
/// difference to be accurate, the Kahan–Parlett criterion) the stages A and B of the full
/// case run on [R; 0], [d; (uᵀb − wᵀd)/γ] and an identity, whose product G gives
/// Q₁′ = [Q₁ q̂]·G(:, 0:n) = Q₁·(G(0:n, 0:n) − w·g/γ) + u·g/γ with g = G(n, 0:n): one GEMM
/// over Q₁ and a rank-one term. `None` otherwise: the caller takes [`thin_projected`].
///
/// # Errors
/// As [`full`].
pub(crate) fn thin_small_side<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    x: &RankOneInputs<T>,
) -> Result<Option<RankOneUpdated<T>>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let unorm2 = x.unorm * x.unorm;
    let q1 = f.q1();
    let (ud, vd) = (&x.u, &x.v);
    // w = Q₁ᵀu and uᵀb
    let mut wd = DevMat::<T>::zeros(g, n, 1)?;
    thin::tall_tn(g, &q1.view(), &ud.as_col(), &mut wd.view_mut())?;
    let mut utb = DevMat::<T>::zeros(g, 1, nq)?;
    thin::tall_tn(g, &ud.as_col(), &f.kept_b().view(), &mut utb.view_mut())?;
    g.stage_mark("Q1ᵀu, uᵀb");
    let w = thin::to_host_f64(g, &wd.view())?;
    let wn2: f64 = (0..n).map(|i| w[(i, 0)] * w[(i, 0)]).sum();
    let gamma2 = unorm2 - wn2;
    if gamma2.is_nan() || gamma2 < 0.5 * unorm2 || unorm2 == 0.0 {
        return Ok(None);
    }
    let gamma = gamma2.sqrt();
    // f = q̂ᵀb = (uᵀb − wᵀd)/γ
    let dh = thin::to_host_f64(g, &f.d.view())?;
    let utb = thin::to_host_f64(g, &utb.view())?;
    let fh = Mat::from_fn(1, nq, |_, k| {
        let wd: f64 = (0..n).map(|i| w[(i, 0)] * dh[(i, k)]).sum();
        (utb[(0, k)] - wd) / gamma
    });
    let mut wext: Vec<T> = (0..n).map(|i| T::from_f64(w[(i, 0)])).collect();
    wext.push(T::from_f64(gamma));
    let mut wv = DevVec::from_slice(g, &wext)?;
    let fd = thin::from_host_f64::<T>(g, &fh)?;
    let mut r = thin::stacked(g, &f.r.view(), None, 1)?;
    let mut d = thin::stacked(g, &f.d.view(), Some(&fd.view()), 1)?;
    let mut gm = thin::identity::<T>(g, n + 1)?;
    tp::rank_one_rotate_two_phase(g, &mut wv, vd, &mut r, &mut gm, &mut d)?;
    let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
    check_rank(g, &r, n, f.rank_tol)?;
    let q = thin_q(g, f, ud, &wd, &gm, gamma)?;
    Ok(Some(RankOneUpdated { r, d, q }))
}

/// The thin kind's new Q₁ from the rotations' product G: h = g/γ (1×n),
/// M = G(0:n, 0:n) − w·h and Q₁′ = u·h + Q₁·M.
fn thin_q<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    ud: &DevVec<T>,
    wd: &DevMat<T>,
    gm: &DevMat<T>,
    gamma: f64,
) -> Result<DevMat<T>> {
    let (m, n) = (f.dims.m, f.dims.n);
    let q1 = f.q1();
    // h = g/γ (1×n), M = G(0:n, 0:n) − w·h
    let mut h = g.two_phase_copy_new(&gm.block(n, 0, 1, n), 0..0, false)?;
    g.scal(T::from_f64(1.0 / gamma), &mut h.buf_mut().slice_mut(..))?;
    let mut mm = g.two_phase_copy_new(&gm.block(0, 0, n, n), 0..0, false)?;
    g.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        &wd.view(),
        &h.view(),
        T::ONE,
        &mut mm.view_mut(),
    )?;
    g.stage_mark("small side: rotations, M");
    // Q₁′ = u·h + Q₁·M
    let mut qn = DevMat::<T>::for_overwrite(g, m, n)?;
    g.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &ud.as_col(),
        &h.view(),
        T::ZERO,
        &mut qn.view_mut(),
    )?;
    g.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &q1.view(),
        &mm.view(),
        T::ONE,
        &mut qn.view_mut(),
    )?;
    g.stage_mark("Q1' = u·h + Q1·M");
    Ok(qn)
}

/// The R-only kind with kept data `(a, b)` (docs/algorithms.md#updates-without-q):
/// c = R⁻ᵀAᵀu and z = u − A·R⁻¹c by the corrected semi-normal equations, γ = ‖z‖ (no new
/// direction where γ ≤ 64u·‖u‖), f = zᵀ(b − Ax)/γ, then stages A and B on
/// [R; 0] and [d; f] with w′ = [c; γ] (a one-row scratch stands in for Q). The kept data
/// change in [`r_only_finish`].
///
/// # Errors
/// As [`full`].
pub(crate) fn r_only<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (a, b): (&DevMat<T>, &DevMat<T>),
    x: RankOneInputs<T>,
) -> Result<RankOneReduced<T>> {
    let (m, n, nq) = (f.dims.m, f.dims.n, f.dims.q);
    let unorm = x.unorm;
    let (c, mut z) = reduced::csne_project(g, a, f.r, &x.u.as_col())?;
    g.stage_mark("semi-normal equations");
    let gamma = g.nrm2(&z.col(0, 0..m))?;
    let has_dir = gamma > dependence_tol::<T>() * unorm && gamma > 0.0;
    let (gamma_t, scale) = if has_dir {
        (T::from_f64(gamma), T::from_f64(1.0 / gamma))
    } else {
        (T::ZERO, T::ZERO)
    };
    g.scal(scale, &mut z.col_mut(0, 0..m))?;
    let res = reduced::residual(g, a, b, f.r, f.d)?;
    let mut r = thin::stacked(g, &f.r.view(), None, 1)?;
    let mut d = thin::stacked(g, &f.d.view(), None, 1)?;
    thin::tall_tn(g, &z.view(), &res.view(), &mut d.block_mut(n, 0, 1, nq))?;
    drop(res);
    let mut w_host: Vec<T> = c.to_host(g)?.col(0).to_vec();
    w_host.push(gamma_t);
    let mut w = DevVec::from_slice(g, &w_host)?;
    // the rotations' Q side: one scratch row (an R-only state has no Q)
    let mut scratch = DevMat::<T>::zeros(g, 1, n + 1)?;
    tp::rank_one_rotate_two_phase(g, &mut w, &x.v, &mut r, &mut scratch, &mut d)?;
    let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
    check_rank(g, &r, n, f.rank_tol)?;
    Ok(RankOneReduced { r, d, inputs: x })
}

/// The R-only kind's end, past the rank test (nothing can refuse the update any more):
/// A += u vᵀ in place, then the residual norms from the kept data and the new R, d.
///
/// # Errors
/// Device errors only (the caller poisons the state on them).
pub(crate) fn r_only_finish<T: GpuScalar>(
    g: &Gpu,
    (a, b): (&mut DevMat<T>, &DevMat<T>),
    out: &RankOneReduced<T>,
) -> Result<Vec<T>> {
    g.gemm(
        Op::N,
        Op::T,
        T::ONE,
        &out.inputs.u.as_col(),
        &out.inputs.v.as_col(),
        T::ONE,
        &mut a.view_mut(),
    )?;
    reduced::residual_norms(g, a, b, &out.r, &out.d)
}
