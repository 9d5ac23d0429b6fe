//! Blocked LU with partial pivoting, PA = LU, and the linear solve A·X = B
//! (docs/algorithms.md#lu-factorisation, docs/algorithms.md#lu-pivot-application corrected: the row
//! interchanges of every panel are applied across the whole matrix).
//!
//! Both backends run the same right-looking blocked algorithm: for each panel of
//! `block_size` columns, (1) factor the tall panel with a recursive split down to
//! `panel_base` columns, where each column step is a pivot search (first index of
//! max |·|), a row swap, a scaling and a rank-1 update; (2) apply the panel's
//! interchanges to the columns left and right of it (laswp); (3) U₁₂ := L₁₁⁻¹A₁₂
//! (TRSM); (4) A₂₂ −= L₂₁U₁₂ (GEMM). Cost ≈ m·n² − n³/3 flops.
//!
//! * [`CpuLu`] (cpu.rs): plain loops, the reference.
//! * [`GpuLu`] (gpu.rs): panel in Rust kernels (a cooperative multi-block kernel
//!   per panel), TRSM/GEMM through cuBLAS, look-ahead on a second stream.
//!
//! Factors are stored LAPACK-style: the unit lower L strictly below the
//! diagonal of one m×n array, U on and above it, and `ipiv[j]` (0-based) the row
//! swapped with row j at step j. A zero or negligible pivot (|u_jj| ≤
//! tol·max|a_ij|) is [`Error::Singular`] naming the column; a NaN or ±∞ input is
//! [`Error::NonFinite`].
//!
//! # Examples
//! ```
//! use cuqr::lu::{CpuLu, LuParams};
//! use cuqr::Mat;
//! let a = Mat::<f64>::from_fn(3, 3, |i, j| if i == j { 4.0 } else { 1.0 / (1.0 + (i + 2 * j) as f64) });
//! let lu = CpuLu::factorize(a.as_ref(), LuParams::default()).unwrap();
//! let b = Mat::<f64>::from_fn(3, 2, |i, j| (i + j) as f64 + 1.0);
//! let x = lu.solve(b.as_ref()).unwrap();
//! let r = a.matmul(&x);
//! assert!((0..3).all(|i| (0..2).all(|j| (r[(i, j)] - b[(i, j)]).abs() < 1e-12)));
//! ```
#![forbid(unsafe_code)]

pub mod cpu;
pub mod gpu;

pub use cpu::CpuLu;
pub use gpu::GpuLu;

use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;

/// Options of the LU factorisation.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[non_exhaustive]
pub struct LuParams {
    /// Outer block size (panel width); `None` picks [`default_block_size`].
    pub block_size: Option<usize>,
    /// Width at which the recursive panel stops splitting and runs column steps;
    /// `None` picks [`DEFAULT_PANEL_BASE`] (at most the block size); on the GPU with
    /// the cooperative panel `None` picks the block size (one launch per panel, up
    /// to 256 columns), at most [`GPU_CLUSTER_LEAF_BASE`] with the cluster panel.
    pub panel_base: Option<usize>,
    /// Relative singularity tolerance: column j is rejected when
    /// |u_jj| ≤ singular_tol·max|a_ij|. `None` uses max(m, n)·u; `Some(0.0)`
    /// rejects exact zeros only (LAPACK's `info > 0`).
    pub singular_tol: Option<f64>,
    /// GPU only: base panels with at most this many rows (from the diagonal down)
    /// run as one single-block launch (`lu_panel_fused`) instead of two launches per
    /// column; `None` uses [`DEFAULT_FUSED_ROWS`], `Some(0)` never fuses. The
    /// result is the same algorithm and pivots.
    pub fused_rows: Option<usize>,
    /// GPU only: time each phase with CUDA events ([`GpuLu::profile`]).
    pub profile: bool,
    /// GPU only: factor each panel (recursive leaf) of at most 256 columns in one
    /// cooperative multi-block launch (`lu_panel_coop`, one grid barrier per column)
    /// instead of column-step kernels; `None` means `true`. Same algorithm and pivots.
    pub coop_panel: Option<bool>,
    /// GPU only: target rows per block of the cooperative panel (the grid is at most
    /// one block per SM); `None` uses [`DEFAULT_COOP_ROWS`].
    pub coop_rows: Option<usize>,
    /// GPU only: `Some(false)` makes the cooperative panel work on the matrix in
    /// global memory even where a block's rows fit in shared memory (`None`: shared
    /// memory where it fits).
    pub coop_smem: Option<bool>,
    /// GPU only: look-ahead — factor panel k+1 (cooperative or cluster leaves, with
    /// the recursive panel's laswp, TRSM and GEMM between them) on a second stream of
    /// the device's highest priority while the main stream runs the rest of panel k's
    /// Schur-complement GEMM; `None` uses [`DEFAULT_LOOKAHEAD`]. Needs the cooperative
    /// panel (the default); ignored otherwise and while profiling.
    pub lookahead: Option<bool>,
    /// GPU only: on devices of compute capability 9.0 or later, factor each
    /// cooperative panel whose rows fit in the shared memory of one thread-block
    /// cluster on that cluster (`lu_cluster_panel`: the blocks push candidates and
    /// rows into each other's shared memory and wait on local mbarriers) instead of
    /// the whole-GPU cooperative launch; `None` means `true`. Same algorithm and
    /// pivots. Needs the cooperative panel; ignored on older devices. With it the
    /// GPU's default block size is [`gpu_default_block_size`].
    pub cluster_panel: Option<bool>,
    /// GPU only, with the cluster panel: a panel (or recursive leaf) whose rows do
    /// not fit one cluster's shared memory splits in halves, joined by laswp, TRSM and
    /// GEMM as in the recursive panel, while the halves stay at least this many
    /// columns wide, so that its pieces run on a cluster (which leaves the rest of the
    /// GPU to the look-ahead's GEMM) instead of the whole-GPU cooperative launch;
    /// `None` uses [`DEFAULT_CLUSTER_LEAF_MIN`]. Same algorithm and pivots. A value
    /// of at least the block size never splits.
    pub cluster_leaf_min: Option<usize>,
    /// GPU only: U₁₂ := L₁₁⁻¹·A₁₂ of each block step by the explicit inverse of the
    /// unit lower triangular L₁₁ (a TRSM on the identity after the panel) and one
    /// GEMM, instead of a TRSM across the matrix; `None` means on for block sizes of
    /// at least [`U12_INVERSE_MIN_BLOCK`] (where the wide TRSM runs at a few TFLOP/s
    /// and the GEMM near the GEMM rate), off below (where the extra launches cost more
    /// than the TRSM). |l_ij| ≤ 1 with partial pivoting; the accuracy checks of
    /// `GpuLu` hold either way.
    pub u12_by_inverse: Option<bool>,
}

