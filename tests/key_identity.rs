//! One key identity everywhere: a key a user would call the same, in any of the forms below, is
//! one item in every structure, after a save and a load, and as the `seen` command inserts it
//! (`insert_hash(hasher.hash_bytes(record))`). Integers and derived-`Hash` items keep working
//! and stay apart.

use std::borrow::Cow;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash};
use std::rc::Rc;
use std::sync::Arc;

use seen::hash::{ItemHasher, StableHasher};
use seen::{
    AtomicBloomFilter, ExactOverwriteMap, GrowingBloomFilter, Layout, OverwriteMap,
    SemiConcurrentBloomFilter, WindowedBloomFilter,
};

/// `body` with `$x` bound to a reference to each form of one key, as `[(form, body)]`: the key
/// as `$text` (a `&'static str`) and as `$array` (a `&[u8; N]` of the same bytes).
macro_rules! each_form {
    ($text:expr, $array:expr, |$x:ident| $body:expr) => {{
        let text: &str = $text;
        let array = $array;
        assert_eq!(&array[..], text.as_bytes());
        let bytes: &[u8] = text.as_bytes();
        [
            ("&str", {
                let $x = text;
                $body
            }),
            ("&&str", {
                let $x = &text;
                $body
            }),
            ("String", {
                let $x = &String::from(text);
                $body
            }),
            ("Box<str>", {
                let $x = &Box::<str>::from(text);
                $body
            }),
            ("Rc<str>", {
                let $x = &Rc::<str>::from(text);
                $body
            }),
            ("Arc<str>", {
                let $x = &Arc::<str>::from(text);
                $body
            }),
            ("Cow<str>", {
                let $x = &Cow::<str>::Owned(text.to_owned());
                $body
            }),
            ("&[u8]", {
                let $x = bytes;
                $body
            }),
            ("&&[u8]", {
                let $x = &bytes;
                $body
            }),
            ("Vec<u8>", {
                let $x = &bytes.to_vec();
                $body
            }),
            ("[u8; N]", {
                let $x = array;
                $body
            }),
            ("Box<[u8]>", {
                let $x = &Box::<[u8]>::from(bytes);
                $body
            }),
            ("Rc<[u8]>", {
                let $x = &Rc::<[u8]>::from(bytes);
                $body
            }),
            ("Arc<[u8]>", {
                let $x = &Arc::<[u8]>::from(bytes);
                $body
            }),
            ("Cow<[u8]>", {
                let $x = &Cow::<[u8]>::Borrowed(bytes);
                $body
            }),
        ]
    }};
}

/// A structure as the table uses it: insert and look up any `Hash` item, insert a hash as the
/// `seen` command does, and come back from a save.
trait Subject: Sized {
    fn insert<T: Hash + ?Sized>(&self, item: &T);
    fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool;
    /// `insert_hash(hasher.hash_bytes(bytes))`: a record of the `seen` command.
    fn insert_record(&self, bytes: &[u8]);
    /// Written and read back (`write_to`, then the default hasher's `read_from`).
    fn reloaded(&self) -> Self;
}

macro_rules! subject {
    ($type:ty, $reload:expr) => {
        impl Subject for $type {
            fn insert<T: Hash + ?Sized>(&self, item: &T) {
                let _ = <$type>::insert(self, item);
            }
            fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
                <$type>::contains(self, item)
            }
            fn insert_record(&self, bytes: &[u8]) {
                let _ = self.insert_hash(self.hasher().hash_bytes(bytes));
            }
            fn reloaded(&self) -> Self {
                let mut file = Vec::new();
                self.write_to(&mut file).unwrap();
                let reload: fn(&[u8]) -> Self = $reload;
                reload(&file)
            }
        }
    };
}

subject!(AtomicBloomFilter, |file| AtomicBloomFilter::read_from(file)
    .unwrap());
impl Subject for SemiConcurrentBloomFilter {
    fn insert<T: Hash + ?Sized>(&self, item: &T) {
        SemiConcurrentBloomFilter::insert(self, item);
    }
    fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        SemiConcurrentBloomFilter::contains(self, item)
    }
    fn insert_record(&self, bytes: &[u8]) {
        // This filter has no `hasher()`: its snapshot's is the same.
        self.insert_hash(self.hasher().hash_bytes(bytes));
    }
    fn reloaded(&self) -> Self {
        let mut file = Vec::new();
        self.write_to(&mut file).unwrap();
        SemiConcurrentBloomFilter::read_from(&file[..]).unwrap()
    }
}
subject!(WindowedBloomFilter, |file| WindowedBloomFilter::read_from(
    file
)
.unwrap());
subject!(GrowingBloomFilter, |file| GrowingBloomFilter::read_from(
    file
)
.unwrap());
subject!(OverwriteMap, |file| OverwriteMap::read_from(file).unwrap());

