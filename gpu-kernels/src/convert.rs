//! Precision conversion between a working-precision matrix and an f32 copy (issue 5,
//! spec §4.2 / seed S3: the mixed-precision solver factors an f32 copy of f64 data and
//! refines in f64). A power-of-two `scale` (exact) keeps the f32 copy inside the
//! range the tensor-core formats need. Elementwise over a column-major rows×cols block, any leading
//! dimensions. Grid (⌈rows/128⌉, min(cols, 65535)), block 128; column stride `ystride`.

use crate::device::{self, Float};

/// Conversion of a kernel element type to and from f32 (round to nearest even).
pub trait ToFromF32: Copy {
    /// `self` rounded to f32 (exact for f32).
    fn to_f32(self) -> f32;
    /// `x` widened (exact) to `Self`.
    fn from_f32(x: f32) -> Self;
}

impl ToFromF32 for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl ToFromF32 for f64 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x as f64
    }
}

/// `convert_to_f32`: dst(i,j) = f32(scale·src(i,j)), rounded to nearest, i < rows, j < cols.
///
/// # Safety
/// Launch shape as in the module doc; the rows×cols block of `src` (ld `lds`) readable,
/// that of `dst` (ld `ldd`) writable; the blocks do not overlap.
#[inline(always)]
pub unsafe fn to_f32<T: ToFromF32 + Float>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    scale: T,
    dst: *mut f32,
    ldd: usize,
    ystride: usize,
) {
    let i = device::block_x() * device::block_dim_x() + device::thread_x();
    if i >= rows {
        return;
    }
    let mut j = device::block_y();
    while j < cols {
        // SAFETY: i < rows, j < cols: inside both blocks; one thread per element.
        unsafe {
            let x = device::ld(src, i + j * lds);
            device::st(dst, i + j * ldd, x.mul(scale).to_f32());
        }
        j += ystride;
    }
}

/// `convert_from_f32`: dst(i,j) = scale·T(src(i,j)) (widening is exact), i < rows, j < cols.
///
/// # Safety
/// As [`to_f32`] with the element types swapped.
#[inline(always)]
pub unsafe fn from_f32<T: ToFromF32 + Float>(
    src: *const f32,
    lds: usize,
    rows: usize,
    cols: usize,
    scale: T,
    dst: *mut T,
    ldd: usize,
    ystride: usize,
) {
    let i = device::block_x() * device::block_dim_x() + device::thread_x();
    if i >= rows {
        return;
    }
    let mut j = device::block_y();
    while j < cols {
        // SAFETY: i < rows, j < cols: inside both blocks; one thread per element.
        unsafe {
            let x = device::ld(src, i + j * lds);
            device::st(dst, i + j * ldd, T::from_f32(x).mul(scale));
        }
        j += ystride;
    }
}
