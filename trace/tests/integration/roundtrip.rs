//! Every record survives a write and a read; damage is found where it is.

use std::io::Write;

use proptest::prelude::*;
use sonda_trace::codec::Encoding;
use sonda_trace::*;

fn sample_records() -> Vec<Record> {
    let t = |n| Time(1_000 + n);
    let events = vec![
        Event::Switch {
            cpu: Cpu(1),
            prev: Tid(10),
            prev_state: 0x100,
            next: Tid(11),
            charge: None,
        },
        Event::Waking {
            cpu: Cpu(0),
            waker: Tid(10),
            wakee: Tid(12),
        },
        Event::Wakeup {
            target: Cpu(1),
            wakee: Tid(12),
            new_task: true,
            waking: None,
        },
        Event::Migrate {
            tid: Tid(12),
            from: Cpu(0),
            to: Cpu(1),
        },
        Event::CpuTime {
            tid: Tid(12),
            ns: 3_999_871,
            by: ChargedBy::Unknown,
        },
        Event::CpuTime {
            tid: Tid(12),
            ns: 1_000,
            by: ChargedBy::Itself,
        },
        Event::CpuTime {
            tid: Tid(12),
            ns: 80_000,
            by: ChargedBy::Other,
        },
        Event::NewTask {
            parent: Tid(10),
            child: Tid(13),
            pid: Pid(10),
            comm: "java".into(),
        },
        Event::TaskExit { tid: Tid(13) },
        Event::Exec {
            pid: Pid(10),
            tid: Tid(10),
            filename: "/usr/bin/java".into(),
        },
        Event::Rename {
            tid: Tid(11),
            comm: "C2 CompilerThre".into(),
        },
        Event::ProcSample {
            tid: Tid(11),
            cpu: Cpu(1),
            state: b'R',
            run_ns: 5,
            wait_ns: 6,
        },
        Event::KernelLost {
            cpu: Cpu(0),
            count: 3,
        },
        Event::VmInit { pid: Pid(10) },
        Event::VmDeath { pid: Pid(10) },
        Event::ThreadStart { tid: Tid(14) },
        Event::ThreadEnd { tid: Tid(14) },
        Event::GcStart {
            pid: Pid(10),
            tid: Tid(12),
        },
        Event::GcEnd {
            pid: Pid(10),
            tid: Tid(12),
        },
        Event::MonitorContended {
            tid: Tid(14),
            class: 2,
        },
        Event::MonitorEntered {
            tid: Tid(14),
            class: 2,
        },
        Event::Enter {
            tid: Tid(14),
            method: 7,
        },
        Event::Leave {
            tid: Tid(14),
            method: 7,
            exception: true,
        },
        Event::FuncEnter {
            tid: Tid(14),
            addr: 0xdead_beef,
        },
        Event::FuncLeave {
            tid: Tid(14),
            addr: 0xdead_beef,
        },
        Event::User {
            tid: Tid(14),
            kind: 9,
            value: u64::MAX,
        },
        Event::Dropped {
            tid: Tid(14),
            count: 42,
        },
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Record {
            time: t(i as u64),
            event,
        })
        .collect()
}

fn sample_meta() -> Vec<Meta> {
    vec![
        Meta::TraceInfo {
            source: Source::Tracepoints,
            start: Time(1000),
            host: "h".into(),
            cpus: 2,
            command: vec!["java".into(), "-version".into()],
            tool: "sonda 0.1".into(),
        },
        Meta::Process {
            pid: Pid(10),
            ppid: Pid(1),
            name: "java".into(),
            runtime: Runtime::Java,
        },
        Meta::Thread {
            pid: Pid(10),
            tid: Tid(11),
            comm: "java".into(),
        },
        Meta::JavaThread {
            pid: Pid(10),
            tid: Tid(14),
            name: "worker-1 ✓".into(),
            daemon: true,
        },
        Meta::Method {
            id: 7,
            class: "a.B".into(),
            name: "run".into(),
            descriptor: "()V".into(),
        },
        Meta::MonitorClass {
            id: 2,
            name: "java.lang.Object".into(),
        },
        Meta::Counter {
            name: "kernel.lost".into(),
            value: 3,
        },
        Meta::Warning {
            text: "careful".into(),
        },
        Meta::Mapping {
            pid: Pid(10),
            start: 1,
            end: 2,
            offset: 3,
            path: "/lib/x.so".into(),
        },
        Meta::UserType {
            kind: 9,
            value: Some(1),
            name: "phase".into(),
        },
        Meta::UserType {
            kind: 9,
            value: None,
            name: "phases".into(),
        },
        Meta::NativeFunction {
            id: 5,
            pid: Pid(10),
            addr: 0x40_1136,
        },
        Meta::MethodRemoved {
            id: 1,
            time: Time(1_500),
            rate: 12_000_000,
            mean_ns: 14,
            overhead_ppm: 230_000,
        },
    ]
}

