"""The wire format the torch 2 peers share with bench/torch2_peer.cpp: a header
line "NAME D0,D1,... NBYTES" (or "D0,D1,... NBYTES" in a reply), then the raw
little-endian float32 values."""
import time

import torch


def read_tensor(stream, header):
    _, name, dims, nbytes = header.split()
    shape = [int(d) for d in dims.split(",")]
    data = bytearray(stream.read(int(nbytes)))
    return name, torch.frombuffer(data, dtype=torch.float32).reshape(shape).clone()


def write_tensor(stream, t):
    data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
    stream.write(("%s %d\n" % (",".join(str(d) for d in t.shape), len(data))).encode())
    stream.write(data)


def gemm_gflops(n=1024):
    """The float32 GEMM rate of the BLAS torch resolved (the root's own OpenBLAS), best of 5."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best / 1e9
