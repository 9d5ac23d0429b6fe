//! cuSOLVER's iterative-refinement least-squares solvers (`cusolverDn<t1><t2>gels`,
//! IRS): a baseline for the mixed-precision solver's benchmark (docs/algorithms.md#mixed-precision)
//! — never cuqr's own implementation. f64 data; the factorisation runs in the
//! lower precision named by [`IrsKind`] and cuSOLVER refines to f64 (falling back to
//! an f64 solve when refinement fails).
// The cuSOLVER baselines serve the benchmarks (feature `internals`) and a few tests.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::cusolver::sys;
use cudarc::driver::DevicePtrMut;

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::int;
use crate::gpu::ffi::cusolver::status;
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu};

/// Precision of the factorisation inside cuSOLVER's IRS least squares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrsKind {
    /// `DDgels`: f64 throughout (no refinement).
    F64,
    /// `DSgels`: f32 factorisation.
    F32,
    /// `DHgels`: f16 tensor-core factorisation.
    F16,
    /// `DBgels`: bf16 tensor-core factorisation.
    Bf16,
    /// `DXgels`: tf32 tensor-core factorisation.
    Tf32,
}

impl IrsKind {
    /// The cuSOLVER routine's name.
    pub fn routine(self) -> &'static str {
        match self {
            IrsKind::F64 => "DDgels",
            IrsKind::F32 => "DSgels",
            IrsKind::F16 => "DHgels",
            IrsKind::Bf16 => "DBgels",
            IrsKind::Tf32 => "DXgels",
        }
    }
}

/// The type of cuSOLVER's IRS `gels` entry points: the arguments they share (handle,
/// m, n, nrhs, A, lda, B, ldb, X, ldx, workspace) followed by `$rest`.
macro_rules! gels_fn {
    ($($rest:ty),*) => {
        unsafe fn(
            sys::cusolverDnHandle_t,
            i32,
            i32,
            i32,
            *mut f64,
            i32,
            *mut f64,
            i32,
            *mut f64,
            i32,
            *mut core::ffi::c_void,
            $($rest),*
        ) -> sys::cusolverStatus_t
    };
}

/// `cusolverDn<t1><t2>gels`: … workspace bytes, iter, devInfo.
type GelsFn = gels_fn!(usize, *mut i32, *mut i32);

/// `cusolverDn<t1><t2>gels_bufferSize`: … the workspace size out.
type GelsSizeFn = gels_fn!(*mut usize);

fn routines(kind: IrsKind) -> (GelsSizeFn, GelsFn) {
    match kind {
        IrsKind::F64 => (sys::cusolverDnDDgels_bufferSize, sys::cusolverDnDDgels),
        IrsKind::F32 => (sys::cusolverDnDSgels_bufferSize, sys::cusolverDnDSgels),
        IrsKind::F16 => (sys::cusolverDnDHgels_bufferSize, sys::cusolverDnDHgels),
        IrsKind::Bf16 => (sys::cusolverDnDBgels_bufferSize, sys::cusolverDnDBgels),
        IrsKind::Tf32 => (sys::cusolverDnDXgels_bufferSize, sys::cusolverDnDXgels),
    }
}

