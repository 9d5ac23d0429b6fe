//! The batched updates and solve: the shared checks, then each problem's own [`CpuQr`]
//! call (per problem where the shape stays, all-or-nothing where it changes).
#![forbid(unsafe_code)]

use crate::backend::QrUpdate;
use crate::base::error::{Error, Result};
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::ops::needs_q_or_data;

use super::report::{BatchReport, BatchSolution};
use super::run::{all_or_nothing, each, map};
use super::{BatchQr, BatchRef};

/// A plan's verdict on problem 0's block, as far as the batch shares it: shapes, positions
/// and parameters are shared; a non-finite entry belongs to the problem whose block holds
/// it, and is that problem's refusal.
fn shared<P>(verdict: Result<P>) -> Result<()> {
    match verdict {
        Ok(_) | Err(Error::NonFinite { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `x` holds one matrix per problem.
fn check_batch<T: Scalar>(
    op: &'static str,
    what: &'static str,
    x: &BatchRef<'_, T>,
    b: usize,
) -> Result<()> {
    if x.batch() != b {
        return Err(Error::shape(op, what, x.batch(), b));
    }
    Ok(())
}

/// `x` holds column vectors (B×len×1).
fn check_vectors<T: Scalar>(
    op: &'static str,
    what: &'static str,
    x: &BatchRef<'_, T>,
    b: usize,
) -> Result<()> {
    check_batch(op, what, x, b)?;
    if x.ncols() != 1 {
        return Err(Error::shape(op, "columns of a vector", x.ncols(), 1));
    }
    Ok(())
}

impl<T: Scalar> BatchQr<T> {
    /// Refuses an update that needs Q or the kept data on an R-only batch without them.
    fn needs_q_or_data(&self, op: &'static str) -> Result<()> {
        if self.q_policy() == QPolicy::None && !self.keeps_data() {
            return Err(needs_q_or_data(op));
        }
        Ok(())
    }

    /// Inserts each problem's p×n block of `u` as rows k0..k0+p of its A, with right-hand
    /// sides `e` (B×p×q) (docs/algorithms.md#row-insertion). All-or-nothing.
    ///
    /// # Errors
    /// As [`QrUpdate::insert_rows`], and [`Error::Shape`] for a batch size other than B;
    /// [`Error::BatchRefused`] where problems refused ([`Error::NonFinite`]).
    pub fn insert_rows(
        &mut self,
        k0: usize,
        u: BatchRef<'_, T>,
        e: BatchRef<'_, T>,
    ) -> Result<BatchReport> {
        const OP: &str = "insert_rows";
        let b = self.batch();
        check_batch(OP, "batch size of u", &u, b)?;
        check_batch(OP, "batch size of e", &e, b)?;
        let dims = self.first().dims();
        shared(crate::ops::insert_rows::plan(
            dims,
            k0,
            u.block(0).view(),
            e.block(0).view(),
        ))?;
        let work = self.work(u.nrows());
        all_or_nothing(OP, self.states_mut(), work, |i, s| {
            s.insert_rows(k0, u.block(i).view(), e.block(i).view())
        })
    }

    /// Deletes rows k0..k0+p of every A (docs/algorithms.md#row-deletion). All-or-nothing.
    ///
    /// # Errors
    /// As [`QrUpdate::delete_rows`] ([`Error::NeedsData`] on an R-only batch without kept
    /// data: use [`Self::delete_rows_with`]); [`Error::BatchRefused`] where problems
    /// refused ([`Error::DowndateFailed`]).
    pub fn delete_rows(&mut self, k0: usize, p: usize) -> Result<BatchReport> {
        const OP: &str = "delete_rows";
        crate::ops::delete_rows::plan(self.first().dims(), k0, p)?;
        self.needs_q_or_data(OP)?;
        let work = self.work(p);
        all_or_nothing(OP, self.states_mut(), work, |_, s| s.delete_rows(k0, p))
    }

    /// Deletes rows k0..k0+p of every A, given them: `rows` (B×p×n) and their right-hand
    /// sides `rhs` (B×p×q), which an R-only batch without kept data needs
    /// (docs/algorithms.md#updates-without-q). All-or-nothing.
    ///
    /// # Errors
    /// As [`QrUpdate::delete_rows_with`], and [`Error::Shape`] for a batch size other than
    /// B; [`Error::BatchRefused`] where problems refused ([`Error::NonFinite`],
    /// [`Error::DowndateFailed`]).
    pub fn delete_rows_with(
        &mut self,
        k0: usize,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
    ) -> Result<BatchReport> {
        const OP: &str = "delete_rows";
        let b = self.batch();
        check_batch(OP, "batch size of rows", &rows, b)?;
        check_batch(OP, "batch size of rhs", &rhs, b)?;
        let dims = self.first().dims();
        shared(crate::ops::delete_rows::plan_given(
            dims,
            k0,
            rows.block(0).view(),
            rhs.block(0).view(),
        ))?;
        let work = self.work(rows.nrows());
        all_or_nothing(OP, self.states_mut(), work, |i, s| {
            s.delete_rows_with(k0, rows.block(i).view(), rhs.block(i).view())
        })
    }

    /// Inserts each problem's m×p block of `u` as columns k0..k0+p of its A
    /// (docs/algorithms.md#column-insertion). All-or-nothing.
    ///
    /// # Errors
    /// As [`QrUpdate::insert_cols`], and [`Error::Shape`] for a batch size other than B;
    /// [`Error::BatchRefused`] where problems refused ([`Error::NonFinite`],
    /// [`Error::RankDeficient`]).
    pub fn insert_cols(&mut self, k0: usize, u: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "insert_cols";
        check_batch(OP, "batch size of u", &u, self.batch())?;
        let (dims, nb) = (self.first().dims(), self.params().block_size);
        shared(crate::ops::insert_cols::plan(
            dims,
            k0,
            u.block(0).view(),
            nb,
        ))?;
        self.needs_q_or_data(OP)?;
        let work = self.work(u.ncols());
        all_or_nothing(OP, self.states_mut(), work, |i, s| {
            s.insert_cols(k0, u.block(i).view())
        })
    }

    /// Deletes columns k0..k0+p of every A (docs/algorithms.md#column-deletion).
    /// All-or-nothing (no problem refuses a valid column deletion).
    ///
    /// # Errors
    /// As [`QrUpdate::delete_cols`].
    pub fn delete_cols(&mut self, k0: usize, p: usize) -> Result<BatchReport> {
        const OP: &str = "delete_cols";
        crate::ops::delete_cols::plan(self.first().dims(), k0, p)?;
        let work = self.work(p);
        all_or_nothing(OP, self.states_mut(), work, |_, s| s.delete_cols(k0, p))
    }

    /// Replaces each A by A + u vᵀ, with u (B×m×1) and v (B×n×1)
    /// (docs/algorithms.md#rank-one-update). Per problem.
    ///
    /// # Errors
    /// As [`QrUpdate::rank_one`] but [`Error::NonFinite`], and [`Error::Shape`] for a
    /// batch size other than B or more than one column; a problem refuses by itself
    /// ([`Error::NonFinite`], [`Error::RankDeficient`]) in the report.
    pub fn rank_one(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "rank_one";
        let b = self.batch();
        check_vectors(OP, "batch size of u", &u, b)?;
        check_vectors(OP, "batch size of v", &v, b)?;
        let dims = self.first().dims();
        shared(crate::ops::rank_one::plan(dims, &u.vector(0), &v.vector(0)))?;
        self.needs_q_or_data(OP)?;
        let work = self.work(1);
        Ok(each(self.states_mut(), work, |i, s| {
            s.rank_one(&u.vector(i), &v.vector(i))
        }))
    }

    /// Replaces each A by A + UVᵀ, with U (B×m×k) and V (B×n×k)
    /// (docs/algorithms.md#rank-k-update). Per problem.
    ///
    /// # Errors
    /// As [`QrUpdate::rank_k`] but [`Error::NonFinite`] and [`Error::RankDeficient`],
    /// which a problem reports by itself; [`Error::Shape`] for a batch size other than B.
    pub fn rank_k(&mut self, u: BatchRef<'_, T>, v: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "rank_k";
        let b = self.batch();
        check_batch(OP, "batch size of u", &u, b)?;
        check_batch(OP, "batch size of v", &v, b)?;
        let dims = self.first().dims();
        shared(crate::ops::rank_k::plan(
            dims,
            u.block(0).view(),
            v.block(0).view(),
        ))?;
        self.needs_q_or_data(OP)?;
        let work = self.work(u.ncols());
        Ok(each(self.states_mut(), work, |i, s| {
            s.rank_k(u.block(i).view(), v.block(i).view())
        }))
    }

    /// Overwrites columns k0..k0+p of each A with its block of U (B×m×p)
    /// (docs/algorithms.md#column-replacement). Per problem.
    ///
    /// # Errors
    /// As [`QrUpdate::replace_cols`] but [`Error::NonFinite`] and
    /// [`Error::RankDeficient`], which a problem reports by itself; [`Error::Shape`] for a
    /// batch size other than B.
    pub fn replace_cols(&mut self, k0: usize, u: BatchRef<'_, T>) -> Result<BatchReport> {
        const OP: &str = "replace_cols";
        check_batch(OP, "batch size of u", &u, self.batch())?;
        let dims = self.first().dims();
        shared(crate::ops::replace_cols::plan(dims, k0, u.block(0).view()))?;
        self.needs_q_or_data(OP)?;
        let work = self.work(2 * u.ncols());
        Ok(each(self.states_mut(), work, |i, s| {
            s.replace_cols(k0, u.block(i).view())
        }))
    }

    /// Moves column `from` of every A to position `to`, the columns between closing up
    /// (docs/algorithms.md#column-shift). Per problem.
    ///
    /// # Errors
    /// As [`QrUpdate::shift_col`]; a problem refuses by itself
    /// ([`Error::RankDeficient`]) in the report.
    pub fn shift_col(&mut self, from: usize, to: usize) -> Result<BatchReport> {
        const OP: &str = "shift_col";
        let n = self.ncols();
        if let Some(&k0) = [from, to].iter().find(|&&k| k >= n) {
            return Err(Error::OutOfRange {
                op: OP,
                k0,
                p: 1,
                n,
            });
        }
        if from != to {
            self.needs_q_or_data(OP)?;
        }
        let work = self.work(2);
        Ok(each(self.states_mut(), work, |_, s| s.shift_col(from, to)))
    }

    /// Slides every problem's window (docs/algorithms.md#sliding-window): its p×n block of
    /// `rows` (B×p×n) with right-hand sides `rhs` (B×p×q) enters at the end, the oldest
    /// `drop` rows leave, with the forgetting factor of [`Self::params`]. Per problem when
    /// p = `drop` (m stays), else all-or-nothing.
    ///
    /// # Errors
    /// As [`QrUpdate::slide`], and [`Error::Shape`] for a batch size other than B; a
    /// problem's refusal ([`Error::NonFinite`], [`Error::DowndateFailed`]) is in the report
    /// when m stays, else an [`Error::BatchRefused`].
    pub fn slide(
        &mut self,
        rows: BatchRef<'_, T>,
        rhs: BatchRef<'_, T>,
        drop: usize,
    ) -> Result<BatchReport> {
        const OP: &str = "slide";
        let b = self.batch();
        check_batch(OP, "batch size of rows", &rows, b)?;
        check_batch(OP, "batch size of rhs", &rhs, b)?;
        let (dims, params) = (self.first().dims(), self.params());
        shared(crate::ops::slide::plan(
            dims,
            rows.block(0).view(),
            rhs.block(0).view(),
            drop,
            params,
        ))?;
        if drop > 0 && self.q_policy() == QPolicy::None && !self.keeps_data() {
            return Err(crate::ops::slide::needs_rows());
        }
        let work = self.work(rows.nrows() + drop);
        let step = |i: usize, s: &mut crate::CpuQr<T>| {
            s.slide(rows.block(i).view(), rhs.block(i).view(), drop)
        };
        if rows.nrows() == drop {
            Ok(each(self.states_mut(), work, step))
        } else {
            all_or_nothing(OP, self.states_mut(), work, step)
        }
    }

    /// Least-squares solutions and residual norms of every problem
    /// (docs/algorithms.md#least-squares).
    ///
    /// # Errors
    /// None so far (a problem whose solve fails has NaN entries and its error in
    /// [`BatchSolution::status`]); the `Result` leaves room for device errors.
    pub fn solve(&self) -> Result<BatchSolution<T>> {
        let (n, q) = (self.ncols(), self.nrhs());
        let mut states: Vec<&crate::CpuQr<T>> = self.problems().iter().collect();
        let work = self.batch() as f64 * (n * n * q) as f64;
        let sols = map(&mut states, work, |_, s| s.solve());
        let nan = T::from_f64(f64::NAN);
        let mut out = BatchSolution {
            x: Vec::with_capacity(sols.len() * n * q),
            residual_norms: Vec::with_capacity(sols.len() * q),
            status: Vec::with_capacity(sols.len()),
            n,
            q,
        };
        for sol in sols {
            match sol {
                Ok(s) => {
                    for r in 0..n {
                        out.x.extend((0..q).map(|c| s.x[(r, c)]));
                    }
                    out.residual_norms.extend(&s.residual_norms);
                    out.status.push(Ok(()));
                }
                Err(e) => {
                    out.x.extend(std::iter::repeat_n(nan, n * q));
                    out.residual_norms.extend(std::iter::repeat_n(f64::NAN, q));
                    out.status.push(Err(e));
                }
            }
        }
        Ok(out)
    }
}
