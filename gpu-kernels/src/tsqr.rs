//! TSQR panel with Householder reconstruction (spec §4.1 "TSQR-style panels for tall
//! shapes", issue 5): a tall rows×n panel (n ≤ [`COLS`]) is factored by a tree of small
//! Householder QRs that each read their rows once, and its compact-WY form (V, T, R) is
//! then rebuilt from the tree's explicit Q by an LU without pivoting of Q − S
//! (Ballard, Demmel, Grigori, Jacquelin, Nguyen, Solomonik, "Reconstructing Householder
//! vectors from tall-skinny QR", 2014). The host (host/src/gpu/kernels_tsqr.rs) runs:
//!
//! 1. [`leaf_qr`] on each level: leaf b (rows b·[`LEAF`] ..) is factored in registers;
//!    its reflectors stay in place below the leaf's diagonal, τ goes to `tau[b·COLS..]`
//!    and its R (n×n, zeros below the diagonal) to rows b·n .. of the next level, until
//!    one leaf is left;
//! 2. [`leaf_apply`] from the top level down: each leaf's reflectors applied backwards
//!    to [C_b; 0], with C_b its n rows of the level above's explicit Q (the identity at
//!    the top), give that level's explicit Q; at level 0 first for leaf 0 alone;
//! 3. [`reconstruct`] (one block): with Q₁ the top n×n of level 0's Q, the LU
//!    Q₁ − S = L₁U, sᵢ = −sign of the i-th pivot's Schur value (so |uᵢᵢ| ≥ 1), gives
//!    V₁ = L₁, T = −U·S·L₁⁻ᵀ, R = S·R_tree and M = U⁻¹;
//! 4. [`leaf_apply`] on level 0 again, every leaf, with C_b·M in place of C_b (the host
//!    multiplies level 1's Q by M with one GEMM): V₂ = Q₂·M for rows ≥ n, and R (rows
//!    < n) with exact zeros below it into the panel.
//!
//! Then I − V T Vᵀ = H₁⋯Hₙ, the panel is H·[R; 0], R's diagonal has LAPACK's signs
//! (rᵢᵢ = −sign(αᵢ)·‖·‖) and τᵢ = tᵢᵢ ∈ [1, 2]: the same factorisation as the column-by-
//! column panel, to rounding.
//!
//! Layout inside a block of [`THREADS`] threads: lane c of warp g owns column c, rows
//! g·[`RPT`] .. g·RPT + RPT of the leaf, in registers; a column or row every lane needs
//! goes through shared memory (broadcast reads), and thread t moves row t of the leaf
//! between global memory and a staging tile (coalesced, all loads in flight at once).
//! Norms are scaled by powers of two (spec §1.2): column c of a leaf is published
//! divided by s_c, the power of two ≤ its largest entry at the start (its entries below
//! the diagonal never exceed its initial 2-norm ≤ 16·2·s_c, since every step is
//! orthogonal), so squares and dot products neither overflow nor underflow where the
//! data do not; the reflector formulas are those of `householder::house`.

use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Runs `$body` once for each r in 0..32 with `$r` bound to the literal, so that the
/// per-thread arrays indexed by it stay in registers (LLVM does not fully unroll these
/// loops by itself, and a dynamically indexed array lives in local memory).
macro_rules! rows32 {
    (|$r:ident| $body:block) => {
        rows32!(@ $r, $body, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
            18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31])
    };
    (@ $r:ident, $body:block, [$($i:literal),*]) => {
        $( { let $r: usize = $i; $body } )*
    };
}

