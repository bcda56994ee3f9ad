//! A structure's description, stored beside it in `seen:{NAME}:meta`: its kind and every
//! parameter a second process needs to open it and address its bits as the first does. Written
//! once, by `SET ... NX GET`, so among racing creators exactly one writes it and every other
//! reads what it wrote in the same command, then opens it or refuses a mismatch.
//!
//! The text is a header line and one `field=value` line per parameter, in a fixed order:
//!
//! ```text
//! seen-redis/2
//! kind=bloom
//! layout=word
//! ...
//! ```

use redis::Value;

use crate::server::{Batch, Via};
use crate::{Error, Server, names};

/// Format 2: every shard holds a guard byte ([`guard`](crate::guard)). Format 1 had none (a
/// lost shard could come back as an empty one), and is refused.
const HEADER: &str = "seen-redis/2";

/// A description: the kind, and the parameters in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) kind: &'static str,
    pub(crate) fields: Vec<(&'static str, String)>,
}

impl Meta {
    pub(crate) fn new(kind: &'static str) -> Self {
        Self {
            kind,
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
        let mut text = format!("{HEADER}\nkind={}\n", self.kind);
        for (field, value) in &self.fields {
            text.push_str(field);
            text.push('=');
            text.push_str(value);
            text.push('\n');
        }
        text
    }

    /// Reads a stored description as `kind`, taking the field names from `like` (whose values
    /// are ignored): a stored description with other fields is refused.
    fn decode(name: &str, bytes: &[u8], like: &Meta) -> Result<Self, Error> {
        let key = names::meta(name);
        let text = std::str::from_utf8(bytes)
            .map_err(|_| Error::corrupt(&key, "a description that is not UTF-8"))?;
        let mut lines = text.lines();
        let header = lines.next();
        if header == Some("seen-redis/1") {
            return Err(Error::corrupt(
                &key,
                "a structure of an earlier version of this crate (format 1, whose lost shards \
                 could read as empty ones): destroy it and create it again",
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
        let mut meta = Meta::new(like.kind);
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

/// The request that creates `meta` unless a description exists, and returns the one that did.
fn create_batch(name: &str, meta: &Meta) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    let mut cmd = redis::cmd("SET");
    cmd.arg(&key).arg(meta.encode()).arg("NX").arg("GET");
    batch.push(k, cmd);
    batch
}

/// The request that reads the description.
fn open_batch(name: &str) -> Batch {
    let mut batch = Batch::default();
    let key = names::meta(name);
    let k = batch.key(&key);
    let mut cmd = redis::cmd("GET");
    cmd.arg(&key);
    batch.push(k, cmd);
    batch
}

/// Whether the create wrote the description (`Ok(true)`), or found a matching one.
fn after_create(name: &str, meta: &Meta, replies: Vec<Value>) -> Result<bool, Error> {
    match replies.into_iter().next() {
        Some(Value::Nil) => Ok(true),
        Some(Value::BulkString(bytes)) => {
            let stored = Meta::decode(name, &bytes, meta)?;
            meta.check_matches(name, &stored)?;
            Ok(false)
        }
        other => Err(Error::corrupt(
            &names::meta(name),
            format!("SET NX GET answered {other:?}"),
        )),
    }
}

/// The stored description, read as `like`'s kind and fields.
fn after_open(name: &str, like: &Meta, replies: Vec<Value>) -> Result<Meta, Error> {
    match replies.into_iter().next() {
        Some(Value::Nil) => Err(Error::Missing {
            name: name.to_owned(),
            key: names::meta(name),
        }),
        Some(Value::BulkString(bytes)) => Meta::decode(name, &bytes, like),
        other => Err(Error::corrupt(
            &names::meta(name),
            format!("GET answered {other:?}"),
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

/// Whether the description read by [`open_batch`] exists (checked against `meta`: another
/// kind or parameters is [`Error::Mismatch`]).
fn exists(name: &str, meta: &Meta, replies: Vec<Value>) -> Result<bool, Error> {
    match replies.into_iter().next() {
        Some(Value::Nil) => Ok(false),
        Some(Value::BulkString(bytes)) => {
            let stored = Meta::decode(name, &bytes, meta)?;
            meta.check_matches(name, &stored)?;
            Ok(true)
        }
        other => Err(Error::corrupt(
            &names::meta(name),
            format!("GET answered {other:?}"),
        )),
    }
}

fn found(name: &str, if_exists: IfExists) -> Result<(), Error> {
    match if_exists {
        IfExists::Open => Ok(()),
        IfExists::Fail => Err(Error::Exists {
            name: name.to_owned(),
        }),
    }
}

/// Creates the structure `name` described by `meta` whose data `shards` creates: unless the
/// description exists, runs `shards` (which must keep shards that are already there, whole:
/// a racing creator's), then writes the description (`SET ... NX GET`), last, so that no
/// process opens the structure before its data is there. A description that exists with the
/// same parameters is [`IfExists`]'s to decide; with others, [`Error::Mismatch`]. A lost
/// shard under an existing description is never made again here: only a structure without a
/// description is created.
pub(crate) async fn create_with(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
    shards: &Batch,
    if_exists: IfExists,
) -> Result<(), Error> {
    names::check(name)?;
    if exists(name, meta, server.send(via, &open_batch(name)).await?)? {
        return found(name, if_exists);
    }
    let made = server.send(via, shards).await?;
    // Each creation script answers 1 (made), 0 (there) or -1 (another structure's shard in the
    // way): any other reply is no creation.
    if let Some((i, other)) = made
        .iter()
        .enumerate()
        .find(|(_, r)| !matches!(r, Value::Int(-1..=1)))
    {
        return Err(Error::corrupt(
            shards.key_of(i),
            format!("a shard's creation answered {other:?}"),
        ));
    }
    if let Some(i) = made.iter().position(|r| matches!(r, Value::Int(-1))) {
        // Another structure's shard is in the way (a creator of other parameters racing under
        // this name): left as it is. Its description, once written, says which.
        if exists(name, meta, server.send(via, &open_batch(name)).await?)? {
            return found(name, if_exists);
        }
        return Err(Error::corrupt(
            shards.key_of(i),
            "holds a shard of another structure of this name (one of other parameters being \
             created at the same time): left as it is",
        ));
    }
    if after_create(
        name,
        meta,
        server.send(via, &create_batch(name, meta)).await?,
    )? {
        Ok(())
    } else {
        found(name, if_exists)
    }
}

/// Creates the description of `name`, or checks that the existing one matches; whether this
/// call created it.
pub(crate) async fn create(
    server: &Server,
    via: Via,
    name: &str,
    meta: &Meta,
) -> Result<bool, Error> {
    names::check(name)?;
    after_create(
        name,
        meta,
        server.send(via, &create_batch(name, meta)).await?,
    )
}

/// Reads the description of `name`, of `like`'s kind and fields.
pub(crate) async fn open(
    server: &Server,
    via: Via,
    name: &str,
    like: &Meta,
) -> Result<Meta, Error> {
    names::check(name)?;
    after_open(name, like, server.send(via, &open_batch(name)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_reads_back_and_a_difference_is_named() {
        let meta = Meta::new("bloom").with("capacity", 1000).with("fpr", 0.01);
        let text = meta.encode();
        assert_eq!(text, "seen-redis/2\nkind=bloom\ncapacity=1000\nfpr=0.01\n");
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
    }
}
