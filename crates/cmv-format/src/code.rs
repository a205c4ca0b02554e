//! Enumerations stored in a header as a `u32` code (a layout, an outlier encoding).

use crate::{FormatError, Result};

/// An enumeration stored in a header as a `u32` code, with a name for docs and tables.
///
/// Implement [`HeaderCode::ALL`], [`HeaderCode::code`] and [`HeaderCode::name`]; the
/// decoding ([`HeaderCode::from_code`]) and its error come with the trait.
pub trait HeaderCode: Sized + Copy + PartialEq + 'static {
    /// The header field, for errors (`"layout"`, `"outlier format"`).
    const FIELD: &'static str;
    /// Every value, in code order.
    const ALL: &'static [Self];

    /// The code stored in the header.
    fn code(self) -> u32;

    /// The name in the docs and tables.
    fn name(self) -> &'static str;

    /// The value of a stored code.
    ///
    /// # Errors
    /// [`FormatError::Code`] for an unknown code, listing the known ones.
    fn from_code(code: u32) -> Result<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.code() == code)
            .ok_or_else(|| FormatError::Code {
                field: Self::FIELD,
                found: code,
                known: Self::ALL
                    .iter()
                    .map(|v| format!("{} = {}", v.code(), v.name()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The value with this name.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Two {
        A,
        B,
    }

    impl HeaderCode for Two {
        const FIELD: &'static str = "two";
        const ALL: &'static [Self] = &[Two::A, Two::B];
        fn code(self) -> u32 {
            self as u32
        }
        fn name(self) -> &'static str {
            match self {
                Two::A => "a",
                Two::B => "b",
            }
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_ones_are_named() {
        for &v in Two::ALL {
            assert_eq!(Two::from_code(v.code()).unwrap(), v);
            assert_eq!(Two::from_name(v.name()), Some(v));
        }
        let e = Two::from_code(7).unwrap_err();
        assert!(matches!(
            e,
            FormatError::Code {
                field: "two",
                found: 7,
                ..
            }
        ));
        assert!(e.to_string().contains("0 = a, 1 = b"), "{e}");
    }
}