/// A std `BuildHasher` (fixed keys, so that it can be trusted across a save).
type Sip = BuildHasherDefault<DefaultHasher>;

subject!(AtomicBloomFilter<Sip>, |file| {
    AtomicBloomFilter::read_from_trusting_hasher(file, Sip::default()).unwrap()
});

/// A semi-concurrent filter's snapshot (a `FrozenBloomFilter`): inserts go to the filter and
/// are compacted into a new snapshot, lookups to the snapshot. Reloaded, it is the snapshot's
/// own file (`FrozenBloomFilter::write_to`) loaded as the `AtomicBloomFilter` it is.
struct Frozen(SemiConcurrentBloomFilter, Option<AtomicBloomFilter>);

impl Subject for Frozen {
    fn insert<T: Hash + ?Sized>(&self, item: &T) {
        self.0.insert(item);
        self.0.compact();
    }
    fn contains<T: Hash + ?Sized>(&self, item: &T) -> bool {
        match &self.1 {
            Some(loaded) => loaded.contains(item),
            None => self.0.snapshot().contains(item),
        }
    }
    fn insert_record(&self, bytes: &[u8]) {
        self.0.insert_record(bytes);
        self.0.compact();
    }
    fn reloaded(&self) -> Self {
        let mut file = Vec::new();
        self.0.snapshot().write_to(&mut file).unwrap();
        let loaded = AtomicBloomFilter::read_from(&file[..]).unwrap();
        Frozen(self.0.reloaded(), Some(loaded))
    }
}

fn frozen() -> Frozen {
    Frozen(
        SemiConcurrentBloomFilter::with_capacity(1000, 0.01).unwrap(),
        None,
    )
}

/// Every form of `key`, inserted alone into a fresh structure from `new` (and the `seen`
/// command's way, `insert_hash(hash_bytes)`), is found under every form, and again after a save
/// and a load; a key that differs in one byte is not.
fn one_item_in_every_form<S: Subject>(name: &str, new: impl Fn() -> S) {
    macro_rules! check_key {
        ($text:expr, $array:expr) => {{
            let text: &str = $text;
            let other = format!("{text}!");
            let mut subjects: Vec<(&str, S)> = each_form!(text, $array, |x| {
                let s = new();
                s.insert(x);
                s
            })
            .into_iter()
            .collect();
            let record = new();
            record.insert_record(text.as_bytes());
            subjects.push(("insert_hash(hash_bytes)", record));
            for (inserted, subject) in subjects {
                let reloaded = subject.reloaded();
                for (state, s) in [("", &subject), (" after a save and a load", &reloaded)] {
                    for (form, found) in each_form!(text, $array, |x| s.contains(x)) {
                        assert!(
                            found,
                            "{name}: a key of {} bytes inserted as {inserted} is not found as \
                             {form}{state}",
                            text.len()
                        );
                    }
                    assert!(
                        !s.contains(&other[..]),
                        "{name}: {other:?} found where only {text:?} was inserted{state}"
                    );
                }
            }
        }};
    }
    let long = format!("https://example.com/{}", "a/".repeat(4990));
    let long_array: [u8; 10_000] = long.as_bytes().try_into().unwrap();
    let mid = "m".repeat(200);
    let mid_array: [u8; 200] = mid.as_bytes().try_into().unwrap();
    check_key!("id", b"id");
    check_key!("", b"");
    check_key!(&mid, &mid_array);
    check_key!(&long, &long_array);
}

#[test]
fn a_key_is_one_item_in_every_form_in_atomic_filters_of_both_layouts() {
    for layout in [Layout::Word, Layout::Line] {
        one_item_in_every_form(&format!("AtomicBloomFilter {layout:?}"), || {
            AtomicBloomFilter::builder(1000)
                .layout(layout)
                .build()
                .unwrap()
        });
    }
}

