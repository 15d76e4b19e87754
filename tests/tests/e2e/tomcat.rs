//! Method tracing on real middleware: `scripts/tomcat.sh` runs Debian's Tomcat 10 under
//! `sonda record` with the request path instrumented, drives it with wrk, and checks
//! the Paraver export with prvcheck and the number of recorded
//! `StandardWrapperValve::invoke` (and `_jspService`) calls against the requests
//! Tomcat's own access log counts. The script is the check; this test runs it with the
//! binaries under test and reads its verdict and the figures it printed.

use std::process::Command;

use sonda_tests::*;

/// Seconds of wrk load (the script's default is 10; a shorter run keeps the test quick
/// and still serves thousands of requests).
const LOAD_SECONDS: u64 = 6;

/// The number printed after `prefix` on the script's line containing `prefix`.
fn figure(stderr: &str, prefix: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(prefix))
        .unwrap_or_else(|| panic!("no line with {prefix:?} in the script's output:\n{stderr}"));
    let after = &line[line.find(prefix).unwrap() + prefix.len()..];
    let digits: String = after
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {prefix:?} in {line:?}"))
}

#[test]
fn tomcat_requests_equal_recorded_service_calls() {
    // Tomcat, wrk and sonda load both CPUs for seconds: alone.
    let _machine = exclusive();
    // sonda records kernel tracepoints, and the script installs Tomcat and wrk with
    // apt-get: both need root.
    if !require(
        "kernel tracepoints and apt-get (root)",
        tracepoints_available(),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run(Command::new("bash")
        .arg(repo_root().join("scripts/tomcat.sh"))
        .env("SONDA_BIN", sonda())
        .env("SONDA_AGENT", agent())
        .env("PRVCHECK", prvcheck_path())
        .env("OUT", dir.path())
        .env("DURATION", LOAD_SECONDS.to_string()));
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "scripts/tomcat.sh failed:\n{}{stderr}",
        text(&out.stdout)
    );

    let requests = figure(&stderr, "Tomcat logged");
    let wrapper_calls = figure(&stderr, "trace:");
    eprintln!("tomcat: {requests} requests logged, {wrapper_calls} StandardWrapperValve::invoke calls recorded");
    // Several thousand requests even on a slow machine: a run that served almost
    // nothing would make the comparison meaningless.
    assert!(
        requests >= 1000,
        "only {requests} requests in {LOAD_SECONDS} s of load:\n{stderr}"
    );
    assert_eq!(
        wrapper_calls, requests,
        "recorded calls vs logged requests:\n{stderr}"
    );
    for artefact in [
        "tomcat.trace",
        "tomcat.prv",
        "tomcat.pcf",
        "tomcat.row",
        "access.log",
    ] {
        assert!(
            dir.path().join(artefact).exists(),
            "the script left no {artefact}"
        );
    }
    // The script checked the export with prvcheck; pertalde judges it too.
    check_paraver(&dir.path().join("tomcat.prv"));
}
