//! How the recorded command is started: finding it in `PATH`, finding the agent
//! library, and giving JVMs the agent.
//!
//! A command whose `argv[0]` is `java` gets `-agentpath:<libsonda.so>=shm=<buffer>`
//! right after `argv[0]`. Any other command gets the same option through
//! `JAVA_TOOL_OPTIONS` (appended to a value already set), so JVMs started by a script
//! (`catalina.sh`) or further down the process tree load the agent too; a command that
//! starts no JVM is unaffected. Every command also gets `SONDA_SHM=<buffer>`, through
//! which native programs linked with `libsonda.so` (the C API, `-finstrument-functions`)
//! find the recording.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sonda_shm::config::{AgentOptions, OptionsError};

/// The agent library's file name.
pub const AGENT_LIB: &str = "libsonda.so";
/// The environment variable naming the agent library explicitly.
pub const AGENT_ENV: &str = "SONDA_AGENT";
/// The environment variable every JVM reads options from.
pub(crate) const JAVA_TOOL_OPTIONS: &str = "JAVA_TOOL_OPTIONS";
/// The environment variable naming the buffer file for native programs that use the C
/// API (`libsonda.so` reads it when loaded into a process that is not a JVM). Set for
/// every recorded command; its children inherit it.
pub(crate) const SHM_ENV: &str = "SONDA_SHM";

/// Why the command cannot be started.
#[derive(Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// No executable of that name in `PATH` (or no such file for a path).
    NotFound(String),
    /// The file exists but is a directory or lacks execute permission.
    NotExecutable(String),
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::NotFound(c) => write!(f, "command not found: {c}"),
            LaunchError::NotExecutable(c) => write!(f, "not an executable file: {c}"),
        }
    }
}

impl std::error::Error for LaunchError {}

fn executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds the program `argv0` names, as a shell would: a name with a `/` is a path,
/// anything else is looked up in the directories of `path_var`.
pub fn resolve(argv0: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, LaunchError> {
    let shown = argv0.to_string_lossy().into_owned();
    if argv0.is_empty() {
        return Err(LaunchError::NotFound(shown));
    }
    if argv0.as_bytes().contains(&b'/') {
        let p = Path::new(argv0);
        return if executable(p) {
            Ok(p.to_path_buf())
        } else if p.exists() {
            Err(LaunchError::NotExecutable(shown))
        } else {
            Err(LaunchError::NotFound(shown))
        };
    }
    let mut seen_not_executable = false;
    for dir in std::env::split_paths(path_var.unwrap_or_default()) {
        // An empty PATH entry means the current directory.
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(argv0);
        if executable(&candidate) {
            return Ok(candidate);
        }
        seen_not_executable |= candidate.is_file();
    }
    if seen_not_executable {
        Err(LaunchError::NotExecutable(shown))
    } else {
        Err(LaunchError::NotFound(shown))
    }
}

/// Whether the command is a JVM launched directly.
pub fn is_java(argv0: &OsStr) -> bool {
    Path::new(argv0).file_name() == Some(OsStr::new("java"))
}

/// Finds the agent library: `$SONDA_AGENT` if set (it must exist), else `libsonda.so`
/// next to the sonda executable (both sit in the same cargo target directory).
/// `Ok(None)` when there is none.
pub fn find_agent(
    explicit: Option<OsString>,
    exe: Option<&Path>,
) -> Result<Option<PathBuf>, String> {
    if let Some(path) = explicit.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(&path);
        return match p.canonicalize() {
            Ok(abs) if abs.is_file() => Ok(Some(abs)),
            _ => Err(format!("{AGENT_ENV}={} is not a file", p.display())),
        };
    }
    let Some(dir) = exe.and_then(Path::parent) else {
        return Ok(None);
    };
    let candidate = dir.join(AGENT_LIB);
    Ok(candidate.canonicalize().ok().filter(|p| p.is_file()))
}

/// The JVM option that loads the agent on buffer file `shm`.
pub(crate) fn agent_option(lib: &Path, shm: &Path) -> Result<OsString, OptionsError> {
    let mut opt = OsString::from("-agentpath:");
    opt.push(lib);
    opt.push("=");
    opt.push(AgentOptions::new(shm).encode()?);
    Ok(opt)
}

/// The command line and environment change that give JVMs the agent.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Injection {
    /// The arguments after `argv[0]`.
    pub args: Vec<OsString>,
    /// `JAVA_TOOL_OPTIONS` to set, if any.
    pub java_tool_options: Option<OsString>,
}

