//! The team of lanes that works on one problem and the shared steps of the batched thin-Q
//! kernels: sums over a team's rows, projections, rotations of R's columns, loads and stores
//! of a problem's working copy.

use crate::device::{self, Float, WARP};
use crate::two_phase::givens;

/// The lanes that work on one problem: `size` consecutive lanes (a power of two, 1 to 32)
/// of the block's one warp, which holds 32/`size` problems. Sums over a team are butterflies
/// with lane masks below `size`, which stay inside the team.
#[derive(Clone, Copy)]
pub(super) struct Team {
    /// The calling lane's index in its team.
    pub(super) lane: usize,
    pub(super) size: usize,
    /// The team's first lane in the warp.
    pub(super) first: u32,
    /// The team's lanes as ballot bits.
    pub(super) mask: u32,
}

impl Team {
    /// The calling thread's team for teams of `size` lanes (a power of two), and its
    /// problem's index.
    #[inline(always)]
    pub(super) fn of(size: usize) -> (Self, usize) {
        let l = device::thread_x();
        let t = l >> size.trailing_zeros();
        let first = (t * size) as u32;
        let mask = if size >= WARP {
            u32::MAX
        } else {
            ((1u32 << size) - 1) << first
        };
        let team = Team {
            lane: l & (size - 1),
            size,
            first,
            mask,
        };
        (
            team,
            device::block_x() * (WARP >> size.trailing_zeros()) + t,
        )
    }

    /// Whether `ok` holds in every lane of the team.
    ///
    /// # Safety
    /// The whole warp calls convergently.
    #[inline(always)]
    pub(super) unsafe fn all(self, ok: bool) -> bool {
        // SAFETY: forwarded.
        unsafe { device::ballot(!ok) & self.mask == 0 }
    }

    /// The team's sum of `v`, in every lane of the team.
    ///
    /// # Safety
    /// The whole warp calls convergently.
    #[inline(always)]
    pub(super) unsafe fn sum<T: Float>(self, mut v: T) -> T {
        let mut s = self.size / 2;
        while s > 0 {
            // SAFETY: convergent warp (caller); the mask stays inside the team.
            v = v.add(unsafe { v.shfl_xor(s as u32) });
            s /= 2;
        }
        v
    }

    /// The team's maximum (IEEE maxNum) of `v`, in every lane of the team.
    ///
    /// # Safety
    /// The whole warp calls convergently.
    #[inline(always)]
    pub(super) unsafe fn max<T: Float>(self, mut v: T) -> T {
        let mut s = self.size / 2;
        while s > 0 {
            // SAFETY: as for `sum`.
            v = v.max(unsafe { v.shfl_xor(s as u32) });
            s /= 2;
        }
        v
    }

    /// Four team sums at once (interleaved butterflies).
    ///
    /// # Safety
    /// The whole warp calls convergently.
    #[inline(always)]
    pub(super) unsafe fn sum4<T: Float>(
        self,
        (mut a, mut b, mut c, mut d): (T, T, T, T),
    ) -> (T, T, T, T) {
        let mut s = self.size / 2;
        while s > 0 {
            let m = s as u32;
            // SAFETY: as for `sum`.
            let (x, y, z, w) =
                unsafe { (a.shfl_xor(m), b.shfl_xor(m), c.shfl_xor(m), d.shfl_xor(m)) };
            a = a.add(x);
            b = b.add(y);
            c = c.add(z);
            d = d.add(w);
            s /= 2;
        }
        (a, b, c, d)
    }

    /// Lane j's (of the team) `v` in every lane of the team.
    ///
    /// # Safety
    /// The whole warp calls convergently; j < size.
    #[inline(always)]
    pub(super) unsafe fn bcast<T: Float>(self, v: T, j: usize) -> T {
        // SAFETY: convergent warp; the source lane is in the team.
        unsafe { v.shfl_idx(self.first + j as u32) }
    }

    /// The team's owner of row `i` (rows go round the team's lanes).
    #[inline(always)]
    pub(super) fn owns(self, i: usize) -> bool {
        i & (self.size - 1) == self.lane
    }

    /// The first row at or after `from` that the calling lane owns.
    #[inline(always)]
    pub(super) fn first_row(self, from: usize) -> usize {
        from + ((self.lane + self.size - (from & (self.size - 1))) & (self.size - 1))
    }
}

