//! Batched thin-Q states on one GPU, a team of lanes a problem (docs/algorithms.md#batched-states).
#![forbid(unsafe_code)]

use std::sync::Arc;

use cudarc::driver::CudaView;

use super::gpu::{need, rank_error};
use super::{BatchRef, BatchReport, BatchSolution};
use crate::base::error::{Error, Result};
use crate::gpu::algo::batch_q::{
    smem, QStates, Statuses, BATCH_Q_MAX_N, BATCH_Q_SMEM_LIMIT, STATUS_DOWNDATE_REFUSED,
    STATUS_NON_FINITE, STATUS_RANK_DEFICIENT, STATUS_REFRESHED,
};
use crate::gpu::launch::batch_q::{default_team, QShape};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};

/// B least-squares problems of one shape m×n (n ≤ 32, one right-hand side) on one GPU, each
/// kept as the thin kind of [`crate::QPolicy::Thin`] keeps it: Q₁ (m×n, orthonormal columns),
/// R (n×n, upper triangular) and b; d = Q₁ᵀb is formed when solving. Each call is one launch
/// over the batch with a team of lanes a problem (by default one lane a row; see
/// [`GpuQBatch::set_lanes_per_problem`] and docs/algorithms.md#batched-states), whatever B.
///
/// The refusal rules are [`super::BatchQr`]'s: arguments the problems share (positions,
/// sizes, λ) refuse the call before anything runs; [`GpuQBatch::insert_rows`],
/// [`GpuQBatch::delete_rows`], [`GpuQBatch::insert_cols`], [`GpuQBatch::replace_cols`] and
/// [`GpuQBatch::shift_col`], [`GpuQBatch::delete_cols`] change the shape or the columns and
/// are all-or-nothing
/// ([`Error::BatchRefused`] names the problems whose data were not finite, whose deletion
/// the completion's test refused (docs/algorithms.md#thin-row-deletion) or whose new column
/// lies in the span of their columns); [`GpuQBatch::rank_one`], [`GpuQBatch::rank_k`]
/// and [`GpuQBatch::slide`] proceed per problem and report, leaving a refusing problem bit for
/// bit as it was. Each call writes new buffers and keeps the old ones until it succeeds.
///
/// [`GpuQBatch::factorize_full`] makes a batch of the full kind ([`crate::QPolicy::Full`]):
/// each problem also keeps the complement Q₂ of range(Q₁), which every call carries over in
/// one more launch (docs/algorithms.md#batched-full-q-states), and [`GpuQBatch::full_q`]
/// reads Q = [Q₁ Q₂].
///
/// Sizes: 1 ≤ n ≤ 32, m ≥ n, and a problem's working copy within 48 KiB of shared memory
/// (about (2m + 1)·n elements to factorise, (m + p)(n + p) to insert p rows): m·n up to
/// about 3,000 in f64 and 6,000 in f32. Larger problems belong to [`super::BatchQr`] or to a
/// single [`crate::Qr`] each.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::batch::{BatchRef, GpuQBatch};
/// use cuqr::Gpu;
/// let gpu = Arc::new(Gpu::new(0)?);
/// let (b, m, n) = (10_000, 64, 8);
/// let a: Vec<f64> = (0..b * m * n).map(|x| ((x * 7919) % 31) as f64 - 15.0).collect();
/// let y: Vec<f64> = (0..b * m).map(|x| (x % 5) as f64).collect();
/// let mut bank = GpuQBatch::factorize(&gpu, BatchRef::row_major(&a, b, m, n)?,
///                                     BatchRef::row_major(&y, b, m, 1)?)?;
/// // A + u vᵀ for every problem, then one new row each at the end
/// let (u, v) = (vec![0.5; b * m], vec![1.0; b * n]);
/// let report = bank.rank_one(BatchRef::row_major(&u, b, m, 1)?, BatchRef::row_major(&v, b, n, 1)?)?;
/// assert!(report.all_ok());
/// let (row, e) = (vec![1.0; b * n], vec![2.0; b]);
/// bank.insert_rows(m, BatchRef::row_major(&row, b, 1, n)?, BatchRef::row_major(&e, b, 1, 1)?)?;
/// let sol = bank.solve()?;
/// # assert_eq!(sol.x.len(), b * n);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Debug)]
pub struct GpuQBatch<T: GpuScalar> {
    gpu: Arc<Gpu>,
    batch: usize,
    m: usize,
    n: usize,
    /// Lanes a problem (docs/algorithms.md#batched-states).
    team: usize,
    states: QStates<T>,
    /// Each call's per-problem status words (device and page-locked host), reused; behind a
    /// mutex so that the solve can take `&self`.
    status: std::sync::Mutex<Statuses>,
}

/// What [`GpuQBatch::check_drift`] measured and did.
#[derive(Clone, Debug, PartialEq)]
pub struct DriftCheck {
    /// Each problem's ‖Q₁ᵀQ₁ − I‖_F as the check found it (before any refresh).
    pub estimates: Vec<f64>,
    /// The problems refreshed (estimate above the tolerance), in order.
    pub refreshed: Vec<usize>,
    /// Problems above the tolerance whose refreshed factors would not have been finite:
    /// left as they were.
    pub failed: Vec<usize>,
}

