//! One step of a small R-only least-squares state by one warp: a row in, in a window the
//! oldest row out, then the solution, all in one launch (docs/algorithms.md#small-states).
//!
//! The state of n ≤ [`MAX_N`] columns — R (upper triangle read), d = Q₁ᵀb and ρ, as the
//! (n+1)×(n+1) matrix [R d; 0 ρ] at pitch [`PITCH`] (odd, so that a warp reading a row or
//! a column of 8-byte words meets no bank conflict) — lives in global memory between
//! launches and in shared memory during one, copied flat both ways. Lane ℓ owns the
//! columns ℓ, ℓ + 32 and ℓ + 64 of [R d] (column n is d): outside the load and store
//! phases a column is written only by its owner, and a lane reads another lane's entries
//! only after a `sync_warp`.
//!
//! * A row enters by the Givens rotations of a row update, their (c, s) found all at once
//!   from p = R⁻ᵀx: with t_j = 1 + Σ_{i<j} p_i² and R's diagonal positive, c_j =
//!   √(t_j/t_{j+1}) and s_j = p_j/√t_{j+1} (docs/algorithms.md#small-states); each lane
//!   then rotates its own columns. Where p or t is not finite or a diagonal entry is not
//!   positive (R singular, as in the first rows of a fold) the rotations are made one
//!   after another instead.
//! * A row leaves by the LINPACK-style downdate of `small_r.rs` (`Window::remove_row`):
//!   z = R⁻ᵀv, α_i² = 1 − Σ_{j<i} z_j² from suffix sums, d by a scan of the affine maps
//!   t ↦ (t − s_i d_i)/c_i, with the same two refusal tests.
//! * The solution is the back substitution, x = NaN where some |R_jj| ≤ tol·‖R‖_F.

// The last unrolled copy of a slot loop assigns values no later copy reads.
#![allow(unused_assignments)]

use crate::device::{self, Float};

/// Largest number of columns.
pub const MAX_N: usize = 64;
/// Shared-memory pitch of [R d; 0 ρ] (odd).
pub const PITCH: usize = MAX_N + 1;
/// Shared-memory elements a launch needs: the matrix and the (c, s) of one sweep.
pub const SHARED_ELEMS: usize = PITCH * PITCH + 2 * PITCH;

/// `flags`: drop the oldest kept row (a window) after adding the new one.
pub const DROP: u32 = 1;
/// `flags`: write the solution (and ρ²) after the step.
pub const SOLVE: u32 = 2;
/// `flags`: read the new row from `src_x`/`src_y` (device memory) instead of `row`.
pub const FROM_DEVICE: u32 = 4;
/// `flags`: no row; only write the state's solution (with [`SOLVE`]'s outputs).
pub const SOLVE_ONLY: u32 = 8;

/// `meta[META_HEAD]`: the ring slot of the oldest kept row.
pub const META_HEAD: usize = 0;
/// `meta[META_REFUSED]`: steps refused so far.
pub const META_REFUSED: usize = 1;
/// `meta[META_FIRST_REFUSED]`: the index of the first refused step (`u32::MAX`: none).
pub const META_FIRST_REFUSED: usize = 2;
/// `meta[META_STEP]`: steps launched so far (accepted or not).
pub const META_STEP: usize = 3;
/// `meta[META_SOLVES_REFUSED]`: solutions left NaN by the rank test.
pub const META_SOLVES_REFUSED: usize = 4;
/// `meta[META_REASON]`: the reason of the last refusal.
pub const META_REASON: usize = 5;
/// Length of `meta`.
pub const META_LEN: usize = 6;

/// A refusal reason: the new row is not finite.
pub const REASON_NON_FINITE: u32 = 1;
/// A refusal reason: the downdate's refusal tests turned the oldest row's removal down.
pub const REASON_DOWNDATE: u32 = 2;

/// The new row and its right-hand side passed by value with the launch: x₀ … x_{n−1}, y.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RowArg<T> {
    /// x then y; entries past n unused.
    pub v: [T; MAX_N + 1],
}

/// Inclusive prefix sum over the lanes (lane 0 first).
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn scan_up<F: Float>(v: F, lane: usize) -> F {
    let mut x = v;
    let mut d = 1;
    while d < 32 {
        // SAFETY: every lane executes the shuffle (convergent warp).
        let y = unsafe { x.shfl_idx(lane.saturating_sub(d) as u32) };
        if lane >= d {
            x = x.add(y);
        }
        d *= 2;
    }
    x
}

/// Inclusive suffix sum over the lanes (lane 31 first).
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn scan_down<F: Float>(v: F, lane: usize) -> F {
    let mut x = v;
    let mut d = 1;
    while d < 32 {
        // SAFETY: every lane executes the shuffle (convergent warp).
        let y = unsafe { x.shfl_idx((lane + d).min(31) as u32) };
        if lane + d < 32 {
            x = x.add(y);
        }
        d *= 2;
    }
    x
}