/// `out[c] = Σ_i mat[c·ld + i]·vec[i]` for c < ncols over the rows i < rows (a column-major
/// block times a vector, both in shared memory, or `mat` and `vec` in global memory); the
/// team's lane 0 writes `out`, and a warp barrier ends the call so that every lane may read
/// it.
///
/// # Safety
/// The whole warp calls convergently with the same `ncols`; every lane has written only its
/// own rows of `vec` and `mat` since the last barrier; `mat` holds ld·ncols elements, `vec`
/// rows, `out` ncols, `out` overlapping neither.
#[inline(always)]
pub(super) unsafe fn project<T: Float>(
    team: Team,
    (mat, ld, rows, ncols): (*const T, usize, usize, usize),
    vec: *const T,
    out: *mut T,
) {
    let mut c = 0;
    while c < ncols {
        let (mut p0, mut p1, mut p2, mut p3) = (T::ZERO, T::ZERO, T::ZERO, T::ZERO);
        let mut i = team.lane;
        while i < rows {
            // SAFETY: i < rows, columns below ncols (guards), inside `mat` and `vec`.
            unsafe {
                let z = device::ld(vec, i);
                p0 = device::ld(mat, c * ld + i).mul_add(z, p0);
                if c + 1 < ncols {
                    p1 = device::ld(mat, (c + 1) * ld + i).mul_add(z, p1);
                }
                if c + 2 < ncols {
                    p2 = device::ld(mat, (c + 2) * ld + i).mul_add(z, p2);
                }
                if c + 3 < ncols {
                    p3 = device::ld(mat, (c + 3) * ld + i).mul_add(z, p3);
                }
            }
            i += team.size;
        }
        // SAFETY: the whole warp runs the same loop (ncols is warp-uniform).
        let (s0, s1, s2, s3) = unsafe { team.sum4((p0, p1, p2, p3)) };
        if team.lane == 0 {
            // SAFETY: inside `out` (guards).
            unsafe {
                device::st(out, c, s0);
                if c + 1 < ncols {
                    device::st(out, c + 1, s1);
                }
                if c + 2 < ncols {
                    device::st(out, c + 2, s2);
                }
                if c + 3 < ncols {
                    device::st(out, c + 3, s3);
                }
            }
        }
        c += 4;
    }
    // SAFETY: the whole warp is here.
    unsafe { device::sync_warp() };
}

/// `vec[i] -= Σ_c mat[c·ld + i]·coef[c]` for the calling lane's rows i < rows.
///
/// # Safety
/// `coef` (ncols) was written before a warp barrier; sizes as [`project`].
#[inline(always)]
pub(super) unsafe fn subtract<T: Float>(
    team: Team,
    (mat, ld, rows, ncols): (*const T, usize, usize, usize),
    coef: *const T,
    vec: *mut T,
) {
    let mut i = team.lane;
    while i < rows {
        // SAFETY: inside the buffers (contract).
        unsafe {
            let mut z = device::ld(vec, i);
            for c in 0..ncols {
                z = device::ld(mat, c * ld + i)
                    .neg()
                    .mul_add(device::ld(coef, c), z);
            }
            device::st(vec, i, z);
        }
        i += team.size;
    }
}

/// Σ over the team of the squares of the calling lane's rows of `vec`.
///
/// # Safety
/// The whole warp calls convergently; `vec` holds `rows` elements.
#[inline(always)]
pub(super) unsafe fn norm2<T: Float>(team: Team, vec: *const T, rows: usize) -> T {
    let mut acc = T::ZERO;
    let mut i = team.lane;
    while i < rows {
        // SAFETY: own rows (contract).
        let x = unsafe { device::ld(vec, i) };
        acc = x.mul_add(x, acc);
        i += team.size;
    }
    // SAFETY: convergent.
    unsafe { team.sum(acc) }
}

/// `vec[i] *= f` for the calling lane's rows.
///
/// # Safety
/// `vec` holds `rows` elements.
#[inline(always)]
pub(super) unsafe fn scale_rows<T: Float>(team: Team, vec: *mut T, rows: usize, f: T) {
    let mut i = team.lane;
    while i < rows {
        // SAFETY: own rows (contract).
        unsafe { device::st(vec, i, device::ld(vec, i).mul(f)) };
        i += team.size;
    }
}

/// Rotates rows a and b of the row-major `r` (pitch n) in the calling lane's column (lane <
/// n): (r_a, r_b) ← (c·r_a + s·r_b, −s·r_a + c·r_b), the convention of `two_phase::givens`
/// (whose transposed rotation the rows of Q₁ take from the right).
///
/// # Safety
/// Rows a and b of `r` exist.
#[inline(always)]
pub(super) unsafe fn rotate_col<T: Float>(
    team: Team,
    r: *mut T,
    n: usize,
    (a, b): (usize, usize),
    (c, s): (T, T),
) {
    let l = team.lane;
    if l < n {
        // SAFETY: inside `r` (contract).
        unsafe {
            let x = device::ld(r, a * n + l);
            let y = device::ld(r, b * n + l);
            device::st(r, a * n + l, c.mul_add(x, s.mul(y)));
            device::st(r, b * n + l, c.mul_add(y, s.neg().mul(x)));
        }
    }
}

