//! A small dependency-free SVG 1.1 line-chart writer for the speed-up plots of
//! `cuqr bench updates --svg DIR` (speed-up against k0, p, m and n). Pure functions: a
//! [`Chart`] in, a standalone SVG document out.
//!
//! The x axis is linear (k0 starts at 0); the y axis is linear or base-10
//! logarithmic (speed-ups span 0.1×–1000×). Missing values (`None`, non-finite,
//! or ≤ 0 on a log axis) are skipped and break the series' line there.

use std::fmt::Write as _;

/// One series: a label for the legend and (x, y) points, y missing where `None`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Series {
    pub label: String,
    pub points: Vec<(f64, Option<f64>)>,
}

/// A dashed horizontal reference line (e.g. the required speed-up).
#[derive(Clone, Debug)]
pub(crate) struct HLine {
    pub y: f64,
    pub label: String,
}

/// A line chart: title, axis titles, scale, series and reference lines.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Base-10 logarithmic y axis.
    pub log_y: bool,
    pub series: Vec<Series>,
    pub hlines: Vec<HLine>,
}

const WIDTH: f64 = 840.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 75.0;
const RIGHT: f64 = 290.0;
const TOP: f64 = 45.0;
const BOTTOM: f64 = 60.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Escapes text for XML character data and attribute values.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            _ => o.push(c),
        }
    }
    o
}

/// A number for a tick label or tooltip: integers without decimals, at most
/// three significant decimals otherwise, exponent form outside [1e-3, 1e6).
pub(crate) fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        let s = format!("{v:.1e}");
        return s.replace(".0e", "e");
    }
    if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        return format!("{}", v.round() as i64);
    }
    let digits = if a >= 100.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (3 - a.log10().floor() as i32).clamp(2, 6) as usize
    };
    let s = format!("{v:.digits$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// "Nice" linear ticks covering [lo, hi] (about 5–8 of them, steps 1, 2 or 5 ×
/// 10^k); returns (ticks, axis lo, axis hi) with the axis widened to the ticks.
fn linear_ticks(lo: f64, hi: f64) -> (Vec<f64>, f64, f64) {
    let span = hi - lo;
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|f| f * mag)
        .find(|s| span / s <= 8.0)
        .unwrap_or(10.0 * mag);
    let a = (lo / step).floor() * step;
    let b = (hi / step).ceil() * step;
    let n = ((b - a) / step).round() as usize;
    let ticks = (0..=n).map(|i| a + i as f64 * step).collect();
    (ticks, a, b)
}

/// Log ticks covering [lo, hi] (both > 0): powers of ten, plus 2× and 5× when
/// the range spans less than two decades; returns (ticks, axis lo, axis hi).
fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, f64, f64) {
    let e0 = lo.log10().floor() as i32;
    let e1 = hi.log10().ceil() as i32;
    let e1 = e1.max(e0 + 1);
    let mults: &[f64] = if e1 - e0 <= 2 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut t = Vec::new();
    for e in e0..=e1 {
        for &f in mults {
            let v = f * 10f64.powi(e);
            if v <= 10f64.powi(e1) * (1.0 + 1e-12) {
                t.push(v);
            }
        }
    }
    (t, 10f64.powi(e0), 10f64.powi(e1))
}

/// Whether a y value can be drawn on this chart.
fn usable(y: Option<f64>, log: bool) -> Option<f64> {
    y.filter(|v| v.is_finite() && (!log || *v > 0.0))
}

/// Width of the plot area.
const PW: f64 = WIDTH - LEFT - RIGHT;
/// Height of the plot area.
const PH: f64 = HEIGHT - TOP - BOTTOM;

/// The plot area's axes: their ranges and ticks, and where data lands in pixels.
struct Frame {
    log: bool,
    xt: Vec<f64>,
    yt: Vec<f64>,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

/// The smallest and largest of `v`, `None` when empty.
fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    v.iter().fold(None, |acc: Option<(f64, f64)>, &x| {
        Some(acc.map_or((x, x), |(a, b)| (a.min(x), b.max(x))))
    })
}

