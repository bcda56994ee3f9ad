//! A structure's description, stored beside it in `seen:{NAME}:meta`: its kind, its creation
//! id ([`Id`]), whether its creation finished, and every parameter a second process needs to
//! open it and address its bits as the first does.
//!
//! The text is a header line and one `field=value` line per parameter, in a fixed order:
//!
//! ```text
//! seen-redis/3
//! kind=bloom
//! id=9f3c0a6e5d2b8a71
//! state=ready
//! layout=word
//! ...
//! ```
//!
//! A creation reads the server's time (its id: [`Id::ordered`]), then writes the description,
//! `state=creating`, by `SET ... NX GET`: among
//! racing creators exactly one writes it, and every other reads what it wrote in the same
//! command, then opens it or refuses a mismatch, having written nothing. The one that wrote it
//! then creates every shard with its id ([`guard`](crate::guard)), once, and last sets
//! `state=ready` (a script that checks the description is still its own). Openers wait for
//! `ready` (up to the server's timeout: [`Error::Unfinished`]), so no process uses a structure
//! whose shards are not all there; and since nothing but the creator's one request ever creates
//! a shard, a shard lost after its creation is never made again: it stays `Missing`.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::Value;

use crate::guard::Id;
use crate::script::Lua;
use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// Format 3: a creation id in the description and every guard. Format 1 had no guard (a lost
/// shard could come back as an empty one), format 2 no id (a structure created again under
/// the name answered its old handles); both are refused.
const HEADER: &str = "seen-redis/3";

/// How often an opener reads a description that is being created.
const POLL: Duration = Duration::from_millis(20);

/// A creator's last step: `state=creating` to `state=ready`, if the description is still its
/// own. `KEYS[1]` the description, `ARGV[1]` its text as created, `ARGV[2]` as ready. 1 if
/// done, 0 if the description is gone or another's.
static FINISH: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "finish creation",
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1",
    )
});

/// A failed creator's undoing: the description deleted if it is still its own (`ARGV[1]`),
/// so that the name can be created again. 1 if deleted.
static ABANDON: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "abandon creation",
        r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1",
    )
});

/// A destroy's first step: the description deleted if it is of the creation `ARGV[1]`
/// (`\nid=<hex>\n` in it). 1 if deleted, 0 if it is another structure's (nothing deleted), -1
/// if there is none.
static DESTROY: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(
        "destroy",
        r"local d = redis.call('GET', KEYS[1])
if not d then return -1 end
if not string.find(d, ARGV[1], 1, true) then return 0 end
redis.call('DEL', KEYS[1])
return 1",
    )
});

/// A description: the kind, the creation id, whether the creation finished, and the
/// parameters in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) kind: &'static str,
    pub(crate) id: Id,
    pub(crate) ready: bool,
    pub(crate) fields: Vec<(&'static str, String)>,
}

impl Meta {
    /// A description of a new structure: a fresh id, not ready.
    pub(crate) fn new(kind: &'static str) -> Self {
        Self {
            kind,
            id: Id::random(),
            ready: false,
            fields: Vec::new(),
        }
    }

    /// Adds a parameter.
    pub(crate) fn with(mut self, field: &'static str, value: impl ToString) -> Self {
        self.fields.push((field, value.to_string()));
        self
    }

