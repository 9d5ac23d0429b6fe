//! The thin-Q updates (docs/algorithms.md#thin-q-updates) on blocked building blocks: the
//! same algorithms as [`crate::cpu::thin`], with every product on faer, the row folding
//! by block reflectors (docs/algorithms.md#blocked-row-folding) and the rotations and
//! reflectors that act on Q₁'s columns recorded while R is updated and applied afterwards
//! in row blocks (docs/algorithms.md#blocked-column-transformations). Each function reads
//! the old Q₁ and returns the new one, written once into one new buffer: nothing is m×m,
//! and Q₁ is read and written a small, fixed number of times per update.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::blocked::householder_qr;
use crate::cpu::dense::{gemm_add, product, view, view_mut};
use crate::cpu::fold::{apply_to_columns, fold_rows};
use crate::cpu::givens::{givens, rot_pair};
use crate::cpu::householder::nrm2;
use crate::cpu::rfactor;
use crate::cpu::rotations::ColumnTransforms;
use crate::cpu::thin::{thin_qr, ThinFailure};

/// Q₁ᵀU and U − Q₁(Q₁ᵀU) by classical Gram–Schmidt on faer products, repeated once
/// unless every column kept at least 1/√2 of its norm ("twice is enough": one more
/// pass then changes nothing at working precision).
pub fn project_out<T: Scalar>(q1: &Mat<T>, u: faer::MatRef<'_, T>) -> (Mat<T>, Mat<T>) {
    let qv = view(q1);
    let c = product(qv.transpose(), u);
    let mut z = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)]);
    gemm_add(view_mut(&mut z), qv, view(&c), -T::ONE);
    let norms: Vec<T> = (0..u.ncols())
        .map(|j| nrm2(&(0..u.nrows()).map(|i| u[(i, j)]).collect::<Vec<_>>()))
        .collect();
    reorthogonalise(q1, c, z, &norms)
}

/// The second Gram–Schmidt pass of [`project_out`] where a column of `z` lost more than
/// 1 − 1/√2 of `norms`.
fn reorthogonalise<T: Scalar>(
    q1: &Mat<T>,
    mut c: Mat<T>,
    mut z: Mat<T>,
    norms: &[T],
) -> (Mat<T>, Mat<T>) {
    let needed = (0..z.ncols()).any(|j| {
        let (kept, was) = (nrm2(z.col(j)).to_f64(), norms[j].to_f64());
        kept.is_nan() || kept * kept < 0.5 * was * was
    });
    if needed {
        let qv = view(q1);
        let c2 = product(qv.transpose(), view(&z));
        gemm_add(view_mut(&mut z), qv, view(&c2), -T::ONE);
        for (x, y) in c.as_mut_slice().iter_mut().zip(c2.as_slice()) {
            *x += *y;
        }
    }
    (c, z)
}

/// A column-major buffer of m×(cols) with `q1`'s columns first and room after them.
fn widened<T: Scalar>(q1: &Mat<T>, extra: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(q1.nrows() * (q1.ncols() + extra));
    out.extend_from_slice(q1.as_slice());
    out
}

/// [`crate::cpu::thin::insert_cols`] blocked: the projections on faer, the rotations of
/// [Q₁ Q_z] (columns k0.. only) recorded and applied in row blocks. Returns the new Q₁.
///
/// # Errors
/// [`ThinFailure::DependentColumn`]; r and d are unchanged then.
pub fn insert_cols<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    k0: usize,
    u: &Mat<T>,
    tol: f64,
) -> Result<Mat<T>, ThinFailure> {
    let (m, n, p) = (q1.nrows(), q1.ncols(), u.ncols());
    let (c, z) = project_out(q1, view(u));
    let base: Vec<f64> = (0..p).map(|j| nrm2(u.col(j)).to_f64()).collect();
    let (qz, g) = thin_qr(&z, &base, tol)?;
    let f = product(view(&qz).transpose(), view(b));
    let mut steps = ColumnTransforms::from_column(k0);
    rfactor::insert_cols(r, d, k0, &c, &g, &f, |i, cs, sn| {
        steps.rotate(i - 1, i, cs, sn)
    });
    let mut out = widened(q1, p);
    out.extend_from_slice(qz.as_slice());
    let mut out = Mat::from_col_major(m, n + p, out).expect("m×(n+p) entries");
    steps.apply(view_mut(&mut out).subcols_mut(k0, n + p - k0));
    Ok(out)
}

