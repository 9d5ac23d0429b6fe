//! The device side of the refinement's inner solve (docs/algorithms.md#mixed-precision): the
//! R̃ᵀR̃-preconditioned conjugate gradients on AᵀAδ = h of `cpu.rs::pcg_normal`, step for
//! step, with every scalar kept on the device. cuBLAS runs in *device pointer mode* for
//! the whole solve ([`DeviceModeBlas`], restored to host mode on drop), so DDOT and
//! DNRM2 write their results to device memory and DGEMV / DAXPY / DSCAL read their
//! coefficients from it; the two divisions of a CG step (α = γ/pᵀw, β = γ₊/γ) are 1×1
//! DTRSV solves. The host reads back three numbers per step (‖ρ‖, pᵀw, γ₊) in one copy
//! to apply the stopping rule and the breakdown checks of the CPU version; the old
//! host-pointer-mode loop waited on the stream three times per step.
//!
//! Breakdown (pᵀw ≤ 0 or not finite) is only known after the step's updates have been
//! queued, so δ is saved before each update and restored when the step turns out to
//! have broken down: the returned δ is exactly the CPU version's.
//!
//! The preconditioner is applied by two DTRSV with R̃. (An explicit R̃⁻¹ applied by two
//! DTRMV was tried: on an H100 at 16384×4096 forming it by DTRSM cost more than all the
//! DTRSV it saved — refinement 13.8 ms against 7.3 ms with DTRSV, 4 CG steps.)

use cudarc::driver::{CudaSlice, CudaView};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::Op;
use crate::gpu::ffi::blas_device::{DeviceModeBlas, MatId, VecId};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu};

// Slots of the device scalar array.
const ONE: usize = 0;
const MONE: usize = 1;
const ZERO: usize = 2;
/// pᵀw, γ₊ = ρᵀz, ‖ρ‖: contiguous, read back together after each step.
const PW: usize = 3;
const GNEW: usize = 4;
const RN: usize = 5;
const GAMMA: usize = 6;
const ALPHA: usize = 7;
const NALPHA: usize = 8;
const BETA: usize = 9;
const NSCAL: usize = 10;

/// Outcome of one inner solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InnerOutcome {
    /// CG steps taken (updates of δ kept).
    pub steps: usize,
    /// ‖ρ‖ ≤ eps·‖h‖ was reached (or h = 0).
    pub converged: bool,
}

/// Device state of the inner CG: vectors, device scalars and the preconditioner.
pub(crate) struct InnerCg {
    m: usize,
    n: usize,
    ap: CudaSlice<f64>,
    rho: CudaSlice<f64>,
    p: CudaSlice<f64>,
    z: CudaSlice<f64>,
    w: CudaSlice<f64>,
    delta_prev: CudaSlice<f64>,
    /// δ, the result of [`InnerCg::solve`].
    pub delta: CudaSlice<f64>,
    s: CudaSlice<f64>,
    /// R̃, n×n upper triangular, f64.
    tri: DevMat<f64>,
}

impl InnerCg {
    /// Workspace for an m×n problem with preconditioner factor `r` (R̃, f64, unscaled,
    /// upper triangle referenced).
    pub fn new(gpu: &Gpu, m: usize, n: usize, r: DevMat<f64>) -> Result<Self> {
        let st = gpu.stream();
        let vec = |len: usize, what: &'static str| {
            st.alloc_zeroed::<f64>(len.max(1))
                .map_err(alloc_err(what, len.max(1) * 8))
        };
        let mut s = vec(NSCAL, "CG scalars")?;
        let mut init = [0.0f64; NSCAL];
        init[ONE] = 1.0;
        init[MONE] = -1.0;
        gpu.count_launch();
        st.memcpy_htod(&init, &mut s)
            .map_err(driver_err("CG scalars"))?;
        Ok(Self {
            m,
            n,
            ap: vec(m, "CG vector Ap")?,
            rho: vec(n, "CG vector ρ")?,
            p: vec(n, "CG vector p")?,
            z: vec(n, "CG vector z")?,
            w: vec(n, "CG vector w")?,
            delta_prev: vec(n, "CG vector δ")?,
            delta: vec(n, "CG vector δ")?,
            s,
            tri: r,
        })
    }

    /// δ ≈ (AᵀA)⁻¹h by R̃ᵀR̃-preconditioned CG from δ₀ = 0 recurring the normal residual
    /// ρ (the CPU's `pcg_normal`): stops when ‖ρ‖ ≤ `eps`·‖h‖, on breakdown (γ or pᵀw
    /// not positive and finite), or after `max_it` steps. `h` (n) is only read.
    pub fn solve(
        &mut self,
        gpu: &Gpu,
        a: &DevMat<f64>,
        h: &CudaView<'_, f64>,
        eps: f64,
        max_it: usize,
    ) -> Result<InnerOutcome> {
        const OP: &str = "lstsq_mixed_gpu inner CG";
        let (m, n) = (self.m, self.n);
        if a.nrows() != m || a.ncols() != n || h.len() < n {
            return Err(Error::Shape {
                op: OP,
                what: "rows × columns of A",
                got: a.nrows() * a.ncols(),
                expected: m * n,
            });
        }
        let Self {
            ap,
            rho,
            p,
            z,
            w,
            delta_prev,
            delta,
            s,
            tri,
            ..
        } = self;
        let mut blas = DeviceModeBlas::new(gpu, s)?;
        let v = CgVectors {
            a: blas.matrix(a)?,
            tri: blas.matrix(tri)?,
            h: blas.input(h),
            ap: blas.vector(ap),
            rho: blas.vector(rho),
            p: blas.vector(p),
            z: blas.vector(z),
            w: blas.vector(w),
            delta_prev: blas.vector(delta_prev),
            delta: blas.vector(delta),
        };
        let cg = CgSteps { blas: &blas, v, n };
        let (hnorm, mut gamma) = cg.start()?;
        let stop = eps * hnorm;
        let mut rnorm = hnorm;
        let mut steps = 0usize;
        let mut converged = rnorm <= stop;
        while steps < max_it && !converged && gamma.is_finite() && gamma > 0.0 {
            let Some((gnew, rn)) = cg.step()? else {
                break;
            };
            steps += 1;
            gamma = gnew;
            rnorm = rn;
            converged = rnorm <= stop;
        }
        drop(blas);
        Ok(InnerOutcome { steps, converged })
    }
}

