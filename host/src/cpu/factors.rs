//! [`FactorsMut`]: a CPU state's factors as the update bodies in `cpu/` change them. An
//! operation's dispatch (`ops/<verb>/cpu.rs`) validates, lends its state's parts here, and
//! the body writes the new factors back only once they have passed the rank test, so a
//! failed update leaves the state as it was.
#![forbid(unsafe_code)]

use crate::base::dims::{check_rank_of, Dims};
use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::params::UpdateParams;
use crate::base::scalar::Scalar;

/// The data a thin or R-only state keeps.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KeptData<T> {
    /// A (m×n), when kept.
    pub(crate) a: Option<Mat<T>>,
    /// b (m×q).
    pub(crate) b: Mat<T>,
}

/// The parts of a CPU state an update reads and replaces (docs/design.md "State"):
/// dimensions, R, d = Qᵀb, Q (m×m or Q₁), the residual norms (R-only kind), the kept
/// data, the update options and the rank tolerance.
pub(crate) struct FactorsMut<'a, T: Scalar> {
    /// Dimensions and Q policy.
    pub(crate) dims: &'a mut Dims,
    /// R.
    pub(crate) r: &'a mut Mat<T>,
    /// d = Qᵀb.
    pub(crate) d: &'a mut Mat<T>,
    /// Q (m×m) or Q₁ (m×n), where held.
    pub(crate) q: &'a mut Option<Mat<T>>,
    /// The residual norms of an R-only state (empty otherwise).
    pub(crate) rho: &'a mut Vec<T>,
    /// The kept data, where held.
    pub(crate) data: &'a mut Option<KeptData<T>>,
    /// Update options (block size).
    pub(crate) params: UpdateParams,
    /// Relative rank tolerance.
    pub(crate) rank_tol: f64,
}

impl<T: Scalar> FactorsMut<'_, T> {
    /// Installs the factors of a full-kind update (m×m Q; no residual norms, no kept
    /// data) once they have passed the rank test.
    pub(crate) fn replace_full(
        &mut self,
        dims: Dims,
        r: Mat<T>,
        d: Mat<T>,
        q: Mat<T>,
    ) -> Result<()> {
        self.replace_full_with(dims, r, d, |old| *old = q)
    }

    /// Installs R and d of a full-kind update once R has passed the rank test, and only
    /// then changes Q in its own buffer by `update_q` (docs/algorithms.md#factors-in-place),
    /// so that a refused update leaves Q as it was.
    pub(crate) fn replace_full_with(
        &mut self,
        dims: Dims,
        r: Mat<T>,
        d: Mat<T>,
        update_q: impl FnOnce(&mut Mat<T>),
    ) -> Result<()> {
        check_rank_of(&r, dims.n, self.rank_tol)?;
        update_q(self.q.as_mut().expect("a full state holds Q"));
        *self.dims = dims;
        *self.r = r;
        *self.d = d;
        *self.rho = Vec::new();
        *self.data = None;
        Ok(())
    }
}