    /// A parameter's value, parsed.
    pub(crate) fn get<T: std::str::FromStr>(&self, name: &str, field: &str) -> Result<T, Error> {
        self.fields
            .iter()
            .find(|(f, _)| *f == field)
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| Error::corrupt(&names::meta(name), format!("no readable field {field}")))
    }

    fn encode(&self) -> String {
        let state = if self.ready { "ready" } else { "creating" };
        let mut text = format!(
            "{HEADER}\nkind={}\nid={}\nstate={state}\n",
            self.kind,
            self.id.to_hex()
        );
        for (field, value) in &self.fields {
            text.push_str(field);
            text.push('=');
            text.push_str(value);
            text.push('\n');
        }
        text
    }

    /// This description, ready.
    fn as_ready(&self) -> Self {
        Self {
            ready: true,
            ..self.clone()
        }
    }

    /// Reads a stored description as `kind`, taking the field names from `like` (whose values
    /// are ignored): a stored description with other fields is refused.
    fn decode(name: &str, bytes: &[u8], like: &Meta) -> Result<Self, Error> {
        let key = names::meta(name);
        let text = std::str::from_utf8(bytes)
            .map_err(|_| Error::corrupt(&key, "a description that is not UTF-8"))?;
        let mut lines = text.lines();
        let header = lines.next();
        if matches!(header, Some("seen-redis/1" | "seen-redis/2")) {
            return Err(Error::corrupt(
                &key,
                "a structure of an earlier version of this crate (whose lost or re-created \
                 shards could answer as empty ones): destroy it and create it again",
            ));
        }
        if header != Some(HEADER) {
            return Err(Error::corrupt(
                &key,
                format!("a description that does not start with {HEADER}"),
            ));
        }
        let kind = lines
            .next()
            .and_then(|l| l.strip_prefix("kind="))
            .unwrap_or("");
        if kind != like.kind {
            return Err(Error::Mismatch {
                name: name.to_owned(),
                field: "kind",
                stored: kind.to_owned(),
                requested: like.kind.to_owned(),
            });
        }
        let id = lines
            .next()
            .and_then(|l| l.strip_prefix("id="))
            .and_then(Id::from_hex)
            .ok_or_else(|| Error::corrupt(&key, "no readable creation id"))?;
        let ready = match lines.next() {
            Some("state=ready") => true,
            Some("state=creating") => false,
            other => {
                return Err(Error::corrupt(
                    &key,
                    format!("state=ready or state=creating expected, found {other:?}"),
                ));
            }
        };
        let mut meta = Meta {
            kind: like.kind,
            id,
            ready,
            fields: Vec::new(),
        };
        for (field, _) in &like.fields {
            let line = lines.next().unwrap_or("");
            match line.split_once('=') {
                Some((f, value)) if f == *field => meta.fields.push((field, value.to_owned())),
                _ => {
                    return Err(Error::corrupt(
                        &key,
                        format!("field {field} expected, found {line:?}"),
                    ));
                }
            }
        }
        if let Some(line) = lines.next() {
            return Err(Error::corrupt(
                &key,
                format!("{line:?} after the last field"),
            ));
        }
        Ok(meta)
    }

    /// `Ok` if `stored` has every value of `self`, else the first that differs.
    fn check_matches(&self, name: &str, stored: &Meta) -> Result<(), Error> {
        for ((field, want), (_, have)) in self.fields.iter().zip(&stored.fields) {
            if want != have {
                return Err(Error::Mismatch {
                    name: name.to_owned(),
                    field,
                    stored: have.clone(),
                    requested: want.clone(),
                });
            }
        }
        Ok(())
    }
}

/// One command on the description.
fn on_meta(name: &str, cmd: impl FnOnce(&str) -> redis::Cmd) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    batch.push(k, cmd(&key));
    batch
}

/// One script on the description, of `args`.
fn script_on_meta(name: &str, lua: &Lua, args: &[Vec<u8>]) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    batch.push_script(k, lua, &[&key], args);
    batch
}

/// The one reply of a request on the description: nothing (`Nil`) or the description's bytes.
fn stored(name: &str, replies: Vec<Value>, what: &str) -> Result<Option<Vec<u8>>, Error> {
    match replies.into_iter().next() {
        Some(Value::Nil) => Ok(None),
        Some(Value::BulkString(bytes)) => Ok(Some(bytes)),
        other => Err(Error::corrupt(
            &names::meta(name),
            format!("{what} answered {other:?}"),
        )),
    }
}

/// What a create does when a structure of the same name and parameters exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfExists {
    /// Fail with [`Error::Exists`]: `create`.
    Fail,
    /// Open it: `open_or_create`.
    Open,
}

/// What [`begin`] found.
pub(crate) enum Begun {
    /// This call wrote the description: it creates the shards, then [`finish`]es (or
    /// [`abandon`]s).
    Won,
    /// A description of the same kind and parameters was there (read in the same command).
    Found(Meta),
}

/// The first step of a creation: writes `meta` (`state=creating`) unless a description exists.
/// A description of another kind or parameters is [`Error::Mismatch`]; nothing is written then.
pub(crate) async fn begin(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
) -> Result<Begun, Error> {
    names::check(name)?;
    let batch = on_meta(name, |key| {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(meta.encode()).arg("NX").arg("GET");
        cmd
    });
    match stored(name, server.send(via, &batch).await?, "SET NX GET")? {
        None => Ok(Begun::Won),
        Some(bytes) => {
            let found = Meta::decode(name, &bytes, meta)?;
            meta.check_matches(name, &found)?;
            Ok(Begun::Found(found))
        }
    }
}

