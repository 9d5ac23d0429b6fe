//! Blocked Householder QR on the device (spec §1.3–§1.4; docs/gpu-updates.md
//! "Shared building blocks"): per panel column the `householder_house` kernel
//! and a panel-apply kernel, V extracted with explicit unit diagonal and zeros,
//! T by `wy_set_tau` + `wy_build_t`, and the trailing matrix, d and Q updated
//! with three cuBLAS calls each (C −= V·(Tᵀ·(VᵀC))).

use core::ops::Range;

use super::matrix::DevMat;
use super::{Gpu, GpuScalar};
use crate::error::{Error, Result};

/// Triangularises A[rows, cols] in place (β on the diagonal, exact zeros
/// below), applying the reflectors to A[rows, cols.end..] (trailing columns),
/// to d[rows, :] from the left (Qᵀ side) and to Q[:, rows] from the right
/// (Q := Q·H), with compact-WY blocks of `nb` reflectors (spec §1.4).
///
/// # Errors
/// [`Error::OutOfMemory`] for the workspace, [`Error::Driver`], [`Error::Cublas`].
pub fn blocked_qr<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    d: Option<&mut DevMat<T>>,
    q: Option<&mut DevMat<T>>,
    nb: usize,
) -> Result<()> {
    let _ = (gpu, a, rows, cols, d, q, nb);
    Err(Error::InvalidParam {
        op: "blocked_qr",
        what: "backend",
        why: "not implemented yet".into(),
    })
}
