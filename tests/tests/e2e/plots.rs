//! `sonda services --plot DIR`: the SVG pictures parsed as XML, each held to what a
//! reader needs of it: a title, two axes with numbered ticks and named units, and one
//! measured series per class (a line of its own colour, named in the legend with its
//! calls) beside its fitted curve. Called by the tests that record ServiceDemo.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};
use sonda_tests::*;

/// A polyline's points (SVG pixels).
type Points = Vec<(f64, f64)>;

/// What one picture holds, as parsed.
#[derive(Debug, Default)]
struct Svg {
    texts: Vec<String>,
    /// Polylines by (stroke colour, stroke width): their point lists.
    lines: BTreeMap<(String, String), Vec<Points>>,
}

fn parse(path: &Path) -> Svg {
    let text = std::fs::read_to_string(path).unwrap();
    let mut r = Reader::from_str(&text);
    let mut svg = Svg::default();
    let mut root = false;
    let mut in_text = false;
    loop {
        match r.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let attr = |k: &str| {
                    e.try_get_attribute(k).unwrap().map(|a| {
                        a.normalized_value(XmlVersion::Implicit1_0)
                            .unwrap()
                            .into_owned()
                    })
                };
                match e.name().into_inner() {
                    "svg" => {
                        root = true;
                        assert_eq!(attr("xmlns").as_deref(), Some("http://www.w3.org/2000/svg"));
                    }
                    "text" => in_text = true,
                    "polyline" => {
                        let points = attr("points")
                            .unwrap()
                            .split_whitespace()
                            .map(|p| {
                                let (x, y) = p.split_once(',').unwrap();
                                (x.parse().unwrap(), y.parse().unwrap())
                            })
                            .collect();
                        svg.lines
                            .entry((attr("stroke").unwrap(), attr("stroke-width").unwrap()))
                            .or_default()
                            .push(points);
                    }
                    _ => {}
                }
            }
            Ok(Event::Text(t)) if in_text => {
                let t = t.xml_content(XmlVersion::Implicit1_0).trim().to_string();
                if !t.is_empty() {
                    svg.texts.push(t);
                }
            }
            Ok(Event::End(e)) if e.name().into_inner() == "text" => in_text = false,
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("{}: not XML: {e}", path.display()),
        }
    }
    assert!(root, "{}: no <svg> root", path.display());
    svg
}

/// Runs `sonda services TRACE --plot DIR` and checks its three pictures: each of the
/// `classes` (method labels) has one measured series.
pub fn check_plots(trace: &Path, dir: &Path, classes: &[String]) {
    let out = run(Command::new(sonda())
        .arg("services")
        .arg(trace)
        .arg("--plot")
        .arg(dir));
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (name, title) in [
        ("cpu.svg", "CPU demand per call"),
        ("blocked.svg", "Blocked time per call"),
        ("wall.svg", "Wall time per call"),
    ] {
        let path = dir.join(name);
        let svg = parse(&path);
        let has = |t: &str| svg.texts.iter().any(|x| x == t);
        assert!(
            svg.texts.iter().any(|t| t.starts_with(title)),
            "{name}: no title: {:?}",
            svg.texts
        );
        // Axes: their names, and numbered ticks; the vertical one a share, 0 to 1.
        assert!(has("ms") && has("share of calls at or below"), "{name}");
        let ticks: Vec<f64> = svg.texts.iter().filter_map(|t| t.parse().ok()).collect();
        assert!(
            ticks.contains(&0.0) && ticks.contains(&1.0) && ticks.len() >= 6,
            "{name}: ticks {ticks:?}"
        );
        // The measured series: 2 px lines, one colour per class, each drawn once in
        // the plot and once in the legend.
        let measured: Vec<_> = svg.lines.iter().filter(|((_, w), _)| w == "2").collect();
        assert_eq!(
            measured.len(),
            classes.len(),
            "{name}: {} measured series for {} classes",
            measured.len(),
            classes.len()
        );
        let mut fitted_colours = 0;
        for ((colour, _), lines) in &measured {
            assert_eq!(lines.len(), 2, "{name}: {colour}: {lines:?}");
            let series = lines.iter().max_by_key(|l| l.len()).unwrap();
            // A distribution function: never falls (SVG's y grows downwards).
            assert!(series.len() > 3, "{name}: {colour}: {series:?}");
            assert!(
                series
                    .windows(2)
                    .all(|w| w[1].1 <= w[0].1 && w[1].0 >= w[0].0),
                "{name}: {colour} is not a distribution function"
            );
            // Its fitted curve: the same colour, 1 px (dashed: many pieces).
            let fitted = svg.lines.get(&(colour.clone(), "1".to_string()));
            if fitted.is_some_and(|f| f.len() > 2) {
                fitted_colours += 1;
            }
        }
        // A fitted curve for each fit the legend names; every class has one, except
        // in blocked.svg a class that never blocked (nothing positive to fit).
        let fits = svg.texts.iter().filter(|t| t.ends_with(" fit)")).count();
        assert_eq!(
            fitted_colours, fits,
            "{name}: curves drawn and named differ"
        );
        if name != "blocked.svg" {
            assert_eq!(fits, classes.len(), "{name}: {:?}", svg.texts);
        }
        for class in classes {
            assert!(
                svg.texts.iter().any(|t| t
                    .strip_prefix(&format!("{class} (measured, "))
                    .and_then(|t| t.strip_suffix(" calls)"))
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| n > 0)),
                "{name}: no legend entry for {class}: {:?}",
                svg.texts
            );
        }
    }
}
