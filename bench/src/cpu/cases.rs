//! The cases of `cuqr bench cpu`: each update with its data and the updated A and b
//! that refactorising starts from.

use cuqr::{Mat, Scalar};

use super::random;
use crate::dense::{cols_deleted, cols_inserted, rows_deleted, rows_inserted};

pub(super) use crate::op::Op;

/// One update: its block (k0, p), its data (`u`: the new rows p×n or columns m×p, or
/// the rank-one u as m×1; `e`: the new right-hand-side rows p×1, or the rank-one v as
/// n×1) and the updated A and b.
pub(super) struct Case<T: Scalar> {
    pub op: Op,
    pub k0: usize,
    pub p: usize,
    pub u: Mat<T>,
    pub e: Mat<T>,
    pub a_new: Mat<T>,
    pub b_new: Mat<T>,
}

/// A (m×n), b (m×1) and every case for the shape.
pub(super) fn make_cases<T: Scalar>(
    m: usize,
    n: usize,
    seed: u64,
) -> (Mat<T>, Mat<T>, Vec<Case<T>>) {
    let mut rng = cuqr_cli::rng::Rng::new(seed);
    let a: Mat<T> = random(&mut rng, m, n);
    let b: Mat<T> = random(&mut rng, m, 1);
    let mut cases = Vec::new();
    let pb = (n / 10).max(1);
    for p in [1, pb] {
        let (k0, u, e) = (m / 3, random(&mut rng, p, n), random(&mut rng, p, 1));
        let a_new = rows_inserted(&a, k0, &u);
        let b_new = rows_inserted(&b, k0, &e);
        cases.push(Case {
            op: Op::InsertRows,
            k0,
            p,
            u,
            e,
            a_new,
            b_new,
        });
    }
    for p in [1, pb] {
        let k0 = m / 3;
        let (a_new, b_new) = (rows_deleted(&a, k0, p), rows_deleted(&b, k0, p));
        let (u, e) = (Mat::zeros(0, 0), Mat::zeros(0, 0));
        cases.push(Case {
            op: Op::DeleteRows,
            k0,
            p,
            u,
            e,
            a_new,
            b_new,
        });
    }
    for p in [1, pb] {
        let (k0, u) = (n / 2, random(&mut rng, m, p));
        let a_new = cols_inserted(&a, k0, &u);
        let e = Mat::zeros(0, 0);
        cases.push(Case {
            op: Op::InsertCols,
            k0,
            p,
            u,
            e,
            a_new,
            b_new: b.clone(),
        });
    }
    for p in [1, pb] {
        let k0 = n / 2;
        let a_new = cols_deleted(&a, k0, p);
        let (u, e) = (Mat::zeros(0, 0), Mat::zeros(0, 0));
        cases.push(Case {
            op: Op::DeleteCols,
            k0,
            p,
            u,
            e,
            a_new,
            b_new: b.clone(),
        });
    }
    let (u, v): (Mat<T>, Mat<T>) = (random(&mut rng, m, 1), random(&mut rng, n, 1));
    let a_new = Mat::from_fn(m, n, |i, j| u[(i, 0)].mul_add(v[(j, 0)], a[(i, j)]));
    cases.push(Case {
        op: Op::RankOne,
        k0: 0,
        p: 1,
        u,
        e: v,
        a_new,
        b_new: b.clone(),
    });
    (a, b, cases)
}
