//! A small SVG writer for `seen size --plot` and `seen bench --plot`: line charts on a linear
//! or logarithmic y axis, and grouped bar charts, each with a title, axes, labelled ticks, grid
//! lines and a legend. Plain text out; no plotting crate.

use std::fmt::Write as _;
use std::path::Path;

use crate::Failure;

/// The canvas, in SVG user units (pixels).
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
/// The plot area: left of it the y labels, right of it the legend, under it the x labels.
const LEFT: f64 = 90.0;
const RIGHT: f64 = 700.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 460.0;

/// Line and bar colours, in order (a colour-blind-safe set).
const COLOURS: [&str; 6] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9",
];

/// How an axis maps its values to positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scale {
    Linear,
    /// Base 10; only values above zero can be drawn.
    Log,
}

/// One curve: its name in the legend and its points `(x, y)` in data units.
pub(crate) struct Curve {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) dashed: bool,
}

/// A point to call out on a curve (drawn in that curve's colour, labelled beside it).
pub(crate) struct Mark {
    pub(crate) curve: usize,
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) label: String,
}

/// A line chart. The axes span the data (on a log axis: whole decades, at most
/// [`max_decades`](Self::max_decades) of them below the largest value) unless fixed with
/// `x_range` / `y_range`; points outside the y range are left out of their curve.
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) y_scale: Scale,
    pub(crate) x_range: Option<(f64, f64)>,
    pub(crate) y_range: Option<(f64, f64)>,
    pub(crate) max_decades: u32,
    pub(crate) curves: Vec<Curve>,
    pub(crate) marks: Vec<Mark>,
}

