//! Turns tracepoint records into trace events, using the field layouts read from
//! tracefs. Pure: the layouts are built from [`Format`]s, and decoding reads only the
//! record's bytes. The records come from perf samples or ftrace pages alike: both carry
//! the payload the `format` files describe; what else is known of the hit is in a
//! [`Hit`].

use sonda_trace::{ChargedBy, Cpu, Event, Pid, Tid};

use super::tp_format::{Field, Format};

/// `clone_flags` bit: the new task is a thread of its parent's process.
const CLONE_THREAD: u64 = 0x0001_0000;

/// How many tracepoints sonda records.
pub const TRACEPOINT_COUNT: usize = 9;

/// The tracepoints sonda records, as `(subsystem, name)`. `sched_migrate_task` says when
/// the kernel moves a thread to another CPU's run queue: the CPU a runnable thread waits
/// on, and the moves of blocked threads that the kernel's run-queue accounting counts as
/// waiting (docs/trace-format.md, "Thread states and the kernel's own accounting").
pub const TRACEPOINTS: [(&str, &str); TRACEPOINT_COUNT] = [
    ("sched", "sched_switch"),
    ("sched", "sched_waking"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_wakeup_new"),
    ("task", "task_newtask"),
    ("sched", "sched_process_exit"),
    ("sched", "sched_process_exec"),
    ("task", "task_rename"),
    MIGRATE_TRACEPOINT,
];

/// `sched_migrate_task`, recorded by an ftrace instance of its own (`ftrace_source`).
pub const MIGRATE_TRACEPOINT: (&str, &str) = ("sched", "sched_migrate_task");

/// The tracepoint of the scheduler's CPU-time charges (`Event::CpuTime`): what the
/// task clock charged a running thread, which leaves out steal time. Recorded when the
/// kernel has it; a trace without it counts steal time as running.
pub const CPU_TIME_TRACEPOINT: (&str, &str) = ("sched", "sched_stat_runtime");

/// A tracepoint whose format lacks a field sonda needs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MissingField {
    /// The tracepoint.
    pub tracepoint: String,
    /// The field.
    pub field: &'static str,
}

impl std::fmt::Display for MissingField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tracepoint {} has no field {} on this kernel",
            self.tracepoint, self.field
        )
    }
}

fn field(format: &Format, name: &'static str) -> Result<Field, MissingField> {
    format.field(name).cloned().ok_or_else(|| MissingField {
        tracepoint: format.name.clone(),
        field: name,
    })
}

struct SwitchLayout {
    prev_pid: Field,
    prev_state: Field,
    next_pid: Field,
}

struct WakeLayout {
    pid: Field,
    target_cpu: Field,
}

struct NewTaskLayout {
    pid: Field,
    comm: Field,
    clone_flags: Field,
}

struct ExecLayout {
    filename: Field,
    pid: Field,
}

struct MigrateLayout {
    pid: Field,
    orig_cpu: Field,
    dest_cpu: Field,
}

struct CpuTimeLayout {
    pid: Field,
    runtime: Field,
}

struct RenameLayout {
    /// Absent on kernels that dropped it: the renamed task is then the sample's own.
    pid: Option<Field>,
    newcomm: Field,
}

/// One tracepoint hit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Hit<'a> {
    /// The task that was running (the waker of a wakeup, the creator of a task).
    pub tid: u32,
    /// The CPU it happened on.
    pub cpu: u32,
    /// The tracepoint payload, `common_type` first.
    pub raw: &'a [u8],
}

/// What a tracepoint id stands for.
enum Kind {
    Switch,
    Waking,
    Wakeup { new_task: bool },
    NewTask,
    Exit,
    Exec,
    Rename,
    Migrate,
    CpuTime,
}

/// Bits of an ftrace record's `common_flags`: the context the kernel wrote it in
/// (`enum trace_flag_type` in the kernel's `kernel/trace/trace.h`).
pub mod flags {
    /// The task running had a reschedule pending (`TIF_NEED_RESCHED`, the `N`/`n` of
    /// the kernel's text rendering): the CPU switches at its next chance.
    pub const NEED_RESCHED: u8 = 0x04;
    /// Written from a hardware interrupt.
    pub const HARDIRQ: u8 = 0x08;
    /// Written from a software interrupt.
    pub const SOFTIRQ: u8 = 0x10;
}

