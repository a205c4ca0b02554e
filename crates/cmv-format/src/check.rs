//! Checks every format makes: header fields, buffer lengths, offset tables, finite values,
//! and the [`Limits`] a load must stay within.

use crate::{FormatError, Result};

/// What loading a container may cost at most. A container's header declares its shape and
/// part sizes; a hostile one may declare a huge matrix in a few bytes, so every load checks the
/// declared sizes against these limits before it allocates or decodes anything.
///
/// The default admits every layer of today's large models (the largest, an embedding table of
/// 128256 x 8192, has about 2^30 weights) and refuses what would take minutes or tens of GiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most weights (`rows * cols`, padding included) a container may declare.
    pub max_elements: u64,
    /// Most bytes a load may allocate beyond the blob's own size (decoded tables, statistics).
    pub max_alloc_bytes: u64,
}

impl Limits {
    /// `2^31` weights and 16 GiB.
    pub const DEFAULT: Limits = Limits {
        max_elements: 1 << 31,
        max_alloc_bytes: 16 << 30,
    };

    /// No limit (for trusted files only).
    pub const NONE: Limits = Limits {
        max_elements: u64::MAX,
        max_alloc_bytes: u64::MAX,
    };

    /// Checks a declared weight count.
    ///
    /// # Errors
    /// [`FormatError::Limit`] above `max_elements`.
    pub fn check_elements(&self, elements: u64) -> Result<()> {
        within("elements", "max_elements", elements, self.max_elements)
    }

    /// Checks an allocation a load is about to make.
    ///
    /// # Errors
    /// [`FormatError::Limit`] above `max_alloc_bytes`.
    pub fn check_alloc(&self, bytes: u64) -> Result<()> {
        within("bytes", "max_alloc_bytes", bytes, self.max_alloc_bytes)
    }
}

/// `needed` against one limit of [`Limits`] (`field`, counting `what`).
fn within(what: &'static str, field: &'static str, needed: u64, limit: u64) -> Result<()> {
    if needed > limit {
        return Err(FormatError::Limit {
            what,
            field,
            needed,
            limit,
        });
    }
    Ok(())
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A header field that must equal what the other fields imply.
///
/// # Errors
/// [`FormatError::Header`] when `found != expected`.
pub fn check_field(field: &'static str, found: u64, expected: u64) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(FormatError::Header {
            field,
            found,
            expected,
        })
    }
}

/// A buffer that must hold exactly `expected` elements.
///
/// # Errors
/// [`FormatError::Length`] otherwise.
pub fn check_len(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(FormatError::Length {
            what,
            got,
            expected,
        })
    }
}

/// A buffer that must hold at least `expected` elements (device outputs may be larger).
///
/// # Errors
/// [`FormatError::Length`] when shorter.
pub fn check_len_at_least(what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got >= expected {
        Ok(())
    } else {
        Err(FormatError::Length {
            what,
            got,
            expected,
        })
    }
}

/// A batch that must be in `1..=max`.
///
/// # Errors
/// [`FormatError::Batch`] otherwise.
pub fn check_batch(batch: usize, max: usize) -> Result<()> {
    if (1..=max).contains(&batch) {
        Ok(())
    } else {
        Err(FormatError::Batch { batch, max })
    }
}

/// `batch * len`, the length of `batch` vectors of `len` values.
///
/// # Errors
/// [`FormatError::Batch`] when it overflows `usize`.
pub fn batch_len(batch: usize, len: usize) -> Result<usize> {
    batch.checked_mul(len).ok_or(FormatError::Batch {
        batch,
        max: usize::MAX / len.max(1),
    })
}

/// The first non-finite value of `values`, as [`FormatError::NonFinite`].
///
/// # Errors
/// [`FormatError::NonFinite`] naming `what`, the index and the value.
pub fn check_finite<T: Copy + Into<f64>>(what: &'static str, values: &[T]) -> Result<()> {
    match values.iter().position(|&v| !v.into().is_finite()) {
        None => Ok(()),
        Some(index) => Err(FormatError::NonFinite {
            what,
            index,
            value: values[index].into(),
        }),
    }
}

/// The rules of an offset table: `count` entries, the first 0, each a multiple of `multiple`,
/// each at least `min_gap` above the one before (0: non-decreasing), the last equal to
/// `words`, the length of the array it indexes.
#[derive(Clone, Copy, Debug)]
pub struct OffsetRules {
    /// Which table, for the error (`"CSR row"`, `"stream"`).
    pub table: &'static str,
    /// Entries the table must have.
    pub count: usize,
    /// Every offset is a multiple of this (1: any).
    pub multiple: u64,
    /// Every offset is at least this much above the one before (0: non-decreasing).
    pub min_gap: u64,
    /// Words of the array the offsets index; the last offset equals it.
    pub words: u64,
}

