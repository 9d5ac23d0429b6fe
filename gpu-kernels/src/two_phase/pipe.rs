//! The pipelined generate kernels: one block barrier a wavefront step (strip, block and
//! the rank-one update's stage B), with the chain's running values in registers.

use super::{givens, record, rot_pair};
use crate::device::{self, Float};

/// Columns per thread of [`gen_rank_one_b_pipe`] (its registers: 5 per column).
pub const R1_PIPE_CPT: usize = 12;

/// Row slots per column of [`gen_rank_one_b_pipe`]: row r of a column lives in slot
/// r mod 4 and is loaded four steps before the step that applies it.
const R1_RING: usize = 4;

/// Repeats `$body` with `$k` bound to 0..CPT (≤ R1_PIPE_CPT; `CPT` is the const generic
/// of the function it is used in, so the bodies for k ≥ CPT are compiled away).
macro_rules! rep_cpt {
    ($k:ident $body:block) => {
        unroll!($k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] {
            if $k < CPT {
                $body
            }
        })
    };
}

/// Columns per thread of the small stage B variant (`two_phase_gen_rank_one_b_pipe2`):
/// the twelve-column kernel's unrolled code (255 registers) stalled on instruction fetch
/// at n = 500 (Nsight Compute on the H100); two columns a thread keep it short.
pub const R1_PIPE2_CPT: usize = 2;

/// `two_phase_gen_rank_one_b_pipe`: R(0, :) += w(0)·vᵀ, then stage B of
/// docs/algorithms.md#rank-one-update on the upper Hessenberg R (m×n, ld ldr), with the same rotations, records and
/// results as [`gen_rank_one_b`](super::generate::gen_rank_one_b) bit for bit, but pipelined with one barrier a step and
/// the chain in registers. Thread `tid` owns columns j = tid + k·nt (k < CPT ≤ R1_PIPE_CPT) and
/// keeps each column's running element (the row the next rotation's upper half lands
/// on) in a register. Step s = 0..=nb (nb = min(n, m−1)): every column j ≥ s applies
/// rotation s−1 (read from shared memory) to (running element, R(s, j)), stores the
/// upper result to R(s−1, j) and keeps the lower; the owner of column s (column s is
/// its first live one) then makes rotation s from (running, R(s+1, s)) with `givens`,
/// writes ρ and the exact zero, records it at k_off + s (plane s) and puts (c, s) into
/// shared-memory buffer s & 1; one `__syncthreads`. Row r of each column is loaded into
/// register slot r mod 4 right after step r − 4 frees the slot (rows do not depend on
/// the chain: row r of column j is first written at step r − 1 or later). Columns
/// j ≥ nb end with their running element stored to R(nb, j). Grid 1, block `nt` with
/// n ≤ nt·CPT, dynamic shared memory 4·size_of::<T>().
///
/// # Safety
/// As [`gen_rank_one_b`](super::generate::gen_rank_one_b), plus CPT ≤ [`R1_PIPE_CPT`], n ≤ block size · CPT and the dynamic shared
/// memory above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_rank_one_b_pipe<T: Float, const CPT: usize>(
    r: *mut T,
    ldr: usize,
    m: usize,
    n: usize,
    w: *const T,
    v: *const T,
    rot: *mut T,
    plane: *mut u32,
    k_off: usize,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let nb = n.min(m.saturating_sub(1));
    // 32-bit element offsets (the host launches this kernel only for ldr·n < 2³²)
    let at = |row: usize, j: usize| (row as u32 + j as u32 * ldr as u32) as usize;
    let rs = device::shared::<T>();
    // SAFETY: w[0] readable.
    let w0 = unsafe { device::ld(w, 0) };
    let mut cur = [T::ZERO; R1_PIPE_CPT];
    // q[x][k] = R(row, j_k) for the next row ≡ x (mod 4) that column k needs
    let mut q = [[T::ZERO; R1_PIPE_CPT]; R1_RING];
    rep_cpt!(k {
        let j = tid + k * nt;
        if j < n {
            // SAFETY: row 0 of column j < n and v[j]; column j is this thread's alone.
            unsafe { cur[k] = w0.mul_add(device::ld(v, j), device::ld(r, at(0, j))) };
            unroll!(e in [1, 2, 3] {
                if e <= nb && j + 1 >= e {
                    // SAFETY: row e ≤ nb < m of column j < n.
                    unsafe { q[e][k] = device::ld(r, at(e, j)) };
                }
            });
        }
    });
    let mut s0 = 0usize;
    while s0 <= nb {
        unroll!(e in [0, 1, 2, 3] {
            let s = s0 + e;
            if s <= nb {
                let (c, sn) = if s >= 1 {
                    let b = 2 * ((s - 1) & 1);
                    // SAFETY: buffer (s−1) & 1 was written at step s−1, before the
                    // barrier; it is rewritten at step s+1, after the next barrier.
                    unsafe { (device::ld(rs, b), device::ld(rs, b + 1)) }
                } else {
                    (T::ZERO, T::ZERO)
                };
                let (mut own, mut fo, mut go) = (false, T::ZERO, T::ZERO);
                rep_cpt!(k {
                    let j = tid + k * nt;
                    if j < n && j >= s {
                        if s >= 1 {
                            let (a, b) = rot_pair(c, sn, cur[k], q[e][k]);
                            // SAFETY: row s−1 < m of column j, this thread's.
                            unsafe { device::st(r, at(s - 1, j), a) };
                            cur[k] = b;
                        }
                        if j == s && s < nb {
                            // the owner of column s makes rotation s after the loop
                            own = true;
                            fo = cur[k];
                            go = q[(e + 1) % R1_RING][k];
                        }
                    }
                    // slot e is free: row s + 4 (needed at steps s + 3 and s + 4)
                    let row = s + R1_RING;
                    if j < n && row <= nb && j + 1 >= row {
                        // SAFETY: row ≤ nb < m of column j < n; nobody writes it before
                        // step row − 1 > s.
                        unsafe { q[e][k] = device::ld(r, at(row, j)) };
                    }
                });
                if own {
                    // One `givens` a step, outside the column loop (inlined once rather
                    // than CPT times: the twelve-column kernel's code and spills grew
                    // with each copy).
                    let (gc, gs, rho) = givens(fo, go);
                    // SAFETY: (s, s), (s+1, s) inside R (s+1 ≤ nb < m, s < n), column s
                    // is this thread's; list index k_off + s is in the list; buffer
                    // s & 1 is read by no one during this step.
                    unsafe {
                        device::st(r, at(s, s), rho);
                        device::st(r, at(s + 1, s), T::ZERO);
                        record(rot, plane, k_off + s, gc, gs, s);
                        device::st(rs, 2 * (s & 1), gc);
                        device::st(rs, 2 * (s & 1) + 1, gs);
                    }
                }
                // SAFETY: s and nb are uniform over the block.
                unsafe { device::sync_threads() };
            }
        });
        s0 += R1_RING;
    }
    rep_cpt!(k {
        let j = tid + k * nt;
        if j < n && j >= nb {
            // SAFETY: row nb < m of column j < n, this thread's.
            unsafe { device::st(r, at(nb, j), cur[k]) };
        }
    });
}

