/*!
`pmustress plot`: one picture of a results directory, for a mailing list
thread or a bug report.

Each run gets one row: a title (event, period, verdict, and whether it was a
self-test or a software event), then two panels:

- left, the histogram of delta/period on a log count scale, in bins of
  1/20 period centred on each multiple, with the skid band around 1x (on
  time) and around 2x, 3x, ... (overflows that got no signal of their own);
- right, every row of anomalies.csv over time, delta/period against seconds,
  coloured by kind, with a grey vertical line at the migration that preceded
  each anomaly (its `time_ns - ns_since_migration`).

The results do not record when the first signal came, so time 0 is the
earliest anomaly or migration shown; the axis says so. Several runs (or a
group directory) give one row each, stacked, not overlaid: their clocks and
periods need not agree. The rows share the histogram's axis (up to the
widest multiple any run needs), so they compare at a glance, and each is
titled by the settings, kernel and pseudo-NMI verdict that set its run
apart from the others, not by its directory.

The output format follows the file name: `.svg` or `.png`. Text is laid out
with DejaVu Sans, compiled in (the `dejavu` crate) and registered with
plotters' `ab_glyph` backend, so neither format needs a system font; the SVG
names the font and a viewer without it substitutes another sans-serif.
*/

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::judge::AnomalyKind;
use crate::judge::stress::POSITION_BINS;
use crate::report::runs as report;
use crate::results::loaded::LoadedRun;

/// Image width in pixels.
pub const WIDTH: u32 = 1400;
/// Height of one run's row in pixels.
pub const ROW_HEIGHT: u32 = 560;
/// Histogram bins per period: fine enough to separate 1x from the skid
/// band's edge, coarse enough that a bin holds a readable count.
pub const BINS_PER_PERIOD: usize = 20;
/// The histogram never goes wider than this many periods; longer deltas
/// land in the last bin.
pub const MAX_MULTIPLE: usize = 16;

const FONT: &str = "sans-serif";

/// How `-o FILE` is written, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

/// `-o FILE`, checked: the path and the format its extension names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub path: PathBuf,
    pub format: ImageFormat,
}

/// Parses `-o FILE`: the extension (any case) must be `svg` or `png`.
pub fn parse_output(s: &str) -> Result<Output, String> {
    let path = PathBuf::from(s);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let format = match ext.as_deref() {
        Some("svg") => ImageFormat::Svg,
        Some("png") => ImageFormat::Png,
        _ => {
            return Err(format!(
                "-o takes FILE.svg or FILE.png (the extension picks the format), got {s:?}"
            ));
        }
    };
    Ok(Output { path, format })
}

/// The image size for `runs` rows.
pub fn size(runs: usize) -> (u32, u32) {
    (WIDTH, ROW_HEIGHT * runs.max(1) as u32)
}

/// One anomaly as plotted.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Seconds since the row's time 0.
    pub t: f64,
    /// delta / period.
    pub ratio: f64,
    pub kind: String,
}

/// What one row shows, taken from a loaded run. Pure data: the drawing
/// code only lays it out.
#[derive(Debug, Clone)]
pub struct RunPlot {
    pub title: String,
    /// "SELF-TEST (injected)", "software event: does not test the PMU".
    pub flags: Vec<String>,
    /// The directory and the dropped-interrupt count.
    pub subtitle: String,
    /// Histogram bins (see `report::delta_period_bins`).
    pub bins: Vec<u64>,
    pub max_multiple: usize,
    pub deltas: u64,
    /// skid / period: the half-width of the band around each multiple.
    pub skid_ratio: f64,
    pub anomalies: Vec<Point>,
    /// Distinct migration instants, seconds since time 0.
    pub migrations: Vec<f64>,
    /// Anomaly rows that could not be placed (no time or delta).
    pub unplaced: usize,
    pub elapsed_s: f64,
    /// The time axis is the whole run (its start was recorded).
    pub whole_run: bool,
    /// Witnessed stops by their count past the last due point, in
    /// twentieths of the period (None: the run did not count them).
    pub stop_positions: Option<[u64; POSITION_BINS]>,
    /// Every stop the kernel witnessed, a position known or not: the
    /// count `report` gives.
    pub stops: Option<u64>,
}

