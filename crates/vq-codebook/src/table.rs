//! The layout of the table kernel (`vq_kernels::lut`) on the host: which matrices it takes,
//! its geometry and rotated byte codes, and its arithmetic on the CPU (no GPU needed, so CI
//! tests the layout and the lookups the kernel does).

use half::f16;
use vq_kernels::lut::{LUT_VECS, LutGeometry, lut_codes, lut_model, model_params};

use crate::matrix::VqMatrix;

/// The table kernel's layout of a matrix: its geometry and the rotated byte codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// Slabs, chunks and tiles as the kernel walks them.
    pub geom: LutGeometry,
    /// `geom.code_bytes()` bytes of codes as u32 words ([`vq_kernels::lut`] has the order).
    pub codes: Vec<u32>,
}

impl VqMatrix {
    /// The table kernel's geometry with chunks of about `chunk` rows; `None` where the table
    /// kernel does not take the matrix (it takes `VQ<v, 8, 1>` with `v` in 2, 4, 8, tiles of
    /// a multiple of 32 rows unless there is one tile row and of a multiple of 32 vectors
    /// unless there is one tile column).
    pub fn table_geometry(&self, chunk: usize) -> Option<LutGeometry> {
        let g = self.geometry();
        let c = g.config;
        if c.bits != 8 || c.residuals != 1 || !LUT_VECS.contains(&c.vec) {
            return None;
        }
        if g.rows > u32::MAX as usize / 2 || g.cols > u32::MAX as usize / 2 {
            return None;
        }
        LutGeometry::new(g.rows, g.vecs, g.tile_rows, g.tile_vecs, g.tiles_c, chunk)
    }

    /// Rows per chunk for the table kernel on a GPU of `sms` SMs: about two items per
    /// resident block (3 per SM), in multiples of 512 rows, at least 512 and at most a tile's
    /// rows. Large chunks build fewer tables (a table costs about as much as 256
    /// rows of lookups); enough items keep every SM busy.
    pub fn table_chunk(&self, sms: usize) -> usize {
        let Some(g) = self.table_geometry(512) else {
            return 512;
        };
        let target = (self.rows() * g.slabs).div_ceil(6 * sms.max(1));
        target.div_ceil(512).max(1) * 512
    }

    /// The table kernel's layout with chunks of about `chunk` rows, `None` where it does not
    /// take the matrix ([`VqMatrix::table_geometry`]).
    pub fn table_layout(&self, chunk: usize) -> Option<TableLayout> {
        let geom = self.table_geometry(chunk)?;
        let g = self.geometry();
        let codes = lut_codes(g.rows, g.vecs, &geom, |r, i| self.code(0, r, i) as u8);
        Some(TableLayout { geom, codes })
    }

    /// The table kernel's product of one vector `x` (`cols` values) on the CPU, in the
    /// kernel's fp32 arithmetic (`vq_kernels::lut::lut_model`), before the fp16 rounding.
    pub fn table_model(&self, layout: &TableLayout, x: &[f16]) -> Vec<f32> {
        let p = model_params(self.rows(), self.cols(), &layout.geom);
        let cb: Vec<u16> = self.codebooks().iter().map(|h| h.to_bits()).collect();
        let xs: Vec<u16> = x.iter().map(|h| h.to_bits()).collect();
        lut_model(&p, self.config().vec, &layout.codes, &cb, &xs)
    }
}
