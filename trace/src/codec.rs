//! Encoding of records into block payloads and back: pure functions over byte slices,
//! no I/O. Every record is `tag: u8`, `len: LEB128`, then `len` bytes of body, so a
//! reader skips tags it does not know (a newer minor version) instead of failing.
//! Integers are little-endian; strings are a LEB128 length then UTF-8 bytes.

use crate::record::{CarriedWaking, ChargedBy, Event, Meta, Record, Runtime, Source, SwitchCharge};
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

/// Writes one record body straight into the payload (no buffer per record). In the
/// compact encoding (events blocks marked [`Encoding::Compact`]) every fixed-size
/// integer is LEB128 instead: thread ids, method ids and CPU numbers are small, so an
/// `Enter` takes 5-8 bytes instead of 18, which halves what a busy recording writes.
struct Body<'a> {
    out: &'a mut Vec<u8>,
    compact: bool,
}

impl Body<'_> {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.out.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        if self.compact {
            put_leb(self.out, u64::from(v));
        } else {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        if self.compact {
            put_leb(self.out, u64::from(v));
        } else {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        if self.compact {
            put_leb(self.out, v);
        } else {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        put_leb(self.out, s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
        self
    }
}

/// How the integers of an events block's records are written (the block header says
/// which, see `block::BlockHeader::encoding`). Metadata is always [`Encoding::Fixed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Little-endian fixed-size integers, the time as a full `u64` (format 1.x).
    #[default]
    Fixed,
    /// LEB128 integers, and each timed record's time as the LEB128 difference from
    /// the previous timed record of the block (the first one's from the block
    /// header's first time) (formats 2.x and 3.x).
    Compact,
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

/// Writes `tag`, then the body `body` writes, framed by its LEB128 length. The body is
/// written in place after a one-byte length, which is widened afterwards in the rare
/// case of a body of 128 bytes or more (a long string).
fn framed(out: &mut Vec<u8>, compact: bool, body: impl FnOnce(&mut Body<'_>) -> u8) {
    let tag_at = out.len();
    out.extend_from_slice(&[0, 0]);
    let start = out.len();
    let tag = body(&mut Body { out, compact });
    out[tag_at] = tag;
    let len = out.len() - start;
    if len < 0x80 {
        out[tag_at + 1] = len as u8;
    } else {
        let mut leb = Vec::with_capacity(4);
        put_leb(&mut leb, len as u64);
        out.splice(tag_at + 1..tag_at + 2, leb);
    }
}

/// Appends one timed record to `out`, in the fixed encoding of format 1.x.
pub fn encode_record(out: &mut Vec<u8>, record: &Record) {
    framed(out, false, |b| {
        b.u64(record.time.0);
        event_body(b, &record.event)
    });
}

/// Appends one timed record to `out` in the compact encoding; `prev` is the time of the
/// block's previous timed record (the block's first time for its first record), and
/// becomes this one's. Records must come in time order (`record.time >= *prev`).
pub fn encode_record_compact(out: &mut Vec<u8>, record: &Record, prev: &mut u64) {
    let delta = record.time.0.saturating_sub(*prev);
    *prev = record.time.0;
    if let Some((bytes, len)) = method_record_compact(delta, &record.event) {
        // A fixed-size copy (one vector store) and a truncation: a copy of `len` bytes
        // is a call to memmove, which cost as much as the encoding.
        let at = out.len();
        out.extend_from_slice(&bytes.to_le_bytes());
        out.truncate(at + len);
        return;
    }
    framed(out, true, |b| {
        put_leb(b.out, delta);
        event_body(b, &record.event)
    });
}

/// The compact encoding of a method entry or exit (nearly every record of a busy
/// recording) when it fits in 16 bytes (nearly always: 2 + the time difference, the
/// thread and the method as LEB128 + 1), built in a register: the same bytes as
/// [`framed`] with [`event_body`], without a capacity check per byte nor the stall of
/// reading back bytes just stored one by one.
#[inline]
fn method_record_compact(delta: u64, event: &Event) -> Option<(u128, usize)> {
    let (tag, tid, method, exception) = match *event {
        Event::Enter { tid, method } => (tag::ENTER, tid, method, None),
        Event::Leave {
            tid,
            method,
            exception,
        } => (tag::LEAVE, tid, method, Some(exception)),
        _ => return None,
    };
    let mut acc = u128::from(tag);
    let mut at = 2;
    leb_into(&mut acc, &mut at, delta)?;
    leb_into(&mut acc, &mut at, u64::from(tid.0))?;
    leb_into(&mut acc, &mut at, u64::from(method))?;
    if let Some(e) = exception {
        if at == 16 {
            return None;
        }
        acc |= u128::from(e as u8) << (8 * at);
        at += 1;
    }
    // The body's length, always below 0x80 here: one byte.
    acc |= ((at - 2) as u128) << 8;
    Some((acc, at))
}

/// Appends `v` as LEB128 to the bytes in `acc` (`at` of them); `None` past 16 bytes.
#[inline(always)]
fn leb_into(acc: &mut u128, at: &mut usize, mut v: u64) -> Option<()> {
    loop {
        if *at == 16 {
            return None;
        }
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            *acc |= u128::from(byte) << (8 * *at);
            *at += 1;
            return Some(());
        }
        *acc |= u128::from(byte | 0x80) << (8 * *at);
        *at += 1;
    }
}

/// Writes an event's fields after its time; returns its tag.
fn event_body(b: &mut Body<'_>, event: &Event) -> u8 {
    match event {
        Event::Switch {
            cpu,
            prev,
            prev_state,
            next,
            charge,
        } => {
            b.u16(cpu.0).u32(prev.0).u64(*prev_state).u32(next.0);
            // Trailing fields (format 3.0): a reader of 2.x would read the switch and
            // lose the charge (hence the major version), so `TraceWriter` writes the
            // two records apart in a 1.x file.
            if let Some(c) = charge {
                b.u64(c.ns).u32(c.before_ns);
            }
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
            waking,
        } => {
            b.u16(target.0).u32(wakee.0).u8(*new_task as u8);
            // Trailing fields (format 4.0), as a switch's charge.
            if let Some(w) = waking {
                b.u16(w.cpu.0).u32(w.waker.0).u32(w.before_ns);
            }
            tag::WAKEUP
        }
        Event::Migrate { tid, from, to } => {
            b.u32(tid.0).u16(from.0).u16(to.0);
            tag::MIGRATE
        }
        Event::CpuTime { tid, ns, by } => {
            b.u32(tid.0).u64(*ns);
            // A trailing byte (format 2.1, 1.5): older readers ignore it.
            if let Some(code) = charged_by_code(*by) {
                b.u8(code);
            }
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
    }
}

/// Appends one metadata record to `out`.
pub fn encode_meta(out: &mut Vec<u8>, meta: &Meta) {
    framed(out, false, |b| meta_body(b, meta));
}

/// Writes a metadata record's fields; returns its tag.
fn meta_body(b: &mut Body<'_>, meta: &Meta) -> u8 {
    match meta {
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
    }
}

/// Reads fields of one record body.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
    /// Integers are LEB128 ([`Encoding::Compact`]).
    compact: bool,
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
    /// A switch's trailing charge (format 3.0), `None` in an older record.
    fn switch_charge(&mut self) -> Result<Option<SwitchCharge>, DecodeError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        Ok(Some(SwitchCharge {
            ns: self.u64()?,
            before_ns: self.u32()?,
        }))
    }
    /// A wakeup's trailing waking (format 4.0), `None` in an older record.
    fn wakeup_waking(&mut self) -> Result<Option<CarriedWaking>, DecodeError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        Ok(Some(CarriedWaking {
            cpu: self.cpu()?,
            waker: self.tid()?,
            before_ns: self.u32()?,
        }))
    }
    /// A trailing `u8` a later minor version added, `None` in an older record.
    fn rest_u8(&mut self) -> Result<Option<u8>, DecodeError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        self.u8().map(Some)
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
    fn leb(&mut self) -> Result<u64, DecodeError> {
        let (v, used) = get_leb(&self.buf[self.pos..]).ok_or_else(|| self.err("bad integer"))?;
        self.pos += used;
        Ok(v)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        if self.compact {
            let v = self.leb()?;
            return u16::try_from(v).map_err(|_| self.err("integer too large"));
        }
        self.array().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        if self.compact {
            let v = self.leb()?;
            return u32::try_from(v).map_err(|_| self.err("integer too large"));
        }
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        if self.compact {
            return self.leb();
        }
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
    encoding: Encoding,
    /// Compact encoding: the time of the previous timed record (the block's first time
    /// before the first).
    prev: u64,
    /// The time of the last timed record returned (the block's first time before the
    /// first): a charge taken out of a switch ([`Record::unfold`]) never goes before it.
    floor: u64,
    /// The record whose carried record (a switch's charge, a wakeup's waking) was
    /// returned last, returned next.
    held: Option<Record>,
}

impl<'a> Items<'a> {
    /// Decodes `payload` (fixed encoding: metadata, and events of format 1.x) lazily.
    pub fn new(payload: &'a [u8]) -> Items<'a> {
        Items::with(payload, Encoding::Fixed, 0)
    }

    /// Decodes an events payload in `encoding`, whose block header gives `first` as the
    /// time of its first record.
    pub fn with(payload: &'a [u8], encoding: Encoding, first: u64) -> Items<'a> {
        Items {
            buf: payload,
            pos: 0,
            failed: false,
            encoding,
            prev: first,
            floor: first,
            held: None,
        }
    }

    /// The record whose carried record [`Iterator::next`] just returned, which it would return
    /// next: for a caller that decodes one item at a time from [`Items::position`],
    /// where a fresh `Items` would not know it.
    pub fn take_held(&mut self) -> Option<Record> {
        self.held.take()
    }

    /// Bytes of the payload decoded so far (where the next item starts).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Compact encoding: the time of the last timed record decoded (the next one's
    /// time is a difference from it); to go on decoding from [`Items::position`].
    pub fn prev_time(&self) -> u64 {
        self.prev
    }
}

impl Iterator for Items<'_> {
    type Item = Result<Item, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(carrier) = self.held.take() {
            return Some(Ok(Item::Record(carrier)));
        }
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
        let compact = self.encoding == Encoding::Compact;
        let mut f = Fields {
            buf: &self.buf[body_start..body_end],
            pos: 0,
            base: body_start,
            compact,
        };
        let item = if compact && tag < 64 {
            // Every timed record, known or not, starts with its time difference.
            f.leb().and_then(|delta| {
                self.prev = self
                    .prev
                    .checked_add(delta)
                    .ok_or_else(|| f.err("time past the end of time"))?;
                decode_timed(tag, Time(self.prev), &mut f)
            })
        } else {
            decode_body(tag, &mut f)
        };
        match item {
            Ok(Item::Record(record)) => {
                // A record carrying an earlier one (a switch its switch-out's charge,
                // a wakeup its waking) reads as the two records it stands for.
                let (earlier, carrier) = record.unfold(self.floor);
                self.floor = carrier.time.0;
                match earlier {
                    Some(earlier) => {
                        self.held = Some(carrier);
                        Some(Ok(Item::Record(earlier)))
                    }
                    None => Some(Ok(Item::Record(carrier))),
                }
            }
            Ok(other) => Some(Ok(other)),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

fn decode_body(tag: u8, f: &mut Fields<'_>) -> Result<Item, DecodeError> {
    if tag >= 64 {
        return decode_meta(tag, f);
    }
    if !known_timed(tag) {
        return Ok(Item::Unknown(tag));
    }
    let time = Time(f.u64()?);
    decode_timed(tag, time, f)
}

fn known_timed(tag: u8) -> bool {
    matches!(tag, 1..=11 | 16..=29)
}

/// `CpuTime`'s trailing byte for `by`; none for `Unknown` (the record as before 2.1).
fn charged_by_code(by: ChargedBy) -> Option<u8> {
    match by {
        ChargedBy::Unknown => None,
        ChargedBy::Itself => Some(1),
        ChargedBy::Other => Some(2),
    }
}

/// The writer `CpuTime`'s trailing byte names; `Unknown` without one, or for a value a
/// later minor version gave a meaning.
fn charged_by_of(code: Option<u8>) -> ChargedBy {
    match code {
        Some(1) => ChargedBy::Itself,
        Some(2) => ChargedBy::Other,
        _ => ChargedBy::Unknown,
    }
}

/// A timed record's fields after its time.
fn decode_timed(tag: u8, time: Time, f: &mut Fields<'_>) -> Result<Item, DecodeError> {
    if !known_timed(tag) {
        return Ok(Item::Unknown(tag));
    }
    let event = match tag {
        tag::SWITCH => Event::Switch {
            cpu: f.cpu()?,
            prev: f.tid()?,
            prev_state: f.u64()?,
            next: f.tid()?,
            charge: f.switch_charge()?,
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
            waking: f.wakeup_waking()?,
        },
        tag::MIGRATE => Event::Migrate {
            tid: f.tid()?,
            from: f.cpu()?,
            to: f.cpu()?,
        },
        tag::CPU_TIME => Event::CpuTime {
            tid: f.tid()?,
            ns: f.u64()?,
            by: charged_by_of(f.rest_u8()?),
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

    /// `CpuTime`'s writer (minor 2.1) is one byte at the end of the body: a record
    /// without it (an older writer's) reads as `Unknown`, and a body with it starts with
    /// the fields an older reader knows, which then ignores the byte.
    #[test]
    fn a_charges_writer_is_a_trailing_byte() {
        let charge = |by| Record {
            time: Time(9),
            event: Event::CpuTime {
                tid: Tid(7),
                ns: 4_000,
                by,
            },
        };
        for encoding in [Encoding::Fixed, Encoding::Compact] {
            let body = |by| {
                let mut payload = Vec::new();
                match encoding {
                    Encoding::Fixed => encode_record(&mut payload, &charge(by)),
                    Encoding::Compact => encode_record_compact(&mut payload, &charge(by), &mut 9),
                }
                payload
            };
            let old = body(ChargedBy::Unknown);
            for (by, byte) in [(ChargedBy::Itself, 1u8), (ChargedBy::Other, 2)] {
                let new = body(by);
                assert_eq!(new.len(), old.len() + 1);
                assert_eq!(new[0], old[0], "tag");
                assert_eq!(new[1], old[1] + 1, "length");
                assert_eq!(new[2..new.len() - 1], old[2..]);
                assert_eq!(new[new.len() - 1], byte);
                let items: Vec<Item> = Items::with(&new, encoding, 9).map(Result::unwrap).collect();
                assert_eq!(items, vec![Item::Record(charge(by))]);
            }
            let items: Vec<Item> = Items::with(&old, encoding, 9).map(Result::unwrap).collect();
            assert_eq!(items, vec![Item::Record(charge(ChargedBy::Unknown))]);
        }
    }

    /// The stack-built method records are byte for byte what the general path writes,
    /// at every width of every field.
    #[test]
    fn compact_method_records_equal_the_general_encoding() {
        let widths = [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX];
        for &delta in &widths {
            for &id in &widths[..7] {
                let (tid, method) = (Tid(id as u32), id as u32 ^ 5);
                for event in [
                    Event::Enter { tid, method },
                    Event::Leave {
                        tid,
                        method,
                        exception: false,
                    },
                    Event::Leave {
                        tid,
                        method,
                        exception: true,
                    },
                ] {
                    let mut general = Vec::new();
                    framed(&mut general, true, |b| {
                        put_leb(b.out, delta);
                        event_body(b, &event)
                    });
                    match method_record_compact(delta, &event) {
                        Some((fast, len)) => {
                            assert_eq!(&fast.to_le_bytes()[..len], &general[..], "{event:?}")
                        }
                        None => assert!(general.len() > 16, "{delta} {event:?}"),
                    }
                    // And what encode_record_compact writes, either way.
                    let mut out = vec![9];
                    let mut prev = 0;
                    let r = Record {
                        time: Time(delta),
                        event: event.clone(),
                    };
                    encode_record_compact(&mut out, &r, &mut prev);
                    assert_eq!(&out[1..], &general[..]);
                }
            }
        }
    }

    /// In a compact payload an unknown timed record still carries its time difference,
    /// so the records after it keep their times.
    #[test]
    fn compact_unknown_timed_tags_keep_the_clock() {
        let migrate = Record {
            time: Time(1005),
            event: Event::Migrate {
                tid: Tid(7),
                from: Cpu(0),
                to: Cpu(1),
            },
        };
        let exit = Record {
            time: Time(1030),
            event: Event::TaskExit { tid: Tid(7) },
        };
        let mut payload = Vec::new();
        let mut prev = 1000;
        let unknown_at = payload.len();
        encode_record_compact(&mut payload, &migrate, &mut prev);
        encode_record_compact(&mut payload, &exit, &mut prev);
        payload[unknown_at] = 15;
        let items: Vec<Item> = Items::with(&payload, Encoding::Compact, 1000)
            .map(Result::unwrap)
            .collect();
        assert_eq!(items, vec![Item::Unknown(15), Item::Record(exit)]);
    }

    /// A compact integer wider than its field is an error, not a truncated value.
    #[test]
    fn compact_integers_wider_than_their_field_do_not_decode() {
        let mut payload = vec![tag::MIGRATE, 0];
        put_leb(&mut payload, 0); // time difference
        put_leb(&mut payload, 7); // tid
        put_leb(&mut payload, 1 << 16); // from: too wide for a cpu
        put_leb(&mut payload, 1);
        payload[1] = (payload.len() - 2) as u8;
        let item = Items::with(&payload, Encoding::Compact, 0).next().unwrap();
        assert_eq!(item.unwrap_err().what, "integer too large");
    }

    /// A body of 128 bytes or more gets a wider length, written after the fact.
    #[test]
    fn long_bodies_are_framed_with_a_wider_length() {
        let comm: String = "x".repeat(300);
        let r = Record {
            time: Time(9),
            event: Event::Rename { tid: Tid(3), comm },
        };
        for compact in [false, true] {
            let mut payload = Vec::new();
            let mut prev = 9;
            if compact {
                encode_record_compact(&mut payload, &r, &mut prev);
            } else {
                encode_record(&mut payload, &r);
            }
            let encoding = if compact {
                Encoding::Compact
            } else {
                Encoding::Fixed
            };
            let items: Vec<Item> = Items::with(&payload, encoding, 9)
                .map(Result::unwrap)
                .collect();
            assert_eq!(items, vec![Item::Record(r.clone())]);
        }
    }
}
