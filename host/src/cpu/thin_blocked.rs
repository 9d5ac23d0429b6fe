//! The thin-Q updates (docs/algorithms.md#thin-q-updates) on blocked building blocks: the
//! same algorithms and results as [`crate::cpu::thin`], with every product on faer, the
//! row folding by block reflectors (docs/algorithms.md#blocked-row-folding) and the
//! rotations and reflectors that act on Q₁'s columns recorded and applied in row blocks
//! (docs/algorithms.md#blocked-column-transformations). Nothing is m×m and every pass over
//! Q₁ is O(m·n) per transformation block.
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

/// Q₁ᵀU and U − Q₁(Q₁ᵀU), classical Gram–Schmidt repeated once, on faer products.
pub fn project_out<T: Scalar>(q1: &Mat<T>, u: faer::MatRef<'_, T>) -> (Mat<T>, Mat<T>) {
    let qv = view(q1);
    let mut c = product(qv.transpose(), u);
    let mut z = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)]);
    gemm_add(view_mut(&mut z), qv, view(&c), -T::ONE);
    let c2 = product(qv.transpose(), view(&z));
    gemm_add(view_mut(&mut z), qv, view(&c2), -T::ONE);
    for (x, y) in c.as_mut_slice().iter_mut().zip(c2.as_slice()) {
        *x += *y;
    }
    (c, z)
}

/// [`crate::cpu::thin::insert_cols`] blocked: the projections on faer, the rotations of
/// [Q₁ Q_z] recorded and applied in row blocks.
///
/// # Errors
/// [`ThinFailure::DependentColumn`]; nothing is changed then.
pub fn insert_cols<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    k0: usize,
    u: &Mat<T>,
    tol: f64,
) -> Result<(), ThinFailure> {
    let (m, n, p) = (q1.nrows(), q1.ncols(), u.ncols());
    let (c, z) = project_out(q1, view(u));
    let base: Vec<f64> = (0..p).map(|j| nrm2(u.col(j)).to_f64()).collect();
    let (qz, g) = thin_qr(&z, &base, tol)?;
    let f = product(view(&qz).transpose(), view(b));
    let mut steps = ColumnTransforms::new();
    rfactor::insert_cols(r, d, k0, &c, &g, &f, |i, cs, sn| {
        steps.rotate(i - 1, i, cs, sn)
    });
    let mut qext = Mat::<T>::zeros(m, n + p);
    qext.as_mut_slice()[..m * n].copy_from_slice(q1.as_slice());
    qext.as_mut_slice()[m * n..].copy_from_slice(qz.as_slice());
    steps.apply(view_mut(&mut qext));
    *q1 = qext;
    Ok(())
}

/// [`crate::cpu::thin::delete_cols`] blocked: the band's reflectors recorded and applied
/// to Q₁ in row blocks.
pub fn delete_cols<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
) {
    let n = q1.ncols();
    let keep: Vec<usize> = (0..k0).chain(k0 + p..n).collect();
    let mut rr = Mat::from_fn(n, n - p, |i, j| r[(i, keep[j])]);
    let mut steps = ColumnTransforms::new();
    rfactor::retriangularise_band(&mut rr, d, k0, p, |j, tail, tau| {
        steps.reflect(j, j + 1, tail, tau)
    });
    steps.apply(view_mut(q1));
    *r = Mat::from_fn(
        n - p,
        n - p,
        |i, j| if i <= j { rr[(i, j)] } else { T::ZERO },
    );
    *q1 = first_cols(q1, n - p);
    *d = Mat::from_fn(n - p, d.ncols(), |i, k| d[(i, k)]);
}

/// The first `k` columns of `a`.
fn first_cols<T: Scalar>(a: &Mat<T>, k: usize) -> Mat<T> {
    let m = a.nrows();
    Mat::from_col_major(m, k, a.as_slice()[..m * k].to_vec()).expect("a prefix of a")
}

/// [`crate::cpu::thin::insert_rows`] blocked: the rows folded into R by block reflectors
/// of `nb` columns, each block applied to [Q₁ E] (E the new rows' unit columns) by three
/// products. The new rows are placed at k0..k0+p from the start: the reflectors mix
/// columns only.
#[allow(clippy::too_many_arguments)]
pub fn insert_rows<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    u: &Mat<T>,
    e: &Mat<T>,
    nb: usize,
) {
    let (m, n, p, q) = (q1.nrows(), q1.ncols(), u.nrows(), d.ncols());
    let old_row = |i: usize| {
        if i < k0 {
            Some(i)
        } else if i < k0 + p {
            None
        } else {
            Some(i - p)
        }
    };
    let mut qext = Mat::<T>::zeros(m + p, n);
    for j in 0..n {
        let (src, dst) = (q1.col(j), qext.col_mut(j));
        dst[..k0].copy_from_slice(&src[..k0]);
        dst[k0 + p..].copy_from_slice(&src[k0..]);
    }
    let mut x = Mat::from_fn(m + p, p, |i, j| if i == k0 + j { T::ONE } else { T::ZERO });
    let fold = fold_rows(r, d, &mut u.clone(), &mut e.clone(), nb);
    apply_to_columns(&fold, view_mut(&mut qext), view_mut(&mut x));
    *q1 = qext;
    *b = Mat::from_fn(m + p, q, |i, k| match old_row(i) {
        Some(oi) => b[(oi, k)],
        None => e[(i - k0, k)],
    });
}

