//! [`Lua`]: a script the structures run, with its SHA-1 for `EVALSHA`. Every script goes
//! through [`Batch::push_script`](crate::server::Batch::push_script), the one runner: sent as
//! `EVALSHA`, and as `EVAL` again for a server that answers `NOSCRIPT` (a restart, a
//! `SCRIPT FLUSH`, a failover, a cluster node that never ran it).

/// A script's source and its hash.
pub(crate) struct Lua {
    source: &'static str,
    script: redis::Script,
}

impl Lua {
    /// The script `source`, called `name` (for the fuzz targets' judgement of its replies).
    pub(crate) fn new(name: &'static str, source: &'static str) -> Self {
        let script = redis::Script::new(source);
        #[cfg(any(test, fuzzing))]
        named().lock().unwrap_or_else(|e| e.into_inner()).push((
            script.get_hash().to_owned(),
            source,
            name,
        ));
        #[cfg(not(any(test, fuzzing)))]
        let _ = name;
        Self { source, script }
    }

    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// The SHA-1 `EVALSHA` names it by.
    pub(crate) fn sha(&self) -> &str {
        self.script.get_hash()
    }
}

/// Every script made so far: its SHA-1, source and name.
#[cfg(any(test, fuzzing))]
fn named() -> &'static std::sync::Mutex<Vec<(String, &'static str, &'static str)>> {
    static NAMED: std::sync::Mutex<Vec<(String, &'static str, &'static str)>> =
        std::sync::Mutex::new(Vec::new());
    &NAMED
}

/// The name of the script that `EVALSHA` or `EVAL` names by `arg` (its SHA-1 or its source).
#[cfg(any(test, fuzzing))]
pub(crate) fn name_of(arg: &[u8]) -> Option<&'static str> {
    named()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(sha, source, _)| sha.as_bytes() == arg || source.as_bytes() == arg)
        .map(|(_, _, name)| *name)
}
