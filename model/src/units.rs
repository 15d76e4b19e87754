//! Units of work: the traced calls that make up one request, summed into one unit by
//! the thread and the outermost call, and classes of units by what they contain.
//!
//! A unit is an outermost traced call (depth 1) with every traced call nested in it on
//! its thread: its parts are the outermost call's inclusive ones (which hold the nested
//! calls' time already), and what it contains is the set of the other traced methods
//! called inside it. Two units are of one class when their outermost method and that
//! set are the same: a `checkout` that called `pay` and one that did not are different
//! work and get a class each, which per-method figures would mix. Nested calls whose
//! outermost call was not selected (a filter that named only inner methods) belong to
//! no unit.
//!
//! Grouping is by thread and outermost call only, not by a shared object: the agent
//! records method ids, not receivers. Work that one thread does in one call is one
//! unit (a blocking TLS server's `serve(socket)`: one connection). Work a non-blocking
//! server spreads over several calls, perhaps on several threads (Tomcat's NIO
//! connector runs a TLS handshake as one `SocketProcessor::doRun` per network round
//! trip), is several units, one per leg; a rule ([`ClassRule`]) that names the leg
//! holding the decisive call (JSSE's server-certificate producer runs in the leg that
//! consumed the ClientHello, once per full handshake) still counts the handshakes
//! exactly, and the other legs get classes of their own.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use sonda_filter::SegGlob;
use sonda_trace::Tid;

use crate::join::CallRecord;

/// One class of units.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitClass {
    /// The user's name for it (`--unit-class`), when a rule gave it one.
    pub label: Option<String>,
    /// The outermost call's method (of a labelled class: of its first unit).
    pub outer: String,
    /// The other traced methods called inside, sorted (empty: none; of a labelled
    /// class: those of any of its units).
    pub contains: Vec<String>,
    /// Units of this class.
    pub units: u64,
    /// Mean wall time of a unit (s).
    pub wall_mean_s: f64,
    /// Mean time on a CPU (steal included, s).
    pub cpu_mean_s: f64,
    /// Mean time waiting for a CPU (s).
    pub runnable_mean_s: f64,
    /// Mean blocked time (`S + D`, s).
    pub blocked_mean_s: f64,
    /// 95th percentiles (nearest rank) of the same four, s.
    pub wall_p95_s: f64,
    /// See `wall_p95_s`.
    pub cpu_p95_s: f64,
    /// See `wall_p95_s`.
    pub runnable_p95_s: f64,
    /// See `wall_p95_s`.
    pub blocked_p95_s: f64,
    /// Mean CPU visits (blocked phases + 1).
    pub visits_mean: f64,
}

impl UnitClass {
    /// Its name: the user's label, else the outermost method with what it contains in
    /// brackets.
    pub fn name(&self) -> String {
        if let Some(l) = &self.label {
            l.clone()
        } else if self.contains.is_empty() {
            self.outer.clone()
        } else {
            format!("{} [{}]", self.outer, self.contains.join(", "))
        }
    }
}

/// A method pattern of a [`ClassRule`]: `*` stands for any run of characters. It
/// matches a method's label (`package.Class::method`) whole, or the label without its
/// package (`Class$Inner::method`), so that rules stay short.
#[derive(Clone, Debug, PartialEq)]
struct Glob(SegGlob);

impl Glob {
    fn matches(&self, label: &str) -> bool {
        if self.0.matches(label) {
            return true;
        }
        let class_end = label.find("::").unwrap_or(label.len());
        match label[..class_end].rfind('.') {
            Some(dot) => self.0.matches(&label[dot + 1..]),
            None => false,
        }
    }
}

/// A user's rule naming a class of units (`sonda services --unit-class`):
/// `LABEL=OUTER [+INSIDE]... [!INSIDE]...`. A unit whose outermost method matches
/// OUTER, that contains a method matching each `+` pattern and none matching a `!`
/// pattern, belongs to the class LABEL. Why: the classes by content are exact but
/// their names are lists of JSSE inner classes, and one kind of work (a full TLS
/// handshake) may show as several content sets (with or without a method that only
/// some of them call); a rule names the kind by what decides it (the server
/// certificate was produced) and merges the rest. Rules are tried in order, the first
/// that matches wins; several rules may give one label; units no rule matches keep
/// their class by content.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassRule {
    label: String,
    outer: Glob,
    require: Vec<Glob>,
    forbid: Vec<Glob>,
}

