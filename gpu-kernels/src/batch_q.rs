//! Batched thin-Q least-squares states on the device (docs/algorithms.md#batched-states):
//! B problems of one shape, each its own Q₁ (m×n, column-major, orthonormal columns), R
//! (n×n, row-major, upper triangular) and b (m), n ≤ 32. A problem belongs to a team of L
//! lanes (L a power of two, n ≤ L ≤ 32, chosen by the host from m and n), a block of one warp
//! to 32/L problems ([`Team`]). A problem's working copy sits in its team's part of the
//! dynamic shared memory; the team's lane ℓ owns the rows ℓ, ℓ + L, … of Q₁ (and of b, u,
//! the completion) and the column ℓ of R, so the sweeps over rows and columns need no
//! communication, and sums over rows are butterflies inside the team. Control flow is the
//! same for every team of a warp (the shuffles are whole-warp instructions): a problem that
//! refuses goes on computing and stores nothing of it. Every kernel but the in-place rank-one
//! update reads its input state and writes a new one: the host keeps the old buffers when it
//! discards the call.
//!
//! Layouts: A of the factorisation is B × m × n row-major; Q₁ is stored problem after
//! problem, each m×n column-major (element (k, i, c) at k·m·n + c·m + i); R problem after
//! problem n×n row-major (zeros below the diagonal); b and the rows' right-hand sides B × m
//! and B × p; update rows B × p × n row-major; u B × m and v B × n.

use crate::device::{self, Float, WARP};
use crate::two_phase::givens;

/// `status` codes.
pub const OK: u32 = 0;
/// A row deletion refused: the rows left do not determine R (the completion's test).
pub const DOWNDATE_REFUSED: u32 = 1;
/// A NaN or ±∞ in the problem's data, or an update whose result would not be finite.
pub const NON_FINITE: u32 = 2;
/// The solve's rank test failed (x is NaN).
pub const RANK_DEFICIENT: u32 = 3;
/// Largest n (one lane a column of R).
pub const MAX_N: usize = 32;

/// Shared-memory elements (`T`s) of each kernel (the host sizes the launch with these).
pub mod smem {
    /// [`super::factor`]: A's working copy and Q₁ (m×n each) and τ (n).
    pub const fn factor(m: usize, n: usize) -> usize {
        2 * m * n + n
    }
    /// [`super::rank_one`]: [Q₁ q̂] (m×(n+1)), [R; 0] ((n+1)×n), two n-vectors and 4n
    /// rotation entries.
    pub const fn rank_one(m: usize, n: usize) -> usize {
        m * (n + 1) + (n + 1) * n + 2 * n + 4 * n
    }
    /// [`super::insert_rows`]: Q_ext ((m+p)×(n+p)), [R; U] ((n+p)×n), 2pn rotation entries.
    pub const fn insert_rows(m: usize, n: usize, p: usize) -> usize {
        (m + p) * (n + p) + (n + p) * n + 2 * p * n
    }
    /// [`super::delete_rows`]: [Q₁ v] (m×(n+1)), [R; 0] ((n+1)×n), one n-vector and 2n
    /// rotation entries.
    pub const fn delete_rows(m: usize, n: usize) -> usize {
        m * (n + 1) + (n + 1) * n + n + 2 * n
    }
    /// [`super::delete_cols`]: Q₁ (m×n), R (n×n) and 2n rotation entries.
    pub const fn delete_cols(m: usize, n: usize) -> usize {
        m * n + n * n + 2 * n
    }
    /// [`super::solve`]: R (n×n) and d (n).
    pub const fn solve(n: usize) -> usize {
        n * n + n
    }
}

/// The lanes that work on one problem: `size` consecutive lanes (a power of two, 1 to 32)
/// of the block's one warp, which holds 32/`size` problems. Sums over a team are butterflies
/// with lane masks below `size`, which stay inside the team.
#[derive(Clone, Copy)]
struct Team {
    /// The calling lane's index in its team.
    lane: usize,
    size: usize,
    /// The team's first lane in the warp.
    first: u32,
    /// The team's lanes as ballot bits.
    mask: u32,
}

