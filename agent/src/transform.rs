//! Method tracing by rewriting classes as they load (ClassFileLoadHook), and by
//! retransforming the classes loaded before the probes existed.
//!
//! For each class the filter may match, `sonda_rewriter::instrument` offers every
//! method to [`Transformer::select`], which asks the filter, counts a hit for the
//! include pattern that matched, and gives the method its id. Ids are per (class,
//! method, descriptor) name: a class loaded by two loaders, or retransformed, keeps its
//! ids, and each id gets one `Meta::Method`. A class the rewriter refuses stays as it
//! was (the hook returns nothing) and gets a `Meta::Warning`.
//!
//! Classes loaded before VMInit (most of `java.base`) cannot call the probe class yet;
//! the hook leaves them alone and [`Transformer::retransform_loaded`] retransforms the
//! candidates once the probes are ready. Retransformation always starts from the bytes
//! the class was loaded with, so retransforming again with the hook returning nothing
//! gives the JVM back the original classes (for a later detach). Only the classes the
//! hook rewrote are retransformed back, after any hook still running finished.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sonda_filter::{MethodFilter, MethodRef};
use sonda_rewriter::{class_name, instrument, MethodInfo};
use sonda_trace::Meta;

use crate::jvmti::{ClassLoad, Jni, Jvmti, Local};
use crate::probe::{self, PROBE};
use crate::{buffers, class_files, constant_pool, counters, meta};

/// The method-tracing state: the filter, per-pattern hits, method ids.
pub struct Transformer {
    filter: MethodFilter,
    hits: Vec<AtomicU64>,
    ids: Mutex<HashMap<MethodKey, MethodId>>,
    /// Off once recording stopped: the hook then leaves every class as loaded.
    enabled: AtomicBool,
    /// Hooks running now (restoring waits for them).
    in_flight: AtomicU32,
    /// Internal names of the classes the hook rewrote: what restoring retransforms.
    rewritten: Mutex<HashSet<String>>,
}

/// Longest wait for running hooks before restoring anyway.
const HOOK_WAIT: Duration = Duration::from_secs(2);

/// Counts a running hook while alive.
struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicU32) -> InFlight<'a> {
        counter.fetch_add(1, Ordering::AcqRel);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct MethodKey {
    class: String,
    name: String,
    descriptor: String,
}

#[derive(Clone, Copy)]
struct MethodId {
    id: u32,
    /// Whether its `Meta::Method` was written (only once a rewrite succeeded).
    described: bool,
    /// Whether the overhead budget took it out: the selector refuses it from then on.
    excluded: bool,
}

impl Transformer {
    /// Method tracing with `filter` (which must not be empty).
    pub fn new(filter: MethodFilter) -> Transformer {
        let hits = filter
            .includes()
            .iter()
            .map(|_| AtomicU64::new(0))
            .collect();
        Transformer {
            filter,
            hits,
            ids: Mutex::new(HashMap::new()),
            enabled: AtomicBool::new(true),
            in_flight: AtomicU32::new(0),
            rewritten: Mutex::new(HashSet::new()),
        }
    }

    /// The ClassFileLoadHook: new bytes for `load`, or `None` to leave it unchanged.
    pub fn class_file_load(&self, load: &ClassLoad<'_>) -> Option<Vec<u8>> {
        let _running = InFlight::enter(&self.in_flight);
        if !self.enabled.load(Ordering::Acquire) {
            return None;
        }
        let name = match &load.name {
            Some(n) => n.clone(),
            None => class_name(load.bytes)?,
        };
        if name == PROBE.class || !self.filter.class_may_match(&name, &[]) {
            return None;
        }
        if !probe::ready() {
            // Counted and retransformed by `retransform_loaded` once the probes exist.
            return None;
        }
        match instrument(load.bytes, &PROBE, &mut |m| self.select(m)) {
            Ok(Some(done)) => {
                counters::CLASSES_INSTRUMENTED.incr();
                if let Ok(mut rewritten) = self.rewritten.lock() {
                    rewritten.insert(name.clone());
                }
                let class = meta::dotted(&name);
                let mut ids = self.ids.lock().ok()?;
                for m in done.methods {
                    let key = MethodKey {
                        class: name.clone(),
                        name: m.name,
                        descriptor: m.descriptor,
                    };
                    if let Some(entry) = ids.get_mut(&key).filter(|e| !e.described) {
                        entry.described = true;
                        counters::METHODS_INSTRUMENTED.incr();
                        meta::write(&Meta::Method {
                            id: m.id,
                            class: class.clone(),
                            name: key.name,
                            descriptor: key.descriptor,
                        });
                    }
                }
                Some(done.bytes)
            }
            Ok(None) => None,
            Err(e) => {
                counters::CLASSES_REFUSED.incr();
                meta::warning(format!("class {} left unchanged: {e}", meta::dotted(&name)));
                None
            }
        }
    }

