//! Batched states: B independent least-squares problems of one shape (each its own A, m×n,
//! and b, m×q) factorised and updated by one call each (docs/algorithms.md#batched-states).
//!
//! Positions (k0, p, drop) are shared by the whole batch; data come as a [`BatchRef`] with
//! one matrix per problem. A call first checks what the problems share: a position out of
//! range, a [`BatchRef`] of the wrong batch size or shape, an empty block, an update the
//! state kind cannot make; any of these returns `Err` and changes no problem. Then each
//! problem is updated by its own [`CpuQr`], where it can refuse by itself (non-finite data
//! in its block, a dependent column, a failed downdate):
//!
//! * an update that keeps m and n (`rank_one`, `rank_k`, `replace_cols`, `shift_col`, a
//!   `slide` with as many rows in as out) proceeds per problem: it returns a
//!   [`BatchReport`] naming each refusing problem, left bit for bit unchanged;
//! * factorisation and an update that changes m or n (rows or columns in or out) is
//!   all-or-nothing across the batch, so that the problems keep one shape: if any problem
//!   refuses, none changes and the call returns [`Error::BatchRefused`]
//!   with each refusing problem's error.
//!
//! Problems run serially on small batches and in parallel on rayon's pool
//! ([`crate::cpu::set_threads`]) on large ones.
#![forbid(unsafe_code)]

mod gpu;
mod gpu_kept;
mod gpu_q;
mod report;
mod run;
mod updates;
mod view;

pub use gpu::GpuRBatch;
pub use gpu_q::{DriftCheck, GpuQBatch};
pub use report::{BatchReport, BatchSolution};
pub use view::BatchRef;

use crate::backend::QrUpdate;
use crate::base::error::{Error, Result};
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::base::solution::DriftReport;
use crate::state::cpu::CpuQr;

/// B least-squares problems of one shape in one state of one kind ([`QPolicy`], with or
/// without kept data), each updated as its own [`CpuQr`] would be (see the
/// [module docs](self) for the refusal rules).
///
/// # Examples
/// ```
/// use cuqr::batch::{BatchQr, BatchRef};
/// use cuqr::{FactorParams, QPolicy};
/// let (b, m, n) = (3, 20, 4);
/// // three problems in NumPy's C order: A of shape (3, 20, 4), b of shape (3, 20, 1)
/// let a: Vec<f64> = (0..b * m * n).map(|x| ((x * 7919) % 31) as f64 - 15.0).collect();
/// let rhs: Vec<f64> = (0..b * m).map(|x| (x % 5) as f64).collect();
/// let (a, rhs) = (BatchRef::row_major(&a, b, m, n)?, BatchRef::row_major(&rhs, b, m, 1)?);
/// let mut qr = BatchQr::factorize(a, rhs, QPolicy::Thin, FactorParams::default())?;
/// // one new observation per problem at the end (all-or-nothing: rows change)
/// let rows: Vec<f64> = (0..b * n).map(|x| x as f64).collect();
/// let e = vec![1.0; b];
/// qr.insert_rows(m, BatchRef::row_major(&rows, b, 1, n)?, BatchRef::row_major(&e, b, 1, 1)?)?;
/// // a rank-one change per problem; problem 1's u holds a NaN, so it alone refuses
/// let mut u = vec![0.5; b * (m + 1)];
/// u[m + 1] = f64::NAN;
/// let v = vec![0.25; b * n];
/// let report = qr.rank_one(BatchRef::row_major(&u, b, m + 1, 1)?, BatchRef::row_major(&v, b, n, 1)?)?;
/// assert_eq!(report.refused().map(|(i, _)| i).collect::<Vec<_>>(), vec![1]);
/// let sol = qr.solve()?;
/// assert_eq!((sol.x.len(), qr.nrows()), (b * n, m + 1));
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BatchQr<T: Scalar> {
    problems: Problems<T>,
}

/// The problems, by backend (the CPU's only, for now).
#[derive(Clone, Debug)]
enum Problems<T: Scalar> {
    /// One [`CpuQr`] per problem, B ≥ 1, all of one shape and kind.
    Cpu(Vec<CpuQr<T>>),
}

impl<T: Scalar> BatchQr<T> {
    /// Factorises every problem: A (B×m×n, m ≥ n) and b (B×m×q), as
    /// [`CpuQr::factorize`] does for one (docs/algorithms.md#blocked-householder-qr).
    ///
    /// # Errors
    /// [`Error::Shape`] (a batch size 0, or `a` and `b` of different batch sizes, and the
    /// shape errors of [`CpuQr::factorize`]), [`Error::Underdetermined`],
    /// [`Error::InvalidParam`]; [`Error::BatchRefused`] with each problem that refused
    /// ([`Error::NonFinite`], [`Error::RankDeficient`]).
    pub fn factorize(
        a: BatchRef<'_, T>,
        b: BatchRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        const OP: &str = "factorize";
        if a.batch() == 0 {
            return Err(Error::shape(OP, "batch size", 0, 1));
        }
        if b.batch() != a.batch() {
            return Err(Error::shape(OP, "batch size of b", b.batch(), a.batch()));
        }
        crate::ops::factorize::plan_shapes::<T>(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            policy,
            params,
        )?;
        let (m, n) = (a.nrows() as f64, a.ncols() as f64);
        let work = a.batch() as f64 * (2.0 * m * n * n + if_full(policy, 4.0 * m * m * n));
        let mut slots: Vec<usize> = (0..a.batch()).collect();
        let states = run::map(&mut slots, work, |i, _| {
            let (ai, bi) = (a.block(i), b.block(i));
            CpuQr::factorize(ai.view(), bi.view(), policy, params)
        });
        let states = report::refusals(states)
            .map_err(|problems| Error::BatchRefused { op: OP, problems })?;
        Ok(Self {
            problems: Problems::Cpu(states),
        })
    }

