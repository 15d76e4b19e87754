//! Every form of the grammar, through the public API, as the agent and the CLI use it.

use sonda_filter::{FilterErrorKind, MethodFilter, MethodRef, Part};
use sonda_shm::config::AgentConfig;

fn filter(patterns: &[&str]) -> MethodFilter {
    MethodFilter::parse(patterns).unwrap_or_else(|e| panic!("{e}"))
}

fn m<'a>(class: &'a str, name: &'a str, descriptor: &'a str) -> MethodRef<'a> {
    MethodRef {
        class,
        name,
        descriptor,
        class_annotations: &[],
        method_annotations: &[],
    }
}

/// Which of the given methods (class, name, descriptor) the filter selects, and with
/// which include; also checks the per-class pre-check agrees wherever a method matches.
fn selected(f: &MethodFilter, class: &str, name: &str, desc: &str) -> Option<usize> {
    let r = f.matches(&m(class, name, desc));
    if r.is_some() {
        assert!(
            f.class_may_match(class, &[]),
            "pre-check refused {class} which matches"
        );
    }
    r
}

#[test]
fn class_selects_every_method_of_that_class_only() {
    let f = filter(&["java.util.HashMap"]);
    assert_eq!(
        selected(
            &f,
            "java/util/HashMap",
            "put",
            "(Ljava/lang/Object;Ljava/lang/Object;)Ljava/lang/Object;"
        ),
        Some(0)
    );
    assert_eq!(selected(&f, "java/util/HashMap", "<init>", "()V"), Some(0));
    assert_eq!(
        selected(&f, "java/util/HashMap", "<clinit>", "()V"),
        Some(0)
    );
    assert_eq!(
        selected(
            &f,
            "java/util/HashMap$Node",
            "getKey",
            "()Ljava/lang/Object;"
        ),
        None
    );
    assert_eq!(selected(&f, "java/util/HashMapX", "put", "()V"), None);
    assert_eq!(
        selected(&f, "java/util/concurrent/HashMap", "put", "()V"),
        None
    );
    assert_eq!(selected(&f, "HashMap", "put", "()V"), None);
    assert!(f.class_may_match("java/util/HashMap", &[]));
    assert!(!f.class_may_match("java/util/TreeMap", &[]));
}

#[test]
fn class_and_method_selects_all_overloads() {
    let f = filter(&["java.lang.String::valueOf"]);
    assert_eq!(
        selected(&f, "java/lang/String", "valueOf", "(I)Ljava/lang/String;"),
        Some(0)
    );
    assert_eq!(
        selected(
            &f,
            "java/lang/String",
            "valueOf",
            "(Ljava/lang/Object;)Ljava/lang/String;"
        ),
        Some(0)
    );
    assert_eq!(selected(&f, "java/lang/String", "length", "()I"), None);
    assert_eq!(
        selected(&f, "java/lang/Integer", "valueOf", "(I)Ljava/lang/Integer;"),
        None
    );
}

#[test]
fn method_in_any_class() {
    let f = filter(&["::service"]);
    assert_eq!(
        selected(&f, "jakarta/servlet/http/HttpServlet", "service", "()V"),
        Some(0)
    );
    assert_eq!(selected(&f, "Main", "service", "()V"), Some(0));
    assert_eq!(selected(&f, "Main", "serve", "()V"), None);
    assert!(f.class_may_match("any/Class", &[]));
}

#[test]
fn annotation_on_method_or_class() {
    let f = filter(&["@jakarta.ws.rs.GET"]);
    let class_ann = ["Ljakarta/ws/rs/GET;"];
    let other = ["Ljakarta/ws/rs/POST;"];
    let on_method = MethodRef {
        method_annotations: &class_ann,
        ..m("app/Resource", "list", "()Ljava/util/List;")
    };
    assert_eq!(f.matches(&on_method), Some(0));
    let on_class = MethodRef {
        class_annotations: &class_ann,
        ..m("app/Resource", "helper", "()V")
    };
    assert_eq!(f.matches(&on_class), Some(0));
    let neither = MethodRef {
        class_annotations: &other,
        method_annotations: &other,
        ..m("app/Resource", "create", "()V")
    };
    assert_eq!(f.matches(&neither), None);
    assert_eq!(f.matches(&m("app/Resource", "list", "()V")), None);
    // Method annotations are unknown before the class is parsed: any class may match.
    assert!(f.class_may_match("app/Other", &[]));
    assert!(f.uses_annotations());
}

