//! `sonda record --metrics` end to end: Debian's Prometheus scrapes the live endpoint
//! every second during a recording of the services workload
//! (scripts/demo/demo/ServiceDemo.java, as `services.rs` runs it), and what it stored,
//! read back through its HTTP query API, agrees with `sonda services` on the finished
//! trace; every page the test fetched itself parses with `prometheus_client`'s parser.
//! Also: a public address is refused unless asked for, and hostile clients (silent,
//! half a request, never reading) neither stall the recording nor keep the endpoint
//! from answering.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sonda_tests::*;

const CLASSES: [&str; 3] = ["browse", "search", "checkout"];

/// Kills and reaps a process this test started when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port free now (the system's choice; it stays free unless someone takes
/// it before the server binds it, which the error message would say).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `GET path` over HTTP/1.0 (no chunked answer, closed after it): status and body.
fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("read {addr}{path}: {e}"))?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP head from {addr}{path}: {raw:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status from {addr}{path}: {head:?}"))?;
    Ok((status, body.to_string()))
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus' answer to an instant query: (labels, value) per series.
fn prom_query(prom: SocketAddr, query: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let (status, body) = http_get(prom, &format!("/api/v1/query?query={}", encode(query))).unwrap();
    assert_eq!(status, 200, "{query}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{query}: {body}");
    v["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{query}: {body}"))
        .iter()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let value = r["value"][1].as_str().unwrap().parse().unwrap();
            (labels, value)
        })
        .collect()
}