/// What is left of a thin update for Q₁ once R has passed the rank test: recorded
/// transformations of Q₁'s columns from `first` on (and of `extra` columns after Q₁'s),
/// then Q₁ cut to its first `keep` columns. Applied in place: the update never copies Q₁.
pub struct PendingQ<T> {
    steps: ColumnTransforms<T>,
    first: usize,
    extra: Mat<T>,
    keep: usize,
}

impl<T: Scalar> PendingQ<T> {
    /// Applies the transformations to `q1` in place and drops its columns from `keep` on.
    pub fn apply(mut self, q1: &mut Mat<T>) {
        let n = q1.ncols();
        if self.extra.ncols() == 0 {
            self.steps
                .apply(view_mut(q1).subcols_mut(self.first, n - self.first));
        } else {
            debug_assert_eq!(self.first, 0);
            self.steps
                .apply_with(view_mut(q1), view_mut(&mut self.extra));
        }
        if self.keep < n {
            let whole = std::mem::replace(q1, Mat::zeros(0, 0));
            *q1 = first_cols(whole, self.keep);
        }
    }
}

/// [`crate::cpu::thin::delete_cols`] blocked: the band's reflectors recorded for Q₁'s
/// columns k0.. (applied in row blocks, in place, by [`PendingQ::apply`]).
pub fn delete_cols<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
) -> PendingQ<T> {
    let n = q1.ncols();
    let keep: Vec<usize> = (0..k0).chain(k0 + p..n).collect();
    let mut rr = Mat::from_fn(n, n - p, |i, j| r[(i, keep[j])]);
    let mut steps = ColumnTransforms::from_column(k0);
    rfactor::retriangularise_band(&mut rr, d, k0, p, |j, tail, tau| {
        steps.reflect(j, j + 1, tail, tau)
    });
    *r = Mat::from_fn(
        n - p,
        n - p,
        |i, j| if i <= j { rr[(i, j)] } else { T::ZERO },
    );
    *d = Mat::from_fn(n - p, d.ncols(), |i, k| d[(i, k)]);
    PendingQ {
        steps,
        first: k0,
        extra: Mat::zeros(q1.nrows(), 0),
        keep: n - p,
    }
}

/// The first `k` columns of `a` (its buffer truncated: no copy).
fn first_cols<T: Scalar>(a: Mat<T>, k: usize) -> Mat<T> {
    let m = a.nrows();
    let mut v = a.into_vec();
    v.truncate(m * k);
    Mat::from_col_major(m, k, v).expect("a prefix of a")
}

/// Most rows [`insert_rows`] folds in by one pass of single reflectors over Q₁ (each
/// reflector then touches p + 1 columns, cheaper than a block's three products).
const FEW_ROWS: usize = 4;

