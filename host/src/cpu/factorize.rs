//! Blocked Householder QR on the CPU (docs/algorithms.md#blocked-householder-qr): faer's
//! kernels (`cpu::blocked`) with the serial compact-WY loop (`cpu::wy`) as the reference
//! and fallback. The operation (`ops/factorize/`) validates and builds the state.
#![forbid(unsafe_code)]

use crate::base::dims::{check_rank_of, Dims};
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::cpu::wy::{factor_panel, larfb_left, larft, zero_below_diagonal};

/// R, d = Qᵀb and Q (where the policy keeps it) of a factorisation.
pub(crate) type Factored<T> = (Mat<T>, Mat<T>, Option<Mat<T>>);

/// R (m×n, exact zeros below the diagonal), d = Qᵀb (m×q) and Q (m×m under
/// [`QPolicy::Full`], the m×n Q₁ under [`QPolicy::Thin`]) of A (`dims`: m×n, m ≥ n), on
/// faer's kernels (`blocked`, where the type has them; block size `faer_nb`) or on the
/// reference loop with blocks of `nb`. faer's result is kept unless its R has a non-finite
/// diagonal or fails the rank test: the reference (which scales its reflectors for
/// subnormal and huge entries) then decides.
///
/// # Errors
/// [`crate::Error::RankDeficient`] when some |R_jj| ≤ rank_tol·‖A‖_F.
pub(crate) fn factorize<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    dims: Dims,
    nb: usize,
    faer_nb: Option<usize>,
    rank_tol: f64,
    blocked: bool,
) -> Result<Factored<T>> {
    let Dims { m, n, policy, .. } = dims;
    let mut r = a.to_owned();
    let mut d = b.to_owned();
    let q_cols = match policy {
        QPolicy::Full => Some(m),
        QPolicy::Thin => Some(n),
        QPolicy::None => None,
    };
    // faer's blocked kernels for f32 and f64; the reference below for any other type
    let fast = if blocked {
        crate::cpu::blocked::householder_qr(&mut r, &mut d, q_cols, faer_nb)
    } else {
        None
    };
    let q = match fast {
        Some(q) => {
            zero_below_diagonal(&mut r, n);
            if check_rank_of(&r, n, rank_tol).is_ok() {
                q
            } else {
                r = a.to_owned();
                d = b.to_owned();
                reference_factor(&mut r, &mut d, dims, nb, rank_tol)?
            }
        }
        None => reference_factor(&mut r, &mut d, dims, nb, rank_tol)?,
    };
    Ok((r, d, q))
}

/// The reference blocked Householder QR (`cpu::wy`): R in `r`, Qᵀb in `d`, and Q (m×m, or
/// the m×n Q₁) by backward accumulation.
fn reference_factor<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    dims: Dims,
    nb: usize,
    rank_tol: f64,
) -> Result<Option<Mat<T>>> {
    let Dims { m, n, policy, .. } = dims;
    let (r, d) = (r, d);
    let keep_q = policy != QPolicy::None;
    // (j0, V, T) per block, kept only to accumulate Q.
    let mut blocks: Vec<(usize, Mat<T>, Mat<T>)> = Vec::new();

    let mut j0 = 0;
    while j0 < n {
        let jb = nb.min(n - j0);
        // Panel (level 2): reflectors stored below the diagonal of r; V (ℓ×jb, unit
        // lower trapezoidal) and the τ's.
        let (v, tau) = factor_panel(r, j0, jb);
        let t = larft(&v, &tau);
        // Block application (level 3): C −= V Tᵀ (Vᵀ C) on the trailing columns and d.
        larfb_left(&v, &t, true, r, j0, j0 + jb..n);
        larfb_left(&v, &t, true, d, j0, 0..dims.q);
        if keep_q {
            blocks.push((j0, v, t));
        }
        j0 += jb;
    }
    // Exact zeros below the diagonal (docs/algorithms.md#exact-zeros-below-the-diagonal).
    zero_below_diagonal(r, n);
    check_rank_of(r, n, rank_tol)?;

    Ok(match policy {
        QPolicy::Full => {
            // Backward accumulation: Q = B₁(B₂(⋯(B_K I))); B_b touches rows/columns j0.. only.
            let mut q = Mat::identity(m);
            for (j0, v, t) in blocks.iter().rev() {
                larfb_left(v, t, false, &mut q, *j0, *j0..m);
            }
            Some(q)
        }
        QPolicy::Thin => {
            // The same on [I_n; 0]: columns j < j0 are eᵢ with zeros in the rows B_b touches.
            let mut q1 = Mat::from_fn(m, n, |i, j| if i == j { T::ONE } else { T::ZERO });
            for (j0, v, t) in blocks.iter().rev() {
                larfb_left(v, t, false, &mut q1, *j0, *j0..n);
            }
            Some(q1)
        }
        _ => None,
    })
}
