//! Where a constructor initialises `this`.
//!
//! Until the `super(...)`/`this(...)` call, `this` is `uninitializedThis` and the
//! verifier forbids an exception handler whose frame could see the method both
//! before and after that call (JVMS 4.10.1.9, `flagThisUninit`). So in a constructor
//! the entry probe goes right after the call and the catch-all handler covers only
//! code that runs after it.
//!
//! The call is found by abstract interpretation: each stack and local slot is either
//! "uninitializedThis" or "something else", propagated through branches and
//! exception handlers to a fixpoint, so that `super(c ? a : b)` (branches before the
//! call) and `super(new X())` (another uninitialised object, whose `<init>` must not
//! be mistaken for ours) are both handled. Every instruction gets one state: before
//! (`Pre`) or after (`Post`) the call; an instruction reachable in both states, a
//! second call site or a return reachable before the call makes the constructor
//! unsupported (typed error, class unchanged).

use crate::constant_pool::ConstantPool;
use crate::descriptor::{field_slots, method_slots};
use crate::error::MethodError;
use crate::opcodes::{self, Code};

/// Where each instruction stands relative to the init call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Unreached,
    Pre,
    Post,
}

/// Result of the analysis.
pub(crate) struct InitSite {
    /// Index of the `invokespecial <init>` instruction that initialises `this`.
    pub(crate) site: usize,
    /// Phase of every instruction (by index).
    pub(crate) phases: Vec<Phase>,
}

/// Abstract state before an instruction. After the init call nothing is tracked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Post,
    Pre {
        depth: u32,
        /// Stack positions (0 = bottom) holding uninitializedThis, sorted.
        stack_this: Vec<u32>,
        /// Locals holding uninitializedThis, sorted.
        locals_this: Vec<u16>,
    },
}

/// Upper bound on abstract instruction executions, so hostile input stays cheap.
const BUDGET: u64 = 4_000_000;

fn err(reason: &'static str) -> MethodError {
    MethodError::InitSite(reason)
}

fn intersect<T: Ord + Copy>(a: &mut Vec<T>, b: &[T]) -> bool {
    let before = a.len();
    a.retain(|x| b.binary_search(x).is_ok());
    a.len() != before
}

/// Merges `s` into `slot`; returns whether `slot` changed.
fn merge(slot: &mut Option<State>, s: &State) -> Result<bool, MethodError> {
    match (slot.as_mut(), s) {
        (None, _) => {
            *slot = Some(s.clone());
            Ok(true)
        }
        (Some(State::Post), State::Post) => Ok(false),
        (
            Some(State::Pre {
                depth,
                stack_this,
                locals_this,
            }),
            State::Pre {
                depth: d2,
                stack_this: s2,
                locals_this: l2,
            },
        ) => {
            if depth != d2 {
                return Err(err("inconsistent stack depth before super()"));
            }
            let a = intersect(stack_this, s2);
            let b = intersect(locals_this, l2);
            Ok(a || b)
        }
        _ => Err(err("code reachable both before and after super()")),
    }
}

/// Pure pop/push effects (in slots) of instructions that neither move
/// uninitializedThis nor touch locals.
fn simple(op: u8) -> Option<(u32, u32)> {
    Some(match op {
        0x00 | 0xa7 | 0xc8 => (0, 0),
        0x01..=0x08 | 0x0b..=0x0d | 0x10..=0x13 | 0xbb => (0, 1),
        0x09 | 0x0a | 0x0e | 0x0f | 0x14 => (0, 2),
        0x2e | 0x30 | 0x32..=0x35 => (2, 1),
        0x2f | 0x31 => (2, 2),
        0x4f | 0x51 | 0x53..=0x56 => (3, 0),
        0x50 | 0x52 => (4, 0),
        0x57 => (1, 0),
        0x58 => (2, 0),
        0x60..=0x73 => match (op - 0x60) % 4 {
            0 | 2 => (2, 1),
            _ => (4, 2),
        },
        0x74..=0x77 => match op - 0x74 {
            0 | 2 => (1, 1),
            _ => (2, 2),
        },
        0x78..=0x7d => match (op - 0x78) % 2 {
            0 => (2, 1),
            _ => (3, 2),
        },
        0x7e..=0x83 => match (op - 0x7e) % 2 {
            0 => (2, 1),
            _ => (4, 2),
        },
        0x85 | 0x87 | 0x8c | 0x8d => (1, 2),
        0x86 | 0x8b | 0x91..=0x93 => (1, 1),
        0x88 | 0x89 | 0x8e | 0x90 => (2, 1),
        0x8a | 0x8f => (2, 2),
        0x94 | 0x97 | 0x98 => (4, 1),
        0x95 | 0x96 => (2, 1),
        0x99..=0x9e | 0xaa | 0xab | 0xc6 | 0xc7 => (1, 0),
        0x9f..=0xa6 => (2, 0),
        0xac | 0xae | 0xb0 | 0xbf | 0xc2 | 0xc3 => (1, 0),
        0xad | 0xaf => (2, 0),
        0xb1 => (0, 0),
        0xbc..=0xbe | 0xc0 | 0xc1 => (1, 1),
        _ => return None,
    })
}

