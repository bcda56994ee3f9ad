//! [`Error`]: what went wrong, naming the key and the server's own words.

use std::fmt;

/// Everything a shared structure can report. Each variant names the key (or the structure's
/// name) it concerns; none is a panic.
///
/// What a caller should do depends on whether the write is known:
///
/// - [`Error::Connection`]: the request may or may not have reached the server. An insert of
///   the batch may be in the filter without its answer having arrived, so **no item of the
///   batch was answered**: retrying is safe (the filter stays right), but a retry answers
///   "seen" for an item whose first write landed. Where every item must be handled at least
///   once, handle the batch's items whatever the retry says, or use
///   [`SharedOverwriteMap`](crate::SharedOverwriteMap)'s claims.
/// - [`Error::Server`]: the server refused a command (out of memory under `maxmemory`, a key of
///   another type, a read-only replica, ...). Commands of the batch before it may have run; as
///   above, no item was answered.
/// - [`Error::Missing`], [`Error::Mismatch`], [`Error::Exists`], [`Error::Corrupt`]: the
///   structure on the server is not the one asked for; nothing was written.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The connection failed, dropped or timed out: the outcome of the request is unknown.
    Connection {
        /// The key (or the first key of the batch) the request was about.
        key: String,
        /// The client's error.
        source: redis::RedisError,
    },
    /// The server answered with an error.
    Server {
        /// The key of the refused command.
        key: String,
        /// The error's code, as the server sent it: `OOM`, `WRONGTYPE`, `READONLY`, ...
        code: String,
        /// The server's message, whole.
        message: String,
    },
    /// No structure of this name on the server, or a part of it is gone (never created,
    /// deleted, or lost: a restart without persistence, `FLUSHALL`, eviction; also a shard
    /// that is there without its guard: cut short, or written again by a write after it was
    /// lost), or the structure this handle opened was replaced by another of the same name
    /// (destroyed and created again). Nothing was answered. A lost structure stays lost for
    /// every handle that opened it; destroy it and create it again to start afresh (handles
    /// opened before then stay `Missing`: open it again).
    Missing {
        /// The structure's name.
        name: String,
        /// The key that is not there.
        key: String,
    },
    /// A structure of this name exists with other parameters (or is of another kind).
    Mismatch {
        /// The structure's name.
        name: String,
        /// The parameter that differs.
        field: &'static str,
        /// Its value on the server.
        stored: String,
        /// The value asked for.
        requested: String,
    },
    /// A structure of this name already exists (an upload only creates).
    Exists {
        /// The structure's name.
        name: String,
    },
    /// Another process began creating the structure and had not finished within the server's
    /// timeout: it is slow (many large shards), or it ended mid-way. In that case the name
    /// stays unfinished until its description, `seen:{NAME}:meta`, is deleted (`DEL`); the
    /// next create then replaces whatever shards it left. Nothing was written.
    Unfinished {
        /// The structure's name.
        name: String,
    },
    /// What the server holds under the structure's keys is not what this crate writes.
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong with it.
        what: String,
    },
    /// A name that cannot be used as one (empty, too long, or with `{`, `}`, spaces or
    /// control characters).
    InvalidName {
        /// The name as given.
        name: String,
    },
    /// The local library refused: parameters (capacity 0, a rate outside (0, 1)), an
    /// allocation, a file.
    Local(seen::Error),
}

impl Error {
    /// Whether the server refused a write for lack of memory (`OOM`, under `maxmemory` with
    /// the `noeviction` policy).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Self::Server { code, .. } if code == "OOM")
    }

    /// Whether the outcome of the request is unknown ([`Error::Connection`]).
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, Self::Connection { .. })
    }

    /// A client error about `key`: a server error reply becomes [`Error::Server`], anything
    /// else (input/output, a dropped connection, a timeout) [`Error::Connection`].
    pub(crate) fn from_redis(key: &str, err: redis::RedisError) -> Self {
        if let Some(code) = err.code()
            && !err.is_io_error()
            && !err.is_timeout()
            && !err.is_connection_dropped()
            && !err.is_connection_refusal()
        {
            return Self::Server {
                key: key.to_owned(),
                code: code.to_owned(),
                message: err.to_string(),
            };
        }
        Self::Connection {
            key: key.to_owned(),
            source: err,
        }
    }

    /// A server error reply to a command on `key`.
    pub(crate) fn from_reply(key: &str, err: &redis::ServerError) -> Self {
        Self::Server {
            key: key.to_owned(),
            code: err.code().to_owned(),
            message: match err.details() {
                Some(details) => format!("{} {details}", err.code()),
                None => err.code().to_owned(),
            },
        }
    }

    /// A reply of the wrong shape for a command on `key`.
    pub(crate) fn corrupt(key: &str, what: impl Into<String>) -> Self {
        Self::Corrupt {
            key: key.to_owned(),
            what: what.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connection { key, source } => write!(
                f,
                "{key}: the connection to the server failed, so whether the request ran is unknown (retrying an insert is safe): {source}"
            ),
            Self::Server { key, message, .. } => write!(f, "{key}: the server refused: {message}"),
            Self::Missing { name, key } => write!(
                f,
                "{name}: no such structure on the server, or part of it is lost ({key} is missing or not this structure's: never created, deleted, replaced by a structure created again under the name, or lost in a restart without persistence, a FLUSHALL or an eviction; destroy the structure and create it again to start it empty)"
            ),
            Self::Mismatch {
                name,
                field,
                stored,
                requested,
            } => write!(
                f,
                "{name}: the server's structure has {field} {stored}, not {requested}"
            ),
            Self::Exists { name } => write!(f, "{name}: a structure of this name already exists"),
            Self::Unfinished { name } => write!(
                f,
                "{name}: another process began creating it and has not finished (if that process ended, delete seen:{{{name}}}:meta, e.g. with redis-cli DEL, and create it again)"
            ),
            Self::Corrupt { key, what } => write!(f, "{key}: not written by this crate: {what}"),
            Self::InvalidName { name } => write!(
                f,
                "{name:?} is not a usable name: 1 to 200 bytes, no braces, spaces or control characters"
            ),
            Self::Local(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connection { source, .. } => Some(source),
            Self::Local(err) => Some(err),
            _ => None,
        }
    }
}

impl From<seen::Error> for Error {
    fn from(err: seen::Error) -> Self {
        Self::Local(err)
    }
}