/// `r` (batch × rows × cols) in row-major order, checked against the expected sizes.
fn row_major<T: GpuScalar>(
    op: &'static str,
    what: &'static str,
    r: &BatchRef<'_, T>,
    (batch, rows, cols): (usize, usize, usize),
) -> Result<Vec<T>> {
    if r.batch() != batch {
        return Err(Error::shape(op, what, r.batch(), batch));
    }
    if r.nrows() != rows {
        return Err(Error::shape(op, what, r.nrows(), rows));
    }
    if r.ncols() != cols {
        return Err(Error::shape(op, what, r.ncols(), cols));
    }
    if let Some(s) = r.row_major_slice() {
        return Ok(s.to_vec());
    }
    let mut out = Vec::with_capacity(batch * rows * cols);
    for k in 0..batch {
        for i in 0..rows {
            for j in 0..cols {
                out.push(r.get(k, i, j).unwrap_or(T::ZERO));
            }
        }
    }
    Ok(out)
}

/// The error a problem's status code stands for (`None` for success).
fn refusal(op: &'static str, code: u32) -> Option<Error> {
    match code {
        STATUS_NON_FINITE => Some(Error::NonFinite {
            op,
            what: "the problem's data or its updated factors",
            row: 0,
            col: 0,
        }),
        STATUS_DOWNDATE_REFUSED => Some(Error::DowndateFailed {
            op,
            row: 0,
            why: "the rows left do not determine R to working precision (the completion's \
                  norm is below √u)"
                .into(),
        }),
        _ => None,
    }
}

/// The problems that refused, with their errors.
fn refusals(op: &'static str, status: &[u32]) -> Vec<(usize, Error)> {
    status
        .iter()
        .enumerate()
        .filter_map(|(i, &c)| refusal(op, c).map(|e| (i, e)))
        .collect()
}

/// The problems that refused a column update, with their errors: a column in the span of
/// the others ([`Error::RankDeficient`], `column` the block's first) or non-finite data.
fn column_refusals(op: &'static str, status: &[u32], column: usize) -> Vec<(usize, Error)> {
    status
        .iter()
        .enumerate()
        .filter_map(|(i, &c)| match c {
            STATUS_RANK_DEFICIENT => Some((
                i,
                Error::RankDeficient {
                    column,
                    r_jj: 0.0,
                    tol: 0.0,
                },
            )),
            c => refusal(op, c).map(|e| (i, e)),
        })
        .collect()
}

fn upload<T: GpuScalar>(gpu: &Gpu, v: &[T]) -> Result<DevVec<T>> {
    if v.is_empty() {
        DevVec::zeros(gpu, 1)
    } else {
        DevVec::from_slice(gpu, v)
    }
}

/// `s` with as many lanes a problem as a block's shared memory needs for working copies of
/// `elems` elements of `size` bytes (32/team of them).
fn fitted(mut s: QShape, elems: usize, size: usize) -> QShape {
    while s.team < 32 && (32 / s.team) * elems * size > BATCH_Q_SMEM_LIMIT {
        s.team *= 2;
    }
    s
}

/// The shared-memory check: a problem's working copy of `elems` elements fits a launch.
fn fits<T>(op: &'static str, elems: usize) -> Result<()> {
    let bytes = elems * size_of::<T>();
    if bytes > BATCH_Q_SMEM_LIMIT {
        return Err(Error::InvalidParam {
            op,
            what: "problem size",
            why: format!(
                "a problem's working copy takes {bytes} bytes of shared memory, above the \
                 {BATCH_Q_SMEM_LIMIT} a GPU batch holds: use BatchQr or one Qr a problem"
            ),
        });
    }
    Ok(())
}

impl<T: GpuScalar> GpuQBatch<T> {
    /// Factorises B problems: A (B × m × n) and b (B × m × 1) from host memory, 1 ≤ n ≤ 32,
    /// m ≥ n.
    ///
    /// # Errors
    /// [`Error::Shape`] for mismatched sizes or n outside 1..=32; [`Error::Underdetermined`]
    /// for m < n; [`Error::InvalidParam`] for a problem too large for shared memory;
    /// [`Error::BatchRefused`] when a problem's data are not finite (nothing is made);
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn factorize(gpu: &Arc<Gpu>, a: BatchRef<'_, T>, b: BatchRef<'_, T>) -> Result<Self> {
        const OP: &str = "GpuQBatch::factorize";
        let (batch, m, n) = (a.batch(), a.nrows(), a.ncols());
        Self::check_shape(OP, m, n)?;
        let av = row_major(OP, "A", &a, (batch, m, n))?;
        let bv = row_major(OP, "b (batch, rows, one column)", &b, (batch, m, 1))?;
        let (ad, bd) = (upload(gpu, &av)?, upload(gpu, &bv)?);
        Self::factorize_device(gpu, (&ad, &bd), (batch, m, n))
    }

