//! Saving to and loading from paths: a save replaces the file whole and leaves no temporary
//! file, takes any name the file system takes, a named pipe loads as a stream, and I/O failures
//! are errors that name the path.

mod common;

use common::files::{bloom, bytes_of, files_in, scratch};
use seen::{AtomicBloomFilter, Corruption, Error, Layout};

#[test]
fn save_replaces_the_file_whole_and_leaves_no_temporary_file() {
    let dir = scratch("save");
    let path = dir.join("filter.seen");
    let first = bloom(10_000, 0.01, Layout::Word);
    first.insert("first");
    first.save(&path).unwrap();
    let second = bloom(20_000, 0.01, Layout::Line);
    second.insert("second");
    second.save(&path).unwrap();
    assert_eq!(files_in(&dir), ["filter.seen"]);
    let loaded = AtomicBloomFilter::load(&path).unwrap();
    assert_eq!(loaded.sizing(), second.sizing());
    assert!(loaded.contains("second"));
    assert_eq!(std::fs::read(&path).unwrap(), bytes_of(&second));

    // A relative path in the current directory works too (the parent is "").
    let relative = format!("seen-persist-relative-{}.seen", std::process::id());
    first.save(&relative).unwrap();
    assert!(
        AtomicBloomFilter::load(&relative)
            .unwrap()
            .contains("first")
    );
    std::fs::remove_file(&relative).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The temporary file's name must fit the file system's limit (255 bytes on the usual ones)
/// whenever the target's does: a 250-byte name, and a non-UTF-8 one that a lossy conversion
/// would triple, both save.
#[test]
fn save_takes_any_file_name_the_file_system_takes() {
    let dir = scratch("long-name");
    let filter = bloom(1000, 0.01, Layout::Word);
    filter.insert("a");
    let mut names = vec![std::ffi::OsString::from("n".repeat(250))];
    #[cfg(unix)]
    names.push(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&[0xff; 200]).to_os_string(),
    );
    for name in names {
        let path = dir.join(&name);
        filter.save(&path).unwrap();
        assert!(AtomicBloomFilter::load(&path).unwrap().contains("a"));
        std::fs::remove_file(&path).unwrap();
        assert!(files_in(&dir).is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A path that is not a regular file (a named pipe: `load <(zcat filter.seen.gz)`) has no
/// length to check the header against (its metadata says 0): it is read as a stream, not
/// refused as truncated.
#[cfg(unix)]
#[test]
fn load_reads_a_named_pipe_as_a_stream() {
    let dir = scratch("fifo");
    let pipe = dir.join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here: nothing to test
    }
    let filter = bloom(1000, 0.01, Layout::Line);
    filter.insert("a");
    for extra in [&[][..], &[0][..]] {
        let mut file = bytes_of(&filter);
        file.extend_from_slice(extra);
        let writer = {
            let pipe = pipe.clone();
            std::thread::spawn(move || std::fs::write(pipe, file))
        };
        let loaded = AtomicBloomFilter::load(&pipe);
        let _ = writer.join().unwrap(); // a broken pipe if the load stopped early
        if extra.is_empty() {
            assert!(loaded.unwrap().contains("a"));
        } else {
            assert_eq!(
                loaded.unwrap_err(),
                Error::Corrupt(Corruption::TrailingBytes)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn io_failures_are_errors_that_name_the_path() {
    let dir = scratch("io");
    let missing = dir.join("no-such-file.seen");
    match AtomicBloomFilter::load(&missing) {
        Err(e @ Error::Io { .. }) => {
            let Error::Io {
                kind,
                message,
                source,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(*kind, std::io::ErrorKind::NotFound);
            assert!(message.contains("no-such-file.seen"), "{message}");
            // The operating system's error itself, not only its text.
            assert_eq!(source.get().kind(), std::io::ErrorKind::NotFound);
            assert_eq!(source.get().raw_os_error(), Some(2), "{source:?}");
            let chained = std::error::Error::source(&e).expect("a source");
            let io = chained
                .downcast_ref::<std::io::Error>()
                .expect("an io::Error");
            assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    let filter = bloom(1000, 0.01, Layout::Word);
    let nowhere = dir.join("no-such-dir").join("f.seen");
    match filter.save(&nowhere) {
        Err(Error::Io { message, .. }) => assert!(message.contains("no-such-dir"), "{message}"),
        other => panic!("{other:?}"),
    }
    // A directory is not a filter file.
    assert!(matches!(
        AtomicBloomFilter::load(&dir),
        Err(Error::Io { .. })
    ));
    // Nor can one be saved over: the rename fails after the whole file was written, and the
    // temporary file is removed.
    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken").join("inside"), b"x").unwrap();
    match filter.save(dir.join("taken")) {
        Err(Error::Io { message, .. }) => assert!(message.contains("taken"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(files_in(&dir), ["taken"]);
    assert_eq!(files_in(&dir.join("taken")), ["inside"]);
    // A writer that fails midway: the error is returned, not a panic.
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 < buf.len() {
                return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
            }
            self.0 -= buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let big = bloom(1_000_000, 0.01, Layout::Word);
    for room in [0, 100, 5000, 1 << 20] {
        assert!(matches!(big.write_to(Full(room)), Err(Error::Io { .. })));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `Error::Io` keeps the writer's or reader's own `io::Error` as its source, whole: a caller
/// can downcast to the error its own writer raised, not only read its text.
#[test]
fn an_io_error_keeps_the_io_error_as_its_source() {
    #[derive(Debug)]
    struct DiskOnFire;
    impl std::fmt::Display for DiskOnFire {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("disk on fire")
        }
    }
    impl std::error::Error for DiskOnFire {}
    struct Burning;
    impl std::io::Write for Burning {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other(DiskOnFire))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl std::io::Read for Burning {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other(DiskOnFire))
        }
    }
    let filter = bloom(1000, 0.01, Layout::Word);
    for e in [
        filter.write_to(Burning).unwrap_err(),
        AtomicBloomFilter::read_from(Burning).unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                Error::Io {
                    kind: std::io::ErrorKind::Other,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "disk on fire");
        let io = e.io_error().expect("the io::Error");
        assert!(
            io.get_ref().is_some_and(|inner| inner.is::<DiskOnFire>()),
            "{io:?}"
        );
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.is::<std::io::Error>(), "{source:?}");
        // Clones share it, and compare equal.
        assert_eq!(e.clone(), e);
    }
}

/// `read_words` and `union_words` refuse a range past the last word with an error that names
/// it, and touch nothing (they panicked as slice indexing does).
#[test]
fn words_out_of_range_are_an_error_not_a_panic() {
    let filter = bloom(1000, 0.01, Layout::Word);
    filter.insert("kept");
    let words = filter.bit_len() / 64;
    let mut out = vec![7u64; 4];
    for first in [words - 3, words, u64::MAX, u64::MAX - 1] {
        let e = filter.read_words(first, &mut out).unwrap_err();
        assert_eq!(
            e,
            Error::WordsOutOfRange {
                first,
                len: 4,
                words
            }
        );
        assert!(e.to_string().contains("pass the end"), "{e}");
        assert_eq!(out, [7; 4], "a refused read wrote into the buffer");
        assert!(filter.union_words(first, &[u64::MAX; 4]).is_err());
    }
    // Nothing was unioned: a filter of all ones would hold every item.
    assert!(!filter.contains("never inserted, absent unless a 1% false positive"));
    filter.read_words(words - 4, &mut out).unwrap();
    filter.read_words(words, &mut []).unwrap();
    filter.union_words(0, &[]).unwrap();
}
