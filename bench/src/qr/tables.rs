//! The printed rows of `cuqr bench qr`: the main table, the phase split and the CSV,
//! with the flop counts their rates use.

use super::measure::Row;
use super::Shape;
use crate::common::{fmt_opt, ratio};

/// Flops of the factorisation (LAPACK `geqrf` count).
fn qr_flops(m: usize, n: usize) -> f64 {
    let (m, n) = (m as f64, n as f64);
    2.0 * m * n * n - 2.0 * n * n * n / 3.0
}

/// Flops of forming the m×m Q from n reflectors (LAPACK `orgqr` count, k = n).
fn q_flops(m: usize, n: usize) -> f64 {
    let (m, n) = (m as f64, n as f64);
    4.0 * m * m * n - 4.0 * m * n * n + 4.0 * n * n * n / 3.0
}

fn gflops(flops: f64, ms: Option<f64>) -> Option<f64> {
    ms.filter(|&t| t > 0.0).map(|t| flops / (t * 1e6))
}

/// The Q phase: (cuqr with Q) − (cuqr without Q), when positive.
fn q_phase(r: &Row) -> Option<f64> {
    Some(r.cuqr_q_ms? - r.cuqr_ms?).filter(|&d| d > 0.0)
}

fn accuracy_cell(r: &Row, m: usize, u: f64) -> String {
    let mu = m as f64 * u;
    let verdict = |p: bool| if p { "pass" } else { "FAIL" };
    match (r.pass(m, u), r.res.is_some() && r.orth.is_some(), r.gram) {
        (None, _, _) => "–".to_string(),
        (Some(p), true, _) => format!("{} (vs m·u = {mu:.1e})", verdict(p)),
        (Some(p), false, g) => format!(
            "{} (no Q: ‖RᵀR−AᵀA‖/‖A‖² = {} vs 2m·u = {:.1e})",
            verdict(p),
            g.map_or("–".to_string(), |g| format!("{g:.1e}")),
            2.0 * mu
        ),
    }
}

pub(super) const TABLE_HEAD: &str = "| prec | shape | m | n | cuqr ms | launches | geqrf ms | geqrf/cuqr | cuqr GFLOP/s | geqrf GFLOP/s | cuqr+Q ms | launches +Q | geqrf+orgqr ms | (geqrf+orgqr)/(cuqr+Q) | cuqr+Q GFLOP/s | Q phase ms | Q phase GFLOP/s | ‖QR−A‖/‖A‖ | ‖QᵀQ−I‖ | cuSOLVER ‖QᵀQ−I‖ | R zero below diag | accuracy |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

pub(super) const CSV_HEAD: &str = "prec,shape,m,n,cuqr_ms,cuqr_launches,geqrf_ms,geqrf_over_cuqr,cuqr_gflops,geqrf_gflops,cuqr_q_ms,cuqr_q_launches,geqrf_orgqr_ms,geqrf_orgqr_over_cuqr_q,cuqr_q_gflops,q_phase_ms,q_phase_gflops,qr_residual,orthogonality,orthogonality_cusolver,gram_error,r_lower_zero,m_u,accuracy_pass,split_with_q,split_total_ms,split_panel_ms,split_panel_flops,split_trailing_ms,split_trailing_flops,split_rhs_ms,split_rank_ms,split_q_ms";

pub(super) fn table_row(prec: &str, sh: &Shape, r: &Row, u: f64) -> String {
    let (f, fq) = (qr_flops(sh.m, sh.n), q_flops(sh.m, sh.n));
    let l = |x: Option<u64>| x.map_or("–".to_string(), |v| v.to_string());
    format!(
        "| {prec} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        sh.family,
        sh.m,
        sh.n,
        fmt_opt(r.cuqr_ms, 3),
        l(r.cuqr_launches),
        fmt_opt(r.geqrf_ms, 3),
        fmt_opt(ratio(r.geqrf_ms, r.cuqr_ms), 2),
        fmt_opt(gflops(f, r.cuqr_ms), 0),
        fmt_opt(gflops(f, r.geqrf_ms), 0),
        fmt_opt(r.cuqr_q_ms, 3),
        l(r.cuqr_q_launches),
        fmt_opt(r.orgqr_ms, 3),
        fmt_opt(ratio(r.orgqr_ms, r.cuqr_q_ms), 2),
        fmt_opt(gflops(f + fq, r.cuqr_q_ms), 0),
        fmt_opt(q_phase(r), 3),
        fmt_opt(gflops(fq, q_phase(r)), 0),
        r.res.map_or("–".into(), |x| format!("{x:.1e}")),
        r.orth.map_or("–".into(), |x| format!("{x:.1e}")),
        r.orth_cusolver.map_or("–".into(), |x| format!("{x:.1e}")),
        r.zeros.map_or("–", |z| if z { "yes" } else { "NO" }),
        accuracy_cell(r, sh.m, u),
    )
}