impl Frame {
    /// The axes that hold the drawable points and reference lines of `c`, widened to
    /// their ticks; `xs` are the drawable points' x values.
    fn new(c: &Chart, xs: &[f64]) -> Self {
        let log = c.log_y;
        let ys: Vec<f64> = c
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, _)| x.is_finite())
            .filter_map(|(_, y)| usable(*y, log))
            .chain(c.hlines.iter().filter_map(|h| usable(Some(h.y), log)))
            .collect();
        let (x0, x1) = match min_max(xs) {
            None => (0.0, 1.0),
            Some((a, b)) if a == b => {
                let d = if a == 0.0 { 1.0 } else { 0.1 * a.abs() };
                (a - d, b + d)
            }
            Some(r) => r,
        };
        let (y0, y1) = match (min_max(&ys), log) {
            (None, true) => (0.1, 10.0),
            (None, false) => (0.0, 1.0),
            (Some((a, b)), true) if a == b => (a / 2.0, b * 2.0),
            (Some((a, b)), false) if a == b => {
                let d = if a == 0.0 { 1.0 } else { 0.1 * a.abs() };
                (a - d, b + d)
            }
            (Some(r), _) => r,
        };
        let (xt, x0, x1) = linear_ticks(x0, x1);
        let (yt, y0, y1) = if log {
            log_ticks(y0, y1)
        } else {
            linear_ticks(y0, y1)
        };
        Frame {
            log,
            xt,
            yt,
            x0,
            x1,
            y0,
            y1,
        }
    }

    /// The pixel column of x.
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * PW
    }

    /// The pixel row of y.
    fn py(&self, y: f64) -> f64 {
        let f = if self.log {
            (y.log10() - self.y0.log10()) / (self.y1.log10() - self.y0.log10())
        } else {
            (y - self.y0) / (self.y1 - self.y0)
        };
        TOP + (1.0 - f) * PH
    }
}

/// A legend entry: label, colour, dashed.
type LegendEntry = (String, String, bool);

/// Renders the chart as a standalone SVG 1.1 document.
pub(crate) fn line_chart(c: &Chart) -> String {
    let log = c.log_y;
    // the drawable points' x values (the y range adds the reference lines)
    let xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|(x, y)| x.is_finite() && usable(*y, log).is_some())
        .map(|(x, _)| *x)
        .collect();
    let f = Frame::new(c, &xs);
    let mut s = String::new();
    write_head(&mut s, c);
    write_axes(&mut s, &f);
    write_axis_titles(&mut s, c);
    let mut legend = write_hlines(&mut s, c, &f);
    legend.extend(write_series(&mut s, c, &f));
    if xs.is_empty() {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#888888\">no data</text>",
            LEFT + PW / 2.0,
            TOP + PH / 2.0
        );
    }
    write_legend(&mut s, &legend);
    s.push_str("</svg>\n");
    s
}

/// The XML declaration, the `<svg>` element's opening, the title and the background.
fn write_head(s: &mut String, c: &Chart) {
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{WIDTH}\" \
         height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" \
         font-size=\"12\">"
    );
    let _ = writeln!(s, "<title>{}</title>", esc(&c.title));
    let _ = writeln!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
        LEFT + PW / 2.0,
        esc(&c.title)
    );
}

/// The grid, the plot area's border, the ticks and their labels.
fn write_axes(s: &mut String, f: &Frame) {
    s.push_str("<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    for &t in &f.xt {
        let x = f.px(t);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{TOP:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>",
            TOP + PH
        );
    }
    for &t in &f.yt {
        let y = f.py(t);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>",
            LEFT + PW
        );
    }
    s.push_str("</g>\n");
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT:.1}\" y=\"{TOP:.1}\" width=\"{PW:.1}\" height=\"{PH:.1}\" \
         fill=\"none\" stroke=\"black\"/>"
    );
    s.push_str("<g text-anchor=\"middle\">\n");
    for &t in &f.xt {
        let x = f.px(t);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\">{}</text>",
            TOP + PH,
            TOP + PH + 5.0,
            TOP + PH + 18.0,
            esc(&fmt_num(t))
        );
    }
    s.push_str("</g>\n<g text-anchor=\"end\">\n");
    for &t in &f.yt {
        let y = f.py(t);
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{LEFT:.1}\" y2=\"{y:.1}\" stroke=\"black\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LEFT - 5.0,
            LEFT - 8.0,
            y + 4.0,
            esc(&fmt_num(t))
        );
    }
    s.push_str("</g>\n");
}

