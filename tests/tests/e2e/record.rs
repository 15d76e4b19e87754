//! `sonda record` end to end: a real JVM under the real agent, the real kernel
//! tracepoints, the Paraver export checked by prvcheck, and the thread states checked
//! against the kernel's own accounting in /proc/<pid>/task/<tid>/schedstat.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sonda_tests::paraver::Prv;
use sonda_tests::*;
use sonda_timeline::{Feed, QueuedAsleep, Sink, Timeline};
use sonda_trace::{Event, SwitchOut, Tid, TraceMeta};

/// Paraver states and event types sonda writes (docs/architecture.md).
const RUNNING: u32 = 1;
const WAITING_CPU: u32 = 40;
const STOLEN: u32 = 41;
const GC_TYPE: u64 = 48000001;
const MONITOR_TYPE: u64 = 49000002;

struct SchedStat {
    tid: u32,
    run: u64,
    wait: u64,
    /// CLOCK_MONOTONIC ns when the thread read it.
    when: u64,
    /// `se.nr_migrations` of /proc/<pid>/task/<tid>/sched, read between `nr_from` and
    /// `nr_to` (CLOCK_MONOTONIC ns); `None` on kernels without that file.
    migrations: Option<(u64, u64, u64)>,
}

fn schedstat_lines(stdout: &str) -> BTreeMap<String, SchedStat> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("SCHEDSTAT "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].to_string(),
                SchedStat {
                    tid: f[1].parse().unwrap(),
                    run: f[2].parse().unwrap(),
                    wait: f[3].parse().unwrap(),
                    when: f[4].parse().unwrap(),
                    migrations: u64::try_from(f[5].parse::<i64>().unwrap())
                        .ok()
                        .map(|n| (n, f[6].parse().unwrap(), f[7].parse().unwrap())),
                },
            )
        })
        .collect()
}

fn within(measured: u64, truth: u64) -> bool {
    let tolerance = (truth / 100).max(1_000_000);
    measured.abs_diff(truth) <= tolerance
}

/// The lengths of `tid`'s spans in `spans` that ended by `until`.
fn spans_until(spans: &HashMap<Tid, Vec<(u64, u64)>>, tid: Tid, until: u64) -> Vec<u64> {
    spans
        .get(&tid)
        .into_iter()
        .flatten()
        .filter(|&&(_, end)| end <= until)
        .map(|&(begin, end)| end - begin)
        .collect()
}

/// Whether `truth` lies in `low..=high` widened by [`within`]'s tolerance.
fn within_range(low: u64, high: u64, truth: u64) -> bool {
    within(low, truth) || within(high, truth) || (low..=high).contains(&truth)
}

fn pct(measured: u64, truth: u64) -> f64 {
    (measured as f64 - truth as f64) * 100.0 / truth.max(1) as f64
}

/// What the trace's own records say about the kernel's accounting, per thread: the
/// spans asleep on a run queue (from the timeline, as `sonda report` shows them; and
/// found again from the records alone) and the times of the thread's migrations.
#[derive(Default)]
struct KernelView {
    /// (begin, end) of each span the thread slept on a run queue, from the timeline.
    queued_asleep: HashMap<Tid, Vec<(u64, u64)>>,
    /// The same spans by the kernel's rule applied to the records alone, without the
    /// timeline's states: so that a timeline that hid them (by making the thread
    /// runnable at the move, as schedstat has it) does not pass.
    queued_by_records: HashMap<Tid, Vec<(u64, u64)>>,
    /// Times of the thread's `Migrate` records.
    migrations: HashMap<Tid, Vec<u64>>,
    /// (begin, end) of each span from a switch-out asleep to a switch-in with no
    /// wakeup recorded between (`kernel.unseen_wakeups`): the thread waited for a CPU
    /// for somewhere between none and all of it.
    unseen: HashMap<Tid, Vec<(u64, u64)>>,
}

/// One thread, as the kernel's delayed dequeue sees it.
#[derive(Default)]
struct Queue {
    /// Switched out asleep and not woken since.
    asleep: bool,
    /// A `Waking` came and its `Wakeup` did not yet.
    waking: bool,
    /// Moved while asleep with no wakeup under way, at this time.
    since: Option<u64>,
    /// Switched out asleep at this time, no wakeup recorded since.
    out_asleep: Option<u64>,
}

