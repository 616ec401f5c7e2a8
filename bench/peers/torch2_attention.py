"""The torch 2 side of the attention benchmarks: F.scaled_dot_product_attention
(SDPA), the peer a torch 2 user runs, timed in its own process while the C++
benchmark times posenc's side, turn about.

Runs in the torch 2 environment (scripts/torch2-run); spoken to over
stdin/stdout by bench/torch2_peer.cpp, one command a line, tensors as raw
little-endian float32 after their header line. Nothing else goes to stdout.

  threads N                          torch.set_num_threads(N); "threads N gemm=G": the
                                     float32 GEMM GFLOP/s its BLAS reaches now
  tensor NAME D0,D1,... NBYTES       then NBYTES of float32: kept under NAME
  case ID key=value ...              q k v [mask cos sin grad] tensor names,
                                     causal=0|1, scale=S: one SDPA call
                                     (rotated first when cos/sin are given,
                                     HF's rotate_half; backward when grad is)
  result ID                          runs it once: "result N", then N tensors
                                     (out, and dq dk dv with a backward)
  time ID                            runs it once: "seconds S" (the call alone)
  forget                             drops every tensor and case
  quit
"""
import torch
import torch.nn.functional as F

from peer_io import serve, timed, write_tensor


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Case:
    def __init__(self, tensors, fields):
        self.q, self.k, self.v = (tensors[fields[n]] for n in ("q", "k", "v"))
        self.mask = tensors[fields["mask"]] if "mask" in fields else None
        self.cos = tensors[fields["cos"]] if "cos" in fields else None
        self.sin = tensors[fields["sin"]] if "sin" in fields else None
        self.grad = tensors[fields["grad"]] if "grad" in fields else None
        self.causal = fields.get("causal", "0") == "1"
        self.scale = float(fields["scale"])
        if self.grad is not None:
            for t in (self.q, self.k, self.v):
                t.requires_grad_(True)

    def call(self):
        q, k = self.q, self.k
        if self.cos is not None:
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
        out = F.scaled_dot_product_attention(q, k, self.v, attn_mask=self.mask, is_causal=self.causal,
                                             scale=self.scale)
        if self.grad is None:
            return [out]
        for t in (self.q, self.k, self.v):
            t.grad = None
        out.backward(self.grad)
        return [out.detach(), self.q.grad, self.k.grad, self.v.grad]


def main():
    cases = {}

    def define(line, tensors, out):
        parts = line.split()
        cases[parts[1]] = Case(tensors, dict(p.split("=", 1) for p in parts[2:]))
        out.write(b"ok\n")

    def result(line, tensors, out):
        outputs = cases[line.split()[1]].call()
        out.write(("result %d\n" % len(outputs)).encode())
        for t in outputs:
            write_tensor(out, t)

    def time_one(line, tensors, out):
        case = cases[line.split()[1]]
        out.write(("seconds %.9f\n" % timed(case.call)).encode())

    serve({"case": define, "result": result, "time": time_one}, cases)


if __name__ == "__main__":
    main()
