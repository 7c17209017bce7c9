//! The two PNG charts: bytes per set bit against density, and time per
//! workload per system.

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::Res;

/// Registers a font for the charts' text; `false` if no font file was found
/// (then the charts are skipped with a message).
pub fn load_font() -> bool {
    const CANDIDATES: [&str; 4] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ];
    for path in CANDIDATES {
        if let Ok(bytes) = std::fs::read(path) {
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
        }
    }
    false
}

/// One line of the size chart: `(density, bytes per set bit)` points.
pub struct Curve {
    /// Legend text.
    pub name: String,
    /// Points with a finite, positive value.
    pub points: Vec<(f64, f64)>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Chart (a): bytes per set bit against density, both axes logarithmic.
pub fn sizes(path: &Path, title: &str, curves: &[Curve]) -> Res<()> {
    let all: Vec<(f64, f64)> = curves.iter().flat_map(|c| c.points.iter().copied()).collect();
    let (xmin, xmax) = bounds(all.iter().map(|p| p.0));
    let (ymin, ymax) = bounds(all.iter().map(|p| p.1));
    let root = BitMapBackend::new(path, (1000, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin / 1.5..xmax * 1.5).log_scale(), (ymin / 1.5..ymax * 1.5).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("density (fraction of bits set)")
        .y_desc("bytes per set bit")
        .x_label_formatter(&|x| format!("{x:.0e}"))
        .y_label_formatter(&|y| if *y >= 1.0 { format!("{y:.0}") } else { format!("{y:.2}") })
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(c.points.iter().copied(), color.stroke_width(2)))?
            .label(c.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(c.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Chart (b): median time per workload (groups) per system (bars), in
/// milliseconds on a logarithmic axis. `values[w][s]` is workload `w`,
/// system `s`; `None` draws no bar.
pub fn times(path: &Path, title: &str, workloads: &[String], systems: &[&str], values: &[Vec<Option<f64>>]) -> Res<()> {
    let slot = systems.len() + 1;
    let segments = workloads.len() * slot;
    let (ymin, ymax) = bounds(values.iter().flatten().flatten().copied());
    let floor = ymin / 3.0;
    let root = BitMapBackend::new(path, (1400, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..segments).into_segmented(), (floor..ymax * 3.0).log_scale())?;
    let names: Vec<String> = workloads.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(segments + 1)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(j) if j % slot == slot / 2 => names.get(j / slot).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("milliseconds (median)")
        .y_label_formatter(&|y| if *y >= 1.0 { format!("{y:.0}") } else { format!("{y:.0e}") })
        .label_style(("sans-serif", 13))
        .draw()?;
    for (s, name) in systems.iter().enumerate() {
        let color = COLORS[s % COLORS.len()];
        let bars: Vec<Rectangle<(SegmentValue<usize>, f64)>> = values
            .iter()
            .enumerate()
            .filter_map(|(w, row)| row[s].map(|v| (w, v)))
            .map(|(w, v)| {
                let x = w * slot + s;
                Rectangle::new([(SegmentValue::Exact(x), floor), (SegmentValue::Exact(x + 1), v)], color.filled())
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() {
        (lo, hi)
    } else {
        (1.0, 10.0)
    }
}
