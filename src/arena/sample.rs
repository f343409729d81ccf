//! Sampling and learning: a sampled block records its site and birth in its header, and its free,
//! or the survivor sweep, tells the site's predictor how long it lived.

use core::sync::atomic::Ordering;

use super::counts::MAX_SLOT;
use super::header::{header_word, word_tag, TAG_SAMPLED};
use super::Arena;
use crate::layout::HEADER;
use crate::lifetime;

/// Sampled blocks the survivor sweep keeps track of, per arena.
pub(super) const RING: usize = 32;
const _: () = assert!(RING <= 32, "ring_used is a u32 bit set");
/// Ages are kept in units of this many bytes of the allocation clock (32-bit births).
const CLOCK_SHIFT: u32 = 12;
/// What a region end adds to the allocation clock: more than any lap, so a block alive across
/// a region end is old (and 32-bit births wrap only every 256 region ends).
const REGION_LAP: u64 = 1 << 36;
/// Survivor sweeps run at most once per this many bytes allocated (and at region ends).
pub(super) const SWEEP_MIN: usize = 256 << 10;
/// The lap of the predictor: blocks that die within this many bytes of later allocation are
/// short-lived. Fixed, not the arena's size: an arena that grew to hold long-lived blocks would
/// otherwise make them look short-lived (a circle seen on a server simulation).
const LAP: u64 = 1 << 20;
/// Regions in a row that leave escapes behind before an arena predicts for its regions (where
/// allocation sites are known, `lifetime::sites_known`), and regions in a row that leave
/// nothing before it stops.
const ESCAPES_TO_PREDICT: u32 = 4;
const CLEAN_TO_STOP: u32 = 64;

/// The second header word of a sampled block: the site's table key (bits 0..12), its ring
/// entry (bits 12..17, valid when bit 17 is set), whether it is a probe (bit 18), and its birth
/// on the allocation clock (bits 32..64, in `1 << CLOCK_SHIFT` byte units).
#[derive(Clone, Copy)]
pub(super) struct SampleWord(u64);

impl SampleWord {
    const IN_RING: u64 = 1 << 17;
    const PROBE: u64 = 1 << 18;
    fn new(key: u32, ring: Option<usize>, probe: bool, clock: u64) -> Self {
        let mut w = (key as u64 & ((1 << lifetime::SITE_BITS) - 1)) | (clock >> CLOCK_SHIFT) << 32;
        if let Some(i) = ring {
            w |= (i as u64) << 12 | Self::IN_RING;
        }
        if probe {
            w |= Self::PROBE;
        }
        SampleWord(w)
    }
    fn key(self) -> u32 {
        (self.0 & ((1 << lifetime::SITE_BITS) - 1)) as u32
    }
    fn ring(self) -> Option<usize> {
        (self.0 & Self::IN_RING != 0).then_some((self.0 >> 12) as usize & (RING - 1))
    }
    fn probe(self) -> bool {
        self.0 & Self::PROBE != 0
    }
    /// Bytes allocated since the block's birth (to clock resolution).
    fn age(self, clock: u64) -> u64 {
        let now = (clock >> CLOCK_SHIFT) as u32;
        (now.wrapping_sub((self.0 >> 32) as u32) as u64) << CLOCK_SHIFT
    }
}

/// What a request of `size` bytes moves the allocation clock by: the block and its header, a
/// size no arena can hold counted as the largest one can (`malloc(SIZE_MAX)` in process mode
/// overflowed the sum: a panic in debug builds).
#[inline(always)]
pub(super) fn clock_bytes(size: usize) -> u64 {
    (size.min(MAX_SLOT) + HEADER) as u64
}

impl Arena {
    /// The sample word of a live block whose header `hdr` was validated, if it is sampled.
    ///
    /// # Safety
    /// `hdr` is the validated header of a live block of this arena.
    pub(super) unsafe fn sample_of(hdr: *mut usize) -> Option<SampleWord> {
        // SAFETY: caller's obligation; the second header word is part of the block's header.
        unsafe { (word_tag(*hdr) == TAG_SAMPLED).then(|| SampleWord(*hdr.add(1) as u64)) }
    }

    /// Allocations until the next sample: uniform in `1..2 * SAMPLE_EVERY`, so that a loop whose
    /// period divides a fixed interval cannot hide one of its sites from the sampler (a loop of
    /// one temporary and one kept block, sampled every 8th, only ever saw the temporary).
    pub(super) fn next_sample_gap(&self) -> u32 {
        // xorshift32
        let mut x = self.sample_rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.sample_rng.set(x);
        1 + x % (2 * lifetime::SAMPLE_EVERY - 1)
    }

