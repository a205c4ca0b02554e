//! The layout of the tensor-core kernel (`vq_kernels::mma`) on the host: which matrices it
//! takes, its geometry and byte codes, and its arithmetic on the CPU (no GPU needed, so CI
//! tests the fragments, the table addresses and the work split the kernel uses).

use half::f16;
use vq_kernels::gemm::{gemm_model, gemm_model_params};
use vq_kernels::mma::{MMA_ROW_GROUPS, MmaGeometry, mma_codes, mma_model, mma_model_params};

use crate::matrix::VqMatrix;

/// The tensor-core kernel's layout of a matrix: its geometry and byte codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmaLayout {
    /// Row blocks, slabs and tiles as the kernel walks them.
    pub geom: MmaGeometry,
    /// `geom.code_bytes()` bytes of codes as u32 words ([`vq_kernels::mma`] has the order).
    pub codes: Vec<u32>,
}

impl VqMatrix {
    /// The tensor-core kernel's geometry with `r` row groups (16 rows) per warp; `None` where
    /// it does not take the matrix: it takes `VQ<v, 8, 1>` with `v` in 2, 4, 8, tiles of a
    /// multiple of `128 r` rows unless there is one tile row and of a multiple of 128 columns
    /// unless there is one tile column, `r` in 2, 4.
    pub fn mma_geometry(&self, r: usize) -> Option<MmaGeometry> {
        let g = self.geometry();
        let c = g.config;
        if c.bits != 8 || c.residuals != 1 || g.rows > u32::MAX as usize / 2 {
            return None;
        }
        if g.cols > u32::MAX as usize / 2 {
            return None;
        }
        MmaGeometry::new(
            g.rows,
            g.cols,
            c.vec,
            (g.tile_rows, g.tile_vecs * c.vec, g.tiles_c),
            r,
        )
    }

    /// The tensor-core kernel's geometries for every row-group count it takes the matrix with
    /// (ascending: 2, then 4). The codes laid out for the last serve them all: the layout is
    /// the same, only padded to more rows.
    pub fn mma_geometries(&self) -> Vec<MmaGeometry> {
        MMA_ROW_GROUPS
            .iter()
            .filter_map(|&r| self.mma_geometry(r))
            .collect()
    }

    /// The tensor-core kernel's layout with `r` row groups per warp, `None` where it does not
    /// take the matrix ([`VqMatrix::mma_geometry`]).
    pub fn mma_layout(&self, r: usize) -> Option<MmaLayout> {
        let geom = self.mma_geometry(r)?;
        let g = self.geometry();
        let codes = mma_codes(g.rows, g.vecs, &geom, |row, i| self.code(0, row, i) as u8);
        Some(MmaLayout { geom, codes })
    }

    /// Whether the tensor-core GEMM (`vq_kernels::gemm`, more than 16 inputs) takes the matrix:
    /// the tensor-core geometry with 2 row groups per warp exists and `cols % 8 == 0`.
    pub fn gemm_takes(&self) -> bool {
        self.mma_geometry(2).is_some() && self.cols().is_multiple_of(8)
    }

    /// The tensor-core GEMM's product of `tokens` inputs `x` (`tokens * cols` values) on the
    /// CPU (`vq_kernels::gemm::gemm_model`) from the codes of `layout` (any row-group count),
    /// fp32 sums before the fp16 rounding, `tokens x rows`; `None` where the GEMM does not take
    /// the matrix ([`VqMatrix::gemm_takes`]).
    pub fn gemm_model(&self, layout: &MmaLayout, x: &[f16], tokens: usize) -> Option<Vec<f32>> {
        let g2 = self.mma_geometry(2)?;
        let p = gemm_model_params(
            self.rows(),
            self.cols(),
            tokens,
            &g2,
            layout.geom.row_groups(),
        )?;
        let cb: Vec<u16> = self.codebooks().iter().map(|h| h.to_bits()).collect();
        let xs: Vec<u16> = x.iter().map(|h| h.to_bits()).collect();
        Some(gemm_model(&p, g2.vec, &layout.codes, &cb, &xs))
    }

    /// The tensor-core kernel's product of `batch` vectors `x` (`batch * cols` values) on the
    /// CPU with the units split over `grid` blocks (`vq_kernels::mma::mma_model`), fp32 sums
    /// before the fp16 rounding, `batch x rows`. `batch` is 1..=16.
    pub fn mma_model(&self, layout: &MmaLayout, x: &[f16], batch: usize, grid: u32) -> Vec<f32> {
        let p = mma_model_params(self.rows(), self.cols(), batch, &layout.geom);
        let cb: Vec<u16> = self.codebooks().iter().map(|h| h.to_bits()).collect();
        let xs: Vec<u16> = x.iter().map(|h| h.to_bits()).collect();
        mma_model(&p, &layout.geom, grid, &layout.codes, &cb, &xs)
    }
}

/// The most vectors at which a launch takes 4 row groups per warp on a matrix of fewer than 8
/// units per SM ([`choose_geometry`]).
pub const MMA_FOUR_MAX_BATCH: usize = 3;

/// The row groups per warp a launch of `batch` vectors uses on a GPU of `sms` SMs, from the
/// geometries a layout serves ([`VqMatrix::mma_geometries`]): 4 row groups when there are at
/// least 8 units (row block x slab) per SM, or for at most [`MMA_FOUR_MAX_BATCH`] vectors of 4
/// or 8 weights (`v = 2` spills at 4); else 2 (more, smaller units keep the SMs busy on smaller
/// matrices). Measured on an H200 with the programmatic launch (docs/VQ.md): at 1-3 vectors 4
/// row groups are 0-6% faster at 11008x4096 and within 2% elsewhere, from 4 or 5 vectors on 2
/// row groups are 2-12% faster below the 70B shapes. `None` for no geometry.
pub fn choose_geometry(geoms: &[MmaGeometry], batch: usize, sms: usize) -> Option<&MmaGeometry> {
    let four = geoms.iter().find(|g| g.r == 4);
    let two = geoms.iter().find(|g| g.r == 2);
    match (four, two) {
        (Some(g), _)
            if (batch <= MMA_FOUR_MAX_BATCH && g.vec >= 4) || g.units() >= 8 * sms.max(1) =>
        {
            Some(g)
        }
        (_, Some(g)) => Some(g),
        (g, None) => g,
    }
}
