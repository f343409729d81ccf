//! Allocation: the reuse cache first, then a best fit in the coalescing structure, then a
//! synchronisation of frees in flight, then a new segment from the driver.

use super::{
    round_up, Block, DevicePool, Live, PoolError, Segment, State, SyncPolicy, GRANULE, MIN_SEGMENT,
};
use crate::device::{Backend, Capture, DevPtr, StreamId};

impl<B: Backend> DevicePool<B> {
    /// Allocates `size` bytes for use on `stream`. When frees are in flight and nothing else
    /// fits, the pool synchronises itself (once for the whole batch) before it grows.
    pub fn alloc(&mut self, size: usize, stream: StreamId) -> Result<DevPtr, PoolError<B::Error>> {
        self.alloc_with(size, stream, SyncPolicy::Inline)
    }

    /// As [`DevicePool::alloc`], but the pool never synchronises itself: where it would, it
    /// answers [`PoolError::NeedsSync`] (unless `synced`: the caller synchronised since the
    /// last such answer, and the pool grows instead). For callers that share the pool behind a
    /// lock and must not hold it across a synchronisation.
    pub fn alloc_without_sync(
        &mut self,
        size: usize,
        stream: StreamId,
        synced: bool,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        let policy = if synced {
            SyncPolicy::Done
        } else {
            SyncPolicy::Defer
        };
        self.alloc_with(size, stream, policy)
    }

    #[inline]
    pub(super) fn alloc_with(
        &mut self,
        size: usize,
        stream: StreamId,
        policy: SyncPolicy,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        if size == 0 {
            return Err(PoolError::ZeroSize);
        }
        let Some(need) = round_up(size, GRANULE) else {
            return Err(self.out_of_memory_error(usize::MAX));
        };
        if let Some(p) = self.take_ready(need) {
            return Ok(p);
        }
        self.alloc_slow(need, stream, policy)
    }

    /// A freed block of exactly `need` bytes that is safe for anyone.
    #[inline]
    pub(super) fn take_ready(&mut self, need: usize) -> Option<DevPtr> {
        let p = self.ready.get_mut(&need)?.pop()?;
        self.ready_blocks -= 1;
        self.hand_out(p, need);
        Some(p)
    }

    /// Everything the reuse cache cannot serve: same-stream blocks, best fit, the cache merged
    /// back, one sync for the whole batch of frees (never during a capture), and only then a
    /// new segment (never during a global-mode capture).
    #[inline(never)]
    #[cold]
    pub(super) fn alloc_slow(
        &mut self,
        need: usize,
        stream: StreamId,
        policy: SyncPolicy,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        if let Some(p) = self.take_from_stream(need, stream) {
            return Ok(p);
        }
        if let Some(p) = self.take_free(need) {
            return Ok(p);
        }
        if self.ready_blocks > 0 {
            self.flush_ready();
            if let Some(p) = self.take_free(need) {
                return Ok(p);
            }
        }
        let capture = self.backend.capture();
        if capture == Capture::None {
            self.release_postponed();
            // Blocks freed since the last sync may be enough: one sync for the whole batch.
            if self.has_pending_frees() {
                match policy {
                    SyncPolicy::Inline => {
                        if self.sync_for_frees()? {
                            if let Some(p) = self.take_ready(need) {
                                return Ok(p);
                            }
                            self.flush_ready();
                            if let Some(p) = self.take_free(need) {
                                return Ok(p);
                            }
                        }
                    }
                    SyncPolicy::Defer => return Err(PoolError::NeedsSync),
                    SyncPolicy::Done => {}
                }
            }
        } else if capture == Capture::Global {
            self.stats.capture_refusals += 1;
            return Err(PoolError::Capturing);
        }
        self.grow(need, policy)?;
        Ok(self
            .take_free(need)
            .expect("a fresh segment fits the request"))
    }

    /// True when blocks were freed and wait for a synchronisation.
    pub fn has_pending_frees(&self) -> bool {
        !self.deferred.is_empty() || !self.stream_free.is_empty() || !self.foreign.is_empty()
    }