/// Sum over the warp, in every lane.
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn warp_sum(v: f64) -> f64 {
    let mut x = v;
    let mut m = 16;
    while m > 0 {
        // SAFETY: every lane executes the shuffle (convergent warp).
        x += unsafe { x.shfl_xor(m) };
        m /= 2;
    }
    x
}

/// Inclusive scan of affine maps t ↦ a·t + b over the lanes: lane i gets the composition
/// of the maps of lanes 0 … i (lane 0's applied first).
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn scan_affine<T: Float>(a: T, b: T, lane: usize) -> (T, T) {
    let (mut fa, mut fb) = (a, b);
    let mut d = 1;
    while d < 32 {
        let src = lane.saturating_sub(d) as u32;
        // SAFETY: every lane executes the shuffles (convergent warp).
        let (pa, pb) = unsafe { (fa.shfl_idx(src), fb.shfl_idx(src)) };
        if lane >= d {
            fb = fa.mul_add(pb, fb);
            fa = fa.mul(pa);
        }
        d *= 2;
    }
    (fa, fb)
}

/// Exclusive prefix sums of `v` over the columns c = lane + 32·s in column order.
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn prefix_excl<F: Float, const S: usize>(v: &[F; S], lane: usize) -> [F; S] {
    let mut out = [F::ZERO; S];
    let mut carry = F::ZERO;
    // SAFETY: convergent warp (the caller).
    unsafe {
        unroll!(s in ..S => {
            let inc = scan_up(v[s], lane);
            let prev = inc.shfl_idx((lane.max(1) - 1) as u32);
            out[s] = carry.add(if lane == 0 { F::ZERO } else { prev });
            carry = carry.add(inc.shfl_idx(31));
        });
    }
    out
}

/// Exclusive suffix sums of `v` over the columns c = lane + 32·s (the sum over the
/// columns after c).
///
/// # Safety
/// The full warp calls it convergently.
#[inline(always)]
unsafe fn suffix_excl<const S: usize>(v: &[f64; S], lane: usize) -> [f64; S] {
    let mut out = [0.0; S];
    let mut carry = 0.0;
    // SAFETY: convergent warp (the caller).
    unsafe {
        unroll!(s in rev ..S => {
            let inc = scan_down(v[s], lane);
            let next = inc.shfl_idx((lane + 1).min(31) as u32);
            out[s] = carry + if lane == 31 { 0.0 } else { next };
            carry += inc.shfl_idx(0);
        });
    }
    out
}

/// One warp's view of the state in shared memory; each lane owns the S columns
/// lane + 32·s of [R d] (S = n/32 + 1, so that column n, d, has an owner).
struct Warp<T, const S: usize> {
    lane: usize,
    n: usize,
    /// [R d; 0 ρ] at pitch [`PITCH`].
    a: *mut T,
    /// `a` as a 32-bit shared-window address (32-bit index arithmetic).
    a32: u32,
    /// The (c, s) of the current sweep (c at `cs32`, s [`PITCH`] elements on), a
    /// shared-window address.
    cs32: u32,
}

impl<T: Float, const S: usize> Warp<T, S> {
    /// Column `s` of this lane.
    #[inline(always)]
    fn col(&self, s: usize) -> usize {
        self.lane + 32 * s
    }

    /// Columns of R owned in slot `s` by lanes 0..count (count = 0 past n).
    #[inline(always)]
    fn count(&self, s: usize) -> usize {
        if self.n > 32 * s {
            (self.n - 32 * s).min(32)
        } else {
            0
        }
    }

    /// The byte offset of entry (i, j), in 32 bits.
    #[inline(always)]
    fn offset(i: usize, j: usize) -> u32 {
        ((i as u32) * (PITCH as u32) + j as u32) * (core::mem::size_of::<T>() as u32)
    }

    #[inline(always)]
    unsafe fn at(&self, i: usize, j: usize) -> T {
        // SAFETY: i, j ≤ n ≤ MAX_N inside the PITCH² matrix (callers' indices).
        unsafe { device::ld_shared(self.a32 + Self::offset(i, j)) }
    }

    #[inline(always)]
    unsafe fn set(&self, i: usize, j: usize, v: T) {
        // SAFETY: as `at`.
        unsafe { device::st_shared(self.a32 + Self::offset(i, j), v) }
    }

    /// (c_i, s_i) of the current sweep.
    #[inline(always)]
    unsafe fn rotation(&self, i: usize) -> (T, T) {
        let sz = core::mem::size_of::<T>() as u32;
        let o = (i as u32) * sz;
        // SAFETY: i < n ≤ MAX_N inside the sweep's two arrays.
        unsafe {
            (
                device::ld_shared(self.cs32 + o),
                device::ld_shared(self.cs32 + (PITCH as u32) * sz + o),
            )
        }
    }

