//! [`PaddedShape`], a matrix's shape with its padded sides, and [`DeviceShape`], the same in
//! the `u32`s a kernel launch takes.

use crate::FormatError;

/// The shape of a compressed matrix: its rows and columns, and both sides after the padding
/// its format applies (each format states its rule).
///
/// A format's matrix holds one and gets its getters from [`shape_getters!`](crate::shape_getters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PaddedShape {
    rows: usize,
    cols: usize,
    padded_rows: usize,
    padded_cols: usize,
}

impl PaddedShape {
    /// A `rows x cols` matrix padded to `padded_rows x padded_cols` (as the format computed
    /// them: nothing is checked here).
    pub const fn new(rows: usize, cols: usize, padded_rows: usize, padded_cols: usize) -> Self {
        Self {
            rows,
            cols,
            padded_rows,
            padded_cols,
        }
    }

    /// Rows of the matrix (without padding).
    pub const fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the matrix (without padding).
    pub const fn cols(&self) -> usize {
        self.cols
    }

    /// Rows after padding.
    pub const fn padded_rows(&self) -> usize {
        self.padded_rows
    }

    /// Columns after padding.
    pub const fn padded_cols(&self) -> usize {
        self.padded_cols
    }
}

/// A [`PaddedShape`] in `u32`s, as kernel launches take it, with the format whose launch
/// needs it (for errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceShape {
    /// Rows of the matrix (without padding).
    pub rows: u32,
    /// Columns of the matrix (without padding).
    pub cols: u32,
    /// Rows after padding.
    pub padded_rows: u32,
    /// Columns after padding.
    pub padded_cols: u32,
    format: &'static str,
}

impl DeviceShape {
    /// `shape` in `u32`s, for a launch of `format`'s kernels.
    ///
    /// # Errors
    /// [`FormatError::Shape`] when a side does not fit a `u32`.
    pub fn new(format: &'static str, shape: PaddedShape) -> Result<Self, FormatError> {
        let to_u32 =
            |v: usize| u32::try_from(v).map_err(|_| launch_error(format, shape.rows, shape.cols));
        Ok(Self {
            rows: to_u32(shape.rows)?,
            cols: to_u32(shape.cols)?,
            padded_rows: to_u32(shape.padded_rows)?,
            padded_cols: to_u32(shape.padded_cols)?,
            format,
        })
    }

    /// Rows of the matrix (without padding).
    pub const fn rows(&self) -> usize {
        self.rows as usize
    }

    /// Columns of the matrix (without padding).
    pub const fn cols(&self) -> usize {
        self.cols as usize
    }

    /// Rows after padding.
    pub const fn padded_rows(&self) -> usize {
        self.padded_rows as usize
    }

    /// Columns after padding.
    pub const fn padded_cols(&self) -> usize {
        self.padded_cols as usize
    }

    /// `v` (a size or a count of the launch) as a `u32`.
    ///
    /// # Errors
    /// [`DeviceShape::error`] when it does not fit.
    pub fn to_u32(&self, v: usize) -> Result<u32, FormatError> {
        u32::try_from(v).map_err(|_| self.error())
    }

    /// The error of a launch whose arithmetic (sizes, grid) does not fit a `u32`.
    pub fn error(&self) -> FormatError {
        launch_error(self.format, self.rows(), self.cols())
    }
}

fn launch_error(format: &'static str, rows: usize, cols: usize) -> FormatError {
    FormatError::Shape {
        format,
        rows,
        cols,
        rule: "the GPU launch needs its sizes and grid in u32",
    }
}

/// The shape getters of a matrix type that holds a [`PaddedShape`] or a [`DeviceShape`] in the
/// field named: `rows()`, `cols()`, `padded_rows()` and `padded_cols()`, all `usize`. Invoked
/// inside the type's `impl` block; the two strings, when given, say how the format pads
/// (`"a multiple of 16"`) and end the docs of the padded sides.
///
/// ```
/// use cmv_format::PaddedShape;
///
/// struct M {
///     shape: PaddedShape,
/// }
///
/// impl M {
///     cmv_format::shape_getters!(shape, "a multiple of 16", "a multiple of 16");
/// }
///
/// let m = M { shape: PaddedShape::new(3, 20, 16, 32) };
/// assert_eq!((m.rows(), m.cols(), m.padded_rows(), m.padded_cols()), (3, 20, 16, 32));
/// ```
#[macro_export]
macro_rules! shape_getters {
    ($field:ident) => {
        $crate::shape_getters!($field, "as the format pads them", "as the format pads them");
    };
    ($field:ident, $rows_rule:literal, $cols_rule:literal $(,)?) => {
        /// Rows of the matrix (without padding).
        pub fn rows(&self) -> usize {
            self.$field.rows()
        }

        /// Columns of the matrix (without padding).
        pub fn cols(&self) -> usize {
            self.$field.cols()
        }

        #[doc = concat!("Rows after padding: ", $rows_rule, ".")]
        pub fn padded_rows(&self) -> usize {
            self.$field.padded_rows()
        }

        #[doc = concat!("Columns after padding: ", $cols_rule, ".")]
        pub fn padded_cols(&self) -> usize {
            self.$field.padded_cols()
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_shapes_are_u32_or_a_shape_error() {
        let s = PaddedShape::new(3, 20, 16, 32);
        let d = DeviceShape::new("t", s).unwrap();
        assert_eq!(
            (d.rows, d.cols, d.padded_rows, d.padded_cols),
            (3, 20, 16, 32)
        );
        assert_eq!(
            (d.rows(), d.cols(), d.padded_rows(), d.padded_cols()),
            (3, 20, 16, 32)
        );
        assert_eq!(d.to_u32(7).unwrap(), 7);
        assert!(matches!(
            d.to_u32(usize::MAX),
            Err(FormatError::Shape {
                format: "t",
                rows: 3,
                cols: 20,
                ..
            })
        ));
        let wide = PaddedShape::new(1, usize::MAX, 1, usize::MAX);
        assert!(matches!(
            DeviceShape::new("t", wide),
            Err(FormatError::Shape { rows: 1, .. })
        ));
    }
}
