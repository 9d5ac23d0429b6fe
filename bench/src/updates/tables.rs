//! The printed report: the main table and its CSV, the seed experiments' tables,
//! the side tables of `--stages` and `--profile`, and `--resume`'s reading of an
//! earlier CSV.

use super::grid::{cpu_bar_applies, required_speedup, Extra, Point};
use super::types::{Accuracy, Row};
use crate::common::{fmt_opt, ratio};

/// The "bar" cell: required speed-up and whether it holds.
fn bar_cell(pt: &Point, r: &Row) -> String {
    let need = required_speedup(pt);
    let mut s = match ratio(r.refac_ms, r.upd_ms) {
        Some(x) if x >= need => format!("ok (≥{need:.0}×)"),
        Some(x) => format!("MISS: {x:.2}× < {need:.0}×"),
        None => "–".to_string(),
    };
    if cpu_bar_applies(pt) {
        if let Some(x) = ratio(r.cpu_ms, r.upd_ms) {
            s.push_str(&if x >= 50.0 {
                "; cpu ok (≥50×)".to_string()
            } else {
                format!("; cpu MISS: {x:.1}× < 50×")
            });
        }
    }
    s
}

pub(super) const TABLE_HEAD: &str = "| group | prec | update | m | n | k0 | p | Q | update ms | launches | (a) refac ms | a/upd | wavefront ms | a/wf | (b) solve-only ms | b/upd | TUS ms | (b) TUS ms | b/TUS | seed CULA/TUS | cpu ms (runs) | cpu/upd | TUT ms | cpu/TUT | seed seq/TUT | (d) faer ms (runs) | d/upd | e_x | bar |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

pub(super) const CSV_HEAD: &str = "group,prec,update,m,n,k0,p,nb,q_full,update_ms,launches,refac_ms,refac_over_update,wavefront_ms,wavefront_launches,refac_over_wavefront,e_x_wavefront,streams_ms,solve_only_ms,solve_only_over_update,tus_ms,solve_only_tus_ms,solve_only_tus_over_tus,seed_cula_over_tus,cpu_ms,cpu_runs,cpu_over_update,tut_ms,cpu_over_tut,seed_seq_over_tut,faer_ms,faer_runs,faer_over_update,e_x,e_q,e_a,l_norm,required_speedup";

/// The point's first cells of a table or CSV row: group, precision, update, m, n, k0, p.
fn point_cells(prec: &str, pt: &Point) -> Vec<String> {
    let (name, kind) = (pt.group.to_string(), pt.kind.name().to_string());
    let dims = [pt.m, pt.n, pt.k0, pt.p].map(|v| v.to_string());
    [name, prec.to_string(), kind]
        .into_iter()
        .chain(dims)
        .collect()
}

pub(super) fn table_row(prec: &str, pt: &Point, r: &Row) -> String {
    let runs = |ms: Option<f64>, n: usize| ms.map_or("–".into(), |c| format!("{c:.1} ({n})"));
    let mut cells = point_cells(prec, pt);
    cells.extend([
        (if pt.keeps_q() { "full" } else { "none" }).to_string(),
        fmt_opt(r.upd_ms, 3),
        r.launches.map_or("–".into(), |l| l.to_string()),
        fmt_opt(r.refac_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.upd_ms), 2),
        fmt_opt(r.wf_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.wf_ms), 2),
        fmt_opt(r.solve_ms, 3),
        fmt_opt(ratio(r.solve_ms, r.upd_ms), 2),
        fmt_opt(r.tus_ms, 3),
        fmt_opt(r.tus_base_ms, 3),
        fmt_opt(ratio(r.tus_base_ms, r.tus_ms), 2),
        fmt_opt(pt.seed_cula, 2),
        runs(r.cpu_ms, r.cpu_runs),
        fmt_opt(ratio(r.cpu_ms, r.upd_ms), 1),
        fmt_opt(r.tut_ms, 3),
        fmt_opt(ratio(r.cpu_ms, r.tut_ms), 1),
        fmt_opt(pt.seed_seq, 1),
        runs(r.faer_ms, r.faer_runs),
        fmt_opt(ratio(r.faer_ms, r.upd_ms), 1),
        r.ex.map_or("–".into(), |e| format!("{e:.1e}")),
        bar_cell(pt, r),
    ]);
    format!("| {} |", cells.join(" | "))
}

