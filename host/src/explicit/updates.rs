//! The updates of [`super::ExplicitQr`] and [`super::GpuExplicitQr`], written once over
//! where Q lives ([`QStore`]): validation first, then the rotations of
//! docs/algorithms.md#explicit-factors; a refusal part way through a multi-step update
//! restores the factors as they were.

use crate::base::error::{Error, Result};
use crate::base::field::Field;
use crate::base::scalar::Scalar;
use crate::cpu::explicit::{self as algo, Factors, QStore};

/// A copy of the factors when a p-step update on an economic factorisation could be
/// refused after its first step (only economic updates refuse, and the first step's
/// refusal comes before any change).
fn backup<T: Field, Q: QStore<T>>(f: &Factors<T, Q>, p: usize) -> Result<Option<Factors<T, Q>>> {
    if p > 1 && f.economic() {
        Ok(Some(Factors {
            q: f.q.snapshot()?,
            r: f.r.clone(),
        }))
    } else {
        Ok(None)
    }
}

/// Puts `backup` back (nothing to do without one: the refusal changed nothing).
fn restore<T: Field, Q: QStore<T>>(f: &mut Factors<T, Q>, backup: Option<Factors<T, Q>>) {
    if let Some(b) = backup {
        *f = b;
    }
}

/// Inserts the `p` rows `rows` (a p×n column-major block) before row `k` (0 ≤ k ≤ m).
///
/// Errors: [`Error::OutOfRange`], [`Error::Shape`], [`Error::NonFinite`].
pub(super) fn insert_rows<T: Field, Q: QStore<T>>(
    op: &'static str,
    f: &mut Factors<T, Q>,
    k: usize,
    rows: &[T],
    p: usize,
) -> Result<()> {
    let (m, n) = (f.m(), f.n());
    position(op, k, m)?;
    block(op, "rows", rows, p, n)?;
    for i in 0..p {
        let row: Vec<T> = (0..n).map(|j| rows[i + j * p]).collect();
        algo::insert_row(f, k + i, &row)?;
    }
    Ok(())
}

/// Deletes rows `k .. k+p` (every row may go: Q becomes 0×0 and R 0×n).
///
/// Errors: [`Error::OutOfRange`]; [`Error::DowndateFailed`] when an economic Q's
/// columns are so far from orthonormal that no completion is found.
pub(super) fn delete_rows<T: Field, Q: QStore<T>>(
    op: &'static str,
    f: &mut Factors<T, Q>,
    k: usize,
    p: usize,
) -> Result<()> {
    let m = f.m();
    if p == 0 || k + p > m {
        return Err(Error::OutOfRange { op, k0: k, p, n: m });
    }
    // a refusal of the first row comes before any change; later ones need the copy
    let backup = backup(f, p)?;
    for i in 0..p {
        let refused = algo::delete_row(f, k)?.map_err(|why| Error::DowndateFailed {
            op,
            row: k + i,
            why: why.to_string(),
        });
        if let Err(e) = refused {
            restore(f, backup);
            return Err(e);
        }
    }
    Ok(())
}

/// Inserts the `p` columns `cols` (an m×p column-major block) before column `k`
/// (0 ≤ k ≤ n). An economic factorisation refuses a column whose reciprocal condition
/// estimate against Q (SciPy's test) is below `rcond` (default: the type's machine
/// epsilon) with [`Error::RankDeficient`] (its `r_jj` is the estimate); once Q is
/// square, the rest are inserted in the full form.
///
/// Errors: [`Error::OutOfRange`], [`Error::Shape`], [`Error::NonFinite`],
/// [`Error::RankDeficient`], [`Error::InvalidParam`] for a negative or NaN `rcond`.
pub(super) fn insert_cols<T: Field, Q: QStore<T>>(
    op: &'static str,
    f: &mut Factors<T, Q>,
    k: usize,
    cols: &[T],
    p: usize,
    rcond: Option<f64>,
) -> Result<()> {
    let (m, n) = (f.m(), f.n());
    position(op, k, n)?;
    block(op, "cols", cols, m, p)?;
    let rcond = rcond.unwrap_or(2.0 * <T::Real as Scalar>::UNIT_ROUNDOFF);
    if rcond.is_nan() || rcond < 0.0 {
        return Err(Error::InvalidParam {
            op,
            what: "rcond",
            why: format!("{rcond} is not a number ≥ 0"),
        });
    }
    let backup = backup(f, p)?;
    for i in 0..p {
        let col = &cols[i * m..(i + 1) * m];
        let refused = algo::insert_col(f, k + i, col, rcond)?.map_err(|rc| Error::RankDeficient {
            column: k + i,
            r_jj: rc,
            tol: rcond,
        });
        if let Err(e) = refused {
            restore(f, backup);
            return Err(e);
        }
    }
    Ok(())
}

/// Deletes columns `k .. k+p` (every column may go: R becomes m×0, or 0×0 with Q m×0
/// for an economic factorisation).
///
/// Errors: [`Error::OutOfRange`].
pub(super) fn delete_cols<T: Field, Q: QStore<T>>(
    op: &'static str,
    f: &mut Factors<T, Q>,
    k: usize,
    p: usize,
) -> Result<()> {
    let n = f.n();
    if p == 0 || k + p > n {
        return Err(Error::OutOfRange { op, k0: k, p, n });
    }
    for _ in 0..p {
        algo::delete_col(f, k)?;
    }
    Ok(())
}

/// A ← A + U·Vᴴ with U m×p and V n×p (column-major): p rank-one updates.
///
/// Errors: [`Error::Shape`], [`Error::NonFinite`].
pub(super) fn rank_k<T: Field, Q: QStore<T>>(
    op: &'static str,
    f: &mut Factors<T, Q>,
    u: &[T],
    v: &[T],
    p: usize,
) -> Result<()> {
    let (m, n) = (f.m(), f.n());
    block(op, "U", u, m, p)?;
    block(op, "V", v, n, p)?;
    for i in 0..p {
        algo::rank_one(f, &u[i * m..(i + 1) * m], &v[i * n..(i + 1) * n])?;
    }
    Ok(())
}

/// `Err` unless k ≤ limit (an insertion position).
fn position(op: &'static str, k: usize, limit: usize) -> Result<()> {
    if k > limit {
        return Err(Error::OutOfRange {
            op,
            k0: k,
            p: 0,
            n: limit,
        });
    }
    Ok(())
}

/// `Err` unless `x` is a finite rows×cols block.
fn block<T: Field>(
    op: &'static str,
    what: &'static str,
    x: &[T],
    rows: usize,
    cols: usize,
) -> Result<()> {
    if x.len() != rows * cols {
        return Err(Error::shape(op, what, x.len(), rows * cols));
    }
    finite(op, what, x, rows)
}

/// `Err` at the first non-finite entry of a column-major block with `rows` rows.
pub(super) fn finite<T: Field>(
    op: &'static str,
    what: &'static str,
    x: &[T],
    rows: usize,
) -> Result<()> {
    match x.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::NonFinite {
            op,
            what,
            row: i % rows.max(1),
            col: i / rows.max(1),
        }),
    }
}
