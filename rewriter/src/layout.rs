//! New offsets of the original instructions once probes are inserted, and the new
//! code array.
//!
//! Inserted code, in order:
//! - the *header* (entry probe) before the first instruction; branches to offset 0
//!   (a loop back to the start) skip it, so it runs once per call;
//! - the *exit* probe before every `*return`; branches to the return land on the
//!   probe, so every way out passes through it;
//! - the *post* sequence right after one instruction (the entry probe after a
//!   constructor's `super()` call); branches to the next instruction skip it.
//!
//! `goto`/`jsr` whose 16-bit offset no longer fits become `goto_w`/`jsr_w`, which
//! grows the code and may push other branches out of range, so the layout is
//! recomputed until nothing changes (sizes only grow, so this terminates). Switch
//! padding is recomputed at each instruction's new offset. A conditional branch that
//! no longer fits is a typed error.

use crate::bytes::{i32_at, Put};
use crate::error::MethodError;
use crate::opcodes::{self, Code};

/// The inserted sequences (their bytes are position independent).
pub(crate) struct Inserts<'b> {
    pub(crate) header: &'b [u8],
    pub(crate) exit: &'b [u8],
    pub(crate) post: Option<(usize, &'b [u8])>,
}

/// Offsets in the new code.
pub(crate) struct Layout {
    /// Where branches to instruction `i` land (its exit probe, if any).
    target: Vec<u32>,
    /// Where instruction `i` itself starts.
    at: Vec<u32>,
    /// Widened `goto`/`jsr`.
    wide: Vec<bool>,
    /// End of the relocated original code (where the handler goes).
    pub(crate) end: u32,
}

fn old_padding(off: u32) -> u32 {
    opcodes::switch_padding(off)
}

