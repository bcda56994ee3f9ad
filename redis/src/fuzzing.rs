//! For the fuzz targets in `fuzz/` (compiled under `--cfg fuzzing`, which `cargo fuzz` passes)
//! and the unit tests (which replay what the fuzzer found); not part of the API: a [`Server`]
//! that connects nowhere and answers each request with the next of a script of replies, so
//! that a target drives the structures' public methods (create, open, insert, lookup,
//! download, forget, claim) on whatever a hostile or broken server could send, through the
//! same steps a real server's replies take (the `NOSCRIPT` retry and checks of the one driver
//! of requests, which both APIs share, then each structure's own reading of the replies); and
//! [`well_formed`], what a correct server's replies look like, so that a target can check that
//! an answer never came from a malformed reply.

use std::collections::VecDeque;
use std::sync::Mutex;

use redis::{Cmd, Value};

use crate::server::Batch;
use crate::{Error, Server};

/// The script of replies of a [`server`], and what it answered so far.
pub(crate) struct Replay {
    replies: Mutex<VecDeque<Value>>,
    fit: bool,
    /// Each request answered since the last [`well_formed`]: its commands and its replies.
    log: Mutex<Vec<(Vec<Cmd>, Vec<Value>)>>,
}

/// The most replies a script holds: every operation of a target takes a few.
const MAX_REPLIES: usize = 64;

/// A server whose replies are the RESP values of `resp`, in order (for the blocking methods
/// and the `_async` ones alike; it starts no runtime): each request takes the next
/// value, an array's elements being the replies to its commands (anything else, the one reply
/// to a request of one command). With `fit`, a request's replies are cut or repeated to one per
/// command, so that every reply gets past the count check. Once the values run out, a request
/// fails as a dropped connection does.
pub fn server(resp: &[u8], fit: bool) -> Server {
    let mut parser = redis::Parser::new();
    // The parser keeps what it read past a value for the next call: the input is read to its
    // end by the first, and the values come one by one until it is spent (an error).
    let mut input = resp;
    let mut replies = VecDeque::new();
    while replies.len() < MAX_REPLIES
        && let Ok(value) = parser.parse_value(&mut input)
    {
        replies.push_back(value);
    }
    crate::guard::REPLAYING.set(true);
    Server::replaying(Replay {
        replies: Mutex::new(replies),
        fit,
        log: Mutex::new(Vec::new()),
    })
}

impl Replay {
    /// The replies to `batch`.
    pub(crate) fn next(&self, batch: &Batch) -> Result<Vec<Value>, Error> {
        let next = self
            .replies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        let Some(value) = next else {
            let gone = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no more replies");
            return Err(Error::from_redis(batch.first_key(), gone.into()));
        };
        let replies = match value {
            Value::Array(replies) => replies,
            one => vec![one],
        };
        if self.fit && !replies.is_empty() {
            return Ok(replies.iter().cycle().take(batch.len()).cloned().collect());
        }
        Ok(replies)
    }

    /// Notes the checked `replies` to `batch`.
    pub(crate) fn log(&self, batch: &Batch, replies: &[Value]) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((batch.commands(), replies.to_vec()));
    }
}

/// `Ok` if every reply `server` (from [`server`]) gave since the last call is what a correct
/// server answers to its command, else the first that is not; forgets them. A reply whose
/// value the structures ignore is not judged: `DEL`'s, the growth of a shard (`BITFIELD` of
/// `INCRBY`s only), the map's shard creation script.
pub fn well_formed(server: &Server) -> Result<(), String> {
    let Some(replay) = server.replay() else {
        return Ok(());
    };
    let log = std::mem::take(&mut *replay.log.lock().unwrap_or_else(|e| e.into_inner()));
    for (cmds, replies) in log {
        for (cmd, reply) in cmds.iter().zip(&replies) {
            let args: Vec<&[u8]> = cmd
                .args_iter()
                .filter_map(|arg| match arg {
                    redis::Arg::Simple(arg) => Some(arg),
                    _ => None,
                })
                .collect();
            if let Err(why) = reply_shape(&args, reply) {
                let name = String::from_utf8_lossy(args.first().copied().unwrap_or_default());
                return Err(format!("{name} answered {reply:?}: {why}"));
            }
        }
    }
    Ok(())
}

