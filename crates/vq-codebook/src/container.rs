//! The VQ container (`docs/VQ.md`, "Container"): a [`cmv_format::container`] with the common
//! prefix (magic `b"CMVVQ\0\0\0"`, version 1), the [`VqFields`] and two parts: the packed codes
//! (`u32`, [`crate::Geometry`]'s order) and the codebooks (fp16 bits, `u16`).

use std::mem::size_of;

use bytemuck::{Pod, Zeroable};
use cmv_format::container::{ContainerSpec, PartSpec, Reader, Writer};
use cmv_format::{Limits, SizeBreakdown, check_field};
use half::f16;

use crate::config::{Geometry, Scope, VqConfig};
use crate::error::{Result, VqError};
use crate::matrix::{NAME, VqMatrix};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"CMVVQ\0\0\0";
/// The container version this build writes (and the oldest it reads).
pub const VERSION: u32 = 1;

/// The VQ header fields (after the common prefix).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct VqFields {
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Vector size.
    pub vec: u32,
    /// Bits per code.
    pub bits: u32,
    /// Residual stages.
    pub residuals: u32,
    /// 0: per tensor, 1: per tile.
    pub scope: u32,
    /// Tile rows (0 per tensor).
    pub tile_rows: u32,
    /// Tile columns (0 per tensor).
    pub tile_cols: u32,
}

const CODES: &str = "codes";
const CODEBOOKS: &str = "codebooks";

/// The container: its fields and parts, in order.
pub static SPEC: ContainerSpec = ContainerSpec {
    format: NAME,
    magic: MAGIC,
    version: VERSION,
    oldest_version: VERSION,
    fields_bytes: size_of::<VqFields>(),
    parts: &[PartSpec::of::<u32>(CODES), PartSpec::of::<u16>(CODEBOOKS)],
};

impl VqMatrix {
    /// The header fields of this matrix.
    pub fn fields(&self) -> VqFields {
        let c = self.config();
        let (scope, tile_rows, tile_cols) = match c.scope {
            Scope::Tensor => (0, 0, 0),
            Scope::Tile { rows, cols } => (1, rows as u32, cols as u32),
        };
        VqFields {
            rows: self.rows() as u32,
            cols: self.cols() as u32,
            vec: c.vec as u32,
            bits: c.bits,
            residuals: c.residuals as u32,
            scope,
            tile_rows,
            tile_cols,
        }
    }

    /// The container.
    pub fn to_bytes(&self) -> Vec<u8> {
        let cb: Vec<u16> = self.codebooks().iter().map(|c| c.to_bits()).collect();
        Writer::new(&SPEC, &self.fields())
            .part(self.codes())
            .part(&cb)
            .finish()
    }

    /// Reads a container within the default [`Limits`].
    ///
    /// # Errors
    /// As [`VqMatrix::from_bytes_with`].
    pub fn from_bytes(blob: &[u8]) -> Result<Self> {
        Self::from_bytes_with(blob, &Limits::default())
    }

    /// Reads a container: the core's checks ([`Reader::open`]: magic, version, sizes, zero
    /// padding, CRC), the fields (shape, configuration, scope 0 or 1, tile sides zero per
    /// tensor), the weights against `limits.max_elements` and the parts' bytes against
    /// `limits.max_alloc_bytes`, each part's exact length, then [`VqMatrix::validate`].
    ///
    /// # Errors
    /// One per failed check, naming the offending value.
    pub fn from_bytes_with(blob: &[u8], limits: &Limits) -> Result<Self> {
        let mut r = Reader::open(blob, &SPEC)?;
        let f: VqFields = r.fields();
        let scope = match f.scope {
            0 => {
                check_field("tile_rows", f.tile_rows.into(), 0)?;
                check_field("tile_cols", f.tile_cols.into(), 0)?;
                Scope::Tensor
            }
            1 => Scope::Tile {
                rows: f.tile_rows as usize,
                cols: f.tile_cols as usize,
            },
            s => {
                return Err(VqError::Config {
                    what: "scope",
                    value: s.into(),
                    rule: "the scope must be 0 (per tensor) or 1 (per tile)",
                });
            }
        };
        let config = VqConfig {
            vec: f.vec as usize,
            bits: f.bits,
            residuals: f.residuals as usize,
            scope,
        };
        let (rows, cols) = (f.rows as usize, f.cols as usize);
        let g = Geometry::new(rows, cols, config)?;
        limits.check_elements(rows as u64 * cols as u64)?;
        limits.check_alloc(g.code_words() as u64 * 4 + g.codebook_len() as u64 * 2)?;
        let codes: Vec<u32> = r.part(g.code_words() as u64)?;
        let cb: Vec<u16> = r.part(g.codebook_len() as u64)?;
        let cb = cb.into_iter().map(f16::from_bits).collect();
        VqMatrix::from_parts(rows, cols, config, cb, codes)
    }

    /// Bytes of every part (both read by a kernel).
    pub fn size_breakdown(&self) -> SizeBreakdown {
        let parts = [
            (CODES, self.codes().len() as u64 * 4),
            (CODEBOOKS, self.codebooks().len() as u64 * 2),
        ];
        let container = SPEC.container_bytes(&parts.map(|p| p.1));
        parts.iter().fold(
            SizeBreakdown::new(self.rows(), self.cols(), container),
            |s, &(name, bytes)| s.part(name, bytes, true),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_layout_is_fixed() {
        assert_eq!(size_of::<VqFields>(), 32);
        assert_eq!(SPEC.header_bytes(), 32 + 32 + 2 * 16);
    }
}
