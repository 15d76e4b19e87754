//! Opcodes and decoding of a Code array into instructions with branch targets.

use crate::bytes::{i16_at, i32_at};

pub(crate) const ICONST_0: u8 = 0x03;
pub(crate) const BIPUSH: u8 = 0x10;
pub(crate) const SIPUSH: u8 = 0x11;
pub(crate) const LDC: u8 = 0x12;
pub(crate) const LDC_W: u8 = 0x13;
pub(crate) const IFEQ: u8 = 0x99;
pub(crate) const IF_ACMPNE: u8 = 0xa6;
pub(crate) const GOTO: u8 = 0xa7;
pub(crate) const JSR: u8 = 0xa8;
pub(crate) const RET: u8 = 0xa9;
pub(crate) const TABLESWITCH: u8 = 0xaa;
pub(crate) const LOOKUPSWITCH: u8 = 0xab;
pub(crate) const IRETURN: u8 = 0xac;
pub(crate) const RETURN: u8 = 0xb1;
pub(crate) const INVOKESPECIAL: u8 = 0xb7;
pub(crate) const INVOKESTATIC: u8 = 0xb8;
pub(crate) const ATHROW: u8 = 0xbf;
pub(crate) const WIDE: u8 = 0xc4;
pub(crate) const IFNULL: u8 = 0xc6;
pub(crate) const IFNONNULL: u8 = 0xc7;
pub(crate) const GOTO_W: u8 = 0xc8;
pub(crate) const JSR_W: u8 = 0xc9;

/// Fixed instruction lengths; 0 for variable-length (switches, wide) and invalid.
const LENGTHS: [u8; 202] = {
    let mut l = [1u8; 202];
    l[0x10] = 2; // bipush
    l[0x11] = 3; // sipush
    l[0x12] = 2; // ldc
    l[0x13] = 3; // ldc_w
    l[0x14] = 3; // ldc2_w
    let mut i = 0x15;
    while i <= 0x19 {
        l[i] = 2; // xload
        i += 1;
    }
    i = 0x36;
    while i <= 0x3a {
        l[i] = 2; // xstore
        i += 1;
    }
    l[0x84] = 3; // iinc
    i = 0x99;
    while i <= 0xa8 {
        l[i] = 3; // if*, goto, jsr
        i += 1;
    }
    l[0xa9] = 2; // ret
    l[0xaa] = 0;
    l[0xab] = 0;
    i = 0xb2;
    while i <= 0xb8 {
        l[i] = 3; // field access, invokevirtual/special/static
        i += 1;
    }
    l[0xb9] = 5; // invokeinterface
    l[0xba] = 5; // invokedynamic
    l[0xbb] = 3; // new
    l[0xbc] = 2; // newarray
    l[0xbd] = 3; // anewarray
    l[0xc0] = 3; // checkcast
    l[0xc1] = 3; // instanceof
    l[0xc4] = 0; // wide
    l[0xc5] = 4; // multianewarray
    l[0xc6] = 3;
    l[0xc7] = 3;
    l[0xc8] = 5;
    l[0xc9] = 5;
    l
};

/// Whether `op` is one of the `*return` instructions.
pub(crate) fn is_return(op: u8) -> bool {
    (IRETURN..=RETURN).contains(&op)
}

/// Branches with a 16-bit offset.
pub(crate) fn is_branch16(op: u8) -> bool {
    (IFEQ..=JSR).contains(&op) || op == IFNULL || op == IFNONNULL
}

/// Conditional branches (16-bit offset and no wide form).
pub(crate) fn is_conditional(op: u8) -> bool {
    (IFEQ..=IF_ACMPNE).contains(&op) || op == IFNULL || op == IFNONNULL
}

/// Padding after a switch opcode at `off` so its operands are 4-byte aligned.
pub(crate) fn switch_padding(off: u32) -> u32 {
    (4 - (off + 1) % 4) % 4
}

/// One decoded instruction of the original code.
#[derive(Debug, Clone)]
pub(crate) struct Insn {
    pub(crate) off: u32,
    pub(crate) len: u32,
    pub(crate) op: u8,
    /// Indices into `Code::targets` (switch: default first, then the cases).
    pub(crate) first_target: u32,
    pub(crate) n_targets: u32,
}

/// The decoded code array.
pub(crate) struct Code<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) insns: Vec<Insn>,
    /// Absolute original offsets of branch targets.
    pub(crate) targets: Vec<u32>,
    /// Original offset -> instruction index; `NONE` inside an instruction.
    /// `index[code_length]` is `insns.len()`.
    index: Vec<u32>,
}

pub(crate) const NONE: u32 = u32::MAX;