/// An argument as a number.
fn number(arg: Option<&&[u8]>) -> Option<usize> {
    std::str::from_utf8(arg?).ok()?.parse().ok()
}

/// `Ok` if `reply` is what a server answers to the command of `args` (its name first).
fn reply_shape(args: &[&[u8]], reply: &Value) -> Result<(), String> {
    let int = |ok: &dyn Fn(i64) -> bool| match reply {
        Value::Int(n) if ok(*n) => Ok(()),
        _ => Err("not an integer in range".to_owned()),
    };
    match args
        .first()
        .map(|name| name.to_ascii_uppercase())
        .as_deref()
    {
        Some(b"STRLEN") => int(&|n| n >= 0),
        Some(b"EXISTS") => int(&|n| n == 0 || n == 1),
        Some(b"GET" | b"SET") => match reply {
            Value::Nil | Value::BulkString(_) => Ok(()),
            _ => Err("neither nil nor a string".to_owned()),
        },
        Some(b"GETRANGE") => match reply {
            Value::BulkString(_) => Ok(()),
            _ => Err("not a string".to_owned()),
        },
        Some(b"BITFIELD" | b"BITFIELD_RO") => bitfield_shape(&args[2..], reply),
        Some(b"EVAL" | b"EVALSHA") => script_shape(args, reply),
        _ => Ok(()),
    }
}

/// `BITFIELD`'s reply to the subcommands `args`: one integer per `GET`, `SET` or `INCRBY`,
/// within its type (`u1`, `u8`, `i64`).
fn bitfield_shape(mut args: &[&[u8]], reply: &Value) -> Result<(), String> {
    let mut types = Vec::new();
    while let [op, rest @ ..] = args {
        let (ty, skip) = match op.to_ascii_uppercase().as_slice() {
            b"GET" => (rest.first(), 3),
            b"SET" | b"INCRBY" => (rest.first(), 4),
            _ => (None, 2), // OVERFLOW: no reply of its own
        };
        if let Some(ty) = ty {
            types.push((*ty, op.eq_ignore_ascii_case(b"INCRBY")));
        }
        args = args.get(skip..).unwrap_or_default();
    }
    if types.iter().all(|&(_, incrby)| incrby) {
        return Ok(()); // a shard's growth: the reply is not read
    }
    let Value::Array(values) = reply else {
        return Err("not an array".to_owned());
    };
    if values.len() != types.len() {
        return Err(format!("{} values to {} fields", values.len(), types.len()));
    }
    for (value, (ty, _)) in values.iter().zip(types) {
        let range = match ty {
            b"u1" => 0..=1,
            b"u8" => 0..=255,
            _ => i64::MIN..=i64::MAX,
        };
        match value {
            Value::Int(n) if range.contains(n) => {}
            other => return Err(format!("{other:?} is no {}", String::from_utf8_lossy(ty))),
        }
    }
    Ok(())
}