    /// Sets (c_i, s_i) of the current sweep.
    #[inline(always)]
    unsafe fn set_rotation(&self, i: usize, c: T, s: T) {
        let sz = core::mem::size_of::<T>() as u32;
        let o = (i as u32) * sz;
        // SAFETY: as `rotation`.
        unsafe {
            device::st_shared(self.cs32 + o, c);
            device::st_shared(self.cs32 + (PITCH as u32) * sz + o, s);
        }
    }

    /// ρ, the residual norm.
    #[inline(always)]
    unsafe fn rho(&self) -> T {
        // SAFETY: entry (n, n) of the matrix.
        unsafe { self.at(self.n, self.n) }
    }

    /// The right-hand side y of a row in slots (held by the owner of column n).
    ///
    /// # Safety
    /// Convergent warp.
    #[inline(always)]
    unsafe fn rhs_of(&self, w: &[T; S]) -> T {
        let n = self.n;
        let mut v = T::ZERO;
        unroll!(s in ..S => {
            if n >> 5 == s {
                v = w[s];
            }
        });
        // SAFETY: convergent warp.
        unsafe { v.shfl_idx((n & 31) as u32) }
    }

    /// The new row as this lane's slots: x_col for the columns of R, y for column n.
    #[inline(always)]
    unsafe fn row_slots(
        &self,
        row: &RowArg<T>,
        flags: u32,
        src_x: *const T,
        inc_x: usize,
        src_y: *const T,
    ) -> [T; S] {
        let mut w = [T::ZERO; S];
        unroll!(s in ..S => {
            let c = self.col(s);
            if c <= self.n {
                w[s] = if flags & FROM_DEVICE != 0 {
                    // SAFETY: src_x readable at c·inc_x for c < n and src_y at 0 (contract).
                    unsafe {
                        if c < self.n { device::ld(src_x, c * inc_x) } else { device::ld(src_y, 0) }
                    }
                } else {
                    row.v[c]
                };
            }
        });
        w
    }

    /// 1/R_cc for this lane's columns of R.
    #[inline(always)]
    unsafe fn inverse_diagonal(&self) -> [T; S] {
        let mut inv = [T::ZERO; S];
        unroll!(s in ..S => {
            let c = self.col(s);
            if c < self.n {
                // SAFETY: own diagonal entry.
                inv[s] = T::ONE.div(unsafe { self.at(c, c) });
            }
        });
        inv
    }

    /// Solves Rᵀp = x by forward substitution (x in the slots of the R columns); returns p.
    /// Column j's step: its owner lane divides, the value goes out by shuffle, every lane
    /// owning a later column subtracts R_jc·p_j.
    #[inline(always)]
    unsafe fn forward(&self, x: &[T; S]) -> [T; S] {
        let (n, lane) = (self.n, self.lane);
        // SAFETY: own diagonal entries, own columns' rows j < c; convergent shuffles.
        unsafe {
            let inv = self.inverse_diagonal();
            let mut z = *x;
            let mut p = [T::ZERO; S];
            unroll!(sj in ..S => {
                for jj in 0..self.count(sj) {
                    let j = 32 * sj + jj;
                    let pj = z[sj].mul(inv[sj]).shfl_idx(jj as u32);
                    if lane == jj {
                        p[sj] = pj;
                    }
                    unroll!(s in ..S => {
                        let c = self.col(s);
                        if s >= sj && c > j && c < n {
                            z[s] = self.at(j, c).neg().mul_add(pj, z[s]);
                        }
                    });
                }
            });
            p
        }
    }

    /// Rotates this lane's columns (the R columns and d) with the sweep's (c, s) in
    /// `cs`, row i with the entering row `w` for i = 0 … n−1 (i ≤ column); leaves the
    /// rotated row in `w` (≈ 0 in the R columns, the new residual in d's slot).
    #[inline(always)]
    unsafe fn rotate_in(&self, w: &mut [T; S]) {
        let n = self.n;
        for i in 0..n {
            // SAFETY: the sweep's arrays hold n entries each.
            let (c, s) = unsafe { self.rotation(i) };
            unroll!(k in ..S => {
                let col = self.col(k);
                if col <= n && i <= col {
                    // SAFETY: own column, row i < n.
                    unsafe {
                        let rv = self.at(i, col);
                        self.set(i, col, c.mul_add(rv, s.mul(w[k])));
                        w[k] = c.mul_add(w[k], s.mul(rv).neg());
                    }
                }
            });
        }
    }