/// The buffers of one inner solve while device pointer mode is on.
struct CgVectors {
    a: MatId,
    tri: MatId,
    h: VecId,
    ap: VecId,
    rho: VecId,
    p: VecId,
    z: VecId,
    w: VecId,
    delta_prev: VecId,
    delta: VecId,
}

/// The steps of the inner CG while device pointer mode is on: the start and one iteration.
struct CgSteps<'s, 'a> {
    blas: &'s DeviceModeBlas<'a>,
    v: CgVectors,
    n: usize,
}

impl CgSteps<'_, '_> {
    /// z := (R̃ᵀR̃)⁻¹ z: R̃ᵀy = z, then R̃z = y.
    fn apply_preconditioner(&self) -> Result<()> {
        self.blas.trsv_upper(self.v.tri, Op::T, self.v.z)?;
        self.blas.trsv_upper(self.v.tri, Op::N, self.v.z)
    }

    /// ‖h‖ for the stop test, ρ = h, δ = 0, z = M⁻¹ρ, p = z, γ = ρᵀz; returns (‖h‖, γ).
    fn start(&self) -> Result<(f64, f64)> {
        let (b, v, n) = (self.blas, &self.v, self.n);
        b.nrm2(v.h, n, RN)?;
        b.copy(v.h, v.rho, n)?;
        b.scal(ZERO, v.delta, n)?;
        b.copy(v.rho, v.z, n)?;
        self.apply_preconditioner()?;
        b.copy(v.z, v.p, n)?;
        b.dot(v.rho, v.p, n, GAMMA)?;
        let first = b.read_slots(RN, GAMMA + 1)?;
        Ok((first[0], first[GAMMA - RN]))
    }

    /// One CG step; `None` on breakdown (pᵀw not positive and finite: the step's update
    /// of δ is undone, as the CPU version stops before it), else (γ₊, ‖ρ‖).
    fn step(&self) -> Result<Option<(f64, f64)>> {
        let (b, v, n) = (self.blas, &self.v, self.n);
        b.gemv(Op::N, v.a, (ONE, ZERO), v.p, v.ap)?;
        b.gemv(Op::T, v.a, (ONE, ZERO), v.ap, v.w)?;
        b.dot(v.p, v.w, n, PW)?;
        b.divide(GAMMA, PW, ALPHA)?;
        b.copy(v.delta, v.delta_prev, n)?;
        b.copy_slot(ALPHA, NALPHA)?;
        b.axpy(ALPHA, v.p, v.delta, n)?;
        b.scal_slot(MONE, NALPHA)?;
        b.axpy(NALPHA, v.w, v.rho, n)?;
        b.copy(v.rho, v.z, n)?;
        self.apply_preconditioner()?;
        b.dot(v.rho, v.z, n, GNEW)?;
        b.nrm2(v.rho, n, RN)?;
        b.divide(GNEW, GAMMA, BETA)?;
        b.scal(BETA, v.p, n)?;
        b.axpy(ONE, v.z, v.p, n)?;
        b.copy_slot(GNEW, GAMMA)?;
        let r = b.read_slots(PW, RN + 1)?;
        let (pw, gnew, rn) = (r[0], r[1], r[2]);
        if !pw.is_finite() || pw <= 0.0 {
            b.copy(v.delta_prev, v.delta, n)?;
            return Ok(None);
        }
        Ok(Some((gnew, rn)))
    }
}
