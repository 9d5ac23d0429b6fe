//! The random calls of the sequence test: operands with special values, verbs that fit
//! the state's shape, and the update options they run under.

use super::*;
use cuqr::{ColumnStrip, DriftParams, Givens, RowRemoval};

/// A uniform(−1, 1) value, never zero.
pub(super) fn value(g: &mut StdRng) -> f64 {
    loop {
        let x: f64 = g.random_range(-1.0..1.0);
        if x.abs() > 1e-3 {
            return x;
        }
    }
}

/// Entries that must be refused or that strain the arithmetic.
pub(super) const SPECIALS: [f64; 9] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e300,
    -1e300,
    3e38,
    1e-310,
    1e-40,
    0.0,
];

/// The random part of one call: whether its shape or positions are off, and which special
/// value (if any) one of its entries takes.
pub(super) struct Spice {
    bad: bool,
    special: Option<f64>,
}

impl Spice {
    fn draw(g: &mut StdRng) -> Self {
        Self {
            bad: g.random_bool(0.2),
            special: g
                .random_bool(0.1)
                .then(|| SPECIALS[g.random_range(0..SPECIALS.len())]),
        }
    }
    /// A position in 0..=max, or when bad one past it or at the overflow edge.
    fn pos(&self, g: &mut StdRng, max: usize) -> usize {
        if self.bad && g.random_bool(0.5) {
            [max + 1, max + 2, usize::MAX, usize::MAX / 2 + 1][g.random_range(0..4)]
        } else {
            g.random_range(0..=max)
        }
    }
    /// A count in lo..=hi (hi ≥ lo), or when bad 0, one past or at the overflow edge.
    fn count(&self, g: &mut StdRng, lo: usize, hi: usize) -> usize {
        if self.bad && g.random_bool(0.5) {
            [0, hi + 1, usize::MAX, usize::MAX - 1][g.random_range(0..4)]
        } else {
            g.random_range(lo..=hi.max(lo))
        }
    }
    /// A dimension that should be `want`, or when bad one off or 0.
    fn dim(&self, g: &mut StdRng, want: usize) -> usize {
        if self.bad && g.random_bool(0.3) {
            [want + 1, want.saturating_sub(1), 0][g.random_range(0..3)]
        } else {
            want
        }
    }
    /// A random rows×cols operand with the special value at a random entry.
    fn operand<T: Scalar>(&self, g: &mut StdRng, rows: usize, cols: usize) -> Operand<T> {
        let pad = [0, 0, 1, 3][g.random_range(0..4)];
        let mut o = Operand::from_fn(rows, cols, pad, |_, _| T::from_f64(value(g)));
        self.poke_operand(g, &mut o);
        o
    }
    /// [`Spice::operand`] with each dimension passed through [`Spice::dim`].
    fn operand_near<T: Scalar>(&self, g: &mut StdRng, rows: usize, cols: usize) -> Operand<T> {
        let (r, c) = (self.dim(g, rows), self.dim(g, cols));
        self.operand(g, r, c)
    }
    /// [`Spice::vector`] with the length passed through [`Spice::dim`].
    fn vector_near<T: Scalar>(&self, g: &mut StdRng, len: usize) -> Vec<T> {
        let l = self.dim(g, len);
        self.vector(g, l)
    }
    fn poke_operand<T: Scalar>(&self, g: &mut StdRng, o: &mut Operand<T>) {
        if let (Some(s), true) = (self.special, o.rows * o.cols > 0) {
            let (i, j) = (g.random_range(0..o.rows), g.random_range(0..o.cols));
            o.data[i + j * o.ld] = T::from_f64(s);
        }
    }
    fn vector<T: Scalar>(&self, g: &mut StdRng, len: usize) -> Vec<T> {
        let mut v: Vec<T> = (0..len).map(|_| T::from_f64(value(g))).collect();
        if let (Some(s), true) = (self.special, len > 0) {
            v[g.random_range(0..len)] = T::from_f64(s);
        }
        v
    }
}

