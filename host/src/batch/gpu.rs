//! Batched R-only states on one GPU, one problem a thread (docs/algorithms.md#batched-states).
#![forbid(unsafe_code)]

use std::sync::Arc;

use super::{BatchRef, BatchReport, BatchSolution};
use crate::base::error::{Error, Result};
use cudarc::driver::CudaView;

use crate::gpu::algo::batch_r::{
    self as algo, KeptRows, RStates, Rebuild, StepOut, STATUS_DOWNDATE_REFUSED, STATUS_NON_FINITE,
    STATUS_RANK_DEFICIENT, STEP_MAX_N,
};
use crate::gpu::launch::batch_r::{StepRows, StepShape};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};

/// B least-squares problems of n ≤ 16 columns and one right-hand side, each kept as its
/// n×n triangular factor R, d = Q₁ᵀb and the residual norm (the R-only kind without kept
/// data of [`crate::QPolicy::None`]) on one GPU: banks of recursive-least-squares or
/// square-root information filters, one model per group. Each call is one launch over the
/// batch, one thread a problem with its state in registers.
///
/// Rows enter by Givens rotations and leave by the downdate with the refusal test of
/// docs/algorithms.md#updates-without-q, given by the caller (an R-only state has no rows of
/// its own). The refusal rules are [`super::BatchQr`]'s: arguments the problems share
/// (sizes, λ) refuse the call; [`GpuRBatch::insert_rows`] and
/// [`GpuRBatch::delete_rows_with`] change m and are all-or-nothing
/// ([`Error::BatchRefused`] names the problems whose data are not finite or whose downdate
/// was refused); [`GpuRBatch::slide`] with as many rows in as out proceeds per problem and
/// reports, leaving a refusing problem bit for bit as it was. [`GpuRBatch::delete_cols`]
/// takes columns out (all-or-nothing).
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::batch::{BatchRef, GpuRBatch};
/// use cuqr::Gpu;
/// let gpu = Arc::new(Gpu::new(0)?);
/// let (b, m, n) = (1000, 40, 4);
/// let a: Vec<f64> = (0..b * m * n).map(|x| ((x * 7919) % 31) as f64 - 15.0).collect();
/// let y: Vec<f64> = (0..b * m).map(|x| (x % 5) as f64).collect();
/// let mut bank = GpuRBatch::factorize(&gpu, BatchRef::row_major(&a, b, m, n)?,
///                                     BatchRef::row_major(&y, b, m, 1)?)?;
/// // one new observation per problem, the oldest one leaves, forgetting factor 0.99
/// let (new, old) = (vec![1.0; b * n], a.clone());
/// let (e_new, e_old) = (vec![0.5; b], y.clone());
/// let report = bank.slide(BatchRef::row_major(&new, b, 1, n)?, BatchRef::row_major(&e_new, b, 1, 1)?,
///                         BatchRef::new(&old, b, 1, n, [m * n, n, 1])?,
///                         BatchRef::new(&e_old, b, 1, 1, [m, 1, 1])?, 0.99)?;
/// assert!(report.all_ok());
/// let sol = bank.solve()?;
/// # assert_eq!(sol.x.len(), b * n);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Debug)]
pub struct GpuRBatch<T: GpuScalar> {
    pub(super) gpu: Arc<Gpu>,
    pub(super) batch: usize,
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) states: RStates<T>,
    /// Each problem's rows and right-hand sides on the device, when the batch keeps them
    /// ([`GpuRBatch::factorize_keep_data`]).
    pub(super) kept: Option<KeptRows<T>>,
}

/// A batch of rows (B × p × n) and right-hand sides (B × p × 1) checked against the state
/// and gathered in row-major order.
pub(super) struct Gathered<T> {
    pub(super) rows: Vec<T>,
    pub(super) rhs: Vec<T>,
    pub(super) p: usize,
}

