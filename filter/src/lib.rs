//! The `--methods` grammar and matcher, shared by the `sonda` CLI and the JVMTI agent.
//!
//! The CLI parses the user's patterns with [`MethodFilter::parse`] to report mistakes
//! before anything starts, and passes them ([`MethodFilter::patterns`]) to the agent in
//! its configuration (`sonda_shm::config::AgentConfig`). The agent parses them again
//! with [`MethodFilter::parse`] and, in the ClassFileLoadHook, asks
//! [`MethodFilter::class_may_match`] once per class (to skip most classes without
//! parsing them) and [`MethodFilter::matches`] per method.
//!
//! The grammar is that of JDK Flight Recorder's method tracing (`pkg.Class`,
//! `pkg.Class::method`, `::method`, `@pkg.Annotation`) plus `*` and `**` wildcards, JVM
//! descriptors to pick an overload, and `!` exclusions; `docs/filters.md` is the user
//! documentation.
//!
//! ```
//! use sonda_filter::{MethodFilter, MethodRef};
//!
//! let f = MethodFilter::parse(&["org.apache.catalina.**::invoke", "!*Valve::invoke"]).unwrap();
//! let m = MethodRef {
//!     class: "org/apache/catalina/core/StandardWrapper",
//!     name: "invoke",
//!     descriptor: "()V",
//!     class_annotations: &[],
//!     method_annotations: &[],
//! };
//! assert_eq!(f.matches(&m), Some(0));
//! assert!(!f.class_may_match("org/apache/coyote/Request", &[]));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod descriptor;
mod error;
mod filter;
mod glob;
mod pattern;

pub use error::{FilterError, FilterErrorKind, Part};
pub use filter::{MethodFilter, MethodRef};
pub use glob::SegGlob;