    /// [`Warp::rotate_in`] that also solves R̄ᵀz = v for the row v about to leave, row i of
    /// the new R̄ used right after rotation i made it (from registers): `z` holds v in the
    /// R columns' slots and `inv` 1/R̄_cc; returns z. One chain fewer than solving after.
    #[inline(always)]
    unsafe fn rotate_in_solving(&self, w: &mut [T; S], z: &mut [T; S], inv: &[T; S]) -> [T; S] {
        let n = self.n;
        let mut sol = [T::ZERO; S];
        for i in 0..n {
            // SAFETY: the sweep's arrays hold n entries each; own columns, row i < n;
            // convergent shuffle.
            unsafe {
                let (c, s) = self.rotation(i);
                let mut fresh = [T::ZERO; S];
                unroll!(k in ..S => {
                    let col = self.col(k);
                    if col <= n && i <= col {
                        let rv = self.at(i, col);
                        let nv = c.mul_add(rv, s.mul(w[k]));
                        self.set(i, col, nv);
                        w[k] = c.mul_add(w[k], s.mul(rv).neg());
                        fresh[k] = nv;
                    }
                });
                let si = i >> 5;
                let mut mine = T::ZERO;
                unroll!(k in ..S => {
                    if k == si {
                        mine = z[k].mul(inv[k]);
                    }
                });
                let zi = mine.shfl_idx((i & 31) as u32);
                unroll!(k in ..S => {
                    let col = self.col(k);
                    if col == i {
                        sol[k] = zi;
                    } else if col > i && col < n {
                        z[k] = fresh[k].neg().mul_add(zi, z[k]);
                    }
                });
            }
        }
        sol
    }

    /// Adds the row (x, y) in `w`'s slots with rotations found all at once; false, with
    /// nothing changed, where p or t is not finite or a diagonal entry not positive. With
    /// `old`, the row about to leave, also returns z = R̄⁻ᵀv (solved during the sweep).
    #[inline(always)]
    unsafe fn add_fast(&self, w: &[T; S], old: Option<&[T; S]>) -> (bool, Option<[T; S]>) {
        let (n, lane) = (self.n, self.lane);
        // SAFETY: convergent warp throughout; own columns and the sweep arrays.
        unsafe {
            let p = self.forward(w);
            let mut p2 = [T::ZERO; S];
            unroll!(s in ..S => {
                if self.col(s) < n {
                    p2[s] = p[s].mul(p[s]);
                }
            });
            let excl = prefix_excl(&p2, lane);
            // The diagonal stays positive (rotations made by `givens::make`, c > 0 in a
            // downdate): where it is not, the rotations are made one by one instead.
            let mut bad = false;
            let mut cv = [T::ZERO; S];
            let mut sv = [T::ZERO; S];
            unroll!(s in ..S => {
                let c = self.col(s);
                if c < n {
                    let t = T::ONE.add(excl[s]);
                    let t_next = t.add(p2[s]);
                    let q = T::ONE.div(t_next.sqrt());
                    cv[s] = t.sqrt().mul(q);
                    sv[s] = p[s].mul(q);
                    bad |= !(cv[s].is_finite() && sv[s].is_finite() && t_next.is_finite())
                        || !(self.at(c, c) > T::ZERO);
                }
            });
            if device::ballot(bad) != 0 {
                return (false, None);
            }
            // 1/R̄_cc = c_c/R_cc (R̄_cc = R_cc/c_c), from the old diagonal.
            let inv_old = self.inverse_diagonal();
            unroll!(s in ..S => {
                let c = self.col(s);
                if c < n {
                    self.set_rotation(c, cv[s], sv[s]);
                }
            });
            device::sync_warp();
            let mut v = *w;
            let z = match old {
                Some(o) => {
                    let mut inv = [T::ZERO; S];
                    unroll!(s in ..S => {
                        inv[s] = cv[s].mul(inv_old[s]);
                    });
                    let mut zz = *o;
                    Some(self.rotate_in_solving(&mut v, &mut zz, &inv))
                }
                None => {
                    self.rotate_in(&mut v);
                    None
                }
            };
            self.finish_add(&v);
            device::sync_warp();
            (true, z)
        }
    }

    /// ρ ← hypot(ρ, e) by the owner of column n, e the rotated right-hand side.
    #[inline(always)]
    unsafe fn finish_add(&self, v: &[T; S]) {
        let n = self.n;
        unroll!(s in ..S => {
            if self.col(s) == n {
                // SAFETY: the owner of column n holds entry (n, n).
                unsafe { self.set(n, n, self.rho().hypot(v[s])) };
            }
        });
    }

    /// Adds the row (x, y) in `w`'s slots by Givens rotations made one after another
    /// (`small_r::Window::add_row`'s arithmetic; R may be singular).
    #[inline(always)]
    unsafe fn add_givens(&self, w: &[T; S]) {
        let n = self.n;
        let mut v = *w;
        // SAFETY: convergent warp; each lane reads and writes its own columns only, the
        // pivot and the row entry travel by shuffle.
        unsafe {
            unroll!(sj in ..S => {
                for jj in 0..self.count(sj) {
                    let j = 32 * sj + jj;
                    let own = if self.lane == jj { self.at(j, j) } else { T::ZERO };
                    let f = own.shfl_idx(jj as u32);
                    let g = v[sj].shfl_idx(jj as u32);
                    let (c, s) = crate::givens::make(f, g);
                    unroll!(k in ..S => {
                        let col = self.col(k);
                        if col >= j && col <= n {
                            let rv = self.at(j, col);
                            self.set(j, col, c.mul_add(rv, s.mul(v[k])));
                            v[k] = c.mul_add(v[k], s.mul(rv).neg());
                        }
                    });
                }
            });
            self.finish_add(&v);
            device::sync_warp();
        }
    }

