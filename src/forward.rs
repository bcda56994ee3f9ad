//! The item-level methods that only hash and forward, written once for every structure that
//! has them: the batch methods of items, and the [`DedupFilter`](crate::DedupFilter) impls.
//!
//! Each macro writes the signature, the forwarding body and the doc text the structures share;
//! the caller passes what its structure adds (how the batch runs there, and an example), so
//! rustdoc shows each method with whole docs and a runnable example. The single-item `insert`
//! and `contains` stay written out in each file: their bodies are one line, and their docs say
//! what `true` and `false` mean for that structure, which differs from one to the next.

/// `insert_many` or `contains_many` of items: hashes each with the structure's `hasher`,
/// lazily (so the hashing stays inside the batch), and hands the hashes to
/// `insert_many_hashes` / `contains_many_hashes`. Invoke it inside the structure's
/// `impl<H: ItemHasher ...>` block, with the structure's own doc text after the method's name.
macro_rules! batch_of_items {
    (insert_many $(#[$doc:meta])*) => {
        /// Inserts every item and appends to `new`, for each in order, what
        /// [`insert`](Self::insert) would have returned; returns how many were new.
        ///
        $(#[$doc])*
        pub fn insert_many<'a, T, I>(&self, items: I, new: &mut Vec<bool>) -> usize
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            self.insert_many_hashes(
                items
                    .into_iter()
                    .map(|item| $crate::hash::ItemHasher::hash_item(&self.hasher, item)),
                new,
            )
        }
    };
    (contains_many $(#[$doc:meta])*) => {
        /// Appends to `hits`, for each item in order, what [`contains`](Self::contains)
        /// returns; returns how many were `true`.
        ///
        $(#[$doc])*
        pub fn contains_many<'a, T, I>(&self, items: I, hits: &mut Vec<bool>) -> usize
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            self.contains_many_hashes(
                items
                    .into_iter()
                    .map(|item| $crate::hash::ItemHasher::hash_item(&self.hasher, item)),
                hits,
            )
        }
    };
}

/// `impl DedupFilter<T> for $type` through the structure's inherent `insert` and `contains`,
/// for every `T` with the bound after `item:` (`Hash`, or the exact map's `AsRef<[u8]>`). The
/// structure's generics go in the brackets.
macro_rules! dedup_filter {
    (impl[$($generics:tt)*] for $type:ty, item: $bound:path) => {
        impl<T: $bound + ?Sized, $($generics)*> $crate::DedupFilter<T> for $type {
            #[inline]
            fn insert(&self, item: &T) -> bool {
                <$type>::insert(self, item)
            }

            #[inline]
            fn contains(&self, item: &T) -> bool {
                <$type>::contains(self, item)
            }
        }
    };
}

pub(crate) use {batch_of_items, dedup_filter};
