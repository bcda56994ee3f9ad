//! Allocation failure: one line on standard error and status 2, not an abort.
//!
//! The standard library answers a failed allocation by printing a line and aborting the
//! process (SIGABRT, a core dump where they are enabled), and the stable language has no hook
//! to do otherwise. So the command's allocator is the system's, wrapped: when the system
//! refuses an allocation, it prints `seen: out of memory ...` and exits with status 2, like
//! any other failure of the command, unless the allocation was made inside [`fallible`],
//! where the caller handles the refusal itself (`try_reserve`, the library's constructors,
//! which return `Error::AllocationFailed`) and reports it in its own words.
//!
//! One of the command's two modules with `unsafe` (`os.rs`, its system calls, is the other):
//! `GlobalAlloc` is an unsafe trait, and each method only forwards its arguments to `System`'s.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::OnceLock;

/// The run's `--state`, if it has one: the out-of-memory line says that it was not saved (the
/// run cannot save it: that takes memory, and the allocator cannot give it back to the run).
static STATE: OnceLock<String> = OnceLock::new();

/// Names the run's `--state` for the out-of-memory line.
pub(crate) fn note_state(path: &std::path::Path) {
    let _ = STATE.set(path.display().to_string());
}

/// The system allocator, with failures reported (see the module docs).
struct Reporting;

#[global_allocator]
static ALLOCATOR: Reporting = Reporting;

thread_local! {
    /// Whether this thread is inside [`fallible`]. Const-initialized, without a destructor:
    /// reading it never allocates.
    static FALLIBLE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with allocation failures returned to their caller (a `try_reserve` then fails,
/// a library constructor returns its error) instead of ending the process. An allocation in
/// `f` that cannot fail gracefully still aborts, as in any Rust program.
pub(crate) fn fallible<T>(f: impl FnOnce() -> T) -> T {
    /// Puts the outer setting back, also if `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            FALLIBLE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(FALLIBLE.with(|c| c.replace(true)));
    f()
}

/// Checks the system's answer for `size` bytes: a null pointer ends the process with one
/// line, unless inside [`fallible`].
#[inline]
fn checked(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() && !FALLIBLE.with(Cell::get) {
        out_of_memory(size);
    }
    ptr
}

#[cold]
#[inline(never)]
pub(crate) fn out_of_memory(size: usize) -> ! {
    // Formatted on the stack, and the state's name was formatted at the start: nothing here
    // allocates. One line, as every failure of the command.
    let mut line = [0u8; 128];
    let mut cursor = std::io::Cursor::new(&mut line[..]);
    let _ = write!(
        cursor,
        "seen: out of memory (the system refused {size} bytes more)"
    );
    let end = cursor.position() as usize;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(&line[..end]);
    if let Some(state) = STATE.get() {
        let _ = err.write_all(b"; the state ");
        let _ = err.write_all(state.as_bytes());
        let _ = err.write_all(
            b" is not saved (saving takes memory): it holds what it held before this run, \
              and the next run prints this run's records again",
        );
    }
    let _ = err.write_all(b"\n");
    std::process::exit(2);
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; `checked` either returns `System`'s pointer unchanged or does not
// return at all (it exits the process), so no caller ever sees a pointer `System` did not give.
unsafe impl GlobalAlloc for Reporting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout` is the same for `System`.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller's contract for
        // `new_size` is the same for `System`.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inside `fallible`, a refused allocation is the caller's to handle.
    #[test]
    fn a_refused_try_reserve_inside_fallible_is_an_error() {
        let mut v: Vec<u8> = Vec::new();
        let refused = fallible(|| v.try_reserve(isize::MAX as usize / 2));
        assert!(refused.is_err());
        assert!(!FALLIBLE.with(Cell::get), "restored");
        // Nested: the outer setting comes back.
        fallible(|| {
            fallible(|| {});
            assert!(FALLIBLE.with(Cell::get));
        });
    }
}
