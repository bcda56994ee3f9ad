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
//! # Stability
//!
//! [`StableHasher`] hashes the byte stream an item's [`Hash`] impl writes, with every integer
//! encoded little-endian and `usize`/`isize` widened to 64 bits, so a `usize` hashes the same on
//! 32- and 64-bit targets and on big- and little-endian ones. Golden tests pin the output for
//! fixed inputs; changing it is a breaking change of every persisted filter.
//!
//! What it cannot make stable is the `Hash` impl itself:
//!
//! - a type whose `Hash` feeds platform-dependent data (a pointer or address, a `HashMap`'s
//!   iteration order, a platform-sized field converted by hand with `to_ne_bytes`) hashes
//!   differently across platforms or runs;
//! - the standard library does not promise that its own impls never change across Rust releases
//!   (`str` currently writes its bytes then a `0xff` byte; a slice writes its length first).
//!
//! For data that must outlive a toolchain upgrade, hash bytes you control: [`ItemHasher::hash_bytes`]
//! is xxh3-128 of exactly the given bytes. Note that `hash_bytes(b)` and `hash_item(b)` differ (the
//! latter includes the slice's length prefix): a structure must use one of them for all its items.

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
    /// The hash of `item`, from the bytes its [`Hash`] impl writes.
    fn hash_item<T: Hash + ?Sized>(&self, item: &T) -> Hash128;

    /// The hash of exactly `bytes` (no length prefix): the path to use for data whose hash must
    /// not depend on any `Hash` impl. Differs from `hash_item(bytes)`.
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
    /// assert_eq!((id.name(), id.seed()), ("seen/xxh3-128", 7));
    /// assert_eq!(std::hash::RandomState::new().identity(), None);
    /// ```
    fn identity(&self) -> Option<HasherIdentity> {
        None
    }
}

/// A hash function's name and seed ([`ItemHasher::identity`]), as saved files record it.
///
/// The name is at most 1,024 bytes of UTF-8; the crate's own is `"seen/xxh3-128"`.
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
pub(crate) const STABLE_NAME: &str = "seen/xxh3-128";

/// The default hasher: xxh3-128 over a platform-independent encoding, stable across runs,
/// processes and platforms (see the [module docs](self) for exactly what is stable).
///
/// ```
/// use seen::hash::{ItemHasher, StableHasher};
/// let h = StableHasher::new();
/// // Integers are hashed as their little-endian bytes, whatever the platform.
/// assert_eq!(h.hash_item(&7u64), h.hash_bytes(&7u64.to_le_bytes()));
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
        let mut hasher = StableStream::new(self.seed);
        item.hash(&mut hasher);
        Hash128::from_u128(hasher.finish128())
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
        widen(self.hash_one(item))
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

/// Bytes kept inline before the stream moves to a heap-allocated streaming xxh3 state. Covers
/// integers, UUIDs, 32-byte tokens and most URLs with no allocation.
const INLINE: usize = 128;

/// The [`Hasher`] behind [`StableHasher`]: collects the item's byte stream (integers in
/// little-endian) and hashes it with one-shot xxh3-128, or streaming xxh3-128 past [`INLINE`]
/// bytes. Both give the same value for the same stream.
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
mod tests {
    use super::*;
    use std::hash::RandomState;

    /// The published XXH3-128 digest of the empty input with seed 0: ties our use of the
    /// `xxhash-rust` crate to the reference implementation, not only to itself.
    #[test]
    fn golden_empty_bytes_match_reference_xxh3_128() {
        let h = StableHasher::new().hash_bytes(b"");
        assert_eq!(h.to_u128(), 0x99aa_06d3_0147_98d8_6001_c324_468d_497f);
    }

