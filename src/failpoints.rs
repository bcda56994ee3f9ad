//! Pause points for the crate's own tests: compiled only with the `failpoints` feature (off by
//! default, not part of the API; the README's test command turns it on with `--all-features`).
//!
//! A test *arms* a hook on one of its threads; when that thread reaches a named point in the
//! crate's code (`failpoint!("semi.compact.swapped")`), the hook runs with the point's name, and
//! can block there (on a channel) until the test has done what it wants done at exactly that
//! step: a lookup from another thread while a compaction is between its swap and its removal,
//! a rotation while a save holds the lock. The hook belongs to the thread that armed it, so the
//! tests that run side by side in one test binary never trip each other's points, and a thread
//! that armed none pays one thread-local read per point.
//!
//! The points, by name (each names its module and the step it sits after):
//!
//! | point | where |
//! | --- | --- |
//! | `semi.compact.taken` | a compaction has read its batch from the pending set, before it builds the new snapshot |
//! | `semi.compact.swapped` | the new snapshot is published, before the batch leaves the pending set |
//! | `semi.compact.removed` | the batch has left the pending set, before its summary slots are lowered |
//! | `windowed.rotate.lock` | `rotate` has cleared the spare and is about to take the rotation lock (a save holds it) |
//! | `sync.lock.wait` | a blocking lock (`rotate` of a window, a save of a window or a semi-concurrent filter) found its mutex held, before it waits for it |
//! | `windowed.insert.writing` | an insert found the item in no live generation (or saw a rotation) and is about to set its bits in the generation it read, before its `fetch_or` |
//! | `windowed.insert.written` | an insert has set its bits in the current generation, before it reads the epoch again |
//! | `growing.insert.writing` | an insert has read the layers and picked the newest, before it sets its bits there |
//! | `growing.insert.written` | an insert has set its bits in the newest layer, before it checks that no growth began |
//! | `atomic.union.word` | `union` read a word of this filter that lacks bits of the other's, before its `fetch_or` |
//! | `save.temp.created` | a save to a path created its temporary file, before it writes a byte |
//! | `save.temp.written` | a save to a path wrote the whole file to its temporary file, before the rename |

use std::cell::RefCell;

type Hook = Box<dyn FnMut(&'static str)>;

std::thread_local! {
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs `hook` with the name of each pause point this thread reaches, until the returned guard
/// is dropped (arming again replaces the hook). The hook runs on this thread, in the middle of
/// the crate's operation: it may block, and it may call into the crate (a point reached from
/// inside the hook does not run it again).
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "failpoints")] {
/// let reached = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
/// let log = reached.clone();
/// let _armed = seen::failpoints::arm(move |point| log.borrow_mut().push(point));
/// let f = seen::SemiConcurrentBloomFilter::with_capacity(100, 0.01)?;
/// f.insert("a");
/// f.compact();
/// assert_eq!(
///     *reached.borrow(),
///     ["semi.compact.taken", "semi.compact.swapped", "semi.compact.removed"]
/// );
/// # }
/// # Ok::<(), seen::Error>(())
/// ```
#[must_use = "the hook is disarmed when the guard is dropped"]
pub fn arm(hook: impl FnMut(&'static str) + 'static) -> Armed {
    HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    Armed(std::marker::PhantomData)
}

/// Keeps this thread's hook armed; dropping it disarms the hook. Not `Send`: it belongs to the
/// thread that armed it.
#[derive(Debug)]
pub struct Armed(std::marker::PhantomData<*const ()>);

impl Drop for Armed {
    fn drop(&mut self) {
        HOOK.with(|h| h.borrow_mut().take());
    }
}

/// The point `name` is reached on this thread: runs the armed hook, if any.
pub(crate) fn reach(name: &'static str) {
    // Taken out while it runs: a point reached from inside the hook finds none.
    let Some(mut hook) = HOOK.with(|h| h.borrow_mut().take()) else {
        return;
    };
    hook(name);
    HOOK.with(|h| {
        let mut slot = h.borrow_mut();
        // Unless the hook armed another meanwhile.
        if slot.is_none() {
            *slot = Some(hook);
        }
    });
}