impl Layout {
    pub(crate) fn compute(code: &Code<'_>, ins: &Inserts<'_>) -> Result<Layout, MethodError> {
        let n = code.insns.len();
        let mut l = Layout {
            target: vec![0; n],
            at: vec![0; n],
            wide: vec![false; n],
            end: 0,
        };
        loop {
            l.place(code, ins);
            let mut changed = false;
            let mut overflow = false;
            for (i, insn) in code.insns.iter().enumerate() {
                if !opcodes::is_branch16(insn.op) || l.wide[i] {
                    continue;
                }
                let Some(&t) = code.targets_of(insn).first() else {
                    continue;
                };
                let d = l.target_of(code, t) as i64 - l.at[i] as i64;
                if i16::try_from(d).is_err() {
                    if opcodes::is_conditional(insn.op) {
                        overflow = true;
                    } else {
                        l.wide[i] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                if overflow {
                    return Err(MethodError::JumpOverflow);
                }
                return Ok(l);
            }
        }
    }

    fn size(&self, code: &Code<'_>, i: usize) -> u32 {
        let insn = &code.insns[i];
        match insn.op {
            opcodes::TABLESWITCH | opcodes::LOOKUPSWITCH => {
                insn.len - old_padding(insn.off) + opcodes::switch_padding(self.at[i])
            }
            opcodes::GOTO | opcodes::JSR if self.wide[i] => 5,
            _ => insn.len,
        }
    }

    fn place(&mut self, code: &Code<'_>, ins: &Inserts<'_>) {
        let mut cur = ins.header.len() as u32;
        for (i, insn) in code.insns.iter().enumerate() {
            self.target[i] = cur;
            if opcodes::is_return(insn.op) {
                cur += ins.exit.len() as u32;
            }
            self.at[i] = cur;
            cur += self.size(code, i);
            if let Some((p, bytes)) = ins.post {
                if p == i {
                    cur += bytes.len() as u32;
                }
            }
        }
        self.end = cur;
    }

    fn target_of(&self, code: &Code<'_>, old: u32) -> u32 {
        match code.at(old) {
            Some(i) if i < self.target.len() => self.target[i],
            _ => self.end,
        }
    }

    /// New offset for a branch target / frame / range boundary at original `old`
    /// (the code length maps to `end`).
    pub(crate) fn target(&self, code: &Code<'_>, old: u32) -> Option<u32> {
        let i = code.at(old)?;
        Some(if i < self.target.len() {
            self.target[i]
        } else {
            self.end
        })
    }

    /// New offset of the instruction itself at original `old`.
    pub(crate) fn insn(&self, code: &Code<'_>, old: u32) -> Option<u32> {
        let i = code.at(old)?;
        self.at.get(i).copied()
    }

    /// New offset of instruction `i` (index) and of its branch-target start.
    pub(crate) fn span(&self, i: usize) -> (u32, u32) {
        (self.target[i], self.at[i])
    }

    /// New offset just past instruction `i` (before any post sequence).
    pub(crate) fn after(&self, code: &Code<'_>, i: usize) -> u32 {
        self.at[i] + self.size(code, i)
    }

    /// Writes the new code array (without the handler).
    pub(crate) fn emit(&self, code: &Code<'_>, ins: &Inserts<'_>, out: &mut Vec<u8>) {
        let base = out.len();
        out.extend_from_slice(ins.header);
        for (i, insn) in code.insns.iter().enumerate() {
            if opcodes::is_return(insn.op) {
                out.extend_from_slice(ins.exit);
            }
            debug_assert_eq!(out.len() - base, self.at[i] as usize);
            let here = self.at[i] as i64;
            let rel = |t: u32| (self.target_of(code, t) as i64 - here) as i32;
            let targets = code.targets_of(insn);
            let bytes = code.bytes_of(insn);
            match insn.op {
                op if opcodes::is_branch16(op) => {
                    let d = rel(targets[0]);
                    if self.wide[i] {
                        out.put_u8(if op == opcodes::GOTO {
                            opcodes::GOTO_W
                        } else {
                            opcodes::JSR_W
                        });
                        out.put_i32(d);
                    } else {
                        out.put_u8(op);
                        out.put_i16(d as i16);
                    }
                }
                opcodes::GOTO_W | opcodes::JSR_W => {
                    out.put_u8(insn.op);
                    out.put_i32(rel(targets[0]));
                }
                opcodes::TABLESWITCH | opcodes::LOOKUPSWITCH => {
                    out.put_u8(insn.op);
                    for _ in 0..opcodes::switch_padding(self.at[i]) {
                        out.put_u8(0);
                    }
                    let ob = (1 + old_padding(insn.off)) as usize;
                    let word = |k: usize| i32_at(bytes, ob + 4 * k).unwrap_or(0);
                    out.put_i32(rel(targets[0]));
                    if insn.op == opcodes::TABLESWITCH {
                        out.put_i32(word(1));
                        out.put_i32(word(2));
                        for &t in &targets[1..] {
                            out.put_i32(rel(t));
                        }
                    } else {
                        out.put_i32(word(1));
                        for (k, &t) in targets[1..].iter().enumerate() {
                            out.put_i32(word(2 + 2 * k));
                            out.put_i32(rel(t));
                        }
                    }
                }
                _ => out.extend_from_slice(bytes),
            }
            if let Some((p, post)) = ins.post {
                if p == i {
                    out.extend_from_slice(post);
                }
            }
        }
        debug_assert_eq!(out.len() - base, self.end as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcodes::{Code, GOTO, GOTO_W, ICONST_0, IRETURN, LOOKUPSWITCH, RETURN};

    fn layout(c: &[u8], ins: &Inserts<'_>) -> (Vec<u8>, Result<Layout, MethodError>) {
        let code = Code::decode(c).unwrap();
        let l = Layout::compute(&code, ins);
        let mut out = Vec::new();
        if let Ok(l) = &l {
            l.emit(&code, ins, &mut out);
        }
        (out, l)
    }

    #[test]
    fn returns_get_probes_and_branches_land_on_them() {
        // 0: iconst_0; 1: ifeq +4 (-> 5); 4: return; 5: return
        let c = [ICONST_0, 0x99, 0, 4, RETURN, RETURN];
        let ins = Inserts {
            header: &[0xE0, 0xE1],
            exit: &[0xF0],
            post: None,
        };
        let (out, _) = layout(&c, &ins);
        // header(2) iconst_0(2) ifeq(3) F0(6) return(7) F0(8) return(9)
        assert_eq!(
            out,
            [0xE0, 0xE1, ICONST_0, 0x99, 0, 5, 0xF0, RETURN, 0xF0, RETURN]
        );
    }

    #[test]
    fn loops_to_offset_zero_skip_the_header_and_post_is_not_a_target() {
        // 0: nop; 1: nop; 2: goto -1 (-> 1); 5: goto -5 (-> 0)
        let c = [0, 0, GOTO, 0xff, 0xff, GOTO, 0xff, 0xfb];
        let ins = Inserts {
            header: &[0xE0],
            exit: &[],
            post: Some((0, &[0xE1, 0xE2])),
        };
        let (out, _) = layout(&c, &ins);
        // E0 | 1: nop | E1 E2 | 4: nop | 5: goto -1 (->4) | 8: goto -7 (->1)
        assert_eq!(
            out,
            [0xE0, 0, 0xE1, 0xE2, 0, GOTO, 0xff, 0xff, GOTO, 0xff, 0xf9]
        );
    }

    #[test]
    fn switch_padding_is_recomputed() {
        // 0: iconst_0; 1: lookupswitch pad2 default->20 npairs 1 (7 -> 20); 20: return
        let mut c = vec![ICONST_0, LOOKUPSWITCH, 0, 0];
        for v in [19i32, 1, 7, 19] {
            c.extend_from_slice(&v.to_be_bytes());
        }
        c.push(IRETURN);
        let ins = Inserts {
            header: &[0xE0],
            exit: &[0xF0, 0xF1],
            post: None,
        };
        let (out, l) = layout(&c, &ins);
        let l = l.unwrap();
        // E0 iconst_0 | 2: lookupswitch pad 1 | default, npairs, pair | 20: F0 F1 | 22: ireturn
        assert_eq!(out.len(), 23);
        assert_eq!(&out[2..4], &[LOOKUPSWITCH, 0]);
        assert_eq!(i32_at(&out, 4), Some(18));
        assert_eq!(i32_at(&out, 8), Some(1));
        assert_eq!(i32_at(&out, 12), Some(7));
        assert_eq!(i32_at(&out, 16), Some(18));
        assert_eq!(out[22], IRETURN);
        let code = Code::decode(&c).unwrap();
        assert_eq!(l.target(&code, 20), Some(20));
        assert_eq!(l.insn(&code, 20), Some(22));
        assert_eq!(l.target(&code, 21), Some(23));
        assert_eq!(l.target(&code, 0), Some(1));
        assert_eq!(l.target(&code, 3), None);
    }

    #[test]
    fn far_goto_widens_and_far_conditional_fails() {
        // 0: goto +32764 (-> 32764: return), filler nops, a return at 100 whose
        // probe pushes the target out of range.
        let mut c = vec![0u8; 32765];
        c[0] = GOTO;
        c[1..3].copy_from_slice(&32764i16.to_be_bytes());
        c[100] = RETURN;
        c[32764] = RETURN;
        let exit = [0u8; 8];
        let ins = Inserts {
            header: &[],
            exit: &exit,
            post: None,
        };
        let (out, _) = layout(&c, &ins);
        assert_eq!(out[0], GOTO_W);
        assert_eq!(i32_at(&out, 1), Some(32764 + 2 + 8));
        assert_eq!(out.len(), 32765 + 2 + 16);
        let mut cond = c.clone();
        cond[0] = 0x99;
        let (_, l) = layout(&cond, &ins);
        assert_eq!(l.err(), Some(MethodError::JumpOverflow));
    }
}
