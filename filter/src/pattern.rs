//! One pattern of the grammar: its parsing and what it selects.
//!
//! ```text
//! pattern    = [ "!" ] ( "@" class-glob | class-glob | [ class-glob ] "::" method [ descriptor ] )
//! method     = name-glob | "<init>" | "<clinit>"
//! descriptor = "(" { field-type } ")" [ return-type ]
//! ```
//! See `docs/filters.md` for the user's view.

use crate::descriptor::Descriptor;
use crate::error::{FilterErrorKind, Part};
use crate::glob::{is_name_char, ClassGlob, SegGlob};
use crate::MethodRef;

/// A parsed pattern: include or exclude, and its target.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    /// Written with a leading `!`.
    pub(crate) exclude: bool,
    pub(crate) target: Target,
}

/// What a pattern selects.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// Methods by class, name and descriptor; `None` parts match anything.
    Methods {
        class: Option<ClassGlob>,
        name: Option<SegGlob>,
        descriptor: Option<Descriptor>,
    },
    /// Methods annotated with a matching annotation, or all methods of a class that is.
    Annotation(ClassGlob),
}

/// The internal name in an annotation's type descriptor (`Ljakarta/ws/rs/Path;`);
/// a bare internal name is taken as is.
fn annotation_name(desc: &str) -> &str {
    desc.strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(desc)
}

fn any_annotation(glob: &ClassGlob, annotations: &[&str]) -> bool {
    annotations.iter().any(|a| glob.matches(annotation_name(a)))
}

impl Target {
    /// Does this pattern select `m`?
    pub(crate) fn matches(&self, m: &MethodRef<'_>) -> bool {
        match self {
            // Cheapest and most selective test first: method names are short and
            // usually literal.
            Target::Methods {
                class,
                name,
                descriptor,
            } => {
                name.as_ref().is_none_or(|n| n.matches(m.name))
                    && descriptor.as_ref().is_none_or(|d| d.matches(m.descriptor))
                    && class.as_ref().is_none_or(|c| c.matches(m.class))
            }
            Target::Annotation(glob) => {
                any_annotation(glob, m.method_annotations)
                    || any_annotation(glob, m.class_annotations)
            }
        }
    }

    /// Could this pattern select some method of `class`? Never false when `matches`
    /// could be true for a method of that class.
    pub(crate) fn may_match_class(&self, class: &str) -> bool {
        match self {
            Target::Methods { class: glob, .. } => glob.as_ref().is_none_or(|g| g.matches(class)),
            // Method annotations are unknown before the class is parsed.
            Target::Annotation(_) => true,
        }
    }

    /// Does this pattern select every method of `class`? Never true unless `matches`
    /// is true for every method of that class.
    pub(crate) fn covers_class(&self, class: &str, class_annotations: &[&str]) -> bool {
        match self {
            Target::Methods {
                class: glob,
                name: None,
                descriptor: None,
            } => glob.as_ref().is_none_or(|g| g.matches(class)),
            Target::Methods { .. } => false,
            Target::Annotation(glob) => any_annotation(glob, class_annotations),
        }
    }

    /// Whether matching this pattern reads annotations.
    pub(crate) fn uses_annotations(&self) -> bool {
        matches!(self, Target::Annotation(_))
    }
}

/// Parses one pattern, already trimmed and non-empty.
pub(crate) fn parse(text: &str) -> Result<Pattern, FilterErrorKind> {
    if text.chars().any(char::is_whitespace) {
        return Err(FilterErrorKind::Whitespace);
    }
    let (exclude, rest) = match text.strip_prefix('!') {
        Some("") => return Err(FilterErrorKind::LoneBang),
        Some(r) if r.starts_with('!') => return Err(FilterErrorKind::DoubleBang),
        Some(r) => (true, r),
        None => (false, text),
    };
    let target = if let Some(name) = rest.strip_prefix('@') {
        annotation(name)?
    } else {
        methods(rest)?
    };
    Ok(Pattern { exclude, target })
}

fn annotation(name: &str) -> Result<Target, FilterErrorKind> {
    if name.is_empty() {
        return Err(FilterErrorKind::MissingAnnotationName);
    }
    if name.contains("::") || name.contains('(') {
        return Err(FilterErrorKind::AnnotationWithMember);
    }
    Ok(Target::Annotation(ClassGlob::parse(
        name,
        Part::Annotation,
    )?))
}

fn methods(text: &str) -> Result<Target, FilterErrorKind> {
    let Some((class_text, member)) = text.split_once("::") else {
        if text.contains('(') {
            return Err(FilterErrorKind::DescriptorWithoutMethod);
        }
        return Ok(Target::Methods {
            class: Some(class(text)?),
            name: None,
            descriptor: None,
        });
    };
    let class = if class_text.is_empty() {
        None
    } else {
        Some(class(class_text)?)
    };
    if member.contains("::") {
        return Err(FilterErrorKind::RepeatedSeparator);
    }
    let (name_text, descriptor) = match member.find('(') {
        Some(i) => (&member[..i], Some(Descriptor::parse(&member[i..])?)),
        None => (member, None),
    };
    let name = method_name(name_text)?;
    // `Class::*` is the same as `Class`: normalising lets the per-class pre-check see
    // that an exclusion like `!Class::*` removes the whole class.
    let name = if name.is_any() && descriptor.is_none() {
        None
    } else {
        Some(name)
    };
    Ok(Target::Methods {
        class,
        name,
        descriptor,
    })
}

fn class(text: &str) -> Result<ClassGlob, FilterErrorKind> {
    if text.contains(')') {
        return Err(FilterErrorKind::UnbalancedDescriptor);
    }
    ClassGlob::parse(text, Part::Class)
}

fn method_name(text: &str) -> Result<SegGlob, FilterErrorKind> {
    if text.is_empty() {
        return Err(FilterErrorKind::MissingMethodName);
    }
    if text == "<init>" || text == "<clinit>" {
        return Ok(SegGlob::new(text));
    }
    for ch in text.chars() {
        match ch {
            '<' | '>' => return Err(FilterErrorKind::BadSpecialName),
            '.' => return Err(FilterErrorKind::DotInMethodName),
            ')' => return Err(FilterErrorKind::UnbalancedDescriptor),
            '*' => {}
            c if is_name_char(c) => {}
            ch => {
                return Err(FilterErrorKind::IllegalChar {
                    ch,
                    part: Part::Method,
                })
            }
        }
    }
    // In a method name `**` is the same as `*`: there are no segments to cross.
    Ok(SegGlob::new(text))
}