/// The titles of the x and y axes.
fn write_axis_titles(s: &mut String, c: &Chart) {
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        LEFT + PW / 2.0,
        HEIGHT - 15.0,
        esc(&c.x_label)
    );
    let (yx, yy) = (18.0, TOP + PH / 2.0);
    let _ = writeln!(
        s,
        "<text x=\"{yx:.1}\" y=\"{yy:.1}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 {yx:.1} {yy:.1})\">{}{}</text>",
        esc(&c.y_label),
        if c.log_y { " (log scale)" } else { "" }
    );
}

/// The dashed reference lines that can be drawn; returns their legend entries.
fn write_hlines(s: &mut String, c: &Chart, f: &Frame) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    for h in &c.hlines {
        if usable(Some(h.y), f.log).is_none() {
            continue;
        }
        let y = f.py(h.y);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#444444\" \
             stroke-width=\"1.5\" stroke-dasharray=\"6,4\"><title>{}</title></line>",
            LEFT + PW,
            esc(&h.label)
        );
        legend.push((h.label.clone(), "#444444".to_string(), true));
    }
    legend
}

/// The series: polylines broken at missing values, a marker per point; returns their
/// legend entries.
fn write_series(s: &mut String, c: &Chart, f: &Frame) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    for (i, ser) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for &(x, y) in &ser.points {
            match (x.is_finite(), usable(y, f.log)) {
                (true, Some(y)) => runs.last_mut().expect("non-empty").push((x, y)),
                _ => runs.push(Vec::new()),
            }
        }
        let _ = writeln!(s, "<g stroke=\"{color}\" fill=\"{color}\">");
        for run in runs.iter().filter(|r| r.len() > 1) {
            let pts: Vec<String> = run
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", f.px(x), f.py(y)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke-width=\"2\"/>",
                pts.join(" ")
            );
        }
        for &(x, y) in runs.iter().flatten() {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\"><title>{}: x = {}, y = {}</title></circle>",
                f.px(x),
                f.py(y),
                esc(&ser.label),
                esc(&fmt_num(x)),
                esc(&fmt_num(y))
            );
        }
        s.push_str("</g>\n");
        legend.push((ser.label.clone(), color.to_string(), false));
    }
    legend
}

/// The legend, right of the plot area: one line and label an entry.
fn write_legend(s: &mut String, legend: &[LegendEntry]) {
    let lx = LEFT + PW + 15.0;
    for (i, (label, color, dashed)) in legend.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * i as f64;
        let dash = if *dashed {
            " stroke-dasharray=\"6,4\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<line x1=\"{lx:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" \
             stroke-width=\"2\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            lx + 24.0,
            lx + 30.0,
            y + 4.0,
            esc(label)
        );
    }
}