impl Team {
    /// The calling thread's team for teams of `size` lanes (a power of two), and its
    /// problem's index.
    #[inline(always)]
    fn of(size: usize) -> (Self, usize) {
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
    unsafe fn all(self, ok: bool) -> bool {
        // SAFETY: forwarded.
        unsafe { device::ballot(!ok) & self.mask == 0 }
    }

    /// The team's sum of `v`, in every lane of the team.
    ///
    /// # Safety
    /// The whole warp calls convergently.
    #[inline(always)]
    unsafe fn sum<T: Float>(self, mut v: T) -> T {
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
    unsafe fn max<T: Float>(self, mut v: T) -> T {
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
    unsafe fn sum4<T: Float>(self, (mut a, mut b, mut c, mut d): (T, T, T, T)) -> (T, T, T, T) {
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
    unsafe fn bcast<T: Float>(self, v: T, j: usize) -> T {
        // SAFETY: convergent warp; the source lane is in the team.
        unsafe { v.shfl_idx(self.first + j as u32) }
    }

    /// The team's owner of row `i` (rows go round the team's lanes).
    #[inline(always)]
    fn owns(self, i: usize) -> bool {
        i & (self.size - 1) == self.lane
    }

    /// The first row at or after `from` that the calling lane owns.
    #[inline(always)]
    fn first_row(self, from: usize) -> usize {
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
unsafe fn project<T: Float>(
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
unsafe fn subtract<T: Float>(
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
unsafe fn norm2<T: Float>(team: Team, vec: *const T, rows: usize) -> T {
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
unsafe fn scale_rows<T: Float>(team: Team, vec: *mut T, rows: usize, f: T) {
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
unsafe fn rotate_col<T: Float>(
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
unsafe fn zeroing_rotation<T: Float>(
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
unsafe fn copy_state<T: Float>(
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
unsafe fn store_r<T: Float>(team: Team, rs: *const T, r_out: *mut T, k: usize, n: usize) {
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
unsafe fn store_q<T: Float>(
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
unsafe fn finite_rows<T: Float>(
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
unsafe fn finite_col<T: Float>(team: Team, rs: *const T, n: usize) -> bool {
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
unsafe fn load_state<T: Float>(
    team: Team,
    (q, r): (*const T, *const T),
    (qs, ld, rs): (*mut T, usize, *mut T),
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
    if team.lane < n {
        let l = team.lane;
        for row in 0..n {
            // SAFETY: contract.
            unsafe { device::st(rs, row * n + l, device::ld(r, k * n * n + row * n + l)) };
        }
    }
}

/// The calling team's problem, its working memory and whether it exists: blocks of one warp
/// hold 32/`size` problems, the last block's surplus teams compute on the last problem's
/// data (k clamped) and store nothing.
///
/// # Safety
/// The shared memory holds (32/size)·`per` elements.
#[inline(always)]
unsafe fn setup<T: Float>(size: usize, batch: usize, per: usize) -> (Team, usize, bool, *mut T) {
    let (team, k) = Team::of(size);
    let t = device::thread_x() >> size.trailing_zeros();
    // SAFETY: team t's region lies inside the shared memory (contract).
    let base = unsafe { device::shared::<T>().add(t * per) };
    (team, k.min(batch - 1), k < batch, base)
}

/// Factorises every problem: A = Q₁R by Householder reflectors (docs/algorithms.md#batched-states),
/// Q₁ formed by backward accumulation, b copied. A problem with a non-finite entry in A or b
/// gets [`NON_FINITE`] (its outputs are not written: the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::factor`]`(m, n)` elements; `a` readable B·m·n, `b` B·m;
/// `q` writable B·m·n, `r` B·n·n, `b_out` B·m, `status` B; B ≥ 1, m ≥ n, 1 ≤ n ≤ 32; outputs
/// overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn factor<T: Float>(
    a: *const T,
    b: *const T,
    q: *mut T,
    r: *mut T,
    b_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, w) = unsafe { setup::<T>(team, batch, smem::factor(m, n)) };
    // SAFETY: inside the team's region.
    let (qs, tau) = unsafe { (w.add(m * n), w.add(2 * m * n)) };
    let mut ok = true;
    let mut i = team.lane;
    while i < m {
        // SAFETY: row i of problem k (contract); the lane's own rows of `w`.
        unsafe {
            for c in 0..n {
                let v = device::ld(a, (k * m + i) * n + c);
                ok &= v.is_finite();
                device::st(w, c * m + i, v);
            }
            let bv = device::ld(b, k * m + i);
            ok &= bv.is_finite();
            if valid {
                device::st(b_out, k * m + i, bv);
            }
        }
        i += team.size;
    }
    // SAFETY: every lane reaches the vote.
    let ok = unsafe { team.all(ok) };
    for j in 0..n {
        // The reflector of column j from rows j..m: scaled norm of the tail.
        let mut amax = T::ZERO;
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            amax = amax.max(unsafe { device::ld(w, j * m + i) }.abs());
            i += team.size;
        }
        // SAFETY: convergent warp (j is uniform).
        let amax = unsafe { team.max(amax) };
        let mine = if team.owns(j) {
            // SAFETY: the owner reads its row j.
            unsafe { device::ld(w, j * m + j) }
        } else {
            T::ZERO
        };
        // SAFETY: convergent warp.
        let alpha = unsafe { team.bcast(mine, j & (team.size - 1)) };
        // A zero tail makes the reflector the identity (τ = 0, β = α): computed alike, so
        // that every team runs the same shuffles.
        let zero = amax == T::ZERO;
        let inv = if zero { T::ZERO } else { T::ONE.div(amax) };
        let mut ss = T::ZERO;
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            let v = unsafe { device::ld(w, j * m + i) }.mul(inv);
            ss = v.mul_add(v, ss);
            i += team.size;
        }
        // SAFETY: convergent warp.
        let ss = unsafe { team.sum(ss) };
        let an = alpha.mul(inv);
        let norm = amax.mul(an.mul_add(an, ss).sqrt());
        let beta = if zero {
            alpha
        } else {
            norm.copysign(alpha).neg()
        };
        let tau_j = if zero {
            T::ZERO
        } else {
            beta.sub(alpha).div(beta)
        };
        let scal = if zero {
            T::ONE
        } else {
            T::ONE.div(alpha.sub(beta))
        };
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            unsafe { device::st(w, j * m + i, device::ld(w, j * m + i).mul(scal)) };
            i += team.size;
        }
        if team.owns(j) {
            // SAFETY: own row j.
            unsafe { device::st(w, j * m + j, beta) };
        }
        if team.lane == 0 {
            // SAFETY: j < n.
            unsafe { device::st(tau, j, tau_j) };
        }
        // SAFETY: convergent warp; own rows only.
        unsafe { apply_reflector(team, w, (m, n), j, tau_j, (w, j + 1)) };
    }
    // SAFETY: every lane; τ written by each team's lane 0 above.
    unsafe { device::sync_warp() };
    let mut i = team.lane;
    while i < m {
        for c in 0..n {
            let v = if i == c { T::ONE } else { T::ZERO };
            // SAFETY: own row i of qs.
            unsafe { device::st(qs, c * m + i, v) };
        }
        i += team.size;
    }
    for j in (0..n).rev() {
        // SAFETY: τ (n) was written before the barrier.
        let tau_j = unsafe { device::ld(tau, j) };
        // SAFETY: convergent warp (j uniform; τ = 0 is the identity); own rows.
        unsafe { apply_reflector(team, w, (m, n), j, tau_j, (qs, j)) };
    }
    if valid && ok {
        // SAFETY: problem k's outputs (contract); R's entry (row, lane) sits in column
        // `lane` of w, row `row`, written by the owner of `row` before the barrier above.
        unsafe {
            store_q(team, (qs, m), q, (k, m, n));
            if team.lane < n {
                let l = team.lane;
                for row in 0..n {
                    let v = if row <= l {
                        device::ld(w, l * m + row)
                    } else {
                        T::ZERO
                    };
                    device::st(r, k * n * n + row * n + l, v);
                }
            }
        }
    }
    if valid && team.lane == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if ok { OK } else { NON_FINITE }) };
    }
}

/// Applies the reflector I − τvvᵀ of column j of `w` (v_j = 1, v_i = w(i, j) below) to
/// columns c0..n of `target` (column-major, ld m), rows j..m, four columns a pass.
///
/// # Safety
/// The whole warp calls convergently with the same j and c0; each lane touches only its own
/// rows of `target`; `w` and `target` hold m·n elements.
#[inline(always)]
unsafe fn apply_reflector<T: Float>(
    team: Team,
    w: *const T,
    (m, n): (usize, usize),
    j: usize,
    tau: T,
    (target, c0): (*mut T, usize),
) {
    let first = team.first_row(j);
    let v_of = |i: usize| {
        if i == j {
            T::ONE
        } else {
            // SAFETY: own row i > j of w (contract).
            unsafe { device::ld(w, j * m + i) }
        }
    };
    let mut c = c0;
    while c < n {
        let (mut p0, mut p1, mut p2, mut p3) = (T::ZERO, T::ZERO, T::ZERO, T::ZERO);
        let mut i = first;
        while i < m {
            let v = v_of(i);
            // SAFETY: own rows, columns below n (guards).
            unsafe {
                p0 = device::ld(target, c * m + i).mul_add(v, p0);
                if c + 1 < n {
                    p1 = device::ld(target, (c + 1) * m + i).mul_add(v, p1);
                }
                if c + 2 < n {
                    p2 = device::ld(target, (c + 2) * m + i).mul_add(v, p2);
                }
                if c + 3 < n {
                    p3 = device::ld(target, (c + 3) * m + i).mul_add(v, p3);
                }
            }
            i += team.size;
        }
        // SAFETY: convergent warp (c uniform).
        let (s0, s1, s2, s3) = unsafe { team.sum4((p0, p1, p2, p3)) };
        let (t0, t1, t2, t3) = (tau.mul(s0), tau.mul(s1), tau.mul(s2), tau.mul(s3));
        let mut i = first;
        while i < m {
            let v = v_of(i);
            // SAFETY: as above.
            unsafe {
                let e = c * m + i;
                device::st(target, e, t0.neg().mul_add(v, device::ld(target, e)));
                if c + 1 < n {
                    let e = (c + 1) * m + i;
                    device::st(target, e, t1.neg().mul_add(v, device::ld(target, e)));
                }
                if c + 2 < n {
                    let e = (c + 2) * m + i;
                    device::st(target, e, t2.neg().mul_add(v, device::ld(target, e)));
                }
                if c + 3 < n {
                    let e = (c + 3) * m + i;
                    device::st(target, e, t3.neg().mul_add(v, device::ld(target, e)));
                }
            }
            i += team.size;
        }
        c += 4;
    }
}

/// Replaces every problem's A by A + U Vᵀ in place, as `kk` thin rank-one updates one after
/// another (docs/algorithms.md#thin-rank-one-update: w = Q₁ᵀu and q̂ by Gram–Schmidt twice,
/// stage A reducing [w; γ] to a multiple of e₀, row 0 gaining it times vᵀ, stage B clearing
/// the subdiagonal), the state staying in shared memory between them. U is B × m × kk and V
/// B × n × kk (row-major a problem: u_t(i) at i·kk + t). b does not change. Each team reads
/// its problem into shared memory before it writes anything back; a problem with a
/// non-finite entry in U or V, or whose result would not be finite, writes nothing and gets
/// [`NON_FINITE`].
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::rank_one`]`(m, n)` elements; `q` B·m·n and `r` B·n·n
/// read-writable, `u` B·m·kk, `v` B·n·kk readable, `status` B writable; B ≥ 1, kk ≥ 1,
/// 1 ≤ n ≤ 32, m ≥ n; u, v and status overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn rank_one<T: Float>(
    q: *mut T,
    r: *mut T,
    u: *const T,
    v: *const T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::rank_one(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, wv, w2, rot) = unsafe {
        let rs = qs.add(m * (n + 1));
        let wv = rs.add((n + 1) * n);
        (rs, wv, wv.add(n), wv.add(2 * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q as *const T, r as *const T), (qs, m, rs), (k, m, n)) };
    let z = qs.wrapping_add(n * m);
    let mut ok = true;
    for t in 0..kk {
        // SAFETY: every lane; the previous term's reads of z and of the rotations are done.
        unsafe { device::sync_warp() };
        let mut i = team.lane;
        while i < m {
            // SAFETY: own rows of u and of column n.
            unsafe {
                let x = device::ld(u, (k * m + i) * kk + t);
                ok &= x.is_finite();
                device::st(z, i, x);
            }
            i += team.size;
        }
        let mut vc = T::ZERO;
        if team.lane < n {
            // SAFETY: v holds B·n·kk; row n of rs exists.
            unsafe {
                vc = device::ld(v, (k * n + team.lane) * kk + t);
                device::st(rs, n * n + team.lane, T::ZERO);
            }
            ok &= vc.is_finite();
        }
        // SAFETY: the sum is convergent.
        let unorm2 = unsafe { norm2(team, z, m) };
        // Gram–Schmidt twice: w = Q₁ᵀu, z = u − Q₁w.
        let qv = (qs as *const T, m, m, n);
        // SAFETY: convergent warp; own rows; buffers sized by the contract.
        unsafe {
            project(team, qv, z, wv);
            subtract(team, qv, wv, z);
            project(team, qv, z, w2);
            subtract(team, qv, w2, z);
        }
        // SAFETY: convergent.
        let mut gamma = unsafe { norm2(team, z, m) }.sqrt();
        let small = T::from_f64(64.0 * T::UNIT_ROUNDOFF).mul(unorm2.sqrt());
        let zscale = if gamma <= small {
            gamma = T::ZERO;
            T::ZERO
        } else {
            T::ONE.div(gamma)
        };
        // SAFETY: own rows.
        unsafe { scale_rows(team, z, m, zscale) };
        // Stage A: [w; γ] → t·e₀ (every lane runs the same chain from the shared w).
        let mut t = gamma;
        for j in (0..n).rev() {
            // SAFETY: w and w₂ were written before project's barrier.
            let wj = unsafe { device::ld(wv, j).add(device::ld(w2, j)) };
            let (c, s, rr) = givens(wj, t);
            t = rr;
            // SAFETY: rows j, j+1 ≤ n of rs; lane's own column.
            unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
            if team.lane == 0 {
                // SAFETY: 4n rotation entries.
                unsafe {
                    device::st(rot, 2 * j, c);
                    device::st(rot, 2 * j + 1, s);
                }
            }
        }
        if team.lane < n {
            // SAFETY: own column of row 0.
            unsafe { device::st(rs, team.lane, t.mul_add(vc, device::ld(rs, team.lane))) };
        }
        // Stage B: clear the subdiagonal.
        for j in 0..n {
            // SAFETY: convergent; rows j, j+1 exist.
            let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, j + 1) };
            // SAFETY: own column.
            unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
            if team.lane == j {
                // SAFETY: own column j.
                unsafe { device::st(rs, (j + 1) * n + j, T::ZERO) };
            }
            if team.lane == 0 {
                // SAFETY: 4n entries.
                unsafe {
                    device::st(rot, 2 * n + 2 * j, c);
                    device::st(rot, 2 * n + 2 * j + 1, s);
                }
            }
        }
        // SAFETY: every lane; the rotations are visible after it.
        unsafe { device::sync_warp() };
        // Both stages on each own row in two passes, the moving entry in a register: stage A
        // (j = n−1 … 0) leaves column j+1 final after rotation j; stage B (j = 0 … n−1) leaves
        // column j final after rotation j, and column n is dropped.
        let mut i = team.lane;
        while i < m {
            // SAFETY: own row i of columns ≤ n; the rotations (4n) were written before the barrier.
            unsafe {
                let mut carry = device::ld(qs, n * m + i);
                for j in (0..n).rev() {
                    let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                    let x = device::ld(qs, j * m + i);
                    device::st(qs, (j + 1) * m + i, c.mul_add(carry, s.neg().mul(x)));
                    carry = c.mul_add(x, s.mul(carry));
                }
                for j in 0..n {
                    let (c, s) = (
                        device::ld(rot, 2 * n + 2 * j),
                        device::ld(rot, 2 * n + 2 * j + 1),
                    );
                    let y = device::ld(qs, (j + 1) * m + i);
                    device::st(qs, j * m + i, c.mul_add(carry, s.mul(y)));
                    carry = c.mul_add(y, s.neg().mul(carry));
                }
            }
            i += team.size;
        }
    }
    // SAFETY: own rows and column of the working copy; every lane votes.
    let (ok, fine) = unsafe {
        let mine = finite_rows(team, (qs, m), (m, n)) && finite_col(team, rs, n);
        (team.all(ok), team.all(mine))
    };
    if valid && ok && fine {
        // SAFETY: problem k's state; own rows and column.
        unsafe {
            store_q(team, (qs, m), q, (k, m, n));
            store_r(team, rs, r, k, n);
        }
    }
    if valid && team.lane == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if ok && fine { OK } else { NON_FINITE }) };
    }
}

/// Inserts p rows at k0 in every problem (docs/algorithms.md#thin-row-insertion, with Givens
/// rotations): R and b are first scaled by `scale` (√λ of a forgetting window step; 1
/// otherwise), then Q_ext = Q₁ with p zero rows at k0 and the p unit columns, and [R; U] is
/// triangularised row by row (rotation (j, n + r) zeroes U(r, j)). A problem whose rows or
/// right-hand sides are not finite gets [`NON_FINITE`] and zeros for Q₁ and R (the call is
/// all-or-nothing, or, in a window step, the caller restores the problem).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::insert_rows`]`(m, n, p)` elements; `q_in` B·m·n, `r_in`
/// B·n·n, `b_in` B·m, `rows` B·p·n, `rhs` B·p, `q_out` B·(m+p)·n, `r_out` B·n·n, `b_out`
/// B·(m+p), `status` B; B ≥ 1, k0 ≤ m, p ≥ 1, 1 ≤ n ≤ 32; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn insert_rows<T: Float>(
    q_in: *const T,
    r_in: *const T,
    b_in: *const T,
    rows: *const T,
    rhs: *const T,
    q_out: *mut T,
    r_out: *mut T,
    b_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    scale: T,
    team: usize,
) {
    let (mp, np) = (m + p, n + p);
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::insert_rows(m, n, p)) };
    // SAFETY: inside the team's region.
    let (rs, rot) = unsafe {
        let rs = qs.add(mp * np);
        (rs, rs.add(np * n))
    };
    let mut ok = true;
    let mut i = team.lane;
    while i < mp {
        // SAFETY: own rows of qs; source rows inside problem k (k0 ≤ m).
        unsafe {
            let src = if i < k0 {
                Some(i)
            } else if i >= k0 + p {
                Some(i - p)
            } else {
                None
            };
            for c in 0..n {
                let x = match src {
                    Some(s) => device::ld(q_in, k * m * n + c * m + s),
                    None => T::ZERO,
                };
                device::st(qs, c * mp + i, x);
            }
            for t in 0..p {
                let e = if i == k0 + t { T::ONE } else { T::ZERO };
                device::st(qs, (n + t) * mp + i, e);
            }
            let bv = match src {
                Some(s) => device::ld(b_in, k * m + s).mul(scale),
                None => {
                    let e = device::ld(rhs, k * p + (i - k0));
                    ok &= e.is_finite();
                    e
                }
            };
            if valid {
                device::st(b_out, k * mp + i, bv);
            }
        }
        i += team.size;
    }
    if team.lane < n {
        let l = team.lane;
        // SAFETY: own column of rs; R and rows inside problem k.
        unsafe {
            for row in 0..n {
                let x = device::ld(r_in, k * n * n + row * n + l).mul(scale);
                device::st(rs, row * n + l, x);
            }
            for t in 0..p {
                let x = device::ld(rows, (k * p + t) * n + l);
                ok &= x.is_finite();
                device::st(rs, (n + t) * n + l, x);
            }
        }
    }
    // SAFETY: every lane votes.
    let ok = unsafe { team.all(ok) };
    for t in 0..p {
        for j in 0..n {
            // SAFETY: convergent; rows j and n + t of rs exist.
            let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, n + t) };
            // SAFETY: own column.
            unsafe { rotate_col(team, rs, n, (j, n + t), (c, s)) };
            if team.lane == j {
                // SAFETY: own column j.
                unsafe { device::st(rs, (n + t) * n + j, T::ZERO) };
            }
            if team.lane == 0 {
                // SAFETY: 2pn entries.
                unsafe {
                    device::st(rot, 2 * (t * n + j), c);
                    device::st(rot, 2 * (t * n + j) + 1, s);
                }
            }
        }
    }
    // SAFETY: every lane; the rotations are visible after it.
    unsafe { device::sync_warp() };
    // Each own row in one pass a new row, the unit column's entry in a register (its
    // column is dropped afterwards).
    let mut i = team.lane;
    while i < mp {
        for t in 0..p {
            // SAFETY: own row i of columns < n + p; the rotations (2pn) were written before
            // the barrier.
            unsafe {
                let mut carry = device::ld(qs, (n + t) * mp + i);
                for j in 0..n {
                    let (c, s) = (
                        device::ld(rot, 2 * (t * n + j)),
                        device::ld(rot, 2 * (t * n + j) + 1),
                    );
                    let x = device::ld(qs, j * mp + i);
                    device::st(qs, j * mp + i, c.mul_add(x, s.mul(carry)));
                    carry = c.mul_add(carry, s.neg().mul(x));
                }
            }
        }
        i += team.size;
    }
    // SAFETY: own rows and column; every lane votes.
    let fine = ok
        && unsafe {
            let mine = finite_rows(team, (qs, mp), (mp, n)) && finite_col(team, rs, n);
            team.all(mine)
        };
    if valid {
        if fine {
            // SAFETY: problem k's outputs at (m+p)×n.
            unsafe {
                store_q(team, (qs, mp), q_out, (k, mp, n));
                store_r(team, rs, r_out, k, n);
            }
        } else {
            // The refused problem's outputs are zeros (a window step deletes from them
            // before the caller puts the old state back).
            let mut e = team.lane;
            while e < mp * n {
                // SAFETY: problem k's Q₁ at (m+p)×n.
                unsafe { device::st(q_out, k * mp * n + e, T::ZERO) };
                e += team.size;
            }
            let mut e = team.lane;
            while e < n * n {
                // SAFETY: problem k's R.
                unsafe { device::st(r_out, k * n * n + e, T::ZERO) };
                e += team.size;
            }
        }
        if team.lane == 0 {
            // SAFETY: k < B.
            unsafe { device::st(status, k, if fine { OK } else { NON_FINITE }) };
        }
    }
}

/// Deletes rows k0..k0+p of every problem, one at a time (docs/algorithms.md#thin-row-deletion
/// with p = 1 repeated): the completion v = (I − Q₁Q₁ᵀ)e_i by Gram–Schmidt twice, refused
/// ([`DOWNDATE_REFUSED`]) when ‖v‖ < √u; the rotations (j, j+1), j = n−1 … 0, take row i of
/// [Q₁ v/‖v‖] to e₀ᵀ and, applied to [R; 0] from the left, leave it upper Hessenberg; column
/// 0 and row 0 are dropped. The deleted row stays in place as a zero row until the rows are
/// written out without it. When `fallback` states are given (non-null), a refusing problem
/// writes its fallback state (shape (m−p)×n) instead, so that a window step can proceed per
/// problem; otherwise it writes nothing (the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::delete_rows`]`(m, n)` elements; `q_in` B·m·n, `r_in`
/// B·n·n, `b_in` B·m; `q_out`, `q_fb` B·(m−p)·n, `r_out`, `r_fb` B·n·n, `b_out`, `b_fb`
/// B·(m−p) (the fallbacks all null or all valid); `status` B; B ≥ 1, k0 + p ≤ m,
/// m − p ≥ n ≥ 1, n ≤ 32; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn delete_rows<T: Float>(
    q_in: *const T,
    r_in: *const T,
    b_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    b_out: *mut T,
    q_fb: *const T,
    r_fb: *const T,
    b_fb: *const T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::delete_rows(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, sv, rot) = unsafe {
        let rs = qs.add(m * (n + 1));
        let sv = rs.add((n + 1) * n);
        (rs, sv, sv.add(n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    if team.lane < n {
        // SAFETY: row n of rs.
        unsafe { device::st(rs, n * n + team.lane, T::ZERO) };
    }
    let z = qs.wrapping_add(n * m);
    let qv = (qs as *const T, m, m, n);
    let root_u = T::from_f64(sqrt_f64(T::UNIT_ROUNDOFF));
    let (mo, mut refused) = (m - p, false);
    for t in 0..p {
        let i0 = k0 + t;
        // SAFETY: every lane; row i0 (its owner's) is visible after it.
        unsafe { device::sync_warp() };
        let mut i = team.lane;
        while i < m {
            // SAFETY: own row i; row i0 of columns < n is only read in this phase.
            unsafe {
                let mut x = if i == i0 { T::ONE } else { T::ZERO };
                for c in 0..n {
                    x = device::ld(qs, c * m + i)
                        .neg()
                        .mul_add(device::ld(qs, c * m + i0), x);
                }
                device::st(z, i, x);
            }
            i += team.size;
        }
        // SAFETY: convergent; own rows.
        unsafe {
            project(team, qv, z, sv);
            subtract(team, qv, sv, z);
        }
        // SAFETY: convergent.
        let gamma = unsafe { norm2(team, z, m) }.sqrt();
        // A refused problem goes on computing (every team runs the same shuffles) and
        // stores nothing of it.
        refused |= !(gamma >= root_u);
        let inv = if refused { T::ZERO } else { T::ONE.div(gamma) };
        // SAFETY: own rows.
        unsafe { scale_rows(team, z, m, inv) };
        // SAFETY: every lane; row i0 of [Q₁ v] is final for this step.
        unsafe { device::sync_warp() };
        if team.lane == 0 {
            // SAFETY: row i0 of columns ≤ n; 2n rotation entries.
            unsafe {
                let mut tr = device::ld(qs, n * m + i0);
                for j in (0..n).rev() {
                    let f = device::ld(qs, j * m + i0);
                    let (c, s, r) = givens(f, tr);
                    tr = r;
                    device::st(rot, 2 * j, c);
                    device::st(rot, 2 * j + 1, s);
                }
            }
        }
        // SAFETY: every lane; the rotations are visible after it, and nobody writes row i0
        // before it.
        unsafe { device::sync_warp() };
        // The rotations on each own row in one pass, the moving entry in a register:
        // column j+1 is final after rotation j and moves to column j (column 0 of [Q₁ v] is
        // dropped); row i0 becomes a zero row.
        let mut i = team.lane;
        while i < m {
            // SAFETY: own row i of columns ≤ n; the rotations (2n) were written before the
            // barrier.
            unsafe {
                let mut carry = device::ld(qs, n * m + i);
                for j in (0..n).rev() {
                    let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                    let x = device::ld(qs, j * m + i);
                    let out = if i == i0 {
                        T::ZERO
                    } else {
                        c.mul_add(carry, s.neg().mul(x))
                    };
                    device::st(qs, j * m + i, out);
                    carry = c.mul_add(x, s.mul(carry));
                }
            }
            i += team.size;
        }
        for j in (0..n).rev() {
            // SAFETY: written before the barrier; own column.
            unsafe {
                let cs = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                rotate_col(team, rs, n, (j, j + 1), cs);
            }
        }
        // Row 0 of R is dropped.
        if team.lane < n {
            let l = team.lane;
            // SAFETY: own column.
            unsafe {
                for row in 0..n {
                    device::st(rs, row * n + l, device::ld(rs, (row + 1) * n + l));
                }
                device::st(rs, n * n + l, T::ZERO);
            }
        }
    }
    // SAFETY: own rows and column; every lane votes (γ, and so `refused`, is team-uniform).
    let fine = unsafe {
        let mine = finite_rows(team, (qs, m), (m, n)) && finite_col(team, rs, n);
        team.all(mine)
    } && !refused;
    if valid && fine {
        let mut i = team.lane;
        while i < m {
            if i < k0 || i >= k0 + p {
                let io = if i < k0 { i } else { i - p };
                // SAFETY: own rows; problem k's outputs at mo×n.
                unsafe {
                    for c in 0..n {
                        device::st(q_out, k * mo * n + c * mo + io, device::ld(qs, c * m + i));
                    }
                    device::st(b_out, k * mo + io, device::ld(b_in, k * m + i));
                }
            }
            i += team.size;
        }
        // SAFETY: own column.
        unsafe { store_r(team, rs, r_out, k, n) };
    }
    if valid && !fine && !q_fb.is_null() {
        // SAFETY: the fallback holds problem k at mo×n (contract).
        unsafe { copy_state(team, (q_fb, r_fb, b_fb), (q_out, r_out, b_out), (k, mo, n)) };
    }
    if valid && team.lane == 0 {
        let code = if fine {
            OK
        } else if refused {
            DOWNDATE_REFUSED
        } else {
            NON_FINITE
        };
        // SAFETY: k < B.
        unsafe { device::st(status, k, code) };
    }
}

/// Deletes columns k0..k0+p of every problem (docs/algorithms.md#thin-column-deletion, one
/// column at a time with Givens rotations): R loses column k0, which leaves it upper
/// Hessenberg from k0 on; rotations (j, j+1), j = k0 … n′−2, clear the subdiagonal from R's
/// rows and Q₁'s columns; the last row of R and the last column of Q₁ are dropped. b does not
/// change (the host keeps its buffer). Nothing can be refused but a non-finite result
/// ([`NON_FINITE`], outputs unwritten: the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::delete_cols`]`(m, n)` elements; `q_in` B·m·n, `r_in`
/// B·n·n readable; `q_out` B·m·(n−p), `r_out` B·(n−p)², `status` B writable; B ≥ 1,
/// k0 + p ≤ n, p < n ≤ 32, m ≥ n; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn delete_cols<T: Float>(
    q_in: *const T,
    r_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::delete_cols(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, rot) = unsafe {
        let rs = qs.add(m * n);
        (rs, rs.add(n * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    let l = team.lane;
    for t in 0..p {
        // R is n × nc before this deletion (pitch n throughout).
        let nc = n - t;
        // SAFETY: every lane; R's columns (their owners' writes) are visible after it.
        unsafe { device::sync_warp() };
        // Column c takes column c + 1 (c ≥ k0): each row moved by the lane of its index
        // (rows < n ≤ team size), between two barriers.
        if l < n {
            let mut c = k0;
            while c + 1 < nc {
                // SAFETY: row l, columns c, c + 1 < nc ≤ n of rs.
                unsafe { device::st(rs, l * n + c, device::ld(rs, l * n + c + 1)) };
                c += 1;
            }
        }
        // SAFETY: every lane; the moved columns are visible to their owners after it.
        unsafe { device::sync_warp() };
        // Rotations (j, j+1) for j = k0 … nc−2 clear R(j+1, j) (columns < nc − 1).
        let mut j = k0;
        while j + 1 < nc {
            // SAFETY: convergent; rows j, j+1 < n; column j < nc − 1 ≤ team size.
            let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, j + 1) };
            if l < nc - 1 {
                // SAFETY: own column.
                unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
            }
            if l == j {
                // SAFETY: own column j.
                unsafe { device::st(rs, (j + 1) * n + j, T::ZERO) };
            }
            if l == 0 {
                // SAFETY: 2n rotation entries.
                unsafe {
                    device::st(rot, 2 * j, c);
                    device::st(rot, 2 * j + 1, s);
                }
            }
            j += 1;
        }
        // SAFETY: every lane; the rotations are visible after it.
        unsafe { device::sync_warp() };
        let mut i = l;
        while i < m {
            // SAFETY: own row i of the first nc columns of qs; rotations written above.
            unsafe {
                let mut j = k0;
                if j + 1 < nc {
                    let mut carry = device::ld(qs, j * m + i);
                    while j + 1 < nc {
                        let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                        let y = device::ld(qs, (j + 1) * m + i);
                        device::st(qs, j * m + i, c.mul_add(carry, s.mul(y)));
                        carry = c.mul_add(y, s.neg().mul(carry));
                        j += 1;
                    }
                    // Column nc − 1 is dropped.
                }
            }
            i += team.size;
        }
    }
    let no = n - p;
    // SAFETY: own rows and column of the working copy (the first no columns, rows of R
    // below no are dropped); every lane votes.
    let fine = unsafe {
        let mine =
            finite_rows(team, (qs, m), (m, no)) && (l >= no || finite_col_pitch(team, rs, (n, no)));
        team.all(mine)
    };
    if valid && fine {
        // SAFETY: problem k's outputs at m×no and no×no.
        unsafe {
            store_q(team, (qs, m), q_out, (k, m, no));
            if l < no {
                for row in 0..no {
                    let v = if row <= l {
                        device::ld(rs, row * n + l)
                    } else {
                        T::ZERO
                    };
                    device::st(r_out, k * no * no + row * no + l, v);
                }
            }
        }
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if fine { OK } else { NON_FINITE }) };
    }
}

/// Whether the calling lane's column (lane < cols) of rows 0..=lane of `rs` (pitch) is
/// finite.
///
/// # Safety
/// `rs` holds pitch·pitch elements, cols ≤ pitch.
#[inline(always)]
unsafe fn finite_col_pitch<T: Float>(
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

/// Solves every problem: d = Q₁ᵀb, the residual ‖b − Q₁d‖² into `rss`, and x = R⁻¹d with
/// the rank test |R_jj| > tol·‖R‖_F (tol = `rank_tol` when non-negative, else
/// max(m, n)·u/√min(m, n)); a failing problem gets x = NaN and [`RANK_DEFICIENT`].
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::solve`]`(n)` elements; `q` B·m·n, `r` B·n·n, `b` B·m
/// readable; `x` B·n, `rss` B, `status` B writable; B ≥ 1, 1 ≤ n ≤ 32, m ≥ 1.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn solve<T: Float>(
    q: *const T,
    r: *const T,
    b: *const T,
    x: *mut T,
    rss: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    rank_tol: f64,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, rs) = unsafe { setup::<T>(team, batch, smem::solve(n)) };
    // SAFETY: inside the team's region.
    let dv = unsafe { rs.add(n * n) };
    let l = team.lane;
    let mut fro = T::ZERO;
    if l < n {
        for row in 0..n {
            // SAFETY: problem k's R; own column of rs.
            unsafe {
                let v = device::ld(r, k * n * n + row * n + l);
                fro = v.mul_add(v, fro);
                device::st(rs, row * n + l, v);
            }
        }
    }
    // SAFETY: convergent; `project` ends with a barrier that also publishes rs.
    let fro = unsafe {
        project(team, (q.add(k * m * n), m, m, n), b.add(k * m), dv);
        team.sum(fro)
    }
    .sqrt();
    let mut res = T::ZERO;
    let mut i = l;
    while i < m {
        // SAFETY: problem k's rows; d written before the barrier.
        unsafe {
            let mut e = device::ld(b, k * m + i);
            for c in 0..n {
                e = device::ld(q, k * m * n + c * m + i)
                    .neg()
                    .mul_add(device::ld(dv, c), e);
            }
            res = e.mul_add(e, res);
        }
        i += team.size;
    }
    // SAFETY: convergent.
    let res = unsafe { team.sum(res) };
    let tol = if rank_tol >= 0.0 {
        rank_tol
    } else {
        let (big, small) = (m.max(n) as f64, m.min(n).max(1) as f64);
        big * T::UNIT_ROUNDOFF / sqrt_f64(small)
    };
    let bound = T::from_f64(tol).mul(fro);
    let mut ok = true;
    if l < n {
        // SAFETY: the lane's diagonal entry (its own write).
        let d = unsafe { device::ld(rs, l * n + l) }.abs();
        ok = d.is_finite() && d > bound;
    }
    // SAFETY: every lane votes.
    let ok = unsafe { team.all(ok) };
    // Back substitution: lane c holds y_c; x_j goes out from lane j by shuffle.
    let mut y = if l < n {
        // SAFETY: d written before the barrier.
        unsafe { device::ld(dv, l) }
    } else {
        T::ZERO
    };
    let mut xl = T::ZERO;
    for j in (0..n).rev() {
        let mine = if l == j {
            // SAFETY: visible after project's barrier.
            y.div(unsafe { device::ld(rs, j * n + j) })
        } else {
            T::ZERO
        };
        // SAFETY: convergent; j < n ≤ team size.
        let xj = unsafe { team.bcast(mine, j) };
        if l == j {
            xl = xj;
        }
        if l < j {
            // SAFETY: visible after the barrier.
            y = unsafe { device::ld(rs, l * n + j) }.neg().mul_add(xj, y);
        }
    }
    if valid && l < n {
        let out = if ok { xl } else { T::ZERO.div(T::ZERO) };
        // SAFETY: problem k's x.
        unsafe { device::st(x, k * n + l, out) };
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe {
            device::st(rss, k, res);
            device::st(status, k, if ok { OK } else { RANK_DEFICIENT });
        }
    }
}

/// √v in f64 (for the rank tolerance).
#[inline(always)]
fn sqrt_f64(v: f64) -> f64 {
    <f64 as Float>::sqrt(v)
}
