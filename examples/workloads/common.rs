//! Request-shaped Rust workloads, each request in a region, under the global allocator of the
//! example that includes this module (`examples/workloads_*.rs`: one binary per allocator;
//! `scripts/workloads.sh` runs them side by side):
//!
//! * `json`: parse a 2,000-record JSON document into `serde_json::Value`, walk it, serialise a
//!   tenth of it again, drop it;
//! * `tree`: build a binary tree of 4,095 boxed nodes, sum it, drop it (children first);
//! * `text`: count the words of a 64 KiB text in a `HashMap<String, usize>`, sort them by
//!   count, format the top 100 into a `String`;
//! * `records`: parse 2,000 CSV lines into structs with `String` fields, sort them by name,
//!   join the names of the first 100;
//! * and, where the allocator keeps blocks valid past their region, the workloads whose blocks
//!   escape (`escape.rs`: `cache`, `results`, `orders`, `logs`).
//!
//! Usage: `workloads_<alloc> [--quick] [--threads N] [--only W,...]`, or `--service MODE` for
//! the async service of `service.rs`; prints
//! `RESULT <workload>/<threads>t <ns per request> ns check=<sum>` (with N threads, each runs its
//! own requests; the figure is their mean; the checksum is the same under every allocator). With `--matrix`, the binary runs the region matrix instead (one
//! thread; `matrix.rs`).

#[path = "escape.rs"]
pub mod escape;
#[path = "matrix.rs"]
pub mod matrix;
#[path = "service.rs"]
pub mod service;

use std::collections::HashMap;
use std::fmt::Write;
use std::hint::black_box;
use std::time::Instant;

/// How the binary marks a request as a region.
pub trait Region {
    /// Whether blocks stay valid past their region (false for the unsound ideal, whose next
    /// region overwrites them, and the sound floor, which aborts on another thread's free):
    /// the workloads whose blocks escape run only where it is true.
    const KEEPS_ESCAPES: bool = true;
    fn run<T>(f: impl FnOnce() -> T) -> T;
    /// Runs `f`, whose blocks the program knows will outlive the request, where such blocks
    /// belong: for `ResizeAlloc`, `resizealloc::outside_regions` (the next allocator).
    /// The `_kept` workloads wrap their escaping allocations in it: what the library gives when
    /// the escapes are known (a predictor's best).
    fn keep<T>(f: impl FnOnce() -> T) -> T {
        f()
    }
}

/// For allocators without regions: the request runs as it is.
#[allow(dead_code)] // each binary uses one of the two
pub struct NoRegion;
impl Region for NoRegion {
    fn run<T>(f: impl FnOnce() -> T) -> T {
        f()
    }
}

/// For `ResizeAlloc`: `resizealloc::region` around the request.
#[allow(dead_code)]
pub struct Regions;
impl Region for Regions {
    fn run<T>(f: impl FnOnce() -> T) -> T {
        resizealloc::region(f)
    }
    fn keep<T>(f: impl FnOnce() -> T) -> T {
        resizealloc::outside_regions(f)
    }
}

fn json_document() -> String {
    let mut s = String::from("[");
    for i in 0..2000u64 {
        if i > 0 {
            s.push(',');
        }
        write!(
            s,
            r#"{{"id":{i},"name":"user{i}","email":"user{i}@example.com","score":{}.5,"tags":["a{}","b{}","c"],"active":{},"address":{{"city":"city{}","zip":"{:05}"}}}}"#,
            i * 7 % 1000,
            i % 13,
            i % 7,
            i % 2 == 0,
            i % 50,
            i * 31 % 100000
        )
        .unwrap();
    }
    s.push(']');
    s
}

fn walk(v: &serde_json::Value, acc: &mut (f64, usize)) {
    match v {
        serde_json::Value::Number(n) => acc.0 += n.as_f64().unwrap_or(0.0),
        serde_json::Value::String(s) => acc.1 += s.len(),
        serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, acc)),
        serde_json::Value::Object(o) => o.values().for_each(|x| walk(x, acc)),
        _ => {}
    }
}

fn json_step(doc: &str) -> usize {
    let v: serde_json::Value = serde_json::from_str(doc).unwrap();
    let mut acc = (0.0, 0);
    walk(&v, &mut acc);
    let part = &v.as_array().unwrap()[..200];
    let out = serde_json::to_string(part).unwrap();
    out.len() + acc.1 + acc.0 as usize
}

struct Node {
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
    value: u64,
}

fn build(depth: u32, next: &mut u64) -> Box<Node> {
    *next += 1;
    let value = *next;
    let (left, right) = if depth == 0 {
        (None, None)
    } else {
        (Some(build(depth - 1, next)), Some(build(depth - 1, next)))
    };
    Box::new(Node { left, right, value })
}

fn sum(n: &Node) -> u64 {
    n.value + n.left.as_deref().map_or(0, sum) + n.right.as_deref().map_or(0, sum)
}

fn tree_step() -> usize {
    let mut next = 0;
    let t = build(11, &mut next);
    sum(&t) as usize
}

