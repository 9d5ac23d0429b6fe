//! The pure parts of `cuqr bench tall`: the operations and state kinds, the cases
//! of one shape (where each block goes and how large it is), the bytes of Q₁ an
//! update must read and write, and the bars each row is marked against.

use cuqr::QPolicy;

pub(super) use crate::op::Op;

/// The state kind an update runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Q₁ (m×n), R (n×n), d and b.
    Thin,
    /// R and d only, with A and b kept.
    NoQ,
}

impl Kind {
    /// Every kind, in the order of the tables.
    pub(super) const ALL: [Kind; 2] = [Kind::Thin, Kind::NoQ];

    /// The name used in the tables and by `--kinds`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Thin => "thin",
            Kind::NoQ => "none",
        }
    }

    pub(super) fn policy(self) -> QPolicy {
        match self {
            Kind::Thin => QPolicy::Thin,
            Kind::NoQ => QPolicy::None,
        }
    }
}

/// Parses a comma-separated list of names (`what` names the option in errors), each
/// one of `all`'s, into that list's order without repeats.
pub(super) fn parse_names<X: Copy + PartialEq>(
    what: &str,
    v: &str,
    all: &[X],
    name: impl Fn(X) -> &'static str,
) -> Result<Vec<X>, String> {
    let mut want = Vec::new();
    for s in v.split(',').map(str::trim) {
        let Some(&x) = all.iter().find(|&&x| name(x) == s) else {
            let names: Vec<&str> = all.iter().map(|&x| name(x)).collect();
            return Err(format!(
                "--{what}: unknown '{s}' (one of {})",
                names.join(", ")
            ));
        };
        want.push(x);
    }
    Ok(all.iter().copied().filter(|x| want.contains(x)).collect())
}

/// One timed update of an m×n matrix: `op` on the block of `p` rows or columns
/// starting at `k0` (rank-one: k0 = 0, p = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Case {
    pub(super) op: Op,
    pub(super) k0: usize,
    pub(super) p: usize,
}

impl Case {
    /// Rows and columns after the update.
    pub(super) fn new_dims(&self, m: usize, n: usize) -> (usize, usize) {
        let p = self.p;
        match self.op {
            Op::InsertRows => (m + p, n),
            Op::DeleteRows => (m.saturating_sub(p), n),
            Op::InsertCols => (m, n + p),
            Op::DeleteCols => (m, n.saturating_sub(p)),
            Op::RankOne => (m, n),
        }
    }

    /// Why the update cannot run on an m×n matrix (block outside the matrix, no
    /// column left, fewer rows than columns after it), or `Ok`.
    pub(super) fn check(&self, m: usize, n: usize) -> Result<(), String> {
        let (k0, p) = (self.k0, self.p);
        let fits = match self.op {
            Op::InsertRows => k0 <= m,
            Op::DeleteRows => k0 + p <= m,
            Op::InsertCols => k0 <= n,
            Op::DeleteCols => k0 + p <= n,
            Op::RankOne => true,
        };
        if p == 0 || !fits {
            return Err(format!("block k0 = {k0}, p = {p} does not fit {m}×{n}"));
        }
        let (m2, n2) = self.new_dims(m, n);
        if n2 == 0 || m2 < n2 {
            return Err(format!("the result {m2}×{n2} is not tall (m ≥ n ≥ 1)"));
        }
        Ok(())
    }
}

/// The block sizes of a shape with n columns: a single row or column, and n/10
/// (when that is more than one).
pub(super) fn block_sizes(n: usize) -> Vec<usize> {
    let tenth = (n / 10).max(1);
    if tenth > 1 {
        vec![1, tenth]
    } else {
        vec![1]
    }
}

