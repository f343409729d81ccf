//! Queries: ownership, sizes and figures, for the hooks and the tests.

use super::{DevicePool, State};
use crate::device::{Backend, DevPtr};

impl<B: Backend> DevicePool<B> {
    /// True when `ptr` lies in one of the pool's segments (live, free or pending).
    pub fn owns(&self, ptr: DevPtr) -> bool {
        self.segments
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&base, s)| ptr < base + s.size as DevPtr)
    }

    /// The live block containing `ptr`: its start and size (for `cuMemGetAddressRange` and the
    /// range attributes of `cuPointerGetAttribute`).
    pub fn find(&self, ptr: DevPtr) -> Option<(DevPtr, usize)> {
        let (&start, b) = self.blocks.range(..=ptr).next_back()?;
        (self.live.contains_key(&start) && ptr < start + b.size as DevPtr)
            .then_some((start, b.size))
    }

    /// The buffer id of the live block containing `ptr` (`CU_POINTER_ATTRIBUTE_BUFFER_ID`):
    /// every handout of the pool gets its own, also when it reuses an address.
    pub fn buffer_id(&self, ptr: DevPtr) -> Option<u64> {
        let (start, _) = self.find(ptr)?;
        self.live.get(&start).map(|l| l.id)
    }

    /// Checks the invariants documented at the top of this file; returns the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut in_use = 0;
        let mut used_live = 0;
        for (&base, seg) in &self.segments {
            let mut at = base;
            let mut busy = 0;
            let mut prev_free = false;
            for (&p, b) in self.blocks.range(base..base + seg.size as DevPtr) {
                if p != at {
                    return Err(format!(
                        "segment {base:#x}: gap or overlap at {p:#x} (expected {at:#x})"
                    ));
                }
                if b.segment != base {
                    return Err(format!("block {p:#x} names the wrong segment"));
                }
                let free = b.state == State::Free;
                if free && prev_free {
                    return Err(format!("block {p:#x}: two free neighbours not merged"));
                }
                if self.free_index.contains(&(b.size, p)) != (free && !seg.retiring) {
                    return Err(format!("block {p:#x}: free index out of step"));
                }
                match b.state {
                    State::Used => match self.live.get(&p).map(|l| l.size) {
                        Some(size) if size == b.size => {
                            in_use += size;
                            used_live += 1;
                        }
                        Some(_) => return Err(format!("live block {p:#x}: size out of step")),
                        None => {
                            let in_deferred =
                                self.deferred.iter().any(|d| d.1 == p && d.2 == b.size);
                            let in_ready = self.ready.get(&b.size).is_some_and(|v| v.contains(&p));
                            let in_foreign = self.foreign.iter().any(|f| f.1 == p && f.2 == b.size);
                            if usize::from(in_deferred)
                                + usize::from(in_ready)
                                + usize::from(in_foreign)
                                != 1
                            {
                                return Err(format!(
                                    "used block {p:#x}: neither live nor cached exactly once"
                                ));
                            }
                            if in_ready && seg.retiring {
                                return Err(format!("ready block {p:#x} in a retiring segment"));
                            }
                        }
                    },
                    State::AsyncFree(s) if !self.stream_free.contains(&(s, b.size, p)) => {
                        return Err(format!("async-freed block {p:#x} not listed"))
                    }
                    _ => {}
                }
                if !free {
                    busy += 1;
                }
                prev_free = free;
                at = p + b.size as DevPtr;
            }
            if at != base + seg.size as DevPtr {
                return Err(format!("segment {base:#x} not tiled to its end"));
            }
            if busy != seg.busy {
                return Err(format!(
                    "segment {base:#x}: busy {} but {busy} blocks in use",
                    seg.busy
                ));
            }
        }
        if in_use != self.in_use {
            return Err(format!(
                "in_use {} but live blocks sum to {in_use}",
                self.in_use
            ));
        }
        if used_live != self.live.len() {
            return Err("live lists blocks that are not used blocks".into());
        }
        if self.freed_at.len() != self.stream_free.len() {
            return Err("freed_at out of step with the async-freed blocks".into());
        }
        if self.ready_blocks != self.ready.values().map(Vec::len).sum::<usize>() {
            return Err("ready_blocks out of step".into());
        }
        if !self.deferred.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("deferred frees out of order".into());
        }
        if !self.foreign.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("foreign frees out of order".into());
        }
        let listed = self.free_index.len()
            + self.stream_free.len()
            + self.deferred.len()
            + self.foreign.len();
        if listed + self.ready_blocks + self.live.len() > self.blocks.len() {
            return Err("indexes list more blocks than exist".into());
        }
        Ok(())
    }
}