/// The strip (docs/algorithms.md#column-insertion) or block
/// (docs/algorithms.md#row-deletion) wavefront of [`gen_strip`](super::generate::gen_strip) /
/// [`gen_block`](super::generate::gen_block) as chains: chain c (strip: driver column j; block: row i of Z) makes
/// its rotations on the element planes (a, a+1) for a = hi(c) down to c, rotation
/// (c, a) at step t = A0 + 2c − a (strip: A0 = h − 1, hi(c) = A0 + c; block: A0 = m − 2,
/// hi(c) = A0), recorded at kb(c) − a with plane a (strip: kb(c) = c·h + h + c − 1;
/// block: kb(c) = c(m−1) − c(c−1)/2 + m − 2), and applied to the same plane of every
/// later chain. Element e of chain c is `x[c·cst + e·est]` (shared or global memory).
///
/// One barrier per step. The last change to the pair (a, a+1) of chain c
/// before its rotation at step t is chain c−1's rotation (c−1, a−1) of step t−1 (the
/// lower element; the upper one is ρ of chain c's own rotation at t−1, or original):
/// so at step t the thread that applies rotation (c−1, a−1) to chain c (the *lead*
/// item) goes on to make rotation (c, a) from the values in its registers; chain 0's
/// rotations are made by the last thread. The other items of step t−1's rotations
/// (chains c' + 2 .. nch) touch planes at least two below any pair a lead or maker uses,
/// so they run in the same interval; rotations go through shared memory `rbuf`
/// (buffer t & 1, slot per chain). Every element sees the same rotations in the same
/// order as in [`gen_strip`](super::generate::gen_strip) / [`gen_block`](super::generate::gen_block), so the list and the driver are bit-identical.
///
/// # Safety
/// Every thread of the block calls it with the same arguments; the elements of chains
/// 0..nch at planes 0..=max hi + 1 are read-writable through `x` by this block alone;
/// `rbuf` is 4·nch elements of shared memory; `rot`/`plane` hold the whole list;
/// nch < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn wave_pipe<T: Float>(
    strip: bool,
    len: usize,
    nch: usize,
    x: *mut T,
    cst: usize,
    est: usize,
    rbuf: *mut T,
    rot: *mut T,
    plane: *mut u32,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let a0 = if strip { len - 1 } else { len - 2 };
    let hi = |c: usize| if strip { a0 + c } else { a0 };
    let kb = |c: usize| {
        if strip {
            c * len + len + c - 1
        } else {
            c * (len - 1) - c * c.saturating_sub(1) / 2 + len - 2
        }
    };
    let range = |t: usize| {
        let lo = t.saturating_sub(a0);
        let top = if strip { t } else { t / 2 };
        (lo, top.min(nch - 1))
    };
    let steps = if strip { len + nch - 1 } else { len + nch - 2 };
    let el = |c: usize, e: usize| c * cst + e * est;
    for t in 0..=steps {
        let cur = t & 1;
        let prev = cur ^ 1;
        if t >= 1 {
            // lead items: rotation (c', a') of step t−1 on chain c'+1, then its rotation
            let (plo, phi) = range(t - 1);
            let mut cp = plo + tid;
            // (an empty range has plo > phi: no iteration)
            while cp <= phi {
                let cn = cp + 1;
                if cn < nch {
                    let ap = a0 + 2 * cp - (t - 1);
                    let make = ap < hi(cn);
                    // SAFETY: slot cp of buffer `prev` was written at step t−1 before the
                    // barrier; elements ap, ap+1 (and ap+2 when chain cn makes a rotation:
                    // ap+2 ≤ hi(cn)+1) of chain cn are this item's alone in this step
                    // (see the function's doc); list index kb(cn) − (ap+1) is chain cn's
                    // rotation on plane ap+1; slot cn of buffer `cur` has one writer.
                    unsafe {
                        let c = device::ld(rbuf, 2 * (prev * nch + cp));
                        let s = device::ld(rbuf, 2 * (prev * nch + cp) + 1);
                        let (eu, elo) = (el(cn, ap), el(cn, ap + 1));
                        let (u, l) = (device::ld(x, eu), device::ld(x, elo));
                        let g = if make {
                            device::ld(x, el(cn, ap + 2))
                        } else {
                            T::ZERO
                        };
                        let (xa, xb) = rot_pair(c, s, u, l);
                        device::st(x, eu, xa);
                        if make {
                            let (gc, gs, rho) = givens(xb, g);
                            device::st(x, elo, rho);
                            device::st(x, el(cn, ap + 2), T::ZERO);
                            record(rot, plane, kb(cn) - (ap + 1), gc, gs, ap + 1);
                            device::st(rbuf, 2 * (cur * nch + cn), gc);
                            device::st(rbuf, 2 * (cur * nch + cn) + 1, gs);
                        } else {
                            device::st(x, elo, xb);
                        }
                    }
                }
                cp += nt;
            }
        }
        if t < steps && t <= a0 && tid == nt - 1 {
            // chain 0's rotation at plane a = a0 − t
            let a = a0 - t;
            // SAFETY: elements a, a+1 ≤ hi(0)+1 of chain 0 are touched by no other item
            // of this step; list index kb(0) − a; slot 0 of buffer `cur` has one writer.
            unsafe {
                let (f, g) = (device::ld(x, el(0, a)), device::ld(x, el(0, a + 1)));
                let (gc, gs, rho) = givens(f, g);
                device::st(x, el(0, a), rho);
                device::st(x, el(0, a + 1), T::ZERO);
                record(rot, plane, kb(0) - a, gc, gs, a);
                device::st(rbuf, 2 * (cur * nch), gc);
                device::st(rbuf, 2 * (cur * nch) + 1, gs);
            }
        }
        if t >= 1 {
            // the other items: rotation (c', a') of step t−1 on chains c'+2 .. nch
            let (plo, phi) = range(t - 1);
            if plo <= phi && plo + 2 < nch {
                let na = (phi + 1 - plo) as u32;
                let depth = (nch - plo - 2) as u32;
                let total = na * depth;
                let mut idx = tid as u32;
                while idx < total {
                    let k = idx / depth;
                    let d = idx - k * depth;
                    let cp = plo + k as usize;
                    let cq = cp + 2 + d as usize;
                    if cq < nch {
                        let ap = a0 + 2 * cp - (t - 1);
                        // SAFETY: as for the lead items; planes (ap, ap+1) of chain cq are
                        // touched by this item alone in this step.
                        unsafe {
                            let c = device::ld(rbuf, 2 * (prev * nch + cp));
                            let s = device::ld(rbuf, 2 * (prev * nch + cp) + 1);
                            let (eu, elo) = (el(cq, ap), el(cq, ap + 1));
                            let (xa, xb) = rot_pair(c, s, device::ld(x, eu), device::ld(x, elo));
                            device::st(x, eu, xa);
                            device::st(x, elo, xb);
                        }
                    }
                    idx += nt as u32;
                }
            }
        }
        // SAFETY: t and the loop bounds are uniform over the block.
        unsafe { device::sync_threads() };
    }
}

