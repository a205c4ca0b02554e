//! [`Layout`]: how a matrix is split among coders (`docs/ANS.md`).

use ans_kernels::layout::{CHUNK, QUAD, STRIPE_ROWS};

use crate::error::{Result, shape_error};
use crate::lanes::{LANE_ROWS, MIN_DEFAULT_SEGMENT, SEGMENT_MULTIPLE, SEGMENTS_PER_GROUP};

cmv_format::header_code! {
    /// How a matrix is split among coders (`docs/ANS.md`); stored in the container header as
    /// code 0 (`ans-warp-rows`), 1 (`ans-warp-stripes`), 2 (`ans-lanes`) or 3
    /// (`ans-lanes-esc`), named by its name in the docs.
    pub enum Layout("layout") {
        /// `ans-warp-rows` (the default): one warp per row, 32 coders per row, columns padded to
        /// 128.
        WarpRows = 0 => "ans-warp-rows",
        /// `ans-warp-stripes`: one warp per 32 rows, one coder per row, rows padded to 32 and
        /// columns to 4.
        WarpStripes = 1 => "ans-warp-stripes",
        /// `ans-lanes`: units of 32 rows (one 32-bit coder per row and lane) by a segment of
        /// columns ([`AnsMatrix::segment`](crate::AnsMatrix::segment)), one pair of elements
        /// per step at 8 bits of precision, 16-bit stream words; rows padded to 32 and columns
        /// to 16.
        WarpLanes = 2 => "ans-lanes",
        /// `ans-lanes-esc`: `ans-lanes` with escapes. The model merges the rarest values into
        /// one *escape value* (coded in their place), and each unit lists, after its states,
        /// the elements whose value differs from the escape value (at most
        /// [`MAX_EXCEPTIONS`](ans_kernels::lanes::MAX_EXCEPTIONS) per unit). The rare values
        /// stop taking slots of the 8-bit model: about 0.08 bits per element less at sigma 4.
        WarpLanesEsc = 3 => "ans-lanes-esc",
    }
}

impl Layout {
    /// What one stream of the layout codes: `"row"`, `"stripe"` or `"lane unit"`.
    pub const fn unit(self) -> &'static str {
        match self {
            Layout::WarpRows => "row",
            Layout::WarpStripes => "stripe",
            Layout::WarpLanes | Layout::WarpLanesEsc => "lane unit",
        }
    }

    /// Whether the layout is `ans-lanes` or `ans-lanes-esc` (units of 32 rows by a segment,
    /// 32-bit coders, the `cmv_ans_lanes` kernel).
    pub const fn is_lanes(self) -> bool {
        matches!(self, Layout::WarpLanes | Layout::WarpLanesEsc)
    }

    /// Whether the units carry an exception header and list after their states
    /// (`ans-lanes-esc`).
    pub const fn has_exceptions(self) -> bool {
        matches!(self, Layout::WarpLanesEsc)
    }

    /// Bytes of one word of the layout's logical streams: 4 (`u32`), or 2 (`u16`) for
    /// `ans-lanes`, whose 16-bit words are stored two to a `u32` of the stream part.
    pub const fn word_bytes(self) -> usize {
        match self {
            Layout::WarpRows | Layout::WarpStripes => 4,
            Layout::WarpLanes | Layout::WarpLanesEsc => 2,
        }
    }

    /// The padded shape of a `rows x cols` matrix.
    ///
    /// # Errors
    /// [`FormatError::Shape`](cmv_format::FormatError::Shape) for an empty matrix or a padded
    /// side past `u32::MAX`.
    pub fn padded_shape(self, rows: usize, cols: usize) -> Result<(usize, usize)> {
        let (row_mult, col_mult) = match self {
            Layout::WarpRows => (1, CHUNK),
            Layout::WarpStripes => (STRIPE_ROWS, QUAD),
            Layout::WarpLanes | Layout::WarpLanesEsc => (LANE_ROWS, SEGMENT_MULTIPLE),
        };
        let pad = |n: usize, m: usize| n.div_ceil(m).checked_mul(m);
        match (pad(rows, row_mult), pad(cols, col_mult)) {
            (Some(pr), Some(pc))
                if rows > 0
                    && cols > 0
                    && u32::try_from(pr).is_ok()
                    && u32::try_from(pc).is_ok() =>
            {
                Ok((pr, pc))
            }
            _ => Err(shape_error(rows, cols)),
        }
    }

    /// Column segments of `padded_cols` padded columns cut every `segment` columns:
    /// `padded_cols.div_ceil(segment)` for `ans-lanes` (`segment` positive), 1 for the other
    /// layouts (which ignore `segment`).
    pub const fn segments(self, padded_cols: usize, segment: usize) -> usize {
        match self {
            Layout::WarpRows | Layout::WarpStripes => 1,
            Layout::WarpLanes | Layout::WarpLanesEsc => padded_cols.div_ceil(segment),
        }
    }

    /// Streams of a matrix with `padded_rows` rows and `segments` column segments
    /// ([`Layout::segments`]): one per row (`ans-warp-rows`), one per 32 rows
    /// (`ans-warp-stripes`), or one per 32 rows and segment (`ans-lanes`, unit `u` being row
    /// group `u / segments` and segment `u % segments`).
    pub const fn units(self, padded_rows: usize, segments: usize) -> usize {
        match self {
            Layout::WarpRows => padded_rows,
            Layout::WarpStripes => padded_rows / STRIPE_ROWS,
            Layout::WarpLanes | Layout::WarpLanesEsc => padded_rows / LANE_ROWS * segments,
        }
    }

    /// The padded row that lane `lane` of unit `unit` codes, with `segments` column segments
    /// ([`Layout::segments`]).
    pub(crate) const fn row_of(self, unit: usize, lane: usize, segments: usize) -> usize {
        match self {
            Layout::WarpRows => unit,
            Layout::WarpStripes => STRIPE_ROWS * unit + lane,
            Layout::WarpLanes | Layout::WarpLanesEsc => LANE_ROWS * (unit / segments) + lane,
        }
    }
}

