//! What the agent is told to do: the option text of `-agentpath:...=<options>` (or of
//! the attach request), and the configuration text the collector left in the shared
//! file (docs/architecture.md, "Agent ↔ collector contract").

use std::fmt;
use std::path::PathBuf;

/// The parsed agent option string: `key=value` pairs separated by `,`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AgentOptions {
    /// The collector's shared buffer file (required).
    pub shm: PathBuf,
}

/// A mistake in the agent option string or in the collector's configuration text.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OptionError {
    /// No `shm=` option.
    MissingShm,
    /// An item without `=`.
    NotKeyValue(String),
    /// A key the agent does not know (a typo, or a newer collector).
    UnknownKey(String),
    /// The same key twice.
    Repeated(String),
    /// A key with an empty value.
    Empty(String),
    /// A value that is not one of the allowed ones.
    BadValue {
        key: String,
        value: String,
        expected: &'static str,
    },
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionError::MissingShm => write!(f, "agent options lack shm=<buffer file> (give -agentpath:libsonda.so=shm=/dev/shm/sonda-...)"),
            OptionError::NotKeyValue(item) => write!(f, "agent option '{item}' is not key=value"),
            OptionError::UnknownKey(key) => write!(f, "unknown agent option '{key}' (known: shm)"),
            OptionError::Repeated(key) => write!(f, "agent option '{key}' given twice"),
            OptionError::Empty(key) => write!(f, "agent option '{key}' has an empty value"),
            OptionError::BadValue { key, value, expected } => {
                write!(f, "configuration '{key}={value}' is invalid (expected {expected})")
            }
        }
    }
}

impl std::error::Error for OptionError {}

/// Parses the agent option string (`shm=/dev/shm/sonda-1-0.buf`).
pub fn parse_options(text: &str) -> Result<AgentOptions, OptionError> {
    let mut shm = None;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| OptionError::NotKeyValue(item.to_string()))?;
        let key = key.trim();
        if value.is_empty() {
            return Err(OptionError::Empty(key.to_string()));
        }
        match key {
            "shm" => {
                if shm.replace(PathBuf::from(value)).is_some() {
                    return Err(OptionError::Repeated(key.to_string()));
                }
            }
            _ => return Err(OptionError::UnknownKey(key.to_string())),
        }
    }
    Ok(AgentOptions {
        shm: shm.ok_or(OptionError::MissingShm)?,
    })
}

/// How the collector started the recording.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// The collector launched the JVM with `-agentpath`.
    Launch,
    /// The collector attached to a running JVM.
    Attach,
}

/// The collector's configuration for agents (one `key=value` per line).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Config {
    /// The `methods=` patterns, in order (the `sonda-filter` grammar).
    pub methods: Vec<String>,
    /// Record contended monitor enters (`monitors=1`, the default).
    pub monitors: bool,
    /// Record garbage collections (`gc=1`, the default).
    pub gc: bool,
    /// `mode=`, if given.
    pub mode: Option<Mode>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            methods: Vec::new(),
            monitors: true,
            gc: true,
            mode: None,
        }
    }
}

/// Parses the configuration text. Blank lines and `#` comments are skipped; unknown
/// keys are ignored so that a newer collector can add some (the agent option string,
/// typed by people, is strict instead). A bad value of a known key is an error.
pub fn parse_config(text: &str) -> Result<Config, OptionError> {
    let mut config = Config::default();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| OptionError::NotKeyValue(line.to_string()))?;
        let (key, value) = (key.trim(), value.trim());
        let flag = |v: &str| match v {
            "1" => Ok(true),
            "0" => Ok(false),
            _ => Err(OptionError::BadValue {
                key: key.to_string(),
                value: v.to_string(),
                expected: "0 or 1",
            }),
        };
        match key {
            "methods" => config.methods.push(value.to_string()),
            "monitors" => config.monitors = flag(value)?,
            "gc" => config.gc = flag(value)?,
            "mode" => {
                config.mode = Some(match value {
                    "launch" => Mode::Launch,
                    "attach" => Mode::Attach,
                    _ => {
                        return Err(OptionError::BadValue {
                            key: key.to_string(),
                            value: value.to_string(),
                            expected: "launch or attach",
                        })
                    }
                })
            }
            _ => {}
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_need_shm() {
        assert_eq!(
            parse_options("shm=/dev/shm/x.buf").unwrap().shm,
            PathBuf::from("/dev/shm/x.buf")
        );
        assert_eq!(
            parse_options(" shm=/a , ").unwrap().shm,
            PathBuf::from("/a")
        );
        assert_eq!(parse_options(""), Err(OptionError::MissingShm));
        assert_eq!(parse_options("shm="), Err(OptionError::Empty("shm".into())));
        assert_eq!(
            parse_options("shm=/a,shm=/b"),
            Err(OptionError::Repeated("shm".into()))
        );
        assert_eq!(
            parse_options("shm=/a,verbose"),
            Err(OptionError::NotKeyValue("verbose".into()))
        );
        assert_eq!(
            parse_options("shm=/a,sonda=1"),
            Err(OptionError::UnknownKey("sonda".into()))
        );
    }

    #[test]
    fn error_text_is_one_line() {
        for e in [OptionError::MissingShm, OptionError::UnknownKey("x".into())] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn config_keeps_method_order_and_defaults() {
        let c =
            parse_config("mode=launch\nmethods=a.B\n\nmethods=!a.B::c\ngc=0\nfuture=7\n").unwrap();
        assert_eq!(c.methods, vec!["a.B".to_string(), "!a.B::c".to_string()]);
        assert!(!c.gc);
        assert!(c.monitors);
        assert_eq!(c.mode, Some(Mode::Launch));
        assert_eq!(parse_config("").unwrap(), Config::default());
    }

    #[test]
    fn config_rejects_bad_values() {
        assert!(matches!(
            parse_config("gc=yes"),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            parse_config("mode=x"),
            Err(OptionError::BadValue { .. })
        ));
        assert!(matches!(
            parse_config("junk"),
            Err(OptionError::NotKeyValue(_))
        ));
    }
}