/// Operand-stack shuffles: (slots taken from the top, new order by index
/// from the deepest taken slot).
fn shuffle(op: u8) -> Option<(usize, &'static [usize])> {
    Some(match op {
        0x59 => (1, &[0, 0]),
        0x5a => (2, &[1, 0, 1]),
        0x5b => (3, &[2, 0, 1, 2]),
        0x5c => (2, &[0, 1, 0, 1]),
        0x5d => (3, &[1, 2, 0, 1, 2]),
        0x5e => (4, &[2, 3, 0, 1, 2, 3]),
        0x5f => (2, &[1, 0]),
        _ => return None,
    })
}

struct Frame {
    depth: u32,
    stack_this: Vec<u32>,
    locals_this: Vec<u16>,
}

impl Frame {
    fn pop(&mut self, n: u32) -> Result<(), MethodError> {
        if n > self.depth {
            return Err(MethodError::Malformed("operand stack underflow"));
        }
        self.depth -= n;
        let d = self.depth;
        self.stack_this.retain(|&p| p < d);
        Ok(())
    }
    fn push(&mut self, n: u32, this: bool) {
        if this {
            self.stack_this.push(self.depth);
        }
        self.depth += n;
    }
    fn is_this(&self, from_top: u32) -> bool {
        self.depth
            .checked_sub(from_top + 1)
            .is_some_and(|p| self.stack_this.binary_search(&p).is_ok())
    }
    fn set_local(&mut self, index: u32, this: bool) {
        let Ok(i) = u16::try_from(index) else { return };
        match (self.locals_this.binary_search(&i), this) {
            (Ok(p), false) => {
                self.locals_this.remove(p);
            }
            (Err(p), true) => self.locals_this.insert(p, i),
            _ => {}
        }
    }
    fn local_is_this(&self, index: u32) -> bool {
        u16::try_from(index).is_ok_and(|i| self.locals_this.binary_search(&i).is_ok())
    }
}

/// What one instruction does to a `Pre` state.
enum Step {
    Next(State),
    /// The init call: everything after is `Post`.
    Init,
}

fn step(
    code: &Code<'_>,
    idx: usize,
    cp: &ConstantPool<'_>,
    s: &State,
) -> Result<Step, MethodError> {
    let State::Pre {
        depth,
        stack_this,
        locals_this,
    } = s
    else {
        return Ok(Step::Next(State::Post));
    };
    let mut f = Frame {
        depth: *depth,
        stack_this: stack_this.clone(),
        locals_this: locals_this.clone(),
    };
    let insn = &code.insns[idx];
    let b = code.bytes_of(insn);
    let op = insn.op;
    let bad = |r| MethodError::Malformed(r);
    let u16_operand = || crate::bytes::u16_at(b, 1).ok_or(bad("truncated operand"));
    if let Some((pop, push)) = simple(op) {
        f.pop(pop)?;
        f.push(push, false);
    } else if let Some((k, order)) = shuffle(op) {
        let vals: Vec<bool> = (0..k as u32).rev().map(|i| f.is_this(i)).collect();
        f.pop(k as u32)?;
        for &o in order {
            f.push(1, vals[o]);
        }
    } else {
        // (kind, local index, is load): kind 0 int, 1 long, 2 float, 3 double, 4 ref.
        let local = match op {
            0x15..=0x19 => Some((op - 0x15, b[1] as u32, true)),
            0x1a..=0x2d => Some(((op - 0x1a) / 4, ((op - 0x1a) % 4) as u32, true)),
            0x36..=0x3a => Some((op - 0x36, b[1] as u32, false)),
            0x3b..=0x4e => Some(((op - 0x3b) / 4, ((op - 0x3b) % 4) as u32, false)),
            opcodes::WIDE => {
                let index = crate::bytes::u16_at(b, 2).ok_or(bad("truncated wide"))? as u32;
                match b[1] {
                    0x15..=0x19 => Some((b[1] - 0x15, index, true)),
                    0x36..=0x3a => Some((b[1] - 0x36, index, false)),
                    0x84 => {
                        f.set_local(index, false);
                        None
                    }
                    _ => return Err(MethodError::Subroutine),
                }
            }
            _ => None,
        };
        if let Some((kind, index, load)) = local {
            let slots = if kind == 1 || kind == 3 { 2 } else { 1 };
            if load {
                let this = kind == 4 && f.local_is_this(index);
                f.push(slots, this);
            } else {
                let this = kind == 4 && f.is_this(0);
                f.pop(slots)?;
                f.set_local(index, this);
                if slots == 2 {
                    f.set_local(index + 1, false);
                }
            }
        } else {
            match op {
                opcodes::WIDE => {}
                0x84 => f.set_local(b[1] as u32, false),
                0xb2..=0xb5 => {
                    let (_, _, desc) = cp
                        .member_ref(u16_operand()?)
                        .ok_or(bad("bad field reference"))?;
                    let size = field_slots(desc).ok_or(bad("bad field descriptor"))?;
                    match op {
                        0xb2 => f.push(size, false),
                        0xb3 => f.pop(size)?,
                        0xb4 => {
                            f.pop(1)?;
                            f.push(size, false)
                        }
                        _ => f.pop(size + 1)?,
                    }
                }
                0xb6..=0xba => {
                    let index = u16_operand()?;
                    let (name, desc) = if op == 0xba {
                        cp.invoke_dynamic(index).ok_or(bad("bad invokedynamic"))?
                    } else {
                        let (_, n, d) = cp.member_ref(index).ok_or(bad("bad method reference"))?;
                        (n, d)
                    };
                    let (args, ret) = method_slots(desc).ok_or(bad("bad method descriptor"))?;
                    let receiver = u32::from(op != opcodes::INVOKESTATIC && op != 0xba);
                    if op == opcodes::INVOKESPECIAL && name == b"<init>" && f.is_this(args) {
                        return Ok(Step::Init);
                    }
                    f.pop(args + receiver)?;
                    f.push(ret, false);
                }
                0xc5 => {
                    f.pop(*b.get(3).ok_or(bad("truncated multianewarray"))? as u32)?;
                    f.push(1, false);
                }
                opcodes::JSR | opcodes::RET | opcodes::JSR_W => {
                    return Err(MethodError::Subroutine)
                }
                _ => return Err(bad("unknown opcode")),
            }
        }
    }
    Ok(Step::Next(State::Pre {
        depth: f.depth,
        stack_this: f.stack_this,
        locals_this: f.locals_this,
    }))
}

