//! Rewrites one method's Code attribute (JVMS 4.7.3) with the probes:
//! relocates the code, the exception table, the line and local-variable tables and
//! the StackMapTable, and appends the catch-all handler and its table entries.
//!
//! The catch-all ranges cover the original instructions only: not the entry probe
//! (if entering fails nothing was recorded, so nothing must be closed), not the exit
//! probes, and not the return instructions (an exit was already recorded there), so
//! no call records two exits. They are appended after the existing entries, which
//! thus keep precedence.

use crate::bytes::{Put, Reader, Truncated};
use crate::class_file::ClassFile;
use crate::error::MethodError;
use crate::init_site::{self, Phase};
use crate::layout::{Inserts, Layout};
use crate::opcodes::{self, Code};
use crate::probe_code::ProbeCode;
use crate::stack_map::StackMap;

/// What the Code rewrite needs from the class.
pub(crate) struct Context<'c, 'a> {
    pub(crate) class: &'c ClassFile<'a>,
    /// `java/lang/Throwable` Class index for the handler frame (versions >= 50).
    pub(crate) throwable: Option<u16>,
    /// `StackMapTable` Utf8 index, for methods that had no table (versions >= 50).
    pub(crate) stack_map_name: Option<u16>,
    /// Whether the method is a constructor that must be treated as one (every
    /// `<init>` except `java/lang/Object`'s).
    pub(crate) constructor: bool,
}

fn bad(_: Truncated) -> MethodError {
    MethodError::Malformed("truncated Code attribute")
}

/// Returns the new `info` bytes of the Code attribute.
pub(crate) fn rewrite(
    cx: &Context<'_, '_>,
    info: &[u8],
    probes: &ProbeCode,
) -> Result<Vec<u8>, MethodError> {
    let mut r = Reader::new(info);
    let max_stack = r.u16().map_err(bad)?;
    let max_locals = r.u16().map_err(bad)?;
    let code_len = r.u32().map_err(bad)? as usize;
    let code = Code::decode(r.bytes(code_len).map_err(bad)?).map_err(MethodError::Malformed)?;
    if code.insns.iter().any(|i| {
        matches!(i.op, opcodes::JSR | opcodes::JSR_W | opcodes::RET)
            || (i.op == opcodes::WIDE && code.bytes_of(i).get(1) == Some(&opcodes::RET))
    }) {
        return Err(MethodError::Subroutine);
    }
    let n_handlers = r.u16().map_err(bad)?;
    let mut handlers = Vec::with_capacity(n_handlers as usize);
    for _ in 0..n_handlers {
        let (s, e, h, t) = (
            r.u16().map_err(bad)?,
            r.u16().map_err(bad)?,
            r.u16().map_err(bad)?,
            r.u16().map_err(bad)?,
        );
        handlers.push((s as u32, e as u32, h as u32, t));
    }
    let n_attrs = r.u16().map_err(bad)?;
    let mut attrs = Vec::with_capacity(n_attrs as usize);
    for _ in 0..n_attrs {
        let name = r.u16().map_err(bad)?;
        let len = r.u32().map_err(bad)? as usize;
        attrs.push((name, r.bytes(len).map_err(bad)?));
    }
    if r.pos() != info.len() {
        return Err(MethodError::Malformed("bytes after the Code attributes"));
    }

    let init = if cx.constructor {
        let ranges: Vec<(u32, u32, u32)> = handlers.iter().map(|&(s, e, h, _)| (s, e, h)).collect();
        Some(init_site::find(&code, &ranges, &cx.class.cp)?)
    } else {
        None
    };
    let ins = Inserts {
        header: if init.is_some() { &[] } else { &probes.enter },
        exit: &probes.exit,
        post: init.as_ref().map(|s| (s.site, &probes.enter[..])),
    };
    let layout = Layout::compute(&code, &ins)?;
    let new_len = layout.end as usize + probes.handler.len();
    if new_len > 65535 {
        return Err(MethodError::TooLarge(new_len));
    }
    let new_max_stack = (max_stack as u32 + 1).max(2);
    let new_max_stack = u16::try_from(new_max_stack).map_err(|_| MethodError::StackOverflow)?;

    let target = |old: u32| layout.target(&code, old);
    let bad_range = MethodError::Malformed("exception table offset not at an instruction");

    // Exception table: the existing entries, then the catch-all ranges.
    let mut table: Vec<[u16; 4]> = Vec::with_capacity(handlers.len() + 4);
    for &(s, e, h, t) in &handlers {
        let (Some(ns), Some(ne), Some(nh)) = (target(s), target(e), target(h)) else {
            return Err(bad_range);
        };
        if s >= e || h >= code.len() {
            return Err(MethodError::Malformed("bad exception table entry"));
        }
        table.push([ns as u16, ne as u16, nh as u16, t]);
    }
    let handler_pc = layout.end as u16;
    let mut open: Option<(u32, u32)> = None;
    for (i, insn) in code.insns.iter().enumerate() {
        let covered = !opcodes::is_return(insn.op)
            && init.as_ref().is_none_or(|s| s.phases[i] == Phase::Post);
        if !covered {
            if let Some((s, e)) = open.take() {
                table.push([s as u16, e as u16, handler_pc, 0]);
            }
            continue;
        }
        let (_, at) = layout.span(i);
        let end = layout.after(&code, i);
        open = match open {
            Some((s, e)) if e == at => Some((s, end)),
            Some((s, e)) => {
                table.push([s as u16, e as u16, handler_pc, 0]);
                Some((at, end))
            }
            None => Some((at, end)),
        };
    }
    if let Some((s, e)) = open {
        table.push([s as u16, e as u16, handler_pc, 0]);
    }
    let table_len = u16::try_from(table.len())
        .map_err(|_| MethodError::Malformed("exception table too long"))?;

    // The new code.
    let mut out = Vec::with_capacity(info.len() + 64 + new_len - code_len);
    out.put_u16(new_max_stack);
    out.put_u16(max_locals);
    out.put_u32(new_len as u32);
    layout.emit(&code, &ins, &mut out);
    out.extend_from_slice(&probes.handler);
    out.put_u16(table_len);
    for e in &table {
        for v in e {
            out.put_u16(*v);
        }
    }

    // Attributes of the Code attribute.
    let cp = &cx.class.cp;
    let name_is = |idx: u16, s: &str| cp.utf8_bytes(idx) == Some(s.as_bytes());
    let frame_at = cx.throwable.map(|t| (layout.end, t));
    let mut new_attrs: Vec<(u16, Vec<u8>)> = Vec::with_capacity(attrs.len() + 1);
    let mut had_stack_map = false;
    for &(name, body) in &attrs {
        if name_is(name, "StackMapTable") && frame_at.is_none() {
            // Before version 50 the JVM ignores the table (type-inferring verifier),
            // and it would not describe the handler: dropped.
        } else if name_is(name, "StackMapTable") {
            if had_stack_map {
                return Err(MethodError::Malformed("two StackMapTable attributes"));
            }
            had_stack_map = true;
            let map = StackMap::parse(body)?;
            let insn = |old: u32| layout.insn(&code, old);
            new_attrs.push((name, map.encode(&target, &insn, frame_at)?));
        } else if name_is(name, "LineNumberTable") {
            new_attrs.push((name, line_numbers(body, &target)?));
        } else if name_is(name, "LocalVariableTable") || name_is(name, "LocalVariableTypeTable") {
            new_attrs.push((name, local_variables(body, &target)?));
        } else if name_is(name, "RuntimeVisibleTypeAnnotations")
            || name_is(name, "RuntimeInvisibleTypeAnnotations")
            || name_is(name, "CharacterRangeTable")
        {
            // They hold code offsets in forms not relocated here: dropped, since a
            // stale offset would make them invalid.
        } else {
            new_attrs.push((name, body.to_vec()));
        }
    }
    if !had_stack_map {
        if let (Some(name), Some(_)) = (cx.stack_map_name, frame_at) {
            let map = StackMap::empty();
            new_attrs.push((name, map.encode(&target, &target, frame_at)?));
        }
    }
    out.put_u16(new_attrs.len() as u16);
    for (name, body) in new_attrs {
        out.put_u16(name);
        out.put_u32(body.len() as u32);
        out.extend_from_slice(&body);
    }
    Ok(out)
}