pub(super) fn csv_row(prec: &str, pt: &Point, r: &Row) -> String {
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let mut cells = point_cells(prec, pt);
    cells.extend([
        pt.nb.map_or(String::new(), |v| v.to_string()),
        pt.keeps_q().to_string(),
        o(r.upd_ms),
        r.launches.map_or(String::new(), |l| l.to_string()),
        o(r.refac_ms),
        o(ratio(r.refac_ms, r.upd_ms)),
        o(r.wf_ms),
        r.wf_launches.map_or(String::new(), |l| l.to_string()),
        o(ratio(r.refac_ms, r.wf_ms)),
        o(r.wf_ex),
        o(r.streams_ms),
        o(r.solve_ms),
        o(ratio(r.solve_ms, r.upd_ms)),
        o(r.tus_ms),
        o(r.tus_base_ms),
        o(ratio(r.tus_base_ms, r.tus_ms)),
        o(pt.seed_cula),
        o(r.cpu_ms),
        r.cpu_runs.to_string(),
        o(ratio(r.cpu_ms, r.upd_ms)),
        o(r.tut_ms),
        o(ratio(r.cpu_ms, r.tut_ms)),
        o(pt.seed_seq),
        o(r.faer_ms),
        r.faer_runs.to_string(),
        o(ratio(r.faer_ms, r.upd_ms)),
        o(r.ex),
        o(r.acc.and_then(|a| a.e_q)),
        o(r.acc.and_then(|a| a.e_a)),
        o(r.acc.map(|a| a.l_norm)),
        required_speedup(pt).to_string(),
    ]);
    cells.join(",")
}

/// The tables of the seed experiments that are not speed-up grids, from the rows
/// of the run: RR-comp (row-removal layouts), ACC (accuracy) and BS (block size).
pub(super) fn seed_tables(rows: &[(&str, Point, Row)]) -> String {
    let mut out = String::new();
    let sel = |g: &str| -> Vec<&(&str, Point, Row)> {
        rows.iter().filter(|(_, p, _)| p.group == g).collect()
    };
    let comp = sel("RR-comp");
    if !comp.is_empty() {
        out.push_str(
            "\nRR-comp (m = 5000, p = 50): row removal with the seeds' \
             composite [Q; Rᵀ; dᵀ] and three-stream layouts (Wavefront Givens) against the \
             two-phase default; update + solve, ms; the seeds' times in s\n\n\
             | prec | n | two-phase ms | composite ms | three streams ms | streams/composite | \
             seed composite s | seed streams s | seed streams/composite | composite/two-phase |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for (prec, p, r) in comp {
            if let Extra::Comp {
                composite_s,
                streams_s,
            } = p.extra
            {
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {} | {} | {composite_s:.3} | {streams_s:.3} | {:.2} | {} |\n",
                    p.n,
                    fmt_opt(r.upd_ms, 3),
                    fmt_opt(r.wf_ms, 3),
                    fmt_opt(r.streams_ms, 3),
                    fmt_opt(ratio(r.streams_ms, r.wf_ms), 2),
                    streams_s / composite_s,
                    fmt_opt(ratio(r.wf_ms, r.upd_ms), 1),
                ));
            }
        }
    }
    let acc = sel("ACC");
    if !acc.is_empty() {
        out.push_str(
            "\nACC (m = 4000, n = 2000, k0 = 0): e_x against cuSOLVER's \
             refactorisation in the same precision, e_Q = ‖QᵀQ − I‖_F, e_A = ‖QR − A‖_F/‖A‖_F \
             (where Q is kept), ‖L‖_F of R below its diagonal; the seeds' GPU figures (f32, \
             2-norms); target = 10·m·u for e_Q and e_A (the required accuracy)\n\n\
             | prec | update | p | e_x | seed e_x | e_Q | seed e_Q | e_A | seed e_A | ‖L‖ | 10·m·u | e_Q, e_A ≤ 10·m·u |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        let e = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.1e}"));
        for (prec, p, r) in acc {
            if let Extra::Acc { e_x, e_q, e_a } = p.extra {
                let u = if *prec == "f32" {
                    f32::EPSILON as f64 / 2.0
                } else {
                    f64::EPSILON / 2.0
                };
                let target = 10.0 * p.m as f64 * u;
                let a = r.acc;
                let ok = match a {
                    Some(Accuracy {
                        e_q: Some(q),
                        e_a: Some(ea),
                        ..
                    }) => (if q <= target && ea <= target {
                        "yes"
                    } else {
                        "NO"
                    })
                    .to_string(),
                    _ => "–".to_string(),
                };
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {e_x:.0e} | {} | {} | {} | {} | {} | {target:.1e} | {ok} |\n",
                    p.kind.name(),
                    p.p,
                    e(r.ex),
                    e(a.and_then(|a| a.e_q)),
                    e(e_q),
                    e(a.and_then(|a| a.e_a)),
                    e(e_a),
                    e(a.map(|a| a.l_norm)),
                ));
            }
        }
    }
    let bs = sel("BS");
    if !bs.is_empty() {
        out.push_str(
            "\nBS (m = 4000): the update's Householder block size n_b; update + \
             solve (device-resident) and TUT, ms; the seeds' sequential and GPU TUT times in s\n\n\
             | prec | update | n | k0 | p | n_b | update ms | a/upd | TUT ms | seed TUT s | seed seq s |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for (prec, p, r) in bs {
            if let Extra::Bs { seq_s, tut_s } = p.extra {
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {seq_s:.3} |\n",
                    p.kind.name(),
                    p.n,
                    p.k0,
                    p.p,
                    p.nb.map_or("–".into(), |v| v.to_string()),
                    fmt_opt(r.upd_ms, 3),
                    fmt_opt(ratio(r.refac_ms, r.upd_ms), 2),
                    fmt_opt(r.tut_ms, 3),
                    fmt_opt(tut_s, 3),
                ));
            }
        }
    }
    out
}