fn write_trace(records: &[Record], meta: &[Meta], finish: bool) -> Vec<u8> {
    write_trace_in(Encoding::Compact, records, meta, finish)
}

fn write_trace_in(encoding: Encoding, records: &[Record], meta: &[Meta], finish: bool) -> Vec<u8> {
    let mut w = TraceWriter::with_encoding(Vec::new(), encoding).unwrap();
    for m in meta {
        w.meta(m);
    }
    for (i, r) in records.iter().enumerate() {
        w.record(r).unwrap();
        if i % 5 == 4 {
            w.flush().unwrap();
        }
    }
    if finish {
        w.finish(&[Meta::Counter {
            name: "agent.dropped".into(),
            value: 1,
        }])
        .unwrap()
    } else {
        // A recording that was killed: everything flushed, but no end block. finish()
        // with no counters writes an empty end block of exactly one header; cut it off.
        let bytes = w.finish(&[]).unwrap();
        bytes[..bytes.len() - sonda_trace::block::BLOCK_HEADER_LEN].to_vec()
    }
}

fn to_file(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f
}

#[test]
fn every_record_round_trips() {
    let records = sample_records();
    let meta = sample_meta();
    let f = to_file(&write_trace(&records, &meta, true));
    let read: Vec<Record> = Events::open(f.path())
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(read, records);
    let m = TraceMeta::scan(f.path()).unwrap();
    assert!(m.complete);
    assert!(m.damage.is_none());
    assert_eq!(m.records, records.len() as u64);
    assert_eq!(m.threads[&Tid(14)].name(), "worker-1 ✓");
    assert_eq!(m.methods[&7].qualified(), "a.B::run");
    assert_eq!(m.counters["agent.dropped"], 1);
    assert_eq!(m.counters["kernel.lost"], 3);
    assert_eq!(m.first_time, Some(Time(1000)));
    assert_eq!(m.last_time, Some(records.last().unwrap().time));
}

/// A file of format 1.x (fixed-size integers, what sonda wrote before 2.0; 1.5 with
/// `CpuTime`'s writer, which 1.4 readers ignore) reads as it did, and says so in its
/// header; the compact file of the same records is less than
/// two thirds of its size.
#[test]
fn a_format_1_file_still_reads_and_compact_is_smaller() {
    let records = sample_records();
    let meta = sample_meta();
    let old = write_trace_in(Encoding::Fixed, &records, &meta, true);
    assert_eq!(&old[8..12], &[1, 0, 5, 0], "major 1, minor 5");
    let f = to_file(&old);
    let read: Vec<Record> = Events::open(f.path())
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(read, records);
    assert_eq!(
        TraceMeta::scan(f.path()).unwrap().records,
        records.len() as u64
    );
    let new = write_trace_in(Encoding::Compact, &records, &meta, true);
    assert_eq!(&new[8..12], &[4, 0, 0, 0], "major 4, minor 0");
    // Method events dominate a busy trace: 18 bytes each in 1.x.
    let calls: Vec<Record> = (0..10_000u64)
        .map(|i| Record {
            time: Time(1_000_000_000 + i * 150),
            event: if i % 2 == 0 {
                Event::Enter {
                    tid: Tid(123_456),
                    method: (i % 300) as u32,
                }
            } else {
                Event::Leave {
                    tid: Tid(123_456),
                    method: (i % 300) as u32,
                    exception: false,
                }
            },
        })
        .collect();
    let fixed = write_trace_in(Encoding::Fixed, &calls, &[], true).len();
    let compact = write_trace_in(Encoding::Compact, &calls, &[], true).len();
    assert!(
        compact * 3 < fixed * 2,
        "compact {compact} bytes, fixed {fixed}"
    );
}

