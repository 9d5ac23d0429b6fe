//! Updates of an explicit QR factorisation (Q, R), as SciPy's `qr_insert`, `qr_delete` and
//! `qr_update` define them: real or complex elements (`f32`, `f64`, [`c32`], [`c64`]),
//! tall, square or wide matrices (any m and n), full (Q m×m, R m×n) or economic (Q m×n,
//! R n×n, m > n) factorisations, on the CPU.
//!
//! Each update is a sequence of unitary 2×2 rotations (docs/algorithms.md#explicit-factors);
//! Q stays unitary to O(u) per update and Q·R equals the updated A to O(u)·‖A‖ per update.
//! A complex rank-k update adds U·Vᴴ (SciPy's convention). An economic factorisation whose
//! update cannot stay economic (a column inserted when Q is already square, a row deleted
//! from a square one) continues in the full form, as SciPy's does.
//!
//! Every call validates first and changes nothing when it fails.
//!
//! # Examples
//! ```
//! use cuqr::explicit::{c64, ExplicitQr};
//! // A = Q·R with Q = I (3×3) and R 3×4 upper trapezoidal: a wide factorisation
//! let z = c64::new(0.0, 0.0);
//! let mut q = vec![z; 9];
//! for i in 0..3 {
//!     q[i + 3 * i] = c64::new(1.0, 0.0);
//! }
//! let r: Vec<c64> = (0..12)
//!     .map(|e| if e % 3 <= e / 3 { c64::new(1.0 + e as f64, -0.5) } else { z })
//!     .collect();
//! let mut qr = ExplicitQr::new(&q, (3, 3), &r, (3, 4)).unwrap();
//! qr.delete_rows(1, 1).unwrap();
//! assert_eq!((qr.q_shape(), qr.r_shape()), ((2, 2), (2, 4)));
//! ```
#![forbid(unsafe_code)]

pub use crate::base::field::{c32, c64, from_parts, to_parts, Field};

use crate::base::error::{Error, Result};
use crate::cpu::explicit::{Dense, Factors, Trapezoid};

mod gpu;
mod updates;

pub use gpu::GpuExplicitQr;
use updates::finite;

/// The element types that [`ExplicitQr::factorize`] factorises (with faer's QR): f32,
/// f64, [`c32`] and [`c64`].
pub trait QrField: Field + faer::traits::ComplexField {}
impl QrField for f32 {}
impl QrField for f64 {}
impl QrField for c32 {}
impl QrField for c64 {}

/// A QR factorisation A = Q·R held as explicit, column-major Q and R.
#[derive(Clone, Debug, PartialEq)]
pub struct ExplicitQr<T: Field> {
    f: Factors<T>,
}

impl<T: Field> ExplicitQr<T> {
    /// The factorisation with Q (`q_shape` = (m, t), column-major) and R (`r_shape` =
    /// (t, n), column-major): full when t = m, economic when t = n < m. Q is taken as
    /// unitary and R as upper trapezoidal (not checked).
    ///
    /// Errors: [`Error::Shape`] for lengths or shapes that do not fit,
    /// [`Error::NonFinite`] for NaN or ±∞ in either factor.
    pub fn new(q: &[T], q_shape: (usize, usize), r: &[T], r_shape: (usize, usize)) -> Result<Self> {
        const OP: &str = "ExplicitQr::new";
        let ((m, t), (_, n)) = (q_shape, r_shape);
        if q.len() != m * t {
            return Err(Error::shape(OP, "Q's element count", q.len(), m * t));
        }
        check_shapes(OP, q_shape, r, r_shape)?;
        finite(OP, "Q", q, m)?;
        finite(OP, "R", r, t)?;
        Ok(Self {
            f: Factors {
                q: Dense::from_col_major(m, t, q.to_vec()),
                r: Trapezoid::from_col_major(t, n, r),
            },
        })
    }

    /// The QR factorisation of the column-major m×n `a` (faer's blocked Householder QR):
    /// economic (Q m×n, R n×n) when `economic` and m > n, else full (Q m×m, R m×n).
    ///
    /// Errors: [`Error::Shape`] when `a` is not m·n long, [`Error::NonFinite`].
    ///
    /// # Examples
    /// ```
    /// use cuqr::explicit::{c64, ExplicitQr};
    /// let a: Vec<c64> = (0..12).map(|e| c64::new(1.0 / (1.0 + e as f64), e as f64)).collect();
    /// let mut qr = ExplicitQr::factorize(&a, (4, 3), true)?;
    /// assert_eq!((qr.q_shape(), qr.r_shape()), ((4, 3), (3, 3)));
    /// qr.delete_rows(0, 1)?;
    /// assert_eq!(qr.q_shape(), (3, 3));
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize(a: &[T], (m, n): (usize, usize), economic: bool) -> Result<Self>
    where
        T: QrField,
    {
        const OP: &str = "ExplicitQr::factorize";
        if a.len() != m * n {
            return Err(Error::shape(OP, "A's element count", a.len(), m * n));
        }
        finite(OP, "A", a, m)?;
        let qr = faer::Mat::<T>::from_fn(m, n, |i, j| a[i + j * m]).qr();
        let t = if economic && m > n { n } else { m };
        let q = if t == m {
            qr.compute_Q()
        } else {
            qr.compute_thin_Q()
        };
        // faer keeps min(m, n) rows of R: a full R has zero rows below them
        let r = qr.thin_R();
        let r = Trapezoid::from_col_major(
            t,
            n,
            &(0..n)
                .flat_map(|j| (0..t).map(move |i| (i, j)))
                .map(|(i, j)| if i < r.nrows() { r[(i, j)] } else { T::zero() })
                .collect::<Vec<_>>(),
        );
        let q = (0..t)
            .flat_map(|j| (0..m).map(move |i| (i, j)))
            .map(|(i, j)| q[(i, j)])
            .collect();
        Ok(Self {
            f: Factors {
                q: Dense::from_col_major(m, t, q),
                r,
            },
        })
    }

