# cuBLASLt int8 GEMM through torch._int_mm (int8 x int8 -> int32): median of CUDA-event times,
# B row-major (as the BEAM bench's operands) and B column-major (the "TN" form IMMA kernels take).
import sys, torch
def t(f):
    for _ in range(3): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]
for n in [int(x) for x in sys.argv[1:]] or [11584]:
    a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
    bt = b.t().contiguous().t()  # same values, column-major
    ref = torch._int_mm(a, b)
    assert torch.equal(ref, torch._int_mm(a, bt))
    for name, bb in [("B row-major", b), ("B column-major", bt)]:
        ms = t(lambda: torch._int_mm(a, bb))
        print(f"torch._int_mm {n}^3 int8, {name}: {ms:.3f} ms median of 10, {2 * n**3 / ms / 1e9:.1f} TOPS, {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    x = torch.randn(n, n, dtype=torch.float16, device="cuda"); y = torch.randn(n, n, dtype=torch.float16, device="cuda")
    ms = t(lambda: x @ y)
    print(f"torch fp16 matmul {n}^3: {ms:.3f} ms, {2 * n**3 / ms / 1e9:.1f} TFLOPS", flush=True)
