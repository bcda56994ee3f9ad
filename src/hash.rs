//! Stable 128-bit hashing of items, split into two 64-bit halves for double hashing.
//!
//! Every structure in the crate hashes an item **once**, to a [`Hash128`], and derives all of its
//! probe positions (Bloom filters) or its slot and fingerprint (`OverwriteMap`) from the two
//! halves. How the hash is computed is an [`ItemHasher`]:
//!
//! - [`StableHasher`], the default: xxh3-128 (from the `xxhash-rust` crate) over a
//!   platform-independent byte encoding of the item. The same item gives the same hash in every
//!   run, process and platform, so a persisted filter stays valid. A `u64` key costs a few
//!   nanoseconds, less than std's SipHash
//!   ([measured](crate::docs::benchmarks#hashing-bencheshashrs)).
//! - Any [`std::hash::BuildHasher`] (std's `RandomState`, `foldhash`, `ahash`, ...): it implements
//!   [`ItemHasher`] through a blanket impl. Such hashers give 64 bits; the second half is derived
//!   from the first by a bijective mixer, so two items collide in all 128 bits exactly when they
//!   collide in the 64. Stability is then whatever that hasher promises (`RandomState`: none).
//!
//! # Which items are one key
//!
//! A string and a byte string with the same bytes are one item, whatever type holds them:
//! `"id"`, `String::from("id")`, `b"id"`, `b"id".to_vec()`, `&b"id"[..]`, a `Box`, `Rc`, `Arc`
//! or `Cow` of any of these, and the bytes `b"id"` given to [`ItemHasher::hash_bytes`] all hash
//! alike, with either kind of hasher, so a key inserted in one form is found in every other, in
//! every structure and in saved files (the `seen` command's state files hash each record's
//! bytes with `hash_bytes`):
//!
//! ```
//! use seen::hash::{ItemHasher, StableHasher};
//! let h = StableHasher::new();
//! let id = h.hash_bytes(b"id");
//! assert_eq!(h.hash_item("id"), id);
//! assert_eq!(h.hash_item(&String::from("id")), id);
//! assert_eq!(h.hash_item(b"id"), id);
//! assert_eq!(h.hash_item(&b"id".to_vec()), id);
//! let random = std::hash::RandomState::new();
//! assert_eq!(random.hash_item("id"), random.hash_bytes(b"id"));
//! ```
//!
//! Other items hash the stream their [`Hash`] impl writes, so their type is part of them:
//! `1u32` and `1u64` are two items, and a tuple or a struct is the stream of its fields. An
//! integer's stream is its little-endian bytes, so it is one item with the string or byte
//! string of those bytes (`0x6469u16` and `"id"`): a structure that holds both integers and
//! strings keeps them apart only if they are tagged, say as `(0u8, id)` and `(1u8, name)`.
//!
//! How: the standard library writes a `str` as its bytes then a `0xff` byte, and a byte slice
//! as its length then its bytes. The hashers take an item whose whole stream is one of these
//! two shapes as its bytes alone; a stream that starts with a byte slice and goes on (a struct
//! whose first field is a `Vec<u8>`) takes the slice's bytes, the rest, then the slice's
//! length; every other stream is hashed as written.
//!
//! # Stability
//!
//! [`StableHasher`] hashes that stream with every integer encoded little-endian and
//! `usize`/`isize` widened to 64 bits, so a `usize` hashes the same on 32- and 64-bit targets
//! and on big- and little-endian ones (`hash_item(&7u64)` is `hash_bytes(&7u64.to_le_bytes())`).
//! Golden tests pin the output for fixed inputs; changing it is a breaking change of every
//! persisted filter, and changes the name the hasher records in files
//! ([`ItemHasher::identity`]). Its name is `"seen/xxh3-128/2"`: the version before, named
//! `"seen/xxh3-128"`, hashed strings and byte strings with their terminator and length, and
//! its files are refused with [`Error::RetiredHasher`](crate::Error::RetiredHasher), which
//! says how to convert one.
//!
//! What it cannot make stable is the `Hash` impl itself:
//!
//! - a type whose `Hash` feeds platform-dependent data (a pointer or address, a `HashMap`'s
//!   iteration order, a platform-sized field converted by hand with `to_ne_bytes`) hashes
//!   differently across platforms or runs;
//! - the standard library does not promise that its own impls never change across Rust releases
//!   (the `str` and slice shapes above; the crate's tests check them on every build).
//!
//! For data that must outlive a toolchain upgrade, hash bytes you control:
//! [`ItemHasher::hash_bytes`] is xxh3-128 of exactly the given bytes.

