//! Lists whose addresses do not depend on the data, loaded a batch ahead: the rank-one
//! sweep (`two_phase_apply_sweep`) and one Householder reflector
//! (`two_phase_house_apply`).

use super::{NONE, band_bottom, rot_pair, this_target};
use crate::device::{self, Float};

/// `two_phase_house_apply`: applies H = I − τ·v·vᵀ, v = [1; vt] (length `len`), to up to
/// two targets (blockIdx.y = g), vector t < n_g being x_g[t·rs_g + k·cs_g], k < len:
/// z = Σ v_k x_k, x_k −= τ·z·v_k (the rank-one update's Householder variant,
/// docs/algorithms.md#rank-one-update: Q(:, n:m)·H and H·d(n:m)).
/// Grid (⌈max n_g/128⌉, 2), block 128.
///
/// # Safety
/// Launch shape as documented; `vt` readable for len − 1, `tau` for 1; vectors
/// read-writable for len elements, non-overlapping, and not overlapping vt or tau.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn house_apply<T: Float>(
    vt: *const T,
    len: usize,
    tau: *const T,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
) {
    let (x, rs, cs, n) = if device::block_y() == 0 {
        (x0, rs0, cs0, n0)
    } else {
        (x1, rs1, cs1, n1)
    };
    let t = device::global_x();
    if t >= n || len == 0 {
        return;
    }
    let base = t * rs;
    // SAFETY: elements base + k·cs, k < len, belong to vector t (caller's contract);
    // vt[0..len−1] and tau[0] readable. Both passes keep the arithmetic and its order:
    // z accumulates k = 1, 2, … with one fma each.
    unsafe {
        let mut z = device::ld(x, base);
        stream_ahead(x, base, cs, vt, len, |_, xk, vk| z = xk.mul_add(vk, z));
        let tz = device::ld(tau, 0).mul(z);
        device::st(x, base, tz.neg().add(device::ld(x, base)));
        stream_ahead(x, base, cs, vt, len, |k, xk, vk| {
            device::st(x, base + k * cs, tz.neg().mul_add(vk, xk))
        });
    }
}

/// Calls `f(k, x_k, v_k)` for k = 1..len in order, x_k = x[base + k·cs] and
/// v_k = vt[k − 1], with the loads of each batch of eight issued before the previous
/// batch is passed to `f` (the addresses do not depend on the data, so the loads run a
/// batch ahead of their use). `f` may store to x_k: every load of x_k comes before the
/// call that receives it, and no later load reads it again.
///
/// # Safety
/// x[base + k·cs] and vt[k − 1] are readable for 1 ≤ k < len and written by nobody but
/// `f` meanwhile.
#[inline(always)]
unsafe fn stream_ahead<T: Float>(
    x: *mut T,
    base: usize,
    cs: usize,
    vt: *const T,
    len: usize,
    mut f: impl FnMut(usize, T, T),
) {
    // Loads entries k0 .. k0 + 8 (those below len) into (nx, nv).
    let load = |k0: usize, nx: &mut [T; 8], nv: &mut [T; 8]| {
        rep8!(u {
            let k = k0 + u;
            if k < len {
                // SAFETY: 1 ≤ k < len (caller's contract).
                unsafe {
                    nx[u] = device::ld(x, base + k * cs);
                    nv[u] = device::ld(vt, k - 1);
                }
            }
        });
    };
    let (mut nx, mut nv) = ([T::ZERO; 8], [T::ZERO; 8]);
    load(1, &mut nx, &mut nv);
    let mut k0 = 1;
    while k0 < len {
        let (bx, bv) = (nx, nv);
        load(k0 + 8, &mut nx, &mut nv);
        rep8!(u {
            let k = k0 + u;
            if k < len {
                f(k, bx[u], bv[u]);
            }
        });
        k0 += 8;
    }
}

