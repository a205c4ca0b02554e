//! [`SizeBreakdown`]: the bytes of a compressed matrix, part by part.

use std::fmt;

/// One named part of a compressed matrix and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizePart {
    /// The part's name (`"stream"`, `"dense words"`, `"CSR outliers"`).
    pub name: &'static str,
    /// Bytes of the part in the container.
    pub bytes: u64,
    /// Whether a GPU product reads it (a format may store parts its kernels never read, e.g.
    /// the outlier encoding not chosen).
    pub read_by_kernel: bool,
}

/// The size of a compressed matrix: its named parts, the container's own bytes (header,
/// part table, padding) and the figures derived from them. Computed from the header and the
/// part lengths alone: never by decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeBreakdown {
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// The parts, in container order.
    pub parts: Vec<SizePart>,
    /// Bytes of the whole container (`to_bytes().len()`): the parts plus header, part table
    /// and alignment padding.
    pub container_bytes: u64,
}

impl SizeBreakdown {
    /// A breakdown of a `rows x cols` matrix.
    pub fn new(rows: usize, cols: usize, container_bytes: u64) -> Self {
        Self {
            rows,
            cols,
            parts: Vec::new(),
            container_bytes,
        }
    }

    /// Adds a part.
    #[must_use]
    pub fn part(mut self, name: &'static str, bytes: u64, read_by_kernel: bool) -> Self {
        self.parts.push(SizePart {
            name,
            bytes,
            read_by_kernel,
        });
        self
    }

    /// Weights of the matrix, `rows * cols`.
    pub fn elements(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }

    /// Bytes of the parts.
    pub fn parts_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    /// Bytes of the container beyond its parts: header, part table, padding.
    pub fn overhead_bytes(&self) -> u64 {
        self.container_bytes.saturating_sub(self.parts_bytes())
    }

    /// Bytes of the parts a GPU product reads.
    pub fn kernel_bytes(&self) -> u64 {
        self.parts
            .iter()
            .filter(|p| p.read_by_kernel)
            .map(|p| p.bytes)
            .sum()
    }

    /// The bytes of part `name`, if there is one.
    pub fn bytes_of(&self, name: &str) -> Option<u64> {
        self.parts.iter().find(|p| p.name == name).map(|p| p.bytes)
    }

    /// `bytes` in bits per weight.
    pub fn per_weight(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.elements().max(1) as f64
    }

    /// Bits per weight of the whole container.
    pub fn bits_per_weight(&self) -> f64 {
        self.per_weight(self.container_bytes)
    }

    /// Bits per weight of what a GPU product reads.
    pub fn kernel_bits_per_weight(&self) -> f64 {
        self.per_weight(self.kernel_bytes())
    }
}

impl fmt::Display for SizeBreakdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}x{}: {} bytes, {:.4} bits/weight (kernel reads {:.4})",
            self.rows,
            self.cols,
            self.container_bytes,
            self.bits_per_weight(),
            self.kernel_bits_per_weight()
        )?;
        for p in &self.parts {
            write!(
                f,
                " | {} {:.4}{}",
                p.name,
                self.per_weight(p.bytes),
                if p.read_by_kernel { "" } else { " (not read)" }
            )?;
        }
        write!(
            f,
            " | container {:.5}",
            self.per_weight(self.overhead_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_add_up() {
        let s = SizeBreakdown::new(4, 8, 100)
            .part("a", 16, true)
            .part("b", 64, false);
        assert_eq!(s.elements(), 32);
        assert_eq!(s.parts_bytes(), 80);
        assert_eq!(s.overhead_bytes(), 20);
        assert_eq!(s.kernel_bytes(), 16);
        assert_eq!(s.bits_per_weight(), 25.0);
        assert_eq!(s.kernel_bits_per_weight(), 4.0);
        assert_eq!(s.bytes_of("b"), Some(64));
        assert_eq!(s.bytes_of("c"), None);
        let text = s.to_string();
        assert!(text.contains("b 16.0000 (not read)"), "{text}");
    }
}
