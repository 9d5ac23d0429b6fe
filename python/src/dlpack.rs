//! DLPack (the array-exchange protocol of CuPy, PyTorch and NumPy): CUDA arrays in, copied
//! device to device into cuqr's own [`DevMat`]s, and cuqr's results out, handed over
//! without a copy. The C structures follow the DLPack header (version 1.0, with the legacy
//! unversioned capsule too); this module holds the extension's only `unsafe` code.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use cuqr::{DevMat, Gpu, GpuScalar};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLCUDAManaged`.
const DEVICE_CUDA_MANAGED: i32 = 13;
/// `kDLFloat`.
const CODE_FLOAT: u8 = 2;
/// `kDLComplex`.
const CODE_COMPLEX: u8 = 5;

const NAME_LEGACY: &CStr = c"dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

/// What a DLPack producer described: the device, the element type and the layout.
#[derive(Clone, Debug)]
pub struct Described {
    /// (DLPack device type, device ordinal).
    pub device: (i32, i32),
    /// Element bits (32 or 64 for a float type, 64 or 128 for a complex one).
    pub bits: u8,
    /// Whether the elements are complex (interleaved real and imaginary parts).
    pub complex: bool,
    /// Rows and columns (a vector is one column).
    pub shape: (usize, usize),
    /// Element strides of rows and columns.
    pub strides: (isize, isize),
    /// The address of element (0, 0).
    pub address: u64,
}

fn dtype_bits<T: GpuScalar>() -> u8 {
    (core::mem::size_of::<T>() * 8) as u8
}

/// Reads a `DLTensor` (1-D or 2-D, a float or complex type, one lane).
///
/// # Safety
/// `t` must be a valid `DLTensor` whose `shape` (and `strides`, when not null) point to
/// `ndim` integers.
unsafe fn describe(t: &DlTensor) -> PyResult<Described> {
    let complex = t.dtype.code == CODE_COMPLEX;
    if !(t.dtype.code == CODE_FLOAT || complex) || t.dtype.lanes != 1 {
        return Err(PyValueError::new_err(
            "cuqr supports float32, float64, complex64 and complex128 arrays",
        ));
    }
    let nd = t.ndim;
    if !(1..=2).contains(&nd) {
        return Err(PyValueError::new_err(format!(
            "expected a 1-D or 2-D array, found {nd} dimensions"
        )));
    }
    // SAFETY: `shape` holds `ndim` entries (the DLPack contract, this function's).
    let shape = unsafe { std::slice::from_raw_parts(t.shape, nd as usize) };
    let strides: Vec<i64> = if t.strides.is_null() {
        // compact row-major
        if nd == 1 {
            vec![1]
        } else {
            vec![shape[1], 1]
        }
    } else {
        // SAFETY: as for `shape`.
        unsafe { std::slice::from_raw_parts(t.strides, nd as usize) }.to_vec()
    };
    let dim =
        |x: i64| usize::try_from(x).map_err(|_| PyValueError::new_err("negative array dimension"));
    let (shape, strides) = if nd == 1 {
        (
            (dim(shape[0])?, 1),
            (strides[0] as isize, shape[0] as isize),
        )
    } else {
        (
            (dim(shape[0])?, dim(shape[1])?),
            (strides[0] as isize, strides[1] as isize),
        )
    };
    Ok(Described {
        device: (t.device.device_type, t.device.device_id),
        bits: t.dtype.bits,
        complex,
        shape,
        strides,
        address: (t.data as u64).wrapping_add(t.byte_offset),
    })
}

/// A device array taken from a DLPack producer: its description and the capsule that keeps
/// the producer's memory alive (released when this is dropped, as the protocol asks).
pub struct Imported<'py> {
    /// What the producer described.
    pub desc: Described,
    /// Held (not consumed) until the copy is done; dropping it releases the producer's
    /// tensor through the capsule's destructor.
    _capsule: Bound<'py, PyAny>,
}