impl KernelView {
    fn see(&mut self, time: u64, event: &Event, queues: &mut HashMap<Tid, Queue>) {
        let mut end = |tid: Tid, queues: &mut HashMap<Tid, Queue>| {
            let q = queues.entry(tid).or_default();
            if let Some(begin) = q.since.take() {
                self.queued_by_records
                    .entry(tid)
                    .or_default()
                    .push((begin, time));
            }
            q.asleep = false;
        };
        match *event {
            Event::Switch {
                prev,
                prev_state,
                next,
                ..
            } => {
                let asleep = SwitchOut::from_prev_state(prev_state).needs_wakeup();
                let q = queues.entry(prev).or_default();
                q.asleep = asleep;
                q.out_asleep = asleep.then_some(time);
                if let Some(begin) = queues.entry(next).or_default().out_asleep.take() {
                    self.unseen.entry(next).or_default().push((begin, time));
                }
                end(next, queues);
                queues.entry(next).or_default().waking = false;
            }
            Event::Waking { wakee, .. } => {
                let q = queues.entry(wakee).or_default();
                q.waking = true;
                q.out_asleep = None;
            }
            Event::Wakeup { wakee, .. } => {
                queues.entry(wakee).or_default().out_asleep = None;
                if queues.entry(wakee).or_default().asleep {
                    end(wakee, queues);
                }
                queues.entry(wakee).or_default().waking = false;
            }
            Event::Migrate { tid, .. } => {
                self.migrations.entry(tid).or_default().push(time);
                let q = queues.entry(tid).or_default();
                if q.asleep && !q.waking && q.since.is_none() {
                    q.since = Some(time);
                }
            }
            _ => {}
        }
    }
}

impl Sink for KernelView {
    fn queued_asleep(&mut self, q: &QueuedAsleep) {
        self.queued_asleep
            .entry(q.at.tid)
            .or_default()
            .push((q.begin.0, q.at.time.0));
    }
}

fn kernel_view(trace: &Path) -> KernelView {
    let meta = TraceMeta::scan(trace).unwrap();
    let feed = Feed::open(trace, &meta).unwrap();
    let source = meta.info.as_ref().unwrap().source;
    let mut timeline = Timeline::new(feed.origin(), source, meta.threads.keys().copied());
    if meta.switches_dated_by_clock() {
        timeline.switches_dated_by_clock();
    }
    let mut view = KernelView::default();
    let mut queues = HashMap::new();
    let mut end = feed.origin();
    for r in feed {
        view.see(r.time.0, &r.event, &mut queues);
        end = r.time;
        timeline.push(&r, &mut view);
    }
    timeline.finish(end, &mut view);
    view
}

