"""Writes every C++ block of the given Markdown files into one translation
unit, so that the documented API compiles and runs as written (ctest
DocsExamples.Cpp; tests/python/test_docs_examples.py does the same for the
Python blocks).

A file's blocks become one function; each block opens a new scope, except
those listed in CONTINUES, which go on in the scope of the block before them
(the prose continues its story: the table `pe` of one block is written to a
file by the next). A block that uses names the prose gives it without code
(q, k, v "of your model") gets them from PRELUDES; the few blocks that are
not C++ statements say why in NOT_RUN. Every key must still name a block:
a changed example fails the generation instead of silently escaping it.

    extract_cpp_examples.py OUT.cpp ROOT FILE.md...
"""

import pathlib
import re
import sys

# (file, first line of code) -> code placed before the block, in its scope.
PRELUDES = {
    ("docs/cpp.md", '#include "posenc/nn/rotary_embedding.h"'):
        "at::Tensor k = at::randn({2, 8, 4096, 128}, at::kBFloat16);",
    ("docs/cpp.md", '#include "posenc/training/data_parallel.h"'):
        "posenc::nn::TransformerEncoder model(posenc::nn::TransformerOptions(32, \"rope\").dim(32).layers(1).heads(2));\n"
        "at::Tensor tokens = at::randint(0, 32, {8, 16}, at::kLong);\n"
        "at::Tensor labels = at::randint(0, 2, {8}, at::kLong);\n"
        "torch::optim::AdamW optimizer(model->parameters());\n"
        "const uint64_t seed = 0;",
    ("docs/cpp.md", '#include "posenc/nn/models.h"'):
        "at::Tensor tokens = at::randint(0, 32, {4, 12}, at::kLong);\n"
        "at::Tensor padding = at::zeros({4, 12}, at::kBool);",
    ("docs/analysis.md", '#include "posenc/analysis/indicators.h"   '
                         '// and proximity.h, monotone_range.h, translation_fit.h, probes.h'):
        "std::vector<float> values(512 * 768);\n"
        "posenc::kernels::sinusoidal_table<float>({.dim = 768}, posenc::kernels::Positions::range(0, 512), values);",
    ("docs/attention.md", '#include "posenc/nn/attention_ops.h"'):
        "const int64_t T = 128;\n"
        "at::Tensor q = at::randn({1, 8, T, 64}), k = at::randn({1, 8, T, 64}), v = at::randn({1, 8, T, 64});",
    ("docs/attention.md", '#include "posenc/nn/encoding_registry.h"'):
        "at::Tensor x = at::randn({2, 16, 64});",
}

# (file, first line of code): the blocks that continue the scope of the block before them.
CONTINUES = {
    ("docs/cpp.md", '#include "posenc/io/npy.h"'),
    ("docs/cpp.md", '#include "posenc/analysis/summary.h"'),
    ("docs/cpp.md", '#include "posenc/nn/rotary_embedding.h"'),
    ("docs/cpp.md", '#include "posenc/nn/attention_biases.h"'),
}

NOT_RUN = {
    ("docs/cpp.md", "Positions::range(start, count);            // start, start+1, ...: uses the rotation recurrence"):
        "the two ways to give positions, written as signatures",
}

# Headers every example may use without saying so (the prelude's names).
ALWAYS = ["<cstdint>", "<cstdio>", "<span>", "<string>", "<vector>", "<torch/torch.h>",
          '"posenc/kernels/sinusoidal.h"', '"posenc/nn/models.h"']


def blocks(root, name):
    text = (root / name).read_text()
    for m in re.finditer(r"```cpp\n(.*?)```", text, re.S):
        yield text[:m.start()].count("\n") + 2, m.group(1)


def first_code_line(code):
    return next(line for line in code.splitlines() if line.strip() and not line.startswith("//"))


def main(out, root, names):
    root = pathlib.Path(root)
    includes, functions, table, seen = [], [], [], set()
    for name in names:
        body, open_scope = [], False
        for line, code in blocks(root, name):
            key = (name, first_code_line(code))
            seen.add(key)
            if key in NOT_RUN:
                continue
            statements = []
            for text in code.splitlines():
                if text.startswith("#include"):
                    header = text.split()[1]
                    if header not in includes:
                        includes.append(header)
                else:
                    statements.append(text)
            if key not in CONTINUES or not open_scope:
                if open_scope:
                    body.append("}")
                body.append("{")
                open_scope = True
            body.append(f"// {name}:{line}")
            if key in PRELUDES:
                body.append(PRELUDES[key])
            body.extend(statements)
        if open_scope:
            body.append("}")
        if not body:
            continue
        function = "example_" + re.sub(r"\W", "_", name)
        functions.append(f"void {function}() {{\n" + "\n".join(body) + "\n}\n")
        table.append(f'  {{"{name}", {function}}},')
    stale = (set(PRELUDES) | CONTINUES | set(NOT_RUN)) - seen
    if stale:
        sys.exit(f"extract_cpp_examples.py: no block starts with these any more: {sorted(stale)}")
    headers = [h for h in ALWAYS if h not in includes] + includes
    source = ("// Generated by tests/docs/extract_cpp_examples.py from the C++ blocks of the docs: do not edit.\n"
              + "".join(f"#include {h}\n" for h in headers)
              + '#include "doc_examples.h"\n\nnamespace {\n\n' + "\n".join(functions)
              + "\n}  // namespace\n\nconst std::vector<DocExample> kDocExamples = {\n" + "\n".join(table) + "\n};\n")
    pathlib.Path(out).write_text(source)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
