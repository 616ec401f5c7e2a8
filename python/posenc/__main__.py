"""`python -m posenc ARGS`: runs the posenc command-line tool with ARGS and
exits with its exit code (the process is replaced, so output, signals and the
status are the tool's own).

The tool is $POSENC_CLI when set; else the one bundled in the installed
package (posenc/_bin/posenc), then <repo>/build/bin/posenc (a source tree).
"""

import os
import sys
from pathlib import Path

ENV_VARIABLE = "POSENC_CLI"
PACKAGE_BIN_DIR = Path(__file__).resolve().parent / "_bin"  # what an installed wheel holds


def candidate_paths():
    """Where the tool is looked for, in order (as the op library is, see _library)."""
    explicit = os.environ.get(ENV_VARIABLE)
    if explicit:
        return [Path(explicit)]
    bundled = [PACKAGE_BIN_DIR / "posenc"] if PACKAGE_BIN_DIR.is_dir() else []
    repo = Path(__file__).resolve().parents[2]
    return bundled + [repo / "build" / "bin" / "posenc"]


def main(argv=None):
    """Replaces this process with the tool; returns 1 only when no tool was found."""
    args = sys.argv[1:] if argv is None else list(argv)
    tried = candidate_paths()
    for path in tried:
        if path.is_file() and os.access(path, os.X_OK):
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(path, [str(path), *args])
    print("posenc: the command-line tool posenc was not found; tried " + ", ".join(str(p) for p in tried)
          + f". Build it (cmake --build build --target posenc) or set {ENV_VARIABLE} to its path.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
