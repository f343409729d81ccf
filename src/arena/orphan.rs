//! Thread exit: the owner's arena is orphaned (released once its last block is freed), handed on
//! warm to the next thread, or adopted by it.

use core::sync::atomic::Ordering;

use super::{Arena, ArenaConfig};
use crate::layout::GRANULE;

/// See `Arena::remote_balance`: remote frees alone can never reach it (they would need 2^63
/// bytes); a balance from `ORPHANED_SEEN` on has the exiting owner's add in it.
pub(super) const ORPHANED: u64 = 1 << 63;
pub(super) const ORPHANED_SEEN: u64 = 1 << 62;

/// An exiting thread's arena that is handed on keeps this much of the start of its memory
/// resident, for the next thread that takes it ([`Arena::reuse`], [`Arena::adopt`]): a program
/// that starts short-lived threads one after another then reuses warm pages, as glibc's arenas
/// are reused. `reservation` bounds how many arenas without an owner keep it.
pub const WARM_BYTES: usize = 512 << 10;

/// In process mode an exiting thread's arena handed on warm keeps, for the purge delay, its
/// free memory in the first this many bytes (see `Arena::prepare_orphan`).
const WARM_KEEP_MAX: usize = 32 << 20;

impl Arena {
    /// The owner thread is exiting: gives back every free granule and hands the arena over.
    /// Returns `true` when nothing is live: the caller must then release the slot. Otherwise the
    /// last remote free does (see [`Arena::free_remote`]), unless a new thread adopts the arena
    /// first ([`Arena::adopt`]). [`Arena::prepare_orphan`] then [`Arena::complete_orphan`], for
    /// a caller that keeps no warm memory.
    pub fn orphan(&self) -> bool {
        self.prepare_orphan(false);
        self.complete_orphan()
    }

    /// True when no block of the arena is live. Owner thread only. Once true on an exiting
    /// owner's thread it stays true: only other threads' frees can still reach the arena, and
    /// a free never makes a block live.
    pub fn nothing_live(&self) -> bool {
        self.flush_uncounted();
        self.live_local_bytes.get() == self.remote_balance.load(Ordering::Acquire)
    }

    /// First half of the exiting owner's hand-over: gives back every free granule, but those of
    /// the first [`WARM_BYTES`] when `keep_warm` (for the next thread that takes the arena, see
    /// `reservation`). Owner thread only.
    ///
    /// In process mode, with `keep_warm` and a purge delay (`RESIZEALLOC_PURGE_DELAY_MS`), the
    /// free granules past the warm start wait for it instead, as the frees of a running thread
    /// do (see [`Arena::defer_purge`]): a program that starts short threads one after another,
    /// each with a large buffer, then has the next thread reuse the last one's pages instead of
    /// faulting all of them in again. Returns whether they wait; the caller must then see to
    /// it that someone gives them back once their time has come (`reservation`).
    pub fn prepare_orphan(&self, keep_warm: bool) -> bool {
        self.flush_uncounted();
        if keep_warm
            && crate::options::purge_delay_ms() > 0
            && self.resident() * GRANULE > WARM_BYTES
        {
            // At most the first `WARM_KEEP_MAX` wait: the next thread takes the rest of the
            // wait with the arena, and a thread that then allocates little holds it until its
            // own periodic look.
            self.give_back(
                self.data_start,
                self.data_start,
                self.data_start + WARM_KEEP_MAX,
            );
            if self.resident() * GRANULE > WARM_BYTES {
                self.defer_purge();
                // Unless there was no clock to wait on, and it gave them back at once.
                return self.purge_at_ms.get() != 0;
            }
            self.purge_at_ms.set(0);
            return false;
        }
        // Nothing waits from now on (a wait the thread had started is over).
        self.purge_at_ms.set(0);
        let warm_end = if keep_warm {
            self.data_start + WARM_BYTES
        } else {
            0
        };
        self.give_back(self.data_start, self.data_start, warm_end);
        false
    }

    /// When the free memory an arena without an owner kept past its warm start goes back (a
    /// [`os::monotonic_ms`] time), 0 for none. Any thread holding the slot table's lock.
    pub fn warm_until_ms(&self) -> u64 {
        self.purge_at_ms.get()
    }

    /// Gives back the free granules past the warm start that an arena without an owner kept
    /// for the purge delay ([`Arena::prepare_orphan`]).
    ///
    /// # Safety
    /// The arena has no owner (orphaned or released, not reused) and the caller holds the slot
    /// table lock: nobody else adopts, reuses, releases or trims it meanwhile (other threads'
    /// frees touch only what they always touch).
    pub unsafe fn give_back_past_warm_start(&self) {
        self.purge_at_ms.set(0);
        self.give_back(
            self.data_start,
            self.data_start,
            self.data_start + WARM_BYTES,
        );
    }

    /// Second half: the owner's last access to the arena. Returns `true` when nothing is live:
    /// the caller must then release the slot.
    pub fn complete_orphan(&self) -> bool {
        self.orphaned.store(true, Ordering::Release);
        // Last access to the arena by its owner, as in `free_remote`.
        let delta = ORPHANED.wrapping_sub(self.live_local_bytes.get());
        self.remote_balance
            .fetch_add(delta, Ordering::AcqRel)
            .wrapping_add(delta)
            == ORPHANED
    }

