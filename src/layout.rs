//! [`Layout`]: where a Bloom filter puts an item's bits. Shared by the sizing (which counts what
//! a layout costs) and the filters (which probe it); it depends on neither.

/// Where an item's `k` bits live. All of them are in one block, so an operation touches one cache
/// line (one memory access) however large the filter is.
///
/// | layout | block | `insert` is | among racing inserts of one new item | bits per item at 1% |
/// |---|---|---|---|---|
/// | [`Word`](Layout::Word) | 64 bits | one `fetch_or` | **exactly one** gets `true` | [table](crate::docs::sizing#limits-where-a-layout-stops) |
/// | [`Line`](Layout::Line) | 512 bits (a cache line) | up to 8 `fetch_or`s in one line | at least one gets `true` | fewer |
///
/// Blocking costs false-positive rate at equal memory (items cluster unevenly over blocks), and the
/// smaller the block the more: every constructor sizes the filter so that the rate at capacity
/// still meets the target, so [`Word`](Layout::Word) spends more bits than [`Line`](Layout::Line)
/// for the same target ([`sizing::blocked`](crate::sizing::blocked) tells how many). Below
/// 6.4e-6 (`Word`) or 4.7e-15 (`Line`) a layout would need more than 4 times the bits of a
/// classic Bloom filter, and the constructors refuse the target with
/// [`Error::FprBelowLayoutLimit`](crate::Error::FprBelowLayoutLimit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// All `k` bits in one 64-bit word: `insert` is a single atomic read-modify-write, so it is
    /// linearizable and an exactly-once gate. The default.
    #[default]
    Word,
    /// All `k` bits in one 512-bit cache line: a better false-positive rate per bit, but `insert`
    /// sets up to 8 words one after the other, so racing inserters of the same new item may both
    /// be told it is new.
    Line,
}

impl Layout {
    /// The block size in bits.
    ///
    /// ```
    /// use seen::Layout;
    /// assert_eq!((Layout::Word.block_bits(), Layout::Line.block_bits()), (64, 512));
    /// assert_eq!(Layout::default(), Layout::Word);
    /// ```
    pub const fn block_bits(self) -> u32 {
        match self {
            Self::Word => 64,
            Self::Line => 512,
        }
    }
}