impl ClassRule {
    /// Parses `LABEL=OUTER [+INSIDE]... [!INSIDE]...`; the error says what is wrong.
    pub fn parse(rule: &str) -> Result<ClassRule, String> {
        let (label, rest) = rule.split_once('=').ok_or_else(|| {
            format!("--unit-class {rule:?}: expected LABEL=OUTER [+INSIDE]... [!INSIDE]...")
        })?;
        let label = label.trim();
        if label.is_empty() {
            return Err(format!("--unit-class {rule:?}: the label is empty"));
        }
        let mut words = rest.split_whitespace();
        let outer = words
            .next()
            .filter(|w| !w.starts_with(['+', '!']))
            .ok_or_else(|| {
                format!("--unit-class {rule:?}: no outermost method pattern after '='")
            })?;
        let mut r = ClassRule {
            label: label.to_string(),
            outer: Glob(SegGlob::new(outer)),
            require: Vec::new(),
            forbid: Vec::new(),
        };
        for w in words {
            let (list, p) = if let Some(p) = w.strip_prefix('+') {
                (&mut r.require, p)
            } else if let Some(p) = w.strip_prefix('!') {
                (&mut r.forbid, p)
            } else {
                return Err(format!(
                    "--unit-class {rule:?}: {w:?} must start with '+' (contains) or '!' (does not contain)"
                ));
            };
            if p.is_empty() {
                return Err(format!("--unit-class {rule:?}: empty pattern after {w:?}"));
            }
            list.push(Glob(SegGlob::new(p)));
        }
        Ok(r)
    }

    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn matches(&self, outer: &str, inside: &[&str]) -> bool {
        self.outer.matches(outer)
            && self
                .require
                .iter()
                .all(|g| inside.iter().any(|m| g.matches(m)))
            && !self
                .forbid
                .iter()
                .any(|g| inside.iter().any(|m| g.matches(m)))
    }
}

