//! Paraver records as compact values, and their text form written fast: every number
//! through `itoa`, the `appl:task:thread` and CPU fields formatted once per object,
//! lines gathered in one buffer that goes to the sink in large writes.

use std::io::{self, Write};

use crate::layout::Place;

/// One `.prv` record. `obj` is the thread's row index; `cpu` is Paraver's CPU (1-based,
/// 0 for none); times are ns from the trace's origin.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Line {
    /// `1:cpu:appl:task:thread:begin:end:state`
    State {
        begin: u64,
        end: u64,
        obj: u32,
        cpu: u16,
        state: u16,
    },
    /// `2:cpu:appl:task:thread:time:type:value`
    Event {
        time: u64,
        value: i64,
        obj: u32,
        cpu: u16,
        ty: u32,
    },
    /// `3:` a communication from `from` (sent at `sent`) to `to` (received at
    /// `received`), logical and physical times equal, size 0.
    Comm {
        sent: u64,
        received: u64,
        from: u32,
        to: u32,
        from_cpu: u16,
        to_cpu: u16,
    },
}

impl Line {
    /// The time Paraver sorts the record by (a state's begin, a send's time).
    pub fn key(&self) -> u64 {
        match *self {
            Line::State { begin, .. } => begin,
            Line::Event { time, .. } => time,
            Line::Comm { sent, .. } => sent,
        }
    }

    /// The thread it is sorted with.
    pub fn obj(&self) -> u32 {
        match *self {
            Line::State { obj, .. } | Line::Event { obj, .. } => obj,
            Line::Comm { from, .. } => from,
        }
    }
}

/// Counts of written records.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Written {
    pub states: u64,
    pub events: u64,
    pub comms: u64,
}

/// Writes [`Line`]s as text.
pub(crate) struct PrvWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// `:appl:task:thread:` of each row.
    objs: Vec<Box<[u8]>>,
    /// `N` of each Paraver CPU number 0..=cpus.
    cpus: Vec<Box<[u8]>>,
    pub written: Written,
}

const BUF: usize = 1 << 18;

impl<W: Write> PrvWriter<W> {
    pub fn new(out: W, places: &[Place], cpus: u16) -> PrvWriter<W> {
        let objs = places
            .iter()
            .map(|p| {
                format!(":{}:{}:{}:", p.appl, p.task, p.thread)
                    .into_bytes()
                    .into()
            })
            .collect();
        let cpus = (0..=u32::from(cpus))
            .map(|c| c.to_string().into_bytes().into())
            .collect();
        PrvWriter {
            out,
            buf: Vec::with_capacity(BUF + 256),
            objs,
            cpus,
            written: Written::default(),
        }
    }

    /// Writes raw bytes (the header).
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(bytes);
        self.spill()
    }

    fn num(&mut self, n: impl itoa::Integer) {
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    fn head(&mut self, kind: &[u8], cpu: u16, obj: u32) {
        self.buf.extend_from_slice(kind);
        self.buf.extend_from_slice(&self.cpus[usize::from(cpu)]);
        self.buf.extend_from_slice(&self.objs[obj as usize]);
    }

    /// Writes one record.
    pub fn line(&mut self, line: &Line) -> io::Result<()> {
        match *line {
            Line::State {
                begin,
                end,
                obj,
                cpu,
                state,
            } => {
                self.head(b"1:", cpu, obj);
                self.num(begin);
                self.buf.push(b':');
                self.num(end);
                self.buf.push(b':');
                self.num(state);
                self.written.states += 1;
            }
            Line::Event {
                time,
                value,
                obj,
                cpu,
                ty,
            } => {
                self.head(b"2:", cpu, obj);
                self.num(time);
                self.buf.push(b':');
                self.num(ty);
                self.buf.push(b':');
                self.num(value);
                self.written.events += 1;
            }
            Line::Comm {
                sent,
                received,
                from,
                to,
                from_cpu,
                to_cpu,
            } => {
                self.head(b"3:", from_cpu, from);
                self.num(sent);
                self.buf.push(b':');
                self.num(sent);
                self.buf.push(b':');
                self.buf.extend_from_slice(&self.cpus[usize::from(to_cpu)]);
                self.buf.extend_from_slice(&self.objs[to as usize]);
                self.num(received);
                self.buf.push(b':');
                self.num(received);
                self.buf.extend_from_slice(b":0:");
                self.num(crate::conventions::WAKEUP_TAG);
                self.written.comms += 1;
            }
        }
        self.buf.push(b'\n');
        self.spill()
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= BUF {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes everything buffered and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_as_paraver_reads_them() {
        let places = [
            Place {
                appl: 1,
                task: 1,
                thread: 1,
            },
            Place {
                appl: 2,
                task: 1,
                thread: 3,
            },
        ];
        let mut w = PrvWriter::new(Vec::new(), &places, 2);
        w.line(&Line::State {
            begin: 0,
            end: 1500,
            obj: 1,
            cpu: 2,
            state: 40,
        })
        .unwrap();
        w.line(&Line::Event {
            time: 7,
            value: 60,
            obj: 0,
            cpu: 0,
            ty: 60000019,
        })
        .unwrap();
        w.line(&Line::Comm {
            sent: 5,
            received: 9,
            from: 0,
            to: 1,
            from_cpu: 1,
            to_cpu: 2,
        })
        .unwrap();
        let written = w.written;
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(
            text,
            "1:2:2:1:3:0:1500:40\n2:0:1:1:1:7:60000019:60\n3:1:1:1:1:5:5:2:2:1:3:9:9:0:1\n"
        );
        assert_eq!(
            written,
            Written {
                states: 1,
                events: 1,
                comms: 1
            }
        );
    }

    #[test]
    fn a_line_stays_small() {
        // The reorder buffer holds many of these: keep them at 32 bytes.
        assert!(std::mem::size_of::<Line>() <= 32);
    }
}