/// Decodes the payloads of the tracepoints in [`TRACEPOINTS`].
pub struct SchedDecoder {
    ids: Vec<(u16, Kind)>,
    common_pid: Field,
    /// The ftrace header's context flags; `None` where the format has none (perf's
    /// raw samples carry the same header, but BPF hits do not come through here).
    common_flags: Option<Field>,
    switch: SwitchLayout,
    waking: WakeLayout,
    wakeup: WakeLayout,
    wakeup_new: WakeLayout,
    newtask: NewTaskLayout,
    exit_pid: Field,
    exec: ExecLayout,
    rename: RenameLayout,
    migrate: MigrateLayout,
    cpu_time: Option<CpuTimeLayout>,
}

impl SchedDecoder {
    /// Builds the decoder from the formats of [`TRACEPOINTS`], in that order, and of
    /// [`CPU_TIME_TRACEPOINT`] if the kernel has it.
    pub fn new(
        formats: &[Format; TRACEPOINT_COUNT],
        cpu_time: Option<&Format>,
    ) -> Result<SchedDecoder, MissingField> {
        let [switch, waking, wakeup, wakeup_new, newtask, exit, exec, rename, migrate] = formats;
        let wake = |f: &Format| -> Result<WakeLayout, MissingField> {
            Ok(WakeLayout {
                pid: field(f, "pid")?,
                target_cpu: field(f, "target_cpu")?,
            })
        };
        let id = |f: &Format| f.id as u16;
        let mut ids = vec![
            (id(switch), Kind::Switch),
            (id(waking), Kind::Waking),
            (id(wakeup), Kind::Wakeup { new_task: false }),
            (id(wakeup_new), Kind::Wakeup { new_task: true }),
            (id(newtask), Kind::NewTask),
            (id(exit), Kind::Exit),
            (id(exec), Kind::Exec),
            (id(rename), Kind::Rename),
            (id(migrate), Kind::Migrate),
        ];
        let cpu_time = match cpu_time {
            Some(f) => {
                ids.push((id(f), Kind::CpuTime));
                Some(CpuTimeLayout {
                    pid: field(f, "pid")?,
                    runtime: field(f, "runtime")?,
                })
            }
            None => None,
        };
        Ok(SchedDecoder {
            common_pid: field(switch, "common_pid")?,
            common_flags: switch.field("common_flags").cloned(),
            ids,
            switch: SwitchLayout {
                prev_pid: field(switch, "prev_pid")?,
                prev_state: field(switch, "prev_state")?,
                next_pid: field(switch, "next_pid")?,
            },
            waking: wake(waking)?,
            wakeup: wake(wakeup)?,
            wakeup_new: wake(wakeup_new)?,
            newtask: NewTaskLayout {
                pid: field(newtask, "pid")?,
                comm: field(newtask, "comm")?,
                clone_flags: field(newtask, "clone_flags")?,
            },
            exit_pid: field(exit, "pid")?,
            exec: ExecLayout {
                filename: field(exec, "filename")?,
                pid: field(exec, "pid")?,
            },
            rename: RenameLayout {
                pid: rename.field("pid").cloned(),
                newcomm: field(rename, "newcomm")?,
            },
            migrate: MigrateLayout {
                pid: field(migrate, "pid")?,
                orig_cpu: field(migrate, "orig_cpu")?,
                dest_cpu: field(migrate, "dest_cpu")?,
            },
            cpu_time,
        })
    }

    /// Whether the decoder takes the scheduler's CPU-time charges.
    pub fn has_cpu_time(&self) -> bool {
        self.cpu_time.is_some()
    }

    /// The running task as the payload's common fields name it (ftrace records carry
    /// nothing else; the idle task is 0).
    pub fn current_tid(&self, raw: &[u8]) -> Option<u32> {
        self.common_pid.read_u32(raw)
    }