/// Finds the init call of a constructor.
///
/// `handlers` are the original (start, end, handler) offsets of the exception table.
pub(crate) fn find(
    code: &Code<'_>,
    handlers: &[(u32, u32, u32)],
    cp: &ConstantPool<'_>,
) -> Result<InitSite, MethodError> {
    let n = code.insns.len();
    let mut states: Vec<Option<State>> = vec![None; n];
    let mut queued = vec![false; n];
    let mut work = vec![0usize];
    states[0] = Some(State::Pre {
        depth: 0,
        stack_this: vec![],
        locals_this: vec![0],
    });
    queued[0] = true;
    let mut site: Option<usize> = None;
    let mut budget = BUDGET;
    // Handler index ranges as instruction indices.
    let mut hs = Vec::with_capacity(handlers.len());
    for &(start, end, handler) in handlers {
        let (Some(s), Some(e), Some(h)) = (code.at(start), code.at(end), code.at(handler)) else {
            return Err(MethodError::Malformed(
                "exception table offset not at an instruction",
            ));
        };
        if h >= n {
            return Err(MethodError::Malformed(
                "exception handler at the end of the code",
            ));
        }
        hs.push((s, e, h));
    }
    while let Some(i) = work.pop() {
        queued[i] = false;
        budget = budget.saturating_sub(1 + hs.len() as u64);
        if budget == 0 {
            return Err(err("constructor too complex to analyse"));
        }
        let Some(state) = states[i].clone() else {
            continue;
        };
        let insn = &code.insns[i];
        let out = match step(code, i, cp, &state)? {
            Step::Next(s) => s,
            Step::Init => {
                if site.is_some_and(|s| s != i) {
                    return Err(err("more than one super()/this() call"));
                }
                site = Some(i);
                State::Post
            }
        };
        if opcodes::is_return(insn.op) && matches!(state, State::Pre { .. }) {
            return Err(err("return reachable before super()"));
        }
        // Exception handlers see the locals before and after the instruction; the
        // stack holds just the exception.
        for &(s, e, h) in &hs {
            if s <= i && i < e {
                for st in [&state, &out] {
                    let hstate = match st {
                        State::Post => State::Post,
                        State::Pre { locals_this, .. } => State::Pre {
                            depth: 1,
                            stack_this: vec![],
                            locals_this: locals_this.clone(),
                        },
                    };
                    if merge(&mut states[h], &hstate)? && !queued[h] {
                        queued[h] = true;
                        work.push(h);
                    }
                }
            }
        }
        let op = insn.op;
        let falls = !(opcodes::is_return(op)
            || matches!(op, opcodes::GOTO | opcodes::GOTO_W | opcodes::ATHROW)
            || op == opcodes::TABLESWITCH
            || op == opcodes::LOOKUPSWITCH);
        let mut succ: Vec<usize> = code
            .targets_of(insn)
            .iter()
            .filter_map(|&t| code.at(t))
            .collect();
        if falls {
            if i + 1 >= n {
                return Err(MethodError::Malformed("code falls off its end"));
            }
            succ.push(i + 1);
        }
        for j in succ {
            if merge(&mut states[j], &out)? && !queued[j] {
                queued[j] = true;
                work.push(j);
            }
        }
    }
    let site = site.ok_or(err("no super()/this() call found"))?;
    let phases = states
        .iter()
        .map(|s| match s {
            None => Phase::Unreached,
            Some(State::Pre { .. }) => Phase::Pre,
            Some(State::Post) => Phase::Post,
        })
        .collect();
    Ok(InitSite { site, phases })
}
