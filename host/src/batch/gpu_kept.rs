//! Batched R-only states on the GPU that keep their rows (docs/algorithms.md#batched-states):
//! rows leave by position, and the updates that need A refold each problem from its
//! updated kept rows, one thread a problem.
#![forbid(unsafe_code)]

use cudarc::driver::CudaView;

use super::gpu::{
    check_forget, dev_rows, gather, need, rank_error, refusal, upload_rows, GpuRBatch, Rows,
};
use super::{BatchRef, BatchReport};
use crate::base::error::{Error, Result};
use crate::gpu::algo::batch_r::{
    self as algo, KeptRows, RStates, Rebuild, StepOut, STATUS_RANK_DEFICIENT, STEP_MAX_N,
};
use crate::gpu::runtime::{DevVec, GpuScalar};

/// The maps of a block that keeps old rows (or columns) 0..k0, takes `p` new ones from
/// the extra block at k0, and keeps old k0+drop..len after them.
fn splice(len: usize, k0: usize, drop: usize, p: usize) -> Vec<i32> {
    let old = |i: usize| i as i32;
    let new = |t: usize| -1 - t as i32;
    (0..k0)
        .map(old)
        .chain((0..p).map(new))
        .chain((k0 + drop..len).map(old))
        .collect()
}

/// A batch of B row-major `rows` × `cols` matrices gathered from `x` on the host.
fn dense<T: GpuScalar>(
    op: &'static str,
    what: &'static str,
    x: &BatchRef<'_, T>,
    (batch, rows, cols): (usize, usize, usize),
) -> Result<Vec<T>> {
    for (got, expected) in [(x.batch(), batch), (x.nrows(), rows), (x.ncols(), cols)] {
        if got != expected {
            return Err(Error::shape(op, what, got, expected));
        }
    }
    if let Some(s) = x.row_major_slice() {
        return Ok(s.to_vec());
    }
    let mut out = Vec::with_capacity(batch * rows * cols);
    for k in 0..batch {
        for i in 0..rows {
            for j in 0..cols {
                out.push(x.get(k, i, j).unwrap_or(T::ZERO));
            }
        }
    }
    Ok(out)
}

impl<T: GpuScalar> GpuRBatch<T> {
    /// Whether the batch keeps its rows ([`GpuRBatch::factorize_keep_data`]).
    pub fn keeps_data(&self) -> bool {
        self.kept.is_some()
    }

    /// The kept rows A (B × m × n, row-major) and right-hand sides b (B × m) on the host,
    /// weighted as they now stand (forgetting scales them).
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data, [`Error::Driver`].
    pub fn kept_data(&self) -> Result<(Vec<T>, Vec<T>)> {
        let kept = self.kept_or("GpuRBatch::kept_data")?;
        let down = |e| Error::driver("kept rows download".to_string(), e);
        self.gpu.count_launch();
        let mut a = self.gpu.stream.clone_dtoh(&kept.a).map_err(down)?;
        let mut b = self.gpu.stream.clone_dtoh(&kept.b).map_err(down)?;
        self.gpu.stream.synchronize().map_err(down)?;
        a.truncate(self.batch * self.m * self.n);
        b.truncate(self.batch * self.m);
        Ok((a, b))
    }

    /// The kept rows, or [`Error::NeedsData`] naming `op`.
    pub(super) fn kept_or(&self, op: &'static str) -> Result<&KeptRows<T>> {
        self.kept.as_ref().ok_or(Error::NeedsData {
            op,
            what: "the rows of A: a GPU R-only batch keeps them with \
                   GpuRBatch::factorize_keep_data",
        })
    }

    /// One launch: every problem folded afresh from `kept` (n columns, m = self.m rows),
    /// with the rank test when `rank`.
    pub(super) fn refold(&self, kept: &KeptRows<T>, n: usize, rank: bool) -> Result<StepOut<T>> {
        RStates::refold(
            &self.gpu,
            (self.batch, self.m, n),
            (kept.a.slice(..), kept.b.slice(..)),
            rank,
        )
    }

