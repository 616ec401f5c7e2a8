"""Every Python block of the README and docs/*.md runs as written, so the
documentation cannot drift from the package.

A file's blocks run in order in one namespace (later blocks use what earlier
ones defined, as the prose does), in a directory holding the files they name
(a BERT and a GPT-2 checkpoint's position table, a Llama 3.1 config.json, a
port's dump, a trained run). A block that continues a story the prose tells
without code (q, k, v "of your model") gets the names it uses from PRELUDES;
the few that are not runnable Python say why in NOT_RUN. A block in neither
that fails, or a new block that cannot run, fails this test. Blocks written
as a session (">>> call" then "SomeError: message") must raise exactly that.
"""

import json
import os
import pathlib
import re
import subprocess

import pytest
import torch

import posenc

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# Keyed by a block's first line of code: the names the prose gives it.
PRELUDES = {
    "pe = pnn.SinusoidalEncoding(512)                  # base, layout, precision, scale as posenc.sinusoidal":
        "tokens_embedded = torch.randn(2, 16, 512); position_ids = torch.arange(16).expand(2, 16);"
        "patches = torch.randn(196, 256)",
    "alibi = pnn.AlibiBias(16, causal=True)            # the paper's slopes, a persistent buffer":
        "q, k, v = (torch.randn(1, 16, 64, 32) for _ in range(3))",
    "shaw = pnn.ShawRelative(16, 64, num_heads=0, values=True)   # tables [33, 64], row r = offset r - 16":
        "T = 48; q, k, v = (torch.randn(2, 4, T, 64) for _ in range(3))",
    "mha = pnn.MultiheadAttention(256, 8, encoding=\"rope+alibi\", causal=True)":
        "x = torch.randn(2, 24, 256); key_padding_mask = torch.zeros(2, 24, dtype=torch.bool);"
        "query = torch.randn(2, 4, 256); memory = torch.randn(2, 24, 256)",
    "from posenc.nn.functional import linear_cross_entropy":
        "model = torch.nn.Module(); model.decoder = torch.nn.Embedding(100, 32);"
        "model.lm_head = torch.nn.Linear(32, 100, bias=False); tokens = torch.randint(0, 100, (2, 12))",
    "report = posenc.check(\"dump.safetensors\", kind=\"rope\", tensor=\"q\", input=\"q_in\", rotary_dim=32)":
        "import posenc; cos_sin_tensor = posenc.load_tensor('dump.safetensors', 'cos_sin')",
}

NOT_RUN = {
    "def evaluate(x):                       # x: the position table, [positions, dim]":
        "an excerpt of another project's script (scikit-learn, its own helpers), quoted to state its protocol",
    "out = posenc.attention(q, k, v, *, causal=False, key_padding_mask=None, scale=None, rope=None,":
        "a signature, not a call",
}

SESSION_LINE = re.compile(r"^(\w+Error): (.*)$")


def python_blocks():
    for path in DOCS:
        text = path.read_text()
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            yield path, text[:m.start()].count("\n") + 2, m.group(1)


def first_code_line(code):
    return next(line for line in code.splitlines() if line.strip() and not line.startswith("#"))


def is_session(code):
    return first_code_line(code).startswith(">>> ")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The files the examples open, made with posenc itself."""
    root = tmp_path_factory.mktemp("docs")
    g = torch.Generator().manual_seed(0)
    posenc.save_tensor(root / "bert.safetensors",
                       {"bert.embeddings.position_embeddings.weight": torch.randn(512, 768, generator=g) * 0.02,
                        "bert.embeddings.word_embeddings.weight": torch.randn(64, 768, generator=g)})
    (root / "gpt2").mkdir()
    posenc.save_tensor(root / "gpt2" / "model.safetensors",
                       {"transformer.wpe.weight": torch.randn(1024, 768, generator=g) * 0.02,
                        "transformer.wte.weight": torch.randn(64, 768, generator=g)})
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    (root / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": scaling}))
    # A port's dump: q before and after a rotation of its first 32 channels, and the config's cos/sin table.
    q_in = torch.randn(1, 4, 16, 64, generator=g)
    q = posenc.apply_rope(q_in, torch.arange(16), rotary_dim=32)
    cos_sin = torch.cat(posenc.rope_cos_sin(4096, 128, base=500000.0, scaling=scaling), dim=-1)  # [N, R]
    posenc.save_tensor(root / "dump.safetensors", {"q_in": q_in, "q": q, "cos_sin": cos_sin})
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    r = subprocess.run([CLI, "train", "--task", "order", "--encoding", "rope", "--layers", "1", "--dim", "16",
                        "--heads", "2", "--seq-len", "8", "--batch", "8", "--steps", "2", "--warmup", "1",
                        "--checkpoint-every", "2", "--log-every", "2", "--threads", "1",
                        "--out", str(root / "runs" / "rope")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return root


def test_every_block_is_runnable_or_says_why():
    blocks = list(python_blocks())
    assert len(blocks) >= 20  # the README and docs/ have that many; none silently dropped by the pattern
    firsts = {first_code_line(code) for _, _, code in blocks}
    # Every prelude and exception still names a block: a stale key would hide a changed example.
    assert set(PRELUDES) <= firsts, set(PRELUDES) - firsts
    assert set(NOT_RUN) <= firsts, set(NOT_RUN) - firsts


def runnable(path, code):
    return not is_session(code) and first_code_line(code) not in NOT_RUN


@pytest.mark.parametrize("path", sorted({p for p, _, code in python_blocks() if runnable(p, code)}),
                         ids=lambda p: p.name)
def test_blocks_run_in_order(path, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    namespace = {}
    ran = 0
    for doc, line, code in python_blocks():
        if doc != path or not runnable(doc, code):
            continue
        first = first_code_line(code)
        if first in PRELUDES:
            exec(compile("import torch\nimport posenc.nn as pnn\n" + PRELUDES[first], "prelude", "exec"), namespace)
        try:
            exec(compile(code, f"{doc.name}:{line}", "exec"), namespace)
        except Exception as e:  # noqa: BLE001  (the test names the block and what it raised)
            pytest.fail(f"{doc.name}:{line}: the example raised {type(e).__name__}: {e}")
        ran += 1
    assert ran > 0


def session_cases():
    for doc, line, code in python_blocks():
        if not is_session(code):
            continue
        lines = [x for x in code.splitlines() if x.strip()]
        for k in range(0, len(lines), 2):
            yield pytest.param(lines[k][4:], lines[k + 1], id=f"{doc.name}:{line + k}")


@pytest.mark.parametrize("call,expected", list(session_cases()))
def test_session_errors_are_exact(call, expected):
    m = SESSION_LINE.match(expected)
    assert m, f"a session line must be 'SomeError: message', got {expected!r}"
    with pytest.raises(Exception) as raised:
        eval(call, {"torch": torch, "posenc": posenc})
    assert type(raised.value).__name__ == m.group(1)
    assert str(raised.value) == m.group(2)
