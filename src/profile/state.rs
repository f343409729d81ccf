//! The profiler's tables: fixed in size, mapped once (about 11 MiB), never grown, so the
//! profile's memory is bounded whatever the program does. Everything here runs under [`LOCK`]
//! but [`maybe_sampled`], which reads the filter alone.
//!
//! * live sampled blocks, keyed by address (open addressing, backward-shift deletion);
//! * a filter of counts by address hash, which every watched free reads first;
//! * interned allocation stacks (their short-lived bytes feed the folded-stacks file);
//! * per function call site: the temporaries whose whole life lay inside one of its calls,
//!   their cost, and the blocks that outlived its calls;
//! * per (call site, allocation site): blocks that outlived the call (sites to keep out of a
//!   region there);
//! * per thread: the sample history that tells one invocation of a frame from the next.
//!
//! # The containing invocation
//!
//! Every sample (a sampled allocation or the free of a sampled block) gets the next index in its
//! thread's history, and `last_changed[d]` is the last index at which the thread's stack, down
//! to depth `d`, differed from the sample before it. A block born at index `i0` whose thread
//! frees it at `i1` lived inside one invocation of its frame at depth `d - 1` exactly when no
//! sample in `i0..=i1` saw that prefix change: `last_changed[d] <= i0`. Over the depths of the
//! block's stack, every `last_changed[d]` past `i0` is one of a prefix that changed since, so
//! the deepest `d` at or below `i0` is the innermost call that held the block's whole life (as
//! far as the samples saw: two calls in a row from the same place with no sample between them
//! look like one).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use core::{mem, ptr};

use super::stack::{Stack, MAX_DEPTH, MAX_FRAMES};
use crate::published::Published;

/// Live sampled blocks at most (3/4 of the table's slots); past it, new samples are dropped.
const LIVE_SLOTS: usize = 1 << 16;
const STACK_SLOTS: usize = 1 << 13;
const SITE_SLOTS: usize = 1 << 14;
const ESCAPE_SLOTS: usize = 1 << 14;
/// Threads with a history of their own; a later thread shares a slot and restarts its history.
pub(crate) const THREAD_SLOTS: usize = 256;
/// The filter's slots are `1 << FILTER_BITS` (see [`FILTER`]).
pub const FILTER_BITS: u32 = 14;
/// Power-of-two size classes of the temporaries: 16 B and less, 32, ... 1 MiB and more.
pub(crate) const SIZE_CLASSES: usize = 17;

/// The class of a block of `size` bytes: `ceil(log2(size)) - 4`, within `0..SIZE_CLASSES`.
pub(crate) fn size_class(size: usize) -> usize {
    let bits = usize::BITS - size.max(1).saturating_sub(1).leading_zeros();
    (bits as usize).saturating_sub(4).min(SIZE_CLASSES - 1)
}

/// The largest size of class `c`.
pub(crate) fn class_size(c: usize) -> usize {
    16 << c
}
/// Samples a thread takes before a frame seen at all of them counts as one of its outer
/// frames (see [`ThreadHistory::containing`]).
const WHOLE_AFTER: u32 = 64;

/// Serialises all access to [`TABLES`] (samples are rare: at most one per few hundred KiB
/// allocated, and the frees of those).
pub(crate) static LOCK: spin::Mutex<()> = spin::Mutex::new(());
static TABLES: AtomicPtr<Tables> = AtomicPtr::new(ptr::null_mut());

/// Counts of live sampled blocks by address hash: zero means "not sampled" for certain.
/// Written under the profiler's lock, read without it (a free of a block being sampled by
/// another thread cannot happen: the block is not the program's until `malloc` returns). Block
/// `p`'s slot is the top [`FILTER_BITS`] of `(p as u32) * FILTER_MULTIPLIER` (wrapping:
/// Fibonacci hashing of the address's low 32 bits, which tell apart the blocks of any 4 GiB):
/// the preload library's `free` computes it in assembly (two instructions, the multiplier an
/// immediate), hence public, read-only outside the crate.
pub static FILTER: Published<[AtomicU8; 1 << FILTER_BITS]> =
    Published::new([const { AtomicU8::new(0) }; 1 << FILTER_BITS]);