    /// Each problem's refusal in `out` as an error (a rank-deficient one named by the
    /// refused R, of n columns standing for m rows).
    fn refusals(
        &self,
        op: &'static str,
        out: &StepOut<T>,
        (m, n): (usize, usize),
    ) -> Result<Vec<Option<Error>>> {
        let r = if out.status.contains(&STATUS_RANK_DEFICIENT) {
            let (r, _, _) = out.states.to_host(&self.gpu)?;
            Some(r)
        } else {
            None
        };
        Ok(out
            .status
            .iter()
            .enumerate()
            .map(|(i, &c)| match (c, &r) {
                (STATUS_RANK_DEFICIENT, Some(r)) => Some(rank_error(&r[i * n * n..], m, n)),
                _ => refusal(op, c),
            })
            .collect())
    }

    /// Takes a step's states only when every problem accepted it (with the rank test's
    /// refusals when `rank`); the shape stays m × n.
    pub(super) fn commit_all(
        &mut self,
        op: &'static str,
        out: StepOut<T>,
        rank: bool,
    ) -> Result<()> {
        let n = self.n;
        self.commit_all_at(op, out, (self.m, n), rank)
    }

    /// [`GpuRBatch::commit_all`] for a step into states of m rows and n columns (the shape a
    /// rank error describes); the caller sets the new shape and kept rows once it succeeds.
    fn commit_all_at(
        &mut self,
        op: &'static str,
        out: StepOut<T>,
        (m, n): (usize, usize),
        rank: bool,
    ) -> Result<()> {
        if out
            .status
            .iter()
            .any(|&c| c != 0 && (rank || c != STATUS_RANK_DEFICIENT))
        {
            let problems = self
                .refusals(op, &out, (m, n))?
                .into_iter()
                .enumerate()
                .filter_map(|(i, e)| e.map(|e| (i, e)))
                .collect();
            return Err(Error::BatchRefused { op, problems });
        }
        self.states = out.states;
        Ok(())
    }

    /// Takes a step that keeps m and n per problem: the refusing problems get their state
    /// and kept rows back (`new_kept` holds the rows after the step).
    fn commit_each(
        &mut self,
        op: &'static str,
        mut out: StepOut<T>,
        mut new_kept: KeptRows<T>,
    ) -> Result<BatchReport> {
        let (b, m, n) = (self.batch, self.m, self.n);
        let errors = if out.status.iter().any(|&c| c != 0) {
            let errors = self.refusals(op, &out, (m, n))?;
            out.states
                .put_back(&self.gpu, &self.states, (b, n), &out.status_dev)?;
            let kept = self.kept_or(op)?;
            algo::put_back(
                &self.gpu,
                &kept.a,
                (b, m, n),
                &out.status_dev,
                &mut new_kept.a,
            )?;
            algo::put_back(
                &self.gpu,
                &kept.b,
                (b, m, 1),
                &out.status_dev,
                &mut new_kept.b,
            )?;
            errors
        } else {
            (0..b).map(|_| None).collect()
        };
        self.states = out.states;
        self.kept = Some(new_kept);
        Ok(BatchReport {
            outcomes: errors.into_iter().map(|e| e.map_or(Ok(()), Err)).collect(),
        })
    }