    /// Adds a row: the all-at-once rotations, or one after another where those break down.
    /// With `old`, returns z = R̄⁻ᵀv for the row about to leave when the sweep solved it.
    #[inline(always)]
    unsafe fn add(&self, w: &[T; S], old: Option<&[T; S]>) -> Option<[T; S]> {
        // SAFETY: forwarded contract.
        unsafe {
            let (done, z) = self.add_fast(w, old);
            if !done {
                self.add_givens(w);
            }
            z
        }
    }

    /// Removes the row (v, y) in `w`'s slots by the LINPACK-style downdate (z = R⁻ᵀv given,
    /// or solved here); returns 0, or [`REASON_DOWNDATE`] with the matrix unchanged when a
    /// refusal test turns it down.
    #[inline(always)]
    unsafe fn remove(&self, w: &[T; S], z_known: Option<[T; S]>) -> u32 {
        let (n, lane) = (self.n, self.lane);
        // SAFETY: convergent warp; cross-lane reads of d and ρ follow a sync_warp and
        // precede the next one, writes touch own columns or own d entries.
        unsafe {
            device::sync_warp();
            let z = match z_known {
                Some(z) => z,
                None => self.forward(w),
            };
            let mut zf = [0.0f64; S];
            let mut part = 0.0;
            unroll!(s in ..S => {
                if self.col(s) < n {
                    zf[s] = z[s].to_f64() * z[s].to_f64();
                    part += zf[s];
                }
            });
            let alpha2 = 1.0 - warp_sum(part);
            if alpha2.is_nan() || alpha2 <= crate::small_r::sqrt_f64(T::UNIT_ROUNDOFF) {
                return REASON_DOWNDATE;
            }
            let excl = suffix_excl(&zf, lane);
            let mut cv = [T::ONE; S];
            let mut sv = [T::ZERO; S];
            let mut dv = [T::ZERO; S];
            let mut dn = 0.0;
            unroll!(s in ..S => {
                let c = self.col(s);
                if c < n {
                    let a_next = crate::small_r::sqrt_f64(alpha2 + excl[s]);
                    let a_here = crate::small_r::sqrt_f64(alpha2 + excl[s] + zf[s]);
                    cv[s] = T::from_f64(a_next / a_here);
                    sv[s] = z[s].div(T::from_f64(a_here));
                    dv[s] = self.at(c, n);
                    dn += dv[s].to_f64() * dv[s].to_f64();
                    self.set_rotation(c, cv[s], sv[s]);
                }
            });
            let dn = warp_sum(dn);
            // t_{i+1} = (t_i − s_i d_i)/c_i from t_0 = y, as affine maps scanned.
            let y = self.rhs_of(w);
            let mut t_after = [T::ZERO; S];
            let (mut ca, mut cb) = (T::ONE, T::ZERO);
            unroll!(s in ..S => {
                let (fa, fb) = if self.col(s) < n {
                    (T::ONE.div(cv[s]), sv[s].mul(dv[s]).neg().div(cv[s]))
                } else {
                    (T::ONE, T::ZERO)
                };
                let (a, b) = scan_affine(fa, fb, lane);
                let (a, b) = (a.mul(ca), a.mul_add(cb, b));
                t_after[s] = a.mul_add(y, b);
                ca = a.shfl_idx(31);
                cb = b.shfl_idx(31);
            });
            let last = n - 1;
            let mut u_own = T::ZERO;
            unroll!(s in ..S => {
                if last >> 5 == s {
                    u_own = t_after[s];
                }
            });
            let u_t = u_own.shfl_idx((last & 31) as u32);
            let (rk, u) = (self.rho().to_f64(), u_t.to_f64().abs());
            let slack = 100.0 * (n as f64 + 1.0) * T::UNIT_ROUNDOFF * (dn + rk * rk);
            if u * u > rk * rk + slack || !(u - u == 0.0) {
                return REASON_DOWNDATE;
            }
            device::sync_warp();
            unroll!(s in ..S => {
                let c = self.col(s);
                if c < n {
                    self.set(c, n, cv[s].mul_add(dv[s], sv[s].mul(t_after[s]).neg()));
                }
            });
            if lane == 0 {
                self.set(
                    n,
                    n,
                    T::from_f64(crate::small_r::sqrt_f64(crate::small_r::max_f64(
                        (rk - u) * (rk + u),
                        0.0,
                    ))),
                );
            }
            device::sync_warp();
            let mut run = [T::ZERO; S];
            let mut i = n;
            while i > 0 {
                i -= 1;
                let (c, s) = self.rotation(i);
                unroll!(k in ..S => {
                    let col = self.col(k);
                    if col < n && i <= col {
                        let rv = self.at(i, col);
                        let r_new = c.mul_add(rv, s.mul(run[k]).neg());
                        run[k] = c.mul_add(run[k], s.mul(rv));
                        self.set(i, col, r_new);
                    }
                });
            }
            device::sync_warp();
        }
        0
    }