/// See [`FILTER`].
pub const FILTER_MULTIPLIER: u32 = 0x9E37_79B1;

/// No stack (the stack table was full).
pub(crate) const NO_STACK: u32 = u32::MAX;

/// A live sampled block.
#[derive(Clone, Copy)]
pub(crate) struct Live {
    pub(crate) p: usize,
    pub(crate) size: usize,
    /// Blocks this sample stands for (1 / the chance it had to be sampled).
    pub(crate) weight: f64,
    pub(crate) stack: u32,
    /// The serial of the thread that allocated it, and its history index then.
    pub(crate) thread: u32,
    pub(crate) born: u32,
    /// The `realloc`s that resized it so far (the report's estimate replays them).
    pub(crate) reallocs: u32,
    /// Ticks at the allocation.
    pub(crate) born_ticks: u64,
    /// Bytes the thread had allocated at its birth.
    pub(crate) born_bytes: u64,
}

/// An interned allocation stack.
pub(crate) struct StackEntry {
    pub(crate) hash: u64,
    pub(crate) used: bool,
    pub(crate) len: u16,
    pub(crate) base: u16,
    pub(crate) ips: [usize; MAX_FRAMES],
    /// Estimated bytes of blocks from this stack that died inside a call below the thread's
    /// outermost frames.
    pub(crate) short_bytes: f64,
}

/// What the samples say about one call site (a frame's instruction pointer).
#[derive(Clone, Copy, Default)]
pub(crate) struct SiteEntry {
    pub(crate) ip: usize,
    /// Temporaries whose whole life lay inside one call of this frame (estimated counts).
    pub(crate) temps: f64,
    pub(crate) temp_bytes: f64,
    /// Their sizes: estimated counts per power-of-two class ([`size_class`]), which the
    /// report's estimate replays.
    pub(crate) sizes: [f32; SIZE_CLASSES],
    /// Their `realloc`s (estimated counts): a `String` or `Vec` that grows by steps, which a
    /// region serves in place at the bump pointer. Replayed too.
    pub(crate) reallocs: f32,
    pub(crate) life_ticks: f64,
    pub(crate) life_bytes: f64,
    /// The same, where the frame had been on the stack since the thread's first sample (a
    /// region there is the thread's whole run).
    pub(crate) whole: f64,
    pub(crate) whole_bytes: f64,
    /// Blocks allocated inside a call of this frame that outlived the call.
    pub(crate) escapes: f64,
    pub(crate) escape_bytes: f64,
}

/// Blocks allocated with stack `stack` inside a call of the frame at `ip` that outlived the
/// call (the report names the allocation site from the stack).
#[derive(Clone, Copy, Default)]
pub(crate) struct EscapeEntry {
    pub(crate) ip: usize,
    pub(crate) stack: u32,
    pub(crate) count: f64,
    pub(crate) bytes: f64,
}

/// One thread's sample history (see the module comment).
pub(crate) struct ThreadHistory {
    pub(crate) serial: u32,
    pub(crate) index: u32,
    pub(crate) first: u32,
    pub(crate) last_changed: [u32; MAX_DEPTH + 1],
    pub(crate) prev: Stack,
    /// Bytes the thread allocated (the sum of its sampling gaps).
    pub(crate) bytes: u64,
}

