//! The table, the JSON file and the speedup plot.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::{BenchConfig, BenchError, CpuRow, Part, Row};

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
    /// GPU rows: the dense baselines and every format, one schema ([`Row`]).
    pub gpu: Vec<Row>,
    /// CPU rows: sizes and CPU reference times ([`CpuRow`]).
    pub cpu: Vec<CpuRow>,
    /// Why there are no GPU rows, if there are none.
    pub gpu_skipped: Option<String>,
    /// What the run left out and why (batches a format's kernels do not take, ...).
    pub notes: Vec<String>,
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
    /// VQ-GEMM rows (`--vq-gemm-tokens`).
    pub vq_gemm: Vec<crate::vq::GemmRow>,
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

/// A matrix's parts in bits per weight, e.g. `weights 16.00` or `dense 3.00, CSR outliers
/// 0.25 (not read)`.
pub fn parts_text(parts: &[Part], rows: usize, cols: usize) -> String {
    let n = (rows as f64 * cols as f64).max(1.0);
    parts
        .iter()
        .map(|p| {
            format!(
                "{} {:.2}{}",
                p.name,
                8.0 * p.bytes as f64 / n,
                if p.read_by_kernel { "" } else { " (not read)" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

/// The GPU table, one line per [`Row`]: every suite's rows in one schema.
pub fn gpu_table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<9} {:>12} {:>3} {:>6} {:>10} {:>8} {:>6} {:>6} {:>9} {:>8}  {:<14} parts (bits/w)",
        "format",
        "variant",
        "shape",
        "b",
        "bits/w",
        "median_us",
        "GB/s",
        "%ceil",
        "%read",
        "vs cuBLAS",
        "vs dense",
        "check"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<10} {:<9} {:>12} {:>3} {:>6.2} {:>10.2} {:>8.1} {:>6.1} {:>6.1} {:>9} {:>8}  {:<14} {}",
            r.format,
            r.variant,
            format!("{}x{}", r.rows, r.cols),
            r.batch,
            r.bits_per_weight,
            r.median_us,
            r.gbps,
            r.pct_of_ceiling,
            r.pct_of_same_size_read,
            ratio(r.speedup_vs_cublas),
            ratio(r.speedup_vs_dense),
            r.check,
            parts_text(&r.parts, r.rows, r.cols)
        );
    }
    s
}

/// The CPU table, one line per [`CpuRow`].
pub fn cpu_table(rows: &[CpuRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<9} {:>12} {:>12} {:>6} {:>7} {:>10} {:>10}  parts (bits/w)",
        "format", "variant", "shape", "bytes", "bits/w", "cont.", "encode_ms", "ref_ms(b1)"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<10} {:<9} {:>12} {:>12} {:>6.2} {:>7.3} {:>10.1} {:>10.1}  {}",
            r.format,
            r.variant,
            format!("{}x{}", r.rows, r.cols),
            r.bytes,
            r.bits_per_weight,
            r.container_bits_per_weight,
            r.encode_ms,
            r.reference_ms,
            parts_text(&r.parts, r.rows, r.cols)
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

/// Why `speedup.svg` is not written for `report`, if it is not.
pub fn no_plot_reason(report: &Report) -> Option<String> {
    if report.gpu.iter().any(|r| r.speedup_vs_cublas.is_some()) {
        return None;
    }
    Some(if report.gpu.is_empty() {
        match &report.gpu_skipped {
            Some(why) => format!(
                "no speedup.svg: it plots GPU speedups over cuBLAS and this run timed no GPU kernel ({why})"
            ),
            None => "no speedup.svg: it plots GPU speedups over cuBLAS and this run timed no GPU \
                     kernel (no GEMV suite ran)"
                .into(),
        }
    } else {
        "no speedup.svg: it plots speedups over cuBLAS fp16 and cuBLAS could not be loaded".into()
    })
}