/// Puts `option` right after `argv[0]` for `java`, else into `JAVA_TOOL_OPTIONS`
/// (after `existing`, quoted if it holds spaces, which the JVM's parser allows).
pub(crate) fn inject(
    argv: &[OsString],
    option: Option<&OsStr>,
    existing: Option<&OsStr>,
) -> Injection {
    let rest = argv.get(1..).unwrap_or_default().to_vec();
    let Some(option) = option else {
        return Injection {
            args: rest,
            java_tool_options: None,
        };
    };
    if argv.first().is_some_and(|a| is_java(a)) {
        let mut args = vec![option.to_os_string()];
        args.extend(rest);
        return Injection {
            args,
            java_tool_options: None,
        };
    }
    let mut value = OsString::new();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(existing);
        value.push(" ");
    }
    if option.as_bytes().iter().any(u8::is_ascii_whitespace) {
        value.push("\"");
        value.push(option);
        value.push("\"");
    } else {
        value.push(option);
    }
    Injection {
        args: rest,
        java_tool_options: Some(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn resolves_names_in_path_and_paths() {
        assert_eq!(
            resolve(OsStr::new("sh"), Some(OsStr::new("/nonexistent:/bin"))),
            Ok(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            resolve(OsStr::new("/bin/sh"), None),
            Ok(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            resolve(OsStr::new("no-such-command-x"), Some(OsStr::new("/bin"))),
            Err(LaunchError::NotFound("no-such-command-x".into()))
        );
        assert_eq!(
            resolve(OsStr::new("./nope/x"), None),
            Err(LaunchError::NotFound("./nope/x".into()))
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let shown = plain.display().to_string();
        assert_eq!(
            resolve(plain.as_os_str(), None),
            Err(LaunchError::NotExecutable(shown))
        );
        assert_eq!(
            resolve(OsStr::new("/tmp"), None),
            Err(LaunchError::NotExecutable("/tmp".into()))
        );
        assert_eq!(
            resolve(OsStr::new("plain"), Some(dir.path().as_os_str())),
            Err(LaunchError::NotExecutable("plain".into()))
        );
    }

    #[test]
    fn java_gets_the_option_after_argv0() {
        let opt = agent_option(
            Path::new("/opt/libsonda.so"),
            Path::new("/dev/shm/sonda-1-0.buf"),
        )
        .unwrap();
        assert_eq!(
            opt,
            "-agentpath:/opt/libsonda.so=shm=/dev/shm/sonda-1-0.buf"
        );
        let inj = inject(
            &os(&["/usr/bin/java", "-Xmx1g", "Main"]),
            Some(&opt),
            Some(OsStr::new("-Dx=1")),
        );
        assert_eq!(
            inj.args,
            os(&[
                "-agentpath:/opt/libsonda.so=shm=/dev/shm/sonda-1-0.buf",
                "-Xmx1g",
                "Main"
            ])
        );
        assert_eq!(inj.java_tool_options, None);
    }

    #[test]
    fn other_commands_get_java_tool_options_appended() {
        let opt = OsString::from("-agentpath:/a/libsonda.so=shm=/dev/shm/b");
        let inj = inject(&os(&["catalina.sh", "run"]), Some(&opt), None);
        assert_eq!(inj.args, os(&["run"]));
        assert_eq!(
            inj.java_tool_options.unwrap(),
            "-agentpath:/a/libsonda.so=shm=/dev/shm/b"
        );
        let inj = inject(&os(&["sh"]), Some(&opt), Some(OsStr::new("-Xss1m")));
        assert_eq!(
            inj.java_tool_options.unwrap(),
            "-Xss1m -agentpath:/a/libsonda.so=shm=/dev/shm/b"
        );
        let spaced = OsString::from("-agentpath:/my dir/libsonda.so=shm=/dev/shm/b");
        let inj = inject(&os(&["sh"]), Some(&spaced), None);
        assert_eq!(
            inj.java_tool_options.unwrap(),
            "\"-agentpath:/my dir/libsonda.so=shm=/dev/shm/b\""
        );
        let none = inject(&os(&["sh", "-c", "true"]), None, None);
        assert_eq!(
            none,
            Injection {
                args: os(&["-c", "true"]),
                java_tool_options: None
            }
        );
    }

    #[test]
    fn finds_the_agent_next_to_the_executable_or_from_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("sonda");
        assert_eq!(find_agent(None, Some(&exe)), Ok(None));
        std::fs::write(dir.path().join(AGENT_LIB), b"").unwrap();
        let found = find_agent(None, Some(&exe)).unwrap().unwrap();
        assert!(found.is_absolute() && found.ends_with(AGENT_LIB));
        let e = find_agent(Some("/no/such/lib.so".into()), Some(&exe)).unwrap_err();
        assert_eq!(e, "SONDA_AGENT=/no/such/lib.so is not a file");
        assert!(is_java(OsStr::new("/usr/lib/jvm/bin/java")) && !is_java(OsStr::new("javac")));
    }
}
