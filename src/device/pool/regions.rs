//! Regions: the pool records its peak inside the outermost region and resizes to it at the end,
//! as the host arena does.

use super::{round_up, DevicePool, State, MIN_SEGMENT};
use crate::device::{Backend, DevPtr};

impl<B: Backend> DevicePool<B> {
    /// A region begins (nesting is counted; only the outermost matters).
    pub fn region_begin(&mut self) {
        self.region_depth += 1;
        if self.region_depth == 1 {
            self.region_peak = self.in_use;
        }
    }

    /// A region ends. At the outermost end, a region that needed more than one segment gets
    /// them replaced: the next growth asks for one segment covering the region's peak, and the
    /// old segments are handed back as soon as they are empty.
    pub fn region_end(&mut self) {
        if self.region_depth == 0 {
            return;
        }
        self.region_depth -= 1;
        if self.region_depth > 0 {
            return;
        }
        self.stats.high_water = self.region_peak as u64;
        // The resize looks at the segments as they are: cached blocks count as free.
        self.flush_ready();
        let active: Vec<DevPtr> = self
            .segments
            .iter()
            .filter(|(_, s)| !s.retiring)
            .map(|(&b, _)| b)
            .collect();
        let largest = active
            .iter()
            .map(|b| self.segments[b].size)
            .max()
            .unwrap_or(0);
        if active.len() > 1 || largest < self.region_peak {
            for base in active {
                self.retire(base);
            }
            self.planned_segment =
                round_up(self.region_peak, MIN_SEGMENT).unwrap_or(self.region_peak);
        }
        self.region_peak = self.in_use;
    }

    pub(super) fn retire(&mut self, base: DevPtr) {
        let seg = self.segments.get_mut(&base).expect("segment");
        seg.retiring = true;
        let (size, busy) = (seg.size, seg.busy);
        if busy == 0 {
            self.drop_segment(base);
            return;
        }
        let end = base + size as DevPtr;
        let free: Vec<(usize, DevPtr)> = self
            .blocks
            .range(base..end)
            .filter(|(_, b)| b.state == State::Free)
            .map(|(&p, b)| (b.size, p))
            .collect();
        for key in free {
            self.free_index.remove(&key);
        }
    }
}