/// Writes `bench.json` and (when there are speedups to plot) `speedup.svg` into `dir`
/// (created if needed); returns their paths.
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
    if no_plot_reason(report).is_none() {
        let svg = dir.join("speedup.svg");
        write(&svg, &speedup_svg(&report.gpu, &report.device))?;
        paths.push(svg.display().to_string());
    }
    Ok(paths)
}

const COLORS: [&str; 8] = [
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
];

/// A grouped bar chart of speedup over cuBLAS fp16: one panel per batch, one group per shape,
/// one bar per format and variant.
pub fn speedup_svg(ms: &[Row], device: &str) -> String {
    let mut series: Vec<String> = Vec::new();
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    let mut batches: Vec<usize> = Vec::new();
    for m in ms {
        let name = format!("{}/{}", m.format, m.variant);
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
        .filter_map(|m| m.speedup_vs_cublas)
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
        r#"<text x="{left}" y="20" font-size="14">Speedup over cuBLAS fp16 GEMV ({})</text>"#,
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
                            && &format!("{}/{}", m.format, m.variant) == name
                    })
                    .and_then(|m| m.speedup_vs_cublas)
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
    use crate::RowTimes;

    fn row(format: &str, variant: &str, batch: usize, us: f64, cublas_us: Option<f64>) -> Row {
        Row::derive(RowTimes {
            name: (format, variant),
            shape: (4096, 4096, batch),
            bits_per_weight: 16.0,
            parts: Part::dense(2 * 4096 * 4096),
            weight_bytes: 2 * 4096 * 4096,
            input_bytes: 2 * 4096 * batch,
            copies: 2,
            timings: &cmv_runtime::Timings {
                samples_ms: vec![us * 1e-3],
            },
            ceiling_gbps: 4000.0,
            read_us: us / 2.0,
            cublas_us,
            dense_us: Some(10.0),
            check: "exact".into(),
        })
    }

    #[test]
    fn rows_derive_rates_and_ratios_from_the_times() {
        let r = Row::derive(RowTimes {
            name: ("spqr", "csr"),
            shape: (4, 8, 1),
            bits_per_weight: 3.5,
            parts: Part::dense(16),
            weight_bytes: 16,
            input_bytes: 16,
            copies: 3,
            timings: &cmv_runtime::Timings {
                samples_ms: vec![0.001, 0.002, 0.003],
            },
            ceiling_gbps: 0.032,
            read_us: 1.0,
            cublas_us: Some(6.0),
            dense_us: Some(4.0),
            check: "rel_err=1.0e-4".into(),
        });
        assert_eq!((r.median_us, r.p10_us, r.p90_us), (2.0, 1.0, 3.0));
        assert_eq!(r.bits_per_weight, 3.5);
        assert_eq!(r.bytes_read, 32);
        assert_eq!(r.gbps, 0.016);
        assert_eq!(r.pct_of_ceiling, 50.0);
        assert_eq!(r.pct_of_same_size_read, 50.0);
        assert_eq!(
            (r.speedup_vs_cublas, r.speedup_vs_dense),
            (Some(3.0), Some(2.0))
        );
        assert_eq!((r.format.as_str(), r.variant.as_str()), ("spqr", "csr"));
    }

    #[test]
    fn tables_and_plot() {
        let ms = vec![
            row("dense-fp16", "cmv", 1, 10.0, Some(20.0)),
            row("dense-fp16", "cublas", 1, 20.0, Some(20.0)),
            row("spqr", "csr", 1, 5.0, Some(20.0)),
            row("spqr", "csr", 4, 5.0, None),
        ];
        let t = gpu_table(&ms);
        assert!(t.contains("4.00x") && t.contains("4096x4096"), "{t}");
        assert!(t.contains("weights 16.00"), "{t}");
        assert_eq!(t.lines().count(), 5);
        let svg = speedup_svg(&ms, "GPU <test>");
        assert!(svg.starts_with("<svg") && svg.contains("GPU &lt;test&gt;"));
        assert_eq!(
            svg.matches("<rect x=").count() - 3,
            3,
            "one bar per measured speedup (and one legend box per series)"
        );
        let parts = [
            Part {
                name: "dense".into(),
                bytes: 4,
                read_by_kernel: true,
            },
            Part {
                name: "CSR outliers".into(),
                bytes: 1,
                read_by_kernel: false,
            },
        ];
        assert_eq!(
            parts_text(&parts, 4, 2),
            "dense 4.00, CSR outliers 1.00 (not read)"
        );
    }

    #[test]
    fn dense_rows_carry_our_kernel_name_into_the_json() {
        let mut r = row("dense-fp16", "cmv", 16, 20.0, Some(22.0));
        assert!(serde_json::to_value(&r).unwrap()["kernel"].is_null());
        r.kernel = Some("cmv_gemv_f16_bulk_n16".into());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["kernel"], "cmv_gemv_f16_bulk_n16");
    }

    #[test]
    fn rows_carry_the_library_algorithm_into_the_json_and_the_table() {
        let mut r = row("dense-fp16", "cublaslt", 4, 20.0, Some(22.0));
        let plain = serde_json::to_value(&r).unwrap();
        assert!(plain["algorithm"].is_null(), "{plain}");
        let algo = dense_gemv::LtAlgo {
            algo_id: Some(66),
            tile_id: Some(17),
            stages_id: Some(16),
            split_k: Some(1),
            reduction_scheme: Some(0),
            cta_swizzling: Some(0),
            custom_option: Some(0),
            inner_shape_id: None,
            cluster_shape_id: Some(2),
            workspace_bytes: 0,
            waves_count: 0.5,
            returned: 3,
            rank: 0,
            version: 130000,
        };
        r.algorithm = Some(crate::dense::LibraryAlgorithm::from(&algo));
        let v = serde_json::to_value(&r).unwrap();
        let a = &v["algorithm"];
        assert_eq!(a["library"], "cuBLASLt 130000");
        assert_eq!(a["algo_id"], 66);
        assert_eq!(
            (a["tile"].as_str(), a["tile_id"].as_u64()),
            (Some("64x128"), Some(17))
        );
        assert_eq!(a["stages"], "64x4");
        assert_eq!(a["reduction"], "none");
        assert_eq!(a["inner_shape"], "?");
        assert_eq!(a["cluster_shape"], "1x1x1");
        assert_eq!(a["heuristic_returned"], 3);
        assert_eq!(a["summary"].as_str(), Some(algo.summary().as_str()));
        let t = gpu_table(&[r]);
        assert!(t.contains("cublaslt") && t.contains("1.10x"), "{t}");
    }

    #[test]
    fn the_plot_is_left_out_with_a_reason() {
        let mut r = Report {
            device: "none".into(),
            driver: "none".into(),
            git_revision: "x".into(),
            date: "d".into(),
            config: BenchConfig::default(),
            ceiling_gbps: None,
            gpu: Vec::new(),
            cpu: Vec::new(),
            gpu_skipped: Some("no CUDA driver".into()),
            notes: Vec::new(),
            ans_config: None,
            ans_sizes: Vec::new(),
            ans_chain: Vec::new(),
            weights: None,
            weights_skipped: None,
            vq_gemm: Vec::new(),
        };
        let why = no_plot_reason(&r).unwrap();
        assert!(
            why.contains("no GPU kernel") && why.contains("no CUDA driver"),
            "{why}"
        );
        r.gpu.push(row("spqr", "csr", 1, 5.0, None));
        assert!(
            no_plot_reason(&r)
                .unwrap()
                .contains("cuBLAS could not be loaded")
        );
        r.gpu.push(row("spqr", "csr", 1, 5.0, Some(20.0)));
        assert_eq!(no_plot_reason(&r), None);
    }
}