/// The acceptance test of `sonda record`'s thread states: for every Java thread of
/// SchedMix (more runnable threads than CPUs; CPU work, sleeps, fsync'd writes, monitor
/// contention), the Running and runnable-waiting totals of the exported Paraver trace,
/// up to the instant the thread read its own /proc/<pid>/task/<tid>/schedstat at the
/// end of its life, agree with that file within 1% or 1 ms, whichever is larger.
///
/// Running is compared as is. Waiting is compared with the kernel's own rule added
/// back: on this project's kernel (6.18, EEVDF with `DELAY_DEQUEUE`) a thread that
/// blocks with negative lag stays on its run queue, and when the load balancer moves
/// it to the other CPU before it is woken (a `sched_migrate_task` of a thread asleep
/// with no `sched_waking` pending), the enqueue on the new CPU starts schedstat's
/// run-delay clock, which runs until the thread next gets a CPU although the thread
/// is still blocked until its wakeup. The trace keeps it asleep (it is); the timeline
/// reports each such span from the move to the wakeup (`QueuedAsleep`,
/// `ThreadStats::queued_asleep_ns`), and the test compares the trace's waiting plus
/// those spans with schedstat. The raw comparison is printed beside it.
///
/// Measured (10 runs on a quiet machine): such a span, 7.9 to 9.3 ms long (a 10-ms
/// sleep), came in 5 runs, on a sleeper, and was the whole of its deficit, which broke
/// the raw comparison (sleeper waiting −8.2 to −9.2 ms, −1.47 to −1.72%); with the
/// spans the worst sleeper was −0.47 ms (−0.08%). Reading schedstat after every sleep
/// (a variant of SchedMix, 8 runs), each window holding such a span differed from the
/// kernel's run delay by the span to within 2 µs (+9.017 ms raw, −0.002 ms with it;
/// +7.231/−0.001; +4.782/−0.001), and the 2,550 other windows agreed within 0.27 ms.
/// Other known differences, a few µs per wakeup (the kernel charges a woken thread as
/// running from its waking, docs/trace-format.md), stay well within the bound: worst
/// of the 10 runs, burners running +0.55% and waiting −0.27% (−4.8 ms), I/O writers
/// running −0.36% and waiting +0.21%, main +0.84 ms running (69 ms: the 1-ms floor).
///
/// Running is the trace's Running state, which leaves out steal time (the `Stolen`
/// state, from the kernel's CPU-time charges), as schedstat does. Before the trace
/// had it, this test failed on loaded hosts: in a CI run the burners' wall time on a
/// CPU exceeded schedstat by +1.8 to +2.9%, all of it steal (measured since: with the
/// steal taken out, every thread within ±0.5%; the stolen time is printed beside).
///
/// The trace's migration count of each thread, up to the instant it read
/// `se.nr_migrations` from /proc/<pid>/task/<tid>/sched, equals that count. (A CI run
/// once found one migration missing, 31 against 32, with every state within 0.1%: the
/// kernel counters are printed since, and the reader's check that no traced task's
/// record was left out as another program's, `kernel.foreign_misjudged`, must say 0.)
#[test]
fn thread_states_agree_with_the_kernels_schedstat() {
    schedstat_agrees(None, Source::Bpf);
}

/// The same with the scheduler tracepoints read from an ftrace instance
/// (`SONDA_KERNEL=ftrace`, the fallback where BPF cannot be loaded): another reader of
/// the same tracepoints, held to the same truth.
#[test]
fn thread_states_agree_with_the_kernels_schedstat_read_through_ftrace() {
    schedstat_agrees(None, Source::Ftrace);
}

/// The same beside a busy program that is not traced (two processes passing a byte
/// through pipes, as a load generator beside a server): the BPF programs write none of
/// its records but the first charge of a task found running without a reported switch
/// (which dates the switch, then is left out, `recorder/src/kernel/foreign.rs`), and
/// the traced threads' states still agree with schedstat.
#[test]
fn thread_states_agree_beside_a_busy_program_whose_records_are_left_out() {
    schedstat_beside_a_bystander(Source::Bpf);
}

/// The same through ftrace, whose task filter leaves the bystander's switches and
/// wakeups out in the kernel and whose reader leaves out its charges and migrations
/// (from the unfiltered instance) before they are ordered.
#[test]
fn thread_states_agree_beside_a_busy_program_read_through_ftrace() {
    schedstat_beside_a_bystander(Source::Ftrace);
}

fn schedstat_beside_a_bystander(source: Source) {
    let _machine = exclusive();
    if !require_tracepoints() {
        return;
    }
    schedstat_agrees(Some(Bystander::start()), source);
}

/// How the recorder reads the scheduler tracepoints (`SONDA_KERNEL`); the test fails if
/// the recorder falls back to another source.
#[derive(Clone, Copy, PartialEq)]
enum Source {
    /// A private ftrace instance.
    Ftrace,
    /// BPF programs, the default. On this project's machines (Firecracker guests,
    /// 6.18) the kernel does not run them for a wakeup done from an interrupt that came
    /// while one of the guest agent's threads (pid 1) ran, where ftrace's probe on the
    /// same tracepoint records it (13 of 13 such wakeups in 20 s; 0 to 6 per run of
    /// this test). The reader dates each from the kernel's own run-queue wait
    /// (`kernel.wakeups_recovered`, `recorder/src/kernel/bpf_unseen.rs`), and the
    /// migrations such a wakeup made (`kernel.migrations_recovered`); one it could
    /// not date is counted in `kernel.unseen_wakeups` and leaves that wait unknown
    /// within its span, which is what the test then holds it to.
    Bpf,
}