/// Totals over the run.
#[derive(Clone, Copy, Default)]
pub(crate) struct Totals {
    pub(crate) samples: u64,
    pub(crate) allocations: f64,
    pub(crate) bytes: f64,
    /// Estimated allocations whose blocks another thread freed, or that were still live at
    /// exit.
    pub(crate) other_thread: f64,
    pub(crate) live_at_exit: f64,
    /// Samples lost to a full table.
    pub(crate) dropped: u64,
    /// Call stacks taken by the fast walk, and by the unwinder where it declined.
    pub(crate) fast_walks: u64,
    pub(crate) unwinder_walks: u64,
    /// The profiler's own work in the current window of samples (ticks), the tick the window
    /// started at and its samples: the default rate's pacing (`profile::pace`).
    pub(crate) window_work: u64,
    pub(crate) window_start: u64,
    pub(crate) window_samples: u64,
}

pub(crate) struct Tables {
    pub(crate) live: [Live; LIVE_SLOTS],
    pub(crate) live_count: usize,
    pub(crate) stacks: [StackEntry; STACK_SLOTS],
    pub(crate) sites: [SiteEntry; SITE_SLOTS],
    pub(crate) escapes: [EscapeEntry; ESCAPE_SLOTS],
    pub(crate) threads: [ThreadHistory; THREAD_SLOTS],
    pub(crate) totals: Totals,
}

/// The bytes the tables take (the profile's memory bound, with the filter's 16 KiB).
pub const TABLE_BYTES: usize = mem::size_of::<Tables>();
/// The tables and the filter: the profile's memory but for the stack walk's rule cache.
pub(crate) const PROFILE_BYTES: usize = TABLE_BYTES + (1 << FILTER_BITS);

/// The tables, mapped on first use; null when the mapping failed. The caller holds [`LOCK`].
pub(crate) fn tables() -> Option<&'static mut Tables> {
    let mut t = TABLES.load(Ordering::Acquire);
    if t.is_null() {
        // SAFETY: a fresh anonymous private mapping; zero bytes are a valid `Tables` (every
        // field is an integer, a float, a bool or an array of them).
        t = unsafe {
            let m = libc::mmap(
                ptr::null_mut(),
                TABLE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if m == libc::MAP_FAILED {
                return None;
            }
            m as *mut Tables
        };
        TABLES.store(t, Ordering::Release);
    }
    // SAFETY: the caller holds LOCK, so no other reference to the tables is alive.
    Some(unsafe { &mut *t })
}

/// A Fibonacci hash of `x` to `bits` bits.
#[inline(always)]
fn hash(x: u64, bits: u32) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

#[inline(always)]
fn filter_slot(p: usize) -> &'static AtomicU8 {
    let x = (p as u32).wrapping_mul(FILTER_MULTIPLIER);
    &FILTER.atomic()[(x >> (32 - FILTER_BITS)) as usize]
}

/// True when `p` may be a live sampled block (false: certainly not).
#[inline(always)]
pub(crate) fn maybe_sampled(p: usize) -> bool {
    filter_slot(p).load(Ordering::Relaxed) != 0
}

fn filter_add(p: usize) {
    let f = filter_slot(p);
    let v = f.load(Ordering::Relaxed);
    if v != u8::MAX {
        f.store(v + 1, Ordering::Relaxed);
    }
}

fn filter_remove(p: usize) {
    let f = filter_slot(p);
    let v = f.load(Ordering::Relaxed);
    // A saturated count stays: it only costs false positives.
    if v != 0 && v != u8::MAX {
        f.store(v - 1, Ordering::Relaxed);
    }
}

/// Wraps a `static` the lock guards; kept for the stack buffers the samples build.
pub(crate) struct Guarded<T>(UnsafeCell<T>);
// SAFETY: only touched under LOCK.
unsafe impl<T> Sync for Guarded<T> {}
impl<T> Guarded<T> {
    pub(crate) const fn new(v: T) -> Self {
        Guarded(UnsafeCell::new(v))
    }
    /// # Safety
    /// The caller holds [`LOCK`].
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get(&self) -> &mut T {
        // SAFETY: the caller's obligation.
        unsafe { &mut *self.0.get() }
    }
}

