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

mod cols;
pub mod complement;
mod drift;
mod factor;
mod rank;
mod rows;
mod solve;
mod team;

pub use cols::{delete_cols, insert_cols, shift_col};
pub use drift::refresh;
pub use factor::factor;
pub use rank::rank_one;
pub use rows::{delete_rows, insert_rows};
pub use solve::solve;

/// `status` codes.
pub const OK: u32 = 0;
/// A row deletion refused: the rows left do not determine R (the completion's test).
pub const DOWNDATE_REFUSED: u32 = 1;
/// A NaN or ±∞ in the problem's data, or an update whose result would not be finite.
pub const NON_FINITE: u32 = 2;
/// The solve's rank test failed (x is NaN), or an inserted column lies in range(Q₁).
pub const RANK_DEFICIENT: u32 = 3;
/// The drift check refreshed the problem's factors.
pub const REFRESHED: u32 = 4;
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
    /// [`super::insert_cols`]: [Q₁ U] (m×(n+p)), R ((n+p)×(n+p)), two (n+p)-vectors and
    /// 2(n+p) rotation entries.
    pub const fn insert_cols(m: usize, n: usize, p: usize) -> usize {
        m * (n + p) + (n + p) * (n + p) + 4 * (n + p)
    }
    /// [`super::shift_col`]: [Q₁ a] (m×(n+1)), R (n×n), two n-vectors and 2n rotation
    /// entries.
    pub const fn shift_col(m: usize, n: usize) -> usize {
        m * (n + 1) + n * n + 4 * n
    }
    /// [`super::refresh`]: Q₁ and its Householder QR (m×n each) and τ (n), as
    /// [`factor`].
    pub const fn refresh(m: usize, n: usize) -> usize {
        factor(m, n)
    }
    /// [`super::solve`]: R (n×n) and d (n).
    pub const fn solve(n: usize) -> usize {
        n * n + n
    }
}
