//! Frees: synchronous (`cudaFree`, reusable after the next synchronisation) and stream-ordered
//! (`cudaFreeAsync`, reusable on its stream at once), and synchronisations that make them reusable.

use super::{DevicePool, PoolError, State, RETIRED_STREAM};
use crate::device::{Backend, Capture, DevPtr, StreamId};

impl<B: Backend> DevicePool<B> {
    /// Frees `ptr` with synchronous semantics (`cudaFree`, `cuMemFree`): reusable after the next
    /// synchronisation.
    pub fn free(&mut self, ptr: DevPtr) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.free_seq += 1;
        self.deferred.push((self.free_seq, ptr, size));
        self.in_use -= size;
        Ok(())
    }

    /// Frees `ptr` with stream-ordered semantics (`cudaFreeAsync(ptr, stream)`).
    pub fn free_async(&mut self, ptr: DevPtr, stream: StreamId) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.blocks.get_mut(&ptr).expect("a live block").state = State::AsyncFree(stream);
        self.stream_free.insert((stream, size, ptr));
        self.free_seq += 1;
        self.freed_at.insert(ptr, self.free_seq);
        self.in_use -= size;
        Ok(())
    }

    /// The program destroys `stream` (its handle may come back for a new stream while the old
    /// one's work still runs): blocks freed on it stop being reusable on "the same stream" and
    /// wait for a synchronisation like any other.
    pub fn forget_stream(&mut self, stream: StreamId) {
        let gone: Vec<(StreamId, usize, DevPtr)> = self
            .stream_free
            .range((stream, 0, 0)..)
            .take_while(|e| e.0 == stream)
            .copied()
            .collect();
        for (s, size, ptr) in gone {
            self.stream_free.remove(&(s, size, ptr));
            self.stream_free.insert((RETIRED_STREAM, size, ptr));
            self.blocks
                .get_mut(&ptr)
                .expect("an async-freed block")
                .state = State::AsyncFree(RETIRED_STREAM);
        }
    }

    /// The program synchronised the device (`cudaDeviceSynchronize`, `cuCtxSynchronize`, …) and
    /// no free happened while it ran: everything freed before is safe to hand out again.
    pub fn on_synchronize(&mut self) {
        self.on_synchronize_since(self.sync_mark());
    }

    /// Taken right before a synchronisation the pool does not hold the lock across: frees
    /// that happen while it runs are not covered by it.
    pub fn sync_mark(&self) -> u64 {
        self.free_seq
    }

    /// A synchronisation that started at `mark` (from [`DevicePool::sync_mark`]) finished: only
    /// the blocks freed before it started become reusable.
    pub fn on_synchronize_since(&mut self, mark: u64) {
        self.stats.observed_syncs += 1;
        self.reclaim_until(mark);
    }

    /// The pool's own synchronisation, when frees are in flight and no capture is active:
    /// afterwards every freed block is reusable (blocks freed on other contexts' streams after
    /// a synchronisation of those contexts too). Returns whether it synced.
    pub(super) fn sync_for_frees(&mut self) -> Result<bool, PoolError<B::Error>> {
        if !self.has_pending_frees() || self.backend.capture() != Capture::None {
            return Ok(false);
        }
        self.backend.synchronize().map_err(PoolError::Backend)?;
        self.stats.own_syncs += 1;
        for domain in self.foreign_domains() {
            if self.backend.synchronize_domain(domain).is_ok() {
                self.reclaim_foreign(domain, self.free_seq);
            }
        }
        self.reclaim_until(self.free_seq);
        Ok(true)
    }

    /// The caller synchronised the pool's context on the pool's behalf (after
    /// [`PoolError::NeedsSync`]), starting at `mark` from [`DevicePool::sync_mark`].
    pub fn own_sync_done(&mut self, mark: u64) {
        self.stats.own_syncs += 1;
        self.reclaim_until(mark);
    }

    /// Frees `ptr` on a stream of another context, `domain` (any number that names that
    /// context): the block is reusable only after a synchronisation of that context
    /// ([`DevicePool::on_domain_synchronized`], or the pool's own, which synchronises it through
    /// [`Backend::synchronize_domain`]). A sync of the pool's own context does not cover it.
    pub fn free_async_foreign(
        &mut self,
        ptr: DevPtr,
        domain: u64,
    ) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.free_seq += 1;
        self.foreign.push((self.free_seq, ptr, size, domain));
        self.in_use -= size;
        Ok(())
    }

    /// The contexts whose synchronisation would give blocks back (from
    /// [`DevicePool::free_async_foreign`]), without repeats.
    pub fn foreign_domains(&self) -> Vec<u64> {
        let mut d: Vec<u64> = self.foreign.iter().map(|f| f.3).collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// A synchronisation of context `domain`, which started at `mark` (this pool's
    /// [`DevicePool::sync_mark`]), finished: blocks freed on its streams before it started are
    /// reusable.
    pub fn on_domain_synchronized(&mut self, domain: u64, mark: u64) {
        self.reclaim_foreign(domain, mark);
    }

    pub(super) fn reclaim_foreign(&mut self, domain: u64, mark: u64) {
        if self.foreign.is_empty() {
            return;
        }
        let mut done = Vec::new();
        self.foreign.retain(|&(seq, ptr, size, d)| {
            let covered = d == domain && seq <= mark;
            if covered {
                done.push((ptr, size));
            }
            !covered
        });
        for (ptr, size) in done {
            self.cache_freed(ptr, size);
        }
    }

    /// A freed block whose free a synchronisation covered: into the reuse cache, or merged
    /// straight back when its segment is retiring.
    pub(super) fn cache_freed(&mut self, ptr: DevPtr, size: usize) {
        if self.segment_retiring(ptr) {
            self.make_free(ptr);
        } else {
            self.ready.entry(size).or_default().push(ptr);
            self.ready_blocks += 1;
        }
    }

    pub(super) fn reclaim_until(&mut self, mark: u64) {
        // Synchronously freed blocks: in free order, so the covered ones are a prefix.
        let covered = self.deferred.partition_point(|&(seq, _, _)| seq <= mark);
        let done: Vec<(u64, DevPtr, usize)> = self.deferred.drain(..covered).collect();
        for (_, ptr, size) in done {
            self.cache_freed(ptr, size);
        }
        // Async-freed blocks go back to the coalescing structure.
        let freed_at = &self.freed_at;
        let streams: Vec<(StreamId, usize, DevPtr)> = self
            .stream_free
            .iter()
            .filter(|e| freed_at.get(&e.2).is_some_and(|&seq| seq <= mark))
            .copied()
            .collect();
        for e in &streams {
            self.stream_free.remove(e);
            self.freed_at.remove(&e.2);
            self.make_free(e.2);
        }
        self.enforce_cap();
    }
}