/// Relocates a LineNumberTable; entries at offsets that are not instructions are
/// dropped (the JVM only requires them to be inside the code).
fn line_numbers(body: &[u8], target: &dyn Fn(u32) -> Option<u32>) -> Result<Vec<u8>, MethodError> {
    let mut r = Reader::new(body);
    let n = r.u16().map_err(bad)?;
    let mut entries = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let pc = r.u16().map_err(bad)? as u32;
        let line = r.u16().map_err(bad)?;
        // The entry probe at 0 belongs to the method's first line.
        let new = if pc == 0 { Some(0) } else { target(pc) };
        if let Some(new) = new {
            entries.push((new as u16, line));
        }
    }
    let mut out = Vec::with_capacity(2 + 4 * entries.len());
    out.put_u16(entries.len() as u16);
    for (pc, line) in entries {
        out.put_u16(pc);
        out.put_u16(line);
    }
    Ok(out)
}

/// Relocates a LocalVariableTable or LocalVariableTypeTable (same layout).
fn local_variables(
    body: &[u8],
    target: &dyn Fn(u32) -> Option<u32>,
) -> Result<Vec<u8>, MethodError> {
    let mut r = Reader::new(body);
    let n = r.u16().map_err(bad)?;
    let mut out = Vec::with_capacity(body.len());
    out.put_u16(n);
    for _ in 0..n {
        let start = r.u16().map_err(bad)? as u32;
        let len = r.u16().map_err(bad)? as u32;
        let rest = r.bytes(6).map_err(bad)?;
        let new_start = if start == 0 { Some(0) } else { target(start) };
        let (Some(s), Some(e)) = (new_start, target(start + len)) else {
            return Err(MethodError::Malformed(
                "local variable range not at instructions",
            ));
        };
        out.put_u16(s as u16);
        out.put_u16(e.saturating_sub(s) as u16);
        out.extend_from_slice(rest);
    }
    if r.pos() != body.len() {
        return Err(MethodError::Malformed(
            "bytes after the local variable table",
        ));
    }
    Ok(out)
}