    /// The kept rows of every problem rebuilt by `how` (see [`Rebuild`]): A to m_out ×
    /// n_out, and b by the same row map when `rows_b` is given (its extra block and strides).
    fn rebuild(
        &self,
        op: &'static str,
        how: &Rebuild<'_, T>,
        rows_b: Option<Option<(CudaView<'_, T>, [usize; 3])>>,
    ) -> Result<KeptRows<T>> {
        let kept = self.kept_or(op)?;
        let dims = (self.batch, self.m, self.n);
        let a = algo::gather(&self.gpu, kept.a.slice(..), dims, how)?;
        let how_b = Rebuild {
            rows: match rows_b {
                Some(_) => how.rows.clone(),
                None => Rebuild::<T>::identity(self.m, 1).rows,
            },
            cols: vec![0],
            extra: rows_b.flatten(),
            scale: how.scale,
            rank: None,
        };
        let b = algo::gather(&self.gpu, kept.b.slice(..), (self.batch, self.m, 1), &how_b)?;
        Ok(KeptRows { a, b })
    }

    /// Rows `rows` (B × p of the m) of the kept data, scaled: a step's rows out.
    fn kept_rows(&self, op: &'static str, rows: Vec<i32>, scale: f64) -> Result<KeptRows<T>> {
        let kept = self.kept_or(op)?;
        let (b, m, n) = (self.batch, self.m, self.n);
        let take = Rebuild {
            rows,
            scale,
            ..Rebuild::identity(0, n)
        };
        let take_b = Rebuild {
            rows: take.rows.clone(),
            scale,
            ..Rebuild::identity(0, 1)
        };
        Ok(KeptRows {
            a: algo::gather(&self.gpu, kept.a.slice(..), (b, m, n), &take)?,
            b: algo::gather(&self.gpu, kept.b.slice(..), (b, m, 1), &take_b)?,
        })
    }

    /// Deletes rows k0..k0+p of every problem, the rows the batch keeps (the downdate of
    /// docs/algorithms.md#updates-without-q with its refusal test). All-or-nothing.
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data (use [`GpuRBatch::delete_rows_with`]),
    /// [`Error::EmptyBlock`], [`Error::OutOfRange`] (k0 + p > m), [`Error::Underdetermined`]
    /// (fewer than n rows left), [`Error::BatchRefused`] (a refused downdate),
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        const OP: &str = "GpuRBatch::delete_rows";
        self.kept_or(OP)?;
        if p == 0 {
            return Err(Error::EmptyBlock { op: OP });
        }
        if k0 + p > self.m {
            return Err(Error::OutOfRange {
                op: OP,
                k0,
                p,
                n: self.m,
            });
        }
        if self.m - p < self.n {
            return Err(Error::Underdetermined {
                op: OP,
                m: self.m - p,
                n: self.n,
            });
        }
        let (m, n) = (self.m, self.n);
        let gone = self.kept_rows(OP, (k0..k0 + p).map(|i| i as i32).collect(), 1.0)?;
        let rout = Rows {
            rows: gone.a.slice(..),
            rhs: gone.b.slice(..),
            p,
        };
        let out = self.step_on(self.no_rows(), rout, (1.0, false))?;
        let new = self.rebuild(
            OP,
            &Rebuild {
                rows: splice(m, k0, p, 0),
                ..Rebuild::identity(0, n)
            },
            Some(None),
        )?;
        self.commit_all_at(OP, out, (m - p, n), false)?;
        self.kept = Some(new);
        self.m -= p;
        Ok(())
    }

    /// Inserts p rows as rows k0..k0+p of every problem: `rows` (B × p × n) with `rhs`
    /// (B × p × 1). Without kept data the position only has to lie in 0..=m (an R-only
    /// state has no row order). All-or-nothing.
    ///
    /// # Errors
    /// As [`GpuRBatch::insert_rows`], and [`Error::OutOfRange`] (k0 > m).
    pub fn insert_rows_at(
        &mut self,
        k0: usize,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
    ) -> Result<()> {
        const OP: &str = "GpuRBatch::insert_rows";
        let g = gather(OP, (rows, rhs), self.batch, self.n)?;
        let (rd, ed) = upload_rows(&self.gpu, &g)?;
        let rows = dev_rows(OP, (&rd, &ed), (self.batch, g.p, self.n))?;
        self.insert_rows_on(OP, k0, rows)
    }

