//! The report at exit: region candidates ranked by bytes, whole-thread frames, the allocation
//! sites to keep out of a region at each candidate, and the folded stacks of short-lived bytes
//! (`stack;frames;... bytes`, which `flamegraph.pl`, inferno and speedscope read).
//!
//! It runs with the thread's profiler flag set, so what it allocates (names, the symbolizer's
//! tables) is never sampled; it is the one part of the profiler that allocates.

use std::alloc::{self, Layout};
use std::collections::HashMap;
use std::fmt::Write as _;

use super::symbols::Symbolizer;
use crate::profile::state::{self, Tables, NO_STACK};
use crate::profile::{self, clock};
use crate::{options, region, router};

/// Candidates the report lists.
const TOP: usize = 12;
/// Allocation sites of escaping blocks a candidate's entry names (by bytes) before it prints
/// the first three by function and line.
const SITES_NAMED: usize = 16;

/// One function's share of the samples, summed over its call sites.
#[derive(Default)]
struct Function {
    /// The call site whose line the report prints: the one with the most temporary bytes.
    line_ip: usize,
    line_bytes: f64,
    temps: f64,
    temp_bytes: f64,
    sizes: [f64; state::SIZE_CLASSES],
    /// The temporaries' `realloc`s (estimated counts).
    reallocs: f64,
    life_ticks: f64,
    life_bytes: f64,
    whole: f64,
    escapes: f64,
    /// The replay's costs of a temporary (its allocation, its `realloc`s and its free): the
    /// program's allocator, the arena.
    pair_ns: Option<(f64, f64)>,
    /// Allocation sites (return addresses) of blocks that outlived its calls: count, bytes.
    escaped_from: HashMap<usize, (f64, f64)>,
}

/// `function (file:line)`, the line of return address `ip` where debug info has it.
fn label(function: &str, ip: usize, sym: &mut Symbolizer) -> String {
    match sym.location(ip) {
        Some(l) => format!("{function} ({l})"),
        None => function.to_string(),
    }
}

fn count(n: f64) -> String {
    match n {
        n if n >= 1e9 => format!("{:.1}G", n / 1e9),
        n if n >= 1e6 => format!("{:.1}M", n / 1e6),
        n if n >= 1e4 => format!("{:.1}K", n / 1e3),
        n => format!("{n:.0}"),
    }
}

fn bytes(n: f64) -> String {
    match n {
        n if n >= (1u64 << 30) as f64 => format!("{:.1} GiB", n / (1u64 << 30) as f64),
        n if n >= (1u64 << 20) as f64 => format!("{:.1} MiB", n / (1u64 << 20) as f64),
        n if n >= 1024.0 => format!("{:.1} KiB", n / 1024.0),
        n => format!("{n:.0} B"),
    }
}

fn seconds(ns: f64) -> String {
    match ns.abs() {
        a if a >= 1e9 => format!("{:.2} s", ns / 1e9),
        a if a >= 1e6 => format!("{:.1} ms", ns / 1e6),
        _ => format!("{:.0} us", ns / 1e3),
    }
}

/// Blocks a replay allocates before freeing them, at most.
const REPLAY_BLOCKS: usize = 512;
/// Rounds of a replay (the median round counts).
const REPLAY_ROUNDS: usize = 15;
/// `realloc`s a replayed block makes at most.
const REPLAY_REALLOCS: usize = 16;

/// One replayed temporary: the sizes it is allocated at, then resized to (the last one is its
/// size when it was freed).
type Chain = Vec<usize>;

/// The temporaries a replay makes for candidate `f`: its sizes (its size classes in
/// proportion), as many as its temporaries had live at once on average (their mean life in
/// bytes over their mean size), each grown by as many `realloc`s as its temporaries made on
/// average (spread over the blocks: a mean of 1.5 gives every other block two). A block with
/// `k` of them starts at its size over `2^k` and doubles, as a `String` or `Vec` that grows.
fn replay_chains(f: &Function) -> Vec<Chain> {
    let mean = (f.temp_bytes / f.temps).max(1.0);
    let live = ((f.life_bytes / f.temps) / mean).clamp(1.0, REPLAY_BLOCKS as f64) as usize;
    // The sizes, in proportion to the classes' counts.
    let total: f64 = f.sizes.iter().sum();
    let mut sizes = Vec::with_capacity(live);
    for (c, n) in f.sizes.iter().enumerate() {
        let k = (n / total.max(1.0) * live as f64).round() as usize;
        let top = state::class_size(c);
        for i in 0..k {
            // Spread over the class: from just above half its size to its size.
            sizes.push(top / 2 + 1 + (top / 2 - 1) * (i + 1) / (k + 1));
        }
    }
    sizes.truncate(live);
    if sizes.is_empty() {
        sizes.push(mean as usize);
    }
    let per_block = (f.reallocs / f.temps).clamp(0.0, REPLAY_REALLOCS as f64);
    sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| {
            let k = ((i + 1) as f64 * per_block).floor() - (i as f64 * per_block).floor();
            // Not below one byte: a block that small grows fewer times.
            let k = (k as u32).min(usize::BITS - 1 - size.leading_zeros());
            (0..=k).rev().map(|s| size >> s).collect()
        })
        .collect()
}

