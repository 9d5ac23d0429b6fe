//! The CPU paths of the thin-Q and R-only states ([`QPolicy::Thin`], [`QPolicy::None`]):
//! each operation runs on copies of the state's parts and commits them only when it and
//! the rank test succeed, so a failed operation leaves the state as it was
//! (docs/algorithms.md#thin-q-updates, docs/algorithms.md#updates-without-q).
#![forbid(unsafe_code)]

use crate::base::dims::check_rank_of;
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::QPolicy;
pub(crate) use crate::base::refusal::{
    completion_tol, dependence_tol, needs_q_or_data, thin_error,
};
use crate::base::scalar::Scalar;
use crate::base::splice::{cols_deleted, cols_inserted, rows_deleted, rows_inserted};
use crate::cpu::factors::{FactorsMut, KeptData};
use crate::cpu::householder::nrm2;
use crate::cpu::rfactor::{self, DowndateFailure};
use crate::cpu::thin;
use crate::cpu::{reference, thin_blocked, wy};

/// The kept data or [`Error::NeedsData`].
fn kept<'s, T: Scalar>(st: &'s FactorsMut<'_, T>, op: &'static str) -> Result<&'s KeptData<T>> {
    st.data.as_ref().ok_or_else(|| needs_q_or_data(op))
}

/// The kept A, or [`Error::NeedsData`].
fn kept_a<'s, T: Scalar>(st: &'s FactorsMut<'_, T>, op: &'static str) -> Result<&'s Mat<T>> {
    kept(st, op)?.a.as_ref().ok_or_else(|| needs_q_or_data(op))
}

/// The new Q₁ of a thin update: a new matrix (the reference), or transformations for
/// the state's Q₁ applied in place once the rank test has passed (the blocked path).
enum NewQ<T: Scalar> {
    Replaced(Mat<T>),
    InPlace(thin_blocked::PendingQ<T>),
}

/// A's columns and rows as an owned matrix with `f` applied.
fn rebuild<T: Scalar>(m: usize, n: usize, f: impl FnMut(usize, usize) -> T) -> Mat<T> {
    Mat::from_fn(m, n, f)
}

/// a·b: faer's product, or the plain loop inside [`reference::run`].
fn mul<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> Mat<T> {
    if reference::active() {
        a.matmul(b)
    } else {
        crate::cpu::dense::product(crate::cpu::dense::view(a), crate::cpu::dense::view(b))
    }
}

/// aᵀ·b: faer's product, or the plain loop inside [`reference::run`].
fn mul_t<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> Mat<T> {
    if reference::active() {
        a.transpose().matmul(b)
    } else {
        crate::cpu::dense::product(
            crate::cpu::dense::view(a).transpose(),
            crate::cpu::dense::view(b),
        )
    }
}

/// x = R⁻¹d and the residual b − A x of the kept data.
fn residual_of<T: Scalar>(a: &Mat<T>, b: &Mat<T>, r: &Mat<T>, d: &Mat<T>) -> Mat<T> {
    let x = rfactor::solve_upper(r, d);
    let ax = mul(a, &x);
    Mat::from_fn(b.nrows(), b.ncols(), |i, k| b[(i, k)] - ax[(i, k)])
}

/// The column norms of `res`.
fn col_norms<T: Scalar>(res: &Mat<T>) -> Vec<T> {
    (0..res.ncols()).map(|k| nrm2(res.col(k))).collect()
}

/// Q̃ᵀU and U − Q̃(Q̃ᵀU) for Q̃ = A R⁻¹ without forming Q̃: the semi-normal equations
/// c = R⁻ᵀ(AᵀU) with one step of refinement from the residual (corrected semi-normal
/// equations, docs/algorithms.md#updates-without-q).
fn csne_project<T: Scalar>(a: &Mat<T>, r: &Mat<T>, u: &Mat<T>) -> (Mat<T>, Mat<T>) {
    let mut c = rfactor::solve_upper_transpose(r, &mul_t(a, u));
    let az = mul(a, &rfactor::solve_upper(r, &c));
    let mut z = Mat::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)] - az[(i, j)]);
    let c2 = rfactor::solve_upper_transpose(r, &mul_t(a, &z));
    let az2 = mul(a, &rfactor::solve_upper(r, &c2));
    for j in 0..u.ncols() {
        for i in 0..u.nrows() {
            z[(i, j)] -= az2[(i, j)];
        }
        for i in 0..c.nrows() {
            c[(i, j)] += c2[(i, j)];
        }
    }
    (c, z)
}