/// The last step of a creation that [`begin`] won: `state=ready`. [`Error::Missing`] if the
/// description is no longer this creation's (lost meanwhile).
pub(crate) async fn finish(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
) -> Result<(), Error> {
    let args = [
        meta.encode().into_bytes(),
        meta.as_ready().encode().into_bytes(),
    ];
    match server
        .send(via, &script_on_meta(name, &FINISH, &args))
        .await?
        .first()
    {
        Some(Value::Int(1)) => Ok(()),
        Some(Value::Int(0)) => Err(Error::Missing {
            name: name.to_owned(),
            key: names::meta(name),
        }),
        other => Err(Error::corrupt(
            &names::meta(name),
            format!("the creation's end answered {other:?}"),
        )),
    }
}

/// Undoes a creation that [`begin`] won and could not finish: its description deleted if it is
/// still its own, so that the name can be created again (its shards, if any, are replaced by
/// the next creation's). Best effort: an error here leaves the description `creating`, which
/// openers report as [`Error::Unfinished`].
pub(crate) async fn abandon(server: &Server, via: Via, name: &str, meta: &Meta) {
    let _ = server
        .send(
            via,
            &script_on_meta(name, &ABANDON, &[meta.encode().into_bytes()]),
        )
        .await;
}

/// `found` once its creation finished: read again every [`POLL`] until `state=ready`, for up to
/// the server's timeout ([`Error::Unfinished`]). [`Error::Missing`] if it disappears meanwhile
/// (its creator abandoned it). Each reading is of `like`'s kind and fields, and, for a create
/// (`requested`), has its values.
async fn ready(
    server: &Server,
    via: Via,
    name: &str,
    like: &Meta,
    requested: Option<&Meta>,
    mut found: Meta,
) -> Result<Meta, Error> {
    let deadline = Instant::now() + server.timeout();
    while !found.ready {
        if Instant::now() >= deadline {
            return Err(Error::Unfinished {
                name: name.to_owned(),
            });
        }
        tokio::time::sleep(POLL).await;
        let batch = on_meta(name, |key| {
            let mut cmd = redis::cmd("GET");
            cmd.arg(key);
            cmd
        });
        found = match stored(name, server.send(via, &batch).await?, "GET")? {
            None => {
                return Err(Error::Missing {
                    name: name.to_owned(),
                    key: names::meta(name),
                });
            }
            Some(bytes) => {
                let again = Meta::decode(name, &bytes, like)?;
                if let Some(requested) = requested {
                    requested.check_matches(name, &again)?;
                }
                again
            }
        };
    }
    Ok(found)
}

/// A new creation's id, ordered by the server's time on the description's node
/// ([`Id::ordered`]; a replaying server's is 1).
pub(crate) async fn fresh_id(server: &Server, via: Via, name: &str) -> Result<Id, Error> {
    names::check(name)?;
    if server.replays() {
        return Ok(Id::random());
    }
    let synced = crate::windowed::time::server_time(server, via, name).await?;
    let micros = u64::try_from(synced.server.as_micros()).unwrap_or(u64::MAX);
    Ok(Id::ordered(micros.min((1 << 52) - 1)))
}

/// `Ok` if every shard creation of `batch` answered 1 (made); -1 (a later creation of the name
/// holds the key: this creation's description was lost meanwhile, or the server's clock
/// stepped back) is [`Error::Missing`] naming that key.
pub(crate) fn check_made(name: &str, batch: &Batch, made: &[Value]) -> Result<(), Error> {
    for (i, reply) in made.iter().enumerate() {
        match reply {
            Value::Int(1) => {}
            Value::Int(-1) => {
                return Err(Error::Missing {
                    name: name.to_owned(),
                    key: batch.key_of(i).to_owned(),
                });
            }
            other => {
                return Err(Error::corrupt(
                    batch.key_of(i),
                    format!("a shard's creation answered {other:?}"),
                ));
            }
        }
    }
    Ok(())
}