#[test]
fn annotation_patterns_use_the_class_name_globs() {
    let ann = ["Ljakarta/ws/rs/Path;"];
    let meth = MethodRef {
        method_annotations: &ann,
        ..m("app/R", "get", "()V")
    };
    for p in [
        "@Path",
        "@jakarta.ws.rs.*",
        "@jakarta.**",
        "@*ath",
        "@**.Path",
    ] {
        assert_eq!(filter(&[p]).matches(&meth), Some(0), "{p}");
    }
    for p in [
        "@javax.ws.rs.Path",
        "@jakarta.*",
        "@Pat",
        "@jakarta.ws.Path",
    ] {
        assert_eq!(filter(&[p]).matches(&meth), None, "{p}");
    }
    // A bare internal name (no L...;) is accepted too.
    let bare = ["jakarta/ws/rs/Path"];
    let meth = MethodRef {
        method_annotations: &bare,
        ..m("app/R", "get", "()V")
    };
    assert_eq!(filter(&["@jakarta.ws.rs.Path"]).matches(&meth), Some(0));
}

#[test]
fn star_stays_within_a_package_segment() {
    let f = filter(&["org.apache.catalina.*::invoke"]);
    assert_eq!(
        selected(&f, "org/apache/catalina/Valve", "invoke", "()V"),
        Some(0)
    );
    assert_eq!(
        selected(
            &f,
            "org/apache/catalina/core/StandardEngineValve",
            "invoke",
            "()V"
        ),
        None
    );
    assert_eq!(
        selected(&f, "org/apache/catalina/Valve", "invoke2", "()V"),
        None
    );
    assert!(!f.class_may_match("org/apache/catalina/core/StandardEngineValve", &[]));
}

#[test]
fn double_star_crosses_segments() {
    let f = filter(&["org.apache.**"]);
    assert_eq!(selected(&f, "org/apache/Foo", "x", "()V"), Some(0));
    assert_eq!(
        selected(
            &f,
            "org/apache/catalina/core/StandardEngineValve",
            "invoke",
            "()V"
        ),
        Some(0)
    );
    assert_eq!(
        selected(&f, "org/apache", "x", "()V"),
        None,
        "pkg.** is classes inside pkg"
    );
    assert_eq!(selected(&f, "org/apachex/Foo", "x", "()V"), None);
    let f = filter(&["**.Main::main"]);
    assert_eq!(
        selected(&f, "Main", "main", "([Ljava/lang/String;)V"),
        Some(0)
    );
    assert_eq!(
        selected(&f, "a/b/Main", "main", "([Ljava/lang/String;)V"),
        Some(0)
    );
    let f = filter(&["org.**.core.*Valve::invoke"]);
    assert_eq!(
        selected(
            &f,
            "org/apache/catalina/core/StandardEngineValve",
            "invoke",
            "()V"
        ),
        Some(0)
    );
    assert_eq!(selected(&f, "org/core/AValve", "invoke", "()V"), Some(0));
    assert_eq!(
        selected(
            &f,
            "org/apache/catalina/core/x/StandardEngineValve",
            "invoke",
            "()V"
        ),
        None
    );
}

#[test]
fn class_without_dot_matches_simple_name_in_any_package() {
    let f = filter(&["*Servlet::service"]);
    assert_eq!(
        selected(&f, "jakarta/servlet/http/HttpServlet", "service", "()V"),
        Some(0)
    );
    assert_eq!(selected(&f, "MyServlet", "service", "()V"), Some(0));
    assert_eq!(
        selected(
            &f,
            "jakarta/servlet/http/HttpServletRequest",
            "service",
            "()V"
        ),
        None
    );
    let f = filter(&["HashMap"]);
    assert_eq!(selected(&f, "java/util/HashMap", "get", "()V"), Some(0));
    assert_eq!(selected(&f, "com/example/HashMap", "get", "()V"), Some(0));
    assert_eq!(selected(&f, "java/util/LinkedHashMap", "get", "()V"), None);
}

#[test]
fn wildcards_in_method_names() {
    let f = filter(&["app.Bean::get*"]);
    assert_eq!(selected(&f, "app/Bean", "get", "()V"), Some(0));
    assert_eq!(
        selected(&f, "app/Bean", "getName", "()Ljava/lang/String;"),
        Some(0)
    );
    assert_eq!(
        selected(&f, "app/Bean", "setName", "(Ljava/lang/String;)V"),
        None
    );
    let f = filter(&["app.Bean::*Name"]);
    assert_eq!(
        selected(&f, "app/Bean", "setName", "(Ljava/lang/String;)V"),
        Some(0)
    );
    let f = filter(&["app.Bean::*"]);
    assert_eq!(selected(&f, "app/Bean", "<init>", "()V"), Some(0));
    let f = filter(&["app.Bean::get**"]);
    assert_eq!(selected(&f, "app/Bean", "getX", "()V"), Some(0));
}

