//! A tiny format for testing the harness and fuzzing it (`fuzz/fuzz_targets/tiny_*.rs`
//! include this file): a `u8` matrix with a scale, stored in the container as one part.
//! `Tiny<OK>` keeps every promise of `CompressedMatrix`; the other values of `BUG` are
//! deliberately broken variants the harness must catch.

#![allow(dead_code)]

use cmv_format::container::{ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::testing::fix_crc;
use cmv_format::{
    CompressedMatrix, FormatError, Limits, SizeBreakdown, Weights, check_field,
    check_reference_args,
};

/// What is broken in a [`Tiny`] (0: nothing).
pub const OK: u8 = 0;
/// The loader ignores the reserved header word: two blobs load as one matrix.
pub const IGNORES_RESERVED: u8 = 1;
/// The loader recomputes the CRC instead of checking it.
pub const NO_CRC: u8 = 2;
/// The loader takes the values part whatever its length; the reference product indexes it
/// by the header's shape.
pub const TRUSTS_SHAPE: u8 = 3;
/// The size breakdown forgets the header.
pub const BAD_SIZES: u8 = 4;
/// The reference product takes inputs of any length.
pub const LAX_REFERENCE: u8 = 5;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Fields {
    pub rows: u32,
    pub cols: u32,
    pub scale: u32,
    pub reserved: u32,
}

pub static SPEC: ContainerSpec = ContainerSpec {
    format: "tiny",
    magic: *b"CMVTINY\0",
    version: 1,
    oldest_version: 1,
    fields_bytes: 16,
    parts: &[PartSpec::of::<u8>("values")],
};

/// `y = scale * W x` over a `u8` matrix: the tiny format (`BUG` selects a broken variant).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiny<const BUG: u8> {
    pub rows: usize,
    pub cols: usize,
    pub scale: u32,
    pub values: Vec<u8>,
}

impl<const BUG: u8> CompressedMatrix for Tiny<BUG> {
    const NAME: &'static str = "tiny";
    type Weight = u8;
    type Input = i8;
    type Output = i64;
    type Options = u32;
    type Error = FormatError;

    fn encode_weights(w: Weights<'_, u8>, scale: &u32) -> Result<Self, FormatError> {
        let scale = if *scale == 0 { 1 } else { *scale };
        if w.rows() == 0 || w.cols() == 0 || w.rows() > u32::MAX as usize {
            return Err(FormatError::Shape {
                format: "tiny",
                rows: w.rows(),
                cols: w.cols(),
                rule: "1 to 2^32-1 rows and columns",
            });
        }
        check_field("scale", scale.min(17).into(), scale.into())?;
        Ok(Self {
            rows: w.rows(),
            cols: w.cols(),
            scale,
            values: w.data().to_vec(),
        })
    }

    fn variants() -> Vec<(&'static str, u32)> {
        vec![("default", 1), ("scale 3", 3)]
    }

    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn size_breakdown(&self) -> SizeBreakdown {
        let header = if BUG == BAD_SIZES {
            0
        } else {
            SPEC.header_bytes() as u64
        };
        SizeBreakdown::new(self.rows, self.cols, header + self.values.len() as u64).part(
            "values",
            self.values.len() as u64,
            true,
        )
    }

    fn container_bytes(&self) -> Vec<u8> {
        let fields = Fields {
            rows: self.rows as u32,
            cols: self.cols as u32,
            scale: self.scale,
            reserved: 0,
        };
        Writer::new(&SPEC, &fields).part(&self.values).finish()
    }

    fn from_container(blob: &[u8], limits: &Limits) -> Result<Self, FormatError> {
        let mut fixed;
        let blob = if BUG == NO_CRC {
            fixed = blob.to_vec();
            fix_crc(&mut fixed);
            &fixed[..]
        } else {
            blob
        };
        let mut r = Reader::open(blob, &SPEC)?;
        let f: Fields = r.fields();
        if BUG != IGNORES_RESERVED && f.reserved != 0 {
            return Err(FormatError::NonZero {
                what: "reserved header word",
                offset: 44,
                found: f.reserved.into(),
            });
        }
        if f.rows == 0 || f.cols == 0 {
            return Err(FormatError::Shape {
                format: "tiny",
                rows: f.rows as usize,
                cols: f.cols as usize,
                rule: "at least one row and one column",
            });
        }
        if !(1..=16).contains(&f.scale) {
            check_field("scale", f.scale.into(), 16)?;
        }
        let elements = u64::from(f.rows) * u64::from(f.cols);
        limits.check_elements(elements)?;
        let values = if BUG == TRUSTS_SHAPE {
            r.next_part()
        } else {
            r.part(elements)?
        };
        Ok(Self {
            rows: f.rows as usize,
            cols: f.cols as usize,
            scale: f.scale,
            values,
        })
    }

    fn reference(&self, x: &[i8], batch: usize) -> Result<Vec<i64>, FormatError> {
        if BUG != LAX_REFERENCE {
            check_reference_args(x, batch, self.cols)?;
        } else if batch == 0 || x.len() < batch * self.cols {
            return Err(FormatError::Batch { batch, max: 0 });
        }
        let mut y = Vec::with_capacity(batch * self.rows);
        for b in 0..batch {
            let xb = &x[b * self.cols..(b + 1) * self.cols];
            for r in 0..self.rows {
                let dot: i64 = (0..self.cols)
                    .map(|c| i64::from(self.values[r * self.cols + c]) * i64::from(xb[c]))
                    .sum();
                y.push(dot * i64::from(self.scale));
            }
        }
        Ok(y)
    }
}
