//! The inputs of one point's update (U, e, u, v), the matrix and right-hand side
//! after it, and the update's options at the point.

use cuqr::{Givens, Mat, QrUpdate, RowRemoval, Scalar};

use super::grid::{Kind, Point};
use crate::dense::{cols_deleted, cols_inserted, rows_deleted, rows_inserted};

/// The points' random inputs: entries ±[0.1, 1) (never zero), one stream a seed.
pub(super) use cuqr_cli::rng::random_signed_matrix_serial as random;

/// The inputs of one update and the matrix/right-hand side after it.
pub(super) struct Case<T: Scalar> {
    pub(super) u: Mat<T>,
    pub(super) e: Mat<T>,
    pub(super) uv: (Vec<T>, Vec<T>),
    pub(super) a_new: Mat<T>,
    pub(super) b_new: Mat<T>,
}

pub(super) fn make_case<T: Scalar>(pt: &Point, a: &Mat<T>, b: &Mat<T>, seed: u64) -> Case<T> {
    let (m, n, k0, p) = (pt.m, pt.n, pt.k0, pt.p);
    let none = || Mat::from_fn(1, 1, |_, _| T::ONE);
    match pt.kind {
        Kind::InsertCols => {
            let u = random::<T>(m, p, seed);
            let a_new = cols_inserted(a, k0, &u);
            Case {
                u,
                e: none(),
                uv: (vec![], vec![]),
                a_new,
                b_new: b.clone(),
            }
        }
        Kind::DeleteCols => Case {
            u: none(),
            e: none(),
            uv: (vec![], vec![]),
            a_new: cols_deleted(a, k0, p),
            b_new: b.clone(),
        },
        Kind::InsertRows => {
            let u = random::<T>(p, n, seed);
            let e = random::<T>(p, 1, seed ^ 0x5555);
            Case {
                a_new: rows_inserted(a, k0, &u),
                b_new: rows_inserted(b, k0, &e),
                u,
                e,
                uv: (vec![], vec![]),
            }
        }
        Kind::DeleteRows => Case {
            u: none(),
            e: none(),
            uv: (vec![], vec![]),
            a_new: rows_deleted(a, k0, p),
            b_new: rows_deleted(b, k0, p),
        },
        Kind::RankOne => {
            let uu = random::<T>(m, 1, seed).into_vec();
            let vv = random::<T>(n, 1, seed ^ 0x7777).into_vec();
            // a modest rank-one change keeps A + uvᵀ well conditioned
            let s = T::from_f64(0.5);
            let a_new = Mat::from_fn(m, n, |i, j| a[(i, j)] + s * uu[i] * vv[j]);
            let vs = vv.iter().map(|&x| s * x).collect();
            Case {
                u: none(),
                e: none(),
                uv: (uu, vs),
                a_new,
                b_new: b.clone(),
            }
        }
    }
}

/// Applies the point's update to any backend.
pub(super) fn apply<T: Scalar, Q: QrUpdate<T>>(
    st: &mut Q,
    pt: &Point,
    c: &Case<T>,
) -> cuqr::Result<()> {
    match pt.kind {
        Kind::InsertCols => st.insert_cols(pt.k0, c.u.as_ref()),
        Kind::DeleteCols => st.delete_cols(pt.k0, pt.p),
        Kind::InsertRows => st.insert_rows(pt.k0, c.u.as_ref(), c.e.as_ref()),
        Kind::DeleteRows => st.delete_rows(pt.k0, pt.p),
        Kind::RankOne => st.rank_one(&c.uv.0, &c.uv.1),
    }
}

/// The seed of a point's update inputs.
pub(super) fn case_seed(seed: u64, p: &Point) -> u64 {
    seed ^ ((p.k0 as u64) << 16) ^ p.p as u64
}

/// Whether the point's update has a Givens stage whose GPU strategy
/// [`wavefront_params`] changes (docs/algorithms.md#givens-rotations).
pub(super) fn has_givens_stage(pt: &Point) -> bool {
    match pt.kind {
        Kind::DeleteRows | Kind::RankOne => true,
        Kind::InsertCols => pt.k0 < pt.n,
        Kind::DeleteCols | Kind::InsertRows => false,
    }
}

/// The point's update options: the state's, with the BS group's n_b.
pub(super) fn point_params(pt: &Point, mut p: cuqr::UpdateParams) -> cuqr::UpdateParams {
    if pt.nb.is_some() {
        p.block_size = pt.nb;
    }
    p
}

