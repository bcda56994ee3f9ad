//! `SharedBloomFilter` on a real `redis-server` against what a user writes by hand with the
//! `redis` crate, in one run against one server: items/s and server memory per item.
//!
//! The bench starts its own `redis-server`, or the server that `SEEN_TEST_SERVER` names (the
//! tests' harness, `redis/test-server/`: a Unix socket in a temporary directory, no
//! persistence), and kills it at the end. Each case starts from an empty server (`FLUSHALL`),
//! so every case holds the same `ITEMS` ids of about 50 bytes (`msg-` and 45 hex digits), and
//! runs with 1, 4 and 32 client threads (blocking API: the baselines with one connection per
//! thread, the filter's threads on one `Server`, whose blocking calls share its one
//! multiplexed connection), the ids split into contiguous ranges, each thread sending batches
//! of `BATCH` ids:
//!
//! - `bloom insert new` / `bloom insert repeated` / `bloom contains`: a `SharedBloomFilter` of
//!   capacity `ITEMS` at 1% (word layout, the default), `insert_many` of the ids, then
//!   `insert_many` of the same ids again, then `contains_many` of them.
//! - `line insert new` / `line insert repeated` / `line contains`: the same with the line
//!   layout (what `seen dedup --redis` uses by default).
//! - `window insert new` / `window insert repeated` / `window contains`: the same with a
//!   `SharedWindowedBloomFilter` of capacity `ITEMS` per period at 1%, 7 periods of an hour
//!   (8 live generations, so every lookup reads 9 keys: the 8 and the next), no rotation
//!   during the run.
//! - `SET NX new` / `SET NX repeated` / `EXISTS`: a pipeline of `SET id 1 NX` per batch, then
//!   the same again, then a pipeline of `EXISTS id`. `SET NX PX new`: with `PX 3600000`.
//! - `map claim_many new`: a `SharedOverwriteMap` of 4 x `ITEMS` buckets, `claim_many` of
//!   each batch, then `SharedClaim::commit_many` of the claims it got (what a consumer does
//!   with a batch of messages it processed);
//!   `map claim_many`, the `claim_many` calls alone (their share of the same run's time).
//! - `SETBIT script new`: the Redisson way, one `EVALSHA` per id setting its k bits with
//!   `SETBIT` (the positions the filter itself uses: the same hash, the same word; a word
//!   layout item has k bits or fewer when two collide) and answering whether one was 0,
//!   pipelined per batch, in one key that grows as bits are set.
//!
//! Each figure is the median of `RUNS` runs; the runs of all cases interleave (run 1 of every
//! case, then run 2, ...) so that a slow moment of a shared machine hits all cases alike.
//! Memory per item is the growth of the server's `used_memory` minus its client buffers
//! (`mem_clients_normal`) from the empty server to after the new ids are in, over `ITEMS`:
//! for the filter that includes its whole bit array (allocated at creation), for `SET NX`
//! every key. It is shown for the first client count only (median of its runs): with 32
//! connections opening and closing, the server's allocator moves by a few hundred KB, which
//! is nothing next to a million keys but a visible share of a filter's 600 KB. The filter's
//! own keys' `MEMORY USAGE` is printed as a check. Client CPU per item is this process's CPU
//! time (`/proc/self/stat`), server CPU per item the server's (`INFO cpu`): unlike items/s,
//! they barely move when other processes load the machine. Server time per item is from `INFO commandstats` (`usec` summed over the
//! case's commands, over `ITEMS`), reset before each case.
//!
//! Run: `cargo bench -p seen-benches --bench redis` (a few minutes on 2 shared vCPUs).
//! `SEEN_REDIS_ITEMS`, `SEEN_REDIS_RUNS`, `SEEN_REDIS_CLIENTS` (e.g. `1,4`) override the
//! defaults (400,000, 3, `1,4,32`); `SEEN_REDIS_ONLY` picks cases among
//! `bloom,line,window,setnx,px,script,claim` (for profiling one).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use seen::BlockBits;
use seen::Layout;
use seen::hash::{ItemHasher, StableHasher};
use seen::sizing::BlockedSizing;
use seen_redis::{
    Server, SharedBloomFilter, SharedClaim, SharedOverwriteMap, SharedWindowedBloomFilter,
};
use seen_test_server::RedisServer;

/// Ids per batch: one `insert_many` / `contains_many`, or one pipeline.
const BATCH: usize = 1000;

/// The windowed filter's periods: 8 live generations, the one written and 7 read.
const WINDOW_PERIODS: u32 = 7;

