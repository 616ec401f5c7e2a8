"""The torch 2 side of bench_training: the same encoder written with torch.nn's
functions and F.scaled_dot_product_attention, on posenc's weights, trained
with torch.optim.AdamW, eager or under torch.compile; timed in its own process
while the C++ benchmark times posenc's step, turn about.

Pre-norm blocks (LayerNorm, attention, residual; LayerNorm, Linear, GELU,
Linear, residual), a final LayerNorm, the classifier on token 0, cross
entropy: posenc::nn::TransformerEncoder's classification path. Encodings with
an SDPA form: none, sinusoidal (added to the embedding), rope (half layout),
alibi (its fixed (1, H, T, T) mask), t5 (its table gathered to a mask each
step, with the table's gradient).

Protocol (bench/torch2_peer.cpp; tensors as in peer_io.py):
  threads N                            "threads N gemm=G"
  tensor NAME D0,D1,... NBYTES         kept; parameters under "p:" + posenc's name
  model ID encoding=E heads=H layers=L compile=0|1
                                       built from the tensors sent: "ok"
  loss ID                              "loss X": a forward on the batch, no step
  time ID                              "seconds S": one step (zero_grad, forward,
                                       backward, AdamW), the step alone
  forget / quit
"""
import torch
import torch.nn.functional as F

from peer_io import serve, timed


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Encoder:
    def __init__(self, tensors, encoding, heads, layers, compiled):
        self.p = {k[2:]: torch.nn.Parameter(v) for k, v in tensors.items() if k.startswith("p:")}
        self.encoding, self.heads, self.layers = encoding, heads, layers
        self.tokens, self.labels = tensors["tokens"].long(), tensors["labels"].long()
        self.fixed = {k: tensors[k] for k in ("pe", "cos", "sin", "alibi") if k in tensors}
        if "t5_buckets" in tensors:
            self.fixed["t5_buckets"] = tensors["t5_buckets"].long()
        self.optimizer = torch.optim.AdamW(list(self.p.values()), lr=1e-4)
        self.loss_fn = torch.compile(self.loss) if compiled else self.loss
        if compiled:  # compile forward and backward now, not in the first timed step
            for _ in range(2):
                self.step()

    def loss(self, tokens, labels):
        p, fixed, h = self.p, self.fixed, self.heads
        x = F.embedding(tokens, p["embed.weight"])
        if "pe" in fixed:
            x = x + fixed["pe"]
        b, t, dim = x.shape
        dh = dim // h
        for l in range(self.layers):
            blk, att = "blocks.%d." % l, "blocks.%d.attention." % l
            y = F.layer_norm(x, (dim,), p[blk + "norm1.weight"], p[blk + "norm1.bias"])
            q, k, v = (F.linear(y, p[att + n + "_proj.weight"], p[att + n + "_proj.bias"])
                       .view(b, t, h, dh).transpose(1, 2) for n in "qkv")
            if "cos" in fixed:
                q = q * fixed["cos"] + rotate_half(q) * fixed["sin"]
                k = k * fixed["cos"] + rotate_half(k) * fixed["sin"]
            mask = fixed.get("alibi")
            if "t5_buckets" in fixed:
                mask = F.embedding(fixed["t5_buckets"], p[att + "bias.table"]).permute(2, 0, 1).unsqueeze(0)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + F.linear(o.transpose(1, 2).reshape(b, t, dim), p[att + "out_proj.weight"], p[att + "out_proj.bias"])
            y = F.layer_norm(x, (dim,), p[blk + "norm2.weight"], p[blk + "norm2.bias"])
            x = x + F.linear(F.gelu(F.linear(y, p[blk + "ffn1.weight"], p[blk + "ffn1.bias"])),
                             p[blk + "ffn2.weight"], p[blk + "ffn2.bias"])
        x = F.layer_norm(x, (dim,), p["final_norm.weight"], p["final_norm.bias"])
        return F.cross_entropy(F.linear(x[:, 0], p["cls_head.weight"], p["cls_head.bias"]), labels)

    def step(self):
        self.optimizer.zero_grad()
        self.loss_fn(self.tokens, self.labels).backward()
        self.optimizer.step()


def main():
    models = {}

    def model(line, tensors, out):
        parts = line.split()
        f = dict(x.split("=", 1) for x in parts[2:])
        models[parts[1]] = Encoder(tensors, f["encoding"], int(f["heads"]), int(f["layers"]), f["compile"] == "1")
        out.write(b"ok\n")

    def loss(line, tensors, out):
        m = models[line.split()[1]]
        with torch.no_grad():
            out.write(("loss %.9g\n" % m.loss_fn(m.tokens, m.labels).item()).encode())

    def time_one(line, tensors, out):
        out.write(("seconds %.9f\n" % timed(models[line.split()[1]].step)).encode())

    serve({"model": model, "loss": loss, "time": time_one}, models)


if __name__ == "__main__":
    main()
