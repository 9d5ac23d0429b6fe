//! Updates of explicit factors (Q, R) in real or complex arithmetic, for tall, square and
//! wide factorisations, full (Q m×m, R m×n) or economic (Q m×n, R n×n with m > n): the
//! algorithms behind [`crate::explicit`] (docs/algorithms.md#explicit-factors).
//!
//! Every step is a unitary 2×2 rotation G applied to two rows of R (and of any vector that
//! transforms as Qᴴu) with Q ← Q·Gᴴ on the same two columns, so Q·R is unchanged; each
//! update is a sequence of such steps chosen to zero one entry at a time, followed by
//! dropping a row and a column that the steps have decoupled. A factorisation is economic
//! exactly when Q has fewer columns than rows; an update that would need a column of Q
//! that cannot exist (a square Q) works on the full form instead, as SciPy does.
#![forbid(unsafe_code)]

mod cols;
mod dense;
mod orth;
mod rank;
mod rotation;
mod rows;
mod trapezoid;

pub(crate) use cols::{delete_col, insert_col};
pub(crate) use dense::Dense;
pub(crate) use rank::rank_one;
pub(crate) use rows::{delete_row, insert_row};
pub(crate) use trapezoid::Trapezoid;

use crate::base::error::Result;

/// Columns of R an update sweeps together: their rotation chains are independent, so
/// interleaving them lets the processor overlap what one column's chain serialises.
const BLOCK: usize = 8;

/// Whether a sweep of about `rotations` rotations over R's columns (each on two entries),
/// independent across columns, runs over the CPU backend's threads.
fn sweep_in_parallel<T: Field>(rotations: usize) -> bool {
    let flops = 6.0 * (T::PARTS * T::PARTS) as f64 * rotations as f64;
    flops >= crate::cpu::PARALLEL_MIN_FLOPS && crate::cpu::settings::threads() > 1
}
use crate::base::field::Field;
use crate::base::rotation_chain::ChainRotation;

/// Where an update's Q lives and what the updates ask of it: on the host ([`Dense`]) or
/// in device memory (the GPU state of [`crate::explicit`]), where rotations may be
/// gathered and applied together before anything reads Q. Every call but `rotate` sees
/// the rotations passed before it applied.
pub(crate) trait QStore<T: Field> {
    /// m.
    fn rows(&self) -> usize;
    /// t.
    fn cols(&self) -> usize;
    /// Q ← Q·Gᴴ on the rotation's two columns.
    fn rotate(&mut self, rot: ChainRotation<T>) -> Result<()>;
    /// Qᴴx (`x` of length m).
    fn adjoint_times(&mut self, x: &[T]) -> Result<Vec<T>>;
    /// y ← y − Q·c (`c` of length t).
    fn sub_times(&mut self, c: &[T], y: &mut [T]) -> Result<()>;
    /// One Gram–Schmidt pass: c = Qᴴ·rest, rest ← rest − Q·c; returns c.
    fn project_pass(&mut self, rest: &mut [T]) -> Result<Vec<T>> {
        let c = self.adjoint_times(rest)?;
        self.sub_times(&c, rest)?;
        Ok(c)
    }
    /// Q[:, first..] ← Q[:, first..]·(I − τ·v·vᴴ) (`v` of length t − first, τ real: a
    /// Hermitian reflector).
    fn reflect_cols(&mut self, first: usize, v: &[T], tau: T::Real) -> Result<()>;
    /// Appends `col` (length m) as column t.
    fn push_col(&mut self, col: &[T]) -> Result<()>;
    /// Drops the last column.
    fn pop_col(&mut self) -> Result<()>;
    /// Inserts a zero row before row `k`.
    fn insert_zero_row(&mut self, k: usize) -> Result<()>;
    /// Removes row `k`.
    fn remove_row(&mut self, k: usize) -> Result<()>;
    /// Row `k` (length t).
    fn row(&mut self, k: usize) -> Result<Vec<T>>;
    /// Every row's 2-norm.
    fn row_norms(&mut self) -> Result<Vec<T::Real>>;
    /// An independent copy (to restore when a multi-step update is refused part way).
    fn snapshot(&self) -> Result<Self>
    where
        Self: Sized;
}

/// The factors an update works on: Q (m×t) and R (t×n), t = m (full) or t = n < m
/// (economic).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Factors<T, Q = Dense<T>> {
    /// Q, m×t with orthonormal columns.
    pub q: Q,
    /// R, t×n upper trapezoidal.
    pub r: Trapezoid<T>,
}

impl<T: Field, Q: QStore<T>> Factors<T, Q> {
    /// Rows of A = Q·R.
    pub fn m(&self) -> usize {
        self.q.rows()
    }
    /// Columns of A.
    pub fn n(&self) -> usize {
        self.r.cols()
    }
    /// Whether Q is economic (fewer columns than rows).
    pub fn economic(&self) -> bool {
        self.q.cols() < self.q.rows()
    }
}