    /// Best fit among blocks freed asynchronously on `stream` itself.
    pub(super) fn take_from_stream(&mut self, need: usize, stream: StreamId) -> Option<DevPtr> {
        let &(s, size, ptr) = self.stream_free.range((stream, need, 0)..).next()?;
        if s != stream {
            return None;
        }
        self.stream_free.remove(&(s, size, ptr));
        let seq = self
            .freed_at
            .remove(&ptr)
            .expect("async-freed blocks have a sequence number");
        let rest = size - need;
        if rest >= GRANULE {
            // The remainder stays reusable on the same stream.
            let seg = self.blocks[&ptr].segment;
            self.blocks.insert(
                ptr + need as DevPtr,
                Block {
                    size: rest,
                    segment: seg,
                    state: State::AsyncFree(stream),
                },
            );
            self.segments
                .get_mut(&seg)
                .expect("segment of a block")
                .busy += 1;
            self.freed_at.insert(ptr + need as DevPtr, seq);
            self.stream_free
                .insert((stream, rest, ptr + need as DevPtr));
            self.blocks.get_mut(&ptr).expect("block").size = need;
        }
        let b = self.blocks.get_mut(&ptr).expect("block");
        b.state = State::Used;
        let size = b.size;
        self.hand_out(ptr, size);
        Some(ptr)
    }

    /// Best fit among free blocks; splits off the rest.
    pub(super) fn take_free(&mut self, need: usize) -> Option<DevPtr> {
        let &(size, ptr) = self.free_index.range((need, 0)..).next()?;
        self.free_index.remove(&(size, ptr));
        let seg = self.blocks[&ptr].segment;
        if size > need {
            let rest = ptr + need as DevPtr;
            self.blocks.insert(
                rest,
                Block {
                    size: size - need,
                    segment: seg,
                    state: State::Free,
                },
            );
            self.free_index.insert((size - need, rest));
        }
        self.blocks.insert(
            ptr,
            Block {
                size: need,
                segment: seg,
                state: State::Used,
            },
        );
        self.segments
            .get_mut(&seg)
            .expect("segment of a block")
            .busy += 1;
        self.hand_out(ptr, need);
        Some(ptr)
    }

    /// Records a handout: live with a fresh buffer id, counted in use.
    #[inline]
    pub(super) fn hand_out(&mut self, ptr: DevPtr, size: usize) {
        self.live.insert(
            ptr,
            Live {
                size,
                id: self.next_id,
            },
        );
        self.next_id += 1;
        self.note_use(size);
    }

    #[inline]
    pub(super) fn note_use(&mut self, size: usize) {
        self.in_use += size;
        if self.in_use > self.region_peak {
            self.region_peak = self.in_use;
        }
    }

    /// Adds a segment that fits `need`: the planned size when a resize asked for one, else at
    /// least `MIN_SEGMENT`. Out of memory: hand back empty segments and retry with exactly
    /// `need`; only then fail with the driver's error.
    pub(super) fn grow(
        &mut self,
        need: usize,
        policy: SyncPolicy,
    ) -> Result<(), PoolError<B::Error>> {
        let planned = std::mem::take(&mut self.planned_segment);
        let size = round_up(need.max(planned).max(MIN_SEGMENT), MIN_SEGMENT).unwrap_or(need);
        if self.region_depth > 0 && planned == 0 && !self.segments.is_empty() {
            self.stats.overflow_blocks += 1;
        }
        let base = match self.backend.alloc(size) {
            Ok(base) => base,
            Err(e) if self.backend.is_out_of_memory(&e) => {
                if policy == SyncPolicy::Inline {
                    self.sync_for_frees()?;
                }
                self.release_cached();
                match self.backend.alloc(need) {
                    Ok(base) => {
                        self.add_segment(base, need);
                        return Ok(());
                    }
                    Err(e) => return Err(PoolError::Backend(e)),
                }
            }
            Err(e) => return Err(PoolError::Backend(e)),
        };
        self.add_segment(base, size);
        Ok(())
    }

    pub(super) fn add_segment(&mut self, base: DevPtr, size: usize) {
        self.stats.driver_allocs += 1;
        self.segments.insert(
            base,
            Segment {
                size,
                busy: 0,
                retiring: false,
            },
        );
        self.blocks.insert(
            base,
            Block {
                size,
                segment: base,
                state: State::Free,
            },
        );
        self.free_index.insert((size, base));
    }

    pub(super) fn out_of_memory_error(&mut self, size: usize) -> PoolError<B::Error> {
        match self.backend.alloc(size) {
            Err(e) => PoolError::Backend(e),
            Ok(p) => {
                // Cannot happen for usize::MAX; give it back if a driver ever says yes.
                let _ = self.backend.free(p);
                PoolError::ZeroSize
            }
        }
    }
}