use core::hash::{BuildHasher, Hash, Hasher};

use xxhash_rust::xxh3::{Xxh3, xxh3_128_with_seed};

/// One item's 128-bit hash, as the two 64-bit halves that double hashing uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash128 {
    /// The low 64 bits: the first hash of double hashing (block or slot selection).
    pub h1: u64,
    /// The high 64 bits: the second hash (probe steps, or a fingerprint).
    pub h2: u64,
}

impl Hash128 {
    /// Splits a 128-bit value into its low (`h1`) and high (`h2`) halves.
    ///
    /// ```
    /// use seen::hash::Hash128;
    /// let h = Hash128::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
    /// assert_eq!(h.h1, 0xfedc_ba98_7654_3210);
    /// assert_eq!(h.h2, 0x0123_4567_89ab_cdef);
    /// assert_eq!(h.to_u128(), 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
    /// ```
    #[inline]
    pub const fn from_u128(value: u128) -> Self {
        Self {
            h1: value as u64,
            h2: (value >> 64) as u64,
        }
    }

    /// The 128-bit value, `h2` in the high half.
    #[inline]
    pub const fn to_u128(self) -> u128 {
        ((self.h2 as u128) << 64) | self.h1 as u128
    }
}

/// How a structure turns an item into a [`Hash128`].
///
/// Implemented by [`StableHasher`] (the default) and, through a blanket impl, by every
/// [`std::hash::BuildHasher`]. Implement it yourself to bring a native 128-bit hash.
pub trait ItemHasher {
    /// The hash of `item`, from the calls its [`Hash`] impl makes: a string or a byte string
    /// (of any type) hashes as [`hash_bytes`](Self::hash_bytes) of its bytes, any other item as
    /// the stream it writes ([which items are one key](self#which-items-are-one-key)).
    fn hash_item<T: Hash + ?Sized>(&self, item: &T) -> Hash128;

    /// The hash of exactly `bytes`: the same as `hash_item` of those bytes as a `&[u8]`,
    /// `Vec<u8>` or (if UTF-8) `str`, and the path to use for data whose hash must not depend
    /// on any `Hash` impl.
    fn hash_bytes(&self, bytes: &[u8]) -> Hash128;

    /// This hash function's name and seed, written into saved files and checked when they are
    /// loaded: a filter loaded with another hash function would answer "never seen" for every
    /// item inserted before the save. `None` (the default, and what every
    /// [`std::hash::BuildHasher`] returns) means the hasher cannot vouch for itself; a file
    /// written with it is loaded only by `read_from_trusting_hasher`.
    ///
    /// Implement it for a hasher of your own only if its output is stable across runs,
    /// processes and platforms, and change the name whenever the output changes. An empty
    /// name counts as no name (`None`): the seed is then not recorded either.
    ///
    /// ```
    /// use seen::hash::{ItemHasher, StableHasher};
    /// let id = StableHasher::with_seed(7).identity().unwrap();
    /// assert_eq!((id.name(), id.seed()), ("seen/xxh3-128/2", 7));
    /// assert_eq!(std::hash::RandomState::new().identity(), None);
    /// ```
    fn identity(&self) -> Option<HasherIdentity> {
        None
    }
}

/// A hash function's name and seed ([`ItemHasher::identity`]), as saved files record it.
///
/// The name is at most 1,024 bytes of UTF-8; the crate's own is `"seen/xxh3-128/2"`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HasherIdentity {
    name: std::borrow::Cow<'static, str>,
    seed: u64,
}

impl HasherIdentity {
    /// An identity. Names longer than 1,024 bytes are cut at a character boundary at or below
    /// that length (then two names that differ only past it are taken for one: keep names short).
    pub fn new(name: impl Into<std::borrow::Cow<'static, str>>, seed: u64) -> Self {
        let mut name = name.into();
        if name.len() > MAX_NAME {
            let end = (0..=MAX_NAME)
                .rev()
                .find(|&i| name.is_char_boundary(i))
                .unwrap_or(0);
            name = std::borrow::Cow::Owned(name[..end].to_owned());
        }
        Self { name, seed }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

impl core::fmt::Display for HasherIdentity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} with seed {}", self.name, self.seed)
    }
}

