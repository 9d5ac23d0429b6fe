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
use crate::cpu::chain_sweep::DowndateChains;
use crate::cpu::dense::{gemm_add, product, view, view_mut};
use crate::cpu::fold::{apply_to_columns, fold_rows};
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

/// [`crate::cpu::thin::insert_cols`] blocked: the projections on faer, the rotations of
/// [Q₁ Q_z] (columns k0.. only) recorded; Q_z appended to the state's Q₁ and the rotations
/// applied in row blocks, in place, by [`PendingQ::apply`].
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
) -> Result<PendingQ<T>, ThinFailure> {
    let (n, p) = (q1.ncols(), u.ncols());
    let (c, z) = project_out(q1, view(u));
    let base: Vec<f64> = (0..p).map(|j| nrm2(u.col(j)).to_f64()).collect();
    let (qz, g) = thin_qr(&z, &base, tol)?;
    let f = product(view(&qz).transpose(), view(b));
    let mut steps = ColumnTransforms::from_column(k0);
    rfactor::insert_cols(r, d, k0, &c, &g, &f, |i, cs, sn| {
        steps.rotate(i - 1, i, cs, sn)
    });
    debug_assert_eq!(qz.nrows(), q1.nrows());
    Ok(PendingQ {
        steps,
        first: k0,
        extra: qz,
        keep: n + p,
        append: true,
        made: None,
    })
}

/// What is left of a thin update for Q₁ once R has passed the rank test: recorded
/// transformations of Q₁'s columns from `first` on (and of `extra` columns after Q₁'s),
/// then Q₁ cut to its first `keep` columns. Applied in place: the update never copies Q₁
/// (docs/algorithms.md#factors-in-place).
pub struct PendingQ<T> {
    steps: ColumnTransforms<T>,
    first: usize,
    extra: Mat<T>,
    keep: usize,
    /// `extra` becomes Q₁'s last columns (column insertion) instead of a scratch block.
    append: bool,
    /// The scratch column made block by block from Q₁'s rows instead of `extra`.
    made: Option<MadeColumn<T>>,
}

/// The rank-one update's new direction q̂ = (u − Q₁w)/γ, made for each block of Q₁'s rows
/// as the rotations reach it (docs/algorithms.md#thin-rank-one-in-one-pass).
struct MadeColumn<T> {
    u: Vec<T>,
    w: Vec<T>,
    gamma: T,
}

impl<T: Scalar> MadeColumn<T> {
    /// q̂'s rows r0..r0+rb from those rows of Q₁ (`block`, column-major, rb rows).
    fn fill(&self, r0: usize, block: &[T], rb: usize, out: &mut [T]) {
        out.copy_from_slice(&self.u[r0..r0 + rb]);
        for (col, &wj) in block.chunks_exact(rb).zip(&self.w) {
            for (o, &q) in out.iter_mut().zip(col) {
                *o = (-wj).mul_add(q, *o);
            }
        }
        for o in out.iter_mut() {
            *o /= self.gamma;
        }
    }
}