/// The histogram's last multiple of the period for `r`: its largest delta,
/// at least 4x, at most MAX_MULTIPLE.
fn max_multiple_of(r: &LoadedRun) -> usize {
    let max_ratio = r.deltas.max() as f64 / r.period().max(1) as f64;
    (max_ratio.ceil() as usize).clamp(4, MAX_MULTIPLE)
}

/// What tells several runs apart: each run's values of the settings (and
/// the kernel and pseudo-NMI verdict) that differ between them, so a row
/// is titled by what its run changed, not by its directory. Empty for one
/// run, or runs alike in all of these.
fn differences(runs: &[LoadedRun]) -> Vec<String> {
    let described = |r: &LoadedRun| {
        let mut d = crate::report::compare::settings_of(r);
        d.push((
            "kernel",
            r.fingerprint_str("/kernel/release/value")
                .unwrap_or("?")
                .to_string(),
        ));
        d.push((
            "pseudo-NMI",
            r.run
                .pseudo_nmi()
                .map_or("unknown".to_string(), |p| p.verdict.as_str().to_string()),
        ));
        d
    };
    let all: Vec<Vec<(&'static str, String)>> = runs.iter().map(described).collect();
    let differs = |i: usize| all.iter().any(|d| d[i].1 != all[0][i].1);
    let keys: Vec<usize> = match all.first() {
        Some(first) => (0..first.len()).filter(|&i| differs(i)).collect(),
        None => Vec::new(),
    };
    all.iter()
        .map(|d| {
            keys.iter()
                .map(|&i| format!("{} {}", d[i].0, d[i].1))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect()
}

impl RunPlot {
    /// One run's row on its own axes.
    pub fn from_run(r: &LoadedRun) -> RunPlot {
        RunPlot::in_figure(r, max_multiple_of(r), "")
    }

    /// One run's row in a figure whose rows share the histogram's axis up
    /// to `max_multiple`, titled by `differs` (what sets its run apart
    /// from the others) where that is not empty.
    fn in_figure(r: &LoadedRun, max_multiple: usize, differs: &str) -> RunPlot {
        let period = r.period();
        let event = &r.run.config().event.spec;
        let what = match differs {
            "" => format!("{event}, period {period}"),
            d => d.to_string(),
        };
        let title = format!("{what}: verdict {} ({})", r.verdict(), r.exit_text());
        let mut flags = Vec::new();
        if r.run.is_self_test() {
            flags.push("SELF-TEST (injected)".to_string());
        }
        if r.run.config().event.software {
            flags.push("software event: does not test the PMU".to_string());
        }
        if !r.run.finished() {
            flags.push("the run did not finish: no verdict".to_string());
        }
        flags.extend(r.anomalies_note.clone());
        let subtitle = format!(
            "{}: {} dropped of {} overflows",
            r.dir.display(),
            r.dropped(),
            r.overflows()
        );

        let bins = report::delta_period_bins(&r.deltas, period, BINS_PER_PERIOD, max_multiple);
        let skid = r.run.config().skid;
        let skid_ratio = if period > 0 {
            skid as f64 / period as f64
        } else {
            0.0
        };

        let (anomalies, migrations, unplaced) = place_anomalies(r, period);
        RunPlot {
            title,
            flags,
            subtitle,
            bins,
            max_multiple,
            deltas: r.deltas.len(),
            skid_ratio,
            anomalies,
            migrations,
            unplaced,
            elapsed_s: r.run.elapsed_ns().unwrap_or(0) as f64 / 1e9,
            whole_run: r
                .run
                .results()
                .is_some_and(|x| x.started_monotonic_ns.is_some()),
            stop_positions: r
                .run
                .totals()
                .and_then(|t| t.stress.as_ref())
                .map(|s| s.stop_positions),
            stops: r.stops(),
        }
    }
}

/// Every run's row, on one histogram axis (the widest any run needs), so
/// rows compare at a glance, each titled by what sets its run apart.
pub fn rows(runs: &[LoadedRun]) -> Vec<RunPlot> {
    let max_multiple = runs.iter().map(max_multiple_of).max().unwrap_or(4);
    let titles = differences(runs);
    runs.iter()
        .zip(titles)
        .map(|(r, d)| RunPlot::in_figure(r, max_multiple, &d))
        .collect()
}

/// Anomalies as points and their migrations as instants, both in seconds
/// since the run began measuring (before that was recorded: since the
/// earliest of them). An injected drop sits where a real one would, at
/// the gap between the interrupts around it: its delta runs from the
/// interrupt before to the one discarded, a period short of that.
fn place_anomalies(r: &LoadedRun, run_period: u64) -> (Vec<Point>, Vec<f64>, usize) {
    // (time_ns, ratio, kind, migration time_ns)
    let mut raw = Vec::new();
    let mut unplaced = 0;
    for a in &r.anomalies {
        let p = if a.period > 0 { a.period } else { run_period };
        if p == 0 {
            unplaced += 1;
            continue;
        }
        let moved = a.ns_since_migration.map(|s| a.time_ns.saturating_sub(s));
        let discarded = if a.interrupt_gap.is_some() {
            a.injected as f64
        } else {
            // Before schema 2 the delta ran between signals: already the gap.
            0.0
        };
        let ratio = a.delta as f64 / p as f64 + discarded;
        raw.push((a.time_ns, ratio, a.kind.clone(), moved));
    }
    let earliest = raw
        .iter()
        .flat_map(|(t, _, _, m)| [Some(*t), *m])
        .flatten()
        .min()
        .unwrap_or(0);
    let t0 = r
        .run
        .results()
        .and_then(|x| x.started_monotonic_ns)
        .map_or(earliest, |s| s.min(earliest));
    let secs = |ns: u64| (ns - t0) as f64 / 1e9;
    let mut moves: Vec<u64> = raw.iter().filter_map(|(_, _, _, m)| *m).collect();
    moves.sort_unstable();
    moves.dedup();
    let points = raw
        .into_iter()
        .map(|(t, ratio, kind, _)| Point {
            t: secs(t),
            ratio,
            kind,
        })
        .collect();
    (points, moves.into_iter().map(secs).collect(), unplaced)
}

/// The colour of an anomaly kind: fixed for each kind pmustress knows (a
/// new kind must be given one here), from a palette for any other (an older
/// schema's kind, such as schema 1's `late`).
fn kind_colour(kind: &str, others: &mut Vec<String>) -> RGBColor {
    match kind.parse::<AnomalyKind>() {
        Ok(known) => known_colour(known),
        Err(_) => {
            const PALETTE: [RGBColor; 3] = [
                RGBColor(23, 190, 207),
                RGBColor(127, 127, 127),
                RGBColor(80, 80, 160),
            ];
            let i = match others.iter().position(|k| k == kind) {
                Some(i) => i,
                None => {
                    others.push(kind.to_string());
                    others.len() - 1
                }
            };
            PALETTE[i % PALETTE.len()]
        }
    }
}

fn known_colour(kind: AnomalyKind) -> RGBColor {
    match kind {
        AnomalyKind::DroppedInterrupt => RGBColor(214, 39, 40),
        AnomalyKind::Ambiguous => RGBColor(255, 187, 120),
        AnomalyKind::LateInterrupt => RGBColor(148, 103, 189),
        AnomalyKind::Throttled => RGBColor(140, 86, 75),
        AnomalyKind::WitnessLost => RGBColor(188, 189, 34),
        AnomalyKind::SoftwareTimerSkip => RGBColor(255, 127, 14),
        AnomalyKind::CoalescedSignal => RGBColor(44, 160, 44),
        AnomalyKind::SignalQueueOverflow => RGBColor(227, 119, 194),
        AnomalyKind::LateSignal => RGBColor(31, 119, 180),
        AnomalyKind::UnmatchedSignal => RGBColor(174, 199, 232),
        AnomalyKind::Unexplained => RGBColor(197, 176, 213),
        AnomalyKind::CountWrap => RGBColor(196, 156, 148),
        AnomalyKind::ToolError => RGBColor(0, 0, 0),
    }
}

fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the built-in DejaVu Sans font did not load"))
    }
}

fn drawing<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

/// Draws `runs` (one row each) into `out`.
pub fn render(runs: &[LoadedRun], out: &Output) -> Result<()> {
    register_font()?;
    let plots = rows(runs);
    let (w, h) = size(plots.len());
    match out.format {
        ImageFormat::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
                draw(&root, &plots)?;
                root.present().map_err(drawing)?;
            }
            write_whole(&out.path, text.as_bytes())
        }
        ImageFormat::Png => {
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
                draw(&root, &plots)?;
                root.present().map_err(drawing)?;
            }
            let mut png = Vec::new();
            encode_png(&mut png, &out.path, w, h, &rgb)?;
            write_whole(&out.path, &png)
        }
    }
}