    /// The rewriter's selector: the method's id if the filter selects it.
    fn select(&self, m: &MethodInfo<'_>) -> Option<u32> {
        let include = self.filter.matches(&MethodRef {
            class: m.class,
            name: m.name,
            descriptor: m.descriptor,
            class_annotations: m.class_annotations,
            method_annotations: m.method_annotations,
        })?;
        if let Some(h) = self.hits.get(include) {
            h.fetch_add(1, Ordering::Relaxed);
        }
        let key = MethodKey {
            class: m.class.to_string(),
            name: m.name.to_string(),
            descriptor: m.descriptor.to_string(),
        };
        let mut ids = self.ids.lock().ok()?;
        if let Some(e) = ids.get(&key) {
            return (!e.excluded).then_some(e.id);
        }
        let id = buffers::region()?.next_method_id()?;
        probe::note_id(id);
        crate::budget::note_method(id);
        ids.insert(
            key,
            MethodId {
                id,
                described: false,
                excluded: false,
            },
        );
        Some(id)
    }

    /// Retransforms every loaded class the filter may match (after the probes are
    /// ready): classes loaded before VMInit, or before an attach.
    pub fn retransform_loaded(&self, jvmti: Jvmti, jni: &Jni<'_>) {
        let scan_since = crate::os::monotonic_ns();
        let Some(candidates) = self.loaded_classes(jvmti, jni, |class, name| {
            self.filter.class_may_match(name, &[])
                && self.declares_a_selected_method(jvmti, jni, class, name)
        }) else {
            return;
        };
        counters::SCAN_NS.set(crate::os::monotonic_ns().saturating_sub(scan_since));
        counters::CLASSES_BEFORE_PROBES.add(candidates.len() as u64);
        let done = retransform(jvmti, jni, candidates);
        counters::CLASSES_RETRANSFORMED.add(done);
    }

    /// Gives the JVM back the original classes: the hook stops rewriting, and every
    /// loaded class it rewrote is retransformed from its original bytes (once the hooks
    /// that were running have returned, so that none rewrites a class behind our back).
    pub fn restore(&self, jvmti: Jvmti, jni: &Jni<'_>) {
        self.enabled.store(false, Ordering::Release);
        let deadline = Instant::now() + HOOK_WAIT;
        while self.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let rewritten = self.rewritten.lock().map(|r| r.clone()).unwrap_or_default();
        let Some(candidates) = self.loaded_classes(jvmti, jni, |_, name| rewritten.contains(name))
        else {
            return;
        };
        let done = retransform(jvmti, jni, candidates);
        counters::CLASSES_RESTORED.add(done);
        // Nothing asks for ids any more: the recording is over.
        if let Ok(mut ids) = self.ids.lock() {
            *ids = HashMap::new();
        }
    }

    /// The loaded, modifiable classes (but the probe class) that `wanted` accepts,
    /// given the class and its internal name.
    fn loaded_classes<'a>(
        &self,
        jvmti: Jvmti,
        jni: &'a Jni<'_>,
        wanted: impl Fn(Local<'_>, &str) -> bool,
    ) -> Option<Vec<(Local<'a>, String)>> {
        let classes = match jvmti.loaded_classes(jni) {
            Ok(c) => c,
            Err(e) => {
                meta::warning(format!(
                    "cannot list loaded classes to retransform them: {e}"
                ));
                return None;
            }
        };
        let mut candidates = Vec::new();
        for class in classes {
            let name = jvmti
                .is_modifiable_class(class)
                .then(|| jvmti.class_signature(class).ok())
                .flatten()
                .and_then(|sig| Some(sig.strip_prefix('L')?.strip_suffix(';')?.to_string()));
            match name {
                Some(n) if n != PROBE.class && wanted(class, &n) => candidates.push((class, n)),
                _ => jni.delete_local(class),
            }
        }
        Some(candidates)
    }

    /// Whether `class` declares a method the filter selects: a broad class pattern
    /// (`::_jspService` is any class) would otherwise retransform every loaded class,
    /// seconds of work for a large application. Asked, cheapest first, of JVMTI
    /// (`GetClassMethods`: exact, for a linked class), of its constant pool (a class
    /// not yet linked: it can only declare a method whose name is there; when no
    /// pattern has a descriptor), of the class file its loader has (`class_files`, a
    /// millisecond or more per class: only for classes not yet linked, with
    /// descriptors in the patterns). A filter with annotations, which JVMTI does not
    /// show, takes every class its class patterns allow, as do classes none of these
    /// can tell about: they are retransformed and the hook decides.
    fn declares_a_selected_method(
        &self,
        jvmti: Jvmti,
        jni: &Jni<'_>,
        class: Local<'_>,
        name: &str,
    ) -> bool {
        if self.filter.uses_annotations() {
            return true;
        }
        // Without a descriptor in any pattern, the name decides.
        let descriptors = self.filter.patterns().iter().any(|p| p.contains('('));
        let found = jvmti.any_method(class, descriptors, |method, descriptor, modifiers| {
            self.filter
                .matches(&MethodRef {
                    class: name,
                    name: method,
                    descriptor,
                    class_annotations: &[],
                    method_annotations: &[],
                })
                .is_some()
                // Native and abstract methods have no code to rewrite.
                && modifiers() & (0x0100 | 0x0400) == 0
        });
        if let Ok(found) = found {
            return found;
        }
        if !descriptors {
            if let Ok((count, pool)) = jvmti.constant_pool(class) {
                if let Some(names) = constant_pool::utf8_entries(count, &pool) {
                    return names.iter().any(|n| {
                        std::str::from_utf8(n).is_ok_and(|method| {
                            self.filter
                                .matches(&MethodRef {
                                    class: name,
                                    name: method,
                                    descriptor: "",
                                    class_annotations: &[],
                                    method_annotations: &[],
                                })
                                .is_some()
                        })
                    });
                }
            }
        }
        let Some(bytes) = class_files::read(jvmti, jni, class, name) else {
            return true;
        };
        let mut selected = false;
        let parsed = instrument(&bytes, &PROBE, &mut |m| {
            // Native and abstract methods have no code to rewrite.
            selected |= m.access & (0x0100 | 0x0400) == 0
                && self
                    .filter
                    .matches(&MethodRef {
                        class: m.class,
                        name: m.name,
                        descriptor: m.descriptor,
                        class_annotations: m.class_annotations,
                        method_annotations: m.method_annotations,
                    })
                    .is_some();
            None
        });
        selected || parsed.is_err()
    }

