//! An async service on tokio's multi-thread runtime, in-process (`--service MODE`): a client
//! task sends JSON bodies to 256 handler tasks over bounded channels; each handler parses a body
//! into typed `serde` structs, awaits a simulated backend call in the middle (a oneshot answered
//! by a backend task), then builds a reply and sends it to the collector, which checks and drops
//! it (a block freed by another task, often on another thread). 100,000 requests are timed,
//! after a warm-up run of a tenth as many.
//!
//! MODE: `plain` (no regions), `adapter` (each request's handler future wrapped in
//! `resizealloc::InRegion`), `attribute` (the handler as a `#[resizealloc::region] async fn`).
//! Prints `RESULT service-MODE/<workers>t <ns per request> ns check=<sum>` and, with
//! `WORKLOAD_RSS`, the peak RSS.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Instant;

use resizealloc::InRegionExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

const REQUESTS: usize = 100_000;
const HANDLERS: usize = 256;

#[derive(Deserialize)]
struct Item {
    sku: String,
    qty: u32,
    price: f64,
}

#[derive(Deserialize)]
struct Order {
    id: u64,
    customer: String,
    items: Vec<Item>,
    note: Option<String>,
    tags: Vec<String>,
}

/// What the backend answers: a discount and a message for the customer.
struct Quote {
    discount: f64,
    message: String,
}

#[derive(Serialize)]
struct Line<'a> {
    sku: &'a str,
    total: f64,
}

#[derive(Serialize)]
struct Reply<'a> {
    id: u64,
    customer: &'a str,
    lines: Vec<Line<'a>>,
    by_tag: BTreeMap<&'a str, u32>,
    total: f64,
    message: String,
}

type Backend = mpsc::UnboundedSender<(u64, oneshot::Sender<Quote>)>;

fn body(i: usize) -> String {
    let mut s = format!(r#"{{"id":{i},"customer":"customer-{}","items":["#, i % 97);
    for j in 0..(2 + i % 6) {
        if j > 0 {
            s.push(',');
        }
        write!(
            s,
            r#"{{"sku":"sku-{:05}","qty":{},"price":{}.5}}"#,
            (i * 7 + j) % 10_000,
            1 + j % 3,
            (i + j) % 90
        )
        .unwrap();
    }
    let note = if i.is_multiple_of(4) {
        format!(r#""deliver after {} pm""#, i % 12)
    } else {
        "null".to_string()
    };
    write!(
        s,
        r#"],"note":{note},"tags":["t{}","region-{}","p{}"]}}"#,
        i % 5,
        i % 3,
        i % 7
    )
    .unwrap();
    s
}

/// One request: parse, ask the backend, build the reply.
async fn handle(body: String, backend: &Backend) -> String {
    let order: Order = serde_json::from_str(&body).expect("a well-formed body");
    drop(body);
    let (tx, rx) = oneshot::channel();
    backend.send((order.id, tx)).expect("the backend runs");
    let quote = rx.await.expect("the backend answers"); // `order` lives across the await
    let lines: Vec<Line> = order
        .items
        .iter()
        .map(|it| Line {
            sku: &it.sku,
            total: it.qty as f64 * it.price * (1.0 - quote.discount),
        })
        .collect();
    let mut by_tag = BTreeMap::new();
    for t in &order.tags {
        *by_tag.entry(t.as_str()).or_insert(0) +=
            1 + order.note.as_ref().map_or(0, |n| n.len() as u32 % 3);
    }
    let total = lines.iter().map(|l| l.total).sum();
    serde_json::to_string(&Reply {
        id: order.id,
        customer: &order.customer,
        lines,
        by_tag,
        total,
        message: quote.message,
    })
    .expect("serialisable")
}

#[resizealloc::region]
async fn handle_in_region(body: String, backend: &Backend) -> String {
    handle(body, backend).await
}

#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    Plain,
    Adapter,
    Attribute,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "plain" => Some(Mode::Plain),
            "adapter" => Some(Mode::Adapter),
            "attribute" => Some(Mode::Attribute),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Adapter => "adapter",
            Mode::Attribute => "attribute",
        }
    }
}

/// Bodies a handler's inbox holds before the client waits: what is in flight stays bounded.
const INBOX: usize = 2;

/// Runs the service once on `workers` worker threads for `requests` requests; returns (ns per
/// request, checksum). A client task makes the bodies (outside regions) and sends each to a
/// handler's bounded inbox.
fn run(mode: Mode, workers: usize, requests: usize) -> (f64, usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let (backend, mut calls) = mpsc::unbounded_channel::<(u64, oneshot::Sender<Quote>)>();
        tokio::spawn(async move {
            while let Some((id, reply)) = calls.recv().await {
                let _ = reply.send(Quote {
                    discount: (id % 10) as f64 / 100.0,
                    message: format!("thank you, order {id}"),
                });
            }
        });
        let (replies_tx, mut replies) = mpsc::unbounded_channel::<String>();
        let mut inboxes = Vec::with_capacity(HANDLERS);
        let mut handlers = Vec::with_capacity(HANDLERS);
        for _ in 0..HANDLERS {
            let (tx, mut rx) = mpsc::channel::<String>(INBOX);
            inboxes.push(tx);
            let backend = backend.clone();
            let replies_tx = replies_tx.clone();
            handlers.push(tokio::spawn(async move {
                while let Some(body) = rx.recv().await {
                    let reply = match mode {
                        Mode::Plain => handle(body, &backend).await,
                        Mode::Adapter => handle(body, &backend).in_region().await,
                        Mode::Attribute => handle_in_region(body, &backend).await,
                    };
                    replies_tx.send(reply).expect("the collector runs");
                }
            }));
        }
        drop(replies_tx);
        let t0 = Instant::now();
        let client = tokio::spawn(async move {
            for i in 0..requests {
                inboxes[i % HANDLERS]
                    .send(body(i))
                    .await
                    .expect("the handler runs");
            }
        });
        let mut check = 0usize;
        let mut n = 0;
        while let Some(r) = replies.recv().await {
            check = check.wrapping_add(r.len() + r.as_bytes()[r.len() / 2] as usize);
            n += 1;
        }
        let ns = t0.elapsed().as_nanos() as f64 / n as f64;
        assert_eq!(n, requests, "every request answered");
        client.await.expect("the client ran");
        for h in handlers {
            h.await.expect("no handler panicked");
        }
        (ns, check)
    })
}

/// `--service MODE [--threads N] [--quick]`: a warm-up run of a tenth of the requests, then the
/// timed one (`--quick`: a tenth of them).
pub fn main(mode: Mode, workers: usize, quick: bool) {
    let n = if quick { REQUESTS / 10 } else { REQUESTS };
    let _ = run(mode, workers, n / 10);
    let (ns, check) = run(mode, workers, n);
    println!(
        "RESULT service-{}/{workers}t {ns:.0} ns check={check}",
        mode.name()
    );
    if std::env::var_os("WORKLOAD_STATS").is_some() {
        eprintln!("STATS service {:#?}", resizealloc::stats().process);
        eprintln!("STATS service {:#?}", resizealloc::stats().memory);
    }
    super::report_peak_rss();
}
