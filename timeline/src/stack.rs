//! One thread's call stack, built from enter and leave records.
//!
//! The agent nests enters and leaves exactly, except when it dropped events because a
//! ring was full (`Event::Dropped`). The stack then repairs what it gets:
//!
//! - a leave of the frame on top closes it (the normal case);
//! - a leave of a frame deeper in the stack closes every frame above it first, at the
//!   same instant ([`ExitKind::Unwound`]): their leaves were lost;
//! - a leave of a frame not on the stack is ignored: its enter was lost;
//! - frames still open when the thread or the trace ends are closed there
//!   ([`ExitKind::Unfinished`]).
//!
//! Each closed frame reports its inclusive and exclusive wall time and the time its
//! thread was running inside it: the caller passes the thread's cumulative running time
//! at the enter and at the leave, so a frame costs no per-interval work.

use sonda_trace::Time;

use crate::output::{ExitKind, Frame};

/// Frames deeper than this are not pushed (and counted): a runaway stack from leaves
/// that never come must not grow without bound.
pub const MAX_DEPTH: usize = 1 << 14;

#[derive(Clone, Copy, Debug)]
struct Open {
    frame: Frame,
    begin: Time,
    /// The thread's cumulative running ns when the frame was entered.
    run_at_enter: u64,
    /// Inclusive wall ns of the frames nested in this one, closed so far.
    child_ns: u64,
    /// Inclusive running ns of the frames nested in this one, closed so far.
    child_run_ns: u64,
}

/// A frame that was closed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Closed {
    pub frame: Frame,
    /// Depth before closing (1 = outermost).
    pub depth: usize,
    pub begin: Time,
    pub kind: ExitKind,
    pub exclusive_ns: u64,
    pub cpu_ns: u64,
    pub exclusive_cpu_ns: u64,
}

/// What a leave did to the stack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LeaveOutcome {
    /// The frame was found; `unwound` frames above it were closed first.
    Matched { unwound: usize },
    /// No such frame on the stack: the leave was ignored.
    Unmatched,
}

/// A call stack.
#[derive(Default, Debug)]
pub(crate) struct CallStack {
    frames: Vec<Open>,
}

impl CallStack {
    /// Pushes `frame`; returns the new depth, or `None` when the stack is too deep.
    pub fn enter(&mut self, frame: Frame, at: Time, run_ns: u64) -> Option<usize> {
        if self.frames.len() >= MAX_DEPTH {
            return None;
        }
        self.frames.push(Open {
            frame,
            begin: at,
            run_at_enter: run_ns,
            child_ns: 0,
            child_run_ns: 0,
        });
        Some(self.frames.len())
    }

    /// Closes `frame` (and any frames above it) at `at`; `run_ns` is the thread's
    /// cumulative running time then. Each closed frame goes to `closed`, top first.
    pub fn leave(
        &mut self,
        frame: Frame,
        exception: bool,
        at: Time,
        run_ns: u64,
        mut closed: impl FnMut(Closed),
    ) -> LeaveOutcome {
        let Some(pos) = self.frames.iter().rposition(|f| f.frame == frame) else {
            return LeaveOutcome::Unmatched;
        };
        let unwound = self.frames.len() - pos - 1;
        for _ in 0..unwound {
            closed(self.pop(ExitKind::Unwound, at, run_ns));
        }
        let kind = if exception {
            ExitKind::Exception
        } else {
            ExitKind::Normal
        };
        closed(self.pop(kind, at, run_ns));
        LeaveOutcome::Matched { unwound }
    }

    /// Closes every open frame at `at` as [`ExitKind::Unfinished`]; returns how many.
    pub fn close_all(&mut self, at: Time, run_ns: u64, mut closed: impl FnMut(Closed)) -> usize {
        let n = self.frames.len();
        while !self.frames.is_empty() {
            closed(self.pop(ExitKind::Unfinished, at, run_ns));
        }
        n
    }

