//! The campaign matrix as PNG pages (plotters): one row per scenario in
//! natural order (`random-2` before `random-10`), one column per scheme,
//! each cell coloured by its outcome class. A cell not as expected gets a
//! red frame and a red cross, and the list under the matrix says which and
//! why. A large campaign is split into pages of at most [`ROWS_PER_PAGE`]
//! rows (`campaign-X.png`, `campaign-X-p2.png`, ...), so each image stays
//! readable; text that does not fit a cell is cut with "…", never by the
//! cell's edge.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::campaign::{Cell, Report};
use crate::outcome::Class;
use scr::CopyType;

const FONT: &[u8] = include_bytes!("../../faultsim/assets/DejaVuSans.ttf");

/// Rows of one page: about 1,300 pixels high, readable without zooming.
pub const ROWS_PER_PAGE: usize = 50;

/// Failures listed under one page's matrix (the Markdown report has all).
const FAILURES_LISTED: usize = 12;

const ROW_H: i32 = 22;
const COL_W: i32 = 180;
const TOP: i32 = 64;
const TEXT: u32 = 12;

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
        c if c == Class::SilentCorruption.name() => RGBColor(120, 0, 0),
        c if c == Class::Hang.name() => RGBColor(40, 40, 40),
        _ => RGBColor(255, 255, 255),
    }
}

/// The mark of a cell not as expected: frame, cross and list bullet.
pub const FAIL_RED: RGBColor = RGBColor(220, 0, 0);

/// Compare names as a person sorts them: runs of digits by their value
/// (`random-2` < `random-10`), the rest as text.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (dx, dy) = (&x[..n], &y[..m]);
                // Compare values without parsing (any length): strip leading
                // zeros, then the longer run is larger, then byte order.
                let tx = &dx[dx.iter().take_while(|c| **c == b'0').count()..];
                let ty = &dy[dy.iter().take_while(|c| **c == b'0').count()..];
                let o = tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(q);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// The scenario names of `report` in natural order, each with its cells.
pub fn rows(report: &Report) -> Vec<(&str, BTreeMap<CopyType, &Cell>)> {
    let mut rows: BTreeMap<&str, BTreeMap<CopyType, &Cell>> = BTreeMap::new();
    for c in &report.cells {
        rows.entry(&c.scenario).or_default().insert(c.scheme, c);
    }
    let mut v: Vec<_> = rows.into_iter().collect();
    v.sort_by(|a, b| natural_cmp(a.0, b.0));
    v
}

/// The width of `text` in the plot's font at `size` points.
fn text_w(text: &str, size: u32) -> i32 {
    ("sans-serif", size).into_font().box_size(text).map_or(
        text.chars().count() as i32 * size as i32 * 6 / 10,
        |(w, _)| w as i32,
    )
}

/// `text` cut with "…" to fit `width` pixels.
fn fit(text: &str, width: i32, size: u32) -> String {
    if text_w(text, size) <= width {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut n = chars.len();
    while n > 0 {
        n -= 1;
        let t: String = chars[..n].iter().collect::<String>() + "…";
        if text_w(&t, size) <= width {
            return t;
        }
    }
    "…".to_string()
}

/// What a cell shows: the last launch's token, and the loop's end when it
/// did not simply complete.
fn cell_text(cell: &Cell) -> String {
    let (tokens, end) = cell.outcome.split_once('|').unwrap_or((&cell.outcome, ""));
    let last = tokens.rsplit(',').next().unwrap_or("").trim().to_string();
    let end = end.trim();
    if end.is_empty() || end == "completed" {
        last
    } else if last.is_empty() {
        end.to_string()
    } else {
        format!("{last} | {end}")
    }
}

/// The PNG file of page `page` (0-based) of a matrix written to `path`.
pub fn page_path(path: &Path, page: usize) -> PathBuf {
    if page == 0 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}-p{}.png", page + 1))
}

/// The size in pixels of one page and its layout.
struct Layout {
    label_w: i32,
    width: u32,
    height: u32,
    schemes: Vec<CopyType>,
}

fn layout(report: &Report, rows: &[(&str, BTreeMap<CopyType, &Cell>)]) -> Layout {
    let schemes: Vec<CopyType> = CopyType::ALL
        .into_iter()
        .filter(|s| report.cells.iter().any(|c| c.scheme == *s))
        .collect();
    let label_w = rows
        .iter()
        .map(|(n, _)| text_w(n, TEXT))
        .max()
        .unwrap_or(0)
        .clamp(100, 420)
        + 16;
    let failures = rows
        .iter()
        .flat_map(|(_, cells)| cells.values())
        .filter(|c| !c.ok())
        .count()
        .min(FAILURES_LISTED + 1) as i32;
    let width = (label_w + COL_W * schemes.len().max(1) as i32 + 20).max(900);
    // Legend (two lines at most), its note, then the failures' list.
    let height = TOP + ROW_H * rows.len().max(1) as i32 + 90 + 18 * failures + 10;
    Layout {
        label_w,
        width: width as u32,
        height: height as u32,
        schemes,
    }
}

