//! [`Server`]: where the shared structures live, and how requests reach it. Every structure
//! sends its commands through [`Server::run`] (blocking) or [`Server::run_async`] (tokio), one
//! [`Batch`] at a time: the commands of a batch are pipelined, so a batch costs one round trip
//! per shard, never one per command.

use std::sync::Mutex;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{Client, Cmd, Connection, Value};

use crate::Error;

/// The default time a request may wait for its reply before it fails with
/// [`Error::Connection`] (whose outcome is unknown): long enough for a batch of a million
/// items, short enough that a server that stopped answering does not hang a service.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A Redis or Valkey deployment: one server (`redis://host:port`, `unix:///path`) or a
/// cluster. Cheap to share: every structure opened on it keeps a reference; it keeps a few
/// blocking connections for reuse (one per thread that is using it at the moment) and one
/// multiplexed tokio connection.
///
/// A connection that fails is dropped, and the next request opens a new one: a restarted
/// server is reached again without any action from the caller.
///
/// # Examples
///
/// ```no_run
/// let server = seen_redis::Server::open("redis://127.0.0.1:6379")?;
/// let cluster = seen_redis::Server::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])?;
/// # Ok::<(), seen_redis::Error>(())
/// ```
#[derive(Clone)]
pub struct Server {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    target: Target,
    timeout: Duration,
    idle: Mutex<Vec<SyncConnection>>,
    shared: tokio::sync::Mutex<Option<AsyncConnection>>,
    /// The fuzz targets' and unit tests' server: canned replies in place of a connection
    /// ([`Server::run`]; the blocking methods only).
    #[cfg(any(test, fuzzing))]
    replay: Option<crate::fuzzing::Replay>,
}

enum Target {
    Single(Client),
    /// The client, and the nodes it was built from (to build it again with another timeout).
    Cluster(Box<ClusterClient>, Vec<String>),
}

enum SyncConnection {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
}

#[derive(Clone)]
enum AsyncConnection {
    Single(redis::aio::MultiplexedConnection),
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

/// The commands of one request, each with the key it is about (for errors), pipelined in
/// order. Commands on one key run in the order given.
#[derive(Default)]
pub(crate) struct Batch {
    cmds: Vec<Cmd>,
    keys: Vec<usize>,
    names: Vec<String>,
    /// Each name's index in `names`.
    index: std::collections::HashMap<String, usize>,
    /// Per script pushed by [`push_script`](Batch::push_script): its command's index and the
    /// same invocation as `EVAL` (the script's text), for a server that answers `NOSCRIPT`.
    evals: Vec<(usize, Cmd)>,
    /// Per command, for a `BITFIELD` pushed by [`push_fields`](Batch::push_fields): the
    /// integers its reply must hold.
    fields: Vec<Option<usize>>,
}

impl Batch {
    /// Names `key` once; the returned index is what [`push`](Self::push) takes.
    pub(crate) fn key(&mut self, key: &str) -> usize {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        self.names.push(key.to_owned());
        self.index.insert(key.to_owned(), self.names.len() - 1);
        self.names.len() - 1
    }

    /// Appends `cmd`, a command on the key [`key`](Self::key) returned.
    pub(crate) fn push(&mut self, key: usize, cmd: Cmd) {
        self.cmds.push(cmd);
        self.keys.push(key);
        self.fields.push(None);
    }

    /// Appends `cmd`, a `BITFIELD` or `BITFIELD_RO` on the key [`key`](Self::key) returned
    /// with `fields` subcommands that answer (`GET`, `SET`, `INCRBY`): [`check`](Self::check)
    /// refuses a reply that is not that many integers, so that a structure reads its values
    /// only from a reply of the right shape (one value more or less is another command's reply,
    /// or a broken server's, and no answer may come from it).
    pub(crate) fn push_fields(&mut self, key: usize, cmd: Cmd, fields: usize) {
        self.push(key, cmd);
        self.fields[self.cmds.len() - 1] = Some(fields);
    }

    pub(crate) fn len(&self) -> usize {
        self.cmds.len()
    }

