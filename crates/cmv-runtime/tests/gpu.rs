//! GPU tests of the runtime itself; skipped (with a message) where there is no GPU.

use cmv_runtime::{Gpu, RuntimeError, gpu_for_tests, time_graph, time_launches};

#[test]
fn opening_a_device_never_panics() {
    match Gpu::new(0) {
        Ok(gpu) => {
            let info = gpu.info();
            assert!(info.sm_count > 0 && info.l2_bytes > 0 && info.total_mem > 0);
            assert!(
                info.driver_version >= 11000,
                "driver {}",
                info.driver_version
            );
        }
        Err(RuntimeError::NoDriver | RuntimeError::NoDevice { .. }) => {
            eprintln!("SKIPPED opening_a_device_never_panics: no GPU");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    // An ordinal past the last device is an error value, on any machine.
    assert!(Gpu::new(1 << 20).is_err());
}

#[test]
fn upload_download_and_event_timing() {
    let Some(gpu) = gpu_for_tests("upload_download_and_event_timing") else {
        return;
    };
    let host: Vec<u32> = (0..1 << 20).map(|i| i * 2_654_435_761).collect();
    let dev = gpu.upload(&host).unwrap();
    let mut copy = gpu.alloc_zeros::<u32>(host.len()).unwrap();
    let t = time_launches(&gpu, 2, 10, |_| {
        gpu.stream()
            .memcpy_dtod(&dev, &mut copy)
            .map_err(|source| RuntimeError::Driver {
                op: "cuMemcpyDtoD",
                source,
            })
    })
    .unwrap();
    assert_eq!(t.samples_ms.len(), 10);
    assert!(
        t.samples_ms.iter().all(|&s| s > 0.0 && s.is_finite()),
        "{:?}",
        t.samples_ms
    );
    assert_eq!(gpu.download(&copy).unwrap(), host);

    // The same copies captured into a graph: per-call samples, and the copies really ran.
    let mut copy2 = gpu.alloc_zeros::<u32>(host.len()).unwrap();
    let g = time_graph(&gpu, 4, 2, 5, |_| {
        gpu.stream()
            .memcpy_dtod(&dev, &mut copy2)
            .map_err(|source| RuntimeError::Driver {
                op: "cuMemcpyDtoD",
                source,
            })
    })
    .unwrap();
    assert_eq!(g.samples_ms.len(), 5);
    assert!(
        g.samples_ms.iter().all(|&s| s > 0.0 && s.is_finite()),
        "{:?}",
        g.samples_ms
    );
    assert_eq!(gpu.download(&copy2).unwrap(), host);
}