pub(super) fn gather<T: GpuScalar>(
    op: &'static str,
    (rows, rhs): (BatchRef<'_, T>, BatchRef<'_, T>),
    batch: usize,
    n: usize,
) -> Result<Gathered<T>> {
    if rows.batch() != batch {
        return Err(Error::shape(op, "rows (batch)", rows.batch(), batch));
    }
    if rhs.batch() != batch {
        return Err(Error::shape(
            op,
            "right-hand sides (batch)",
            rhs.batch(),
            batch,
        ));
    }
    if rows.ncols() != n {
        return Err(Error::shape(op, "rows (columns)", rows.ncols(), n));
    }
    let p = rows.nrows();
    if rhs.nrows() != p {
        return Err(Error::shape(op, "right-hand sides (rows)", rhs.nrows(), p));
    }
    if rhs.ncols() != 1 {
        return Err(Error::shape(
            op,
            "right-hand sides (columns)",
            rhs.ncols(),
            1,
        ));
    }
    if let (Some(r), Some(e)) = (rows.row_major_slice(), rhs.row_major_slice()) {
        return Ok(Gathered {
            rows: r.to_vec(),
            rhs: e.to_vec(),
            p,
        });
    }
    let mut out = Gathered {
        rows: Vec::with_capacity(batch * p * n),
        rhs: Vec::with_capacity(batch * p),
        p,
    };
    for k in 0..batch {
        for i in 0..p {
            for j in 0..n {
                out.rows.push(rows.get(k, i, j).unwrap_or(T::ZERO));
            }
            out.rhs.push(rhs.get(k, i, 0).unwrap_or(T::ZERO));
        }
    }
    Ok(out)
}

/// The rows of one step on the device: B × p × n rows and B × p right-hand sides, each
/// problem's block row-major.
pub(super) struct Rows<'a, T> {
    pub(super) rows: CudaView<'a, T>,
    pub(super) rhs: CudaView<'a, T>,
    pub(super) p: usize,
}

/// Device rows checked to hold B·p·n and B·p values.
///
/// # Errors
/// [`Error::Shape`] when a buffer is shorter.
pub(super) fn dev_rows<'a, T: GpuScalar>(
    op: &'static str,
    (rows, rhs): (&'a DevVec<T>, &'a DevVec<T>),
    (batch, p, n): (usize, usize, usize),
) -> Result<Rows<'a, T>> {
    need(op, "rows (B·p·n values)", rows, batch * p * n)?;
    need(op, "right-hand sides (B·p values)", rhs, batch * p)?;
    Ok(Rows {
        rows: rows.view(),
        rhs: rhs.view(),
        p,
    })
}

/// `v` holds at least `len` values.
///
/// # Errors
/// [`Error::Shape`].
pub(super) fn need<T: GpuScalar>(
    op: &'static str,
    what: &'static str,
    v: &DevVec<T>,
    len: usize,
) -> Result<()> {
    if v.len() < len {
        return Err(Error::shape(op, what, v.len(), len));
    }
    Ok(())
}

/// Gathered host rows uploaded (rows, right-hand sides).
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(super) fn upload_rows<T: GpuScalar>(
    gpu: &Gpu,
    g: &Gathered<T>,
) -> Result<(DevVec<T>, DevVec<T>)> {
    Ok((
        DevVec::from_slice_async(gpu, &g.rows)?,
        DevVec::from_slice_async(gpu, &g.rhs)?,
    ))
}

/// Problem i's refusal as the error a single state gives.
pub(super) fn refusal(op: &'static str, code: u32) -> Option<Error> {
    match code {
        STATUS_NON_FINITE => Some(Error::NonFinite {
            op,
            what: "rows or right-hand sides",
            row: 0,
            col: 0,
        }),
        STATUS_DOWNDATE_REFUSED => Some(Error::DowndateFailed {
            op,
            row: 0,
            why: "the rows left do not determine R to working precision (the downdate's \
                  refusal test)"
                .into(),
        }),
        _ => None,
    }
}