impl LineChart {
    /// A chart with no curves yet, a linear x axis and the given y scale.
    pub(crate) fn new(title: &str, x_label: &str, y_label: &str, y_scale: Scale) -> Self {
        Self {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            y_scale,
            x_range: None,
            y_range: None,
            max_decades: 12,
            curves: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// The SVG document.
    pub(crate) fn to_svg(&self) -> String {
        let all = || self.curves.iter().flat_map(|c| c.points.iter().copied());
        let x_axis = Axis::fit(Scale::Linear, self.x_range, all().map(|p| p.0), 0);
        let y_axis = Axis::fit(
            self.y_scale,
            self.y_range,
            all().map(|p| p.1),
            self.max_decades,
        );
        let mut svg = Svg::new(&self.title);
        svg.axes(&x_axis, &y_axis, &self.x_label, &self.y_label);
        for (i, curve) in self.curves.iter().enumerate() {
            let points: Vec<String> = curve
                .points
                .iter()
                .filter(|&&(x, y)| x_axis.contains(x) && y_axis.contains(y))
                .map(|&(x, y)| format!("{:.2},{:.2}", x_axis.to_x(x), y_axis.to_y(y)))
                .collect();
            let dash = if curve.dashed {
                r#" stroke-dasharray="8 5""#
            } else {
                ""
            };
            let _ = writeln!(
                svg.body,
                r#"<polyline class="curve" fill="none" stroke="{}" stroke-width="2"{dash} points="{}"><title>{}</title></polyline>"#,
                colour(i),
                points.join(" "),
                escape(&curve.name),
            );
        }
        // Labels already placed, so that a mark next to another gets its label below theirs.
        let mut placed: Vec<(f64, f64)> = Vec::new();
        for mark in &self.marks {
            if !(x_axis.contains(mark.x) && y_axis.contains(mark.y)) {
                continue;
            }
            let (x, y) = (x_axis.to_x(mark.x), y_axis.to_y(mark.y));
            let _ = writeln!(
                svg.body,
                r#"<circle class="mark" cx="{x:.2}" cy="{y:.2}" r="5" fill="white" stroke="{}" stroke-width="2"/>"#,
                colour(mark.curve),
            );
            let (lx, mut ly) = (x + 8.0, y - 8.0);
            while placed
                .iter()
                .any(|&(px, py)| (px - lx).abs() < 200.0 && (py - ly).abs() < 15.0)
            {
                ly += 15.0;
            }
            placed.push((lx, ly));
            svg.text(lx, ly, "start", 12.0, &mark.label);
        }
        let legend: Vec<(&str, bool)> = self
            .curves
            .iter()
            .map(|c| (c.name.as_str(), c.dashed))
            .collect();
        svg.legend(&legend, true);
        svg.finish()
    }
}

/// A grouped bar chart: one group per category along x, one bar per series in each group
/// (`series[s].1[g]` is the height of series `s` in group `g`), a linear y axis from 0.
pub(crate) struct BarChart {
    pub(crate) title: String,
    pub(crate) y_label: String,
    pub(crate) groups: Vec<String>,
    pub(crate) series: Vec<(String, Vec<f64>)>,
}

impl BarChart {
    /// The SVG document.
    pub(crate) fn to_svg(&self) -> String {
        let heights = self.series.iter().flat_map(|s| s.1.iter().copied());
        let y_axis = Axis::fit(Scale::Linear, None, heights.chain([0.0]), 0);
        let mut svg = Svg::new(&self.title);
        svg.y_axis(&y_axis, &self.y_label);
        svg.frame();
        let group_width = (RIGHT - LEFT) / self.groups.len().max(1) as f64;
        let bar_width = group_width * 0.8 / self.series.len().max(1) as f64;
        // Long or many labels are turned, so that neighbours do not overlap.
        let turned = self.groups.len() > 6 || self.groups.iter().any(|g| g.len() > 12);
        for (g, group) in self.groups.iter().enumerate() {
            let left = LEFT + group_width * g as f64 + group_width * 0.1;
            for (s, (name, values)) in self.series.iter().enumerate() {
                let Some(&value) = values.get(g) else {
                    continue;
                };
                let value = value.max(0.0);
                let x = left + bar_width * s as f64;
                let top = y_axis.to_y(value.min(y_axis.max));
                let _ = writeln!(
                    svg.body,
                    r#"<rect class="bar" x="{x:.2}" y="{top:.2}" width="{:.2}" height="{:.2}" fill="{}"><title>{}: {} {}</title></rect>"#,
                    bar_width * 0.92,
                    BOTTOM - top,
                    colour(s),
                    escape(group),
                    escape(name),
                    short_number(value),
                );
                // The value over the bar, where it fits (it is in the bar's title anyway).
                if bar_width >= 26.0 {
                    svg.text(
                        x + bar_width * 0.46,
                        top - 4.0,
                        "middle",
                        10.0,
                        &short_number(value),
                    );
                }
            }
            let centre = LEFT + group_width * (g as f64 + 0.5);
            if turned {
                let _ = writeln!(
                    svg.body,
                    r#"<text x="{centre:.2}" y="{:.2}" text-anchor="end" font-size="12" transform="rotate(-30 {centre:.2} {:.2})">{}</text>"#,
                    BOTTOM + 16.0,
                    BOTTOM + 16.0,
                    escape(group),
                );
            } else {
                svg.text(centre, BOTTOM + 20.0, "middle", 12.0, group);
            }
        }
        let legend: Vec<(&str, bool)> = self.series.iter().map(|s| (s.0.as_str(), false)).collect();
        svg.legend(&legend, false);
        svg.finish()
    }
}

/// Writes `svg` to `path`, or the one-line failure naming the file.
pub(crate) fn save(path: &Path, svg: &str) -> Result<(), Failure> {
    std::fs::write(path, svg).map_err(|e| cannot_write(path, &e))
}

fn cannot_write(path: &Path, e: &std::io::Error) -> Failure {
    Failure(format!("cannot write the plot {}: {e}", path.display()))
}

/// Where a plot will be written, checked before the work that produces the plot, so that a
/// path that cannot be written fails at once rather than after a long run.
///
/// - A path that exists (a file, `/dev/null`, a FIFO, `/dev/stdout`) is opened for writing
///   now and keeps its contents until [`write`](Self::write): a run that fails or is killed
///   leaves it as it was.
/// - A new file is created and removed again at once (the check), and created for good only
///   by `write`: a run that fails or is killed leaves nothing behind.
/// - A dangling symbolic link is not checked; `write` creates its target, as writing through
///   it does.
pub(crate) enum PlotFile {
    Existing {
        file: std::fs::File,
        path: std::path::PathBuf,
    },
    New(std::path::PathBuf),
}

impl PlotFile {
    pub(crate) fn open(path: &Path) -> Result<Self, Failure> {
        use std::io::ErrorKind::{AlreadyExists, NotFound};
        let fail = |e: std::io::Error| cannot_write(path, &e);
        match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(file) => {
                return Ok(PlotFile::Existing {
                    file,
                    path: path.to_path_buf(),
                });
            }
            Err(e) if e.kind() != NotFound => return Err(fail(e)),
            Err(_) => {}
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(probe) => {
                drop(probe);
                std::fs::remove_file(path).map_err(fail)?;
            }
            // The name exists but does not lead to a file: a dangling link.
            Err(e) if e.kind() == AlreadyExists => {}
            Err(e) => return Err(fail(e)),
        }
        Ok(PlotFile::New(path.to_path_buf()))
    }

    /// Whether the plot would be written over the regular file at `path` (the same file, by
    /// whatever name or link): a plot aimed at the file the keys are read from.
    pub(crate) fn is_file_at(&self, path: &Path) -> bool {
        let PlotFile::Existing { file, path: own } = self else {
            return false;
        };
        let (Ok(plot), Ok(other)) = (file.metadata(), std::fs::metadata(path)) else {
            return false;
        };
        plot.is_file() && same_file(&plot, &other, own, path)
    }

    /// Writes `svg` as the plot, replacing what the file held. Only a regular file is
    /// truncated first, as opening with `O_TRUNC` would: a device or a FIFO (`/dev/null`,
    /// `/dev/stdout` on a pipe) refuses `set_len` and has no contents to replace.
    pub(crate) fn write(self, svg: &str) -> Result<(), Failure> {
        use std::io::Write as _;
        match self {
            PlotFile::New(path) => save(&path, svg),
            PlotFile::Existing { mut file, path } => {
                let fail = |e: std::io::Error| cannot_write(&path, &e);
                if file.metadata().map_err(fail)?.is_file() {
                    file.set_len(0).map_err(fail)?;
                }
                file.write_all(svg.as_bytes()).map_err(fail)
            }
        }
    }
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata, _: &Path, _: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata, a: &Path, b: &Path) -> bool {
    matches!(
        (std::fs::canonicalize(a), std::fs::canonicalize(b)),
        (Ok(a), Ok(b)) if a == b
    )
}

/// One axis: its scale, the range it spans and where its ticks are.
struct Axis {
    scale: Scale,
    min: f64,
    max: f64,
    ticks: Vec<f64>,
}

impl Axis {
    /// An axis over `values` (or over `fixed`): on a linear scale from the smallest value (or
    /// 0, whichever is lower) to the largest, widened to whole tick steps; on a log scale the
    /// whole decades around the positive values, at most `max_decades` below the top.
    fn fit(
        scale: Scale,
        fixed: Option<(f64, f64)>,
        values: impl Iterator<Item = f64>,
        max_decades: u32,
    ) -> Self {
        let finite = values.filter(|v| v.is_finite());
        match scale {
            Scale::Linear => {
                let (lo, hi) = fixed.unwrap_or_else(|| {
                    finite.fold((0.0f64, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
                });
                let hi = if hi > lo { hi } else { lo + 1.0 };
                let step = nice_step((hi - lo) / 6.0);
                let (min, max) = if fixed.is_some() {
                    (lo, hi)
                } else {
                    ((lo / step).floor() * step, (hi / step).ceil() * step)
                };
                let first = (min / step).ceil() as i64;
                let last = (max / step + 1e-9).floor() as i64;
                let ticks = (first..=last).map(|i| i as f64 * step).collect();
                Self {
                    scale,
                    min,
                    max,
                    ticks,
                }
            }
            Scale::Log => {
                let (lo, hi) = fixed.unwrap_or_else(|| {
                    let positive = finite.filter(|&v| v > 0.0);
                    positive.fold((f64::MAX, f64::MIN_POSITIVE), |(lo, hi), v| {
                        (lo.min(v), hi.max(v))
                    })
                });
                let top = hi.log10().ceil();
                let bottom = lo
                    .log10()
                    .floor()
                    .max(top - f64::from(max_decades.max(1)))
                    .min(top - 1.0);
                let (min, max) = if fixed.is_some() {
                    (lo, hi)
                } else {
                    (10f64.powf(bottom), 10f64.powf(top))
                };
                let decades = (top - bottom) as i64;
                // At most about 12 labelled decades.
                let every = (decades / 12 + 1) as usize;
                let ticks = (bottom as i64..=top as i64)
                    .step_by(every)
                    .map(|e| 10f64.powi(e as i32))
                    .filter(|&t| t >= min * (1.0 - 1e-12) && t <= max * (1.0 + 1e-12))
                    .collect();
                Self {
                    scale,
                    min,
                    max,
                    ticks,
                }
            }
        }
    }

    fn contains(&self, v: f64) -> bool {
        let inside = v >= self.min * (1.0 - 1e-12) - 1e-300 && v <= self.max * (1.0 + 1e-12);
        v.is_finite() && inside && (self.scale == Scale::Linear || v > 0.0)
    }

    /// Where `v` lies along the axis, from 0 at `min` to 1 at `max`.
    fn fraction(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log => (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10()),
        }
    }

    fn to_x(&self, v: f64) -> f64 {
        LEFT + self.fraction(v) * (RIGHT - LEFT)
    }

    fn to_y(&self, v: f64) -> f64 {
        BOTTOM - self.fraction(v) * (BOTTOM - TOP)
    }

    fn label(&self, v: f64) -> String {
        match self.scale {
            Scale::Linear => short_number(v),
            Scale::Log => {
                let e = v.log10().round() as i32;
                match e {
                    -2..=0 => format!("{v}"),
                    _ => format!("1e{e}"),
                }
            }
        }
    }
}

/// The SVG being written: the header, the body, the closing tag.
struct Svg {
    body: String,
}

impl Svg {
    fn new(title: &str) -> Self {
        let mut body = String::new();
        let _ = writeln!(
            body,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif">"#
        );
        let _ = writeln!(body, "<title>{}</title>", escape(title));
        let _ = writeln!(
            body,
            r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        );
        let mut svg = Self { body };
        svg.text(
            (LEFT + RIGHT) / 2.0,
            TOP - 28.0,
            "middle",
            16.0,
            title.lines().next().unwrap_or(""),
        );
        if let Some(subtitle) = title.lines().nth(1) {
            svg.text((LEFT + RIGHT) / 2.0, TOP - 10.0, "middle", 11.0, subtitle);
        }
        svg
    }