/// Writes the image through a temporary file beside it and a rename: after
/// a failure (a full disk) there is no image, or the old one, never a
/// truncated one.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?
        .to_string_lossy();
    crate::results::writer::write_atomically(dir, &name, bytes)
}

fn encode_png(buf: &mut Vec<u8>, path: &Path, w: u32, h: u32, rgb: &[u8]) -> Result<()> {
    let mut enc = png::Encoder::new(buf, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc
        .write_header()
        .with_context(|| format!("writing {}", path.display()))?;
    writer
        .write_image_data(rgb)
        .with_context(|| format!("writing {}", path.display()))?;
    writer
        .finish()
        .with_context(|| format!("writing {}", path.display()))
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plots: &[RunPlot]) -> Result<()> {
    root.fill(&WHITE).map_err(drawing)?;
    let rows = root.split_evenly((plots.len().max(1), 1));
    for (row, plot) in rows.iter().zip(plots) {
        draw_row(row, plot)?;
    }
    Ok(())
}

const TITLE_HEIGHT: u32 = 78;
/// Roughly the plotting area's height in a panel: the row less the title,
/// the panel caption, the margins and the x labels.
const PLOT_HEIGHT: f64 = (ROW_HEIGHT - TITLE_HEIGHT - 24 - 28 - 44) as f64;

/// The share of a panel's height that its legend of `rows` entries takes,
/// at the top: the y range is stretched by it so the legend covers no data.
fn legend_share(rows: usize) -> f64 {
    ((20 + rows * 20) as f64 / PLOT_HEIGHT).min(0.6)
}
const WARN: RGBColor = RGBColor(190, 30, 30);
const GREY: RGBColor = RGBColor(110, 110, 110);
const BAR: RGBColor = RGBColor(70, 110, 170);
const ON_TIME: RGBColor = RGBColor(200, 235, 200);
const MISSED: RGBColor = RGBColor(250, 215, 205);
const MIGRATION: RGBColor = RGBColor(175, 175, 175);

fn draw_row<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &RunPlot) -> Result<()> {
    let (head, body) = area.split_vertically(TITLE_HEIGHT);
    head.draw_text(&p.title, &(FONT, 24).into_font().color(&BLACK), (16, 8))
        .map_err(drawing)?;
    if !p.flags.is_empty() {
        head.draw_text(
            &p.flags.join("  |  "),
            &(FONT, 18).into_font().color(&WARN),
            (16, 36),
        )
        .map_err(drawing)?;
    }
    head.draw_text(&p.subtitle, &(FONT, 14).into_font().color(&GREY), (16, 59))
        .map_err(drawing)?;
    let (left, rest) = body.split_horizontally(WIDTH * 2 / 5);
    let (middle, right) = rest.split_horizontally(WIDTH / 5);
    draw_histogram(&left, p)?;
    draw_stop_positions(&middle, p)?;
    draw_timeline(&right, p)
}