    /// Appends an invocation of `script` on `keys` (all in one slot;
    /// the first is the one [`key`](Self::key) returned as `key`) with `args`, as `EVALSHA`. A
    /// server that does not have the script cached (restarted, `SCRIPT FLUSH`, a failover)
    /// answers `NOSCRIPT` without running it; [`Server::run`] then sends that command again as
    /// `EVAL`, which runs it and caches it. A cluster gets the `EVAL` at once: the cluster
    /// client's blocking pipeline cannot return the other commands' replies around an error
    /// reply, so a `NOSCRIPT` there would leave the batch's other scripts unanswered.
    pub(crate) fn push_script(
        &mut self,
        key: usize,
        script: &crate::script::Lua,
        keys: &[&str],
        args: &[Vec<u8>],
    ) {
        let invocation = |name: &str, body: &str| {
            let mut cmd = redis::cmd(name);
            cmd.arg(body).arg(keys.len());
            for key in keys {
                cmd.arg(*key);
            }
            for arg in args {
                cmd.arg(arg.as_slice());
            }
            cmd
        };
        self.evals
            .push((self.cmds.len(), invocation("EVAL", script.source())));
        self.push(key, invocation("EVALSHA", script.sha()));
    }

    /// Command `i` as a cluster sends it: a script as `EVAL`, anything else as pushed.
    fn cluster_cmd(&self, i: usize) -> &Cmd {
        match self.evals.binary_search_by_key(&i, |(at, _)| *at) {
            Ok(j) => &self.evals[j].1,
            Err(_) => &self.cmds[i],
        }
    }

    /// The scripts of `replies` answered `NOSCRIPT`, as a batch of their `EVAL`s, and where
    /// their replies go; `None` if there is none.
    fn noscript(&self, replies: &[Value]) -> Option<(Batch, Vec<usize>)> {
        let mut again = Batch::default();
        let mut at = Vec::new();
        for (i, eval) in &self.evals {
            if let Some(Value::ServerError(err)) = replies.get(*i)
                && err.code() == "NOSCRIPT"
            {
                let k = again.key(&self.names[self.keys[*i]]);
                again.push(k, eval.clone());
                at.push(*i);
            }
        }
        (!at.is_empty()).then_some((again, at))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    /// The commands, in order.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn commands(&self) -> &[Cmd] {
        &self.cmds
    }

    pub(crate) fn first_key(&self) -> &str {
        self.keys
            .first()
            .map_or("(no key)", |&i| self.names[i].as_str())
    }

    /// The replies, checked: one per command, none an error reply, each `BITFIELD`'s as many
    /// integers as it has fields ([`push_fields`](Self::push_fields)).
    fn check(&self, replies: Vec<Value>) -> Result<Vec<Value>, Error> {
        if replies.len() != self.cmds.len() {
            return Err(Error::corrupt(
                self.first_key(),
                format!("{} replies to {} commands", replies.len(), self.cmds.len()),
            ));
        }
        for (i, reply) in replies.iter().enumerate() {
            if let Value::ServerError(err) = reply {
                return Err(Error::from_reply(&self.names[self.keys[i]], err));
            }
        }
        for (i, reply) in replies.iter().enumerate() {
            let Some(fields) = self.fields[i] else {
                continue;
            };
            match reply {
                Value::Array(values)
                    if values.len() == fields
                        && values.iter().all(|v| matches!(v, Value::Int(_))) => {}
                other => {
                    return Err(Error::corrupt(
                        &self.names[self.keys[i]],
                        format!("BITFIELD of {fields} fields answered {other:?}"),
                    ));
                }
            }
        }
        Ok(replies)
    }

    fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::Pipeline::with_capacity(self.cmds.len());
        for cmd in &self.cmds {
            pipe.add_command(cmd.clone());
        }
        pipe.ignore_errors();
        pipe
    }
}

impl Server {
    /// A single server, by URL: `redis://[user:password@]host:port[/db]`, `rediss://` for TLS
    /// is not built in, `unix:///path/to/socket`. Connects once to check that it answers.
    ///
    /// # Errors
    ///
    /// [`Error::Connection`] if the URL does not parse or the server does not answer.
    pub fn open(url: &str) -> Result<Self, Error> {
        let client = Client::open(url).map_err(|e| Error::from_redis(url, e))?;
        let server = Self::with_target(Target::Single(client));
        server.check()?;
        Ok(server)
    }

