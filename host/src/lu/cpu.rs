//! CPU reference of the blocked LU with partial pivoting (docs/algorithms.md#lu-factorisation,
//! docs/algorithms.md#lu-pivot-application corrected): the same right-looking blocked algorithm,
//! recursive panel and pivot rule (first index of max |·|) as the GPU driver, as plain loops.
//! Cost ≈ m·n² − n³/3 flops, serial.
#![forbid(unsafe_code)]

use super::{check_pivots, check_solve, det_sign_log, perm_from_ipiv, plan, unpack_l, unpack_u};
use super::{LuParams, Plan};
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::scalar::Scalar;

/// An LU factorisation PA = LU computed on the CPU.
#[derive(Clone, Debug)]
pub struct CpuLu<T> {
    /// Packed factors: L strictly below the diagonal (unit diagonal implied), U on
    /// and above it.
    lu: Mat<T>,
    /// LAPACK-style interchanges, 0-based: row j was swapped with `ipiv[j]` ≥ j.
    ipiv: Vec<usize>,
}

impl<T: Scalar> CpuLu<T> {
    /// Factorises the m×n matrix `a` as PA = LU with partial pivoting.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::Error::Shape) for an empty `a` (no rows or no
    /// columns); [`Error::InvalidParam`](crate::Error::InvalidParam) for bad `params`;
    /// [`Error::NonFinite`](crate::Error::NonFinite) for a NaN/∞ entry;
    /// [`Error::Singular`](crate::Error::Singular) naming the first column j <
    /// min(m, n) with |u_jj| ≤ tol·max|a_ij|.
    pub fn factorize(a: MatRef<'_, T>, params: LuParams) -> Result<Self> {
        const OP: &str = "CpuLu::factorize";
        let plan = plan(OP, a, &params)?;
        let mut lu = a.to_owned();
        let mut ipiv = vec![0usize; plan.m.min(plan.n)];
        factor_in_place(lu.as_mut_slice(), plan.m, &plan, &mut ipiv);
        let diag: Vec<T> = (0..ipiv.len()).map(|j| lu[(j, j)]).collect();
        check_pivots(OP, &diag, plan.abs_tol)?;
        Ok(Self { lu, ipiv })
    }

    /// Rows m.
    pub fn nrows(&self) -> usize {
        self.lu.nrows()
    }

    /// Columns n.
    pub fn ncols(&self) -> usize {
        self.lu.ncols()
    }

    /// The packed factors (L below the diagonal, U on and above).
    pub fn packed(&self) -> MatRef<'_, T> {
        self.lu.as_ref()
    }

    /// LAPACK-style interchanges (0-based): at step j rows j and `ipiv()[j]` swapped.
    pub fn ipiv(&self) -> &[usize] {
        &self.ipiv
    }

    /// The unit lower-trapezoidal L, m×min(m, n).
    pub fn l(&self) -> Mat<T> {
        unpack_l(self.lu.as_ref())
    }

    /// The upper-trapezoidal U, min(m, n)×n.
    pub fn u(&self) -> Mat<T> {
        unpack_u(self.lu.as_ref())
    }

    /// The row permutation: row i of PA is row `perm()[i]` of A.
    pub fn perm(&self) -> Vec<usize> {
        perm_from_ipiv(&self.ipiv, self.lu.nrows())
    }

    /// (sign, ln|det A|) for square A; for rectangular A, of the leading
    /// min(m, n) pivots.
    pub fn det_sign_log(&self) -> (f64, f64) {
        let diag: Vec<T> = (0..self.ipiv.len()).map(|j| self.lu[(j, j)]).collect();
        det_sign_log(&diag, &self.ipiv)
    }

    /// Solves A·X = B for square A (B is n×q): X = U⁻¹L⁻¹PB.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::Error::Shape) if A is not square or B has not n
    /// rows; [`Error::NonFinite`](crate::Error::NonFinite) for a NaN/∞ in B.
    #[must_use = "solve returns X; B is not modified"]
    pub fn solve(&self, b: MatRef<'_, T>) -> Result<Mat<T>> {
        check_solve("CpuLu::solve", self.nrows(), self.ncols(), b)?;
        let n = self.nrows();
        let q = b.ncols();
        let mut x = b.to_owned();
        let xs = x.as_mut_slice();
        laswp(xs, n, 0..q, &self.ipiv, 0..self.ipiv.len());
        let lu = self.lu.as_slice();
        trsm_lower_unit(lu, n, 0, n, xs, n, 0, 0..q);
        trsm_upper(lu, n, n, xs, n, 0..q);
        Ok(x)
    }
}

