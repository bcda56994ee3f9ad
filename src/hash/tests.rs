//! Unit tests of the hashing: stability, key identity, reduce and remix.

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
/// input that spills to the streaming state, a byte slice followed by more). If this test
/// fails, the hash changed, and every persisted filter would silently be corrupted: do not
/// update the constants, find the change.
#[test]
fn golden_values_are_pinned() {
    let h = StableHasher::new();
    let long = [0xabu8; 1000];
    let cases: [(&str, Hash128); 7] = [
        ("u64 42", h.hash_item(&42u64)),
        ("str token", h.hash_item("token")),
        ("bytes msg-42", h.hash_bytes(b"msg-42")),
        ("array [u8; 32]", h.hash_item(&[7u8; 32])),
        ("long slice spills", h.hash_item(&long[..])),
        (
            "seed 1 u64 42",
            StableHasher::with_seed(1).hash_item(&42u64),
        ),
        ("slice then u32", h.hash_item(&(&b"ab"[..], 7u32))),
    ];
    let expected: [u128; 7] = GOLDEN;
    for ((name, got), want) in cases.iter().zip(expected) {
        assert_eq!(
            got.to_u128(),
            want,
            "golden hash changed for {name}: {got:x?}"
        );
    }
}

/// Each value was cross-checked against the reference C implementation of XXH3-128
/// (`XXH3_128bits_withSeed` of the system's `libxxhash`, called from Python) over the
/// documented byte stream: `42u64` -> `pack('<Q', 42)`; `"token"` -> `b"token"`;
/// `b"msg-42"` -> itself; `[7u8; 32]` -> `32 * b"\x07"`; the 1000-byte slice ->
/// `1000 * b"\xab"`; `42u64` with `seed=1`; `(&b"ab"[..], 7u32)` ->
/// `b"ab" + pack('<I', 7) + pack('<Q', 2)` (the slice's length moved behind).
const GOLDEN: [u128; 7] = [
    0x9bab_3e2f_55e1_fe86_61c2_164e_8b89_5a45,
    0x0f65_b527_92c0_5b99_0f2f_00b7_53a2_72a0,
    0x9a91_2295_7c67_6d41_f5f1_1e12_ed2b_25ce,
    0xb087_c640_22f0_bd78_30a5_137f_d439_a576,
    0x277a_2044_4782_4764_d6bb_0db5_9d99_9be9,
    0x6fae_c435_2953_411c_24ab_7901_56d5_217d,
    0x4183_cb68_c62c_b13a_649d_8b70_8086_af73,
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
    let a = s.hash_item(&7u64);
    assert_eq!(a, s.hash_item(&7u64));
    assert_eq!(a.h1, s.hash_one(7u64));
    assert_ne!(a.h1, a.h2);
    assert_ne!(a, s.hash_item(&8u64));
    assert_eq!(s.hash_bytes(b"xy"), s.hash_bytes(b"xy"));
    assert_ne!(s.hash_bytes(b"xy"), s.hash_bytes(b"xz"));
}

/// Every string and byte-string form of one key, as `(name, hash)`, through `hasher`.
fn forms<H: ItemHasher>(hasher: &H, key: &str) -> Vec<(&'static str, Hash128)> {
    use std::borrow::Cow;
    use std::rc::Rc;
    use std::sync::Arc;
    let bytes = key.as_bytes();
    vec![
        ("&str", hasher.hash_item(key)),
        ("&&str", hasher.hash_item(&key)),
        ("String", hasher.hash_item(&key.to_owned())),
        ("Box<str>", hasher.hash_item(&Box::<str>::from(key))),
        ("Rc<str>", hasher.hash_item(&Rc::<str>::from(key))),
        ("Arc<str>", hasher.hash_item(&Arc::<str>::from(key))),
        ("Cow<str>", hasher.hash_item(&Cow::Borrowed(key))),
        ("&[u8]", hasher.hash_item(bytes)),
        ("Vec<u8>", hasher.hash_item(&bytes.to_vec())),
        ("Box<[u8]>", hasher.hash_item(&Box::<[u8]>::from(bytes))),
        ("Arc<[u8]>", hasher.hash_item(&Arc::<[u8]>::from(bytes))),
        ("Cow<[u8]>", hasher.hash_item(&Cow::Borrowed(bytes))),
        ("hash_bytes", hasher.hash_bytes(bytes)),
    ]
}