/// One vector of [`apply_sweep`]: the descending sweep (planes down−1 … 0, list entries
/// 0..down, entry i on plane down−1−i) then the ascending one (planes 0 … up−1, entries
/// down..down+up), exactly as [`apply_one`](super::apply::apply_one) streams such a list (same `rot_pair` on the
/// same pairs in the same order, so bit-identical), but with the next eight elements and
/// rotations loaded a batch ahead: in a sweep the addresses do not depend on the data.
/// `bottom` ≠ NONE (banded, `up` = 0): planes above `bottom` are skipped (their pairs are
/// exact zeros).
///
/// # Safety
/// Elements 0..=max(down, up) (0..=min(down−1, bottom)+1 when banded) of the vector at
/// `base` (stride `cs`) are this thread's; `rot` holds 2·(down + up) entries.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sweep_one<T: Float>(
    rot: *const T,
    down: usize,
    up: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    bottom: usize,
) {
    let at = |a: usize| base + a * cs;
    // SAFETY (whole body): every index is an element of this vector (caller's contract)
    // or a list entry < down + up.
    unsafe {
        let mut held;
        if down > 0 {
            let first = if bottom == NONE {
                down - 1
            } else {
                (down - 1).min(bottom)
            };
            held = device::ld(x, at(first + 1));
            // entries of planes first − 8b − u: element, c and s (cur batch, next batch)
            let (mut nx, mut nc, mut ns) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
            let mut next = first as isize;
            rep8!(u {
                let a = next - u as isize;
                if a >= 0 {
                    let i = down - 1 - a as usize;
                    nx[u] = device::ld(x, at(a as usize));
                    nc[u] = device::ld(rot, 2 * i);
                    ns[u] = device::ld(rot, 2 * i + 1);
                }
            });
            while next >= 0 {
                let (bx, bc, bs) = (nx, nc, ns);
                rep8!(u {
                    let a = next - 8 - u as isize;
                    if a >= 0 {
                        let i = down - 1 - a as usize;
                        nx[u] = device::ld(x, at(a as usize));
                        nc[u] = device::ld(rot, 2 * i);
                        ns[u] = device::ld(rot, 2 * i + 1);
                    }
                });
                rep8!(u {
                    let a = next - u as isize;
                    if a >= 0 {
                        let (xn, yn) = rot_pair(bc[u], bs[u], bx[u], held);
                        device::st(x, at(a as usize + 1), yn);
                        held = xn;
                    }
                });
                next -= 8;
            }
        } else {
            held = device::ld(x, at(0));
        }
        if up == 0 {
            device::st(x, at(0), held);
            return;
        }
        // ascending: planes a = 8b + u, entries down + a
        let (mut nx, mut nc, mut ns) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
        rep8!(u {
            if u < up {
                nx[u] = device::ld(x, at(u + 1));
                nc[u] = device::ld(rot, 2 * (down + u));
                ns[u] = device::ld(rot, 2 * (down + u) + 1);
            }
        });
        let mut a0 = 0usize;
        while a0 < up {
            let (bx, bc, bs) = (nx, nc, ns);
            rep8!(u {
                let a = a0 + 8 + u;
                if a < up {
                    nx[u] = device::ld(x, at(a + 1));
                    nc[u] = device::ld(rot, 2 * (down + a));
                    ns[u] = device::ld(rot, 2 * (down + a) + 1);
                }
            });
            rep8!(u {
                let a = a0 + u;
                if a < up {
                    let (xn, yn) = rot_pair(bc[u], bs[u], held, bx[u]);
                    device::st(x, at(a), xn);
                    held = yn;
                }
            });
            a0 += 8;
        }
        device::st(x, at(up), held);
    }
}

/// `two_phase_apply_sweep`: applies a rank-one list — `down` rotations on
/// planes down−1, …, 0 (stage A of docs/algorithms.md#rank-one-update) followed by `up` on planes 0, …, up−1
/// (stage B) — to up to three targets (blockIdx.y = g; vector t < n_g is
/// x_g[t·rs_g + k·cs_g], as [`apply`](super::apply::apply)), bit-identical to [`apply`](super::apply::apply) on the same list, with
/// elements and rotations loaded eight entries ahead ([`sweep_one`]). b_g ≠ usize::MAX
/// (banded: entries after b_g + t are exact zeros) needs `up` = 0. Grid
/// (⌈max n_g/128⌉, 3), block 128 (any block size).
///
/// # Safety
/// As [`apply`](super::apply::apply) for the list `rot` of down + up entries with those planes; banded
/// targets only with up = 0.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_sweep<T: Float>(
    rot: *const T,
    down: usize,
    up: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = this_target([
        (x0, rs0, cs0, n0, b0),
        (x1, rs1, cs1, n1, b1),
        (x2, rs2, cs2, n2, b2),
    ]);
    let t = device::global_x();
    if t >= n || down + up == 0 {
        return;
    }
    let bottom = band_bottom(b, t);
    // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
    unsafe { sweep_one(rot, down, up, x, t * rs, cs, bottom) };
}
