//! cuBLAS in *device pointer mode* over a fixed set of f64 buffers: the scalar
//! arguments (α, β) and results (DOT, NRM2) are slots of a device array, so a chain of
//! level-1/2 calls runs without the host waiting between them. A [`DeviceModeBlas`]
//! borrows its matrices and vectors for its whole life, takes their device addresses
//! once, switches the handle to device pointer mode and back to host mode on drop. Its
//! operations name the buffers by the [`VecId`]/[`MatId`] handed out when they were
//! added and check lengths, slots and that outputs are writable; every call goes on
//! [`Gpu::stream`], to which the handle is bound.

use core::marker::PhantomData;

use cudarc::cublas::sys;
use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DevicePtrMut};

use crate::base::error::Result;
use crate::gpu::ffi::blas::{int, status, Op};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{driver_err, Gpu};

/// A vector added to a [`DeviceModeBlas`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VecId(usize);

/// A matrix added to a [`DeviceModeBlas`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MatId(usize);

struct DevVecRef {
    ptr: u64,
    len: usize,
    writable: bool,
}

struct DevMatRef {
    ptr: u64,
    nrows: usize,
    ncols: usize,
    ld: i32,
}

/// cuBLAS device pointer mode on `gpu`'s handle over borrowed f64 buffers (module doc).
/// While it lives, no other cuBLAS call with scalar arguments may be issued on its
/// `Gpu`: they would read their host scalars as device addresses. Its operations are
/// the only ones the holder needs; it is dropped (host mode again) before anything else
/// runs.
pub(crate) struct DeviceModeBlas<'a> {
    gpu: &'a Gpu,
    handle: sys::cublasHandle_t,
    scalars: &'a CudaSlice<f64>,
    scalar_ptr: u64,
    vecs: Vec<DevVecRef>,
    mats: Vec<DevMatRef>,
    _borrows: PhantomData<&'a mut CudaSlice<f64>>,
}

impl<'a> DeviceModeBlas<'a> {
    /// Device pointer mode over the scalar slots `scalars`.
    ///
    /// # Errors
    /// [`Error::Cublas`](crate::Error::Cublas) if the mode cannot be set.
    pub(crate) fn new(gpu: &'a Gpu, scalars: &'a mut CudaSlice<f64>) -> Result<Self> {
        let st = gpu.stream();
        // Raw device addresses: every buffer is borrowed for the guard's life and every
        // use is on gpu.stream(), so stream order is the only ordering needed (the
        // guards only matter across streams).
        let scalar_ptr = scalars.device_ptr_mut(st).0;
        let scalars: &'a CudaSlice<f64> = scalars;
        let handle = *gpu.blas().handle();
        // SAFETY: cublasSetPointerMode_v2 only sets a field of the live handle owned by
        // `gpu` (no device work); `Drop` restores host mode.
        let s = unsafe {
            sys::cublasSetPointerMode_v2(
                handle,
                sys::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE,
            )
        };
        status("cublasSetPointerMode", s)?;
        Ok(Self {
            gpu,
            handle,
            scalars,
            scalar_ptr,
            vecs: Vec::new(),
            mats: Vec::new(),
            _borrows: PhantomData,
        })
    }

    /// Adds a vector that the operations only read.
    pub(crate) fn input(&mut self, x: &'a CudaView<'_, f64>) -> VecId {
        let ptr = x.device_ptr(self.gpu.stream()).0;
        self.push_vec(ptr, x.len(), false)
    }

    /// Adds a vector that the operations read and write.
    pub(crate) fn vector(&mut self, x: &'a mut CudaSlice<f64>) -> VecId {
        let ptr = x.device_ptr_mut(self.gpu.stream()).0;
        self.push_vec(ptr, x.len(), true)
    }