/// Asks `obj` for a DLPack capsule on `stream` (the producer orders its pending work before
/// that stream) and reads it.
pub fn import<'py>(obj: &Bound<'py, PyAny>, stream: usize) -> PyResult<Imported<'py>> {
    let py = obj.py();
    let kw = PyDict::new(py);
    kw.set_item("stream", stream)?;
    let capsule = obj.call_method("__dlpack__", (), Some(&kw))?;
    let raw = capsule.as_ptr();
    // SAFETY: `raw` is a live object (held by `capsule`); the calls only inspect it.
    let legacy = unsafe { ffi::PyCapsule_IsValid(raw, NAME_LEGACY.as_ptr()) } == 1;
    let desc = if legacy {
        // SAFETY: a valid capsule of this name holds a `DLManagedTensor*` (DLPack);
        // it stays alive while `capsule` is held and not consumed.
        let p = unsafe { ffi::PyCapsule_GetPointer(raw, NAME_LEGACY.as_ptr()) }
            as *const DlManagedTensor;
        if p.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: as above; `describe`'s contract is the producer's.
        unsafe { describe(&(*p).dl_tensor) }?
    } else {
        // SAFETY: as above.
        let ok = unsafe { ffi::PyCapsule_IsValid(raw, NAME_VERSIONED.as_ptr()) } == 1;
        if !ok {
            return Err(PyTypeError::new_err(
                "__dlpack__ returned something that is not a DLPack capsule",
            ));
        }
        // SAFETY: a valid capsule of this name holds a `DLManagedTensorVersioned*`.
        let p = unsafe { ffi::PyCapsule_GetPointer(raw, NAME_VERSIONED.as_ptr()) }
            as *const DlManagedTensorVersioned;
        if p.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: as above.
        let v = unsafe { &*p };
        if v.version.major != 1 {
            return Err(PyValueError::new_err(format!(
                "DLPack version {}.{} is not supported",
                v.version.major, v.version.minor
            )));
        }
        // SAFETY: as above.
        unsafe { describe(&v.dl_tensor) }?
    };
    Ok(Imported {
        desc,
        _capsule: capsule,
    })
}

impl Imported<'_> {
    /// The array transposed: a `rows × cols` array becomes the `cols × rows` device matrix
    /// whose column i is the array's row i (a row-major array then takes one 2D copy, no
    /// transpose). Waits for the copy as [`Imported::to_dev_mat`].
    pub fn to_dev_mat_transposed<T: GpuScalar>(&self, gpu: &Arc<Gpu>) -> PyResult<DevMat<T>> {
        let d = &self.desc;
        let flipped = Described {
            shape: (d.shape.1, d.shape.0),
            strides: (d.strides.1, d.strides.0),
            ..d.clone()
        };
        Imported::copy_described::<T>(&flipped, gpu)
    }

    /// Copies the array (device to device, on [`Gpu::stream`]) into a new [`DevMat`] and
    /// waits for that stream, so that the producer's memory may be released afterwards.
    pub fn to_dev_mat<T: GpuScalar>(&self, gpu: &Arc<Gpu>) -> PyResult<DevMat<T>> {
        Imported::copy_described::<T>(&self.desc, gpu)
    }

    /// The array's elements as real parts: a float array as [`Imported::to_dev_mat`]
    /// copies it; a complex m×n one, which must have unit row stride (Fortran order), as
    /// the 2m×n matrix of its interleaved real and imaginary parts (row 2i the real parts
    /// of row i; cuBLAS's complex layout). `R` is the part type (float32 for complex64).
    pub fn to_dev_parts<R: GpuScalar>(&self, gpu: &Arc<Gpu>) -> PyResult<DevMat<R>> {
        let d = &self.desc;
        if !d.complex {
            return Imported::copy_described::<R>(d, gpu);
        }
        if d.bits != 2 * dtype_bits::<R>() {
            return Err(PyValueError::new_err(format!(
                "expected complex{} data, found complex{}",
                2 * dtype_bits::<R>(),
                d.bits
            )));
        }
        let (rows, cols) = d.shape;
        let row_stride = if rows <= 1 { 1 } else { d.strides.0 };
        let col_stride = if cols <= 1 {
            rows as isize
        } else {
            d.strides.1
        };
        if row_stride != 1 {
            return Err(PyValueError::new_err(
                "a complex device array must be in Fortran order (unit row stride)",
            ));
        }
        let parts = Described {
            bits: dtype_bits::<R>(),
            complex: false,
            shape: (2 * rows, cols),
            strides: (1, 2 * col_stride),
            ..d.clone()
        };
        Imported::copy_described::<R>(&parts, gpu)
    }

    /// The copy of [`Imported::to_dev_mat`] for a description of this import's memory
    /// (the capsule, held by the caller's `Imported`, keeps it alive).
    fn copy_described<T: GpuScalar>(d: &Described, gpu: &Arc<Gpu>) -> PyResult<DevMat<T>> {
        if d.device.0 != DEVICE_CUDA && d.device.0 != DEVICE_CUDA_MANAGED {
            return Err(PyValueError::new_err("the array is not in CUDA memory"));
        }
        if d.complex || d.bits != dtype_bits::<T>() {
            return Err(PyValueError::new_err(format!(
                "expected float{} data, found {}{}",
                dtype_bits::<T>(),
                if d.complex { "complex" } else { "float" },
                d.bits
            )));
        }
        let (rows, cols) = d.shape;
        // SAFETY: the capsule (held by the `Imported` this description came from, not
        // consumed) keeps the producer's memory alive; the producer described this device,
        // the element type (checked) and the layout (a transposed description swaps shape
        // and strides alike, addressing the same elements); it ordered its writes before
        // `gpu.stream` when asked for the capsule with that stream; the copy is waited for
        // below, before the `Imported` (and with it the memory) can go.
        let m = unsafe {
            DevMat::<T>::copy_from_foreign(gpu, d.address, rows, cols, d.strides.0, d.strides.1)
        }
        .map_err(crate::error::to_py)?;
        gpu.synchronize_stream().map_err(crate::error::to_py)?;
        Ok(m)
    }
}

