//! The methods every shared structure has that only hash, cut and forward: the hash, batch,
//! blocking and async forms of `insert` and `contains`, written once by [`item_forms!`]. Each
//! structure writes out `insert` and `contains` (what `true` means differs from one to the
//! next) and the two drivers of its protocol, `insert_via` and `contains_via`; the macro adds
//! the rest, the blocking forms by [`Server::block_on`](crate::Server) of the async ones.

/// Writes, in an `impl` block of a structure with a `server`, `hasher()`, `insert`,
/// `contains`, and `async fn insert_via(&self, Via, &[Hash128], &mut Vec<bool>)` and
/// `contains_via` (a call of any size, cut into requests of
/// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS), answering nothing on an error):
/// `insert_many_hashes`, `contains_many_hashes`, `insert_hash`, `contains_hash`, their
/// `_async` forms, `insert_async`, `contains_async`, `insert_many`, `contains_many` and their
/// `_async` forms.
macro_rules! item_forms {
    () => {
        /// Inserts the items of `hashes` (from [`hasher`](Self::hasher)), appending to `new`
        /// whether each was new (as [`insert`](Self::insert) would say, one by one, in order);
        /// returns how many were. Its round trips are the type's, per
        /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
        ///
        /// # Errors
        ///
        /// As [`insert`](Self::insert); `new` is then unchanged (the requests before the one
        /// that failed have run: their items are in the structure, unanswered).
        pub fn insert_many_hashes<I: IntoIterator<Item = seen::hash::Hash128>>(
            &self,
            hashes: I,
            new: &mut Vec<bool>,
        ) -> Result<usize, crate::Error> {
            let hashes: Vec<seen::hash::Hash128> = hashes.into_iter().collect();
            self.server
                .block_on(self.insert_via(crate::server::Via::Blocking, &hashes, new))
        }

        /// [`insert_many_hashes`](Self::insert_many_hashes), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`insert_many_hashes`](Self::insert_many_hashes).
        pub async fn insert_many_hashes_async<I: IntoIterator<Item = seen::hash::Hash128>>(
            &self,
            hashes: I,
            new: &mut Vec<bool>,
        ) -> Result<usize, crate::Error> {
            let hashes: Vec<seen::hash::Hash128> = hashes.into_iter().collect();
            self.insert_via(crate::server::Via::Async, &hashes, new)
                .await
        }

        /// Looks up the items of `hashes`, appending to `hits` whether each is there (as
        /// [`contains`](Self::contains) would say); returns how many are. One round trip per
        /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items.
        ///
        /// # Errors
        ///
        /// As [`contains`](Self::contains); `hits` is then unchanged.
        pub fn contains_many_hashes<I: IntoIterator<Item = seen::hash::Hash128>>(
            &self,
            hashes: I,
            hits: &mut Vec<bool>,
        ) -> Result<usize, crate::Error> {
            let hashes: Vec<seen::hash::Hash128> = hashes.into_iter().collect();
            self.server
                .block_on(self.contains_via(crate::server::Via::Blocking, &hashes, hits))
        }

        /// [`contains_many_hashes`](Self::contains_many_hashes), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`contains_many_hashes`](Self::contains_many_hashes).
        pub async fn contains_many_hashes_async<I: IntoIterator<Item = seen::hash::Hash128>>(
            &self,
            hashes: I,
            hits: &mut Vec<bool>,
        ) -> Result<usize, crate::Error> {
            let hashes: Vec<seen::hash::Hash128> = hashes.into_iter().collect();
            self.contains_via(crate::server::Via::Async, &hashes, hits)
                .await
        }

        fn hashes<'a, T: core::hash::Hash + ?Sized + 'a>(
            &self,
            items: impl IntoIterator<Item = &'a T>,
        ) -> Vec<seen::hash::Hash128> {
            items
                .into_iter()
                .map(|item| seen::hash::ItemHasher::hash_item(self.hasher(), item))
                .collect()
        }

        /// [`insert`](Self::insert) of a hash from [`hasher`](Self::hasher).
        ///
        /// # Errors
        ///
        /// As [`insert`](Self::insert).
        pub fn insert_hash(&self, hash: seen::hash::Hash128) -> Result<bool, crate::Error> {
            Ok(self.insert_many_hashes([hash], &mut Vec::with_capacity(1))? == 1)
        }

        /// [`contains`](Self::contains) of a hash from [`hasher`](Self::hasher).
        ///
        /// # Errors
        ///
        /// As [`contains`](Self::contains).
        pub fn contains_hash(&self, hash: seen::hash::Hash128) -> Result<bool, crate::Error> {
            Ok(self.contains_many_hashes([hash], &mut Vec::with_capacity(1))? == 1)
        }

        /// [`insert_hash`](Self::insert_hash), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`insert`](Self::insert).
        pub async fn insert_hash_async(
            &self,
            hash: seen::hash::Hash128,
        ) -> Result<bool, crate::Error> {
            let mut new = Vec::with_capacity(1);
            Ok(self.insert_many_hashes_async([hash], &mut new).await? == 1)
        }

        /// [`contains_hash`](Self::contains_hash), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`contains`](Self::contains).
        pub async fn contains_hash_async(
            &self,
            hash: seen::hash::Hash128,
        ) -> Result<bool, crate::Error> {
            let mut hits = Vec::with_capacity(1);
            Ok(self.contains_many_hashes_async([hash], &mut hits).await? == 1)
        }

        /// [`insert`](Self::insert), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`insert`](Self::insert).
        pub async fn insert_async<T: core::hash::Hash + ?Sized>(
            &self,
            item: &T,
        ) -> Result<bool, crate::Error> {
            let hash = seen::hash::ItemHasher::hash_item(self.hasher(), item);
            self.insert_hash_async(hash).await
        }

        /// [`contains`](Self::contains), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`contains`](Self::contains).
        pub async fn contains_async<T: core::hash::Hash + ?Sized>(
            &self,
            item: &T,
        ) -> Result<bool, crate::Error> {
            let hash = seen::hash::ItemHasher::hash_item(self.hasher(), item);
            self.contains_hash_async(hash).await
        }

        /// Inserts every item as one batch (its round trips: the type's docs; one request per
        /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items, so that the memory a call takes
        /// is bounded whatever its size), appending to `new` whether each was new, in order;
        /// returns how many were. The answers are those of inserting the items one by one, in
        /// order: an item repeated in the batch is new at most once, at its first place.
        ///
        /// # Errors
        ///
        /// As [`insert`](Self::insert): no item of a failed batch is answered, and `new` is
        /// unchanged.
        pub fn insert_many<'a, T, I>(
            &self,
            items: I,
            new: &mut Vec<bool>,
        ) -> Result<usize, crate::Error>
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            let start = new.len();
            let mut count = 0;
            let mut items = items.into_iter().peekable();
            while items.peek().is_some() {
                let hashes = self.hashes(items.by_ref().take(crate::REQUEST_ITEMS));
                match self.insert_many_hashes(hashes, new) {
                    Ok(n) => count += n,
                    Err(err) => {
                        new.truncate(start);
                        return Err(err);
                    }
                }
            }
            Ok(count)
        }

        /// Looks up every item as one batch (one round trip per
        /// [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) items), appending to `hits` whether each
        /// is there; returns how many are.
        ///
        /// # Errors
        ///
        /// As [`contains`](Self::contains); `hits` is then unchanged.
        pub fn contains_many<'a, T, I>(
            &self,
            items: I,
            hits: &mut Vec<bool>,
        ) -> Result<usize, crate::Error>
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            let start = hits.len();
            let mut count = 0;
            let mut items = items.into_iter().peekable();
            while items.peek().is_some() {
                let hashes = self.hashes(items.by_ref().take(crate::REQUEST_ITEMS));
                match self.contains_many_hashes(hashes, hits) {
                    Ok(n) => count += n,
                    Err(err) => {
                        hits.truncate(start);
                        return Err(err);
                    }
                }
            }
            Ok(count)
        }

        /// [`insert_many`](Self::insert_many), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`insert_many`](Self::insert_many).
        pub async fn insert_many_async<'a, T, I>(
            &self,
            items: I,
            new: &mut Vec<bool>,
        ) -> Result<usize, crate::Error>
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            // Hashed before the first await (16 bytes an item), so that the future holds no
            // borrow of the caller's iterator and stays `Send` whatever the iterator is; the
            // requests are cut by `insert_via`.
            let hashes = self.hashes(items);
            self.insert_via(crate::server::Via::Async, &hashes, new)
                .await
        }

        /// [`contains_many`](Self::contains_many), on the tokio connection.
        ///
        /// # Errors
        ///
        /// As [`contains_many`](Self::contains_many).
        pub async fn contains_many_async<'a, T, I>(
            &self,
            items: I,
            hits: &mut Vec<bool>,
        ) -> Result<usize, crate::Error>
        where
            T: core::hash::Hash + ?Sized + 'a,
            I: IntoIterator<Item = &'a T>,
        {
            let hashes = self.hashes(items);
            self.contains_via(crate::server::Via::Async, &hashes, hits)
                .await
        }
    };
}

pub(crate) use item_forms;

/// Cuts `hashes` into requests of [`REQUEST_ITEMS`](crate::REQUEST_ITEMS) and runs `each` on
/// them in turn, appending its answers to `out`; how many are `true`. On an error `out` is cut
/// back to its length before the call: a failed call answers nothing.
pub(crate) async fn in_requests<'c, F, Fut>(
    hashes: &'c [seen::hash::Hash128],
    out: &mut Vec<bool>,
    mut each: F,
) -> Result<usize, crate::Error>
where
    F: FnMut(&'c [seen::hash::Hash128]) -> Fut,
    Fut: Future<Output = Result<Vec<bool>, crate::Error>>,
{
    let start = out.len();
    let mut count = 0;
    for chunk in hashes.chunks(crate::REQUEST_ITEMS) {
        match each(chunk).await {
            Ok(answers) => {
                count += answers.iter().filter(|&&b| b).count();
                out.extend(answers);
            }
            Err(err) => {
                out.truncate(start);
                return Err(err);
            }
        }
    }
    Ok(count)
}
