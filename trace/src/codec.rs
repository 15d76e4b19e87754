//! Encoding of records into block payloads and back: pure functions over byte slices,
//! no I/O. Every record is `tag: u8`, `len: LEB128`, then `len` bytes of body, so a
//! reader skips tags it does not know (a newer minor version) instead of failing.
//! Integers are little-endian; strings are a LEB128 length then UTF-8 bytes.

use crate::record::{Event, Meta, Record, Runtime, Source};
use crate::types::{Cpu, Pid, Tid, Time};

/// A payload that does not decode: a corrupt or foreign file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset inside the payload.
    pub offset: usize,
    /// What was wrong there.
    pub what: &'static str,
}

mod tag {
    pub const SWITCH: u8 = 1;
    pub const WAKING: u8 = 2;
    pub const WAKEUP: u8 = 3;
    pub const NEW_TASK: u8 = 4;
    pub const TASK_EXIT: u8 = 5;
    pub const EXEC: u8 = 6;
    pub const RENAME: u8 = 7;
    pub const PROC_SAMPLE: u8 = 8;
    pub const KERNEL_LOST: u8 = 9;
    pub const MIGRATE: u8 = 10;
    pub const CPU_TIME: u8 = 11;
    pub const VM_INIT: u8 = 16;
    pub const VM_DEATH: u8 = 17;
    pub const THREAD_START: u8 = 18;
    pub const THREAD_END: u8 = 19;
    pub const GC_START: u8 = 20;
    pub const GC_END: u8 = 21;
    pub const MONITOR_CONTENDED: u8 = 22;
    pub const MONITOR_ENTERED: u8 = 23;
    pub const ENTER: u8 = 24;
    pub const LEAVE: u8 = 25;
    pub const FUNC_ENTER: u8 = 26;
    pub const FUNC_LEAVE: u8 = 27;
    pub const USER: u8 = 28;
    pub const DROPPED: u8 = 29;

    pub const TRACE_INFO: u8 = 64;
    pub const PROCESS: u8 = 65;
    pub const THREAD: u8 = 66;
    pub const JAVA_THREAD: u8 = 67;
    pub const METHOD: u8 = 68;
    pub const MONITOR_CLASS: u8 = 69;
    pub const COUNTER: u8 = 70;
    pub const WARNING: u8 = 71;
    pub const MAPPING: u8 = 72;
    pub const USER_TYPE: u8 = 73;
    pub const NATIVE_FUNCTION: u8 = 74;
    pub const METHOD_REMOVED: u8 = 75;
}

/// Appends encoded records to a byte vector.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        put_leb(&mut self.0, s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
}

