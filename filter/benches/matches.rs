//! Cost of the agent's questions, with 20 patterns of the kind a Tomcat study uses:
//! `cargo bench -p sonda-filter`.
//!
//! Methods are real class names (the JDK's startup class list, when the JDK is
//! installed, else a built-in list) crossed with common method names, plus Tomcat and
//! application methods that the patterns do select. Prints the median of 5 rounds, in
//! on-CPU time of the benchmark thread.

use std::hint::black_box;
use std::time::Instant;

use sonda_filter::{MethodFilter, MethodRef};

const PATTERNS: [&str; 20] = [
    "org.apache.catalina.connector.CoyoteAdapter::service",
    "org.apache.catalina.core.StandardWrapperValve::invoke",
    "org.apache.catalina.core.*Valve::invoke",
    "*Servlet::service",
    "jakarta.servlet.http.HttpServlet::do*",
    "org.apache.coyote.http11.Http11Processor::service",
    "org.apache.tomcat.util.net.NioEndpoint$SocketProcessor::doRun",
    "org.apache.tomcat.util.net.SecureNioChannel::handshake*",
    "sun.security.ssl.**::*Handshake*",
    "com.example.app.**",
    "!com.example.app.dto.**",
    "!::toString",
    "!::hashCode",
    "@jakarta.ws.rs.GET",
    "@jakarta.ws.rs.POST",
    "java.sql.**::execute*",
    "javax.sql.DataSource::getConnection",
    "java.util.HashMap::resize",
    "com.example.app.Main::main([Ljava/lang/String;)V",
    "java.net.SocketInputStream::read([BII)",
];

const FALLBACK_CLASSES: &[&str] = &[
    "java/lang/String",
    "java/lang/Object",
    "java/util/HashMap",
    "java/util/HashMap$Node",
    "java/util/ArrayList",
    "java/util/concurrent/ConcurrentHashMap",
    "java/io/FileInputStream",
    "java/lang/invoke/MethodHandleImpl",
    "jdk/internal/misc/Unsafe",
    "sun/nio/ch/FileChannelImpl",
    "java/lang/Thread",
    "java/util/regex/Pattern$CharProperty",
    "java/net/URI",
];

const TOMCAT_METHODS: &[(&str, &str, &str)] = &[
    (
        "org/apache/catalina/connector/CoyoteAdapter",
        "service",
        "(Lorg/apache/coyote/Request;Lorg/apache/coyote/Response;)V",
    ),
    (
        "org/apache/catalina/core/StandardEngineValve",
        "invoke",
        "(Lorg/apache/catalina/connector/Request;Lorg/apache/catalina/connector/Response;)V",
    ),
    (
        "jakarta/servlet/http/HttpServlet",
        "service",
        "(Ljakarta/servlet/ServletRequest;Ljakarta/servlet/ServletResponse;)V",
    ),
    (
        "jakarta/servlet/http/HttpServlet",
        "doGet",
        "(Ljakarta/servlet/http/HttpServletRequest;Ljakarta/servlet/http/HttpServletResponse;)V",
    ),
    (
        "org/apache/tomcat/util/net/NioEndpoint$SocketProcessor",
        "doRun",
        "()V",
    ),
    (
        "com/example/app/OrderService",
        "placeOrder",
        "(Lcom/example/app/dto/Order;)J",
    ),
    ("com/example/app/dto/Order", "getId", "()J"),
    ("com/example/app/Main", "main", "([Ljava/lang/String;)V"),
];

const METHOD_NAMES: &[(&str, &str)] = &[
    ("<init>", "()V"),
    ("<clinit>", "()V"),
    ("get", "(Ljava/lang/Object;)Ljava/lang/Object;"),
    ("hashCode", "()I"),
    ("toString", "()Ljava/lang/String;"),
    ("run", "()V"),
    ("invoke", "([Ljava/lang/Object;)Ljava/lang/Object;"),
    ("read", "([BII)I"),
    ("size", "()I"),
    ("equals", "(Ljava/lang/Object;)Z"),
];

