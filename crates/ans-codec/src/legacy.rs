//! The reader of version 1 containers (written by builds before cmv's one container).
//!
//! A 64-byte header (magic, version, layout, precision, group, rows, cols, padded rows and
//! columns, offset count, stream words, CRC-32 of the whole blob with that field zero, three
//! zero words), then the frequencies, offsets and stream back to back.

use cmv_format::container::{self, le_vec, legacy_parts};
use cmv_format::{FormatError, Limits, check_field};

use crate::error::Result;
use crate::layout::Layout;
use crate::load::AnsFields;
use crate::matrix::AnsMatrix;
use crate::model::{FREQ_BYTES, VALUES};

/// The version this module reads.
pub(crate) const VERSION: u32 = 1;
/// Bytes of the header.
const HEADER_BYTES: usize = 64;
/// Where the CRC field lies in the header.
const CRC_OFFSET: usize = 48;

/// Reads a version 1 container (its magic and version already checked).
pub(crate) fn read(blob: &[u8], limits: &Limits) -> Result<AnsMatrix> {
    let head = container::head::<HEADER_BYTES>(blob)?;
    let word = |i: usize| u32::from_le_bytes(head[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    for i in 13..16 {
        if word(i) != 0 {
            return Err(FormatError::NonZero {
                what: "reserved header word",
                offset: 4 * i as u64,
                found: word(i).into(),
            }
            .into());
        }
    }
    let fields = AnsFields {
        layout: word(3),
        precision: word(4),
        group: word(5),
        rows: word(6),
        cols: word(7),
        padded_rows: word(8),
        padded_cols: word(9),
        segment: 0,
    };
    let (offset_count, stream_words) = (word(10), word(11));
    // Version 1 predates ans-lanes: only the first two layouts.
    if fields.layout == Layout::WarpLanes.code() || fields.layout == Layout::WarpLanesEsc.code() {
        return Err(FormatError::Code {
            field: "layout",
            found: fields.layout,
            known: format!(
                "{} = {}, {} = {} (version 1)",
                Layout::WarpRows.code(),
                Layout::WarpRows.name(),
                Layout::WarpStripes.code(),
                Layout::WarpStripes.name()
            ),
        }
        .into());
    }
    let (_, _, units) = fields.check(limits)?;
    check_field("offset_count", offset_count.into(), units as u64 + 1)?;
    let parts = legacy_parts(
        blob,
        HEADER_BYTES,
        CRC_OFFSET,
        &[
            ("frequency table", FREQ_BYTES as u64),
            ("offset table", 4 * u64::from(offset_count)),
            ("stream", 4 * u64::from(stream_words)),
        ],
    )?;
    let freqs: Vec<u16> = le_vec(parts[0]);
    debug_assert_eq!(freqs.len(), VALUES);
    fields.matrix(limits, &freqs, le_vec(parts[1]), le_vec(parts[2]))
}