    /// Marks `ids` as excluded (the overhead budget removes them): the selector refuses
    /// them from now on, in every class rewritten later. Returns each id found with
    /// the internal name of its class, which the caller retransforms.
    pub fn exclude(&self, ids: &[u32]) -> Vec<(u32, String)> {
        let wanted: HashSet<u32> = ids.iter().copied().collect();
        let Ok(mut map) = self.ids.lock() else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for (key, e) in map.iter_mut() {
            if wanted.contains(&e.id) {
                e.excluded = true;
                found.push((e.id, key.class.clone()));
            }
        }
        found
    }

    /// Takes `id` back in (its class could not be retransformed without it: it keeps
    /// its probes, and the selector must give them again).
    pub fn include_again(&self, id: u32) {
        if let Ok(mut map) = self.ids.lock() {
            if let Some(e) = map.values_mut().find(|e| e.id == id) {
                e.excluded = false;
            }
        }
    }

    /// The internal name of the class that declares method `id`.
    pub fn class_of(&self, id: u32) -> Option<String> {
        let map = self.ids.lock().ok()?;
        map.iter()
            .find(|(_, e)| e.id == id)
            .map(|(k, _)| k.class.clone())
    }

    /// Retransforms every loaded class named in `names` (internal names), in one call
    /// (one safepoint, one round of deoptimisation: one class at a time, 300 classes
    /// took 8 s of Tomcat's throughput), else, when that fails, one at a time so that
    /// one refusal leaves the others done. Returns the names of which some class failed
    /// (it keeps its current code, with a warning: a failed retransformation never
    /// changes a class).
    pub fn retransform_named(
        &self,
        jvmti: Jvmti,
        jni: &Jni<'_>,
        names: &HashSet<String>,
    ) -> HashSet<String> {
        let mut failed = HashSet::new();
        if names.is_empty() {
            return failed;
        }
        let Some(classes) = self.loaded_classes(jvmti, jni, |_, name| names.contains(name)) else {
            return names.clone();
        };
        let refs: Vec<Local<'_>> = classes.iter().map(|c| c.0).collect();
        if jvmti.retransform_classes(&refs).is_err() {
            for (class, name) in &classes {
                if let Err(e) = jvmti.retransform_classes(&[*class]) {
                    counters::RETRANSFORM_FAILURES.incr();
                    meta::warning(format!(
                        "class {} not retransformed for the overhead budget, its methods stay traced: {e}",
                        meta::dotted(name)
                    ));
                    failed.insert(name.clone());
                }
            }
        }
        for class in refs {
            jni.delete_local(class);
        }
        failed
    }

    /// Warnings for include patterns that selected no method (written at the end).
    pub fn report_unmatched(&self) {
        for (pattern, hits) in self.filter.includes().iter().zip(&self.hits) {
            if hits.load(Ordering::Relaxed) == 0 {
                meta::warning(format!("filter '{pattern}' matched no method"));
            }
        }
    }
}

/// Retransforms `classes` (then frees their references); returns how many succeeded.
fn retransform(jvmti: Jvmti, jni: &Jni<'_>, classes: Vec<(Local<'_>, String)>) -> u64 {
    let refs: Vec<Local<'_>> = classes.iter().map(|c| c.0).collect();
    let mut done = 0;
    if jvmti.retransform_classes(&refs).is_ok() {
        done = refs.len() as u64;
    } else {
        // One bad class fails the whole batch: retry one by one to find it.
        for (class, name) in &classes {
            match jvmti.retransform_classes(&[*class]) {
                Ok(()) => done += 1,
                Err(e) => {
                    counters::RETRANSFORM_FAILURES.incr();
                    meta::warning(format!(
                        "class {} not retransformed: {e}",
                        meta::dotted(name)
                    ));
                }
            }
        }
    }
    for class in refs {
        jni.delete_local(class);
    }
    done
}