/// The default outer block size on the GPU. Where the cluster panel runs
/// (`clusters`: an sm_90 device, neither `cluster_panel` nor `coop_panel` off): 64 up
/// to 8192 (the smaller of m, n) — the 64-column panels of up to 7000 or so rows fit
/// one cluster's shared memory; the rank-64 GEMMs cost more, but less than the panels
/// gain (H100: f64 0.76 → 0.95× getrf at 4096, 0.79 → 0.90× at 8192) — then 256 up
/// to 16384 and 512 above, with recursive panels of [`GPU_CLUSTER_LEAF_BASE`]-column
/// leaves on the high-priority look-ahead stream (wider GEMMs: H100 f64 16384 0.84×
/// at 128 → 0.96× at 256, 0.92× at 512; 32768 0.94× at 256 → 1.04× at 512;
/// docs/performance.md). [`default_block_size`] otherwise.
pub fn gpu_default_block_size(m: usize, n: usize, clusters: bool) -> usize {
    if !clusters {
        default_block_size(m, n)
    } else if m.min(n) <= 8192 {
        64
    } else if m.min(n) <= 16384 {
        256
    } else {
        512
    }
}

/// With the cluster panel and no explicit [`LuParams::panel_base`]: the widest leaf
/// of the GPU's recursive panel (wider blocks split into leaves of this width, joined
/// by laswp, TRSM and GEMM).
pub const GPU_CLUSTER_LEAF_BASE: usize = 64;

/// The default outer block size for an m×n matrix: 64 below 4096 (the
/// smaller of m, n), else 128 (from a sweep of 64/128/256 against cuSOLVER
/// `getrf` on an H200, docs/performance.md).
pub fn default_block_size(m: usize, n: usize) -> usize {
    if m.min(n) < 4096 {
        64
    } else {
        128
    }
}

/// Smallest block size at which [`LuParams::u12_by_inverse`] is on by default (H100
/// f64: 16384, nb 256: 149 → 145 ms; 8192, nb 64: 42.6 → 44.2 ms with it;
/// docs/performance.md).
pub const U12_INVERSE_MIN_BLOCK: usize = 256;

/// Default [`LuParams::cluster_leaf_min`].
pub const DEFAULT_CLUSTER_LEAF_MIN: usize = 8;

/// The default recursive-panel base width (same sweep: 16 beat 32 and 64).
pub const DEFAULT_PANEL_BASE: usize = 16;

/// Default [`LuParams::coop_rows`]: rows per block of the cooperative panel (64 beat
/// 128 and 256 at n = 2048 and 8192 on an H200, docs/performance.md).
pub const DEFAULT_COOP_ROWS: usize = 64;