/// [`crate::cpu::thin::insert_rows`] blocked: the rows folded into R by block reflectors
/// of `nb` columns, each block applied to [Q₁ E] (E the new rows' unit columns) by three
/// products. The new rows are placed at k0..k0+p from the start: the reflectors mix
/// columns only. Returns the new Q₁ and updates b.
#[allow(clippy::too_many_arguments)]
pub fn insert_rows<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    u: &Mat<T>,
    e: &Mat<T>,
    nb: usize,
) -> Mat<T> {
    let (m, n, p, q) = (q1.nrows(), q1.ncols(), u.nrows(), d.ncols());
    // A few rows: each reflector is a small transformation of columns (j, n..n+p) of
    // [Q₁ E], all applied in one pass of row blocks; more rows: three products per block.
    let one_pass = p <= FEW_ROWS;
    let width = if one_pass { n + p } else { n };
    let mut out = Vec::with_capacity((m + p) * width);
    for j in 0..n {
        let src = q1.col(j);
        out.extend_from_slice(&src[..k0]);
        out.extend(std::iter::repeat_n(T::ZERO, p));
        out.extend_from_slice(&src[k0..]);
    }
    let unit = |i: usize, j: usize| if i == k0 + j { T::ONE } else { T::ZERO };
    let fold = fold_rows(r, d, &mut u.clone(), &mut e.clone(), nb);
    let out = if one_pass {
        for j in 0..p {
            out.extend((0..m + p).map(|i| unit(i, j)));
        }
        let mut out = Mat::from_col_major(m + p, n + p, out).expect("(m+p)×(n+p) entries");
        let mut steps = ColumnTransforms::new();
        for (j0, t) in &fold.blocks {
            for jj in 0..t.nrows() {
                steps.reflect(j0 + jj, n, fold.vu.col(j0 + jj), t[(jj, jj)]);
            }
        }
        steps.apply(view_mut(&mut out));
        first_cols(out, n)
    } else {
        let mut out = Mat::from_col_major(m + p, n, out).expect("(m+p)×n entries");
        let mut x = Mat::from_fn(m + p, p, unit);
        apply_to_columns(&fold, view_mut(&mut out), view_mut(&mut x));
        out
    };
    *b = Mat::from_fn(m + p, q, |i, k| {
        if i < k0 {
            b[(i, k)]
        } else if i < k0 + p {
            e[(i - k0, k)]
        } else {
            b[(i - p, k)]
        }
    });
    out
}

/// [`crate::cpu::thin::delete_rows`] blocked: the completion V from the deleted rows of
/// Q₁ by faer products and faer's Householder QR; the rotations generated on the p deleted
/// rows of [Q₁ V] alone, then applied once to its kept rows and once to [R; 0]ᵀ and
/// [d; Vᵀb]ᵀ, in row blocks. Returns the new Q₁ and updates b.
///
/// # Errors
/// [`ThinFailure::IllDeterminedCompletion`]; r, d and b are unchanged then.
#[allow(clippy::too_many_arguments)]
pub fn delete_rows<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    p: usize,
    tol: f64,
) -> Result<Mat<T>, ThinFailure> {
    let (m, n, q) = (q1.nrows(), q1.ncols(), d.ncols());
    // E − Q₁(Q₁ᵀE) with Q₁ᵀE = Q₁'s deleted rows, transposed.
    let c = Mat::from_fn(n, p, |i, j| q1[(k0 + j, i)]);
    let mut z = Mat::from_fn(m, p, |i, j| if i == k0 + j { T::ONE } else { T::ZERO });
    gemm_add(view_mut(&mut z), view(q1), view(&c), -T::ONE);
    let (_, mut z) = reorthogonalise(q1, c, z, &vec![T::ONE; p]);
    let mut none = Mat::<T>::zeros(m, 0);
    let v = householder_qr(&mut z, &mut none, Some(p), None)
        .expect("f32 and f64 are served")
        .expect("Q requested");
    for j in 0..p {
        let norm = z[(j, j)].abs().to_f64();
        if norm.is_nan() || norm <= tol {
            return Err(ThinFailure::IllDeterminedCompletion { row: j, norm });
        }
    }
    let np = n + p;
    // The deleted rows of [Q₁ V]: the rotations are generated here.
    let mut zr = Mat::from_fn(p, np, |i, j| {
        if j < n {
            q1[(k0 + i, j)]
        } else {
            v[(k0 + i, j - n)]
        }
    });
    let steps = downdate_rotations(&mut zr);
    // [R; 0]ᵀ over [d; Vᵀb]ᵀ: rows (j−1, j) of R and d are columns here.
    let vtb = product(view(&v).transpose(), view(b));
    let mut rd = Mat::from_fn(n + q, np, |i, j| match (i < n, j < n) {
        (true, true) => r[(j, i)],
        (true, false) => T::ZERO,
        (false, true) => d[(j, i - n)],
        (false, false) => vtb[(j - n, i - n)],
    });
    steps.apply(view_mut(&mut rd));
    // [Q₁ V] without the deleted rows, then the rotations; Q₁' is its last n columns.
    let mk = m - p;
    let mut out = Vec::with_capacity(mk * np);
    for j in 0..np {
        let src = if j < n { q1.col(j) } else { v.col(j - n) };
        out.extend_from_slice(&src[..k0]);
        out.extend_from_slice(&src[k0 + p..]);
    }
    let mut qa = Mat::from_col_major(mk, np, out).expect("(m−p)×(n+p) entries");
    steps.apply(view_mut(&mut qa));
    let mut out = qa.into_vec();
    out.drain(..mk * p);
    *r = Mat::from_fn(n, n, |i, j| if i <= j { rd[(j, i + p)] } else { T::ZERO });
    *d = Mat::from_fn(n, q, |i, k| rd[(n + k, i + p)]);
    *b = Mat::from_fn(mk, q, |i, k| b[(if i < k0 { i } else { i + p }, k)]);
    Ok(Mat::from_col_major(mk, n, out).expect("(m−p)×n entries"))
}

