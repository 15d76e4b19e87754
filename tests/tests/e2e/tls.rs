//! Full and resumed TLS handshakes told apart by `sonda services`' classes of units, on
//! a real JSSE server (tests/java/TlsPair.java: a blocking TLS server whose `serve`
//! call is one connection, and a client in the same JVM that counts for itself which
//! of its connections resumed a session). The server-certificate producer of JSSE
//! runs in a full handshake only: the classes `--unit-class` names by it must count
//! exactly the client's full and resumed connections, for TLS 1.2 and TLS 1.3.

use std::process::Command;

use sonda_tests::*;

const SERVE: &str = "TlsPair::serve";
const FULL: usize = 12;
const RESUMED: usize = 20;

/// (full, resumed) from the client's "CLIENT protocol=P full=F resumed=R" line.
fn client_counts(stdout: &str) -> (u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CLIENT "))
        .unwrap_or_else(|| panic!("no CLIENT line in {stdout}"));
    let field = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in {line}"))
            .parse()
            .unwrap()
    };
    (field("full"), field("resumed"))
}

/// The units of the class labelled `label` in the units table, 0 when there is none.
fn units_of(table: &str, label: &str) -> u64 {
    let units = table
        .split_once("Units of work")
        .map(|(_, u)| u)
        .unwrap_or_else(|| panic!("no units of work in {table}"));
    units
        .lines()
        .skip(2)
        .find(|l| l.split_whitespace().next() == Some(label))
        .map_or(0, |l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
}

#[test]
fn full_and_resumed_handshakes_are_counted_as_the_client_counted_them() {
    let _machine = shared();
    if !require_tool("keytool") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keystore = dir.path().join("server.p12");
    let made = run(Command::new("keytool").args([
        "-genkeypair",
        "-alias",
        "server",
        "-keyalg",
        "RSA",
        "-keysize",
        "2048",
        "-dname",
        "CN=localhost",
        "-validity",
        "2",
        "-storetype",
        "PKCS12",
        "-storepass",
        "sonda-test",
        "-keystore",
        keystore.to_str().unwrap(),
    ]));
    assert!(made.status.success(), "keytool: {}", text(&made.stderr));
    for protocol in ["TLSv1.2", "TLSv1.3"] {
        let trace = dir.path().join(format!("{protocol}.trace"));
        let out = Workload::java("TlsPair")
            .args([
                keystore.to_str().unwrap(),
                "sonda-test",
                protocol,
                &FULL.to_string(),
                &RESUMED.to_string(),
            ])
            .methods([
                SERVE,
                "sun.security.ssl.CertificateMessage$T1*CertificateProducer::produce",
                "sun.security.ssl.ClientHello$ClientHelloConsumer::consume",
            ])
            .record(&trace);
        let (full, resumed) = client_counts(&out.stdout);
        // The client saw what it was asked for (one more full connection opens the
        // session the resumed ones resume): otherwise the check below proves little.
        assert_eq!(
            (full, resumed),
            (FULL as u64 + 1, RESUMED as u64),
            "{protocol}: {}",
            out.stdout
        );
        let services = run(Command::new(sonda()).args([
            "services",
            trace.to_str().unwrap(),
            "--unit-class",
            &format!("full-handshake={SERVE} +*CertificateProducer::produce"),
            "--unit-class",
            &format!("resumed-handshake={SERVE} +ClientHello$ClientHelloConsumer::consume"),
            "--unit-class",
            &format!("other={SERVE}"),
        ]));
        assert!(services.status.success(), "{}", text(&services.stderr));
        let table = text(&services.stdout);
        assert_eq!(
            units_of(&table, "full-handshake"),
            full,
            "{protocol}: {table}"
        );
        assert_eq!(
            units_of(&table, "resumed-handshake"),
            resumed,
            "{protocol}: {table}"
        );
        // Every connection did a handshake that consumed a ClientHello.
        assert_eq!(units_of(&table, "other"), 0, "{protocol}: {table}");
        // The label's legend names the producer of this protocol's certificate message.
        let producer = if protocol == "TLSv1.2" {
            "T12CertificateProducer"
        } else {
            "T13CertificateProducer"
        };
        assert!(
            table
                .lines()
                .any(|l| l.trim_start().starts_with("full-handshake: ") && l.contains(producer)),
            "{protocol}: {table}"
        );
    }
}