/// The ServiceDemo command line (`java ...`), as one shell word list.
fn demo_java(classes: &Path, dir: &Path, rate: u32, seconds: u32) -> Vec<String> {
    let workers = 3 * std::thread::available_parallelism().map_or(2, |n| n.get());
    [
        "java",
        "-cp",
        classes.to_str().unwrap(),
        "demo.ServiceDemo",
        "--workers",
        &workers.to_string(),
        "--rate",
        &rate.to_string(),
        "--seconds",
        &seconds.to_string(),
        "--out",
        dir.join("calls.csv").to_str().unwrap(),
        "--dir",
        dir.join("data").to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// `sonda record -o TRACE --metrics PORT --methods ...` of `command`, started, its
/// output into files of `dir`.
fn start_recording(dir: &Path, trace: &Path, port: u16, command: &[String]) -> Reaped {
    let mut cmd = Command::new(sonda());
    cmd.arg("record")
        .arg("-o")
        .arg(trace)
        .arg("--metrics")
        .arg(port.to_string());
    for c in CLASSES {
        cmd.arg("--methods").arg(format!("demo.ServiceDemo::{c}"));
    }
    cmd.arg("--")
        .args(command)
        .stdin(Stdio::null())
        .stdout(File::create(dir.join("sonda.out")).unwrap())
        .stderr(File::create(dir.join("sonda.err")).unwrap());
    Reaped(cmd.spawn().expect("sonda starts"))
}

/// Waits for the recording to end (at most `limit`), calling `each` every `period`
/// meanwhile; fails the test if sonda failed or reported a caught panic.
fn wait_recording(
    sonda: &mut Reaped,
    dir: &Path,
    limit: Duration,
    period: Duration,
    mut each: impl FnMut(),
) {
    let started = Instant::now();
    let status = loop {
        if let Some(st) = sonda.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            started.elapsed() < limit,
            "the recording did not end within {limit:?}"
        );
        each();
        std::thread::sleep(period);
    };
    let said = std::fs::read_to_string(dir.join("sonda.err")).unwrap_or_default()
        + &std::fs::read_to_string(dir.join("sonda.out")).unwrap_or_default();
    eprintln!("{said}");
    assert!(status.success(), "sonda record failed: {said}");
    assert!(!said.contains("internal error in "), "{said}");
}

/// Per method label: completed calls, and their CPU, runnable and blocked ns, from
/// `sonda services --calls`.
fn services_sums(trace: &Path) -> BTreeMap<String, [u64; 4]> {
    let out = run(Command::new(sonda())
        .arg("services")
        .arg(trace)
        .arg("--calls"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = text(&out.stdout);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (m, c, r, s, d) = (
        col("method"),
        col("cpu_ns"),
        col("runnable_ns"),
        col("sleeping_ns"),
        col("uninterruptible_ns"),
    );
    let mut sums: BTreeMap<String, [u64; 4]> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        let e = sums.entry(f[m].to_string()).or_default();
        e[0] += 1;
        e[1] += n(c);
        e[2] += n(r);
        e[3] += n(s) + n(d);
    }
    sums
}

/// Calls per request class as the JVM counted them (its --out CSV).
fn jvm_counts(csv: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(csv).unwrap();
    let mut counts = BTreeMap::new();
    for l in text.lines().skip(1) {
        *counts
            .entry(l.split(',').next().unwrap().to_string())
            .or_default() += 1;
    }
    counts
}

/// Parses every page in `pages` with `prometheus_client`'s parser: (pages parsed,
/// family `name:type`s, the last page's calls per method), failing on any page it
/// rejects or any counter that went down from one page to the next.
fn parse_pages(venv: &Path, pages: &Path) -> serde_json::Value {
    let script = r#"
import glob, json, sys
from prometheus_client.parser import text_string_to_metric_families
names, last, n, totals = set(), {}, 0, set()
for path in sorted(glob.glob(sys.argv[1] + "/*.txt")):
    with open(path) as f:
        text = f.read()
    calls = {}
    for fam in text_string_to_metric_families(text):
        names.add(fam.name + ":" + fam.type)
        for s in fam.samples:
            if s.name == "sonda_method_calls_total":
                assert set(s.labels) == {"method", "class"}, s.labels
                assert s.labels["method"].startswith(s.labels["class"] + "::"), s.labels
                calls[s.labels["method"]] = s.value
    for m, v in last.items():
        assert calls.get(m, 0) >= v, (path, m, v, calls)
    last, n = calls, n + 1
    totals.add(sum(calls.values()))
print(json.dumps({"pages": n, "names": sorted(names), "calls": last, "distinct_totals": len(totals)}))
"#;
    let out = run(Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .arg(pages));
    assert!(
        out.status.success(),
        "prometheus_client rejects a page: {}",
        text(&out.stderr)
    );
    serde_json::from_str(&text(&out.stdout)).unwrap()
}

#[test]
fn metrics_prometheus_agrees_with_services() {
    let _machine = shared();
    if !require_tracepoints() || !require_tool("javac") || !require_tool("prometheus") {
        return;
    }
    let Some(venv) = python_env() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let classes = sonda_tests::service_demo_classes(d);
    let (port, prom_port) = (free_port(), free_port());
    let prom = SocketAddr::from(([127, 0, 0, 1], prom_port));
    std::fs::write(
        d.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: sonda\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let _prometheus = Reaped(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                d.join("prometheus.yml").display()
            ))
            .arg(format!("--storage.tsdb.path={}", d.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(d.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts"),
    );
    let started = Instant::now();
    while !matches!(http_get(prom, "/-/ready"), Ok((200, _))) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "prometheus not ready in 60 s: {}",
            std::fs::read_to_string(d.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Prometheus hands new targets to its scraper at most every 5 s: wait until it
    // tried ours once (nothing listens yet), so that it scrapes every second of the
    // recording.
    let tried_once = || -> bool {
        let Ok((200, body)) = http_get(prom, "/api/v1/targets") else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["activeTargets"].as_array().is_some_and(|t| {
            t.iter().any(|t| {
                t["scrapeUrl"]
                    .as_str()
                    .is_some_and(|u| u.contains(&format!(":{port}/")))
                    && t["lastScrape"]
                        .as_str()
                        .is_some_and(|l| !l.starts_with("0001-"))
            })
        })
    };
    while !tried_once() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "prometheus did not scrape its target in 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The workload, then 3 s of quiet, so that Prometheus' last scrapes (every 1 s)
    // see the final counts before the recording ends.
    let java = demo_java(&classes, d, 300, 6)
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let command = ["sh".into(), "-c".into(), format!("{java} && sleep 3")];
    let trace = d.join("demo.trace");
    let pages = d.join("pages");
    std::fs::create_dir_all(&pages).unwrap();
    let endpoint = SocketAddr::from(([127, 0, 0, 1], port));
    let mut sonda = start_recording(d, &trace, port, &command);
    let mut fetched = 0;
    wait_recording(
        &mut sonda,
        d,
        Duration::from_secs(120),
        Duration::from_millis(250),
        || {
            if let Ok((200, body)) = http_get(endpoint, "/metrics") {
                std::fs::write(pages.join(format!("{fetched:05}.txt")), body).unwrap();
                fetched += 1;
            }
        },
    );
    assert!(fetched >= 20, "only {fetched} pages fetched");

    let services = services_sums(&trace);
    assert_eq!(services.len(), 3, "{services:?}");
    let last = |metric: &str| -> BTreeMap<String, f64> {
        prom_query(prom, &format!("max_over_time({metric}[10m])"))
            .into_iter()
            .map(|(l, v)| (l["method"].clone(), v))
            .collect()
    };
    let up = prom_query(prom, "sum_over_time(up{job=\"sonda\"}[10m])");
    let tried = prom_query(prom, "count_over_time(up{job=\"sonda\"}[10m])");
    eprintln!("scrapes by Prometheus: {up:?} successful of {tried:?}");
    assert!(up.first().is_some_and(|(_, v)| *v >= 5.0), "{up:?}");
    let calls = last("sonda_method_calls_total");
    let cpu = last("sonda_method_cpu_seconds_total");
    let wait = last("sonda_method_wait_seconds_total");
    let blocked = last("sonda_method_blocked_seconds_total");
    for (method, s) in &services {
        let got = calls.get(method).copied().unwrap_or(0.0);
        let want = s[0] as f64;
        eprintln!(
            "{method}: calls Prometheus {got} sonda services {want}; cpu {:.4} / {:.4} s, wait {:.4} / {:.4} s, blocked {:.4} / {:.4} s",
            cpu.get(method).copied().unwrap_or(0.0),
            s[1] as f64 / 1e9,
            wait.get(method).copied().unwrap_or(0.0),
            s[2] as f64 / 1e9,
            blocked.get(method).copied().unwrap_or(0.0),
            s[3] as f64 / 1e9,
        );
        assert!(want > 300.0, "{method}: too few calls ({want})");
        assert!(
            (got - want).abs() <= 0.02 * want,
            "{method}: Prometheus has {got} calls, sonda services {want}"
        );
        let cpu_want = s[1] as f64 / 1e9;
        let cpu_got = cpu.get(method).copied().unwrap_or(0.0);
        assert!(
            (cpu_got - cpu_want).abs() <= 0.02 * cpu_want,
            "{method}: Prometheus has {cpu_got} CPU seconds, sonda services {cpu_want}"
        );
    }
    // The recording's own counters made it too.
    for metric in [
        "sonda_events_total",
        "sonda_collector_cpu_seconds_total",
        "sonda_events_dropped_total",
        "sonda_metrics_dropped_total",
    ] {
        let v = prom_query(prom, &format!("max_over_time({metric}[10m])"));
        eprintln!("{metric}: {v:?}");
        assert_eq!(v.len(), 1, "{metric}: {v:?}");
        if metric.ends_with("dropped_total") {
            assert_eq!(v[0].1, 0.0, "{metric}");
        } else {
            assert!(v[0].1 > 0.0, "{metric}");
        }
    }

    // Every page fetched parses, every family is typed, counters never go down, and
    // the last page fetched has the final counts (fetched in the quiet end).
    let parsed = parse_pages(&venv, &pages);
    eprintln!("prometheus_client: {parsed}");
    assert_eq!(parsed["pages"], fetched);
    // Fetched every 0.25 s during the 6 s of requests, the page changed at least
    // once a second.
    assert!(
        parsed["distinct_totals"].as_u64().unwrap() >= 7,
        "the page did not follow the recording: {parsed}"
    );
    for family in [
        "sonda_method_calls:counter",
        "sonda_method_cpu_seconds:counter",
        "sonda_method_wait_seconds:counter",
        "sonda_method_blocked_seconds:counter",
        "sonda_events:counter",
        "sonda_events_dropped:counter",
        "sonda_collector_cpu_seconds:counter",
        "sonda_metrics_dropped:counter",
    ] {
        assert!(
            parsed["names"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == family),
            "{family} missing: {parsed}"
        );
    }
    for (method, s) in &services {
        assert_eq!(
            parsed["calls"][method].as_f64(),
            Some(s[0] as f64),
            "{method}: the last page fetched"
        );
    }
}

#[test]
fn metrics_refuse_a_public_address_unless_asked() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let port = free_port();
    for addr in [format!("0.0.0.0:{port}"), format!("[::]:{port}")] {
        let out = run(Command::new(sonda())
            .arg("record")
            .arg("-o")
            .arg(&trace)
            .arg("--metrics")
            .arg(&addr)
            .args(["--", "true"]));
        assert_clean_error(&out, "--metrics-public");
        assert!(!trace.exists(), "nothing may be recorded");
        assert!(partial_outputs(&trace).is_empty());
    }
    let out = run(Command::new(sonda())
        .args(["attach", "1", "-o"])
        .arg(&trace)
        .args(["--metrics", &format!("0.0.0.0:{port}")]));
    assert_clean_error(&out, "--metrics-public");
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--metrics", "no-such-host:1", "--", "true"]));
    assert_clean_error(&out, "--metrics");
    assert!(!trace.exists());
    // A port in use is refused before anything is recorded too.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args([
            "--metrics",
            &taken.local_addr().unwrap().to_string(),
            "--",
            "true",
        ]));
    assert_clean_error(&out, "cannot listen");
    assert!(!trace.exists());
    drop(taken);
    // Asked for, it serves there.
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--metrics", &format!("0.0.0.0:{port}"), "--metrics-public"])
        .args(["--", "sleep", "0.2"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("live metrics at http://0.0.0.0:{port}/metrics")),
        "{}",
        text(&out.stderr)
    );
    assert!(trace.exists());
}

#[test]
fn metrics_hostile_clients_stall_neither_the_recording_nor_the_endpoint() {
    let _machine = shared();
    if !require_tracepoints() || !require_tool("javac") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let classes = sonda_tests::service_demo_classes(d);
    let port = free_port();
    let endpoint = SocketAddr::from(([127, 0, 0, 1], port));
    let trace = d.join("demo.trace");
    let mut sonda = start_recording(d, &trace, port, &demo_java(&classes, d, 250, 6));

    let mut hostile: Vec<TcpStream> = Vec::new();
    let mut hogs = Vec::new();
    let mut answered = 0;
    let mut slowest = Duration::ZERO;
    let mut failures = Vec::new();
    wait_recording(
        &mut sonda,
        d,
        Duration::from_secs(120),
        Duration::from_millis(200),
        || {
            if hostile.is_empty() {
                // Once the endpoint is up: 100 silent connections, 50 with half a
                // request, and 4 clients that pipeline thousands of requests and
                // never read the answers (megabytes of pages).
                if TcpStream::connect(endpoint).is_err() {
                    return;
                }
                for i in 0..150 {
                    let Ok(mut s) = TcpStream::connect(endpoint) else {
                        continue;
                    };
                    if i >= 100 {
                        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
                    }
                    hostile.push(s);
                }
                for _ in 0..4 {
                    hogs.push(std::thread::spawn(move || {
                        let Ok(mut s) = TcpStream::connect(endpoint) else {
                            return;
                        };
                        let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                        let many = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000);
                        let _ = s.write_all(many.as_bytes());
                        // Hold it, unread, for the rest of the recording.
                        std::thread::sleep(Duration::from_secs(8));
                    }));
                }
                return;
            }
            let asked = Instant::now();
            match http_get(endpoint, "/metrics") {
                Ok((200, body)) if body.contains("sonda_events_total") => {
                    answered += 1;
                    slowest = slowest.max(asked.elapsed());
                }
                other => failures.push((Instant::now(), format!("{other:?}"))),
            }
        },
    );
    // A scrape sent as the recording ended may find the endpoint closed.
    let ended = Instant::now();
    failures.retain(|(at, _)| ended.duration_since(*at) > Duration::from_secs(2));
    for h in hogs {
        let _ = h.join();
    }
    eprintln!(
        "{} hostile connections; {answered} scrapes answered meanwhile, the slowest in {slowest:?}",
        hostile.len()
    );
    assert!(
        hostile.len() >= 100,
        "{} hostile connections",
        hostile.len()
    );
    assert!(failures.is_empty(), "scrapes failed: {failures:?}");
    assert!(answered >= 10, "only {answered} scrapes answered");
    assert!(
        slowest < Duration::from_secs(1),
        "slowest scrape {slowest:?}"
    );

    // The recording has every call the JVM made.
    let jvm = jvm_counts(&d.join("calls.csv"));
    let traced = services_sums(&trace);
    for class in CLASSES {
        let want = jvm.get(class).copied().unwrap_or(0);
        let got = traced
            .get(&format!("demo.ServiceDemo::{class}"))
            .map_or(0, |s| s[0]);
        eprintln!("{class}: JVM {want} calls, trace {got}");
        assert!(want > 100, "{class}: too few calls ({want})");
        assert_eq!(got, want, "{class}: calls in the trace and in the JVM");
    }
}