/// The R of Z (p×p) by Householder, and Z's columns' relative norms check.
fn r_of<T: Scalar>(z: &Mat<T>) -> Mat<T> {
    let p = z.ncols();
    let mut g = Mat::zeros(p, p);
    let mut d = Mat::zeros(p, 0);
    let mut rho = Vec::new();
    rfactor::add_rows(
        &mut g,
        &mut d,
        &mut rho,
        &mut z.clone(),
        &mut Mat::zeros(z.nrows(), 0),
    );
    g
}

/// Column insertion for the thin and R-only kinds.
pub(crate) fn insert_cols<T: Scalar>(
    st: FactorsMut<'_, T>,
    k0: usize,
    u: MatRef<'_, T>,
) -> Result<()> {
    const OP: &str = "insert_cols";
    let (n, p) = (st.dims.n, u.ncols());
    let u = u.to_owned();
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    match st.dims.policy {
        QPolicy::Thin => {
            let data = kept(&st, OP)?;
            let old = st.q.as_ref().expect("a thin state holds Q₁");
            let tol = dependence_tol::<T>();
            let q1 = if reference::active() {
                let mut q1 = old.clone();
                thin::insert_cols(&mut q1, &mut r, &mut d, &data.b, k0, &u, tol)
                    .map(|()| NewQ::Replaced(q1))
            } else {
                thin_blocked::insert_cols(old, &mut r, &mut d, &data.b, k0, &u, tol)
                    .map(NewQ::InPlace)
            }
            .map_err(|e| thin_error(OP, k0, e, tol))?;
            check_rank_of(&r, n + p, st.rank_tol)?;
            let a = data.a.as_ref().map(|a| cols_inserted(a, k0, &u));
            match q1 {
                NewQ::Replaced(q1) => *st.q = Some(q1),
                // the blocked path grows Q₁ in place, now that nothing can fail
                NewQ::InPlace(pending) => {
                    pending.apply(st.q.as_mut().expect("a thin state holds Q₁"))
                }
            }
            if let (Some(a), Some(data)) = (a, st.data.as_mut()) {
                data.a = Some(a);
            }
        }
        QPolicy::None => {
            let a = kept_a(&st, OP)?;
            let b = &kept(&st, OP)?.b;
            let (c, z) = csne_project(a, &r, &u);
            for j in 0..p {
                let rel = nrm2(z.col(j)).to_f64() / nrm2(u.col(j)).to_f64().max(f64::MIN_POSITIVE);
                if rel.is_nan() || rel <= dependence_tol::<T>() {
                    return Err(Error::RankDeficient {
                        column: k0 + j,
                        r_jj: rel,
                        tol: dependence_tol::<T>(),
                    });
                }
            }
            let g = r_of(&z);
            let res = residual_of(a, b, &r, &d);
            let f = rfactor::solve_upper_transpose(&g, &mul_t(&z, &res));
            rfactor::insert_cols(&mut r, &mut d, k0, &c, &g, &f, |_, _, _| {});
            check_rank_of(&r, n + p, st.rank_tol)?;
            let a2 = cols_inserted(a, k0, &u);
            let rho = col_norms(&residual_of(&a2, b, &r, &d));
            *st.rho = rho;
            st.data.as_mut().expect("checked above").a = Some(a2);
        }
        QPolicy::Full => unreachable!("the full kind has its own path"),
    }
    *st.r = r;
    *st.d = d;
    st.dims.n = n + p;
    Ok(())
}

