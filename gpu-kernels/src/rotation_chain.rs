//! A sequence of unitary 2×2 rotations applied to the columns of a column-major Q
//! (Q ← Q·Gᴴ per rotation), in real or complex arithmetic, by one thread per row of Q
//! (docs/algorithms.md#rotation-chains-on-the-gpu). The host encodes the sequence in
//! segments (host/src/base/rotation_chain.rs): within a segment each rotation shares one
//! column with the one before it (kept in a register) and touches one column no earlier
//! rotation of the segment touched (loaded, [`AHEAD`] rotations at a time, since nothing
//! of the segment wrote it), so each column is read once and written once per segment.
//! Grid ⌈rows/block⌉, any block size.

use crate::device::{self, Float};

/// Rotations whose new columns one thread loads before applying them.
pub const AHEAD: usize = 16;
/// The bits of an op word that hold the new column.
const COL_MASK: u32 = (1 << 30) - 1;
/// Op flag: the carried column is the rotation's first.
const CARRY_TOP: u32 = 1 << 30;
/// Op flag: the thread keeps the first column after the rotation.
const KEEP_TOP: u32 = 1 << 31;

/// A complex number stored real part first (as cuBLAS's `cuDoubleComplex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Complex<F> {
    /// Real part.
    pub re: F,
    /// Imaginary part.
    pub im: F,
}

/// An element a rotation acts on: f32, f64 or their complex pairs.
pub trait RotElem: Copy {
    /// The real type of the cosine.
    type Real: Float;
    /// (a, b) ↦ (c·a + s̄·b, c·b − s·a).
    fn rotate(a: Self, b: Self, c: Self::Real, s: Self) -> (Self, Self);
}

impl<F: Float> RotElem for F {
    type Real = F;
    #[inline(always)]
    fn rotate(a: F, b: F, c: F, s: F) -> (F, F) {
        (c.mul_add(a, s.mul(b)), c.mul_add(b, s.mul(a).neg()))
    }
}

impl<F: Float> RotElem for Complex<F> {
    type Real = F;
    #[inline(always)]
    fn rotate(a: Self, b: Self, c: F, s: Self) -> (Self, Self) {
        // s̄·b = (s.re·b.re + s.im·b.im) + i(s.re·b.im − s.im·b.re)
        let sb_re = s.re.mul_add(b.re, s.im.mul(b.im));
        let sb_im = s.re.mul_add(b.im, s.im.mul(b.re).neg());
        // s·a = (s.re·a.re − s.im·a.im) + i(s.re·a.im + s.im·a.re)
        let sa_re = s.re.mul_add(a.re, s.im.mul(a.im).neg());
        let sa_im = s.re.mul_add(a.im, s.im.mul(a.re));
        (
            Complex {
                re: c.mul_add(a.re, sb_re),
                im: c.mul_add(a.im, sb_im),
            },
            Complex {
                re: c.mul_add(b.re, sa_re.neg()),
                im: c.mul_add(b.im, sa_im.neg()),
            },
        )
    }
}

/// One thread's carried column: its index and this row's value in it.
struct Carry<T> {
    col: usize,
    val: T,
}

/// Applies rotation `op` (cosine `c`, sine `s`) to the carried value and `y` (this row's
/// entry of the op's new column), writes the column the next rotation does not share.
///
/// # Safety
/// `row` + col·`ldq` is inside Q for every column the op names.
#[inline(always)]
unsafe fn step<T: RotElem>(
    row: *mut T,
    ldq: usize,
    carry: &mut Carry<T>,
    op: u32,
    y: T,
    c: T::Real,
    s: T,
) {
    let new_col = (op & COL_MASK) as usize;
    let (top, bot, a, b) = if op & CARRY_TOP != 0 {
        (carry.col, new_col, carry.val, y)
    } else {
        (new_col, carry.col, y, carry.val)
    };
    let (a, b) = T::rotate(a, b, c, s);
    // SAFETY: both columns are Q's (the caller's contract); one thread per row.
    unsafe {
        if op & KEEP_TOP != 0 {
            device::st(row, bot * ldq, b);
            *carry = Carry { col: top, val: a };
        } else {
            device::st(row, top * ldq, a);
            *carry = Carry { col: bot, val: b };
        }
    }
}

/// `rotation_chain_apply`: the encoded rotations `ops`/`c`/`s` in segments `segs`
/// ([start₀, seed₀, …, end], `nseg` segments) applied to rows `0..rows` of the
/// column-major `q` (leading dimension `ldq` elements).
///
/// # Safety
/// Launch shape as in the module doc; `ops`, `c`, `s` readable for `segs[2·nseg]`
/// entries and `segs` for 2·nseg + 1; every column an op or seed names < Q's columns, Q
/// read-writable for `rows` rows of each; the encoding as host/src/base/rotation_chain.rs
/// makes it (within a segment no new column was touched before).
#[inline(always)]
pub unsafe fn apply<T: RotElem>(
    q: *mut T,
    ldq: usize,
    rows: usize,
    ops: *const u32,
    c: *const T::Real,
    s: *const T,
    segs: *const u32,
    nseg: usize,
) {
    let i = device::global_x();
    if i >= rows {
        return;
    }
    // SAFETY: i < rows; every index below is an op's or seed's column (the contract).
    unsafe {
        let row = q.add(i);
        for g in 0..nseg {
            let l0 = device::ld(segs, 2 * g) as usize;
            let seed = device::ld(segs, 2 * g + 1) as usize;
            let l1 = device::ld(segs, 2 * g + 2) as usize;
            let mut carry = Carry {
                col: seed,
                val: device::ld(row, seed * ldq),
            };
            let mut l = l0;
            while l + AHEAD <= l1 {
                // Written out so every array index is a constant (registers, no stack).
                macro_rules! group {
                    ($($k:literal)*) => {
                        let op: [u32; AHEAD] = [$(device::ld(ops, l + $k)),*];
                        let y: [T; AHEAD] =
                            [$(device::ld(row, (op[$k] & COL_MASK) as usize * ldq)),*];
                        // the group's cosines and sines before its first store, so no
                        // load waits inside the chain of rotations
                        let ck: [T::Real; AHEAD] = [$(device::ld(c, l + $k)),*];
                        let sk: [T; AHEAD] = [$(device::ld(s, l + $k)),*];
                        $(
                            step(row, ldq, &mut carry, op[$k], y[$k], ck[$k], sk[$k]);
                        )*
                    };
                }
                group!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
                l += AHEAD;
            }
            while l < l1 {
                let op = device::ld(ops, l);
                let y = device::ld(row, (op & COL_MASK) as usize * ldq);
                step(row, ldq, &mut carry, op, y, device::ld(c, l), device::ld(s, l));
                l += 1;
            }
            device::st(row, carry.col * ldq, carry.val);
        }
    }
}