fn put_leb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn frame(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    put_leb(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// Appends one timed record to `out`.
pub fn encode_record(out: &mut Vec<u8>, record: &Record) {
    let mut b = Body::default();
    b.u64(record.time.0);
    let tag = match &record.event {
        Event::Switch {
            cpu,
            prev,
            prev_state,
            next,
        } => {
            b.u16(cpu.0).u32(prev.0).u64(*prev_state).u32(next.0);
            tag::SWITCH
        }
        Event::Waking { cpu, waker, wakee } => {
            b.u16(cpu.0).u32(waker.0).u32(wakee.0);
            tag::WAKING
        }
        Event::Wakeup {
            target,
            wakee,
            new_task,
        } => {
            b.u16(target.0).u32(wakee.0).u8(*new_task as u8);
            tag::WAKEUP
        }
        Event::Migrate { tid, from, to } => {
            b.u32(tid.0).u16(from.0).u16(to.0);
            tag::MIGRATE
        }
        Event::CpuTime { tid, ns } => {
            b.u32(tid.0).u64(*ns);
            tag::CPU_TIME
        }
        Event::NewTask {
            parent,
            child,
            pid,
            comm,
        } => {
            b.u32(parent.0).u32(child.0).u32(pid.0).str(comm);
            tag::NEW_TASK
        }
        Event::TaskExit { tid } => {
            b.u32(tid.0);
            tag::TASK_EXIT
        }
        Event::Exec { pid, tid, filename } => {
            b.u32(pid.0).u32(tid.0).str(filename);
            tag::EXEC
        }
        Event::Rename { tid, comm } => {
            b.u32(tid.0).str(comm);
            tag::RENAME
        }
        Event::ProcSample {
            tid,
            cpu,
            state,
            run_ns,
            wait_ns,
        } => {
            b.u32(tid.0)
                .u16(cpu.0)
                .u8(*state)
                .u64(*run_ns)
                .u64(*wait_ns);
            tag::PROC_SAMPLE
        }
        Event::KernelLost { cpu, count } => {
            b.u16(cpu.0).u64(*count);
            tag::KERNEL_LOST
        }
        Event::VmInit { pid } => {
            b.u32(pid.0);
            tag::VM_INIT
        }
        Event::VmDeath { pid } => {
            b.u32(pid.0);
            tag::VM_DEATH
        }
        Event::ThreadStart { tid } => {
            b.u32(tid.0);
            tag::THREAD_START
        }
        Event::ThreadEnd { tid } => {
            b.u32(tid.0);
            tag::THREAD_END
        }
        Event::GcStart { pid, tid } => {
            b.u32(pid.0).u32(tid.0);
            tag::GC_START
        }
        Event::GcEnd { pid, tid } => {
            b.u32(pid.0).u32(tid.0);
            tag::GC_END
        }
        Event::MonitorContended { tid, class } => {
            b.u32(tid.0).u32(*class);
            tag::MONITOR_CONTENDED
        }
        Event::MonitorEntered { tid, class } => {
            b.u32(tid.0).u32(*class);
            tag::MONITOR_ENTERED
        }
        Event::Enter { tid, method } => {
            b.u32(tid.0).u32(*method);
            tag::ENTER
        }
        Event::Leave {
            tid,
            method,
            exception,
        } => {
            b.u32(tid.0).u32(*method).u8(*exception as u8);
            tag::LEAVE
        }
        Event::FuncEnter { tid, addr } => {
            b.u32(tid.0).u64(*addr);
            tag::FUNC_ENTER
        }
        Event::FuncLeave { tid, addr } => {
            b.u32(tid.0).u64(*addr);
            tag::FUNC_LEAVE
        }
        Event::User { tid, kind, value } => {
            b.u32(tid.0).u32(*kind).u64(*value);
            tag::USER
        }
        Event::Dropped { tid, count } => {
            b.u32(tid.0).u64(*count);
            tag::DROPPED
        }
    };
    frame(out, tag, &b.0);
}

/// Appends one metadata record to `out`.
pub fn encode_meta(out: &mut Vec<u8>, meta: &Meta) {
    let mut b = Body::default();
    let tag = match meta {
        Meta::TraceInfo {
            source,
            start,
            host,
            cpus,
            command,
            tool,
        } => {
            b.u8(match source {
                Source::Tracepoints => 1,
                Source::Procfs => 2,
            })
            .u64(start.0)
            .str(host)
            .u16(*cpus)
            .u32(command.len() as u32);
            for arg in command {
                b.str(arg);
            }
            b.str(tool);
            tag::TRACE_INFO
        }
        Meta::Process {
            pid,
            ppid,
            name,
            runtime,
        } => {
            b.u32(pid.0).u32(ppid.0).str(name).u8(match runtime {
                Runtime::Java => 1,
                Runtime::Native => 2,
            });
            tag::PROCESS
        }
        Meta::Thread { pid, tid, comm } => {
            b.u32(pid.0).u32(tid.0).str(comm);
            tag::THREAD
        }
        Meta::JavaThread {
            pid,
            tid,
            name,
            daemon,
        } => {
            b.u32(pid.0).u32(tid.0).str(name).u8(*daemon as u8);
            tag::JAVA_THREAD
        }
        Meta::Method {
            id,
            class,
            name,
            descriptor,
        } => {
            b.u32(*id).str(class).str(name).str(descriptor);
            tag::METHOD
        }
        Meta::MonitorClass { id, name } => {
            b.u32(*id).str(name);
            tag::MONITOR_CLASS
        }
        Meta::Counter { name, value } => {
            b.str(name).u64(*value);
            tag::COUNTER
        }
        Meta::Warning { text } => {
            b.str(text);
            tag::WARNING
        }
        Meta::Mapping {
            pid,
            start,
            end,
            offset,
            path,
        } => {
            b.u32(pid.0).u64(*start).u64(*end).u64(*offset).str(path);
            tag::MAPPING
        }
        Meta::UserType { kind, value, name } => {
            b.u32(*kind);
            match value {
                Some(v) => b.u8(1).u64(*v),
                None => b.u8(0),
            };
            b.str(name);
            tag::USER_TYPE
        }
        Meta::NativeFunction { id, pid, addr } => {
            b.u32(*id).u32(pid.0).u64(*addr);
            tag::NATIVE_FUNCTION
        }
        Meta::MethodRemoved {
            id,
            time,
            rate,
            mean_ns,
            overhead_ppm,
        } => {
            b.u32(*id)
                .u64(time.0)
                .u64(*rate)
                .u64(*mean_ns)
                .u64(*overhead_ppm);
            tag::METHOD_REMOVED
        }
    };
    frame(out, tag, &b.0);
}

/// Reads fields of one record body.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Fields<'a> {
    fn err(&self, what: &'static str) -> DecodeError {
        DecodeError {
            offset: self.base + self.pos,
            what,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(self.err("record body too short"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.u8()? != 0)
    }
    /// The next `N` bytes, as an array: `from_le_bytes` of it is a plain load.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        match self.buf[self.pos..].first_chunk::<N>() {
            Some(a) => {
                self.pos += N;
                Ok(*a)
            }
            None => Err(self.err("record body too short")),
        }
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }
    fn tid(&mut self) -> Result<Tid, DecodeError> {
        Ok(Tid(self.u32()?))
    }
    fn pid(&mut self) -> Result<Pid, DecodeError> {
        Ok(Pid(self.u32()?))
    }
    fn cpu(&mut self) -> Result<Cpu, DecodeError> {
        Ok(Cpu(self.u16()?))
    }
    fn str(&mut self) -> Result<String, DecodeError> {
        let (len, used) =
            get_leb(&self.buf[self.pos..]).ok_or_else(|| self.err("bad string length"))?;
        self.pos += used;
        let len = usize::try_from(len).map_err(|_| self.err("string too long"))?;
        let bytes = self.take(len)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }
}

fn get_leb(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// One decoded item of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A timed record.
    Record(Record),
    /// A metadata record.
    Meta(Meta),
    /// A record of a kind this version does not know; skipped.
    Unknown(u8),
}

/// Iterates over the records of a payload. After the first error it stops.
pub struct Items<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Items<'a> {
    /// Decodes `payload` lazily.
    pub fn new(payload: &'a [u8]) -> Items<'a> {
        Items {
            buf: payload,
            pos: 0,
            failed: false,
        }
    }

    /// Bytes of the payload decoded so far (where the next item starts).
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl Iterator for Items<'_> {
    type Item = Result<Item, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let tag = self.buf[start];
        let Some((len, used)) = get_leb(&self.buf[start + 1..]) else {
            self.failed = true;
            return Some(Err(DecodeError {
                offset: start,
                what: "bad record length",
            }));
        };
        let body_start = start + 1 + used;
        let body_end = match usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
        {
            Some(end) if end <= self.buf.len() => end,
            _ => {
                self.failed = true;
                return Some(Err(DecodeError {
                    offset: start,
                    what: "record runs past its block",
                }));
            }
        };
        self.pos = body_end;
        let mut f = Fields {
            buf: &self.buf[body_start..body_end],
            pos: 0,
            base: body_start,
        };
        let item = decode_body(tag, &mut f);
        if item.is_err() {
            self.failed = true;
        }
        Some(item)
    }
}