/// The blocked right-looking LU of the m×n column-major `a` (ld `ld`), as the GPU
/// driver runs it; fills `ipiv` (len min(m, n)). Zero pivots are skipped (no
/// scaling), as LAPACK does; the caller checks the diagonal.
pub(crate) fn factor_in_place<T: Scalar>(a: &mut [T], ld: usize, plan: &Plan, ipiv: &mut [usize]) {
    let (m, n) = (plan.m, plan.n);
    let kmin = m.min(n);
    let mut k = 0;
    while k < kmin {
        let w = plan.nb.min(kmin - k);
        panel(a, ld, m, k, w, plan.base, ipiv);
        // interchanges of this panel across the rest of the matrix
        laswp(a, ld, 0..k, ipiv, k..k + w);
        laswp(a, ld, k + w..n, ipiv, k..k + w);
        // U12 := L11⁻¹ A12 and A22 −= L21 U12
        trsm_lower_unit_in(a, ld, k, w, k + w..n);
        gemm_sub(a, ld, k + w..m, k..k + w, k + w..n);
        k += w;
    }
}

/// Recursive panel: factors rows c0..m of columns c0..c0+w (c0 on the diagonal).
fn panel<T: Scalar>(
    a: &mut [T],
    ld: usize,
    m: usize,
    c0: usize,
    w: usize,
    base: usize,
    ipiv: &mut [usize],
) {
    if w <= base {
        for j in c0..c0 + w {
            column_step(a, ld, m, j, c0..c0 + w, ipiv);
        }
        return;
    }
    let w1 = w / 2;
    let c1 = c0 + w1;
    panel(a, ld, m, c0, w1, base, ipiv);
    laswp(a, ld, c1..c0 + w, ipiv, c0..c1);
    trsm_lower_unit_in(a, ld, c0, w1, c1..c0 + w);
    gemm_sub(a, ld, c1..m, c0..c1, c1..c0 + w);
    panel(a, ld, m, c1, w - w1, base, ipiv);
    laswp(a, ld, c0..c1, ipiv, c1..c0 + w);
}

/// One column step at column j (panel columns end before `cend`): pivot search
/// (first index of max |·| over rows j..m), swap within the base panel's columns
/// `pcols`, scale the column below the pivot, rank-1 update of columns j+1..end.
fn column_step<T: Scalar>(
    a: &mut [T],
    ld: usize,
    m: usize,
    j: usize,
    pcols: core::ops::Range<usize>,
    ipiv: &mut [usize],
) {
    let cend = pcols.end;
    let col = j * ld;
    let mut p = j;
    let mut best = a[col + j].abs();
    for i in j + 1..m {
        let v = a[col + i].abs();
        if v > best {
            best = v;
            p = i;
        }
    }
    ipiv[j] = p;
    if p != j {
        // columns left of this base panel are swapped by the recursion's laswp
        for c in pcols {
            a.swap(c * ld + j, c * ld + p);
        }
    }
    let piv = a[col + j];
    if piv == T::ZERO {
        return;
    }
    for i in j + 1..m {
        a[col + i] /= piv;
    }
    for c in j + 1..cend {
        let u = a[c * ld + j];
        if u == T::ZERO {
            continue;
        }
        for i in j + 1..m {
            let l = a[col + i];
            a[c * ld + i] = (-l).mul_add(u, a[c * ld + i]);
        }
    }
}

/// Applies the interchanges `ipiv[steps]` in order to the columns `cols`.
pub(crate) fn laswp<T: Scalar>(
    a: &mut [T],
    ld: usize,
    cols: core::ops::Range<usize>,
    ipiv: &[usize],
    steps: core::ops::Range<usize>,
) {
    for c in cols {
        for j in steps.clone() {
            let p = ipiv[j];
            if p != j {
                a.swap(c * ld + j, c * ld + p);
            }
        }
    }
}

/// Within one matrix: A(c0..c0+w, cols) := L⁻¹·A(c0..c0+w, cols), L the unit lower
/// w×w block at (c0, c0).
fn trsm_lower_unit_in<T: Scalar>(
    a: &mut [T],
    ld: usize,
    c0: usize,
    w: usize,
    cols: core::ops::Range<usize>,
) {
    for c in cols {
        for j in c0..c0 + w {
            let x = a[c * ld + j];
            if x == T::ZERO {
                continue;
            }
            for i in j + 1..c0 + w {
                a[c * ld + i] = (-a[j * ld + i]).mul_add(x, a[c * ld + i]);
            }
        }
    }
}

