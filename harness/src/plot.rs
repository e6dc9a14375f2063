//! The campaign matrix as a PNG (plotters): one row per scenario, one
//! column per scheme, each cell coloured by its outcome class and marked
//! when it differs from the expectation.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::campaign::{Cell, Report};
use crate::outcome::Class;
use scr::CopyType;

const FONT: &[u8] = include_bytes!("../../faultsim/assets/DejaVuSans.ttf");

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
                .map_err(|_| "the bundled font does not load".to_string())
        })
        .clone()
}

/// The colour of an outcome class.
fn colour(class: &str) -> RGBColor {
    match class {
        c if c == Class::Cache.name() => RGBColor(120, 190, 120),
        c if c == Class::Rebuilt.name() => RGBColor(90, 160, 210),
        c if c == Class::Fetched.name() => RGBColor(160, 130, 210),
        c if c == Class::Scratch.name() => RGBColor(220, 220, 220),
        c if c == Class::Loss.name() => RGBColor(240, 190, 90),
        c if c == Class::Died.name() => RGBColor(200, 200, 160),
        c if c == Class::Error.name() => RGBColor(230, 150, 120),
        c if c == Class::SilentCorruption.name() || c == Class::Hang.name() => {
            RGBColor(200, 30, 30)
        }
        _ => RGBColor(255, 255, 255),
    }
}

/// Draw `report` as a matrix into `path`.
pub fn matrix(report: &Report, path: &Path) -> Result<(), String> {
    register_font()?;
    let schemes: Vec<CopyType> = CopyType::ALL
        .into_iter()
        .filter(|s| report.cells.iter().any(|c| c.scheme == *s))
        .collect();
    let mut rows: BTreeMap<&str, BTreeMap<CopyType, &Cell>> = BTreeMap::new();
    for c in &report.cells {
        rows.entry(&c.scenario).or_default().insert(c.scheme, c);
    }
    let (label_w, col_w, row_h, top, legend_h) = (330i32, 150i32, 20i32, 60i32, 70i32);
    let width = (label_w + col_w * schemes.len().max(1) as i32 + 20) as u32;
    let height = (top + row_h * rows.len().max(1) as i32 + legend_h) as u32;
    let root = BitMapBackend::new(path, (width.max(640), height)).into_drawing_area();
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let c = report.counts();
    let title = format!(
        "campaign {}: {} runs, {} as expected, {} SILENT CORRUPTION, {} HANG",
        report.campaign, c.run, c.expected, c.silent, c.hang
    );
    root.draw(&Text::new(title, (10, 10), ("sans-serif", 18).into_font()))
        .map_err(e)?;
    for (j, s) in schemes.iter().enumerate() {
        let x = label_w + col_w * j as i32;
        root.draw(&Text::new(
            s.as_str(),
            (x + 8, top - 22),
            ("sans-serif", 15).into_font(),
        ))
        .map_err(e)?;
    }
    for (i, (name, cells)) in rows.iter().enumerate() {
        let y = top + row_h * i as i32;
        root.draw(&Text::new(
            name.to_string(),
            (6, y + 4),
            ("sans-serif", 12).into_font(),
        ))
        .map_err(e)?;
        for (j, s) in schemes.iter().enumerate() {
            let x = label_w + col_w * j as i32;
            let Some(cell) = cells.get(s) else { continue };
            let fill = if cell.verdict == "skipped" {
                RGBColor(250, 250, 250)
            } else {
                colour(&cell.class)
            };
            root.draw(&Rectangle::new(
                [(x + 1, y + 1), (x + col_w - 1, y + row_h - 1)],
                fill.filled(),
            ))
            .map_err(e)?;
            if !cell.ok() {
                root.draw(&Rectangle::new(
                    [(x + 1, y + 1), (x + col_w - 1, y + row_h - 1)],
                    ShapeStyle::from(&BLACK).stroke_width(3),
                ))
                .map_err(e)?;
            }
            // The last launch's token, and the loop's end when it did not
            // simply complete.
            let (tokens, end) = cell.outcome.split_once('|').unwrap_or((&cell.outcome, ""));
            let mut last = tokens.rsplit(',').next().unwrap_or("").trim().to_string();
            let end = end.trim();
            if !end.is_empty() && end != "completed" {
                last = if last.is_empty() {
                    end.to_string()
                } else {
                    format!("{last} | {end}")
                };
            }
            let mark = if cell.ok() { "" } else { " ✗" };
            root.draw(&Text::new(
                format!("{last}{mark}"),
                (x + 6, y + 4),
                ("sans-serif", 12).into_font(),
            ))
            .map_err(e)?;
        }
    }
    let ly = top + row_h * rows.len() as i32 + 15;
    let mut lx = 10;
    for class in Class::ALL {
        root.draw(&Rectangle::new(
            [(lx, ly), (lx + 14, ly + 14)],
            colour(class.name()).filled(),
        ))
        .map_err(e)?;
        root.draw(&Text::new(
            class.name(),
            (lx + 18, ly + 1),
            ("sans-serif", 12).into_font(),
        ))
        .map_err(e)?;
        lx += 18 + 9 * class.name().len() as i32 + 14;
    }
    root.draw(&Text::new(
        "last launch's restart per cell; framed ✗: not as expected",
        (10, ly + 24),
        ("sans-serif", 12).into_font(),
    ))
    .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