/// The 95th percentile, nearest rank, of `v` (sorted here); 0 when empty.
fn p95(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable_by(f64::total_cmp);
    let rank = ((v.len() as f64) * 0.95).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The classes of units in `calls` (label, calls of that method), the most frequent
/// first (ties by name), labelled and merged by `rules`.
pub fn unit_classes(calls: &[(&str, &[CallRecord])], rules: &[ClassRule]) -> Vec<UnitClass> {
    // Outermost calls per thread, by their start: (begin, end, label index, call).
    let mut outer: FxHashMap<Tid, Vec<(u64, u64, usize, &CallRecord)>> = FxHashMap::default();
    for (i, (_, list)) in calls.iter().enumerate() {
        for c in list.iter().filter(|c| c.depth == 1) {
            outer
                .entry(c.tid)
                .or_default()
                .push((c.begin.0, c.end.0, i, c));
        }
    }
    for v in outer.values_mut() {
        v.sort_unstable_by_key(|o| o.0);
    }
    // What each unit contains, by (thread, index in its thread's list).
    let mut contains: FxHashMap<(Tid, usize), Vec<usize>> = FxHashMap::default();
    for (i, (_, list)) in calls.iter().enumerate() {
        for c in list.iter().filter(|c| c.depth > 1) {
            let Some(units) = outer.get(&c.tid) else {
                continue;
            };
            // The last unit that began at or before this call, if it holds it.
            let k = units.partition_point(|o| o.0 <= c.begin.0);
            if k == 0 {
                continue;
            }
            let (_, end, outer_ix, _) = units[k - 1];
            if c.end.0 <= end && outer_ix != i {
                let set = contains.entry((c.tid, k - 1)).or_default();
                if !set.contains(&i) {
                    set.push(i);
                }
            }
        }
    }
    #[derive(Default)]
    struct Sum {
        outer: usize,
        inside: Vec<usize>,
        units: u64,
        wall: Vec<f64>,
        cpu: Vec<f64>,
        runnable: Vec<f64>,
        blocked: Vec<f64>,
        visits: f64,
    }
    /// A class's key: a rule's label, or the content (outer, inside).
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Label(String),
        Content(usize, Vec<usize>),
    }
    let mut classes: BTreeMap<Key, Sum> = BTreeMap::new();
    // Threads in tid order: a labelled class's first unit is then the same every run.
    let mut threads: Vec<_> = outer.iter().collect();
    threads.sort_unstable_by_key(|(t, _)| t.0);
    for (tid, units) in threads {
        for (k, &(_, _, outer_ix, c)) in units.iter().enumerate() {
            let mut inside = contains.get(&(*tid, k)).cloned().unwrap_or_default();
            inside.sort_unstable();
            let rule = if rules.is_empty() {
                None
            } else {
                let names: Vec<&str> = inside.iter().map(|&i| calls[i].0).collect();
                rules.iter().find(|r| r.matches(calls[outer_ix].0, &names))
            };
            let key = match rule {
                Some(r) => Key::Label(r.label.clone()),
                None => Key::Content(outer_ix, inside.clone()),
            };
            let s = classes.entry(key).or_insert_with(|| Sum {
                outer: outer_ix,
                ..Sum::default()
            });
            for i in inside {
                if !s.inside.contains(&i) {
                    s.inside.push(i);
                }
            }
            let p = &c.inclusive;
            s.units += 1;
            s.wall.push(p.wall as f64);
            s.cpu.push(p.on_cpu() as f64);
            s.runnable.push(p.runnable as f64);
            s.blocked.push(p.blocked() as f64);
            s.visits += f64::from(c.blocked_phases) + 1.0;
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64 / 1e9;
    let mut out: Vec<UnitClass> = classes
        .into_iter()
        .map(|(key, mut s)| {
            let n = s.units as f64;
            let mut names: Vec<String> = s.inside.iter().map(|&i| calls[i].0.to_string()).collect();
            names.sort();
            UnitClass {
                label: match key {
                    Key::Label(l) => Some(l),
                    Key::Content(..) => None,
                },
                outer: calls[s.outer].0.to_string(),
                contains: names,
                units: s.units,
                wall_mean_s: mean(&s.wall),
                cpu_mean_s: mean(&s.cpu),
                runnable_mean_s: mean(&s.runnable),
                blocked_mean_s: mean(&s.blocked),
                wall_p95_s: p95(&mut s.wall) / 1e9,
                cpu_p95_s: p95(&mut s.cpu) / 1e9,
                runnable_p95_s: p95(&mut s.runnable) / 1e9,
                blocked_p95_s: p95(&mut s.blocked) / 1e9,
                visits_mean: s.visits / n,
            }
        })
        .collect();
    out.sort_by(|a, b| b.units.cmp(&a.units).then_with(|| a.name().cmp(&b.name())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parts::Parts;
    use sonda_timeline::{ExitKind, Frame, ThreadIx};
    use sonda_trace::{Pid, Time};

    fn call(tid: u32, depth: usize, begin: u64, end: u64, cpu: u64, phases: u32) -> CallRecord {
        let parts = Parts {
            wall: end - begin,
            cpu,
            sleeping: end - begin - cpu,
            ..Parts::default()
        };
        CallRecord {
            frame: Frame::Method(0),
            thread: ThreadIx(0),
            tid: Tid(tid),
            pid: Pid(1),
            begin: Time(begin),
            end: Time(end),
            depth,
            kind: ExitKind::Normal,
            inclusive: parts,
            exclusive: parts,
            blocked_phases: phases,
            first_visit_ns: cpu,
        }
    }

    /// Two checkouts on thread 1, one of which paid; a browse on thread 2 at the same
    /// time as the paying one (a call of another thread is not inside it); a `pay`
    /// outside any selected outermost call.
    #[test]
    fn units_are_classed_by_what_they_contain() {
        let checkout = [call(1, 1, 100, 200, 40, 1), call(1, 1, 300, 500, 80, 2)];
        let pay = [
            call(1, 2, 320, 400, 20, 0),
            call(1, 2, 410, 420, 5, 0),
            call(3, 2, 0, 10, 5, 0),
        ];
        let browse = [call(2, 1, 330, 390, 60, 0)];
        let calls: Vec<(&str, &[CallRecord])> = vec![
            ("Shop::checkout", &checkout),
            ("Shop::pay", &pay),
            ("Shop::browse", &browse),
        ];
        let u = unit_classes(&calls, &[]);
        let names: Vec<String> = u.iter().map(UnitClass::name).collect();
        assert_eq!(
            names,
            [
                "Shop::browse",
                "Shop::checkout",
                "Shop::checkout [Shop::pay]"
            ]
        );
        let paid = &u[2];
        assert_eq!(paid.units, 1);
        assert_eq!(paid.wall_mean_s, 200e-9);
        assert_eq!(paid.cpu_mean_s, 80e-9);
        assert_eq!(paid.blocked_mean_s, 120e-9);
        assert_eq!(paid.visits_mean, 3.0);
        assert_eq!(u[1].visits_mean, 2.0);
        assert!(unit_classes(&[], &[]).is_empty());
    }

    /// Rules name classes by what decides them and merge the content sets they cover;
    /// the first matching rule wins; units no rule takes keep their class by content.
    #[test]
    fn rules_label_and_merge_classes() {
        let serve = [
            call(1, 1, 100, 200, 40, 0),
            call(1, 1, 300, 400, 10, 0),
            call(1, 1, 500, 600, 20, 0),
            call(1, 1, 700, 800, 30, 0),
        ];
        let hello = [
            call(1, 2, 110, 190, 30, 0),
            call(1, 2, 310, 390, 5, 0),
            call(1, 2, 510, 590, 5, 0),
        ];
        let cert = [call(1, 3, 120, 130, 10, 0)];
        let ticket = [call(1, 3, 520, 530, 1, 0)];
        let calls: Vec<(&str, &[CallRecord])> = vec![
            ("a.b.Server::serve", &serve),
            ("sun.ssl.ClientHello$Consumer::consume", &hello),
            (
                "sun.ssl.CertificateMessage$T12CertificateProducer::produce",
                &cert,
            ),
            ("sun.ssl.Ticket::produce", &ticket),
        ];
        let rules = [
            ClassRule::parse("full handshake=Server::serve +*CertificateProducer::produce")
                .unwrap(),
            ClassRule::parse(
                "resumed = a.b.Server::serve +ClientHello$Consumer::consume !*Certificate*",
            )
            .unwrap(),
        ];
        let u = unit_classes(&calls, &rules);
        let got: Vec<(String, u64)> = u.iter().map(|c| (c.name(), c.units)).collect();
        assert_eq!(
            got,
            [
                ("resumed".to_string(), 2),
                ("a.b.Server::serve".to_string(), 1),
                ("full handshake".to_string(), 1),
            ]
        );
        // The two resumed units had different content (one produced a ticket).
        assert_eq!(u[0].contains.len(), 2);
        assert_eq!(u[0].cpu_mean_s, 15e-9);
        assert_eq!(u[0].cpu_p95_s, 20e-9);
        assert_eq!(u[2].label.as_deref(), Some("full handshake"));
    }

    #[test]
    fn rule_syntax() {
        for bad in [
            "serve",
            "=serve",
            "x=",
            "x=+a",
            "x=serve a",
            "x=serve +",
            "x=serve !",
        ] {
            assert!(ClassRule::parse(bad).is_err(), "{bad}");
        }
        let glob = |p: &str, s: &str| SegGlob::new(p).matches(s);
        assert!(glob("*Producer::produce", "a.B$T12Producer::produce"));
        assert!(glob("a*c*", "abcd"));
        assert!(!glob("a*c", "abcd"));
        assert!(Glob(SegGlob::new("B$T::m")).matches("x.y.B$T::m"));
        assert!(!Glob(SegGlob::new("y.B$T::m")).matches("x.y.B$T::m"));
        assert!(!Glob(SegGlob::new("T::m")).matches("x.y.B$T::m"));
    }
}
