//! Request-shaped workloads whose blocks outlive the request's region, as real programs' do:
//!
//! * `cache`: a long-lived `HashMap<String, Vec<u8>>` of 500 entries filled from inside
//!   requests (20 look-ups each with a few `format!` temporaries; a miss inserts a 64 B–2 KiB
//!   value; the oldest entries are evicted by later requests);
//! * `results`: a rayon pool of 2 workers; each request splits a text into 32 chunks, each
//!   task runs in its own region on a worker, counts lower-cased words in a `HashMap<String,
//!   u32>` and returns its top 8 as `Vec<(String, u32)>`, which the requesting thread merges
//!   and drops (blocks freed by another thread);
//! * `orders`: `serde` derive of 300 typed orders (`String`s, a `Vec` of items, an
//!   `Option<String>`, `Vec<String>` tags), totals per customer in a `BTreeMap<&str, _>`, the
//!   top 10 serialised into a reply that is returned and dropped after the region;
//! * `logs`: a regex over a 400-line window of an access log, per-path stats in a
//!   `HashMap<String, _>`, a sorted report `String` returned and kept in a ring of the last 64
//!   (each dropped outside regions, 64 requests later).
//!
//! `cache_kept` and `results_kept` do the same work with what escapes made under
//! [`Region::keep`] (`resizealloc::outside_regions` for `ResizeAlloc`): the figure the
//! library reaches when the program says which blocks it keeps.
//!
//! Every step returns a checksum that is the same under every allocator.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;
use std::sync::OnceLock;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::Region;

fn xorshift(x: &mut u32) -> u32 {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    *x
}

// ---- cache ----

/// Entries the cache keeps; the oldest go first.
const CACHE_ENTRIES: usize = 500;
/// Distinct keys the requests look up.
const CACHE_KEYS: u32 = 2000;

#[derive(Default)]
struct Cache {
    map: HashMap<String, Vec<u8>>,
    order: VecDeque<String>,
    rng: u32,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache { rng: 0x1234_5678, ..Default::default() });
}

/// With `KEEP`, what the request keeps (the key and value it inserts, the map's growth) is
/// made under [`Region::keep`].
fn cache_request<R: Region, const KEEP: bool>(c: &mut Cache) -> usize {
    let mut sum = 0;
    for _ in 0..20 {
        let k = xorshift(&mut c.rng) % CACHE_KEYS;
        let key = format!("/items/{k}");
        let line = format!("GET {key} HTTP/1.1 user={}", k % 97);
        sum += line.len();
        match c.map.get(&key) {
            Some(v) => sum += v.len() + v[v.len() / 2] as usize,
            None => {
                let insert = |c: &mut Cache, key: String| {
                    let v = vec![(k % 251) as u8; 64 + (k as usize * 37) % 1984];
                    let len = v.len();
                    c.order.push_back(key.clone());
                    c.map.insert(key, v);
                    len
                };
                sum += if KEEP {
                    R::keep(|| insert(c, key.clone()))
                } else {
                    insert(c, key)
                };
                if c.order.len() > CACHE_ENTRIES {
                    let old = c.order.pop_front().unwrap();
                    c.map.remove(&old);
                }
            }
        }
    }
    sum
}

fn cache_step<R: Region, const KEEP: bool>() -> usize {
    CACHE.with(|c| R::run(|| cache_request::<R, KEEP>(&mut c.borrow_mut())))
}

// ---- results to another thread ----

fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap()
    })
}

/// `text` cut into `n` chunks at whitespace.
pub fn chunks(text: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(n);
    let mut rest = text;
    for i in (1..=n).rev() {
        let want = rest.len() / i;
        let cut = rest[want..].find(' ').map_or(rest.len(), |j| want + j);
        let (a, b) = rest.split_at(cut);
        out.push(a);
        rest = b;
    }
    out
}

