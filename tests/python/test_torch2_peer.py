"""The torch 2 peer of the attention benchmarks (bench/peers/torch2_attention.py)
computes what the benchmarks say it does: SDPA with the family's mask, the
causal mask or RoPE's rotation, and its q, k, v gradients, against a float64
softmax attention written plainly; it answers the C++ side's protocol."""

import math
import pathlib
import subprocess
import sys

import pytest
import torch

REPO = pathlib.Path(__file__).resolve().parents[2]
PEER = REPO / "bench" / "peers" / "torch2_attention.py"
TRAINING_PEER = REPO / "bench" / "peers" / "torch2_training.py"

pytestmark = pytest.mark.skipif(int(torch.__version__.split(".")[0]) < 2,
                                reason="the peer is torch 2's SDPA (scale= needs torch >= 2.1)")


class Peer:
    def __init__(self, script=PEER):
        self.p = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.banner = self.line()

    def line(self):
        return self.p.stdout.readline().decode().rstrip("\n")

    def command(self, text):
        self.p.stdin.write((text + "\n").encode())
        self.p.stdin.flush()
        return self.line()

    def send(self, name, t):
        data = t.to(torch.float32).contiguous().numpy().tobytes()
        self.p.stdin.write(("tensor %s %s %d\n" % (name, ",".join(map(str, t.shape)), len(data))).encode())
        self.p.stdin.write(data)

    def result(self, case):
        head = self.command("result " + case)
        out = []
        for _ in range(int(head.split()[1])):
            dims, nbytes = self.line().split()
            data = bytearray(self.p.stdout.read(int(nbytes)))
            out.append(torch.frombuffer(data, dtype=torch.float32).reshape([int(d) for d in dims.split(",")]))
        return out

    def close(self):
        self.p.stdin.write(b"quit\n")
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0


@pytest.fixture
def peer():
    p = Peer()
    yield p
    p.close()


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), dim=-1)


def reference(q, k, v, mask=None, causal=False, scale=None, cos=None, sin=None):
    q, k, v = q.double(), k.double(), v.double()
    if cos is not None:
        q = q * cos.double() + rotate_half(q) * sin.double()
        k = k * cos.double() + rotate_half(k) * sin.double()
    s = q @ k.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask.double()
    if causal:
        t = s.shape[-1]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


def inputs(t=9, dh=8, h=2):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, h, t, dh, generator=g) for _ in range(3)]


def test_banner_and_threads(peer):
    assert peer.banner.startswith("ready torch=%s capability=" % torch.__version__)
    reply = peer.command("threads 1")
    assert reply.startswith("threads 1 gemm=") and float(reply.split("gemm=")[1]) > 0


@pytest.mark.parametrize("form", ["plain", "causal", "mask", "rotary"])
def test_forward_matches_a_float64_softmax(peer, form):
    q, k, v = inputs()
    fields = "q=q k=k v=v scale=0.3"
    kwargs = {"scale": 0.3}
    for name, t in zip("qkv", (q, k, v)):
        peer.send(name, t)
    if form == "causal":
        fields += " causal=1"
        kwargs["causal"] = True
    if form == "mask":
        mask = -torch.arange(9.0).view(1, 9).sub(torch.arange(9.0).view(9, 1)).abs().expand(1, 2, 9, 9) * 0.5
        peer.send("mask", mask)
        fields += " mask=mask"
        kwargs["mask"] = mask
    if form == "rotary":
        angle = torch.arange(9.0).view(9, 1) * torch.tensor([1.0, 0.1, 0.01, 0.001]).repeat(2)
        peer.send("cos", angle.cos()), peer.send("sin", angle.sin())
        fields += " cos=cos sin=sin"
        kwargs.update(cos=angle.cos(), sin=angle.sin())
    assert peer.command("case c " + fields) == "ok"
    (out,) = peer.result("c")
    torch.testing.assert_close(out.double(), reference(q, k, v, **kwargs), atol=1e-5, rtol=0)


def test_backward_gives_q_k_v_gradients(peer):
    q, k, v = inputs()
    grad = torch.randn(1, 2, 9, 8, generator=torch.Generator().manual_seed(1))
    for name, t in zip(("q", "k", "v", "grad"), (q, k, v, grad)):
        peer.send(name, t)
    assert peer.command("case c q=q k=k v=v grad=grad causal=1 scale=0.35") == "ok"
    out, dq, dk, dv = peer.result("c")
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    want = reference(*leaves, causal=True, scale=0.35)
    want.backward(grad.double())
    torch.testing.assert_close(out.double(), want.detach(), atol=1e-5, rtol=0)
    for got, leaf in zip((dq, dk, dv), leaves):
        torch.testing.assert_close(got.double(), leaf.grad, atol=1e-5, rtol=0)
    assert float(peer.command("time c").split()[1]) > 0


