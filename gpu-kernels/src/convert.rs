//! Precision conversion between a working-precision matrix and an f32 copy
//! (docs/algorithms.md#mixed-precision: the mixed-precision solver factors an f32 copy
//! of f64 data and refines in f64). A power-of-two `scale` (exact) keeps the f32 copy inside the
//! range the tensor-core formats need. Elementwise over a column-major rows×cols block, any leading
//! dimensions. Grid (⌈rows/128⌉, g ≤ min(cols, 65535)), block 128; column stride `ystride`.

use crate::device::{self, Float};
use crate::elementwise::for_each_column;

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
    for_each_column(rows, cols, ystride, |i, j| {
        // SAFETY: i < rows, j < cols: inside both blocks; one thread per element.
        unsafe {
            let x = device::ld(src, i + j * lds);
            device::st(dst, i + j * ldd, x.mul(scale).to_f32());
        }
    });
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
    for_each_column(rows, cols, ystride, |i, j| {
        // SAFETY: i < rows, j < cols: inside both blocks; one thread per element.
        unsafe {
            let x = device::ld(src, i + j * lds);
            device::st(dst, i + j * ldd, T::from_f32(x).mul(scale));
        }
    });
}

/// `x` rounded to bfloat16 (to nearest, ties to even), as its bit pattern; NaN stays a
/// (quiet) NaN, overflow gives ±∞.
#[inline(always)]
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if (b & 0x7FFF_FFFF) > 0x7F80_0000 {
        return ((b >> 16) as u16) | 0x0040;
    }
    (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// `x` rounded to IEEE binary16 (to nearest, ties to even, subnormals kept), as its bit
/// pattern; |x| ≥ 65520 gives ±∞, NaN a quiet NaN.
#[inline(always)]
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = b & 0x7FFF_FFFF;
    if a > 0x7F80_0000 {
        return sign | 0x7E00;
    }
    if a >= 0x477F_F000 {
        return sign | 0x7C00; // ≥ 65520 (and ∞)
    }
    if a >= 0x3880_0000 {
        // Normal in f16 (≥ 2⁻¹⁴): rebias the exponent (127 → 15), round away 13 bits.
        let r = a - 0x3800_0000;
        return sign | ((r + 0x0FFF + ((r >> 13) & 1)) >> 13) as u16;
    }
    let e = a >> 23;
    if e < 102 {
        return sign; // below 2⁻²⁵ (or exactly zero): rounds to ±0
    }
    // Subnormal in f16: q·2⁻²⁴ with q = mant·2^(e−126), mant with its implicit bit.
    let mant = (a & 0x007F_FFFF) | 0x0080_0000;
    let s = 126 - e;
    let mut q = mant >> s;
    let rem = mant & ((1 << s) - 1);
    let half = 1 << (s - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q += 1;
    }
    sign | q as u16
}

/// `convert_to_half`: dst(i,j) = bits of f32(src(i,j)) rounded to bf16 (`format` 0) or
/// f16 (`format` 1), to nearest even, i < rows, j < cols: explicit tensor-core operands.
///
/// # Safety
/// Launch shape as in the module doc; the rows×cols block of `src` (ld `lds`) readable,
/// that of `dst` (ld `ldd`, u16) writable; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn to_half<T: ToFromF32>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut u16,
    ldd: usize,
    format: u32,
    ystride: usize,
) {
    for_each_column(rows, cols, ystride, |i, j| {
        // SAFETY: i < rows, j < cols: inside both blocks; one thread per element.
        unsafe {
            let x = device::ld(src, i + j * lds).to_f32();
            let h = if format == 0 {
                bf16_bits(x)
            } else {
                f16_bits(x)
            };
            device::st(dst, i + j * ldd, h);
        }
    });
}