/// A minimal well-formedness check for the documents [`line_chart`] writes:
/// balanced, properly nested tags, quoted attributes, no stray `<` or `&`, one
/// root element `svg`. Returns the element names in document order.
#[cfg(test)]
pub(crate) fn check_xml(doc: &str) -> Result<Vec<String>, String> {
    let mut stack: Vec<String> = Vec::new();
    let mut names = Vec::new();
    let mut roots = 0;
    let mut rest = doc;
    while let Some(i) = rest.find(['<', '&']) {
        let text = &rest[..i];
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text:?}"));
        }
        rest = &rest[i..];
        if rest.starts_with('&') {
            let end = rest.find(';').ok_or("unterminated entity")?;
            let ent = &rest[1..end];
            if !["amp", "lt", "gt", "quot", "apos"].contains(&ent) {
                return Err(format!("unknown entity &{ent};"));
            }
            rest = &rest[end + 1..];
            continue;
        }
        if let Some(r) = rest.strip_prefix("<?") {
            let end = r.find("?>").ok_or("unterminated <?")?;
            rest = &r[end + 2..];
            continue;
        }
        if let Some(r) = rest.strip_prefix("<!--") {
            let end = r.find("-->").ok_or("unterminated comment")?;
            rest = &r[end + 3..];
            continue;
        }
        // a tag: find its end outside quoted attribute values
        let mut in_quote = None;
        let mut end = None;
        for (j, ch) in rest.char_indices().skip(1) {
            match (in_quote, ch) {
                (None, '"' | '\'') => in_quote = Some(ch),
                (Some(q), c) if c == q => in_quote = None,
                (None, '<') => return Err("'<' inside a tag".into()),
                (Some(_), '<') => return Err("'<' inside an attribute".into()),
                (None, '>') => {
                    end = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let end = end.ok_or("unterminated tag")?;
        let body = &rest[1..end];
        rest = &rest[end + 1..];
        if let Some(name) = body.strip_prefix('/') {
            let name = name.trim();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> closes {other:?}")),
            }
            continue;
        }
        let self_closing = body.ends_with('/');
        let body = body.trim_end_matches('/');
        let name: String = body
            .chars()
            .take_while(|c| !c.is_whitespace())
            .collect::<String>();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == ':') {
            return Err(format!("bad element name {name:?}"));
        }
        // attributes: name="value" pairs
        let mut attrs = body[name.len()..].trim();
        while !attrs.is_empty() {
            let eq = attrs
                .find('=')
                .ok_or(format!("attribute without value in <{name}>"))?;
            let an = attrs[..eq].trim();
            if an.is_empty() || an.contains(char::is_whitespace) {
                return Err(format!("bad attribute name {an:?} in <{name}>"));
            }
            let v = attrs[eq + 1..].trim_start();
            let q = v.chars().next().ok_or("missing attribute value")?;
            if q != '"' && q != '\'' {
                return Err(format!("unquoted attribute {an} in <{name}>"));
            }
            let close = v[1..].find(q).ok_or("unterminated attribute")?;
            attrs = v[close + 2..].trim_start();
        }
        if stack.is_empty() {
            roots += 1;
            if name != "svg" {
                return Err(format!("root element is <{name}>, not <svg>"));
            }
        }
        names.push(name.clone());
        if !self_closing {
            stack.push(name);
        }
    }
    if !rest.trim().is_empty() && stack.is_empty() {
        return Err(format!("text after the root: {rest:?}"));
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr_cli::rng::Rng;

    /// The cy attributes of the circles, in order.
    fn circle_ys(svg: &str) -> Vec<f64> {
        svg.split("<circle ")
            .skip(1)
            .map(|c| {
                let v = c.split("cy=\"").nth(1).unwrap();
                v[..v.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    fn random_chart(rng: &mut Rng, log: bool) -> Chart {
        let series = (0..3)
            .map(|k| Series {
                label: format!("series <{k}> & co"),
                points: (0..7)
                    .map(|i| {
                        let x = 37.0 * i as f64 + 3.0 * rng.uniform();
                        let y = 10f64.powf(-1.0 + 4.0 * rng.uniform());
                        (x, Some(y))
                    })
                    .collect(),
            })
            .collect();
        Chart {
            title: "speed-up \"over\" (a)".into(),
            x_label: "k0".into(),
            y_label: "speed-up".into(),
            log_y: log,
            series,
            hlines: vec![HLine {
                y: 10.0,
                label: "bar 10×".into(),
            }],
        }
    }

    #[test]
    fn checker_rejects_malformed_documents() {
        assert!(check_xml("<svg><g></g></svg>").is_ok());
        for bad in [
            "<svg><g></svg>",
            "<svg><g></h></svg>",
            "<svg>",
            "<svg/><svg/>",
            "<svg a=b/>",
            "<svg>a & b</svg>",
            "<svg a=\"<\"/>",
            "<g/>",
            "x<svg/>",
        ] {
            assert!(check_xml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn charts_are_well_formed_with_every_point() {
        let mut rng = Rng::new(0x5eed7);
        for log in [false, true] {
            let c = random_chart(&mut rng, log);
            let svg = line_chart(&c);
            let names = check_xml(&svg).unwrap();
            assert_eq!(names.iter().filter(|n| *n == "circle").count(), 21);
            assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 3);
            for ser in &c.series {
                for &(x, y) in &ser.points {
                    let tip = format!(
                        "{}: x = {}, y = {}",
                        esc(&ser.label),
                        fmt_num(x),
                        fmt_num(y.unwrap())
                    );
                    assert!(svg.contains(&tip), "{tip} missing");
                }
            }
            assert!(svg.contains("stroke-dasharray"));
            assert!(svg.contains("bar 10×"));
            assert!(svg.contains("&lt;0&gt; &amp; co"));
            // every marker lies inside the plot area
            for y in circle_ys(&svg) {
                assert!((TOP..=HEIGHT - BOTTOM).contains(&y), "cy = {y}");
            }
        }
    }

    #[test]
    fn log_scale_is_monotone() {
        let mut rng = Rng::new(99);
        let mut ys: Vec<f64> = (0..25)
            .map(|_| 10f64.powf(-1.5 + 5.0 * rng.uniform()))
            .collect();
        ys.sort_by(f64::total_cmp);
        let c = Chart {
            log_y: true,
            series: vec![Series {
                label: "s".into(),
                points: ys
                    .iter()
                    .enumerate()
                    .map(|(i, &y)| (i as f64, Some(y)))
                    .collect(),
            }],
            ..Chart::default()
        };
        let cy = circle_ys(&line_chart(&c));
        assert_eq!(cy.len(), ys.len());
        // larger values are drawn higher (smaller SVG y), strictly
        for w in cy.windows(2) {
            assert!(w[1] < w[0], "{w:?}");
        }
        // equal ratios give equal distances on a log axis
        let c2 = Chart {
            log_y: true,
            series: vec![Series {
                label: "g".into(),
                points: vec![(0.0, Some(0.3)), (1.0, Some(3.0)), (2.0, Some(30.0))],
            }],
            ..Chart::default()
        };
        let cy = circle_ys(&line_chart(&c2));
        assert!(((cy[0] - cy[1]) - (cy[1] - cy[2])).abs() < 0.2, "{cy:?}");
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let one = |y: Option<f64>| Series {
            label: "one".into(),
            points: vec![(7.0, y)],
        };
        let cases = vec![
            vec![],
            vec![one(Some(3.3))],
            vec![one(None)],
            vec![one(Some(-1.0))],
            vec![one(Some(f64::NAN))],
            vec![Series {
                label: "flat".into(),
                points: vec![(5.0, Some(2.5)); 4],
            }],
            vec![Series {
                label: "zero".into(),
                points: vec![(0.0, Some(0.0)), (0.0, Some(0.0))],
            }],
            vec![Series {
                label: "gap".into(),
                points: vec![
                    (1.0, Some(2.0)),
                    (2.0, None),
                    (3.0, Some(4.0)),
                    (4.0, Some(5.0)),
                ],
            }],
        ];
        for log in [false, true] {
            for series in cases.clone() {
                let c = Chart {
                    title: "t".into(),
                    log_y: log,
                    series,
                    hlines: vec![HLine {
                        y: 1.0,
                        label: "1×".into(),
                    }],
                    ..Chart::default()
                };
                let svg = line_chart(&c);
                check_xml(&svg).unwrap();
                assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            }
        }
        // a missing value is skipped and breaks the line
        let c = Chart {
            series: cases[7].clone(),
            ..Chart::default()
        };
        let names = check_xml(&line_chart(&c)).unwrap();
        assert_eq!(names.iter().filter(|n| *n == "circle").count(), 3);
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 1);
    }

    #[test]
    fn numbers_are_formatted_sensibly() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1000.0), "1000");
        assert_eq!(fmt_num(0.1), "0.1");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(12.345), "12.35");
        assert_eq!(fmt_num(0.0123), "0.0123");
        assert_eq!(fmt_num(1e7), "1e7");
        assert_eq!(fmt_num(-3.0), "-3");
        let (t, a, b) = linear_ticks(0.0, 3000.0);
        assert_eq!((a, b), (0.0, 3000.0));
        assert!(t.len() >= 4 && t.len() <= 9, "{t:?}");
        let (t, a, b) = log_ticks(0.13, 870.0);
        assert_eq!(t, vec![0.1, 1.0, 10.0, 100.0, 1000.0]);
        assert!(a <= 0.13 && b >= 870.0);
    }
}
