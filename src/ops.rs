//! One update as a value: checked against the current dimensions, applied to a
//! factorisation state through the [`QrUpdate`] trait, and applied to the dense
//! matrices A and b so that the CLI can build Ã and b̃ for the accuracy measures
//! (docs/algorithms.md#accuracy-measures).

use cuqr::{Mat, QrUpdate, Scalar};

/// An update of A (m×n) and its right-hand sides b (m×q); positions are 0-based.
#[derive(Clone, Debug)]
pub enum Update<T: Scalar> {
    /// Insert the m×p block `u` as columns k0..k0+p
    /// (docs/algorithms.md#column-insertion).
    InsertCols {
        /// First new column.
        k0: usize,
        /// The new columns, m×p.
        u: Mat<T>,
    },
    /// Delete columns k0..k0+p (docs/algorithms.md#column-deletion).
    DeleteCols {
        /// First deleted column.
        k0: usize,
        /// Number of columns.
        p: usize,
    },
    /// Insert the p×n block `u` as rows k0..k0+p, right-hand sides `e` (p×q)
    /// (docs/algorithms.md#row-insertion).
    InsertRows {
        /// First new row.
        k0: usize,
        /// The new rows, p×n.
        u: Mat<T>,
        /// Their right-hand sides, p×q.
        e: Mat<T>,
    },
    /// Delete rows k0..k0+p (docs/algorithms.md#row-deletion).
    DeleteRows {
        /// First deleted row.
        k0: usize,
        /// Number of rows.
        p: usize,
    },
    /// A ← A + u vᵀ (docs/algorithms.md#rank-one-update).
    RankOne {
        /// Length m.
        u: Vec<T>,
        /// Length n.
        v: Vec<T>,
    },
    /// A ← A + U Vᵀ (docs/algorithms.md#rank-k-update).
    RankK {
        /// m×k.
        u: Mat<T>,
        /// n×k.
        v: Mat<T>,
    },
    /// Columns k0..k0+p become U (docs/algorithms.md#column-replacement).
    ReplaceCols {
        /// First replaced column.
        k0: usize,
        /// The new columns, m×p.
        u: Mat<T>,
    },
    /// Column `from` moves to position `to` (docs/algorithms.md#column-shift).
    ShiftCol {
        /// The column that moves.
        from: usize,
        /// Its new position.
        to: usize,
    },
}

