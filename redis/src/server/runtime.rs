//! How the blocking API runs the async driver: [`Server::block_on`], on the calling thread,
//! inside a one-thread tokio runtime of the server's own that drives its sockets and timers.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use super::{Server, Slot};
use crate::Error;

/// The blocking API's runtime: one worker thread, which drives the sockets and timers of the
/// futures that [`Server::block_on`] polls on the callers' threads.
pub(super) struct Driver(Option<tokio::runtime::Runtime>);

impl Drop for Driver {
    fn drop(&mut self) {
        // Not `Runtime::drop`, which panics in an async context (the last handle of a server
        // dropped in a task): the worker is told to stop and not waited for.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// [`Server::block_on`]'s waker: wakes the thread that polls the future.
pub(super) struct Unpark {
    pub(super) thread: std::thread::Thread,
    pub(super) woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

impl Server {
    /// Runs `fut` to its end on the calling thread, inside this server's runtime (started
    /// here if it is not yet), whose worker drives the sockets and timers `fut` waits on: the
    /// blocking API, on any thread, also inside another tokio runtime (where
    /// `Runtime::block_on` would panic). The thread sleeps while `fut` waits.
    ///
    /// If the runtime cannot be started (no thread or file descriptor left), `fut` is polled
    /// outside any runtime: [`request`](Self::request) then fails with
    /// [`Error::Connection`], and the next call tries again. A replaying server (the fuzz
    /// targets') starts no runtime.
    pub(crate) fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let runtime = if self.replays() {
            None
        } else {
            self.driver().ok()
        };
        let _entered = runtime.map(|runtime| runtime.handle().enter());
        let unpark = Arc::new(Unpark {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        });
        let waker = Waker::from(Arc::clone(&unpark));
        let mut cx = Context::from_waker(&waker);
        // Unconstrained: inside a task of another runtime, tokio's budget for that task would
        // run out while `fut` is polled here, and every resource would answer "not ready"
        // (waking at once) for good.
        let mut fut = pin!(tokio::task::unconstrained(fut));
        loop {
            if let Poll::Ready(output) = fut.as_mut().poll(&mut cx) {
                return output;
            }
            // A wake that came while `fut` was polled is not lost: the flag holds it. `park`
            // may also return for no reason, hence the loop.
            while !unpark.woken.swap(false, Ordering::Acquire) {
                std::thread::park();
            }
        }
    }

    /// Runs `fut` in a task on this server's own runtime (started if it is not yet), which
    /// lives as long as the server: `false`, and nothing spawned, if it cannot be started or
    /// the server replays canned replies.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) -> bool {
        if self.replays() {
            return false;
        }
        match self.driver() {
            Ok(runtime) => {
                drop(runtime.spawn(fut));
                true
            }
            Err(_) => false,
        }
    }

    /// The blocking API's runtime, started if it is not yet.
    pub(super) fn driver(&self) -> Result<&tokio::runtime::Runtime, Error> {
        if let Some(Driver(Some(runtime))) = self.inner.driver.get() {
            return Ok(runtime);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("seen-redis")
            .enable_all()
            .build()
            .map_err(|e| Error::from_redis("(runtime)", e.into()))?;
        // Wrapped before a race is decided: a runtime that lost it is dropped as a `Driver`.
        let driver = Driver(Some(runtime));
        match self.inner.driver.get_or_init(|| driver) {
            Driver(Some(runtime)) => Ok(runtime),
            Driver(None) => Err(Error::from_redis(
                "(runtime)",
                std::io::Error::other("the runtime was shut down").into(),
            )),
        }
    }

    /// An error unless the caller is inside a tokio runtime: an `_async` method called
    /// outside one, or a blocking call (on `slot`) whose runtime could not be started.
    pub(super) fn in_runtime(&self, slot: &Mutex<Slot>, key: &str) -> Result<(), Error> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Ok(());
        }
        let why = if std::ptr::eq(slot, &self.inner.blocking) {
            // Tried again, for its error.
            match self.driver() {
                Err(Error::Connection { source, .. }) => format!(
                    "the client's runtime did not start (out of threads or file descriptors?): {source}"
                ),
                _ => "the client's runtime did not start".to_owned(),
            }
        } else {
            "an `_async` method was called outside a tokio runtime".to_owned()
        };
        Err(Error::from_redis(key, std::io::Error::other(why).into()))
    }
}