    /// Q's shape (m, t).
    pub fn q_shape(&self) -> (usize, usize) {
        (self.f.q.rows(), self.f.q.cols())
    }
    /// R's shape (t, n).
    pub fn r_shape(&self) -> (usize, usize) {
        (self.f.r.rows(), self.f.r.cols())
    }
    /// Q, column-major.
    pub fn q(&self) -> &[T] {
        self.f.q.as_slice()
    }
    /// R, column-major.
    pub fn r(&self) -> Vec<T> {
        self.f.r.to_col_major()
    }
    /// Whether Q is economic (fewer columns than rows).
    pub fn is_economic(&self) -> bool {
        self.f.economic()
    }
    /// (Q, R), column-major.
    pub fn into_parts(self) -> (Vec<T>, Vec<T>) {
        (self.f.q.into_vec(), self.f.r.to_col_major())
    }

    /// Inserts the `p` rows `rows` (a p×n column-major block) before row `k` (0 ≤ k ≤ m).
    ///
    /// Errors: [`Error::OutOfRange`], [`Error::Shape`], [`Error::NonFinite`].
    pub fn insert_rows(&mut self, k: usize, rows: &[T], p: usize) -> Result<()> {
        updates::insert_rows("ExplicitQr::insert_rows", &mut self.f, k, rows, p)
    }

    /// Deletes rows `k .. k+p` (every row may go: Q becomes 0×0 and R 0×n).
    ///
    /// Errors: [`Error::OutOfRange`]; [`Error::DowndateFailed`] when an economic Q's
    /// columns are so far from orthonormal that no completion is found.
    pub fn delete_rows(&mut self, k: usize, p: usize) -> Result<()> {
        updates::delete_rows("ExplicitQr::delete_rows", &mut self.f, k, p)
    }

    /// Inserts the `p` columns `cols` (an m×p column-major block) before column `k`
    /// (0 ≤ k ≤ n). An economic factorisation refuses a column whose reciprocal condition
    /// estimate against Q (SciPy's test) is below `rcond` (default: the type's machine
    /// epsilon) with [`Error::RankDeficient`] (its `r_jj` is the estimate); once Q is
    /// square, the rest are inserted in the full form.
    ///
    /// Errors: [`Error::OutOfRange`], [`Error::Shape`], [`Error::NonFinite`],
    /// [`Error::RankDeficient`], [`Error::InvalidParam`] for a negative or NaN `rcond`.
    pub fn insert_cols(
        &mut self,
        k: usize,
        cols: &[T],
        p: usize,
        rcond: Option<f64>,
    ) -> Result<()> {
        updates::insert_cols("ExplicitQr::insert_cols", &mut self.f, k, cols, p, rcond)
    }

    /// Deletes columns `k .. k+p` (every column may go: R becomes m×0, or 0×0 with Q m×0
    /// for an economic factorisation).
    ///
    /// Errors: [`Error::OutOfRange`].
    pub fn delete_cols(&mut self, k: usize, p: usize) -> Result<()> {
        updates::delete_cols("ExplicitQr::delete_cols", &mut self.f, k, p)
    }

    /// A ← A + U·Vᴴ with U m×p and V n×p (column-major): p rank-one updates.
    ///
    /// Errors: [`Error::Shape`], [`Error::NonFinite`].
    pub fn rank_k(&mut self, u: &[T], v: &[T], p: usize) -> Result<()> {
        updates::rank_k("ExplicitQr::rank_k", &mut self.f, u, v, p)
    }
}

/// The shape rules of [`ExplicitQr::new`] for Q (m, t) and R (t, n), and `r`'s length.
fn check_shapes<T: Field>(
    op: &'static str,
    (m, t): (usize, usize),
    r: &[T],
    (tr, n): (usize, usize),
) -> Result<()> {
    if r.len() != tr * n {
        return Err(Error::shape(op, "R's element count", r.len(), tr * n));
    }
    if tr != t {
        return Err(Error::shape(op, "R's rows", tr, t));
    }
    if t != m && !(t == n && m > n) {
        return Err(Error::shape(
            op,
            "Q's columns (m for a full Q, n < m for an economic one)",
            t,
            m,
        ));
    }
    Ok(())
}