/// The CSV key of a point: its first eight cells (group, prec, update, m, n, k0, p, nb).
pub(super) fn csv_key(prec: &str, pt: &Point) -> String {
    let row = csv_row(prec, pt, &Row::default());
    row.split(',').take(8).collect::<Vec<_>>().join(",")
}

/// `--resume FILE`: the file's text and the keys of its rows ([`csv_key`]); a missing or
/// empty file has none. A file with another header is refused.
pub(super) fn read_resume(path: &str) -> Result<(Option<String>, Vec<String>), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => return Err(e.to_string()),
    };
    if text.trim().is_empty() {
        return Ok((None, Vec::new()));
    }
    let mut lines = text.lines();
    if lines.next() != Some(CSV_HEAD) {
        return Err("not a CSV of this cuqr bench updates (its header differs)".into());
    }
    let keys = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').take(8).collect::<Vec<_>>().join(","))
        .collect();
    let mut text = text;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok((Some(text), keys))
}

/// The tables printed after the main one: the seed experiments' tables, the stage split
/// (`--stages`, AC-stage), the ceilings (`--profile`, at the end of a run: `None` while
/// it is going) and the Givens stage alone (`--profile`).
pub(super) fn side_tables(
    rows: &[(&str, Point, Row)],
    stages: &[String],
    prof: &[String],
    reps: usize,
    ceilings: Option<&[(&str, f64, f64)]>,
) -> String {
    let mut s = seed_tables(rows);
    if !stages.is_empty() {
        s.push_str(&format!(
            "\nStages of each update + solve (ms, median over {reps} runs of each stage's sum; \
             events on the main stream, side-stream work counted where it is joined)\n\n"
        ));
        s.push_str("| group | type | update | m | n | k0 | p | sum ms | stages (ms) |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for l in stages {
            s.push_str(l);
            s.push('\n');
        }
    }
    if let Some(ceil) = ceilings {
        s.push_str(
            "\nCeilings (same run): device copy GB/s (read + write), cuBLAS GEMM GFLOP/s (8192³)\n\n",
        );
        s.push_str("| prec | copy GB/s | GEMM GFLOP/s |\n|---|---|---|\n");
        for (prec, bw, gf) in ceil {
            s.push_str(&format!("| {prec} | {bw:.0} | {gf:.0} |\n"));
        }
    }
    if !prof.is_empty() {
        s.push_str(
            "\nTwo-phase Givens stage alone (ms): generate, apply in step order (the default pipe kernel \
             for Q and d), apply in list order; GB/s = 2·(bytes of Q block + R + d)/apply time \
             (each element read and written once: the minimum traffic); GFLOP/s = 6·rotations·vectors/apply time; \
             windowed = the same three targets by windows of rotations and GEMM \
             (two_phase_apply_windowed, w = max(2p, 512))\n\n",
        );
        s.push_str("| group | type | update | m | n | k0 | p | gen ms | apply ms | list-order apply ms | list/step | apply GB/s | apply GFLOP/s | windowed apply ms | apply/windowed | whole update ms |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for l in prof {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::case::has_givens_stage;
    use super::super::grid::{full_grid, quick_grid, Kind};
    use super::*;

    /// The strategy columns: present exactly where a Givens stage exists, and the
    /// table and CSV rows have as many cells as their headers.
    #[test]
    fn wavefront_columns_line_up() {
        let givens: Vec<(Kind, usize)> = quick_grid()
            .iter()
            .filter(|p| has_givens_stage(p))
            .map(|p| (p.kind, p.k0))
            .collect();
        assert_eq!(
            givens,
            [
                (Kind::InsertCols, 0),
                (Kind::InsertCols, 250),
                (Kind::DeleteRows, 0),
                (Kind::RankOne, 0)
            ]
        );
        let pt = quick_grid()[0];
        let r = Row {
            upd_ms: Some(1.0),
            refac_ms: Some(8.0),
            wf_ms: Some(2.0),
            wf_launches: Some(17),
            wf_ex: Some(1e-15),
            ..Row::default()
        };
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let head = TABLE_HEAD.lines().next().unwrap();
        let row = table_row("f64", &pt, &r);
        assert_eq!(cells(&row), cells(head));
        let col = head
            .trim_matches('|')
            .split(" | ")
            .position(|c| c.trim() == "a/wf");
        let cell = row
            .trim_matches('|')
            .split(" | ")
            .nth(col.unwrap())
            .unwrap();
        assert_eq!(cell.trim(), "4.00");
        let csv = csv_row("f64", &pt, &r);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        let i = CSV_HEAD
            .split(',')
            .position(|c| c == "refac_over_wavefront");
        assert_eq!(csv.split(',').nth(i.unwrap()), Some("4"));
    }
    /// The seed-experiment tables: one row per point of RR-comp, ACC and BS, each
    /// with as many cells as its header, the e_Q/e_A target judged.
    #[test]
    fn seed_tables_line_up() {
        let rows: Vec<(&str, Point, Row)> = full_grid()
            .into_iter()
            .filter(|p| matches!(p.group, "RR-comp" | "ACC" | "BS"))
            .map(|p| {
                let r = Row {
                    upd_ms: Some(1.0),
                    refac_ms: Some(3.0),
                    wf_ms: Some(2.0),
                    streams_ms: Some(2.5),
                    tut_ms: Some(4.0),
                    ex: Some(1e-15),
                    acc: Some(Accuracy {
                        e_q: p.keeps_q().then_some(1e-14),
                        e_a: p.keeps_q().then_some(1e-15),
                        l_norm: 0.0,
                    }),
                    ..Row::default()
                };
                ("f64", p, r)
            })
            .collect();
        let text = seed_tables(&rows);
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let mut head = 0;
        let mut body = 0;
        for line in text.lines().filter(|l| l.starts_with('|')) {
            if line.starts_with("| prec") {
                head = cells(line);
            } else if !line.starts_with("|---") {
                assert_eq!(cells(line), head, "{line}");
                body += 1;
            }
        }
        assert_eq!(body, 4 + 20 + 18);
        // 10·m·u = 10·4000·2⁻⁵³ ≈ 4.4e-12: the given e_Q, e_A pass
        assert_eq!(text.matches("| yes |").count(), 10);
        assert!(text.contains("| 2.0 |"), "composite/two-phase");
    }
}