/// The longest name a [`HasherIdentity`] keeps.
pub(crate) const MAX_NAME: usize = 1024;

/// [`StableHasher`]'s name in [`HasherIdentity`]: part of the file format.
pub(crate) const STABLE_NAME: &str = "seen/xxh3-128/2";

/// The name [`StableHasher`] had before strings and byte strings became one item (it hashed
/// the stream of a `str`'s or a slice's `Hash` impl, terminator and length prefix included).
/// Files that carry it are refused with [`Error::RetiredHasher`](crate::Error::RetiredHasher),
/// which says how to convert them.
pub(crate) const RETIRED_STABLE_NAME: &str = "seen/xxh3-128";

/// The default hasher: xxh3-128 over a platform-independent encoding, stable across runs,
/// processes and platforms (see the [module docs](self) for exactly what is stable).
///
/// ```
/// use seen::hash::{ItemHasher, StableHasher};
/// let h = StableHasher::new();
/// // Integers are hashed as their little-endian bytes, whatever the platform.
/// assert_eq!(h.hash_item(&7u64), h.hash_bytes(&7u64.to_le_bytes()));
/// // Strings and byte strings as their bytes.
/// assert_eq!(h.hash_item("a"), h.hash_bytes(b"a"));
/// // Different seeds give independent hash functions.
/// assert_ne!(h.hash_item("a"), StableHasher::with_seed(1).hash_item("a"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StableHasher {
    seed: u64,
}

impl StableHasher {
    /// The default hasher, seed 0.
    pub const fn new() -> Self {
        Self { seed: 0 }
    }

    /// A hasher with another seed: an independent hash function, for example to decorrelate two
    /// filters over the same items.
    pub const fn with_seed(seed: u64) -> Self {
        Self { seed }
    }

    /// This hasher's seed.
    pub const fn seed(&self) -> u64 {
        self.seed
    }
}

impl ItemHasher for StableHasher {
    #[inline]
    fn hash_item<T: Hash + ?Sized>(&self, item: &T) -> Hash128 {
        let mut stream = StableStream::new(self.seed);
        let mut canonical = Canonical::new(&mut stream);
        item.hash(&mut canonical);
        canonical.end();
        Hash128::from_u128(stream.finish128())
    }

    #[inline]
    fn hash_bytes(&self, bytes: &[u8]) -> Hash128 {
        Hash128::from_u128(xxh3_128_with_seed(bytes, self.seed))
    }

    fn identity(&self) -> Option<HasherIdentity> {
        Some(HasherIdentity::new(STABLE_NAME, self.seed))
    }
}

impl<S: BuildHasher> ItemHasher for S {
    #[inline]
    fn hash_item<T: Hash + ?Sized>(&self, item: &T) -> Hash128 {
        let mut hasher = self.build_hasher();
        let mut canonical = Canonical::new(&mut hasher);
        item.hash(&mut canonical);
        canonical.end();
        widen(hasher.finish())
    }

    #[inline]
    fn hash_bytes(&self, bytes: &[u8]) -> Hash128 {
        let mut hasher = self.build_hasher();
        hasher.write(bytes);
        widen(hasher.finish())
    }
}

/// A 64-bit hash as a [`Hash128`]: `h2` is [`remix`]`(h1)`, so the halves are not trivially
/// related and 128-bit collisions are exactly 64-bit ones.
#[inline]
fn widen(h1: u64) -> Hash128 {
    Hash128 { h1, h2: remix(h1) }
}

/// 64 bits of `hash` for sampling decisions (which inserts count, clear or read the clock):
/// mixed from both halves, so that a [`BuildHasher`](std::hash::BuildHasher) whose low bits
/// follow the key's (a multiplicative hash of integer keys) still samples one item in `2^s`,
/// and independent of the bits the probe draws from.
#[inline]
pub(crate) fn sample_bits(hash: Hash128) -> u64 {
    remix(hash.h1 ^ hash.h2.rotate_left(32))
}

