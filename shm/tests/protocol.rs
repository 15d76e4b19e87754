//! The ring and log protocol under real concurrency: what a producer writes is either
//! read once, in order, or counted as dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sonda_shm::config::{AgentConfig, Mode};
use sonda_shm::records::{decode, head, ENTER, FUNC_ENTER};
use sonda_shm::{AgentState, Clock, Geometry, Region, SlotState};

fn region(slots: u32, ring_len: u32) -> (&'static Region, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buf");
    let geo = Geometry {
        slots,
        ring_len,
        meta_len: 1 << 16,
    };
    let config = AgentConfig {
        methods: vec!["a.B".into()],
        ..AgentConfig::default()
    };
    Region::create(&path, geo, Clock::Tsc, &config).unwrap();
    let agent = Region::open(&path).unwrap();
    (Box::leak(Box::new(agent)), dir)
}

#[test]
fn every_record_is_read_once_in_order_or_counted_as_dropped() {
    let (r, _dir) = region(4, 4096);
    const N: u64 = 2_000_000;
    let done = Arc::new(AtomicBool::new(false));
    let producer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let p = r.claim(1, 2).unwrap();
            for i in 0..N {
                if i % 3 == 0 {
                    p.push2(i, head(FUNC_ENTER, 1, 0), 7, i * 2);
                } else {
                    p.push(i, head(ENTER, 0, 0), (i & 0xffff) as u32);
                }
            }
            done.store(true, Ordering::Release);
            p.retire();
        })
    };
    let mut got = 0u64;
    let mut last = None;
    let mut buf = Vec::new();
    loop {
        let finished = done.load(Ordering::Acquire);
        buf.clear();
        r.drain(0, &mut buf);
        for rec in decode(&buf) {
            if let Some(l) = last {
                assert!(rec.time > l, "out of order: {} after {l}", rec.time);
            }
            if rec.kind == FUNC_ENTER {
                assert_eq!(rec.extra, rec.time * 2);
            } else {
                assert_eq!(rec.arg as u64, rec.time & 0xffff);
            }
            last = Some(rec.time);
            got += 1;
        }
        if finished && buf.is_empty() {
            break;
        }
    }
    producer.join().unwrap();
    let info = r.slot_info(0);
    assert_eq!(info.state, SlotState::Retired);
    assert_eq!(
        got + info.dropped,
        N,
        "read {got}, dropped {}",
        info.dropped
    );
    assert!(r.free_if_drained(0));
    assert_eq!(r.slot_info(0).state, SlotState::Free);
}

#[test]
fn slots_run_out_and_come_back() {
    let (r, _dir) = region(2, 256);
    let a = r.claim(1, 10).unwrap();
    let _b = r.claim(1, 11).unwrap();
    assert!(r.claim(1, 12).is_none());
    a.retire();
    assert!(r.free_if_drained(0));
    let c = r.claim(1, 12).unwrap();
    assert_eq!(r.slot_info(0).tid, 12);
    assert_eq!(r.slot_info(0).generation, 2);
    // A full ring drops rather than overwriting.
    for i in 0..100 {
        c.push(i, head(ENTER, 0, 0), 1);
    }
    assert_eq!(r.slot_info(0).dropped, 100 - 256 / 16);
    assert_eq!(r.slot_info(0).dropped_enters, 100 - 256 / 16);
    c.push(100, head(sonda_shm::records::LEAVE, 0, 0), 1);
    assert_eq!(r.slot_info(0).dropped, 100 - 256 / 16 + 1);
    assert_eq!(r.slot_info(0).dropped_enters, 100 - 256 / 16);
}

#[test]
fn metadata_log_keeps_everything_until_full() {
    let (r, _dir) = region(1, 256);
    assert_eq!(r.config().unwrap().methods, ["a.B"]);
    let mut n = 0;
    while r.meta_append(format!("record {n}").as_bytes()) {
        n += 1;
    }
    assert!(n > 1000);
    let mut cursor = 0;
    let mut seen = Vec::new();
    r.read_meta(&mut cursor, |b| {
        seen.push(String::from_utf8(b.to_vec()).unwrap())
    });
    assert_eq!(seen.len(), n);
    assert_eq!(seen[5], "record 5");
    assert!(r.meta_drops() >= 1);
}