    /// The open frames, outermost first.
    pub fn frames(&self) -> impl Iterator<Item = Frame> + '_ {
        self.frames.iter().map(|f| f.frame)
    }

    /// Current depth.
    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    fn pop(&mut self, kind: ExitKind, at: Time, run_ns: u64) -> Closed {
        let depth = self.frames.len();
        let f = self
            .frames
            .pop()
            .expect("pop is only called on a non-empty stack");
        let inclusive = at.since(f.begin);
        let cpu = run_ns.saturating_sub(f.run_at_enter);
        if let Some(parent) = self.frames.last_mut() {
            parent.child_ns += inclusive;
            parent.child_run_ns += cpu;
        }
        Closed {
            frame: f.frame,
            depth,
            begin: f.begin,
            kind,
            exclusive_ns: inclusive.saturating_sub(f.child_ns),
            cpu_ns: cpu,
            exclusive_cpu_ns: cpu.saturating_sub(f.child_run_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Frame = Frame::Method(1);
    const B: Frame = Frame::Method(2);
    const C: Frame = Frame::Func(0x1000);

    fn collect(
        stack: &mut CallStack,
        frame: Frame,
        exc: bool,
        at: u64,
        run: u64,
    ) -> (LeaveOutcome, Vec<Closed>) {
        let mut v = Vec::new();
        let o = stack.leave(frame, exc, Time(at), run, |c| v.push(c));
        (o, v)
    }

    #[test]
    fn nested_calls_split_inclusive_and_exclusive_time() {
        let mut s = CallStack::default();
        assert_eq!(s.enter(A, Time(100), 0), Some(1));
        assert_eq!(s.enter(B, Time(150), 40), Some(2));
        let (o, b) = collect(&mut s, B, false, 250, 100);
        assert_eq!(o, LeaveOutcome::Matched { unwound: 0 });
        assert_eq!(
            b,
            vec![Closed {
                frame: B,
                depth: 2,
                begin: Time(150),
                kind: ExitKind::Normal,
                exclusive_ns: 100,
                cpu_ns: 60,
                exclusive_cpu_ns: 60
            }]
        );
        let (_, a) = collect(&mut s, A, true, 400, 180);
        assert_eq!(
            a,
            vec![Closed {
                frame: A,
                depth: 1,
                begin: Time(100),
                kind: ExitKind::Exception,
                exclusive_ns: 200,
                cpu_ns: 180,
                exclusive_cpu_ns: 120
            }]
        );
        assert_eq!(s.depth(), 0);
    }

    #[test]
    fn a_deeper_leave_unwinds_the_frames_above() {
        let mut s = CallStack::default();
        s.enter(A, Time(0), 0);
        s.enter(B, Time(10), 0);
        s.enter(C, Time(20), 0);
        let (o, closed) = collect(&mut s, A, false, 50, 0);
        assert_eq!(o, LeaveOutcome::Matched { unwound: 2 });
        let kinds: Vec<_> = closed.iter().map(|c| (c.frame, c.depth, c.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (C, 3, ExitKind::Unwound),
                (B, 2, ExitKind::Unwound),
                (A, 1, ExitKind::Normal)
            ]
        );
        // A's exclusive time excludes B (which includes C): 50 - 40.
        assert_eq!(closed[2].exclusive_ns, 10);
    }

    #[test]
    fn a_leave_without_enter_is_ignored() {
        let mut s = CallStack::default();
        s.enter(A, Time(0), 0);
        let (o, closed) = collect(&mut s, B, false, 5, 0);
        assert_eq!(o, LeaveOutcome::Unmatched);
        assert!(closed.is_empty());
        assert_eq!(s.depth(), 1);
    }

    #[test]
    fn recursion_closes_the_innermost_instance() {
        let mut s = CallStack::default();
        s.enter(A, Time(0), 0);
        s.enter(A, Time(10), 0);
        let (_, closed) = collect(&mut s, A, false, 20, 0);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].begin, Time(10));
        assert_eq!(s.depth(), 1);
    }

    #[test]
    fn close_all_marks_unfinished() {
        let mut s = CallStack::default();
        s.enter(A, Time(0), 0);
        s.enter(B, Time(5), 0);
        let mut v = Vec::new();
        assert_eq!(s.close_all(Time(9), 0, |c| v.push(c)), 2);
        assert!(v.iter().all(|c| c.kind == ExitKind::Unfinished));
        assert_eq!(v[0].frame, B);
    }

    #[test]
    fn depth_is_bounded() {
        let mut s = CallStack::default();
        for i in 0..MAX_DEPTH {
            assert!(s.enter(A, Time(i as u64), 0).is_some());
        }
        assert_eq!(s.enter(A, Time(0), 0), None);
    }
}