def test_a_bad_command_is_answered_not_fatal(peer):
    assert peer.command("frobnicate") == "error unknown command 'frobnicate'"
    assert peer.command("forget") == "ok"


def encoder_loss(p, tokens, labels, heads, layers, mask=None):
    """posenc's TransformerEncoder classification loss, plainly, in float64."""
    p = {k: v.double() for k, v in p.items()}
    x = p["embed.weight"][tokens]
    b, t, dim = x.shape
    dh = dim // heads
    for l in range(layers):
        blk, att = "blocks.%d." % l, "blocks.%d.attention." % l
        y = torch.nn.functional.layer_norm(x, (dim,), p[blk + "norm1.weight"], p[blk + "norm1.bias"])
        q, k, v = ((y @ p[att + n + "_proj.weight"].T + p[att + n + "_proj.bias"]).view(b, t, heads, dh).transpose(1, 2)
                   for n in "qkv")
        o = reference(q, k, v, mask=mask)
        x = x + o.transpose(1, 2).reshape(b, t, dim) @ p[att + "out_proj.weight"].T + p[att + "out_proj.bias"]
        y = torch.nn.functional.layer_norm(x, (dim,), p[blk + "norm2.weight"], p[blk + "norm2.bias"])
        hid = torch.nn.functional.gelu(y @ p[blk + "ffn1.weight"].T + p[blk + "ffn1.bias"])
        x = x + hid @ p[blk + "ffn2.weight"].T + p[blk + "ffn2.bias"]
    x = torch.nn.functional.layer_norm(x, (dim,), p["final_norm.weight"], p["final_norm.bias"])
    return torch.nn.functional.cross_entropy(x[:, 0] @ p["cls_head.weight"].T + p["cls_head.bias"], labels).item()


@pytest.mark.parametrize("encoding", ["none", "alibi"])
def test_training_peer_loss_is_the_encoders(encoding):
    g = torch.Generator().manual_seed(2)
    dim, heads, t, vocab = 8, 2, 5, 11
    shapes = {"embed.weight": (vocab, dim), "final_norm.weight": (dim,), "final_norm.bias": (dim,),
              "cls_head.weight": (2, dim), "cls_head.bias": (2,)}
    for n in ("norm1", "norm2"):
        shapes.update({"blocks.0.%s.weight" % n: (dim,), "blocks.0.%s.bias" % n: (dim,)})
    for n in "qkv":
        shapes.update({"blocks.0.attention.%s_proj.weight" % n: (dim, dim), "blocks.0.attention.%s_proj.bias" % n: (dim,)})
    shapes.update({"blocks.0.attention.out_proj.weight": (dim, dim), "blocks.0.attention.out_proj.bias": (dim,),
                   "blocks.0.ffn1.weight": (4 * dim, dim), "blocks.0.ffn1.bias": (4 * dim,),
                   "blocks.0.ffn2.weight": (dim, 4 * dim), "blocks.0.ffn2.bias": (dim,)})
    params = {k: torch.randn(*s, generator=g) * 0.5 for k, s in shapes.items()}
    tokens, labels = torch.randint(vocab, (3, t), generator=g), torch.randint(2, (3,), generator=g)
    mask = -torch.arange(t * 1.0).view(1, t).sub(torch.arange(t * 1.0).view(t, 1)).abs().expand(1, heads, t, t) * 0.3
    peer = Peer(TRAINING_PEER)
    try:
        for k, v in params.items():
            peer.send("p:" + k, v)
        peer.send("tokens", tokens.float()), peer.send("labels", labels.float())
        if encoding == "alibi":
            peer.send("alibi", mask)
        assert peer.command("model m encoding=%s heads=%d layers=1 compile=0" % (encoding, heads)) == "ok"
        got = float(peer.command("loss m").split()[1])
        want = encoder_loss(params, tokens, labels, heads, 1, mask if encoding == "alibi" else None)
        assert abs(got - want) < 1e-5
        assert float(peer.command("time m").split()[1]) > 0
        assert float(peer.command("loss m").split()[1]) != got  # the step moved the weights
    finally:
        peer.close()