/// Widest panel (one lane per column).
pub const COLS: usize = 32;
/// Row groups of a leaf (one warp each).
pub const GROUPS: usize = 8;
/// Leaf rows a thread holds in registers.
pub const RPT: usize = 32;
const _: () = assert!(
    RPT == 32 && COLS == 32,
    "rows32! unrolls 32 rows or columns"
);
/// Rows of a leaf.
pub const LEAF: usize = GROUPS * RPT;
/// Threads per block of the leaf kernels (one per leaf row when staging).
pub const THREADS: usize = COLS * GROUPS;
const _: () = assert!(THREADS == LEAF, "thread t stages row t of the leaf");
/// Leading dimension of the shared staging tile (odd: conflict-free column reads).
const LDS: usize = LEAF + 1;
/// Shared memory of [`leaf_qr`], in elements: staging tile, two broadcast columns, two
/// broadcast rows, the per-group dot partials, the per-group column maxima, and per
/// column its scale s_c, its V factor s_c/(α − β) and β.
pub const QR_SMEM: usize = COLS * LDS + 2 * LEAF + 2 * COLS + 2 * GROUPS * COLS + 3 * COLS;
/// Leading dimension of [`leaf_apply`]'s tile (even: its columns' pairs of rows are
/// aligned for vector loads).
const LDV: usize = LEAF + 2;
/// Shared memory of [`leaf_apply`], in elements: staging tile (V, then the output),
/// τ and two sets of dot partials.
pub const APPLY_SMEM: usize = COLS * LDV + COLS + 2 * GROUPS * COLS;
/// Threads of [`reconstruct`] (one per entry of a COLS×COLS matrix).
pub const RECON_THREADS: usize = COLS * COLS;
/// Leading dimension of [`reconstruct`]'s shared matrices.
const LDR: usize = COLS + 1;
/// Shared memory of [`reconstruct`], in elements: the LU, L₁⁻¹, U⁻¹ and the signs.
pub const RECON_SMEM: usize = 3 * COLS * LDR + COLS;

/// (a₀ + a₁) + (a₂ + a₃).
#[inline(always)]
fn sum4<T: Float>(a: &[T; 4]) -> T {
    a[0].add(a[1]).add(a[2].add(a[3]))
}

/// β, τ and 1/(α − β) of the reflector for α and σ² = ‖x‖² of a column of the scaled
/// leaf (entries below 32 in magnitude, so α² + σ² cannot overflow), as
/// `householder::house` (spec §1.2): σ² = 0 gives (α, 0, 0); μ = √(α² + σ²) in one
/// square root, or by [`Float::hypot`] of α and σ when α² + σ² is too small for that
/// to be accurate. The two quotients are independent (one latency, not two).
#[inline(always)]
fn house<T: Pair>(alpha: T, ss: T) -> (T, T, T) {
    if ss == T::ZERO {
        (alpha, T::ZERO, T::ZERO)
    } else {
        let q = alpha.mul_add(alpha, ss);
        let mu = if q >= T::TINY {
            q.sqrt()
        } else {
            alpha.hypot(ss.sqrt())
        };
        let beta = mu.copysign(alpha).neg();
        (beta, beta.sub(alpha).div(beta), T::ONE.div(alpha.sub(beta)))
    }
}

/// (a₀ + a₁) + (a₂ + a₃) + ((a₄ + a₅) + (a₆ + a₇)): a sum of [`GROUPS`] partials with
/// three additions on its critical path.
#[inline(always)]
fn sum8<T: Float>(p: &[T; GROUPS]) -> T {
    p[0].add(p[1])
        .add(p[2].add(p[3]))
        .add(p[4].add(p[5]).add(p[6].add(p[7])))
}