    /// A Redis Cluster, by the URLs of some of its nodes (the client learns the rest). Every
    /// structure keeps what one command or script touches in one slot (hash tags) and spreads
    /// its shards over the slots.
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
        let nodes: Vec<String> = nodes.into_iter().map(|s| s.as_ref().to_owned()).collect();
        let client = cluster_client(&nodes, DEFAULT_TIMEOUT)?;
        let server = Self::with_target(Target::Cluster(Box::new(client), nodes));
        server.check()?;
        Ok(server)
    }

    /// How long a request may wait for its reply ([`DEFAULT_TIMEOUT`] unless set). Applies to
    /// connections opened afterwards.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let target = match &self.inner.target {
            Target::Single(client) => Target::Single(client.clone()),
            Target::Cluster(client, nodes) => Target::Cluster(
                Box::new(cluster_client(nodes, timeout).unwrap_or_else(|_| (**client).clone())),
                nodes.clone(),
            ),
        };
        let mut server = Self::with_target(target);
        std::sync::Arc::get_mut(&mut server.inner)
            .expect("a new server is not shared")
            .timeout = timeout;
        server
    }

    fn with_target(target: Target) -> Self {
        Self {
            inner: std::sync::Arc::new(Inner {
                target,
                timeout: DEFAULT_TIMEOUT,
                idle: Mutex::new(Vec::new()),
                shared: tokio::sync::Mutex::new(None),
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
        let mut server = Self::with_target(Target::Single(client));
        std::sync::Arc::get_mut(&mut server.inner)
            .expect("a new server is not shared")
            .replay = Some(replay);
        server
    }

    #[cfg(any(test, fuzzing))]
    pub(crate) fn replay(&self) -> Option<&crate::fuzzing::Replay> {
        self.inner.replay.as_ref()
    }

    fn check(&self) -> Result<(), Error> {
        if self.is_cluster() {
            // A cluster pipeline routes by key and refuses `PING`: opening a connection (which
            // reads the slot map from a node) is the check.
            let conn = self.connect("(cluster)")?;
            self.inner
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(conn);
            return Ok(());
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

    fn connect(&self, key: &str) -> Result<SyncConnection, Error> {
        let err = |e| Error::from_redis(key, e);
        let timeout = self.inner.timeout;
        Ok(match &self.inner.target {
            Target::Single(client) => {
                let conn = client.get_connection_with_timeout(timeout).map_err(err)?;
                conn.set_read_timeout(Some(timeout)).map_err(err)?;
                conn.set_write_timeout(Some(timeout)).map_err(err)?;
                SyncConnection::Single(conn)
            }
            Target::Cluster(client, _) => {
                SyncConnection::Cluster(Box::new(client.get_connection().map_err(err)?))
            }
        })
    }

    /// Runs `batch`, blocking: one pipeline (a cluster splits it by node). Returns one reply
    /// per command.
    pub(crate) fn run(&self, batch: &Batch) -> Result<Vec<Value>, Error> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        #[cfg(any(test, fuzzing))]
        if let Some(replay) = &self.inner.replay {
            let replies = self.answered(batch, replay.next(batch)?);
            if let Ok(replies) = &replies {
                replay.log(batch, replies);
            }
            return replies;
        }
        let idle = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop();
        let mut conn = match idle {
            Some(conn) => conn,
            None => self.connect(batch.first_key())?,
        };
        let replies = match &mut conn {
            SyncConnection::Single(conn) => batch.pipeline().query::<Vec<Value>>(conn),
            // The cluster pipeline refuses commands it cannot route in general (`RENAME`,
            // `PING`, ...): a batch of one command runs as that command, routed by its key
            // (a script as `EVAL`, as in a pipeline: its `NOSCRIPT` would come back as an
            // error, not as a reply to send again).
            SyncConnection::Cluster(conn) if batch.len() == 1 => batch
                .cluster_cmd(0)
                .query::<Value>(&mut **conn)
                .map(|reply| vec![reply]),
            SyncConnection::Cluster(conn) => {
                let mut pipe = redis::cluster::ClusterPipeline::with_capacity(batch.len());
                for i in 0..batch.len() {
                    pipe.add_command(batch.cluster_cmd(i).clone());
                }
                pipe.query::<Vec<Value>>(conn)
            }
        };
        match replies {
            Ok(replies) => {
                // A connection whose replies all arrived is in step: keep it.
                self.inner
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(conn);
                self.answered(batch, replies)
            }
            // Dropped: after a failure mid-pipeline, replies still in flight would be read as
            // the next request's.
            Err(err) => {
                let err = Error::from_redis(batch.first_key(), err);
                if err.is_unknown_outcome() {
                    // The server is gone or restarted: the idle connections are to it too, and
                    // each would fail one more request.
                    self.inner
                        .idle
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clear();
                }
                Err(err)
            }
        }
    }

    /// The replies to `batch`, its scripts that answered `NOSCRIPT` sent again as `EVAL`,
    /// checked ([`Batch::check`]).
    fn answered(&self, batch: &Batch, mut replies: Vec<Value>) -> Result<Vec<Value>, Error> {
        if replies.len() == batch.len()
            && let Some((again, at)) = batch.noscript(&replies)
        {
            for (i, reply) in at.into_iter().zip(self.run(&again)?) {
                replies[i] = reply;
            }
        }
        batch.check(replies)
    }

    async fn connect_async(&self, key: &str) -> Result<AsyncConnection, Error> {
        let err = |e| Error::from_redis(key, e);
        let timeout = self.inner.timeout;
        Ok(match &self.inner.target {
            Target::Single(client) => {
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                AsyncConnection::Single(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .map_err(err)?,
                )
            }
            Target::Cluster(client, _) => {
                AsyncConnection::Cluster(client.get_async_connection().await.map_err(err)?)
            }
        })
    }

    /// Runs `batch` on the tokio connection, which every task shares (multiplexed). A cluster
    /// gets one pipeline per key (each key's commands go to its node), one after the other.
    pub(crate) async fn run_async(&self, batch: &Batch) -> Result<Vec<Value>, Error> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let conn = {
            let mut shared = self.inner.shared.lock().await;
            match &*shared {
                Some(conn) => conn.clone(),
                None => {
                    let conn = self.connect_async(batch.first_key()).await?;
                    *shared = Some(conn.clone());
                    conn
                }
            }
        };
        let replies = match conn {
            AsyncConnection::Single(mut conn) => {
                batch.pipeline().query_async::<Vec<Value>>(&mut conn).await
            }
            AsyncConnection::Cluster(mut conn) => {
                // The async cluster client routes a pipeline to one node: send each key's
                // commands as a pipeline of their own, and put the replies back in order.
                let mut replies = vec![Value::Nil; batch.len()];
                let mut result = Ok(());
                for key in 0..batch.names.len() {
                    let mut pipe = redis::Pipeline::new();
                    let mut at = Vec::new();
                    for i in 0..batch.len() {
                        if batch.keys[i] == key {
                            pipe.add_command(batch.cluster_cmd(i).clone());
                            at.push(i);
                        }
                    }
                    if at.is_empty() {
                        continue;
                    }
                    pipe.ignore_errors();
                    match pipe.query_async::<Vec<Value>>(&mut conn).await {
                        Ok(got) if got.len() == at.len() => {
                            for (i, value) in at.into_iter().zip(got) {
                                replies[i] = value;
                            }
                        }
                        Ok(got) => {
                            return Err(Error::corrupt(
                                &batch.names[key],
                                format!("{} replies to {} commands", got.len(), at.len()),
                            ));
                        }
                        Err(err) => {
                            result = Err(err);
                            break;
                        }
                    }
                }
                result.map(|()| replies)
            }
        };
        match replies {
            Ok(mut replies) => {
                if replies.len() == batch.len()
                    && let Some((again, at)) = batch.noscript(&replies)
                {
                    let again = Box::pin(self.run_async(&again)).await?;
                    for (i, reply) in at.into_iter().zip(again) {
                        replies[i] = reply;
                    }
                }
                batch.check(replies)
            }
            Err(err) => {
                // Open a new connection for the next request (the server may have restarted).
                *self.inner.shared.lock().await = None;
                Err(Error::from_redis(batch.first_key(), err))
            }
        }
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
