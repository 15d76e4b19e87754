//! `sonda model`: a JMT queueing model (JSIMgraph `.jsimg` XML) of the recorded run.
//!
//! ```text
//!              λ_c (Poisson)       PS, servers = CPUs       p_c           delay (infinite servers)
//!   Source ──────────────────▶ CPU ──────────────────────▶ Blocked ──────────────────▶ Sink
//!                               │            1 - p_c                                    ▲
//!                               └───────────────────────────────────────────────────────┘
//! ```
//!
//! - One open class per request method: a method with outermost calls (depth 1), its
//!   measured arrival rate as a Poisson source (`Exponential(λ)` inter-arrival times).
//! - `CPU`: processor sharing with as many servers as the machine's CPUs; each class's
//!   service time is its CPU demand per call (the CPU part of its outermost calls),
//!   the best fit among exponential, Erlang and lognormal (the families JMT and LINE's
//!   analytic solvers both read; a gamma fit is represented by the Erlang of the
//!   nearest integer shape), scaled to keep the measured mean exactly.
//! - `Blocked`: a delay station with the class's blocked time (`S + D`). Calls that
//!   never blocked skip it: the class goes there with probability `p_c` (the fraction
//!   of its calls with blocked time > 0) and its service time there is the fit of the
//!   positive blocked times, so the mean blocked time per call is kept.
//!
//! The approximation: a call's CPU bursts and sleeps interleave in reality, here they
//! are one CPU visit then one delay. In an open network of PS and delay stations
//! (product form) the mean response time does not depend on that order. Time waiting
//! for a CPU is not an input: the PS station predicts it. The recorded run had a
//! bounded worker pool and other threads (GC, JIT) using CPU; the model has neither.
//!
//! With [`ModelOptions::replayer`], service times are JMT `Replayer` distributions
//! reading the measured per-call samples instead (JMT only: other readers ignore or
//! refuse them). The sample files are written either way, one value in seconds a line.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::fit::{fit, Family, Params};
use crate::join::CallRecord;
use crate::summary::sorted;

/// The families a model uses.
pub const MODEL_FAMILIES: [Family; 3] = [Family::Exponential, Family::Erlang, Family::Lognormal];

/// How to build the model.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ModelOptions {
    /// Use JMT `Replayer` distributions over the measured samples.
    pub replayer: bool,
}

impl ModelOptions {
    /// Uses Replayer distributions.
    pub fn with_replayer(mut self, on: bool) -> ModelOptions {
        self.replayer = on;
        self
    }
}

/// A service time in the model.
#[derive(Clone, Debug, PartialEq)]
pub enum Service {
    /// A fitted distribution.
    Fitted(Params),
    /// A constant (all measured values equal, or too few to fit).
    Deterministic(f64),
    /// JMT's Replayer over a sample file.
    Replayer(PathBuf),
}

impl Service {
    /// The best fit of the model's families to the positive values of `sorted_s`, with
    /// their measured mean kept exactly: utilisations, and in a product-form network
    /// the mean response times, depend on the means alone. Exponential and Erlang fits
    /// are made from the mean already; a lognormal keeps its fitted `sigma` (the shape)
    /// and takes `mu = ln(mean) - sigma^2 / 2` (its maximum-likelihood `mu` gives the
    /// mean of a heavy-tailed sample a few percent off).
    fn from_samples(sorted_s: &[f64]) -> Service {
        let fits = fit(sorted_s);
        let pos: Vec<f64> = sorted_s.iter().copied().filter(|&x| x > 0.0).collect();
        let mean = pos.iter().sum::<f64>() / pos.len().max(1) as f64;
        match fits.best_of(&MODEL_FAMILIES) {
            Some(f) => Service::Fitted(match f.params {
                Params::Lognormal { sigma, .. } => Params::Lognormal {
                    mu: mean.ln() - sigma * sigma / 2.0,
                    sigma,
                },
                p => p,
            }),
            None => {
                if pos.len() > 1 && pos[0] != pos[pos.len() - 1] {
                    Service::Fitted(Params::Exponential { rate: 1.0 / mean })
                } else {
                    Service::Deterministic(mean)
                }
            }
        }
    }

