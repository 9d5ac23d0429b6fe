//! The [`Float`] trait (f32 and f64) that the generic kernels are written against.

use super::warp::{shfl_down_b32, shfl_idx_b32, shfl_xor_b32};
use core::arch::asm;

/// Floating-point element type of the kernels: f32 or f64 (kernels are generic device
/// fns, stamped per dtype by `entries!` in lib.rs). Only what the kernels need.
pub trait Float: Copy + PartialEq + PartialOrd {
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// 1/2.
    const HALF: Self;
    /// The smallest positive normal number.
    const MIN_POSITIVE: Self;
    /// +∞.
    const INFINITY: Self;
    /// a + b.
    fn add(self, o: Self) -> Self;
    /// a − b.
    fn sub(self, o: Self) -> Self;
    /// a · b.
    fn mul(self, o: Self) -> Self;
    /// a / b.
    fn div(self, o: Self) -> Self;
    /// −a.
    fn neg(self) -> Self;
    /// |a|.
    fn abs(self) -> Self;
    /// IEEE maxNum (a NaN operand is ignored), as `f64::max`.
    fn max(self, o: Self) -> Self;
    /// √a (correctly rounded).
    fn sqrt(self) -> Self;
    /// self·a + b with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// |self| with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// true unless ±∞ or NaN.
    fn is_finite(self) -> bool;
    /// Warp shuffle down by `delta` lanes (see [`shfl_down_b32`]).
    ///
    /// # Safety
    /// As [`shfl_down_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_down(self, delta: u32) -> Self;
    /// Warp butterfly shuffle with lane mask `mask` (see [`shfl_xor_b32`]).
    ///
    /// # Safety
    /// As [`shfl_xor_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_xor(self, mask: u32) -> Self;
    /// Lane `lane`'s value in every lane (see [`shfl_idx_b32`]).
    ///
    /// # Safety
    /// As [`shfl_idx_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_idx(self, lane: u32) -> Self;
    /// Reads `*p` from global memory with `ld.global.cg` (L2 only, never a stale L1
    /// line): for data other blocks wrote before a [`grid_sync`](super::grid_sync). The compiler may
    /// schedule these loads freely between two barriers (they are pure reads).
    ///
    /// # Safety
    /// `p` is an aligned pointer into global memory that nobody writes between the
    /// barriers around the read.
    unsafe fn ld_cg(p: *const Self) -> Self;

    /// Approximate 1/√a from the hardware (`rsqrt.approx.ftz`: subnormals flushed; in
    /// f64 the hardware's 20-bit estimate alone, relative error about 2⁻²⁰), for normal
    /// a far from the range's ends; callers refine it with Newton steps
    /// ([`Float::RSQRT_NEWTON`]).
    fn rsqrt_approx(self) -> Self;
    /// Approximate 1/a from the hardware (`rcp.approx.ftz`; subnormals flushed), for
    /// normal a far from the range's ends; callers refine it with
    /// [`Float::RSQRT_NEWTON`] Newton steps, as for [`Float::rsqrt_approx`].
    fn rcp_approx(self) -> Self;
    /// Newton steps that take [`Float::rsqrt_approx`] to working precision (f32: 1,
    /// f64: 2).
    const RSQRT_NEWTON: usize;
    /// [ROT_LO, ROT_HI]: the magnitudes h = max(|f|, |g|) for which f² + g² is a finite
    /// normal number with room to spare (f32: 2^±60, f64: 2^±480), so the fast Givens
    /// rotation needs no scaling.
    const ROT_LO: Self;
    /// See [`Float::ROT_LO`].
    const ROT_HI: Self;
    /// The unit roundoff u (f32: 2⁻²⁴, f64: 2⁻⁵³).
    const UNIT_ROUNDOFF: f64;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;

    /// √(a² + b²) without undue overflow or underflow: with h = max(|a|, |b|),
    /// l = min(|a|, |b|), r = l/h, returns h·√(1 + r²) (fused). h = 0 gives 0, an
    /// infinite operand gives +∞, otherwise a NaN operand gives NaN.
    #[inline(always)]
    fn hypot(self, o: Self) -> Self {
        let (a, b) = (self.abs(), o.abs());
        if a == Self::INFINITY || b == Self::INFINITY {
            // ∞ wins over NaN (IEEE 754 hypot).
            return Self::INFINITY;
        }
        if !a.is_finite() || !b.is_finite() {
            return a.add(b); // NaN
        }
        let (h, l) = if a >= b { (a, b) } else { (b, a) };
        if h == Self::ZERO {
            return Self::ZERO;
        }
        let r = l.div(h);
        h.mul(r.mul_add(r, Self::ONE).sqrt())
    }
}