/// A switch carrying its switch-out's charge (format 3.0), or a wakeup its waking (4.0),
/// reads as the two records it stands for: the charge (written by the thread itself) or
/// the waking `before_ns` ahead, then the bare switch or wakeup; never before the record written ahead of it (the
/// writer moves it up to that one), exactly placed at the start of a block (whose
/// first time is then the charge's); in a 1.x file written as two records. Every way
/// of reading agrees: the streaming reader, the blocks' items and the scan's count.
#[test]
fn a_record_carrying_an_earlier_one_reads_as_the_two() {
    let switch = |time, prev, next, charge| Record {
        time: Time(time),
        event: Event::Switch {
            cpu: Cpu(1),
            prev: Tid(prev),
            prev_state: 1,
            next: Tid(next),
            charge,
        },
    };
    let charge = |time, tid, ns| Record {
        time: Time(time),
        event: Event::CpuTime {
            tid: Tid(tid),
            ns,
            by: ChargedBy::Itself,
        },
    };
    let wakeup = |time, wakee, waking| Record {
        time: Time(time),
        event: Event::Wakeup {
            target: Cpu(0),
            wakee: Tid(wakee),
            new_task: false,
            waking,
        },
    };
    let waking = |time, waker, wakee| Record {
        time: Time(time),
        event: Event::Waking {
            cpu: Cpu(1),
            waker: Tid(waker),
            wakee: Tid(wakee),
        },
    };
    let carrying = |ns, before_ns| Some(SwitchCharge { ns, before_ns });
    let woken_by = |waker, before_ns| {
        Some(CarriedWaking {
            cpu: Cpu(1),
            waker: Tid(waker),
            before_ns,
        })
    };
    let written = [
        // A block's first record: its charge exactly 1.5 µs ahead.
        switch(500_000, 10, 11, carrying(700, 1_500)),
        // A wakeup carrying its waking (format 4.0), 2 µs ahead.
        wakeup(600_000, 12, woken_by(11, 2_000)),
        // 1.5 ms ahead would be before the wakeup: at the wakeup.
        switch(2_000_000, 11, 10, carrying(800, 1_500_000)),
        switch(5_000_000, 10, 0, carrying(900, 300)),
        // Its waking 1 ms ahead would be before the switch: at the switch.
        wakeup(5_500_000, 10, woken_by(12, 1_000_000)),
        // An older writer's switch: no charge.
        switch(6_000_000, 0, 10, None),
    ];
    let expected = vec![
        charge(498_500, 10, 700),
        switch(500_000, 10, 11, None),
        waking(598_000, 11, 12),
        wakeup(600_000, 12, None),
        charge(600_000, 11, 800),
        switch(2_000_000, 11, 10, None),
        charge(4_999_700, 10, 900),
        switch(5_000_000, 10, 0, None),
        waking(5_000_000, 12, 10),
        wakeup(5_500_000, 10, None),
        switch(6_000_000, 0, 10, None),
    ];
    for encoding in [Encoding::Compact, Encoding::Fixed] {
        let mut w = TraceWriter::with_encoding(Vec::new(), encoding).unwrap();
        w.record(&Record {
            time: Time(400_000),
            event: Event::TaskExit { tid: Tid(99) },
        })
        .unwrap();
        w.flush().unwrap();
        for r in &written {
            w.record(r).unwrap();
        }
        let bytes = w.finish(&[]).unwrap();
        let f = to_file(&bytes);
        let streamed: Vec<Record> = Events::open(f.path())
            .unwrap()
            .map(|r| r.unwrap())
            .skip(1)
            .collect();
        assert_eq!(streamed, expected, "{encoding:?}");
        let mut reader = TraceReader::open(f.path()).unwrap();
        let mut by_blocks = Vec::new();
        while let Some(block) = reader.next_block().unwrap() {
            for item in sonda_trace::reader::block_items(&block) {
                if let codec::Item::Record(r) = item.unwrap() {
                    by_blocks.push(r);
                }
            }
        }
        assert_eq!(by_blocks[1..], expected[..], "{encoding:?}");
        let meta = TraceMeta::scan(f.path()).unwrap();
        assert_eq!(meta.records, expected.len() as u64 + 1, "{encoding:?}");
        assert_eq!(meta.first_time, Some(Time(400_000)));
        let version = match encoding {
            Encoding::Compact => [4, 0, 0, 0],
            Encoding::Fixed => [1, 0, 5, 0],
        };
        assert_eq!(bytes[8..12], version);
    }
}