/// What a temporary of a candidate costs (its allocation, its `realloc`s and its free), in
/// nanoseconds, at the program's allocator outside regions and in the arena inside one:
/// `(next, arena)`.
///
/// Both are timed the same way, at exit, on the calling thread, through the program's own
/// entry points (`std::alloc`: in a Rust program its `#[global_allocator]`, `ResizeAlloc`; in
/// the preload library `malloc`, `realloc` and `free`, which it is itself), settled outside
/// regions and then in a region: a replay of [`replay_chains`], each block allocated and grown
/// in turn, then all freed in allocation order, as many times as it takes to make
/// [`REPLAY_BLOCKS`] temporaries (a candidate with one block live at a time would otherwise
/// time one pair, no longer than reading the clock); the two in turn in each round, the median
/// of the rounds. None where the thread cannot open a region with an arena (already in one, no
/// arena, process mode).
fn replay_pair_ns(f: &Function, ns_per_tick: f64) -> Option<(f64, f64)> {
    if region::region_depth() != 0 || f.temps <= 0.0 {
        return None;
    }
    let chains = replay_chains(f);
    let reps = (REPLAY_BLOCKS / chains.len()).max(1);
    let mut blocks = vec![core::ptr::null_mut::<u8>(); chains.len()];
    // A byte buffer's layout, as a `String`'s (`System` serves it with plain `malloc`); the
    // chains' sizes are at least 1 byte.
    // SAFETY: a valid size and alignment.
    let layout = |n: usize| unsafe { Layout::from_size_align_unchecked(n, 1) };
    // Allocates and grows every block, then frees them all, `reps` times; false when a block
    // was null (no memory) or, in a region, not the arena's.
    let mut replay = |in_region: bool| -> bool {
        let mut served = true;
        for _ in 0..reps {
            for (b, chain) in blocks.iter_mut().zip(&chains) {
                // SAFETY: `alloc` of a non-zero size; each `realloc` is of the live block just
                // allocated or grown, with the layout it has; a block whose `realloc` failed
                // is still live, and freed with its layout.
                unsafe {
                    *b = alloc::alloc(layout(chain[0]));
                    for w in chain.windows(2) {
                        if b.is_null() {
                            break;
                        }
                        let q = alloc::realloc(*b, layout(w[0]), w[1]);
                        if q.is_null() {
                            alloc::dealloc(*b, layout(w[0]));
                        }
                        *b = q;
                    }
                }
            }
            for (&b, chain) in blocks.iter().zip(&chains) {
                if b.is_null() {
                    served = false;
                    continue;
                }
                served &= !in_region || router::owns(b);
                // SAFETY: a live block allocated (and grown to `chain`'s last size) above.
                unsafe { alloc::dealloc(b, layout(chain[chain.len() - 1])) };
            }
        }
        served
    };
    let mut next = Vec::with_capacity(REPLAY_ROUNDS);
    let mut arena = Vec::with_capacity(REPLAY_ROUNDS);
    for _ in 0..REPLAY_ROUNDS {
        // Settled, as the program's threads are outside regions without the profiler (whose
        // countdown is not what a region saves).
        let ticks = region::outside_regions(|| {
            let t0 = clock::ticks();
            replay(false);
            clock::ticks().wrapping_sub(t0)
        });
        next.push(ticks);
        region::region_begin();
        let t0 = clock::ticks();
        let in_arena = replay(true);
        let t1 = clock::ticks();
        let _ = region::region_end();
        if !in_arena {
            return None;
        }
        arena.push(t1.wrapping_sub(t0));
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2] as f64 * ns_per_tick / (blocks.len() * reps) as f64
    };
    Some((median(&mut next), median(&mut arena)))
}