impl<T: Scalar> PendingQ<T> {
    /// Applies the transformations to `q1` in place and drops its columns from `keep` on.
    pub fn apply(mut self, q1: &mut Mat<T>) {
        if let Some(made) = &self.made {
            debug_assert!(self.first == 0 && self.keep == q1.ncols());
            self.steps
                .apply_with_made_column(view_mut(q1), |r0, blk, rb, out| {
                    made.fill(r0, blk, rb, out)
                });
            return;
        }
        if self.append {
            q1.append_cols(&self.extra);
            let n = q1.ncols();
            self.steps
                .apply(view_mut(q1).subcols_mut(self.first, n - self.first));
            return;
        }
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
    let mut steps = ColumnTransforms::from_column(k0);
    rfactor::delete_cols_with(r, d, k0, p, |j, tail, tau| {
        steps.reflect(j, j + 1, tail, tau)
    });
    PendingQ {
        steps,
        first: k0,
        extra: Mat::zeros(q1.nrows(), 0),
        keep: n - p,
        append: false,
        made: None,
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
/// of `nb` columns; b updated. Q₁ takes them once R has passed the rank test, in place, by
/// [`PendingRows::apply`].
#[allow(clippy::too_many_arguments)]
pub fn insert_rows<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    u: &Mat<T>,
    e: &Mat<T>,
    nb: usize,
) -> PendingRows<T> {
    let (p, q) = (u.nrows(), d.ncols());
    let fold = fold_rows(r, d, &mut u.clone(), &mut e.clone(), nb);
    *b = Mat::from_fn(b.nrows() + p, q, |i, k| {
        if i < k0 {
            b[(i, k)]
        } else if i < k0 + p {
            e[(i - k0, k)]
        } else {
            b[(i - p, k)]
        }
    });
    PendingRows { fold, k0, p }
}

/// The reflectors of a thin row insertion, for the state's Q₁ once R has passed the rank
/// test (docs/algorithms.md#blocked-row-folding, #factors-in-place).
pub struct PendingRows<T> {
    fold: crate::cpu::fold::FoldBlocks<T>,
    k0: usize,
    p: usize,
}

impl<T: Scalar> PendingRows<T> {
    /// Q₁ (m×n) becomes (m+p)×n in its own buffer: p zero rows opened at k0, then
    /// [Q₁ E] times the reflectors, E the new rows' unit columns (held apart). A few rows:
    /// each reflector is a small transformation of columns (j, n..n+p), all applied in one
    /// pass of row blocks; more rows: three products per block.
    pub fn apply(self, q1: &mut Mat<T>) {
        let (k0, p, n) = (self.k0, self.p, q1.ncols());
        q1.insert_zero_rows(k0, p);
        let unit = |i: usize, j: usize| if i == k0 + j { T::ONE } else { T::ZERO };
        let mut x = Mat::from_fn(q1.nrows(), p, unit);
        if p <= FEW_ROWS {
            let mut steps = ColumnTransforms::new();
            for (j0, t) in &self.fold.blocks {
                for jj in 0..t.nrows() {
                    steps.reflect(j0 + jj, n, self.fold.vu.col(j0 + jj), t[(jj, jj)]);
                }
            }
            steps.apply_with(view_mut(q1), view_mut(&mut x));
        } else {
            apply_to_columns(&self.fold, view_mut(q1), view_mut(&mut x));
        }
    }
}

/// [`crate::cpu::thin::delete_rows`] blocked: the completion V from the deleted rows of
/// Q₁ by faer products and faer's Householder QR; the rotations generated on the p deleted
/// rows of [Q₁ V] alone, then applied to [R; 0]ᵀ and [d; Vᵀb]ᵀ here and to Q₁ once R has
/// passed the rank test, in its own buffer, by [`PendingDeletion::apply`]. Updates b.
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
) -> Result<PendingDeletion<T>, ThinFailure> {
    if p == 1 {
        if let Some(pending) = delete_row_one_pass(q1, r, d, b, (k0, tol)) {
            return Ok(pending);
        }
    }
    let (m, n) = (q1.nrows(), q1.ncols());
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
    finish_deletion(r, d, b, (&steps, &vtb), (k0, p));
    Ok(PendingDeletion {
        steps,
        v,
        made: None,
        k0,
        p,
    })
}

/// One row k0 deleted where one Gram–Schmidt pass makes the completion accurately: with
/// q = Q₁(k0, :)ᵀ and γ² = 1 − ‖q‖² ≥ 1/2, v = (e_k0 − Q₁q)/γ has v(k0) = γ and
/// vᵀb = (b(k0, :) − qᵀd)/γ (d = Q₁ᵀb), so R and d are updated from q, γ and d alone and v
/// is made block by block inside the rotation pass over Q₁ (as the rank-one update makes
/// q̂, docs/algorithms.md#thin-rank-one-in-one-pass): Q₁ is read once for both. None
/// where γ² < 1/2 (the row holds most of a direction of range(Q₁); the completion is
/// then formed and reorthogonalised first).
fn delete_row_one_pass<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    (k0, tol): (usize, f64),
) -> Option<PendingDeletion<T>> {
    let (m, n) = (q1.nrows(), q1.ncols());
    let qrow: Vec<T> = (0..n).map(|j| q1[(k0, j)]).collect();
    let g2 = 1.0 - qrow.iter().map(|&t| t.to_f64() * t.to_f64()).sum::<f64>();
    // (γ ≤ tol, only for a tolerance near 1, is left to the general path's refusal)
    if !(g2 >= 0.5 && g2.sqrt() > tol) {
        return None;
    }
    let gamma = T::from_f64(g2.sqrt());
    let mut zr = Mat::from_fn(1, n + 1, |_, j| if j < n { qrow[j] } else { gamma });
    let steps = downdate_rotations(&mut zr);
    let vtb = Mat::from_fn(1, d.ncols(), |_, k| {
        let qd = qrow
            .iter()
            .zip(&d.col(k)[..n])
            .fold(T::ZERO, |acc, (&x, &y)| x.mul_add(y, acc));
        (b[(k0, k)] - qd) / gamma
    });
    finish_deletion(r, d, b, (&steps, &vtb), (k0, 1));
    let mut e = vec![T::ZERO; m];
    e[k0] = T::ONE;
    Some(PendingDeletion {
        steps,
        v: Mat::zeros(m, 1),
        made: Some(MadeColumn {
            u: e,
            w: qrow,
            gamma,
        }),
        k0,
        p: 1,
    })
}