#[test]
fn nested_classes() {
    let f = filter(&["java.util.HashMap$Node"]);
    assert_eq!(
        selected(&f, "java/util/HashMap$Node", "getKey", "()V"),
        Some(0)
    );
    assert_eq!(selected(&f, "java/util/HashMap", "getKey", "()V"), None);
    assert_eq!(
        selected(&f, "java/util/HashMap$TreeNode", "getKey", "()V"),
        None
    );
    let f = filter(&["Outer$*"]);
    assert_eq!(selected(&f, "a/b/Outer$Inner", "run", "()V"), Some(0));
    assert_eq!(
        selected(&f, "a/b/Outer$Inner$Deeper", "run", "()V"),
        Some(0)
    );
    assert_eq!(selected(&f, "a/b/Outer", "run", "()V"), None);
    // `*` crosses `$` within a segment.
    let f = filter(&["java.util.Hash*"]);
    assert_eq!(
        selected(&f, "java/util/HashMap$Node", "getKey", "()V"),
        Some(0)
    );
}

#[test]
fn default_package() {
    let f = filter(&["Main::main"]);
    assert_eq!(
        selected(&f, "Main", "main", "([Ljava/lang/String;)V"),
        Some(0)
    );
    assert_eq!(
        selected(&f, "app/Main", "main", "([Ljava/lang/String;)V"),
        Some(0)
    );
    let f = filter(&["Main$Worker::run"]);
    assert_eq!(selected(&f, "Main$Worker", "run", "()V"), Some(0));
}

#[test]
fn descriptors_pick_overloads() {
    let f = filter(&["app.Svc::handle(Ljava/lang/String;I)V"]);
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;I)V"),
        Some(0)
    );
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;)V"),
        None
    );
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;I)I"),
        None
    );
    let f = filter(&["app.Svc::handle(Ljava/lang/String;I)"]);
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;I)V"),
        Some(0)
    );
    assert_eq!(
        selected(
            &f,
            "app/Svc",
            "handle",
            "(Ljava/lang/String;I)Ljava/lang/Object;"
        ),
        Some(0)
    );
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;II)V"),
        None
    );
    let f = filter(&["app.Svc::handle(Ljava.lang.String;I)V"]);
    assert_eq!(
        selected(&f, "app/Svc", "handle", "(Ljava/lang/String;I)V"),
        Some(0)
    );
    let f = filter(&["::<init>()"]);
    assert_eq!(selected(&f, "a/B", "<init>", "()V"), Some(0));
    assert_eq!(selected(&f, "a/B", "<init>", "(I)V"), None);
    let f = filter(&["app.Svc::*(I)V"]);
    assert_eq!(selected(&f, "app/Svc", "any", "(I)V"), Some(0));
    assert_eq!(selected(&f, "app/Svc", "any", "(J)V"), None);
}

#[test]
fn constructors_and_static_initialisers() {
    let f = filter(&["app.Svc::<init>", "::<clinit>"]);
    assert_eq!(selected(&f, "app/Svc", "<init>", "(I)V"), Some(0));
    assert_eq!(selected(&f, "app/Svc", "<clinit>", "()V"), Some(1));
    assert_eq!(selected(&f, "other/X", "<clinit>", "()V"), Some(1));
    assert_eq!(selected(&f, "other/X", "<init>", "()V"), None);
    assert_eq!(selected(&f, "app/Svc", "init", "()V"), None);
}

#[test]
fn exclusions_apply_whatever_the_order() {
    let cases: [&[&str]; 3] = [
        &["app.**", "!app.internal.**", "!::toString"],
        &["!app.internal.**", "app.**", "!::toString"],
        &["!::toString", "!app.internal.**", "app.**"],
    ];
    for patterns in cases {
        let f = filter(patterns);
        assert_eq!(f.includes(), ["app.**"]);
        assert_eq!(
            selected(&f, "app/Svc", "run", "()V"),
            Some(0),
            "{patterns:?}"
        );
        assert_eq!(
            selected(&f, "app/Svc", "toString", "()Ljava/lang/String;"),
            None
        );
        assert_eq!(selected(&f, "app/internal/Cache", "get", "()V"), None);
        assert!(!f.class_may_match("app/internal/Cache", &[]));
        assert!(
            f.class_may_match("app/Svc", &[]),
            "a method exclusion keeps the class"
        );
    }
}