    /// ‖R‖_F², in every lane: each lane sums its own columns, the slots side by side.
    ///
    /// # Safety
    /// Convergent warp; a read-only phase on the matrix.
    #[inline(always)]
    unsafe fn frobenius2(&self) -> f64 {
        let n = self.n;
        let mut acc = [0.0f64; S];
        // SAFETY: own columns' rows i ≤ c < n; convergent warp for the sum.
        unsafe {
            for i in 0..n {
                unroll!(s in ..S => {
                    let c = self.col(s);
                    if c < n && c >= i {
                        let v = self.at(i, c).to_f64();
                        acc[s] += v * v;
                    }
                });
            }
            let mut part = 0.0;
            unroll!(s in ..S => {
                part += acc[s];
            });
            warp_sum(part)
        }
    }

    /// Writes x (n) and ρ² to `x_out` and `rss_out` (either may be null): x = R⁻¹d when
    /// every |R_jj| > tol·‖R‖_F, else NaN; returns whether x is a solution.
    #[inline(always)]
    unsafe fn solve(&self, tol: T, x_out: *mut T, rss_out: *mut T) -> bool {
        let (n, lane) = (self.n, self.lane);
        // SAFETY: convergent warp; read-only phase on the matrix; x_out holds n entries
        // and rss_out one (contract).
        unsafe {
            let nrm = self.frobenius2();
            let mut dd = [T::ZERO; S];
            let mut diag = [T::ZERO; S];
            unroll!(s in ..S => {
                let c = self.col(s);
                if c < n {
                    diag[s] = self.at(c, c);
                    dd[s] = self.at(c, n);
                }
            });
            let inv = self.inverse_diagonal();
            let limit = tol.to_f64() * crate::small_r::sqrt_f64(nrm);
            let mut bad = !(limit - limit == 0.0);
            unroll!(s in ..S => {
                if self.col(s) < n {
                    let v = diag[s].to_f64();
                    let v = if v < 0.0 { -v } else { v };
                    bad |= !(v - v == 0.0 && v > limit);
                }
            });
            let ok = device::ballot(bad) == 0;
            let mut xs = [T::ZERO; S];
            unroll!(si in rev ..S => {
                let mut ii = self.count(si);
                while ii > 0 {
                    ii -= 1;
                    let i = 32 * si + ii;
                    let xi = dd[si].mul(inv[si]).shfl_idx(ii as u32);
                    if lane == ii {
                        xs[si] = xi;
                    }
                    unroll!(s in ..S => {
                        let c = self.col(s);
                        if s <= si && c < i {
                            dd[s] = self.at(c, i).neg().mul_add(xi, dd[s]);
                        }
                    });
                }
            });
            let nan = T::ZERO.div(T::ZERO);
            if !x_out.is_null() {
                unroll!(s in ..S => {
                    let c = self.col(s);
                    if c < n {
                        device::st(x_out, c, if ok { xs[s] } else { nan });
                    }
                });
            }
            if !rss_out.is_null() && lane == 0 {
                let rho = self.rho();
                device::st(rss_out, 0, if ok { rho.mul(rho) } else { nan });
            }
            ok
        }
    }
}

/// Elements of a state in global memory: [R d; 0 ρ] at pitch [`PITCH`] as in shared
/// memory, n + 1 rows rounded up to whole 16-byte chunks.
#[inline(always)]
pub fn state_len<T>(n: usize) -> usize {
    let per = 16 / core::mem::size_of::<T>();
    ((n + 1) * PITCH).div_ceil(per) * per
}

/// Loads [R d; 0 ρ] from `state` into shared memory (one flat asynchronous copy of 16-byte
/// chunks, all in flight at once), times `scale` unless it is 1.
///
/// # Safety
/// `state` readable for [`state_len`] elements, 16-byte aligned; full warp; the shared
/// block holds [`SHARED_ELEMS`] elements.
#[inline(always)]
unsafe fn load<T: Float, const S: usize>(w: &Warp<T, S>, state: *const T, scale: T) {
    let per = 16 / core::mem::size_of::<T>();
    let len = state_len::<T>(w.n);
    // SAFETY: chunks inside both buffers (len ≤ SHARED_ELEMS), 16-byte aligned (both bases
    // are, and chunk offsets are multiples of 16 bytes); each chunk copied by one lane and
    // read after the wait and the warp barrier.
    unsafe {
        let mut c = w.lane * per;
        while c < len {
            device::cp_async_16(w.a.add(c), state.add(c));
            c += 32 * per;
        }
        device::cp_async_commit();
        device::cp_async_wait_all();
        // Each lane waited for its own copies only: the barrier makes all of them visible.
        device::sync_warp();
        if scale != T::ONE {
            let mut i = w.lane;
            while i < len {
                let o = w.a32 + (i as u32) * (core::mem::size_of::<T>() as u32);
                device::st_shared(o, device::ld_shared::<T>(o).mul(scale));
                i += 32;
            }
        }
        device::sync_warp();
    }
}