/// Two python3 processes passing a byte back and forth until dropped.
struct Bystander(std::process::Child);

impl Bystander {
    fn start() -> Bystander {
        // Each half closes the other's ends: when one is killed, the other reads the
        // end of its pipe (or fails to write) and ends too.
        const PING_PONG: &str = "import os\n\
            a, b = os.pipe(), os.pipe()\n\
            parent = os.fork() != 0\n\
            mine, theirs = (a[0], b[1]) if parent else (b[0], a[1])\n\
            for fd in (a + b):\n    fd in (mine, theirs) or os.close(fd)\n\
            os.write(theirs, b'x')\n\
            while os.read(mine, 1):\n    os.write(theirs, b'x')\n";
        let child = Command::new("python3")
            .args(["-c", PING_PONG])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        Bystander(child)
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        // Its forked half reads a pipe whose writer is gone and ends.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A failing run's directory (its trace, the Paraver files) and the workload's output,
/// copied to `$SONDA_KEEP_FAILED/<run>` when that is set: a disagreement that comes
/// once in tens of runs can then be read record by record instead of guessed at.
fn keep_failed_run(dir: &Path, stdout: &str) {
    let Some(keep) = std::env::var_os("SONDA_KEEP_FAILED") else {
        return;
    };
    let to = Path::new(&keep).join(format!(
        "{}-{}",
        std::process::id(),
        dir.file_name().unwrap_or_default().to_string_lossy()
    ));
    let copied = std::fs::create_dir_all(&to).and_then(|()| {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name()))?;
            }
        }
        std::fs::write(to.join("workload.stdout"), stdout)
    });
    match copied {
        Ok(()) => eprintln!("failed run kept in {}", to.display()),
        Err(e) => eprintln!("could not keep the failed run in {}: {e}", to.display()),
    }
}