/// `two_phase_gen_strip_pipe`: the strip wavefront of [`gen_strip`](super::generate::gen_strip) (same
/// arguments, rotations, list and driver results, bit for bit) with one barrier a step
/// ([`wave_pipe`]). With `in_smem` ≠ 0 the driver block is first copied into shared
/// memory (element (r, j) at j + r·p), run there and copied back; otherwise it runs in
/// place in global memory. Grid 1, dynamic shared memory (4·p + in_smem·(h+p)·p)·
/// size_of::<T>() bytes.
///
/// # Safety
/// As [`gen_strip`](super::generate::gen_strip), plus the dynamic shared memory above; p < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_strip_pipe<T: Float>(
    x: *mut T,
    ld: usize,
    h: usize,
    p: usize,
    rot: *mut T,
    plane: *mut u32,
    in_smem: usize,
) {
    if h == 0 || p == 0 {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let sm = device::shared::<T>();
    let rows = h + p;
    if in_smem != 0 {
        // SAFETY: the shared memory holds 4p + rows·p elements (caller's contract);
        // (r, j) inside the driver; one writer per element.
        let d = unsafe { sm.add(4 * p) };
        let mut idx = tid;
        while idx < rows * p {
            let (r, j) = (idx % rows, idx / rows);
            // SAFETY: as above.
            unsafe { device::st(d, j + r * p, device::ld(x, r + j * ld)) };
            idx += nt;
        }
        // SAFETY: uniform.
        unsafe { device::sync_threads() };
        // SAFETY: the driver lives in shared memory, read-writable by this block alone.
        unsafe { wave_pipe(true, h, p, d, 1, p, sm, rot, plane) };
        let mut idx = tid;
        while idx < rows * p {
            let (r, j) = (idx % rows, idx / rows);
            // SAFETY: as above; the last barrier of wave_pipe ordered every write.
            unsafe { device::st(x, r + j * ld, device::ld(d, j + r * p)) };
            idx += nt;
        }
    } else {
        // SAFETY: the driver in global memory, this block's alone (caller's contract).
        unsafe { wave_pipe(true, h, p, x, ld, 1, sm, rot, plane) };
    }
}

/// `two_phase_gen_block_pipe`: the block wavefront of [`gen_block`](super::generate::gen_block) (same
/// arguments; same rotations, list and final compact Z in `z`, bit for bit) with one
/// barrier a step ([`wave_pipe`]). With `in_smem` ≠ 0, Z is gathered into shared memory
/// (compact, ld p), run there and copied to `z` at the end; otherwise it is gathered
/// into `z` and run there. Grid 1, dynamic shared memory (4·p + in_smem·p·m)·
/// size_of::<T>() bytes.
///
/// # Safety
/// As [`gen_block`](super::generate::gen_block), plus the dynamic shared memory above; p < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_block_pipe<T: Float>(
    qz: *const T,
    ldq: usize,
    p: usize,
    m: usize,
    z: *mut T,
    rot: *mut T,
    plane: *mut u32,
    in_smem: usize,
) {
    if p == 0 || m < 2 || p >= m {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let sm = device::shared::<T>();
    // SAFETY: the shared memory holds 4p + in_smem·p·m elements.
    let d = if in_smem != 0 {
        unsafe { sm.add(4 * p) }
    } else {
        z
    };
    let mut idx = tid;
    while idx < p * m {
        let (i, j) = (idx % p, idx / p);
        // SAFETY: i < p, j < m: inside Z and the driver copy; one writer per idx.
        unsafe { device::st(d, idx, device::ld(qz, i + j * ldq)) };
        idx += nt;
    }
    // SAFETY: uniform.
    unsafe { device::sync_threads() };
    // SAFETY: the compact driver (chain i = row i, stride 1; element j, stride p) is this
    // block's alone. Two call sites, so that the shared-memory one addresses shared
    // memory directly.
    if in_smem != 0 {
        unsafe { wave_pipe(false, m, p, sm.add(4 * p), 1, p, sm, rot, plane) };
    } else {
        unsafe { wave_pipe(false, m, p, z, 1, p, sm, rot, plane) };
    }
    if in_smem != 0 {
        let mut idx = tid;
        while idx < p * m {
            // SAFETY: inside both; the last barrier of wave_pipe ordered every write.
            unsafe { device::st(z, idx, device::ld(d, idx)) };
            idx += nt;
        }
    }
}
