//! [`Server`]: where the shared structures live, and how requests reach it. Every structure
//! sends its commands through [`Server::run`] (blocking) or [`Server::run_async`] (tokio), one
//! [`Batch`] at a time: the commands of a batch are pipelined, so a batch costs one round trip
//! per shard, never one per command.
//!
//! There is one driver of requests, async ([`Server::request`]): the blocking API runs the
//! same future to completion on the calling thread ([`Server::block_on`]), its sockets and
//! timers driven by a small runtime of the server's own. A request's deadline is the crate's
//! (`tokio::time::timeout` around the connect and the round trip), not the client's: redis-rs's
//! blocking pipeline read waits the whole timeout once per reply still missing, so a stalled
//! server held a call of 100 ids on 16 shards for 33 s with a timeout of 1 s.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::{Client, Value};
use tokio::time::Instant;

use crate::Error;

mod batch;
mod runtime;

pub(crate) use batch::Batch;
use runtime::Driver;

/// The default time a request may wait for its reply before it fails with
/// [`Error::Connection`] (whose outcome is unknown): long enough for a batch of a million
/// items, short enough that a server that stopped answering does not hang a service.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Which API a request comes from, so that it takes that API's connection: the blocking API's,
/// made and driven on the server's own runtime, or the tokio API's, made in the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// The blocking methods ([`Server::block_on`]).
    Blocking,
    /// The `_async` methods.
    Async,
}

/// A Redis or Valkey deployment: one server (`redis://host:port`, `unix:///path`) or a
/// cluster. Cheap to share: every structure opened on it keeps a reference.
///
/// It keeps two multiplexed connections, each shared by every caller of its kind: one for
/// the blocking API, made and driven by a small tokio runtime of the server's own (one
/// thread, started by the first blocking call), and one for the `_async` API, made in the
/// caller's runtime. The blocking API runs on the calling thread and works from any thread,
/// also from inside a tokio runtime (where it blocks that thread, as any blocking call does).
///
/// # Timeouts
///
/// Every request (one round trip: a batch's pipeline, or on a cluster one pipeline per key,
/// with the connect before it when a connection is opened) that has no complete reply within
/// the timeout ([`DEFAULT_TIMEOUT`], or [`ServerBuilder::timeout`]) fails with
/// [`Error::Connection`]: its outcome is unknown. A call made of several requests (a lookup
/// and then a write, the server's time and then an insert) stops at the first that fails, so
/// it returns at most one timeout after the server stopped answering, whatever the size of its
/// batch. [`open`](ServerBuilder::open) counts too: its connect and its first request are
/// bounded by the same timeout.
///
/// A connection that fails or times out is dropped, and the next request opens a new one: a
/// restarted or resumed server is reached again without any action from the caller, and no
/// late reply to a timed-out request is ever read as another's. A request is never sent twice
/// by the client: an insert that ran twice would answer "not new" to everyone.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
///
/// let server = seen_redis::Server::open("redis://127.0.0.1:6379")?;
/// let quick = seen_redis::Server::builder("redis://127.0.0.1:6379")
///     .timeout(Duration::from_secs(1))
///     .open()?;
/// let cluster = seen_redis::Server::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])?;
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
}

/// What [`Server::builder`] and [`Server::cluster_builder`] return: where the server is, and
/// how long a request may wait ([`timeout`](Self::timeout)); [`open`](Self::open) connects.
#[derive(Clone, Debug)]
#[must_use]
pub struct ServerBuilder {
    nodes: Nodes,
    timeout: Duration,
}

#[derive(Clone, Debug)]
enum Nodes {
    Single(String),
    Cluster(Vec<String>),
}

/// Field order is drop order: the connections go before the runtime that drives the blocking
/// one.
struct Inner {
    target: Target,
    timeout: Duration,
    /// The `_async` API's connection, made in the caller's runtime.
    shared: Mutex<Slot>,
    /// The blocking API's connection, made in [`Inner::driver`]'s runtime.
    blocking: Mutex<Slot>,
    /// The runtime that drives the blocking API's connection and timers (started by the first
    /// blocking call).
    driver: OnceLock<Driver>,
    /// The fuzz targets' and unit tests' server: canned replies in place of a connection
    /// ([`Server::request`], so both APIs).
    #[cfg(any(test, fuzzing))]
    replay: Option<crate::fuzzing::Replay>,
}

enum Target {
    Single(Client),
    Cluster(Box<ClusterClient>),
}

/// A connection, and how many were opened in its slot before it (so that a request that
/// failed drops its own connection, never a newer one another request opened meanwhile).
#[derive(Default)]
struct Slot {
    conn: Option<(u64, AsyncConnection)>,
    /// Alive while the runtime the connection was made in runs (see [`Server::connection`]).
    runtime: Weak<()>,
    opened: u64,
}

