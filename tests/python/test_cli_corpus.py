"""`posenc corpus` (docs/experiments.md): the corpus of the experiments read
from a package tree written here (--root), its split, and the SentencePiece
tokenizer trained on the training split and reused from the cache; the
command runs in posenc-text (no libtorch in that process) with posenc's
exit codes and one-line errors. The binary comes from $POSENC_CLI, default
<repo>/build/bin/posenc; posenc-text sits beside it."""

import gzip
import hashlib
import json
import os
import pathlib
import random
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
TEXT_TOOL = str(pathlib.Path(CLI).parent / "posenc-text")

WORDS = ("the a of to and in that is was he for it with as his on be at by had not are but from or have an they "
         "which one you were all her she there would their we him been has when who will more no if out so said "
         "what up its about into than them can only other new some could time these two may then do first any my "
         "now such like our over man me even most made after also did many before must through back years where "
         "much your way well down should because each just those people how too little state good very make world "
         "still own see men work long get here between both life being under never day same another know while "
         "last might us great old year off come since against go came right used take three").split()


def run(*args, tool=CLI, cwd=None):
    if not os.path.exists(tool):
        pytest.fail(f"{tool} not found: build it first or set POSENC_CLI")
    return subprocess.run([tool, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def fnv_split(key):
    """64-bit FNV-1a of the key, mod 100: < 80 train, < 90 validation, else test (written here)."""
    h = 0xcbf29ce484222325
    for byte in key.encode():
        h = ((h ^ byte) * 0x100000001b3) % 2 ** 64
    bucket = h % 100
    return "train" if bucket < 80 else "validation" if bucket < 90 else "test"


def b64(value):
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = ""
    while True:
        out = digits[value % 64] + out
        value //= 64
        if value == 0:
            return out


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture
def tree(tmp_path):
    """wordnet-base, dict-gcide and fortunes files under tmp_path/root, in the packages' formats."""
    rng = random.Random(5)
    root = tmp_path / "root"
    wordnet = root / "usr" / "share" / "wordnet"
    wordnet.mkdir(parents=True)
    synsets = {"noun": [], "verb": [], "adj": [], "adv": []}
    for i in range(300):
        part = ("noun", "verb", "adj", "adv")[i % 4]
        pos = part[0] if part != "adv" else "r"
        lex = {"noun": 5 + i % 20, "verb": 29 + i % 14, "adj": 0, "adv": 2}[part]
        offset = f"{1000 + i:08d}"
        synsets[part].append((pos, offset, f"{offset} {lex:02d} {pos} 01 w{i} 0 000 | {sentence(rng, 8)}  "))
    for part, lines in synsets.items():
        (wordnet / f"data.{part}").write_text("  1 license header\n" + "".join(l + "\n" for _, _, l in lines))
    dictd = root / "usr" / "share" / "dictd"
    dictd.mkdir(parents=True)
    texts, index = [], []
    at = 0
    for i in range(200):
        text = f"Word{i} \\Word\"{i}\\, n. {sentence(rng, 12)}.\n   [1913 Webster]\n"
        index.append(f"word{i}\t{b64(at)}\t{b64(len(text.encode()))}\n")
        texts.append(text)
        at += len(text.encode())
    (dictd / "gcide.index").write_text("".join(index))
    with gzip.open(dictd / "gcide.dict.dz", "wb") as f:
        f.write("".join(texts).encode())
    fortunes = root / "usr" / "share" / "games" / "fortunes"
    fortunes.mkdir(parents=True)
    for category in ("food", "law"):
        (fortunes / category).write_text("\n%\n".join(sentence(rng, 10) for _ in range(100)) + "\n")
        (fortunes / f"{category}.dat").write_bytes(b"\x00\x01 index")
    return root, synsets


def corpus_json(*args, tool=CLI):
    r = run("corpus", *args, "--json", tool=tool)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return json.loads(r.stdout)


def test_documents_and_splits(tree):
    root, synsets = tree
    j = corpus_json("--root", root)
    assert [s["source"] for s in j["sources"]] == ["wordnet", "gcide", "fortunes"]
    expected = {"train": 0, "validation": 0, "test": 0}
    for part, lines in synsets.items():
        for pos, offset, _ in lines:
            expected[fnv_split(f"wordnet:{pos}{offset}")] += 1
    wordnet = j["sources"][0]
    assert {k: wordnet[k]["documents"] for k in expected} == expected
    gcide = {k: j["sources"][1][k]["documents"] for k in expected}
    assert gcide == {k: sum(fnv_split(f"gcide:word{i}") == k for i in range(200)) for k in expected}
    fortunes = {k: j["sources"][2][k]["documents"] for k in expected}
    assert fortunes == {k: sum(fnv_split(f"fortunes:{c}#{i}") == k for c in ("food", "law") for i in range(1, 101))
                        for k in expected}
    # Each wordnet document is "w<i>: <8 words>": 9 words; each fortune 10.
    assert sum(wordnet[k]["words"] for k in expected) == 300 * 9
    assert sum(j["sources"][2][k]["words"] for k in expected) == 200 * 10
    assert "tokenizer" not in j


def test_tokenizer_trained_once_then_reused(tree, tmp_path):
    root, _ = tree
    cache = tmp_path / "cache"
    first = corpus_json("--root", root, "--sources", "wordnet,fortunes", "--vocab-size", 120, "--cache", cache)
    assert first["tokenizer"]["cached"] is False and first["tokenizer"]["vocab_size"] == 120
    model = pathlib.Path(first["tokenizer"]["model"])
    assert model.parent == cache and model.name.startswith("spm-") and model.suffix == ".model"
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    tokens = sum(s[k]["tokens"] for s in first["sources"] for k in ("train", "validation", "test"))
    assert tokens > 0
    # The second run finds the model and gives the same counts; posenc-text directly gives the same.
    second = corpus_json("--root", root, "--sources", "wordnet,fortunes", "--vocab-size", 120, "--cache", cache)
    assert second["tokenizer"]["cached"] is True and second["sources"] == first["sources"]
    assert hashlib.sha256(model.read_bytes()).hexdigest() == digest
    direct = corpus_json("--root", root, "--sources", "wordnet,fortunes", "--vocab-size", 120, "--cache", cache,
                         tool=TEXT_TOOL)
    assert direct == second
    # Another vocabulary is another model beside it.
    third = corpus_json("--root", root, "--sources", "wordnet,fortunes", "--vocab-size", 100, "--cache", cache)
    assert third["tokenizer"]["model"] != first["tokenizer"]["model"] and len(list(cache.iterdir())) == 2


def test_text_output(tree, tmp_path):
    root, _ = tree
    r = run("corpus", "--root", root, "--sources", "fortunes")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["source", "split", "documents", "bytes", "words"]
    assert [line.split()[:2] for line in lines[1:]] == [["fortunes", "train"], ["fortunes", "validation"],
                                                        ["fortunes", "test"]]


@pytest.mark.parametrize("args, code, message", [
    (["--sources", "wiki"], 2, "[corpus] source must be one of wordnet, gcide, fortunes, got 'wiki'"),
    (["--sources", "gcide,gcide"], 2, "[corpus] source 'gcide' is named twice"),
    (["--vocab-size", 3], 2, "[tokenizer] vocab_size must be >= 16, got 3"),
    (["--vocab-size", 100, "--model-type", "word2vec"], 2,
     '[tokenizer] model_type must be "unigram" or "bpe", got "word2vec"'),
    (["--frobnicate"], 2, "The following argument was not expected: --frobnicate"),
])
def test_bad_arguments(tree, tmp_path, args, code, message):
    root, _ = tree
    r = run("corpus", "--root", root, "--cache", tmp_path / "c", *args)
    assert (r.returncode, r.stdout, r.stderr) == (code, "", f"posenc: {message}\n")


def test_missing_package_is_named(tmp_path):
    r = run("corpus", "--root", tmp_path, "--sources", "gcide")
    assert r.returncode == 1
    assert r.stderr == (f"posenc: [corpus] {tmp_path}/usr/share/dictd/gcide.index: not found; install Debian's "
                        "dict-gcide (bash scripts/setup.sh)\n")


def test_help_lists_corpus():
    r = run("--help")
    assert r.returncode == 0 and "corpus" in r.stdout
    r = run("corpus", "--help")
    assert r.returncode == 0 and "--vocab-size" in r.stdout


def test_out_writes_token_ids_that_train_a_text_model(tree, tmp_path):
    import math

    import numpy as np

    root, _ = tree
    data = tmp_path / "data"
    j = corpus_json("--root", root, "--vocab-size", 150, "--cache", tmp_path / "cache", "--out", data)
    meta = json.loads((data / "corpus.json").read_text())
    assert meta["format"] == "posenc-text-ids-1" and meta["vocab_size"] == 150 and meta["eos_id"] == 3
    assert meta["sources"] == ["wordnet", "gcide", "fortunes"]
    assert (data / "tokenizer.model").read_bytes() == pathlib.Path(j["tokenizer"]["model"]).read_bytes()
    for split in ("train", "validation", "test"):
        ids = np.load(data / f"{split}.ids.npy")
        assert ids.dtype == np.int64 and ids.ndim == 1 and len(ids) == meta["tokens"][split]
        documents = sum(s[split]["documents"] for s in j["sources"])
        tokens = sum(s[split]["tokens"] for s in j["sources"])
        # Each document's pieces, then eos: eos appears once per document and ends the split.
        assert len(ids) == tokens + documents and (ids == 3).sum() == documents and ids[-1] == 3
        assert ids.min() >= 0 and ids.max() < 150 and not np.isin(ids, [0, 2]).any()  # no pad, no bos
    run_dir = tmp_path / "run"
    r = run("train", "--task", "text", "--data", data, "--encoding", "rope", "--steps", 3, "--seq-len", 16,
            "--batch", 4, "--dim", 16, "--heads", 2, "--layers", 1, "--warmup", 1, "--threads", 1, "--out", run_dir)
    assert r.returncode == 0, r.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert config["task_options"]["vocab_size"] == 150  # the data's
    assert config["task_options"]["data"] == str(data) and config["task_options"]["eval_split"] == "validation"
    r = run("eval", "--checkpoint", run_dir, "--lengths", "16,32", "--batches", 1, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["lengths"]
    assert [row["seq_len"] for row in rows] == [16, 32]
    for row in rows:
        assert row["count"] == 4 * row["seq_len"]  # every position scored
        assert math.isclose(row["perplexity"], math.exp(row["loss"]), rel_tol=1e-12)
    # Options of the text task are refused for the others, and --out needs a tokenizer.
    r = run("train", "--task", "copy", "--data", data, "--encoding", "rope", "--out", tmp_path / "x")
    assert (r.returncode, r.stderr) == (2, "posenc: [train] --data does not apply to task 'copy' (only to text, mlm, "
                                           "text-classify, text-span)\n")
    r = run("corpus", "--root", root, "--out", tmp_path / "y")
    assert (r.returncode, r.stderr) == (2, "posenc: [corpus] --out needs --vocab-size (the token ids come from "
                                           "that tokenizer)\n")


# lexnames(5WN): the lexicographer files by number, written here from WordNet's documentation.
LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
            "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
            "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
            "adj.ppl").split()
SPLITS = ("train", "validation", "test")


def content_lengths(rows):
    """Per row, the tokens before the first pad (0); asserts bos first and nothing but pad after the content."""
    import numpy as np

    assert (rows[:, 0] == 2).all()
    is_pad = rows == 0
    n = np.where(is_pad.any(axis=1), is_pad.argmax(axis=1), rows.shape[1])
    assert (is_pad == (np.arange(rows.shape[1])[None, :] >= n[:, None])).all()  # pad only after the content
    return n


def load_task(data, name):
    import numpy as np

    meta = json.loads((data / "tasks" / name / "task.json").read_text())
    arrays = {split: (np.load(data / "tasks" / name / f"{split}.tokens.npy"),
                      np.load(data / "tasks" / name / f"{split}.labels.npy")) for split in SPLITS}
    return meta, arrays


def test_out_writes_labelled_task_datasets(tree, tmp_path):
    import numpy as np

    root, synsets = tree
    data = tmp_path / "data"
    j = corpus_json("--root", root, "--vocab-size", 150, "--cache", tmp_path / "cache", "--out", data)
    assert j["tasks"] == {name: {split: json.loads((data / "tasks" / name / "task.json").read_text())["examples"]
                                 [split] for split in SPLITS} for name in ("lexname", "pos", "definition")}
    assert json.loads((data / "corpus.json").read_text())["tasks"] == ["lexname", "pos", "definition"]

    # The wordnet documents of each split, in corpus order (data.noun, data.verb, data.adj, data.adv).
    wordnet = {split: [] for split in SPLITS}
    for part, lines in synsets.items():
        for pos, offset, line in lines:
            wordnet[fnv_split(f"wordnet:{pos}{offset}")].append((pos, LEXNAMES[int(line.split()[1])]))
    classes = sorted({lex for docs in wordnet.values() for _, lex in docs})
    for name, expected_classes, class_of in [
            ("lexname", classes, lambda pos, lex: lex),
            ("pos", ["adjective", "adverb", "noun", "verb"],
             lambda pos, lex: {"a": "adjective", "r": "adverb", "n": "noun", "v": "verb"}[pos])]:
        meta, arrays = load_task(data, name)
        assert list(meta) == ["format", "task", "kind", "source", "seq_len", "classes", "description", "examples",
                              "truncated", "pad_id", "bos_id"]
        assert (meta["task"], meta["kind"], meta["source"], meta["seq_len"]) == (name, "classification", "wordnet", 64)
        assert meta["classes"] == expected_classes  # sorted, every class of the documents
        for split in SPLITS:
            tokens, labels = arrays[split]
            assert tokens.dtype == np.int32 and labels.dtype == np.int32
            assert tokens.shape == (len(wordnet[split]), 64) and labels.shape == (len(wordnet[split]),)
            assert meta["examples"][split] == len(wordnet[split])
            n = content_lengths(tokens)
            assert (n >= 2).all() and meta["truncated"][split] == int((n == 64).sum()) == 0  # short glosses
            assert not np.isin(tokens[:, 1:], [2, 3, 5]).any() and tokens.max() < 150
            # Each row's label is its own document's class: the split keeps the corpus order.
            assert [meta["classes"][k] for k in labels] == [class_of(pos, lex) for pos, lex in wordnet[split]]
    # pos and lexname share their rows.
    for split in SPLITS:
        assert (load_task(data, "pos")[1][split][0] == load_task(data, "lexname")[1][split][0]).all()

    meta, arrays = load_task(data, "definition")
    assert list(meta) == ["format", "task", "kind", "source", "seq_len", "description", "examples", "truncated",
                          "unused_documents", "pad_id", "bos_id", "sep_id", "eos_id"]
    assert (meta["format"], meta["sep_id"], meta["eos_id"]) == ("posenc-task-2", 5, 3)
    assert (meta["kind"], meta["source"], meta["seq_len"]) == ("span", "gcide", 128)
    for split in SPLITS:
        # The fixture's headwords are distinct: passages are the split's entries, 4 at a time, in corpus order.
        words = [i for i in range(200) if fnv_split(f"gcide:word{i}") == split]
        tokens, labels = arrays[split]
        assert tokens.dtype == np.int32 and labels.dtype == np.int32
        assert tokens.shape == (len(words) // 4, 128) and labels.shape == (len(words) // 4, 2)
        assert meta["unused_documents"][split] == len(words) % 4
        n = content_lengths(tokens)
        queries = set()
        for row, (start, end), length in zip(tokens, labels, n):
            sep = list(row).index(5)
            query = row[1:sep]
            queries.add(tuple(query))
            assert 1 <= len(query) <= 8
            assert sep < start <= end < length - 1 and end - start < 24
            # Entries are headword, sep, definition, eos; the query's headword and a sep stand right before its
            # definition's span, an eos right after it.
            assert (row[start - 1 - len(query):start - 1] == query).all() and row[start - 1] == 5
            assert row[end + 1] == 3 and 3 not in row[start:end + 1] and 5 not in row[start:end + 1]
            assert list(row[:length]).count(3) == 4 and row[length - 1] == 3 and list(row[:length]).count(5) == 5
        assert len(queries) == len(tokens)  # one entry per document: no headword is asked twice

    # Same input, same bytes: a second directory from the cached tokenizer is identical file for file.
    again = tmp_path / "again"
    corpus_json("--root", root, "--vocab-size", 150, "--cache", tmp_path / "cache", "--out", again)
    files = sorted(p.relative_to(data) for p in (data / "tasks").rglob("*") if p.is_file())
    assert len(files) == 3 * 7
    assert files == sorted(p.relative_to(again) for p in (again / "tasks").rglob("*") if p.is_file())
    for f in files:
        assert (data / f).read_bytes() == (again / f).read_bytes(), f

    # Only the tasks of the sources: fortunes alone has none.
    only = tmp_path / "fortunes"
    j = corpus_json("--root", root, "--sources", "fortunes", "--vocab-size", 100, "--cache", tmp_path / "cache",
                    "--out", only)
    assert j["tasks"] == {} and json.loads((only / "corpus.json").read_text())["tasks"] == []
    assert not (only / "tasks").exists()


def test_tasks_refuse_one_class_and_empty_splits(tmp_path):
    rng = random.Random(9)
    root = tmp_path / "root"
    wordnet = root / "usr" / "share" / "wordnet"
    wordnet.mkdir(parents=True)
    # Nouns of one lexicographer file (05, noun.animal) only.
    (wordnet / "data.noun").write_text("".join(f"{1000 + i:08d} 05 n 01 w{i} 0 000 | {sentence(rng, 8)}\n"
                                               for i in range(200)))
    for part in ("verb", "adj", "adv"):
        (wordnet / f"data.{part}").write_text("")
    r = run("corpus", "--root", root, "--sources", "wordnet", "--vocab-size", 100, "--cache", tmp_path / "c",
            "--out", tmp_path / "out")
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "posenc: [corpus] task 'lexname' needs documents of at least 2 classes, got 1 (noun.animal)\n")
    assert not (tmp_path / "out" / "corpus.json").exists() and not (tmp_path / "out" / "tasks").exists()
    # GCIDE words of the training split only: no passage in validation.
    dictd = root / "usr" / "share" / "dictd"
    dictd.mkdir(parents=True)
    words = [f"word{i}" for i in range(400) if fnv_split(f"gcide:word{i}") == "train"][:120]
    texts, index, at = [], [], 0
    for w in words:
        text = f"{w.title()}, n. {sentence(rng, 12)}.\n"
        index.append(f"{w}\t{b64(at)}\t{b64(len(text.encode()))}\n")
        texts.append(text)
        at += len(text.encode())
    (dictd / "gcide.index").write_text("".join(index))
    with gzip.open(dictd / "gcide.dict.dz", "wb") as f:
        f.write("".join(texts).encode())
    r = run("corpus", "--root", root, "--sources", "gcide", "--vocab-size", 64, "--cache", tmp_path / "c",
            "--out", tmp_path / "out")
    assert (r.returncode, r.stdout, r.stderr) == (
        2, "", "posenc: [corpus] task 'definition' has no examples in split 'validation' (0 gcide documents there; "
               "a passage needs 4 entries with distinct headwords)\n")
    assert not (tmp_path / "out" / "corpus.json").exists()