/// The shared filter a case runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `SharedBloomFilter`, word layout.
    Word,
    /// `SharedBloomFilter`, line layout.
    Line,
    /// `SharedWindowedBloomFilter`, word layout, `WINDOW_PERIODS` periods of an hour.
    Window,
}

impl Kind {
    /// Its cases: inserts of new ids, of the same ids again, lookups.
    fn cases(self) -> [&'static str; 3] {
        match self {
            Kind::Word => [
                "bloom insert new",
                "bloom insert repeated",
                "bloom contains",
            ],
            Kind::Line => ["line insert new", "line insert repeated", "line contains"],
            Kind::Window => [
                "window insert new",
                "window insert repeated",
                "window contains",
            ],
        }
    }
}

/// The batch calls the filter cases make.
trait Filter: Sync {
    /// `insert_many` (or `contains_many`) of `ids`; how many were new (or present).
    fn many(&self, insert: bool, ids: &[String], out: &mut Vec<bool>) -> usize;
}

macro_rules! filter {
    ($($ty:ty),*) => {$(
        impl Filter for $ty {
            fn many(&self, insert: bool, ids: &[String], out: &mut Vec<bool>) -> usize {
                let ids = ids.iter().map(String::as_str);
                if insert {
                    self.insert_many(ids, out)
                } else {
                    self.contains_many(ids, out)
                }
                .expect("a batch")
            }
        }
    )*};
}

filter!(SharedBloomFilter, SharedWindowedBloomFilter);

/// The Redisson-style insert: set every bit, answer 1 if one was 0.
const SETBIT_SCRIPT: &str = "local new = 0 \
    for i = 1, #ARGV do \
        if redis.call('SETBIT', KEYS[1], ARGV[i], 1) == 0 then new = 1 end \
    end \
    return new";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// About 50 bytes, unique per `i`: `msg-` and 45 hex digits.
fn id(i: u64) -> String {
    let a = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x1234_5678_9abc_def0;
    let b = a.rotate_left(29).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    format!("msg-{i:016x}{a:016x}{:013x}", b >> 12)
}

/// This process's CPU time (user + system, all threads), from `/proc/self/stat` (Linux; in
/// clock ticks of 10 ms): the client's side of a case. Zero elsewhere.
fn client_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): state is field 3, utime 14.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

/// What one run of a case measured.
struct Measure {
    items: usize,
    secs: f64,
    client_cpu: Duration,
    /// Items the case's calls answered "new" or "present" (checked against what it must be).
    answered: usize,
}

/// The server's figures for the bench: memory and commandstats.
struct Probe {
    conn: Connection,
}

impl Probe {
    fn info(&mut self, section: &str) -> String {
        redis::cmd("INFO")
            .arg(section)
            .query(&mut self.conn)
            .expect("INFO")
    }

    /// `used_memory` minus the normal clients' buffers.
    fn data_memory(&mut self) -> i64 {
        let info = self.info("memory");
        let field = |name: &str| -> i64 {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {name} in INFO memory"))
        };
        field("used_memory") - field("mem_clients_normal")
    }

    /// The server's CPU time so far (`INFO cpu`: `used_cpu_sys` + `used_cpu_user`).
    fn server_cpu(&mut self) -> f64 {
        let info = self.info("cpu");
        ["used_cpu_sys:", "used_cpu_user:"]
            .iter()
            .map(|f| {
                info.lines()
                    .find_map(|l| l.strip_prefix(f))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .unwrap_or_else(|| panic!("no {f} in INFO cpu"))
            })
            .sum()
    }

    fn flush(&mut self) {
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .exec(&mut self.conn)
            .expect("FLUSHALL");
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .exec(&mut self.conn)
            .expect("CONFIG RESETSTAT");
    }

    fn reset_stats(&mut self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .exec(&mut self.conn)
            .expect("CONFIG RESETSTAT");
    }

    /// Microseconds the server spent in data commands since the last reset, and a summary
    /// (`cmd calls usec_per_call`).
    fn server_usec(&mut self) -> (u64, String) {
        let info = self.info("commandstats");
        let mut total = 0;
        let mut summary = Vec::new();
        for line in info.lines() {
            let Some(rest) = line.strip_prefix("cmdstat_") else {
                continue;
            };
            let Some((name, fields)) = rest.split_once(':') else {
                continue;
            };
            if matches!(
                name,
                "info" | "config|resetstat" | "flushall" | "ping" | "client|setinfo" | "hello"
            ) {
                continue;
            }
            let get = |f: &str| -> f64 {
                fields
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0)
            };
            total += get("usec") as u64;
            summary.push(format!(
                "{name} {} x {:.2} us",
                get("calls"),
                get("usec_per_call")
            ));
        }
        (total, summary.join(", "))
    }
}