/// A script's reply, the script told apart by its SHA-1 or source ([`crate::script`]).
fn script_shape(args: &[&[u8]], reply: &Value) -> Result<(), String> {
    let keys = number(args.get(2)).ok_or("no key count")?;
    let argv = args.get(3 + keys..).unwrap_or_default();
    let int = |ok: &dyn Fn(i64) -> bool| match reply {
        Value::Int(n) if ok(*n) => Ok(()),
        _ => Err("not an integer in range".to_owned()),
    };
    let name = args.get(1).and_then(|a| crate::script::name_of(a));
    match name.ok_or("an unknown script")? {
        "time" => {
            let part = |v: &Value| match v {
                Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse::<u64>().ok(),
                Value::Int(n) => u64::try_from(*n).ok(),
                _ => None,
            };
            match reply {
                Value::Array(parts) if parts.len() == 2 => match (part(&parts[0]), part(&parts[1]))
                {
                    (Some(_), Some(micros)) if micros < 1_000_000 => Ok(()),
                    _ => Err("not seconds and microseconds".to_owned()),
                },
                _ => Err("not TIME's two numbers".to_owned()),
            }
        }
        "shard create" | "map create" | "ledger create" => int(&|n| n == 1 || n == -1),
        "finish creation" | "abandon creation" | "key destroy" | "window destroy" => {
            int(&|n| n == 0 || n == 1)
        }
        "destroy" => int(&|n| (-1..=1).contains(&n)),
        "upload merge" => int(&|n| (-1..=1).contains(&n)),
        "forget" => int(&|n| (-1..=1).contains(&n)),
        "claim" | "commit" | "renew" | "release" => int(&|n| (-2..=1).contains(&n)),
        "window check" => int(&|n| n >= -2 && n < keys as i64),
        "window insert" => {
            // The expiry, the guard, one generation per generation key, the oldest kept, the
            // periods to a generation's death and the period, then per item a count and that
            // many offsets, then the creation id.
            let generations = keys - 1;
            let mut items = 0;
            let mut at = 5 + generations;
            while at + 1 < argv.len() {
                at += 1 + number(argv.get(at)).ok_or("a count expected")?;
                items += 1;
            }
            match reply {
                Value::Array(answers)
                    if answers.len() == items
                        && answers.iter().all(|a| matches!(a, Value::Int(0 | 1))) =>
                {
                    Ok(())
                }
                Value::Array(lost) => match lost.as_slice() {
                    [Value::Int(-2)] => Ok(()),
                    [Value::Int(-1), Value::Int(k)] if (1..=generations as i64).contains(k) => {
                        Ok(())
                    }
                    _ => Err(format!("not {items} answers of 0 or 1, nor a lost key")),
                },
                _ => Err(format!("not {items} answers of 0 or 1")),
            }
        }
        other => Err(format!("no shape for the script {other}")),
    }
}

