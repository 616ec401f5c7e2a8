"""The wire format the torch 2 peers share with bench/torch2_peer.cpp: a header
line "NAME D0,D1,... NBYTES" (or "D0,D1,... NBYTES" in a reply), then the raw
little-endian float32 values."""
import sys
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


def serve(handlers, objects):
    """Answers the C++ side until "quit" or the end of stdin. Built in: "threads N",
    "tensor ..." (kept in the tensors dict handlers get), "forget" (clears the
    tensors and `objects`, the peer's cases or models). handlers[word](line,
    tensors, stdout) writes its reply. An exception ends the peer with one
    "error ..." line, which the C++ side prints."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    tensors = {}
    try:
        stdout.write(("ready torch=%s capability=%s\n" % (torch.__version__, torch.backends.cpu.get_cpu_capability()))
                     .encode())
        stdout.flush()
        for raw in iter(stdin.readline, b""):
            line = raw.decode().strip()
            word = line.split(" ", 1)[0]
            if word == "quit":
                return
            if word == "tensor":
                name, t = read_tensor(stdin, line)
                tensors[name] = t
                continue
            if word == "threads":
                torch.set_num_threads(int(line.split()[1]))
                stdout.write(("threads %d gemm=%.1f\n" % (torch.get_num_threads(), gemm_gflops())).encode())
            elif word == "forget":
                tensors.clear()
                objects.clear()
                stdout.write(b"ok\n")
            elif word in handlers:
                handlers[word](line, tensors, stdout)
            else:
                stdout.write(("error unknown command %r\n" % word).encode())
            stdout.flush()
    except Exception as e:
        stdout.write(("error %s: %s\n" % (type(e).__name__, e)).encode())
        stdout.flush()
        sys.exit(1)


def timed(f):
    """Seconds of one call of f, its result dropped."""
    start = time.perf_counter()
    f()
    return time.perf_counter() - start