/// A fixed bijection of 64-bit values: the splitmix64 finalizer after adding an odd constant.
/// Used to derive more hash bits from a 64-bit value (here, and for the Bloom filters' probe
/// streams). Keep it fixed: it decides where items' bits live, so bits saved by one version
/// must be read with the same function by the next.
#[inline]
pub(crate) fn remix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Maps a uniform 64-bit hash to `0..n` by multiply-shift: `(hash · n) >> 64`. No `%` and no
/// power-of-two rounding: uniform for any `n` up to 2^64 (each value gets `floor` or `ceil` of
/// `2^64 / n` hashes), and monotone in `hash`, so the high bits decide. The one place the crate
/// turns a hash into an index (a Bloom filter's block, an overwrite map's slot). Keep it fixed,
/// for the same reason as [`remix`].
#[inline]
pub(crate) fn reduce(hash: u64, n: u64) -> u64 {
    ((u128::from(hash) * u128::from(n)) >> 64) as u64
}

/// Where an item's [`Hash`] calls stand against the two shapes that make it a byte string
/// (see [`Canonical`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// No call yet.
    Start,
    /// The first call was `write_usize(n)`, held back: a byte slice's length prefix, if `n`
    /// bytes come next in one `write`.
    Length(usize),
    /// `write_usize(n)` then the `n` bytes (passed on): a byte slice, if nothing follows. The
    /// length is held back.
    Slice(usize),
    /// The first call was a `write` (passed on): a `str`, if `write_u8(0xff)` alone follows.
    Text,
    /// A `write` then `write_u8(0xff)`, held back: a `str`, if nothing follows.
    TextEnd,
    /// Any other stream: every call is passed on as it comes.
    Other,
}

/// A [`Hasher`] that hands an item's stream to `inner`, except that a string or a byte string
/// arrives as its bytes alone, the way [`ItemHasher::hash_bytes`] takes them (so that `"id"`,
/// `b"id"`, `String`, `Vec<u8>` and `[u8; N]` are one item). The standard library writes a
/// `str` as `write(bytes)` then `write_u8(0xff)`, and a `[u8]` as `write_usize(len)` then
/// `write(bytes)`; so:
///
/// - a whole stream of exactly `write(b)`, `write_u8(0xff)` reaches `inner` as `write(b)`;
/// - a whole stream of exactly `write_usize(n)`, `write(b)` with `b.len() == n` reaches it as
///   `write(b)`;
/// - a stream that starts with `write_usize(n)`, `write(b)` (`b.len() == n`) and goes on (a
///   struct whose first field is a byte string) reaches it as `write(b)`, the calls that
///   follow, then `write_usize(n)` at the end: the length moves behind, where it still tells
///   where `b` ends, so two such streams that differed still differ;
/// - every other stream reaches it call for call.
///
/// Only the calls in flight are held back (one length, or one `0xff`), never the bytes: a
/// 10 KB key streams through as it comes. [`end`](Self::end) settles what is held. The inner
/// hasher is borrowed, not owned, so that the stable hasher's inline buffer is never moved.
struct Canonical<'a, H> {
    inner: &'a mut H,
    shape: Shape,
    /// The length of a slice that other calls followed, owed at the end.
    owed: Option<usize>,
}

impl<'a, H: Hasher> Canonical<'a, H> {
    #[inline]
    fn new(inner: &'a mut H) -> Self {
        Self {
            inner,
            shape: Shape::Start,
            owed: None,
        }
    }

    /// Once the item has written its whole stream: a held-back length that was not a slice's,
    /// or that a slice's trailing calls owe, is passed on; a `str`'s `0xff` and a lone slice's
    /// length are dropped.
    #[inline]
    fn end(self) {
        if let Shape::Length(n) = self.shape {
            self.inner.write_usize(n);
        }
        if let Some(n) = self.owed {
            self.inner.write_usize(n);
        }
    }

    /// Before a call that ends both shapes: passes on what was held back for them.
    #[inline]
    fn settle(&mut self) {
        match self.shape {
            Shape::Other => {}
            Shape::Start | Shape::Text => self.shape = Shape::Other,
            Shape::Length(_) | Shape::Slice(_) | Shape::TextEnd => self.settle_held(),
        }
    }

    /// `write_u8` that is not a `str`'s terminator: out of line (see
    /// [`settle_held`](Self::settle_held)).
    #[inline(never)]
    fn pass_u8(&mut self, i: u8) {
        self.settle();
        self.inner.write_u8(i);
    }

    /// `write_usize` that is not the first call: out of line (see
    /// [`settle_held`](Self::settle_held)).
    #[inline(never)]
    fn pass_usize(&mut self, i: usize) {
        self.settle();
        self.inner.write_usize(i);
    }