/// Default [`LuParams::lookahead`]: on (−7 % time at n = 8192, neutral at 2048 on an
/// H200, docs/performance.md).
pub const DEFAULT_LOOKAHEAD: bool = true;

/// Default [`LuParams::fused_rows`]: below this many rows one block runs a whole base
/// panel faster than the two-launch column steps (measured on an H200).
pub const DEFAULT_FUSED_ROWS: usize = 2048;

/// Checked, resolved parameters of one factorisation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub m: usize,
    pub n: usize,
    pub nb: usize,
    pub base: usize,
    /// Absolute pivot tolerance tol·max|a_ij|.
    pub abs_tol: f64,
}

/// Validates an m×n shape and `params` (shared by both backends so they fail alike):
/// returns the block size, the panel base and the relative singularity tolerance.
///
/// # Errors
/// [`Error::Shape`] for an empty A (as the QR factorisation: nothing to factor);
/// [`Error::InvalidParam`] for a zero block size or panel base, or a negative or
/// non-finite tolerance.
pub(crate) fn check_params<T: Scalar>(
    op: &'static str,
    m: usize,
    n: usize,
    params: &LuParams,
) -> Result<(usize, usize, f64)> {
    for (what, got) in [("rows of A", m), ("columns of A", n)] {
        if got == 0 {
            return Err(Error::Shape {
                op,
                what,
                got,
                expected: 1,
            });
        }
    }
    let nb = params
        .block_size
        .unwrap_or_else(|| default_block_size(m, n));
    if nb == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "block_size",
            why: "must be at least 1".into(),
        });
    }
    let base = params.panel_base.unwrap_or(DEFAULT_PANEL_BASE);
    if base == 0 {
        return Err(Error::InvalidParam {
            op,
            what: "panel_base",
            why: "must be at least 1".into(),
        });
    }
    let rel = params
        .singular_tol
        .unwrap_or(m.max(n) as f64 * T::UNIT_ROUNDOFF);
    if !(rel >= 0.0 && rel.is_finite()) {
        return Err(Error::InvalidParam {
            op,
            what: "singular_tol",
            why: format!("{rel} is not a finite value >= 0"),
        });
    }
    Ok((nb, base, rel))
}

/// Validates `a` and `params` ([`check_params`]) and plans the factorisation.
///
/// # Errors
/// As [`check_params`]; [`Error::NonFinite`] for a NaN/∞ entry of `a`.
pub(crate) fn plan<T: Scalar>(
    op: &'static str,
    a: MatRef<'_, T>,
    params: &LuParams,
) -> Result<Plan> {
    let (m, n) = (a.nrows(), a.ncols());
    let (nb, base, rel) = check_params::<T>(op, m, n, params)?;
    if let Some((row, col)) = a.first_non_finite() {
        return Err(Error::NonFinite {
            op,
            what: "A",
            row,
            col,
        });
    }
    let mut amax = 0.0f64;
    for j in 0..n {
        for x in a.col(j) {
            amax = amax.max(x.to_f64().abs());
        }
    }
    Ok(Plan {
        m,
        n,
        nb: nb.min(m.min(n).max(1)),
        base: base.min(nb),
        abs_tol: rel * amax,
    })
}

/// The first column j < min(m, n) whose pivot |u_jj| (`diag[j]`) is ≤ `abs_tol`
/// or not finite, as [`Error::Singular`].
pub(crate) fn check_pivots<T: Scalar>(op: &'static str, diag: &[T], abs_tol: f64) -> Result<()> {
    for (column, d) in diag.iter().enumerate() {
        let p = d.to_f64().abs();
        if p.partial_cmp(&abs_tol) != Some(core::cmp::Ordering::Greater) || !p.is_finite() {
            return Err(Error::Singular {
                op,
                column,
                pivot: p,
                tol: abs_tol,
            });
        }
    }
    Ok(())
}

/// The row permutation of LAPACK-style `ipiv` on `m` rows: `perm[i]` is the row
/// of A that became row i of PA.
///
/// # Panics
/// If `ipiv` is longer than `m` or an entry is ≥ `m` (not the interchanges of an
/// m-row factorisation).
pub fn perm_from_ipiv(ipiv: &[usize], m: usize) -> Vec<usize> {
    let mut perm: Vec<usize> = (0..m).collect();
    for (j, &p) in ipiv.iter().enumerate() {
        perm.swap(j, p);
    }
    perm
}

/// (sign, ln|det|) of a square LU: sign ∈ {−1, 1} (0 and −∞ for a zero pivot).
pub(crate) fn det_sign_log<T: Scalar>(diag: &[T], ipiv: &[usize]) -> (f64, f64) {
    let mut sign = 1.0f64;
    let mut log = 0.0f64;
    for (j, (&d, &p)) in diag.iter().zip(ipiv).enumerate() {
        let d = d.to_f64();
        if p != j {
            sign = -sign;
        }
        if d == 0.0 {
            return (0.0, f64::NEG_INFINITY);
        }
        if d < 0.0 {
            sign = -sign;
        }
        log += d.abs().ln();
    }
    (sign, log)
}

