//! The bytes of HotSpot's attach protocol (version 1), with no I/O.
//!
//! Request: `"1\0" <command> "\0" <arg1> "\0" <arg2> "\0" <arg3> "\0"`: always three
//! arguments, empty when unused. HotSpot rejects a command name over 16 bytes and an
//! argument over 1024 bytes (`AttachOperation::name_length_max`/`arg_length_max`) by
//! closing the connection without a word, so they are checked here.
//!
//! Reply: `<status>\n<output>`, then the JVM closes the connection.

use crate::error::AttachError;

/// Longest command name HotSpot accepts.
pub const MAX_COMMAND_LEN: usize = 16;
/// Longest argument HotSpot accepts.
pub const MAX_ARG_LEN: usize = 1024;
/// Number of arguments in a request.
pub const ARG_COUNT: usize = 3;

/// What the JVM answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status on the first line: 0 when the command ran (for `jcmd`, even when the
    /// diagnostic command itself failed: read `output`).
    pub status: i32,
    /// Everything after the first line (lossily decoded as UTF-8).
    pub output: String,
}

/// Encodes a request, or says why HotSpot would refuse it.
pub(crate) fn encode_request(command: &str, args: &[&str]) -> Result<Vec<u8>, AttachError> {
    let invalid = |why: String| Err(AttachError::InvalidRequest(why));
    if command.is_empty() || command.len() > MAX_COMMAND_LEN || command.contains('\0') {
        return invalid(format!(
            "command {command:?} must be 1 to {MAX_COMMAND_LEN} bytes without NUL"
        ));
    }
    if args.len() > ARG_COUNT {
        return invalid(format!(
            "{} arguments given, the protocol carries at most {ARG_COUNT}",
            args.len()
        ));
    }
    for arg in args {
        if arg.len() > MAX_ARG_LEN || arg.contains('\0') {
            return invalid(format!(
                "argument of {} bytes: at most {MAX_ARG_LEN} bytes without NUL",
                arg.len()
            ));
        }
    }
    let mut out = Vec::with_capacity(
        2 + command.len() + 1 + args.iter().map(|a| a.len() + 1).sum::<usize>() + ARG_COUNT,
    );
    out.extend_from_slice(b"1\0");
    out.extend_from_slice(command.as_bytes());
    out.push(0);
    for i in 0..ARG_COUNT {
        if let Some(arg) = args.get(i) {
            out.extend_from_slice(arg.as_bytes());
        }
        out.push(0);
    }
    Ok(out)
}

/// Splits a complete reply into status and output.
pub(crate) fn parse_reply(bytes: &[u8]) -> Result<Reply, AttachError> {
    if bytes.is_empty() {
        return Err(AttachError::Protocol(
            "the JVM closed the connection without a reply (it refuses peers whose \
             euid/egid differ from its own unless they are root)"
                .to_string(),
        ));
    }
    let (first, rest) = match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (bytes, &[][..]),
    };
    let first = String::from_utf8_lossy(first);
    let status = first.trim().parse::<i32>().map_err(|_| {
        AttachError::Protocol(format!(
            "the reply does not start with a status line: {:?}",
            truncate(&first, 80)
        ))
    })?;
    Ok(Reply {
        status,
        output: String::from_utf8_lossy(rest).into_owned(),
    })
}

/// Reads the reply of `load`: `Ok(n)` when the JVM called `Agent_OnAttach` and it
/// returned `n`; an error when the library could not be loaded.
///
/// JDK 9-20: `0\nreturn code: <n>` when Agent_OnAttach ran, status -1 and a message
/// otherwise. JDK 8: `0\n<n>`. JDK 21+: status always 0, a message instead of the
/// return code when loading failed.
pub(crate) fn parse_load_reply(reply: &Reply) -> Result<i32, AttachError> {
    let text = reply.output.trim();
    if reply.status == 0 {
        let code = text.strip_prefix("return code:").unwrap_or(text).trim();
        if let Ok(n) = code.parse::<i32>() {
            return Ok(n);
        }
    }
    Err(AttachError::AgentLoadFailed {
        code: if reply.status == 0 { -1 } else { reply.status },
        message: text.to_string(),
    })
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_always_carries_three_arguments() {
        assert_eq!(
            encode_request("jcmd", &["VM.version"]).unwrap(),
            b"1\0jcmd\0VM.version\0\0\0"
        );
        assert_eq!(
            encode_request("load", &["/a/lib.so", "true", "shm=/dev/shm/x"]).unwrap(),
            b"1\0load\0/a/lib.so\0true\0shm=/dev/shm/x\0"
        );
        assert_eq!(
            encode_request("threaddump", &[]).unwrap(),
            b"1\0threaddump\0\0\0\0"
        );
    }

    #[test]
    fn request_limits_are_hotspots() {
        let long = "x".repeat(MAX_ARG_LEN);
        assert!(encode_request("load", &[&long]).is_ok());
        let longer = "x".repeat(MAX_ARG_LEN + 1);
        for bad in [
            encode_request("load", &[&longer]),
            encode_request("", &[]),
            encode_request("abcdefghijklmnopq", &[]),
            encode_request("jcmd", &["a", "b", "c", "d"]),
            encode_request("jcmd", &["a\0b"]),
        ] {
            let e = bad.unwrap_err();
            assert!(matches!(e, AttachError::InvalidRequest(_)), "{e:?}");
        }
    }

    #[test]
    fn reply_splits_status_and_output() {
        let r = parse_reply(b"0\n17.0.15+6\nJDK 17.0.15\n").unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(r.output, "17.0.15+6\nJDK 17.0.15\n");
        assert_eq!(parse_reply(b"-1").unwrap().status, -1);
        assert_eq!(parse_reply(b"-1").unwrap().output, "");
        assert!(matches!(parse_reply(b""), Err(AttachError::Protocol(_))));
        assert!(matches!(
            parse_reply(b"hello\nworld"),
            Err(AttachError::Protocol(_))
        ));
    }

    #[test]
    fn load_replies_of_each_jdk_generation() {
        let reply = |status, output: &str| Reply {
            status,
            output: output.to_string(),
        };
        assert_eq!(parse_load_reply(&reply(0, "return code: 0\n")).unwrap(), 0);
        assert_eq!(parse_load_reply(&reply(0, "return code: 7\n")).unwrap(), 7);
        assert_eq!(parse_load_reply(&reply(0, "-3\n")).unwrap(), -3); // JDK 8
        match parse_load_reply(&reply(-1, "/x.so was not loaded.\nno such file\n")) {
            Err(AttachError::AgentLoadFailed { code, message }) => {
                assert_eq!(code, -1);
                assert_eq!(message, "/x.so was not loaded.\nno such file");
            }
            other => panic!("{other:?}"),
        }
        // JDK 21+: status 0 with a message.
        assert!(matches!(
            parse_load_reply(&reply(0, "Agent_OnAttach is not available in /x.so\n")),
            Err(AttachError::AgentLoadFailed { code: -1, .. })
        ));
    }
}
