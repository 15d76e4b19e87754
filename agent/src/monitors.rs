//! Contended monitors: JVMTI MonitorContendedEnter/Entered become MONITOR_CONTENDED /
//! MONITOR_ENTERED records whose argument is the monitor object's class, interned as a
//! small id (`Meta::MonitorClass`, ids from `Region::next_class_id`).
//!
//! The time is read first, so the lookup does not shift the record. The class's id is
//! kept as the JVMTI tag of the class object (with the recording's generation in the
//! high half: tags outlive a recording, ids do not), so later contentions on the same
//! class cost one GetTag; the first one per class name allocates and takes a lock (the thread
//! is about to block anyway). The Entered event reuses the id its Enter found, kept in
//! thread-local storage (a thread waits for one monitor at a time).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;

use sonda_shm::records;
use sonda_trace::Meta;

use crate::jvmti::{Jni, Jvmti, Local};
use crate::{buffers, clock, counters, meta};

thread_local! {
    /// Class id of the monitor this thread is waiting for (0: none known).
    static WAITING_FOR: Cell<u32> = const { Cell::new(0) };
}

/// Interned monitor class names.
pub struct Monitors {
    ids: Mutex<Option<HashMap<String, u32>>>,
}

impl Default for Monitors {
    fn default() -> Self {
        Self::new()
    }
}

impl Monitors {
    /// Nothing interned yet.
    pub const fn new() -> Monitors {
        Monitors {
            ids: Mutex::new(None),
        }
    }

    /// MonitorContendedEnter: the current thread is about to block on `object`.
    pub fn contended(&self, jvmti: Jvmti, jni: &Jni<'_>, object: Local<'_>) {
        let time = clock::now();
        let id = self.class_id(jvmti, jni, object);
        let _ = WAITING_FOR.try_with(|w| w.set(id));
        buffers::record(time, records::MONITOR_CONTENDED, id);
    }

    /// MonitorContendedEntered: the current thread got the monitor.
    pub fn entered(&self, jvmti: Jvmti, jni: &Jni<'_>, object: Local<'_>) {
        let time = clock::now();
        let id = match WAITING_FOR.try_with(|w| w.replace(0)) {
            Ok(id) if id != 0 => id,
            _ => self.class_id(jvmti, jni, object),
        };
        buffers::record(time, records::MONITOR_ENTERED, id);
    }

    /// The id of `object`'s class, interning it on first sight. 0 if unknown.
    fn class_id(&self, jvmti: Jvmti, jni: &Jni<'_>, object: Local<'_>) -> u32 {
        let Ok(class) = jni.object_class(object) else {
            return 0;
        };
        let generation = buffers::generation();
        let id = match jvmti.tag(class).map(split_tag) {
            Ok((g, id)) if g == generation && id > 0 => id,
            _ => {
                let name = match jvmti.class_signature(class) {
                    Ok(sig) => class_name_of_signature(&sig),
                    Err(_) => "?".to_string(),
                };
                let id = self.intern(name);
                let _ = jvmti.set_tag(class, make_tag(generation, id));
                id
            }
        };
        jni.delete_local(class);
        id
    }

    fn intern(&self, name: String) -> u32 {
        let Ok(mut guard) = self.ids.lock() else {
            return 0;
        };
        let ids = guard.get_or_insert_with(HashMap::new);
        if let Some(&id) = ids.get(&name) {
            return id;
        }
        let Some(region) = buffers::region() else {
            return 0;
        };
        let id = region.next_class_id();
        ids.insert(name.clone(), id);
        counters::MONITOR_CLASSES.incr();
        meta::write(&Meta::MonitorClass { id, name });
        id
    }
}

/// A class tag: the recording's generation, then the class id.
fn make_tag(generation: u32, id: u32) -> i64 {
    (i64::from(generation) << 32) | i64::from(id)
}

/// (generation, class id) of a tag; an untagged class gives (0, 0).
fn split_tag(tag: i64) -> (u32, u32) {
    ((tag >> 32) as u32, tag as u32)
}

/// `Ljava/lang/Object;` → `java.lang.Object`; `[I` stays as the JVM writes it.
fn class_name_of_signature(sig: &str) -> String {
    match sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) {
        Some(internal) => meta::dotted(internal),
        None => sig.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_carry_the_generation() {
        assert_eq!(split_tag(make_tag(3, 17)), (3, 17));
        assert_eq!(
            split_tag(make_tag(u32::MAX >> 1, u32::MAX)),
            (u32::MAX >> 1, u32::MAX)
        );
        assert_eq!(split_tag(0), (0, 0));
    }

    #[test]
    fn signatures_become_dotted_names() {
        assert_eq!(
            class_name_of_signature("Ljava/lang/Object;"),
            "java.lang.Object"
        );
        assert_eq!(
            class_name_of_signature("Lpkg/Outer$Inner;"),
            "pkg.Outer$Inner"
        );
        assert_eq!(class_name_of_signature("[I"), "[I");
    }
}
