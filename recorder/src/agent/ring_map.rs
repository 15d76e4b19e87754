//! Agent ring records → trace events, per the table of `docs/architecture.md`. Pure.

use sonda_shm::records::{self, RingRecord};
use sonda_trace::{Event, Pid, Tid};

/// The event a ring record of thread `tid` of process `pid` stands for; `None` for a
/// kind this collector does not know (an agent of a newer build).
pub fn event(rec: &RingRecord, pid: Pid, tid: Tid) -> Option<Event> {
    Some(match rec.kind {
        records::ENTER => Event::Enter {
            tid,
            method: rec.arg,
        },
        records::LEAVE => Event::Leave {
            tid,
            method: rec.arg,
            exception: false,
        },
        records::LEAVE_EXCEPTION => Event::Leave {
            tid,
            method: rec.arg,
            exception: true,
        },
        records::THREAD_START => Event::ThreadStart { tid },
        records::THREAD_END => Event::ThreadEnd { tid },
        records::VM_INIT => Event::VmInit { pid },
        records::VM_DEATH => Event::VmDeath { pid },
        records::GC_START => Event::GcStart { pid, tid },
        records::GC_END => Event::GcEnd { pid, tid },
        records::MONITOR_CONTENDED => Event::MonitorContended {
            tid,
            class: rec.arg,
        },
        records::MONITOR_ENTERED => Event::MonitorEntered {
            tid,
            class: rec.arg,
        },
        records::FUNC_ENTER => Event::FuncEnter {
            tid,
            addr: records::func_addr(rec),
        },
        records::FUNC_LEAVE => Event::FuncLeave {
            tid,
            addr: records::func_addr(rec),
        },
        records::USER => Event::User {
            tid,
            kind: rec.arg,
            value: rec.extra,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_shm::records::{decode, head};

    /// Encodes ring units the way `Producer::push`/`push2` do.
    fn unit(time: u64, kind: u8, extra_units: u8, arg: u32) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&time.to_le_bytes());
        u.extend_from_slice(&head(kind, extra_units, 0).to_le_bytes());
        u.extend_from_slice(&arg.to_le_bytes());
        u
    }

    #[test]
    fn maps_every_kind_of_the_contract() {
        let (pid, tid) = (Pid(10), Tid(11));
        let mut bytes = Vec::new();
        for (kind, arg) in [
            (records::ENTER, 5),
            (records::LEAVE, 5),
            (records::LEAVE_EXCEPTION, 6),
            (records::THREAD_START, 0),
            (records::THREAD_END, 0),
            (records::VM_INIT, 0),
            (records::VM_DEATH, 0),
            (records::GC_START, 0),
            (records::GC_END, 0),
            (records::MONITOR_CONTENDED, 3),
            (records::MONITOR_ENTERED, 3),
        ] {
            bytes.extend(unit(1, kind, 0, arg));
        }
        for (kind, arg, extra) in [
            (records::FUNC_ENTER, 0, 0xdead),
            (records::FUNC_LEAVE, 0, 0xdead),
            (records::USER, 7, 99),
        ] {
            bytes.extend(unit(2, kind, 1, arg));
            bytes.extend_from_slice(&(extra as u64).to_le_bytes());
            bytes.extend_from_slice(&[0u8; 8]);
        }
        // The short form of function records: the address in aux:arg.
        let (h, a) = records::func_short(records::FUNC_ENTER, 0x7f00_0000_1234);
        bytes.extend_from_slice(&4u64.to_le_bytes());
        bytes.extend_from_slice(&h.to_le_bytes());
        bytes.extend_from_slice(&a.to_le_bytes());
        bytes.extend(unit(3, 200, 0, 0));
        let events: Vec<Option<Event>> = decode(&bytes).map(|r| event(&r, pid, tid)).collect();
        assert_eq!(
            events,
            [
                Some(Event::Enter { tid, method: 5 }),
                Some(Event::Leave {
                    tid,
                    method: 5,
                    exception: false
                }),
                Some(Event::Leave {
                    tid,
                    method: 6,
                    exception: true
                }),
                Some(Event::ThreadStart { tid }),
                Some(Event::ThreadEnd { tid }),
                Some(Event::VmInit { pid }),
                Some(Event::VmDeath { pid }),
                Some(Event::GcStart { pid, tid }),
                Some(Event::GcEnd { pid, tid }),
                Some(Event::MonitorContended { tid, class: 3 }),
                Some(Event::MonitorEntered { tid, class: 3 }),
                Some(Event::FuncEnter { tid, addr: 0xdead }),
                Some(Event::FuncLeave { tid, addr: 0xdead }),
                Some(Event::User {
                    tid,
                    kind: 7,
                    value: 99
                }),
                Some(Event::FuncEnter {
                    tid,
                    addr: 0x7f00_0000_1234
                }),
                None,
            ]
        );
    }
}