#[test]
fn exclusion_of_an_annotation() {
    let f = filter(&["app.**", "!@Deprecated"]);
    let dep = ["Ljava/lang/Deprecated;"];
    let on_method = MethodRef {
        method_annotations: &dep,
        ..m("app/Svc", "old", "()V")
    };
    assert_eq!(f.matches(&on_method), None);
    assert_eq!(f.matches(&m("app/Svc", "new", "()V")), Some(0));
    // On the class, every method goes, and the pre-check knows it.
    assert!(!f.class_may_match("app/Svc", &dep));
    assert!(f.class_may_match("app/Svc", &[]));
    let on_class = MethodRef {
        class_annotations: &dep,
        ..m("app/Svc", "new", "()V")
    };
    assert_eq!(f.matches(&on_class), None);
}

#[test]
fn whole_class_exclusions_seen_by_the_pre_check() {
    for ex in ["!app.Svc", "!app.Svc::*", "!Svc", "!app.*", "!::*"] {
        let f = filter(&["app.**", ex]);
        assert!(!f.class_may_match("app/Svc", &[]), "{ex}");
        assert_eq!(f.matches(&m("app/Svc", "run", "()V")), None, "{ex}");
    }
    for ex in ["!app.Svc::run", "!app.Svc::*(I)V", "!::run", "!app.Other"] {
        let f = filter(&["app.**", ex]);
        assert!(f.class_may_match("app/Svc", &[]), "{ex}");
    }
}

#[test]
fn the_first_matching_include_is_reported() {
    let f = filter(&["::nothing", "!x.Y", "app.Svc::run", "app.**"]);
    assert_eq!(f.includes(), ["::nothing", "app.Svc::run", "app.**"]);
    assert_eq!(
        f.patterns(),
        ["::nothing", "!x.Y", "app.Svc::run", "app.**"]
    );
    assert_eq!(selected(&f, "app/Svc", "run", "()V"), Some(1));
    assert_eq!(selected(&f, "app/Svc", "stop", "()V"), Some(2));
    assert_eq!(selected(&f, "other/Svc", "stop", "()V"), None);
}

#[test]
fn whitespace_around_patterns_is_trimmed() {
    let f = filter(&["  app.Svc::run\t", "\n!app.Svc::stop "]);
    assert_eq!(f.includes(), ["app.Svc::run"]);
    assert_eq!(f.patterns(), ["app.Svc::run", "!app.Svc::stop"]);
    assert_eq!(selected(&f, "app/Svc", "run", "()V"), Some(0));
}

#[test]
fn empty_filters() {
    let none: [&str; 0] = [];
    let f = filter(&none);
    assert!(f.is_empty());
    assert_eq!(f.matches(&m("a/B", "c", "()V")), None);
    assert!(!f.class_may_match("a/B", &[]));
    let f = filter(&["!a.B"]);
    assert!(f.is_empty());
    assert!(!f.class_may_match("a/C", &[]));
    assert!(!filter(&["a.B"]).is_empty());
    assert!(!filter(&["a.B"]).uses_annotations());
}

