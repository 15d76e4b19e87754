//! `sonda export TRACE --parquet DIR` end to end: the services workload
//! (scripts/demo/demo/ServiceDemo.java) recorded under sonda, exported, and read back
//! by DuckDB with the very query of docs/parquet.md (so the docs cannot drift), held
//! to `sonda services`' own figures; and the command's handling of its files.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use sonda_testdata::{showcase, TraceBuilder};
use sonda_tests::*;
use sonda_trace::{Runtime, Source};

fn export(trace: &Path, dir: &Path) -> std::process::Output {
    run(Command::new(sonda())
        .arg("export")
        .arg(trace)
        .arg("--parquet")
        .arg(dir))
}

/// The `sql` code blocks of docs/parquet.md, in order.
fn docs_sql() -> Vec<String> {
    let docs = std::fs::read_to_string(repo_root().join("docs/parquet.md")).unwrap();
    let mut blocks = Vec::new();
    let mut rest = docs.as_str();
    while let Some(at) = rest.find("```sql\n") {
        let body = &rest[at + "```sql\n".len()..];
        let end = body.find("```").expect("a closed sql block");
        blocks.push(body[..end].to_string());
        rest = &body[end..];
    }
    blocks
}

/// The trace's partition name, as the command printed it (`trace=NAME)`).
fn trace_name(stderr: &str) -> String {
    let at = stderr.find("trace=").expect("the summary names the trace") + "trace=".len();
    stderr[at..].split(')').next().unwrap().trim().to_string()
}

/// Every file and directory under `dir`.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn duckdb_rebuilds_the_services_table_from_a_real_recording() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let Some(venv) = python_env() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let classes = sonda_tests::service_demo_classes(dir.path());
    let trace = dir.path().join("demo.trace");
    Workload::java_in(&classes, "demo.ServiceDemo")
        .methods(["browse", "search", "checkout"].map(|c| format!("demo.ServiceDemo::{c}")))
        .args(["--workers", "4", "--rate", "300", "--seconds", "2", "--dir"])
        .args([dir.path().join("data")])
        .record(&trace);

    let ds = dir.path().join("ds");
    let out = export(&trace, &ds);
    assert!(out.status.success(), "sonda export: {}", text(&out.stderr));
    let said = text(&out.stderr);
    eprintln!("{said}");
    let name = trace_name(&said);

    // The docs' three blocks: the view, the trace's choice, the query.
    let sql = docs_sql();
    assert_eq!(sql.len(), 3, "docs/parquet.md's DuckDB section: {sql:?}");
    let placeholder = "'app-1a2b3c4d'";
    assert_eq!(sql[1].matches(placeholder).count(), 1, "{}", sql[1]);
    let choose = sql[1].replace(placeholder, &format!("'{name}'"));
    let script = "import duckdb, json, sys\n\
                  con = duckdb.connect()\n\
                  for q in sys.argv[1:]:\n\
                  \x20   rows = con.execute(q).fetchall()\n\
                  print(json.dumps([[r[0]] + [float(x) if x is not None else None for x in r[1:]] for r in rows]))";
    let duck = run(Command::new(venv.join("bin/python"))
        .current_dir(dir.path())
        .args(["-c", script])
        .args([&sql[0], &choose, &sql[2]]));
    assert!(
        duck.status.success(),
        "DuckDB: {}{}",
        text(&duck.stdout),
        text(&duck.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&duck.stdout).unwrap();
    let rows = rows.as_array().unwrap();

    let services = run(Command::new(sonda())
        .arg("services")
        .arg(&trace)
        .args(["--format", "json"]));
    assert!(services.status.success(), "{}", text(&services.stderr));
    let s: serde_json::Value = serde_json::from_slice(&services.stdout).unwrap();
    let methods = s["whole"]["methods"].as_array().unwrap();
    assert_eq!(rows.len(), methods.len(), "methods: {rows:?}");
    assert_eq!(methods.len(), 3);
    eprintln!("method                        calls  duckdb/services: cpu ns, wall ns");
    for (row, m) in rows.iter().zip(methods) {
        let r = row.as_array().unwrap();
        let method = m["method"].as_str().unwrap();
        assert_eq!(r[0].as_str(), Some(method));
        let calls = m["calls"].as_u64().unwrap();
        assert!(calls > 100, "{method}: {calls} calls");
        assert_eq!(r[1].as_f64(), Some(calls as f64), "{method}: calls");
        let close = |got: &serde_json::Value, want: &serde_json::Value, what: &str, tol: f64| {
            let (g, w) = (got.as_f64().unwrap(), want.as_f64().unwrap());
            assert!(
                (g - w).abs() <= tol,
                "{method} {what}: DuckDB {g}, sonda services {w}"
            );
        };
        let x = m["throughput_per_s"].as_f64().unwrap();
        close(&r[2], &m["throughput_per_s"], "X/s", x * 1e-9);
        let l = m["arrival_rate_per_s"].as_f64().unwrap();
        close(&r[3], &m["arrival_rate_per_s"], "λ/s", l * 1e-9);
        let inc = &m["inclusive"];
        close(&r[4], &inc["cpu"]["mean"], "cpu", 1.0);
        close(&r[5], &inc["runnable"]["mean"], "waiting", 1.0);
        close(&r[6], &inc["blocked"]["mean"], "blocked", 1.0);
        close(&r[7], &inc["wall"]["mean"], "wall", 1.0);
        eprintln!(
            "{method:28} {calls:6}  {}/{}, {}/{}",
            r[4], inc["cpu"]["mean"], r[7], inc["wall"]["mean"]
        );
    }
}