impl<'a> Code<'a> {
    /// Decodes `bytes`; fails on unknown opcodes, truncated instructions, and
    /// branch targets that are not instruction starts.
    pub(crate) fn decode(bytes: &'a [u8]) -> Result<Self, &'static str> {
        let n = bytes.len();
        if n == 0 || n > 65535 {
            return Err("code length out of range");
        }
        let mut insns = Vec::with_capacity(n / 2);
        let mut targets = Vec::new();
        let mut index = vec![NONE; n + 1];
        let mut off = 0usize;
        while off < n {
            let op = bytes[off];
            let first_target = targets.len() as u32;
            let here = off as i64;
            let rel = |d: i64, targets: &mut Vec<u32>| -> Result<(), &'static str> {
                let t = here + d;
                if t < 0 || t >= n as i64 {
                    return Err("branch target outside the code");
                }
                targets.push(t as u32);
                Ok(())
            };
            let len = match op {
                TABLESWITCH | LOOKUPSWITCH => {
                    let base = off + 1 + switch_padding(off as u32) as usize;
                    let rd = |k: usize| i32_at(bytes, base + 4 * k).ok_or("truncated switch");
                    rel(rd(0)? as i64, &mut targets)?;
                    if op == TABLESWITCH {
                        let (low, high) = (rd(1)? as i64, rd(2)? as i64);
                        let count = high - low + 1;
                        if count < 1 || count > n as i64 {
                            return Err("bad tableswitch bounds");
                        }
                        for k in 0..count as usize {
                            rel(rd(3 + k)? as i64, &mut targets)?;
                        }
                        base - off + 12 + 4 * count as usize
                    } else {
                        let count = rd(1)? as i64;
                        if count < 0 || count > n as i64 {
                            return Err("bad lookupswitch count");
                        }
                        for k in 0..count as usize {
                            rd(2 + 2 * k)?;
                            rel(rd(3 + 2 * k)? as i64, &mut targets)?;
                        }
                        base - off + 8 + 8 * count as usize
                    }
                }
                WIDE => match bytes.get(off + 1) {
                    Some(0x15..=0x19) | Some(0x36..=0x3a) | Some(&RET) => 4,
                    Some(0x84) => 6,
                    _ => return Err("bad wide instruction"),
                },
                _ if (op as usize) < LENGTHS.len() => {
                    let l = LENGTHS[op as usize] as usize;
                    if is_branch16(op) {
                        rel(
                            i16_at(bytes, off + 1).ok_or("truncated branch")? as i64,
                            &mut targets,
                        )?;
                    } else if op == GOTO_W || op == JSR_W {
                        rel(
                            i32_at(bytes, off + 1).ok_or("truncated branch")? as i64,
                            &mut targets,
                        )?;
                    }
                    l
                }
                _ => return Err("unknown opcode"),
            };
            if off + len > n {
                return Err("instruction runs past the end of the code");
            }
            index[off] = insns.len() as u32;
            insns.push(Insn {
                off: off as u32,
                len: len as u32,
                op,
                first_target,
                n_targets: targets.len() as u32 - first_target,
            });
            off += len;
        }
        index[n] = insns.len() as u32;
        let code = Code {
            bytes,
            insns,
            targets,
            index,
        };
        if code.targets.iter().any(|&t| code.index[t as usize] == NONE) {
            return Err("branch into the middle of an instruction");
        }
        Ok(code)
    }

    /// The instruction index starting at original offset `off` (or `insns.len()`
    /// for the code length), if `off` is an instruction boundary.
    pub(crate) fn at(&self, off: u32) -> Option<usize> {
        match self.index.get(off as usize) {
            Some(&i) if i != NONE => Some(i as usize),
            _ => None,
        }
    }

    pub(crate) fn targets_of(&self, insn: &Insn) -> &[u32] {
        &self.targets[insn.first_target as usize..(insn.first_target + insn.n_targets) as usize]
    }

    /// The bytes of an instruction in the original code.
    pub(crate) fn bytes_of(&self, insn: &Insn) -> &'a [u8] {
        &self.bytes[insn.off as usize..(insn.off + insn.len) as usize]
    }

    pub(crate) fn len(&self) -> u32 {
        self.bytes.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_switches_wide_and_branches() {
        // 0: iconst_0; 1: tableswitch pad 2, default +23, low 0, high 1, +23, +23
        // 24: wide iinc 1 1000 ; 30: goto -30 ; 33: return
        let mut c = vec![ICONST_0, TABLESWITCH, 0, 0];
        for v in [23i32, 0, 1, 23, 23] {
            c.extend_from_slice(&v.to_be_bytes());
        }
        c.extend_from_slice(&[WIDE, 0x84, 0, 1, 0x03, 0xe8, GOTO, 0xff, 0xe2, RETURN]);
        let code = Code::decode(&c).unwrap();
        let offs: Vec<u32> = code.insns.iter().map(|i| i.off).collect();
        assert_eq!(offs, [0, 1, 24, 30, 33]);
        assert_eq!(code.targets_of(&code.insns[1]), [24, 24, 24]);
        assert_eq!(code.targets_of(&code.insns[3]), [0]);
        assert_eq!(code.at(24), Some(2));
        assert_eq!(code.at(25), None);
        assert_eq!(code.at(34), Some(5));
        // Branch into the middle of the tableswitch.
        let mut bad = c.clone();
        bad[32] = 0xe4; // goto -28 -> offset 2
        assert!(Code::decode(&bad).is_err());
        assert!(Code::decode(&[0xca]).is_err());
        assert!(Code::decode(&[GOTO, 0]).is_err());
        assert!(Code::decode(&[]).is_err());
    }

    #[test]
    fn padding() {
        assert_eq!(switch_padding(0), 3);
        assert_eq!(switch_padding(3), 0);
        assert_eq!(switch_padding(1), 2);
    }
}
