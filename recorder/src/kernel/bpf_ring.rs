//! Reading a BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`) mapped into the collector.
//!
//! libbpf's own reader calls a callback per record, which would have to reach the
//! source's per-CPU queues from inside libbpf; this one hands out each record as a byte
//! slice borrowed from the mapping, decoded where it lies. The layout is the kernel's
//! ABI (`kernel/bpf/ringbuf.c`, `Documentation/bpf/ringbuf.rst`):
//! - page 0, read-write: the consumer position (`u64`), which the reader advances;
//! - page 1, read-only: the producer position;
//! - from page 2, read-only: the data, `size` bytes mapped twice in a row, so that a
//!   record that wraps around the end is contiguous in the mapping.
//!
//! Each record starts with an 8-byte header: a `u32` length whose top bit says the
//! record is still being written (the reader stops there) and whose next bit says it
//! was discarded, then the record, padded to 8 bytes.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: u64 = 8;

/// A mapped ring buffer.
pub struct Ring {
    /// The consumer page, read-write.
    consumer: MmapRaw,
    /// The producer page and the data mapped twice, read-only.
    producer: MmapRaw,
    page: usize,
    /// Bytes of data (a power of two).
    size: u64,
}

impl Ring {
    /// Maps the ring buffer map `fd` of `size` data bytes (its `max_entries`).
    pub fn map(fd: BorrowedFd<'_>, size: usize) -> io::Result<Ring> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let consumer = MmapOptions::new().len(page).map_raw(&fd)?;
        let producer = MmapOptions::new()
            .offset(page as u64)
            .len(page + 2 * size)
            .map_raw_read_only(&fd)?;
        Ok(Ring {
            consumer,
            producer,
            page,
            size: size as u64,
        })
    }

    /// Bytes of data.
    pub fn size(&self) -> usize {
        self.size as usize
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the first u64 of the consumer page, page-aligned, mapped while `self`
        // lives (unmapped when the `MmapRaw` drops); the kernel reads it, only this
        // reader writes it.
        unsafe { &*(self.consumer.as_ptr() as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the first u64 of the producer page, page-aligned, mapped while `self`
        // lives; written by the kernel only.
        unsafe { &*(self.producer.as_ptr() as *const AtomicU64) }
    }

    /// Bytes reserved by the programs and not consumed yet (committed or not).
    pub fn unread(&self) -> u64 {
        let end = self.producer_pos().load(Ordering::Acquire);
        end.saturating_sub(self.consumer_pos().load(Ordering::Relaxed))
    }

    /// Hands every committed record to `each`, in the order they were reserved, up to
    /// the first one still being written; returns the bytes consumed.
    pub fn consume(&mut self, mut each: impl FnMut(&[u8])) -> u64 {
        let mask = self.size - 1;
        let start = self.consumer_pos().load(Ordering::Acquire);
        let mut pos = start;
        loop {
            let end = self.producer_pos().load(Ordering::Acquire);
            if pos >= end {
                break;
            }
            while pos < end {
                let at = self.page + (pos & mask) as usize;
                // SAFETY: `at` is inside the first copy of the data (the mapping is
                // `page + 2 * size` long), 8-aligned (records are padded to 8); the
                // kernel writes the length word atomically.
                let len_word = unsafe { &*(self.producer.as_ptr().add(at) as *const AtomicU32) };
                let len = len_word.load(Ordering::Acquire);
                if len & BUSY != 0 {
                    self.consumer_pos().store(pos, Ordering::Release);
                    return pos - start;
                }
                let data = u64::from(len & !(BUSY | DISCARD));
                if len & DISCARD == 0 {
                    // SAFETY: a committed record of `data` bytes after its header; it
                    // ends within the second copy of the data (a record is at most
                    // `size` bytes), and the kernel does not touch it until the
                    // consumer position passes it.
                    let record = unsafe {
                        std::slice::from_raw_parts(
                            self.producer.as_ptr().add(at + HEADER as usize),
                            data as usize,
                        )
                    };
                    each(record);
                }
                pos += (data + HEADER).next_multiple_of(8);
            }
            self.consumer_pos().store(pos, Ordering::Release);
        }
        pos - start
    }
}