/// The cases of an m×n shape for `ops`: rows inserted or deleted at k0 = m/3,
/// columns at k0 = n/2, each at every [`block_sizes`]; one rank-one update.
pub(super) fn cases(m: usize, n: usize, ops: &[Op]) -> Vec<Case> {
    let mut out = Vec::new();
    for &op in ops {
        let k0 = match op {
            Op::InsertRows | Op::DeleteRows => m / 3,
            Op::InsertCols | Op::DeleteCols => n / 2,
            Op::RankOne => 0,
        };
        if op == Op::RankOne {
            out.push(Case { op, k0, p: 1 });
            continue;
        }
        out.extend(block_sizes(n).into_iter().map(|p| Case { op, k0, p }));
    }
    out
}

/// Bytes of Q₁ the update reads and writes at least: Q₁ before (m×n) and after
/// (m′×n′), `elem` bytes an entry.
pub(super) fn q1_bytes(c: &Case, m: usize, n: usize, elem: usize) -> f64 {
    let (m2, n2) = c.new_dims(m, n);
    ((m * n + m2 * n2) * elem) as f64
}

/// A bar a row is marked against: the least speed-up over the cuSOLVER baseline and,
/// for the thin kind, the least fraction of the copy bandwidth that moving Q₁ reaches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Bar {
    pub(super) min_speedup: f64,
    pub(super) min_copy_fraction: Option<f64>,
}

impl Bar {
    /// The bar as a table cell.
    pub(super) fn describe(&self) -> String {
        match self.min_copy_fraction {
            Some(f) => format!("≥{:.0}×, ≥{:.0}% copy", self.min_speedup, 100.0 * f),
            None => format!("≥{:.0}×", self.min_speedup),
        }
    }

    /// Whether a row meets the bar; `None` when a value it needs is missing.
    pub(super) fn holds(&self, speedup: Option<f64>, copy_fraction: Option<f64>) -> Option<bool> {
        let fast = speedup? >= self.min_speedup;
        match self.min_copy_fraction {
            Some(min) => Some(fast && copy_fraction? >= min),
            None => Some(fast),
        }
    }
}

/// The bar of an update with block size `p` on a state of kind `kind` with n columns:
/// the thin kind's column updates, rank-one and row updates with p ≤ n/8 must be 5×
/// the baseline and reach 60% of the copy bandwidth; every update of the R-only kind
/// must be 20× the baseline (without `orgqr`). Thin row updates with larger blocks
/// have no bar.
pub(super) fn bar(kind: Kind, op: Op, n: usize, p: usize) -> Option<Bar> {
    match kind {
        Kind::Thin if op.is_row_op() && !small_row_block(n, p) => None,
        Kind::Thin => Some(Bar {
            min_speedup: 5.0,
            min_copy_fraction: Some(0.6),
        }),
        Kind::NoQ => Some(Bar {
            min_speedup: 20.0,
            min_copy_fraction: None,
        }),
    }
}

