//! The scale benchmark's figure (`benches/benches/scale.rs`, issue 17 item
//! 4): time per rank and bytes per rank against the number of ranks P, both
//! axes log scale, one line per phase, as one PNG of two panels.
//!
//! Drawn with plotters and the bundled DejaVu Sans (the font
//! `faultsim/src/bin/interval-plot.rs` and the harness's campaign matrix
//! register), so no system font library is needed. The pure parts (series,
//! axis ranges, ratios) are separate functions with unit tests.

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// DejaVu Sans (Debian fonts-dejavu-core; licence in faultsim/assets/).
const FONT: &[u8] = include_bytes!("../../faultsim/assets/DejaVuSans.ttf");

/// One measured phase at one P: what the figure shows of a table row.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Number of ranks.
    pub ranks: usize,
    /// Phase name, e.g. "init".
    pub phase: String,
    /// Wall time of the phase over P, in microseconds.
    pub us_per_rank: f64,
    /// Payload bytes per rank, sent plus received (mean over ranks).
    pub bytes_per_rank: f64,
}

/// One line of a panel: a phase and its (P, value) points in order of P.
pub type Series = (String, Vec<(f64, f64)>);

/// The lines of one panel: one per phase, in the order phases first
/// appear in `points`, each sorted by P. Values that a log axis cannot
/// show (zero, negative, not finite) are left out.
pub fn series(points: &[Point], value: impl Fn(&Point) -> f64) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for pt in points {
        let v = value(pt);
        let i = match out.iter().position(|(name, _)| *name == pt.phase) {
            Some(i) => i,
            None => {
                out.push((pt.phase.clone(), Vec::new()));
                out.len() - 1
            }
        };
        if v.is_finite() && v > 0.0 {
            out[i].1.push((pt.ranks as f64, v));
        }
    }
    for (_, s) in &mut out {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// A log axis covering `values` from the power of ten at or below the
/// smallest to the power of ten at or above the largest (1..10 when there
/// is no positive finite value).
pub fn log_range(values: impl IntoIterator<Item = f64>) -> Range<f64> {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return 1.0..10.0;
    }
    let lo = 10f64.powf(lo.log10().floor());
    let mut hi = 10f64.powf(hi.log10().ceil());
    if hi <= lo {
        hi = lo * 10.0;
    }
    lo..hi
}

/// The P axis: a little wider than the measured P on both sides, so the
/// end points are not drawn on the frame.
pub fn ranks_range(points: &[Point]) -> Range<f64> {
    let lo = points.iter().map(|p| p.ranks).min().unwrap_or(1).max(1) as f64;
    let hi = points.iter().map(|p| p.ranks).max().unwrap_or(1).max(1) as f64;
    lo / 1.25..hi * 1.25
}

/// The cost per rank of `phase` at `to` ranks over its cost at `from`
/// ranks (the target: within 2× from 256 to 4,096); `None` when
/// either P was not measured or the cost at `from` is zero.
pub fn ratio(points: &[Point], phase: &str, from: usize, to: usize) -> Option<f64> {
    let at = |p: usize| {
        points
            .iter()
            .find(|x| x.phase == phase && x.ranks == p)
            .map(|x| x.us_per_rank)
    };
    match (at(from), at(to)) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    }
}

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
                .map_err(|_| "the bundled font does not load".to_string())
        })
        .clone()
}

/// Line colours, one per phase in order (a fifth phase reuses the first).
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Width and height of the PNG in pixels.
pub const SIZE: (u32, u32) = (1400, 620);