/// The rotations of a row deletion applied to [R; 0]ᵀ over [d; Vᵀb]ᵀ (rows (j−1, j) of R
/// and d are columns there); R′, d′ and b without rows k0..k0+p written back.
fn finish_deletion<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    (steps, vtb): (&ColumnTransforms<T>, &Mat<T>),
    (k0, p): (usize, usize),
) {
    let (n, q, mk) = (r.ncols(), d.ncols(), b.nrows() - p);
    let np = n + p;
    let mut rd = Mat::from_fn(n + q, np, |i, j| match (i < n, j < n) {
        (true, true) => r[(j, i)],
        (true, false) => T::ZERO,
        (false, true) => d[(j, i - n)],
        (false, false) => vtb[(j - n, i - n)],
    });
    steps.apply(view_mut(&mut rd));
    *r = Mat::from_fn(n, n, |i, j| if i <= j { rd[(j, i + p)] } else { T::ZERO });
    *d = Mat::from_fn(n, q, |i, k| rd[(n + k, i + p)]);
    *b = Mat::from_fn(mk, q, |i, k| b[(if i < k0 { i } else { i + p }, k)]);
}

/// The rotations of a thin row deletion and the completion V, for the state's Q₁ once R
/// has passed the rank test (docs/algorithms.md#factors-in-place).
pub struct PendingDeletion<T> {
    steps: ColumnTransforms<T>,
    /// The completion V (m×p), or where `made` is set the column its rows are made into.
    v: Mat<T>,
    /// The completion of a single row made block by block in the rotation pass.
    made: Option<MadeColumn<T>>,
    k0: usize,
    p: usize,
}

impl<T: Scalar> PendingDeletion<T> {
    /// Q₁ (m×n) becomes (m−p)×n in its own buffer: the rotations applied to [Q₁ V] (V held
    /// apart; the deleted rows ride along, as rows do not mix), then Q₁′ = columns p..n+p of
    /// the result without rows k0..k0+p, moved down the buffer column by column. Every
    /// move goes to an index no later than its source and past every destination before it,
    /// so no entry is overwritten before it is read; the buffer does not grow.
    pub fn apply(mut self, q1: &mut Mat<T>) {
        let (m, n, k0, p) = (q1.nrows(), q1.ncols(), self.k0, self.p);
        match &self.made {
            Some(made) => self.steps.apply_with_made_column_into(
                view_mut(q1),
                view_mut(&mut self.v),
                |r0, blk, rb, out| made.fill(r0, blk, rb, out),
            ),
            None => self.steps.apply_with(view_mut(q1), view_mut(&mut self.v)),
        }
        let mut data = std::mem::replace(q1, Mat::zeros(0, 0)).into_vec();
        let mut w = 0;
        for j in p..n {
            let s = j * m;
            data.copy_within(s..s + k0, w);
            data.copy_within(s + k0 + p..s + m, w + k0);
            w += m - p;
        }
        data.truncate(w);
        // the completion's columns that land in Q₁′ (all p unless p > n)
        for j in p.saturating_sub(n)..p {
            let col = self.v.col(j);
            data.extend_from_slice(&col[..k0]);
            data.extend_from_slice(&col[k0 + p..]);
        }
        *q1 = Mat::from_col_major(m - p, n, data).expect("(m−p)×n entries");
    }
}