    fn text(&mut self, x: f64, y: f64, anchor: &str, size: f64, text: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.2}" y="{y:.2}" text-anchor="{anchor}" font-size="{size}">{}</text>"#,
            escape(text)
        );
    }

    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.2}" y1="{y1:.2}" x2="{x2:.2}" y2="{y2:.2}" stroke="{stroke}"/>"#
        );
    }

    /// Both axes, their ticks, labels and grid lines.
    fn axes(&mut self, x: &Axis, y: &Axis, x_label: &str, y_label: &str) {
        for &t in &x.ticks {
            let px = x.to_x(t);
            self.line((px, TOP), (px, BOTTOM), "#e5e5e5");
            self.line((px, BOTTOM), (px, BOTTOM + 5.0), "black");
            self.text(px, BOTTOM + 20.0, "middle", 12.0, &x.label(t));
        }
        self.text((LEFT + RIGHT) / 2.0, BOTTOM + 45.0, "middle", 13.0, x_label);
        self.y_axis(y, y_label);
        self.frame();
    }

    /// The y axis's ticks, labels, grid lines and label.
    fn y_axis(&mut self, y: &Axis, label: &str) {
        for &t in &y.ticks {
            let py = y.to_y(t);
            self.line((LEFT, py), (RIGHT, py), "#e5e5e5");
            self.line((LEFT - 5.0, py), (LEFT, py), "black");
            self.text(LEFT - 8.0, py + 4.0, "end", 12.0, &y.label(t));
        }
        let (cx, cy) = (22.0, (TOP + BOTTOM) / 2.0);
        let _ = writeln!(
            self.body,
            r#"<text x="{cx}" y="{cy}" text-anchor="middle" font-size="13" transform="rotate(-90 {cx} {cy})">{}</text>"#,
            escape(label)
        );
    }

    /// The plot area's border (the x and y axis lines).
    fn frame(&mut self) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
            RIGHT - LEFT,
            BOTTOM - TOP
        );
    }

    /// The legend right of the plot area: a line (or a swatch) in each entry's colour.
    fn legend(&mut self, entries: &[(&str, bool)], lines: bool) {
        let _ = writeln!(self.body, r#"<g class="legend">"#);
        for (i, &(name, dashed)) in entries.iter().enumerate() {
            let y = TOP + 10.0 + 22.0 * i as f64;
            let x = RIGHT + 20.0;
            if lines {
                let dash = if dashed {
                    r#" stroke-dasharray="8 5""#
                } else {
                    ""
                };
                let _ = writeln!(
                    self.body,
                    r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2"{dash}/>"#,
                    x + 28.0,
                    colour(i)
                );
            } else {
                let _ = writeln!(
                    self.body,
                    r#"<rect x="{x}" y="{}" width="28" height="12" fill="{}"/>"#,
                    y - 6.0,
                    colour(i)
                );
            }
            self.text(x + 36.0, y + 4.0, "start", 12.0, name);
        }
        let _ = writeln!(self.body, "</g>");
    }

    fn finish(mut self) -> String {
        self.body.push_str("</svg>\n");
        self.body
    }
}

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// A step of 1, 2 or 5 times a power of ten, at least `rough`.
fn nice_step(rough: f64) -> f64 {
    if !(rough.is_finite() && rough > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(rough.log10().floor());
    let mantissa = rough / power;
    let nice = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|&m| m >= mantissa * (1.0 - 1e-9))
        .unwrap_or(10.0);
    nice * power
}