/// Verbs that add rows or columns are drawn only while there is room, those that remove
/// them only while m ≥ n + 3 (rows) or n ≥ 2 (columns).
pub(super) fn verb_fits(verb: usize, m: usize, n: usize) -> bool {
    match verb {
        0 | 1 => n < MAX_N && n + 1 < m,
        2 | 3 => n >= 2,
        4 | 5 | 13 => m < MAX_M,
        6..=8 => m >= n + 3,
        _ => true,
    }
}

/// Draws one call for a state whose A is `md.a`.
pub(super) fn random_call<T: Scalar>(g: &mut StdRng, md: &Model) -> Call<T> {
    let (m, n, q) = md.dims();
    let sp = Spice::draw(g);
    let verb = loop {
        let v = g.random_range(0..17);
        if verb_fits(v, m, n) {
            break v;
        }
    };
    match verb {
        0 => insert_cols_call(g, md, &sp),
        1 => Call::InsertCol {
            k0: sp.pos(g, n),
            u: sp.vector_near(g, m),
        },
        2 => {
            let p = sp.count(g, 1, (n - 1).min(3));
            Call::DeleteCols {
                k0: sp.pos(g, n.saturating_sub(p)),
                p,
            }
        }
        3 => Call::DeleteCol {
            k0: sp.pos(g, n.saturating_sub(1)),
        },
        4 => {
            let p = sp.count(g, 1, (MAX_M - m).min(3)).min(5);
            let pu = sp.dim(g, p);
            Call::InsertRows {
                k0: sp.pos(g, m),
                u: sp.operand_near(g, pu, n),
                e: sp.operand_near(g, pu, q),
            }
        }
        5 => Call::InsertRow {
            k0: sp.pos(g, m),
            u: sp.vector_near(g, n),
            e: sp.vector_near(g, q),
        },
        6 => {
            let p = sp.count(g, 1, (m - n - 2).min(3));
            Call::DeleteRows {
                k0: sp.pos(g, m.saturating_sub(p)),
                p,
            }
        }
        7 => Call::DeleteRow {
            k0: sp.pos(g, m - 1),
        },
        8 => delete_rows_with_call(g, md, &sp),
        9 => Call::RankOne {
            u: sp.vector_near(g, m),
            v: sp.vector_near(g, n),
        },
        10 => rank_k_call(g, md, &sp),
        11 => replace_cols_call(g, md, &sp),
        12 => Call::ShiftCol {
            from: sp.pos(g, n.saturating_sub(1)),
            to: sp.pos(g, n.saturating_sub(1)),
        },
        13 => slide_call(g, md, &sp),
        14 => Call::SetParams(random_params(g)),
        15 => Call::CheckDrift,
        _ => Call::Solve,
    }
}

pub(super) fn insert_cols_call<T: Scalar>(g: &mut StdRng, md: &Model, sp: &Spice) -> Call<T> {
    let (m, n, _) = md.dims();
    let room = (MAX_N - n).min(m - n - 1).clamp(1, 3);
    let p = sp.count(g, 1, room).min(m + 2);
    let mut u = sp.operand_near::<T>(g, m, p);
    // sometimes a copy of a column of A: a numerically dependent block
    if g.random_bool(0.05) && u.rows == m && u.cols > 0 {
        let j = g.random_range(0..n);
        for i in 0..m {
            u.data[i] = T::from_f64(md.a[(i, j)]);
        }
        u.note = Some(format!("column 0 copies column {j} of A"));
    }
    Call::InsertCols {
        k0: sp.pos(g, n),
        u,
    }
}

pub(super) fn delete_rows_with_call<T: Scalar>(g: &mut StdRng, md: &Model, sp: &Spice) -> Call<T> {
    let (m, n, q) = md.dims();
    let p = sp.count(g, 1, (m - n - 2).min(3)).min(m + 2);
    let k0 = sp.pos(g, m.saturating_sub(p));
    let (rc, qc) = (sp.dim(g, n), sp.dim(g, q));
    // the rows that leave, as an R-only state without its data needs them
    let take = |x: &faer::Mat<f64>, i: usize, j: usize| match k0.checked_add(i) {
        Some(r) if r < x.nrows() && j < x.ncols() => T::from_f64(x[(r, j)]),
        _ => T::from_f64(0.5),
    };
    let mut rows = Operand::from_fn(p, rc, g.random_range(0..2), |i, j| take(&md.a, i, j));
    let mut rhs = Operand::from_fn(sp.dim(g, p), qc, 0, |i, j| take(&md.b, i, j));
    // only a non-finite entry: an R-only state without its data downdates with these rows,
    // so any finite change would make them rows that A does not hold
    if sp.special.is_some_and(|x| !x.is_finite()) {
        sp.poke_operand(g, &mut rows);
        if g.random_bool(0.3) {
            sp.poke_operand(g, &mut rhs);
        }
    }
    Call::DeleteRowsWith { k0, rows, rhs }
}