/// Stores [R d; 0 ρ] back to `state` (the flat layout of [`load`]).
///
/// # Safety
/// `state` writable for [`state_len`] elements; full warp.
#[inline(always)]
unsafe fn store<T: Float, const S: usize>(w: &Warp<T, S>, state: *mut T) {
    let len = state_len::<T>(w.n);
    // SAFETY: indices below len inside both buffers; the warp barrier orders the other
    // lanes' shared-memory writes before these reads.
    unsafe {
        device::sync_warp();
        let mut base = 0;
        while base < len {
            let mut v = [T::ZERO; 8];
            unroll!(k in ..8 => {
                let i = base + w.lane + 32 * k;
                if i < len {
                    v[k] = device::ld_shared(w.a32 + (i as u32) * (core::mem::size_of::<T>() as u32));
                }
            });
            unroll!(k in ..8 => {
                let i = base + w.lane + 32 * k;
                if i < len {
                    device::st(state, i, v[k]);
                }
            });
            base += 256;
        }
    }
}

/// One step: the row enters (after R, d, ρ are scaled by `scale`), with [`DROP`] the
/// oldest kept row (ring slot `meta[META_HEAD]`) leaves and the new row takes its slot;
/// with [`SOLVE`] x and ρ² go to `x_out`/`rss_out`. A refused step (a non-finite row
/// from the device, a downdate turned down) leaves `state` and the ring as they were,
/// writes NaN for x and ρ², and is counted in `meta`. With [`SOLVE_ONLY`] nothing but the
/// solution is written (no row, no step counted).
///
/// # Safety
/// Grid 1, block 32, dynamic shared memory ≥ [`SHARED_ELEMS`]·size_of::<T>(); 1 ≤ n ≤
/// [`MAX_N`]; `state` read-writable for [`state_len`] elements, 16-byte aligned; `meta` for [`META_LEN`]; with [`DROP`]
/// m ≥ 1 and `ring` read-writable for m·(n+1) with meta[META_HEAD] < m; with
/// [`FROM_DEVICE`] `src_x` readable at i·inc_x (i < n) and `src_y` at 0; `x_out` (n) and
/// `rss_out` (1) writable or null; no buffer overlaps another.
#[inline(always)]
pub unsafe fn step<T: Float>(
    state: *mut T,
    ring: *mut T,
    meta: *mut u32,
    row: RowArg<T>,
    src_x: *const T,
    inc_x: usize,
    src_y: *const T,
    x_out: *mut T,
    rss_out: *mut T,
    n: usize,
    m: usize,
    flags: u32,
    scale: T,
    rank_tol: T,
) {
    let a = (state, ring, meta, &row, src_x, inc_x, src_y, x_out, rss_out);
    // SAFETY: forwarded contract; S = n/32 + 1 slots give column n an owner.
    unsafe {
        if n < 32 {
            step_slots::<T, 1>(a, n, m, flags, scale, rank_tol)
        } else if n < 64 {
            step_slots::<T, 2>(a, n, m, flags, scale, rank_tol)
        } else {
            step_slots::<T, 3>(a, n, m, flags, scale, rank_tol)
        }
    }
}

/// The pointer arguments of [`step`].
type StepPtrs<'a, T> = (
    *mut T,
    *mut T,
    *mut u32,
    &'a RowArg<T>,
    *const T,
    usize,
    *const T,
    *mut T,
    *mut T,
);

