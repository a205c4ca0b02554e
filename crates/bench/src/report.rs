//! The table, the JSON file and the speedup plot.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::{BenchConfig, BenchError, CpuMeasurement, Measurement};

/// Everything one run measured, as written to the JSON file.
#[derive(Debug, Serialize)]
pub struct Report {
    /// GPU name, or `none`.
    pub device: String,
    /// CUDA driver version, or `none`.
    pub driver: String,
    /// `git describe` of the build.
    pub git_revision: String,
    /// When the run started (RFC 3339, UTC).
    pub date: String,
    /// The configuration.
    pub config: BenchConfig,
    /// Measured read ceiling, GB/s (absent without a GPU).
    pub ceiling_gbps: Option<f64>,
    /// GPU measurements.
    pub gpu: Vec<Measurement>,
    /// CPU measurements.
    pub cpu: Vec<CpuMeasurement>,
    /// Why there are no GPU measurements, if there are none.
    pub gpu_skipped: Option<String>,
    /// SpQR: timed configurations (GPU).
    pub spqr: Vec<crate::spqr::SpqrRow>,
    /// MatVANS: the chain benchmark's configuration.
    pub ans_config: Option<crate::ans::ChainConfig>,
    /// MatVANS: compressed sizes per element, by part.
    pub ans_sizes: Vec<crate::ans::SizeRow>,
    /// MatVANS: timed chains (GPU).
    pub ans_chain: Vec<crate::ans::ChainRow>,
    /// Real weights: a model's int8-quantized 2-D tensors, compressed (`docs/WEIGHTS.md`).
    pub weights: Option<crate::weights::WeightsReport>,
    /// Why the weights suite did not run, if it was asked for and did not.
    pub weights_skipped: Option<String>,
}

/// The SpQR table.
pub fn spqr_table(rows: &[crate::spqr::SpqrRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12} {:>2} {:<12} {:>6} {:>6} {:>10} {:>8} {:>7} {:>8} {:>7} {:>8} {:>8} {:>9}",
        "shape",
        "b",
        "kernel",
        "splits",
        "bits/w",
        "median_us",
        "GB/s",
        "%ceil",
        "read_us",
        "%read",
        "vs cuBLAS",
        "vs dense",
        "rel_err"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>12} {:>2} {:<12} {:>6} {:>6.2} {:>10.2} {:>8.1} {:>7.1} {:>8.2} {:>7.1} {:>8.2}x {:>7.2}x {:>9.1e}",
            format!("{}x{}", r.rows, r.cols),
            r.batch,
            r.kernel,
            r.splits,
            r.bits_per_weight,
            r.median_us,
            r.gbps,
            r.pct_of_ceiling,
            r.read_us,
            r.pct_of_same_size_read,
            r.speedup_vs_cublas,
            r.speedup_vs_dense,
            r.rel_err
        );
    }
    s
}

/// The MatVANS size table.
pub fn ans_size_table(rows: &[crate::ans::SizeRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>6} {:<17} {:>2} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "d",
        "layout",
        "P",
        "entropy",
        "x-ent",
        "payload",
        "states",
        "padding",
        "tables",
        "offsets",
        "total"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>6} {:<17} {:>2} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4} {:>8.4}",
            r.d,
            r.layout,
            r.precision,
            r.entropy,
            r.cross_entropy,
            r.payload,
            r.flushed_states,
            r.padding,
            r.tables,
            r.offsets,
            r.total
        );
    }
    s
}

/// The MatVANS chain table.
pub fn ans_chain_table(rows: &[crate::ans::ChainRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>6} {:<17} {:>10} {:>9} {:>8} {:>8}",
        "d", "kernel", "chain_us", "GMAC/s", "GB/s", "speedup"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>6} {:<17} {:>10.1} {:>9.1} {:>8.1} {:>7.2}x",
            r.d, r.kernel, r.median_us, r.gmacs, r.gbps, r.speedup_vs_dense
        );
    }
    s
}

