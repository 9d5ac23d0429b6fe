//! What a batched call returns: each problem's outcome ([`BatchReport`]) and the batch's
//! least-squares solutions ([`BatchSolution`]).
#![forbid(unsafe_code)]

use crate::base::error::{Error, Result};
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;

/// Each problem's outcome of one batched update, in problem order: `Ok(())` where the
/// problem was updated, its own error where it refused (and was left bit for bit unchanged).
#[derive(Debug)]
pub struct BatchReport {
    /// The outcome of problem i at index i.
    pub outcomes: Vec<Result<()>>,
}

impl BatchReport {
    /// Every problem was updated.
    pub fn all_ok(&self) -> bool {
        self.outcomes.iter().all(Result::is_ok)
    }

    /// The refusing problems with their errors, in problem order.
    pub fn refused(&self) -> impl Iterator<Item = (usize, &Error)> {
        self.outcomes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e)))
    }

    /// How many problems were updated.
    pub fn updated(&self) -> usize {
        self.outcomes.iter().filter(|r| r.is_ok()).count()
    }
}

/// The least-squares solutions of every problem of a batch
/// (docs/algorithms.md#least-squares).
#[derive(Debug)]
pub struct BatchSolution<T> {
    /// x of every problem in C order (B, n, q): entry (i, r, c) at `i·n·q + r·q + c`.
    /// NaN for a problem whose solve failed.
    pub x: Vec<T>,
    /// The residual norms ‖bⱼ − A xⱼ‖ in C order (B, q): entry (i, j) at `i·q + j`. NaN for
    /// a problem whose solve failed.
    pub residual_norms: Vec<f64>,
    /// Each problem's outcome: `Ok(())` or why its solve failed.
    pub status: Vec<Result<()>>,
    /// Columns n of each x.
    pub n: usize,
    /// Right-hand sides q.
    pub q: usize,
}

impl<T: Scalar> BatchSolution<T> {
    /// Problem i's x (n×q), `None` for i ≥ B.
    pub fn x_of(&self, i: usize) -> Option<Mat<T>> {
        let (n, q) = (self.n, self.q);
        (i < self.status.len()).then(|| Mat::from_fn(n, q, |r, c| self.x[i * n * q + r * q + c]))
    }

    /// Problem i's residual norms (length q), `None` for i ≥ B.
    pub fn residual_norms_of(&self, i: usize) -> Option<&[f64]> {
        self.residual_norms.get(i * self.q..(i + 1) * self.q)
    }
}

/// Splits per-problem outcomes: every value when all succeeded, else each refusing problem
/// with its error.
pub(crate) fn refusals<R>(outcomes: Vec<Result<R>>) -> Result<Vec<R>, Vec<(usize, Error)>> {
    let mut ok = Vec::with_capacity(outcomes.len());
    let mut bad = Vec::new();
    for (i, r) in outcomes.into_iter().enumerate() {
        match r {
            Ok(x) => ok.push(x),
            Err(e) => bad.push((i, e)),
        }
    }
    if bad.is_empty() {
        Ok(ok)
    } else {
        Err(bad)
    }
}
