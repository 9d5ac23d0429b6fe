//! Row insertion and deletion on explicit factors (docs/algorithms.md#explicit-factors).

use super::orth::project_out;
use super::rotation::Rotation;
use super::{sweep_in_parallel, BLOCK};
use super::{Factors, QStore};
use crate::base::error::Result;
use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// Inserts the row `u` (length n) before row `k` of A.
///
/// Q grows by the unit row and column of the new row, R by `u` as its last row; rotations
/// (j, last) zero u against R's diagonal, j = 0..min(rows of R, n). An economic Q then
/// drops the decoupled last column (and R its zero last row).
pub(crate) fn insert_row<T: Field, Q: QStore<T>>(
    f: &mut Factors<T, Q>,
    k: usize,
    u: &[T],
) -> Result<()> {
    let economic = f.economic();
    let t = f.q.cols();
    f.q.insert_zero_row(k)?;
    let mut unit = vec![T::zero(); f.q.rows()];
    unit[k] = T::one();
    f.q.push_col(&unit)?;
    // row t (u) is the pivot of every rotation: carried per column, not stored
    f.r.push_row(&vec![T::zero(); u.len()]);
    let (lim, n) = (t.min(f.r.cols()), f.r.cols());
    let mut rots: Vec<Rotation<T>> = Vec::new();
    let mut c0 = 0;
    while c0 < n {
        let c1 = (c0 + BLOCK).min(n);
        let mut e = u[c0..c1].to_vec();
        let mut cols = f.r.columns_mut(c0, c1, |c| t.min(c + 1));
        Rotation::pivot_on_columns(&rots, &mut cols, &mut e);
        for i in 0..cols.len() {
            let c = c0 + i;
            if c < lim {
                let (rot, rho) = Rotation::zeroing(c, t, cols[i][c], e[i]);
                cols[i][c] = rho;
                e[i] = T::zero();
                f.q.rotate(rot.for_q())?;
                Rotation::pivot_on_columns(&[rot], &mut cols[i + 1..], &mut e[i + 1..]);
                rots.push(rot);
            }
        }
        f.r.trim_cols(c0, c1);
        // zero but for a wide factorisation's columns right of t
        for (i, &x) in e.iter().enumerate() {
            f.r.set(t, c0 + i, x);
        }
        c0 = c1;
    }
    if economic {
        f.q.pop_col()?;
        f.r.pop_row();
    }
    Ok(())
}

/// Why a row could not be deleted from an economic factorisation.
pub(crate) const NO_COMPLETION: &str =
    "no unit vector orthogonal to Q was found to complete it (Q's columns are not orthonormal)";

/// Deletes row `k` of A.
///
/// With x = conj(Q[k, :]), rotations (last, j), j from the last column down, gather x into
/// its last entry; row k of Q becomes a unit multiple of e_lastᵀ, so row k and column last
/// of Q and row last of R decouple and are dropped. R stays upper trapezoidal: the last
/// row is zero left of j + 1 when step j mixes it into row j. An economic Q is first
/// completed by a unit vector orthogonal to its columns ([`completion`]) and R by a zero
/// row.
/// `Ok(Err)` (factors untouched) when an economic Q has no completion; `Err` only for a
/// failure of Q's store.
pub(crate) fn delete_row<T: Field, Q: QStore<T>>(
    f: &mut Factors<T, Q>,
    k: usize,
) -> Result<core::result::Result<(), &'static str>> {
    if f.economic() {
        let Some(u) = completion(&mut f.q, k)? else {
            return Ok(Err(NO_COMPLETION));
        };
        f.q.push_col(&u)?;
        f.r.push_row(&vec![T::zero(); f.r.cols()]);
    }
    let last = f.q.cols() - 1;
    let mut x: Vec<T> = f.q.row(k)?.into_iter().map(|v| v.conj()).collect();
    // the rotations depend on x alone; rotation j meets columns c ≥ j
    let mut rots = Vec::with_capacity(last);
    for j in (0..last).rev() {
        let (rot, rho) = Rotation::zeroing(last, j, x[last], x[j]);
        x[last] = rho;
        x[j] = T::zero();
        f.q.rotate(rot.for_q())?;
        rots.push(rot);
    }
    // rots run from j = last − 1 down: those with j ≤ c are a suffix. Row `last` becomes
    // A's deleted row over ρ and is dropped below: carried, never stored (storing it
    // would pad every column to m entries).
    // The rotations are all known: the column blocks are independent.
    let n = f.r.cols();
    let parallel = sweep_in_parallel::<T>(n * last / 2);
    f.r.blocks_mut(
        BLOCK,
        |c| last.min(c + 1),
        parallel,
        |c0, cols| {
            let common = rots.partition_point(|r| r.bot > c0);
            // R's entries in row `last` (the padding above stops short of it)
            let mut e: Vec<T> = cols
                .iter()
                .map(|c| c.get(last).copied().unwrap_or(T::zero()))
                .collect();
            for (i, (col, e)) in cols.iter_mut().zip(e.iter_mut()).enumerate() {
                let first = rots.partition_point(|r| r.bot > c0 + i);
                Rotation::pivot_top_on_columns(
                    &rots[first..common],
                    &mut [&mut **col],
                    core::slice::from_mut(e),
                );
            }
            Rotation::pivot_top_on_columns(&rots[common..], cols, &mut e);
        },
    );
    f.q.remove_row(k)?;
    f.q.pop_col()?;
    debug_assert_eq!(f.r.rows(), last + 1);
    f.r.pop_row();
    Ok(Ok(()))
}

/// A unit vector orthogonal to range(Q) whose entry k carries the part of e_k outside
/// range(Q): e_k projected out of range(Q), or, when e_k lies in range(Q) (its Q-row has
/// norm 1), e_j for the row j of least norm (Daniel, Gragg, Kaufman and Stewart 1976, as
/// SciPy does). `None` when that fails too.
fn completion<T: Field, Q: QStore<T>>(q: &mut Q, k: usize) -> Result<Option<Vec<T>>> {
    let m = q.rows();
    let unit = |i: usize| {
        let mut e = vec![T::zero(); m];
        e[i] = T::one();
        e
    };
    let mut p = project_out(q, &unit(k))?;
    if p.in_span {
        let norms = q.row_norms()?;
        let Some(j) = (0..m).min_by(|&a, &b| {
            norms[a]
                .partial_cmp(&norms[b])
                .unwrap_or(core::cmp::Ordering::Equal)
        }) else {
            return Ok(None);
        };
        p = project_out(q, &unit(j))?;
        if p.in_span {
            return Ok(None);
        }
        // e_k ∈ range(Q), so the completion is orthogonal to e_k: its entry k is zero
        p.rest[k] = T::zero();
    }
    let inv = <T::Real as Scalar>::ONE / p.norm;
    Ok(Some(p.rest.iter().map(|&x| x.scale(inv)).collect()))
}