/// Where in the period the witnessed stops fell: a stress that finds the
/// bug stops threads just past due points as often as anywhere else.
fn draw_stop_positions<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &RunPlot,
) -> Result<()> {
    let Some(bins) = p.stop_positions.filter(|b| b.iter().any(|&n| n > 0)) else {
        return no_data(area, "no stop position");
    };
    let total: u64 = bins.iter().sum();
    let caption = stops_caption(total, p.stops);
    let even = total as f64 / POSITION_BINS as f64;
    let top = bins.iter().copied().max().unwrap_or(0) as f64;
    let y_top = top.max(even) * 1.25 / (1.0 - legend_share(2));
    let width = 1.0 / POSITION_BINS as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..1.0, 0.0..y_top)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(5)
        .x_label_formatter(&|x| format!("{x:.1}"))
        .x_desc("count past the last due point / period")
        .y_desc("stops")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(drawing)?;
    chart
        .draw_series(bins.iter().enumerate().map(|(i, &n)| {
            let x = i as f64 * width;
            Rectangle::new([(x, 0.0), (x + width * 0.9, n as f64)], BAR.filled())
        }))
        .map_err(drawing)?
        .label("stops in the bin")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], BAR.filled()));
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, even), (1.0, even)],
            GREY.stroke_width(2),
        )))
        .map_err(drawing)?
        .label("an even spread")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], GREY.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .draw()
        .map_err(drawing)?;
    Ok(())
}

