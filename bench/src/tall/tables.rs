//! The rows of `cuqr bench tall`: what was measured, the figures derived from it
//! (speed-up, bytes of Q₁ and the rate of moving them, the bar and its verdict), and
//! the table and CSV lines.

use super::cases::{bar, q1_bytes, small_row_block, Kind};
use super::row::{Cell, Row};
use crate::common::fmt_opt;

/// The figures a row's cells show.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Figures {
    pub(super) speedup: Option<f64>,
    /// Bytes of Q₁ read and written (thin kind).
    pub(super) q1_bytes: Option<f64>,
    /// Those bytes over cuqr's time, GB/s.
    pub(super) q1_gbs: Option<f64>,
    /// That rate over the copy bandwidth.
    pub(super) copy_fraction: Option<f64>,
    /// The roofline time: those bytes at the copy bandwidth, ms.
    pub(super) roofline_ms: Option<f64>,
    /// The bar's cell.
    pub(super) bar: String,
    /// holds / misses, or "–" without a bar or a value it needs.
    pub(super) verdict: &'static str,
}

impl Row {
    /// The derived figures, with `elem` bytes an entry and the copy bandwidth in GB/s.
    pub(super) fn figures(&self, elem: usize, copy_gbs: Option<f64>) -> Figures {
        let cuqr = self.cuqr_ms.as_ref().ok().copied();
        let base = self.cusolver_ms.as_ref().ok().copied();
        let speedup = base.zip(cuqr).map(|(b, t)| b / t).filter(|s| s.is_finite());
        let thin = self.kind == Kind::Thin;
        let bytes = thin.then(|| q1_bytes(&self.case, self.m, self.n, elem));
        let gbs = bytes
            .zip(cuqr)
            .map(|(b, t)| b / (t * 1e6))
            .filter(|r| r.is_finite());
        let copy_fraction = gbs.zip(copy_gbs).map(|(g, c)| g / c);
        let roofline_ms = bytes.zip(copy_gbs).map(|(b, c)| b / (c * 1e6));
        let (op, p) = (self.case.op, self.case.p);
        let b = bar(self.kind, op, self.n, p);
        let bar_cell = match (b, thin && op.is_row_op()) {
            (None, _) => "none (p > n/8)".to_string(),
            (Some(b), true) if small_row_block(self.n, p) => format!("{} (p ≤ n/8)", b.describe()),
            (Some(b), _) => b.describe(),
        };
        let verdict = match b.and_then(|b| b.holds(speedup, copy_fraction)) {
            Some(true) => "holds",
            Some(false) => "misses",
            None => "–",
        };
        Figures {
            speedup,
            q1_bytes: bytes,
            q1_gbs: gbs,
            copy_fraction,
            roofline_ms,
            bar: bar_cell,
            verdict,
        }
    }

    /// Why a time is missing, for the note cell ("" when both were measured).
    fn note(&self) -> String {
        let mut why = Vec::new();
        if let Err(e) = &self.cuqr_ms {
            why.push(format!("cuqr: {e}"));
        }
        if let Err(e) = &self.cusolver_ms {
            why.push(format!("cuSOLVER: {e}"));
        }
        if !self.stages.is_empty() {
            let parts: Vec<String> = self
                .stages
                .iter()
                .map(|(name, ms)| format!("{name} {ms:.2}"))
                .collect();
            why.push(format!("stages (ms): {}", parts.join(", ")));
        }
        why.join("; ")
    }
}

/// The table's header (markdown).
pub(super) const TABLE_HEAD: &str = "| shape | kind | op | k0 | p | cuqr ms | cuSOLVER ms | speed-up | Q₁ GB | GB/s | % of copy | roofline ms | bar | verdict | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

fn ms_cell(c: &Cell) -> String {
    c.as_ref()
        .map_or("n/a".to_string(), |ms| format!("{ms:.3}"))
}

/// The cells that name a row's case: m, n, kind, op, k0, p.
fn key(r: &Row) -> [String; 6] {
    [
        r.m.to_string(),
        r.n.to_string(),
        r.kind.name().to_string(),
        r.case.op.name().to_string(),
        r.case.k0.to_string(),
        r.case.p.to_string(),
    ]
}

/// A row of the table.
pub(super) fn table_row(r: &Row, elem: usize, copy_gbs: Option<f64>) -> String {
    let f = r.figures(elem, copy_gbs);
    let [m, n, rest @ ..] = key(r);
    format!(
        "| {m}×{n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        rest.join(" | "),
        ms_cell(&r.cuqr_ms),
        ms_cell(&r.cusolver_ms),
        fmt_opt(f.speedup, 2),
        fmt_opt(f.q1_bytes.map(|b| b / 1e9), 3),
        fmt_opt(f.q1_gbs, 0),
        fmt_opt(f.copy_fraction.map(|x| 100.0 * x), 1),
        fmt_opt(f.roofline_ms, 3),
        f.bar,
        f.verdict,
        r.note().replace('|', "/"),
    )
}