    /// The mean (s), when known without reading a file.
    pub fn mean(&self) -> Option<f64> {
        match self {
            Service::Fitted(p) => Some(p.mean()),
            Service::Deterministic(t) => Some(*t),
            Service::Replayer(_) => None,
        }
    }
}

/// One class of the model.
#[derive(Clone, Debug)]
pub struct ModelClass {
    /// Its name: the method's label.
    pub name: String,
    /// Arrival rate (1/s).
    pub arrival_rate: f64,
    /// Measured mean CPU demand per call (s).
    pub cpu_mean: f64,
    /// CPU service time.
    pub cpu: Service,
    /// Fraction of calls that blocked.
    pub blocked_fraction: f64,
    /// Measured mean blocked time of the calls that blocked (s).
    pub blocked_mean: f64,
    /// Blocked time of those calls, when any did.
    pub blocked: Option<Service>,
    /// Measured mean wall time per call (s).
    pub wall_mean: f64,
    /// Calls measured.
    pub calls: u64,
    /// The per-call CPU samples file.
    pub cpu_samples: PathBuf,
    /// The per-call blocked samples file (positive values only).
    pub blocked_samples: PathBuf,
}

/// The model, ready to write.
#[derive(Clone, Debug)]
pub struct Model {
    /// Its name (the file name).
    pub name: String,
    /// CPUs: the PS station's servers.
    pub cpus: u16,
    /// The classes.
    pub classes: Vec<ModelClass>,
}

/// Builds the model of `calls` (label, finished calls) observed for `duration_s`,
/// with samples written next to `jsimg` in `STEM.samples/`.
pub fn build(
    jsimg: &Path,
    calls: &[(&str, &[CallRecord])],
    arrivals_per_s: &[(String, f64)],
    duration_s: f64,
    cpus: u16,
    opts: &ModelOptions,
) -> io::Result<Model> {
    let dir = samples_dir(jsimg);
    std::fs::create_dir_all(&dir)?;
    let dir = std::fs::canonicalize(&dir)?;
    let mut classes = Vec::new();
    for (i, (label, all)) in calls.iter().enumerate() {
        let top: Vec<&CallRecord> = all.iter().filter(|c| c.depth == 1).collect();
        if top.is_empty() {
            continue;
        }
        let cpu = sorted(top.iter().map(|c| c.inclusive.cpu as f64 / 1e9));
        let blocked = sorted(
            top.iter()
                .map(|c| c.inclusive.blocked() as f64 / 1e9)
                .filter(|&x| x > 0.0),
        );
        let stem = format!("{i:02}-{}", file_safe(label));
        let label = label.to_string();
        let cpu_samples = dir.join(format!("{stem}.cpu.txt"));
        let blocked_samples = dir.join(format!("{stem}.blocked.txt"));
        // Samples in call order, as Replayer replays them.
        write_samples(&cpu_samples, top.iter().map(|c| c.inclusive.cpu))?;
        write_samples(
            &blocked_samples,
            top.iter().map(|c| c.inclusive.blocked()).filter(|&b| b > 0),
        )?;
        let n = top.len() as f64;
        let rate = arrivals_per_s
            .iter()
            .find(|(l, _)| *l == label)
            .map_or(n / duration_s, |(_, r)| {
                *r * top.len() as f64 / all.len() as f64
            });
        let blocked_fraction = blocked.len() as f64 / n;
        let (cpu_service, blocked_service) = if opts.replayer {
            (
                Service::Replayer(cpu_samples.clone()),
                (!blocked.is_empty()).then(|| Service::Replayer(blocked_samples.clone())),
            )
        } else {
            (
                Service::from_samples(&cpu),
                (!blocked.is_empty()).then(|| Service::from_samples(&blocked)),
            )
        };
        classes.push(ModelClass {
            name: label.clone(),
            arrival_rate: rate,
            cpu_mean: cpu.iter().sum::<f64>() / n,
            cpu: cpu_service,
            blocked_fraction,
            blocked_mean: blocked.iter().sum::<f64>() / blocked.len().max(1) as f64,
            blocked: blocked_service,
            wall_mean: top.iter().map(|c| c.inclusive.wall as f64).sum::<f64>() / n / 1e9,
            calls: top.len() as u64,
            cpu_samples,
            blocked_samples,
        });
    }
    Ok(Model {
        name: jsimg
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model.jsimg".into()),
        cpus: cpus.max(1),
        classes,
    })
}