fn decode_body(tag: u8, f: &mut Fields<'_>) -> Result<Item, DecodeError> {
    if tag >= 64 {
        return decode_meta(tag, f);
    }
    let known = matches!(tag, 1..=11 | 16..=29);
    if !known {
        return Ok(Item::Unknown(tag));
    }
    let time = Time(f.u64()?);
    let event = match tag {
        tag::SWITCH => Event::Switch {
            cpu: f.cpu()?,
            prev: f.tid()?,
            prev_state: f.u64()?,
            next: f.tid()?,
        },
        tag::WAKING => Event::Waking {
            cpu: f.cpu()?,
            waker: f.tid()?,
            wakee: f.tid()?,
        },
        tag::WAKEUP => Event::Wakeup {
            target: f.cpu()?,
            wakee: f.tid()?,
            new_task: f.bool()?,
        },
        tag::MIGRATE => Event::Migrate {
            tid: f.tid()?,
            from: f.cpu()?,
            to: f.cpu()?,
        },
        tag::CPU_TIME => Event::CpuTime {
            tid: f.tid()?,
            ns: f.u64()?,
        },
        tag::NEW_TASK => Event::NewTask {
            parent: f.tid()?,
            child: f.tid()?,
            pid: f.pid()?,
            comm: f.str()?,
        },
        tag::TASK_EXIT => Event::TaskExit { tid: f.tid()? },
        tag::EXEC => Event::Exec {
            pid: f.pid()?,
            tid: f.tid()?,
            filename: f.str()?,
        },
        tag::RENAME => Event::Rename {
            tid: f.tid()?,
            comm: f.str()?,
        },
        tag::PROC_SAMPLE => Event::ProcSample {
            tid: f.tid()?,
            cpu: f.cpu()?,
            state: f.u8()?,
            run_ns: f.u64()?,
            wait_ns: f.u64()?,
        },
        tag::KERNEL_LOST => Event::KernelLost {
            cpu: f.cpu()?,
            count: f.u64()?,
        },
        tag::VM_INIT => Event::VmInit { pid: f.pid()? },
        tag::VM_DEATH => Event::VmDeath { pid: f.pid()? },
        tag::THREAD_START => Event::ThreadStart { tid: f.tid()? },
        tag::THREAD_END => Event::ThreadEnd { tid: f.tid()? },
        tag::GC_START => Event::GcStart {
            pid: f.pid()?,
            tid: f.tid()?,
        },
        tag::GC_END => Event::GcEnd {
            pid: f.pid()?,
            tid: f.tid()?,
        },
        tag::MONITOR_CONTENDED => Event::MonitorContended {
            tid: f.tid()?,
            class: f.u32()?,
        },
        tag::MONITOR_ENTERED => Event::MonitorEntered {
            tid: f.tid()?,
            class: f.u32()?,
        },
        tag::ENTER => Event::Enter {
            tid: f.tid()?,
            method: f.u32()?,
        },
        tag::LEAVE => Event::Leave {
            tid: f.tid()?,
            method: f.u32()?,
            exception: f.bool()?,
        },
        tag::FUNC_ENTER => Event::FuncEnter {
            tid: f.tid()?,
            addr: f.u64()?,
        },
        tag::FUNC_LEAVE => Event::FuncLeave {
            tid: f.tid()?,
            addr: f.u64()?,
        },
        tag::USER => Event::User {
            tid: f.tid()?,
            kind: f.u32()?,
            value: f.u64()?,
        },
        tag::DROPPED => Event::Dropped {
            tid: f.tid()?,
            count: f.u64()?,
        },
        _ => unreachable!("tag {tag} is in the known set"),
    };
    Ok(Item::Record(Record { time, event }))
}