#[test]
fn a_key_is_one_item_in_every_form_with_a_std_build_hasher() {
    one_item_in_every_form("AtomicBloomFilter with SipHash", || {
        AtomicBloomFilter::builder(1000)
            .hasher(Sip::default())
            .build()
            .unwrap()
    });
}

#[test]
fn a_key_is_one_item_in_every_form_in_the_semi_concurrent_filter_and_its_snapshot() {
    one_item_in_every_form("SemiConcurrentBloomFilter", || {
        SemiConcurrentBloomFilter::with_capacity(1000, 0.01).unwrap()
    });
    one_item_in_every_form("FrozenBloomFilter", frozen);
}

#[test]
fn a_key_is_one_item_in_every_form_in_the_windowed_filter() {
    one_item_in_every_form("WindowedBloomFilter", || {
        WindowedBloomFilter::builder(1000)
            .periods(2)
            .rotate_manually()
            .build()
            .unwrap()
    });
}

#[test]
fn a_key_is_one_item_in_every_form_in_the_growing_filter() {
    one_item_in_every_form("GrowingBloomFilter", || {
        GrowingBloomFilter::with_capacity(100, 0.01).unwrap()
    });
}

#[test]
fn a_key_is_one_item_in_every_form_in_the_overwrite_map() {
    one_item_in_every_form("OverwriteMap", || OverwriteMap::with_buckets(1000).unwrap());
}

/// The exact map takes keys as bytes (`AsRef<[u8]>`): every form that is one is passed as it
/// is; `Box<str>`, `Rc<str>`, `Arc<str>` and `Cow<str>` are not `AsRef<[u8]>` (std gives them
/// `AsRef<str>` only), so they are passed as the `&str` they deref to. Its hash is the other
/// structures' hash of the same key: a key's hash from an `OverwriteMap` finds it.
#[test]
fn a_key_is_one_item_in_every_form_in_the_exact_map() {
    macro_rules! each_bytes_form {
        ($text:expr, $array:expr, |$x:ident| $body:expr) => {{
            let text: &str = $text;
            let bytes: &[u8] = text.as_bytes();
            [
                ("&str", {
                    let $x = text;
                    $body
                }),
                ("&&str", {
                    let $x = &text;
                    $body
                }),
                ("String", {
                    let $x = &String::from(text);
                    $body
                }),
                ("Box<str>", {
                    let $x = &*Box::<str>::from(text);
                    $body
                }),
                ("Rc<str>", {
                    let $x = &*Rc::<str>::from(text);
                    $body
                }),
                ("Arc<str>", {
                    let $x = &*Arc::<str>::from(text);
                    $body
                }),
                ("Cow<str>", {
                    let $x = &*Cow::<str>::Owned(text.to_owned());
                    $body
                }),
                ("&[u8]", {
                    let $x = bytes;
                    $body
                }),
                ("&&[u8]", {
                    let $x = &bytes;
                    $body
                }),
                ("Vec<u8>", {
                    let $x = &bytes.to_vec();
                    $body
                }),
                ("[u8; N]", {
                    let $x = $array;
                    $body
                }),
                ("Box<[u8]>", {
                    let $x = &Box::<[u8]>::from(bytes);
                    $body
                }),
                ("Rc<[u8]>", {
                    let $x = &Rc::<[u8]>::from(bytes);
                    $body
                }),
                ("Arc<[u8]>", {
                    let $x = &Arc::<[u8]>::from(bytes);
                    $body
                }),
                ("Cow<[u8]>", {
                    let $x = &Cow::<[u8]>::Borrowed(bytes);
                    $body
                }),
            ]
        }};
    }
    let map_of = |hash| {
        let map = OverwriteMap::with_buckets(1000).unwrap();
        map.insert_hash(hash);
        map
    };
    macro_rules! check_key {
        ($text:expr, $array:expr) => {{
            let text: &str = $text;
            let mut maps: Vec<(&str, ExactOverwriteMap)> = each_bytes_form!(text, $array, |x| {
                let map = ExactOverwriteMap::with_buckets(1000).unwrap();
                assert!(map.insert(x));
                map
            })
            .into_iter()
            .collect();
            let record = ExactOverwriteMap::with_buckets(1000).unwrap();
            record.insert_hashed(record.hasher().hash_bytes(text.as_bytes()), text);
            maps.push(("insert_hash(hash_bytes)", record));
            for (inserted, map) in maps {
                let mut file = Vec::new();
                map.write_to(&mut file).unwrap();
                let reloaded = ExactOverwriteMap::read_from(&file[..]).unwrap();
                for (state, m) in [("", &map), (" after a save and a load", &reloaded)] {
                    for (form, found) in each_bytes_form!(text, $array, |x| m.contains(x)) {
                        assert!(
                            found,
                            "a key of {} bytes inserted as {inserted} is not found as \
                             {form}{state}",
                            text.len()
                        );
                    }
                    // The hash the other structures compute for the key, in any form.
                    for (form, found) in each_form!(text, $array, |x| {
                        let hash = m.hasher().hash_item(x);
                        m.contains_hashed(hash, text) && map_of(hash).contains(x)
                    }) {
                        assert!(found, "{inserted}: hash_item of {form}{state}");
                    }
                    assert!(!m.contains(&format!("{text}!")));
                }
            }
        }};
    }
    let long = format!("https://example.com/{}", "a/".repeat(4990));
    let long_array: [u8; 10_000] = long.as_bytes().try_into().unwrap();
    check_key!("id", b"id");
    check_key!("", b"");
    check_key!(&long, &long_array);
}