/// Only stops whose count and last due point are both known have a
/// position: the caption says how many of the witnessed stops (the number
/// `report` gives) that is.
fn stops_caption(positioned: u64, witnessed: Option<u64>) -> String {
    match witnessed {
        Some(all) if all != positioned => {
            format!("stops in the period: {positioned} of {all} witnessed (position known)")
        }
        _ => format!("stops in the period: {positioned}"),
    }
}

fn no_data<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, what: &str) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    area.draw_text(
        what,
        &(FONT, 18).into_font().color(&GREY),
        (w as i32 / 4, h as i32 / 2),
    )
    .map_err(drawing)
}

fn draw_histogram<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &RunPlot) -> Result<()> {
    let max_count = p.bins.iter().copied().max().unwrap_or(0);
    if max_count == 0 {
        return no_data(area, "no deltas recorded");
    }
    let width = 1.0 / BINS_PER_PERIOD as f64;
    let x_max = p.max_multiple as f64 + 0.5;
    // Log scale: stretch log(top / 0.5) so the three legend rows sit above
    // the tallest bar.
    let y_top = 0.5 * (max_count as f64 * 1.5 / 0.5).powf(1.0 / (1.0 - legend_share(3)));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("delta / period: {} deltas", p.deltas), (FONT, 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, (0.5..y_top).log_scale())
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Whole multiples only, at most a dozen: half-period labels of a
        // long tail ran together ("9.5x10x10.5x11x").
        .x_labels((p.max_multiple + 2).min(MAX_X_LABELS))
        .x_label_formatter(&multiple_label)
        .x_desc(format!(
            "delta / period (bins of {width} period; last bin: {}x and above)",
            p.max_multiple
        ))
        .y_desc("deltas (log scale)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(drawing)?;

    let band = p.skid_ratio.min(0.5);
    if band > 0.0 {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(1.0 - band, 0.5), (1.0 + band, y_top)],
                ON_TIME.filled(),
            )))
            .map_err(drawing)?
            .label("1x ± skid: on time")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], ON_TIME.filled()));
        chart
            .draw_series((2..=p.max_multiple).map(|k| {
                Rectangle::new(
                    [(k as f64 - band, 0.5), (k as f64 + band, y_top)],
                    MISSED.filled(),
                )
            }))
            .map_err(drawing)?
            .label("Nx ± skid, N ≥ 2: N-1 overflows with no signal")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], MISSED.filled()));
    }
    chart
        .draw_series(
            p.bins
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let centre = i as f64 * width;
                    Rectangle::new(
                        [
                            (centre - width / 2.0, 0.5),
                            (centre + width / 2.0, *n as f64),
                        ],
                        BAR.filled(),
                    )
                }),
        )
        .map_err(drawing)?
        .label("deltas in the bin")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], BAR.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .draw()
        .map_err(drawing)?;
    Ok(())
}