macro_rules! impl_float {
    ($t:ident, $bits:ty) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const HALF: Self = 0.5;
            const MIN_POSITIVE: Self = $t::MIN_POSITIVE;
            const INFINITY: Self = $t::INFINITY;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                $t::max(self, o)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                core::$t::math::sqrt(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                core::$t::math::mul_add(self, a, b)
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                $t::copysign(self, sign)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            #[inline(always)]
            unsafe fn shfl_down(self, delta: u32) -> Self {
                impl_float!(@shfl $t, self, delta)
            }
            #[inline(always)]
            unsafe fn shfl_xor(self, mask: u32) -> Self {
                impl_float!(@shflx $t, self, mask)
            }
            #[inline(always)]
            unsafe fn shfl_idx(self, lane: u32) -> Self {
                impl_float!(@shfli $t, self, lane)
            }
            #[inline(always)]
            unsafe fn ld_cg(p: *const Self) -> Self {
                impl_float!(@ldcg $t, p)
            }
            #[inline(always)]
            fn rsqrt_approx(self) -> Self {
                impl_float!(@rsqrt $t, self)
            }
            #[inline(always)]
            fn rcp_approx(self) -> Self {
                impl_float!(@rcp $t, self)
            }
            const RSQRT_NEWTON: usize = impl_float!(@newton $t);
            const ROT_LO: Self = impl_float!(@rotlo $t);
            const ROT_HI: Self = impl_float!(@rothi $t);
            const UNIT_ROUNDOFF: f64 = ($t::EPSILON as f64) * 0.5;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
    (@newton f32) => { 1 };
    (@newton f64) => { 2 };
    (@rotlo f32) => { f32::from_bits((127 - 60) << 23) }; // 2^-60
    (@rothi f32) => { f32::from_bits((127 + 60) << 23) }; // 2^60
    (@rotlo f64) => { f64::from_bits((1023 - 480) << 52) }; // 2^-480
    (@rothi f64) => { f64::from_bits((1023 + 480) << 52) }; // 2^480
    (@rsqrt f32, $v:expr) => {{
        let r: f32;
        // SAFETY: `rsqrt.approx.ftz.f32` reads one register and writes one; no memory,
        // no side effects (PTX ISA, rsqrt).
        unsafe {
            asm!(
                "rsqrt.approx.ftz.f32 {r}, {v};",
                r = out(reg32) r,
                v = in(reg32) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rsqrt f64, $v:expr) => {{
        let r: f64;
        // SAFETY: `rsqrt.approx.ftz.f64` reads one register and writes one; no memory,
        // no side effects (PTX ISA, rsqrt).
        unsafe {
            asm!(
                "rsqrt.approx.ftz.f64 {r}, {v};",
                r = out(reg64) r,
                v = in(reg64) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rcp f32, $v:expr) => {{
        let r: f32;
        // SAFETY: `rcp.approx.ftz.f32` reads one register and writes one; no memory, no
        // side effects (PTX ISA, rcp).
        unsafe {
            asm!(
                "rcp.approx.ftz.f32 {r}, {v};",
                r = out(reg32) r,
                v = in(reg32) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rcp f64, $v:expr) => {{
        let r: f64;
        // SAFETY: `rcp.approx.ftz.f64` reads one register and writes one; no memory, no
        // side effects (PTX ISA, rcp).
        unsafe {
            asm!(
                "rcp.approx.ftz.f64 {r}, {v};",
                r = out(reg64) r,
                v = in(reg64) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@shflx f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_xor` (full, convergent warp).
        f32::from_bits(unsafe { shfl_xor_b32($v.to_bits(), $d) })
    }};
    (@shflx f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_xor` (full, convergent warp).
        let (lo, hi) = unsafe {
            (
                shfl_xor_b32(bits as u32, $d),
                shfl_xor_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
    (@shfli f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_idx` (full, convergent warp).
        f32::from_bits(unsafe { shfl_idx_b32($v.to_bits(), $d) })
    }};
    (@shfli f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_idx` (full, convergent warp).
        let (lo, hi) = unsafe {
            (
                shfl_idx_b32(bits as u32, $d),
                shfl_idx_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
    (@ldcg f32, $p:expr) => {{
        let r: u32;
        // SAFETY: forwarded from the caller of `ld_cg` (aligned global pointer, no
        // concurrent writer); a pure read.
        unsafe {
            asm!(
                "ld.global.cg.b32 {r}, [{p}];",
                r = out(reg32) r,
                p = in(reg64) $p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        f32::from_bits(r)
    }};
    (@ldcg f64, $p:expr) => {{
        let r: u64;
        // SAFETY: as for f32.
        unsafe {
            asm!(
                "ld.global.cg.b64 {r}, [{p}];",
                r = out(reg64) r,
                p = in(reg64) $p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        f64::from_bits(r)
    }};
    (@shfl f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_down` (full, convergent warp).
        f32::from_bits(unsafe { shfl_down_b32($v.to_bits(), $d) })
    }};
    (@shfl f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_down` (full, convergent warp); the
        // two halves of the f64 travel as two 32-bit shuffles.
        let (lo, hi) = unsafe {
            (
                shfl_down_b32(bits as u32, $d),
                shfl_down_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
}

impl_float!(f32, u32);
impl_float!(f64, u64);
