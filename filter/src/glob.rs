//! Glob matching of class and method names, with two wildcard kinds.
//!
//! `*` matches any run of characters (possibly none) within one segment: it never
//! crosses a package separator but does cross `$`, so `Outer$*` matches nested classes.
//! `**` stands alone as a whole segment and matches any number of segments: zero when it
//! leads or sits between segments (`**.Foo` matches `Foo` in the default package,
//! `a.**.b.C` matches `a.b.C`), one or more when it ends the pattern (`pkg.**` matches
//! the classes in `pkg` and below, not a class named `pkg`).
//!
//! Patterns are compiled once; matching takes `&str` in JVM internal form (`/` between
//! packages) and never allocates. Making `**` a whole segment keeps matching simple and
//! linear-ish: segments are matched as units with the classic one-star backtracking
//! algorithm, and each segment with the classic split-on-`*` algorithm, so no input can
//! make matching exponential.

use crate::error::{FilterErrorKind, Part};

/// Whether `c` may appear in a class, package, method or annotation name in a pattern.
///
/// Java identifiers are letters, digits, `_` and `$`; `-` is added because JVM
/// languages use it in generated names (Kotlin's mangled `foo-abc123` methods).
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || c == '-'
}

/// Byte equality, inlined: the strings compared here are a few bytes long and usually
/// differ in the first byte, where a call to `memcmp` costs more than the comparison.
#[inline]
fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[inline]
fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && eq(&s[..prefix.len()], prefix)
}

#[inline]
fn ends_with(s: &[u8], suffix: &[u8]) -> bool {
    s.len() >= suffix.len() && eq(&s[s.len() - suffix.len()..], suffix)
}

/// The leftmost occurrence of `needle` in `hay`: a naive search, faster than a
/// two-way searcher's set-up on names of a few dozen bytes.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let Some(&first) = needle.first() else {
        return Some(0);
    };
    let last_start = hay.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| hay[i] == first && eq(&hay[i..i + needle.len()], needle))
}

/// A glob over one segment (a package name, a class simple name or a method name):
/// literal text and `*`. Also public as a plain `*`-only glob over any text (a `*`
/// then matches any run, dots included), for other name patterns of sonda
/// (`sonda services --unit-class`), so that there is one such matcher.
///
/// Matching works on bytes: pattern literals are whole UTF-8 characters, so any place
/// they match in a UTF-8 name is a character boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegGlob {
    /// The literal pieces between stars: one piece means no star at all.
    parts: Box<[Box<[u8]>]>,
}

impl SegGlob {
    /// Compiles `text` (the `--methods` grammar validates its characters first; any
    /// text compiles).
    pub fn new(text: &str) -> SegGlob {
        SegGlob {
            parts: text.split('*').map(|p| Box::from(p.as_bytes())).collect(),
        }
    }

    /// True if this glob matches every string (it is made of stars only).
    pub(crate) fn is_any(&self) -> bool {
        self.parts.len() > 1 && self.parts.iter().all(|p| p.is_empty())
    }

    /// Does the whole of `s` match?
    #[inline]
    pub fn matches(&self, s: &str) -> bool {
        self.matches_bytes(s.as_bytes())
    }

    fn matches_bytes(&self, s: &[u8]) -> bool {
        match &self.parts[..] {
            [literal] => eq(s, literal),
            [first, middle @ .., last] => {
                if s.len() < first.len() + last.len()
                    || !starts_with(s, first)
                    || !ends_with(s, last)
                {
                    return false;
                }
                // Both ends are anchored; each middle piece is taken at its leftmost
                // place, which leaves the most room for the pieces after it.
                let mut mid = &s[first.len()..s.len() - last.len()];
                for piece in middle {
                    match find(mid, piece) {
                        Some(i) => mid = &mid[i + piece.len()..],
                        None => return false,
                    }
                }
                true
            }
            [] => s.is_empty(),
        }
    }
}

/// One element of a dotted class pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// Exactly one segment matching this glob.
    One(SegGlob),
    /// `**`: any number of segments.
    Any,
}

/// A compiled class (or annotation) name pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClassGlob {
    /// A dotted pattern without wildcards: this one internal name.
    Exact(Box<[u8]>),
    /// A pattern without `.`: matches the simple name (after the last `/`) of a class in
    /// any package, nested classes included in the simple name (`HashMap$Node`).
    Simple(SegGlob),
    /// A dotted pattern with wildcards.
    Path {
        /// Its leading literal packages in internal form, with a trailing `/`
        /// (`org/apache/catalina/`): one comparison rejects most classes.
        prefix: Box<[u8]>,
        /// The rest, never empty.
        segs: Box<[Seg]>,
    },
}

