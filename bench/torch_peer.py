"""bench/torch_peer.py: the peers of bench/gpu_bench.c, in its table format.

cuBLAS SGEMM through PyTorch with TF32 off (torch.backends.cuda.matmul.allow_tf32
= False: plain fp32 FMA, no tensor cores) at n = 1024, 2048, 4096, 8192, in
TFLOP/s (2 n^3 per product), and torch.softmax over 4096 x 4096 fp32 in GB/s
counting one read and one write. Each figure is the median of 5 timed batches
after warm-up, timed with CUDA events. Run by `make cuda-bench` and
`make gpu-check` on the GPU machine, where the plain python3 has PyTorch.
Without PyTorch or a GPU it prints "SKIP: <reason>" and exits 0.
Usage: python3 bench/torch_peer.py [max_n]
"""
import statistics
import sys


def time_per_call(torch, fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = start.elapsed_time(end) / 1e3
    reps = 1 if one > 0.05 else int(0.05 / max(one, 1e-7)) + 1
    per = []
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        per.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(per)


def main():
    try:
        import torch
    except ImportError:
        print("SKIP: no torch")
        return 0
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    max_n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
    print(f"{'work':<34} {'size':>9}  {'time':>13}  rate")
    n = 1024
    while n <= max_n:
        g = torch.Generator(device="cuda").manual_seed(7)
        a = torch.rand(n, n, device="cuda", dtype=torch.float32, generator=g)
        b = torch.rand(n, n, device="cuda", dtype=torch.float32, generator=g)
        c = torch.empty(n, n, device="cuda", dtype=torch.float32)
        t = time_per_call(torch, lambda: torch.mm(a, b, out=c))
        print(f"{'matmul fp32 sgemm (cublas, tf32 off)':<34} {n:>9}  {t * 1e3:10.3f} ms  "
              f"{2.0 * n ** 3 / t / 1e12:8.2f} TFLOP/s")
        del a, b, c
        n *= 2
    x = torch.rand(4096, 4096, device="cuda", dtype=torch.float32)
    t = time_per_call(torch, lambda: torch.softmax(x, dim=-1))
    gbs = 2.0 * x.numel() * 4 / t / 1e9
    print(f"{'softmax fp32 (torch)':<34} {'4096x4096':>9}  {t * 1e3:10.3f} ms  "
          f"{gbs:8.1f} GB/s (read + write)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