impl<T: GpuScalar> GpuRBatch<T> {
    /// Factorises B problems: A (B × m × n) and b (B × m × 1), m ≥ n, 1 ≤ n ≤ 16.
    ///
    /// # Errors
    /// [`Error::Shape`] for mismatched sizes or n outside 1..=16;
    /// [`Error::Underdetermined`] for m < n; [`Error::BatchRefused`] when a problem's data
    /// are not finite (nothing is made); [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn factorize(gpu: &Arc<Gpu>, a: BatchRef<'_, T>, b: BatchRef<'_, T>) -> Result<Self> {
        Self::factorize_impl("GpuRBatch::factorize", gpu, (a, b), false)
    }

    /// [`GpuRBatch::factorize`], keeping each problem's rows and right-hand side on the
    /// device (the R-only kind with kept data, B·m·(n + 1) elements): rows then leave by
    /// position ([`GpuRBatch::delete_rows`], [`GpuRBatch::slide_kept`]), and the updates
    /// that need A — [`GpuRBatch::rank_one`], [`GpuRBatch::rank_k`],
    /// [`GpuRBatch::insert_cols`], [`GpuRBatch::replace_cols`], [`GpuRBatch::shift_col`] —
    /// and [`GpuRBatch::refactorize`] work (docs/algorithms.md#batched-states).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::batch::{BatchRef, GpuRBatch};
    /// use cuqr::Gpu;
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let (b, m, n) = (1000, 40, 4);
    /// let a: Vec<f64> = (0..b * m * n).map(|x| ((x * 7919) % 31) as f64 - 15.0).collect();
    /// let y: Vec<f64> = (0..b * m).map(|x| (x % 5) as f64).collect();
    /// let mut bank = GpuRBatch::factorize_keep_data(&gpu, BatchRef::row_major(&a, b, m, n)?,
    ///                                               BatchRef::row_major(&y, b, m, 1)?)?;
    /// // one new row each, the oldest one leaves (the batch has it), forgetting 0.99
    /// let (new, e) = (vec![1.0; b * n], vec![0.5; b]);
    /// let report = bank.slide_kept(BatchRef::row_major(&new, b, 1, n)?,
    ///                              BatchRef::row_major(&e, b, 1, 1)?, 1, 0.99)?;
    /// assert!(report.all_ok());
    /// // A + u·vᵀ for every problem, then a column more
    /// let (u, v) = (vec![0.1; b * m], vec![1.0; b * n]);
    /// bank.rank_one(BatchRef::row_major(&u, b, m, 1)?, BatchRef::row_major(&v, b, n, 1)?)?;
    /// let col: Vec<f64> = (0..b * m).map(|x| ((x * 31) % 17) as f64).collect();
    /// bank.insert_cols(n, BatchRef::row_major(&col, b, m, 1)?)?;
    /// # assert_eq!(bank.ncols(), n + 1);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`GpuRBatch::factorize`].
    pub fn factorize_keep_data(
        gpu: &Arc<Gpu>,
        a: BatchRef<'_, T>,
        b: BatchRef<'_, T>,
    ) -> Result<Self> {
        Self::factorize_impl("GpuRBatch::factorize_keep_data", gpu, (a, b), true)
    }

    /// [`GpuRBatch::factorize`] with A (B·m·n) and b (B·m) in device memory, each problem's
    /// block row-major (a C-order (B, m, n) array).
    ///
    /// # Errors
    /// As [`GpuRBatch::factorize`]; [`Error::Shape`] when a buffer is shorter.
    pub fn factorize_device(
        gpu: &Arc<Gpu>,
        (a, b): (&DevVec<T>, &DevVec<T>),
        (batch, m, n): (usize, usize, usize),
    ) -> Result<Self> {
        const OP: &str = "GpuRBatch::factorize_device";
        Self::check_shape(OP, (m, n))?;
        let rows = dev_rows(OP, (a, b), (batch, m, n))?;
        Self::factorize_on(OP, gpu, rows, (batch, n), false)
    }

    /// [`GpuRBatch::factorize_keep_data`] with A and b in device memory (copied: the batch
    /// keeps its own rows).
    ///
    /// # Errors
    /// As [`GpuRBatch::factorize_device`].
    pub fn factorize_keep_data_device(
        gpu: &Arc<Gpu>,
        (a, b): (&DevVec<T>, &DevVec<T>),
        (batch, m, n): (usize, usize, usize),
    ) -> Result<Self> {
        const OP: &str = "GpuRBatch::factorize_keep_data_device";
        Self::check_shape(OP, (m, n))?;
        let rows = dev_rows(OP, (a, b), (batch, m, n))?;
        Self::factorize_on(OP, gpu, rows, (batch, n), true)
    }

    fn check_shape(op: &'static str, (m, n): (usize, usize)) -> Result<()> {
        if n == 0 || n > STEP_MAX_N {
            return Err(Error::shape(
                op,
                "columns n (1..=16)",
                n,
                n.clamp(1, STEP_MAX_N),
            ));
        }
        if m < n {
            return Err(Error::Underdetermined { op, m, n });
        }
        Ok(())
    }

    fn factorize_impl(
        op: &'static str,
        gpu: &Arc<Gpu>,
        (a, b): (BatchRef<'_, T>, BatchRef<'_, T>),
        keep: bool,
    ) -> Result<Self> {
        let (batch, m, n) = (a.batch(), a.nrows(), a.ncols());
        Self::check_shape(op, (m, n))?;
        let g = gather(op, (a, b), batch, n)?;
        let (ad, bd) = upload_rows(gpu, &g)?;
        let rows = dev_rows(op, (&ad, &bd), (batch, m, n))?;
        Self::factorize_on(op, gpu, rows, (batch, n), keep)
    }

    /// The factorisation from the m rows on the device: one step from empty states (with
    /// kept data, from the batch's own copy of the rows).
    fn factorize_on(
        op: &'static str,
        gpu: &Arc<Gpu>,
        rows: Rows<'_, T>,
        (batch, n): (usize, usize),
        keep: bool,
    ) -> Result<Self> {
        let m = rows.p;
        let mut st = Self {
            gpu: gpu.clone(),
            batch,
            m,
            n,
            states: RStates::zeros(gpu, batch, n)?,
            kept: None,
        };
        if keep {
            let kept = KeptRows {
                a: algo::gather(gpu, rows.rows, (batch, m, n), &Rebuild::identity(m, n))?,
                b: algo::gather(gpu, rows.rhs, (batch, m, 1), &Rebuild::identity(m, 1))?,
            };
            let out = st.refold(&kept, n, false)?;
            st.commit_all(op, out, false)?;
            st.kept = Some(kept);
        } else {
            let out = RStates::refold(gpu, (batch, m, n), (rows.rows, rows.rhs), false)?;
            st.take_all(op, out)?;
        }
        Ok(st)
    }

    /// Problems B.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Rows m each R stands for.
    pub fn nrows(&self) -> usize {
        self.m
    }

    /// Columns n.
    pub fn ncols(&self) -> usize {
        self.n
    }

    /// Appends p rows to every problem: `rows` (B × p × n) with right-hand sides `rhs`
    /// (B × p × 1). All-or-nothing.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`] (p = 0), [`Error::BatchRefused`] (a problem's
    /// rows not finite), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn insert_rows(&mut self, rows: BatchRef<'_, T>, rhs: BatchRef<'_, T>) -> Result<()> {
        self.insert_rows_at(self.m, rows, rhs)
    }

    /// [`GpuRBatch::insert_rows_at`] with the rows (B·p·n) and right-hand sides (B·p) in
    /// device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::insert_rows_at`]; [`Error::Shape`] when a buffer is shorter.
    pub fn insert_rows_device(
        &mut self,
        k0: usize,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
    ) -> Result<()> {
        const OP: &str = "GpuRBatch::insert_rows_device";
        let rows = dev_rows(OP, (rows, rhs), (self.batch, p, self.n))?;
        self.insert_rows_on(OP, k0, rows)
    }

    /// Removes p rows from every problem, given them (`rows`, B × p × n, with `rhs`, as
    /// they entered). All-or-nothing.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`], [`Error::Underdetermined`] (fewer than n rows
    /// would be left), [`Error::BatchRefused`] (a refused downdate or non-finite rows),
    /// [`Error::InvalidParam`] on a batch that keeps its rows (it deletes them by position:
    /// [`GpuRBatch::delete_rows`]), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn delete_rows_with(&mut self, rows: BatchRef<'_, T>, rhs: BatchRef<'_, T>) -> Result<()> {
        const OP: &str = "GpuRBatch::delete_rows_with";
        self.refuse_given_rows(OP, "GpuRBatch::delete_rows")?;
        let g = gather(OP, (rows, rhs), self.batch, self.n)?;
        let (rd, ed) = upload_rows(&self.gpu, &g)?;
        let rows = dev_rows(OP, (&rd, &ed), (self.batch, g.p, self.n))?;
        self.delete_rows_with_on(OP, rows)
    }

    /// [`GpuRBatch::delete_rows_with`] with the rows (B·p·n) and right-hand sides (B·p) in
    /// device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::delete_rows_with`]; [`Error::Shape`] when a buffer is shorter.
    pub fn delete_rows_with_device(
        &mut self,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
    ) -> Result<()> {
        const OP: &str = "GpuRBatch::delete_rows_with_device";
        self.refuse_given_rows(OP, "GpuRBatch::delete_rows")?;
        let rows = dev_rows(OP, (rows, rhs), (self.batch, p, self.n))?;
        self.delete_rows_with_on(OP, rows)
    }

    fn delete_rows_with_on(&mut self, op: &'static str, rows: Rows<'_, T>) -> Result<()> {
        let p = rows.p;
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if self.m < p || self.m - p < self.n {
            return Err(Error::Underdetermined {
                op,
                m: self.m.saturating_sub(p),
                n: self.n,
            });
        }
        let none = self.no_rows();
        let out = self.step_on(none, rows, (1.0, false))?;
        self.take_all(op, out)?;
        self.m -= p;
        Ok(())
    }

    /// One window step of every problem: R, d and ρ scaled by √`forget` (λ ∈ (0, 1]),
    /// `rows` in, `old_rows` out (as given: the caller weighs them as they now stand). With
    /// as many rows in as out each problem proceeds or refuses alone (the report);
    /// otherwise the step changes m and is all-or-nothing.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`] (no rows either way),
    /// [`Error::InvalidParam`] (λ; a batch that keeps its rows: [`GpuRBatch::slide_kept`]),
    /// [`Error::Underdetermined`], [`Error::BatchRefused`], [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn slide(
        &mut self,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
        old_rows: BatchRef<'_, T>,
        old_rhs: BatchRef<'_, T>,
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::slide";
        self.refuse_given_rows(OP, "GpuRBatch::slide_kept")?;
        let gin = gather(OP, (rows, rhs), self.batch, self.n)?;
        let gout = gather(OP, (old_rows, old_rhs), self.batch, self.n)?;
        let (ri, ei) = upload_rows(&self.gpu, &gin)?;
        let (ro, eo) = upload_rows(&self.gpu, &gout)?;
        let (b, n) = (self.batch, self.n);
        let rin = dev_rows(OP, (&ri, &ei), (b, gin.p, n))?;
        let rout = dev_rows(OP, (&ro, &eo), (b, gout.p, n))?;
        self.slide_on(OP, rin, rout, forget)
    }

    /// [`GpuRBatch::slide`] with the rows in (B·p_in·n, B·p_in) and out (B·p_out·n,
    /// B·p_out) in device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::slide`]; [`Error::Shape`] when a buffer is shorter.
    pub fn slide_device(
        &mut self,
        (p_in, rows, rhs): (usize, &DevVec<T>, &DevVec<T>),
        (p_out, old_rows, old_rhs): (usize, &DevVec<T>, &DevVec<T>),
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::slide_device";
        self.refuse_given_rows(OP, "GpuRBatch::slide_kept_device")?;
        let (b, n) = (self.batch, self.n);
        let rin = dev_rows(OP, (rows, rhs), (b, p_in, n))?;
        let rout = dev_rows(OP, (old_rows, old_rhs), (b, p_out, n))?;
        self.slide_on(OP, rin, rout, forget)
    }

    fn slide_on(
        &mut self,
        op: &'static str,
        rin: Rows<'_, T>,
        rout: Rows<'_, T>,
        forget: f64,
    ) -> Result<BatchReport> {
        check_forget(op, forget)?;
        let (p_in, p_out) = (rin.p, rout.p);
        if p_in == 0 && p_out == 0 {
            return Err(Error::EmptyBlock { op });
        }
        let m_after = self.m + p_in;
        if m_after < p_out || m_after - p_out < self.n {
            return Err(Error::Underdetermined {
                op,
                m: m_after.saturating_sub(p_out),
                n: self.n,
            });
        }
        let out = self.step_on(rin, rout, (forget.sqrt(), false))?;
        if p_in != p_out {
            self.take_all(op, out)?;
            self.m = m_after - p_out;
            return Ok(BatchReport {
                outcomes: (0..self.batch).map(|_| Ok(())).collect(),
            });
        }
        self.states = out.states;
        Ok(BatchReport {
            outcomes: out
                .status
                .iter()
                .map(|&c| refusal(op, c).map_or(Ok(()), Err))
                .collect(),
        })
    }

    /// The least-squares solution of every problem: x (B × n × 1) where R passes the rank
    /// test (|R_jj| > tol·‖R‖_F, tol = max(m, n)·u/√min(m, n)), else NaN with
    /// [`Error::RankDeficient`] in its status (and a NaN residual norm); the residual
    /// norms ρ.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn solve(&self) -> Result<BatchSolution<T>> {
        let out = self.step_on(self.no_rows(), self.no_rows(), (1.0, true))?;
        let (x, rss) = out.solution.unwrap_or_default();
        let deficient = out.status.contains(&STATUS_RANK_DEFICIENT);
        let r = if deficient {
            Some(self.to_host()?.0)
        } else {
            None
        };
        let status = out
            .status
            .iter()
            .enumerate()
            .map(|(i, &c)| match (c, &r) {
                (STATUS_RANK_DEFICIENT, Some(r)) => {
                    Err(rank_error(&r[i * self.n * self.n..], self.m, self.n))
                }
                _ => Ok(()),
            })
            .collect();
        Ok(BatchSolution {
            x,
            residual_norms: rss.iter().map(|v| v.to_f64().max(0.0).sqrt()).collect(),
            status,
            n: self.n,
            q: 1,
        })
    }

    /// R (B × n × n row-major, zero below the diagonal), d (B × n) and ρ (B) on the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn to_host(&self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let (mut r, mut d, mut rho) = self.states.to_host(&self.gpu)?;
        r.truncate(self.batch * self.n * self.n);
        d.truncate(self.batch * self.n);
        rho.truncate(self.batch);
        Ok((r, d, rho))
    }

    /// Deletes columns k0..k0+p of every problem (at least one column stays). Without kept
    /// data the rows of [R d] without those columns, and a row [0 ρ], are folded into an
    /// empty state of n − p columns by the batch's step (docs/algorithms.md#batched-states)
    /// — the same AᵀA and Aᵀb, and the part of d that the remaining columns no longer reach
    /// joins ρ — in one launch and one round trip of R, d and ρ through the host
    /// (B·(n² + n + 1) elements); with kept data each problem is folded afresh from its
    /// rows without those columns. All-or-nothing.
    ///
    /// # Errors
    /// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > n),
    /// [`Error::InvalidParam`] (every column deleted), [`Error::BatchRefused`] (a problem
    /// whose state is not finite), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuRBatch::delete_cols";
        if p == 0 {
            return Err(Error::EmptyBlock { op: OP });
        }
        if k0 + p > self.n {
            return Err(Error::OutOfRange {
                op: OP,
                k0,
                p,
                n: self.n,
            });
        }
        if p == self.n {
            return Err(Error::InvalidParam {
                op: OP,
                what: "p",
                why: "a batch keeps at least one column".into(),
            });
        }
        if self.kept.is_some() {
            return self.delete_cols_kept(OP, k0, p);
        }
        let (n, no) = (self.n, self.n - p);
        let (r, d, rho) = self.to_host()?;
        let mut gin = Gathered {
            rows: Vec::with_capacity(self.batch * (n + 1) * no),
            rhs: Vec::with_capacity(self.batch * (n + 1)),
            p: n + 1,
        };
        for k in 0..self.batch {
            for i in 0..n {
                let row = &r[(k * n + i) * n..(k * n + i + 1) * n];
                gin.rows.extend_from_slice(&row[..k0]);
                gin.rows.extend_from_slice(&row[k0 + p..]);
                gin.rhs.push(d[k * n + i]);
            }
            gin.rows.extend(std::iter::repeat_n(T::ZERO, no));
            gin.rhs.push(rho[k]);
        }
        let (rd, ed) = upload_rows(&self.gpu, &gin)?;
        let rows = dev_rows(OP, (&rd, &ed), (self.batch, n + 1, no))?;
        let out = RStates::refold(
            &self.gpu,
            (self.batch, n + 1, no),
            (rows.rows, rows.rhs),
            false,
        )?;
        self.take_all(OP, out)?;
        self.n = no;
        Ok(())
    }

    /// No rows (p = 0; the views only have to exist).
    pub(super) fn no_rows(&self) -> Rows<'_, T> {
        Rows {
            rows: self.states.rho.slice(..),
            rhs: self.states.rho.slice(..),
            p: 0,
        }
    }

    /// One launch: the step with device rows into new buffers, with the statuses; `self`
    /// is left as it was.
    pub(super) fn step_on(
        &self,
        rin: Rows<'_, T>,
        rout: Rows<'_, T>,
        (scale, solve): (f64, bool),
    ) -> Result<StepOut<T>> {
        let shape = StepShape {
            batch: self.batch,
            n: self.n,
            p_in: rin.p,
            p_out: rout.p,
            clear: false,
            solve,
            scale,
            rank_tol: -1.0,
            m_rows: self.m,
        };
        let rows = StepRows {
            rows_in: rin.rows,
            rhs_in: rin.rhs,
            rows_out: rout.rows,
            rhs_out: rout.rhs,
        };
        self.states.step_device(&self.gpu, &shape, rows)
    }

    /// Takes a step's states only when every problem accepted it (non-finite rows and
    /// refused downdates refuse the call; the rank is not tested).
    pub(super) fn take_all(&mut self, op: &'static str, out: StepOut<T>) -> Result<()> {
        let problems: Vec<(usize, Error)> = out
            .status
            .iter()
            .enumerate()
            .filter_map(|(i, &c)| refusal(op, c).map(|e| (i, e)))
            .collect();
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op, problems });
        }
        self.states = out.states;
        Ok(())
    }
}

