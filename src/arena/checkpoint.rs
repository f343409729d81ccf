//! Nested regions: a checkpoint of `top` at each region begin, restored at its end when nothing
//! above it is live.

use super::header::{TAG_FREED, TAG_SAMPLED};
use super::Arena;
use crate::layout::{align_up, GRANULE, MIN_ALIGN};

/// Nested regions deeper than this still work but do not restore their checkpoint.
pub const MAX_CHECKPOINTS: usize = 32;

#[derive(Clone, Copy, Default)]
pub(super) struct Checkpoint {
    top: usize,
    /// The run `top` belongs to.
    run_id: u64,
}

impl Arena {
    /// A nested region begins: remember where the bump pointer is, so that its end can give
    /// back what the nested region allocated and freed. The range is flushed, so until
    /// something looks at the counts again, everything the nested region allocates lies in the
    /// uncounted range from the checkpoint on. The bump pointer stays where it is: a region
    /// that keeps one small block packs it next to the last one (moving to the next granule
    /// would pin a granule per region in process mode).
    ///
    /// A thread in process mode never calls this: the program's markers only nest there (see
    /// `region::region_begin`), the arena reusing freed memory by laps.
    #[inline]
    pub fn push_checkpoint(&self) {
        self.flush_uncounted();
        let depth = self.checkpoint_depth.get();
        self.checkpoint_depth.set(depth + 1);
        if depth < MAX_CHECKPOINTS {
            self.checkpoints[depth].set(Checkpoint {
                top: self.top.get(),
                run_id: self.run_id.get(),
            });
        }
        self.debug_check();
    }

    /// A nested region ends: the freed blocks at the end of what it allocated go back to the
    /// bump pointer (all of it when everything was freed). Live blocks stay, and what they
    /// keep is reclaimed when their granules empty (laps) or at the outermost end.
    pub fn pop_checkpoint(&self) {
        let depth = self.checkpoint_depth.get();
        if depth == 0 {
            return;
        }
        self.checkpoint_depth.set(depth - 1);
        if depth > MAX_CHECKPOINTS {
            return;
        }
        let cp = self.checkpoints[depth - 1].get();
        if cp.run_id != self.run_id.get() {
            return; // the run moved on: the memory in between is not ours to vouch for
        }
        let unc = self.uncounted.get();
        if unc <= cp.top {
            // Nothing counted since the region began: `[unc, top)` is a well-formed uncounted
            // range (`unc < cp.top` only when a LIFO free took the bump pointer below the
            // checkpoint, and then `unc` is where it went), and it holds what the region
            // allocated.
            self.release_freed_tail(unc);
        } else if cp.top & (GRANULE - 1) == 0 {
            // Something counted the region's blocks (a slow path); when the region began on a
            // granule boundary, its granules are its own: give them back if none holds a live
            // block.
            self.flush_uncounted();
            let mut addr = cp.top;
            while addr < self.top.get() {
                if self.live(self.granule(addr)) != 0 {
                    return;
                }
                addr += GRANULE;
            }
            if self.top.get() > cp.top {
                self.note_peak();
                self.top.set(cp.top);
                self.forget_below_top();
                self.uncounted.set(cp.top);
            }
        }
        self.debug_check();
    }

    /// Walks the uncounted range from `from` (the start of a block or gap in it, or `top`) and
    /// takes the bump pointer back to the end of its last block that is not freed by its owner:
    /// blocks freed out of order at the end of a nested region go back at once, as the last
    /// one would by LIFO. A block another thread freed counts as kept (its remote units are on
    /// the granules and must meet local ones when the range is counted). The kept block is
    /// `below_top` from then on, unless it is sampled (see `below_top`).
    fn release_freed_tail(&self, from: usize) {
        let top = self.top.get();
        let (mut keep, mut kept) = (from, None);
        let stop = self.walk_uncounted(from, top, |hdr, end, tag| {
            if tag != TAG_FREED {
                keep = align_up(end, MIN_ALIGN);
                kept = (tag != TAG_SAMPLED).then_some(hdr);
            }
        });
        debug_assert_eq!(stop, top, "the uncounted range does not end at top");
        if keep < top {
            self.note_peak();
            self.top.set(keep);
            self.forget_below_top();
            if let Some(hdr) = kept {
                self.below_top.set(hdr);
            }
        }
    }
}