impl Gpu {
    /// min ‖AX − B‖ by cuSOLVER's IRS `gels` of the given kind (A m×n, m ≥ n; B m×q;
    /// X n×q). A may be overwritten (by the factorisation). Returns cuSOLVER's `iter`:
    /// the refinement steps taken, negative when it fell back to the f64 solver.
    ///
    /// # Errors
    /// [`Error::Shape`] for mismatched shapes or m < n; [`Error::InvalidParam`];
    /// [`Error::OutOfMemory`]; [`Error::Cusolver`] (including a nonzero devInfo).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn irs_gels(
        &self,
        kind: IrsKind,
        a: &mut DevMat<f64>,
        b: &DevMat<f64>,
        x: &mut DevMat<f64>,
    ) -> Result<i32> {
        const OP: &str = "irs_gels";
        let (m, n, q) = (a.nrows(), a.ncols(), b.ncols());
        let bad = |what, got, expected| {
            Err(Error::Shape {
                op: OP,
                what,
                got,
                expected,
            })
        };
        if m < n {
            return bad("rows of A (m ≥ n)", m, n);
        }
        if b.nrows() != m {
            return bad("rows of B", b.nrows(), m);
        }
        if x.nrows() != n || x.ncols() != q {
            return bad("shape of X", x.nrows() * x.ncols(), n * q);
        }
        if n == 0 || q == 0 {
            return Ok(0);
        }
        let (mi, ni, qi) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "nrhs", q)?);
        let (lda, ldb, ldx) = (
            int(OP, "lda", a.ld())?,
            int(OP, "ldb", b.ld())?,
            int(OP, "ldx", x.ld())?,
        );
        let (size_fn, gels_fn) = routines(kind);
        let h = self.solver.cu();
        // cuSOLVER's IRS takes B as a non-const pointer but only reads it; a private copy
        // keeps the `&DevMat` contract regardless.
        let mut bc = self
            .stream
            .clone_dtod(b.buf())
            .map_err(alloc_err("IRS copy of B", b.buf().len() * 8))?;
        let mut bytes = 0usize;
        {
            let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
            let (pb, _gb) = bc.device_ptr_mut(&self.stream);
            let (px, _gx) = x.buf_mut().device_ptr_mut(&self.stream);
            // SAFETY: cusolverDn<t1><t2>gels_bufferSize reads only the dimensions; A
            // (m×n, ld lda), B (m×q, ldb) and X (n×q, ldx) lie inside their buffers (shapes
            // checked, ld ≥ rows by DevMat); `bytes` is a live host usize; the workspace
            // pointer may be null for the size query.
            let st = unsafe {
                size_fn(
                    h,
                    mi,
                    ni,
                    qi,
                    pa as *mut f64,
                    lda,
                    pb as *mut f64,
                    ldb,
                    px as *mut f64,
                    ldx,
                    core::ptr::null_mut(),
                    &mut bytes,
                )
            };
            status(OP, st)?;
        }
        let mut work = self
            .stream
            .alloc_zeroed::<u8>(bytes.max(1))
            .map_err(alloc_err("IRS workspace", bytes))?;
        let mut info = self
            .stream
            .alloc_zeroed::<i32>(1)
            .map_err(alloc_err("IRS devInfo", 4))?;
        let mut iter = 0i32;
        {
            let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
            let (pb, _gb) = bc.device_ptr_mut(&self.stream);
            let (px, _gx) = x.buf_mut().device_ptr_mut(&self.stream);
            let (pw, _gw) = work.device_ptr_mut(&self.stream);
            let (pi, _gi) = info.device_ptr_mut(&self.stream);
            self.count_launch();
            // SAFETY: cusolverDn<t1><t2>gels contract: A m×n (ld lda), B m×q (ldb), X n×q
            // (ldx) inside distinct device allocations (X is a &mut DevMat, B a private
            // copy), a workspace of `bytes` bytes as queried, devInfo one device i32, iter
            // a live host i32; the handle is bound to self.stream.
            let st = unsafe {
                gels_fn(
                    h,
                    mi,
                    ni,
                    qi,
                    pa as *mut f64,
                    lda,
                    pb as *mut f64,
                    ldb,
                    px as *mut f64,
                    ldx,
                    pw as *mut core::ffi::c_void,
                    bytes,
                    &mut iter,
                    pi as *mut i32,
                )
            };
            status(OP, st)?;
        }
        self.count_launch();
        let v = self
            .stream
            .clone_dtoh(&info)
            .map_err(driver_err("reading IRS devInfo"))?;
        self.stream
            .synchronize()
            .map_err(driver_err("reading IRS devInfo"))?;
        match v.first() {
            Some(0) => Ok(iter),
            Some(&i) => Err(Error::Cusolver(
                format!("{}: devInfo = {i}", kind.routine()).into(),
            )),
            None => Err(Error::Cusolver(
                format!("{}: no devInfo", kind.routine()).into(),
            )),
        }
    }
}
