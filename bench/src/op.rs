//! The five updates that the `tall` and `cpu` groups time, by the names of their tables.

/// An update of the factorisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    InsertRows,
    DeleteRows,
    InsertCols,
    DeleteCols,
    RankOne,
}

impl Op {
    /// Every operation, in the order of the tables.
    pub(crate) const ALL: [Op; 5] = [
        Op::InsertRows,
        Op::DeleteRows,
        Op::InsertCols,
        Op::DeleteCols,
        Op::RankOne,
    ];

    /// The name used in the tables and by `--ops`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::InsertRows => "insert_rows",
            Op::DeleteRows => "delete_rows",
            Op::InsertCols => "insert_cols",
            Op::DeleteCols => "delete_cols",
            Op::RankOne => "rank_one",
        }
    }

    /// Whether the operation adds or removes rows (observations).
    pub(crate) fn is_row_op(self) -> bool {
        matches!(self, Op::InsertRows | Op::DeleteRows)
    }
}