#[test]
fn errors_name_the_pattern_and_the_problem() {
    use FilterErrorKind::*;
    let cases: &[(&str, FilterErrorKind)] = &[
        ("", Empty),
        ("   ", Empty),
        ("!", LoneBang),
        ("!!a.B", DoubleBang),
        ("a.B ::run", Whitespace),
        ("! a.B", Whitespace),
        ("::", MissingMethodName),
        ("a.B::", MissingMethodName),
        ("::(I)V", MissingMethodName),
        ("a.B::run::x", RepeatedSeparator),
        ("@", MissingAnnotationName),
        ("!@", MissingAnnotationName),
        ("@a.B::run", AnnotationWithMember),
        ("@a.B(I)V", AnnotationWithMember),
        ("a.B(I)V", DescriptorWithoutMethod),
        ("a.B::run(I", UnbalancedDescriptor),
        ("a.B::run(I))V", UnbalancedDescriptor),
        ("a.B::run)V", UnbalancedDescriptor),
        ("a.B)::run", UnbalancedDescriptor),
        ("a.B::run((I)V", UnbalancedDescriptor),
        (
            "a.B::run(Q)V",
            BadDescriptorType {
                found: "'Q'".into(),
            },
        ),
        ("a.B::run(Ljava/lang/String)V", BadClassType),
        ("a.B::run(V)V", VoidNotAllowed),
        ("a.B::run(I)VV", TrailingAfterReturn),
        ("a.B::run(*)V", WildcardInDescriptor),
        ("a..B", EmptySegment),
        (".B", EmptySegment),
        ("a.B.", EmptySegment),
        ("a.B.::run", EmptySegment),
        ("org.**Servlet", DoubleStarInSegment),
        ("a.***", TooManyStars),
        ("java/util/HashMap", SlashInClassName),
        ("a.B::a.b", DotInMethodName),
        ("a.B::<ini>", BadSpecialName),
        ("a.B::<init>x", BadSpecialName),
        ("a.B::<*>", BadSpecialName),
        (
            "<init>",
            IllegalChar {
                ch: '<',
                part: Part::Class,
            },
        ),
        (
            "a.B:run",
            IllegalChar {
                ch: ':',
                part: Part::Class,
            },
        ),
        (
            "a.B::ru;n",
            IllegalChar {
                ch: ';',
                part: Part::Method,
            },
        ),
        (
            "a.B::ru/n",
            IllegalChar {
                ch: '/',
                part: Part::Method,
            },
        ),
        (
            "a.B?",
            IllegalChar {
                ch: '?',
                part: Part::Class,
            },
        ),
        (
            "a.B!",
            IllegalChar {
                ch: '!',
                part: Part::Class,
            },
        ),
        (
            "a@B",
            IllegalChar {
                ch: '@',
                part: Part::Class,
            },
        ),
        (
            "@a.B?",
            IllegalChar {
                ch: '?',
                part: Part::Annotation,
            },
        ),
        (
            "a.B::run(La<b;)V",
            IllegalChar {
                ch: '<',
                part: Part::Descriptor,
            },
        ),
    ];
    for (pattern, kind) in cases {
        let err = MethodFilter::parse(&["ok.Pattern", pattern]).expect_err(pattern);
        assert_eq!(err.kind(), kind, "{pattern:?}");
        assert_eq!(err.pattern(), pattern.trim());
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(
            msg.starts_with(&format!("invalid method filter `{}`: ", pattern.trim())),
            "{msg}"
        );
    }
}

#[test]
fn error_messages_read_well() {
    let msg = |p: &str| MethodFilter::parse(&[p]).unwrap_err().to_string();
    assert_eq!(
        msg("a.B::"),
        "invalid method filter `a.B::`: `::` must be followed by a method name (or `*`)"
    );
    assert_eq!(
        msg("a.B::run(I"),
        "invalid method filter `a.B::run(I`: unbalanced parentheses in the descriptor"
    );
    assert_eq!(
        msg("a.B?"),
        "invalid method filter `a.B?`: character '?' is not allowed in a class name"
    );
    assert_eq!(
        msg("!"),
        "invalid method filter `!`: `!` must be followed by a pattern to exclude"
    );
    // Control characters cannot break the message over lines.
    assert!(!msg("a\u{0}b").contains('\u{0}'));
}

/// The patterns reach the agent through its configuration text (`sonda_shm::config`)
/// and make the same filter there.
#[test]
fn config_lines_round_trip() {
    let f = filter(&[
        "app.**",
        "!app.internal.**",
        "@jakarta.ws.rs.GET",
        "::<init>(I)",
    ]);
    let through_config =
        |text: &str| MethodFilter::parse(&AgentConfig::decode(text).unwrap().methods);
    let text = AgentConfig {
        methods: f.patterns().to_vec(),
        ..AgentConfig::default()
    }
    .encode()
    .unwrap();
    assert_eq!(
        text,
        "methods=app.**\nmethods=!app.internal.**\nmethods=@jakarta.ws.rs.GET\nmethods=::<init>(I)\n"
    );
    let config = format!("mode=launch\n{text}gc=1\n\nmonitors=0\n");
    let back = through_config(&config).unwrap();
    assert_eq!(back.patterns(), f.patterns());
    assert_eq!(back.includes(), f.includes());
    assert_eq!(back.matches(&m("app/internal/X", "run", "()V")), None);
    assert_eq!(back.matches(&m("app/X", "run", "()V")), Some(0));
    assert_eq!(back.matches(&m("b/X", "<init>", "(I)V")), Some(2));
    let err = through_config("methods=a..b\n").unwrap_err();
    assert_eq!(err.kind(), &FilterErrorKind::EmptySegment);
    assert!(through_config("gc=1\n").unwrap().is_empty());
}

#[test]
fn the_filter_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<MethodFilter>();
}