fn schedstat_agrees(bystander: Option<Bystander>, source: Source) {
    // Held to schedstat within 1%: no other test on the CPUs meanwhile.
    let _machine = bystander.is_none().then(exclusive);
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mix.trace");
    let mut workload = Workload::java("SchedMix").args([dir.path().as_os_str(), "3".as_ref()]);
    let kernel = match source {
        Source::Bpf => "bpf",
        Source::Ftrace => "ftrace",
    };
    workload = workload.env("SONDA_KERNEL", kernel);
    let stdout = workload.record(&trace).stdout;
    assert!(
        stdout.contains("DONE 8 threads"),
        "workload output: {stdout}"
    );
    let truth = schedstat_lines(&stdout);
    assert_eq!(
        truth.len(),
        9,
        "every thread reports its schedstat: {stdout}"
    );

    let stem = dir.path().join("mix");
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(&trace)
        .arg("-o")
        .arg(&stem));
    assert!(
        out.status.success(),
        "sonda paraver failed: {}",
        text(&out.stderr)
    );
    check_paraver(&stem);
    let prv = Prv::load(&stem);
    // Paraver times count from the trace's origin; the workload's from boot.
    let meta = sonda_trace::TraceMeta::scan(&trace).unwrap();
    let origin = meta.origin().0;
    let kernel = kernel_view(&trace);
    // What the recorder says of its own reading, printed so that a failure can be told
    // apart: records lost, or left out as another program's by mistake.
    let counters = sonda_tests::kernel_counters(&meta);
    eprintln!("{counters}");

    let mut failures = Vec::new();
    let bpf = meta.counters.get("kernel.bpf") == Some(&1);
    if bpf != (source == Source::Bpf) {
        failures.push(format!(
            "read through BPF: {bpf}, asked: {}",
            source == Source::Bpf
        ));
    }
    if meta.counters.get("kernel.foreign_misjudged") != Some(&0) {
        failures.push("records of traced tasks were left out as another program's".into());
    }
    for (name, s) in &truth {
        // By tid: the main thread is renamed DestroyJavaVM when main() returns.
        let t = prv.thread_by_tid(s.tid).unwrap_or_else(|| {
            panic!("thread {name} ({}) not in the .row: {:?}", s.tid, prv.names)
        });
        // Compare up to the instant the thread read its schedstat, at the end of its life.
        let until = s.when - origin;
        let run_ns = prv.state_total_until(t, RUNNING, until);
        let wait_ns = prv.state_total_until(t, WAITING_CPU, until);
        let stolen_ns = prv.state_total_until(t, STOLEN, until);
        let tid = Tid(s.tid);
        // The thread runs when it reads: every span it slept queued ended before.
        let queued = spans_until(&kernel.queued_asleep, tid, s.when);
        let queued_ns: u64 = queued.iter().sum();
        let kernel_wait_ns = wait_ns + queued_ns;
        let spans = kernel.queued_asleep.get(&tid).cloned().unwrap_or_default();
        let by_records = kernel
            .queued_by_records
            .get(&tid)
            .cloned()
            .unwrap_or_default();
        if spans != by_records {
            failures.push(format!(
                "{name}: asleep on a run queue {spans:?} in the timeline, {by_records:?} by the records"
            ));
        }
        // In those spans the thread is asleep in the Paraver trace too: neither running
        // nor waiting for a CPU.
        for &(begin, end) in &by_records {
            let (begin, end) = (begin - origin, end - origin);
            if let Some(st) = prv.states.iter().find(|st| {
                st.0 == t
                    && st.1 < end
                    && st.2 > begin
                    && matches!(st.3, RUNNING | WAITING_CPU | STOLEN)
            }) {
                failures.push(format!(
                    "{name}: state {} at {}..{} ns, inside its sleep on a run queue {begin}..{end}",
                    st.3, st.1, st.2
                ));
            }
        }
        eprintln!(
            "{name:>14} tid {:>7}: running {:>11} vs schedstat {:>11} ({:+.3}%; stolen {:.3} ms, with it {:+.3}%), waiting {:>11} vs {:>11} ({:+.3}%), + {} asleep on a run queue ({:?} ns) = {:>11} ({:+.3}%, {:+.3} ms)",
            s.tid,
            run_ns,
            s.run,
            pct(run_ns, s.run),
            stolen_ns as f64 / 1e6,
            pct(run_ns + stolen_ns, s.run),
            wait_ns,
            s.wait,
            pct(wait_ns, s.wait),
            queued.len(),
            queued,
            kernel_wait_ns,
            pct(kernel_wait_ns, s.wait),
            (kernel_wait_ns as f64 - s.wait as f64) / 1e6,
        );
        if !within(run_ns, s.run) {
            failures.push(format!(
                "{name}: running {run_ns} ns in the trace, {} ns in schedstat",
                s.run
            ));
        }
        // A wakeup missing from the trace leaves the wait before that switch-in
        // unknown, between none and all of the time off the CPU: the truth must lie in
        // that range (never seen with ftrace; with BPF, one whose wait the kernel did
        // not keep, see `Source::Bpf`).
        let unseen = spans_until(&kernel.unseen, tid, s.when);
        let unseen_ns: u64 = unseen.iter().sum();
        if !unseen.is_empty() {
            eprintln!(
                "{name:>14} tid {:>7}: {} wakeup(s) unseen, off the CPU {:?} ns: waiting {kernel_wait_ns}..{} ns against {}",
                s.tid,
                unseen.len(),
                unseen,
                kernel_wait_ns + unseen_ns,
                s.wait
            );
        }
        if !within_range(kernel_wait_ns, kernel_wait_ns + unseen_ns, s.wait) {
            failures.push(format!(
                "{name}: waiting for a CPU {wait_ns} ns in the trace, + {queued_ns} ns asleep on a run queue = {kernel_wait_ns} ns (+ up to {unseen_ns} ns before unseen wakeups), {} ns in schedstat",
                s.wait
            ));
        }
        if let Some((nr, from, to)) = s.migrations {
            let times = kernel.migrations.get(&tid).map_or(&[][..], Vec::as_slice);
            let upto = |t: u64| times.iter().filter(|&&m| m <= t).count() as u64;
            let (low, high) = (upto(from), upto(to));
            eprintln!(
                "{name:>14} tid {:>7}: migrations {low} in the trace, se.nr_migrations {nr}",
                s.tid
            );
            if !(low..=high).contains(&nr) {
                failures.push(format!(
                    "{name}: {low} migrations in the trace (up to {high} while the kernel's count was read, {} in all), {nr} in se.nr_migrations; read at {from}..{to}, the last ones at {:?}",
                    times.len(),
                    &times[times.len().saturating_sub(3)..]
                ));
            }
        }
    }
    if !failures.is_empty() {
        keep_failed_run(dir.path(), &stdout);
    }
    assert!(
        failures.is_empty(),
        "trace disagrees with the kernel ({counters}):\n{}",
        failures.join("\n")
    );
    // The CPU burners outnumber the CPUs: they must have waited.
    assert!(truth["cpu-burner-0"].wait > 10_000_000);
    if bystander.is_some() {
        // The ping-pong makes about 100k records a second (ftrace: 280-390k left out
        // in runs of this test, 3-4k without it; BPF, counting every record its
        // programs did not write: 700-850k, 4-6k without).
        let skipped = meta.counters.get("kernel.foreign_skipped").copied();
        assert!(
            skipped.is_some_and(|n| n >= 50_000),
            "the bystander's records were not left out ({counters})"
        );
    }

    // GC and monitor contention appear in the Paraver trace...
    assert!(
        prv.events.iter().any(|e| e.2 == GC_TYPE && e.3 == 1),
        "no GC event in the .prv"
    );
    assert!(
        prv.events.iter().any(|e| e.2 == MONITOR_TYPE && e.3 != 0),
        "no monitor contention in the .prv"
    );
    let pcf = std::fs::read_to_string(stem.with_extension("pcf")).unwrap();
    assert!(
        pcf.contains("SchedMix$ContendedLock"),
        "monitor class not labelled in the .pcf"
    );
    // ... and in the report.
    let out = run(Command::new(sonda()).arg("report").arg(&trace));
    assert!(
        out.status.success(),
        "sonda report failed: {}",
        text(&out.stderr)
    );
    let report = text(&out.stdout);
    for name in truth.keys() {
        assert!(
            report.contains(name.as_str()),
            "report lacks thread {name}:\n{report}"
        );
    }
    assert!(
        report.contains("SchedMix$ContendedLock"),
        "report lacks the monitor class:\n{report}"
    );
    assert!(
        report.to_lowercase().contains("gc"),
        "report lacks GC:\n{report}"
    );
}