/// Creates the structure `name` described by `meta` (its id replaced by a [`fresh_id`]) whose
/// shards the batch `shards(id)` creates, as the module's docs say: the description first,
/// then the shards, then `state=ready`. A description that exists with the same parameters is
/// [`IfExists`]'s to decide (opened once ready); with others, [`Error::Mismatch`]. Returns the
/// id of the structure the handle works on: the new one's, or the existing one's.
pub(crate) async fn create_with(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
    shards: impl FnOnce(Id) -> Batch,
    if_exists: IfExists,
) -> Result<Id, Error> {
    let meta = &Meta {
        id: fresh_id(server, via, name).await?,
        ..meta.clone()
    };
    match begin(server, via, name, meta).await? {
        Begun::Found(found) => match if_exists {
            IfExists::Fail => Err(Error::Exists {
                name: name.to_owned(),
            }),
            IfExists::Open => Ok(ready(server, via, name, meta, Some(meta), found).await?.id),
        },
        Begun::Won => {
            let result = create_shards(server, via, name, meta, &shards(meta.id)).await;
            if result.is_err() {
                abandon(server, via, name, meta).await;
            }
            result.map(|()| meta.id)
        }
    }
}

/// The shards ([`check_made`]), then `state=ready`.
async fn create_shards(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
    shards: &Batch,
) -> Result<(), Error> {
    check_made(name, shards, &server.send(via, shards).await?)?;
    finish(server, via, name, meta).await
}

/// Deletes the structure `name` of creation `id`: its description (unless it is another
/// structure's: then [`Error::Missing`], and nothing is deleted), then runs `deletions`,
/// which delete only its own keys ([`guard::destroy`](crate::guard::destroy): a key of a
/// structure created again under the name meanwhile is left alone). Keys already gone are no
/// error.
pub(crate) async fn destroy(
    server: &Server,
    via: Via,
    name: &str,
    id: Id,
    deletions: Batch,
) -> Result<(), Error> {
    let mark = format!("\nid={}\n", id.to_hex()).into_bytes();
    let batch = script_on_meta(name, &DESTROY, &[mark]);
    match server.send(via, &batch).await?.first() {
        Some(Value::Int(1 | -1)) => {}
        Some(Value::Int(0)) => {
            return Err(Error::Missing {
                name: name.to_owned(),
                key: names::meta(name),
            });
        }
        other => {
            return Err(Error::corrupt(
                &names::meta(name),
                format!("the destroy answered {other:?}"),
            ));
        }
    }
    server.send(via, &deletions).await.map(drop)
}

/// Reads the description of `name`, of `like`'s kind and fields, once its creation finished.
pub(crate) async fn open(
    server: &Server,
    via: Via,
    name: &str,
    like: &Meta,
) -> Result<Meta, Error> {
    names::check(name)?;
    let batch = on_meta(name, |key| {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        cmd
    });
    match stored(name, server.send(via, &batch).await?, "GET")? {
        None => Err(Error::Missing {
            name: name.to_owned(),
            key: names::meta(name),
        }),
        Some(bytes) => {
            let found = Meta::decode(name, &bytes, like)?;
            ready(server, via, name, like, None, found).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_reads_back_and_a_difference_is_named() {
        let meta = Meta::new("bloom").with("capacity", 1000).with("fpr", 0.01);
        let text = meta.encode();
        let id = meta.id.to_hex();
        assert_eq!(
            text,
            format!("seen-redis/3\nkind=bloom\nid={id}\nstate=creating\ncapacity=1000\nfpr=0.01\n")
        );
        let ready = Meta::decode("n", meta.as_ready().encode().as_bytes(), &meta).unwrap();
        assert!(ready.ready && ready.id == meta.id);
        let back = Meta::decode("n", text.as_bytes(), &meta).unwrap();
        assert_eq!(back, meta);
        let other = Meta::new("bloom").with("capacity", 2000).with("fpr", 0.01);
        match other.check_matches("n", &back) {
            Err(Error::Mismatch {
                field,
                stored,
                requested,
                ..
            }) => assert_eq!((field, &*stored, &*requested), ("capacity", "1000", "2000")),
            other => panic!("{other:?}"),
        }
        let map = Meta::new("map").with("capacity", 1000).with("fpr", 0.01);
        assert!(matches!(
            Meta::decode("n", text.as_bytes(), &map),
            Err(Error::Mismatch { field: "kind", .. })
        ));
        assert!(matches!(
            Meta::decode("n", b"hello", &meta),
            Err(Error::Corrupt { .. })
        ));
        let longer = format!("{text}extra=1\n");
        assert!(matches!(
            Meta::decode("n", longer.as_bytes(), &meta),
            Err(Error::Corrupt { .. })
        ));
    }
}