/// The seeds' Wavefront strategy (docs/algorithms.md#givens-rotations): a generate and
/// an apply launch per wavefront step; for row deletion the given layout (the seeds'
/// composite [Q; Rᵀ; dᵀ] by default: docs/algorithms.md#padded-transpose-and-composite-layout).
pub(super) fn wavefront_params(
    pt: &Point,
    p: cuqr::UpdateParams,
    layout: RowRemoval,
) -> cuqr::UpdateParams {
    let mut p = point_params(pt, p);
    p.givens = Givens::Wavefront;
    p.row_removal = layout;
    p
}

#[cfg(test)]
mod tests {
    use super::super::grid::quick_grid;
    use super::super::run::rel_diff;
    use super::*;
    use cuqr::{CpuQr, FactorParams, QPolicy};

    #[test]
    fn cases_build_the_updated_matrix() {
        let a = random::<f64>(30, 10, 1);
        let b = random::<f64>(30, 1, 2);
        let ic = Point::new("x", Kind::InsertCols, 30, 10, 4, 3);
        let c = make_case(&ic, &a, &b, 3);
        assert_eq!((c.a_new.nrows(), c.a_new.ncols()), (30, 13));
        assert_eq!(c.a_new[(5, 3)], a[(5, 3)]);
        assert_eq!(c.a_new[(5, 4)], c.u[(5, 0)]);
        assert_eq!(c.a_new[(5, 7)], a[(5, 4)]);
        let dr = Point::new("x", Kind::DeleteRows, 30, 10, 2, 5);
        let c = make_case(&dr, &a, &b, 3);
        assert_eq!(c.a_new[(1, 0)], a[(1, 0)]);
        assert_eq!(c.a_new[(2, 0)], a[(7, 0)]);
        assert_eq!(c.b_new[(2, 0)], b[(7, 0)]);
        let ir = Point::new("x", Kind::InsertRows, 30, 10, 0, 4);
        let c = make_case(&ir, &a, &b, 3);
        assert_eq!(c.a_new[(3, 2)], c.u[(3, 2)]);
        assert_eq!(c.a_new[(4, 2)], a[(0, 2)]);
        assert_eq!(c.b_new[(0, 0)], c.e[(0, 0)]);
        let dc = Point::new("x", Kind::DeleteCols, 30, 10, 8, 2);
        let c = make_case(&dc, &a, &b, 3);
        assert_eq!(c.a_new.ncols(), 8);
        assert_eq!(c.a_new[(0, 7)], a[(0, 7)]);
        assert!(a.as_slice().iter().all(|v| v.abs() >= 0.1));
    }

    /// The CPU column of the quick grid against an independent refactorisation:
    /// the update's solution matches the fresh factorisation's within 10·m·u, scaled by κ
    /// (docs/algorithms.md#accuracy-measures; random ±[0.1,1) data is well conditioned).
    #[test]
    fn cpu_update_solution_matches_refactorisation() {
        for q in quick_grid() {
            let (m, n, pp) = (130, 50, q.p.min(10));
            let lim = if q.kind == Kind::DeleteCols {
                n - pp
            } else {
                n
            };
            let p = Point {
                m,
                n,
                k0: (q.k0 * n / q.n).min(lim),
                p: pp,
                ..q
            };
            let a = random::<f64>(p.m, p.n, 11);
            let b = random::<f64>(p.m, 1, 12);
            let c = make_case(&p, &a, &b, 13);
            let mut st = CpuQr::factorize(
                a.as_ref(),
                b.as_ref(),
                p.kind.policy(),
                FactorParams::default(),
            )
            .unwrap();
            apply(&mut st, &p, &c).unwrap();
            let x = st.solve().unwrap().x;
            let fresh = CpuQr::factorize(
                c.a_new.as_ref(),
                c.b_new.as_ref(),
                QPolicy::None,
                FactorParams::default(),
            )
            .unwrap()
            .solve()
            .unwrap()
            .x;
            let e = rel_diff(x.as_slice(), fresh.as_slice());
            assert!(
                e <= 10.0 * p.m as f64 * <f64 as Scalar>::UNIT_ROUNDOFF,
                "{:?}: e_x = {e}",
                p.kind
            );
        }
    }
}