impl ClassGlob {
    /// Compiles a dotted pattern (`java.util.*`, `**.Foo$*`), checking its characters.
    pub(crate) fn parse(text: &str, part: Part) -> Result<ClassGlob, FilterErrorKind> {
        for ch in text.chars() {
            if ch == '/' {
                return Err(FilterErrorKind::SlashInClassName);
            }
            if !(is_name_char(ch) || ch == '.' || ch == '*') {
                return Err(FilterErrorKind::IllegalChar { ch, part });
            }
        }
        let mut segs: Vec<Seg> = Vec::new();
        for seg in text.split('.') {
            if seg.is_empty() {
                return Err(FilterErrorKind::EmptySegment);
            }
            if seg.contains("***") {
                return Err(FilterErrorKind::TooManyStars);
            }
            if seg == "**" {
                // `**.**` is the same as `**`.
                if segs.last() != Some(&Seg::Any) {
                    segs.push(Seg::Any);
                }
            } else if seg.contains("**") {
                return Err(FilterErrorKind::DoubleStarInSegment);
            } else {
                segs.push(Seg::One(SegGlob::new(seg)));
            }
        }
        if !text.contains('*') {
            let internal: Vec<u8> = text
                .bytes()
                .map(|b| if b == b'.' { b'/' } else { b })
                .collect();
            return Ok(if text.contains('.') {
                ClassGlob::Exact(internal.into())
            } else {
                ClassGlob::Simple(SegGlob::new(text))
            });
        }
        if let [Seg::One(simple)] = &segs[..] {
            if !text.contains('.') {
                return Ok(ClassGlob::Simple(simple.clone()));
            }
        }
        if segs.last() == Some(&Seg::Any) {
            // A trailing `**` needs at least the class name itself: `pkg.**` is
            // `pkg.*.**` with the last `**` free to match nothing.
            segs.insert(segs.len() - 1, Seg::One(SegGlob::new("*")));
        }
        // Leading literal segments become the prefix; the last segment always stays.
        let literal_segments: Vec<&str> = text
            .split('.')
            .take(segs.len() - 1)
            .take_while(|s| !s.contains('*'))
            .collect();
        let mut prefix = Vec::new();
        for s in &literal_segments {
            prefix.extend_from_slice(s.as_bytes());
            prefix.push(b'/');
        }
        segs.drain(..literal_segments.len());
        Ok(ClassGlob::Path {
            prefix: prefix.into(),
            segs: segs.into_boxed_slice(),
        })
    }

    /// Does the internal name `class` (`java/util/HashMap$Node`) match?
    #[inline]
    pub(crate) fn matches(&self, class: &str) -> bool {
        let class = class.as_bytes();
        match self {
            ClassGlob::Exact(name) => eq(class, name),
            ClassGlob::Simple(g) => {
                let simple = match class.iter().rposition(|&b| b == b'/') {
                    Some(i) => &class[i + 1..],
                    None => class,
                };
                g.matches_bytes(simple)
            }
            ClassGlob::Path { prefix, segs } => {
                starts_with(class, prefix) && match_segments(segs, &class[prefix.len()..])
            }
        }
    }
}

/// The segment of `text` starting at byte `start`, and where the next one starts.
#[inline]
fn segment_at(text: &[u8], start: usize) -> (&[u8], Option<usize>) {
    let rest = &text[start..];
    match rest.iter().position(|&b| b == b'/') {
        Some(i) => (&rest[..i], Some(start + i + 1)),
        None => (rest, None),
    }
}

