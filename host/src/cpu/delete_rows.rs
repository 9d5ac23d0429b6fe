//! Row deletion on the CPU for the full kind (docs/algorithms.md#row-deletion): the
//! rotations that turn the deleted rows of Q into [I, 0], serially (the reference) or
//! generated once and applied in row blocks. The operation (`ops/delete_rows/`) validates
//! and dispatches.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::chain_sweep::DowndateChains;
use crate::cpu::dense::view_mut;
use crate::cpu::factors::FactorsMut;
use crate::cpu::givens::{givens, rot, rot_pair};
use crate::cpu::rotations::ColumnTransforms;

/// Deletes rows k0..k0+p of a full-kind state's A, producing Q̃ ((m−p)×(m−p)), R̃ and d̃
/// (docs/algorithms.md#row-deletion).
/// R̃ and d̃ are built and pass the rank test before Q changes (in its own buffer,
/// docs/algorithms.md#factors-in-place).
///
/// # Errors
/// [`crate::Error::RankDeficient`] when the remaining rows are
/// numerically rank deficient. On error the state is unchanged.
pub(crate) fn delete_rows_full<T: Scalar>(
    mut st: FactorsMut<'_, T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    let (m, n) = (st.dims.m, st.dims.n);
    let q_old = st.q.as_ref().expect("a full state holds Q");
    if !crate::cpu::reference::active() {
        return delete_rows_blocked(st, k0, p);
    }
    let rot = rotate_out(q_old, st.r, st.d, k0, p);
    let mp = m - p;
    // Q̃ = Q(rows ∉ block, p:m): rows of the deleted block are [Δ, 0] = [I, 0] and the
    // other rows of Q(:, 0:p) are zero (orthogonality), so both are dropped.
    let q = Mat::from_fn(mp, mp, |i, j| {
        let row = if i < k0 { i } else { i + p };
        rot.q[(row, j + p)]
    });
    // R̃ = (GᵀR)(p:m, :); its strictly lower part is rounding residue: cleared to exact 0.
    let r = Mat::from_fn(
        mp,
        n,
        |i, j| if i > j { T::ZERO } else { rot.r[(i + p, j)] },
    );
    let d = Mat::from_fn(mp, st.dims.q, |i, j| rot.d[(i + p, j)]);
    let dims = Dims { m: mp, ..*st.dims };
    st.replace_full(dims, r, d, q)
}

/// Q, R and d after the rotations of docs/algorithms.md#row-deletion, before the first p
/// rows/columns are dropped:
/// Z·G = [Δ, 0] with Δ ≈ I, and GᵀR = [S; R̃] with R̃ upper trapezoidal up to rounding.
pub(crate) struct Rotated<T> {
    pub q: Mat<T>,
    pub r: Mat<T>,
    pub d: Mat<T>,
}

/// Applies the rotations of docs/algorithms.md#row-deletion to copies of Q (m×m), R and d
/// for the deleted rows k0..k0+p. For each row i
/// of Z (i = 0..p) and j = m−1 down to i+1, the rotation on plane (j−1, j) zeroes Z(i, j)
/// against Z(i, j−1) of the current Q. While row i is processed R has i sub-diagonals, so
/// rows ≥ n+i are zero: planes with j−1 ≥ n+i skip R, and the others touch only
/// columns ≥ j−1−i (docs/algorithms.md#live-column-range).
pub(crate) fn rotate_out<T: Scalar>(
    q: &Mat<T>,
    r: &Mat<T>,
    d: &Mat<T>,
    k0: usize,
    p: usize,
) -> Rotated<T> {
    let (m, n) = (q.nrows(), r.ncols());
    let (mut q, mut r, mut d) = (q.clone(), r.clone(), d.clone());
    let nrhs = d.ncols();
    for i in 0..p {
        let zi = k0 + i;
        for j in (i + 1..m).rev() {
            let (c, s, rho) = givens(q[(zi, j - 1)], q[(zi, j)]);
            let (x, y) = q.two_cols_mut(j - 1, j);
            rot(c, s, x, y);
            x[zi] = rho;
            y[zi] = T::ZERO;
            if j - 1 < n + i {
                for col in (j - 1).saturating_sub(i)..n {
                    let (mut a, mut b) = (r[(j - 1, col)], r[(j, col)]);
                    rot_pair(c, s, &mut a, &mut b);
                    r[(j - 1, col)] = a;
                    r[(j, col)] = b;
                }
            }
            for k in 0..nrhs {
                let (mut a, mut b) = (d[(j - 1, k)], d[(j, k)]);
                rot_pair(c, s, &mut a, &mut b);
                d[(j - 1, k)] = a;
                d[(j, k)] = b;
            }
        }
    }
    Rotated { q, r, d }
}

/// The full-Q row deletion on blocked building blocks: the rotations generated on Q's
/// deleted rows alone as p chains, applied to Rᵀ (only the planes that meet R's non-zero
/// rows) and to d, and, once R̃ has passed the rank test, to Q in one sweep over its
/// columns that also removes the deleted rows and the first p columns in Q's own buffer
/// (docs/algorithms.md#one-sweep-row-deletion, #factors-in-place). The same rotations as
/// [`rotate_out`], so the same result up to rounding.
fn delete_rows_blocked<T: Scalar>(mut st: FactorsMut<'_, T>, k0: usize, p: usize) -> Result<()> {
    let (m, n, q) = (st.dims.m, st.dims.n, st.dims.q);
    let q_old = st.q.as_ref().expect("a full state holds Q");
    let mut zr = Mat::from_fn(p, m, |i, j| q_old[(k0 + i, j)]);
    let chains = DowndateChains::generate(&mut zr);
    // Rᵀ, R's upper triangle only (its rows n.. are zero in a full state and its strictly
    // lower part is taken as zero): while chain i runs, R's rows n + i.. are zero, so its
    // planes (k, k+1) with k ≥ n + i leave them zero and are skipped; the others touch
    // rows < n + p.
    let w = (n + p).min(m);
    let mut steps = ColumnTransforms::new();
    for (i, k, c, s) in chains.each() {
        if k < n + i {
            steps.rotate(k, k + 1, c, s);
        }
    }
    let mut rt = Mat::<T>::zeros(n, w);
    for i in 0..n {
        for (j, &x) in st.r.col(i).iter().enumerate().take(i + 1) {
            rt[(i, j)] = x;
        }
    }
    steps.apply(view_mut(&mut rt));
    let mut d = st.d.clone();
    for (_, k, c, s) in chains.each() {
        for col in 0..q {
            let (mut a, mut b) = (d[(k, col)], d[(k + 1, col)]);
            rot_pair(c, s, &mut a, &mut b);
            d[(k, col)] = a;
            d[(k + 1, col)] = b;
        }
    }
    let mp = m - p;
    // R̃ = (GᵀR)(p.., :) with its strictly lower part (rounding residue) exact zeros.
    let mut r = Mat::<T>::zeros(mp, n);
    for j in 0..n {
        for (i, x) in r.col_mut(j).iter_mut().enumerate().take(j + 1) {
            *x = rt[(j, i + p)];
        }
    }
    let d = Mat::from_fn(mp, q, |i, k| d[(i + p, k)]);
    let dims = Dims { m: mp, ..*st.dims };
    // Q̃ = (Q's kept rows)·G without its first p columns.
    st.replace_full_with(dims, r, d, |qm| chains.apply_and_remove(qm, k0))
}