/// Builds the model of an analysed trace (see [`build`]): arrival rates and the
/// observation period of its whole-run figures.
pub fn model_of(
    analysis: &crate::analyze::Analysis,
    jsimg: &Path,
    opts: &ModelOptions,
) -> io::Result<Model> {
    let s = &analysis.services;
    let calls: Vec<(&str, &[CallRecord])> = analysis.calls().collect();
    let rates: Vec<(String, f64)> = s
        .whole
        .methods
        .iter()
        .map(|m| (m.method.clone(), m.arrival_rate_per_s))
        .collect();
    build(
        jsimg,
        &calls,
        &rates,
        s.whole.duration_s,
        s.trace.cpus,
        opts,
    )
}

/// `STEM.samples/` next to `STEM.jsimg`.
pub fn samples_dir(jsimg: &Path) -> PathBuf {
    jsimg.with_extension("samples")
}

fn file_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect()
}

fn write_samples(path: &Path, ns: impl Iterator<Item = u64>) -> io::Result<()> {
    let mut text = String::new();
    for v in ns {
        let _ = writeln!(text, "{:.9}", v as f64 / 1e9);
    }
    std::fs::write(path, text)
}

/// Escapes text for an XML attribute or element.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if c.is_control() => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

const SOURCE: &str = "Source";
const CPU: &str = "CPU";
const BLOCKED: &str = "Blocked";
const SINK: &str = "Sink";

fn num(x: f64) -> String {
    format!("{x:.12e}")
}

fn double(out: &mut String, name: &str, v: f64) {
    let _ = write!(
        out,
        r#"<subParameter classPath="java.lang.Double" name="{name}"><value>{}</value></subParameter>"#,
        num(v)
    );
}