#[test]
fn metrics_of_an_attach() {
    let _machine = shared();
    if !require_tracepoints() || !require_tool("javac") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let classes = sonda_tests::service_demo_classes(d);
    let java = demo_java(&classes, d, 250, 20);
    let jvm = Reaped(
        Command::new(&java[0])
            .args(&java[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("java starts"),
    );
    // Let the JVM start serving before the attach.
    std::thread::sleep(Duration::from_secs(2));
    let port = free_port();
    let endpoint = SocketAddr::from(([127, 0, 0, 1], port));
    let trace = d.join("attach.trace");
    let mut cmd = Attach::to(jvm.0.id())
        .methods(CLASSES.map(|c| format!("demo.ServiceDemo::{c}")))
        .options(["--duration", "5", "--metrics", &port.to_string()])
        .command(&trace);
    cmd.stdin(Stdio::null())
        .stdout(File::create(d.join("sonda.out")).unwrap())
        .stderr(File::create(d.join("sonda.err")).unwrap());
    let mut sonda = Reaped(cmd.spawn().expect("sonda starts"));
    let mut last = String::new();
    wait_recording(
        &mut sonda,
        d,
        Duration::from_secs(60),
        Duration::from_millis(250),
        || {
            if let Ok((200, body)) = http_get(endpoint, "/metrics") {
                last = body;
            }
        },
    );
    let traced = services_sums(&trace);
    for class in CLASSES {
        let method = format!("demo.ServiceDemo::{class}");
        let want = traced.get(&method).map_or(0, |s| s[0]);
        let prefix =
            format!("sonda_method_calls_total{{method=\"{method}\",class=\"demo.ServiceDemo\"}} ");
        let got: u64 = last
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{method} not on the last page fetched:\n{last}"));
        eprintln!("{method}: last page fetched {got}, trace {want}");
        // The last page fetched trails the end of the 5 s by at most a few tenths.
        assert!(want > 100, "{method}: too few calls ({want})");
        assert!(
            got <= want && got * 2 >= want,
            "{method}: page {got}, trace {want}"
        );
    }
}
