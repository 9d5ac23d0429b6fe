//! What a warp's chain is made of: the reflector formula, paired shared-memory access
//! and the coalesced load and store of a 32-row block through the staging tile.

use super::{BR, LDT, SR};
use crate::device::{self, Float};

/// (a₀ + a₁) + (a₂ + a₃).
#[inline(always)]
pub(super) fn sum4<T: Float>(a: &[T; 4]) -> T {
    a[0].add(a[1]).add(a[2].add(a[3]))
}

/// β, τ and 1/(α − β) of the reflector for α and σ² = ‖x‖² of a column of the scaled
/// chain (entries at most √rows·2 in magnitude, so α² + σ² cannot overflow), as
/// `householder::house` (docs/algorithms.md#householder-vectors): σ² = 0 gives (α, 0, 0). Where α² + σ² ≥ TINY,
/// y ≈ 1/μ = 1/√(α² + σ²) comes from the hardware rsqrt and Newton steps, β =
/// −sign(α)·(α² + σ²)·y, τ = 1 + |α|·y and 1/(α − β) = sign(α)/(|α| + μ)
/// from the hardware reciprocal and Newton steps (each within a few units of the last
/// place): no IEEE square root or division on the chains' critical path. Below TINY,
/// μ = [`Float::hypot`] of α and σ and the two quotients as in `householder::house`.
#[inline(always)]
pub(super) fn house<T: Pair>(alpha: T, ss: T) -> (T, T, T) {
    if ss == T::ZERO {
        return (alpha, T::ZERO, T::ZERO);
    }
    let q = alpha.mul_add(alpha, ss);
    if q >= T::TINY {
        let a = alpha.abs();
        let mut y = q.rsqrt_approx();
        // 1/(|α| + μ) from the unrefined μ ≈ q·y (relative error below 2⁻²⁰), so that
        // the hardware reciprocal runs beside the Newton steps of y; its own Newton
        // steps below use the refined μ.
        let mut z = q.mul_add(y, a).rcp_approx();
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // y ← y + (y/2)(1 − q·y²)
            let e = q.mul(y).neg().mul_add(y, T::ONE);
            y = y.mul(T::HALF).mul_add(e, y);
            k += 1;
        }
        let mu = q.mul(y);
        let d = a.add(mu);
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // z ← z + z(1 − d·z)
            let e = d.neg().mul_add(z, T::ONE);
            z = z.mul_add(e, z);
            k += 1;
        }
        (
            mu.copysign(alpha).neg(),
            a.mul_add(y, T::ONE),
            z.copysign(alpha),
        )
    } else {
        let mu = alpha.hypot(ss.sqrt());
        let beta = mu.copysign(alpha).neg();
        (beta, beta.sub(alpha).div(beta), T::ONE.div(alpha.sub(beta)))
    }
}

/// Two adjacent elements of shared memory, aligned to their size, so that one
/// vector instruction (`ld.shared.v2` / `st.shared.v2`) moves both.
pub trait Pair: Float {
    /// `[Self; 2]` aligned to 2·size_of Self.
    type P: Copy;
    /// Smallest α² + σ² whose square root [`house`] takes directly (far above the
    /// subnormal range: 2^-960 in f64, 2^-100 in f32).
    const TINY: Self;
    /// Columns of V in a warp's ring while a reflector block is applied
    /// ([`apply_back`](super::leaf_apply::apply_back)): a power of two ≥ 4.
    const RING: usize;
    /// Steps ahead of its use that a column of V is requested: RING − 1 (each step
    /// ends with a warp barrier before its slot is refilled) or RING − 2 (the slot a
    /// step refills was last read two steps before: one warp barrier a step). Measured
    /// on the H100: f64 8 / 6 (level-0 apply 533 → 478 µs against 4 / 3), f32 4 / 3
    /// (302 µs against 319 with 8 / 6, whose larger shared memory leaves less L1 for
    /// the f32 kernels' spills).
    const AHEAD: usize;
    /// The pair (a, b).
    fn pair(a: Self, b: Self) -> Self::P;
    /// Its elements.
    fn unpair(p: Self::P) -> (Self, Self);
}

/// Two f32, 8-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct PairF32([f32; 2]);

/// Two f64, 16-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct PairF64([f64; 2]);

impl Pair for f32 {
    type P = PairF32;
    const TINY: Self = f32::from_bits(27 << 23); // 2^-100
    const RING: usize = 4;
    const AHEAD: usize = 3;
    #[inline(always)]
    fn pair(a: Self, b: Self) -> PairF32 {
        PairF32([a, b])
    }
    #[inline(always)]
    fn unpair(p: PairF32) -> (Self, Self) {
        (p.0[0], p.0[1])
    }
}

impl Pair for f64 {
    type P = PairF64;
    const TINY: Self = f64::from_bits(63 << 52); // 2^-960
    const RING: usize = 8;
    const AHEAD: usize = 6;
    #[inline(always)]
    fn pair(a: Self, b: Self) -> PairF64 {
        PairF64([a, b])
    }
    #[inline(always)]
    fn unpair(p: PairF64) -> (Self, Self) {
        (p.0[0], p.0[1])
    }
}

