//! Why a class was left unchanged.
//!
//! Every variant is a reason to keep the original bytes: the caller logs the one-line
//! `Display` text once (as a warning) and loads the class unmodified, as
//! async-profiler does with its `METHOD_TOO_LARGE` / `JUMP_OVERFLOW` results.

use std::fmt;

/// A reason why `instrument` refused a class. The class must then be loaded unchanged.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewriteError {
    /// The bytes are not a class file this crate can read (truncated, bad magic,
    /// inconsistent lengths, an unknown constant or opcode, ...).
    Malformed {
        /// What was wrong, in a few words.
        reason: &'static str,
    },
    /// The class-file major version is outside 45..=61 (what JDK 17 loads).
    UnsupportedVersion {
        /// The class file's major version.
        major: u16,
    },
    /// One method's Code attribute could not be read.
    MalformedMethod {
        /// `Class.name(descriptor)`.
        method: String,
        /// What was wrong, in a few words.
        reason: &'static str,
    },
    /// The instrumented code would reach 65536 bytes or more.
    MethodTooLarge {
        /// `Class.name(descriptor)`.
        method: String,
        /// Code length the instrumented method would have.
        size: usize,
    },
    /// A conditional branch (16-bit offset, no wide form) would jump too far once
    /// the probes are inserted.
    JumpOverflow {
        /// `Class.name(descriptor)`.
        method: String,
    },
    /// `max_stack` would exceed 65535.
    StackOverflow {
        /// `Class.name(descriptor)`.
        method: String,
    },
    /// The constant pool would exceed 65535 entries.
    ConstantPoolOverflow,
    /// The method uses `jsr`/`ret` (subroutines of old compilers); not rewritten.
    Subroutine {
        /// `Class.name(descriptor)`.
        method: String,
    },
    /// A constructor whose `super()`/`this()` call could not be located as one
    /// call that every return passes through exactly once.
    InitSite {
        /// `Class.name(descriptor)`.
        method: String,
        /// What the analysis found, in a few words.
        reason: &'static str,
    },
}

impl RewriteError {
    /// A short stable name for counting refusals by kind (e.g. in agent counters).
    pub fn kind(&self) -> &'static str {
        match self {
            RewriteError::Malformed { .. } => "malformed",
            RewriteError::UnsupportedVersion { .. } => "unsupported_version",
            RewriteError::MalformedMethod { .. } => "malformed_method",
            RewriteError::MethodTooLarge { .. } => "method_too_large",
            RewriteError::JumpOverflow { .. } => "jump_overflow",
            RewriteError::StackOverflow { .. } => "stack_overflow",
            RewriteError::ConstantPoolOverflow => "constant_pool_overflow",
            RewriteError::Subroutine { .. } => "subroutine",
            RewriteError::InitSite { .. } => "init_site",
        }
    }
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RewriteError::Malformed { reason } => write!(f, "malformed class file: {reason}"),
            RewriteError::UnsupportedVersion { major } => {
                write!(
                    f,
                    "unsupported class file version {major} (45..=61 supported)"
                )
            }
            RewriteError::MalformedMethod { method, reason } => {
                write!(f, "malformed code in {method}: {reason}")
            }
            RewriteError::MethodTooLarge { method, size } => {
                write!(
                    f,
                    "{method} would grow to {size} bytes of code (limit 65535)"
                )
            }
            RewriteError::JumpOverflow { method } => write!(
                f,
                "a conditional branch in {method} would exceed the 16-bit offset range"
            ),
            RewriteError::StackOverflow { method } => {
                write!(f, "max_stack of {method} would exceed 65535")
            }
            RewriteError::ConstantPoolOverflow => {
                write!(f, "the constant pool would exceed 65535 entries")
            }
            RewriteError::Subroutine { method } => {
                write!(
                    f,
                    "{method} uses jsr/ret subroutines, which are not rewritten"
                )
            }
            RewriteError::InitSite { method, reason } => {
                write!(f, "cannot place probes in constructor {method}: {reason}")
            }
        }
    }
}

impl std::error::Error for RewriteError {}

/// Errors inside one method before the method's name is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MethodError {
    Malformed(&'static str),
    TooLarge(usize),
    JumpOverflow,
    StackOverflow,
    Subroutine,
    InitSite(&'static str),
    /// Not about this method: the class as a whole is at fault.
    Class(RewriteError),
}

impl MethodError {
    pub(crate) fn naming(self, method: String) -> RewriteError {
        match self {
            MethodError::Malformed(reason) => RewriteError::MalformedMethod { method, reason },
            MethodError::TooLarge(size) => RewriteError::MethodTooLarge { method, size },
            MethodError::JumpOverflow => RewriteError::JumpOverflow { method },
            MethodError::StackOverflow => RewriteError::StackOverflow { method },
            MethodError::Subroutine => RewriteError::Subroutine { method },
            MethodError::InitSite(reason) => RewriteError::InitSite { method, reason },
            MethodError::Class(e) => e,
        }
    }
}

impl From<RewriteError> for MethodError {
    fn from(e: RewriteError) -> Self {
        MethodError::Class(e)
    }
}

/// Shorthand for a class-level malformation.
pub(crate) fn malformed(reason: &'static str) -> RewriteError {
    RewriteError::Malformed { reason }
}
