//! Properties of the filter over generated patterns and methods, checked against
//! independent reference definitions written here from the grammar's prose.

use proptest::prelude::*;
use sonda_filter::{MethodFilter, MethodRef};
use sonda_shm::config::AgentConfig;

// ---- Reference semantics: naive recursive definitions, exponential but obviously right.

/// `*` matches any run of characters within a segment.
fn ref_segment(p: &[char], s: &[char]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some(('*', rest)) => (0..=s.len()).any(|k| ref_segment(rest, &s[k..])),
        Some((c, rest)) => s.first() == Some(c) && ref_segment(rest, &s[1..]),
    }
}

fn ref_segment_str(p: &str, s: &str) -> bool {
    let p: Vec<char> = p.chars().collect();
    let s: Vec<char> = s.chars().collect();
    ref_segment(&p, &s)
}

/// `**` matches zero or more segments, one or more when it ends the pattern.
fn ref_path(p: &[&str], s: &[&str]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((&"**", [])) => !s.is_empty(),
        Some((&"**", rest)) => (0..=s.len()).any(|k| ref_path(rest, &s[k..])),
        Some((g, rest)) => !s.is_empty() && ref_segment_str(g, s[0]) && ref_path(rest, &s[1..]),
    }
}

/// A dotted class pattern against an internal name; no dot: the simple name.
fn ref_class(pattern: &str, class: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let s: Vec<&str> = class.split('/').collect();
    if p.len() == 1 && p[0] != "**" {
        ref_segment_str(p[0], s.last().unwrap())
    } else {
        ref_path(&p, &s)
    }
}

/// The descriptor rule: full descriptors exactly, `(...)` any return type.
fn ref_descriptor(pattern: &str, desc: &str) -> bool {
    let pattern = pattern.replace('.', "/");
    if pattern.ends_with(')') {
        desc.starts_with(&pattern)
    } else {
        desc == pattern
    }
}

/// One pattern, by its prose definition.
fn ref_pattern(pattern: &str, m: &MethodRef<'_>) -> bool {
    let p = pattern.strip_prefix('!').unwrap_or(pattern);
    if let Some(ann) = p.strip_prefix('@') {
        return m
            .method_annotations
            .iter()
            .chain(m.class_annotations)
            .any(|a| ref_class(ann, &a[1..a.len() - 1]));
    }
    let (class, member) = match p.split_once("::") {
        Some((c, mem)) => (c, Some(mem)),
        None => (p, None),
    };
    let class_ok = class.is_empty() || ref_class(class, m.class);
    let member_ok = match member {
        None => true,
        Some(mem) => {
            let (name, desc) = match mem.find('(') {
                Some(i) => (&mem[..i], Some(&mem[i..])),
                None => (mem, None),
            };
            ref_segment_str(name, m.name) && desc.is_none_or(|d| ref_descriptor(d, m.descriptor))
        }
    };
    class_ok && member_ok
}

/// The whole filter: first matching include, unless any exclude matches.
fn ref_filter(patterns: &[String], m: &MethodRef<'_>) -> Option<usize> {
    let includes: Vec<&String> = patterns.iter().filter(|p| !p.starts_with('!')).collect();
    let excluded = patterns
        .iter()
        .filter(|p| p.starts_with('!'))
        .any(|p| ref_pattern(p, m));
    if excluded {
        return None;
    }
    includes.iter().position(|p| ref_pattern(p, m))
}

// ---- Generators over a small alphabet, so that patterns and methods often meet.

fn package_glob() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "ab", "*", "a*", "*b", "**", "*a*"]).prop_map(String::from)
}

fn class_name_glob() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["A", "B", "A$B", "A$*", "*", "*B", "**", "A*B", "*$B"])
        .prop_map(String::from)
}

fn class_glob() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(package_glob(), 0..4),
        class_name_glob(),
    )
        .prop_map(|(pkgs, cls)| {
            let mut segs = pkgs;
            segs.push(cls);
            segs.join(".")
        })
}

fn method_glob() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "get", "get*", "*", "run", "<init>", "<clinit>", "*X", "g*t*", "**",
    ])
    .prop_map(String::from)
}

fn descriptor_pattern() -> impl Strategy<Value = Option<String>> {
    prop::option::of(
        prop::sample::select(vec![
            "()V",
            "()",
            "(I)",
            "(I)V",
            "(Ljava.lang.String;)I",
            "(Ljava/lang/String;)",
        ])
        .prop_map(String::from),
    )
}

fn pattern() -> impl Strategy<Value = String> {
    let methods = (
        prop::option::of(class_glob()),
        method_glob(),
        descriptor_pattern(),
    )
        .prop_map(|(class, name, desc)| {
            format!(
                "{}::{name}{}",
                class.unwrap_or_default(),
                desc.unwrap_or_default()
            )
        });
    let form = prop_oneof![
        class_glob(),
        methods,
        class_glob().prop_map(|c| format!("@{c}")),
    ];
    (any::<bool>(), form).prop_map(|(ex, p)| if ex { format!("!{p}") } else { p })
}

fn class_name() -> impl Strategy<Value = String> {
    let pkg = prop::sample::select(vec!["a", "b", "ab", "ba"]);
    let cls = prop::sample::select(vec!["A", "B", "A$B", "AB", "Ab", "A$B$B", "XB"]);
    (prop::collection::vec(pkg, 0..4), cls).prop_map(|(pkgs, cls)| {
        let mut segs: Vec<&str> = pkgs;
        segs.push(cls);
        segs.join("/")
    })
}