/// Rotation (c, s) zeroing R(b, j) against R(j, j) (row-major, pitch n), column j being
/// the team's lane j's: both values travel by shuffle, every lane of the team gets the same
/// (c, s); lane j writes the exact zero after rotating.
///
/// # Safety
/// The whole warp calls convergently; j < n ≤ team size; rows j and b of `r` exist.
#[inline(always)]
pub(super) unsafe fn zeroing_rotation<T: Float>(
    team: Team,
    r: *mut T,
    n: usize,
    j: usize,
    b: usize,
) -> (T, T) {
    let l = team.lane;
    let (mut f, mut g) = (T::ZERO, T::ZERO);
    if l < n {
        // SAFETY: inside `r` (contract).
        unsafe {
            f = device::ld(r, j * n + l);
            g = device::ld(r, b * n + l);
        }
    }
    // SAFETY: convergent warp (caller); j < team size.
    let (f, g) = unsafe { (team.bcast(f, j), team.bcast(g, j)) };
    let (c, s, _) = givens(f, g);
    (c, s)
}

/// Copies problem k's Q₁, R and b (m rows) from one state to another (the refused
/// problem's unchanged state), the team's lanes sharing the elements.
///
/// # Safety
/// Both states hold problem k at shape m×n.
#[inline(always)]
pub(super) unsafe fn copy_state<T: Float>(
    team: Team,
    (q_in, r_in, b_in): (*const T, *const T, *const T),
    (q_out, r_out, b_out): (*mut T, *mut T, *mut T),
    (k, m, n): (usize, usize, usize),
) {
    let mut e = team.lane;
    while e < m * n {
        // SAFETY: inside problem k's Q₁ (contract).
        unsafe { device::st(q_out, k * m * n + e, device::ld(q_in, k * m * n + e)) };
        e += team.size;
    }
    let mut e = team.lane;
    while e < n * n {
        // SAFETY: inside problem k's R.
        unsafe { device::st(r_out, k * n * n + e, device::ld(r_in, k * n * n + e)) };
        e += team.size;
    }
    let mut i = team.lane;
    while i < m {
        // SAFETY: inside problem k's b.
        unsafe { device::st(b_out, k * m + i, device::ld(b_in, k * m + i)) };
        i += team.size;
    }
}

/// Writes R (rows 0..n of the row-major working copy `rs`, pitch n) of problem k, the
/// calling lane its column, zeros below the diagonal.
///
/// # Safety
/// `rs` holds n rows; `r_out` problem k's n×n.
#[inline(always)]
pub(super) unsafe fn store_r<T: Float>(
    team: Team,
    rs: *const T,
    r_out: *mut T,
    k: usize,
    n: usize,
) {
    let l = team.lane;
    if l < n {
        for row in 0..n {
            // SAFETY: inside both (contract).
            unsafe {
                let v = if row <= l {
                    device::ld(rs, row * n + l)
                } else {
                    T::ZERO
                };
                device::st(r_out, k * n * n + row * n + l, v);
            }
        }
    }
}

/// Writes the first n columns of `qs` (ld, rows 0..m) as problem k's Q₁ (m×n).
///
/// # Safety
/// `qs` holds ld·n with ld ≥ m; `q_out` problem k's m×n.
#[inline(always)]
pub(super) unsafe fn store_q<T: Float>(
    team: Team,
    (qs, ld): (*const T, usize),
    q_out: *mut T,
    (k, m, n): (usize, usize, usize),
) {
    let mut i = team.lane;
    while i < m {
        for c in 0..n {
            // SAFETY: contract.
            unsafe { device::st(q_out, k * m * n + c * m + i, device::ld(qs, c * ld + i)) };
        }
        i += team.size;
    }
}

/// Whether the calling lane's rows (< m) of the first n columns of `qs` (ld) are finite.
///
/// # Safety
/// `qs` holds ld·n elements, ld ≥ m.
#[inline(always)]
pub(super) unsafe fn finite_rows<T: Float>(
    team: Team,
    (qs, ld): (*const T, usize),
    (m, n): (usize, usize),
) -> bool {
    let mut ok = true;
    let mut i = team.lane;
    while i < m {
        for c in 0..n {
            // SAFETY: contract.
            ok &= unsafe { device::ld(qs, c * ld + i) }.is_finite();
        }
        i += team.size;
    }
    ok
}