/// The most tick labels on the histogram's axis.
const MAX_X_LABELS: usize = 12;

/// A tick of the delta/period axis: "3x" at a whole multiple, nothing
/// between (plotters may put ticks at halves).
fn multiple_label(x: &f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}x")
    } else {
        String::new()
    }
}

fn draw_timeline<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &RunPlot) -> Result<()> {
    if p.anomalies.is_empty() {
        let what = if p.unplaced > 0 {
            format!("{} anomalies without a time or delta", p.unplaced)
        } else {
            "no anomalies".to_string()
        };
        return no_data(area, &what);
    }
    // The whole run when its start is known, else what the anomalies span.
    let t_max = p
        .anomalies
        .iter()
        .map(|a| a.t)
        .chain(p.migrations.iter().copied())
        .chain(p.whole_run.then_some(p.elapsed_s))
        .fold(0.0, f64::max);
    let t_max = if t_max > 0.0 { t_max * 1.04 } else { 1.0 };
    let mut kinds: Vec<&str> = p.anomalies.iter().map(|a| a.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let legend_rows = kinds.len() + usize::from(!p.migrations.is_empty());
    let y_data = p.anomalies.iter().map(|a| a.ratio).fold(0.0, f64::max);
    let y_max = (y_data + 0.25).max(2.5) / (1.0 - legend_share(legend_rows));
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} anomalies over time, by kind; grey: migrations",
                p.anomalies.len()
            ),
            (FONT, 18),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(-t_max * 0.01..t_max, 0.0..y_max)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        // Vertical grid lines would look like the migration marks.
        .disable_x_mesh()
        .x_desc(if p.whole_run {
            format!(
                "seconds since the run began (it lasted {:.2} s)",
                p.elapsed_s
            )
        } else {
            format!(
                "seconds (0: first anomaly or migration shown; the run lasted {:.2} s)",
                p.elapsed_s
            )
        })
        .y_desc("delta / period")
        .y_label_formatter(&|y| format!("{y}x"))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(drawing)?;

    if !p.migrations.is_empty() {
        chart
            .draw_series(
                p.migrations.iter().map(|&t| {
                    PathElement::new(vec![(t, 0.0), (t, y_max)], MIGRATION.stroke_width(1))
                }),
            )
            .map_err(drawing)?
            .label("migration before an anomaly (time_ns - ns_since_migration)")
            .legend(|(x, y)| {
                PathElement::new(
                    vec![(x + 7, y - 7), (x + 7, y + 7)],
                    MIGRATION.stroke_width(2),
                )
            });
    }
    let mut others = Vec::new();
    for kind in kinds {
        let colour = kind_colour(kind, &mut others);
        let count = p.anomalies.iter().filter(|a| a.kind == kind).count();
        chart
            .draw_series(
                p.anomalies
                    .iter()
                    .filter(|a| a.kind == kind)
                    .map(|a| Circle::new((a.t, a.ratio), 4, colour.filled())),
            )
            .map_err(drawing)?
            .label(format!("{kind} ({count})"))
            // A square, so the SVG has exactly one <circle> per anomaly.
            .legend(move |(x, y)| {
                Rectangle::new([(x + 2, y - 5), (x + 12, y + 5)], colour.filled())
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(GREY)
        .draw()
        .map_err(drawing)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_format_follows_the_extension() {
        assert_eq!(parse_output("a.svg").unwrap().format, ImageFormat::Svg);
        assert_eq!(parse_output("dir/a.PNG").unwrap().format, ImageFormat::Png);
        for bad in ["a.jpg", "a", "svg", "a.svg.gz", ".png/"] {
            let e = parse_output(bad).unwrap_err();
            assert!(e.contains("-o") && e.contains("FILE.svg"), "{e}");
        }
    }

    #[test]
    fn a_recorded_self_test_run() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/results/task-clock-injected");
        let p = RunPlot::from_run(&LoadedRun::load(&dir).unwrap());
        assert_eq!(
            p.flags,
            [
                "SELF-TEST (injected)",
                "software event: does not test the PMU"
            ]
        );
        assert!(
            p.title
                .starts_with("task-clock, period 1000000: verdict dropped")
        );
        // 1x, 2x and 3x are bin centres.
        assert_eq!(p.max_multiple, 4);
        let peak = (0..p.bins.len()).max_by_key(|&i| p.bins[i]).unwrap();
        assert_eq!(peak, BINS_PER_PERIOD);
        assert!(p.bins[2 * BINS_PER_PERIOD] > 0 && p.bins[3 * BINS_PER_PERIOD] > 0);
        assert_eq!(p.bins.iter().sum::<u64>(), p.deltas);
        assert_eq!((p.anomalies.len(), p.unplaced), (53, 0));
        let kinds: std::collections::BTreeSet<_> =
            p.anomalies.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            ["dropped-interrupt", "software-timer-skip"]
        );
        // Time 0 is the earliest migration or anomaly; every migration
        // comes before some anomaly.
        let first = p
            .anomalies
            .iter()
            .map(|a| a.t)
            .chain(p.migrations.iter().copied());
        assert_eq!(first.fold(f64::INFINITY, f64::min), 0.0);
        assert!(!p.migrations.is_empty());
        assert!(p.migrations.windows(2).all(|w| w[0] < w[1]));
        assert!((p.skid_ratio - 0.25).abs() < 1e-12);
    }

    /// Rows of one figure share the histogram's axis (the widest any run
    /// needs) and are titled by the settings that set their runs apart.
    #[test]
    fn rows_share_one_axis_and_are_titled_by_what_differs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let load = |d: &str| LoadedRun::load(&root.join(d)).unwrap();
        let mut runs = [
            load("tests/fixtures/oracle/smp2-nopnmi-w1-pingpong-free-100k"),
            load("tests/fixtures/oracle/smp2-pnmi-w2-pingpong-free-100k-times-rate"),
        ];
        // The second run saw one delta of 8.5 periods (its own axis: 9x),
        // the first none past 4x.
        runs[1].deltas.record(runs[1].period() * 17 / 2).unwrap();
        let alone: Vec<usize> = runs
            .iter()
            .map(|r| RunPlot::from_run(r).max_multiple)
            .collect();
        assert_eq!(alone, [4, 9]);
        let plots = rows(&runs);
        for p in &plots {
            assert_eq!(p.max_multiple, *alone.iter().max().unwrap());
            assert_eq!(
                p.bins.len(),
                RunPlot::from_run(&runs[0])
                    .bins
                    .len()
                    .max(RunPlot::from_run(&runs[1]).bins.len())
            );
        }
        assert!(
            plots[0].title.starts_with(
                "workers 1, switch witness auto, pseudo-NMI disabled: verdict dropped"
            ),
            "{}",
            plots[0].title
        );
        assert!(
            plots[1]
                .title
                .starts_with("workers 2, switch witness times, pseudo-NMI enabled: verdict"),
            "{}",
            plots[1].title
        );
        // One run alone keeps its event and period as its title.
        assert!(
            rows(&runs[..1])[0]
                .title
                .starts_with("cycles, period 100000: verdict")
        );
    }

    #[test]
    fn the_stops_caption_says_how_many_of_the_witnessed_had_a_position() {
        assert_eq!(
            stops_caption(27_450, Some(27_453)),
            "stops in the period: 27450 of 27453 witnessed (position known)"
        );
        assert_eq!(stops_caption(10, Some(10)), "stops in the period: 10");
        assert_eq!(stops_caption(10, None), "stops in the period: 10");
    }

    #[test]
    fn histogram_ticks_are_whole_multiples() {
        assert_eq!(multiple_label(&10.0), "10x");
        assert_eq!(multiple_label(&9.5), "");
    }

    #[test]
    fn size_grows_by_rows() {
        assert_eq!(size(0), (WIDTH, ROW_HEIGHT));
        assert_eq!(size(3), (WIDTH, 3 * ROW_HEIGHT));
    }
}
