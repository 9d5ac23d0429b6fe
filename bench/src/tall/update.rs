//! The update of one case with its random inputs, applied to a state, and the
//! matrix and right-hand side after it (A′ and b′), built on the device.

use cuqr::internals::gpu::{DevMat, GpuQr, GpuScalar, Op as Trans};
use cuqr::{Gpu, Mat, QrUpdate};

use super::cases::{Case, Op};
use crate::common::dup;
use cuqr_cli::rng::random_signed_matrix;

/// One case's update with its inputs: new rows and their right-hand sides (host
/// memory, as `insert_rows` takes them), new columns (device memory, for
/// `insert_cols_device`), or the rank-one vectors (device memory, for `rank_one_device`).
pub(super) enum Update<T: GpuScalar> {
    InsertRows { k0: usize, u: Mat<T>, e: Mat<T> },
    DeleteRows { k0: usize, p: usize },
    InsertCols { k0: usize, u: DevMat<T> },
    DeleteCols { k0: usize, p: usize },
    RankOne { u: DevMat<T>, v: DevMat<T> },
}

impl<T: GpuScalar> Update<T> {
    /// Random inputs (±[0.1, 1), never zero) for `c` on an m×n matrix; new columns and
    /// the rank-one vectors are uploaded here, before any timing.
    pub(super) fn new(gpu: &Gpu, c: &Case, m: usize, n: usize, seed: u64) -> cuqr::Result<Self> {
        let (k0, p) = (c.k0, c.p);
        Ok(match c.op {
            Op::InsertRows => Update::InsertRows {
                k0,
                u: random_signed_matrix(p, n, seed),
                e: random_signed_matrix(p, 1, seed ^ 0xE),
            },
            Op::DeleteRows => Update::DeleteRows { k0, p },
            Op::InsertCols => Update::InsertCols {
                k0,
                u: DevMat::from_host(gpu, random_signed_matrix(m, p, seed).as_ref())?,
            },
            Op::DeleteCols => Update::DeleteCols { k0, p },
            Op::RankOne => {
                // a modest change keeps A + uvᵀ as well conditioned as A
                let half = T::from_f64(0.5);
                let v = random_signed_matrix::<T>(n, 1, seed ^ 0x7);
                let v = Mat::from_fn(n, 1, |i, _| half * v[(i, 0)]);
                Update::RankOne {
                    u: DevMat::from_host(gpu, random_signed_matrix::<T>(m, 1, seed).as_ref())?,
                    v: DevMat::from_host(gpu, v.as_ref())?,
                }
            }
        })
    }

    /// Applies the update to `st`.
    pub(super) fn apply(&self, st: &mut GpuQr<T>) -> cuqr::Result<()> {
        match self {
            Update::InsertRows { k0, u, e } => st.insert_rows(*k0, u.as_ref(), e.as_ref()),
            Update::DeleteRows { k0, p } => st.delete_rows(*k0, *p),
            Update::InsertCols { k0, u } => st.insert_cols_device(*k0, &u.view()),
            Update::DeleteCols { k0, p } => st.delete_cols(*k0, *p),
            Update::RankOne { u, v } => st.rank_one_device(&u.view(), &v.view()),
        }
    }

    /// A′ and b′, the matrix and right-hand side after the update, built on the device
    /// from A and b by block copies (a GEMM for the rank-one change).
    pub(super) fn updated(
        &self,
        gpu: &Gpu,
        a: &DevMat<T>,
        b: &DevMat<T>,
    ) -> cuqr::Result<(DevMat<T>, DevMat<T>)> {
        let (m, n) = (a.nrows(), a.ncols());
        match self {
            Update::InsertRows { k0, u, e } => {
                let (ud, ed) = (
                    DevMat::from_host(gpu, u.as_ref())?,
                    DevMat::from_host(gpu, e.as_ref())?,
                );
                Ok((stack_rows(gpu, a, *k0, &ud)?, stack_rows(gpu, b, *k0, &ed)?))
            }
            Update::DeleteRows { k0, p } => {
                Ok((drop_rows(gpu, a, *k0, *p)?, drop_rows(gpu, b, *k0, *p)?))
            }
            Update::InsertCols { k0, u } => {
                let p = u.ncols();
                let mut a2 = DevMat::zeros(gpu, m, n + p)?;
                gpu.panel_copy(&a.block(0, 0, m, *k0), &mut a2.block_mut(0, 0, m, *k0))?;
                gpu.panel_copy(&u.view(), &mut a2.block_mut(0, *k0, m, p))?;
                let rest = n - k0;
                gpu.panel_copy(
                    &a.block(0, *k0, m, rest),
                    &mut a2.block_mut(0, k0 + p, m, rest),
                )?;
                Ok((a2, dup(gpu, b)?))
            }
            Update::DeleteCols { k0, p } => {
                let mut a2 = DevMat::zeros(gpu, m, n - p)?;
                gpu.panel_copy(&a.block(0, 0, m, *k0), &mut a2.block_mut(0, 0, m, *k0))?;
                let rest = n - k0 - p;
                gpu.panel_copy(
                    &a.block(0, k0 + p, m, rest),
                    &mut a2.block_mut(0, *k0, m, rest),
                )?;
                Ok((a2, dup(gpu, b)?))
            }
            Update::RankOne { u, v } => {
                let mut a2 = dup(gpu, a)?;
                gpu.gemm(
                    Trans::N,
                    Trans::T,
                    T::ONE,
                    &u.view(),
                    &v.view(),
                    T::ONE,
                    &mut a2.view_mut(),
                )?;
                Ok((a2, dup(gpu, b)?))
            }
        }
    }
}

/// `x` with the rows of `new` inserted before row k0.
pub(crate) fn stack_rows<T: GpuScalar>(
    gpu: &Gpu,
    x: &DevMat<T>,
    k0: usize,
    new: &DevMat<T>,
) -> cuqr::Result<DevMat<T>> {
    let (m, c, p) = (x.nrows(), x.ncols(), new.nrows());
    let mut y = DevMat::zeros(gpu, m + p, c)?;
    gpu.panel_copy(&x.block(0, 0, k0, c), &mut y.block_mut(0, 0, k0, c))?;
    gpu.panel_copy(&new.view(), &mut y.block_mut(k0, 0, p, c))?;
    gpu.panel_copy(
        &x.block(k0, 0, m - k0, c),
        &mut y.block_mut(k0 + p, 0, m - k0, c),
    )?;
    Ok(y)
}

/// `x` without rows k0..k0+p.
pub(crate) fn drop_rows<T: GpuScalar>(
    gpu: &Gpu,
    x: &DevMat<T>,
    k0: usize,
    p: usize,
) -> cuqr::Result<DevMat<T>> {
    let (m, c) = (x.nrows(), x.ncols());
    let rest = m - k0 - p;
    let mut y = DevMat::zeros(gpu, m - p, c)?;
    gpu.panel_copy(&x.block(0, 0, k0, c), &mut y.block_mut(0, 0, k0, c))?;
    gpu.panel_copy(
        &x.block(k0 + p, 0, rest, c),
        &mut y.block_mut(k0, 0, rest, c),
    )?;
    Ok(y)
}