/// Column deletion for the thin and R-only kinds.
pub(crate) fn delete_cols<T: Scalar>(st: FactorsMut<'_, T>, k0: usize, p: usize) -> Result<()> {
    let n = st.dims.n;
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    let mut rho = st.rho.clone();
    let mut q1 = None;
    let mut pending = None;
    match st.dims.policy {
        QPolicy::Thin => {
            let old = st.q.as_ref().expect("a thin state holds Q₁");
            if reference::active() {
                let mut q = old.clone();
                thin::delete_cols(&mut q, &mut r, &mut d, k0, p);
                q1 = Some(q);
            } else {
                pending = Some(thin_blocked::delete_cols(old, &mut r, &mut d, k0, p));
            }
        }
        QPolicy::None => rfactor::delete_cols(&mut r, &mut d, &mut rho, k0, p),
        QPolicy::Full => unreachable!("the full kind has its own path"),
    }
    check_rank_of(&r, n - p, st.rank_tol)?;
    if let Some(data) = st.data.as_mut() {
        if let Some(a) = data.a.as_ref() {
            data.a = Some(cols_deleted(a, k0, p));
        }
    }
    *st.r = r;
    *st.d = d;
    *st.rho = rho;
    match pending {
        Some(pending) => pending.apply(st.q.as_mut().expect("a thin state holds Q₁")),
        None => *st.q = q1,
    }
    st.dims.n = n - p;
    Ok(())
}

/// The kept A of a state, where it keeps one.
fn kept_a_of<'s, T: Scalar>(st: &'s FactorsMut<'_, T>) -> Option<&'s Mat<T>> {
    st.data.as_ref().and_then(|k| k.a.as_ref())
}

/// R, d, the residual norms and the kept b of a row update (see [`RowWork::copies`]).
type RowCopies<T> = (Mat<T>, Mat<T>, Vec<T>, Option<Mat<T>>);

/// A thin or R-only state's factors after a row update: R, d, the residual norms, the new
/// Q₁ (thin kind) and the kept b.
struct RowWork<T: Scalar> {
    r: Mat<T>,
    d: Mat<T>,
    rho: Vec<T>,
    q1: Option<RowQ<T>>,
    b: Option<Mat<T>>,
}

/// The new Q₁ of a thin row update: a new matrix (the reference), or the reflectors of a
/// row insertion or the rotations of a row deletion for the state's Q₁, applied in its
/// own buffer once the rank test has passed.
enum RowQ<T: Scalar> {
    Replaced(Mat<T>),
    Grown(thin_blocked::PendingRows<T>),
    Shrunk(thin_blocked::PendingDeletion<T>),
}

impl<T: Scalar> RowWork<T> {
    /// The copies a row update works on: R, d, the residual norms and the kept b.
    fn copies(st: &FactorsMut<'_, T>) -> RowCopies<T> {
        (
            st.r.clone(),
            st.d.clone(),
            st.rho.clone(),
            st.data.as_ref().map(|k| k.b.clone()),
        )
    }

    /// Installs the factors (once they have passed the rank test), the kept b and, where
    /// given, the kept A; the state has `m` rows afterwards.
    fn install(self, st: FactorsMut<'_, T>, a: Option<Mat<T>>, m: usize) {
        if let Some(data) = st.data.as_mut() {
            data.b = self.b.expect("cloned from the kept data");
            if a.is_some() {
                data.a = a;
            }
        }
        *st.r = self.r;
        *st.d = self.d;
        *st.rho = self.rho;
        match self.q1 {
            Some(RowQ::Replaced(q1)) => *st.q = Some(q1),
            Some(RowQ::Grown(pending)) => {
                pending.apply(st.q.as_mut().expect("a thin state holds Q₁"))
            }
            Some(RowQ::Shrunk(pending)) => {
                pending.apply(st.q.as_mut().expect("a thin state holds Q₁"))
            }
            None => *st.q = None,
        }
        st.dims.m = m;
    }
}

