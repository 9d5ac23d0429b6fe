//! [`Factors`]: the device factors of a state as the update algorithms read them. An
//! operation's dispatch (`ops/<verb>/`) lends them from its state, the algorithm builds
//! the new factors in new buffers, and the dispatch swaps them in.

use crate::base::dims::Dims;
use crate::gpu::runtime::matrix::DevMat;

/// The device factors an update reads (docs/design.md "State"): R, d = Qᵀb, Q (m×m or Q₁),
/// the kept b (thin kind), the residual norms (R-only kind) and the rank tolerance.
#[derive(Clone, Copy)]
pub(crate) struct Factors<'a, T> {
    /// Dimensions and Q policy.
    pub(crate) dims: Dims,
    /// R.
    pub(crate) r: &'a DevMat<T>,
    /// d = Qᵀb.
    pub(crate) d: &'a DevMat<T>,
    /// Q (m×m) or Q₁ (m×n), where held.
    pub(crate) q: Option<&'a DevMat<T>>,
    /// The kept b, where held (rows 0..m: a thin state's, or settled kept data).
    pub(crate) b: Option<&'a DevMat<T>>,
    /// The residual norms of an R-only state (empty otherwise).
    pub(crate) rho: &'a [T],
    /// Relative rank tolerance.
    pub(crate) rank_tol: f64,
}

impl<'a, T> Factors<'a, T> {
    /// Q₁ of a thin state.
    pub(crate) fn q1(&self) -> &'a DevMat<T> {
        self.q.expect("a thin state holds Q₁")
    }

    /// The kept b of a thin state.
    pub(crate) fn kept_b(&self) -> &'a DevMat<T> {
        self.b.expect("a thin state keeps b")
    }
}

/// A state's factors after an update, in new buffers for the dispatch to swap in: R′, d′
/// and Q′: by default an `Option`, `None` where the kind holds no Q (for a thin state
/// some updates return the small orthogonal factor H here, which the dispatch applies to
/// Q₁); `Q = DevMat<T>` where an update always returns Q′.
pub(crate) struct NewFactors<T, Q = Option<DevMat<T>>> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// Q′ or H.
    pub(crate) q: Q,
}