    /// Adds a matrix that the operations only read.
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam) if its leading dimension exceeds cuBLAS's int.
    pub(crate) fn matrix(&mut self, a: &'a DevMat<f64>) -> Result<MatId> {
        let ld = int("device-mode cuBLAS", "ld", a.ld())?;
        let ptr = a.buf().device_ptr(self.gpu.stream()).0;
        self.mats.push(DevMatRef {
            ptr,
            nrows: a.nrows(),
            ncols: a.ncols(),
            ld,
        });
        Ok(MatId(self.mats.len() - 1))
    }

    fn push_vec(&mut self, ptr: u64, len: usize, writable: bool) -> VecId {
        self.vecs.push(DevVecRef { ptr, len, writable });
        VecId(self.vecs.len() - 1)
    }

    /// Address of vector `x` holding at least `n` elements (writable if `write`).
    fn vec(&self, x: VecId, n: usize, write: bool) -> u64 {
        let v = &self.vecs[x.0];
        assert!(
            n <= v.len,
            "device-mode cuBLAS: {n} elements of a vector of {}",
            v.len
        );
        assert!(
            v.writable || !write,
            "device-mode cuBLAS: writing an input vector"
        );
        v.ptr
    }

    /// Address of scalar slot `i`.
    fn slot(&self, i: usize) -> *mut f64 {
        assert!(
            i < self.scalars.len(),
            "device-mode cuBLAS: no scalar slot {i}"
        );
        (self.scalar_ptr + 8 * i as u64) as *mut f64
    }

    fn n(len: usize) -> Result<i32> {
        int("device-mode cuBLAS", "n", len)
    }

    /// y[..n] := x[..n] (xCOPY); `x` and `y` are different vectors.
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn copy(&self, x: VecId, y: VecId, n: usize) -> Result<()> {
        assert_ne!(x, y, "device-mode cuBLAS: copy onto itself");
        let (px, py) = (self.vec(x, n, false), self.vec(y, n, true));
        self.raw_copy(px as *const f64, py as *mut f64, Self::n(n)?)
    }

    /// Slot `to` := slot `from`.
    ///
    /// # Errors
    /// [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn copy_slot(&self, from: usize, to: usize) -> Result<()> {
        assert_ne!(from, to, "device-mode cuBLAS: copy onto itself");
        self.raw_copy(self.slot(from), self.slot(to), 1)
    }

    fn raw_copy(&self, x: *const f64, y: *mut f64, n: i32) -> Result<()> {
        self.gpu.count_launch();
        // SAFETY: x and y are distinct device buffers or distinct scalar slots (checked by
        // the callers) holding at least n f64 (stride 1); xCOPY has no scalar arguments.
        status("dcopy", unsafe {
            sys::cublasDcopy_v2(self.handle, n, x, 1, y, 1)
        })
    }

    /// Solves op(T)·x = b in place for the upper-triangular, non-unit n×n `t` (xTRSV).
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn trsv_upper(&self, t: MatId, op: Op, x: VecId) -> Result<()> {
        let a = &self.mats[t.0];
        assert_eq!(
            a.nrows, a.ncols,
            "device-mode cuBLAS: TRSV of a non-square matrix"
        );
        let px = self.vec(x, a.nrows, true);
        self.gpu.count_launch();
        // SAFETY: T is n×n (ld a.ld) inside its buffer; x holds ≥ n f64 (checked), a
        // different allocation (T is read-only and x writable); DTRSV has no scalar
        // arguments; the handle is bound to the stream.
        status("dtrsv", unsafe {
            sys::cublasDtrsv_v2(
                self.handle,
                sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
                op.cublas(),
                sys::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
                Self::n(a.nrows)?,
                a.ptr as *const f64,
                a.ld,
                px as *mut f64,
                1,
            )
        })
    }

    /// Slot `q` := slot `num` / slot `den` on the device (a copy, then the 1×1 upper
    /// triangular solve den·q = num).
    ///
    /// # Errors
    /// [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn divide(&self, num: usize, den: usize, q: usize) -> Result<()> {
        assert_ne!(
            den, q,
            "device-mode cuBLAS: dividing in place of the divisor"
        );
        self.copy_slot(num, q)?;
        self.gpu.count_launch();
        // SAFETY: a 1×1 "matrix" at slot `den` (ld 1) and a 1-vector at slot `q`,
        // distinct slots of the scalar array (checked); no scalar arguments.
        status("dtrsv", unsafe {
            sys::cublasDtrsv_v2(
                self.handle,
                sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
                Op::N.cublas(),
                sys::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
                1,
                self.slot(den),
                1,
                self.slot(q),
                1,
            )
        })
    }

    /// Slot `out` := ‖x[..n]‖₂ (xNRM2).
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn nrm2(&self, x: VecId, n: usize, out: usize) -> Result<()> {
        let px = self.vec(x, n, false);
        self.gpu.count_launch();
        // SAFETY: x holds ≥ n f64 (checked); the result goes to a device slot (device
        // pointer mode, held by `self`).
        status("dnrm2", unsafe {
            sys::cublasDnrm2_v2(
                self.handle,
                Self::n(n)?,
                px as *const f64,
                1,
                self.slot(out),
            )
        })
    }

    /// Slot `out` := x[..n]ᵀy[..n] (xDOT).
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn dot(&self, x: VecId, y: VecId, n: usize, out: usize) -> Result<()> {
        let (px, py) = (self.vec(x, n, false), self.vec(y, n, false));
        self.gpu.count_launch();
        // SAFETY: x and y hold ≥ n f64 (checked); the result goes to a device slot
        // (device pointer mode, held by `self`).
        status("ddot", unsafe {
            sys::cublasDdot_v2(
                self.handle,
                Self::n(n)?,
                px as *const f64,
                1,
                py as *const f64,
                1,
                self.slot(out),
            )
        })
    }

    /// x[..n] := slot `alpha` · x[..n] (xSCAL).
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn scal(&self, alpha: usize, x: VecId, n: usize) -> Result<()> {
        let px = self.vec(x, n, true);
        self.raw_scal(alpha, px as *mut f64, Self::n(n)?)
    }

    /// Slot `x` := slot `alpha` · slot `x` (xSCAL of one element).
    ///
    /// # Errors
    /// [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn scal_slot(&self, alpha: usize, x: usize) -> Result<()> {
        assert_ne!(alpha, x, "device-mode cuBLAS: scaling a slot by itself");
        self.raw_scal(alpha, self.slot(x), 1)
    }

    fn raw_scal(&self, alpha: usize, x: *mut f64, n: i32) -> Result<()> {
        self.gpu.count_launch();
        // SAFETY: x holds ≥ n f64 (checked by the callers); α is read from a device slot
        // other than x (device pointer mode, held by `self`).
        status("dscal", unsafe {
            sys::cublasDscal_v2(self.handle, n, self.slot(alpha), x, 1)
        })
    }

    /// y[..n] := slot `alpha` · x[..n] + y[..n] (xAXPY); `x` and `y` are different vectors.
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn axpy(&self, alpha: usize, x: VecId, y: VecId, n: usize) -> Result<()> {
        assert_ne!(x, y, "device-mode cuBLAS: AXPY onto itself");
        let (px, py) = (self.vec(x, n, false), self.vec(y, n, true));
        self.gpu.count_launch();
        // SAFETY: x and y are distinct buffers holding ≥ n f64 (checked); α is read from
        // a device slot (device pointer mode, held by `self`).
        status("daxpy", unsafe {
            sys::cublasDaxpy_v2(
                self.handle,
                Self::n(n)?,
                self.slot(alpha),
                px as *const f64,
                1,
                py as *mut f64,
                1,
            )
        })
    }

    /// y := slot `alpha` · op(A)·x + slot `beta` · y (xGEMV); `x` and `y` are different
    /// vectors of op(A)'s columns and rows.
    ///
    /// # Errors
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::Cublas`](crate::Error::Cublas).
    pub(crate) fn gemv(
        &self,
        op: Op,
        a: MatId,
        (alpha, beta): (usize, usize),
        x: VecId,
        y: VecId,
    ) -> Result<()> {
        assert_ne!(x, y, "device-mode cuBLAS: GEMV onto its input");
        let m = &self.mats[a.0];
        let (rows, cols) = match op {
            Op::N => (m.nrows, m.ncols),
            Op::T => (m.ncols, m.nrows),
        };
        let (px, py) = (self.vec(x, cols, false), self.vec(y, rows, true));
        self.gpu.count_launch();
        // SAFETY: A is nrows×ncols (ld m.ld) inside its read-only buffer; x holds op(A)'s
        // column count and y its row count of f64 (checked), y writable and different from
        // x and A; α, β are device slots (device pointer mode, held by `self`).
        status("dgemv", unsafe {
            sys::cublasDgemv_v2(
                self.handle,
                op.cublas(),
                Self::n(m.nrows)?,
                Self::n(m.ncols)?,
                self.slot(alpha),
                m.ptr as *const f64,
                m.ld,
                px as *const f64,
                1,
                self.slot(beta),
                py as *mut f64,
                1,
            )
        })
    }

    /// Waits for the stream and reads scalar slots `lo..hi`.
    ///
    /// # Errors
    /// [`Error::Driver`](crate::Error::Driver).
    pub(crate) fn read_slots(&self, lo: usize, hi: usize) -> Result<Vec<f64>> {
        self.gpu.count_launch();
        let mut out = vec![0.0f64; hi - lo];
        self.gpu
            .stream()
            .memcpy_dtoh(&self.scalars.slice(lo..hi), &mut out)
            .map_err(driver_err("reading device scalars"))?;
        self.gpu
            .stream()
            .synchronize()
            .map_err(driver_err("reading device scalars"))?;
        Ok(out)
    }
}

impl Drop for DeviceModeBlas<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `new`; host mode is the handle's default, which every other
        // cuBLAS wrapper of cuqr assumes. A failure here cannot be reported from drop;
        // setting a handle attribute fails only for an invalid handle.
        let _ = unsafe {
            sys::cublasSetPointerMode_v2(
                self.handle,
                sys::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST,
            )
        };
    }
}
