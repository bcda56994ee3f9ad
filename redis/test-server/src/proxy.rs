//! [`Proxy`]: a Unix-socket proxy between one client and a [`RedisServer`] that holds (or cuts)
//! the first client request matching a rule, so that a test can change the server's state
//! between two requests of one library call, deterministically, without `CLIENT PAUSE` (which
//! would hold the test's own writes too).

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::{RedisServer, TempDir};

/// How long [`Proxy::wait_held`] waits.
const LIMIT: Duration = Duration::from_secs(60);

/// Whether `chunk` (bytes a client sent) holds the RESP bulk string `word` exactly: a rule's
/// test for a command or an argument.
pub fn has(chunk: &[u8], word: &str) -> bool {
    let needle = format!("\r\n{word}\r\n");
    chunk.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Whether `chunk` is a script call (`EVALSHA` or `EVAL`) on the shards of the structure
/// `name`: one whose keys do not include its description `seen:{NAME}:meta` (a shard's
/// creation, an upload's merge), not one on the description (a creation's reading of the
/// server's time, its end, a destroy).
pub fn shard_script(chunk: &[u8], name: &str) -> bool {
    (has(chunk, "EVALSHA") || has(chunk, "EVAL")) && !has(chunk, &format!("seen:{{{name}}}:meta"))
}

/// What the proxy does with the request its armed rule matches.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    /// Hold the request until [`Proxy::release`].
    Hold,
    /// Close the connection instead of forwarding the request (a server gone mid-call).
    Cut,
}

type Rule = (Box<dyn Fn(&[u8]) -> bool + Send>, usize, Action);

#[derive(Default)]
struct GateState {
    rule: Option<Rule>,
    held: bool,
    released: bool,
}

type Gate = Arc<(Mutex<GateState>, Condvar)>;

/// A Unix-socket proxy to a [`RedisServer`]: every byte forwarded as is, except the first
/// client request (one read of the client's socket: the blocking client writes a request in
/// one go) that the armed rule matches.
pub struct Proxy {
    _dir: TempDir,
    url: String,
    gate: Gate,
}

impl Proxy {
    /// A proxy to `redis`, listening on a socket of its own ([`url`](Self::url)).
    pub fn start(redis: &RedisServer) -> Self {
        let dir = TempDir::new("proxy");
        let path = dir.path().join("proxy.sock");
        let upstream = redis.url().strip_prefix("unix://").unwrap().to_owned();
        let listener = UnixListener::bind(&path).unwrap();
        let gate: Gate = Arc::default();
        let g = gate.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = UnixStream::connect(&upstream) else {
                    continue;
                };
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut &s2, &mut &c2);
                    let _ = c2.shutdown(Shutdown::Both);
                });
                let g = g.clone();
                std::thread::spawn(move || pump(client, server, &g));
            }
        });
        Self {
            url: format!("unix://{}", path.display()),
            _dir: dir,
            gate,
        }
    }

    /// Arms the rule: the request after `skip` others that `matches`, gets `action`.
    pub fn arm(
        &self,
        matches: impl Fn(&[u8]) -> bool + Send + 'static,
        skip: usize,
        action: Action,
    ) {
        let mut st = self.gate.0.lock().unwrap();
        st.rule = Some((Box::new(matches), skip, action));
        st.held = false;
        st.released = false;
    }

    /// Waits (up to a minute) until the armed rule holds a request.
    pub fn wait_held(&self) {
        let (lock, cvar) = &*self.gate;
        let deadline = Instant::now() + LIMIT;
        let mut st = lock.lock().unwrap();
        while !st.held {
            assert!(Instant::now() < deadline, "the proxy never held a request");
            st = cvar.wait_timeout(st, Duration::from_millis(50)).unwrap().0;
        }
    }

    /// Lets the held request (and every later one) through.
    pub fn release(&self) {
        let (lock, cvar) = &*self.gate;
        lock.lock().unwrap().released = true;
        cvar.notify_all();
    }

    /// The URL a client connects to the proxy by.
    pub fn url(&self) -> String {
        self.url.clone()
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn pump(mut client: UnixStream, mut server: UnixStream, gate: &Gate) {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let action = {
            let (lock, cvar) = &**gate;
            let mut st = lock.lock().unwrap();
            let mut action = None;
            if let Some((matches, skip, a)) = &mut st.rule
                && matches(chunk)
            {
                if *skip == 0 {
                    action = Some(*a);
                } else {
                    *skip -= 1;
                }
            }
            if action.is_some() {
                st.rule = None;
            }
            if action == Some(Action::Hold) {
                st.held = true;
                cvar.notify_all();
                while !st.released {
                    st = cvar.wait(st).unwrap();
                }
            }
            action
        };
        if action == Some(Action::Cut) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
            return;
        }
        if server.write_all(chunk).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Write);
}