/// The two DLPack structures a capsule can hold (1.0's versioned one and the legacy one),
/// as far as exporting needs them.
trait Managed: Sized {
    /// The capsule name.
    const NAME: &'static CStr;
    /// The structure with `tensor` and `deleter`, no manager context, version 1.0.
    fn new(tensor: DlTensor, deleter: unsafe extern "C" fn(*mut Self)) -> Self;
    /// The structure's deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
    /// The tensor inside.
    fn tensor_mut(&mut self) -> &mut DlTensor;
}

impl Managed for DlManagedTensor {
    const NAME: &'static CStr = NAME_LEGACY;
    fn new(dl_tensor: DlTensor, deleter: unsafe extern "C" fn(*mut Self)) -> Self {
        Self {
            dl_tensor,
            manager_ctx: core::ptr::null_mut(),
            deleter: Some(deleter),
        }
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
}

impl Managed for DlManagedTensorVersioned {
    const NAME: &'static CStr = NAME_VERSIONED;
    fn new(dl_tensor: DlTensor, deleter: unsafe extern "C" fn(*mut Self)) -> Self {
        Self {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: core::ptr::null_mut(),
            deleter: Some(deleter),
            flags: 0,
            dl_tensor,
        }
    }
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
    fn tensor_mut(&mut self) -> &mut DlTensor {
        &mut self.dl_tensor
    }
}

/// The owner of an exported matrix: the DLPack structure first, so that a pointer to it is
/// a pointer to the whole.
#[repr(C)]
struct Export<M, T> {
    managed: M,
    mat: DevMat<T>,
    shape: [i64; 2],
    strides: [i64; 2],
}

/// The `DLTensor` of `mat` (column-major, leading dimension ld), whose shape and strides
/// live in `shape` and `strides`; with `complex`, of the complex matrix whose interleaved
/// parts `mat` holds (half the rows, and the leading dimension, which is even).
fn tensor_of<T: GpuScalar>(
    gpu: &Gpu,
    mat: &DevMat<T>,
    complex: bool,
    shape: &mut [i64; 2],
    strides: &mut [i64; 2],
) -> DlTensor {
    let parts = if complex { 2 } else { 1 };
    debug_assert!(mat.nrows().is_multiple_of(parts) && mat.ld().is_multiple_of(parts));
    *shape = [(mat.nrows() / parts) as i64, mat.ncols() as i64];
    *strides = [1, (mat.ld() / parts) as i64];
    DlTensor {
        data: mat.device_address(gpu) as *mut c_void,
        device: DlDevice {
            device_type: DEVICE_CUDA,
            device_id: gpu.device_ordinal() as i32,
        },
        ndim: 2,
        dtype: DlDataType {
            code: if complex { CODE_COMPLEX } else { CODE_FLOAT },
            bits: dtype_bits::<T>() * parts as u8,
            lanes: 1,
        },
        shape: shape.as_mut_ptr(),
        strides: strides.as_mut_ptr(),
        byte_offset: 0,
    }
}

/// The deleter of an exported matrix.
unsafe extern "C" fn delete<M: Managed, T: GpuScalar>(p: *mut M) {
    if !p.is_null() {
        // SAFETY: `p` came from `Box::into_raw` of an `Export<M, T>` in `export` (the
        // structure is its first field), and the protocol calls the deleter once.
        drop(unsafe { Box::from_raw(p as *mut Export<M, T>) });
    }
}

/// The capsule's destructor: a consumer renames the capsule (`used_…`) when it takes
/// ownership; an unconsumed one still owns the tensor and frees it.
unsafe extern "C" fn destroy_capsule<M: Managed>(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed.
    if unsafe { ffi::PyCapsule_IsValid(capsule, M::NAME.as_ptr()) } == 1 {
        // SAFETY: a valid capsule of this name made by `export` holds the structure.
        let p = unsafe { ffi::PyCapsule_GetPointer(capsule, M::NAME.as_ptr()) } as *mut M;
        // SAFETY: the structure is live and owned by the capsule.
        if let Some(del) = unsafe { p.as_ref() }.and_then(|t| t.deleter()) {
            // SAFETY: the structure's own deleter, called once, as the protocol asks.
            unsafe { del(p) };
        }
    }
}

/// [`export`] for one of the two structures.
fn export_as<'py, M: Managed, T: GpuScalar>(
    py: Python<'py>,
    gpu: &Gpu,
    mat: DevMat<T>,
    complex: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (mut shape, mut strides) = ([0; 2], [0; 2]);
    let tensor = tensor_of(gpu, &mat, complex, &mut shape, &mut strides);
    let mut b = Box::new(Export {
        managed: M::new(tensor, delete::<M, T>),
        mat,
        shape,
        strides,
    });
    // the tensor points at the boxed shape and strides
    let e = &mut *b;
    let t = e.managed.tensor_mut();
    t.shape = e.shape.as_mut_ptr();
    t.strides = e.strides.as_mut_ptr();
    let p = Box::into_raw(b);
    // SAFETY: `p` is a live, uniquely owned allocation; the capsule takes it over (its
    // destructor or the consumer frees it through the deleter).
    let raw = unsafe {
        ffi::PyCapsule_New(
            p as *mut c_void,
            M::NAME.as_ptr(),
            Some(destroy_capsule::<M>),
        )
    };
    if raw.is_null() {
        // SAFETY: no capsule took `p` over; it is freed here, once.
        unsafe { delete::<M, T>(p as *mut M) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `raw` is a new reference returned by PyCapsule_New (checked non-null).
    Ok(unsafe { Bound::from_owned_ptr(py, raw) })
}

/// Hands `mat` to a DLPack consumer: a capsule that owns it (freed by the consumer through
/// the deleter, or by the capsule if never consumed). `versioned` makes a DLPack 1.0
/// capsule, else the legacy one. With `complex`, `mat` holds the interleaved parts of a
/// complex matrix (as [`Imported::to_dev_parts`] makes them) and goes out as that matrix.
/// The caller has waited for the work that wrote `mat`.
pub fn export<'py, T: GpuScalar>(
    py: Python<'py>,
    gpu: &Gpu,
    mat: DevMat<T>,
    versioned: bool,
    complex: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if versioned {
        export_as::<DlManagedTensorVersioned, T>(py, gpu, mat, complex)
    } else {
        export_as::<DlManagedTensor, T>(py, gpu, mat, complex)
    }
}

/// The error of a second `__dlpack__` call on a one-shot exporter.
pub fn consumed() -> PyErr {
    PyBufferError::new_err("this cuqr device array was already handed over through DLPack")
}