/// A `ServiceTimeStrategy` sub-parameter for `s`.
fn strategy(out: &mut String, s: &Service) {
    out.push_str(r#"<subParameter classPath="jmt.engine.NetStrategies.ServiceStrategies.ServiceTimeStrategy" name="ServiceTimeStrategy">"#);
    let (class, name) = match s {
        Service::Fitted(Params::Exponential { .. }) => ("Exponential", "Exponential"),
        Service::Fitted(Params::Erlang { .. }) => ("Erlang", "Erlang"),
        Service::Fitted(Params::Gamma { .. }) => ("GammaDistr", "Gamma"),
        Service::Fitted(Params::Lognormal { .. }) => ("Lognormal", "Lognormal"),
        Service::Deterministic(_) => ("DeterministicDistr", "Deterministic"),
        Service::Replayer(_) => ("Replayer", "Replayer"),
    };
    let _ = write!(
        out,
        r#"<subParameter classPath="jmt.engine.random.{class}" name="{name}"/><subParameter classPath="jmt.engine.random.{class}Par" name="distrPar">"#
    );
    match s {
        Service::Fitted(Params::Exponential { rate }) => double(out, "lambda", *rate),
        Service::Fitted(Params::Erlang { phases, rate }) => {
            double(out, "alpha", *rate);
            let _ = write!(
                out,
                r#"<subParameter classPath="java.lang.Long" name="r"><value>{phases}</value></subParameter>"#
            );
        }
        Service::Fitted(Params::Gamma { shape, scale }) => {
            double(out, "alpha", *shape);
            double(out, "beta", *scale);
        }
        Service::Fitted(Params::Lognormal { mu, sigma }) => {
            double(out, "mu", *mu);
            double(out, "sigma", *sigma);
        }
        Service::Deterministic(t) => double(out, "t", *t),
        Service::Replayer(path) => {
            let _ = write!(
                out,
                r#"<subParameter classPath="java.lang.String" name="fileName"><value>{}</value></subParameter>"#,
                esc(&path.display().to_string())
            );
        }
    }
    out.push_str("</subParameter></subParameter>");
}

/// Routing of one class: (station, probability) pairs.
fn routing(out: &mut String, class: &str, dests: &[(&str, f64)]) {
    let _ = write!(out, "<refClass>{}</refClass>", esc(class));
    out.push_str(r#"<subParameter classPath="jmt.engine.NetStrategies.RoutingStrategies.EmpiricalStrategy" name="Probabilities"><subParameter array="true" classPath="jmt.engine.random.EmpiricalEntry" name="EmpiricalEntryArray">"#);
    for (station, p) in dests {
        let _ = write!(
            out,
            r#"<subParameter classPath="jmt.engine.random.EmpiricalEntry" name="EmpiricalEntry"><subParameter classPath="java.lang.String" name="stationName"><value>{}</value></subParameter><subParameter classPath="java.lang.Double" name="probability"><value>{}</value></subParameter></subParameter>"#,
            esc(station),
            num(*p)
        );
    }
    out.push_str("</subParameter></subParameter>");
}

fn router(
    out: &mut String,
    classes: &[ModelClass],
    dests: impl Fn(&ModelClass) -> Vec<(&'static str, f64)>,
) {
    out.push_str(r#"<section className="Router"><parameter array="true" classPath="jmt.engine.NetStrategies.RoutingStrategy" name="RoutingStrategy">"#);
    for c in classes {
        routing(out, &c.name, &dests(c));
    }
    out.push_str("</parameter></section>");
}

fn queue_section(out: &mut String, classes: &[ModelClass]) {
    out.push_str(r#"<section className="Queue"><parameter classPath="java.lang.Integer" name="size"><value>-1</value></parameter><parameter array="true" classPath="java.lang.String" name="dropStrategies">"#);
    for c in classes {
        let _ = write!(
            out,
            r#"<refClass>{}</refClass><subParameter classPath="java.lang.String" name="dropStrategy"><value>drop</value></subParameter>"#,
            esc(&c.name)
        );
    }
    out.push_str(r#"</parameter><parameter classPath="jmt.engine.NetStrategies.QueueGetStrategies.FCFSstrategy" name="FCFSstrategy"/><parameter array="true" classPath="jmt.engine.NetStrategies.QueuePutStrategy" name="QueuePutStrategy">"#);
    for c in classes {
        let _ = write!(
            out,
            r#"<refClass>{}</refClass><subParameter classPath="jmt.engine.NetStrategies.QueuePutStrategies.TailStrategy" name="TailStrategy"/>"#,
            esc(&c.name)
        );
    }
    out.push_str("</parameter></section>");
}

/// The model as JSIMgraph XML.
pub fn to_xml(m: &Model) -> String {
    let mut o = String::new();
    let blocked_used = m.classes.iter().any(|c| c.blocked.is_some());
    o.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
    let _ = writeln!(
        o,
        r#"<archive xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" name="{}" xsi:noNamespaceSchemaLocation="Archive.xsd">"#,
        esc(&m.name)
    );
    let _ = writeln!(
        o,
        r#"<sim disableStatisticStop="false" logDecimalSeparator="." logDelimiter=";" logPath="" logReplaceMode="0" maxEvents="-1" maxSamples="1000000" name="{}" polling="1.0" xsi:noNamespaceSchemaLocation="SIMmodeldefinition.xsd">"#,
        esc(&m.name)
    );
    for c in &m.classes {
        let _ = writeln!(
            o,
            r#"<userClass name="{}" priority="0" referenceSource="{SOURCE}" type="open"/>"#,
            esc(&c.name)
        );
    }
    // Source: Poisson arrivals per class, all to the CPU.
    let _ = write!(
        o,
        r#"<node name="{SOURCE}"><section className="RandomSource"><parameter array="true" classPath="jmt.engine.NetStrategies.ServiceStrategy" name="ServiceStrategy">"#
    );
    for c in &m.classes {
        let _ = write!(o, "<refClass>{}</refClass>", esc(&c.name));
        strategy(
            &mut o,
            &Service::Fitted(Params::Exponential {
                rate: c.arrival_rate,
            }),
        );
    }
    o.push_str(r#"</parameter></section><section className="ServiceTunnel"/>"#);
    router(&mut o, &m.classes, |_| vec![(CPU, 1.0)]);
    o.push_str("</node>\n");
    // CPU: processor sharing, one server per CPU.
    let _ = write!(o, r#"<node name="{CPU}">"#);
    queue_section(&mut o, &m.classes);
    let _ = write!(
        o,
        r#"<section className="PSServer"><parameter classPath="java.lang.Integer" name="maxJobs"><value>{}</value></parameter><parameter array="true" classPath="java.lang.Integer" name="numberOfVisits">"#,
        m.cpus
    );
    for c in &m.classes {
        let _ = write!(
            o,
            r#"<refClass>{}</refClass><subParameter classPath="java.lang.Integer" name="numberOfVisits"><value>1</value></subParameter>"#,
            esc(&c.name)
        );
    }
    o.push_str(r#"</parameter><parameter array="true" classPath="jmt.engine.NetStrategies.ServiceStrategy" name="ServiceStrategy">"#);
    for c in &m.classes {
        let _ = write!(o, "<refClass>{}</refClass>", esc(&c.name));
        strategy(&mut o, &c.cpu);
    }
    o.push_str(r#"</parameter><parameter array="true" classPath="jmt.engine.NetStrategies.PSStrategy" name="PSStrategy">"#);
    for c in &m.classes {
        let _ = write!(
            o,
            r#"<refClass>{}</refClass><subParameter classPath="jmt.engine.NetStrategies.PSStrategies.EPSStrategy" name="EPSStrategy"/>"#,
            esc(&c.name)
        );
    }
    o.push_str(r#"</parameter><parameter array="true" classPath="java.lang.Double" name="serviceWeights">"#);
    for c in &m.classes {
        let _ = write!(
            o,
            r#"<refClass>{}</refClass><subParameter classPath="java.lang.Double" name="serviceWeight"><value>1</value></subParameter>"#,
            esc(&c.name)
        );
    }
    o.push_str("</parameter></section>");
    router(&mut o, &m.classes, |c| match c.blocked {
        Some(_) if c.blocked_fraction >= 1.0 => vec![(BLOCKED, 1.0)],
        Some(_) => vec![
            (BLOCKED, c.blocked_fraction),
            (SINK, 1.0 - c.blocked_fraction),
        ],
        None => vec![(SINK, 1.0)],
    });
    o.push_str("</node>\n");
    // Blocked: a delay with each class's blocked time.
    if blocked_used {
        let _ = write!(o, r#"<node name="{BLOCKED}">"#);
        queue_section(&mut o, &m.classes);
        o.push_str(r#"<section className="Delay"><parameter array="true" classPath="jmt.engine.NetStrategies.ServiceStrategy" name="ServiceStrategy">"#);
        for c in &m.classes {
            let _ = write!(o, "<refClass>{}</refClass>", esc(&c.name));
            // Classes that never block never come here; JMT still wants a strategy.
            let s = c.blocked.clone().unwrap_or(Service::Deterministic(0.0));
            strategy(&mut o, &s);
        }
        o.push_str("</parameter></section>");
        router(&mut o, &m.classes, |_| vec![(SINK, 1.0)]);
        o.push_str("</node>\n");
    }
    let _ = writeln!(
        o,
        r#"<node name="{SINK}"><section className="JobSink"/></node>"#
    );
    // Measures: what a modeller compares with the recording.
    let stations: &[&str] = if blocked_used {
        &[CPU, BLOCKED]
    } else {
        &[CPU]
    };
    for c in &m.classes {
        for st in stations {
            for ty in [
                "Utilization",
                "Response Time",
                "Throughput",
                "Number of Customers",
            ] {
                let _ = writeln!(
                    o,
                    r#"<measure alpha="0.01" name="{st}_{}_{ty}" nodeType="station" precision="0.03" referenceNode="{st}" referenceUserClass="{}" type="{ty}" verbose="false"/>"#,
                    esc(&c.name),
                    esc(&c.name)
                );
            }
        }
        for ty in ["System Response Time", "System Throughput"] {
            let _ = writeln!(
                o,
                r#"<measure alpha="0.01" name="{}_{ty}" nodeType="" precision="0.03" referenceNode="" referenceUserClass="{}" type="{ty}" verbose="false"/>"#,
                esc(&c.name),
                esc(&c.name)
            );
        }
    }
    let _ = writeln!(o, r#"<connection source="{SOURCE}" target="{CPU}"/>"#);
    let _ = writeln!(o, r#"<connection source="{CPU}" target="{SINK}"/>"#);
    if blocked_used {
        let _ = writeln!(o, r#"<connection source="{CPU}" target="{BLOCKED}"/>"#);
        let _ = writeln!(o, r#"<connection source="{BLOCKED}" target="{SINK}"/>"#);
    }
    o.push_str("</sim>\n");
    // The GUI's part: class colours and station positions.
    o.push_str(r#"<jmodel xsi:noNamespaceSchemaLocation="JModelGUI.xsd">"#);
    const COLOURS: [&str; 6] = [
        "#FF0000FF",
        "#FFFF0000",
        "#FF00A000",
        "#FFFF8000",
        "#FF8000FF",
        "#FF008080",
    ];
    for (i, c) in m.classes.iter().enumerate() {
        let _ = write!(
            o,
            r#"<userClass color="{}" name="{}"/>"#,
            COLOURS[i % COLOURS.len()],
            esc(&c.name)
        );
    }
    let mut positions = vec![(SOURCE, 40.0, 120.0), (CPU, 200.0, 120.0)];
    if blocked_used {
        positions.push((BLOCKED, 360.0, 60.0));
    }
    positions.push((SINK, 520.0, 120.0));
    for (st, x, y) in positions {
        let _ = write!(
            o,
            r#"<station name="{st}"><position angle="0.0" rotate="false" x="{x:.1}" y="{y:.1}"/></station>"#
        );
    }
    o.push_str("</jmodel>\n</archive>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_and_strategies() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        let mut s = String::new();
        strategy(
            &mut s,
            &Service::Fitted(Params::Erlang {
                phases: 3,
                rate: 1500.0,
            }),
        );
        assert!(s.contains(r#"classPath="jmt.engine.random.Erlang" name="Erlang""#));
        assert!(s.contains(r#"classPath="jmt.engine.random.ErlangPar" name="distrPar""#));
        assert!(s.contains(r#"name="r"><value>3</value>"#));
        let mut s = String::new();
        strategy(&mut s, &Service::Replayer(PathBuf::from("/x/a&b.txt")));
        assert!(s.contains(r#"name="fileName"><value>/x/a&amp;b.txt</value>"#));
    }

    #[test]
    fn a_fitted_service_keeps_the_measured_mean() {
        use statrs::distribution::{ContinuousCDF, Normal};
        // A lognormal sample (sigma 1.5: heavy tail), its quantiles: the family that fits
        // best, and one whose maximum-likelihood mean is not the sample's.
        let n = 200;
        let z = Normal::new(0.0, 1.0).unwrap();
        let s: Vec<f64> = (0..n)
            .map(|i| (-6.0 + 1.5 * z.inverse_cdf((i as f64 + 0.5) / n as f64)).exp())
            .collect();
        let mean = s.iter().sum::<f64>() / n as f64;
        let best = fit(&s).best_of(&MODEL_FAMILIES).unwrap().params;
        let Params::Lognormal { sigma, .. } = best else {
            panic!("expected a lognormal fit, got {best:?}");
        };
        assert!(
            (best.mean() - mean).abs() > 0.01 * mean,
            "{best:?} vs {mean}"
        );
        let service = Service::from_samples(&s);
        let Service::Fitted(Params::Lognormal { sigma: kept, .. }) = service else {
            panic!("{service:?}");
        };
        assert_eq!(kept, sigma);
        assert!((service.mean().unwrap() - mean).abs() < 1e-12 * mean);
    }

    #[test]
    fn a_class_that_never_blocks_skips_the_delay() {
        let class = |name: &str, blocked: Option<Service>, p: f64| ModelClass {
            name: name.into(),
            arrival_rate: 100.0,
            cpu_mean: 0.002,
            cpu: Service::Fitted(Params::Exponential { rate: 500.0 }),
            blocked_fraction: p,
            blocked_mean: 0.003,
            blocked,
            wall_mean: 0.004,
            calls: 10,
            cpu_samples: PathBuf::new(),
            blocked_samples: PathBuf::new(),
        };
        let m = Model {
            name: "t.jsimg".into(),
            cpus: 2,
            classes: vec![
                class("a.B::x", None, 0.0),
                class("a.B::y", Some(Service::Deterministic(0.003)), 0.5),
            ],
        };
        let xml = to_xml(&m);
        assert!(xml.contains(
            r#"<parameter classPath="java.lang.Integer" name="maxJobs"><value>2</value>"#
        ));
        assert!(xml.contains(r#"<connection source="CPU" target="Blocked"/>"#));
        let y = xml.split("<refClass>a.B::y</refClass>").count();
        assert!(y > 3);
        assert_eq!(xml.matches("<userClass name=").count(), 2);
    }
}