pub(super) fn rank_k_call<T: Scalar>(g: &mut StdRng, md: &Model, sp: &Spice) -> Call<T> {
    let (m, n, _) = md.dims();
    let k = sp.count(g, 1, 3).min(5);
    Call::RankK {
        u: sp.operand_near(g, m, k),
        v: sp.operand_near(g, n, k),
    }
}

pub(super) fn replace_cols_call<T: Scalar>(g: &mut StdRng, md: &Model, sp: &Spice) -> Call<T> {
    let (m, n, _) = md.dims();
    let p = sp.count(g, 1, n.min(3)).min(n + 2);
    let k0 = sp.pos(g, n.saturating_sub(p));
    let mut u = sp.operand_near::<T>(g, m, p);
    // sometimes a copy of a column that stays: a numerically dependent A
    let stays: Vec<usize> = (0..n)
        .filter(|&j| j < k0 || j >= k0.saturating_add(p))
        .collect();
    if g.random_bool(0.05) && u.rows == m && u.cols > 0 && !stays.is_empty() {
        let j = stays[g.random_range(0..stays.len())];
        for i in 0..m {
            u.data[i] = T::from_f64(md.a[(i, j)]);
        }
        u.note = Some(format!("column 0 copies column {j} of A"));
    }
    Call::ReplaceCols { k0, u }
}

pub(super) fn slide_call<T: Scalar>(g: &mut StdRng, md: &Model, sp: &Spice) -> Call<T> {
    let (m, n, q) = md.dims();
    let p = g.random_range(0..=(MAX_M - m).min(3) + 1).min(3);
    let drop = if sp.bad && g.random_bool(0.3) {
        [m + 1, usize::MAX, m][g.random_range(0..3)]
    } else {
        let lo = usize::from(p == 0);
        g.random_range(lo..=(m + p).saturating_sub(n + 2).clamp(lo, 3))
    };
    let forget = if sp.bad && g.random_bool(0.4) {
        [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY, 1e-300][g.random_range(0..6)]
    } else {
        [1.0, 1.0, 0.9, 0.5][g.random_range(0..4)]
    };
    let pr = sp.dim(g, p);
    Call::Slide {
        rows: sp.operand_near(g, pr, n),
        rhs: sp.operand_near(g, pr, q),
        drop,
        forget,
    }
}

pub(super) fn random_params(g: &mut StdRng) -> UpdateParams {
    let givens = [Givens::TwoPhase, Givens::Wavefront][g.random_range(0..2)];
    let row_removal = [
        RowRemoval::Auto,
        RowRemoval::TwoPhase,
        RowRemoval::Composite,
        RowRemoval::SeparateStreams,
        RowRemoval::Refactorise,
    ][g.random_range(0..5)];
    let column_strip = [
        ColumnStrip::Auto,
        ColumnStrip::Givens,
        ColumnStrip::Householder,
    ][g.random_range(0..3)];
    let block_size = [
        None,
        None,
        Some(1),
        Some(2),
        Some(8),
        Some(0),
        Some(usize::MAX),
    ][g.random_range(0..7)];
    let drift = DriftParams {
        check_every: [0, 1, 7, 32][g.random_range(0..4)],
        tol: [
            None,
            None,
            Some(0.0),
            Some(1e-300),
            Some(f64::NAN),
            Some(-1.0),
        ][g.random_range(0..6)],
        refresh: g.random_bool(0.7),
    };
    UpdateParams {
        givens,
        row_removal,
        block_size,
        column_strip,
        drift,
        ..UpdateParams::default()
    }
}
