//! A state file of `seen dedup` is the library's structure, with the library's key identity:
//! loaded in a program, it answers `contains("line")` and `contains(b"line")` for every line the
//! command saw. And a state file of the version before the library's default hasher was renamed
//! keeps working: the command converts it, and its next save carries the current name.

mod common;

use std::hash::Hash;
use std::path::Path;
use std::time::Duration;

use common::{scratch, seen};
use seen::hash::{Hash128, HasherIdentity, ItemHasher, StableHasher};
use seen::{AtomicBloomFilter, GrowingBloomFilter, Layout, OverwriteMap, WindowedBloomFilter};

/// A directory of this test's own, emptied.
/// The lines of the tests: plain, with spaces and tabs, non-ASCII, long (past the hasher's
/// inline buffer), and numbers that are not integers to the command (it keys by bytes).
fn lines(n: usize) -> Vec<String> {
    let mut lines: Vec<String> = (0..n).map(|i| format!("line-{i}")).collect();
    lines.extend([
        "a line with spaces\tand a tab".to_owned(),
        "clé-ünïcødé-键".to_owned(),
        format!("https://example.com/{}", "p/".repeat(300)),
        "42".to_owned(),
    ]);
    lines
}

fn input(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect()
}

/// One configuration of `seen dedup` and the library type it saves (the same flags for
/// every run on a state, or the command refuses the state).
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `--fixed`: a fixed-size filter (an `AtomicBloomFilter`, line layout).
    Fixed,
    /// The default: a `GrowingBloomFilter`.
    Grow,
    /// `--window 2d --period 1d`: a `WindowedBloomFilter`.
    Window,
    /// `--remember 100000`: an `OverwriteMap`.
    Remember,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Fixed, Mode::Grow, Mode::Window, Mode::Remember];

    fn flags(self) -> Vec<&'static str> {
        let mut flags = vec!["--capacity", "1000"];
        flags.extend(match self {
            Mode::Fixed => &["--fixed"][..],
            Mode::Grow => &[][..],
            Mode::Window => &["--window", "2d", "--period", "1d"][..],
            Mode::Remember => &["--remember", "100000"][..],
        });
        flags
    }

    /// The state at `path`, loaded by the library's default loader, as a lookup of any item
    /// and of a hash.
    fn load(self, path: &Path) -> Box<dyn Fn(Key<'_>) -> bool> {
        fn lookups<F: 'static>(
            f: F,
            item: impl Fn(&F, &str) -> bool + 'static,
            bytes: impl Fn(&F, &[u8]) -> bool + 'static,
            hash: impl Fn(&F, &[u8]) -> bool + 'static,
        ) -> Box<dyn Fn(Key<'_>) -> bool> {
            Box::new(move |key| match key {
                Key::Str(s) => item(&f, s),
                Key::Bytes(b) => bytes(&f, b),
                Key::Record(b) => hash(&f, b),
            })
        }
        macro_rules! lookups_of {
            ($filter:expr) => {
                lookups(
                    $filter,
                    |f, s| f.contains(s),
                    |f, b| f.contains(b) && f.contains(&b.to_vec()),
                    |f, b| f.contains_hash(f.hasher().hash_bytes(b)),
                )
            };
        }
        match self {
            Mode::Fixed => lookups_of!(AtomicBloomFilter::load(path).unwrap()),
            Mode::Grow => lookups_of!(GrowingBloomFilter::load(path).unwrap()),
            Mode::Window => lookups_of!(WindowedBloomFilter::load(path).unwrap()),
            Mode::Remember => lookups_of!(OverwriteMap::load(path).unwrap()),
        }
    }
}