/// The unit lower-trapezoidal L (m×min(m, n)) of a packed LU.
pub(crate) fn unpack_l<T: Scalar>(lu: MatRef<'_, T>) -> Mat<T> {
    let (m, n) = (lu.nrows(), lu.ncols());
    let k = m.min(n);
    Mat::from_fn(m, k, |i, j| {
        if i == j {
            T::ONE
        } else if i > j {
            lu.get(i, j)
        } else {
            T::ZERO
        }
    })
}

/// The upper-trapezoidal U (min(m, n)×n) of a packed LU.
pub(crate) fn unpack_u<T: Scalar>(lu: MatRef<'_, T>) -> Mat<T> {
    let (m, n) = (lu.nrows(), lu.ncols());
    let k = m.min(n);
    Mat::from_fn(k, n, |i, j| if i <= j { lu.get(i, j) } else { T::ZERO })
}

/// Checks that a solve is possible: square factors and b with n rows.
pub(crate) fn check_solve<T: Scalar>(
    op: &'static str,
    m: usize,
    n: usize,
    b: MatRef<'_, T>,
) -> Result<()> {
    if m != n {
        return Err(Error::Shape {
            op,
            what: "columns of A (solve needs a square A)",
            got: n,
            expected: m,
        });
    }
    if b.nrows() != n {
        return Err(Error::Shape {
            op,
            what: "rows of B",
            got: b.nrows(),
            expected: n,
        });
    }
    if let Some((row, col)) = b.first_non_finite() {
        return Err(Error::NonFinite {
            op,
            what: "B",
            row,
            col,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_and_det() {
        // ipiv [2, 2, 2]: swap(0,2), swap(1,2) -> perm [2, 0, 1]
        assert_eq!(perm_from_ipiv(&[2, 2, 2], 3), vec![2, 0, 1]);
        let (s, l) = det_sign_log(&[2.0f64, -3.0, 0.5], &[2, 2, 2]);
        // two swaps (+1), one negative pivot (−1)
        assert_eq!(s, -1.0);
        assert!((l - 3.0f64.ln()).abs() < 1e-15);
    }

    #[test]
    fn gpu_block_size_is_64_to_8192_256_to_16384_then_512_with_clusters() {
        for (m, n) in [
            (100, 100),
            (4096, 4096),
            (8192, 8192),
            (9000, 8192),
            (8192, 20000),
        ] {
            assert_eq!(gpu_default_block_size(m, n, true), 64, "{m}x{n}");
        }
        for (m, n) in [(8193, 8193), (16384, 16384), (40000, 9000)] {
            assert_eq!(gpu_default_block_size(m, n, true), 256, "{m}x{n}");
        }
        for (m, n) in [(16385, 16385), (32768, 32768), (20000, 90000)] {
            assert_eq!(gpu_default_block_size(m, n, true), 512, "{m}x{n}");
        }
        for (m, n) in [(100, 100), (4096, 4096), (8192, 8192), (16384, 16384)] {
            assert_eq!(
                gpu_default_block_size(m, n, false),
                default_block_size(m, n),
                "{m}x{n}"
            );
        }
        assert_eq!(default_block_size(4096, 4096), 128);
    }

    #[test]
    fn plan_rejects_an_empty_matrix() {
        for (m, n, what) in [
            (0, 3, "rows of A"),
            (3, 0, "columns of A"),
            (0, 0, "rows of A"),
        ] {
            let a = Mat::<f64>::zeros(m, n);
            match plan("t", a.as_ref(), &LuParams::default()) {
                Err(Error::Shape {
                    what: w, got: 0, ..
                }) => assert_eq!(w, what, "{m}x{n}"),
                other => panic!("{m}x{n}: {other:?}"),
            }
        }
    }

    #[test]
    fn plan_rejects_bad_params() {
        let a = Mat::<f64>::from_fn(3, 3, |i, j| (i * 3 + j) as f64 + 0.5);
        let p = LuParams {
            block_size: Some(0),
            ..Default::default()
        };
        assert!(matches!(
            plan("t", a.as_ref(), &p),
            Err(Error::InvalidParam {
                what: "block_size",
                ..
            })
        ));
        let p = LuParams {
            singular_tol: Some(-1.0),
            ..Default::default()
        };
        assert!(matches!(
            plan("t", a.as_ref(), &p),
            Err(Error::InvalidParam {
                what: "singular_tol",
                ..
            })
        ));
    }
}