/// Row insertion for the thin and R-only kinds.
pub(crate) fn insert_rows<T: Scalar>(
    st: FactorsMut<'_, T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    let (m, n, p) = (st.dims.m, st.dims.n, u.nrows());
    let (u, e) = (u.to_owned(), e.to_owned());
    let (mut r, mut d, mut rho, mut b) = RowWork::copies(&st);
    let mut q1 = None;
    match st.dims.policy {
        QPolicy::Thin => {
            let old = st.q.as_ref().expect("a thin state holds Q₁");
            let b = b.as_mut().expect("a thin state keeps b");
            q1 = Some(if reference::active() {
                let mut q1 = old.clone();
                thin::insert_rows(&mut q1, &mut r, &mut d, b, k0, &u, &e);
                RowQ::Replaced(q1)
            } else {
                let nb = wy::resolve_block_size("insert_rows", st.params.block_size, n)?;
                RowQ::Grown(thin_blocked::insert_rows(&mut r, &mut d, b, k0, &u, &e, nb))
            });
        }
        QPolicy::None => {
            if reference::active() {
                rfactor::add_rows(&mut r, &mut d, &mut rho, &mut u.clone(), &mut e.clone());
            } else {
                // Block reflectors (docs/algorithms.md#blocked-row-folding); e keeps the
                // rotated-out residual parts, as in `rfactor::add_rows`.
                let nb = wy::resolve_block_size("insert_rows", st.params.block_size, n)?;
                let mut ew = e.clone();
                crate::cpu::fold::fold_rows(&mut r, &mut d, &mut u.clone(), &mut ew, nb);
                for (k, rk) in rho.iter_mut().enumerate() {
                    *rk = rk.hypot(nrm2(ew.col(k)));
                }
            }
            if let Some(b) = b.as_mut() {
                *b = rows_inserted(b, k0, &e);
            }
        }
        QPolicy::Full => unreachable!("the full kind has its own path"),
    }
    check_rank_of(&r, n, st.rank_tol)?;
    let a2 = kept_a_of(&st).map(|a| rows_inserted(a, k0, &u));
    RowWork { r, d, rho, q1, b }.install(st, a2, m + p);
    Ok(())
}

/// Row deletion for the thin and R-only kinds; `given` holds the deleted rows of A and b
/// for an R-only state without kept data.
pub(crate) fn delete_rows<T: Scalar>(
    st: FactorsMut<'_, T>,
    k0: usize,
    p: usize,
    given: Option<(MatRef<'_, T>, MatRef<'_, T>)>,
) -> Result<()> {
    const OP: &str = "delete_rows";
    let (m, n, q) = (st.dims.m, st.dims.n, st.dims.q);
    let (mut r, mut d, mut rho, mut b) = RowWork::copies(&st);
    let mut q1 = None;
    match st.dims.policy {
        QPolicy::Thin => {
            let tol = completion_tol::<T>();
            let old = st.q.as_ref().expect("a thin state holds Q₁");
            let b = b.as_mut().expect("a thin state keeps b");
            q1 = Some(
                if reference::active() {
                    let mut q1 = old.clone();
                    thin::delete_rows(&mut q1, &mut r, &mut d, b, k0, p, tol)
                        .map(|()| RowQ::Replaced(q1))
                } else {
                    thin_blocked::delete_rows(old, &mut r, &mut d, b, k0, p, tol).map(RowQ::Shrunk)
                }
                .map_err(|e| thin_error(OP, k0, e, tol))?,
            );
        }
        QPolicy::None => {
            let (rows, rhs): (Mat<T>, Mat<T>) = match (st.data.as_ref(), given) {
                (Some(KeptData { a: Some(a), b }), _) => (
                    rebuild(p, n, |i, j| a[(k0 + i, j)]),
                    rebuild(p, q, |i, k| b[(k0 + i, k)]),
                ),
                (_, Some((ur, er))) => (ur.to_owned(), er.to_owned()),
                _ => return Err(needs_q_or_data(OP)),
            };
            for i in 0..p {
                let row: Vec<T> = (0..n).map(|j| rows[(i, j)]).collect();
                let rhs_row: Vec<T> = (0..q).map(|k| rhs[(i, k)]).collect();
                rfactor::remove_row(&mut r, &mut d, &mut rho, &row, &rhs_row).map_err(|e| {
                    Error::DowndateFailed {
                        op: OP,
                        row: k0 + i,
                        why: match e {
                            DowndateFailure::NotPositiveDefinite { alpha2 } => format!(
                                "the rows left do not determine R (1 − ‖R⁻ᵀa‖² = {alpha2:e})"
                            ),
                            DowndateFailure::Residual { rhs } => format!(
                                "right-hand side {rhs} of the row exceeds the residual it leaves"
                            ),
                        },
                    }
                })?;
            }
            if let Some(bb) = b.as_mut() {
                *bb = rows_deleted(bb, k0, p);
            }
        }
        QPolicy::Full => unreachable!("the full kind has its own path"),
    }
    check_rank_of(&r, n, st.rank_tol)?;
    let a2 = kept_a_of(&st).map(|a| rows_deleted(a, k0, p));
    if let (Some(a2), Some(b2), QPolicy::None) = (a2.as_ref(), b.as_ref(), st.dims.policy) {
        // the kept data give the residual norms exactly, without the downdate's cancellation
        rho = col_norms(&residual_of(a2, b2, &r, &d));
    }
    RowWork { r, d, rho, q1, b }.install(st, a2, m - p);
    Ok(())
}

