//! Native functions as methods: the compiler-instrumented functions of a process
//! (`FUNC_ENTER`/`FUNC_LEAVE` ring records, by address) become ordinary method calls of
//! the trace (`Event::Enter`/`Leave`), so that every reader nests them with Java
//! methods and C API regions on one call stack per thread, and counts, labels and
//! models them the same way.
//!
//! Each `(process, address)` gets an id from the buffer file's method id space the first
//! time it is seen (dense, below 2^31, shared with the agents' Java methods and regions,
//! so ids never collide), written as a `Meta::Method` (empty class, the address as name)
//! and a `Meta::NativeFunction` saying which address it stands for. Names are resolved
//! when the trace is read, from the process's mappings and the mapped file's symbols.
//!
//! Mappings: the C API writes a native process's mappings when it starts. A function
//! address that none of the known mappings of its process covers (a library loaded later
//! with `dlopen`, or a JVM's JNI library) makes the collector read `/proc/<pid>/maps`
//! once the metadata log was read, and write the executable mappings it did not know.
//! A process that exited before that leaves its function unmapped: it is labelled by
//! address.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use sonda_trace::{Event, Meta, Pid};

use super::maps::ExecMapping;

/// A fast hasher for `(pid, address)` keys (one multiply per word): the look-up runs for
/// every native call record drained.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Fast<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

/// The collector's table of native functions.
#[derive(Default)]
pub struct NativeFunctions {
    ids: Fast<(u32, u64), u32>,
    /// Executable mappings known per process: (start, end).
    mapped: Fast<u32, Vec<(u64, u64)>>,
    /// Functions seen outside every known mapping, to look for in `/proc` later.
    unmapped: Vec<(Pid, u64)>,
    /// Metadata to write.
    pending: Vec<Meta>,
    /// Records left as `FuncEnter`/`FuncLeave` because the id space was exhausted.
    without_id: u64,
}

impl NativeFunctions {
    /// `event` with a native function's entry or exit turned into a method's, giving the
    /// function an id (from `next_id`) on first sight; other events unchanged.
    pub fn translate(
        &mut self,
        pid: Pid,
        event: Event,
        next_id: impl FnOnce() -> Option<u32>,
    ) -> Event {
        match event {
            Event::FuncEnter { tid, addr } => match self.id(pid, addr, next_id) {
                Some(method) => Event::Enter { tid, method },
                None => event,
            },
            Event::FuncLeave { tid, addr } => match self.id(pid, addr, next_id) {
                Some(method) => Event::Leave {
                    tid,
                    method,
                    exception: false,
                },
                None => event,
            },
            other => other,
        }
    }

    fn id(&mut self, pid: Pid, addr: u64, next_id: impl FnOnce() -> Option<u32>) -> Option<u32> {
        if let Some(&id) = self.ids.get(&(pid.0, addr)) {
            return Some(id);
        }
        let Some(id) = next_id() else {
            self.without_id += 1;
            return None;
        };
        self.ids.insert((pid.0, addr), id);
        self.pending.push(Meta::Method {
            id,
            class: String::new(),
            name: format!("0x{addr:x}"),
            descriptor: String::new(),
        });
        self.pending.push(Meta::NativeFunction { id, pid, addr });
        if !self.covered(pid, addr) {
            self.unmapped.push((pid, addr));
        }
        Some(id)
    }

    fn covered(&self, pid: Pid, addr: u64) -> bool {
        self.mapped
            .get(&pid.0)
            .is_some_and(|m| m.iter().any(|&(s, e)| (s..e).contains(&addr)))
    }

    /// A mapping the trace has (from the metadata log, or written here).
    pub fn note(&mut self, meta: &Meta) {
        if let Meta::Mapping {
            pid, start, end, ..
        } = *meta
        {
            let known = self.mapped.entry(pid.0).or_default();
            if !known.contains(&(start, end)) {
                known.push((start, end));
            }
        }
    }

    /// Hands out the metadata written since the last call: ids of new functions, and
    /// mappings of functions no known mapping covers, looked up with `maps` (the
    /// process's executable mappings now). Call it after the metadata log was read.
    pub fn take_metas(
        &mut self,
        maps: impl Fn(Pid) -> Vec<ExecMapping>,
        mut each: impl FnMut(Meta),
    ) {
        for m in self.pending.drain(..) {
            each(m);
        }
        let unmapped = std::mem::take(&mut self.unmapped);
        let mut looked: Vec<u32> = Vec::new();
        for (pid, addr) in unmapped {
            if self.covered(pid, addr) || looked.contains(&pid.0) {
                continue;
            }
            looked.push(pid.0);
            for m in maps(pid) {
                let meta = m.meta(pid);
                let known = self
                    .mapped
                    .get(&pid.0)
                    .is_some_and(|k| k.contains(&(m.start, m.end)));
                if !known {
                    self.note(&meta);
                    each(meta);
                }
            }
        }
    }

