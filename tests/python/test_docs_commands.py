"""Every `posenc` command line written in the README and docs/*.md names a
subcommand the CLI has and only options that subcommand takes (its --help
lists them), so a renamed or removed flag cannot survive in the docs.

A command is a line of a code block (fenced, or indented by four spaces)
that starts with `posenc SUBCOMMAND`, optionally after environment settings
(`OPENBLAS_CORETYPE=SkylakeX`) or a path (`build/bin/posenc`); the
indented lines after it that start with `[` or `--` continue it (the usage
blocks). Running the commands is the other tests' work (test_cli_*.py).
"""

import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
GROUPS = {"experiment": ("run", "report")}  # subcommands with subcommands of their own

COMMAND = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S+\s+)*(?:[\w./-]*/)?posenc\s+([a-z][\w-]*)(.*)$")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def commands(page):
    lines = page.read_text().splitlines()
    fenced, k = False, 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("```"):
            fenced = not fenced
            k += 1
            continue
        in_code = fenced or line.startswith("    ")
        m = COMMAND.match(line) if in_code else None
        if m:
            start, text = k + 1, m.group(1) + m.group(2)
            while k + 1 < len(lines) and re.match(r"^\s+[\[-]", lines[k + 1]) and \
                    (fenced or lines[k + 1].startswith("    ")):
                k += 1
                text += " " + lines[k].strip()
            yield start, text
        k += 1


def subcommand_of(text):
    words = text.split()
    if words[0] in GROUPS and len(words) > 1 and words[1] in GROUPS[words[0]]:
        return f"{words[0]} {words[1]}"
    return words[0]


_helps = {}


def help_text(sub):
    if sub not in _helps:
        r = subprocess.run([CLI, *sub.split(), "--help"], capture_output=True, text=True)
        # An unknown word is not an error to CLI11 before --help: it prints the main help. Only the
        # subcommand's own help has its usage line.
        _helps[sub] = r.stdout if r.returncode == 0 and f"Usage: posenc {sub} [OPTIONS]" in r.stdout else None
    return _helps[sub]


def all_commands():
    return [(page, line, text) for page in PAGES for line, text in commands(page)]


def test_the_pages_have_commands():
    found = all_commands()
    assert len(found) >= 60, len(found)  # the docs have about 90; the pattern has not stopped matching
    assert {subcommand_of(t) for _, _, t in found} >= {"table", "train", "experiment run", "report", "check"}


@pytest.mark.parametrize("page,line,text", all_commands(),
                         ids=[f"{p.name}:{n}" for p, n, _ in all_commands()])
def test_command_names_a_subcommand_and_its_options(page, line, text):
    if not os.path.exists(CLI):
        pytest.fail(f"posenc CLI not found at {CLI}: build it first or set POSENC_CLI")
    sub = subcommand_of(text)
    usage = help_text(sub)
    assert usage is not None, f"{page.name}:{line}: 'posenc {sub}' is not a subcommand: {text}"
    unknown = [o for o in OPTION.findall(text) if o not in usage]
    assert not unknown, f"{page.name}:{line}: posenc {sub} has no option {', '.join(unknown)}: {text}"
