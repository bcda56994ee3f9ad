//! Real servers for the tests of `seen`'s shared structures (package `seen-dedup-redis`), of
//! the command's `--redis` (`cli/tests/redis.rs`) and for the Redis bench (`benches/redis.rs`):
//! a server started in a temporary directory, on a Unix socket (one server) or free loopback
//! ports (a cluster), and killed when dropped. No mock stands in for a server anywhere. A
//! workspace crate of its own, never published: a dev-dependency of the packages that use it.
//!
//! The server is `redis-server` on the `PATH`, or the binary that [`SERVER_VAR`] names (Valkey's
//! `valkey-server`: `scripts/valkey` fetches one); a cluster is created with `redis-cli`, or the
//! binary that [`CLI_VAR`] names. `.ci/run` installs `redis-server` when it is missing and runs
//! the shared structures' tests once more with Valkey; a test that cannot start its server
//! fails, saying so (never skips).
//!
//! Tests choose their interleavings here too: a write is held with [`RedisServer::pause_writes`]
//! (an hour: it never ends by itself while a test runs) and the test waits for the held client
//! with [`RedisServer::wait_blocked`]; processes start together on tokens
//! ([`ready_then_wait_for_go`], [`start_when_ready`]) handed out by blocking `BLPOP`s, never on
//! a polled key. The only polls left are of a server's own state where no blocking command
//! exists (a fresh server answering `PING`, a cluster's state, a client held by a pause), each
//! with a generous deadline.

mod proxy;

pub use proxy::{Action, Proxy, has, shard_script};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to accept connections after it starts (a loaded CI machine),
/// and how long a test waits for a server-side condition it set up (a client held by a pause,
/// a worker process ready).
pub const START_LIMIT: Duration = Duration::from_secs(60);

/// How long a test's `CLIENT PAUSE` lasts: far longer than any of its waits, so that the pause
/// never ends by itself while the test runs (the test ends it, with [`RedisServer::unpause`]
/// or a kill; a failing test's server is killed on drop).
pub const PAUSE: Duration = Duration::from_secs(3600);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The environment variable that names the server binary the tests start: a name looked up on
/// the `PATH` (`valkey-server`), or an absolute path (`scripts/valkey` prints one). A relative
/// path is taken from the test's working directory, which `cargo test` sets to the package's
/// folder. Unset or empty: `redis-server`.
pub const SERVER_VAR: &str = "SEEN_TEST_SERVER";

/// The environment variable that names the command-line client that creates a cluster
/// (`--cluster create`): Valkey's `valkey-cli` goes with `valkey-server`. Unset or empty:
/// `redis-cli`.
pub const CLI_VAR: &str = "SEEN_TEST_CLI";

/// The server binary the tests start: [`SERVER_VAR`]'s value, or `redis-server`.
pub fn server_binary() -> OsString {
    binary(SERVER_VAR, "redis-server")
}

/// The client that creates a cluster: [`CLI_VAR`]'s value, or `redis-cli`.
pub fn cli_binary() -> OsString {
    binary(CLI_VAR, "redis-cli")
}

fn binary(var: &str, default: &str) -> OsString {
    std::env::var_os(var)
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.into())
}

/// The server binary, for messages: its name, and the variable that chose it if one did.
fn server_name() -> String {
    let binary = server_binary();
    match std::env::var_os(SERVER_VAR).filter(|value| !value.is_empty()) {
        Some(_) => format!("{} ({SERVER_VAR})", binary.to_string_lossy()),
        None => binary.to_string_lossy().into_owned(),
    }
}