/// Draw `report` as matrix pages: the first into `path`, further ones
/// beside it (`<stem>-p2.png`, ...; stale further pages of an earlier,
/// larger campaign are removed). Returns the files written.
pub fn matrix(report: &Report, path: &Path) -> Result<Vec<PathBuf>, String> {
    register_font()?;
    let all = rows(report);
    let pages: Vec<&[(&str, BTreeMap<CopyType, &Cell>)]> = if all.is_empty() {
        vec![&all[..]]
    } else {
        all.chunks(ROWS_PER_PAGE).collect()
    };
    let mut written = Vec::new();
    for (i, rows) in pages.iter().enumerate() {
        let file = page_path(path, i);
        let l = layout(report, rows);
        {
            let root = BitMapBackend::new(&file, (l.width, l.height)).into_drawing_area();
            draw_page(&root, report, rows, &l, (i, pages.len(), i * ROWS_PER_PAGE))?;
            root.present()
                .map_err(|e| format!("{}: {e}", file.display()))?;
        }
        written.push(file);
    }
    // Bounded: a campaign has at most a few thousand rows, so pages.
    for k in pages.len()..10_000 {
        let stale = page_path(path, k);
        if std::fs::remove_file(&stale).is_err() {
            break;
        }
    }
    Ok(written)
}