/// An item of a type of the user's own, hashed through its derived `Hash`.
#[derive(Hash)]
struct Point {
    x: u32,
    y: u32,
}

/// A derived struct whose first field is a byte string.
#[derive(Hash)]
struct Tagged {
    tag: Vec<u8>,
    n: u64,
}

/// Integers and derived-`Hash` items keep working in every structure, across a save, and stay
/// apart from each other: `7u64` and `7u32`, `Point { 1, 2 }` and `Point { 2, 1 }`, a tagged
/// item and its tag.
#[test]
fn integers_and_derived_items_stay_themselves_and_apart() {
    fn check<S: Subject>(name: &str, s: S) {
        s.insert(&7u64);
        s.insert(&Point { x: 1, y: 2 });
        s.insert(&Tagged {
            tag: b"ab".to_vec(),
            n: 3,
        });
        let s2 = s.reloaded();
        for (state, s) in [("", &s), (" after a save and a load", &s2)] {
            let present = [
                s.contains(&7u64),
                s.contains(&7u64.to_le_bytes()), // an integer is its little-endian bytes
                s.contains(&Point { x: 1, y: 2 }),
                s.contains(&Tagged {
                    tag: b"ab".to_vec(),
                    n: 3,
                }),
            ];
            assert_eq!(present, [true; 4], "{name}{state}");
            let absent = [
                s.contains(&7u32),
                s.contains(&7i128),
                s.contains(&8u64),
                s.contains("7"),
                s.contains(&Point { x: 2, y: 1 }),
                s.contains(&Tagged {
                    tag: b"ab".to_vec(),
                    n: 4,
                }),
                s.contains(&Tagged {
                    tag: b"a".to_vec(),
                    n: 3,
                }),
                s.contains("ab"),
                s.contains(&(b"ab".to_vec(), 3u64)),
            ];
            // The last is the tuple of the tagged item's fields: the same stream, one item.
            assert_eq!(
                absent,
                [false, false, false, false, false, false, false, false, true],
                "{name}{state}"
            );
        }
    }
    for layout in [Layout::Word, Layout::Line] {
        check(
            &format!("AtomicBloomFilter {layout:?}"),
            AtomicBloomFilter::builder(1000)
                .layout(layout)
                .build()
                .unwrap(),
        );
    }
    check(
        "SemiConcurrentBloomFilter",
        SemiConcurrentBloomFilter::with_capacity(1000, 0.01).unwrap(),
    );
    check("FrozenBloomFilter", frozen());
    check(
        "WindowedBloomFilter",
        WindowedBloomFilter::builder(1000)
            .periods(2)
            .rotate_manually()
            .build()
            .unwrap(),
    );
    check(
        "GrowingBloomFilter",
        GrowingBloomFilter::with_capacity(100, 0.01).unwrap(),
    );
    check("OverwriteMap", OverwriteMap::with_buckets(1000).unwrap());
    // The seed is part of the hasher: a key is still one item with another seed.
    let seeded = AtomicBloomFilter::builder(1000)
        .hasher(StableHasher::with_seed(9))
        .build()
        .unwrap();
    seeded.insert("id");
    assert!(seeded.contains(b"id") && seeded.contains_hash(seeded.hasher().hash_bytes(b"id")));
}
