//! Small least-squares states on the GPU whose updates cost one launch each
//! (docs/algorithms.md#small-states).
//!
//! A state of n ≤ [`SMALL_MAX_N`] columns keeps R, d = Q₁ᵀb and the residual norm in device
//! memory and, as a window, its m rows. Each update ([`GpuSmallState::slide`],
//! [`GpuSmallState::push`]) is one kernel launch of one warp that takes the new row with
//! the launch itself, decides on the device whether the update is accepted, and returns
//! without waiting for the GPU: a rolling regression runs at the launch rate instead of a
//! host round trip a step. A refused update (a downdate the refusal tests turn down, a
//! non-finite row read from device memory) leaves the state as it was; it is counted on the
//! device and reported by [`GpuSmallState::sync`].
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::gpu::launch::small_window::{
    SmallDevice, SolveTo, StepArgs, META_FIRST_REFUSED, META_REASON, META_REFUSED,
    META_SOLVES_REFUSED, META_STEP, PITCH, REASON_DOWNDATE, REASON_NON_FINITE,
};
use crate::gpu::runtime::{DevMat, DevVec, Gpu, GpuScalar};

pub use crate::gpu::launch::small_window::{RowArg, RowSource, SMALL_MAX_N};

/// Options of a small state.
#[derive(Clone, Copy, Debug, Default)]
pub struct SmallParams {
    /// Drift control of a window: after this many steps R, d and ρ are factorised afresh
    /// from the kept rows on the device (one launch, about m times a step's cost). `None`:
    /// every 16·m steps; `Some(0)`: never.
    pub refresh_every: Option<usize>,
    /// The solve's rank test: x is NaN unless every |R_jj| > tol·‖R‖_F. `None`:
    /// max(m, n)·u/√min(m, n), u the unit roundoff (the batched states' rule).
    pub rank_tol: Option<f64>,
}

/// What the device did since the state was made (see [`GpuSmallState::sync`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallReport {
    /// Row updates launched (accepted or refused).
    pub steps: u64,
    /// Updates refused, each leaving the state as it was.
    pub refused: u64,
    /// The index (0-based, in launch order) of the first refused update.
    pub first_refused: Option<u64>,
    /// Why the last refused update was refused.
    pub last_reason: Option<&'static str>,
    /// Solutions left NaN by the rank test.
    pub solves_refused: u64,
}

/// The least-squares solution of a small state.
#[derive(Clone, Debug)]
pub struct SmallSolution<T> {
    /// x (n), NaN where the rank test failed.
    pub x: Vec<T>,
    /// The residual sum of squares ρ² (NaN with x).
    pub rss: T,
}

/// A least-squares problem of n ≤ 64 columns on one GPU, kept as R, d and ρ (the R-only
/// kind), updated one row at a time in one launch each without waiting for the device:
/// a window of m kept rows that slides (rolling regression), or a recursive state that
/// grows with a forgetting factor (recursive least squares).
///
/// Host-side checks (sizes, a non-finite host row) return `Err` at once and change
/// nothing. Checks that need the state (the downdate's refusal tests, a non-finite row read
/// from device memory) are made on the device: a refused step leaves R, d, ρ and the
/// kept rows as they were and writes NaN where its solution would go;
/// [`GpuSmallState::sync`] waits and reports the refusals.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::small::{GpuSmallState, SmallParams};
/// use cuqr::{Gpu, Mat};
/// let gpu = Arc::new(Gpu::new(0)?);
/// let (m, n, steps) = (252, 5, 1000);
/// let x: Vec<f64> = (0..(m + steps) * n).map(|i| ((i * 7919) % 101) as f64 / 50.0 - 1.0).collect();
/// let y: Vec<f64> = (0..m + steps).map(|i| ((i * 104_729) % 97) as f64).collect();
/// let a = Mat::from_fn(m, n, |i, j| x[i * n + j]);
/// let mut st = GpuSmallState::window(&gpu, a.as_ref(), &y[..m], &SmallParams::default())?;
/// for t in m..m + steps {
///     st.slide(&x[t * n..(t + 1) * n], y[t])?; // queued, no wait
/// }
/// let report = st.sync()?;
/// assert_eq!(report.refused, 0);
/// let sol = st.solve()?;
/// # assert_eq!(sol.x.len(), n);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Debug)]
pub struct GpuSmallState<T: GpuScalar> {
    gpu: Arc<Gpu>,
    dev: SmallDevice<T>,
    n: usize,
    /// Kept rows of a window, or the rows folded in so far (recursive).
    m: usize,
    window: bool,
    forget: f64,
    refresh_every: usize,
    since_refresh: usize,
    rank_tol: T,
}