/// Draw both panels of `points` into the PNG `path`; `title` goes above.
pub fn draw(points: &[Point], title: &str, path: &Path) -> Result<(), String> {
    register_font()?;
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<_>| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|x| format!("{}: {x}", path.display()))?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    panel(&left, points, "wall time / P (µs per rank)", |p| {
        p.us_per_rank
    })
    .map_err(|x| format!("{}: {x}", path.display()))?;
    panel(
        &right,
        points,
        "bytes per rank (sent + received, mean)",
        |p| p.bytes_per_rank,
    )
    .map_err(|x| format!("{}: {x}", path.display()))?;
    root.present()
        .map_err(|x| format!("{}: {x}", path.display()))?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    points: &[Point],
    y_desc: &str,
    value: impl Fn(&Point) -> f64,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let lines = series(points, value);
    let y = log_range(lines.iter().flat_map(|(_, s)| s.iter().map(|&(_, v)| v)));
    // One decade more on top: the legend's room, above the lines.
    let y = y.start..y.end * 10.0;
    let x = ranks_range(points);
    let mut measured: Vec<f64> = points.iter().map(|p| p.ranks as f64).collect();
    measured.sort_by(f64::total_cmp);
    measured.dedup();
    let mut chart = ChartBuilder::on(area)
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(75)
        // Ticks and labels at the measured P (a log axis's own ticks fall
        // between them).
        .build_cartesian_2d(x.log_scale().with_key_points(measured), y.log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("ranks P (log scale)")
        .y_desc(format!("{y_desc}, log scale"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        })
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, (name, s)) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(s.iter().copied(), colour.stroke_width(2)))
            .map_err(e)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(s.iter().map(|&p| Circle::new(p, 4, colour.filled())))
            .map_err(e)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(ranks: usize, phase: &str, us: f64, bytes: f64) -> Point {
        Point {
            ranks,
            phase: phase.to_string(),
            us_per_rank: us,
            bytes_per_rank: bytes,
        }
    }

    fn sample() -> Vec<Point> {
        vec![
            pt(4096, "init", 419.0, 1167.0),
            pt(256, "init", 157.5, 1142.0),
            pt(256, "restart read", 20.2, 16.0),
            pt(4096, "restart read", 62.9, 16.0),
            pt(1024, "init", 175.1, 0.0),
        ]
    }

    #[test]
    fn series_group_by_phase_in_order_of_p_and_drop_non_positive() {
        let s = series(&sample(), |p| p.us_per_rank);
        assert_eq!(
            s,
            vec![
                (
                    "init".to_string(),
                    vec![(256.0, 157.5), (1024.0, 175.1), (4096.0, 419.0)]
                ),
                (
                    "restart read".to_string(),
                    vec![(256.0, 20.2), (4096.0, 62.9)]
                ),
            ]
        );
        // The zero bytes at P=1024 cannot be drawn on a log axis.
        let b = series(&sample(), |p| p.bytes_per_rank);
        assert_eq!(b[0].1, vec![(256.0, 1142.0), (4096.0, 1167.0)]);
    }

    #[test]
    fn log_range_spans_whole_decades() {
        assert_eq!(log_range([20.2, 419.0, 157.5]), 10.0..1000.0);
        assert_eq!(log_range([100.0, 1000.0]), 100.0..1000.0);
        assert_eq!(log_range([0.5, 8.0]), 0.1..10.0);
        // One value on a power of ten still gets a decade.
        assert_eq!(log_range([100.0]), 100.0..1000.0);
        assert_eq!(log_range([0.0, -3.0, f64::NAN]), 1.0..10.0);
    }

    #[test]
    fn ranks_range_leaves_room_around_the_measured_p() {
        assert_eq!(ranks_range(&sample()), 204.8..5120.0);
    }

    #[test]
    fn ratio_is_cost_at_large_p_over_small_p() {
        let r = ratio(&sample(), "init", 256, 4096).unwrap();
        assert!((r - 419.0 / 157.5).abs() < 1e-12, "{r}");
        assert_eq!(ratio(&sample(), "init", 64, 4096), None);
        assert_eq!(ratio(&sample(), "complete", 256, 4096), None);
    }

    #[test]
    fn draws_a_png_with_both_panels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scale.png");
        draw(&sample(), "scale test", &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        // The IHDR chunk: width and height as big-endian u32.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((w, h), SIZE);
    }
}