    /// A batch of states built elsewhere (at least one), all of one shape (m, n, q), Q
    /// policy and kept data.
    ///
    /// # Errors
    /// [`Error::Shape`] (no state, or states of different shapes), [`Error::InvalidParam`]
    /// (states of different kinds).
    pub fn from_problems(states: Vec<CpuQr<T>>) -> Result<Self> {
        const OP: &str = "BatchQr::from_problems";
        let Some(first) = states.first() else {
            return Err(Error::shape(OP, "batch size", 0, 1));
        };
        let (d0, kept0) = (first.dims(), first.data.is_some());
        for s in &states {
            let d = s.dims();
            for (what, got, expected) in [("rows", d.m, d0.m), ("columns", d.n, d0.n)]
                .into_iter()
                .chain([("right-hand sides", d.q, d0.q)])
            {
                if got != expected {
                    return Err(Error::shape(OP, what, got, expected));
                }
            }
            if d.policy != d0.policy || s.data.is_some() != kept0 {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "states",
                    why: "the states differ in Q policy or kept data".to_string(),
                });
            }
        }
        Ok(Self {
            problems: Problems::Cpu(states),
        })
    }

    /// The problems' states, problem i at index i.
    pub fn problems(&self) -> &[CpuQr<T>] {
        match &self.problems {
            Problems::Cpu(s) => s,
        }
    }
    /// Problem i's state (its R, d and Q through [`CpuQr::r_ref`], [`CpuQr::d_ref`] and
    /// [`CpuQr::q_ref`]); `None` for i ≥ B.
    pub fn problem(&self, i: usize) -> Option<&CpuQr<T>> {
        self.problems().get(i)
    }
    /// The problems' states, consumed.
    pub fn into_problems(self) -> Vec<CpuQr<T>> {
        match self.problems {
            Problems::Cpu(s) => s,
        }
    }
    /// The states, mutable, for the update bodies.
    fn states_mut(&mut self) -> &mut Vec<CpuQr<T>> {
        match &mut self.problems {
            Problems::Cpu(s) => s,
        }
    }
    /// The first problem (there is always one).
    fn first(&self) -> &CpuQr<T> {
        &self.problems()[0]
    }

    /// Number B of problems.
    pub fn batch(&self) -> usize {
        self.problems().len()
    }
    /// Rows m of every A.
    pub fn nrows(&self) -> usize {
        self.first().nrows()
    }
    /// Columns n of every A.
    pub fn ncols(&self) -> usize {
        self.first().ncols()
    }
    /// Right-hand sides q of every problem.
    pub fn nrhs(&self) -> usize {
        self.first().nrhs()
    }
    /// The Q policy of every problem.
    pub fn q_policy(&self) -> QPolicy {
        self.first().q_policy()
    }
    /// Whether an R-only batch keeps A and b ([`FactorParams::keep_data`]).
    pub fn keeps_data(&self) -> bool {
        self.q_policy() == QPolicy::None && self.first().data.is_some()
    }
    /// The update options of problem 0 (all problems share them after [`Self::set_params`]).
    pub fn params(&self) -> UpdateParams {
        self.first().params()
    }
    /// Replaces every problem's update options (the forgetting factor of
    /// [`Self::slide`], drift control).
    pub fn set_params(&mut self, params: UpdateParams) {
        for s in self.states_mut() {
            s.set_params(params);
        }
    }
    /// Each problem's drift record (docs/algorithms.md#drift-control).
    pub fn drift(&self) -> Vec<DriftReport> {
        self.problems().iter().map(|s| s.drift()).collect()
    }
    /// Measures every problem's drift now and refreshes those past the threshold
    /// (docs/algorithms.md#drift-control), each as [`CpuQr`]'s `check_drift` does: a
    /// problem whose refresh fails keeps its state and reports the error.
    pub fn check_drift(&mut self) -> Vec<Result<DriftReport>> {
        let work = self.work(1);
        run::map(self.states_mut(), work, |_, s| s.check_drift())
    }

    /// Flops of a call of block size `p` on the whole batch, roughly: what decides whether
    /// it runs in parallel.
    fn work(&self, p: usize) -> f64 {
        let (m, n) = (self.nrows() as f64, self.ncols() as f64);
        let per = 8.0 * p.max(1) as f64 * (m * n + if_full(self.q_policy(), m * m));
        self.batch() as f64 * per
    }
}

/// `x` for a full-Q kind, else 0.
fn if_full(policy: QPolicy, x: f64) -> f64 {
    if policy == QPolicy::Full {
        x
    } else {
        0.0
    }
}
