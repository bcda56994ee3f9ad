//! Key names. Every key of a structure called `NAME` starts with `seen:{NAME`, and its hash tag
//! (the part in braces, which alone picks a Cluster slot) is either `{NAME}` (the description)
//! or `{NAME:S}` (shard `S` and everything a script on that shard touches), so that one
//! command or script stays in one slot and the shards spread over the cluster.

use crate::Error;

/// The most shards a structure is cut into: a Redis Cluster's slot count (more shards could not
/// spread further), and a bound on the keys a handle names and a create makes.
pub(crate) const MAX_SHARDS: u64 = 16_384;

/// `asked` shards (or the default), at least `least` (what keeps each shard under its size
/// limit) and at most [`MAX_SHARDS`] and `units` (so that no shard is empty: as many shards as
/// runs of `ceil(units / shards)` units cover the units).
///
/// # Errors
///
/// [`seen::Error::TooLarge`] if even [`MAX_SHARDS`] shards would pass the size limit.
pub(crate) fn shard_count(
    asked: u64,
    least: u64,
    units: u64,
    what: &'static str,
    limit: u64,
) -> Result<u32, Error> {
    if least > MAX_SHARDS {
        return Err(seen::Error::TooLarge {
            what,
            requested: units as f64,
            limit,
        }
        .into());
    }
    let shards = asked.clamp(least.max(1), MAX_SHARDS).min(units.max(1));
    let per = units.div_ceil(shards).max(1);
    Ok(units.div_ceil(per).max(1) as u32)
}

/// The longest name accepted, in bytes.
const MAX_NAME: usize = 200;

/// Checks that `name` can be part of a key: 1 to 200 bytes, no braces (they would change the
/// hash tag), no whitespace or control characters (they make keys hard to type in a CLI).
pub(crate) fn check(name: &str) -> Result<(), Error> {
    let bad = |c: char| c == '{' || c == '}' || c.is_whitespace() || c.is_control();
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(bad) {
        return Err(Error::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The key of the structure's description.
pub(crate) fn meta(name: &str) -> String {
    format!("seen:{{{name}}}:meta")
}

/// The key of shard `shard`'s data, `what` naming the data (`bits`, `slots`, `g12`, ...).
pub(crate) fn shard(name: &str, shard: u32, what: &str) -> String {
    format!("seen:{{{name}:{shard}}}:{what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_braces_spaces_or_nothing_are_refused() {
        for bad in ["", "a{b", "a}b", "a b", "a\nb", &"x".repeat(201)] {
            assert!(
                matches!(check(bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
        for good in ["orders", "orders:v2", "ünïcode", &"x".repeat(200)] {
            check(good).unwrap();
        }
        assert_eq!(meta("a"), "seen:{a}:meta");
        assert_eq!(shard("a", 3, "bits"), "seen:{a:3}:bits");
    }
}