/// Replies that a fuzz target found answered (or panicked on), replayed on the public methods:
/// each must be an error naming the key, never an answer.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SharedBloomFilter, SharedOverwriteMap, SharedWindowedBloomFilter};

    fn int(n: i64) -> Vec<u8> {
        format!(":{n}\r\n").into_bytes()
    }

    fn bulk(text: &str) -> Vec<u8> {
        format!("${}\r\n{text}\r\n", text.len()).into_bytes()
    }

    fn array(values: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", values.len()).into_bytes();
        values.iter().for_each(|v| out.extend_from_slice(v));
        out
    }

    const NIL: &[u8] = b"$-1\r\n";

    /// A Bloom filter of one item's capacity (word layout: 8 blocks, 64 bytes, `k` 5), created
    /// on a server whose next replies are `then` (the create: no description, so this one
    /// written; the shard made; the description ready).
    fn bloom(then: &[Vec<u8>]) -> (Server, SharedBloomFilter) {
        let mut script = [NIL.to_vec(), int(1), int(1)].concat();
        then.iter().for_each(|r| script.extend_from_slice(r));
        let server = server(&script, false);
        let filter = SharedBloomFilter::builder("f", 1).create(&server).unwrap();
        (server, filter)
    }

    fn is_corrupt<T: std::fmt::Debug>(result: Result<T, Error>) {
        assert!(matches!(result, Err(Error::Corrupt { .. })), "{result:?}");
    }

    /// A `BITFIELD` reply's values were read by position, so one value too many went
    /// unnoticed (`redis_windowed` found a description's text after a word's value).
    #[test]
    fn a_bitfield_reply_with_more_values_than_fields_is_an_error() {
        // The lookup reads one word: one `BITFIELD_RO` of the guard and one `GET`.
        let (_, filter) = bloom(&[array(&[array(&[int(1), int(-1), int(0)])])]);
        is_corrupt(filter.contains(&7u64));
        // The async API's requests take the same checks.
        let (replies, filter) = bloom(&[array(&[array(&[int(1), int(-1), int(0)])])]);
        is_corrupt(replies.block_on(filter.contains_async(&7u64)));
        // The window's lookup: `EXISTS`, then one word in each of 3 generations, then the
        // ledger's check.
        let time = array(&[array(&[bulk("1700000000"), bulk("0")])]);
        let one = array(&[int(0)]);
        let bad = array(&[int(0), bulk("seen")]);
        let read = array(&[int(1), one.clone(), one, bad, int(0)]);
        let created = [NIL.to_vec(), int(1), int(1)].concat();
        let replies = server(&[created.clone(), time, read].concat(), false);
        let window = SharedWindowedBloomFilter::builder("w", 1)
            .periods(1)
            .create(&replies)
            .unwrap();
        is_corrupt(window.contains(&7u64));
        let server = server(
            &[created, array(&[array(&[int(1), int(0), int(0)])])].concat(),
            false,
        );
        let map = SharedOverwriteMap::builder("m", 1).create(&server).unwrap();
        is_corrupt(map.contains(&7u64));
    }

    /// An old value of `SET u1` that is not 0 was taken for a set bit: an empty array among
    /// them (what `redis_bloom` found first) or a 2 answered "not new".
    #[test]
    fn an_old_bit_that_is_neither_0_nor_1_is_an_error() {
        for odd in [array(&[]), int(2)] {
            let old = [int(1), int(0), int(0), odd.clone(), odd.clone(), odd];
            let (_, filter) = bloom(&[array(&[array(&[int(1), int(0)])]), array(&[array(&old)])]);
            is_corrupt(filter.insert(&7u64));
        }
    }

    /// `TIME` is seconds and microseconds below a million: more microseconds is not a time
    /// (it panicked, adding past the end of a `Duration`, for the largest seconds); the largest
    /// seconds are a time (day 213,503,982,334,601, with the default period of a day).
    #[test]
    fn a_server_time_past_the_end_of_durations_is_an_error_or_the_last_generation() {
        let max = u64::MAX.to_string();
        for (secs, micros, valid) in [
            (max.as_str(), "999999", true),
            ("1700000000", "1000000", false),
            (max.as_str(), max.as_str(), false),
        ] {
            let time = array(&[array(&[bulk(secs), bulk(micros)])]);
            let created = [NIL.to_vec(), int(1), int(1)].concat();
            let server = server(&[created, time].concat(), false);
            let window = SharedWindowedBloomFilter::builder("w", 1).create(&server);
            if valid {
                assert_eq!(window.unwrap().generation().unwrap(), u64::MAX / 86_400);
            } else {
                is_corrupt(window);
            }
        }
    }

    /// A guard that is not the handle's creation id (1 here) answers nothing: 0 is a lost
    /// shard, another id a structure created again under the name, both `Missing`; a guard
    /// that is no integer is a corrupt reply.
    #[test]
    fn a_guard_that_is_not_the_creation_id_is_missing_or_corrupt() {
        for other in [0, 2, -1] {
            let (_, filter) = bloom(&[array(&[array(&[int(other), int(-1)])])]);
            let lost = filter.contains(&7u64);
            assert!(matches!(lost, Err(Error::Missing { .. })), "{lost:?}");
        }
        let (_, filter) = bloom(&[array(&[array(&[bulk("1"), int(-1)])])]);
        is_corrupt(filter.contains(&7u64));
        // An insert's write whose guard is gone: the answer is not read.
        let (_, filter) = bloom(&[
            array(&[array(&[int(1), int(0)])]),
            array(&[array(&[int(0), int(0), int(0), int(0), int(0), int(0)])]),
        ]);
        let lost = filter.insert(&7u64);
        assert!(matches!(lost, Err(Error::Missing { .. })), "{lost:?}");
    }
}