impl<T: Scalar> Update<T> {
    /// The operation's name as the CLI spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Update::InsertCols { .. } => "insert-cols",
            Update::DeleteCols { .. } => "delete-cols",
            Update::InsertRows { .. } => "insert-rows",
            Update::DeleteRows { .. } => "delete-rows",
            Update::RankOne { .. } => "rank-one",
            Update::RankK { .. } => "rank-k",
            Update::ReplaceCols { .. } => "replace-cols",
            Update::ShiftCol { .. } => "shift-col",
        }
    }

    /// `(k0, p)` of a block update (`(from, 1)` for a column shift), `None` for rank-one and
    /// rank-k.
    pub fn block(&self) -> Option<(usize, usize)> {
        match self {
            Update::InsertCols { k0, u } => Some((*k0, u.ncols())),
            Update::DeleteCols { k0, p } | Update::DeleteRows { k0, p } => Some((*k0, *p)),
            Update::InsertRows { k0, u, .. } => Some((*k0, u.nrows())),
            Update::ReplaceCols { k0, u } => Some((*k0, u.ncols())),
            Update::ShiftCol { from, .. } => Some((*from, 1)),
            Update::RankOne { .. } | Update::RankK { .. } => None,
        }
    }

    /// Checks shapes and positions against A (m×n) with q right-hand sides,
    /// so that [`Update::apply_dense`] cannot index out of range. Returns the
    /// dimensions (m', n') after the update. The library repeats these checks
    /// (and the ones about Q and rank) itself.
    pub fn check(&self, m: usize, n: usize, q: usize) -> Result<(usize, usize), String> {
        let op = self.name();
        let fits = |k0: usize, p: usize, lim: usize, what: &str| {
            if p == 0 {
                Err(format!("{op}: empty block (p = 0)"))
            } else if k0.checked_add(p).is_none_or(|end| end > lim) {
                Err(format!(
                    "{op}: block k0={k0}, p={p} does not fit the {lim} {what} of A"
                ))
            } else {
                Ok(())
            }
        };
        match self {
            Update::InsertCols { k0, u } => {
                if u.nrows() != m {
                    return Err(format!("{op}: U has {} rows, A has {m}", u.nrows()));
                }
                if *k0 > n {
                    return Err(format!(
                        "{op}: k0={k0} is past the last column position {n}"
                    ));
                }
                fits(0, u.ncols(), usize::MAX, "columns")?;
                Ok((m, n + u.ncols()))
            }
            Update::DeleteCols { k0, p } => {
                fits(*k0, *p, n, "columns")?;
                Ok((m, n - p))
            }
            Update::InsertRows { k0, u, e } => {
                if u.ncols() != n {
                    return Err(format!("{op}: U has {} columns, A has {n}", u.ncols()));
                }
                if e.nrows() != u.nrows() || e.ncols() != q {
                    return Err(format!(
                        "{op}: e is {}x{}, expected {}x{q} (rows of U x columns of b)",
                        e.nrows(),
                        e.ncols(),
                        u.nrows()
                    ));
                }
                if *k0 > m {
                    return Err(format!("{op}: k0={k0} is past the last row position {m}"));
                }
                fits(0, u.nrows(), usize::MAX, "rows")?;
                Ok((m + u.nrows(), n))
            }
            Update::DeleteRows { k0, p } => {
                fits(*k0, *p, m, "rows")?;
                Ok((m - p, n))
            }
            Update::RankOne { u, v } => {
                if u.len() != m {
                    return Err(format!("{op}: u has length {}, A has {m} rows", u.len()));
                }
                if v.len() != n {
                    return Err(format!("{op}: v has length {}, A has {n} columns", v.len()));
                }
                Ok((m, n))
            }
            Update::RankK { u, v } => {
                if u.nrows() != m || v.nrows() != n || u.ncols() != v.ncols() {
                    return Err(format!(
                        "{op}: U is {}x{} and V {}x{}, expected m x k = {m} x k and n x k = {n} x k",
                        u.nrows(),
                        u.ncols(),
                        v.nrows(),
                        v.ncols()
                    ));
                }
                fits(0, u.ncols(), usize::MAX, "columns")?;
                Ok((m, n))
            }
            Update::ReplaceCols { k0, u } => {
                if u.nrows() != m {
                    return Err(format!("{op}: U has {} rows, A has {m}", u.nrows()));
                }
                fits(*k0, u.ncols(), n, "columns")?;
                Ok((m, n))
            }
            Update::ShiftCol { from, to } => {
                fits(*from, 1, n, "columns")?;
                fits(*to, 1, n, "columns")?;
                Ok((m, n))
            }
        }
    }

    /// Applies the update to a factorisation state.
    pub fn apply(&self, qr: &mut dyn QrUpdate<T>) -> cuqr::Result<()> {
        match self {
            Update::InsertCols { k0, u } => qr.insert_cols(*k0, u.as_ref()),
            Update::DeleteCols { k0, p } => qr.delete_cols(*k0, *p),
            Update::InsertRows { k0, u, e } => qr.insert_rows(*k0, u.as_ref(), e.as_ref()),
            Update::DeleteRows { k0, p } => qr.delete_rows(*k0, *p),
            Update::RankOne { u, v } => qr.rank_one(u, v),
            Update::RankK { u, v } => qr.rank_k(u.as_ref(), v.as_ref()),
            Update::ReplaceCols { k0, u } => qr.replace_cols(*k0, u.as_ref()),
            Update::ShiftCol { from, to } => qr.shift_col(*from, *to),
        }
    }

    /// Ã and b̃: the update applied to the dense A and b. Call only after
    /// [`Update::check`] succeeded for these dimensions.
    pub fn apply_dense(&self, a: &Mat<T>, b: &Mat<T>) -> (Mat<T>, Mat<T>) {
        let (m, n) = (a.nrows(), a.ncols());
        match self {
            Update::InsertCols { k0, u } => {
                let p = u.ncols();
                let at = Mat::from_fn(m, n + p, |i, j| {
                    if j < *k0 {
                        a[(i, j)]
                    } else if j < k0 + p {
                        u[(i, j - k0)]
                    } else {
                        a[(i, j - p)]
                    }
                });
                (at, b.clone())
            }
            Update::DeleteCols { k0, p } => {
                let at = Mat::from_fn(m, n - p, |i, j| a[(i, if j < *k0 { j } else { j + p })]);
                (at, b.clone())
            }
            Update::InsertRows { k0, u, e } => {
                let p = u.nrows();
                let pick = |x: &Mat<T>, y: &Mat<T>, i: usize, j: usize| {
                    if i < *k0 {
                        x[(i, j)]
                    } else if i < k0 + p {
                        y[(i - k0, j)]
                    } else {
                        x[(i - p, j)]
                    }
                };
                let at = Mat::from_fn(m + p, n, |i, j| pick(a, u, i, j));
                let bt = Mat::from_fn(m + p, b.ncols(), |i, j| pick(b, e, i, j));
                (at, bt)
            }
            Update::DeleteRows { k0, p } => {
                let src = |i: usize| if i < *k0 { i } else { i + p };
                let at = Mat::from_fn(m - p, n, |i, j| a[(src(i), j)]);
                let bt = Mat::from_fn(m - p, b.ncols(), |i, j| b[(src(i), j)]);
                (at, bt)
            }
            Update::RankOne { u, v } => {
                let at = Mat::from_fn(m, n, |i, j| u[i].mul_add(v[j], a[(i, j)]));
                (at, b.clone())
            }
            Update::RankK { u, v } => {
                let at = Mat::from_fn(m, n, |i, j| {
                    (0..u.ncols()).fold(a[(i, j)], |s, c| u[(i, c)].mul_add(v[(j, c)], s))
                });
                (at, b.clone())
            }
            Update::ReplaceCols { k0, u } => {
                let p = u.ncols();
                let at = Mat::from_fn(m, n, |i, j| {
                    if (*k0..k0 + p).contains(&j) {
                        u[(i, j - k0)]
                    } else {
                        a[(i, j)]
                    }
                });
                (at, b.clone())
            }
            Update::ShiftCol { from, to } => {
                let mut order: Vec<usize> = (0..n).collect();
                let c = order.remove(*from);
                order.insert(*to, c);
                (Mat::from_fn(m, n, |i, j| a[(i, order[j])]), b.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_b() -> (Mat<f64>, Mat<f64>) {
        let a = Mat::from_fn(7, 3, |i, j| (10 * i + j) as f64 + 0.5);
        let b = Mat::from_fn(7, 2, |i, j| -((10 * i + j) as f64) - 0.25);
        (a, b)
    }

    #[test]
    fn dense_column_updates_place_blocks() {
        let (a, b) = a_b();
        let u = Mat::from_fn(7, 2, |i, j| 1000.0 + (10 * i + j) as f64);
        let up = Update::InsertCols {
            k0: 1,
            u: u.clone(),
        };
        assert_eq!(up.check(7, 3, 2), Ok((7, 5)));
        let (at, bt) = up.apply_dense(&a, &b);
        assert_eq!(bt, b);
        for i in 0..7 {
            assert_eq!(at[(i, 0)], a[(i, 0)]);
            assert_eq!(at[(i, 1)], u[(i, 0)]);
            assert_eq!(at[(i, 2)], u[(i, 1)]);
            assert_eq!(at[(i, 3)], a[(i, 1)]);
            assert_eq!(at[(i, 4)], a[(i, 2)]);
        }
        let del = Update::<f64>::DeleteCols { k0: 1, p: 2 };
        assert_eq!(del.check(7, 3, 2), Ok((7, 1)));
        let (at, _) = del.apply_dense(&a, &b);
        assert_eq!(at.col(0), a.col(0));
        assert!(Update::<f64>::DeleteCols { k0: 2, p: 2 }
            .check(7, 3, 2)
            .is_err());
        assert!(Update::<f64>::DeleteCols { k0: 0, p: 0 }
            .check(7, 3, 2)
            .is_err());
        assert!(Update::InsertCols { k0: 4, u }.check(7, 3, 2).is_err());
    }

    #[test]
    fn dense_row_updates_and_rank_one() {
        let (a, b) = a_b();
        let u = Mat::from_fn(2, 3, |i, j| 500.0 + (i + 3 * j) as f64);
        let e = Mat::from_fn(2, 2, |i, j| 900.0 + (i + 2 * j) as f64);
        let up = Update::InsertRows {
            k0: 7,
            u: u.clone(),
            e: e.clone(),
        };
        assert_eq!(up.check(7, 3, 2), Ok((9, 3)));
        let (at, bt) = up.apply_dense(&a, &b);
        assert_eq!(at[(7, 2)], u[(0, 2)]);
        assert_eq!(bt[(8, 1)], e[(1, 1)]);
        assert_eq!(at[(6, 0)], a[(6, 0)]);
        let bad_e = Mat::from_fn(2, 1, |_, _| 1.0);
        assert!(Update::InsertRows { k0: 0, u, e: bad_e }
            .check(7, 3, 2)
            .is_err());

        let del = Update::<f64>::DeleteRows { k0: 2, p: 3 };
        let (at, bt) = del.apply_dense(&a, &b);
        assert_eq!((at.nrows(), bt.nrows()), (4, 4));
        assert_eq!(at[(2, 1)], a[(5, 1)]);
        assert_eq!(bt[(3, 0)], b[(6, 0)]);

        let r1 = Update::RankOne {
            u: vec![2.0; 7],
            v: vec![1.0, 0.0, -1.0],
        };
        assert_eq!(r1.check(7, 3, 2), Ok((7, 3)));
        let (at, _) = r1.apply_dense(&a, &b);
        assert_eq!(at[(3, 0)], a[(3, 0)] + 2.0);
        assert_eq!(at[(3, 1)], a[(3, 1)]);
        assert_eq!(at[(3, 2)], a[(3, 2)] - 2.0);
        assert!(Update::RankOne {
            u: vec![1.0; 6],
            v: vec![1.0; 3]
        }
        .check(7, 3, 2)
        .is_err());
    }

    #[test]
    fn dense_composed_updates() {
        let (a, b) = a_b();
        let u = Mat::from_fn(7, 2, |i, j| (i + j) as f64);
        let v = Mat::from_fn(3, 2, |i, j| (i * j) as f64 + 1.0);
        let rk = Update::RankK {
            u: u.clone(),
            v: v.clone(),
        };
        assert_eq!(rk.check(7, 3, 2), Ok((7, 3)));
        let (at, _) = rk.apply_dense(&a, &b);
        assert_eq!(at[(4, 2)], a[(4, 2)] + 4.0 * 1.0 + 5.0 * 3.0);
        assert!(Update::RankK {
            u: u.clone(),
            v: u.clone()
        }
        .check(7, 3, 2)
        .is_err());
        let rc = Update::ReplaceCols {
            k0: 1,
            u: u.clone(),
        };
        let (at, _) = rc.apply_dense(&a, &b);
        assert_eq!((at[(3, 0)], at[(3, 1)], at[(3, 2)]), (a[(3, 0)], 3.0, 4.0));
        assert!(Update::ReplaceCols { k0: 2, u }.check(7, 3, 2).is_err());
        let sh = Update::<f64>::ShiftCol { from: 0, to: 2 };
        let (at, _) = sh.apply_dense(&a, &b);
        assert_eq!((at[(1, 0)], at[(1, 2)]), (a[(1, 1)], a[(1, 0)]));
        assert!(Update::<f64>::ShiftCol { from: 0, to: 3 }
            .check(7, 3, 2)
            .is_err());
    }
}