    /// [`GpuQBatch::factorize`] from device memory: `a` holds B·m·n values (problem after
    /// problem, each m×n row-major, a C-order (B, m, n) array) and `b` B·m.
    ///
    /// # Errors
    /// As [`GpuQBatch::factorize`]; [`Error::Shape`] when a buffer is shorter than the
    /// shape needs.
    pub fn factorize_device(
        gpu: &Arc<Gpu>,
        (a, b): (&DevVec<T>, &DevVec<T>),
        (batch, m, n): (usize, usize, usize),
    ) -> Result<Self> {
        Self::factorize_kind(
            "GpuQBatch::factorize_device",
            gpu,
            (a, b),
            (batch, m, n),
            false,
        )
    }

    /// [`GpuQBatch::factorize`] keeping each problem's full Q (m×m): the thin state and the
    /// orthogonal complement Q₂ (m×(m−n)) of range(Q₁), which every later call carries over
    /// (docs/algorithms.md#batched-full-q-states) — the kind of [`crate::QPolicy::Full`].
    /// [`GpuQBatch::full_q`] reads Q = [Q₁ Q₂]; R's rows below n are zero. The complement
    /// costs m·(m−n) elements a problem and, in each update, about one more pass over them.
    ///
    /// # Errors
    /// As [`GpuQBatch::factorize`]; [`Error::InvalidParam`] also when the complement's
    /// working copy does not fit a launch (m − n above about 6,000 elements of shared
    /// memory).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::batch::{BatchRef, GpuQBatch};
    /// use cuqr::Gpu;
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let (b, m, n) = (1_000, 20, 4);
    /// let a: Vec<f64> = (0..b * m * n).map(|x| ((x * 7919) % 31) as f64 - 15.0).collect();
    /// let y: Vec<f64> = (0..b * m).map(|x| (x % 5) as f64).collect();
    /// let mut bank = GpuQBatch::factorize_full(&gpu, BatchRef::row_major(&a, b, m, n)?,
    ///                                          BatchRef::row_major(&y, b, m, 1)?)?;
    /// bank.delete_rows(0, 1)?;
    /// let q = bank.full_q()?; // B × 19 × 19, each problem column-major
    /// assert_eq!(q.len(), b * 19 * 19);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize_full(gpu: &Arc<Gpu>, a: BatchRef<'_, T>, b: BatchRef<'_, T>) -> Result<Self> {
        const OP: &str = "GpuQBatch::factorize_full";
        let (batch, m, n) = (a.batch(), a.nrows(), a.ncols());
        Self::check_shape(OP, m, n)?;
        let av = row_major(OP, "A", &a, (batch, m, n))?;
        let bv = row_major(OP, "b (batch, rows, one column)", &b, (batch, m, 1))?;
        let (ad, bd) = (upload(gpu, &av)?, upload(gpu, &bv)?);
        Self::factorize_kind(OP, gpu, (&ad, &bd), (batch, m, n), true)
    }

    /// [`GpuQBatch::factorize_full`] from device memory (layouts as
    /// [`GpuQBatch::factorize_device`]).
    ///
    /// # Errors
    /// As [`GpuQBatch::factorize_full`]; [`Error::Shape`] when a buffer is shorter than the
    /// shape needs.
    pub fn factorize_full_device(
        gpu: &Arc<Gpu>,
        (a, b): (&DevVec<T>, &DevVec<T>),
        (batch, m, n): (usize, usize, usize),
    ) -> Result<Self> {
        Self::factorize_kind(
            "GpuQBatch::factorize_full_device",
            gpu,
            (a, b),
            (batch, m, n),
            true,
        )
    }

    fn factorize_kind(
        op: &'static str,
        gpu: &Arc<Gpu>,
        (a, b): (&DevVec<T>, &DevVec<T>),
        (batch, m, n): (usize, usize, usize),
        full: bool,
    ) -> Result<Self> {
        Self::check_shape(op, m, n)?;
        if full {
            check_complement::<T>(op, (m, n), 1)?;
        }
        need(op, "A", a, batch * m * n)?;
        need(op, "b", b, batch * m)?;
        let team = default_team(m, n, Self::largest(m, n), size_of::<T>());
        let shape = fitted(
            QShape { batch, m, n, team },
            smem::factor(m, n),
            size_of::<T>(),
        );
        let mut st = Statuses::new(gpu, batch)?;
        let (states, status) = QStates::factor(gpu, shape, (a.view(), b.view()), &mut st, full)?;
        let problems = refusals(op, &status);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op, problems });
        }
        Ok(Self {
            gpu: gpu.clone(),
            batch,
            m,
            n,
            team,
            states,
            status: std::sync::Mutex::new(st),
        })
    }

    fn check_shape(op: &'static str, m: usize, n: usize) -> Result<()> {
        if n == 0 || n > BATCH_Q_MAX_N {
            return Err(Error::shape(
                op,
                "columns n (1..=32)",
                n,
                n.clamp(1, BATCH_Q_MAX_N),
            ));
        }
        if m < n {
            return Err(Error::Underdetermined { op, m, n });
        }
        fits::<T>(op, smem::factor(m, n))?;
        fits::<T>(op, smem::rank_one(m, n))?;
        fits::<T>(op, smem::delete_rows(m, n))
    }

    /// The largest working copy of a problem (elements) among the calls at m×n.
    fn largest(m: usize, n: usize) -> usize {
        smem::factor(m, n)
            .max(smem::rank_one(m, n))
            .max(smem::delete_rows(m, n))
    }

    /// The launch shape for m rows and a working copy of `elems` elements a problem.
    fn shape_at(&self, m: usize, elems: usize) -> QShape {
        let s = QShape {
            batch: self.batch,
            m,
            n: self.n,
            team: self.team,
        };
        fitted(s, elems, size_of::<T>())
    }

    /// Lanes that work on one problem: a power of two with n ≤ lanes ≤ 32, chosen from m
    /// and n (about eight rows a lane) unless set.
    pub fn lanes_per_problem(&self) -> usize {
        self.team
    }

    /// Sets the lanes a problem (a tuning knob: fewer lanes put more problems in a warp and
    /// share the rotation chains among them; more lanes share the rows). A call that needs
    /// more shared memory than 32/lanes problems a warp allow uses more lanes for itself.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] unless lanes is a power of two with n ≤ lanes ≤ 32.
    pub fn set_lanes_per_problem(&mut self, lanes: usize) -> Result<()> {
        if !lanes.is_power_of_two() || lanes < self.n || lanes > 32 {
            return Err(Error::InvalidParam {
                op: "GpuQBatch::set_lanes_per_problem",
                what: "lanes",
                why: format!(
                    "must be a power of two from n = {} to 32, got {lanes}",
                    self.n
                ),
            });
        }
        self.team = lanes;
        Ok(())
    }

    /// Problems B.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Rows m of every problem.
    pub fn nrows(&self) -> usize {
        self.m
    }

    /// Columns n.
    pub fn ncols(&self) -> usize {
        self.n
    }

    /// Replaces every A by A + u vᵀ with u (B × m × 1) and v (B × n × 1) from host memory
    /// (docs/algorithms.md#thin-rank-one-update). Per problem: one whose u or v is not
    /// finite refuses alone ([`Error::NonFinite`] in the report) and is left as it was.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn rank_one(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "GpuQBatch::rank_one";
        let uv = row_major(OP, "u (batch, m, 1)", &u, (self.batch, self.m, 1))?;
        let vv = row_major(OP, "v (batch, n, 1)", &v, (self.batch, self.n, 1))?;
        let (ud, vd) = (upload(&self.gpu, &uv)?, upload(&self.gpu, &vv)?);
        self.rank_one_device(&ud, &vd)
    }

    /// [`GpuQBatch::rank_one`] with u (B·m) and v (B·n) in device memory.
    ///
    /// # Errors
    /// [`Error::Shape`] when a buffer is shorter than B·m or B·n; [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn rank_one_device(&mut self, u: &DevVec<T>, v: &DevVec<T>) -> Result<BatchReport> {
        self.rank_k_op("GpuQBatch::rank_one", (u, v), 1)
    }

    /// Replaces every A by A + U Vᵀ with U (B × m × k) and V (B × n × k) from host memory, as
    /// k rank-one updates in one launch (docs/algorithms.md#batched-states). Per problem: one
    /// with a non-finite entry in its U or V refuses alone ([`Error::NonFinite`] in the
    /// report) and is left as it was.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`] (k = 0), [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn rank_k(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "GpuQBatch::rank_k";
        let k = u.ncols();
        let uv = row_major(OP, "U (batch, m, k)", &u, (self.batch, self.m, k))?;
        let vv = row_major(OP, "V (batch, n, k)", &v, (self.batch, self.n, k))?;
        let (ud, vd) = (upload(&self.gpu, &uv)?, upload(&self.gpu, &vv)?);
        self.rank_k_device(&ud, &vd, k)
    }

    /// [`GpuQBatch::rank_k`] with U (B·m·k) and V (B·n·k) in device memory, each problem's
    /// block row-major (a C-order (B, m, k) array).
    ///
    /// # Errors
    /// As [`GpuQBatch::rank_k`].
    pub fn rank_k_device(&mut self, u: &DevVec<T>, v: &DevVec<T>, k: usize) -> Result<BatchReport> {
        self.rank_k_op("GpuQBatch::rank_k", (u, v), k)
    }

    fn rank_k_op(
        &mut self,
        op: &'static str,
        (u, v): (&DevVec<T>, &DevVec<T>),
        k: usize,
    ) -> Result<BatchReport> {
        if k == 0 {
            return Err(Error::EmptyBlock { op });
        }
        need(op, "u", u, self.batch * self.m * k)?;
        need(op, "v", v, self.batch * self.n * k)?;
        let shape = self.shape_at(self.m, smem::rank_one(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let status = self
            .states
            .rank_one(&self.gpu, shape, (u.view(), v.view(), k), st)?;
        Ok(report(op, &status))
    }

    /// Deletes columns k0..k0+p of every problem (docs/algorithms.md#batched-states); at
    /// least one column stays. b does not change. All-or-nothing.
    ///
    /// # Errors
    /// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > n),
    /// [`Error::InvalidParam`] (every column deleted), [`Error::BatchRefused`] (a result that
    /// is not finite), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuQBatch::delete_cols";
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
        let shape = self.shape_at(self.m, smem::delete_cols(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (new, status) = self.states.delete_cols(&self.gpu, shape, (k0, p), st)?;
        let problems = refusals(OP, &status);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        self.states.install(new);
        self.n -= p;
        Ok(())
    }

    /// Moves column `from` of every problem to position `to`, the columns between closing up
    /// (docs/algorithms.md#column-shift; one launch: the column formed from Q₁ and R,
    /// deleted and inserted again). b does not change. All-or-nothing: a problem whose R is
    /// singular (the column lies in the span of the others) refuses with
    /// [`Error::RankDeficient`]. `from == to` changes nothing.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] (from or to ≥ n), [`Error::InvalidParam`] (too large for
    /// shared memory), [`Error::BatchRefused`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn shift_col(&mut self, from: usize, to: usize) -> Result<()> {
        const OP: &str = "GpuQBatch::shift_col";
        for k0 in [from, to] {
            if k0 >= self.n {
                return Err(Error::OutOfRange {
                    op: OP,
                    k0,
                    p: 1,
                    n: self.n,
                });
            }
        }
        if from == to {
            return Ok(());
        }
        fits::<T>(OP, smem::shift_col(self.m, self.n))?;
        let shape = self.shape_at(self.m, smem::shift_col(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (new, status) = self.states.shift_col(&self.gpu, shape, (from, to), st)?;
        let problems = column_refusals(OP, &status, from);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        // range(Q₁) does not change: a full batch keeps its complement
        self.states.q = new.q;
        self.states.r = new.r;
        Ok(())
    }

    /// Drift control (docs/algorithms.md#drift-control), one launch: measures every
    /// problem's loss of orthogonality ‖Q₁ᵀQ₁ − I‖_F exactly (m·n² flops a problem) and
    /// refreshes, in place, each problem above `tol` (default 10·max(m, n)·u, the CPU
    /// states' default): one Householder QR Q₁ = Q′R₂, then Q₁ ← Q′ and R ← R₂R, the same
    /// A with orthonormal columns again; b does not change. `tol = 0` refreshes every
    /// problem. The batch does not check by itself: call this every few hundred updates
    /// (an update adds O((m + n)u) to the estimate).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a negative or NaN `tol`; [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn check_drift(&mut self, tol: Option<f64>) -> Result<DriftCheck> {
        const OP: &str = "GpuQBatch::check_drift";
        let tol = tol.unwrap_or(10.0 * self.m.max(self.n) as f64 * T::UNIT_ROUNDOFF);
        if tol.is_nan() || tol < 0.0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "tol",
                why: format!("{tol} is not a number ≥ 0"),
            });
        }
        let shape = self.shape_at(self.m, smem::refresh(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (es, status) = self
            .states
            .refresh(&self.gpu, shape, T::from_f64(tol), st)?;
        let pick = |code: u32| {
            status
                .iter()
                .enumerate()
                .filter(|&(_, &c)| c == code)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        Ok(DriftCheck {
            estimates: es.iter().map(|e| e.to_f64()).collect(),
            refreshed: pick(STATUS_REFRESHED),
            failed: pick(STATUS_NON_FINITE),
        })
    }

    /// Inserts p columns before column k0 (0 ≤ k0 ≤ n) in every problem: `cols` (B × m × p)
    /// from host memory (docs/algorithms.md#thin-column-insertion; one launch). b does not
    /// change. All-or-nothing: a problem whose new column lies in range(Q₁) (its part
    /// outside it at most 64u·‖u‖) refuses with [`Error::RankDeficient`] (its `column` the
    /// block's first), one with a non-finite entry with [`Error::NonFinite`].
    ///
    /// # Errors
    /// [`Error::Shape`] (sizes, or n + p above 32), [`Error::EmptyBlock`] (p = 0),
    /// [`Error::OutOfRange`] (k0 > n), [`Error::Underdetermined`] (m < n + p),
    /// [`Error::InvalidParam`] (too large for shared memory), [`Error::BatchRefused`],
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn insert_cols(&mut self, k0: usize, cols: BatchRef<'_, T>) -> Result<()> {
        const OP: &str = "GpuQBatch::insert_cols";
        let p = cols.ncols();
        let cv = row_major(OP, "columns (batch, m, p)", &cols, (self.batch, self.m, p))?;
        let cd = upload(&self.gpu, &cv)?;
        self.insert_cols_device(k0, p, &cd)
    }

    /// [`GpuQBatch::insert_cols`] with the columns in device memory (B·m·p, each problem's
    /// m×p block row-major: a C-order (B, m, p) array).
    ///
    /// # Errors
    /// As [`GpuQBatch::insert_cols`].
    pub fn insert_cols_device(&mut self, k0: usize, p: usize, cols: &DevVec<T>) -> Result<()> {
        const OP: &str = "GpuQBatch::insert_cols";
        if p == 0 {
            return Err(Error::EmptyBlock { op: OP });
        }
        if k0 > self.n {
            return Err(Error::OutOfRange {
                op: OP,
                k0,
                p,
                n: self.n,
            });
        }
        let np = self.n + p;
        if np > BATCH_Q_MAX_N {
            return Err(Error::shape(
                OP,
                "columns after the insertion (n + p ≤ 32)",
                np,
                BATCH_Q_MAX_N,
            ));
        }
        Self::check_shape(OP, self.m, np)?;
        fits::<T>(OP, smem::insert_cols(self.m, self.n, p))?;
        if self.is_full() {
            check_complement::<T>(OP, (self.m, self.n), p)?;
        }
        need(OP, "columns", cols, self.batch * self.m * p)?;
        let team = self.team.max(np.next_power_of_two());
        let s = QShape {
            batch: self.batch,
            m: self.m,
            n: self.n,
            team,
        };
        let shape = fitted(s, smem::insert_cols(self.m, self.n, p), size_of::<T>());
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (new, status) = self
            .states
            .insert_cols(&self.gpu, shape, (cols.view(), k0, p), st)?;
        let problems = column_refusals(OP, &status, k0);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        self.states.install(new);
        self.n = np;
        self.team = team;
        Ok(())
    }

    /// Replaces columns k0..k0+p of every problem by `cols` (B × m × p) from host memory:
    /// the columns deleted and the new ones inserted at k0 (two launches). b does not
    /// change. All-or-nothing, as [`GpuQBatch::insert_cols`]; at least one column must stay
    /// (to replace them all, factorise the new columns).
    ///
    /// # Errors
    /// As [`GpuQBatch::delete_cols`] and [`GpuQBatch::insert_cols`].
    pub fn replace_cols(&mut self, k0: usize, cols: BatchRef<'_, T>) -> Result<()> {
        const OP: &str = "GpuQBatch::replace_cols";
        let p = cols.ncols();
        let cv = row_major(OP, "columns (batch, m, p)", &cols, (self.batch, self.m, p))?;
        let cd = upload(&self.gpu, &cv)?;
        self.replace_cols_device(k0, p, &cd)
    }

    /// [`GpuQBatch::replace_cols`] with the columns in device memory (B·m·p, a C-order
    /// (B, m, p) array).
    ///
    /// # Errors
    /// As [`GpuQBatch::replace_cols`].
    pub fn replace_cols_device(&mut self, k0: usize, p: usize, cols: &DevVec<T>) -> Result<()> {
        const OP: &str = "GpuQBatch::replace_cols";
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
                why: "every column replaced: factorise the new columns instead".into(),
            });
        }
        need(OP, "columns", cols, self.batch * self.m * p)?;
        let shape = self.shape_at(self.m, smem::delete_cols(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (new, status) = self.states.delete_cols(&self.gpu, shape, (k0, p), st)?;
        let problems = refusals(OP, &status);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        // the old factors stay alive until the insertion succeeds
        let old = self.states.install(new);
        self.n -= p;
        let done = self.insert_cols_device(k0, p, cols);
        if done.is_err() {
            self.states.install(old);
            self.n += p;
        }
        done
    }

    /// Inserts p rows at k0 (0 ≤ k0 ≤ m) in every problem: `rows` (B × p × n) with
    /// right-hand sides `rhs` (B × p × 1) from host memory. All-or-nothing.
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 > m),
    /// [`Error::InvalidParam`] (too large for shared memory), [`Error::BatchRefused`] (a
    /// problem's rows not finite), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn insert_rows(
        &mut self,
        k0: usize,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
    ) -> Result<()> {
        const OP: &str = "GpuQBatch::insert_rows";
        let p = rows.nrows();
        let (rd, ed) = self.upload_rows(OP, (&rows, &rhs), p)?;
        self.insert_rows_device(k0, p, (&rd, &ed))
    }

    /// [`GpuQBatch::insert_rows`] with the rows (B·p·n, each problem's p×n row-major) and
    /// right-hand sides (B·p) in device memory.
    ///
    /// # Errors
    /// As [`GpuQBatch::insert_rows`].
    pub fn insert_rows_device(
        &mut self,
        k0: usize,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
    ) -> Result<()> {
        const OP: &str = "GpuQBatch::insert_rows";
        self.check_insert(OP, k0, p, (rows, rhs))?;
        let shape = self.shape_at(self.m, smem::insert_rows(self.m, self.n, p));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (states, status) = self.states.insert_rows(
            &self.gpu,
            shape,
            (rows.view(), rhs.view()),
            (k0, p, T::ONE),
            st,
        )?;
        let problems = refusals(OP, &status);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        self.states = states;
        self.m += p;
        Ok(())
    }

    /// Rows (B × p × n) and their right-hand sides (B × p × 1) from host memory, checked
    /// and uploaded.
    fn upload_rows(
        &self,
        op: &'static str,
        (rows, rhs): (&BatchRef<'_, T>, &BatchRef<'_, T>),
        p: usize,
    ) -> Result<(DevVec<T>, DevVec<T>)> {
        let rv = row_major(op, "rows (batch, p, n)", rows, (self.batch, p, self.n))?;
        let ev = row_major(
            op,
            "right-hand sides (batch, p, 1)",
            rhs,
            (self.batch, p, 1),
        )?;
        Ok((upload(&self.gpu, &rv)?, upload(&self.gpu, &ev)?))
    }

    fn check_insert(
        &self,
        op: &'static str,
        k0: usize,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
    ) -> Result<()> {
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if k0 > self.m {
            return Err(Error::OutOfRange {
                op,
                k0,
                p,
                n: self.m,
            });
        }
        need(op, "rows", rows, self.batch * p * self.n)?;
        need(op, "right-hand sides", rhs, self.batch * p)?;
        fits::<T>(op, smem::insert_rows(self.m, self.n, p))?;
        fits::<T>(op, smem::delete_rows(self.m + p, self.n))?;
        fits::<T>(op, smem::rank_one(self.m + p, self.n))?;
        if self.is_full() {
            check_complement::<T>(op, (self.m + p, self.n), 1)?;
        }
        Ok(())
    }

    /// Deletes rows k0..k0+p of every problem (docs/algorithms.md#thin-row-deletion). All-or-nothing.
    ///
    /// # Errors
    /// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > m),
    /// [`Error::Underdetermined`] (fewer than n rows left), [`Error::BatchRefused`] (a
    /// problem whose remaining rows do not determine R: [`Error::DowndateFailed`]),
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuQBatch::delete_rows";
        self.check_delete(OP, k0, p, self.m)?;
        let shape = self.shape_at(self.m, smem::delete_rows(self.m, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (states, status) = self
            .states
            .delete_rows(&self.gpu, shape, (k0, p), None, st)?;
        let problems = refusals(OP, &status);
        if !problems.is_empty() {
            return Err(Error::BatchRefused { op: OP, problems });
        }
        self.states = states;
        self.m -= p;
        Ok(())
    }

    fn check_delete(&self, op: &'static str, k0: usize, p: usize, m: usize) -> Result<()> {
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if k0 + p > m {
            return Err(Error::OutOfRange { op, k0, p, n: m });
        }
        if m - p < self.n {
            return Err(Error::Underdetermined {
                op,
                m: m - p,
                n: self.n,
            });
        }
        Ok(())
    }

    /// One window step of every problem: A and b weighted by λ = `forget` ∈ (0, 1] (R and
    /// b scaled by √λ), the p new rows (B × p × n, right-hand sides B × p × 1, host memory)
    /// appended, the p oldest rows deleted. Per problem: one whose rows are not finite or
    /// whose deletion is refused is left bit for bit as it was (its error in the report).
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::EmptyBlock`], [`Error::InvalidParam`] (λ, size),
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn slide(
        &mut self,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuQBatch::slide";
        let p = rows.nrows();
        let (rd, ed) = self.upload_rows(OP, (&rows, &rhs), p)?;
        self.slide_device(p, (&rd, &ed), forget)
    }

    /// [`GpuQBatch::slide`] with the rows (B·p·n) and right-hand sides (B·p) in device
    /// memory. Two launches: the insertion, then the deletion (which writes a refusing
    /// problem's old state).
    ///
    /// # Errors
    /// As [`GpuQBatch::slide`].
    pub fn slide_device(
        &mut self,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuQBatch::slide";
        if !(forget > 0.0 && forget <= 1.0) {
            return Err(Error::InvalidParam {
                op: OP,
                what: "forget",
                why: format!("the forgetting factor must lie in (0, 1], got {forget}"),
            });
        }
        self.check_insert(OP, self.m, p, (rows, rhs))?;
        self.check_delete(OP, 0, p, self.m + p)?;
        let scale = T::from_f64(forget.sqrt());
        let shape = self.shape_at(self.m, smem::insert_rows(self.m, self.n, p));
        let grown_shape = self.shape_at(self.m + p, smem::delete_rows(self.m + p, self.n));
        let st = self.status.get_mut().unwrap_or_else(|e| e.into_inner());
        let (grown, st_in) = self.states.insert_rows(
            &self.gpu,
            shape,
            (rows.view(), rhs.view()),
            (self.m, p, scale),
            st,
        )?;
        // A problem whose deletion is refused gets its old state from the deletion kernel
        // (the fallback).
        let (states, st_out) =
            grown.delete_rows(&self.gpu, grown_shape, (0, p), Some(&self.states), st)?;
        if st_in.iter().any(|&c| c != 0) {
            // A problem whose new rows were refused has no grown state (its buffers stay
            // zero, which the deletion accepts): its old state is copied back.
            return self.finish_slide_with_refusals(OP, states, &st_in, &st_out);
        }
        self.states = states;
        Ok(report(OP, &st_out))
    }

    /// Completes a window step in which some problems' new rows were refused: those
    /// problems get their old state back (copied on the device), the others keep the
    /// step's result.
    fn finish_slide_with_refusals(
        &mut self,
        op: &'static str,
        states: QStates<T>,
        st_in: &[u32],
        st_out: &[u32],
    ) -> Result<BatchReport> {
        let mut states = states;
        let (m, n) = (self.m, self.n);
        for (k, &c) in st_in.iter().enumerate() {
            if c != 0 {
                copy_problem(&self.gpu, &self.states, &mut states, (k, m, n))?;
            }
        }
        self.states = states;
        let merged: Vec<u32> = st_in
            .iter()
            .zip(st_out)
            .map(|(&a, &b)| if a != 0 { a } else { b })
            .collect();
        Ok(report(op, &merged))
    }

    /// The least-squares solution of every problem: x (B × n × 1) where R passes the rank
    /// test (|R_jj| > tol·‖R‖_F, tol = max(m, n)·u/√min(m, n)), else NaN with
    /// [`Error::RankDeficient`] in its status (and a NaN residual norm); the residual norms
    /// ‖b − Ax‖ = ‖b − Q₁Q₁ᵀb‖.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn solve(&self) -> Result<BatchSolution<T>> {
        let (x, rss, status) = {
            let mut st = self.status.lock().unwrap_or_else(|e| e.into_inner());
            self.states.solve(
                &self.gpu,
                self.shape_at(self.m, smem::solve(self.n)),
                -1.0,
                &mut st,
            )?
        };
        let deficient = status.contains(&STATUS_RANK_DEFICIENT);
        let r = if deficient {
            Some(self.to_host()?.1)
        } else {
            None
        };
        let n = self.n;
        let outcome: Vec<Result<()>> = status
            .iter()
            .enumerate()
            .map(|(i, &c)| match (c, &r) {
                (STATUS_RANK_DEFICIENT, Some(r)) => {
                    Err(rank_error(&r[i * n * n..(i + 1) * n * n], self.m, n))
                }
                _ => Ok(()),
            })
            .collect();
        let residual_norms = rss
            .iter()
            .zip(&outcome)
            .map(|(v, o)| {
                if o.is_ok() {
                    v.to_f64().max(0.0).sqrt()
                } else {
                    f64::NAN
                }
            })
            .collect();
        Ok(BatchSolution {
            x,
            residual_norms,
            status: outcome,
            n,
            q: 1,
        })
    }

    /// Q₁ (B × m × n, each problem column-major: entry (k, i, c) at k·m·n + c·m + i), R
    /// (B × n × n row-major, zero below the diagonal) and b (B × m) on the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn to_host(&self) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let (mut q, mut r, mut b, _) = self.states.to_host(&self.gpu, false)?;
        q.truncate(self.batch * self.m * self.n);
        r.truncate(self.batch * self.n * self.n);
        b.truncate(self.batch * self.m);
        Ok((q, r, b))
    }

    /// Whether the batch keeps each problem's full Q ([`GpuQBatch::factorize_full`]).
    pub fn is_full(&self) -> bool {
        self.states.q2.is_some()
    }

    /// Every problem's full Q = [Q₁ Q₂] (B × m × m, each problem column-major: entry
    /// (k, i, c) at k·m·m + c·m + i) on the host, for a batch made by
    /// [`GpuQBatch::factorize_full`]; with R (from [`GpuQBatch::to_host`]) and m − n zero rows
    /// below it, A = QR.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a thin batch; [`Error::Driver`].
    pub fn full_q(&self) -> Result<Vec<T>> {
        if !self.is_full() {
            return Err(Error::InvalidParam {
                op: "GpuQBatch::full_q",
                what: "kind",
                why: "the batch keeps Q₁ only: factorise it with factorize_full".into(),
            });
        }
        let (q1, _, _, q2) = self.states.to_host(&self.gpu, true)?;
        let q2 = q2.unwrap_or_default();
        let (m, n) = (self.m, self.n);
        let c = m - n;
        let mut q = Vec::with_capacity(self.batch * m * m);
        for k in 0..self.batch {
            q.extend_from_slice(&q1[k * m * n..(k + 1) * m * n]);
            q.extend_from_slice(&q2[k * m * c..(k + 1) * m * c]);
        }
        Ok(q)
    }
}

/// The per-problem report of a call that proceeds per problem.
fn report(op: &'static str, status: &[u32]) -> BatchReport {
    BatchReport {
        outcomes: status
            .iter()
            .map(|&c| refusal(op, c).map_or(Ok(()), Err))
            .collect(),
    }
}

/// Copies problem k (shape m×n) from one state to another on the device.
fn copy_problem<T: GpuScalar>(
    gpu: &Gpu,
    from: &QStates<T>,
    to: &mut QStates<T>,
    (k, m, n): (usize, usize, usize),
) -> Result<()> {
    let copy =
        |src: CudaView<'_, T>, dst: &mut cudarc::driver::CudaSlice<T>, at: usize, len: usize| {
            let mut d = dst.slice_mut(at..at + len);
            gpu.stream
                .memcpy_dtod(&src, &mut d)
                .map_err(crate::gpu::runtime::driver_err("batched state copy"))
        };
    copy(
        from.q.slice(k * m * n..(k + 1) * m * n),
        &mut to.q,
        k * m * n,
        m * n,
    )?;
    copy(
        from.r.slice(k * n * n..(k + 1) * n * n),
        &mut to.r,
        k * n * n,
        n * n,
    )?;
    copy(from.b.slice(k * m..(k + 1) * m), &mut to.b, k * m, m)?;
    if let (Some(src), Some(dst)) = (from.q2.as_ref(), to.q2.as_mut()) {
        let c = m - n;
        copy(src.slice(k * m * c..(k + 1) * m * c), dst, k * m * c, m * c)?;
    }
    Ok(())
}

/// The shared-memory check of a full-Q batch's complement launches at m×n (p directions
/// dropped at once).
fn check_complement<T>(op: &'static str, (m, n): (usize, usize), p: usize) -> Result<()> {
    use crate::gpu::launch::batch_q::complement_op::{smem, BUILD, DROP_ROWS, MEASURE};
    let c = m - n;
    for e in [
        smem(BUILD, m, n, c, 0),
        smem(DROP_ROWS, m, n, c, p),
        smem(MEASURE, m, n, c, 0),
    ] {
        fits::<T>(op, e)?;
    }
    Ok(())
}
