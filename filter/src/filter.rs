//! The compiled filter: a list of include and exclude patterns, and the questions the
//! agent asks of it while classes load.

use crate::error::{FilterError, FilterErrorKind};
use crate::pattern::{self, Target};

/// A method as the agent sees it in the ClassFileLoadHook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodRef<'a> {
    /// The declaring class in internal form: `java/util/HashMap$Node`.
    pub class: &'a str,
    /// The method name: `put`, `<init>`, `<clinit>`.
    pub name: &'a str,
    /// The JVM descriptor: `(Ljava/lang/Object;Ljava/lang/Object;)Ljava/lang/Object;`.
    pub descriptor: &'a str,
    /// The class's annotations as type descriptors: `Ljakarta/ws/rs/Path;`.
    pub class_annotations: &'a [&'a str],
    /// The method's annotations as type descriptors.
    pub method_annotations: &'a [&'a str],
}

/// The compiled `--methods` patterns.
///
/// A method is selected iff some include pattern matches it and no exclude (`!`)
/// pattern does, whatever their order. Parse once; matching never allocates, so the
/// agent can call it for every method of every loading class. `MethodFilter` is
/// `Send + Sync` and immutable.
#[derive(Debug, Clone, Default)]
pub struct MethodFilter {
    /// Every pattern, trimmed, in the given order (for the agent config text).
    patterns: Vec<String>,
    /// The include patterns as written, parallel to `includes`.
    include_text: Vec<String>,
    includes: Vec<Target>,
    excludes: Vec<Target>,
}

impl MethodFilter {
    /// Parses the patterns of `--methods` (one per flag), in order.
    ///
    /// Leading and trailing whitespace of each pattern is ignored. The first pattern
    /// not in the grammar is reported. No patterns at all gives an empty filter.
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<MethodFilter, FilterError> {
        let mut filter = MethodFilter::default();
        for raw in patterns {
            let text = raw.as_ref().trim();
            if text.is_empty() {
                return Err(FilterError::new(text, FilterErrorKind::Empty));
            }
            let parsed = pattern::parse(text).map_err(|kind| FilterError::new(text, kind))?;
            if parsed.exclude {
                filter.excludes.push(parsed.target);
            } else {
                filter.include_text.push(text.to_owned());
                filter.includes.push(parsed.target);
            }
            filter.patterns.push(text.to_owned());
        }
        Ok(filter)
    }

    /// No include pattern: nothing will be instrumented.
    pub fn is_empty(&self) -> bool {
        self.includes.is_empty()
    }

    /// Cheap pre-check per class: false means no method of this class can match.
    ///
    /// `class` is in internal form (`java/util/HashMap$Node`), annotations are type
    /// descriptors (`Ljakarta/ws/rs/Path;`). Checks only the class parts of the
    /// patterns: false when no include pattern can match this class, or an exclude
    /// pattern removes the whole class (`!pkg.Class`, `!@Annotation` on the class).
    /// An include `@Annotation` pattern makes every class a candidate, since its
    /// methods may carry the annotation.
    pub fn class_may_match(&self, class: &str, class_annotations: &[&str]) -> bool {
        self.includes.iter().any(|t| t.may_match_class(class))
            && !self
                .excludes
                .iter()
                .any(|t| t.covers_class(class, class_annotations))
    }

    /// `Some(i)`: selected, `i` = index of the first include pattern that matches (into
    /// [`includes`](Self::includes)); `None`: not selected.
    pub fn matches(&self, m: &MethodRef<'_>) -> Option<usize> {
        let i = self.includes.iter().position(|t| t.matches(m))?;
        if self.excludes.iter().any(|t| t.matches(m)) {
            None
        } else {
            Some(i)
        }
    }

    /// The include patterns as written, by index.
    pub fn includes(&self) -> &[String] {
        &self.include_text
    }

    /// Every pattern, includes and `!` excludes, as written and in the given order.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether some pattern selects by annotation. When false, the agent need not
    /// decode annotations: empty slices in [`MethodRef`] give the same answers.
    pub fn uses_annotations(&self) -> bool {
        self.includes
            .iter()
            .chain(&self.excludes)
            .any(Target::uses_annotations)
    }
}