/// Checks an offset table against its [`OffsetRules`].
///
/// # Errors
/// [`FormatError::Header`] for a wrong count (field `"<table> offset count"` is not possible
/// with a static name, so the field is `"offset count"`), [`FormatError::Offset`] for the
/// first offset that breaks a rule.
pub fn check_offsets<O: Copy + Into<u64>>(offsets: &[O], rules: &OffsetRules) -> Result<()> {
    let err = |index: usize, value: u64, previous: u64, rule: &'static str| FormatError::Offset {
        table: rules.table,
        index,
        value,
        previous,
        words: rules.words,
        rule,
    };
    check_field("offset count", offsets.len() as u64, rules.count as u64)?;
    let Some(&first) = offsets.first() else {
        return Err(err(0, 0, 0, "the table must not be empty"));
    };
    if first.into() != 0 {
        return Err(err(0, first.into(), 0, "the first offset must be 0"));
    }
    for (i, w) in offsets.windows(2).enumerate() {
        let (prev, cur) = (w[0].into(), w[1].into());
        if rules.multiple > 1 && cur % rules.multiple != 0 {
            return Err(err(
                i + 1,
                cur,
                prev,
                "offsets must be multiples of the block size",
            ));
        }
        if cur < prev.saturating_add(rules.min_gap) {
            return Err(err(
                i + 1,
                cur,
                prev,
                if rules.min_gap == 0 {
                    "offsets must not decrease"
                } else {
                    "offsets must increase by at least the minimum unit size"
                },
            ));
        }
        if cur > rules.words {
            return Err(err(
                i + 1,
                cur,
                prev,
                "offsets must not pass the array's end",
            ));
        }
    }
    let last = offsets[offsets.len() - 1].into();
    if last != rules.words {
        let previous = if offsets.len() > 1 {
            offsets[offsets.len() - 2].into()
        } else {
            0
        };
        return Err(err(
            offsets.len() - 1,
            last,
            previous,
            "the last offset must equal the array's length",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(offsets: &[u32], words: u64) -> (usize, &'static str) {
        let rules = OffsetRules {
            table: "stream",
            count: offsets.len(),
            multiple: 128,
            min_gap: 128,
            words,
        };
        match check_offsets(offsets, &rules) {
            Err(FormatError::Offset { index, rule, .. }) => (index, rule),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn offset_rules() {
        let ok = OffsetRules {
            table: "t",
            count: 3,
            multiple: 128,
            min_gap: 128,
            words: 384,
        };
        check_offsets(&[0u32, 128, 384], &ok).unwrap();
        assert!(matches!(
            check_offsets(&[0u32, 128], &ok),
            Err(FormatError::Header {
                found: 2,
                expected: 3,
                ..
            })
        ));
        assert_eq!(rule(&[], 0).0, 0);
        assert!(rule(&[128, 256], 256).1.contains("first"));
        assert!(rule(&[0, 130, 256], 256).1.contains("multiples"));
        assert!(rule(&[0, 0, 128], 128).1.contains("at least"));
        assert!(rule(&[0, 256, 128], 256).1.contains("at least"));
        assert!(rule(&[0, 256, 512], 256).1.contains("end"));
        assert_eq!(
            rule(&[0, 128, 256], 384),
            (2, "the last offset must equal the array's length")
        );
        let monotone = OffsetRules {
            table: "CSR row",
            count: 4,
            multiple: 1,
            min_gap: 0,
            words: 5,
        };
        check_offsets(&[0u32, 0, 3, 5], &monotone).unwrap();
        assert!(matches!(
            check_offsets(&[0u32, 3, 2, 5], &monotone),
            Err(FormatError::Offset {
                index: 2,
                rule: "offsets must not decrease",
                ..
            })
        ));
    }

    #[test]
    fn limits_lengths_batches_finite() {
        let l = Limits {
            max_elements: 10,
            max_alloc_bytes: 100,
        };
        l.check_elements(10).unwrap();
        assert!(matches!(
            l.check_elements(11),
            Err(FormatError::Limit {
                needed: 11,
                limit: 10,
                ..
            })
        ));
        assert!(l.check_alloc(101).is_err());
        Limits::NONE.check_elements(u64::MAX).unwrap();
        check_len("x", 3, 3).unwrap();
        assert!(matches!(
            check_len("x", 4, 3),
            Err(FormatError::Length {
                got: 4,
                expected: 3,
                ..
            })
        ));
        check_len_at_least("y", 4, 3).unwrap();
        assert!(check_len_at_least("y", 2, 3).is_err());
        check_batch(8, 8).unwrap();
        assert!(matches!(
            check_batch(0, 8),
            Err(FormatError::Batch { batch: 0, max: 8 })
        ));
        assert!(check_batch(9, 8).is_err());
        assert!(batch_len(usize::MAX, 2).is_err());
        assert_eq!(batch_len(3, 4).unwrap(), 12);
        check_finite("w", &[1.0f32, -2.0]).unwrap();
        assert!(matches!(
            check_finite("w", &[1.0f32, f32::NAN]),
            Err(FormatError::NonFinite { index: 1, .. })
        ));
        check_field("f", 3, 3).unwrap();
        assert!(check_field("f", 3, 4).is_err());
    }
}