fn corpus_classes() -> (Vec<String>, &'static str) {
    match std::fs::read_to_string("/usr/lib/jvm/java-17-openjdk-amd64/lib/classlist") {
        Ok(text) => {
            let classes: Vec<String> = text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with('@') && !l.is_empty())
                .map(|l| l.split_whitespace().next().unwrap_or(l).to_owned())
                .collect();
            (classes, "JDK 17 classlist")
        }
        Err(_) => (
            FALLBACK_CLASSES.iter().map(|s| s.to_string()).collect(),
            "built-in list",
        ),
    }
}

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`), so that
/// other processes competing for the CPUs do not inflate the figures; wall time where
/// that file is missing.
fn cpu_ns(wall: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos() as u64)
}

/// Median on-CPU ns per call of `f` over `calls` calls per round.
fn median_ns(calls: usize, mut f: impl FnMut() -> usize) -> f64 {
    let origin = Instant::now();
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let t = cpu_ns(origin);
            black_box(f());
            (cpu_ns(origin) - t) as f64 / calls as f64
        })
        .collect();
    rounds.sort_by(|a, b| a.partial_cmp(b).unwrap());
    rounds[2]
}

fn main() {
    let with_annotations = MethodFilter::parse(&PATTERNS).expect("bench patterns parse");
    let plain: Vec<&str> = PATTERNS
        .iter()
        .copied()
        .filter(|p| !p.starts_with('@'))
        .collect();
    let plain = MethodFilter::parse(&plain).expect("bench patterns parse");

    let (classes, source) = corpus_classes();
    let mut methods: Vec<MethodRef<'_>> = Vec::new();
    for class in &classes {
        for (name, descriptor) in METHOD_NAMES {
            methods.push(MethodRef {
                class,
                name,
                descriptor,
                class_annotations: &[],
                method_annotations: &[],
            });
        }
    }
    let hits: Vec<MethodRef<'_>> = TOMCAT_METHODS
        .iter()
        .map(|&(class, name, descriptor)| MethodRef {
            class,
            name,
            descriptor,
            class_annotations: &[],
            method_annotations: &[],
        })
        .collect();
    let reps = 200_000 / methods.len().max(1) + 1;
    let hit_reps = 200_000 / hits.len();

    println!(
        "{} patterns; corpus: {} classes ({source}) x {} methods = {} methods",
        PATTERNS.len(),
        classes.len(),
        METHOD_NAMES.len(),
        methods.len()
    );

    let selected = methods
        .iter()
        .filter(|m| with_annotations.matches(m).is_some())
        .count();
    let ns = median_ns(reps * methods.len(), || {
        let mut n = 0;
        for _ in 0..reps {
            for m in &methods {
                n += with_annotations.matches(black_box(m)).is_some() as usize;
            }
        }
        n
    });
    println!("matches, corpus methods (mostly not selected, {selected} selected): {ns:.1} ns/call");

    let ns = median_ns(hit_reps * hits.len(), || {
        let mut n = 0;
        for _ in 0..hit_reps {
            for m in &hits {
                n += with_annotations.matches(black_box(m)).unwrap_or(0);
            }
        }
        n
    });
    println!("matches, Tomcat/app methods (selected or excluded): {ns:.1} ns/call");

    let may = classes
        .iter()
        .filter(|c| plain.class_may_match(c, &[]))
        .count();
    let class_reps = 200_000 / classes.len().max(1) + 1;
    let ns = median_ns(class_reps * classes.len(), || {
        let mut n = 0;
        for _ in 0..class_reps {
            for c in &classes {
                n += plain.class_may_match(black_box(c), &[]) as usize;
            }
        }
        n
    });
    println!(
        "class_may_match without @ patterns ({may} of {} classes pass): {ns:.1} ns/call",
        classes.len()
    );
    let ns = median_ns(class_reps * classes.len(), || {
        let mut n = 0;
        for _ in 0..class_reps {
            for c in &classes {
                n += with_annotations.class_may_match(black_box(c), &[]) as usize;
            }
        }
        n
    });
    println!("class_may_match with @ patterns (every class passes): {ns:.1} ns/call");

    let t = Instant::now();
    for _ in 0..1000 {
        black_box(MethodFilter::parse(black_box(&PATTERNS)).is_ok());
    }
    println!(
        "parse of the {} patterns: {:.1} us",
        PATTERNS.len(),
        t.elapsed().as_nanos() as f64 / 1000.0 / 1000.0
    );
}