#[test]
fn strings_and_byte_strings_hash_as_their_bytes_with_every_hasher() {
    let long = "https://example.com/".to_owned() + &"a/".repeat(5000);
    for key in [
        "",
        "id",
        "\u{ff}",
        &"x".repeat(119),
        &"x".repeat(120),
        &long,
    ] {
        let stable = forms(&StableHasher::with_seed(3), key);
        let random = forms(&RandomState::new(), key);
        for forms in [stable, random] {
            let (_, want) = forms[forms.len() - 1];
            for (name, got) in forms {
                assert_eq!(got, want, "{name} of a key of {} bytes", key.len());
            }
        }
    }
    let h = StableHasher::new();
    assert_eq!(h.hash_item(b"id"), h.hash_bytes(b"id")); // [u8; 2]
    assert_eq!(h.hash_item(&[7u8; 300]), h.hash_bytes(&[7u8; 300]));
    assert_ne!(h.hash_item("id"), h.hash_item("ie"));
    // An integer is its little-endian bytes: one item with the string of them, unless
    // tagged.
    assert_eq!(h.hash_item(&0x6469u16), h.hash_item("id"));
    assert_ne!(h.hash_item(&(0u8, 0x6469u16)), h.hash_item(&(1u8, "id")));
}

/// The hash_item of an item that writes `calls`, as `Hash` would.
fn stream(calls: &[Call]) -> Hash128 {
    struct Calls<'a>(&'a [Call]);
    impl Hash for Calls<'_> {
        fn hash<H: Hasher>(&self, state: &mut H) {
            for call in self.0 {
                match call {
                    Call::Bytes(b) => state.write(b),
                    Call::U8(i) => state.write_u8(*i),
                    Call::Usize(n) => state.write_usize(*n),
                    Call::U64(i) => state.write_u64(*i),
                }
            }
        }
    }
    StableHasher::new().hash_item(&Calls(calls))
}

#[derive(Clone, Copy)]
enum Call {
    Bytes(&'static [u8]),
    U8(u8),
    Usize(usize),
    U64(u64),
}

/// Only the two whole shapes lose their terminator or length; everything else is hashed as
/// written (a slice that more calls follow keeps its length, behind it).
#[test]
fn only_a_lone_str_or_slice_loses_its_terminator_or_length() {
    use Call::*;
    let h = StableHasher::new();
    let le = |n: u64| n.to_le_bytes();
    let cat = |parts: &[&[u8]]| h.hash_bytes(&parts.concat());
    assert_eq!(stream(&[Bytes(b"ab"), U8(0xff)]), cat(&[b"ab"]));
    assert_eq!(stream(&[Usize(2), Bytes(b"ab")]), cat(&[b"ab"]));
    // Not the shapes: hashed call for call.
    assert_eq!(stream(&[Bytes(b"ab"), U8(0xfe)]), cat(&[b"ab\xfe"]));
    assert_eq!(
        stream(&[Bytes(b"ab"), U8(0xff), U8(0xff)]),
        cat(&[b"ab\xff\xff"])
    );
    assert_eq!(
        stream(&[Bytes(b"a"), Bytes(b"b"), U8(0xff)]),
        cat(&[b"ab\xff"])
    );
    assert_eq!(stream(&[Usize(3), Bytes(b"ab")]), cat(&[&le(3), b"ab"]));
    assert_eq!(
        stream(&[Usize(2), Bytes(b"a"), Bytes(b"b")]),
        cat(&[&le(2), b"ab"])
    );
    assert_eq!(stream(&[Usize(2)]), cat(&[&le(2)]));
    assert_eq!(stream(&[U64(2), Bytes(b"ab")]), cat(&[&le(2), b"ab"]));
    assert_eq!(
        stream(&[Bytes(b"ab"), U8(0xff), Bytes(b"c"), U8(0xff)]),
        cat(&[b"ab\xffc\xff"])
    );
    // A slice and more: its bytes, the rest, then its length.
    assert_eq!(
        stream(&[Usize(2), Bytes(b"ab"), U64(9)]),
        cat(&[b"ab", &le(9), &le(2)])
    );
    assert_eq!(
        stream(&[Usize(2), Bytes(b"ab"), Usize(1), Bytes(b"c")]),
        cat(&[b"ab", &le(1), b"c", &le(2)])
    );
}

/// Two byte strings in a tuple stay two fields: moving the first one's length behind keeps
/// every split apart (with the length in front dropped, `([], [0; 8])` and `(le(8), [])`
/// would both be `le(8)` then eight zeros).
#[test]
fn a_pair_of_byte_strings_keeps_its_split() {
    let h = StableHasher::new();
    let pair = |a: &[u8], b: &[u8]| h.hash_item(&(a.to_vec(), b.to_vec()));
    assert_ne!(pair(&[], &[0; 8]), pair(&8u64.to_le_bytes(), &[]));
    assert_ne!(pair(b"ab", b"c"), pair(b"a", b"bc"));
    assert_ne!(pair(b"ab", b""), pair(b"", b"ab"));
    // Strings carry their terminator, so pairs of them split apart as before.
    assert_ne!(h.hash_item(&("ab", "c")), h.hash_item(&("a", "bc")));
}

#[test]
fn widen_is_injective_on_a_sample() {
    let mut seen = std::collections::HashSet::new();
    for i in 0..100_000u64 {
        assert!(seen.insert(widen(i).h2));
    }
}
