//! The charts of `--svg`: which plots a run's rows give, and what each shows.

use super::grid::{bar_reason, cpu_bar_applies, required_speedup, Kind, Point};
use super::plots;
use super::types::Row;
use crate::common::ratio;

/// A point's field that a chart's x axis or series can take: name, value.
type Field = (&'static str, fn(&Point) -> usize);

/// The fields a chart picks its x axis and series from.
const FIELDS: [Field; 5] = [
    ("k0", |p| p.k0),
    ("p", |p| p.p),
    ("m", |p| p.m),
    ("n", |p| p.n),
    ("n_b", |p| p.nb.unwrap_or(0)),
];

/// A plotted ratio: its label, and its value from a row.
type Measure = (&'static str, fn(&Row) -> Option<f64>);

/// A measured row of the run: precision, point, row.
type Measured<'a> = &'a (&'a str, Point, Row);

/// The plots of `--svg` (speed-up against k0, p, m and n): one chart per (group,
/// precision), file name `<group>_<prec>.svg` (`<group>_<update>_<prec>.svg` in the
/// groups that hold several updates), laid out by [`Layout`]. With a GPU: y =
/// (a)/update and (c)/update, dashed lines at the bar (the required speed-up over
/// (a), and 50× over (c) where it applies). Without one: y = (d) faer / (c) serial CPU
/// update, dashed line at 1×.
pub(super) fn speedup_charts(
    rows: &[(&str, Point, Row)],
    gpu: bool,
) -> Vec<(String, plots::Chart)> {
    let measures: &[Measure] = if gpu {
        &[
            ("over (a) refactorise", |r| ratio(r.refac_ms, r.upd_ms)),
            ("over (c) CPU update", |r| ratio(r.cpu_ms, r.upd_ms)),
        ]
    } else {
        &[("(d) faer / (c) CPU update", |r| ratio(r.faer_ms, r.cpu_ms))]
    };
    // one chart per (group, precision, update): BS and ACC hold several updates
    let mut keys: Vec<(&str, &str, Kind)> = Vec::new();
    for (prec, p, _) in rows {
        if !keys.contains(&(p.group, *prec, p.kind)) {
            keys.push((p.group, *prec, p.kind));
        }
    }
    let mut charts = Vec::new();
    for &(group, prec, kind) in &keys {
        let sel: Vec<Measured<'_>> = rows
            .iter()
            .filter(|(pr, p, _)| p.group == group && *pr == prec && p.kind == kind)
            .collect();
        let layout = Layout::new(group, &sel);
        let several_kinds = keys.iter().any(|k| k.0 == group && k.2 != kind);
        let kind = kind.name();
        let title = if gpu {
            format!("{group} {prec} {kind}: speed-up of the update (+ solve)")
        } else {
            format!("{group} {prec} {kind}: CPU only (no GPU), (d) faer / (c) CPU update")
        };
        let file = if several_kinds {
            format!("{group}_{kind}_{prec}.svg")
        } else {
            format!("{group}_{prec}.svg")
        };
        let chart = plots::Chart {
            title,
            x_label: layout.x_label(&sel),
            y_label: "speed-up (×)".to_string(),
            log_y: true,
            series: layout.series(&sel, measures),
            hlines: bar_lines(&sel, gpu),
        };
        charts.push((file, chart));
    }
    charts
}

/// How a chart lays out its rows. x is the field (of [`FIELDS`]) that takes the most
/// values (the group name's hint — `-k`, `-p`, `-m`, `-n` — breaks ties and picks it
/// for a single point); the other varying fields give one series per value, unless
/// they vary with x alone.
struct Layout {
    /// The x field.
    xi: usize,
    /// The other fields that vary.
    others: Vec<usize>,
    /// Distinct values of each field.
    counts: Vec<usize>,
    /// The other fields vary with x alone: one series.
    follows_x: bool,
}

impl Layout {
    fn new(group: &str, sel: &[Measured<'_>]) -> Self {
        let distinct = |f: fn(&Point) -> usize| {
            let mut v: Vec<usize> = sel.iter().map(|(_, p, _)| f(p)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let hint = match group.split_once('-').map(|(_, s)| s) {
            Some(s) if s.starts_with('k') => 0,
            Some("p") => 1,
            Some("m") => 2,
            Some("n") => 3,
            _ => 1,
        };
        let counts: Vec<usize> = FIELDS.iter().map(|(_, f)| distinct(*f).len()).collect();
        let xi = (0..FIELDS.len())
            .max_by_key(|&i| (counts[i], i == hint, FIELDS.len() - i))
            .expect("five fields");
        let others: Vec<usize> = (0..FIELDS.len())
            .filter(|&i| i != xi && counts[i] > 1)
            .collect();
        let mut layout = Layout {
            xi,
            others,
            counts,
            follows_x: false,
        };
        let xf = FIELDS[xi].1;
        layout.follows_x = distinct(xf).iter().all(|&x| {
            let mut ks: Vec<Vec<usize>> = sel
                .iter()
                .filter(|(_, p, _)| xf(p) == x)
                .map(|(_, p, _)| layout.key_of(p))
                .collect();
            ks.dedup();
            ks.len() == 1
        });
        layout
    }

    /// The values of the other varying fields at `p`.
    fn key_of(&self, p: &Point) -> Vec<usize> {
        self.others.iter().map(|&i| (FIELDS[i].1)(p)).collect()
    }

    /// One series per measure and value of the other varying fields (one per measure
    /// when they follow x), sorted by x; a series with no value is left out.
    fn series(&self, sel: &[Measured<'_>], measures: &[Measure]) -> Vec<plots::Series> {
        let xf = FIELDS[self.xi].1;
        let mut series_keys: Vec<Vec<usize>> = Vec::new();
        for (_, p, _) in sel {
            let k = if self.follows_x {
                vec![]
            } else {
                self.key_of(p)
            };
            if !series_keys.contains(&k) {
                series_keys.push(k);
            }
        }
        let mut series = Vec::new();
        for (mlabel, mf) in measures {
            for k in &series_keys {
                let mut pts: Vec<(f64, Option<f64>)> = sel
                    .iter()
                    .filter(|(_, p, _)| self.follows_x || self.key_of(p) == *k)
                    .map(|(_, p, r)| (xf(p) as f64, mf(r)))
                    .collect();
                if pts.iter().all(|(_, y)| y.is_none()) {
                    continue;
                }
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let what: Vec<String> = self
                    .others
                    .iter()
                    .zip(k)
                    .map(|(&i, v)| format!("{} = {v}", FIELDS[i].0))
                    .collect();
                let label = if what.is_empty() {
                    mlabel.to_string()
                } else {
                    format!("{mlabel}, {}", what.join(", "))
                };
                series.push(plots::Series { label, points: pts });
            }
        }
        series
    }

    /// The x axis title: the x field, the fields that vary with it, the fixed ones.
    fn x_label(&self, sel: &[Measured<'_>]) -> String {
        let xname = FIELDS[self.xi].0;
        let fixed: Vec<String> = (0..FIELDS.len())
            .filter(|&i| self.counts[i] == 1)
            .map(|i| format!("{} = {}", FIELDS[i].0, (FIELDS[i].1)(&sel[0].1)))
            .collect();
        let mut x_label = xname.to_string();
        if self.follows_x && !self.others.is_empty() {
            let names: Vec<&str> = self.others.iter().map(|&i| FIELDS[i].0).collect();
            x_label.push_str(&format!(" ({} vary with {xname})", names.join(", ")));
        }
        if !fixed.is_empty() {
            x_label.push_str(&format!("   [{}]", fixed.join(", ")));
        }
        x_label
    }
}

/// The dashed lines of a chart: with a GPU the bars over (a) of its points (with their
/// reasons) and 50× over (c) where that bar applies and was measured; without one, 1×.
/// Lines at the same height share one entry.
fn bar_lines(sel: &[Measured<'_>], gpu: bool) -> Vec<plots::HLine> {
    let mut hlines: Vec<plots::HLine> = Vec::new();
    let mut add_line = |y: f64, label: String| match hlines.iter_mut().find(|h| h.y == y) {
        Some(h) if h.label.split("; ").any(|l| l == label) => {}
        Some(h) => {
            h.label.push_str("; ");
            h.label.push_str(&label);
        }
        None => hlines.push(plots::HLine { y, label }),
    };
    if gpu {
        for (_, p, _) in sel {
            let need = required_speedup(p);
            let why = bar_reason(p);
            add_line(need, format!("bar {need}× over (a), {why}"));
        }
        if sel
            .iter()
            .any(|(_, p, r)| cpu_bar_applies(p) && ratio(r.cpu_ms, r.upd_ms).is_some())
        {
            add_line(50.0, "bar 50× over (c)".to_string());
        }
    } else {
        add_line(1.0, "1× (equal times)".to_string());
    }
    hlines
}

#[cfg(test)]
mod tests {
    use super::super::grid::full_grid;
    use super::*;
    use cuqr_cli::rng::Rng;

    /// `--svg` charts from GPU-style rows of the full grid: x is the field that
    /// varies, one series per value of the other varying field, the bars dashed.
    #[test]
    fn speedup_charts_pick_the_varying_field() {
        let mut rng = Rng::new(0x51a7);
        let rows: Vec<(&str, Point, Row)> = full_grid()
            .into_iter()
            .map(|p| {
                let upd = 0.5 + rng.uniform();
                let r = Row {
                    upd_ms: Some(upd),
                    refac_ms: Some(upd * (0.2 + 50.0 * rng.uniform())),
                    cpu_ms: p.cpu.then(|| upd * (1.0 + 100.0 * rng.uniform())),
                    ..Row::default()
                };
                ("f64", p, r)
            })
            .collect();
        let charts = speedup_charts(&rows, true);
        // one chart per group, per update in BS and ACC (which hold several)
        let mut want: Vec<String> = Vec::new();
        for (_, p, _) in &rows {
            let name = match p.group {
                "BS" | "ACC" => format!("{}_{}_f64.svg", p.group, p.kind.name()),
                g => format!("{g}_f64.svg"),
            };
            if !want.contains(&name) {
                want.push(name);
            }
        }
        let names: Vec<String> = charts.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, want);
        let get = |n: &str| &charts.iter().find(|(f, _)| f == n).unwrap().1;
        // AC-k3: k0 on x, one series per m, each with the CPU ratio too
        let ac = get("AC-k3_f64.svg");
        assert!(ac.x_label.starts_with("k0"), "{}", ac.x_label);
        let labels: Vec<&str> = ac.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "over (a) refactorise, m = 4000",
                "over (a) refactorise, m = 8000",
                "over (a) refactorise, m = 12000",
                "over (c) CPU update, m = 4000",
                "over (c) CPU update, m = 8000",
                "over (c) CPU update, m = 12000"
            ]
        );
        assert_eq!(ac.series[0].points.len(), 7);
        assert!(ac.hlines.iter().any(|h| h.y == 10.0));
        assert!(ac
            .hlines
            .iter()
            .any(|h| h.y == 50.0 && h.label.contains("(c)")));
        // BS: n_b on x; ACC: p on x
        assert!(get("BS_insert_rows_f64.svg").x_label.starts_with("n_b"));
        assert_eq!(get("BS_insert_rows_f64.svg").series[0].points.len(), 6);
        assert!(get("ACC_delete_rows_f64.svg").x_label.starts_with("p"));
        // RC-k: k0 on x, one series per p, bars 10× and 50× (k0 ≥ n/2)
        let rc = get("RC-k_f64.svg");
        assert!(rc.x_label.starts_with("k0"));
        assert_eq!(rc.series.len(), 3);
        assert!(rc
            .hlines
            .iter()
            .any(|h| h.y == 50.0 && h.label.ends_with("k0 ≥ n/2")));
        assert!(rc.hlines.iter().any(|h| h.y == 1.0));
        // AR-p: p on x, series per n; R1: m and n vary together, one series
        assert!(get("AR-p_f64.svg").x_label.starts_with("p "));
        let r1 = get("R1_f64.svg");
        assert!(r1.x_label.contains("vary with"), "{}", r1.x_label);
        assert_eq!(r1.series[0].points.len(), 2);
        // every measured ratio is plotted
        let total: usize = charts
            .iter()
            .flat_map(|(_, c)| c.series.iter())
            .flat_map(|s| s.points.iter())
            .filter(|(_, y)| y.is_some())
            .count();
        let cpu = rows.iter().filter(|(_, p, _)| p.cpu).count();
        assert_eq!(total, rows.len() + cpu);
        for (_, c) in &charts {
            plots::check_xml(&plots::line_chart(c)).unwrap();
        }
    }
}