    /// Pins the default hash of fixed inputs through every path (integer, str, byte slice, long
    /// input that spills to the streaming state). If this test fails, the hash changed, and every
    /// persisted filter would silently be corrupted: do not update the constants, find the change.
    #[test]
    fn golden_values_are_pinned() {
        let h = StableHasher::new();
        let long = [0xabu8; 1000];
        let cases: [(&str, Hash128); 6] = [
            ("u64 42", h.hash_item(&42u64)),
            ("str token", h.hash_item("token")),
            ("bytes msg-42", h.hash_bytes(b"msg-42")),
            ("array [u8; 32]", h.hash_item(&[7u8; 32])),
            ("long slice spills", h.hash_item(&long[..])),
            (
                "seed 1 u64 42",
                StableHasher::with_seed(1).hash_item(&42u64),
            ),
        ];
        let expected: [u128; 6] = GOLDEN;
        for ((name, got), want) in cases.iter().zip(expected) {
            assert_eq!(
                got.to_u128(),
                want,
                "golden hash changed for {name}: {got:x?}"
            );
        }
    }

    /// Each value was cross-checked against the reference C implementation of XXH3-128 (through
    /// the `xxhash` Python package) over the documented byte stream:
    /// `42u64` -> `pack('<Q', 42)`; `"token"` -> `b"token\xff"`; `b"msg-42"` -> itself;
    /// `[7u8; 32]` -> `pack('<Q', 32) + 32 * b"\x07"`; the 1000-byte slice ->
    /// `pack('<Q', 1000) + 1000 * b"\xab"`; the last with `seed=1`.
    const GOLDEN: [u128; 6] = [
        0x9bab_3e2f_55e1_fe86_61c2_164e_8b89_5a45,
        0xd2a4_d6fb_3966_6043_ece7_5923_9a20_d3dc,
        0x9a91_2295_7c67_6d41_f5f1_1e12_ed2b_25ce,
        0xa20c_dc9b_fc48_ecc0_160b_4479_de47_3951,
        0xe79d_2a52_ad93_d07c_b009_5098_537e_1796,
        0x6fae_c435_2953_411c_24ab_7901_56d5_217d,
    ];

    #[test]
    fn integers_hash_as_little_endian_bytes_on_every_platform() {
        let h = StableHasher::new();
        assert_eq!(h.hash_item(&0x0102_0304u32), h.hash_bytes(&[4, 3, 2, 1]));
        assert_eq!(h.hash_item(&-2i16), h.hash_bytes(&[0xfe, 0xff]));
        assert_eq!(h.hash_item(&1u128), h.hash_bytes(&1u128.to_le_bytes()));
        // usize and isize are widened to 64 bits: the same on 32- and 64-bit targets.
        assert_eq!(h.hash_item(&5usize), h.hash_item(&5u64));
        assert_eq!(h.hash_item(&-5isize), h.hash_item(&-5i64));
    }

    #[test]
    fn streaming_and_one_shot_agree_across_the_inline_boundary() {
        let h = StableHasher::with_seed(99);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in [0, 1, 8, 127, 128, 129, 200, 240, 241, 1000] {
            // A `Hash` impl that writes the bytes in uneven pieces, with no length prefix.
            struct Pieces<'a>(&'a [u8]);
            impl Hash for Pieces<'_> {
                fn hash<H: Hasher>(&self, state: &mut H) {
                    for chunk in self.0.chunks(37) {
                        state.write(chunk);
                    }
                }
            }
            assert_eq!(
                h.hash_item(&Pieces(&data[..len])),
                h.hash_bytes(&data[..len]),
                "length {len}"
            );
        }
    }

    #[test]
    fn std_build_hashers_plug_in_with_a_derived_second_half() {
        let s = RandomState::new();
        let a = s.hash_item("a");
        assert_eq!(a, s.hash_item("a"));
        assert_eq!(a.h1, s.hash_one("a"));
        assert_ne!(a.h1, a.h2);
        assert_ne!(a, s.hash_item("b"));
        assert_eq!(s.hash_bytes(b"xy"), s.hash_bytes(b"xy"));
    }

    #[test]
    fn widen_is_injective_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..100_000u64 {
            assert!(seen.insert(widen(i).h2));
        }
    }
}