/// Writes the report and the folded stacks (the profiler's flag set: nothing is sampled).
pub(super) fn write() {
    let ns_per_tick = clock::ns_per_tick();
    let run_ns = clock::run_ns();
    let _g = state::LOCK.lock();
    let Some(t) = state::tables() else { return };
    if profile::in_forked_child() && t.totals.samples == 0 {
        // A child that sampled nothing (a shell's subshell, a helper that soon exits) leaves
        // no files behind.
        return;
    }
    t.drain_live(|t, rec| {
        t.totals.live_at_exit += rec.weight;
        t.close(&rec, 0, false, (0, 0));
    });
    let mut sym = Symbolizer::new();
    let mut functions = by_function(t, &mut sym);
    // The estimates of the listed candidates (the replays allocate: outside the lock's tables,
    // with the profiler's flag set, so nothing is sampled).
    let mut ranked: Vec<(String, f64)> = functions
        .iter()
        .filter(|(_, f)| f.temps > 0.0)
        .map(|(n, f)| (n.clone(), f.temp_bytes))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (name, _) in ranked.iter().take(TOP) {
        if let Some(f) = functions.get_mut(name) {
            f.pair_ns = replay_pair_ns(f, ns_per_tick);
        }
    }
    let path = String::from_utf8_lossy(options::profile_output()).into_owned();
    let pid = std::process::id();
    let path = if profile::in_forked_child() && !path.is_empty() {
        format!("{path}.{pid}")
    } else {
        path
    };
    let folded = if path.is_empty() {
        format!("resizealloc-profile.{pid}.folded")
    } else {
        format!("{path}.folded")
    };
    let folded_ok = std::fs::write(&folded, folded_stacks(t, &mut sym)).is_ok();
    let text = text(
        t,
        &functions,
        &mut sym,
        ns_per_tick,
        run_ns,
        folded_ok.then_some(folded.as_str()),
    );
    if path.is_empty() || std::fs::write(&path, &text).is_err() {
        if !path.is_empty() {
            crate::os::write_stderr(
                b"resizealloc: profile: cannot write the report file; here it is\n",
            );
        }
        crate::os::write_stderr(text.as_bytes());
    }
}

/// The allocator's own frames, which a Rust program's stacks hold between the program's call and
/// the profiler (`#[global_allocator]` has no object of its own to skip by address): left out of
/// allocation sites and folded stacks.
fn is_allocator_frame(function: &str) -> bool {
    function.starts_with("resizealloc::")
        || function.starts_with("<resizealloc::")
        || function.starts_with("__rust_alloc")
        || function.starts_with("__rust_realloc")
        || function.starts_with("__rdl_")
        || function.starts_with("alloc::alloc::")
}

/// The call sites' figures summed per function.
fn by_function(t: &Tables, sym: &mut Symbolizer) -> HashMap<String, Function> {
    let mut fs: HashMap<String, Function> = HashMap::new();
    for e in t.sites.iter().filter(|e| e.ip != 0) {
        let f = fs.entry(sym.function(e.ip)).or_default();
        if f.line_ip == 0 || e.temp_bytes > f.line_bytes {
            f.line_ip = e.ip;
            f.line_bytes = e.temp_bytes;
        }
        f.temps += e.temps;
        f.temp_bytes += e.temp_bytes;
        for (a, b) in f.sizes.iter_mut().zip(e.sizes.iter()) {
            *a += *b as f64;
        }
        f.reallocs += e.reallocs as f64;
        f.life_ticks += e.life_ticks;
        f.life_bytes += e.life_bytes;
        f.whole += e.whole;
        f.escapes += e.escapes;
    }
    for e in t.escapes.iter().filter(|e| e.ip != 0) {
        let f = sym.function(e.ip);
        let st = &t.stacks[e.stack as usize];
        let Some(&site) = st.ips[..st.len as usize]
            .iter()
            .rev()
            .find(|ip| !is_allocator_frame(&sym.function(**ip)))
        else {
            continue;
        };
        if let Some(f) = fs.get_mut(&f) {
            let v = f.escaped_from.entry(site).or_default();
            v.0 += e.count;
            v.1 += e.bytes;
        }
    }
    fs
}