impl Tables {
    fn live_slot(&self, p: usize) -> Option<usize> {
        let mask = LIVE_SLOTS - 1;
        let mut i = hash(p as u64, LIVE_SLOTS.trailing_zeros());
        loop {
            let e = &self.live[i];
            if e.p == 0 {
                return None;
            }
            if e.p == p {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds a live block; false when the table is full.
    pub(crate) fn insert_live(&mut self, rec: Live) -> bool {
        if self.live_count >= LIVE_SLOTS / 4 * 3 {
            return false;
        }
        let mask = LIVE_SLOTS - 1;
        let mut i = hash(rec.p as u64, LIVE_SLOTS.trailing_zeros());
        while self.live[i].p != 0 {
            i = (i + 1) & mask;
        }
        self.live[i] = rec;
        self.live_count += 1;
        filter_add(rec.p);
        true
    }

    /// Removes the live block at `p`, if sampled.
    pub(crate) fn take_live(&mut self, p: usize) -> Option<Live> {
        let mut i = self.live_slot(p)?;
        let rec = self.live[i];
        let mask = LIVE_SLOTS - 1;
        // Backward-shift deletion: later entries of the probe run move into the hole when
        // their home slot does not lie between the hole and them.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let q = self.live[j].p;
            if q == 0 {
                break;
            }
            let home = hash(q as u64, LIVE_SLOTS.trailing_zeros());
            let between = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !between {
                self.live[i] = self.live[j];
                i = j;
            }
        }
        self.live[i].p = 0;
        self.live_count -= 1;
        filter_remove(p);
        Some(rec)
    }

    /// Every live block (for the report at exit), removed.
    pub(crate) fn drain_live(&mut self, mut f: impl FnMut(&mut Tables, Live)) {
        for i in 0..LIVE_SLOTS {
            let rec = self.live[i];
            if rec.p != 0 {
                self.live[i].p = 0;
                filter_remove(rec.p);
                f(self, rec);
            }
        }
        self.live_count = 0;
    }

    /// The id of `s`'s instruction pointers in the stack table, adding them; [`NO_STACK`] when
    /// the table is full.
    pub(crate) fn intern(&mut self, s: &Stack) -> u32 {
        let mut h: u64 = s.base() as u64 ^ 0x5bd1_e995;
        for f in &s.frames[..s.len] {
            h = (h ^ f.ip as u64).wrapping_mul(0x0000_0100_0000_01B3);
        }
        let mask = STACK_SLOTS - 1;
        let mut i = hash(h, STACK_SLOTS.trailing_zeros());
        for _ in 0..STACK_SLOTS {
            let e = &mut self.stacks[i];
            if !e.used {
                e.used = true;
                e.hash = h;
                e.len = s.len as u16;
                e.base = s.base() as u16;
                for (k, f) in s.frames[..s.len].iter().enumerate() {
                    e.ips[k] = f.ip;
                }
                return i as u32;
            }
            if e.hash == h
                && e.len as usize == s.len
                && e.base as usize == s.base()
                && e.ips[..s.len]
                    .iter()
                    .zip(&s.frames[..s.len])
                    .all(|(a, f)| *a == f.ip)
            {
                return i as u32;
            }
            i = (i + 1) & mask;
        }
        NO_STACK
    }

    /// The entry for call site `ip`, adding it; None when the table is full.
    pub(crate) fn site(&mut self, ip: usize) -> Option<&mut SiteEntry> {
        let mask = SITE_SLOTS - 1;
        let mut i = hash(ip as u64, SITE_SLOTS.trailing_zeros());
        for _ in 0..SITE_SLOTS {
            if self.sites[i].ip == ip {
                return Some(&mut self.sites[i]);
            }
            if self.sites[i].ip == 0 {
                self.sites[i].ip = ip;
                return Some(&mut self.sites[i]);
            }
            i = (i + 1) & mask;
        }
        None
    }

    fn escape(&mut self, ip: usize, stack: u32) -> Option<&mut EscapeEntry> {
        let mask = ESCAPE_SLOTS - 1;
        let mut i = hash(
            (ip as u64).rotate_left(17) ^ stack as u64,
            ESCAPE_SLOTS.trailing_zeros(),
        );
        for _ in 0..ESCAPE_SLOTS {
            let e = &self.escapes[i];
            if e.ip == ip && e.stack == stack {
                return Some(&mut self.escapes[i]);
            }
            if e.ip == 0 {
                self.escapes[i].ip = ip;
                self.escapes[i].stack = stack;
                return Some(&mut self.escapes[i]);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The history of the thread with `serial`, restarted if another thread had its slot.
    pub(crate) fn thread(&mut self, serial: u32) -> &mut ThreadHistory {
        let t = &mut self.threads[(serial as usize - 1) % THREAD_SLOTS];
        if t.serial != serial {
            t.serial = serial;
            t.index = 0;
            t.first = 1;
            t.last_changed = [0; MAX_DEPTH + 1];
            t.prev.len = 0;
            t.prev.total = 0;
            t.bytes = 0;
        }
        t
    }

    /// A block whose life ended (freed by the thread that allocated it, whose history is
    /// `serial`'s, at depth-of-containment `depth`), or that outlived every frame (`depth`
    /// 0: freed by another thread, or live at exit).
    pub(crate) fn close(&mut self, rec: &Live, depth: usize, whole: bool, life: (u64, u64)) {
        let w = rec.weight;
        let bytes = w * rec.size as f64;
        if rec.stack == NO_STACK {
            return;
        }
        let (len, base) = {
            let s = &self.stacks[rec.stack as usize];
            (s.len as usize, s.base as usize)
        };
        let ip_at = |t: &Tables, d: usize| -> Option<usize> {
            (d >= base && d < base + len).then(|| t.stacks[rec.stack as usize].ips[d - base])
        };
        if depth > 0 {
            if let Some(ip) = ip_at(self, depth - 1) {
                if let Some(e) = self.site(ip) {
                    if whole {
                        e.whole += w;
                        e.whole_bytes += bytes;
                    } else {
                        e.temps += w;
                        e.temp_bytes += bytes;
                        e.sizes[size_class(rec.size)] += w as f32;
                        e.reallocs += (w * rec.reallocs as f64) as f32;
                        e.life_ticks += w * life.0 as f64;
                        e.life_bytes += w * life.1 as f64;
                    }
                }
                if !whole {
                    self.stacks[rec.stack as usize].short_bytes += bytes;
                }
            }
        }
        // Every frame below the containing one ended while the block lived.
        for d in depth.max(base)..base + len {
            let Some(ip) = ip_at(self, d) else { continue };
            if let Some(e) = self.site(ip) {
                e.escapes += w;
                e.escape_bytes += bytes;
            }
            if let Some(e) = self.escape(ip, rec.stack) {
                e.count += w;
                e.bytes += bytes;
            }
        }
    }
}

impl ThreadHistory {
    /// Adds the sample `s` to the history; its index.
    pub(crate) fn push(&mut self, s: &Stack) -> u32 {
        self.index = self.index.wrapping_add(1).max(1);
        let keep = if self.index == 1 {
            0
        } else {
            self.prev.common_depth(s)
        };
        // Depths past both stacks are left as they were: a prefix longer than both did not
        // change between them, and one that changed since a block was born was marked when the
        // stack first became shorter than it. The first sample marks every depth.
        let end = if self.index == 1 {
            MAX_DEPTH
        } else {
            self.prev.total.max(s.total)
        };
        for d in keep + 1..=end {
            self.last_changed[d] = self.index;
        }
        self.prev.frames[..s.len].copy_from_slice(&s.frames[..s.len]);
        self.prev.len = s.len;
        self.prev.total = s.total;
        self.index
    }

    /// The innermost depth whose invocation held a block born at `born` with a stack of
    /// `total` frames (0: none), and whether that invocation has been on the stack since the
    /// thread's first sample.
    pub(crate) fn containing(&self, born: u32, total: usize) -> (usize, bool) {
        let mut d = total.min(MAX_DEPTH);
        while d > 0 && self.last_changed[d] > born {
            d -= 1;
        }
        // A frame seen at the thread's first sample, and at every sample since, over many
        // samples (a block born at the first sample and freed at the next says nothing).
        let whole =
            d > 0 && self.last_changed[d] <= self.first && self.index > self.first + WHOLE_AFTER;
        (d, whole)
    }
}

/// Forgets every sample (a forked child starts a profile of its own). The caller holds
/// [`LOCK`].
pub(crate) fn reset() {
    let t = TABLES.swap(ptr::null_mut(), Ordering::AcqRel);
    if !t.is_null() {
        // SAFETY: the mapping `tables` made, no longer reachable (the caller holds LOCK).
        unsafe { libc::munmap(t as *mut libc::c_void, TABLE_BYTES) };
    }
    for f in FILTER.atomic().iter() {
        f.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::stack::Frame;

    fn history() -> Box<ThreadHistory> {
        Box::new(ThreadHistory {
            serial: 1,
            index: 0,
            first: 1,
            last_changed: [0; MAX_DEPTH + 1],
            prev: Stack::empty(),
            bytes: 0,
        })
    }

    fn stack_of(frames: &[Frame]) -> Stack {
        let mut s = Stack::empty();
        s.total = frames.len();
        s.len = s.total.min(MAX_FRAMES);
        s.frames[..s.len].copy_from_slice(&frames[s.total - s.len..]);
        s
    }

    /// The history's answer against the stacks themselves: the containing depth of a block
    /// born at sample `b` and freed at sample `i` is the longest prefix of its stack that no
    /// two consecutive samples in `b..=i` differ in.
    #[test]
    fn the_history_finds_the_invocation_that_held_the_whole_life() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..40 {
            let mut h = history();
            // A call tree walked at random: deep calls, returns, and calls again from the same
            // place (the same addresses, another invocation), up to past the kept frames.
            let mut frames: Vec<Frame> = Vec::new();
            let mut stacks: Vec<Stack> = vec![Stack::empty()];
            let mut commons: Vec<usize> = vec![0];
            for i in 1..300u32 {
                match next(4) {
                    0 => {
                        let pop = next(frames.len() as u64 + 1) as usize;
                        frames.truncate(frames.len() - pop);
                    }
                    1 if frames.len() > 1 => {
                        // Return and call again from the same place.
                        frames.pop();
                    }
                    _ => {}
                }
                let grow = if next(8) == 0 { 80 } else { next(6) as usize };
                for _ in 0..grow {
                    let d = frames.len();
                    if d == MAX_DEPTH {
                        break;
                    }
                    frames.push(Frame {
                        ip: 0x1000 + next(3) as usize,
                        cfa: 0x8000_0000 - 64 * d,
                    });
                }
                let s = stack_of(&frames);
                commons.push(stacks.last().unwrap().common_depth(&s));
                assert_eq!(h.push(&s), i);
                stacks.push(s);
                for b in (1..=i).step_by(7).chain([i]) {
                    let total = stacks[b as usize].total;
                    let oracle = (b as usize + 1..=i as usize)
                        .map(|k| commons[k])
                        .fold(total, usize::min);
                    let since_first = (2..=i as usize)
                        .map(|k| commons[k])
                        .fold(MAX_DEPTH, usize::min);
                    let whole = oracle > 0 && oracle <= since_first && i > 1 + WHOLE_AFTER;
                    assert_eq!(
                        h.containing(b, total),
                        (oracle, whole),
                        "born {b}, freed {i}"
                    );
                }
            }
        }
    }
}
