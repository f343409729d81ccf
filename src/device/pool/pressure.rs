//! Memory pressure: the cap on cached bytes, trims, and what the pool gives back to the driver
//! when it runs short.

use super::{DevicePool, PoolError, State};
use crate::device::{Backend, Capture, DevPtr};

impl<B: Backend> DevicePool<B> {
    /// Caps the bytes the pool keeps cached (reserved, not in use): after each synchronisation,
    /// empty segments go back to the driver, largest first, until the cached bytes are at most
    /// `bytes` (the convention of the driver's `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`, which
    /// trims at synchronisations; `usize::MAX`, the default, keeps everything).
    pub fn set_max_cached(&mut self, bytes: usize) {
        self.max_cached = bytes;
    }

    pub(super) fn cached_bytes(&self) -> usize {
        let reserved: usize = self.segments.values().map(|g| g.size).sum();
        reserved.saturating_sub(self.in_use)
    }

    pub(super) fn enforce_cap(&mut self) {
        if self.max_cached == usize::MAX || self.cached_bytes() <= self.max_cached {
            return;
        }
        if self.backend.capture() == Capture::Global {
            return;
        }
        self.flush_ready();
        let mut empty: Vec<(usize, DevPtr)> = self
            .segments
            .iter()
            .filter(|(_, g)| g.busy == 0)
            .map(|(&b, g)| (g.size, b))
            .collect();
        empty.sort_unstable_by(|a, b| b.cmp(a));
        for (_, base) in empty {
            if self.cached_bytes() <= self.max_cached {
                break;
            }
            self.drop_segment(base);
            self.stats.pressure_releases += 1;
        }
    }

    /// Hands every empty segment back to the driver, without synchronising: what the pool
    /// caches and no pending free holds. Returns the bytes released. For memory pressure (a
    /// driver allocation elsewhere failed) and idle pools.
    pub fn release_cached(&mut self) -> usize {
        if self.backend.capture() == Capture::Global {
            return 0;
        }
        self.release_postponed();
        self.flush_ready();
        let before: usize = self.segments.values().map(|g| g.size).sum();
        self.release_empty(true);
        let after: usize = self.segments.values().map(|g| g.size).sum();
        before - after
    }

    /// Counts as a pressure release what [`DevicePool::release_cached`] did.
    pub fn release_for_pressure(&mut self) -> usize {
        let segments = self.segments.len();
        let bytes = self.release_cached();
        self.stats.pressure_releases += (segments - self.segments.len()) as u64;
        bytes
    }

    /// Releases the cached segments of a pool that handed nothing out for `idle_ms`
    /// milliseconds. `now_ms` is any monotonic clock in milliseconds; the pool notices idleness
    /// only when asked (the hooks ask at synchronisations). Returns the bytes released.
    pub fn release_if_idle(&mut self, now_ms: u64, idle_ms: u64) -> usize {
        if self.idle_mark.0 != self.next_id {
            self.idle_mark = (self.next_id, now_ms);
            return 0;
        }
        if now_ms.saturating_sub(self.idle_mark.1) < idle_ms || self.cached_bytes() == 0 {
            return 0;
        }
        self.release_for_pressure()
    }

    /// Frees the segments a global-mode capture kept from being freed.
    pub(super) fn release_postponed(&mut self) {
        if self.postponed.is_empty() || self.backend.capture() == Capture::Global {
            return;
        }
        for (base, _) in std::mem::take(&mut self.postponed) {
            let _ = self.backend.free(base);
        }
    }

    pub(super) fn segment_retiring(&self, ptr: DevPtr) -> bool {
        self.segments
            .range(..=ptr)
            .next_back()
            .is_some_and(|(_, s)| s.retiring)
    }

    /// Hands every block of the reuse cache's `ready` lists back to the coalescing structure.
    pub(super) fn flush_ready(&mut self) {
        if self.ready_blocks == 0 {
            return;
        }
        let blocks: Vec<DevPtr> = self.ready.values_mut().flat_map(|v| v.drain(..)).collect();
        self.ready_blocks = 0;
        for ptr in blocks {
            self.make_free(ptr);
        }
    }

    /// Turns a block `Free`, merges it with free neighbours, indexes it, and hands a retiring
    /// segment back once it is empty.
    pub(super) fn make_free(&mut self, mut ptr: DevPtr) {
        let mut b = self.blocks[&ptr];
        let seg_base = b.segment;
        let seg = self
            .segments
            .get_mut(&seg_base)
            .expect("segment of a block");
        seg.busy -= 1;
        let retiring = seg.retiring;
        // Merge with the next block.
        let next = ptr + b.size as DevPtr;
        if let Some(n) = self.blocks.get(&next).copied() {
            if n.segment == seg_base && n.state == State::Free {
                self.free_index.remove(&(n.size, next));
                self.blocks.remove(&next);
                b.size += n.size;
            }
        }
        // Merge with the previous block.
        if let Some((&prev, &p)) = self.blocks.range(..ptr).next_back() {
            if p.segment == seg_base && p.state == State::Free && prev + p.size as DevPtr == ptr {
                self.free_index.remove(&(p.size, prev));
                self.blocks.remove(&ptr);
                b.size += p.size;
                ptr = prev;
            }
        }
        b.state = State::Free;
        self.blocks.insert(ptr, b);
        if retiring {
            if self.segments[&seg_base].busy == 0 {
                self.drop_segment(seg_base);
            }
        } else {
            self.free_index.insert((b.size, ptr));
        }
    }

    pub(super) fn drop_segment(&mut self, base: DevPtr) {
        let seg = self.segments.remove(&base).expect("segment");
        let block = self
            .blocks
            .remove(&base)
            .expect("an empty segment is one free block");
        debug_assert_eq!(block.size, seg.size);
        self.free_index.remove(&(seg.size, base));
        if self.backend.capture() == Capture::Global {
            // cuMemFree would invalidate the capture: free it once the capture is over.
            self.postponed.push((base, seg.size));
            return;
        }
        // A driver error on free leaves nothing for the pool to do: the memory is not ours.
        let _ = self.backend.free(base);
    }

    /// Hands every segment without live or pending blocks back to the driver. With
    /// `include_active`, segments that are not retiring go too (trim, out of memory).
    pub(super) fn release_empty(&mut self, include_active: bool) {
        let empty: Vec<DevPtr> = self
            .segments
            .iter()
            .filter(|(_, s)| s.busy == 0 && (include_active || s.retiring))
            .map(|(&b, _)| b)
            .collect();
        for base in empty {
            self.drop_segment(base);
        }
    }

    /// Gives every cached block back to the driver: waits for frees in flight (one sync if
    /// any), then releases all empty segments.
    pub fn trim(&mut self) -> Result<(), PoolError<B::Error>> {
        self.sync_for_frees()?;
        self.release_cached();
        Ok(())
    }

    /// Forgets every segment without freeing it: for a pool whose memory the driver has freed
    /// already (its context was destroyed or reset). The pool is empty afterwards, and dropping
    /// it frees nothing.
    pub fn forget_segments(&mut self) {
        self.segments.clear();
        self.blocks.clear();
        self.free_index.clear();
        self.stream_free.clear();
        self.live.clear();
        self.deferred.clear();
        self.ready.clear();
        self.ready_blocks = 0;
        self.freed_at.clear();
        self.foreign.clear();
        self.postponed.clear();
        self.in_use = 0;
        self.planned_segment = 0;
    }
}