/// Whether the calling lane's column (lane < n) of rows 0..n of `rs` (pitch n) is finite.
///
/// # Safety
/// `rs` holds n·n elements.
#[inline(always)]
pub(super) unsafe fn finite_col<T: Float>(team: Team, rs: *const T, n: usize) -> bool {
    let l = team.lane;
    let mut ok = true;
    if l < n {
        for row in 0..=l {
            // SAFETY: contract.
            ok &= unsafe { device::ld(rs, row * n + l) }.is_finite();
        }
    }
    ok
}

/// Loads problem k's Q₁ (m×n) into the first n columns of `qs` (ld ≥ m) and R into rows
/// 0..n of `rs` (pitch n), the lane's rows and column.
///
/// # Safety
/// Problem k exists at shape m×n in `q` and `r`; `qs` holds ld·n, `rs` n·n.
#[inline(always)]
pub(super) unsafe fn load_state<T: Float>(
    team: Team,
    (q, r): (*const T, *const T),
    (qs, ld, rs): (*mut T, usize, *mut T),
    (k, m, n): (usize, usize, usize),
) {
    // SAFETY: contract.
    unsafe { load_q(team, q, (qs, ld), (k, m, n)) };
    if team.lane < n {
        let l = team.lane;
        for row in 0..n {
            // SAFETY: contract.
            unsafe { device::st(rs, row * n + l, device::ld(r, k * n * n + row * n + l)) };
        }
    }
}

/// Loads problem k's Q₁ (m×n) into the first n columns of `qs` (ld ≥ m), the lane's rows.
///
/// # Safety
/// Problem k exists at shape m×n in `q`; `qs` holds ld·n.
#[inline(always)]
pub(super) unsafe fn load_q<T: Float>(
    team: Team,
    q: *const T,
    (qs, ld): (*mut T, usize),
    (k, m, n): (usize, usize, usize),
) {
    let mut i = team.lane;
    while i < m {
        for c in 0..n {
            // SAFETY: contract.
            unsafe { device::st(qs, c * ld + i, device::ld(q, k * m * n + c * m + i)) };
        }
        i += team.size;
    }
}

/// The calling team's problem, its working memory and whether it exists: blocks of one warp
/// hold 32/`size` problems, the last block's surplus teams compute on the last problem's
/// data (k clamped) and store nothing.
///
/// # Safety
/// The shared memory holds (32/size)·`per` elements.
#[inline(always)]
pub(super) unsafe fn setup<T: Float>(
    size: usize,
    batch: usize,
    per: usize,
) -> (Team, usize, bool, *mut T) {
    let (team, k) = Team::of(size);
    let t = device::thread_x() >> size.trailing_zeros();
    // SAFETY: team t's region lies inside the shared memory (contract).
    let base = unsafe { device::shared::<T>().add(t * per) };
    (team, k.min(batch - 1), k < batch, base)
}

/// Whether the calling lane's column (lane < cols) of rows 0..=lane of `rs` (pitch) is
/// finite.
///
/// # Safety
/// `rs` holds pitch·pitch elements, cols ≤ pitch.
#[inline(always)]
pub(super) unsafe fn finite_col_pitch<T: Float>(
    team: Team,
    rs: *const T,
    (pitch, cols): (usize, usize),
) -> bool {
    let l = team.lane;
    let mut ok = true;
    if l < cols {
        for row in 0..=l {
            // SAFETY: contract.
            ok &= unsafe { device::ld(rs, row * pitch + l) }.is_finite();
        }
    }
    ok
}

/// Writes columns first..first+count of `qs` (ld, the calling lane's rows < ld) to `out`
/// (ld·count, column-major): the columns a full-Q state's complement takes
/// (docs/algorithms.md#batched-full-q-states).
///
/// # Safety
/// `qs` holds ld·(first + count) elements, `out` ld·count.
#[inline(always)]
pub(super) unsafe fn export_cols<T: Float>(
    team: Team,
    (qs, ld): (*const T, usize),
    (first, count): (usize, usize),
    out: *mut T,
) {
    let mut i = team.lane;
    while i < ld {
        for t in 0..count {
            // SAFETY: contract.
            unsafe { device::st(out, t * ld + i, device::ld(qs, (first + t) * ld + i)) };
        }
        i += team.size;
    }
}

/// √v in f64 (for the rank tolerance).
#[inline(always)]
pub(super) fn sqrt_f64(v: f64) -> f64 {
    <f64 as Float>::sqrt(v)
}