/// A key as a program looks it up: `contains("line")`, `contains(b"line")` (and its
/// `Vec<u8>`), or the hash the command computed (`hash_bytes` of the record's key).
#[derive(Clone, Copy)]
enum Key<'a> {
    Str(&'a str),
    Bytes(&'a [u8]),
    Record(&'a [u8]),
}

/// `seen dedup --state F` of some lines, in every mode; F loaded by the library answers
/// `contains` for every line as a `&str`, as bytes, and as the command's own hash; and not for
/// a line it did not see.
#[test]
fn a_state_file_answers_contains_of_each_line_as_str_and_as_bytes() {
    let dir = scratch("state");
    let lines = lines(200);
    for mode in Mode::ALL {
        let state = dir.join(format!("{mode:?}.seen"));
        let mut args = vec!["dedup", "--state", state.to_str().unwrap()];
        args.extend(mode.flags());
        let out = seen(&args, &input(&lines));
        assert!(out.status.success(), "{mode:?}: {out:?}");
        assert_eq!(out.stdout, input(&lines), "{mode:?}");
        let contains = mode.load(&state);
        for line in &lines {
            for (form, key) in [
                ("&str", Key::Str(line)),
                ("bytes", Key::Bytes(line.as_bytes())),
                ("hash_bytes", Key::Record(line.as_bytes())),
            ] {
                assert!(contains(key), "{mode:?}: {line:?} not found as {form}");
            }
        }
        assert!(!contains(Key::Str("not a line")), "{mode:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The default hasher as the version before the rename named itself: the same `hash_bytes`
/// (the only hash the command ever inserted), under the old name `"seen/xxh3-128"`.
#[derive(Clone, Copy, Debug)]
struct RetiredDefault;

impl ItemHasher for RetiredDefault {
    fn hash_item<T: Hash + ?Sized>(&self, _item: &T) -> Hash128 {
        unreachable!("the command hashes its keys with hash_bytes")
    }
    fn hash_bytes(&self, bytes: &[u8]) -> Hash128 {
        StableHasher::new().hash_bytes(bytes)
    }
    fn identity(&self) -> Option<HasherIdentity> {
        Some(HasherIdentity::new("seen/xxh3-128", 0))
    }
}

/// Writes, at `path`, the state the command of the version before the rename would have saved
/// in `mode` after seeing `lines`.
fn retired_state(mode: Mode, path: &Path, lines: &[String]) {
    let h = RetiredDefault;
    let hashes = lines.iter().map(|l| h.hash_bytes(l.as_bytes()));
    match mode {
        Mode::Fixed => {
            let f = AtomicBloomFilter::builder(1000)
                .fpr(1e-4)
                .layout(Layout::Line)
                .hasher(h)
                .build()
                .unwrap();
            hashes.for_each(|x| _ = f.insert_hash(x));
            f.save(path).unwrap();
        }
        Mode::Grow => {
            let f = GrowingBloomFilter::builder(1000)
                .fpr(1e-4)
                .layout(Layout::Line)
                .hasher(h)
                .build()
                .unwrap();
            hashes.for_each(|x| _ = f.insert_hash(x).unwrap());
            f.save(path).unwrap();
        }
        Mode::Window => {
            let f = WindowedBloomFilter::builder(1000)
                .fpr(1e-4)
                .periods(2)
                .rotate_every_aligned(Duration::from_secs(86_400))
                .hasher(h)
                .build()
                .unwrap();
            hashes.for_each(|x| _ = f.insert_hash(x));
            f.save(path).unwrap();
        }
        Mode::Remember => {
            let buckets = seen::sizing::overwrite_buckets(100_000, 0.9).unwrap();
            let m = OverwriteMap::builder(buckets).hasher(h).build().unwrap();
            hashes.for_each(|x| _ = m.insert_hash(x));
            m.save(path).unwrap();
        }
    }
}

/// A state written before the default hasher was renamed: the library refuses it (it cannot
/// know that only `hash_bytes` went in), `seen dedup --state` loads it (the command only ever
/// inserted `hash_bytes`), drops its lines as duplicates, prints the new ones, and saves the
/// state under the current name, which the library then loads and asks with `contains("line")`.
#[test]
fn a_state_of_the_retired_hasher_still_drops_its_lines_and_is_saved_converted() {
    let dir = scratch("retired");
    let old = lines(100);
    let new: Vec<String> = (0..50).map(|i| format!("new-{i}")).collect();
    for mode in Mode::ALL {
        let state = dir.join(format!("{mode:?}.seen"));
        retired_state(mode, &state, &old);
        let refused = match mode {
            Mode::Fixed => AtomicBloomFilter::load(&state).map(drop),
            Mode::Grow => GrowingBloomFilter::load(&state).map(drop),
            Mode::Window => WindowedBloomFilter::load(&state).map(drop),
            Mode::Remember => OverwriteMap::load(&state).map(drop),
        };
        assert_eq!(
            refused,
            Err(seen::Error::RetiredHasher {
                file: HasherIdentity::new("seen/xxh3-128", 0)
            }),
            "{mode:?}"
        );
        let mut args = vec!["dedup", "--state", state.to_str().unwrap()];
        args.extend(mode.flags());
        // Every old line, with a new one after each of the first 50.
        let mut mixed = Vec::new();
        for (i, line) in old.iter().enumerate() {
            mixed.push(line.clone());
            mixed.extend(new.get(i).cloned());
        }
        let out = seen(&args, &input(&mixed));
        assert!(
            out.status.success(),
            "{mode:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(input(&new)).unwrap(),
            "{mode:?}: the old state's lines are duplicates"
        );
        let contains = mode.load(&state);
        for line in old.iter().chain(&new) {
            assert!(
                contains(Key::Str(line)),
                "{mode:?}: {line:?} after the conversion"
            );
            assert!(contains(Key::Bytes(line.as_bytes())), "{mode:?}: {line:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
