//! What the agent's `Agent_OnAttach` returns, which the JVM passes back to the attaching
//! collector as `return code: <n>`: 0 when recording started, else why not. Codes are
//! part of the agent ↔ collector contract, so both sides take them from here.
//!
//! A non-zero code makes HotSpot unload the library again (`dlclose`); the agent only
//! returns one before it started anything (no callbacks, no threads), or when an
//! earlier attach left the library loaded.

/// Recording started.
pub const OK: i32 = 0;
/// A recording is already running in this JVM (another collector's): one at a time.
pub const BUSY: i32 = 0x50_01;
/// The previous recording is still stopping (restoring classes): try again shortly.
pub const STOPPING: i32 = 0x50_02;
/// The agent option string is malformed (no `shm=`, an unknown key).
pub const BAD_OPTIONS: i32 = 0x50_03;
/// The buffer file could not be opened or mapped by the JVM's process.
pub const BAD_BUFFER: i32 = 0x50_04;
/// The configuration text in the buffer file is invalid (a bad `methods=` filter).
pub const BAD_CONFIG: i32 = 0x50_05;
/// JVMTI refused what the agent needs (an environment, capabilities, callbacks).
pub const JVMTI: i32 = 0x50_06;
/// The agent was loaded at JVM start (`-agentpath`) and records for that collector.
pub const LAUNCHED: i32 = 0x50_07;
/// The agent failed internally (a panic caught at the boundary).
pub const INTERNAL: i32 = 0x50_08;

/// A one-line explanation of a non-zero code, for the collector's error message.
pub fn describe(code: i32) -> Option<&'static str> {
    Some(match code {
        BUSY => "another sonda is recording this JVM; stop it first (one recording at a time)",
        STOPPING => "the previous recording of this JVM is still restoring its classes; try again in a moment",
        BAD_OPTIONS => "the agent rejected its option string",
        BAD_BUFFER => "the JVM could not open the buffer file (see the JVM's stderr)",
        BAD_CONFIG => "the agent rejected the configuration in the buffer file",
        JVMTI => "JVMTI refused the agent's capabilities or callbacks (see the JVM's stderr)",
        LAUNCHED => "this JVM was started with the sonda agent (sonda record) and records for that sonda",
        INTERNAL => "internal error in the agent (see the JVM's stderr)",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_described_on_one_line() {
        let all = [
            BUSY,
            STOPPING,
            BAD_OPTIONS,
            BAD_BUFFER,
            BAD_CONFIG,
            JVMTI,
            LAUNCHED,
            INTERNAL,
        ];
        let mut seen = std::collections::BTreeSet::new();
        for c in all {
            assert!(seen.insert(c), "code {c} twice");
            let text = describe(c).unwrap();
            assert!(!text.contains('\n'));
        }
        assert_eq!(describe(OK), None);
        assert_eq!(describe(7), None);
    }
}