/// The default segment of `ans-lanes` (columns per unit) for a `rows x cols` matrix, used when
/// [`EncodeOptions::lane_segment`](crate::EncodeOptions::lane_segment) is `None`.
///
/// [`SEGMENTS_PER_GROUP`](crate::lanes::SEGMENTS_PER_GROUP) (32) segments per row group: the
/// padded columns (`cols` rounded up to a multiple of 16; 16 for `cols == 0`) over 32, rounded
/// up to a multiple of 16, at least [`MIN_DEFAULT_SEGMENT`](crate::lanes::MIN_DEFAULT_SEGMENT)
/// (64) and at most the padded columns. The rows do not change it (one block per row group).
/// Always a positive multiple of 16.
pub fn default_lane_segment(rows: usize, cols: usize) -> usize {
    let _ = rows;
    let padded_cols = cols
        .div_ceil(SEGMENT_MULTIPLE)
        .max(1)
        .saturating_mul(SEGMENT_MULTIPLE);
    let per_group = padded_cols
        .div_ceil(SEGMENTS_PER_GROUP)
        .div_ceil(SEGMENT_MULTIPLE)
        .saturating_mul(SEGMENT_MULTIPLE);
    per_group.max(MIN_DEFAULT_SEGMENT).min(padded_cols)
}

#[cfg(test)]
mod tests {
    use cmv_format::FormatError;

    use cmv_format::HeaderCode;

    use super::*;
    use crate::AnsError;

