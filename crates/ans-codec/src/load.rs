//! What every container version's reader shares: the fields and parts it read, checked
//! against each other and the [`Limits`], made into an [`AnsMatrix`].

use std::sync::OnceLock;

use bytemuck::{Pod, Zeroable};
use cmv_format::{HeaderCode, Limits, PaddedShape, check_field, check_len};

use crate::error::Result;
use crate::layout::Layout;
use crate::matrix::{AnsMatrix, check_lane_precision, check_segment, group_field};
use crate::model::{Model, VALUES};

/// The header fields of a version 2 container, after the common prefix (little-endian). The
/// part table carries the parts' lengths: units + 1 offsets and the stream's words. A version 1
/// header holds the same fields (and the lengths).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct AnsFields {
    /// [`Layout::code`](crate::Layout::code): 0 for `ans-warp-rows`, 1 for `ans-warp-stripes`,
    /// 2 for `ans-lanes`.
    pub layout: u32,
    /// The model's precision `P`, 7 to 12 (8 for `ans-lanes`).
    pub precision: u32,
    /// Elements per ANS step, `layout::group_size(P)` (2 for `ans-lanes`).
    pub group: u32,
    /// Rows of the matrix.
    pub rows: u32,
    /// Columns of the matrix.
    pub cols: u32,
    /// Rows after padding.
    pub padded_rows: u32,
    /// Columns after padding.
    pub padded_cols: u32,
    /// Columns per unit for `ans-lanes` (a multiple of 16 from 16 to the padded columns); zero
    /// for the other layouts.
    pub segment: u32,
}

impl AnsFields {
    /// Checks the fields against each other and `limits` (before any part is read): the
    /// layout, the precision and group, the shape and padded shape, the segment, the padded
    /// element count. Returns the layout, the segment (`ans-lanes`) and the number of units.
    pub(crate) fn check(&self, limits: &Limits) -> Result<(Layout, Option<usize>, usize)> {
        let layout = Layout::from_code(self.layout)?;
        crate::model::check_precision(self.precision)?;
        check_lane_precision(layout, self.precision)?;
        check_field(
            "group",
            self.group.into(),
            group_field(layout, self.precision) as u64,
        )?;
        let (rows, cols) = (self.rows as usize, self.cols as usize);
        let (padded_rows, padded_cols) = layout.padded_shape(rows, cols)?;
        check_field("padded_rows", self.padded_rows.into(), padded_rows as u64)?;
        check_field("padded_cols", self.padded_cols.into(), padded_cols as u64)?;
        let segment = check_segment(layout, self.segment, padded_cols)?;
        // Sides below 2^32: the product fits a u64.
        limits.check_elements(padded_rows as u64 * padded_cols as u64)?;
        let segments = segment.map_or(1, |s| layout.segments(padded_cols, s));
        Ok((layout, segment, layout.units(padded_rows, segments)))
    }

    /// The matrix of these fields and parts: checks the fields ([`AnsFields::check`]), the
    /// frequencies (256, summing to `2^P`), the offsets, then decodes every unit to check
    /// that the container is the canonical one ([`AnsMatrix::scan`]): work bounded by
    /// `limits.max_elements`.
    pub(crate) fn matrix(
        &self,
        limits: &Limits,
        freqs: &[u16],
        offsets: Vec<u32>,
        stream: Vec<u32>,
    ) -> Result<AnsMatrix> {
        let (layout, segment, _) = self.check(limits)?;
        check_len("frequency table", freqs.len(), VALUES)?;
        let freqs: [u16; VALUES] = freqs.try_into().expect("checked length");
        let model = Model::new(self.precision, freqs)?;
        let m = AnsMatrix {
            layout,
            model,
            shape: PaddedShape::new(
                self.rows as usize,
                self.cols as usize,
                self.padded_rows as usize,
                self.padded_cols as usize,
            ),
            segment,
            offsets,
            stream,
            stats: OnceLock::new(),
        };
        m.validate()?;
        let stats = m.scan(true)?;
        m.stats
            .set(stats)
            .expect("a fresh matrix has no statistics");
        Ok(m)
    }
}