/// Runs `work(lo, hi)` on `clients` threads over contiguous ranges of `0..items`, each in
/// batches of `BATCH`; returns the wall time and the sum of the answers.
fn on_threads(
    clients: usize,
    items: usize,
    work: &(dyn Fn(usize, usize) -> usize + Sync),
) -> Measure {
    let per = items.div_ceil(clients);
    let cpu = client_cpu();
    let start = Instant::now();
    let answered = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|t| {
                let (lo, hi) = ((t * per).min(items), ((t + 1) * per).min(items));
                s.spawn(move || work(lo, hi))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client thread panicked"))
            .sum()
    });
    Measure {
        items,
        secs: start.elapsed().as_secs_f64(),
        client_cpu: client_cpu().saturating_sub(cpu),
        answered,
    }
}

fn batches(lo: usize, hi: usize) -> impl Iterator<Item = (usize, usize)> {
    (lo..hi)
        .step_by(BATCH)
        .map(move |b| (b, (b + BATCH).min(hi)))
}

/// A pipeline per batch of `cmd(id)`; the number of replies equal to `count`.
fn pipelined(
    url: &str,
    lo: usize,
    hi: usize,
    cmd: &(dyn Fn(&mut redis::Pipeline, usize) + Sync),
    count: &Value,
) -> usize {
    let mut conn = redis::Client::open(url)
        .expect("url")
        .get_connection()
        .expect("connect");
    let mut counted = 0;
    for (b, e) in batches(lo, hi) {
        let mut pipe = redis::Pipeline::with_capacity(e - b);
        for i in b..e {
            cmd(&mut pipe, i);
        }
        let replies: Vec<Value> = pipe.query(&mut conn).expect("pipeline");
        assert_eq!(replies.len(), e - b);
        counted += replies.iter().filter(|v| *v == count).count();
    }
    counted
}

/// The figures of one case at one client count: items/s of every run, memory and server time
/// of the first.
#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    /// Microseconds of CPU per item, client (this process) and server, every run.
    client_us: Vec<f64>,
    server_cpu_us: Vec<f64>,
    bytes_per_item: Vec<f64>,
    server_us: Vec<f64>,
    stats: String,
}

impl Figures {
    fn median(&self) -> f64 {
        median(&self.rates)
    }
}