pub(super) const PHASE_HEAD: &str = "| prec | shape | m | n | Q | total ms | panel ms | panel % | panel GFLOP/s | trailing ms | trailing % | trailing GFLOP/s | d ms | rank check ms | Q ms | Q % | Q GFLOP/s | other ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// A row of the phase-split table (Kerr et al.'s phases), when the shape has one.
pub(super) fn phase_row(prec: &str, sh: &Shape, r: &Row) -> Option<String> {
    let (t, with_q) = r.phases?;
    let pct = |x: f64| format!("{:.0}", 100.0 * x / t.total_ms);
    let q_ms = with_q.then_some(t.q_ms);
    let other = t.total_ms - (t.panel_ms + t.trailing_ms + t.rhs_ms + t.rank_ms + t.q_ms);
    Some(format!(
        "| {prec} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {:.3} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {:.3} |",
        sh.family,
        sh.m,
        sh.n,
        if with_q { "m×m" } else { "none" },
        t.total_ms,
        t.panel_ms,
        pct(t.panel_ms),
        fmt_opt(gflops(t.panel_flops, Some(t.panel_ms)), 0),
        t.trailing_ms,
        pct(t.trailing_ms),
        fmt_opt(gflops(t.trailing_flops, Some(t.trailing_ms)), 0),
        t.rhs_ms,
        t.rank_ms,
        fmt_opt(q_ms, 3),
        q_ms.map_or("–".to_string(), pct),
        fmt_opt(gflops(q_flops(sh.m, sh.n), q_ms), 0),
        other,
    ))
}

