//! `analyze` over synthetic traces written by `sonda_testdata`: known
//! schedules in, exact parts, counts, laws and errors out.

use sonda_model::analyze::{self, Analysis, Options, ServicesError};
use sonda_model::jmt::{model_of, to_xml, ModelOptions};
use sonda_testdata::TraceBuilder;
use sonda_timeline::Trace;
use sonda_trace::{Cpu, Event, Runtime, Source, Tid};

/// As `sonda services` does: checks the options, opens the trace, analyses it.
fn analyze(path: &std::path::Path, opts: &Options) -> Result<Analysis, ServicesError> {
    opts.check()?;
    analyze::analyze(Trace::open(path)?, opts)
}

fn sw(prev: u32, prev_state: u64, next: u32) -> Event {
    Event::Switch {
        cpu: Cpu(0),
        prev: Tid(prev),
        prev_state,
        next: Tid(next),
        charge: None,
    }
}

/// Thread 11 serves 10 requests of 3 ms each: 1 ms on the CPU, 2 ms asleep, one every
/// 5 ms; thread 12 (the same JVM) burns 1 ms of every 5 outside any call.
fn workload(path: &std::path::Path) {
    let mut t = TraceBuilder::new(Source::Tracepoints, 2);
    t.process(1, "java", Runtime::Java)
        .thread(1, 11, "worker")
        .java_name(1, 11, "worker-1")
        .thread(1, 12, "gc")
        .method(1, "demo.S", "handle", "()V");
    for i in 0..10u64 {
        let b = 1_000_000 + i * 5_000_000;
        t.at(b, sw(0, 0, 11))
            .at(
                b,
                Event::Enter {
                    tid: Tid(11),
                    method: 1,
                },
            )
            .at(b + 1_000_000, sw(11, 0x1, 12))
            .at(b + 2_000_000, sw(12, 0x1, 0))
            .at(
                b + 3_000_000,
                Event::Wakeup {
                    target: Cpu(0),
                    wakee: Tid(11),
                    new_task: false,
                    waking: None,
                },
            )
            .at(b + 3_000_000, sw(0, 0, 11))
            .at(
                b + 3_000_000,
                Event::Leave {
                    tid: Tid(11),
                    method: 1,
                    exception: false,
                },
            )
            .at(b + 3_000_000, sw(11, 0x1, 0));
    }
    t.at(60_000_000, sw(0, 0, 0));
    t.write(path).unwrap();
}

