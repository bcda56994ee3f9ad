//! The crate's only `unsafe` code: one system call, `madvise(MADV_HUGEPAGE)`, asking Linux to
//! back a large table with 2 MiB transparent huge pages.
//!
//! Why: a Bloom filter or an overwrite map reads one random cache line per operation. With
//! 4 KiB pages, every such read of a table larger than the TLB's reach (a few MiB) also misses
//! the TLB and walks the page tables; with 2 MiB pages the TLB covers gigabytes. Measured in
//! [the benchmarks](crate::docs::benchmarks#huge-pages).
//!
//! Which: every table of [`HUGE_PAGE_MIN_BYTES`] or more that goes through
//! `bits::try_boxed_slice` (a Bloom filter's bits, an overwrite map's slots).
//!
//! How: the table is reserved (not yet touched), advised, then written, so the first write to
//! each 2 MiB region faults in a huge page. The advice covers the reservation from its first
//! page to its last; the kernel puts a huge page in every 2 MiB-aligned region of an advised
//! range that lies wholly inside one mapping. glibc serves reservations of 32 MiB and more (and
//! often smaller ones) with a mapping of their own, which Linux places on a 2 MiB boundary
//! (since 6.7; older kernels leave the partial regions at both ends on small pages); a smaller
//! reservation served from the heap gets huge pages only for the 2 MiB regions inside it. The
//! advice never changes any memory's contents, its own or its neighbours'. Not a 2 MiB-aligned
//! allocation of our own: that needs the raw allocator API, the pointer work this crate keeps
//! out. Measured: 98% of a 153 MB filter on huge pages (`AnonHugePages` in
//! `/proc/self/smaps`). Where the advice is refused (THP disabled, or `never`, or not Linux,
//! or a kernel whose base page is not 4 KiB: the start is then misaligned and the call fails
//! with `EINVAL`) the table stays on small pages: same behavior, slower.
//!
//! What the advice does beyond the table (none of it touches memory safety or contents):
//! - It is a flag on the address range, not on the table: it outlives the table. A table
//!   the allocator served from its heap (glibc does for reservations under its dynamic mmap
//!   threshold, up to 32 MiB, and in a thread's arena) returns that range to the heap on
//!   drop, still advised, and later allocations placed there get huge pages too: more
//!   resident memory for them. Seen on glibc 2.36: an 8 MiB `Vec` allocated after a 10 MB
//!   filter was dropped sat in the mapping the filter's advice had split off (`hg` in its
//!   `VmFlags`). A table the allocator mapped on its own is unmapped on drop, advice and all.
//! - Advising part of a mapping splits it (one more entry towards `vm.max_map_count`).
//! - With the default `defrag` setting (`madvise`), a page fault in an advised range may
//!   compact memory to find a huge page: building a large table can stall on a fragmented
//!   machine, where a small-page build would not.

/// Tables of this many bytes or more are advised: about the reach of a second-level TLB with
/// 4 KiB pages (1,536 to 2,048 entries on current x86 cores: 6 to 8 MiB). A smaller table is
/// mostly covered by the TLB already. A first plan set 32 MiB; a 10M-item
/// filter at 1% (15 MB) was measured 10-15% faster on huge pages, hence the lower bound.
pub(crate) const HUGE_PAGE_MIN_BYTES: usize = 8 << 20;

/// Asks the kernel to back `len` bytes from address `start` with transparent huge pages, from
/// the page holding `start` to the page holding the last byte; returns whether it accepted.
///
/// Callers pass memory they own and have not yet written (a `Vec`'s spare capacity). The
/// advice never changes the memory's contents, so it is safe on any range; its other effects
/// (it outlives the table, it splits mappings) are in the module docs.
#[cfg(target_os = "linux")]
pub(crate) fn advise_huge_pages(start: usize, len: usize) -> bool {
    const PAGE: usize = 4096;
    if len == 0 {
        return false;
    }
    let first = start & !(PAGE - 1);
    let end = start.saturating_add(len).div_ceil(PAGE) * PAGE;
    #[allow(unsafe_code)]
    // SAFETY: `madvise` with `MADV_HUGEPAGE` is advisory: it sets a flag on the mappings in
    // `[first, end)` telling the kernel it may back them with huge pages, and changes neither
    // their contents nor their validity (madvise(2): unlike `MADV_DONTNEED` or `MADV_FREE`, it
    // is not destructive). The range holds `start..start + len`, which the caller owns, rounded
    // out to whole pages as the call requires; the pages it may share at either end are only
    // advised too (and stay advised after the table is freed: see the module docs). On a range
    // with unmapped pages the kernel still advises the mapped parts and returns `ENOMEM`
    // (`madvise_walk_vmas`), which we report as a refusal: no memory is touched either way.
    let status =
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    status == 0
}

/// Not Linux: there is no transparent huge page advice to give.
#[cfg(not(target_os = "linux"))]
pub(crate) fn advise_huge_pages(_start: usize, _len: usize) -> bool {
    false
}

/// The kilobytes of `AnonHugePages` of the mapping holding `address`, from
/// `/proc/self/smaps`; `None` when that cannot be read.
#[cfg(all(test, not(seen_loom), target_os = "linux"))]
pub(crate) fn huge_kib_at(address: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next()?;
        if let Some((lo, hi)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let (lo, hi) = (
                usize::from_str_radix(lo, 16).ok()?,
                usize::from_str_radix(hi, 16).ok()?,
            );
            inside = (lo..hi).contains(&address);
        } else if inside && first == "AnonHugePages:" {
            return fields.next()?.parse().ok();
        }
    }
    None
}

/// Whether transparent huge pages may be used when advised: `enabled` is `[always]` or
/// `[madvise]`.
#[cfg(all(test, not(seen_loom), target_os = "linux"))]
pub(crate) fn huge_pages_enabled() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|s| s.contains("[always]") || s.contains("[madvise]"))
}
