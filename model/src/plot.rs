//! `sonda services --plot DIR`: SVG pictures of each class's demand distributions with
//! the fitted curve, drawn with `plotters` (SVG backend only).
//!
//! One picture per demand (CPU, blocked, wall time of a unit of work), one series per
//! class: its measured distribution function as a step line, and the family that fits
//! it best as a dashed curve of the same colour. Distribution functions rather than
//! histograms because they need no choice of bins, show a fit's error directly as
//! the vertical gap the KS distance measures, and keep the zero values (calls that never
//! blocked) as the jump at 0 a density would hide. The horizontal axis ends at the
//! largest 99th percentile of the classes, so one long tail does not squash the rest;
//! a class whose values are all 0 (or that has none) still has its series, flat.
//!
//! A class is a method with outermost calls (depth 1), the classes of `sonda model`.

use plotters::prelude::*;

use crate::fit::{fit, Fits};
use crate::join::CallRecord;
use crate::parts::Parts;
use crate::summary::sorted;

/// One SVG picture: its file name and its text.
#[derive(Clone, Debug)]
pub struct Plot {
    /// The file name (`cpu.svg`, `blocked.svg`, `wall.svg`).
    pub name: String,
    /// The SVG document.
    pub svg: String,
}

impl Plot {
    /// Whether `name` is one the pictures get: what an old plot directory may hold to
    /// be replaced.
    pub fn is_plot_name(name: &std::ffi::OsStr) -> bool {
        DEMANDS
            .iter()
            .any(|d| name == format!("{}.svg", d.key).as_str())
    }
}

/// One demand a picture shows.
struct Demand {
    key: &'static str,
    title: &'static str,
    of: fn(&Parts) -> u64,
}

const DEMANDS: [Demand; 3] = [
    Demand {
        key: "cpu",
        title: "CPU demand per call (on a CPU, steal included)",
        of: Parts::on_cpu,
    },
    Demand {
        key: "blocked",
        title: "Blocked time per call (sleeping or in I/O)",
        of: Parts::blocked,
    },
    Demand {
        key: "wall",
        title: "Wall time per call",
        of: wall,
    },
];

fn wall(p: &Parts) -> u64 {
    p.wall
}

/// Picture size (pixels).
const SIZE: (u32, u32) = (900, 560);

/// Distinct colours, one per class (a palette that stays apart for colour-blind
/// readers: Okabe and Ito), repeated past eight classes.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// Points of a fitted curve.
const CURVE_POINTS: usize = 200;

/// One class's values of one demand, in ms, sorted, and their fits.
struct Series<'a> {
    label: &'a str,
    ms: Vec<f64>,
    fits: Fits,
}

/// The pictures of `calls` (label, calls of that method), classes in the given order.
/// Methods without outermost calls are not classes and get no series.
pub fn plots(calls: &[(&str, &[CallRecord])]) -> Result<Vec<Plot>, String> {
    DEMANDS
        .iter()
        .map(|d| {
            let series: Vec<Series> = calls
                .iter()
                .filter(|(_, c)| c.iter().any(|c| c.depth == 1))
                .map(|(label, c)| {
                    let s = sorted(
                        c.iter()
                            .filter(|c| c.depth == 1)
                            .map(|c| (d.of)(&c.inclusive) as f64 / 1e9),
                    );
                    Series {
                        label,
                        ms: s.iter().map(|x| x * 1e3).collect(),
                        fits: fit(&s),
                    }
                })
                .collect();
            Ok(Plot {
                name: format!("{}.svg", d.key),
                svg: draw(d.title, &series)?,
            })
        })
        .collect()
}

/// The horizontal axis's end (ms): the largest 99th percentile, at least a little.
fn x_end(series: &[Series]) -> f64 {
    let p99 = series
        .iter()
        .filter(|s| !s.ms.is_empty())
        .map(|s| s.ms[((s.ms.len() - 1) as f64 * 0.99).round() as usize])
        .fold(0.0, f64::max);
    if p99 > 0.0 && p99.is_finite() {
        p99 * 1.05
    } else {
        1.0
    }
}

/// The measured distribution function as steps: at each distinct value, from the
/// share below it to the share at or below it.
fn steps(ms: &[f64], end: f64) -> Vec<(f64, f64)> {
    let n = ms.len() as f64;
    let mut points = vec![(0.0, 0.0)];
    let mut i = 0;
    while i < ms.len() && ms[i] <= end {
        let x = ms[i];
        let mut j = i;
        while j < ms.len() && ms[j] == x {
            j += 1;
        }
        points.push((x, i as f64 / n));
        points.push((x, j as f64 / n));
        i = j;
    }
    let last = points.last().map_or(0.0, |p| p.1);
    points.push((end, last));
    points
}

/// The best fit's distribution function over `(0, end]`, with the values at 0 as a
/// jump at the origin (the fits are of the positive values). `None` when nothing fits.
fn curve(fits: &Fits, end: f64) -> Option<(String, Vec<(f64, f64)>)> {
    let best = fits.best()?;
    let z = fits.zero_fraction;
    let points = (0..=CURVE_POINTS)
        .map(|i| {
            let x = end * i as f64 / CURVE_POINTS as f64;
            let f = if x > 0.0 {
                best.params.cdf(x / 1e3).unwrap_or(0.0)
            } else {
                0.0
            };
            (x, z + (1.0 - z) * f)
        })
        .collect();
    Some((best.family.key().to_string(), points))
}

fn draw(title: &str, series: &[Series]) -> Result<String, String> {
    let end = x_end(series);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| format!("cannot draw {title}: {e}");
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..end, 0.0..1.0)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("ms")
            .y_desc("share of calls at or below")
            .draw()
            .map_err(e)?;
        for (i, s) in series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(steps(&s.ms, end), colour.stroke_width(2)))
                .map_err(e)?
                .label(format!("{} (measured, {} calls)", s.label, s.ms.len()))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            if let Some((family, points)) = curve(&s.fits, end) {
                chart
                    .draw_series(DashedLineSeries::new(points, 6, 4, colour.stroke_width(1)))
                    .map_err(e)?
                    .label(format!("{} ({family} fit)", s.label))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(1))
                    });
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_rise_at_each_value_and_stop_at_the_end() {
        let s = steps(&[1.0, 1.0, 2.0, 5.0], 3.0);
        assert_eq!(
            s,
            vec![
                (0.0, 0.0),
                (1.0, 0.0),
                (1.0, 0.5),
                (2.0, 0.5),
                (2.0, 0.75),
                (3.0, 0.75)
            ]
        );
        assert_eq!(steps(&[], 1.0), vec![(0.0, 0.0), (1.0, 0.0)]);
    }

    #[test]
    fn the_axis_ends_past_the_largest_99th_percentile() {
        let s = |ms: Vec<f64>| Series {
            label: "x",
            fits: fit(&[]),
            ms,
        };
        assert_eq!(x_end(&[s(vec![]), s(vec![0.0])]), 1.0);
        let long: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert!((x_end(&[s(vec![1.0]), s(long)]) - 990.0 * 1.05).abs() < 1e-9);
    }

    #[test]
    fn a_plot_name_is_one_of_the_demands() {
        assert!(Plot::is_plot_name("cpu.svg".as_ref()));
        assert!(Plot::is_plot_name("wall.svg".as_ref()));
        assert!(!Plot::is_plot_name("cpu.svg.tmp".as_ref()));
        assert!(!Plot::is_plot_name("trace.prv".as_ref()));
    }
}