#[derive(Clone)]
enum AsyncConnection {
    /// Connects lazily, in the first request (so under its deadline); never sends a request
    /// twice (it only reconnects, and [`Server::connection`] sets no connect retries).
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = match &self.inner.target {
            Target::Single(client) => format!("{:?}", client.get_connection_info().addr()),
            Target::Cluster(..) => "cluster".to_owned(),
        };
        f.debug_struct("Server")
            .field("target", &target)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// How long a request may wait for its reply, `open`'s connect and check included
    /// ([`DEFAULT_TIMEOUT`] unless set); see [`Server`]'s "Timeouts". A zero timeout fails
    /// every request.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Connects, and checks that the server answers (a cluster: that a node gives the slot
    /// map), within the timeout.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] if a URL does not parse or the server does not answer within the
    /// timeout.
    pub fn open(&self) -> Result<Server, Error> {
        let target = match &self.nodes {
            Nodes::Single(url) => {
                Target::Single(Client::open(url.as_str()).map_err(|e| Error::from_redis(url, e))?)
            }
            Nodes::Cluster(nodes) => {
                Target::Cluster(Box::new(cluster_client(nodes, self.timeout)?))
            }
        };
        let server = Server::with_target(target, self.timeout);
        server.check()?;
        Ok(server)
    }
}