    #[test]
    fn default_lane_segments_follow_the_rule() {
        // 32 segments per row group: cols / 32, a multiple of 16.
        for (cols, want) in [
            (16384, 512),
            (8192, 256),
            (4096, 128),
            (2048, 64),
            (28672, 896),
        ] {
            for rows in [1, 2048, 100_000] {
                assert_eq!(default_lane_segment(rows, cols), want, "{rows}x{cols}");
            }
        }
        // 11008 / 32 = 344: a multiple of 8, rounded up to 352.
        assert_eq!(default_lane_segment(4096, 11008), 352);
        // At least 64 columns, at most the padded columns.
        assert_eq!(default_lane_segment(4096, 1024), 64);
        assert_eq!(default_lane_segment(4096, 300), 64);
        for (rows, cols, want) in [(1, 1, 16), (1, 17, 32), (33, 7, 16), (64, 48, 48)] {
            assert_eq!(default_lane_segment(rows, cols), want, "{rows}x{cols}");
        }
        assert_eq!(default_lane_segment(0, 0), 16);
        for rows in [1, 31, 32, 1000, 100_000] {
            for cols in [1, 15, 16, 100, 1000, 5000, 100_000] {
                let s = default_lane_segment(rows, cols);
                assert!(s.is_multiple_of(16) && s >= 16, "{rows}x{cols}: {s}");
                let (_, pc) = Layout::WarpLanes.padded_shape(rows, cols).unwrap();
                assert!(s <= pc, "{rows}x{cols}: {s}");
            }
        }
    }

    #[test]
    fn lane_units_are_group_major() {
        let l = Layout::WarpLanes;
        assert_eq!(l.segments(1000, 256), 4);
        assert_eq!(l.segments(1024, 256), 4);
        assert_eq!(l.units(96, 4), 12);
        assert_eq!(l.row_of(5, 3, 4), 32 + 3);
        assert_eq!(Layout::WarpRows.segments(1000, 0), 1);
        assert_eq!(Layout::WarpStripes.units(64, 1), 2);
        assert_eq!(l.word_bytes(), 2);
        assert_eq!(l.unit(), "lane unit");
    }

    #[test]
    fn padded_shapes() {
        assert_eq!(Layout::WarpLanes.padded_shape(33, 17).unwrap(), (64, 32));
        assert_eq!(Layout::WarpLanes.padded_shape(1, 1).unwrap(), (32, 16));
        assert_eq!(Layout::WarpRows.padded_shape(3, 1).unwrap(), (3, 128));
        assert_eq!(Layout::WarpRows.padded_shape(3, 129).unwrap(), (3, 256));
        assert_eq!(Layout::WarpStripes.padded_shape(33, 5).unwrap(), (64, 8));
        assert_eq!(Layout::WarpStripes.padded_shape(32, 4).unwrap(), (32, 4));
        for l in [
            Layout::WarpRows,
            Layout::WarpStripes,
            Layout::WarpLanes,
            Layout::WarpLanesEsc,
        ] {
            assert!(matches!(
                l.padded_shape(0, 5),
                Err(AnsError::Format(FormatError::Shape {
                    rows: 0,
                    cols: 5,
                    ..
                }))
            ));
            assert!(l.padded_shape(5, 0).is_err());
            assert!(l.padded_shape(5, u32::MAX as usize).is_err());
            assert!(l.padded_shape(usize::MAX, 1).is_err());
            assert_eq!(<Layout as HeaderCode>::from_code(l.code()).unwrap(), l);
            assert_eq!(Layout::from_name(l.name()), Some(l));
        }
        assert_eq!(
            Layout::WarpRows
                .padded_shape(u32::MAX as usize, 1)
                .unwrap()
                .0,
            u32::MAX as usize
        );
        assert!(
            Layout::WarpStripes
                .padded_shape(u32::MAX as usize, 1)
                .is_err()
        );
        assert_eq!(Layout::from_code(2).unwrap(), Layout::WarpLanes);
        assert_eq!(Layout::from_name("ans-lanes"), Some(Layout::WarpLanes));
        assert_eq!(Layout::from_code(3).unwrap(), Layout::WarpLanesEsc);
        assert_eq!(
            Layout::from_name("ans-lanes-esc"),
            Some(Layout::WarpLanesEsc)
        );
        assert!(Layout::WarpLanesEsc.is_lanes() && Layout::WarpLanesEsc.has_exceptions());
        assert!(Layout::WarpLanes.is_lanes() && !Layout::WarpLanes.has_exceptions());
        assert!(!Layout::WarpRows.is_lanes() && !Layout::WarpStripes.has_exceptions());
        assert!(matches!(
            Layout::from_code(4),
            Err(FormatError::Code {
                field: "layout",
                found: 4,
                ..
            })
        ));
    }
}
