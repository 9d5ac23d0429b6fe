//! The device side of the refinement's inner solve (docs/algorithms.md#mixed-precision): the
//! R̃ᵀR̃-preconditioned conjugate gradients on AᵀAδ = h of `cpu.rs::pcg_normal`, step for
//! step, with every scalar kept on the device. cuBLAS runs in *device pointer mode* for
//! the whole solve ([`PointerModeDevice`], restored to host mode on drop), so DDOT and
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

use cudarc::cublas::sys;
use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu};

fn status(op: &'static str, s: sys::cublasStatus_t) -> Result<()> {
    s.result().map_err(|e| Error::Cublas(format!("{op}: {e}")))
}

fn int(op: &'static str, what: &'static str, x: usize) -> Result<i32> {
    i32::try_from(x).map_err(|_| Error::InvalidParam {
        op,
        what,
        why: format!("{x} exceeds the 32-bit int of cuBLAS"),
    })
}

/// cuBLAS device pointer mode on `gpu`'s handle while alive; host mode again on drop.
/// Every cuBLAS call with scalar arguments issued on this `Gpu` meanwhile must pass
/// device pointers: only this module's [`InnerCg`] does so, and it holds the guard only
/// inside [`InnerCg::solve`], which calls nothing else with scalar arguments.
struct PointerModeDevice<'g> {
    gpu: &'g Gpu,
}

impl<'g> PointerModeDevice<'g> {
    fn new(gpu: &'g Gpu) -> Result<Self> {
        // SAFETY: cublasSetPointerMode_v2 only sets a field of the live handle owned by
        // `gpu` (no device work); the guard restores host mode on drop.
        let st = unsafe {
            sys::cublasSetPointerMode_v2(
                *gpu.blas().handle(),
                sys::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE,
            )
        };
        status("cublasSetPointerMode", st)?;
        Ok(Self { gpu })
    }
}