/// Matches `/`-separated `text` against `segs`, where `Seg::Any` matches any run of
/// segments: the classic wildcard algorithm over segments instead of characters. When a
/// segment fails, the most recent `**` absorbs one more segment and matching resumes
/// after it; earlier `**` never need revisiting, so the cost is at most
/// segments x pattern length glob checks.
fn match_segments(segs: &[Seg], text: &[u8]) -> bool {
    let mut p = 0;
    let mut t = Some(0);
    // (pattern index after the latest `**`, text segment it would absorb next)
    let mut resume: Option<(usize, usize)> = None;
    while let Some(start) = t {
        let (seg, next) = segment_at(text, start);
        match segs.get(p) {
            Some(Seg::Any) => {
                resume = Some((p + 1, start));
                p += 1;
                continue;
            }
            Some(Seg::One(g)) if g.matches_bytes(seg) => {
                p += 1;
                t = next;
                continue;
            }
            _ => {}
        }
        match resume {
            Some((rp, rt)) => {
                let (_, after) = segment_at(text, rt);
                p = rp;
                t = after;
                if let Some(a) = after {
                    resume = Some((rp, a));
                }
            }
            None => return false,
        }
    }
    segs[p..].iter().all(|s| *s == Seg::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(p: &str) -> ClassGlob {
        ClassGlob::parse(p, Part::Class).unwrap()
    }

    #[test]
    fn segment_glob() {
        let g = SegGlob::new("get*");
        assert!(g.matches("get"));
        assert!(g.matches("getName"));
        assert!(!g.matches("xget"));
        let g = SegGlob::new("*a*b*");
        assert!(g.matches("ab"));
        assert!(g.matches("xaxbx"));
        assert!(!g.matches("ba"));
        let g = SegGlob::new("a*a");
        assert!(!g.matches("a"), "the two ends may not overlap");
        assert!(g.matches("aa"));
        assert!(SegGlob::new("*").is_any());
        assert!(SegGlob::new("**").is_any());
        assert!(!SegGlob::new("a*").is_any());
        assert!(!SegGlob::new("").is_any());
        assert!(SegGlob::new("").matches(""));
        assert!(!SegGlob::new("").matches("a"));
    }

    #[test]
    fn star_stays_in_segment() {
        let g = class("org.apache.catalina.*");
        assert!(g.matches("org/apache/catalina/Valve"));
        assert!(!g.matches("org/apache/catalina/core/StandardValve"));
        assert!(!g.matches("org/apache/catalina"));
        assert!(class("java.util.*Map").matches("java/util/HashMap"));
        assert!(!class("java.*Map").matches("java/util/HashMap"));
    }

    #[test]
    fn double_star() {
        let g = class("pkg.**");
        assert!(g.matches("pkg/A"));
        assert!(g.matches("pkg/sub/deeper/B$C"));
        assert!(!g.matches("pkg"));
        assert!(!g.matches("pkgx/A"));
        let g = class("**.Foo");
        assert!(g.matches("Foo"));
        assert!(g.matches("a/b/Foo"));
        assert!(!g.matches("a/bFoo"));
        let g = class("a.**.b.C");
        assert!(g.matches("a/b/C"));
        assert!(g.matches("a/x/y/b/C"));
        assert!(g.matches("a/b/b/C"));
        assert!(!g.matches("a/b/x/C"));
        let g = class("a.**.b.**.c.*");
        assert!(g.matches("a/b/c/X"));
        assert!(g.matches("a/1/b/2/b/3/c/X"));
        assert!(!g.matches("a/1/b/2/c"));
        assert!(class("**").matches("Foo"));
        assert!(class("**").matches("a/b/Foo"));
        assert!(class("**.**").matches("a/Foo"));
    }

    #[test]
    fn simple_names() {
        let g = class("*Servlet");
        assert!(g.matches("jakarta/servlet/http/HttpServlet"));
        assert!(g.matches("Servlet"));
        assert!(!g.matches("jakarta/servlet/http/HttpServletRequest"));
        let g = class("HashMap");
        assert!(g.matches("java/util/HashMap"));
        assert!(!g.matches("java/util/HashMap$Node"));
        assert!(class("Outer$*").matches("a/Outer$Inner$Deep"));
        assert!(class("HashMap$Node").matches("java/util/HashMap$Node"));
    }

    #[test]
    fn parse_errors() {
        let err = |p| ClassGlob::parse(p, Part::Class).unwrap_err();
        assert_eq!(err("a..b"), FilterErrorKind::EmptySegment);
        assert_eq!(err(".a"), FilterErrorKind::EmptySegment);
        assert_eq!(err("a."), FilterErrorKind::EmptySegment);
        assert_eq!(err("a.**b"), FilterErrorKind::DoubleStarInSegment);
        assert_eq!(err("a.***"), FilterErrorKind::TooManyStars);
        assert_eq!(err("java/util/Map"), FilterErrorKind::SlashInClassName);
        assert_eq!(
            err("a.b?"),
            FilterErrorKind::IllegalChar {
                ch: '?',
                part: Part::Class
            }
        );
    }
}
