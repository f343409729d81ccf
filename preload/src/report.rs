//! Text on stderr without allocating: the `RESIZEALLOC_STATS=1` summary at exit and the
//! `RESIZEALLOC_VERBOSE=1` banner.

use resizealloc::os::Line;

/// The exit summary.
pub fn stats_summary() {
    let s = resizealloc::stats();
    let p = s.process;
    Line::new()
        .text("resizealloc: ")
        .num(p.region_allocs)
        .text(" region allocations, ")
        .num(p.overflow_allocs)
        .text(" overflowed (")
        .num(p.spilled_allocs)
        .text(" to the next allocator), ")
        .num(p.resizes)
        .text(" resizes")
        .print();
    Line::new()
        .text("resizealloc: arenas: ")
        .num(p.arenas_live)
        .text(" live, ")
        .num(p.arenas_orphaned)
        .text(" orphaned, ")
        .num(p.arenas_denied)
        .text(" denied; capacity ")
        .bytes(p.arena_capacity)
        .text(", committed ")
        .bytes(p.arena_committed)
        .text(", last peaks ")
        .bytes(p.high_water)
        .print();
    let m = s.memory;
    Line::new()
        .text("resizealloc: memory: resident ")
        .bytes(m.process_resident)
        .text(", live ")
        .bytes(m.process_live)
        .text(" (efficiency ")
        .num(m.efficiency_permille / 10)
        .text("%), ")
        .num(m.granules_given_back)
        .text(" granules given back, ")
        .num(m.bound_closures)
        .text(" bound closures, turned away ")
        .bytes(m.bytes_turned_away)
        .text(", routed away ")
        .bytes(m.bytes_routed_away)
        .text("; sites learned long ")
        .num(m.sites_learned_long)
        .text(", short again ")
        .num(m.sites_learned_short)
        .text(", long now ")
        .num(m.sites_long_now)
        .print();
    let sm = s.small;
    if sm.pages_in_use + sm.pages_given_back > 0 {
        Line::new()
            .text("resizealloc: small-block heap: ")
            .num(sm.pages_in_use)
            .text(" pages in use (")
            .bytes(sm.bytes_in_pages)
            .text("), ")
            .num(sm.pages_given_back)
            .text(" given back, ")
            .num(sm.pages_adopted)
            .text(" adopted")
            .print();
    }
    #[cfg(target_arch = "x86_64")]
    {
        let (d, pools) = crate::cuda::stats_total();
        if pools > 0 {
            Line::new()
                .text("resizealloc: device pools: ")
                .num(pools)
                .text(" contexts, reserved ")
                .bytes(d.reserved)
                .text(" in ")
                .num(d.segments)
                .text(" segments (")
                .num(d.driver_allocs)
                .text(" driver allocations), in use ")
                .bytes(d.in_use)
                .text(", high water ")
                .bytes(d.high_water)
                .text(", ")
                .num(d.overflow_blocks)
                .text(" overflow blocks, syncs ")
                .num(d.own_syncs)
                .text(" own / ")
                .num(d.observed_syncs)
                .text(" observed")
                .print();
        }
    }
    let t = s.thread;
    Line::new()
        .text("resizealloc: exiting thread: ")
        .num(t.region_allocs)
        .text(" region allocations, high water ")
        .bytes(t.high_water)
        .text(", capacity ")
        .bytes(t.arena_capacity)
        .text(", region depth ")
        .num(t.region_depth)
        .print();
}

/// The options in force, for `RESIZEALLOC_VERBOSE=1`.
pub fn options_banner(o: &resizealloc::options::Options) {
    let mode = match o.region {
        resizealloc::options::RegionMode::Markers => "on (markers)",
        resizealloc::options::RegionMode::Process => "process",
        resizealloc::options::RegionMode::Off => "off",
    };
    let mut l = Line::new();
    l.text("resizealloc: region=")
        .text(mode)
        .text(" min_size=")
        .num(o.min_size as u64)
        .text(" max_size=");
    if o.max_size == usize::MAX {
        l.text("unlimited");
    } else {
        l.num(o.max_size as u64);
    }
    l.text(" initial_arena=")
        .bytes(o.initial_arena as u64)
        .text(" max_arena=")
        .bytes(o.max_arena as u64)
        .text(" reserve=")
        .bytes(o.reserve as u64)
        .text(" give_back_after=")
        .bytes(o.give_back_after as u64)
        .print();
}