#[test]
fn known_schedule_gives_exact_parts_and_laws() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.trace");
    workload(&path);
    let a = analyze(&path, &Options::default()).unwrap();
    let s = &a.services;
    assert_eq!(s.checks.cpu_disagreements, 0);
    let m = &s.whole.methods[0];
    assert_eq!(m.method, "demo.S::handle");
    assert_eq!((m.calls, m.top_level_calls, m.arrivals), (10, 10, 10));
    assert_eq!(m.inclusive.cpu.summary.mean, 1e6);
    assert_eq!(m.inclusive.sleeping.summary.mean, 2e6);
    assert_eq!(m.inclusive.blocked.summary.mean, 2e6);
    assert_eq!(m.inclusive.wall.summary.mean, 3e6);
    assert_eq!(m.inclusive.runnable.summary.max, 0.0);
    // Period: first enter to last exit = 9 * 5 + 3 ms.
    assert!((s.whole.duration_s - 0.048).abs() < 1e-9);
    assert!((m.throughput_per_s - 10.0 / 0.048).abs() < 1e-6);
    // Little: 10 calls of 3 ms in 48 ms.
    assert!((m.little.in_flight - 0.030 / 0.048).abs() < 1e-9);
    assert!(m.little.relative_difference.abs() < 1e-9);
    // Utilisation: the process ran 1 ms (worker) + 1 ms (other thread) per request.
    let u = &s.whole.utilisation;
    assert!((u.process_cpu_ns - 20e6).abs() < 1.0, "{u:?}");
    assert!((u.explained_fraction - 0.5).abs() < 1e-9);
    for c in a.calls_of("demo.S::handle") {
        assert_eq!(c.inclusive.states_sum(), c.inclusive.wall);
    }

    // Windows of 10 ms from the first enter: two requests end in each.
    let w = analyze(&path, &Options::default().with_window_ns(10_000_000)).unwrap();
    assert_eq!(w.services.windows.len(), 5);
    let counts: Vec<u64> = w
        .services
        .windows
        .iter()
        .map(|w| w.methods[0].calls)
        .collect();
    assert_eq!(counts, [2, 2, 2, 2, 2]);
    let cpu: f64 = w
        .services
        .windows
        .iter()
        .map(|w| w.utilisation.process_cpu_ns)
        .sum();
    assert!((cpu - 20e6).abs() < 1.0);

    // JSON carries the schema name and version.
    let v = sonda_model::json::to_value(&a.services);
    assert_eq!(v["schema"], "sonda-services");
    assert_eq!(v["version"], 1);
    assert!(v["whole"]["methods"][0]["inclusive"]["cpu"]["fits"].is_object());

    // The model: one class, PS with 2 servers, a delay for the 2 ms sleeps (one phase
    // between two CPU visits); the other thread's 1 ms per request is background.
    let jsimg = dir.path().join("m.jsimg");
    let samples = dir.path().join("m.samples");
    let model = model_of(&a, &jsimg, &samples, &ModelOptions::default());
    std::fs::create_dir(&samples).unwrap();
    for s in &model.samples {
        s.write(std::fs::File::create(samples.join(&s.name)).unwrap())
            .unwrap();
    }
    assert_eq!(model.classes.len(), 2);
    let c = &model.classes[0];
    assert!((c.cpu_mean - 0.001).abs() < 1e-12 && (c.blocked_mean - 0.002).abs() < 1e-12);
    assert_eq!((c.visits, c.blocked_phases), (2.0, 1.0));
    let bg = &model.classes[1];
    assert_eq!(bg.name, sonda_model::jmt::BACKGROUND);
    assert!(!bg.traced);
    assert!((bg.arrival_rate() * bg.cpu_mean - 0.010 / 0.048).abs() < 1e-9);
    assert!((s.background.untraced_cpus - 0.010 / 0.048).abs() < 1e-9);
    assert!(s.background.cpu_bound_tasks.is_empty());
    let xml = to_xml(&model);
    assert!(xml.contains(r#"<value>2</value>"#) && xml.contains("DeterministicDistr"));
    let samples = std::fs::read_to_string(&c.cpu_samples).unwrap();
    // Per visit: each call's 1 ms over its two visits.
    assert_eq!(samples.lines().count(), 20);
    assert!(samples.lines().all(|l| l == "0.000500000"));
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.trace");
    workload(&path);
    let err = analyze(
        &path,
        &Options::default().with_methods(vec!["x.Y::z".into()]),
    )
    .unwrap_err();
    assert!(matches!(err, ServicesError::NoMatch { .. }));
    let text = err.to_string();
    assert!(
        text.contains("x.Y::z") && text.contains("demo.S::handle"),
        "{text}"
    );
    let err = analyze(
        &path,
        &Options::default().with_methods(vec!["a.B::".into()]),
    )
    .unwrap_err();
    assert!(matches!(err, ServicesError::Filter(_)), "{err}");

    let plain = dir.path().join("plain.trace");
    let mut t = TraceBuilder::new(Source::Tracepoints, 2);
    t.process(1, "sh", Runtime::Native)
        .thread(1, 11, "sh")
        .at(10, sw(0, 0, 11));
    t.write(&plain).unwrap();
    let err = analyze(&plain, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no methods were traced") && err.contains("--methods"),
        "{err}"
    );

    let err = analyze(&dir.path().join("missing"), &Options::default()).unwrap_err();
    assert!(matches!(err, ServicesError::Read { .. }));
    assert!(matches!(
        analyze(&path, &Options::default().with_window_ns(0)),
        Err(ServicesError::BadWindow)
    ));
    // A window that would cut the 60 ms trace into millions: refused before the pass,
    // with a window that fits.
    let err = analyze(&path, &Options::default().with_window_ns(1)).unwrap_err();
    assert!(matches!(err, ServicesError::TooManyWindows { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("more than 10000: use --window 0.0000061 or more"),
        "{text}"
    );
    assert!(analyze(&path, &Options::default().with_window_ns(6_100)).is_ok());
}