pub(super) fn csv_row(prec: &str, sh: &Shape, r: &Row, u: f64) -> String {
    let (f, fq) = (qr_flops(sh.m, sh.n), q_flops(sh.m, sh.n));
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let l = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
    let split = match r.phases {
        Some((t, with_q)) => format!(
            "{with_q},{},{},{},{},{},{},{},{}",
            t.total_ms,
            t.panel_ms,
            t.panel_flops,
            t.trailing_ms,
            t.trailing_flops,
            t.rhs_ms,
            t.rank_ms,
            if with_q {
                t.q_ms.to_string()
            } else {
                String::new()
            }
        ),
        None => ",,,,,,,,".to_string(),
    };
    format!(
        "{prec},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{split}",
        sh.family,
        sh.m,
        sh.n,
        o(r.cuqr_ms),
        l(r.cuqr_launches),
        o(r.geqrf_ms),
        o(ratio(r.geqrf_ms, r.cuqr_ms)),
        o(gflops(f, r.cuqr_ms)),
        o(gflops(f, r.geqrf_ms)),
        o(r.cuqr_q_ms),
        l(r.cuqr_q_launches),
        o(r.orgqr_ms),
        o(ratio(r.orgqr_ms, r.cuqr_q_ms)),
        o(gflops(f + fq, r.cuqr_q_ms)),
        o(q_phase(r)),
        o(gflops(fq, q_phase(r))),
        o(r.res),
        o(r.orth),
        o(r.orth_cusolver),
        o(r.gram),
        r.zeros.map_or(String::new(), |z| z.to_string()),
        sh.m as f64 * u,
        r.pass(sh.m, u).map_or(String::new(), |p| p.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr::internals::gpu::QrPhaseTimes;
    use cuqr::Scalar;
    #[test]
    fn flop_counts_match_lapack() {
        // square n: geqrf 4n³/3, orgqr (n×n, k = n) 4n³/3
        let n = 300usize;
        let c = (n as f64).powi(3);
        assert!((qr_flops(n, n) - 4.0 * c / 3.0).abs() < 1e-6 * c);
        assert!((q_flops(n, n) - 4.0 * c / 3.0).abs() < 1e-6 * c);
        // m ≫ n: 2mn² and 4m²n lead
        let (m, n) = (1 << 20, 32);
        assert!((qr_flops(m, n) / (2.0 * m as f64 * (n * n) as f64) - 1.0).abs() < 1e-3);
        assert!((q_flops(m, n) / (4.0 * (m as f64).powi(2) * n as f64) - 1.0).abs() < 1e-3);
    }

    #[test]
    fn rows_match_headers() {
        let sh = Shape {
            family: "kerr",
            m: 2048,
            n: 1024,
        };
        let r = Row {
            cuqr_ms: Some(2.0),
            cuqr_launches: Some(40),
            geqrf_ms: Some(3.0),
            cuqr_q_ms: Some(5.0),
            orgqr_ms: Some(6.0),
            res: Some(1e-15),
            orth: Some(1e-15),
            orth_cusolver: Some(2e-15),
            zeros: Some(true),
            ..Row::default()
        };
        let u = f64::UNIT_ROUNDOFF;
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let row = table_row("f64", &sh, &r, u);
        assert_eq!(cells(&row), cells(TABLE_HEAD.lines().next().unwrap()));
        assert!(
            row.contains("| 1.50 |") && row.contains("| 3.000 |"),
            "{row}"
        );
        let csv = csv_row("f64", &sh, &r, u);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        // the accuracy verdict, then nine empty phase-split cells
        assert!(csv.ends_with(",true,,,,,,,,,"), "{csv}");
        // the Q phase is the difference of the medians, absent when not positive
        assert_eq!(q_phase(&r), Some(3.0));
        let neg = Row {
            cuqr_q_ms: Some(1.0),
            ..r.clone()
        };
        assert_eq!(q_phase(&neg), None);
        // the phase split: a row only with a profiled run, as many cells as the head
        assert_eq!(phase_row("f64", &sh, &r), None);
        let t = QrPhaseTimes {
            panel_ms: 1.0,
            trailing_ms: 2.0,
            rhs_ms: 0.1,
            rank_ms: 0.2,
            q_ms: 3.0,
            total_ms: 8.0,
            panel_flops: 1e9,
            trailing_flops: 4e10,
        };
        let with = Row {
            phases: Some((t, true)),
            ..Row::default()
        };
        let line = phase_row("f64", &sh, &with).unwrap();
        assert_eq!(cells(&line), cells(PHASE_HEAD.lines().next().unwrap()));
        // panel 1e9 flops in 1 ms = 1000 GFLOP/s, 12.5 % of the total; other = 1.7 ms
        assert!(
            line.contains("| 1000 |") && line.contains("| 1.700 |"),
            "{line}"
        );
        let csv = csv_row("f64", &sh, &with, u);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        assert!(
            csv.ends_with(",true,8,1,1000000000,2,40000000000,0.1,0.2,3"),
            "{csv}"
        );
    }

    #[test]
    fn verdict_needs_every_criterion() {
        let u = f64::UNIT_ROUNDOFF;
        let m = 1000;
        let ok = Row {
            res: Some(1e-15),
            orth: Some(1e-15),
            zeros: Some(true),
            ..Row::default()
        };
        assert_eq!(ok.pass(m, u), Some(true));
        let bad_zero = Row {
            zeros: Some(false),
            ..ok.clone()
        };
        assert_eq!(bad_zero.pass(m, u), Some(false));
        let bad_orth = Row {
            orth: Some(1.0),
            ..ok.clone()
        };
        assert_eq!(bad_orth.pass(m, u), Some(false));
        let gram = Row {
            gram: Some(1e-14),
            zeros: Some(true),
            ..Row::default()
        };
        assert_eq!(gram.pass(m, u), Some(true));
        assert_eq!(Row::default().pass(m, u), None);
        assert!(accuracy_cell(&gram, m, u).starts_with("pass (no Q"));
    }
}