#[test]
fn export_files_are_private_complete_and_never_replace_anything() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("showcase.trace");
    showcase().write(&trace).unwrap();
    let original = std::fs::read(&trace).unwrap();
    let ds = dir.path().join("ds");
    let out = export(&trace, &ds);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert_eq!(said.lines().count(), 1, "{said}");
    let name = trace_name(&said);
    let files = tree(&ds);
    let parquet: Vec<&PathBuf> = files.iter().filter(|p| p.is_file()).collect();
    // Nine tables, one file each, in their partition; no temporary file left.
    assert_eq!(parquet.len(), 9, "{files:?}");
    for f in &parquet {
        let rel = f.strip_prefix(&ds).unwrap().to_str().unwrap().to_string();
        let parts: Vec<&str> = rel.split('/').collect();
        assert_eq!(parts.len(), 4, "{rel}");
        assert_eq!(parts[1], "host=synthetic", "{rel}");
        assert_eq!(parts[2], format!("trace={name}"), "{rel}");
        assert_eq!(parts[3], "part-00000.parquet", "{rel}");
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{rel}");
    }
    for d in files.iter().filter(|p| p.is_dir()) {
        let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }

    // Exporting the same trace again into the dataset: refused, nothing changed.
    let before: Vec<(PathBuf, Vec<u8>)> = parquet
        .iter()
        .map(|f| (f.to_path_buf(), std::fs::read(f).unwrap()))
        .collect();
    let again = export(&trace, &ds);
    assert_clean_error(&again, "exported into");
    assert_eq!(tree(&ds), files);
    for (f, bytes) in &before {
        assert_eq!(&std::fs::read(f).unwrap(), bytes, "{}", f.display());
    }
    // The dataset directory given as the trace: refused, the trace intact.
    let onto = export(&trace, &trace);
    assert_clean_error(&onto, "is the trace to export");
    assert_eq!(std::fs::read(&trace).unwrap(), original);

    // Another trace goes beside the first, in its own partition.
    let other = dir.path().join("other.trace");
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(1, "java", Runtime::Java)
        .thread(1, 10, "java")
        .at(
            5,
            sonda_trace::Event::Switch {
                cpu: sonda_trace::Cpu(0),
                prev: sonda_trace::Tid(10),
                prev_state: 0x1,
                next: sonda_trace::Tid(0),
                charge: None,
            },
        );
    b.write(&other).unwrap();
    let out = export(&other, &ds);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let second = trace_name(&text(&out.stderr));
    assert_ne!(second, name);
    let now = tree(&ds);
    assert_eq!(now.iter().filter(|p| p.is_file()).count(), 18);
    assert!(files.iter().all(|f| now.contains(f)));

    // A trace without records fails on its input, and leaves no directory behind.
    let empty = dir.path().join("empty.trace");
    let mut b = TraceBuilder::new(Source::Tracepoints, 2);
    b.process(1, "java", Runtime::Java).thread(1, 10, "java");
    b.write(&empty).unwrap();
    let out = export(&empty, &ds);
    assert_clean_error(&out, "nothing to export");
    assert_eq!(tree(&ds), now);
    // A trace that is not there: one line naming it.
    let out = export(&dir.path().join("missing.trace"), &ds);
    assert_clean_error(&out, "missing.trace");
}