    /// [`settle`](Self::settle) when something is held back: out of line, so that the calls
    /// an integer makes stay small enough to inline.
    #[inline(never)]
    fn settle_held(&mut self) {
        match self.shape {
            Shape::Length(n) => self.inner.write_usize(n),
            Shape::Slice(n) => self.owed = Some(n),
            Shape::TextEnd => self.inner.write_u8(0xff),
            Shape::Start | Shape::Text | Shape::Other => {}
        }
        self.shape = Shape::Other;
    }
}

/// Every call but the three the shapes are made of settles, then passes on unchanged.
macro_rules! pass_on {
    ($($name:ident($type:ty)),* $(,)?) => {
        $(
            #[inline]
            fn $name(&mut self, i: $type) {
                self.settle();
                self.inner.$name(i);
            }
        )*
    };
}

impl<H: Hasher> Hasher for Canonical<'_, H> {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        match self.shape {
            Shape::Start => self.shape = Shape::Text,
            Shape::Length(n) if bytes.len() == n => self.shape = Shape::Slice(n),
            _ => self.settle(),
        }
        self.inner.write(bytes);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        if i == 0xff && self.shape == Shape::Text {
            self.shape = Shape::TextEnd;
        } else {
            self.pass_u8(i);
        }
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        if self.shape == Shape::Start {
            self.shape = Shape::Length(i);
        } else {
            self.pass_usize(i);
        }
    }

    /// The inner hasher's value so far, with nothing held back passed on (a `Hash` impl has
    /// no reason to call this; [`ItemHasher::hash_item`] finishes through
    /// [`end`](Self::end)).
    #[inline]
    fn finish(&self) -> u64 {
        self.inner.finish()
    }

    pass_on!(
        write_u16(u16),
        write_u32(u32),
        write_u64(u64),
        write_u128(u128),
        write_i8(i8),
        write_i16(i16),
        write_i32(i32),
        write_i64(i64),
        write_i128(i128),
        write_isize(isize),
    );
}

/// Bytes kept inline before the stream moves to a heap-allocated streaming xxh3 state. Covers
/// integers, UUIDs, 32-byte tokens and most URLs with no allocation.
const INLINE: usize = 128;

/// The [`Hasher`] behind [`StableHasher`] (under [`Canonical`]): collects the item's byte
/// stream (integers in little-endian) and hashes it with one-shot xxh3-128, or streaming
/// xxh3-128 past [`INLINE`] bytes. Both give the same value for the same stream.
struct StableStream {
    seed: u64,
    len: usize,
    buf: [u8; INLINE],
    spill: Option<Box<Xxh3>>,
}

impl StableStream {
    #[inline]
    fn new(seed: u64) -> Self {
        Self {
            seed,
            len: 0,
            buf: [0; INLINE],
            spill: None,
        }
    }

    #[inline]
    fn finish128(&self) -> u128 {
        match &self.spill {
            None => xxh3_128_with_seed(&self.buf[..self.len], self.seed),
            Some(state) => state.digest128(),
        }
    }

    #[cold]
    fn spill(&mut self, bytes: &[u8]) {
        let mut state = Box::new(Xxh3::with_seed(self.seed));
        state.update(&self.buf[..self.len]);
        state.update(bytes);
        self.spill = Some(state);
    }
}

impl Hasher for StableStream {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        if let Some(state) = &mut self.spill {
            state.update(bytes);
            return;
        }
        let end = self.len + bytes.len();
        if end <= INLINE {
            self.buf[self.len..end].copy_from_slice(bytes);
            self.len = end;
        } else {
            self.spill(bytes);
        }
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.finish128() as u64
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write(&i.to_le_bytes());
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write(&i.to_le_bytes());
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write(&i.to_le_bytes());
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        // Widened so that 32- and 64-bit targets agree (usize is at most 64 bits on every target).
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_i8(&mut self, i: i8) {
        self.write_u8(i as u8);
    }

    #[inline]
    fn write_i16(&mut self, i: i16) {
        self.write_u16(i as u16);
    }

    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.write_u32(i as u32);
    }

    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    #[inline]
    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128);
    }

    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.write_i64(i as i64);
    }
}

#[cfg(all(test, not(seen_loom)))]
mod tests;
