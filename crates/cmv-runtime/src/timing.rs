use cudarc::driver::sys::CUevent_flags;

use crate::error::DriverResultExt;
use crate::{Gpu, Result, RuntimeError};

/// Per-call times of a timed kernel, in milliseconds, in launch order.
#[derive(Clone, Debug)]
pub struct Timings {
    /// One sample per timed call.
    pub samples_ms: Vec<f64>,
}

impl Timings {
    fn sorted(&self) -> Vec<f64> {
        let mut s = self.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        s
    }

    /// The `q`-quantile (0..=1) by nearest rank; NaN when there are no samples.
    pub fn quantile(&self, q: f64) -> f64 {
        let s = self.sorted();
        if s.is_empty() {
            return f64::NAN;
        }
        let i = ((s.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        s[i]
    }

    /// Median time per call.
    pub fn median_ms(&self) -> f64 {
        self.quantile(0.5)
    }

    /// Fastest call.
    pub fn min_ms(&self) -> f64 {
        self.quantile(0.0)
    }
}

/// Times `launch(i)` for `i in 0..iters` with a CUDA event pair around each call, after
/// `warmup` untimed calls, all on `gpu`'s stream.
///
/// `launch` must only enqueue work on `gpu.stream()`; the calls are queued back to back and
/// the stream is synchronized once at the end, so launch overhead on the host is hidden
/// whenever a kernel runs longer than its launch takes.
///
/// `launch` may return any error a [`RuntimeError`] converts into (a format's error, a
/// benchmark's), so a launcher's own error needs no mapping; the event calls' errors come out
/// as that type too.
///
/// # Errors
/// The first error of `launch`, or of the event calls.
pub fn time_launches<F, E>(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    mut launch: F,
) -> Result<Timings, E>
where
    F: FnMut(usize) -> Result<(), E>,
    E: From<RuntimeError>,
{
    for i in 0..warmup {
        launch(i)?;
    }
    gpu.synchronize()?;
    let samples_ms = event_samples(gpu, iters, 1, |i| launch(warmup + i))?;
    Ok(Timings { samples_ms })
}

/// Times `launch(i)` for `i in 0..calls` captured into one CUDA graph: the graph is replayed
/// `warmup` times untimed, then `reps` times between CUDA events; each sample is one replay's
/// time divided by `calls`. Back-to-back kernels in a graph start without the host's launch
/// overhead and without events between them, as they would in an inference step.
///
/// `launch` runs `calls` times before the capture as a plain warm-up (module loading and any
/// lazy initialization must not happen during a capture), then `calls` times inside it. As
/// with [`time_launches`], its error may be any type a [`RuntimeError`] converts into.
///
/// # Errors
/// The first error of `launch` or of the graph and event calls.
pub fn time_graph<F, E>(
    gpu: &Gpu,
    calls: usize,
    warmup: usize,
    reps: usize,
    mut launch: F,
) -> Result<Timings, E>
where
    F: FnMut(usize) -> Result<(), E>,
    E: From<RuntimeError>,
{
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    for i in 0..calls {
        launch(i)?;
    }
    gpu.synchronize()?;
    let stream = gpu.stream();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .op("cuStreamBeginCapture")?;
    let captured = (0..calls).try_for_each(&mut launch);
    // The capture must end even when a launch failed.
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .op("cuStreamEndCapture");
    captured?;
    let graph = graph?.ok_or(RuntimeError::InvalidLaunch {
        kernel: "graph",
        reason: "the stream capture recorded no work".into(),
    })?;
    for _ in 0..warmup {
        graph.launch().op("cuGraphLaunch")?;
    }
    gpu.synchronize()?;
    let samples_ms = event_samples(gpu, reps, calls, |_| {
        graph.launch().op("cuGraphLaunch").map_err(E::from)
    })?;
    Ok(Timings { samples_ms })
}

/// Enqueues `enqueue(i)` for `i in 0..n` between CUDA event pairs, back to back, then waits;
/// returns each pair's time in milliseconds divided by `calls_per_sample`.
fn event_samples<E: From<RuntimeError>>(
    gpu: &Gpu,
    n: usize,
    calls_per_sample: usize,
    mut enqueue: impl FnMut(usize) -> Result<(), E>,
) -> Result<Vec<f64>, E> {
    let ctx = gpu.context();
    let new_event = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .op("cuEventCreate")
    };
    let events = (0..n)
        .map(|_| Ok((new_event()?, new_event()?)))
        .collect::<Result<Vec<_>>>()?;
    let stream = gpu.stream();
    for (i, (start, end)) in events.iter().enumerate() {
        start.record(stream).op("cuEventRecord")?;
        enqueue(i)?;
        end.record(stream).op("cuEventRecord")?;
    }
    gpu.synchronize()?;
    events
        .iter()
        .map(|(s, e)| {
            s.elapsed_ms(e)
                .map(|t| f64::from(t) / calls_per_sample.max(1) as f64)
                .op("cuEventElapsedTime")
                .map_err(E::from)
        })
        .collect()
}

/// How many copies of a `bytes_per_copy` operand to rotate through so that each timed call
/// reads from device memory rather than from L2: enough for `max(4 x L2, min_total_bytes)` in
/// all, and at least 2.
pub fn rotation_copies(bytes_per_copy: usize, l2_bytes: usize, min_total_bytes: usize) -> usize {
    let target = (4 * l2_bytes).max(min_total_bytes);
    target.div_ceil(bytes_per_copy.max(1)).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_covers_four_l2_and_the_floor() {
        let l2 = 50 << 20;
        // 32 MiB copies: 512 MiB floor dominates 200 MiB -> 16 copies.
        assert_eq!(rotation_copies(32 << 20, l2, 512 << 20), 16);
        // Huge copies: still two, so consecutive calls never reuse the same bytes.
        assert_eq!(rotation_copies(2 << 30, l2, 512 << 20), 2);
        // No floor: 4 x L2 = 200 MiB over 48 MiB copies -> 5.
        assert_eq!(rotation_copies(48 << 20, l2, 0), 5);
        assert!(rotation_copies(0, l2, 0) >= 2);
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let t = Timings {
            samples_ms: vec![5.0, 1.0, 3.0, 2.0, 4.0],
        };
        assert_eq!(t.median_ms(), 3.0);
        assert_eq!(t.min_ms(), 1.0);
        assert_eq!(t.quantile(1.0), 5.0);
        assert!(Timings { samples_ms: vec![] }.median_ms().is_nan());
    }
}
