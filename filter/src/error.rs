//! Why a method filter pattern was refused.
//!
//! The CLI shows these to a user who typed `--methods`, before anything starts, so each
//! message names the pattern and says what to change, on one line.

use std::fmt;

/// A pattern that is not in the filter grammar (see `docs/filters.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pattern: String,
    kind: FilterErrorKind,
}

/// Which part of a pattern a character was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The class part, before `::`.
    Class,
    /// The method name, after `::`.
    Method,
    /// The annotation name, after `@`.
    Annotation,
    /// The JVM descriptor in parentheses.
    Descriptor,
}

/// What is wrong with a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterErrorKind {
    /// The pattern is empty or only whitespace.
    Empty,
    /// `!` with nothing after it.
    LoneBang,
    /// More than one `!` in front of a pattern.
    DoubleBang,
    /// Whitespace inside a pattern (only leading and trailing whitespace is trimmed).
    Whitespace,
    /// A character that cannot appear in this part of a pattern.
    IllegalChar {
        /// The character.
        ch: char,
        /// Where it was found.
        part: Part,
    },
    /// An empty package or class segment: `a..B`, `.B`, `a.`.
    EmptySegment,
    /// `**` mixed with other characters in a segment (`org.**Servlet`): it stands alone.
    DoubleStarInSegment,
    /// Three or more `*` in a row.
    TooManyStars,
    /// A class name written in internal form (`java/util/HashMap`).
    SlashInClassName,
    /// A second `::`.
    RepeatedSeparator,
    /// `::` with no method name after it (`Foo::`, `::`, `::(I)V`).
    MissingMethodName,
    /// `@` with no annotation name after it.
    MissingAnnotationName,
    /// `@Annotation::method` or `@Annotation(...)`: annotations select whole methods.
    AnnotationWithMember,
    /// A descriptor after a class name without `::method` (`Foo(I)V`).
    DescriptorWithoutMethod,
    /// `.` in a method name (`Foo::a.b`).
    DotInMethodName,
    /// Angle brackets other than exactly `<init>` or `<clinit>`.
    BadSpecialName,
    /// A descriptor whose parentheses do not balance: no `)`, or a stray `(` or `)`.
    UnbalancedDescriptor,
    /// A descriptor with something that is not a JVM type where a type belongs.
    BadDescriptorType {
        /// What was found (a character, or the end of the descriptor).
        found: String,
    },
    /// `L` in a descriptor with no class name, or no closing `;`.
    BadClassType,
    /// `V` (void) as a parameter or an array element type.
    VoidNotAllowed,
    /// Characters after the return type.
    TrailingAfterReturn,
    /// `*` in a descriptor: descriptors are matched exactly.
    WildcardInDescriptor,
}

impl FilterError {
    pub(crate) fn new(pattern: &str, kind: FilterErrorKind) -> FilterError {
        FilterError {
            pattern: pattern.to_owned(),
            kind,
        }
    }

    /// The pattern as given (leading and trailing whitespace trimmed).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// What is wrong with it.
    pub fn kind(&self) -> &FilterErrorKind {
        &self.kind
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Class => "class name",
            Part::Method => "method name",
            Part::Annotation => "annotation name",
            Part::Descriptor => "descriptor",
        })
    }
}

impl fmt::Display for FilterErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FilterErrorKind::*;
        match self {
            Empty => f.write_str("empty pattern"),
            LoneBang => f.write_str("`!` must be followed by a pattern to exclude"),
            DoubleBang => f.write_str("only one `!` may start a pattern"),
            Whitespace => f.write_str("whitespace inside a pattern"),
            IllegalChar { ch, part } => {
                write!(f, "character {:?} is not allowed in a {part}", ch)
            }
            EmptySegment => f.write_str("empty package or class name between dots"),
            DoubleStarInSegment => f.write_str(
                "`**` must be a whole package segment (`pkg.**`, `**.Name`); use `*` inside a name",
            ),
            TooManyStars => {
                f.write_str("`***`: use `*` (within a segment) or `**` (across segments)")
            }
            SlashInClassName => {
                f.write_str("`/` in a class name: separate packages with `.` (java.util.HashMap)")
            }
            RepeatedSeparator => f.write_str("more than one `::`"),
            MissingMethodName => f.write_str("`::` must be followed by a method name (or `*`)"),
            MissingAnnotationName => {
                f.write_str("`@` must be followed by an annotation class name")
            }
            AnnotationWithMember => {
                f.write_str("an annotation pattern takes no `::method` or descriptor")
            }
            DescriptorWithoutMethod => {
                f.write_str("a descriptor needs a method name: write `Class::method(...)`")
            }
            DotInMethodName => {
                f.write_str("`.` in a method name: separate class and method with `::`")
            }
            BadSpecialName => {
                f.write_str("angle brackets are only allowed in `<init>` and `<clinit>`")
            }
            UnbalancedDescriptor => f.write_str("unbalanced parentheses in the descriptor"),
            BadDescriptorType { found } => {
                write!(
                    f,
                    "descriptor: expected a JVM type (B C D F I J S Z L...; [), found {found}"
                )
            }
            BadClassType => f.write_str("descriptor: `L` must be followed by a class name and `;`"),
            VoidNotAllowed => f.write_str("descriptor: `V` is only allowed as the return type"),
            TrailingAfterReturn => f.write_str("descriptor: characters after the return type"),
            WildcardInDescriptor => {
                f.write_str("descriptor: `*` is not allowed (descriptors match exactly)")
            }
        }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // escape_debug keeps the message on one line whatever the pattern holds.
        write!(
            f,
            "invalid method filter `{}`: {}",
            self.pattern.escape_debug(),
            self.kind
        )
    }
}

impl std::error::Error for FilterError {}
