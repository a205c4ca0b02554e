//! Enumerations stored in a header as a `u32` code (a layout, an outlier encoding).

use crate::{FormatError, Result};

/// An enumeration stored in a header as a `u32` code, with a name for docs and tables.
///
/// Implement [`HeaderCode::ALL`], [`HeaderCode::code`] and [`HeaderCode::name`], or declare
/// the enumeration with [`header_code!`](crate::header_code), which writes them from its
/// table; the decoding ([`HeaderCode::from_code`]) and its error come with the trait.
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

/// Declares an enumeration stored as a header code and implements [`HeaderCode`] for it, from
/// one table: each variant with its docs and attributes, its code and its name. The enum
/// derives `Clone, Copy, Debug, PartialEq, Eq, Hash` (add more in the attributes), its
/// `Default` is the first variant of the table, and it gets `const fn`s `code` and `name` as
/// well as the trait's methods. The string after the enum's name is [`HeaderCode::FIELD`].
///
/// ```
/// use cmv_format::HeaderCode;
///
/// cmv_format::header_code! {
///     /// How the parts are ordered.
///     pub enum Order("order") {
///         /// Rows first (the default: the first variant).
///         Rows = 0 => "rows",
///         /// Columns first.
///         Cols = 1 => "cols",
///     }
/// }
///
/// assert_eq!(Order::default(), Order::Rows);
/// assert_eq!(Order::Cols.code(), 1);
/// assert_eq!(Order::from_code(0).unwrap(), Order::Rows);
/// assert_eq!(Order::from_name("cols"), Some(Order::Cols));
/// assert!(Order::from_code(2).is_err());
/// ```
#[macro_export]
macro_rules! header_code {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident($field:literal) {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $code:literal => $vname:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            /// The code stored in the header.
            pub const fn code(self) -> u32 {
                match self {
                    $(Self::$variant => $code,)+
                }
            }

            /// The name in the docs and tables.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $vname,)+
                }
            }
        }

        impl ::core::default::Default for $name {
            /// The first variant of the table.
            fn default() -> Self {
                <Self as $crate::HeaderCode>::ALL[0]
            }
        }

        impl $crate::HeaderCode for $name {
            const FIELD: &'static str = $field;
            const ALL: &'static [Self] = &[$(Self::$variant),+];

            fn code(self) -> u32 {
                $name::code(self)
            }

            fn name(self) -> &'static str {
                $name::name(self)
            }
        }
    };
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