/// Rank-one update for the thin and R-only kinds.
pub(crate) fn rank_one<T: Scalar>(st: FactorsMut<'_, T>, u: &[T], v: &[T]) -> Result<()> {
    const OP: &str = "rank_one";
    let n = st.dims.n;
    let mut r = st.r.clone();
    let mut d = st.d.clone();
    match st.dims.policy {
        QPolicy::Thin => {
            let old = st.q.as_ref().expect("a thin state holds Q₁");
            let b = &kept(&st, OP)?.b;
            let q1 = if reference::active() {
                let mut q1 = old.clone();
                thin::rank_one(&mut q1, &mut r, &mut d, b, u, v);
                NewQ::Replaced(q1)
            } else {
                NewQ::InPlace(thin_blocked::rank_one(old, &mut r, &mut d, b, u, v))
            };
            check_rank_of(&r, n, st.rank_tol)?;
            match q1 {
                NewQ::Replaced(q1) => *st.q = Some(q1),
                // the blocked path updates Q₁ in place, now that nothing can fail
                NewQ::InPlace(pending) => {
                    pending.apply(st.q.as_mut().expect("a thin state holds Q₁"))
                }
            }
        }
        QPolicy::None => {
            let a = kept_a(&st, OP)?;
            let b = &kept(&st, OP)?.b;
            let (c, z) = csne_project(a, &r, &Mat::from_col(u));
            let gamma = nrm2(z.col(0));
            let has_dir =
                gamma.to_f64() > dependence_tol::<T>() * nrm2(u).to_f64() && gamma > T::ZERO;
            let res = residual_of(a, b, &r, &d);
            let mut w: Vec<T> = c.col(0).to_vec();
            let f: Vec<T> = if has_dir {
                w.push(gamma);
                (0..b.ncols())
                    .map(|k| {
                        let mut s = T::ZERO;
                        for i in 0..z.nrows() {
                            s = z[(i, 0)].mul_add(res[(i, k)], s);
                        }
                        s / gamma
                    })
                    .collect()
            } else {
                w.push(T::ZERO);
                vec![T::ZERO; b.ncols()]
            };
            rfactor::rank_one(&mut r, &mut d, w, &f, v, |_, _, _| {});
            check_rank_of(&r, n, st.rank_tol)?;
            let a2 = rebuild(a.nrows(), n, |i, j| u[i].mul_add(v[j], a[(i, j)]));
            *st.rho = col_norms(&residual_of(&a2, b, &r, &d));
            st.data.as_mut().expect("checked above").a = Some(a2);
        }
        QPolicy::Full => unreachable!("the full kind has its own path"),
    }
    if st.dims.policy == QPolicy::Thin {
        if let Some(KeptData { a: Some(a), .. }) = st.data.as_mut() {
            *a = rebuild(a.nrows(), n, |i, j| u[i].mul_add(v[j], a[(i, j)]));
        }
    }
    *st.r = r;
    *st.d = d;
    Ok(())
}

/// Residual norms of the thin and R-only kinds.
pub(crate) fn residual_norms<T: Scalar>(
    policy: QPolicy,
    q: Option<&Mat<T>>,
    d: &Mat<T>,
    data: Option<&KeptData<T>>,
    rho: &[T],
) -> Vec<f64> {
    match policy {
        QPolicy::Thin => thin::residual_norms(
            q.expect("a thin state holds Q₁"),
            d,
            &data.expect("a thin state keeps b").b,
        ),
        _ => rho.iter().map(|x| x.to_f64()).collect(),
    }
}
