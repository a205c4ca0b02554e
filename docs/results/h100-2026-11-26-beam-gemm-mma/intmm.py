# cuBLASLt int8 GEMM through torch._int_mm (int8 x int8 -> int32): median of CUDA-event times.
import sys, torch
n = int(sys.argv[1]) if len(sys.argv) > 1 else 11584
a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
b = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
for _ in range(3):
    torch._int_mm(a, b)
torch.cuda.synchronize()
ts = []
for _ in range(10):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); c = torch._int_mm(a, b); e.record(); torch.cuda.synchronize()
    ts.append(s.elapsed_time(e))
ts.sort()
ms = ts[len(ts) // 2]
print(f"torch._int_mm {n}^3 int8: {ms:.3f} ms median of 10, {2 * n**3 / ms / 1e9:.1f} TOPS, {torch.cuda.get_device_name()}, torch {torch.__version__}")