fn median(values: &[f64]) -> f64 {
    let mut r = values.to_vec();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

/// What every case reads.
struct Data {
    url: String,
    server: Server,
    ids: Vec<String>,
    sizing: BlockedSizing,
}

/// The server's figures and the results so far.
struct Bench {
    probe: Probe,
    /// The server's CPU seconds when the running case started.
    server_cpu_before: f64,
    /// The filter's keys' `MEMORY USAGE` per item (the first time).
    key_bytes: Option<f64>,
    results: BTreeMap<(&'static str, usize), Figures>,
}

impl Bench {
    /// Before a case's timed part: zero the command statistics, note the server's CPU time.
    fn start(&mut self) {
        self.probe.reset_stats();
        self.server_cpu_before = self.probe.server_cpu();
    }

    fn record(&mut self, case: &'static str, clients: usize, m: &Measure, memory: Option<i64>) {
        let items = m.items as f64;
        let (usec, stats) = self.probe.server_usec();
        let server_cpu = self.probe.server_cpu();
        let f = self.results.entry((case, clients)).or_default();
        f.rates.push(items / m.secs);
        f.client_us.push(m.client_cpu.as_secs_f64() * 1e6 / items);
        f.server_cpu_us
            .push((server_cpu - self.server_cpu_before) * 1e6 / items);
        f.server_us.push(usec as f64 / items);
        if f.stats.is_empty() {
            f.stats = stats;
        }
        if let Some(bytes) = memory {
            f.bytes_per_item.push(bytes as f64 / items);
        }
    }

    fn bloom(&mut self, d: &Data, clients: usize, kind: Kind) {
        let n = d.ids.len();
        self.probe.flush();
        let empty = self.probe.data_memory();
        // The word layout's keys, for their `MEMORY USAGE`.
        let mut keys = Vec::new();
        let filter: Box<dyn Filter> = match kind {
            Kind::Word | Kind::Line => {
                let layout = if kind == Kind::Word {
                    Layout::Word
                } else {
                    Layout::Line
                };
                let filter = SharedBloomFilter::builder("bench", n as u64)
                    .fpr(0.01)
                    .layout(layout)
                    .create(&d.server)
                    .expect("create the filter");
                if kind == Kind::Word {
                    assert_eq!(filter.sizing().hashes, d.sizing.hashes);
                    keys = filter.keys().to_vec();
                }
                Box::new(filter)
            }
            Kind::Window => Box::new(
                SharedWindowedBloomFilter::builder("bench", n as u64)
                    .fpr(0.01)
                    .periods(WINDOW_PERIODS)
                    .period(Duration::from_secs(3600))
                    .create(&d.server)
                    .expect("create the windowed filter"),
            ),
        };
        let ids = &d.ids;
        let run = |insert: bool| {
            let filter = &*filter;
            on_threads(clients, n, &move |lo, hi| {
                let mut out = Vec::with_capacity(BATCH);
                let mut count = 0;
                for (b, e) in batches(lo, hi) {
                    out.clear();
                    count += filter.many(insert, &ids[b..e], &mut out);
                }
                count
            })
        };
        let [new, repeated, contains] = kind.cases();
        self.start();
        let m = run(true);
        // Answers "new" but for false positives among the earlier ids (under 1%).
        assert!(
            m.answered as f64 > 0.98 * n as f64,
            "{} new of {n}",
            m.answered
        );
        let memory = self.probe.data_memory() - empty;
        if kind == Kind::Word && self.key_bytes.is_none() {
            let mut bytes = 0;
            for key in keys.iter().chain([&"seen:{bench}:meta".to_owned()]) {
                let usage: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(key)
                    .query(&mut self.probe.conn)
                    .expect("MEMORY USAGE");
                bytes += usage.expect("the filter's keys exist");
            }
            self.key_bytes = Some(bytes as f64 / n as f64);
        }
        self.record(new, clients, &m, Some(memory));
        self.start();
        let m = run(true);
        assert_eq!(m.answered, 0, "repeated ids answered new");
        self.record(repeated, clients, &m, None);
        self.start();
        let m = run(false);
        assert_eq!(m.answered, n, "inserted ids not found");
        self.record(contains, clients, &m, None);
    }

    fn set_nx(&mut self, d: &Data, clients: usize, px: bool) {
        let n = d.ids.len();
        self.probe.flush();
        let empty = self.probe.data_memory();
        let (url, ids) = (&d.url, &d.ids);
        let set = move |pipe: &mut redis::Pipeline, i: usize| {
            let cmd = pipe.cmd("SET").arg(&ids[i]).arg(1).arg("NX");
            if px {
                cmd.arg("PX").arg(3_600_000);
            }
        };
        let ok = Value::Okay;
        self.start();
        let m = on_threads(clients, n, &|lo, hi| pipelined(url, lo, hi, &set, &ok));
        assert_eq!(m.answered, n);
        let memory = self.probe.data_memory() - empty;
        if px {
            self.record("SET NX PX new", clients, &m, Some(memory));
            return;
        }
        self.record("SET NX new", clients, &m, Some(memory));
        self.start();
        let m = on_threads(clients, n, &|lo, hi| pipelined(url, lo, hi, &set, &ok));
        assert_eq!(m.answered, 0);
        self.record("SET NX repeated", clients, &m, None);
        let exists = move |pipe: &mut redis::Pipeline, i: usize| {
            pipe.cmd("EXISTS").arg(&ids[i]);
        };
        self.start();
        let m = on_threads(clients, n, &|lo, hi| {
            pipelined(url, lo, hi, &exists, &Value::Int(1))
        });
        assert_eq!(m.answered, n);
        self.record("EXISTS", clients, &m, None);
    }

    fn claims(&mut self, d: &Data, clients: usize) {
        let n = d.ids.len();
        self.probe.flush();
        let empty = self.probe.data_memory();
        let map = SharedOverwriteMap::builder("bench", 4 * n as u64)
            .create(&d.server)
            .expect("create the map");
        let (ids, map) = (&d.ids, &map);
        let claiming = std::sync::Mutex::new(Duration::ZERO);
        self.start();
        let m = on_threads(clients, n, &|lo, hi| {
            let mut claimed = 0;
            let mut in_claims = Duration::ZERO;
            for (b, e) in batches(lo, hi) {
                let start = Instant::now();
                let claims = map
                    .claim_many(ids[b..e].iter().map(String::as_str))
                    .expect("a batch of claims");
                in_claims += start.elapsed();
                let committed = SharedClaim::commit_many(claims.into_iter().flatten())
                    .expect("a batch of commits");
                claimed += committed.iter().filter(|&&c| c).count();
            }
            *claiming.lock().unwrap() += in_claims;
            claimed
        });
        // Committed but for the ids whose slot another of the batches in flight took before
        // the commit (a few in 10,000).
        assert!(
            m.answered as f64 > 0.99 * n as f64,
            "{} claimed of {n}",
            m.answered
        );
        let memory = self.probe.data_memory() - empty;
        self.record("map claim_many new", clients, &m, Some(memory));
        // The claims' share: their calls' time, summed over the threads, spread over the wall
        // time as the threads' whole work is.
        let busy = claiming.into_inner().unwrap().as_secs_f64() / clients as f64;
        let f = self.results.entry(("map claim_many", clients)).or_default();
        f.rates.push(n as f64 / busy.min(m.secs).max(1e-9));
        // Not measured apart: the row shows its items/s only.
        for v in [&mut f.client_us, &mut f.server_cpu_us, &mut f.server_us] {
            v.push(f64::NAN);
        }
    }

    fn setbit_script(&mut self, d: &Data, clients: usize) {
        let n = d.ids.len();
        self.probe.flush();
        let empty = self.probe.data_memory();
        let script = redis::Script::new(SETBIT_SCRIPT);
        let hash = script.get_hash().to_owned();
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(SETBIT_SCRIPT)
            .query(&mut self.probe.conn)
            .expect("SCRIPT LOAD");
        let (url, ids, sizing) = (&d.url, &d.ids, &d.sizing);
        let hasher = StableHasher::new();
        let evalsha = move |pipe: &mut redis::Pipeline, i: usize| {
            let bits = BlockBits::new(hasher.hash_item(ids[i].as_str()), sizing);
            let cmd = pipe.cmd("EVALSHA").arg(&hash).arg(1).arg("bench:setbit");
            for (j, mask) in bits.masks().iter().enumerate() {
                let word = bits.first_word() + j as u64;
                let mut m = *mask;
                while m != 0 {
                    let bit = u64::from(m.trailing_zeros());
                    m &= m - 1;
                    cmd.arg(word * 64 + 63 - bit);
                }
            }
        };
        self.start();
        let m = on_threads(clients, n, &|lo, hi| {
            pipelined(url, lo, hi, &evalsha, &Value::Int(1))
        });
        assert!(
            m.answered as f64 > 0.98 * n as f64,
            "{} new of {n}",
            m.answered
        );
        let memory = self.probe.data_memory() - empty;
        self.record("SETBIT script new", clients, &m, Some(memory));
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a name filter is not supported (the run is one table).
    let items: usize = env_or("SEEN_REDIS_ITEMS", 400_000);
    let runs: usize = env_or("SEEN_REDIS_RUNS", 3);
    let clients: Vec<usize> = std::env::var("SEEN_REDIS_CLIENTS")
        .unwrap_or_else(|_| "1,4,32".to_owned())
        .split(',')
        .map(|c| c.trim().parse().expect("SEEN_REDIS_CLIENTS: numbers"))
        .collect();
    let started = Instant::now();
    let redis = RedisServer::start();
    let url = redis.url();
    let version = redis::cmd("INFO")
        .arg("server")
        .query::<String>(&mut redis.client())
        .expect("INFO")
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
        .unwrap_or_default();
    let d = Data {
        server: Server::open(&url).expect("open the server"),
        url,
        ids: (0..items as u64).map(id).collect(),
        sizing: seen::sizing::blocked(items as u64, 0.01, seen::Layout::Word).expect("sizing"),
    };
    let mut bench = Bench {
        probe: Probe {
            conn: redis.client(),
        },
        server_cpu_before: 0.0,
        key_bytes: None,
        results: BTreeMap::new(),
    };
    println!(
        "redis-server {version} on a Unix socket; {items} ids of {} bytes, batches of {BATCH}, {runs} runs; \
         filter: {} bits ({:.2} bits per item), k = {}",
        d.ids[0].len(),
        d.sizing.bits,
        d.sizing.bits as f64 / items as f64,
        d.sizing.hashes
    );
    let only = std::env::var("SEEN_REDIS_ONLY")
        .unwrap_or_else(|_| "bloom,line,window,setnx,px,script,claim".to_owned());
    let on = |case: &str| only.split(',').any(|c| c.trim() == case);
    for run in 0..runs {
        for &c in &clients {
            if on("bloom") {
                bench.bloom(&d, c, Kind::Word);
            }
            if on("line") {
                bench.bloom(&d, c, Kind::Line);
            }
            if on("window") {
                bench.bloom(&d, c, Kind::Window);
            }
            if on("setnx") {
                bench.set_nx(&d, c, false);
            }
            if on("px") {
                bench.set_nx(&d, c, true);
            }
            if on("script") {
                bench.setbit_script(&d, c);
            }
            if on("claim") {
                bench.claims(&d, c);
            }
        }
        eprintln!("run {} done after {:.0?}", run + 1, started.elapsed());
    }
    report(&bench.results, &clients);
    if let Some(bytes) = bench.key_bytes {
        println!(
            "\nThe filter's keys (MEMORY USAGE of its shards and description): {bytes:.2} bytes per item"
        );
    }
    println!(
        "\ntotal {:.0?}",
        Duration::from_secs(started.elapsed().as_secs())
    );
}

fn report(results: &BTreeMap<(&'static str, usize), Figures>, clients: &[usize]) {
    let cases = [
        "bloom insert new",
        "bloom insert repeated",
        "bloom contains",
        "line insert new",
        "line insert repeated",
        "line contains",
        "window insert new",
        "window insert repeated",
        "window contains",
        "SET NX new",
        "SET NX repeated",
        "SET NX PX new",
        "EXISTS",
        "SETBIT script new",
        "map claim_many new",
        "map claim_many",
    ];
    println!(
        "\n| case | clients | items/s (median) | runs | client CPU us/item | server CPU us/item | \
         server commands us/item | bytes/item |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for case in cases {
        for &c in clients {
            let Some(f) = results.get(&(case, c)) else {
                continue;
            };
            let runs: Vec<String> = f.rates.iter().map(|r| format!("{:.0}k", r / 1e3)).collect();
            println!(
                "| {case} | {c} | {:.0}k | {} | {:.2} | {:.2} | {:.2} | {} |",
                f.median() / 1e3,
                runs.join(" "),
                median(&f.client_us),
                median(&f.server_cpu_us),
                median(&f.server_us),
                if f.bytes_per_item.is_empty() || c != clients[0] {
                    String::new()
                } else {
                    format!("{:.2}", median(&f.bytes_per_item))
                }
            );
        }
    }
    println!("\nTargets (issues 25 and 37), medians, same run:");
    println!(
        "| clients | lookups / EXISTS (>= 0.9) | new / SET NX (>= 0.4) | new / script (>= 2) | repeated / SET NX new (>= 0.8) | repeated / SET NX repeated | SET NX bytes / bloom bytes (>= 40) | claim_many / bloom new (>= 0.5) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let m =
        |case: &'static str, c: usize| results.get(&(case, c)).map_or(f64::NAN, Figures::median);
    let bytes = |case: &'static str| {
        results
            .get(&(case, clients[0]))
            .filter(|f| !f.bytes_per_item.is_empty())
            .map_or(f64::NAN, |f| median(&f.bytes_per_item))
    };
    for &c in clients {
        println!(
            "| {c} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.2} |",
            m("bloom contains", c) / m("EXISTS", c),
            m("bloom insert new", c) / m("SET NX new", c),
            m("bloom insert new", c) / m("SETBIT script new", c),
            m("bloom insert repeated", c) / m("SET NX new", c),
            m("bloom insert repeated", c) / m("SET NX repeated", c),
            bytes("SET NX new") / bytes("bloom insert new"),
            m("map claim_many", c) / m("bloom insert new", c),
        );
    }
    println!(
        "\n| clients | line lookups / EXISTS (>= 0.9) | line repeated / SET NX new (>= 0.8) | line repeated / SET NX repeated | window new / bloom new (>= 0.5) | window repeated / bloom repeated | window lookups / bloom lookups |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &c in clients {
        println!(
            "| {c} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            m("line contains", c) / m("EXISTS", c),
            m("line insert repeated", c) / m("SET NX new", c),
            m("line insert repeated", c) / m("SET NX repeated", c),
            m("window insert new", c) / m("bloom insert new", c),
            m("window insert repeated", c) / m("bloom insert repeated", c),
            m("window contains", c) / m("bloom contains", c),
        );
    }
    println!(
        "\nServer commands per case (first run, {} clients):",
        clients[0]
    );
    for ((case, c), f) in results {
        if *c == clients[0] {
            println!("- {case}: {}", f.stats);
        }
    }
}