impl Drop for PointerModeDevice<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `new`; host mode is the handle's default, which every other
        // cuBLAS wrapper of cuqr assumes. A failure here cannot be reported from drop;
        // setting a handle attribute fails only for an invalid handle.
        let _ = unsafe {
            sys::cublasSetPointerMode_v2(
                *self.gpu.blas().handle(),
                sys::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST,
            )
        };
    }
}

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
            st.alloc_zeros::<f64>(len.max(1))
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
        let (mi, ni) = (int(OP, "m", m)?, int(OP, "n", n)?);
        let lda = int(OP, "lda", a.ld())?;
        let ldt = int(OP, "ld of R̃", self.tri.ld())?;
        let st = gpu.stream().clone();
        let hd = *gpu.blas().handle();
        // Raw device addresses: all buffers outlive this call (owned by self, or
        // borrowed for it) and every use below is on gpu.stream(), to which the cuBLAS
        // handle is bound, so stream order is the only ordering needed.
        // The guards only matter across streams; everything here is on one stream.
        let pa = a.buf().device_ptr(&st).0 as *const f64;
        let ph = h.device_ptr(&st).0 as *const f64;
        let pt = self.tri.buf().device_ptr(&st).0 as *const f64;
        let pap = self.ap.device_ptr_mut(&st).0 as *mut f64;
        let prho = self.rho.device_ptr_mut(&st).0 as *mut f64;
        let pp = self.p.device_ptr_mut(&st).0 as *mut f64;
        let pz = self.z.device_ptr_mut(&st).0 as *mut f64;
        let pw = self.w.device_ptr_mut(&st).0 as *mut f64;
        let pdp = self.delta_prev.device_ptr_mut(&st).0 as *mut f64;
        let pd = self.delta.device_ptr_mut(&st).0 as *mut f64;
        let ps = self.s.device_ptr_mut(&st).0;
        let sc = |i: usize| (ps + 8 * i as u64) as *mut f64;
        let up = sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER;
        let nonunit = sys::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT;
        let (opn, opt) = (
            sys::cublasOperation_t::CUBLAS_OP_N,
            sys::cublasOperation_t::CUBLAS_OP_T,
        );
        // z := (R̃ᵀR̃)⁻¹ z: R̃ᵀy = z, then R̃z = y.
        let apply_precond = || -> Result<()> {
            gpu.count_launch();
            gpu.count_launch();
            // SAFETY: R̃ is n×n (ld ldt) inside its buffer; z holds n f64 (stride 1) and
            // is a different allocation; DTRSV has no scalar arguments (pointer mode is
            // irrelevant); handle bound to the stream.
            unsafe {
                status(
                    "dtrsv",
                    sys::cublasDtrsv_v2(hd, up, opt, nonunit, ni, pt, ldt, pz, 1),
                )?;
                status(
                    "dtrsv",
                    sys::cublasDtrsv_v2(hd, up, opn, nonunit, ni, pt, ldt, pz, 1),
                )
            }
        };
        let copy = |x: *const f64, y: *mut f64, len: i32| -> Result<()> {
            gpu.count_launch();
            // SAFETY: x and y are distinct device buffers (or distinct scalar slots)
            // holding at least `len` f64 with stride 1; no scalar arguments.
            status("dcopy", unsafe { sys::cublasDcopy_v2(hd, len, x, 1, y, 1) })
        };
        // x/y → into slot `q`: the 1×1 upper triangular solve y·q = x.
        let divide = |num: usize, den: usize, q: usize| -> Result<()> {
            copy(sc(num), sc(q), 1)?;
            gpu.count_launch();
            // SAFETY: a 1×1 "matrix" at slot `den` (ld 1) and a 1-vector at slot `q`,
            // distinct slots of the scalar array; no scalar arguments.
            status("dtrsv", unsafe {
                sys::cublasDtrsv_v2(hd, up, opn, nonunit, 1, sc(den), 1, sc(q), 1)
            })
        };

        let mode = PointerModeDevice::new(gpu)?;
        // ‖h‖ for the stop test, ρ = h, δ = 0, z = M⁻¹ρ, p = z, γ = ρᵀz.
        gpu.count_launch();
        // SAFETY: h holds n f64; the result goes to a device slot (device pointer mode,
        // held by `mode`).
        status("dnrm2", unsafe {
            sys::cublasDnrm2_v2(hd, ni, ph, 1, sc(RN))
        })?;
        copy(ph, prho, ni)?;
        gpu.count_launch();
        // SAFETY: δ holds n f64; α = 0 read from a device slot (device pointer mode).
        status("dscal", unsafe {
            sys::cublasDscal_v2(hd, ni, sc(ZERO), pd, 1)
        })?;
        copy(prho, pz, ni)?;
        apply_precond()?;
        copy(pz, pp, ni)?;
        gpu.count_launch();
        // SAFETY: ρ and p hold n f64; result to a device slot (device pointer mode).
        status("ddot", unsafe {
            sys::cublasDdot_v2(hd, ni, prho, 1, pp, 1, sc(GAMMA))
        })?;
        let first = self.read(gpu, RN, GAMMA + 1)?;
        let (hnorm, mut gamma) = (first[0], first[GAMMA - RN]);
        let stop = eps * hnorm;
        let mut rnorm = hnorm;
        let mut steps = 0usize;
        let mut converged = rnorm <= stop;
        while steps < max_it && !converged && gamma.is_finite() && gamma > 0.0 {
            // Every call in the unsafe blocks of this loop: A is m×n with ld lda inside its
            // buffer; ap holds m f64, p, w, ρ, z, δ, δ_prev n f64 each, all distinct
            // allocations (stride 1); scalar arguments and results are slots of the
            // device scalar array (device pointer mode, held by `mode`); the handle is
            // bound to the stream.
            // SAFETY: as just said.
            unsafe {
                gpu.count_launch();
                status(
                    "dgemv",
                    sys::cublasDgemv_v2(hd, opn, mi, ni, sc(ONE), pa, lda, pp, 1, sc(ZERO), pap, 1),
                )?;
                gpu.count_launch();
                status(
                    "dgemv",
                    sys::cublasDgemv_v2(hd, opt, mi, ni, sc(ONE), pa, lda, pap, 1, sc(ZERO), pw, 1),
                )?;
                gpu.count_launch();
                status("ddot", sys::cublasDdot_v2(hd, ni, pp, 1, pw, 1, sc(PW)))?;
            }
            divide(GAMMA, PW, ALPHA)?;
            copy(pd, pdp, ni)?;
            copy(sc(ALPHA), sc(NALPHA), 1)?;
            // SAFETY: as above.
            unsafe {
                gpu.count_launch();
                status(
                    "daxpy",
                    sys::cublasDaxpy_v2(hd, ni, sc(ALPHA), pp, 1, pd, 1),
                )?;
                gpu.count_launch();
                status("dscal", sys::cublasDscal_v2(hd, 1, sc(MONE), sc(NALPHA), 1))?;
                gpu.count_launch();
                status(
                    "daxpy",
                    sys::cublasDaxpy_v2(hd, ni, sc(NALPHA), pw, 1, prho, 1),
                )?;
            }
            copy(prho, pz, ni)?;
            apply_precond()?;
            // SAFETY: as above.
            unsafe {
                gpu.count_launch();
                status("ddot", sys::cublasDdot_v2(hd, ni, prho, 1, pz, 1, sc(GNEW)))?;
                gpu.count_launch();
                status("dnrm2", sys::cublasDnrm2_v2(hd, ni, prho, 1, sc(RN)))?;
            }
            divide(GNEW, GAMMA, BETA)?;
            // SAFETY: as above.
            unsafe {
                gpu.count_launch();
                status("dscal", sys::cublasDscal_v2(hd, ni, sc(BETA), pp, 1))?;
                gpu.count_launch();
                status("daxpy", sys::cublasDaxpy_v2(hd, ni, sc(ONE), pz, 1, pp, 1))?;
            }
            copy(sc(GNEW), sc(GAMMA), 1)?;
            let v = self.read(gpu, PW, RN + 1)?;
            let (pw_h, gnew, rn) = (v[0], v[1], v[2]);
            if !pw_h.is_finite() || pw_h <= 0.0 {
                // Breakdown: the CPU version stops before this update; undo it.
                copy(pdp, pd, ni)?;
                break;
            }
            steps += 1;
            gamma = gnew;
            rnorm = rn;
            converged = rnorm <= stop;
        }
        drop(mode);
        Ok(InnerOutcome { steps, converged })
    }

    /// Waits for the stream and reads scalar slots `lo..hi`.
    fn read(&self, gpu: &Gpu, lo: usize, hi: usize) -> Result<Vec<f64>> {
        gpu.count_launch();
        let mut out = vec![0.0f64; hi - lo];
        gpu.stream()
            .memcpy_dtoh(&self.s.slice(lo..hi), &mut out)
            .map_err(driver_err("reading CG scalars"))?;
        gpu.stream()
            .synchronize()
            .map_err(driver_err("reading CG scalars"))?;
        Ok(out)
    }
}
