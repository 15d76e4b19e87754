//! The optional JVM method descriptor that picks one overload:
//! `Class::method(Ljava/lang/String;I)V`, or the parameter-only form
//! `Class::method(Ljava/lang/String;I)` that accepts any return type.
//!
//! Descriptors are validated against JVMS 4.3.3 at parse time so that a typo is reported
//! instead of silently matching nothing, and normalised (`.` in class names becomes `/`,
//! since users copy names from Java source) so that matching is one string comparison.

use std::iter::Peekable;
use std::str::Chars;

use crate::error::{FilterErrorKind, Part};
use crate::glob::is_name_char;

/// A compiled descriptor pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Descriptor {
    /// Parameters and return type: matches that descriptor exactly.
    Full(Box<str>),
    /// Parameters only, kept with their `)`: matches any return type.
    Params(Box<str>),
}

impl Descriptor {
    /// Parses `text`, which starts with `(`.
    pub(crate) fn parse(text: &str) -> Result<Descriptor, FilterErrorKind> {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        if chars.next() != Some('(') {
            return Err(FilterErrorKind::UnbalancedDescriptor);
        }
        out.push('(');
        loop {
            match chars.peek() {
                None => return Err(FilterErrorKind::UnbalancedDescriptor),
                Some(')') => {
                    chars.next();
                    out.push(')');
                    break;
                }
                Some(_) => field_type(&mut chars, &mut out)?,
            }
        }
        if chars.peek().is_none() {
            return Ok(Descriptor::Params(out.into()));
        }
        if chars.peek() == Some(&'V') {
            chars.next();
            out.push('V');
        } else {
            field_type(&mut chars, &mut out)?;
        }
        match chars.next() {
            None => Ok(Descriptor::Full(out.into())),
            Some('(' | ')') => Err(FilterErrorKind::UnbalancedDescriptor),
            Some('*') => Err(FilterErrorKind::WildcardInDescriptor),
            Some(_) => Err(FilterErrorKind::TrailingAfterReturn),
        }
    }

    /// Does the method descriptor `desc` match?
    pub(crate) fn matches(&self, desc: &str) -> bool {
        match self {
            Descriptor::Full(d) => desc == &**d,
            // The prefix ends with `)`, so `(I)` cannot match `(II)V`.
            Descriptor::Params(p) => desc.starts_with(&**p),
        }
    }
}

/// Reads one field type (not `V`) into `out`.
fn field_type(chars: &mut Peekable<Chars<'_>>, out: &mut String) -> Result<(), FilterErrorKind> {
    // Array dimensions first, so the element type is read without recursion.
    while chars.peek() == Some(&'[') {
        chars.next();
        out.push('[');
    }
    match chars.next() {
        Some(c @ ('B' | 'C' | 'D' | 'F' | 'I' | 'J' | 'S' | 'Z')) => {
            out.push(c);
            Ok(())
        }
        Some('L') => {
            out.push('L');
            class_name(chars, out)
        }
        Some('V') => Err(FilterErrorKind::VoidNotAllowed),
        Some('*') => Err(FilterErrorKind::WildcardInDescriptor),
        Some('(' | ')') => Err(FilterErrorKind::UnbalancedDescriptor),
        Some(c) => Err(FilterErrorKind::BadDescriptorType {
            found: format!("{c:?}"),
        }),
        None => Err(FilterErrorKind::BadDescriptorType {
            found: "the end".to_owned(),
        }),
    }
}

/// Reads the class name of an `L...;` type, up to and including `;`.
fn class_name(chars: &mut Peekable<Chars<'_>>, out: &mut String) -> Result<(), FilterErrorKind> {
    // Whether the previous character was the start or a separator: segments are non-empty.
    let mut at_segment_start = true;
    loop {
        match chars.next() {
            Some(';') if !at_segment_start => {
                out.push(';');
                return Ok(());
            }
            Some('.' | '/') if !at_segment_start => {
                out.push('/');
                at_segment_start = true;
            }
            Some(c) if is_name_char(c) => {
                out.push(c);
                at_segment_start = false;
            }
            Some('*') => return Err(FilterErrorKind::WildcardInDescriptor),
            Some(';' | '.' | '/' | '(' | ')') | None => return Err(FilterErrorKind::BadClassType),
            Some(ch) => {
                return Err(FilterErrorKind::IllegalChar {
                    ch,
                    part: Part::Descriptor,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FilterErrorKind::*;

    #[test]
    fn full_and_params() {
        let d = Descriptor::parse("(Ljava/lang/String;I)V").unwrap();
        assert!(d.matches("(Ljava/lang/String;I)V"));
        assert!(!d.matches("(Ljava/lang/String;I)I"));
        assert!(!d.matches("(Ljava/lang/String;)V"));
        let d = Descriptor::parse("(Ljava/lang/String;I)").unwrap();
        assert!(d.matches("(Ljava/lang/String;I)V"));
        assert!(d.matches("(Ljava/lang/String;I)[Ljava/lang/Object;"));
        assert!(!d.matches("(Ljava/lang/String;II)V"));
        let d = Descriptor::parse("()").unwrap();
        assert!(d.matches("()V"));
        assert!(!d.matches("(I)V"));
        let d = Descriptor::parse("([[I[Ljava/lang/Object;JD)[[Z").unwrap();
        assert!(d.matches("([[I[Ljava/lang/Object;JD)[[Z"));
    }

    #[test]
    fn dots_become_slashes() {
        let d = Descriptor::parse("(Ljava.lang.String;)Ljava.util.Map$Entry;").unwrap();
        assert_eq!(
            d,
            Descriptor::Full("(Ljava/lang/String;)Ljava/util/Map$Entry;".into())
        );
    }

    #[test]
    fn errors() {
        let e = |s| Descriptor::parse(s).unwrap_err();
        assert_eq!(e("(I"), UnbalancedDescriptor);
        assert_eq!(e("(I))V"), UnbalancedDescriptor);
        assert_eq!(e("(I)V)"), UnbalancedDescriptor);
        assert_eq!(e("((I)V"), UnbalancedDescriptor);
        assert_eq!(e("(V)V"), VoidNotAllowed);
        assert_eq!(e("([V)V"), VoidNotAllowed);
        assert_eq!(
            e("(Q)V"),
            BadDescriptorType {
                found: "'Q'".into()
            }
        );
        assert_eq!(
            e("(I)["),
            BadDescriptorType {
                found: "the end".into()
            }
        );
        assert_eq!(e("(L;)V"), BadClassType);
        assert_eq!(e("(Ljava/lang/String)V"), BadClassType);
        assert_eq!(e("(Ljava//String;)V"), BadClassType);
        assert_eq!(e("(Ljava/lang/"), BadClassType);
        assert_eq!(e("(I)VI"), TrailingAfterReturn);
        assert_eq!(e("(*)V"), WildcardInDescriptor);
        assert_eq!(e("(Ljava/*;)V"), WildcardInDescriptor);
        assert_eq!(e("(I)*"), WildcardInDescriptor);
        assert_eq!(
            e("(La<b;)V"),
            IllegalChar {
                ch: '<',
                part: Part::Descriptor
            }
        );
    }
}