    /// The context the payload was written in, as the common fields' flags say
    /// ([`flags`]); 0 when the format has none.
    pub fn context_flags(&self, raw: &[u8]) -> u8 {
        self.common_flags
            .as_ref()
            .and_then(|f| f.read_u64(raw))
            .map_or(0, |v| v as u8)
    }

    /// The event a hit stands for; `None` for a hit of another tracepoint or a payload
    /// too short for its layout (counted by the caller as undecodable). `pid_of` gives
    /// the process of the running task, asked only for a new thread (which joins it).
    pub fn decode(&self, s: &Hit<'_>, pid_of: impl FnOnce(u32) -> u32) -> Option<Event> {
        let id = u16::from_ne_bytes(s.raw.get(0..2)?.try_into().ok()?);
        let (_, kind) = self.ids.iter().find(|(i, _)| *i == id)?;
        let raw = s.raw;
        let cpu = Cpu(s.cpu as u16);
        Some(match kind {
            Kind::Switch => Event::Switch {
                cpu,
                prev: Tid(self.switch.prev_pid.read_u32(raw)?),
                prev_state: self.switch.prev_state.read_u64(raw)?,
                next: Tid(self.switch.next_pid.read_u32(raw)?),
                charge: None,
            },
            Kind::Waking => Event::Waking {
                cpu,
                waker: Tid(s.tid),
                wakee: Tid(self.waking.pid.read_u32(raw)?),
            },
            Kind::Wakeup { new_task } => {
                let layout = if *new_task {
                    &self.wakeup_new
                } else {
                    &self.wakeup
                };
                Event::Wakeup {
                    target: Cpu(layout.target_cpu.read_u32(raw)? as u16),
                    wakee: Tid(layout.pid.read_u32(raw)?),
                    new_task: *new_task,
                    waking: None,
                }
            }
            Kind::NewTask => {
                let child = self.newtask.pid.read_u32(raw)?;
                let flags = self.newtask.clone_flags.read_u64(raw)?;
                // A thread joins its creator's process; anything else starts a process.
                let pid = if flags & CLONE_THREAD != 0 {
                    pid_of(s.tid)
                } else {
                    child
                };
                Event::NewTask {
                    parent: Tid(s.tid),
                    child: Tid(child),
                    pid: Pid(pid),
                    comm: self.newtask.comm.read_str(raw)?,
                }
            }
            Kind::Exit => Event::TaskExit {
                tid: Tid(self.exit_pid.read_u32(raw)?),
            },
            Kind::Exec => {
                let pid = self.exec.pid.read_u32(raw)?;
                Event::Exec {
                    pid: Pid(pid),
                    tid: Tid(s.tid),
                    filename: self.exec.filename.read_str(raw)?,
                }
            }
            Kind::Rename => Event::Rename {
                tid: Tid(match &self.rename.pid {
                    Some(f) => f.read_u32(raw)?,
                    None => s.tid,
                }),
                comm: self.rename.newcomm.read_str(raw)?,
            },
            Kind::Migrate => Event::Migrate {
                tid: Tid(self.migrate.pid.read_u32(raw)?),
                from: Cpu(self.migrate.orig_cpu.read_u32(raw)? as u16),
                to: Cpu(self.migrate.dest_cpu.read_u32(raw)? as u16),
            },
            Kind::CpuTime => {
                let layout = self.cpu_time.as_ref()?;
                let tid = Tid(layout.pid.read_u32(raw)?);
                Event::CpuTime {
                    tid,
                    ns: layout.runtime.read_u64(raw)?,
                    by: ChargedBy::of(tid, Tid(s.tid)),
                }
            }
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn real_formats() -> [Format; TRACEPOINT_COUNT] {
        let texts = [
            include_str!("../../testdata/sched_switch.format"),
            include_str!("../../testdata/sched_waking.format"),
            include_str!("../../testdata/sched_wakeup.format"),
            include_str!("../../testdata/sched_wakeup_new.format"),
            include_str!("../../testdata/task_newtask.format"),
            include_str!("../../testdata/sched_process_exit.format"),
            include_str!("../../testdata/sched_process_exec.format"),
            include_str!("../../testdata/task_rename.format"),
            include_str!("../../testdata/sched_migrate_task.format"),
        ];
        texts.map(|t| Format::parse(t).unwrap())
    }

    /// The format of [`CPU_TIME_TRACEPOINT`] on the project's kernel.
    pub(crate) fn real_cpu_time_format() -> Format {
        Format::parse(include_str!("../../testdata/sched_stat_runtime.format")).unwrap()
    }

    /// The decoder of every tracepoint sonda records.
    pub(crate) fn real_decoder() -> SchedDecoder {
        SchedDecoder::new(&real_formats(), Some(&real_cpu_time_format())).unwrap()
    }

    /// A payload of `format` with the named fields set (strings or integers).
    pub(crate) fn payload(format: &Format, values: &[(&str, Value)]) -> Vec<u8> {
        let len = format
            .fields
            .iter()
            .map(|f| f.offset + f.size)
            .max()
            .unwrap();
        let mut raw = vec![0u8; len];
        raw[0..2].copy_from_slice(&(format.id as u16).to_ne_bytes());
        for (name, value) in values {
            let f = format.field(name).unwrap();
            match value {
                Value::Int(v) => {
                    raw[f.offset..f.offset + f.size].copy_from_slice(&v.to_ne_bytes()[..f.size])
                }
                Value::Str(s) if f.placement == super::super::tp_format::Placement::DataLoc => {
                    let at = raw.len();
                    raw.extend_from_slice(s.as_bytes());
                    raw.push(0);
                    let loc = at as u32 | ((s.len() as u32 + 1) << 16);
                    raw[f.offset..f.offset + 4].copy_from_slice(&loc.to_ne_bytes());
                }
                Value::Str(s) => raw[f.offset..f.offset + s.len()].copy_from_slice(s.as_bytes()),
            }
        }
        raw
    }

    pub(crate) enum Value {
        Int(u64),
        Str(&'static str),
    }
    use Value::*;

    /// A decoder of hits of task `tid` of process `pid`.
    struct Decode(SchedDecoder);

    impl Decode {
        fn decode(&self, (pid, tid, cpu, raw): (u32, u32, u32, &[u8])) -> Option<Event> {
            self.0.decode(&Hit { tid, cpu, raw }, |t| {
                assert_eq!(t, tid);
                pid
            })
        }
    }

    fn sample(pid: u32, tid: u32, cpu: u32, raw: &[u8]) -> (u32, u32, u32, &[u8]) {
        (pid, tid, cpu, raw)
    }

    #[test]
    fn decodes_switch_wakeups_and_lifecycle_events() {
        let f = real_formats();
        let d = Decode(real_decoder());
        let sw = payload(
            &f[0],
            &[
                ("prev_pid", Int(100)),
                ("prev_state", Int(0x100)),
                ("next_pid", Int(0)),
            ],
        );
        assert_eq!(
            d.decode(sample(100, 100, 1, &sw)),
            Some(Event::Switch {
                cpu: Cpu(1),
                prev: Tid(100),
                prev_state: 0x100,
                next: Tid(0),
                charge: None,
            })
        );
        let wk = payload(&f[1], &[("pid", Int(7)), ("target_cpu", Int(0))]);
        assert_eq!(
            d.decode(sample(3, 4, 1, &wk)),
            Some(Event::Waking {
                cpu: Cpu(1),
                waker: Tid(4),
                wakee: Tid(7)
            })
        );
        let wu = payload(&f[3], &[("pid", Int(7)), ("target_cpu", Int(1))]);
        assert_eq!(
            d.decode(sample(3, 4, 0, &wu)),
            Some(Event::Wakeup {
                target: Cpu(1),
                wakee: Tid(7),
                new_task: true,
                waking: None,
            })
        );
        let thread = payload(
            &f[4],
            &[
                ("pid", Int(201)),
                ("comm", Str("java")),
                ("clone_flags", Int(0x3d0f00)),
            ],
        );
        assert_eq!(
            d.decode(sample(200, 200, 0, &thread)),
            Some(Event::NewTask {
                parent: Tid(200),
                child: Tid(201),
                pid: Pid(200),
                comm: "java".into()
            })
        );
        let process = payload(
            &f[4],
            &[
                ("pid", Int(300)),
                ("comm", Str("sh")),
                ("clone_flags", Int(0x1200011)),
            ],
        );
        assert_eq!(
            d.decode(sample(200, 201, 0, &process)),
            Some(Event::NewTask {
                parent: Tid(201),
                child: Tid(300),
                pid: Pid(300),
                comm: "sh".into()
            })
        );
        let exec = payload(
            &f[6],
            &[
                ("filename", Str("/usr/bin/dd")),
                ("pid", Int(300)),
                ("old_pid", Int(300)),
            ],
        );
        assert_eq!(
            d.decode(sample(300, 300, 0, &exec)),
            Some(Event::Exec {
                pid: Pid(300),
                tid: Tid(300),
                filename: "/usr/bin/dd".into()
            })
        );
        let rename = payload(
            &f[7],
            &[
                ("pid", Int(201)),
                ("oldcomm", Str("java")),
                ("newcomm", Str("C2 Compiler")),
            ],
        );
        assert_eq!(
            d.decode(sample(200, 201, 0, &rename)),
            Some(Event::Rename {
                tid: Tid(201),
                comm: "C2 Compiler".into()
            })
        );
        let migrate = payload(
            &f[8],
            &[
                ("comm", Str("sleeper-1")),
                ("pid", Int(205)),
                ("prio", Int(120)),
                ("orig_cpu", Int(1)),
                ("dest_cpu", Int(0)),
            ],
        );
        // The load balancer runs on the CPU that pulls; the task is another.
        assert_eq!(
            d.decode(sample(200, 17, 0, &migrate)),
            Some(Event::Migrate {
                tid: Tid(205),
                from: Cpu(1),
                to: Cpu(0)
            })
        );
        let exit = payload(&f[5], &[("pid", Int(201))]);
        assert_eq!(
            d.decode(sample(200, 201, 0, &exit)),
            Some(Event::TaskExit { tid: Tid(201) })
        );
        // A charge may be made from another CPU (a wakeup updating the run queue of
        // the charged thread's CPU): the thread is the payload's, not the running one.
        let charge = payload(
            &real_cpu_time_format(),
            &[
                ("comm", Str("cpu-burner-0")),
                ("pid", Int(205)),
                ("runtime", Int(3_999_871)),
            ],
        );
        assert_eq!(
            d.decode(sample(200, 17, 1, &charge)),
            Some(Event::CpuTime {
                tid: Tid(205),
                ns: 3_999_871,
                by: ChargedBy::Other,
            })
        );
        // Its tick or its switch: written while it runs.
        assert_eq!(
            d.decode(sample(200, 205, 1, &charge)),
            Some(Event::CpuTime {
                tid: Tid(205),
                ns: 3_999_871,
                by: ChargedBy::Itself,
            })
        );
        // Without the tracepoint, its hits are another tracepoint's: nothing.
        let without = Decode(SchedDecoder::new(&f, None).unwrap());
        assert!(!without.0.has_cpu_time());
        assert_eq!(without.decode(sample(200, 17, 1, &charge)), None);
    }

    #[test]
    fn foreign_ids_and_short_payloads_decode_to_nothing() {
        let f = real_formats();
        let d = Decode(real_decoder());
        let mut other = vec![0u8; 68];
        other[0..2].copy_from_slice(&9999u16.to_ne_bytes());
        assert_eq!(d.decode(sample(1, 1, 0, &other)), None);
        let sw = payload(&f[0], &[("prev_pid", Int(1))]);
        assert_eq!(d.decode(sample(1, 1, 0, &sw[..50])), None);
    }

    #[test]
    fn a_format_without_a_needed_field_is_refused() {
        let mut f = real_formats();
        f[0].fields.retain(|x| x.name != "prev_state");
        let e = SchedDecoder::new(&f, None).err().unwrap();
        assert_eq!(
            e.to_string(),
            "tracepoint sched_switch has no field prev_state on this kernel"
        );
    }
}