/// [`step`] with S slots a lane.
///
/// # Safety
/// As [`step`], with n/32 + 1 ≤ S.
#[inline(always)]
unsafe fn step_slots<T: Float, const S: usize>(
    (state, ring, meta, row, src_x, inc_x, src_y, x_out, rss_out): StepPtrs<'_, T>,
    n: usize,
    m: usize,
    flags: u32,
    scale: T,
    rank_tol: T,
) {
    let lane = device::thread_x();
    let a = device::shared::<T>();
    // SAFETY: the contract above; the shared block holds SHARED_ELEMS elements.
    unsafe {
        let cs = a.add(PITCH * PITCH);
        let w = Warp::<T, S> {
            lane,
            n,
            a,
            a32: device::shared_window(a),
            cs32: device::shared_window(cs),
        };
        if flags & SOLVE_ONLY != 0 {
            load(&w, state, T::ONE);
            if !w.solve(rank_tol, x_out, rss_out) && lane == 0 {
                device::st(
                    meta,
                    META_SOLVES_REFUSED,
                    device::ld(meta, META_SOLVES_REFUSED) + 1,
                );
            }
            return;
        }
        let new_row = w.row_slots(row, flags, src_x, inc_x, src_y);
        let mut bad = false;
        unroll!(s in ..S => {
            if w.col(s) <= n {
                bad |= !new_row[s].is_finite();
            }
        });
        let mut reason = if device::ballot(bad) != 0 {
            REASON_NON_FINITE
        } else {
            0
        };
        let head = device::ld(meta, META_HEAD) as usize;
        if reason == 0 {
            load(&w, state, scale);
            if flags & DROP != 0 {
                let mut old = [T::ZERO; S];
                unroll!(s in ..S => {
                    let c = w.col(s);
                    if c <= n {
                        old[s] = device::ld(ring, head * (n + 1) + c);
                    }
                });
                let z = w.add(&new_row, Some(&old));
                reason = w.remove(&old, z);
            } else {
                w.add(&new_row, None);
            }
        }
        if reason == 0 {
            if flags & SOLVE != 0 && !w.solve(rank_tol, x_out, rss_out) && lane == 0 {
                device::st(
                    meta,
                    META_SOLVES_REFUSED,
                    device::ld(meta, META_SOLVES_REFUSED) + 1,
                );
            }
            store(&w, state);
            if flags & DROP != 0 {
                unroll!(s in ..S => {
                    let c = w.col(s);
                    if c <= n {
                        device::st(ring, head * (n + 1) + c, new_row[s]);
                    }
                });
                if lane == 0 {
                    device::st(meta, META_HEAD, ((head + 1) % m) as u32);
                }
            }
        } else {
            if flags & SOLVE != 0 {
                let nan = T::ZERO.div(T::ZERO);
                let mut i = lane;
                while !x_out.is_null() && i < n {
                    device::st(x_out, i, nan);
                    i += 32;
                }
                if !rss_out.is_null() && lane == 0 {
                    device::st(rss_out, 0, nan);
                }
            }
            if lane == 0 {
                let step = device::ld(meta, META_STEP);
                device::st(meta, META_REFUSED, device::ld(meta, META_REFUSED) + 1);
                if device::ld(meta, META_FIRST_REFUSED) == u32::MAX {
                    device::st(meta, META_FIRST_REFUSED, step);
                }
                device::st(meta, META_REASON, reason);
            }
        }
        if lane == 0 {
            device::st(meta, META_STEP, device::ld(meta, META_STEP) + 1);
        }
    }
}

/// Factorises the m kept rows afresh: [R d; 0 ρ] cleared, then ring rows head, head+1, …
/// (mod m) added in turn; the result replaces `state` (drift control, and the first
/// factorisation).
///
/// # Safety
/// Grid 1, block 32, dynamic shared memory ≥ [`SHARED_ELEMS`]·size_of::<T>(); 1 ≤ n ≤
/// [`MAX_N`], m ≥ 1; `state` writable for [`state_len`] elements; `ring` readable for m·(n+1);
/// `meta` readable for [`META_LEN`] with meta[META_HEAD] < m; the ring's rows finite.
#[inline(always)]
pub unsafe fn refold<T: Float>(
    state: *mut T,
    ring: *const T,
    meta: *const u32,
    n: usize,
    m: usize,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if n < 32 {
            refold_slots::<T, 1>(state, ring, meta, n, m)
        } else if n < 64 {
            refold_slots::<T, 2>(state, ring, meta, n, m)
        } else {
            refold_slots::<T, 3>(state, ring, meta, n, m)
        }
    }
}

/// [`refold`] with S slots a lane.
///
/// # Safety
/// As [`refold`], with n/32 + 1 ≤ S.
#[inline(always)]
unsafe fn refold_slots<T: Float, const S: usize>(
    state: *mut T,
    ring: *const T,
    meta: *const u32,
    n: usize,
    m: usize,
) {
    let lane = device::thread_x();
    let a = device::shared::<T>();
    // SAFETY: the contract above.
    unsafe {
        let cs = a.add(PITCH * PITCH);
        let w = Warp::<T, S> {
            lane,
            n,
            a,
            a32: device::shared_window(a),
            cs32: device::shared_window(cs),
        };
        for i in 0..=n {
            let mut j = lane;
            while j <= n {
                w.set(i, j, T::ZERO);
                j += 32;
            }
        }
        device::sync_warp();
        let head = device::ld(meta, META_HEAD) as usize;
        for r in 0..m {
            let slot = (head + r) % m;
            let mut row = [T::ZERO; S];
            unroll!(s in ..S => {
                let c = w.col(s);
                if c <= n {
                    row[s] = device::ld(ring, slot * (n + 1) + c);
                }
            });
            w.add(&row, None);
        }
        store(&w, state);
    }
}