/// [`crate::cpu::thin::delete_rows`] blocked: the completion V by faer products and
/// faer's Householder QR; the rotations generated on the p deleted rows of [Q₁ V] alone,
/// then applied once to the kept rows of [Q₁ V] stacked over Rᵀ and dᵀ, in row blocks.
///
/// # Errors
/// [`ThinFailure::IllDeterminedCompletion`]; nothing is changed then.
#[allow(clippy::too_many_arguments)]
pub fn delete_rows<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &mut Mat<T>,
    k0: usize,
    p: usize,
    tol: f64,
) -> Result<(), ThinFailure> {
    let (m, n, q) = (q1.nrows(), q1.ncols(), d.ncols());
    let units = Mat::from_fn(m, p, |i, j| if i == k0 + j { T::ONE } else { T::ZERO });
    let (_, mut z) = project_out(q1, view(&units));
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
    let mut steps = ColumnTransforms::new();
    for i in 0..p {
        for j in (i + 1..np).rev() {
            let (c, s, rho) = givens(zr[(i, j - 1)], zr[(i, j)]);
            zr[(i, j - 1)] = rho;
            zr[(i, j)] = T::ZERO;
            for k in i + 1..p {
                let (mut a, mut bb) = (zr[(k, j - 1)], zr[(k, j)]);
                rot_pair(c, s, &mut a, &mut bb);
                zr[(k, j - 1)] = a;
                zr[(k, j)] = bb;
            }
            steps.rotate(j - 1, j, c, s);
        }
    }
    // [Q₁ V](kept rows) over [R; 0]ᵀ over [d; Vᵀb]ᵀ, one pass of the rotations.
    let mk = m - p;
    let kept = |i: usize| if i < k0 { i } else { i + p };
    let vtb = product(view(&v).transpose(), view(b));
    let rows = mk + n + q;
    let mut stack = Mat::<T>::zeros(rows, np);
    for j in 0..np {
        let col = stack.col_mut(j);
        let src = if j < n { q1.col(j) } else { v.col(j - n) };
        col[..k0].copy_from_slice(&src[..k0]);
        col[k0..mk].copy_from_slice(&src[k0 + p..]);
        for i in 0..n {
            col[mk + i] = if j < n { r[(j, i)] } else { T::ZERO };
        }
        for k in 0..q {
            col[mk + n + k] = if j < n { d[(j, k)] } else { vtb[(j - n, k)] };
        }
    }
    steps.apply(view_mut(&mut stack));
    *q1 = Mat::from_fn(mk, n, |i, j| stack[(i, j + p)]);
    *r = Mat::from_fn(n, n, |i, j| {
        if i <= j {
            stack[(mk + j, i + p)]
        } else {
            T::ZERO
        }
    });
    *d = Mat::from_fn(n, q, |i, k| stack[(mk + n + k, i + p)]);
    *b = Mat::from_fn(mk, q, |i, k| b[(kept(i), k)]);
    Ok(())
}

/// [`crate::cpu::thin::rank_one`] blocked: the projections on faer, the rotations of
/// [Q₁ q̂] recorded and applied in row blocks.
pub fn rank_one<T: Scalar>(
    q1: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    b: &Mat<T>,
    u: &[T],
    v: &[T],
) {
    let (m, n) = (q1.nrows(), q1.ncols());
    let (c, z) = project_out(q1, faer::MatRef::from_column_major_slice(u, m, 1));
    let gamma = nrm2(z.col(0));
    let unorm = nrm2(u).to_f64();
    let has_dir = gamma.to_f64() > 64.0 * T::UNIT_ROUNDOFF * unorm && gamma > T::ZERO;
    let mut qa = Mat::<T>::zeros(m, n + 1);
    qa.as_mut_slice()[..m * n].copy_from_slice(q1.as_slice());
    if has_dir {
        for (x, y) in qa.col_mut(n).iter_mut().zip(z.col(0)) {
            *x = *y / gamma;
        }
    }
    let mut w: Vec<T> = c.col(0).to_vec();
    w.push(if has_dir { gamma } else { T::ZERO });
    let qhat = faer::MatRef::from_column_major_slice(qa.col(n), m, 1);
    let f = product(qhat.transpose(), view(b));
    let f: Vec<T> = (0..d.ncols()).map(|k| f[(0, k)]).collect();
    let mut steps = ColumnTransforms::new();
    rfactor::rank_one(r, d, w, &f, v, |i, cs, sn| steps.rotate(i - 1, i, cs, sn));
    steps.apply(view_mut(&mut qa));
    *q1 = first_cols(&qa, n);
}
