//! [`Layout`]: how a matrix is split among coders (`docs/ANS.md`).

use ans_kernels::layout::{CHUNK, QUAD, STRIPE_ROWS};

use crate::error::{Result, shape_error};

cmv_format::header_code! {
    /// How a matrix is split among coders (`docs/ANS.md`); stored in the container header as
    /// code 0 (`ans-warp-rows`) or 1 (`ans-warp-stripes`), named by its name in the docs.
    pub enum Layout("layout") {
        /// `ans-warp-rows` (the default): one warp per row, 32 coders per row, columns padded to
        /// 128.
        WarpRows = 0 => "ans-warp-rows",
        /// `ans-warp-stripes`: one warp per 32 rows, one coder per row, rows padded to 32 and
        /// columns to 4.
        WarpStripes = 1 => "ans-warp-stripes",
    }
}

impl Layout {
    /// What one stream of the layout codes: `"row"` or `"stripe"`.
    pub const fn unit(self) -> &'static str {
        match self {
            Layout::WarpRows => "row",
            Layout::WarpStripes => "stripe",
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

    /// Streams of a matrix with `padded_rows` rows: one per row, or one per 32 rows.
    pub const fn units(self, padded_rows: usize) -> usize {
        match self {
            Layout::WarpRows => padded_rows,
            Layout::WarpStripes => padded_rows / STRIPE_ROWS,
        }
    }

    /// The padded row that lane `lane` of unit `unit` codes.
    pub(crate) const fn row_of(self, unit: usize, lane: usize) -> usize {
        match self {
            Layout::WarpRows => unit,
            Layout::WarpStripes => STRIPE_ROWS * unit + lane,
        }
    }
}

#[cfg(test)]
mod tests {
    use cmv_format::FormatError;

    use cmv_format::HeaderCode;

    use super::*;
    use crate::AnsError;

    #[test]
    fn padded_shapes() {
        assert_eq!(Layout::WarpRows.padded_shape(3, 1).unwrap(), (3, 128));
        assert_eq!(Layout::WarpRows.padded_shape(3, 129).unwrap(), (3, 256));
        assert_eq!(Layout::WarpStripes.padded_shape(33, 5).unwrap(), (64, 8));
        assert_eq!(Layout::WarpStripes.padded_shape(32, 4).unwrap(), (32, 4));
        for l in [Layout::WarpRows, Layout::WarpStripes] {
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
        assert!(matches!(
            Layout::from_code(2),
            Err(FormatError::Code {
                field: "layout",
                found: 2,
                ..
            })
        ));
    }
}