    /// Makes the fresh block `p` a sampled one: records its site and birth in its header and in
    /// the survivor ring.
    #[cold]
    #[inline(never)]
    pub(super) fn sample(&self, p: usize, size: usize, key: u32, probe: bool) {
        let i = self.ring_next.get();
        self.ring_next.set((i + 1) % RING);
        // An entry whose block is still live and young stays: it is the evidence the sweep
        // waits for. This sample then only records itself in its header.
        self.judge_ring_entry(i);
        let slot = (self.ring[i].load(Ordering::Acquire) == 0).then_some(i);
        let clock = self.alloc_clock.get();
        let w = SampleWord::new(key, slot, probe, clock);
        if slot.is_some() {
            self.ring_words[i].set(w.0);
            self.ring[i].store(p, Ordering::Release);
            self.ring_used.set(self.ring_used.get() | 1 << i);
        }
        let hdr = (p - HEADER) as *mut usize;
        let at_top = self.below_top.get() == hdr as usize;
        // SAFETY: `p` was just handed out by this arena: its 16-byte header is ours to write
        // (and its link, written by the bump, ours to read).
        let link = unsafe { hdr.add(1).read() };
        // SAFETY: as above.
        unsafe {
            hdr.add(1).write(w.0 as usize);
            hdr.write(header_word(size, TAG_SAMPLED));
        }
        // Its link is its sample word now, and its owner's free must take the slow path, which
        // learns from it: the LIFO free, which reads no tag, must never find it at `below_top`
        // (see there). The block above it then links to `no_link`; what is lost is this block
        // itself: freed before the block above it, it is no longer taken back when that one
        // goes (it waits for the range's or the region's end, or in process mode for its
        // granule to empty). Its own free at `top` gives its link back (`sampled_at`). One
        // predicted allocation in `SAMPLE_EVERY` is sampled.
        if at_top {
            self.sampled_at.set(hdr as usize);
            self.sampled_link.set(link);
            self.forget_below_top();
        } else {
            self.sampled_at.set(0);
        }
    }

    /// A lap of this arena: blocks that live longer pin their granules when the bump pointer
    /// comes round again. In process mode, [`LAP`] bytes of allocation. A region's arena comes
    /// round at the region's end: a block freed inside its region is short however much the
    /// region allocated meanwhile, and one alive across an end is long (each end moves the
    /// clock by [`REGION_LAP`]). With a fixed lap there, a region of 10 MB of temporaries that
    /// all live until its end would teach the predictor that their site is long-lived, and send
    /// the next regions' temporaries to the next allocator (914 MiB in 100 such regions).
    fn lap_bytes(&self) -> u64 {
        if self.recycle {
            LAP
        } else {
            REGION_LAP / 2
        }
    }

    /// Long evidence from ring entry `i` if its block is still live and older than a lap; the
    /// entry is emptied then.
    fn judge_ring_entry(&self, i: usize) {
        let p = self.ring[i].load(Ordering::Acquire);
        if p == 0 {
            return;
        }
        let w = SampleWord(self.ring_words[i].get());
        let old = w.age(self.alloc_clock.get()) > self.lap_bytes();
        if old {
            lifetime::learn_long(w.key(), w.probe());
        }
        if old {
            // A free racing with us clears it too; either way the entry is empty.
            let _ = self.ring[i].compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Looks at every sampled block still live: those older than a lap are long evidence.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep(&self) {
        let mut used = self.ring_used.get();
        let mut still = 0;
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            self.judge_ring_entry(i);
            if self.ring[i].load(Ordering::Relaxed) != 0 {
                still |= 1 << i;
            }
        }
        self.ring_used.set(still);
        let next = self.alloc_clock.get() + (self.lap_bytes() / 4).max(SWEEP_MIN as u64);
        self.next_sweep.set(next);
    }

    /// A sampled block is being freed (by any thread): its age is evidence for its site.
    pub(super) fn learn_from_free(&self, p: usize, w: SampleWord) {
        if let Some(i) = w.ring() {
            let _ = self.ring[i].compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        if w.age(self.alloc_clock.get()) > self.lap_bytes() {
            lifetime::learn_long(w.key(), w.probe());
        } else {
            let weight = if w.probe() { lifetime::PROBE_WEIGHT } else { 1 };
            lifetime::learn_short(w.key(), weight);
        }
    }

    /// Region end, for the predictor: the clock jumps a lap (blocks alive now are old), the
    /// survivors are judged, and prediction turns on once regions keep leaving blocks behind,
    /// off after a run of regions that leave nothing.
    pub(super) fn predictor_region_end(&self) {
        let live = self.live_bytes();
        let routed = self.bytes_routed_away.get();
        if live > self.live_at_reset.get() {
            self.escaping_regions.set(self.escaping_regions.get() + 1);
            self.clean_regions.set(0);
        } else if routed != self.routed_at_reset.get() {
            // Nothing stayed behind because the predictor sent it elsewhere: not clean.
            self.clean_regions.set(0);
        } else {
            self.note_clean_region();
        }
        self.live_at_reset.set(live);
        self.routed_at_reset.set(routed);
        if !self.recycle
            && self.escaping_regions.get() >= ESCAPES_TO_PREDICT
            && lifetime::sites_known()
        {
            self.predicting.set(true);
        }
        if self.predicting.get() {
            self.alloc_clock.add(REGION_LAP);
            self.sweep();
        }
    }

    /// A region ended with nothing left behind and nothing routed away: after `CLEAN_TO_STOP`
    /// of them in a row, the arena stops predicting.
    #[inline]
    pub(super) fn note_clean_region(&self) {
        let clean = self.clean_regions.get() + 1;
        self.clean_regions.set(clean);
        if clean >= CLEAN_TO_STOP {
            self.escaping_regions.set(0);
            self.predicting.set(false);
        }
    }
}