/// Two adjacent elements of shared memory, aligned to their size, so that one
/// vector instruction (`ld.shared.v2` / `st.shared.v2`) moves both.
pub trait Pair: Float {
    /// `[Self; 2]` aligned to 2·size_of Self.
    type P: Copy;
    /// Smallest α² + σ² whose square root [`house`] takes directly (far above the
    /// subnormal range: 2^-960 in f64, 2^-100 in f32).
    const TINY: Self;
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
unsafe fn ld2<T: Pair>(p: *const T, i: usize) -> (T, T) {
    // SAFETY: forwarded from the caller (alignment, bounds, no race).
    T::unpair(unsafe { p.add(i).cast::<T::P>().read() })
}

/// `p[i], p[i + 1] = a, b` in one vector store.
///
/// # Safety
/// As [`ld2`], and no other thread accesses the two elements concurrently.
#[inline(always)]
unsafe fn st2<T: Pair>(p: *mut T, i: usize, a: T, b: T) {
    // SAFETY: forwarded from the caller (alignment, bounds, exclusive).
    unsafe { p.add(i).cast::<T::P>().write(T::pair(a, b)) }
}

/// `tsqr_leaf_qr`: Householder QR of every leaf of the rows×n matrix `a` (ld `lda`),
/// leaf b = block b. Leaves shorter than [`LEAF`] rows (the last one) are padded with
/// zero rows. Writes each leaf's reflectors in place below the leaf's diagonal (its
/// rows on and above the diagonal get R), τ to `tau[b·COLS + j]`, and R (n×n upper
/// triangular, exact zeros below) to `r_out[b·n + i + j·ldr]`.
///
/// Every column c is first divided by s_c (exact: a power of two), so the leaf factored
/// is Â = A·S⁻¹, whose columns' largest entries lie in [1, 2): the reflectors (v, τ)
/// are those of A (they do not depend on a column's scale), R = R̂·S (exact), and no
/// square or dot product overflows or underflows where the data do not. The column
/// steps are unrolled (j a constant in each copy), so that the rows a step touches and
/// the row it publishes are known at compile time.
///
/// Step j: lanes c ≥ j sum x̂_j·â_c over their rows (pairs of the broadcast column in
/// one load; lane j's own sum is σ̂²); barrier; every thread forms β̂, τ, 1/(α̂ − β̂)
/// from lane j's partials; lanes c > j update â_c; lane j+1 publishes its column and
/// warp 0 row j+1; barrier.
///
/// # Safety
/// Grid ⌈rows/LEAF⌉, block [`THREADS`], dynamic shared memory [`QR_SMEM`] elements;
/// 1 ≤ n ≤ COLS; `a` read-writable rows×n (ld ≥ rows); `tau` writable for
/// grid·COLS; `r_out` writable (grid·n)×n (ld ≥ grid·n); no overlap.
#[inline(always)]
pub unsafe fn leaf_qr<T: Float + Pow2 + Pair>(
    a: *mut T,
    lda: usize,
    rows: usize,
    n: usize,
    tau: *mut T,
    r_out: *mut T,
    ldr: usize,
) {
    let tid = device::thread_x();
    let (c, g) = (tid % COLS, tid / COLS);
    let b = device::block_x();
    let leaf0 = b * LEAF;
    let nr = LEAF.min(rows - leaf0);
    let sm = device::shared::<T::P>().cast::<T>();
    // SAFETY: the offsets stay inside QR_SMEM elements (launch contract). xb starts at
    // COLS·LDS elements, a multiple of 32: pair-aligned, as are its halves (LEAF).
    let (stage, xb, rowb, pw, cmax, scl, fac, bet) = unsafe {
        let xb = sm.add(COLS * LDS);
        let rowb = xb.add(2 * LEAF);
        let pw = rowb.add(2 * COLS);
        let cmax = pw.add(GROUPS * COLS);
        let scl = cmax.add(GROUPS * COLS);
        let fac = scl.add(COLS);
        (sm, xb, rowb, pw, cmax, scl, fac, fac.add(COLS))
    };
    // Row tid of the leaf into the staging tile (zero past the matrix).
    let mut tmp = [T::ZERO; COLS];
    if tid < nr {
        rows32!(|k| {
            if k < n {
                // SAFETY: leaf0 + tid < rows, k < n: inside a.
                tmp[k] = unsafe { device::ld(a as *const T, leaf0 + tid + k * lda) };
            }
        });
    }
    rows32!(|k| {
        if k < n {
            // SAFETY: inside the tile; thread tid writes row tid only.
            unsafe { device::st(stage, k * LDS + tid, tmp[k]) };
        }
    });
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let mut x = [T::ZERO; RPT];
    let mut m4 = [T::ZERO; 4];
    if c < n {
        rows32!(|r| {
            // SAFETY: inside the tile; written before the barrier.
            x[r] = unsafe { device::ld(stage, c * LDS + g * RPT + r) };
            m4[r & 3] = m4[r & 3].max(x[r].abs());
        });
    }
    // SAFETY: one writer per (group, column).
    unsafe { device::st(cmax, g * COLS + c, m4[0].max(m4[1]).max(m4[2].max(m4[3]))) };
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    // This column's scale s_c (0 for a zero column, whose entries stay zero); the
    // column is divided by it once (exact).
    let mut mx = T::ZERO;
    for gg in 0..GROUPS {
        // SAFETY: inside the maxima, written before the barrier.
        mx = mx.max(unsafe { device::ld(cmax, gg * COLS + c) });
    }
    let (s_c, inv_s) = mx.pow2_scale();
    rows32!(|r| {
        x[r] = x[r].mul(inv_s);
    });
    if g == 0 {
        // SAFETY: c < COLS; one writer per column.
        unsafe { device::st(scl, c, s_c) };
    }
    // Publish column 0 (rows ≥ 1) and row 0 into the parity-0 buffers.
    if c == 0 {
        rows32!(|r| {
            if r % 2 == 0 {
                // SAFETY: pair-aligned (r even), inside the column; lane 0 of warp g
                // writes its own rows (row 0 of group 0 is never read).
                unsafe { st2(xb, g * RPT + r, x[r], x[r + 1]) };
            }
        });
    }
    if g == 0 {
        // SAFETY: c < COLS; one writer per column.
        unsafe { device::st(rowb, c, x[0]) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    rows32!(|j| {
        if j < n {
            let p = j & 1;
            // SAFETY: parity-p buffers, written before the last barrier and rewritten
            // only after the next one.
            let (xbp, rowp) = unsafe { (xb.add(p * LEAF), rowb.add(p * COLS)) };
            // Rows of this group that column j reaches below its diagonal: all in
            // groups ≥ 1, rows > j in group 0 (the pair holding row j + 1 starts at
            // row j + 1 rounded down to even; its other row, ≤ j, is multiplied by the
            // zero or stale value only in the dot of lanes that discard it).
            if c >= j && c < n {
                let mut acc = [T::ZERO; 4];
                rows32!(|r| {
                    if r % 2 == 0 {
                        if g > 0 || r > j {
                            // SAFETY: pair-aligned, inside the broadcast column.
                            let (v0, v1) = unsafe { ld2(xbp, g * RPT + r) };
                            acc[r & 3] = v0.mul_add(x[r], acc[r & 3]);
                            acc[(r + 1) & 3] = v1.mul_add(x[r + 1], acc[(r + 1) & 3]);
                        } else if r + 1 > j {
                            // Row r ≤ j, row r + 1 > j: only the latter counts.
                            // SAFETY: inside the broadcast column.
                            let v1 = unsafe { device::ld(xbp, g * RPT + r + 1) };
                            acc[(r + 1) & 3] = v1.mul_add(x[r + 1], acc[(r + 1) & 3]);
                        }
                    }
                });
                // SAFETY: one writer per (group, column).
                unsafe { device::st(pw, g * COLS + c, sum4(&acc)) };
            }
            // SAFETY: block-uniform barrier.
            unsafe { device::sync_threads() };
            // Lane c's sum of its partials (meaningful for j ≤ c < n); lane j's is
            // σ̂², which every lane of the warp takes from it.
            let mut part = [T::ZERO; GROUPS];
            for (gg, pv) in part.iter_mut().enumerate() {
                // SAFETY: inside the dot partials.
                *pv = unsafe { device::ld(pw, gg * COLS + c) };
            }
            let sc = sum8(&part);
            // SAFETY: the whole warp executes this (no divergence at this point).
            let ss = unsafe { sc.shfl_idx(j as u32) };
            // SAFETY: inside the broadcast row.
            let alpha = unsafe { device::ld(rowp, j) };
            let (beta, t, inv) = house(alpha, ss);
            // v = x̂_j/(α̂ − β̂) below row j, 1 on it.
            if c > j && c < n {
                // w_c = vᵀâ_c = â_jc + inv·Σ x̂_i·â_ic; â_c −= τ·w_c·v.
                // SAFETY: inside the broadcast row.
                let w = inv.mul_add(sc, unsafe { device::ld(rowp, c) });
                let f = t.mul(w);
                let fs = f.mul(inv).neg();
                rows32!(|r| {
                    if r % 2 == 0 {
                        if g > 0 || r > j {
                            // SAFETY: pair-aligned, inside the broadcast column.
                            let (v0, v1) = unsafe { ld2(xbp, g * RPT + r) };
                            x[r] = fs.mul_add(v0, x[r]);
                            x[r + 1] = fs.mul_add(v1, x[r + 1]);
                        } else if r + 1 > j {
                            // SAFETY: inside the broadcast column.
                            let v1 = unsafe { device::ld(xbp, g * RPT + r + 1) };
                            x[r + 1] = fs.mul_add(v1, x[r + 1]);
                        }
                    }
                });
                if g == 0 {
                    x[j] = x[j].sub(f);
                }
            }
            if tid == j {
                // SAFETY: j < COLS; one writer (lane j of warp 0).
                unsafe {
                    device::st(tau, b * COLS + j, t);
                    device::st(fac, j, inv);
                    device::st(bet, j, beta);
                }
            }
            if j + 1 < n {
                let q = j + 1;
                // SAFETY: parity 1 − p buffers, last read before this step's first
                // barrier; pair-aligned stores of the publishing lane's own rows.
                unsafe {
                    let (xbq, rowq) = (xb.add((1 - p) * LEAF), rowb.add((1 - p) * COLS));
                    if c == q {
                        rows32!(|r| {
                            if r % 2 == 0 && (g > 0 || r + 1 > q) {
                                st2(xbq, g * RPT + r, x[r], x[r + 1]);
                            }
                        });
                    }
                    if g == 0 {
                        // q < n ≤ RPT here; the mask only keeps the last unrolled
                        // copy (j = 31, never reached) in bounds.
                        device::st(rowq, c, x[q & (RPT - 1)]);
                    }
                }
            }
            // SAFETY: block-uniform barrier.
            unsafe { device::sync_threads() };
        }
    });
    // Column c: R = R̂·s_c above the diagonal, β̂·s_c on it, V = x̂/(α̂ − β̂) below.
    if c < n {
        // SAFETY: inside the per-column values, written before the last barrier.
        let (fc, bc) = unsafe { (device::ld(fac, c), device::ld(bet, c)) };
        if g == 0 {
            rows32!(|r| {
                let v = if r < c {
                    x[r].mul(s_c)
                } else if r == c {
                    bc.mul(s_c)
                } else {
                    x[r].mul(fc)
                };
                // SAFETY: inside the tile; the tile was last read before the loop.
                unsafe { device::st(stage, c * LDS + r, v) };
            });
        } else {
            rows32!(|r| {
                // SAFETY: as above.
                unsafe { device::st(stage, c * LDS + g * RPT + r, x[r].mul(fc)) };
            });
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    rows32!(|k| {
        if k < n {
            // SAFETY: inside the tile.
            tmp[k] = unsafe { device::ld(stage, k * LDS + tid) };
        }
    });
    if tid < nr {
        rows32!(|k| {
            if k < n {
                // SAFETY: as for the load; row tid is this thread's own.
                unsafe { device::st(a, leaf0 + tid + k * lda, tmp[k]) };
            }
        });
    }
    if tid < n {
        rows32!(|k| {
            if k < n {
                let v = if tid <= k { tmp[k] } else { T::ZERO };
                // SAFETY: b·n + tid < grid·n rows of r_out, k < n.
                unsafe { device::st(r_out, b * n + tid + k * ldr, v) };
            }
        });
    }
}

/// `tsqr_leaf_apply`: for leaf b of a level factored by [`leaf_qr`] (reflectors in
/// `v`, ld `ldv`, rows×n; τ at `tau[b·COLS..]`), Y_b = H_b,1⋯H_b,n·[C_b; 0] with C_b
/// = rows b·n .. b·n + n of `c_in` (ld `ldc`), or the identity when `c_in` is null.
/// Rows i < nr of Y_b go to `out[b·LEAF + i + k·ldo]`, except, when `skip_top` ≠ 0,
/// rows with global index < n. With `rh` (ld COLS) given, the leaf's rows of `v` are
/// overwritten with R = `rh` (rows < n, upper triangle, exact zeros below) and zeros.
///
/// # Safety
/// Grid ≤ ⌈rows/LEAF⌉ blocks, block [`THREADS`], dynamic shared memory
/// [`APPLY_SMEM`] elements; 1 ≤ n ≤ COLS; `v` readable rows×n (read-writable with
/// `rh`); `tau` readable for grid·COLS; `c_in` null or readable (grid·n)×n; `out`
/// writable rows×n (ld ≥ rows); `rh` null or readable n×n (ld COLS); `out` overlaps
/// none of the others.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn leaf_apply<T: Float + Pair>(
    v: *mut T,
    ldv: usize,
    rows: usize,
    n: usize,
    tau: *const T,
    c_in: *const T,
    ldc: usize,
    out: *mut T,
    ldo: usize,
    skip_top: u32,
    rh: *const T,
) {
    let tid = device::thread_x();
    let (c, g) = (tid % COLS, tid / COLS);
    let b = device::block_x();
    let leaf0 = b * LEAF;
    let nr = LEAF.min(rows - leaf0);
    let gi = leaf0 + tid;
    let sm = device::shared::<T::P>().cast::<T>();
    // SAFETY: the offsets stay inside APPLY_SMEM elements (launch contract). The tile's
    // columns start at even offsets (LDV even): pairs of rows are aligned.
    let (stage, taus, pw) = unsafe {
        let taus = sm.add(COLS * LDV);
        (sm, taus, taus.add(COLS))
    };
    // Row tid of the leaf's V (unit diagonal, zeros above and past the matrix).
    let mut tmp = [T::ZERO; COLS];
    if tid < nr {
        rows32!(|k| {
            if k < n && tid > k {
                // SAFETY: gi < rows, k < n: inside v.
                tmp[k] = unsafe { device::ld(v as *const T, gi + k * ldv) };
            }
        });
    }
    rows32!(|k| {
        if k < n {
            let x = if tid == k { T::ONE } else { tmp[k] };
            // SAFETY: inside the tile; thread tid writes row tid only.
            unsafe { device::st(stage, k * LDV + tid, x) };
        }
    });
    if tid < n {
        // SAFETY: inside tau and the shared τ.
        unsafe { device::st(taus, tid, device::ld(tau, b * COLS + tid)) };
    }
    if !rh.is_null() && tid < nr {
        // Row tid of the panel becomes R's row (or zeros); this thread read it above.
        rows32!(|k| {
            if k < n {
                // SAFETY: gi < rows, k < n: inside v; inside rh when gi < n.
                unsafe {
                    let x = if gi < n && gi <= k {
                        device::ld(rh, gi + k * COLS)
                    } else {
                        T::ZERO
                    };
                    device::st(v, gi + k * ldv, x);
                }
            }
        });
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    // This thread's rows of [C_b; 0] (rows < n ≤ RPT all lie in group 0).
    let mut y = [T::ZERO; RPT];
    if c < n && g == 0 {
        rows32!(|r| {
            if r < n {
                y[r] = if c_in.is_null() {
                    if r == c { T::ONE } else { T::ZERO }
                } else {
                    // SAFETY: row b·n + r < grid·n, column c < n of c_in.
                    unsafe { device::ld(c_in, b * n + r + c * ldc) }
                };
            }
        });
    }
    // H_b,k for k = n−1 down to 0: y −= τ_k·v_k·(v_kᵀy), unrolled (k a constant in
    // each copy): v_k is zero above row k, so group 0 skips those rows.
    rows32!(|kk| {
        let k = COLS - 1 - kk;
        if k < n {
            // SAFETY: parity buffers of the dot partials: written here, read after the
            // barrier below, rewritten two steps later (after the next barrier).
            let pwp = unsafe { pw.add((k & 1) * GROUPS * COLS) };
            let vk = k * LDV + g * RPT;
            if c < n {
                let mut acc = [T::ZERO; 4];
                rows32!(|r| {
                    if r % 2 == 0 {
                        if g > 0 || r >= k {
                            // SAFETY: pair-aligned (LDV, RPT, r even), inside the tile.
                            let (x0, x1) = unsafe { ld2(stage, vk + r) };
                            acc[r & 3] = x0.mul_add(y[r], acc[r & 3]);
                            acc[(r + 1) & 3] = x1.mul_add(y[r + 1], acc[(r + 1) & 3]);
                        } else if r + 1 >= k {
                            // SAFETY: inside the tile.
                            let x1 = unsafe { device::ld(stage, vk + r + 1) };
                            acc[(r + 1) & 3] = x1.mul_add(y[r + 1], acc[(r + 1) & 3]);
                        }
                    }
                });
                // SAFETY: one writer per (group, column).
                unsafe { device::st(pwp, g * COLS + c, sum4(&acc)) };
            }
            // SAFETY: block-uniform barrier.
            unsafe { device::sync_threads() };
            if c < n {
                let mut part = [T::ZERO; GROUPS];
                for (gg, pv) in part.iter_mut().enumerate() {
                    // SAFETY: inside the partials.
                    *pv = unsafe { device::ld(pwp, gg * COLS + c) };
                }
                let s = sum8(&part);
                // SAFETY: inside the shared τ.
                let f = unsafe { device::ld(taus, k) }.mul(s).neg();
                rows32!(|r| {
                    if r % 2 == 0 {
                        if g > 0 || r >= k {
                            // SAFETY: pair-aligned, inside the tile.
                            let (x0, x1) = unsafe { ld2(stage, vk + r) };
                            y[r] = f.mul_add(x0, y[r]);
                            y[r + 1] = f.mul_add(x1, y[r + 1]);
                        } else if r + 1 >= k {
                            // SAFETY: inside the tile.
                            let x1 = unsafe { device::ld(stage, vk + r + 1) };
                            y[r + 1] = f.mul_add(x1, y[r + 1]);
                        }
                    }
                });
            }
        }
    });
    // SAFETY: block-uniform barrier (every read of V done).
    unsafe { device::sync_threads() };
    if c < n {
        rows32!(|r| {
            // SAFETY: inside the tile.
            unsafe { device::st(stage, c * LDV + g * RPT + r, y[r]) };
        });
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    rows32!(|k| {
        if k < n {
            // SAFETY: inside the tile.
            tmp[k] = unsafe { device::ld(stage, k * LDV + tid) };
        }
    });
    if tid < nr && (skip_top == 0 || gi >= n) {
        rows32!(|k| {
            if k < n {
                // SAFETY: gi < rows, k < n: inside out; row gi is this thread's own.
                unsafe { device::st(out, gi + k * ldo, tmp[k]) };
            }
        });
    }
}

/// `tsqr_reconstruct`: from Q₁ = the top n×n of level 0's explicit Q (in `y`, ld
/// `ldy`) and the tree's R (`r_top`, ld `ldr`): the LU without pivoting Q₁ − S = L₁U
/// with sᵢ = −1 when the i-th pivot's Schur value is ≥ 0, else +1 — except for the
/// last column of a square panel (`rows` = n), whose reflector has no rows below the
/// diagonal and is the identity as in LAPACK: there sᵢ is the Schur value's sign (±1
/// in exact arithmetic) and uᵢᵢ = 0, so τᵢ = 0; writes V₁ = L₁ (unit
/// diagonal, zeros above) over `y`'s top n×n, T = −U·S·L₁⁻ᵀ (n×n, zeros below) to `t`
/// (ld `ldt`), τᵢ = tᵢᵢ to `tau`, M = U⁻¹ to `m` (ld COLS) and R = S·R_tree (zeros
/// below the diagonal) to `rh` (ld COLS).
///
/// # Safety
/// Grid 1, block [`RECON_THREADS`], dynamic shared memory [`RECON_SMEM`] elements;
/// 1 ≤ n ≤ COLS; `y` read-writable n×n; `r_top` readable n×n; `t` writable n×n; `tau`
/// writable for n; `m`, `rh` writable COLS×n; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reconstruct<T: Float>(
    y: *mut T,
    ldy: usize,
    rows: usize,
    n: usize,
    r_top: *const T,
    ldr: usize,
    t: *mut T,
    ldt: usize,
    tau: *mut T,
    m: *mut T,
    rh: *mut T,
) {
    let tid = device::thread_x();
    let (i, j) = (tid % COLS, tid / COLS);
    let sm = device::shared::<T>();
    // SAFETY: the offsets stay inside RECON_SMEM elements (launch contract).
    let (lu, linv, uinv, sv) = unsafe {
        let linv = sm.add(COLS * LDR);
        let uinv = linv.add(COLS * LDR);
        (sm, linv, uinv, uinv.add(COLS * LDR))
    };
    let inside = i < n && j < n;
    if inside {
        // SAFETY: inside y and the shared LU.
        unsafe { device::st(lu, i + j * LDR, device::ld(y as *const T, i + j * ldy)) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        // SAFETY: inside the shared LU; written before the last barrier.
        let akk = unsafe { device::ld(lu, k + k * LDR) };
        let (s, ukk) = if k + 1 == rows {
            (if akk >= T::ZERO { T::ONE } else { T::ONE.neg() }, T::ZERO)
        } else {
            let s = if akk >= T::ZERO { T::ONE.neg() } else { T::ONE };
            (s, akk.sub(s))
        };
        // SAFETY: block-uniform barrier: every thread read a_kk before it changes.
        unsafe { device::sync_threads() };
        if j == k && inside {
            // SAFETY: one writer per entry.
            unsafe {
                if i == k {
                    device::st(lu, k + k * LDR, ukk);
                    device::st(sv, k, s);
                } else if i > k {
                    device::st(lu, i + k * LDR, device::ld(lu, i + k * LDR).div(ukk));
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside && i > k && j > k {
            // SAFETY: one writer per entry; the operands (column k, row k) are final.
            unsafe {
                let x = device::ld(lu, i + k * LDR)
                    .neg()
                    .mul_add(device::ld(lu, k + j * LDR), device::ld(lu, i + j * LDR));
                device::st(lu, i + j * LDR, x);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    // L₁⁻¹ and U⁻¹ by substitution on all columns at once: step k makes row k of
    // L₁⁻¹ (forward) and row n−1−k of U⁻¹ (backward) final.
    if inside {
        let e = if i == j { T::ONE } else { T::ZERO };
        // SAFETY: one writer per entry.
        unsafe {
            device::st(linv, i + j * LDR, e);
            device::st(uinv, i + j * LDR, e);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        let kk = n - 1 - k;
        if inside && i == kk {
            // SAFETY: one writer per entry of row kk. u_kk = 0 only for a square
            // panel's last column, whose row of U⁻¹ no output uses.
            unsafe {
                let u = device::ld(lu, kk + kk * LDR);
                let x = device::ld(uinv, kk + j * LDR);
                device::st(
                    uinv,
                    kk + j * LDR,
                    if u == T::ZERO { T::ZERO } else { x.div(u) },
                );
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside {
            // SAFETY: one writer per entry; rows k of L₁⁻¹ and kk of U⁻¹ are final.
            unsafe {
                if i > k {
                    let x = device::ld(lu, i + k * LDR)
                        .neg()
                        .mul_add(device::ld(linv, k + j * LDR), device::ld(linv, i + j * LDR));
                    device::st(linv, i + j * LDR, x);
                }
                if i < kk {
                    let x = device::ld(lu, i + kk * LDR).neg().mul_add(
                        device::ld(uinv, kk + j * LDR),
                        device::ld(uinv, i + j * LDR),
                    );
                    device::st(uinv, i + j * LDR, x);
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    if inside {
        // SAFETY: inside every buffer (i, j < n); one writer per entry.
        unsafe {
            let si = device::ld(sv, i);
            // T_ij = Σ_{i≤k≤j} (−u_ik·s_k)·(L₁⁻¹)_jk.
            let mut tij = T::ZERO;
            if i <= j {
                for k in i..=j {
                    let w = device::ld(lu, i + k * LDR).mul(device::ld(sv, k)).neg();
                    tij = w.mul_add(device::ld(linv, j + k * LDR), tij);
                }
            }
            device::st(t, i + j * ldt, tij);
            if i == j {
                device::st(tau, i, tij);
            }
            let v1 = if i > j {
                device::ld(lu, i + j * LDR)
            } else if i == j {
                T::ONE
            } else {
                T::ZERO
            };
            device::st(y, i + j * ldy, v1);
            device::st(m, i + j * COLS, device::ld(uinv, i + j * LDR));
            let r = if i <= j {
                si.mul(device::ld(r_top, i + j * ldr))
            } else {
                T::ZERO
            };
            device::st(rh, i + j * COLS, r);
        }
    }
}