fn text_document() -> String {
    let words = [
        "alpha", "beta", "gamma", "delta", "region", "arena", "bump", "free", "order", "size",
        "thread", "memory", "page", "block", "header", "granule", "resize", "peak", "lap", "mark",
    ];
    let mut s = String::new();
    let mut x = 0x9E37_79B9u32;
    while s.len() < 64 << 10 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let w = words[(x % 20) as usize];
        write!(s, "{w}{} ", x % 300).unwrap();
    }
    s
}

fn text_step(text: &str) -> usize {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for w in text.split_whitespace() {
        *counts.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = String::new();
    for (w, c) in v.iter().take(100) {
        writeln!(out, "{w}: {c}").unwrap();
    }
    out.len()
}

struct Record {
    name: String,
    city: String,
    score: f64,
    id: u64,
}

fn csv_document() -> String {
    let mut s = String::new();
    for i in 0..2000u64 {
        writeln!(
            s,
            "{},name{:05},city{},{}.25",
            i,
            i * 7919 % 2000,
            i % 40,
            i % 97
        )
        .unwrap();
    }
    s
}

fn records_step(csv: &str) -> usize {
    let mut rs: Vec<Record> = csv
        .lines()
        .map(|l| {
            let mut f = l.split(',');
            Record {
                id: f.next().unwrap().parse().unwrap(),
                name: f.next().unwrap().to_string(),
                city: f.next().unwrap().to_string(),
                score: f.next().unwrap().parse().unwrap(),
            }
        })
        .collect();
    rs.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = rs.iter().take(100).map(|r| r.name.as_str()).collect();
    let joined = names.join(",");
    joined.len()
        + rs.iter()
            .map(|r| r.id as usize + r.city.len() + r.score as usize)
            .sum::<usize>()
}

/// A workload: its name, its requests per run, and one request (each step marks its own region,
/// so that what it returns can outlive it).
pub type Step<'a> = (&'a str, usize, Box<dyn Fn() -> usize + Sync + 'a>);

/// The command line.
pub struct Args {
    pub quick: bool,
    pub threads: usize,
    pub only: Option<String>,
    pub matrix: bool,
    /// `--service MODE`: the async service (`service.rs`) instead of the request workloads.
    pub service: Option<String>,
}

pub fn args() -> Args {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    Args {
        quick: args.iter().any(|a| a == "--quick"),
        threads: value("--threads").and_then(|s| s.parse().ok()).unwrap_or(1),
        only: value("--only"),
        matrix: args.iter().any(|a| a == "--matrix"),
        service: value("--service"),
    }
}

/// With `WORKLOAD_RSS` set, prints `PEAK_RSS <KiB>`: the process's peak resident set (VmHWM,
/// which unlike `getrusage` of a child does not count the parent's memory from before the
/// exec). For `scripts/demo_run.py`, which runs one workload per process.
pub fn report_peak_rss() {
    if std::env::var_os("WORKLOAD_RSS").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    println!("PEAK_RSS {kib}");
}

pub fn main<R: Region + 'static>() {
    let Args {
        quick,
        threads,
        only,
        matrix,
        service: service_mode,
    } = args();
    if matrix {
        return matrix::main::<matrix::Global<R>>(quick, only);
    }
    if let Some(m) = service_mode {
        let Some(mode) = service::Mode::parse(&m) else {
            eprintln!("--service takes plain, adapter or attribute, not {m:?}");
            std::process::exit(2);
        };
        return service::main(mode, threads, quick);
    }
    let doc = json_document();
    let text = text_document();
    let csv = csv_document();
    let text_chunks = escape::chunks(&text, 32);
    let orders = escape::orders_document();
    let logs = escape::logs();
    let mut steps: Vec<Step> = vec![
        ("json", 300, Box::new(|| R::run(|| json_step(&doc)))),
        ("tree", 1500, Box::new(|| R::run(tree_step))),
        ("text", 150, Box::new(|| R::run(|| text_step(&text)))),
        ("records", 600, Box::new(|| R::run(|| records_step(&csv)))),
    ];
    if R::KEEPS_ESCAPES {
        steps.extend(escape::steps::<R>(&text_chunks, &orders, &logs));
    }
    for (name, n, step) in &steps {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|w| w == *name))
        {
            continue;
        }
        let n = if quick { n / 10 + 1 } else { *n };
        let ns = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut check = black_box(step()); // warm-up: the first region sizes the arena
                        let t0 = Instant::now();
                        for _ in 0..n {
                            check = check.wrapping_add(black_box(step()));
                        }
                        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
                        if std::env::var_os("WORKLOAD_STATS").is_some() {
                            eprintln!("STATS {name} {:#?}", resizealloc::stats());
                        }
                        (ns, check)
                    })
                })
                .collect();
            let v: Vec<(f64, usize)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
            let check = v.iter().fold(0usize, |a, x| a.wrapping_add(x.1));
            (v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64, check)
        });
        let (ns, check) = ns;
        println!("RESULT {name}/{threads}t {ns:.0} ns check={check}");
    }
    report_peak_rss();
}