/// Sets each measurement's speedup: the best dense fp16 median at its shape and batch over
/// its own median.
pub fn fill_speedups(ms: &mut [Measurement]) {
    let mut best: HashMap<(usize, usize, usize), f64> = HashMap::new();
    for m in ms.iter().filter(|m| m.format == "dense-fp16") {
        let e = best
            .entry((m.rows, m.cols, m.batch))
            .or_insert(f64::INFINITY);
        *e = e.min(m.median_us);
    }
    for m in ms.iter_mut() {
        m.speedup_vs_best_dense = best
            .get(&(m.rows, m.cols, m.batch))
            .map(|b| b / m.median_us);
    }
}

/// The GPU table, one line per measurement.
pub fn gpu_table(ms: &[Measurement]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<7} {:>12} {:>3} {:>6} {:>10} {:>8} {:>7} {:>7} {:>8}  check",
        "format",
        "kernel",
        "shape",
        "b",
        "bits/w",
        "median_us",
        "GB/s",
        "%ceil",
        "%read",
        "speedup"
    );
    for m in ms {
        let _ = writeln!(
            s,
            "{:<12} {:<7} {:>12} {:>3} {:>6.2} {:>10.2} {:>8.1} {:>7.1} {:>7.1} {:>8}  {}",
            m.format,
            m.kernel,
            format!("{}x{}", m.rows, m.cols),
            m.batch,
            m.bits_per_weight,
            m.median_us,
            m.gbps,
            m.pct_of_ceiling,
            m.pct_of_size_matched_read,
            m.speedup_vs_best_dense
                .map_or("-".into(), |v| format!("{v:.2}x")),
            m.check
        );
    }
    s
}

/// The CPU table.
pub fn cpu_table(ms: &[CpuMeasurement]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:>12} {:>12} {:>6} {:>14}",
        "format", "shape", "bytes", "bits/w", "cpu_ref_ms(b=1)"
    );
    for m in ms {
        let _ = writeln!(
            s,
            "{:<12} {:>12} {:>12} {:>6.2} {:>14.1}",
            m.format,
            format!("{}x{}", m.rows, m.cols),
            m.bytes,
            m.bits_per_weight,
            m.reference_ms
        );
    }
    s
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|source| BenchError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `bench.json` and `speedup.svg` into `dir` (created if needed); returns their paths.
pub fn write_files(report: &Report, dir: &Path) -> Result<Vec<String>, BenchError> {
    std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let json = dir.join("bench.json");
    let text =
        serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    write(&json, &text)?;
    let mut paths = vec![json.display().to_string()];
    if !report.gpu.is_empty() {
        let svg = dir.join("speedup.svg");
        write(&svg, &speedup_svg(&report.gpu, &report.device))?;
        paths.push(svg.display().to_string());
    }
    Ok(paths)
}

const COLORS: [&str; 8] = [
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
];