/// With `KEEP`, the returned top 8 are copied under [`Region::keep`].
fn top_words<R: Region, const KEEP: bool>(chunk: &str) -> Vec<(String, u32)> {
    let mut counts: HashMap<String, u32> = HashMap::new();
    for w in chunk.split_whitespace() {
        *counts.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    let mut v: Vec<(String, u32)> = counts.into_iter().collect();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(8);
    if KEEP {
        R::keep(|| v.iter().map(|(w, n)| (w.clone(), *n)).collect())
    } else {
        v
    }
}

fn results_step<R: Region, const KEEP: bool>(chunks: &[&str]) -> usize {
    R::run(|| {
        let parts: Vec<Vec<(String, u32)>> = pool().install(|| {
            chunks
                .par_iter()
                .map(|c| R::run(|| top_words::<R, KEEP>(c)))
                .collect()
        });
        let mut merged: HashMap<String, u32> = HashMap::new();
        for part in parts {
            for (w, n) in part {
                *merged.entry(w).or_insert(0) += n;
            }
        }
        merged.values().map(|&n| n as usize).sum::<usize>() + merged.len()
    })
}

// ---- typed orders ----

#[derive(Serialize, Deserialize)]
struct Item {
    sku: String,
    qty: u32,
    price: f64,
}

#[derive(Serialize, Deserialize)]
struct Order {
    id: u64,
    customer: String,
    email: String,
    items: Vec<Item>,
    note: Option<String>,
    tags: Vec<String>,
}

#[derive(Serialize)]
struct Total<'a> {
    customer: &'a str,
    total: f64,
    orders: u32,
}

