//! Where the three parts of a perf buffer lie: the user page, the data area
//! (`1 + 2^n` pages counted with the user page) and the AUX area (`2^m`
//! pages at `aux_offset`), as `perf_mmap()` and `perf_mmap_aux()` accept
//! them.

use crate::error::RingError;

/// The byte layout of one perf buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLayout {
    /// The page size (`PAGE_SIZE`).
    pub page_size: usize,
    /// `data_offset`: where the data area starts (one page in).
    pub data_offset: usize,
    /// `data_size`: `2^n` pages (0 pages: a mapping of the user page alone).
    pub data_size: usize,
    /// `aux_offset`: at or after the end of the data area, page aligned.
    pub aux_offset: usize,
    /// `aux_size`: `2^m` pages, or 0 for no AUX area.
    pub aux_size: usize,
}

/// The system's page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

impl RingLayout {
    /// The layout `perf record` asks for: `data_pages` data pages after the
    /// user page and, if `aux_pages != 0`, an AUX area right after the data.
    /// Both counts must be 0 or a power of two (`perf_mmap()`'s rule).
    pub fn new(data_pages: usize, aux_pages: usize) -> Result<Self, RingError> {
        let page_size = page_size();
        Self::with_page_size(page_size, data_pages, aux_pages)
    }

    /// [`RingLayout::new`] for a given page size.
    pub fn with_page_size(
        page_size: usize,
        data_pages: usize,
        aux_pages: usize,
    ) -> Result<Self, RingError> {
        let layout = RingLayout {
            page_size,
            data_offset: page_size,
            data_size: data_pages.checked_mul(page_size).ok_or(RingError::Layout {
                what: "data pages",
                value: data_pages as u64,
            })?,
            // The kernel's user page says 0 while there is no AUX area.
            aux_offset: if aux_pages == 0 {
                0
            } else {
                (1 + data_pages) * page_size
            },
            aux_size: aux_pages.checked_mul(page_size).ok_or(RingError::Layout {
                what: "aux pages",
                value: aux_pages as u64,
            })?,
        };
        layout.validate()?;
        Ok(layout)
    }

    /// Checks the rules a producer's layout must follow, as a consumer that
    /// is handed it from shared memory must: page-aligned, power-of-two
    /// sizes, the AUX area after the data area, and every size small enough
    /// for the 48-bit positions of [`crate::protocol`].
    pub fn validate(&self) -> Result<(), RingError> {
        let bad = |what, value: usize| {
            Err(RingError::Layout {
                what,
                value: value as u64,
            })
        };
        if !self.page_size.is_power_of_two() || self.page_size < 4096 {
            return bad("page_size", self.page_size);
        }
        if self.data_offset != self.page_size {
            return bad("data_offset", self.data_offset);
        }
        if self.data_size != 0 && !self.data_size.is_power_of_two()
            || !self.data_size.is_multiple_of(self.page_size)
            || self.data_size > MAX_AREA
        {
            return bad("data_size", self.data_size);
        }
        if self.aux_size != 0 && !self.aux_size.is_power_of_two()
            || !self.aux_size.is_multiple_of(self.page_size)
            || self.aux_size > MAX_AREA
        {
            return bad("aux_size", self.aux_size);
        }
        if self.aux_size != 0
            && (!self.aux_offset.is_multiple_of(self.page_size)
                || self.aux_offset < self.data_offset + self.data_size
                || self.aux_offset > MAX_AREA * 4)
        {
            return bad("aux_offset", self.aux_offset);
        }
        Ok(())
    }

    /// Bytes of the user page plus the data area: the first mapping.
    pub fn data_mapping_len(&self) -> usize {
        self.data_offset + self.data_size
    }

    /// Bytes from offset 0 to the end of the AUX area (or of the data area
    /// when there is none): the size of a file holding the whole buffer.
    pub fn total_len(&self) -> usize {
        if self.aux_size == 0 {
            self.data_mapping_len()
        } else {
            self.aux_offset + self.aux_size
        }
    }
}

/// The largest data or AUX area: 2^40 bytes, far below the 2^47 the 48-bit
/// positions of the producer's state word can order.
pub const MAX_AREA: usize = 1 << 40;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_mmap_page_counts_must_be_powers_of_two() {
        // perf_mmap(): the size must be (1+n) pages, n = 0 or a power of 2.
        assert!(RingLayout::with_page_size(4096, 8, 16).is_ok());
        assert!(RingLayout::with_page_size(4096, 0, 0).is_ok());
        assert_eq!(
            RingLayout::with_page_size(4096, 3, 0),
            Err(RingError::Layout {
                what: "data_size",
                value: 3 * 4096
            })
        );
        assert!(RingLayout::with_page_size(4096, 4, 6).is_err());
        let l = RingLayout::with_page_size(4096, 8, 4).unwrap();
        assert_eq!((l.aux_offset, l.total_len()), (9 * 4096, 13 * 4096));
    }
}