/// A number in at most 3 significant digits, with K, M, G or T for thousands and up
/// (`2.5M`, `40K`, `0.25`, `12.3`).
pub(crate) fn short_number(v: f64) -> String {
    let (scaled, suffix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|&(unit, _)| v.abs() >= unit)
        .map_or((v, ""), |(unit, s)| (v / unit, s));
    let digits = if scaled == 0.0 {
        0
    } else {
        (2 - scaled.abs().log10().floor() as i32).clamp(0, 6) as usize
    };
    let text = format!("{scaled:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}{suffix}")
}

/// `text` with `&`, `<`, `>` and `"` escaped, for text nodes and attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_one_two_five() {
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(1000.0), 1000.0);
    }

    #[test]
    fn short_numbers() {
        for (v, text) in [
            (0.0, "0"),
            (0.25, "0.25"),
            (12.34, "12.3"),
            (40_000.0, "40K"),
            (2_500_000.0, "2.5M"),
            (1e12, "1T"),
        ] {
            assert_eq!(short_number(v), text, "{v}");
        }
    }

    #[test]
    fn log_axis_spans_whole_decades_and_drops_what_it_cannot_draw() {
        let mut chart = LineChart::new("t", "x", "y", Scale::Log);
        chart.curves.push(Curve {
            name: "a & b".into(),
            points: vec![(0.0, 0.0), (1.0, 3e-5), (2.0, 0.2)],
            dashed: false,
        });
        let svg = chart.to_svg();
        assert!(svg.contains(">1e-5<") && svg.contains(">1<"), "{svg}");
        assert!(svg.contains("a &amp; b"));
        // The point at y = 0 cannot be drawn on a log axis: two points remain.
        let points = svg.split("points=\"").nth(1).unwrap();
        let points = &points[..points.find('"').unwrap()];
        assert_eq!(points.split(' ').count(), 2, "{points}");
    }
}
