//! Reads a Paraver trace back (as Paraver's parser does, for the parts sonda writes)
//! so tests can compare its totals with independent truths.

use std::collections::BTreeMap;
use std::path::Path;

/// A loaded `.prv` with its `.row` names.
#[derive(Debug, Default)]
pub struct Prv {
    /// End time from the header, ns.
    pub end: u64,
    /// Thread names from the `.row`, in header order (appl-major).
    pub names: Vec<String>,
    /// (appl, task, thread) of each name, 1-based.
    pub keys: Vec<(u32, u32, u32)>,
    /// Total ns per (thread index, state).
    pub state_ns: BTreeMap<(usize, u32), u64>,
    /// Every state record: (thread index, begin, end, state).
    pub states: Vec<(usize, u64, u64, u32)>,
    /// Events: (thread index, time, type, value).
    pub events: Vec<(usize, u64, u64, i64)>,
    /// Communications: (sender index, send time, receiver index, receive time).
    pub comms: Vec<(usize, u64, usize, u64)>,
}

impl Prv {
    /// Loads `stem.prv` and `stem.row`.
    pub fn load(stem: &Path) -> Prv {
        let prv = std::fs::read_to_string(stem.with_extension("prv")).expect("read .prv");
        let row = std::fs::read_to_string(stem.with_extension("row")).expect("read .row");
        let mut lines = prv.lines();
        let header = lines.next().expect("header");
        let mut p = Prv::default();
        let after = header.split_once("):").expect("header time").1;
        p.end = after.split('_').next().unwrap().parse().expect("end time");
        // Applications: after "NODES:NAPPL:" come "NTASKS(NTHREADS:NODE,...)" groups.
        let rest = after.splitn(3, ':').nth(2).expect("applications");
        let mut appl = 0;
        for group in rest.split(')') {
            let Some((_, inside)) = group.split_once('(') else {
                continue;
            };
            appl += 1;
            for (task, t) in inside.split(',').enumerate() {
                let nthreads: u32 = t.split(':').next().unwrap().parse().unwrap();
                for th in 1..=nthreads {
                    p.keys.push((appl, task as u32 + 1, th));
                }
            }
        }
        let mut rows = row.lines();
        while let Some(l) = rows.next() {
            if let Some(n) = l.strip_prefix("LEVEL THREAD SIZE ") {
                let n: usize = n.trim().parse().unwrap();
                p.names = rows.by_ref().take(n).map(|s| s.to_string()).collect();
            }
        }
        assert_eq!(p.names.len(), p.keys.len(), ".row names vs header threads");
        let index: BTreeMap<(u32, u32, u32), usize> =
            p.keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let key = |f: &[u64], at: usize| index[&(f[at] as u32, f[at + 1] as u32, f[at + 2] as u32)];
        for l in lines {
            if l.starts_with('#') || l.is_empty() {
                continue;
            }
            let f: Vec<i64> = l.split(':').map(|x| x.parse().unwrap()).collect();
            let u: Vec<u64> = f.iter().map(|&x| x as u64).collect();
            match f[0] {
                1 => {
                    let t = key(&u, 2);
                    *p.state_ns.entry((t, u[7] as u32)).or_default() += u[6] - u[5];
                    p.states.push((t, u[5], u[6], u[7] as u32));
                }
                2 => {
                    let t = key(&u, 2);
                    for pair in f[6..].chunks(2) {
                        p.events.push((t, u[5], pair[0] as u64, pair[1]));
                    }
                }
                3 => p.comms.push((key(&u, 2), u[6], key(&u, 8), u[12])),
                _ => {}
            }
        }
        p
    }

    /// Index of the thread named `name`.
    pub fn thread(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Total ns thread `t` spent in `state` before time `until`.
    pub fn state_total_until(&self, t: usize, state: u32, until: u64) -> u64 {
        self.states
            .iter()
            .filter(|s| s.0 == t && s.3 == state && s.1 < until)
            .map(|s| s.2.min(until) - s.1)
            .sum()
    }

    /// Index of the thread whose `.row` label names thread id `tid` ("name (tid)").
    pub fn thread_by_tid(&self, tid: u32) -> Option<usize> {
        let suffix = format!("({tid})");
        self.names.iter().position(|n| n.ends_with(&suffix))
    }

    /// Total ns thread `t` spent in `state`.
    pub fn state_total(&self, t: usize, state: u32) -> u64 {
        self.state_ns.get(&(t, state)).copied().unwrap_or(0)
    }
}