/// One page into an RGB buffer (tests look at its pixels): returns the
/// buffer and its width and height.
pub fn page_pixels(report: &Report, page: usize) -> Result<(Vec<u8>, u32, u32), String> {
    register_font()?;
    let all = rows(report);
    let pages: Vec<_> = all.chunks(ROWS_PER_PAGE.max(1)).collect();
    let rows = pages
        .get(page)
        .ok_or_else(|| format!("no page {}", page + 1))?;
    let l = layout(report, rows);
    let mut buf = vec![0u8; (l.width * l.height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (l.width, l.height)).into_drawing_area();
        draw_page(
            &root,
            report,
            rows,
            &l,
            (page, pages.len(), page * ROWS_PER_PAGE),
        )?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok((buf, l.width, l.height))
}

/// The pixel rectangle of row `row` (on its page), column `col`.
pub fn cell_box(report: &Report, row: usize, col: usize) -> ((i32, i32), (i32, i32)) {
    let all = rows(report);
    let page = &all[(row / ROWS_PER_PAGE) * ROWS_PER_PAGE..];
    let page = &page[..page.len().min(ROWS_PER_PAGE)];
    let l = layout(report, page);
    let x = l.label_w + COL_W * col as i32;
    let y = TOP + ROW_H * (row % ROWS_PER_PAGE) as i32;
    ((x, y), (x + COL_W, y + ROW_H))
}

type Rows<'a> = [(&'a str, BTreeMap<CopyType, &'a Cell>)];

fn draw_page<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    report: &Report,
    rows: &Rows<'_>,
    l: &Layout,
    (page, pages, first): (usize, usize, usize),
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = |size: u32| ("sans-serif", size).into_font();
    root.fill(&WHITE).map_err(e)?;
    let c = report.counts();
    let mut title = format!(
        "campaign {}: {} runs, {} as expected, {} SILENT CORRUPTION, {} HANG",
        report.campaign, c.run, c.expected, c.silent, c.hang
    );
    if pages > 1 {
        title += &format!(
            " — page {} of {} (scenarios {}–{})",
            page + 1,
            pages,
            first + 1,
            first + rows.len()
        );
    }
    root.draw(&Text::new(
        fit(&title, l.width as i32 - 20, 17),
        (10, 10),
        font(17),
    ))
    .map_err(e)?;
    for (j, s) in l.schemes.iter().enumerate() {
        let x = l.label_w + COL_W * j as i32;
        root.draw(&Text::new(s.as_str(), (x + 8, TOP - 22), font(15)))
            .map_err(e)?;
    }
    let mut failed: Vec<&Cell> = Vec::new();
    for (i, (name, cells)) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as i32;
        root.draw(&Text::new(
            fit(name, l.label_w - 10, TEXT),
            (6, y + 5),
            font(TEXT),
        ))
        .map_err(e)?;
        for (j, s) in l.schemes.iter().enumerate() {
            let x = l.label_w + COL_W * j as i32;
            let Some(cell) = cells.get(s) else { continue };
            let fill = if cell.verdict == "skipped" {
                RGBColor(250, 250, 250)
            } else {
                colour(&cell.class)
            };
            let (x0, y0, x1, y1) = (x + 1, y + 1, x + COL_W - 1, y + ROW_H - 1);
            root.draw(&Rectangle::new([(x0, y0), (x1, y1)], fill.filled()))
                .map_err(e)?;
            let mut room = COL_W - 12;
            if !cell.ok() {
                failed.push(cell);
                root.draw(&Rectangle::new(
                    [(x0 + 1, y0 + 1), (x1 - 1, y1 - 1)],
                    ShapeStyle::from(&FAIL_RED).stroke_width(3),
                ))
                .map_err(e)?;
                // A red cross in a white square at the cell's right end.
                let (cx0, cy0, cx1, cy1) = (x1 - 19, y0 + 3, x1 - 4, y1 - 3);
                root.draw(&Rectangle::new([(cx0, cy0), (cx1, cy1)], WHITE.filled()))
                    .map_err(e)?;
                for pts in [[(cx0, cy0), (cx1, cy1)], [(cx0, cy1), (cx1, cy0)]] {
                    root.draw(&PathElement::new(
                        pts.to_vec(),
                        ShapeStyle::from(&FAIL_RED).stroke_width(3),
                    ))
                    .map_err(e)?;
                }
                room -= 20;
            }
            let dark = [Class::SilentCorruption, Class::Hang].map(|c| colour(c.name()));
            let ink = if dark.contains(&fill) { WHITE } else { BLACK };
            root.draw(&Text::new(
                fit(&cell_text(cell), room, TEXT),
                (x + 6, y + 5),
                font(TEXT).color(&ink),
            ))
            .map_err(e)?;
        }
    }
    // The legend, wrapped to the page's width.
    let mut ly = TOP + ROW_H * rows.len() as i32 + 14;
    let mut lx = 10;
    for class in Class::ALL {
        let w = 18 + text_w(class.name(), TEXT) + 18;
        if lx + w > l.width as i32 - 10 {
            lx = 10;
            ly += 20;
        }
        root.draw(&Rectangle::new(
            [(lx, ly), (lx + 14, ly + 14)],
            colour(class.name()).filled(),
        ))
        .map_err(e)?;
        root.draw(&Text::new(class.name(), (lx + 18, ly + 1), font(TEXT)))
            .map_err(e)?;
        lx += w;
    }
    ly += 24;
    root.draw(&Rectangle::new(
        [(10, ly), (24, ly + 14)],
        ShapeStyle::from(&FAIL_RED).stroke_width(3),
    ))
    .map_err(e)?;
    root.draw(&Text::new(
        "red frame and ✗: not as expected (listed below); each cell shows the last launch's restart and how the loop ended",
        (30, ly + 1),
        font(TEXT),
    ))
    .map_err(e)?;
    ly += 22;
    for (k, cell) in failed.iter().enumerate() {
        let line = if k == FAILURES_LISTED {
            format!(
                "… and {} more: see campaign-{}.md",
                failed.len() - FAILURES_LISTED,
                report.campaign
            )
        } else {
            let why = if cell.why.is_empty() {
                format!("expected {}", cell.expected)
            } else {
                cell.why.clone()
            };
            format!(
                "✗ {} / {}: got {}; {}",
                cell.scenario, cell.scheme, cell.outcome, why
            )
        };
        root.draw(&Text::new(
            fit(&line, l.width as i32 - 20, TEXT),
            (10, ly),
            font(TEXT).color(&FAIL_RED),
        ))
        .map_err(e)?;
        ly += 18;
        if k == FAILURES_LISTED {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_naturally() {
        let mut v = vec![
            "random-10",
            "random-2",
            "random-1",
            "random-100",
            "a",
            "random-02",
        ];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            [
                "a",
                "random-1",
                "random-02",
                "random-2",
                "random-10",
                "random-100"
            ]
        );
        assert_eq!(natural_cmp("kill-node-2", "kill-node-2"), Ordering::Equal);
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis_to_fit() {
        register_font().unwrap();
        let t = fit(
            "scratch | retries; postrun saved 3 of 4 datasets",
            100,
            TEXT,
        );
        assert!(t.ends_with('…'), "{t}");
        assert!(text_w(&t, TEXT) <= 100, "{t}");
        assert_eq!(fit("cache:2", 100, TEXT), "cache:2");
    }

    #[test]
    fn further_pages_are_named_beside_the_first() {
        let p = Path::new("results/campaign-random.png");
        assert_eq!(page_path(p, 0), p);
        assert_eq!(page_path(p, 2), Path::new("results/campaign-random-p3.png"));
    }
}