fn text(
    t: &Tables,
    fs: &HashMap<String, Function>,
    sym: &mut Symbolizer,
    ns_per_tick: f64,
    run_ns: u64,
    folded: Option<&str>,
) -> String {
    let tot = t.totals;
    let all = tot.allocations.max(1.0);

    let mut s = String::new();
    let start_rate = crate::options::profile_rate();
    let paced = if profile::rate() != start_rate {
        format!(
            ", from {} on at the start: paced to keep the profiler's own work near {}% of the run",
            bytes(start_rate as f64),
            profile::PACE_PERCENT
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "resizealloc profile: {} run, {} samples (one per {} allocated on average{}, and every block of 1 MiB or more)",
        seconds(run_ns as f64),
        tot.samples,
        bytes(profile::rate() as f64),
        paced,
    );
    let _ = writeln!(
        s,
        "  outside regions: about {} allocations, {}; {:.1}% freed by another thread, {:.1}% live at exit{}",
        count(tot.allocations),
        bytes(tot.bytes),
        100.0 * tot.other_thread / all,
        100.0 * tot.live_at_exit / all,
        if tot.dropped > 0 { format!("; {} samples dropped (tables full)", tot.dropped) } else { String::new() },
    );
    let _ = writeln!(
        s,
        "  call stacks: {} from cached unwind rules, {} from the unwinder (libgcc_s)",
        tot.fast_walks, tot.unwinder_walks,
    );
    let mut cands: Vec<(&String, &Function)> = fs.iter().filter(|(_, f)| f.temps > 0.0).collect();
    cands.sort_by(|a, b| b.1.temp_bytes.total_cmp(&a.1.temp_bytes));
    let _ = writeln!(s, "\nRegion candidates: a region around each call of the function holds the whole life of these temporaries.");
    let _ = writeln!(
        s,
        "  {:>4}  {:>11}  {:>10}  {:>6}  {:>8}  {:>11}  {:>10}  function",
        "rank", "temporaries", "bytes", "share", "escapes", "est. saving", "mean life"
    );
    if tot.samples == 0 {
        let _ = writeln!(s, "  (none: nothing outside regions was sampled; for a program that allocates little there, a smaller RESIZEALLOC_PROFILE_RATE samples more)");
    } else if cands.is_empty() {
        let _ = writeln!(s, "  (none: no sampled block was freed inside a call below the thread's outermost frames)");
    }
    for (i, (name, f)) in cands.iter().take(TOP).enumerate() {
        let saving = f.pair_ns.map(|(next, arena)| f.temps * (next - arena));
        let life = if f.temps > 0.0 {
            f.life_ticks * ns_per_tick / f.temps
        } else {
            0.0
        };
        let _ = writeln!(
            s,
            "  {:>4}  {:>11}  {:>10}  {:>5.1}%  {:>8}  {:>11}  {:>10}  {}",
            i + 1,
            count(f.temps),
            bytes(f.temp_bytes),
            100.0 * f.temps / all,
            count(f.escapes),
            saving.map(seconds).unwrap_or_else(|| "-".into()),
            seconds(life),
            label(name, f.line_ip, sym),
        );
    }
    let mut whole: Vec<(&String, &Function)> = fs.iter().filter(|(_, f)| f.whole > 0.0).collect();
    whole.sort_by(|a, b| b.1.whole.total_cmp(&a.1.whole));
    if !whole.is_empty() {
        let _ = writeln!(s, "\nWhole-thread frames (on the stack since the thread's first sample: a region there is the thread's whole run, as RESIZEALLOC_REGION=process):");
        for (name, f) in whole.iter().take(4) {
            let _ = writeln!(
                s,
                "  {:>5.1}% of allocations  {}",
                100.0 * f.whole / all,
                label(name, f.line_ip, sym)
            );
        }
    }
    let mut first = true;
    for (name, f) in cands.iter().take(TOP) {
        if f.escaped_from.is_empty() {
            continue;
        }
        if first {
            let _ = writeln!(s, "\nSites to keep outside a region at a candidate (their blocks outlive its call; allocate them before the region, or outside it):");
            first = false;
        }
        // By bytes; the largest addresses named (lines are looked up for these alone) and
        // merged where they share a function and line.
        let mut ips: Vec<_> = f.escaped_from.iter().collect();
        ips.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        let mut sites: Vec<(String, (f64, f64))> = Vec::new();
        for (&ip, &(n, b)) in ips.into_iter().take(SITES_NAMED) {
            let function = sym.function(ip);
            let k = label(&function, ip, sym);
            match sites.iter_mut().find(|(l, _)| *l == k) {
                Some((_, v)) => {
                    v.0 += n;
                    v.1 += b;
                }
                None => sites.push((k, (n, b))),
            }
        }
        sites.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        let _ = writeln!(s, "  {name}:");
        for (site, (n, b)) in sites.iter().take(3) {
            let _ = writeln!(
                s,
                "    {:>9} blocks, {:>10}  from {site}",
                count(*n),
                bytes(*b)
            );
        }
    }
    let first = cands.first().and_then(|(_, f)| f.pair_ns);
    match first {
        Some((next, arena)) => {
            let _ = writeln!(
                s,
                "\nEstimated saving: the temporaries' count times what one costs (its allocation, its reallocs and its free) outside a region less inside one, timed at exit on a replay of each candidate's sizes, reallocs and live blocks (first candidate: {next:.1} against {arena:.1} ns a temporary); a region's begin and end are not counted."
            );
        }
        None => {
            let _ = writeln!(s, "\nNo saving estimated: the arena's cost could not be measured at exit (the exiting thread is in a region, or has no arena, as in process mode).");
        }
    }
    match folded {
        Some(f) => {
            let _ = writeln!(s, "Folded stacks of short-lived bytes: {f} (flamegraph.pl, inferno-flamegraph, speedscope)");
        }
        None => {
            let _ = writeln!(s, "Folded stacks: could not write the file");
        }
    }
    s
}

/// `frame;frame;... bytes` per allocation stack, root first, of blocks that died inside a call
/// below the thread's outermost frames.
fn folded_stacks(t: &Tables, sym: &mut Symbolizer) -> String {
    let mut lines: HashMap<String, f64> = HashMap::new();
    for (i, e) in t.stacks.iter().enumerate() {
        if !e.used || e.short_bytes < 0.5 || i as u32 == NO_STACK {
            continue;
        }
        let names: Vec<String> = e.ips[..e.len as usize]
            .iter()
            .map(|ip| sym.function(*ip))
            .collect();
        let keep = names.len()
            - names
                .iter()
                .rev()
                .take_while(|n| is_allocator_frame(n))
                .count();
        let key = names[..keep]
            .iter()
            .map(|n| n.replace(';', ":"))
            .collect::<Vec<_>>()
            .join(";");
        *lines.entry(key).or_default() += e.short_bytes;
    }
    let mut v: Vec<_> = lines.into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    let mut s = String::new();
    for (k, n) in v {
        let _ = writeln!(s, "{k} {}", n.round() as u64);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A candidate of 100 temporaries of 200 bytes (class 256), four live at once on average,
    /// with `reallocs` reallocs among them.
    fn candidate(reallocs: f64) -> Function {
        let mut f = Function {
            temps: 100.0,
            temp_bytes: 100.0 * 200.0,
            life_bytes: 100.0 * 4.0 * 200.0,
            reallocs,
            ..Function::default()
        };
        f.sizes[state::size_class(200)] = 100.0;
        f
    }

    #[test]
    fn a_replay_without_reallocs_allocates_each_block_once() {
        let chains = replay_chains(&candidate(0.0));
        assert_eq!(chains.len(), 4);
        assert!(chains.iter().all(|c| c.len() == 1));
    }

    #[test]
    fn a_replay_grows_its_blocks_by_their_mean_reallocs_doubling_to_their_size() {
        // 1.5 reallocs a temporary: one, then two, in turn.
        let chains = replay_chains(&candidate(150.0));
        let steps: Vec<usize> = chains.iter().map(|c| c.len() - 1).collect();
        assert_eq!(steps, [1, 2, 1, 2]);
        for c in &chains {
            let last = *c.last().unwrap();
            assert!((129..=256).contains(&last), "a size of class 256: {c:?}");
            for w in c.windows(2) {
                assert_eq!(w[1] >> 1, w[0], "each step doubles: {c:?}");
            }
        }
    }

    #[test]
    fn a_replay_never_starts_a_block_below_one_byte() {
        let mut f = candidate(100.0 * REPLAY_REALLOCS as f64);
        f.sizes = [0.0; state::SIZE_CLASSES];
        f.sizes[0] = 100.0;
        f.temp_bytes = 100.0 * 9.0;
        f.life_bytes = 100.0 * 9.0;
        for c in replay_chains(&f) {
            assert!(c[0] >= 1, "{c:?}");
            assert!(c.len() <= REPLAY_REALLOCS + 1, "{c:?}");
        }
    }
}