pub fn orders_document() -> String {
    let mut s = String::from("[");
    for i in 0..300u64 {
        if i > 0 {
            s.push(',');
        }
        write!(
            s,
            r#"{{"id":{i},"customer":"customer{}","email":"c{}@example.com","items":["#,
            i % 40,
            i % 40
        )
        .unwrap();
        for j in 0..(1 + i % 5) {
            if j > 0 {
                s.push(',');
            }
            write!(
                s,
                r#"{{"sku":"sku-{:04}","qty":{},"price":{}.25}}"#,
                (i * 13 + j) % 1000,
                1 + j,
                (i + j) % 50
            )
            .unwrap();
        }
        let note = if i % 3 == 0 {
            format!(r#""leave at door {i}""#)
        } else {
            "null".into()
        };
        write!(
            s,
            r#"],"note":{note},"tags":["t{}","priority{}"]}}"#,
            i % 7,
            i % 3
        )
        .unwrap();
    }
    s.push(']');
    s
}

fn orders_reply(doc: &str) -> String {
    let orders: Vec<Order> = serde_json::from_str(doc).unwrap();
    let mut totals: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
    for o in &orders {
        let t = totals.entry(o.customer.as_str()).or_insert((0.0, 0));
        t.0 += o
            .items
            .iter()
            .map(|it| it.qty as f64 * it.price)
            .sum::<f64>();
        t.1 +=
            1 + o.tags.len() as u32 + o.note.as_ref().map_or(0, |_| 1) + o.email.len() as u32 / 64;
    }
    let mut top: Vec<Total> = totals
        .into_iter()
        .map(|(customer, (total, orders))| Total {
            customer,
            total,
            orders,
        })
        .collect();
    top.sort_by(|a, b| {
        b.total
            .total_cmp(&a.total)
            .then_with(|| a.customer.cmp(b.customer))
    });
    top.truncate(10);
    serde_json::to_string(&top).unwrap()
}

fn orders_step<R: Region>(doc: &str) -> usize {
    let reply = R::run(|| orders_reply(doc));
    reply.len() + reply.as_bytes()[reply.len() / 2] as usize
}

// ---- logs ----

const LOG_LINES: usize = 4000;
const WINDOW: usize = 400;
const RING: usize = 64;

pub fn log_document() -> Vec<String> {
    let paths = [
        "/",
        "/login",
        "/api/items",
        "/api/orders",
        "/static/app.js",
        "/search",
    ];
    let mut x = 0xC0FF_EE11u32;
    (0..LOG_LINES)
        .map(|i| {
            let r = xorshift(&mut x);
            format!(
                r#"10.0.{}.{} - - [07/Dec/2026:10:{:02}:{:02} +0000] "{} {}{} HTTP/1.1" {} {}"#,
                r % 256,
                (r >> 8) % 256,
                i / 60 % 60,
                i % 60,
                if r.is_multiple_of(5) { "POST" } else { "GET" },
                paths[(r >> 3) as usize % paths.len()],
                if r.is_multiple_of(7) {
                    format!("/{}", r % 50)
                } else {
                    String::new()
                },
                [200, 200, 200, 304, 404, 500][(r >> 11) as usize % 6],
                r % 20000
            )
        })
        .collect()
}

pub struct Logs {
    lines: Vec<String>,
    re: regex::Regex,
}

pub fn logs() -> Logs {
    Logs {
        lines: log_document(),
        re: regex::Regex::new(
            r#"^(\S+) \S+ \S+ \[[^\]]+\] "(GET|POST) (\S+) [^"]*" (\d{3}) (\d+)$"#,
        )
        .unwrap(),
    }
}

thread_local! {
    static REPORTS: RefCell<(VecDeque<String>, usize)> = const { RefCell::new((VecDeque::new(), 0)) };
}

fn logs_report(logs: &Logs, start: usize) -> String {
    #[derive(Default)]
    struct PathStats {
        hits: u32,
        bytes: u64,
        errors: u32,
        clients: Vec<String>,
    }
    let mut stats: HashMap<String, PathStats> = HashMap::new();
    for line in &logs.lines[start..start + WINDOW] {
        let Some(c) = logs.re.captures(line) else {
            continue;
        };
        let s = stats.entry(c[3].to_string()).or_default();
        s.hits += 1;
        s.bytes += c[5].parse::<u64>().unwrap();
        s.errors += (c[4].starts_with('5') || c[4].starts_with('4')) as u32;
        if s.clients.len() < 4 {
            s.clients.push(c[1].to_string());
        }
    }
    let mut v: Vec<(&String, &PathStats)> = stats.iter().collect();
    v.sort_by(|a, b| b.1.hits.cmp(&a.1.hits).then_with(|| a.0.cmp(b.0)));
    let mut out = String::new();
    for (path, s) in v {
        writeln!(
            out,
            "{path} {} {} {} {}",
            s.hits,
            s.bytes,
            s.errors,
            s.clients.join(",")
        )
        .unwrap();
    }
    out
}

fn logs_step<R: Region>(logs: &Logs) -> usize {
    REPORTS.with(|r| {
        let mut r = r.borrow_mut();
        let start = r.1 * 37 % (LOG_LINES - WINDOW);
        r.1 += 1;
        let report = R::run(|| logs_report(logs, start));
        let sum = report.len();
        r.0.push_back(report);
        if r.0.len() > RING {
            drop(r.0.pop_front());
        }
        sum
    })
}

/// The workloads of this file: (name, requests per run, step).
pub fn steps<'a, R: Region + 'a>(
    text_chunks: &'a [&'a str],
    orders: &'a str,
    logs: &'a Logs,
) -> Vec<super::Step<'a>> {
    vec![
        ("cache", 20000, Box::new(cache_step::<R, false>)),
        ("cache_kept", 20000, Box::new(cache_step::<R, true>)),
        (
            "results",
            300,
            Box::new(move || results_step::<R, false>(text_chunks)),
        ),
        (
            "results_kept",
            300,
            Box::new(move || results_step::<R, true>(text_chunks)),
        ),
        ("orders", 600, Box::new(move || orders_step::<R>(orders))),
        ("logs", 600, Box::new(move || logs_step::<R>(logs))),
    ]
}