/// `(p[i], p[i + 1])` in one vector load.
///
/// # Safety
/// `p.add(i)` is aligned to 2·size_of T (i even and `p` so aligned), both elements in
/// bounds and not concurrently written.
#[inline(always)]
pub(super) unsafe fn ld2<T: Pair>(p: *const T, i: usize) -> (T, T) {
    // SAFETY: forwarded from the caller (alignment, bounds, no race).
    T::unpair(unsafe { p.add(i).cast::<T::P>().read() })
}

/// `p[i], p[i + 1] = a, b` in one vector store.
///
/// # Safety
/// As [`ld2`], and no other thread accesses the two elements concurrently.
#[inline(always)]
pub(super) unsafe fn st2<T: Pair>(p: *mut T, i: usize, a: T, b: T) {
    // SAFETY: forwarded from the caller (alignment, bounds, exclusive).
    unsafe { p.add(i).cast::<T::P>().write(T::pair(a, b)) }
}

/// Rows r0 .. r0 + 32 of columns 0 .. n of `src` (ld `ld`) as lane k's column k, rows
/// ≥ `nv` and columns ≥ n read as zeros. All 32 loads of a lane are in flight at once
/// and coalesced (8 consecutive rows of 4 columns an instruction); the warp's staging
/// tile `stg` turns them into columns 8 rows at a time.
///
/// # Safety
/// The whole warp calls it together; `src` readable at rows r0 .. r0 + nv, columns
/// 0 .. n; `stg` the warp's own [`SR`]×[`LDT`] tile.
#[inline(always)]
pub(super) unsafe fn load_block<T: Float>(
    src: *const T,
    ld: usize,
    r0: usize,
    nv: usize,
    n: usize,
    stg: *mut T,
    lane: usize,
) -> [T; BR] {
    let (ri, c0) = (lane % SR, lane / SR);
    let mut tmp = [T::ZERO; BR];
    rows32!(|r| {
        let (row, col) = ((r / SR) * SR + ri, c0 + 4 * (r % SR));
        if row < nv && col < n {
            // SAFETY: row < nv, col < n: inside src (caller).
            tmp[r] = unsafe { device::ld(src, r0 + row + col * ld) };
        }
    });
    let mut x = [T::ZERO; BR];
    q4!(|q| {
        t8!(|t| {
            // SAFETY: inside the warp's tile; (ri, c0 + 4t) is this lane's own entry.
            unsafe { device::st(stg, ri * LDT + c0 + 4 * t, tmp[q * SR + t]) };
        });
        // SAFETY: the whole warp is here.
        unsafe { device::sync_warp() };
        t8!(|t| {
            // SAFETY: inside the tile, written before the warp barrier.
            x[q * SR + t] = unsafe { device::ld(stg, t * LDT + lane) };
        });
        // SAFETY: as above (the next round rewrites the tile).
        unsafe { device::sync_warp() };
    });
    x
}

/// Lane k's column k of rows r0 .. r0 + 32 (`x`) into `dst` (ld `ld`): rows < `nv`
/// whose global index is at least `from`, columns < n; coalesced through `stg` as in
/// [`load_block`].
///
/// # Safety
/// The whole warp calls it together; `dst` writable at those rows and columns and
/// accessed by no other thread; `stg` the warp's own tile.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn store_block<T: Float>(
    dst: *mut T,
    ld: usize,
    r0: usize,
    nv: usize,
    n: usize,
    from: usize,
    x: &[T; BR],
    stg: *mut T,
    lane: usize,
) {
    let (ri, c0) = (lane % SR, lane / SR);
    q4!(|q| {
        t8!(|t| {
            // SAFETY: inside the warp's tile; column `lane` is this lane's own.
            unsafe { device::st(stg, t * LDT + lane, x[q * SR + t]) };
        });
        // SAFETY: the whole warp is here.
        unsafe { device::sync_warp() };
        let row = q * SR + ri;
        if row < nv && r0 + row >= from {
            t8!(|t| {
                let col = c0 + 4 * t;
                if col < n {
                    // SAFETY: inside the tile (written before the barrier) and inside
                    // dst (caller); one writer per entry.
                    unsafe {
                        device::st(dst, r0 + row + col * ld, device::ld(stg, ri * LDT + col))
                    };
                }
            });
        }
        // SAFETY: as above (the next round rewrites the tile).
        unsafe { device::sync_warp() };
    });
}

/// max |x_i|.
#[inline(always)]
pub(super) fn col_max<T: Float>(x: &[T; BR]) -> T {
    let mut m4 = [T::ZERO; 4];
    rows32!(|r| {
        m4[r & 3] = m4[r & 3].max(x[r].abs());
    });
    m4[0].max(m4[1]).max(m4[2].max(m4[3]))
}