fn decode_meta(tag: u8, f: &mut Fields<'_>) -> Result<Item, DecodeError> {
    let meta = match tag {
        tag::TRACE_INFO => {
            let source = match f.u8()? {
                1 => Source::Tracepoints,
                2 => Source::Procfs,
                _ => return Err(f.err("unknown thread-state source")),
            };
            let start = Time(f.u64()?);
            let host = f.str()?;
            let cpus = f.u16()?;
            let n = f.u32()? as usize;
            let mut command = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                command.push(f.str()?);
            }
            let tool = f.str()?;
            Meta::TraceInfo {
                source,
                start,
                host,
                cpus,
                command,
                tool,
            }
        }
        tag::PROCESS => Meta::Process {
            pid: f.pid()?,
            ppid: f.pid()?,
            name: f.str()?,
            runtime: match f.u8()? {
                1 => Runtime::Java,
                _ => Runtime::Native,
            },
        },
        tag::THREAD => Meta::Thread {
            pid: f.pid()?,
            tid: f.tid()?,
            comm: f.str()?,
        },
        tag::JAVA_THREAD => Meta::JavaThread {
            pid: f.pid()?,
            tid: f.tid()?,
            name: f.str()?,
            daemon: f.bool()?,
        },
        tag::METHOD => Meta::Method {
            id: f.u32()?,
            class: f.str()?,
            name: f.str()?,
            descriptor: f.str()?,
        },
        tag::MONITOR_CLASS => Meta::MonitorClass {
            id: f.u32()?,
            name: f.str()?,
        },
        tag::COUNTER => Meta::Counter {
            name: f.str()?,
            value: f.u64()?,
        },
        tag::WARNING => Meta::Warning { text: f.str()? },
        tag::MAPPING => Meta::Mapping {
            pid: f.pid()?,
            start: f.u64()?,
            end: f.u64()?,
            offset: f.u64()?,
            path: f.str()?,
        },
        tag::USER_TYPE => {
            let kind = f.u32()?;
            let value = if f.bool()? { Some(f.u64()?) } else { None };
            Meta::UserType {
                kind,
                value,
                name: f.str()?,
            }
        }
        tag::NATIVE_FUNCTION => Meta::NativeFunction {
            id: f.u32()?,
            pid: f.pid()?,
            addr: f.u64()?,
        },
        tag::METHOD_REMOVED => Meta::MethodRemoved {
            id: f.u32()?,
            time: Time(f.u64()?),
            rate: f.u64()?,
            mean_ns: f.u64()?,
            overhead_ppm: f.u64()?,
        },
        _ => return Ok(Item::Unknown(tag)),
    };
    Ok(Item::Meta(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader skips a timed record whose tag it does not know (one a later minor
    /// version added) and reads on: how a minor-1 reader takes `Migrate` (tag 10).
    #[test]
    fn unknown_tags_are_skipped_and_reading_goes_on() {
        let migrate = Record {
            time: Time(5),
            event: Event::Migrate {
                tid: Tid(7),
                from: Cpu(0),
                to: Cpu(1),
            },
        };
        let exit = Record {
            time: Time(6),
            event: Event::TaskExit { tid: Tid(7) },
        };
        let mut payload = Vec::new();
        encode_record(&mut payload, &migrate);
        let unknown_at = payload.len();
        encode_record(&mut payload, &migrate);
        encode_record(&mut payload, &exit);
        // A tag no version defines yet, with a body of the same length.
        payload[unknown_at] = 15;
        let items: Vec<Item> = Items::new(&payload).map(Result::unwrap).collect();
        assert_eq!(
            items,
            vec![Item::Record(migrate), Item::Unknown(15), Item::Record(exit)]
        );
    }
}