/// A directory of its own under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty directory whose name holds `what`, this process's id and a counter.
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

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One server ([`server_binary`]) on a Unix socket in its own directory, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    dir: TempDir,
    extra: Vec<String>,
    /// Whether [`stop`](RedisServer::stop) stopped the process (continued before a kill).
    stopped: bool,
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
            stopped: false,
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
        let mut cmd = Command::new(server_binary());
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
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            panic!(
                "cannot start {} ({e}): install redis-server (.ci/run does: apt-get install \
                 redis-server), or name another server in {SERVER_VAR}",
                server_name()
            )
        });
        let url = self.url();
        let log = self.dir.path().join("redis.log");
        if let Err(log) = wait_started(&mut child, || ping(&url), &log) {
            panic!("{} exited at start; log:\n{log}", server_name());
        }
        self.child = Some(child);
    }

    /// The server's log, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Stops the server's process (`kill -STOP`): it keeps its socket and its connections, the
    /// kernel still accepts new ones and takes what clients send, but nothing is answered, as
    /// with a server hung or stalled by its host, until [`resume`](Self::resume). A stopped
    /// server is continued before it is killed (on drop too).
    pub fn stop(&mut self) {
        assert!(self.signal("-STOP"), "kill -STOP the server");
        self.stopped = true;
    }

    /// Continues a server [`stop`](Self::stop) stopped (`kill -CONT`): it answers again, on
    /// the connections it had.
    pub fn resume(&mut self) {
        assert!(self.signal("-CONT"), "kill -CONT the server");
        self.stopped = false;
    }

    /// Sends `signal` (`kill`'s spelling) to the server's process: whether it was sent.
    fn signal(&self, signal: &str) -> bool {
        self.child.as_ref().is_some_and(|child| {
            Command::new("kill")
                .arg(signal)
                .arg(child.id().to_string())
                .status()
                .is_ok_and(|status| status.success())
        })
    }

    /// Kills the server at once (SIGKILL: a crash, nothing saved on the way out).
    pub fn kill(&mut self) {
        if self.stopped {
            // SIGKILL ends a stopped process too; continued first all the same, so that a
            // failed kill leaves nothing stopped.
            self.signal("-CONT");
            self.stopped = false;
        }
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

    /// Holds every client's write commands (`CLIENT PAUSE ... WRITE`, for [`PAUSE`]): reads
    /// still run, a write (a `BITFIELD`, a script that may write, a `DEL`) waits in the server
    /// until [`unpause`](Self::unpause) or a kill. See [`wait_blocked`](Self::wait_blocked).
    pub fn pause_writes(&self) {
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(PAUSE.as_millis() as u64)
            .arg("WRITE")
            .query(&mut self.client())
            .unwrap();
    }

    /// Ends [`pause_writes`](Self::pause_writes): the held commands run, in the order they
    /// arrived.
    pub fn unpause(&self) {
        let _: () = redis::cmd("CLIENT")
            .arg("UNPAUSE")
            .query(&mut self.client())
            .unwrap();
    }

    /// Waits until exactly `n` clients are blocked (`blocked_clients` of `INFO clients`: held
    /// by a pause, or in a blocking command), failing the test after [`START_LIMIT`]. There is
    /// no blocking command for this, so it polls; the condition is the test's own (it paused
    /// the server, the clients' requests are on their way), and the pause outlasts the poll.
    pub fn wait_blocked(&self, n: usize, what: &str) {
        let mut conn = self.client();
        let line = format!("blocked_clients:{n}\r\n");
        let mut info = String::new();
        wait_until(
            || {
                info = redis::cmd("INFO").arg("clients").query(&mut conn).unwrap();
                info.contains(&line)
            },
            what,
        )
        .unwrap_or_else(|e| panic!("{e}; INFO clients:\n{info}"));
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

/// Polls `ready` every 20 ms until it holds; an error saying what it waited for after
/// [`START_LIMIT`]. Only for conditions on a server that no blocking command reports.
fn wait_until(mut ready: impl FnMut() -> bool, what: &str) -> Result<(), String> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > START_LIMIT {
            return Err(format!("gave up waiting for {what} after {START_LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Waits until the server `child` (logging to `log`) accepts connections (`ready`): `Err`
/// with its log if it exited first (a port taken, a bad argument), a panic with its log if it
/// neither answers nor exits within [`START_LIMIT`].
fn wait_started(
    child: &mut Child,
    mut ready: impl FnMut() -> bool,
    log: &Path,
) -> Result<(), String> {
    let read_log = || std::fs::read_to_string(log).unwrap_or_default();
    let mut exited = None;
    let waited = wait_until(
        || match child.try_wait() {
            Ok(Some(status)) => {
                exited = Some(status);
                true
            }
            _ => ready(),
        },
        "the server to accept connections",
    );
    if let Err(e) = waited {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{e}; log:\n{}", read_log());
    }
    match exited {
        Some(status) => Err(format!("({status})\n{}", read_log())),
        None => Ok(()),
    }
}

/// A loopback TCP port that was free a moment ago, and whose cluster bus port (port + 10000)
/// was free too. Another process can take either before the server binds it:
/// [`RedisCluster::start`] then starts that node again on another.
fn free_port() -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if port < 55_000 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// The `process_id` that the server at `url` reports (`INFO server`), if it answers.
fn process_id(url: &str) -> Option<u32> {
    let info: String = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
        .and_then(|mut c| redis::cmd("INFO").arg("server").query(&mut c))
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|id| id.trim().parse().ok())
}

/// A local Redis Cluster of `n` primaries (no replicas) on loopback ports, every slot assigned,
/// killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<(u16, Child)>,
    dir: TempDir,
}

impl RedisCluster {
    /// Starts `n` nodes ([`server_binary`]), assigns every slot with [`cli_binary`]'s
    /// `--cluster create`, and waits until every node reports `cluster_state:ok`.
    pub fn start(n: usize) -> Self {
        // Built node by node, so that a node failing to start kills the ones started before.
        let mut cluster = Self {
            nodes: Vec::new(),
            dir: TempDir::new("cluster"),
        };
        for i in 0..n {
            let node = Self::start_node(&cluster.dir.path().join(format!("node{i}")));
            cluster.nodes.push(node);
        }
        // Assign the slots: redis-cli ships with the server (package redis-tools; Valkey's
        // valkey-cli in valkey-tools).
        let cli = cli_binary();
        let out = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(cluster.nodes.iter().map(|(p, _)| format!("127.0.0.1:{p}")))
            .arg("--cluster-replicas")
            .arg("0")
            .arg("--cluster-yes")
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} ({e}): installed with redis-server, or name another in \
                     {CLI_VAR}",
                    cli.to_string_lossy()
                )
            });
        assert!(
            out.status.success(),
            "{} --cluster create failed:\n{}{}",
            cli.to_string_lossy(),
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
                "the cluster to be ok on every node",
            )
            .unwrap_or_else(|e| panic!("{e}; logs:\n{}", cluster.log()));
        }
        cluster
    }

    /// One node in `node_dir`, on a port free a moment before. If another process took the
    /// port (or its bus port) in between, the server exits saying "Address already in use":
    /// the node starts again, from an empty directory, on another port. A node counts as
    /// started when the server on its port is this one (its `process_id`), not merely one.
    fn start_node(node_dir: &Path) -> (u16, Child) {
        loop {
            let _ = std::fs::remove_dir_all(node_dir);
            std::fs::create_dir_all(node_dir).unwrap();
            let port = free_port();
            let log = node_dir.join("redis.log");
            let mut child = Command::new(server_binary())
                .arg("--port")
                .arg(port.to_string())
                .arg("--bind")
                .arg("127.0.0.1")
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg(node_dir.join("nodes.conf"))
                .arg("--dir")
                .arg(node_dir)
                .arg("--save")
                .arg("")
                .arg("--appendonly")
                .arg("no")
                .arg("--logfile")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {} ({e})", server_name()));
            let url = format!("redis://127.0.0.1:{port}");
            let id = child.id();
            match wait_started(&mut child, || process_id(&url) == Some(id), &log) {
                Ok(()) => return (port, child),
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("a cluster node exited at start {log}"),
            }
        }
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

/// Worker processes, killed on drop: a test that fails while they run leaves none behind
/// (one blocked on a start token, for instance).
#[derive(Debug)]
pub struct Workers(Vec<Child>);

impl Workers {
    /// Spawns each of `commands` (see [`worker`]).
    pub fn spawn(commands: impl IntoIterator<Item = Command>) -> Self {
        let mut workers = Self(Vec::new());
        for mut cmd in commands {
            workers
                .0
                .push(cmd.spawn().expect("the test binary starts again"));
        }
        workers
    }

    /// How many workers are left (not yet waited for by [`outputs`](Self::outputs)).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no worker is left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Worker `i`, to take its pipes.
    pub fn child(&mut self, i: usize) -> &mut Child {
        &mut self.0[i]
    }

    /// Kills worker `i` at once (SIGKILL: it stops wherever it is, as in a crash) and waits
    /// for it; its exit status.
    pub fn kill(&mut self, i: usize) -> ExitStatus {
        let _ = self.0[i].kill();
        self.0[i].wait().unwrap()
    }

    /// Waits for each worker to exit, in order: its exit status and output.
    pub fn outputs(mut self) -> Vec<Output> {
        let mut outputs = Vec::new();
        while !self.0.is_empty() {
            outputs.push(self.0.remove(0).wait_with_output().unwrap());
        }
        outputs
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A worker's side of a start signal: says it is ready (a token on the list `{key}:ready`),
/// then blocks for its start token (`BLPOP {key}:go 0`, no timeout of its own: the parent owns
/// the deadline, and kills the worker if it is not started).
pub fn ready_then_wait_for_go(conn: &mut redis::Connection, key: &str) {
    let _: u64 = redis::cmd("RPUSH")
        .arg(format!("{key}:ready"))
        .arg(1)
        .query(conn)
        .unwrap();
    let _: (String, String) = redis::cmd("BLPOP")
        .arg(format!("{key}:go"))
        .arg(0)
        .query(conn)
        .unwrap();
}

/// The parent's side of a start signal for `workers` processes running
/// [`ready_then_wait_for_go`] on `key` against `server`: takes one ready token per worker (each
/// `BLPOP` waiting at most [`START_LIMIT`]: failing the test, whose [`Workers`] are then
/// killed), waits until every worker is parked in its `BLPOP` for a start token, then pushes
/// one start token per worker in one command: the server hands them to the parked workers in
/// one pass, so that they start together.
pub fn start_when_ready(server: &RedisServer, key: &str, workers: usize) {
    let mut conn = server.client();
    for ready in 0..workers {
        let token: Option<(String, String)> = redis::cmd("BLPOP")
            .arg(format!("{key}:ready"))
            .arg(START_LIMIT.as_secs())
            .query(&mut conn)
            .unwrap();
        assert!(
            token.is_some(),
            "{ready} of {workers} workers ready after {START_LIMIT:?}"
        );
    }
    server.wait_blocked(workers, "every worker to wait for its start token");
    let _: u64 = redis::cmd("RPUSH")
        .arg(format!("{key}:go"))
        .arg(vec![1; workers])
        .query(&mut conn)
        .unwrap();
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

/// The server's `TIME` on `conn`, in milliseconds (rounded down, as the server's own expiry
/// clock).
pub fn server_millis(conn: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    secs * 1000 + micros / 1000
}

/// Waits (up to a minute) until the server's clock on `conn` is past `millis`.
pub fn wait_past(conn: &mut redis::Connection, millis: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while server_millis(conn) <= millis {
        assert!(
            Instant::now() < deadline,
            "the server's clock never passed {millis}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