/// [`crate::cpu::thin::rank_one`] blocked: the projections on faer, the rotations of
/// [Q₁ q̂] recorded (applied in row blocks, in place, by [`PendingQ::apply`]). Where u keeps
/// at least 1/√2 of its norm outside range(Q₁) (γ² = ‖u‖² − ‖w‖² ≥ ‖u‖²/2, w = Q₁ᵀu), one
/// Gram–Schmidt pass is enough and q̂ = (u − Q₁w)/γ is made inside the rotation pass
/// (docs/algorithms.md#thin-rank-one-in-one-pass); otherwise the residual is formed and
/// reorthogonalised first.
pub fn rank_one<T: Scalar>(
    q1: &Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    u: &[T],
    v: &[T],
) -> PendingQ<T> {
    if let Some(made) = one_pass_direction(q1, u) {
        return rank_one_made(r, d, b, u, v, made);
    }
    // The residual formed (and reorthogonalised where needed) first.
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
        append: false,
        made: None,
    }
}

/// w = Q₁ᵀu and γ = (‖u‖² − ‖w‖²)^½ where γ² ≥ ‖u‖²/2 (the sums in f64, where a single
/// Gram–Schmidt pass is accurate: the "twice is enough" test of [`project_out`] passes
/// without the second pass); None otherwise.
fn one_pass_direction<T: Scalar>(q1: &Mat<T>, u: &[T]) -> Option<MadeColumn<T>> {
    let m = q1.nrows();
    let w = product(
        view(q1).transpose(),
        faer::MatRef::from_column_major_slice(u, m, 1),
    );
    let squares = |x: &[T]| x.iter().map(|&t| t.to_f64() * t.to_f64()).sum::<f64>();
    let (uu, ww) = (squares(u), squares(w.col(0)));
    let g2 = uu - ww;
    if !(uu.is_finite() && uu > 0.0 && g2 >= 0.5 * uu) {
        return None;
    }
    Some(MadeColumn {
        u: u.to_vec(),
        w: w.col(0).to_vec(),
        gamma: T::from_f64(g2.sqrt()),
    })
}

/// The rank-one update with q̂ made in the rotation pass: q̂ᵀb = (uᵀb − wᵀd)/γ (d = Q₁ᵀb).
fn rank_one_made<T: Scalar>(
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    u: &[T],
    v: &[T],
    made: MadeColumn<T>,
) -> PendingQ<T> {
    let n = made.w.len();
    let f: Vec<T> = (0..d.ncols())
        .map(|k| {
            let ub = u
                .iter()
                .zip(b.col(k))
                .fold(T::ZERO, |acc, (&x, &y)| x.mul_add(y, acc));
            let wd = made
                .w
                .iter()
                .zip(&d.col(k)[..n])
                .fold(T::ZERO, |acc, (&x, &y)| x.mul_add(y, acc));
            (ub - wd) / made.gamma
        })
        .collect();
    let mut w = made.w.clone();
    w.push(made.gamma);
    let mut steps = ColumnTransforms::new();
    rfactor::rank_one(r, d, w, &f, v, |i, cs, sn| steps.rotate(i - 1, i, cs, sn));
    PendingQ {
        steps,
        first: 0,
        extra: Mat::zeros(0, 0),
        keep: n,
        append: false,
        made: Some(made),
    }
}

/// The rotations of docs/algorithms.md#row-deletion generated on the deleted rows `zr`
/// (p×c) of an orthogonal factor alone: for row i and j = c−1 down to i+1, the rotation
/// of columns (j−1, j) zeroes zr(i, j) against zr(i, j−1) and is applied to the rows of
/// zr below i (the rows above are zero there). Recorded for the other rows, R and d.
pub(crate) fn downdate_rotations<T: Scalar>(zr: &mut Mat<T>) -> ColumnTransforms<T> {
    let chains = DowndateChains::generate(zr);
    let mut steps = ColumnTransforms::new();
    for (_, k, c, s) in chains.each() {
        steps.rotate(k, k + 1, c, s);
    }
    steps
}