#[test]
fn the_exit_status_is_the_childs() {
    let _machine = shared();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let out = run(Command::new(sonda())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "sh", "-c", "kill -TERM $$"]));
    assert_eq!(
        out.status.code(),
        Some(128 + 15),
        "stderr: {}",
        text(&out.stderr)
    );
}

#[test]
fn a_killed_collector_leaves_the_jvm_running_and_a_readable_trace() {
    let _machine = shared();
    if !require_tracepoints() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("killed.trace");
    let child = Workload::java("SchedMix")
        .args([dir.path().as_os_str(), "4".as_ref()])
        .record_command(&trace)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let started = Instant::now();
    // The JVM shares the stdout pipe: reading to the end waits for the JVM too.
    let output = child.wait_with_output().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("DONE 8 threads"),
        "the JVM did not run to completion after the collector died: {stdout}"
    );
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "the JVM ended with the collector"
    );

    // sonda had no chance to rename its trace: it stays at its partial name.
    assert!(!trace.exists(), "a killed recording renamed its trace");
    let partial = partial_outputs(&trace);
    assert_eq!(partial.len(), 1, "the killed recording's partial trace");
    let stem = dir.path().join("killed");
    let out = run(Command::new(sonda())
        .arg("paraver")
        .arg(&partial[0])
        .arg("-o")
        .arg(&stem));
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        stem.with_extension("prv").exists(),
        "no Paraver trace from the partial recording: {}",
        text(&out.stderr)
    );
    check_paraver(&stem);
    let prv = Prv::load(&stem);
    assert!(
        prv.names.iter().any(|n| n.contains("cpu-burner-0")),
        "threads of the partial trace: {:?}",
        prv.names
    );
    assert!(
        prv.end > 1_000_000_000,
        "the partial trace covers {} ns",
        prv.end
    );
}