/// The CSV header.
pub(super) const CSV_HEAD: &str = "prec,m,n,kind,op,k0,p,cuqr_ms,cusolver_ms,baseline,speedup,q1_bytes,q1_gbs,copy_gbs,copy_fraction,roofline_ms,bar,verdict,note";

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A row of the CSV.
pub(super) fn csv_row(prec: &str, r: &Row, elem: usize, copy_gbs: Option<f64>) -> String {
    let f = r.figures(elem, copy_gbs);
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let baseline = match r.kind {
        Kind::Thin => "geqrf+ormqr+trsm+orgqr",
        Kind::NoQ => "geqrf+ormqr+trsm",
    };
    format!(
        "{prec},{},{},{},{baseline},{},{},{},{},{},{},{},{},{}",
        key(r).join(","),
        o(r.cuqr_ms.as_ref().ok().copied()),
        o(r.cusolver_ms.as_ref().ok().copied()),
        o(f.speedup),
        o(f.q1_bytes),
        o(f.q1_gbs),
        o(copy_gbs),
        o(f.copy_fraction),
        o(f.roofline_ms),
        csv_field(&f.bar),
        f.verdict,
        csv_field(&r.note()),
    )
}

#[cfg(test)]
mod tests {
    use super::super::cases::{Case, Op};
    use super::*;

    fn row(kind: Kind, op: Op, p: usize, cuqr: Cell, base: Cell) -> Row {
        Row {
            m: 1000,
            n: 80,
            kind,
            case: Case { op, k0: 40, p },
            cuqr_ms: cuqr,
            cusolver_ms: base,
            stages: Vec::new(),
        }
    }

    #[test]
    fn figures_and_verdicts() {
        // thin column deletion of 8: Q₁ (1000·80 + 1000·72)·8 bytes = 1.216 MB in
        // 0.001 ms = 1216 GB/s; copy at 2000 GB/s: 60.8 %; 10× the baseline
        let r = row(Kind::Thin, Op::DeleteCols, 8, Ok(0.001), Ok(0.01));
        let f = r.figures(8, Some(2000.0));
        assert_eq!(f.q1_bytes, Some(1_216_000.0));
        assert!((f.q1_gbs.unwrap() - 1216.0).abs() < 1e-9);
        assert!((f.copy_fraction.unwrap() - 0.608).abs() < 1e-12);
        // 1.216 MB at 2000 GB/s: 0.000608 ms
        assert!((f.roofline_ms.unwrap() - 0.000608).abs() < 1e-15);
        assert!((f.speedup.unwrap() - 10.0).abs() < 1e-12);
        assert_eq!(f.verdict, "holds");
        // below 60 % of the copy bandwidth: misses whatever the speed-up
        assert_eq!(r.figures(8, Some(2100.0)).verdict, "misses");
        // without the copy bandwidth the thin verdict is open
        assert_eq!(r.figures(8, None).verdict, "–");
        // the R-only kind: speed-up only, no bytes of Q₁
        let r = row(Kind::NoQ, Op::DeleteRows, 8, Ok(0.5), Ok(9.0));
        let f = r.figures(8, Some(2000.0));
        assert_eq!(
            (f.q1_bytes, f.copy_fraction, f.roofline_ms),
            (None, None, None)
        );
        assert_eq!((f.bar.as_str(), f.verdict), ("≥20×", "misses"));
        let r = row(Kind::NoQ, Op::DeleteRows, 8, Ok(0.45), Ok(9.0));
        assert_eq!(r.figures(8, None).verdict, "holds");
        // thin row blocks: p = 10 ≤ n/8 has the bar, p = 11 none
        let r = row(Kind::Thin, Op::InsertRows, 10, Ok(1.0), Ok(9.0));
        assert_eq!(r.figures(4, None).bar, "≥5×, ≥60% copy (p ≤ n/8)");
        let r = row(Kind::Thin, Op::InsertRows, 11, Ok(1.0), Ok(9.0));
        let f = r.figures(4, Some(1.0));
        assert_eq!((f.bar.as_str(), f.verdict), ("none (p > n/8)", "–"));
    }

    #[test]
    fn missing_times_print_n_a_with_the_reason() {
        let r = row(
            Kind::Thin,
            Op::RankOne,
            1,
            Err("factorize: not available".into()),
            Ok(2.0),
        );
        let line = table_row(&r, 8, Some(2000.0));
        let cells = |l: &str| l.trim_matches('|').split(" | ").count();
        assert_eq!(cells(&line), cells(TABLE_HEAD.lines().next().unwrap()));
        assert!(line.contains("| n/a | 2.000 | – |"), "{line}");
        assert!(
            line.ends_with("| – | cuqr: factorize: not available |"),
            "{line}"
        );
        let csv = csv_row("f64", &r, 8, Some(2000.0));
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count() + 1);
        assert!(
            csv.starts_with("f64,1000,80,thin,rank_one,40,1,,2,geqrf+ormqr+trsm+orgqr,"),
            "{csv}"
        );
        assert!(
            csv.ends_with(",\"≥5×, ≥60% copy\",–,cuqr: factorize: not available"),
            "{csv}"
        );
        assert_eq!(csv_field("a\"b,c"), "\"a\"\"b,c\"");
    }

    #[test]
    fn stages_go_to_the_note() {
        let mut r = row(Kind::Thin, Op::DeleteRows, 1, Ok(2.0), Ok(20.0));
        assert_eq!(r.note(), "");
        r.stages = vec![("small side", 0.25), ("GEMM", 1.5)];
        assert_eq!(r.note(), "stages (ms): small side 0.25, GEMM 1.50");
        r.cuqr_ms = Err("out of memory".into());
        assert!(r.note().starts_with("cuqr: out of memory; stages"));
    }
}