fn annotations() -> impl Strategy<Value = Vec<String>> {
    let ann =
        prop::sample::select(vec!["La/A;", "Lb/B;", "LA;", "La/b/A$B;"]).prop_map(String::from);
    prop::collection::vec(ann, 0..3)
}

/// An owned method, borrowed as a `MethodRef` for each check.
#[derive(Debug, Clone)]
struct Method {
    class: String,
    name: String,
    descriptor: String,
    class_annotations: Vec<String>,
    method_annotations: Vec<String>,
}

fn method() -> impl Strategy<Value = Method> {
    let name = prop::sample::select(vec!["get", "getX", "run", "<init>", "<clinit>", "gXt", "X"]);
    let desc = prop::sample::select(vec![
        "()V",
        "(I)V",
        "(I)I",
        "(Ljava/lang/String;)I",
        "(II)V",
    ]);
    (class_name(), name, desc, annotations(), annotations()).prop_map(
        |(class, name, desc, ca, ma)| Method {
            class,
            name: name.into(),
            descriptor: desc.into(),
            class_annotations: ca,
            method_annotations: ma,
        },
    )
}

fn with_ref<R>(m: &Method, f: impl FnOnce(&MethodRef<'_>) -> R) -> R {
    let ca: Vec<&str> = m.class_annotations.iter().map(String::as_str).collect();
    let ma: Vec<&str> = m.method_annotations.iter().map(String::as_str).collect();
    f(&MethodRef {
        class: &m.class,
        name: &m.name,
        descriptor: &m.descriptor,
        class_annotations: &ca,
        method_annotations: &ma,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_never_panics_and_errors_are_one_line(patterns in prop::collection::vec(".{0,40}", 0..4)) {
        if let Err(e) = MethodFilter::parse(&patterns) {
            let msg = e.to_string();
            prop_assert!(!msg.contains('\n') && !msg.contains('\r'), "{}", msg);
            prop_assert!(msg.starts_with("invalid method filter `"), "{}", msg);
        }
    }

    #[test]
    fn parse_never_panics_on_grammar_characters(
        patterns in prop::collection::vec("[a-c.*:!@$()<>;/LIV\\[ ]{0,24}", 0..4),
        m in method(),
    ) {
        if let Ok(f) = MethodFilter::parse(&patterns) {
            // Whatever parsed must also match without panicking.
            with_ref(&m, |r| { let _ = f.matches(r); });
            let _ = f.class_may_match(&m.class, &[]);
        }
    }

    #[test]
    fn generated_patterns_parse(patterns in prop::collection::vec(pattern(), 1..6)) {
        let f = MethodFilter::parse(&patterns);
        prop_assert!(f.is_ok(), "{:?}: {}", patterns, f.unwrap_err());
    }

    #[test]
    fn matches_agrees_with_the_reference(patterns in prop::collection::vec(pattern(), 1..6), m in method()) {
        let f = MethodFilter::parse(&patterns).unwrap();
        let got = with_ref(&m, |r| f.matches(r));
        let want = with_ref(&m, |r| ref_filter(&patterns, r));
        prop_assert_eq!(got, want, "{:?} on {:?}", patterns, m);
    }

    #[test]
    fn class_pre_check_is_a_sound_over_approximation(
        patterns in prop::collection::vec(pattern(), 1..6),
        m in method(),
    ) {
        let f = MethodFilter::parse(&patterns).unwrap();
        let ca: Vec<&str> = m.class_annotations.iter().map(String::as_str).collect();
        if with_ref(&m, |r| f.matches(r)).is_some() {
            prop_assert!(f.class_may_match(&m.class, &ca), "{:?} on {:?}", patterns, m);
        }
    }

    #[test]
    fn class_pre_check_is_exact_for_class_only_includes(
        pattern in class_glob(),
        class in class_name(),
    ) {
        // With one `pkg.Class` include, the pre-check says exactly whether the class matches.
        let f = MethodFilter::parse(&[&pattern]).unwrap();
        prop_assert_eq!(f.class_may_match(&class, &[]), ref_class(&pattern, &class));
    }

    #[test]
    fn order_of_patterns_only_changes_the_index(
        patterns in prop::collection::vec(pattern(), 1..6),
        m in method(),
        seed in any::<u64>(),
    ) {
        let mut shuffled = patterns.clone();
        // A deterministic shuffle driven by the generated seed.
        let mut s = seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let a = MethodFilter::parse(&patterns).unwrap();
        let b = MethodFilter::parse(&shuffled).unwrap();
        let (ra, rb) = with_ref(&m, |r| (a.matches(r), b.matches(r)));
        prop_assert_eq!(ra.is_some(), rb.is_some());
        if let (Some(i), Some(j)) = (ra, rb) {
            // Both name an include that matches on its own.
            let alone = |p: &str| with_ref(&m, |r| MethodFilter::parse(&[p]).unwrap().matches(r).is_some());
            prop_assert!(alone(&a.includes()[i]));
            prop_assert!(alone(&b.includes()[j]));
        }
    }

    #[test]
    fn config_lines_round_trip(patterns in prop::collection::vec(pattern(), 0..6), m in method()) {
        let f = MethodFilter::parse(&patterns).unwrap();
        // Through the agent's configuration text (`sonda_shm::config`), as the agent gets it.
        let text = AgentConfig { methods: f.patterns().to_vec(), ..AgentConfig::default() }.encode().unwrap();
        let back = MethodFilter::parse(&AgentConfig::decode(&text).unwrap().methods).unwrap();
        prop_assert_eq!(back.patterns(), f.patterns());
        prop_assert_eq!(back.includes(), f.includes());
        prop_assert_eq!(with_ref(&m, |r| back.matches(r)), with_ref(&m, |r| f.matches(r)));
    }
}