    /// Whether the exiting owner's arena may be handed on with its live blocks
    /// ([`Arena::adopt`]): always in process mode, whose arena reuses memory by laps and steps
    /// round long-lived blocks anyway; in markers mode when the thread exits outside a region
    /// (`in_region` false) and what it leaves live is at most an eighth of the capacity its
    /// regions planned. A thread per request that keeps a session object then hands its warm,
    /// sized arena to the next thread instead of leaving it orphaned for the session's life,
    /// where every new thread would start a fresh arena that has learned nothing and fault its
    /// temporaries in again (100 threads of 10 MB each: 259,000 page faults, 5.8x glibc's time).
    /// The new owner's regions step over the inherited blocks, as over their own escapes, and
    /// its first region learns the extent. Owner thread only.
    pub fn may_hand_on_live(&self, in_region: bool) -> bool {
        self.recycle || (!in_region && self.live_bytes() <= (self.planned_bytes() / 8) as u64)
    }

    /// The calling thread becomes the owner of this orphaned arena, its live blocks included:
    /// they stay where they are, and their frees by the new owner are owner frees. Returns
    /// `false` when the arena cannot be had: its last block is being freed (that thread
    /// releases it), or its mode or size bounds differ from `cfg`'s.
    ///
    /// Blocks left by the old owner are pinned granules: process mode's laps go round them, as
    /// round its own long-lived blocks; a region's run steps over them, as over the escapes of
    /// its earlier regions (the capacity the regions learned is kept; [`Arena::reset`] does not
    /// count the jump as need). Markers-mode arenas are offered only when the old owner left
    /// little live and exited outside a region ([`Arena::may_hand_on_live`]).
    ///
    /// Only the run is set up again: the exit gave its memory back, and a new, empty run
    /// starts where a lap would.
    ///
    /// # Safety
    /// 1. The owner has exited and [`Arena::complete_orphan`] returned `false`.
    /// 2. The caller holds the slot table lock, so that no other thread adopts, releases or
    ///    trims the arena meanwhile; from a `true` return on, the calling thread is the owner.
    pub unsafe fn adopt(&self, cfg: &ArenaConfig) -> bool {
        if self.recycle != cfg.recycle
            || cfg.min_alloc.max(1) != self.user_min_alloc
            || cfg.max_alloc.max(self.user_min_alloc) != self.user_max_alloc
        {
            return false;
        }
        // Take back the exiting owner's add (see `remote_balance`), unless the last free has
        // completed it: the balance is then the bytes other threads freed, as while an owner
        // lives. Acquire: the old owner's writes (before its AcqRel add) are visible to us.
        let delta = ORPHANED.wrapping_sub(self.live_local_bytes.get());
        let mut balance = self.remote_balance.load(Ordering::Acquire);
        loop {
            if balance == ORPHANED {
                return false;
            }
            match self.remote_balance.compare_exchange_weak(
                balance,
                balance.wrapping_sub(delta),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => balance = now,
            }
        }
        self.orphaned.store(false, Ordering::Release);
        self.dry.set(false);
        self.wrap();
        if !self.recycle {
            self.plan_round_inherited();
        }
        self.debug_check();
        true
    }

    /// Markers mode, on adoption: the capacity the old owner's regions planned grows by the
    /// granules its live blocks pin inside it, so that the new owner's regions, whose runs step
    /// over them, fit without overflowing (without it, a region repeated 100 times on an
    /// adopted arena with a few inherited blocks overflows in each). A pinned granule is one a live block starts
    /// or ends in; the granules inside a large inherited block are not counted, and a region
    /// that steps over one overflows its first time and plans for it at its end.
    /// Their region ends keep planning for those jumps ([`Arena::reset`] leaves the rest of a
    /// region's jumps out of its plan).
    ///
    /// The capacity planned for the last owner's inherited blocks is taken off first, so that
    /// a chain of threads each adopting the last one's arena does not add the same pins again
    /// at every hand-on.
    fn plan_round_inherited(&self) {
        let cap_end = self.cap_end.get();
        let pinned = (self.granule(self.data_start)..self.granule(cap_end))
            .filter(|&g| self.live(g) != 0)
            .count();
        let base = cap_end
            .saturating_sub(self.inherited_pins.get())
            .max(self.data_start + self.min_capacity.get());
        self.inherited_pins.set(pinned * GRANULE);
        let want = (base + pinned * GRANULE).min(self.slot_end);
        if want > cap_end && self.grow_commit(want) {
            self.set_capacity_end(want);
        }
    }

    /// Gives back the free granules an orphaned arena kept warm.
    ///
    /// # Safety
    /// The arena is orphaned, not released, and the caller holds the slot table lock: nobody
    /// owns the arena, and nobody else adopts, releases or trims it meanwhile (other threads'
    /// frees touch only what they always touch).
    pub unsafe fn give_back_orphaned(&self) {
        self.purge_at_ms.set(0);
        self.give_back(self.data_start, 0, 0);
    }

    /// Whether the owner thread has exited.
    pub fn is_orphaned(&self) -> bool {
        self.orphaned.load(Ordering::Acquire)
    }
}
