//! [`CpuQr`]: the host-resident factorisation state (R, d = Qᵀb, optional Q).
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::mat::Mat;
use crate::base::params::UpdateParams;
use crate::base::scalar::Scalar;
use crate::cpu::factors::FactorsMut;
pub(crate) use crate::cpu::factors::KeptData;

/// A QR factorisation held on the host and updated serially.
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, Mat, QPolicy, QrUpdate, FactorParams};
/// let a = Mat::<f64>::from_fn(6, 3, |i, j| 1.0 / (1.0 + i as f64 + 2.0 * j as f64) + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64 - 2.5);
/// let mut qr = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// qr.delete_cols(1, 1).unwrap();
/// let sol = qr.solve().unwrap();
/// assert_eq!(sol.x.nrows(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct CpuQr<T: Scalar> {
    pub(crate) dims: Dims,
    /// R: m×n upper trapezoidal under `QPolicy::Full`, n×n upper triangular otherwise.
    pub(crate) r: Mat<T>,
    /// d = Qᵀb: m×q under `QPolicy::Full`, its first n rows otherwise.
    pub(crate) d: Mat<T>,
    /// Q: m×m under `QPolicy::Full`, Q₁ (m×n) under `QPolicy::Thin`, none under `None`.
    pub(crate) q: Option<Mat<T>>,
    /// The residual norms ‖bⱼ − A xⱼ‖ of an R-only state (empty for the other kinds).
    pub(crate) rho: Vec<T>,
    /// The kept data: b for a thin state, A and b for an R-only state built with
    /// `keep_data`.
    pub(crate) data: Option<KeptData<T>>,
    pub(crate) params: UpdateParams,
    /// Relative rank tolerance (|R_jj| ≤ rank_tol·‖R‖_F is rank deficient).
    pub(crate) rank_tol: f64,
    /// The drift estimate and counts (docs/algorithms.md#drift-control).
    pub(crate) drift: crate::base::solution::DriftReport,
}

impl<T: Scalar> CpuQr<T> {
    /// Dimensions and policy.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// Borrow R (m×n).
    pub fn r_ref(&self) -> &Mat<T> {
        &self.r
    }
    /// Borrow d (m×q).
    pub fn d_ref(&self) -> &Mat<T> {
        &self.d
    }
    /// Borrow Q (m×m) if held.
    pub fn q_ref(&self) -> Option<&Mat<T>> {
        self.q.as_ref()
    }

    /// Makes room in Q's buffer for `rows` more rows and `cols` more columns of A, as a
    /// `Vec` reserves: row and column insertions of the full and thin kinds then grow Q in
    /// place without a reallocation (docs/algorithms.md#factors-in-place). The buffer grows by
    /// itself where an insertion needs it (by an eighth more than asked); this is for a
    /// caller who knows how far the problem will grow. Nothing else changes.
    ///
    /// # Panics
    /// If the new capacity overflows, as `Vec::reserve` does.
    ///
    /// # Examples
    /// ```
    /// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(6, 3, |i, j| ((i * 3 + j * 5) % 7) as f64 + (i == j) as u8 as f64);
    /// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64);
    /// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
    /// st.reserve(4, 0);
    /// for k in 0..4 {
    ///     st.insert_row(k, &[1.0, -1.0, k as f64], &[0.5])?;
    /// }
    /// assert_eq!(st.q_ref().unwrap().nrows(), 10);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn reserve(&mut self, rows: usize, cols: usize) {
        let m = self.dims.m.saturating_add(rows);
        if let Some(q) = self.q.as_mut() {
            let qcols = match self.dims.policy {
                crate::base::params::QPolicy::Full => m,
                _ => self.dims.n.saturating_add(cols),
            };
            q.reserve_total(m.saturating_mul(qcols));
        }
    }

    /// The state's factors lent to an update body in `cpu/`.
    pub(crate) fn factors_mut(&mut self) -> FactorsMut<'_, T> {
        FactorsMut {
            dims: &mut self.dims,
            r: &mut self.r,
            d: &mut self.d,
            q: &mut self.q,
            rho: &mut self.rho,
            data: &mut self.data,
            params: self.params,
            rank_tol: self.rank_tol,
        }
    }
}