/// λ ∈ (0, 1].
///
/// # Errors
/// [`Error::InvalidParam`].
pub(super) fn check_forget(op: &'static str, forget: f64) -> Result<()> {
    if !(forget > 0.0 && forget <= 1.0) {
        return Err(Error::InvalidParam {
            op,
            what: "forget",
            why: format!("the forgetting factor must lie in (0, 1], got {forget}"),
        });
    }
    Ok(())
}

/// The rank test's error for one problem's R (n × n row-major) standing for m rows, as the
/// GPU batches' solve applies it: the first column whose diagonal entry is at or below
/// tol·‖R‖_F (or not finite), tol = max(m, n)·u/√min(m, n).
pub(super) fn rank_error<T: GpuScalar>(r: &[T], m: usize, n: usize) -> Error {
    let norm = r[..n * n]
        .iter()
        .map(|v| v.to_f64() * v.to_f64())
        .sum::<f64>()
        .sqrt();
    let (big, small) = (m.max(n), m.min(n).max(1));
    let tol = big as f64 * T::UNIT_ROUNDOFF / (small as f64).sqrt() * norm;
    let column = (0..n)
        .find(|&j| {
            let v = r[j * n + j].to_f64().abs();
            !v.is_finite() || v <= tol
        })
        .unwrap_or(0);
    Error::RankDeficient {
        column,
        r_jj: r[column * n + column].to_f64().abs(),
        tol,
    }
}