/// A grouped bar chart of speedup over the best dense fp16 kernel: one panel per batch, one
/// group per shape, one bar per format and kernel.
pub fn speedup_svg(ms: &[Measurement], device: &str) -> String {
    let mut series: Vec<String> = Vec::new();
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    let mut batches: Vec<usize> = Vec::new();
    for m in ms {
        let name = format!("{}/{}", m.format, m.kernel);
        if !series.contains(&name) {
            series.push(name);
        }
        if !shapes.contains(&(m.rows, m.cols)) {
            shapes.push((m.rows, m.cols));
        }
        if !batches.contains(&m.batch) {
            batches.push(m.batch);
        }
    }
    let ymax = ms
        .iter()
        .filter_map(|m| m.speedup_vs_best_dense)
        .fold(1.0f64, f64::max)
        .ceil()
        .max(1.0);
    let (pw, ph, left, top) = (900.0, 220.0, 60.0, 40.0);
    let height = top + batches.len() as f64 * (ph + 60.0) + 30.0 * series.len().div_ceil(3) as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
        pw + left + 20.0
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="20" font-size="14">Speedup over the best dense fp16 GEMV ({})</text>"#,
        xml(device)
    );
    let group_w = pw / shapes.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    for (bi, &batch) in batches.iter().enumerate() {
        let y0 = top + bi as f64 * (ph + 60.0);
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{}">batch {batch}</text>"#,
            y0 + 10.0
        );
        for k in 0..=(ymax as usize) {
            let y = y0 + 20.0 + ph - ph * k as f64 / ymax;
            let _ = writeln!(
                s,
                r##"<line x1="{left}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{k}x</text>"##,
                left + pw,
                left - 5.0,
                y + 4.0
            );
        }
        for (gi, &(r, c)) in shapes.iter().enumerate() {
            let gx = left + gi as f64 * group_w + group_w * 0.1;
            for (si, name) in series.iter().enumerate() {
                let Some(v) = ms
                    .iter()
                    .find(|m| {
                        m.rows == r
                            && m.cols == c
                            && m.batch == batch
                            && &format!("{}/{}", m.format, m.kernel) == name
                    })
                    .and_then(|m| m.speedup_vs_best_dense)
                else {
                    continue;
                };
                let h = ph * v / ymax;
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{} {r}x{c} b{batch}: {v:.2}x</title></rect>"#,
                    gx + si as f64 * bar_w,
                    y0 + 20.0 + ph - h,
                    bar_w * 0.9,
                    COLORS[si % COLORS.len()],
                    xml(name)
                );
            }
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{r}x{c}</text>"#,
                gx + group_w * 0.4,
                y0 + ph + 35.0
            );
        }
    }
    let ly = top + batches.len() as f64 * (ph + 60.0);
    for (si, name) in series.iter().enumerate() {
        let (x, y) = (left + (si % 3) as f64 * 300.0, ly + (si / 3) as f64 * 20.0);
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{y}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            COLORS[si % COLORS.len()],
            x + 16.0,
            y + 10.0,
            xml(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(format: &str, kernel: &str, batch: usize, us: f64) -> Measurement {
        Measurement {
            format: format.into(),
            kernel: kernel.into(),
            rows: 4096,
            cols: 4096,
            batch,
            bytes_read: 1,
            bits_per_weight: 16.0,
            copies: 2,
            median_us: us,
            p10_us: us,
            p90_us: us,
            gbps: 1.0,
            pct_of_ceiling: 1.0,
            pct_of_size_matched_read: 1.0,
            speedup_vs_best_dense: None,
            check: "exact".into(),
        }
    }

    #[test]
    fn speedups_are_relative_to_the_best_dense_fp16_kernel() {
        let mut ms = vec![
            m("dense-fp16", "cmv", 1, 10.0),
            m("dense-fp16", "cublas", 1, 20.0),
            m("dense-int8", "cmv", 1, 5.0),
            m("dense-int8", "cmv", 4, 5.0),
        ];
        fill_speedups(&mut ms);
        assert_eq!(ms[0].speedup_vs_best_dense, Some(1.0));
        assert_eq!(ms[1].speedup_vs_best_dense, Some(0.5));
        assert_eq!(ms[2].speedup_vs_best_dense, Some(2.0));
        assert_eq!(
            ms[3].speedup_vs_best_dense, None,
            "no dense fp16 at batch 4"
        );
        let t = gpu_table(&ms);
        assert!(t.contains("2.00x") && t.contains("4096x4096"), "{t}");
        let svg = speedup_svg(&ms, "GPU <test>");
        assert!(svg.starts_with("<svg") && svg.contains("GPU &lt;test&gt;"));
        assert_eq!(
            svg.matches("<rect x=").count() - 3,
            3,
            "one bar per measured speedup"
        );
    }
}