impl Server {
    /// A single server, by URL: `redis://[user:password@]host:port[/db]`, `rediss://` for TLS
    /// is not built in, `unix:///path/to/socket`. Connects once to check that it answers.
    /// The same as [`Server::builder(url).open()`](Self::builder), with [`DEFAULT_TIMEOUT`].
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] if the URL does not parse or the server does not answer.
    pub fn open(url: &str) -> Result<Self, Error> {
        Self::builder(url).open()
    }

    /// A single server, by URL (as [`open`](Self::open)), with a timeout of one's choice:
    /// `Server::builder(url).timeout(Duration::from_secs(1)).open()`.
    pub fn builder(url: &str) -> ServerBuilder {
        ServerBuilder {
            nodes: Nodes::Single(url.to_owned()),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A Redis Cluster, by the URLs of some of its nodes (the client learns the rest). Every
    /// structure keeps what one command or script touches in one slot (hash tags) and spreads
    /// its shards over the slots. The same as
    /// [`Server::cluster_builder(nodes).open()`](Self::cluster_builder), with
    /// [`DEFAULT_TIMEOUT`].
    ///
    /// The client does not send a request again by itself: after an input/output error the
    /// request may have run, and the caller gets [`Error::Connection`]. While slots move
    /// (resharding, failover) a batch can fail with [`Error::Server`] (`MOVED`, `ASK`,
    /// `TRYAGAIN`, `CLUSTERDOWN`): no item of it was answered, and a retry, on a connection
    /// that reads the new slot map, is safe.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] if no node answers.
    pub fn cluster<I, S>(nodes: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::cluster_builder(nodes).open()
    }

    /// A Redis Cluster (as [`cluster`](Self::cluster)), with a timeout of one's choice.
    pub fn cluster_builder<I, S>(nodes: I) -> ServerBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ServerBuilder {
            nodes: Nodes::Cluster(nodes.into_iter().map(|s| s.as_ref().to_owned()).collect()),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    fn with_target(target: Target, timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                target,
                timeout,
                shared: Mutex::default(),
                blocking: Mutex::default(),
                driver: OnceLock::new(),
                #[cfg(any(test, fuzzing))]
                replay: None,
            }),
        }
    }

    /// A server that connects nowhere and answers each request with the next of `replay`'s
    /// replies, through the same checks as a real server's ([`Server::answered`]).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn replaying(replay: crate::fuzzing::Replay) -> Self {
        let client = Client::open("redis://127.0.0.1:1/").expect("a well-formed URL");
        let mut server = Self::with_target(Target::Single(client), DEFAULT_TIMEOUT);
        Arc::get_mut(&mut server.inner)
            .expect("a new server is not shared")
            .replay = Some(replay);
        server
    }

    #[cfg(any(test, fuzzing))]
    pub(crate) fn replay(&self) -> Option<&crate::fuzzing::Replay> {
        self.inner.replay.as_ref()
    }

    /// Whether requests are answered by a replay (no connection, no runtime needed).
    pub(crate) fn replays(&self) -> bool {
        #[cfg(any(test, fuzzing))]
        if self.inner.replay.is_some() {
            return true;
        }
        false
    }

    fn check(&self) -> Result<(), Error> {
        if self.is_cluster() {
            // A cluster pipeline routes by key and refuses `PING`: opening a connection (which
            // reads the slot map from a node) is the check.
            let deadline = Instant::now() + self.inner.timeout;
            return self.block_on(async {
                self.in_runtime(&self.inner.blocking, "(cluster)")?;
                self.connection(&self.inner.blocking, "(cluster)", deadline)
                    .await
                    .map(drop)
            });
        }
        let mut batch = Batch::default();
        let key = batch.key("(PING)");
        // Not `PING`: the cluster client refuses it in a pipeline. `EXISTS` of a key that is
        // never written answers on any server and routes in a cluster.
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg("seen:(ping)");
        batch.push(key, cmd);
        self.run(&batch).map(drop)
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.inner.target, Target::Cluster(..))
    }

    /// How long a request may wait for its reply (see "Timeouts" above).
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Runs `batch`, blocking: [`request`](Self::request) on the blocking API's connection,
    /// driven to its end on the calling thread. Returns one reply per command.
    pub(crate) fn run(&self, batch: &Batch) -> Result<Vec<Value>, Error> {
        self.block_on(self.send(Via::Blocking, batch))
    }

    /// Runs `batch` on the connection of `via`'s API: the one driver of every structure's
    /// protocol, which the blocking API drives with [`block_on`](Self::block_on) and the async
    /// API awaits.
    pub(crate) async fn send(&self, via: Via, batch: &Batch) -> Result<Vec<Value>, Error> {
        match via {
            Via::Blocking => self.request(&self.inner.blocking, batch).await,
            Via::Async => self.request(&self.inner.shared, batch).await,
        }
    }

    /// The connection of `slot`, opened if there is none (a single server's lazily: its
    /// connect is part of the first request; a cluster's here, which reads the slot map, by
    /// `deadline`), and its number in the slot. The slot is locked only to look or to put:
    /// never while connecting, so that a request that failed drops its connection at once.
    async fn connection(
        &self,
        slot: &Mutex<Slot>,
        key: &str,
        deadline: Instant,
    ) -> Result<(u64, AsyncConnection), Error> {
        let lock = || slot.lock().unwrap_or_else(PoisonError::into_inner);
        {
            let mut slot = lock();
            if slot.runtime.strong_count() == 0 {
                // The runtime whose task drove this connection has ended (an `_async` call
                // from a second runtime after the first one's end): it would fail the next
                // request with a broken pipe, although nothing was sent. A new one instead.
                slot.conn = None;
            }
            if let Some(conn) = &slot.conn {
                return Ok(conn.clone());
            }
        }
        let timeout = self.inner.timeout;
        let conn = match &self.inner.target {
            Target::Single(client) => {
                // No connect retries: a server that refuses fails the request at once (the
                // next request connects again), rather than after the backoff's sleeps.
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(0);
                AsyncConnection::Single(
                    ConnectionManager::new_lazy_with_config(client.clone(), config)
                        .map_err(|e| Error::from_redis(key, e))?,
                )
            }
            Target::Cluster(client) => {
                match tokio::time::timeout_at(deadline, client.get_async_connection()).await {
                    Ok(conn) => AsyncConnection::Cluster(conn.map_err(|e| self.failed(key, e))?),
                    Err(_) => return Err(self.timed_out(key)),
                }
            }
        };
        let mut slot = lock();
        // Another request may have put one meanwhile (a cluster's connects can race): the
        // first put is the slot's, the others are dropped.
        if let Some(conn) = &slot.conn {
            return Ok(conn.clone());
        }
        slot.opened += 1;
        slot.conn = Some((slot.opened, conn.clone()));
        // A task of the current runtime holds `alive` until the runtime ends (its tasks are
        // dropped then): the slot's weak handle then says the connection is dead.
        let alive = Arc::new(());
        slot.runtime = Arc::downgrade(&alive);
        tokio::spawn(async move {
            let _alive = alive;
            std::future::pending::<()>().await;
        });
        Ok((slot.opened, conn))
    }

    /// Drops connection `number` of `slot` (after it failed), unless another replaced it.
    fn drop_connection(&self, slot: &Mutex<Slot>, number: u64) {
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.conn.as_ref().is_some_and(|(n, _)| *n == number) {
            slot.conn = None;
        }
    }

    /// The error of a request about `key` that failed with `err`: the client's own timeout
    /// (set as the crate's, which it may beat by a hair) says what the crate's says.
    fn failed(&self, key: &str, err: redis::RedisError) -> Error {
        if err.is_timeout() {
            return self.timed_out(key);
        }
        Error::from_redis(key, err)
    }

    /// The error of a request about `key` that had no reply within the timeout.
    fn timed_out(&self, key: &str) -> Error {
        let why = std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply within {:?}", self.inner.timeout),
        );
        Error::from_redis(key, why.into())
    }

    /// Runs `batch` on the connection of `slot` (opened if there is none), the one driver of
    /// both APIs: one pipeline (a cluster: one per key, each key's commands going to its node,
    /// one after the other), each round trip bounded by the timeout with the connect before it;
    /// then the scripts that answered `NOSCRIPT` again as `EVAL` ([`answered`](Self::answered)),
    /// and the replies checked. A connection that failed or timed out is dropped: the next
    /// request opens a new one.
    async fn request(&self, slot: &Mutex<Slot>, batch: &Batch) -> Result<Vec<Value>, Error> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        #[cfg(any(test, fuzzing))]
        if let Some(replay) = &self.inner.replay {
            let replies = replay.next(batch)?;
            let replies = self.answered(slot, batch, replies).await;
            if let Ok(replies) = &replies {
                replay.log(batch, replies);
            }
            return replies;
        }
        let key = batch.first_key();
        self.in_runtime(slot, key)?;
        let deadline = Instant::now() + self.inner.timeout;
        let (number, conn) = self.connection(slot, key, deadline).await?;
        let replies = match conn {
            AsyncConnection::Single(mut conn) => {
                let pipe = batch.pipeline();
                let query = pipe.query_async::<Vec<Value>>(&mut conn);
                match tokio::time::timeout_at(deadline, query).await {
                    Ok(replies) => replies.map_err(|e| self.failed(key, e)),
                    Err(_) => Err(self.timed_out(key)),
                }
            }
            AsyncConnection::Cluster(mut conn) => {
                self.query_cluster(&mut conn, batch, deadline).await
            }
        };
        match replies {
            Ok(replies) => self.answered(slot, batch, replies).await,
            Err(err) => {
                self.drop_connection(slot, number);
                Err(err)
            }
        }
    }

    /// `batch` on a cluster: the async cluster client routes a pipeline to one node, so each
    /// key's commands go as a pipeline of their own, one after the other, the first by
    /// `deadline` and each next within the timeout; the replies put back in order.
    async fn query_cluster(
        &self,
        conn: &mut redis::cluster_async::ClusterConnection,
        batch: &Batch,
        mut deadline: Instant,
    ) -> Result<Vec<Value>, Error> {
        let mut replies = vec![Value::Nil; batch.len()];
        let mut cmds: Vec<Option<redis::Cmd>> =
            batch.cluster_cmds().into_iter().map(Some).collect();
        for key in 0..batch.names.len() {
            let mut pipe = redis::Pipeline::new();
            let mut at = Vec::new();
            for (i, cmd) in cmds.iter_mut().enumerate() {
                if batch.keys[i] == key
                    && let Some(cmd) = cmd.take()
                {
                    pipe.add_command(cmd);
                    at.push(i);
                }
            }
            if at.is_empty() {
                continue;
            }
            pipe.ignore_errors();
            let name = &batch.names[key];
            let got = match tokio::time::timeout_at(deadline, pipe.query_async(conn)).await {
                Ok(got) => got.map_err(|e| self.failed(name, e))?,
                Err(_) => return Err(self.timed_out(name)),
            };
            let got: Vec<Value> = got;
            if got.len() != at.len() {
                return Err(Error::corrupt(
                    name,
                    format!("{} replies to {} commands", got.len(), at.len()),
                ));
            }
            for (i, value) in at.into_iter().zip(got) {
                replies[i] = value;
            }
            deadline = Instant::now() + self.inner.timeout;
        }
        Ok(replies)
    }

    /// The replies to `batch`, its scripts that answered `NOSCRIPT` sent again as `EVAL` (a
    /// request of their own, on `slot`), checked ([`Batch::check`]).
    async fn answered(
        &self,
        slot: &Mutex<Slot>,
        batch: &Batch,
        mut replies: Vec<Value>,
    ) -> Result<Vec<Value>, Error> {
        if replies.len() == batch.len()
            && let Some((again, at)) = batch.noscript(&replies)
        {
            let again = Box::pin(self.request(slot, &again)).await?;
            for (i, reply) in at.into_iter().zip(again) {
                replies[i] = reply;
            }
        }
        batch.check(replies)
    }
}

/// A cluster client for `nodes` whose requests wait at most `timeout`.
///
/// `retries(0)`: the client would otherwise send a request again after an input/output error,
/// when it may have run, and an insert that ran twice answers "not new" to everyone: the caller
/// must see the unknown outcome instead. With no retries a redirection (`MOVED`, `ASK`, while
/// slots move) fails the request too; the connection is then dropped, and the caller's retry
/// opens one that reads the new slot map.
fn cluster_client(nodes: &[String], timeout: Duration) -> Result<ClusterClient, Error> {
    let first = nodes.first().cloned().unwrap_or_default();
    ClusterClient::builder(nodes.to_vec())
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(0)
        .build()
        .map_err(|e| Error::from_redis(&first, e))
}