/// Whether a row block of `p` is small enough for the thin bar: p ≤ n/8.
pub(super) fn small_row_block(n: usize, p: usize) -> bool {
    8 * p <= n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_place_the_blocks() {
        let c = cases(1_000_000, 256, &Op::ALL);
        let got: Vec<(Op, usize, usize)> = c.iter().map(|c| (c.op, c.k0, c.p)).collect();
        assert_eq!(
            got,
            [
                (Op::InsertRows, 333_333, 1),
                (Op::InsertRows, 333_333, 25),
                (Op::DeleteRows, 333_333, 1),
                (Op::DeleteRows, 333_333, 25),
                (Op::InsertCols, 128, 1),
                (Op::InsertCols, 128, 25),
                (Op::DeleteCols, 128, 1),
                (Op::DeleteCols, 128, 25),
                (Op::RankOne, 0, 1),
            ]
        );
        assert!(c.iter().all(|c| c.check(1_000_000, 256).is_ok()));
        // n < 20: n/10 ≤ 1, a single block size
        assert_eq!(block_sizes(19), [1]);
        assert_eq!(block_sizes(2048), [1, 204]);
        assert_eq!(cases(100, 8, &[Op::DeleteCols, Op::RankOne]).len(), 2);
    }

    #[test]
    fn impossible_cases_say_why() {
        let ins = Case {
            op: Op::InsertCols,
            k0: 2,
            p: 2,
        };
        assert_eq!(ins.new_dims(5, 4), (5, 6));
        assert!(ins.check(5, 4).unwrap_err().contains("not tall"));
        assert!(ins.check(6, 4).is_ok());
        let del = Case {
            op: Op::DeleteRows,
            k0: 3,
            p: 4,
        };
        assert!(del.check(6, 2).unwrap_err().contains("does not fit"));
        assert!(del.check(7, 3).is_ok());
        assert!(del.check(7, 4).is_err());
        let last = Case {
            op: Op::DeleteCols,
            k0: 0,
            p: 1,
        };
        assert!(last.check(5, 1).is_err());
    }

    #[test]
    fn q1_bytes_count_before_and_after() {
        let (m, n) = (1000, 40);
        let c = |op, p| Case { op, k0: 0, p };
        // (m·n + m′·n′)·8
        assert_eq!(
            q1_bytes(&c(Op::InsertRows, 4), m, n, 8),
            8.0 * (40_000.0 + 40_160.0)
        );
        assert_eq!(
            q1_bytes(&c(Op::DeleteRows, 4), m, n, 8),
            8.0 * (40_000.0 + 39_840.0)
        );
        assert_eq!(
            q1_bytes(&c(Op::InsertCols, 4), m, n, 4),
            4.0 * (40_000.0 + 44_000.0)
        );
        assert_eq!(
            q1_bytes(&c(Op::DeleteCols, 4), m, n, 4),
            4.0 * (40_000.0 + 36_000.0)
        );
        assert_eq!(q1_bytes(&c(Op::RankOne, 1), m, n, 8), 8.0 * 80_000.0);
    }

    #[test]
    fn bars_by_kind_operation_and_block() {
        let thin = bar(Kind::Thin, Op::DeleteCols, 256, 25).unwrap();
        assert_eq!(thin.min_speedup, 5.0);
        assert_eq!(thin.min_copy_fraction, Some(0.6));
        // row blocks: n/10 ≤ n/8 keeps the bar, a larger block has none
        assert!(small_row_block(256, 25) && small_row_block(256, 32));
        assert!(!small_row_block(256, 33));
        assert_eq!(bar(Kind::Thin, Op::InsertRows, 256, 25), Some(thin));
        assert_eq!(bar(Kind::Thin, Op::DeleteRows, 256, 33), None);
        assert_eq!(bar(Kind::Thin, Op::InsertCols, 256, 200), Some(thin));
        let none = bar(Kind::NoQ, Op::DeleteRows, 256, 200).unwrap();
        assert_eq!((none.min_speedup, none.min_copy_fraction), (20.0, None));
        // the verdicts
        assert_eq!(thin.holds(Some(5.0), Some(0.6)), Some(true));
        assert_eq!(thin.holds(Some(4.9), Some(0.9)), Some(false));
        assert_eq!(thin.holds(Some(9.0), Some(0.59)), Some(false));
        assert_eq!(thin.holds(Some(9.0), None), None);
        assert_eq!(thin.holds(None, Some(0.9)), None);
        assert_eq!(none.holds(Some(20.0), None), Some(true));
        assert_eq!(none.holds(Some(19.9), Some(1.0)), Some(false));
        assert_eq!(thin.describe(), "≥5×, ≥60% copy");
        assert_eq!(none.describe(), "≥20×");
    }

    #[test]
    fn names_parse_in_table_order() {
        let ops = parse_names("ops", "rank_one, insert_rows", &Op::ALL, Op::name).unwrap();
        assert_eq!(ops, [Op::InsertRows, Op::RankOne]);
        let kinds = parse_names("kinds", "none,thin,none", &Kind::ALL, Kind::name).unwrap();
        assert_eq!(kinds, [Kind::Thin, Kind::NoQ]);
        assert!(parse_names("kinds", "full", &Kind::ALL, Kind::name)
            .unwrap_err()
            .contains("--kinds: unknown 'full'"));
        assert_eq!(Kind::NoQ.policy(), QPolicy::None);
    }
}