/// The batched states' default rank tolerance for m rows and n columns.
fn default_rank_tol<T: GpuScalar>(m: usize, n: usize) -> f64 {
    let (big, small) = (m.max(n) as f64, m.min(n).max(1) as f64);
    big * T::UNIT_ROUNDOFF / small.sqrt()
}

/// Checks a row's length and finiteness.
fn check_row<T: GpuScalar>(op: &'static str, x: &[T], y: T, n: usize) -> Result<()> {
    if x.len() != n {
        return Err(Error::shape(op, "row", x.len(), n));
    }
    if let Some(j) = x.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            op,
            what: "row",
            row: 0,
            col: j,
        });
    }
    if !y.is_finite() {
        return Err(Error::NonFinite {
            op,
            what: "right-hand side",
            row: 0,
            col: 0,
        });
    }
    Ok(())
}

impl<T: GpuScalar> GpuSmallState<T> {
    /// A window over the m rows of `a` (m × n, m ≥ n, 1 ≤ n ≤ [`SMALL_MAX_N`]) and `b`
    /// (m): factorised on the device (this call waits), the rows kept in a ring on the
    /// device so that [`GpuSmallState::slide`] can remove the oldest.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for n outside 1..=64 or a rank tolerance that is negative or
    /// not finite; [`Error::Underdetermined`] for m < n; [`Error::Shape`] for b;
    /// [`Error::NonFinite`]; [`Error::RankDeficient`] when the window's R fails the rank
    /// test; [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn window(gpu: &Arc<Gpu>, a: MatRef<'_, T>, b: &[T], params: &SmallParams) -> Result<Self> {
        let op = "GpuSmallState::window";
        let (m, n) = (a.nrows(), a.ncols());
        let rows = Self::check_first(op, a, b, params)?;
        let mut dev = SmallDevice::new(gpu, n, Some(m))?;
        dev.write_ring(gpu, &rows)?;
        dev.refold(gpu)?;
        let mut st = Self {
            gpu: gpu.clone(),
            dev,
            n,
            m,
            window: true,
            forget: 1.0,
            refresh_every: params.refresh_every.unwrap_or(16 * m),
            since_refresh: 0,
            rank_tol: T::from_f64(params.rank_tol.unwrap_or(default_rank_tol::<T>(m, n))),
        };
        st.check_rank()?;
        Ok(st)
    }

    /// A recursive state from the m rows of `a` and `b` (m ≥ n, 1 ≤ n ≤ 64): each
    /// [`GpuSmallState::push`] multiplies R, d and ρ by √`forget` (older rows weigh
    /// `forget` less a step, 0 < forget ≤ 1) and adds one row. No rows are kept, so there
    /// is no drift control (each step is backward stable; errors add up over steps).
    ///
    /// # Errors
    /// As [`GpuSmallState::window`], and [`Error::InvalidParam`] for `forget` outside (0, 1].
    pub fn recursive(
        gpu: &Arc<Gpu>,
        a: MatRef<'_, T>,
        b: &[T],
        forget: f64,
        params: &SmallParams,
    ) -> Result<Self> {
        let op = "GpuSmallState::recursive";
        if !(forget > 0.0 && forget <= 1.0) {
            return Err(Error::InvalidParam {
                op,
                what: "forget",
                why: format!("{forget} is outside (0, 1]"),
            });
        }
        let (m, n) = (a.nrows(), a.ncols());
        let rows = Self::check_first(op, a, b, params)?;
        let mut first = SmallDevice::new(gpu, n, Some(m))?;
        first.write_ring(gpu, &rows)?;
        first.refold(gpu)?;
        let state = first.read_state(gpu)?;
        let mut dev = SmallDevice::new(gpu, n, None)?;
        dev.write_state(gpu, &state)?;
        let mut st = Self {
            gpu: gpu.clone(),
            dev,
            n,
            m,
            window: false,
            forget,
            refresh_every: 0,
            since_refresh: 0,
            rank_tol: T::from_f64(params.rank_tol.unwrap_or(default_rank_tol::<T>(m, n))),
        };
        st.check_rank()?;
        Ok(st)
    }

    /// Validates the first rows and lays them out as the ring holds them (x then y a row).
    fn check_first(
        op: &'static str,
        a: MatRef<'_, T>,
        b: &[T],
        params: &SmallParams,
    ) -> Result<Vec<T>> {
        let (m, n) = (a.nrows(), a.ncols());
        if !(1..=SMALL_MAX_N).contains(&n) {
            return Err(Error::InvalidParam {
                op,
                what: "columns",
                why: format!("n = {n}; small states take 1 ≤ n ≤ {SMALL_MAX_N}"),
            });
        }
        if m < n {
            return Err(Error::Underdetermined { op, m, n });
        }
        if b.len() != m {
            return Err(Error::shape(op, "b (rows)", b.len(), m));
        }
        if let Some(tol) = params.rank_tol {
            if !(tol >= 0.0 && tol.is_finite()) {
                return Err(Error::InvalidParam {
                    op,
                    what: "rank_tol",
                    why: format!("{tol} is not a finite tolerance ≥ 0"),
                });
            }
        }
        let mut rows = Vec::with_capacity(m * (n + 1));
        for (i, &bi) in b.iter().enumerate() {
            for j in 0..n {
                let v = a.get(i, j);
                if !v.is_finite() {
                    return Err(Error::NonFinite {
                        op,
                        what: "A",
                        row: i,
                        col: j,
                    });
                }
                rows.push(v);
            }
            if !bi.is_finite() {
                return Err(Error::NonFinite {
                    op,
                    what: "b",
                    row: i,
                    col: 0,
                });
            }
            rows.push(bi);
        }
        Ok(rows)
    }

    /// The rank test of a new state (waits).
    fn check_rank(&mut self) -> Result<()> {
        let r = self.r()?;
        let n = self.n;
        let nrm = (0..n)
            .flat_map(|i| (i..n).map(move |j| (i, j)))
            .map(|(i, j)| r[(i, j)].to_f64().powi(2))
            .sum::<f64>()
            .sqrt();
        let tol = self.rank_tol.to_f64() * nrm;
        for j in 0..n {
            let v = r[(j, j)].to_f64().abs();
            if v.is_nan() || v <= tol {
                return Err(Error::RankDeficient {
                    column: j,
                    r_jj: v,
                    tol,
                });
            }
        }
        Ok(())
    }

    /// Rows: the window's length m, or the rows folded into a recursive state so far
    /// (including refused pushes until [`GpuSmallState::sync`] says otherwise).
    pub fn nrows(&self) -> usize {
        self.m
    }

    /// Columns n.
    pub fn ncols(&self) -> usize {
        self.n
    }

    /// True for a window (rows kept and removed), false for a recursive state.
    pub fn is_window(&self) -> bool {
        self.window
    }

    fn args(&self, drop_oldest: bool, scale: T) -> StepArgs<T> {
        StepArgs {
            drop_oldest,
            solve_only: false,
            scale,
            rank_tol: self.rank_tol,
        }
    }

    /// Queues one window step: the row (x, y) enters and the oldest kept row leaves
    /// (one launch, no wait). Drift control refactorises from the kept rows when due.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] on a recursive state; [`Error::Shape`] for x of other than
    /// n entries; [`Error::NonFinite`]; [`Error::Driver`] if the launch fails.
    pub fn slide(&mut self, x: &[T], y: T) -> Result<()> {
        self.slide_from(&RowSource::host(x, y), x, y, None)
    }

    /// [`GpuSmallState::slide`], then the solution x and ρ² written to column `t` of `out`
    /// ((n+1) × T, x in rows 0..n and ρ² in row n): one launch, no wait.
    ///
    /// # Errors
    /// As [`GpuSmallState::slide`], and [`Error::Shape`] for `out` or `t`.
    pub fn slide_solve(&mut self, x: &[T], y: T, out: &mut DevMat<T>, t: usize) -> Result<()> {
        self.slide_from(&RowSource::host(x, y), x, y, Some((out, t)))
    }

    /// [`GpuSmallState::slide`] with the row read on the device: column `t` of `x` (n × T,
    /// time along the columns) and element `t` of `y`; the solution to column `t` of `out`
    /// when given. A non-finite row is refused on the device (see
    /// [`GpuSmallState::sync`]).
    ///
    /// # Errors
    /// As [`GpuSmallState::slide_solve`], with [`Error::Shape`] for x's rows or t.
    pub fn slide_column(
        &mut self,
        x: &DevMat<T>,
        y: &DevVec<T>,
        t: usize,
        out: Option<(&mut DevMat<T>, usize)>,
    ) -> Result<()> {
        if x.nrows() != self.n {
            return Err(Error::shape(
                "GpuSmallState::slide_column",
                "x (rows)",
                x.nrows(),
                self.n,
            ));
        }
        let row = RowSource::column(&self.gpu, x, y, t)?;
        self.step_row(&row, true, out)
    }

    /// [`GpuSmallState::slide`] with a row from [`RowSource`] (e.g. memory another library
    /// owns, [`RowSource::foreign`]); the solution to column `t` of `out` when given.
    ///
    /// # Errors
    /// As [`GpuSmallState::slide_solve`].
    pub fn slide_source(
        &mut self,
        row: &RowSource<'_, T>,
        out: Option<(&mut DevMat<T>, usize)>,
    ) -> Result<()> {
        if let RowSource::Host(v) = row {
            let (x, y) = (&v.v[..self.n], v.v[self.n]);
            check_row("GpuSmallState::slide", x, y, self.n)?;
        }
        self.step_row(row, true, out)
    }

    fn slide_from(
        &mut self,
        row: &RowSource<'_, T>,
        x: &[T],
        y: T,
        out: Option<(&mut DevMat<T>, usize)>,
    ) -> Result<()> {
        check_row("GpuSmallState::slide", x, y, self.n)?;
        self.step_row(row, true, out)
    }

    fn step_row(
        &mut self,
        row: &RowSource<'_, T>,
        slide: bool,
        out: Option<(&mut DevMat<T>, usize)>,
    ) -> Result<()> {
        let op = if slide {
            "GpuSmallState::slide"
        } else {
            "GpuSmallState::push"
        };
        if slide != self.window {
            return Err(Error::InvalidParam {
                op,
                what: "state",
                why: if slide {
                    "a recursive state grows by push; slide needs a window".into()
                } else {
                    "a window slides; push needs a recursive state".into()
                },
            });
        }
        let scale = if slide {
            T::ONE
        } else {
            T::from_f64(self.forget.sqrt())
        };
        let args = self.args(slide, scale);
        let to = match out {
            Some((mat, t)) => SolveTo::Column(mat, t),
            None => SolveTo::Skip,
        };
        self.dev.step(&self.gpu, row, &args, to)?;
        if slide {
            self.since_refresh += 1;
            if self.refresh_every > 0 && self.since_refresh >= self.refresh_every {
                self.refresh()?;
            }
        } else {
            self.m += 1;
        }
        Ok(())
    }

    /// Queues one recursive step: R, d and ρ times √forget, then the row (x, y) enters.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] on a window; [`Error::Shape`]; [`Error::NonFinite`];
    /// [`Error::Driver`].
    pub fn push(&mut self, x: &[T], y: T) -> Result<()> {
        check_row("GpuSmallState::push", x, y, self.n)?;
        self.step_row(&RowSource::host(x, y), false, None)
    }

    /// [`GpuSmallState::push`], then the solution to column `t` of `out` ((n+1) × T).
    ///
    /// # Errors
    /// As [`GpuSmallState::push`] and [`GpuSmallState::slide_solve`].
    pub fn push_solve(&mut self, x: &[T], y: T, out: &mut DevMat<T>, t: usize) -> Result<()> {
        check_row("GpuSmallState::push", x, y, self.n)?;
        self.step_row(&RowSource::host(x, y), false, Some((out, t)))
    }

    /// Queues the window's refactorisation from its kept rows (drift control; done
    /// automatically every [`SmallParams::refresh_every`] steps).
    ///
    /// # Errors
    /// [`Error::NeedsData`] on a recursive state; [`Error::Driver`].
    pub fn refresh(&mut self) -> Result<()> {
        if !self.window {
            return Err(Error::NeedsData {
                op: "GpuSmallState::refresh",
                what: "the kept rows of a window (a recursive state keeps none)",
            });
        }
        self.dev.refold(&self.gpu)?;
        self.since_refresh = 0;
        Ok(())
    }

    /// Waits for the queued work and reports what the device did since the state was made.
    ///
    /// # Errors
    /// [`Error::Driver`] (including a fault of queued work).
    pub fn sync(&mut self) -> Result<SmallReport> {
        let w = self.dev.read_meta(&self.gpu)?;
        Ok(SmallReport {
            steps: u64::from(w[META_STEP]),
            refused: u64::from(w[META_REFUSED]),
            first_refused: (w[META_FIRST_REFUSED] != u32::MAX).then(|| u64::from(w[META_FIRST_REFUSED])),
            last_reason: match w[META_REASON] {
                REASON_NON_FINITE => Some("a row read from device memory is not finite"),
                REASON_DOWNDATE => Some(
                    "the rows left do not determine R to working precision (the downdate's refusal test)",
                ),
                _ => None,
            },
            solves_refused: u64::from(w[META_SOLVES_REFUSED]),
        })
    }

    /// The least-squares solution of the state as it is (waits).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn solve(&mut self) -> Result<SmallSolution<T>> {
        let args = StepArgs {
            drop_oldest: false,
            solve_only: true,
            scale: T::ONE,
            rank_tol: self.rank_tol,
        };
        let row = RowSource::host(&[], T::ZERO);
        self.dev.step(&self.gpu, &row, &args, SolveTo::Own)?;
        let mut v = self.dev.read_solution(&self.gpu)?;
        let rss = v.pop().unwrap_or(T::ZERO);
        Ok(SmallSolution { x: v, rss })
    }

    /// R (n × n, upper triangular; waits).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn r(&self) -> Result<Mat<T>> {
        let s = self.dev.read_state(&self.gpu)?;
        let n = self.n;
        Ok(Mat::from_fn(n, n, |i, j| {
            if j >= i {
                s[i * PITCH + j]
            } else {
                T::ZERO
            }
        }))
    }

    /// d = Q₁ᵀb (n) and the residual norm ρ (waits).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn d_rho(&self) -> Result<(Vec<T>, T)> {
        let s = self.dev.read_state(&self.gpu)?;
        let n = self.n;
        Ok(((0..n).map(|i| s[i * PITCH + n]).collect(), s[n * PITCH + n]))
    }

    /// A window's kept rows, oldest first, as (A (m × n), b) (waits); `None` for a
    /// recursive state.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn kept_rows(&self) -> Result<Option<(Mat<T>, Vec<T>)>> {
        let Some(ring) = self.dev.read_ring(&self.gpu)? else {
            return Ok(None);
        };
        let head =
            self.dev.read_meta(&self.gpu)?[crate::gpu::launch::small_window::META_HEAD] as usize;
        let (m, n) = (self.m, self.n);
        let at = |i: usize| ((head + i) % m) * (n + 1);
        let a = Mat::from_fn(m, n, |i, j| ring[at(i) + j]);
        let b = (0..m).map(|i| ring[at(i) + n]).collect();
        Ok(Some((a, b)))
    }

    /// The GPU the state lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}
