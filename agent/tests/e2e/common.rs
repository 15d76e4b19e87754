//! Helpers for the agent's tests: a real shared buffer file (`Region::create`, the
//! collector's side), the Java programs in `tests/java/` compiled with javac, a real JVM
//! run with `-agentpath:libsonda.so=shm=...`, and a drain of everything the agent wrote
//! (ring records per slot, metadata log), decoded with the same crates the collector uses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sonda_shm::config::AgentConfig;
use sonda_shm::records::{self, RingRecord};
use sonda_shm::{AgentState, Clock, Geometry, Region};
use sonda_trace::codec::{Item, Items};
use sonda_trace::Meta;

/// The agent library cargo built with this test binary: `cargo test` builds the
/// package's cdylib into `target/<profile>/deps/`, next to the test binary (`cargo
/// build` puts it in `target/<profile>/`, the fallback).
pub fn libsonda() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test binary has a directory");
    let candidates = [
        deps.join("libsonda.so"),
        deps.parent()
            .map(|p| p.join("libsonda.so"))
            .unwrap_or_default(),
    ];
    candidates
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "libsonda.so not found next to {}: build with `cargo test -p sonda-agent`",
                exe.display()
            )
        })
}

/// Compiles `tests/java/<name>.java` once per test process; returns the class dir.
/// `patch_probe` compiles against a stub of `java.lang.SondaProbe` (patched into
/// java.base at compile time only: at run time the agent defines the real class).
pub fn java_classes(name: &str, patch_probe: bool) -> PathBuf {
    static DIRS: OnceLock<Mutex<BTreeMap<String, PathBuf>>> = OnceLock::new();
    let mut dirs = DIRS.get_or_init(Default::default).lock().unwrap();
    if let Some(d) = dirs.get(name) {
        return d.clone();
    }
    let java_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let out = std::env::temp_dir().join(format!("sonda-agent-java-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = Command::new("javac");
    cmd.arg("-d").arg(&out);
    if patch_probe {
        cmd.arg("--patch-module").arg(format!(
            "java.base={}",
            java_dir.join("probe-stub").display()
        ));
    }
    cmd.arg(java_dir.join(format!("{name}.java")));
    let o = cmd.output().expect("javac runs");
    assert!(
        o.status.success(),
        "javac {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    dirs.insert(name.to_string(), out.clone());
    out
}

/// A recording: a temp dir holding the buffer file, mapped as the collector maps it.
pub struct Recording {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    pub region: Region,
}

impl Recording {
    /// Waits up to `within` for the agent to say `want` in the buffer's header.
    pub fn wait_state(&self, want: AgentState, within: Duration) {
        let deadline = Instant::now() + within;
        while self.region.agent_state() != want {
            assert!(
                Instant::now() < deadline,
                "agent never reached {want:?}: {:?}",
                self.drain_metas()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A buffer file with the agent configuration `config`, given in its text form
    /// (`mode=attach\nmethods=A::b\n`) and written as the collector writes it.
    pub fn new(config: &str, clock: Clock) -> Recording {
        Recording::with_geometry(
            config,
            clock,
            Geometry {
                slots: 64,
                ring_len: 1 << 20,
                meta_len: 1 << 20,
            },
        )
    }

    /// As [`Recording::new`], with the given sizes. A configuration text that does not
    /// decode fails the test here: use [`Recording::with_config_text`] for one meant
    /// for the agent to refuse.
    pub fn with_geometry(config: &str, clock: Clock, geo: Geometry) -> Recording {
        let config = AgentConfig::decode(config)
            .unwrap_or_else(|e| panic!("test configuration {config:?}: {e}"));
        Recording::create(|path| Region::create(path, geo, clock, &config))
    }

    /// A buffer file holding `text` verbatim as the configuration text, as a collector
    /// of another version might have written it.
    pub fn with_config_text(text: &str, clock: Clock) -> Recording {
        let geo = Geometry {
            slots: 64,
            ring_len: 1 << 20,
            meta_len: 1 << 20,
        };
        Recording::create(|path| Region::create_with_config_text(path, geo, clock, text))
    }

    fn create(region: impl FnOnce(&Path) -> Result<Region, sonda_shm::CreateError>) -> Recording {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sonda-test.buf");
        let region = region(&path).unwrap();
        Recording { dir, path, region }
    }

    /// Runs `java <jvm_args> -cp <classes> <main> <args>` with the agent.
    pub fn run_java(&self, classes: &Path, jvm_args: &[&str], main: &str, args: &[&str]) -> Output {
        let agent = format!(
            "-agentpath:{}=shm={}",
            libsonda().display(),
            self.path.display()
        );
        run_java(classes, &[&[agent.as_str()], jvm_args].concat(), main, args)
    }

    /// The metadata log so far (read without consuming anything).
    pub fn drain_metas(&self) -> Vec<Meta> {
        let mut metas = Vec::new();
        let mut cursor = 0;
        self.region.read_meta(&mut cursor, |bytes| {
            for item in Items::new(bytes) {
                if let Ok(Item::Meta(m)) = item {
                    metas.push(m);
                }
            }
        });
        metas
    }

    /// Everything the agent left: ring records per slot and the metadata log.
    pub fn drain(&self) -> Drained {
        let mut slots = Vec::new();
        for i in 0..self.region.slots() {
            let info = self.region.slot_info(i);
            if info.generation == 0 {
                continue;
            }
            let mut bytes = Vec::new();
            self.region.drain(i, &mut bytes);
            slots.push(SlotRecords {
                pid: info.pid,
                tid: info.tid,
                dropped: info.dropped,
                state: info.state,
                records: records::decode(&bytes).collect(),
            });
        }
        let mut metas = Vec::new();
        let mut cursor = 0;
        self.region.read_meta(&mut cursor, |bytes| {
            for item in Items::new(bytes) {
                match item.expect("metadata record decodes") {
                    Item::Meta(m) => metas.push(m),
                    other => panic!("non-metadata item in the log: {other:?}"),
                }
            }
        });
        Drained {
            slots,
            metas,
            no_slot_drops: self.region.no_slot_drops(),
            meta_drops: self.region.meta_drops(),
        }
    }
}

/// Runs a JVM without the agent flag added (callers pass their own).
pub fn run_java(classes: &Path, jvm_args: &[&str], main: &str, args: &[&str]) -> Output {
    sonda_tests::run(
        Command::new("java")
            .args(jvm_args)
            .arg("-cp")
            .arg(classes)
            .arg(main)
            .args(args),
    )
}

pub use sonda_tests::text;

/// The records of one slot.
#[derive(Debug)]
pub struct SlotRecords {
    pub pid: u32,
    pub tid: u32,
    pub dropped: u64,
    pub state: sonda_shm::SlotState,
    pub records: Vec<RingRecord>,
}

/// What a recording holds after the JVM exited.
#[derive(Debug)]
pub struct Drained {
    pub slots: Vec<SlotRecords>,
    pub metas: Vec<Meta>,
    pub no_slot_drops: u64,
    pub meta_drops: u64,
}

impl Drained {
    /// Records of `kind` on thread `tid`.
    pub fn records_of(&self, tid: u32, kind: u8) -> Vec<RingRecord> {
        self.slots
            .iter()
            .filter(|s| s.tid == tid)
            .flat_map(|s| s.records.iter().filter(|r| r.kind == kind).copied())
            .collect()
    }

    /// (tid, record) of every record of `kind`.
    pub fn all_of(&self, kind: u8) -> Vec<(u32, RingRecord)> {
        self.slots
            .iter()
            .flat_map(|s| {
                s.records
                    .iter()
                    .filter(|r| r.kind == kind)
                    .map(move |r| (s.tid, *r))
            })
            .collect()
    }

    /// Whether a `Meta::JavaThread` names `tid` as `name`.
    pub fn has_java_thread(&self, tid: u32, name: &str) -> bool {
        self.metas.iter().any(
            |m| matches!(m, Meta::JavaThread { tid: t, name: n, .. } if t.0 == tid && n == name),
        )
    }

    /// The tid of the (first) Java thread named `name`.
    pub fn tid_of(&self, name: &str) -> Option<u32> {
        self.metas.iter().find_map(|m| match m {
            Meta::JavaThread { tid, name: n, .. } if n == name => Some(tid.0),
            _ => None,
        })
    }

    /// Java thread names by tid (the last name wins when an OS thread was two Java
    /// threads, as main then DestroyJavaVM).
    pub fn java_threads(&self) -> BTreeMap<u32, (String, bool)> {
        self.metas
            .iter()
            .filter_map(|m| match m {
                Meta::JavaThread {
                    tid, name, daemon, ..
                } => Some((tid.0, (name.clone(), *daemon))),
                _ => None,
            })
            .collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.metas
            .iter()
            .filter_map(|m| match m {
                Meta::Warning { text } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn counter(&self, name: &str) -> Option<u64> {
        self.metas.iter().rev().find_map(|m| match m {
            Meta::Counter { name: n, value } if n == name => Some(*value),
            _ => None,
        })
    }

    /// Method ids by "class.name descriptor".
    pub fn methods(&self) -> BTreeMap<String, u32> {
        self.metas
            .iter()
            .filter_map(|m| match m {
                Meta::Method {
                    id,
                    class,
                    name,
                    descriptor,
                } => Some((format!("{class}.{name}{descriptor}"), *id)),
                _ => None,
            })
            .collect()
    }
}

/// Asserts the JVM exited normally, showing its output otherwise.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "java failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("sonda:"),
        "agent complained:\n{}",
        text(&out.stderr)
    );
    // Nothing from the agent or the JVM's logging about it may reach the program's
    // stdout (the programs' own lines never start with these).
    let stdout = text(&out.stdout);
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("sonda") || l.starts_with('[') || l.contains("VM warning")),
        "stdout polluted:\n{stdout}"
    );
}

/// The lines of stdout that start with `prefix `, split on tabs after it.
pub fn tagged_lines(out: &Output, prefix: &str) -> Vec<Vec<String>> {
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(prefix).and_then(|r| r.strip_prefix('\t')))
        .map(|r| r.split('\t').map(str::to_string).collect())
        .collect()
}