/// The compact encoding keeps every value of every field: times far apart, the
/// largest ids, addresses and counts.
#[test]
fn compact_records_keep_extreme_values() {
    let records = vec![
        Record {
            time: Time(0),
            event: Event::Enter {
                tid: Tid(0),
                method: 0,
            },
        },
        Record {
            time: Time(0),
            event: Event::Switch {
                cpu: Cpu(u16::MAX),
                prev: Tid(u32::MAX),
                prev_state: u64::MAX,
                next: Tid(1),
                charge: None,
            },
        },
        Record {
            time: Time(u64::MAX / 2),
            event: Event::FuncEnter {
                tid: Tid(u32::MAX),
                addr: u64::MAX,
            },
        },
        Record {
            time: Time(u64::MAX),
            event: Event::Dropped {
                tid: Tid(7),
                count: u64::MAX,
            },
        },
    ];
    let f = to_file(&write_trace(&records, &[], true));
    let read: Vec<Record> = Events::open(f.path())
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(read, records);
}

#[test]
fn a_trace_without_end_block_is_readable_but_incomplete() {
    let records = sample_records();
    let f = to_file(&write_trace(&records, &sample_meta(), false));
    let m = TraceMeta::scan(f.path()).unwrap();
    assert!(!m.complete);
    assert!(m.damage.is_none());
    assert_eq!(Events::open(f.path()).unwrap().count(), records.len());
}

#[test]
fn a_cut_trace_reads_up_to_its_last_complete_block() {
    let records = sample_records();
    let bytes = write_trace(&records, &sample_meta(), true);
    // Cut at every position: never a panic, always a prefix of the records.
    for cut in 0..bytes.len() {
        let f = to_file(&bytes[..cut]);
        match Events::open(f.path()) {
            Err(ReadError::NotATrace) => assert!(cut < 16),
            Err(e) => panic!("cut at {cut}: {e}"),
            Ok(events) => {
                let mut got = Vec::new();
                let mut failed = false;
                for r in events {
                    match r {
                        Ok(r) => got.push(r),
                        Err(ReadError::Truncated { .. }) => failed = true,
                        Err(e) => panic!("cut at {cut}: unexpected {e}"),
                    }
                }
                assert_eq!(got[..], records[..got.len()], "cut at {cut}");
                let _ = failed;
                let m = TraceMeta::scan(f.path()).unwrap();
                assert!(!m.complete || cut == bytes.len());
            }
        }
    }
}

#[test]
fn a_flipped_byte_is_reported_as_damage() {
    let records = sample_records();
    let bytes = write_trace(&records, &sample_meta(), true);
    for pos in (16..bytes.len()).step_by(7) {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x5a;
        let f = to_file(&bad);
        let results: Vec<_> = Events::open(f.path()).unwrap().collect();
        let errors = results.iter().filter(|r| r.is_err()).count();
        assert!(errors <= 1);
        let m = TraceMeta::scan(f.path()).unwrap();
        assert!(
            m.damage.is_some() || errors == 1 || !m.complete,
            "flip at {pos} went unnoticed"
        );
    }
}

#[test]
fn out_of_order_records_are_refused() {
    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.record(&Record {
        time: Time(10),
        event: Event::ThreadStart { tid: Tid(1) },
    })
    .unwrap();
    assert!(w
        .record(&Record {
            time: Time(9),
            event: Event::ThreadStart { tid: Tid(1) }
        })
        .is_err());
}

#[test]
fn a_foreign_file_is_not_a_trace() {
    let f = to_file(b"#Paraver (01/01/2026 at 00:00):1_ns:1(1):1:1(1:1)\n");
    assert!(matches!(Events::open(f.path()), Err(ReadError::NotATrace)));
}

proptest! {
    #[test]
    fn arbitrary_payloads_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        for item in sonda_trace::codec::Items::new(&data) {
            let _ = item;
        }
    }

    #[test]
    fn method_events_round_trip(ids in proptest::collection::vec((0u32..1<<31, any::<bool>()), 1..200)) {
        let records: Vec<Record> = ids.iter().enumerate().map(|(i, &(m, ex))| Record {
            time: Time(i as u64 * 3),
            event: if ex { Event::Leave { tid: Tid(5), method: m, exception: i % 2 == 0 } } else { Event::Enter { tid: Tid(5), method: m } },
        }).collect();
        let f = to_file(&write_trace(&records, &[], true));
        let read: Vec<Record> = Events::open(f.path()).unwrap().map(|r| r.unwrap()).collect();
        prop_assert_eq!(read, records);
    }
}