    /// Distinct native functions seen.
    pub fn count(&self) -> usize {
        self.ids.len()
    }

    /// Records kept by address because no id was left.
    pub fn without_id(&self) -> u64 {
        self.without_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::Tid;

    fn ids_from(first: u32) -> impl FnMut() -> Option<u32> {
        let mut next = first;
        move || {
            next += 1;
            Some(next - 1)
        }
    }

    #[test]
    fn one_id_per_function_and_process_with_its_names() {
        let mut n = NativeFunctions::default();
        let mut next = ids_from(10);
        let (p, q, t) = (Pid(1), Pid(2), Tid(5));
        let e = n.translate(p, Event::FuncEnter { tid: t, addr: 0x40 }, &mut next);
        assert_eq!(e, Event::Enter { tid: t, method: 10 });
        let l = n.translate(p, Event::FuncLeave { tid: t, addr: 0x40 }, &mut next);
        assert_eq!(
            l,
            Event::Leave {
                tid: t,
                method: 10,
                exception: false
            }
        );
        // The same address in another process is another function.
        let e = n.translate(q, Event::FuncEnter { tid: t, addr: 0x40 }, &mut next);
        assert_eq!(e, Event::Enter { tid: t, method: 11 });
        let other = Event::ThreadEnd { tid: t };
        assert_eq!(n.translate(p, other.clone(), &mut next), other);
        assert_eq!(n.count(), 2);
        let mut metas = Vec::new();
        n.take_metas(|_| Vec::new(), |m| metas.push(m));
        assert_eq!(
            metas[..2],
            [
                Meta::Method {
                    id: 10,
                    class: String::new(),
                    name: "0x40".into(),
                    descriptor: String::new()
                },
                Meta::NativeFunction {
                    id: 10,
                    pid: p,
                    addr: 0x40
                }
            ]
        );
        assert_eq!(metas.len(), 4);
    }

    #[test]
    fn an_exhausted_id_space_keeps_addresses() {
        let mut n = NativeFunctions::default();
        let e = Event::FuncEnter {
            tid: Tid(1),
            addr: 0x40,
        };
        assert_eq!(n.translate(Pid(1), e.clone(), || None), e);
        assert_eq!(n.without_id(), 1);
    }

    #[test]
    fn proc_maps_are_read_once_for_functions_outside_known_mappings() {
        let mut n = NativeFunctions::default();
        let mut next = ids_from(1);
        let p = Pid(7);
        // The C API's own mapping covers 0x1000..0x2000.
        n.note(&Meta::Mapping {
            pid: p,
            start: 0x1000,
            end: 0x2000,
            offset: 0,
            path: "/bin/prog".into(),
        });
        let t = Tid(7);
        n.translate(
            p,
            Event::FuncEnter {
                tid: t,
                addr: 0x1100,
            },
            &mut next,
        );
        n.translate(
            p,
            Event::FuncEnter {
                tid: t,
                addr: 0x9100,
            },
            &mut next,
        );
        n.translate(
            p,
            Event::FuncEnter {
                tid: t,
                addr: 0x9200,
            },
            &mut next,
        );
        let lookups = std::cell::Cell::new(0);
        let maps = |pid: Pid| {
            assert_eq!(pid, p);
            lookups.set(lookups.get() + 1);
            vec![
                ExecMapping {
                    start: 0x1000,
                    end: 0x2000,
                    offset: 0,
                    path: "/bin/prog".into(),
                },
                ExecMapping {
                    start: 0x9000,
                    end: 0xa000,
                    offset: 0x3000,
                    path: "/lib/late.so".into(),
                },
            ]
        };
        let mut metas = Vec::new();
        n.take_metas(maps, |m| metas.push(m));
        assert_eq!(lookups.get(), 1);
        let mappings: Vec<_> = metas
            .iter()
            .filter(|m| matches!(m, Meta::Mapping { .. }))
            .collect();
        assert_eq!(
            mappings,
            [&Meta::Mapping {
                pid: p,
                start: 0x9000,
                end: 0xa000,
                offset: 0x3000,
                path: "/lib/late.so".into()
            }]
        );
        // Known now: a later function there needs no look-up.
        n.translate(
            p,
            Event::FuncEnter {
                tid: t,
                addr: 0x9300,
            },
            &mut next,
        );
        n.take_metas(maps, |_| {});
        assert_eq!(lookups.get(), 1);
    }
}
