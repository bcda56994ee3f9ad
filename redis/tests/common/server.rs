//! Real servers for the tests: `redis-server` started in a temporary directory, on a Unix
//! socket (one server) or free loopback ports (a cluster), and killed when dropped. No mock
//! stands in for a server anywhere. Shared with the command's tests (`#[path]`).
//!
//! `.ci/run` installs `redis-server` when it is missing; a test that cannot start it fails,
//! saying so (never skips).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to accept connections after it starts (a loaded CI machine).
const START_LIMIT: Duration = Duration::from_secs(60);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A directory of its own under the system's temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "seen-redis-{what}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One `redis-server` on a Unix socket in its own directory, killed on drop.
pub struct RedisServer {
    child: Option<Child>,
    dir: TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// A server with no persistence.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// A server with these extra arguments (`--appendonly yes`, `--maxmemory 10mb`, ...).
    pub fn start_with(extra: &[&str]) -> Self {
        let mut server = Self {
            child: None,
            dir: TempDir::new("server"),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("redis.sock")
    }

    /// The URL to connect to: `unix:///.../redis.sock`.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// The server's directory (its AOF and RDB files are there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg("0")
            .arg("--unixsocket")
            .arg(self.socket())
            .arg("--unixsocketperm")
            .arg("700")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--daemonize")
            .arg("no")
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start redis-server ({e}): install it (.ci/run does: apt-get install redis-server)")
        });
        self.child = Some(child);
        let url = self.url();
        wait_until(
            || ping(&url),
            || self.log(),
            "the server to accept connections",
        );
    }

    /// The server's log, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Kills the server at once (SIGKILL: a crash, nothing saved on the way out).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// Kills the server and starts it again on the same directory and socket (its AOF or RDB
    /// file, if it writes one, is loaded).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// A plain client connection, for checking the server from the test's side.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether a server answers `PING` at `url`.
fn ping(url: &str) -> bool {
    redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok()
}

/// Polls `ready` until it holds, failing the test with `log()` after [`START_LIMIT`].
fn wait_until(mut ready: impl FnMut() -> bool, log: impl Fn() -> String, what: &str) {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > START_LIMIT {
            panic!(
                "gave up waiting for {what} after {START_LIMIT:?}; log:\n{}",
                log()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free loopback TCP port whose cluster bus port (port + 10000) is free too.
fn free_port() -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// A local Redis Cluster of `n` primaries (no replicas) on loopback ports, every slot assigned,
/// killed on drop.
pub struct RedisCluster {
    nodes: Vec<(u16, Child)>,
    dir: TempDir,
}

impl RedisCluster {
    pub fn start(n: usize) -> Self {
        let dir = TempDir::new("cluster");
        let mut nodes = Vec::new();
        for i in 0..n {
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let port = free_port();
            let child = Command::new("redis-server")
                .arg("--port")
                .arg(port.to_string())
                .arg("--bind")
                .arg("127.0.0.1")
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg(node_dir.join("nodes.conf"))
                .arg("--dir")
                .arg(&node_dir)
                .arg("--save")
                .arg("")
                .arg("--appendonly")
                .arg("no")
                .arg("--logfile")
                .arg(node_dir.join("redis.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start redis-server ({e})"));
            nodes.push((port, child));
        }
        let cluster = Self { nodes, dir };
        for url in cluster.urls() {
            wait_until(
                || ping(&url),
                || cluster.log(),
                "a cluster node to accept connections",
            );
        }
        // Assign the slots: redis-cli ships with the server (package redis-tools).
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(cluster.nodes.iter().map(|(p, _)| format!("127.0.0.1:{p}")))
            .arg("--cluster-replicas")
            .arg("0")
            .arg("--cluster-yes")
            .output()
            .expect("redis-cli (installed with redis-server)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for url in cluster.urls() {
            wait_until(
                || {
                    redis::Client::open(url.as_str())
                        .and_then(|c| c.get_connection())
                        .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
                        .is_ok_and(|info| info.contains("cluster_state:ok"))
                },
                || cluster.log(),
                "the cluster to be ok on every node",
            );
        }
        cluster
    }

    /// `redis://127.0.0.1:PORT` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|(p, _)| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The number of keys each node holds (`DBSIZE`).
    pub fn keys_per_node(&self) -> Vec<u64> {
        self.urls()
            .iter()
            .map(|url| {
                let mut c = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection()
                    .unwrap();
                redis::cmd("DBSIZE").query(&mut c).unwrap()
            })
            .collect()
    }

    fn log(&self) -> String {
        (0..self.nodes.len())
            .map(|i| {
                std::fs::read_to_string(self.dir.path().join(format!("node{i}/redis.log")))
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `ready` until it holds, failing the test (saying what it waited for) after
/// [`START_LIMIT`]: the tests' only way to wait for another process or thread.
pub fn wait_for(ready: impl FnMut() -> bool, what: &str) {
    wait_until(ready, String::new, what);
}

/// The environment variable that makes a test of this binary a worker: its value is the
/// worker's role and arguments. Without it the worker test returns at once.
pub const WORKER: &str = "SEEN_REDIS_TEST_WORKER";

/// This test binary again, running only the test `test` (a worker) with `spec` in [`WORKER`]:
/// an OS process of its own, for tests of several processes sharing one structure. Its
/// standard output is piped; the worker prints what the parent checks.
pub fn worker(test: &str, spec: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary's path"));
    cmd.args([
        "--exact",
        test,
        "--nocapture",
        "--include-ignored",
        "--test-threads",
        "1",
    ])
    .env(WORKER, spec)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    cmd
}

/// A shuffle of `items` by `seed` (xorshift; the tests need orders, not quality), none if the
/// seed is 0.
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    if seed == 0 {
        return;
    }
    let mut state = seed;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(i, (state % (i as u64 + 1)) as usize);
    }
}