#[test]
fn agent_state_heartbeat_and_method_id_floor_cross_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buf");
    let geo = Geometry {
        slots: 2,
        ring_len: 4096,
        meta_len: 1 << 16,
    };
    let config = AgentConfig {
        mode: Some(Mode::Attach),
        ..AgentConfig::default()
    };
    let collector = Region::create(&path, geo, Clock::Monotonic, &config).unwrap();
    let agent = Region::open(&path).unwrap();
    assert_eq!(agent.agent_state(), AgentState::Starting);
    assert_eq!(agent.last_heartbeat(), 0);
    assert_eq!(agent.collector_pid(), std::process::id());
    collector.heartbeat(123_456);
    assert_eq!(agent.last_heartbeat(), 123_456);
    agent.set_agent_state(AgentState::Recording);
    assert_eq!(collector.agent_state(), AgentState::Recording);
    agent.set_agent_state(AgentState::Stopped);
    assert_eq!(collector.agent_state(), AgentState::Stopped);
    // Ids start at 1; a floor moves them up once, never down.
    assert_eq!(agent.next_method_id(), Some(1));
    assert_eq!(agent.raise_method_ids_to(40), 40);
    assert_eq!(agent.next_method_id(), Some(40));
    assert_eq!(agent.raise_method_ids_to(5), 41);
    assert_eq!(agent.next_method_id(), Some(41));
}

#[test]
fn the_configuration_crosses_the_file_and_a_bad_text_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let geo = Geometry {
        slots: 1,
        ring_len: 256,
        meta_len: 1 << 16,
    };
    let config = AgentConfig {
        methods: vec!["app.**".into(), "!app.X".into()],
        monitors: false,
        gc: true,
        mode: Some(Mode::Launch),
        budget: Some(500),
    };
    let good = dir.path().join("good");
    Region::create(&good, geo, Clock::Monotonic, &config).unwrap();
    assert_eq!(Region::open(&good).unwrap().config(), Ok(config));
    // A text this version would not write (another collector's, a damaged file).
    let bad = dir.path().join("bad");
    Region::create_with_config_text(&bad, geo, Clock::Monotonic, "mode=attach\ngc=maybe\n")
        .unwrap();
    let err = Region::open(&bad).unwrap().config().unwrap_err();
    assert!(err.to_string().contains("gc=maybe"), "{err}");
    // A configuration the text cannot carry is refused before the file exists.
    let unencodable = AgentConfig {
        methods: vec!["a\nb".into()],
        ..AgentConfig::default()
    };
    let none = dir.path().join("none");
    let Err(err) = Region::create(&none, geo, Clock::Monotonic, &unencodable) else {
        panic!("a pattern with a line break was written");
    };
    assert!(matches!(err, sonda_shm::CreateError::Invalid(_)), "{err}");
    assert!(!none.exists());
}

/// A producer whose ring passes a quarter full rings the doorbell once per drain, and the
/// ring wakes a collector waiting on it (another thread here; another process in
/// use: the futex is shared, not private).
#[test]
fn a_ring_past_a_quarter_full_rings_the_doorbell_once_per_drain_and_wakes_the_waiter() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buf");
    let geo = Geometry {
        slots: 1,
        ring_len: 4096, // 256 records
        meta_len: 1 << 16,
    };
    let collector = Region::create(&path, geo, Clock::Monotonic, &AgentConfig::default()).unwrap();
    let agent: &'static Region = Box::leak(Box::new(Region::open(&path).unwrap()));
    let p = agent.claim(std::process::id(), 9).unwrap();
    let push = |n: u64| {
        for t in 0..n {
            assert!(p.push(t, head(ENTER, 0, 0), 1));
        }
    };
    push(64); // exactly a quarter full: no ring yet
    assert_eq!(collector.doorbell(), 0);
    assert_eq!(
        collector.wait_doorbell(0, Duration::from_millis(1)),
        0,
        "times out"
    );
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t0 = Instant::now();
            (
                collector.wait_doorbell(0, Duration::from_secs(20)),
                t0.elapsed(),
            )
        });
        std::thread::sleep(Duration::from_millis(100));
        push(1);
        let (count, took) = waiter.join().unwrap();
        assert_eq!(count, 1);
        assert!(
            took < Duration::from_secs(10),
            "woken, not timed out: {took:?}"
        );
    });
    push(100); // still past, same drain: no more rings
    assert_eq!(collector.doorbell(), 1);
    let mut out = Vec::new();
    assert_eq!(collector.drain(0, &mut out), 165 * 16);
    push(64);
    assert_eq!(collector.doorbell(), 1, "a quarter full again, not past it");
    push(1);
    assert_eq!(
        collector.doorbell(),
        2,
        "past a quarter after a drain: rings again"
    );
}
