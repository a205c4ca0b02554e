//! The layout of the big-codebook table kernel (`vq_kernels::big`) on the host: which
//! matrices it takes, its geometry, its code planes and fragment-order codebook, and its
//! arithmetic on the CPU (no GPU needed, so CI tests the layout and the lookups the kernel
//! does).

use half::f16;
use vq_kernels::big::{BigGeometry, big_codebook, big_codes, big_model, model_params};
use vq_kernels::bigmma::{BM_GEMV, BigMmaGeometry, BmShape, big_mma_model, bm_model_params};

use crate::matrix::VqMatrix;

/// The big-codebook kernel's layout of a matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BigLayout {
    /// Slabs and chunks as the kernel walks them.
    pub geom: BigGeometry,
    /// The 3 code planes, `geom.code_words()` words ([`vq_kernels::big`]).
    pub codes: Vec<u32>,
    /// The codebooks in fragment order, `geom.codebook_words()` words.
    pub codebook: Vec<u32>,
}

impl VqMatrix {
    /// The big-codebook kernel's geometry; `None` where it does not take the matrix (it takes
    /// `VQ<8, b, r>` with `b` in 4..=12, `r` 1 or 2, one codebook per stage for the tensor).
    pub fn big_geometry(&self) -> Option<BigGeometry> {
        let g = self.geometry();
        let c = g.config;
        if c.vec != vq_kernels::big::BIG_VEC || g.tiles_c != 1 || g.tile_rows < g.rows {
            return None;
        }
        if g.rows > u32::MAX as usize / 2 || g.cols > u32::MAX as usize / 2 {
            return None;
        }
        BigGeometry::new(g.rows, g.vecs, c.bits, c.residuals)
    }

    /// The big-codebook tensor-core kernel's geometry (`vq_kernels::bigmma`: batch 1 to 16 in
    /// one launch over the table kernel's layout); `None` where it does not take the matrix
    /// (it takes the big-codebook kernel's matrices with two stages, AQLM-3).
    pub fn big_mma_geometry(&self) -> Option<BigMmaGeometry> {
        BigMmaGeometry::new(self.rows(), self.cols(), self.big_geometry()?, BM_GEMV.r)
    }

    /// The big-codebook tensor-core kernel's product of `batch` vectors `x` (`batch x cols`
    /// values) on the CPU, lane by lane as the kernel reads the layout
    /// ([`vq_kernels::bigmma::big_mma_model`]): `batch x rows` fp32 sums, `None` where the
    /// kernel does not take the matrix. `shape` is the variant (`BM_GEMV` for up to 16
    /// vectors, `BM_T64` for up to 64).
    pub fn big_mma_model(
        &self,
        layout: &BigLayout,
        x: &[f16],
        batch: usize,
        shape: BmShape,
    ) -> Option<Vec<f32>> {
        let g = BigMmaGeometry::new(self.rows(), self.cols(), layout.geom, shape.r)?;
        let p = bm_model_params(self.rows(), self.cols(), batch, &g);
        let xs: Vec<u16> = x.iter().map(|h| h.to_bits()).collect();
        let cb: Vec<u16> = self.codebooks().iter().map(|h| h.to_bits()).collect();
        Some(big_mma_model(&p, shape, &layout.codes, &cb, &xs))
    }

    /// The big-codebook kernel's layout, `None` where it does not take the matrix
    /// ([`VqMatrix::big_geometry`]).
    pub fn big_layout(&self) -> Option<BigLayout> {
        let geom = self.big_geometry()?;
        let g = self.geometry();
        let codes = big_codes(g.rows, g.vecs, &geom, |r, i, s| self.code(s, r, i));
        let cb: Vec<u16> = self.codebooks().iter().map(|h| h.to_bits()).collect();
        Some(BigLayout {
            geom,
            codes,
            codebook: big_codebook(&geom, &cb),
        })
    }

    /// The big-codebook kernel's product of one vector `x` (`cols` values) on the CPU, in the
    /// kernel's fp32 arithmetic (`vq_kernels::big::big_model`), before the fp16 rounding.
    pub fn big_model(&self, layout: &BigLayout, x: &[f16]) -> Vec<f32> {
        let p = model_params(self.rows(), self.cols(), &layout.geom, 0);
        let xs: Vec<u16> = x.iter().map(|h| h.to_bits()).collect();
        big_model(&p, &layout.codes, &layout.codebook, &xs)
    }
}
