//! Score curves as PNG files (plotters, bitmap backend).
//!
//! Text needs a font. plotters' `ttf` feature would find system fonts through fontconfig; to
//! keep the build free of C font libraries we use its pure-Rust `ab_glyph` renderer and load a
//! TrueType file ourselves (DejaVu Sans from Debian's `fonts-dejavu-core`, or `$O2O_FONT`).

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the font is looked for, after `$O2O_FONT`.
const FONT_FILES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Register a sans-serif font with plotters once; the error says what to install.
fn ensure_font() -> Result<()> {
    static FONT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let r = FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> =
            std::env::var_os("O2O_FONT").map(PathBuf::from).into_iter().chain(FONT_FILES.iter().map(PathBuf::from)).collect();
        for path in &candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps a 'static reference to the font data: load it once, keep it forever.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(path.clone());
                }
            }
        }
        Err(format!(
            "no TrueType font found for the plot labels (looked at $O2O_FONT and {}); install Debian's fonts-dejavu-core",
            FONT_FILES.join(", ")
        ))
    });
    r.as_ref().map(|_| ()).map_err(|e| anyhow!("{e}"))
}

/// One line of a plot: a label, a colour index, the points, and whether it is a thin seed line.
pub struct Line {
    /// Legend text, if any.
    pub label: Option<String>,
    /// Index into the palette.
    pub color: usize,
    /// The curve's (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// Drawn thin and light (single seeds behind a mean).
    pub faint: bool,
}

/// Draw `lines` into a `width`×`height` PNG at `path` (written to a temporary file, then renamed).
pub fn plot_curves(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    size: (u32, u32),
) -> Result<()> {
    ensure_font()?;
    let points = lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points {
        (x0, x1, y0, y1) = (x0.min(*x), x1.max(*x), y0.min(*y), y1.max(*y));
    }
    if x0 > x1 {
        bail!("nothing to plot for {title}");
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    let pad = ((y1 - y0) * 0.05).max(1e-6);
    let (y0, y1) = (y0 - pad, y1 + pad);

    {
        // The bitmap backend picks the encoder from the file extension: draw to `x.tmp.png`.
        let tmp_png = path.with_extension("tmp.png");
        let root = BitMapBackend::new(&tmp_png, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(|e| anyhow!("{e}"))?;
        let mut labelled = false;
        for line in lines {
            let color = Palette99::pick(line.color).mix(if line.faint { 0.3 } else { 1.0 });
            let style = color.stroke_width(if line.faint { 1 } else { 3 });
            let series =
                chart.draw_series(LineSeries::new(line.points.iter().copied(), style)).map_err(|e| anyhow!("{e}"))?;
            if let Some(label) = &line.label {
                labelled = true;
                series
                    .label(label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
            }
        }
        if labelled {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
        }
        root.present().map_err(|e| anyhow!("cannot write {}: {e}", tmp_png.display()))?;
        std::fs::rename(&tmp_png, path)
            .with_context(|| format!("cannot move {} to {}", tmp_png.display(), path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png_with_drawn_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("curves.png");
        let lines = vec![
            Line {
                label: Some("iql".into()),
                color: 0,
                points: vec![(0.0, 0.0), (10.0, 50.0), (20.0, 80.0)],
                faint: false,
            },
            Line { label: None, color: 0, points: vec![(0.0, 5.0), (10.0, 40.0), (20.0, 90.0)], faint: true },
        ];
        plot_curves(&p, "hopper", "grad_step", "normalized score", &lines, (400, 300)).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height as big-endian u32 at bytes 16..24.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 400);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 300);
        assert!(!d.path().join("curves.tmp.png").exists());
    }
}