/// Within one matrix: A(rows, cols) −= A(rows, inner)·A(inner, cols).
fn gemm_sub<T: Scalar>(
    a: &mut [T],
    ld: usize,
    rows: core::ops::Range<usize>,
    inner: core::ops::Range<usize>,
    cols: core::ops::Range<usize>,
) {
    if rows.is_empty() {
        return;
    }
    for c in cols {
        for k in inner.clone() {
            let u = a[c * ld + k];
            if u == T::ZERO {
                continue;
            }
            for i in rows.clone() {
                a[c * ld + i] = (-a[k * ld + i]).mul_add(u, a[c * ld + i]);
            }
        }
    }
}

/// X(r0..r0+n, cols) := L⁻¹X for the unit lower n×n L at lu(0.., 0..) (ld `ldl`).
#[allow(clippy::too_many_arguments)]
fn trsm_lower_unit<T: Scalar>(
    lu: &[T],
    ldl: usize,
    _l0: usize,
    n: usize,
    x: &mut [T],
    ldx: usize,
    r0: usize,
    cols: core::ops::Range<usize>,
) {
    for c in cols {
        for j in 0..n {
            let v = x[c * ldx + r0 + j];
            if v == T::ZERO {
                continue;
            }
            for i in j + 1..n {
                x[c * ldx + r0 + i] = (-lu[j * ldl + i]).mul_add(v, x[c * ldx + r0 + i]);
            }
        }
    }
}

/// X(0..n, cols) := U⁻¹X for the upper n×n U of `lu` (ld `ldl`).
fn trsm_upper<T: Scalar>(
    lu: &[T],
    ldl: usize,
    n: usize,
    x: &mut [T],
    ldx: usize,
    cols: core::ops::Range<usize>,
) {
    for c in cols {
        for j in (0..n).rev() {
            let v = x[c * ldx + j] / lu[j * ldl + j];
            x[c * ldx + j] = v;
            if v == T::ZERO {
                continue;
            }
            for i in 0..j {
                x[c * ldx + i] = (-lu[j * ldl + i]).mul_add(v, x[c * ldx + i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Error;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = ((*seed >> 11) as f64) / ((1u64 << 53) as f64);
        let m = 0.1 + 0.9 * x;
        if (*seed >> 7) & 1 == 0 {
            m
        } else {
            -m
        }
    }

    fn check_pa_lu(a: &Mat<f64>, lu: &CpuLu<f64>) -> f64 {
        let (l, u, perm) = (lu.l(), lu.u(), lu.perm());
        let prod = l.matmul(&u);
        let mut err = 0.0f64;
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                err = err.max((prod[(i, j)] - a[(perm[i], j)]).abs());
            }
        }
        err / a.as_ref().norm_fro()
    }

    #[test]
    fn blocked_matches_unblocked_and_reconstructs() {
        let mut s = 7u64;
        for &(m, n) in &[(37usize, 37usize), (61, 29), (29, 61), (70, 70)] {
            let a = Mat::from_fn(m, n, |_, _| lcg(&mut s));
            let p = LuParams {
                block_size: Some(16),
                panel_base: Some(4),
                ..Default::default()
            };
            let blk = CpuLu::factorize(a.as_ref(), p).unwrap();
            let p1 = LuParams {
                block_size: Some(1),
                panel_base: Some(1),
                ..Default::default()
            };
            let unb = CpuLu::factorize(a.as_ref(), p1).unwrap();
            assert_eq!(blk.ipiv(), unb.ipiv(), "same pivots for {m}x{n}");
            let tol = 10.0 * m.max(n) as f64 * f64::UNIT_ROUNDOFF;
            assert!(check_pa_lu(&a, &blk) <= tol);
        }
    }

    #[test]
    fn zero_column_is_singular() {
        let mut s = 3u64;
        let a = Mat::from_fn(33, 33, |_, j| if j == 17 { 0.0 } else { lcg(&mut s) });
        match CpuLu::factorize(a.as_ref(), LuParams::default()) {
            Err(Error::Singular { column, .. }) => assert_eq!(column, 17),
            other => panic!("expected Singular, got {other:?}"),
        }
    }
}
