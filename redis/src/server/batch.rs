//! [`Batch`]: the commands of one request, each with the key it is about, pipelined in order,
//! and the checks every reply passes before a structure reads it.

use redis::{Cmd, Value};

use crate::Error;

/// The commands of one request, each with the key it is about (for errors), pipelined in
/// order. Commands on one key run in the order given.
#[derive(Default)]
pub(crate) struct Batch {
    /// The commands, in a pipeline that sends them as they are (built once, never copied:
    /// cloning every command into a pipeline per request cost a line-layout lookup about a
    /// fifth of its client time).
    pub(super) pipe: redis::Pipeline,
    pub(super) keys: Vec<usize>,
    pub(super) names: Vec<String>,
    /// Each name's index in `names`.
    pub(super) index: std::collections::HashMap<String, usize>,
    /// Per script pushed by [`push_script`](Batch::push_script): its command's index and the
    /// script's text, for the same invocation as `EVAL` ([`eval`](Batch::eval)) to a server
    /// that answers `NOSCRIPT`.
    pub(super) evals: Vec<(usize, &'static str)>,
    /// Per command, for a `BITFIELD` pushed by [`push_fields`](Batch::push_fields): the
    /// integers its reply must hold.
    pub(super) fields: Vec<Option<usize>>,
    /// Error replies are handed to the caller with the others (each command's own failure),
    /// instead of failing the request ([`errors_per_command`](Batch::errors_per_command)).
    pub(super) errors_per_command: bool,
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
        self.pipe.add_command(cmd);
        self.pipe.ignore_errors();
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
        self.fields[self.pipe.len() - 1] = Some(fields);
    }

    /// Hands error replies to the caller among the others, so that one command's failure
    /// does not hide what the others did (a batch of claims: the claims made by the scripts
    /// that answered are held, and forgotten).
    pub(crate) fn errors_per_command(&mut self) {
        self.errors_per_command = true;
    }

    pub(crate) fn len(&self) -> usize {
        self.pipe.len()
    }

    /// Appends an invocation of `script` on `keys` (all in one slot;
    /// the first is the one [`key`](Self::key) returned as `key`) with `args`, as `EVALSHA`. A
    /// server that does not have the script cached (restarted, `SCRIPT FLUSH`, a failover)
    /// answers `NOSCRIPT` without running it; [`Server::run`] then sends that command again as
    /// `EVAL`, which runs it and caches it. A cluster gets the `EVAL` at once: its client's
    /// pipelines were not found to return the other commands' replies around an error reply
    /// (its blocking pipeline did not), and a `NOSCRIPT` there would leave the batch's other
    /// scripts unanswered.
    pub(crate) fn push_script(
        &mut self,
        key: usize,
        script: &crate::script::Lua,
        keys: &[&str],
        args: &[Vec<u8>],
    ) {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.sha()).arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        for arg in args {
            cmd.arg(arg.as_slice());
        }
        self.evals.push((self.pipe.len(), script.source()));
        self.push(key, cmd);
    }

    /// A script's invocation `cmd` as `EVAL` of its text `source`, the rest as pushed. Built
    /// when needed, not with every script (its arguments copied once more for each
    /// invocation cost the client about a microsecond per item of a windowed insert).
    fn eval(cmd: &Cmd, source: &str) -> Cmd {
        let mut eval = redis::cmd("EVAL");
        eval.arg(source);
        // `push_script` gave only plain arguments (no cursor).
        for arg in cmd.args_iter().skip(2) {
            if let redis::Arg::Simple(bytes) = arg {
                eval.arg(bytes);
            }
        }
        eval
    }

    /// The commands as a cluster sends them: a script as `EVAL`, anything else as pushed.
    pub(super) fn cluster_cmds(&self) -> Vec<Cmd> {
        let mut scripts = self.evals.iter().peekable();
        self.pipe
            .cmd_iter()
            .enumerate()
            .map(|(i, cmd)| match scripts.next_if(|(at, _)| *at == i) {
                Some((_, source)) => Self::eval(cmd, source),
                None => cmd.clone(),
            })
            .collect()
    }

    /// The scripts of `replies` answered `NOSCRIPT`, as a batch of their `EVAL`s, and where
    /// their replies go; `None` if there is none.
    pub(super) fn noscript(&self, replies: &[Value]) -> Option<(Batch, Vec<usize>)> {
        let mut again = Batch {
            errors_per_command: self.errors_per_command,
            ..Batch::default()
        };
        let mut at = Vec::new();
        let mut scripts = self.evals.iter().peekable();
        for (i, cmd) in self.pipe.cmd_iter().enumerate() {
            let Some((_, source)) = scripts.next_if(|(at, _)| *at == i) else {
                continue;
            };
            if let Some(Value::ServerError(err)) = replies.get(i)
                && err.code() == "NOSCRIPT"
            {
                let k = again.key(&self.names[self.keys[i]]);
                again.push(k, Self::eval(cmd, source));
                at.push(i);
            }
        }
        (!at.is_empty()).then_some((again, at))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pipe.is_empty()
    }

    /// The commands, in order.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn commands(&self) -> Vec<Cmd> {
        self.pipe.cmd_iter().cloned().collect()
    }

    /// The key command `i` is about.
    pub(crate) fn key_of(&self, i: usize) -> &str {
        self.keys
            .get(i)
            .map_or("(no key)", |&k| self.names[k].as_str())
    }

    pub(crate) fn first_key(&self) -> &str {
        self.keys
            .first()
            .map_or("(no key)", |&i| self.names[i].as_str())
    }

    /// The replies, checked: one per command, none an error reply, each `BITFIELD`'s as many
    /// integers as it has fields ([`push_fields`](Self::push_fields)).
    pub(super) fn check(&self, replies: Vec<Value>) -> Result<Vec<Value>, Error> {
        if replies.len() != self.len() {
            return Err(Error::corrupt(
                self.first_key(),
                format!("{} replies to {} commands", replies.len(), self.len()),
            ));
        }
        for (i, reply) in replies.iter().enumerate() {
            if let Value::ServerError(err) = reply
                && !self.errors_per_command
            {
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

    /// The commands as one pipeline, whose error replies come back among the others
    /// ([`check`](Self::check) then reads them).
    pub(super) fn pipeline(&self) -> &redis::Pipeline {
        &self.pipe
    }
}