/// [`crate::cpu::thin::rank_one`] blocked: the projections on faer, the rotations of
/// [Q₁ q̂] recorded (applied in row blocks, in place, by [`PendingQ::apply`]).
pub fn rank_one<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    u: &[T],
    v: &[T],
) -> PendingQ<T> {
    let (m, n) = (q1.nrows(), q1.ncols());
    let (c, z) = project_out(q1, faer::MatRef::from_column_major_slice(u, m, 1));
    let gamma = nrm2(z.col(0));
    let unorm = nrm2(u).to_f64();
    let has_dir = gamma.to_f64() > 64.0 * T::UNIT_ROUNDOFF * unorm && gamma > T::ZERO;
    let qhat = Mat::from_fn(
        m,
        1,
        |i, _| if has_dir { z[(i, 0)] / gamma } else { T::ZERO },
    );
    let mut w: Vec<T> = c.col(0).to_vec();
    w.push(if has_dir { gamma } else { T::ZERO });
    let f = product(view(&qhat).transpose(), view(b));
    let f: Vec<T> = (0..d.ncols()).map(|k| f[(0, k)]).collect();
    let mut steps = ColumnTransforms::new();
    rfactor::rank_one(r, d, w, &f, v, |i, cs, sn| steps.rotate(i - 1, i, cs, sn));
    PendingQ {
        steps,
        first: 0,
        extra: qhat,
        keep: n,
    }
}

/// The rotations of docs/algorithms.md#row-deletion generated on the deleted rows `zr`
/// (p×c) of an orthogonal factor alone: for row i and j = c−1 down to i+1, the rotation
/// of columns (j−1, j) zeroes zr(i, j) against zr(i, j−1) and is applied to the rows of
/// zr below i (the rows above are zero there). Recorded for the other rows, R and d.
pub(crate) fn downdate_rotations<T: Scalar>(zr: &mut Mat<T>) -> ColumnTransforms<T> {
    let (p, c) = (zr.nrows(), zr.ncols());
    let mut steps = ColumnTransforms::new();
    for i in 0..p {
        for j in (i + 1..c).rev() {
            let (cs, sn, rho) = givens(zr[(i, j - 1)], zr[(i, j)]);
            zr[(i, j - 1)] = rho;
            zr[(i, j)] = T::ZERO;
            for k in i + 1..p {
                let (mut a, mut b) = (zr[(k, j - 1)], zr[(k, j)]);
                rot_pair(cs, sn, &mut a, &mut b);
                zr[(k, j - 1)] = a;
                zr[(k, j)] = b;
            }
            steps.rotate(j - 1, j, cs, sn);
        }
    }
    steps
}