    pub(super) fn insert_rows_on(
        &mut self,
        op: &'static str,
        k0: usize,
        rin: Rows<'_, T>,
    ) -> Result<()> {
        let (m, n, p) = (self.m, self.n, rin.p);
        if k0 > m {
            return Err(Error::OutOfRange { op, k0, p, n: m });
        }
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        let (rows, rhs) = (rin.rows.slice(..), rin.rhs.slice(..));
        let out = self.step_on(rin, self.no_rows(), (1.0, false))?;
        if self.kept.is_none() {
            self.take_all(op, out)?;
            self.m += p;
            return Ok(());
        }
        let new = self.rebuild(
            op,
            &Rebuild {
                rows: splice(m, k0, 0, p),
                extra: Some((rows, [p * n, n, 1])),
                ..Rebuild::identity(0, n)
            },
            Some(Some((rhs, [p, 1, 1]))),
        )?;
        self.commit_all_at(op, out, (m + p, n), false)?;
        self.kept = Some(new);
        self.m += p;
        Ok(())
    }

    /// One window step of every problem that keeps its rows: the kept rows, R, d and ρ
    /// weighted by √`forget` (λ ∈ (0, 1]), `rows` (B × p × n, with `rhs`) in at the end, the
    /// oldest `drop` rows out. With p = `drop` each problem proceeds or refuses alone (the
    /// report; a refusing problem keeps its state and rows bit for bit); otherwise m
    /// changes and the step is all-or-nothing.
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data (use [`GpuRBatch::slide`]),
    /// [`Error::Shape`], [`Error::EmptyBlock`] (nothing in or out),
    /// [`Error::InvalidParam`] (λ, `drop` > m), [`Error::Underdetermined`],
    /// [`Error::BatchRefused`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn slide_kept(
        &mut self,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
        drop: usize,
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::slide_kept";
        self.kept_or(OP)?;
        let g = gather(OP, (rows, rhs), self.batch, self.n)?;
        let (rd, ed) = upload_rows(&self.gpu, &g)?;
        let rows = dev_rows(OP, (&rd, &ed), (self.batch, g.p, self.n))?;
        self.slide_kept_on(OP, rows, drop, forget)
    }

    /// [`GpuRBatch::slide_kept`] with the rows (B·p·n) and right-hand sides (B·p) in device
    /// memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::slide_kept`]; [`Error::Shape`] when a buffer is shorter.
    pub fn slide_kept_device(
        &mut self,
        p: usize,
        (rows, rhs): (&DevVec<T>, &DevVec<T>),
        drop: usize,
        forget: f64,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::slide_kept_device";
        self.kept_or(OP)?;
        let rows = dev_rows(OP, (rows, rhs), (self.batch, p, self.n))?;
        self.slide_kept_on(OP, rows, drop, forget)
    }

    fn slide_kept_on(
        &mut self,
        op: &'static str,
        rin: Rows<'_, T>,
        drop: usize,
        forget: f64,
    ) -> Result<BatchReport> {
        check_forget(op, forget)?;
        let (b, m, n, p) = (self.batch, self.m, self.n, rin.p);
        if p == 0 && drop == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if drop > m {
            return Err(Error::InvalidParam {
                op,
                what: "drop",
                why: format!("{drop} rows to drop, but the window holds {m}"),
            });
        }
        if m + p - drop < n {
            return Err(Error::Underdetermined {
                op,
                m: m + p - drop,
                n,
            });
        }
        let scale = forget.sqrt();
        let (rows, rhs) = (rin.rows.slice(..), rin.rhs.slice(..));
        let gone = self.kept_rows(op, (0..drop as i32).collect(), scale)?;
        let rout = Rows {
            rows: gone.a.slice(..),
            rhs: gone.b.slice(..),
            p: drop,
        };
        let out = self.step_on(rin, rout, (scale, false))?;
        let new = self.rebuild(
            op,
            &Rebuild {
                rows: (drop as i32..m as i32)
                    .chain((0..p as i32).map(|t| -1 - t))
                    .collect(),
                extra: Some((rows, [p * n, n, 1])),
                scale,
                ..Rebuild::identity(0, n)
            },
            Some(Some((rhs, [p, 1, 1]))),
        )?;
        if p != drop {
            self.commit_all_at(op, out, (m + p - drop, n), false)?;
            self.kept = Some(new);
            self.m = m + p - drop;
            return Ok(BatchReport {
                outcomes: (0..b).map(|_| Ok(())).collect(),
            });
        }
        self.commit_each(op, out, new)
    }

    /// Replaces every A by A + u·vᵀ (u B × m × 1, v B × n × 1): the kept rows updated and
    /// each problem folded afresh from them (docs/algorithms.md#batched-states). Per
    /// problem: a problem whose new rows are not finite or whose new R fails the rank test
    /// keeps its state and rows.
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data, [`Error::Shape`], [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn rank_one(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        self.rank_k_host("GpuRBatch::rank_one", u, v, 1)
    }

    /// Replaces every A by A + U·Vᵀ (U B × m × k, V B × n × k), as [`GpuRBatch::rank_one`].
    ///
    /// # Errors
    /// As [`GpuRBatch::rank_one`]; [`Error::EmptyBlock`] for k = 0.
    pub fn rank_k(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        let k = u.ncols();
        self.rank_k_host("GpuRBatch::rank_k", u, v, k)
    }

    /// [`GpuRBatch::rank_one`] with u (B·m) and v (B·n) in device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::rank_one`]; [`Error::Shape`] when a buffer is shorter.
    pub fn rank_one_device(&mut self, u: &DevVec<T>, v: &DevVec<T>) -> Result<BatchReport> {
        self.rank_k_device_op("GpuRBatch::rank_one_device", (u, v), 1)
    }

    /// [`GpuRBatch::rank_k`] with U (B·m·k) and V (B·n·k) in device memory, each problem's
    /// block row-major.
    ///
    /// # Errors
    /// As [`GpuRBatch::rank_k`]; [`Error::Shape`] when a buffer is shorter.
    pub fn rank_k_device(&mut self, u: &DevVec<T>, v: &DevVec<T>, k: usize) -> Result<BatchReport> {
        self.rank_k_device_op("GpuRBatch::rank_k_device", (u, v), k)
    }

    fn rank_k_host(
        &mut self,
        op: &'static str,
        u: BatchRef<'_, T>,
        v: BatchRef<'_, T>,
        k: usize,
    ) -> Result<BatchReport> {
        self.kept_or(op)?;
        let (b, m, n) = (self.batch, self.m, self.n);
        let ud = DevVec::from_slice_async(&self.gpu, &dense(op, "u", &u, (b, m, k))?)?;
        let vd = DevVec::from_slice_async(&self.gpu, &dense(op, "v", &v, (b, n, k))?)?;
        self.rank_k_on(op, (ud.view(), vd.view()), k)
    }

    fn rank_k_device_op(
        &mut self,
        op: &'static str,
        (u, v): (&DevVec<T>, &DevVec<T>),
        k: usize,
    ) -> Result<BatchReport> {
        self.kept_or(op)?;
        let (b, m, n) = (self.batch, self.m, self.n);
        need(op, "u (B·m·k values)", u, b * m * k)?;
        need(op, "v (B·n·k values)", v, b * n * k)?;
        self.rank_k_on(op, (u.view(), v.view()), k)
    }

    fn rank_k_on(
        &mut self,
        op: &'static str,
        (u, v): (CudaView<'_, T>, CudaView<'_, T>),
        k: usize,
    ) -> Result<BatchReport> {
        if k == 0 {
            return Err(Error::EmptyBlock { op });
        }
        let (m, n) = (self.m, self.n);
        let new = self.rebuild(
            op,
            &Rebuild {
                rank: Some((u, v, k)),
                ..Rebuild::identity(m, n)
            },
            None,
        )?;
        let out = self.refold(&new, n, true)?;
        self.commit_each(op, out, new)
    }

    /// Inserts p columns at k0 of every problem (`u`, B × m × p; n + p ≤ 16): the kept rows
    /// gain them and each problem is folded afresh. All-or-nothing: a problem whose new R
    /// fails the rank test (a column in the span of the others) or whose column is not
    /// finite refuses the call.
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data, [`Error::Shape`] (n + p > 16, sizes),
    /// [`Error::EmptyBlock`], [`Error::OutOfRange`] (k0 > n), [`Error::Underdetermined`]
    /// (m < n + p), [`Error::BatchRefused`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn insert_cols(&mut self, k0: usize, u: BatchRef<'_, T>) -> Result<()> {
        const OP: &str = "GpuRBatch::insert_cols";
        self.kept_or(OP)?;
        let p = u.ncols();
        let cols =
            DevVec::from_slice_async(&self.gpu, &dense(OP, "u", &u, (self.batch, self.m, p))?)?;
        self.insert_cols_on(OP, k0, p, cols.view())
    }

    /// [`GpuRBatch::insert_cols`] with the columns (B·m·p, each problem's m × p block
    /// row-major) in device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::insert_cols`]; [`Error::Shape`] when the buffer is shorter.
    pub fn insert_cols_device(&mut self, k0: usize, p: usize, cols: &DevVec<T>) -> Result<()> {
        const OP: &str = "GpuRBatch::insert_cols_device";
        self.kept_or(OP)?;
        need(OP, "columns (B·m·p values)", cols, self.batch * self.m * p)?;
        self.insert_cols_on(OP, k0, p, cols.view())
    }

    fn insert_cols_on(
        &mut self,
        op: &'static str,
        k0: usize,
        p: usize,
        cols: CudaView<'_, T>,
    ) -> Result<()> {
        let (m, n) = (self.m, self.n);
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if k0 > n {
            return Err(Error::OutOfRange { op, k0, p, n });
        }
        if n + p > STEP_MAX_N {
            return Err(Error::shape(
                op,
                "columns n + p (at most 16)",
                n + p,
                STEP_MAX_N,
            ));
        }
        if m < n + p {
            return Err(Error::Underdetermined { op, m, n: n + p });
        }
        let new = self.rebuild(
            op,
            &Rebuild {
                cols: splice(n, k0, 0, p),
                extra: Some((cols, [m * p, p, 1])),
                ..Rebuild::identity(m, 0)
            },
            None,
        )?;
        let out = self.refold(&new, n + p, true)?;
        self.commit_all_at(op, out, (m, n + p), true)?;
        self.kept = Some(new);
        self.n = n + p;
        Ok(())
    }

    /// Replaces columns k0..k0+p of every problem by `u` (B × m × p), as
    /// [`GpuRBatch::insert_cols`] but per problem: a refusing problem keeps its state and
    /// rows.
    ///
    /// # Errors
    /// [`Error::NeedsData`], [`Error::Shape`], [`Error::EmptyBlock`], [`Error::OutOfRange`]
    /// (k0 + p > n), [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn replace_cols(&mut self, k0: usize, u: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::replace_cols";
        self.kept_or(OP)?;
        let p = u.ncols();
        let cols =
            DevVec::from_slice_async(&self.gpu, &dense(OP, "u", &u, (self.batch, self.m, p))?)?;
        self.replace_cols_on(OP, k0, p, cols.view())
    }

    /// [`GpuRBatch::replace_cols`] with the columns (B·m·p) in device memory.
    ///
    /// # Errors
    /// As [`GpuRBatch::replace_cols`]; [`Error::Shape`] when the buffer is shorter.
    pub fn replace_cols_device(
        &mut self,
        k0: usize,
        p: usize,
        cols: &DevVec<T>,
    ) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::replace_cols_device";
        self.kept_or(OP)?;
        need(OP, "columns (B·m·p values)", cols, self.batch * self.m * p)?;
        self.replace_cols_on(OP, k0, p, cols.view())
    }

    fn replace_cols_on(
        &mut self,
        op: &'static str,
        k0: usize,
        p: usize,
        cols: CudaView<'_, T>,
    ) -> Result<BatchReport> {
        let (m, n) = (self.m, self.n);
        if p == 0 {
            return Err(Error::EmptyBlock { op });
        }
        if k0 + p > n {
            return Err(Error::OutOfRange { op, k0, p, n });
        }
        let new = self.rebuild(
            op,
            &Rebuild {
                cols: splice(n, k0, p, p),
                extra: Some((cols, [m * p, p, 1])),
                ..Rebuild::identity(m, 0)
            },
            None,
        )?;
        let out = self.refold(&new, n, true)?;
        self.commit_each(op, out, new)
    }

    /// Moves column `from` of every problem to position `to` (the others keep their order):
    /// the kept rows' columns permuted and each problem folded afresh. Per problem.
    ///
    /// # Errors
    /// [`Error::NeedsData`], [`Error::OutOfRange`] (a position ≥ n), [`Error::OutOfMemory`],
    /// [`Error::Driver`].
    pub fn shift_col(&mut self, from: usize, to: usize) -> Result<BatchReport> {
        const OP: &str = "GpuRBatch::shift_col";
        self.kept_or(OP)?;
        let (m, n) = (self.m, self.n);
        if from >= n || to >= n {
            return Err(Error::OutOfRange {
                op: OP,
                k0: from.max(to),
                p: 1,
                n,
            });
        }
        let mut order: Vec<i32> = (0..n as i32).filter(|&j| j != from as i32).collect();
        order.insert(to, from as i32);
        let new = self.rebuild(
            OP,
            &Rebuild {
                cols: order,
                ..Rebuild::identity(m, 0)
            },
            None,
        )?;
        let out = self.refold(&new, n, true)?;
        self.commit_each(OP, out, new)
    }

    /// Folds every problem afresh from its kept rows (drift control: the state becomes the
    /// R of the rows it stands for, as a new factorisation would give). All-or-nothing.
    ///
    /// # Errors
    /// [`Error::NeedsData`] without kept data, [`Error::BatchRefused`],
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn refactorize(&mut self) -> Result<()> {
        const OP: &str = "GpuRBatch::refactorize";
        let out = self.refold(self.kept_or(OP)?, self.n, false)?;
        self.commit_all(OP, out, false)
    }

    /// Column deletion of a batch that keeps its rows: the kept rows lose the columns and
    /// each problem is folded afresh (all-or-nothing).
    pub(super) fn delete_cols_kept(&mut self, op: &'static str, k0: usize, p: usize) -> Result<()> {
        let (m, n) = (self.m, self.n);
        let keep: Vec<i32> = (0..n as i32)
            .filter(|&j| (j as usize) < k0 || j as usize >= k0 + p)
            .collect();
        let new = self.rebuild(
            op,
            &Rebuild {
                cols: keep,
                ..Rebuild::identity(m, 0)
            },
            None,
        )?;
        let out = self.refold(&new, n - p, false)?;
        self.commit_all_at(op, out, (m, n - p), false)?;
        self.kept = Some(new);
        self.n = n - p;
        Ok(())
    }

    /// The refusal of a call that gives the rows out on a batch that keeps its own.
    pub(super) fn refuse_given_rows(&self, op: &'static str, instead: &'static str) -> Result<()> {
        if self.kept.is_some() {
            return Err(Error::InvalidParam {
                op,
                what: "rows out",
                why: format!(
                    "this batch keeps its rows and deletes them by position: use {instead}"
                ),
            });
        }
        Ok(())
    }
}
