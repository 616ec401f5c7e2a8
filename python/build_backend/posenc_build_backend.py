"""posenc's PEP 517 build backend (pyproject.toml). Standard library only, so
pip's build isolation has nothing to download (`requires = []`).

build_wheel takes the C++ build from an existing CMake build directory (the
config setting build-dir, else $POSENC_BUILD_DIR) or configures and builds one
from scratch in a temporary directory, against the torch that the interpreter
running pip imports. It then writes the wheel itself:

    posenc/**.py                 every .py under python/posenc
    posenc/_version.py           the version of CMakeLists.txt's project(), written in
    posenc/_lib/lib*.so          libposenc_nn.so, libposenc_analysis_torch.so and any
                                 other shared library of ours they need (RUNPATH $ORIGIN)
    posenc/_bin/posenc           the command-line tool (RUNPATH $ORIGIN/../_lib)
    posenc-<v>.dist-info/        METADATA, WHEEL, entry_points.txt, RECORD

Errors raise BuildError with a message like `[build-dir] must ..., got ...`;
pip prints it under the backend's traceback.
"""

import base64
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
PACKAGE_DIR = SOURCE_DIR / "python" / "posenc"
BUILD_DIR_SETTING = "build-dir"
BUILD_DIR_VARIABLE = "POSENC_BUILD_DIR"
CMAKE_ARGS_SETTING = "cmake-args"

# What the wheel needs from a build: the targets, and where CMake puts their files.
TARGETS = ("posenc_nn", "posenc_analysis_torch", "posenc", "posenc-text")
LIBRARIES = ("lib/libposenc_nn.so", "lib/libposenc_analysis_torch.so")
CLI = "bin/posenc"
TEXT_TOOL = "bin/posenc-text"  # `posenc corpus` runs it (a process without libtorch)
SCRATCH_CMAKE_ARGS = ("-DCMAKE_BUILD_TYPE=Release", "-DPOSENC_BUILD_NN=ON", "-DPOSENC_BUILD_TESTS=OFF",
                      "-DPOSENC_BUILD_BENCH=OFF")

PROJECT_KEYS = {"name", "description", "license", "requires-python", "dependencies", "scripts", "dynamic"}
# Fixed zip timestamps: the same build gives the same wheel.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class BuildError(RuntimeError):
    """A build that cannot go on; the message says what was expected and what was found."""


# ---------------------------------------------------------------- metadata

def project_table():
    """[project] of pyproject.toml; only the keys this backend writes into METADATA."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        raise BuildError("[python] posenc's build backend needs Python 3.11 or later (tomllib), got "
                         f"{sys.version.split()[0]}")
    with open(SOURCE_DIR / "pyproject.toml", "rb") as file:
        project = tomllib.load(file)["project"]
    unknown = sorted(set(project) - PROJECT_KEYS)
    if unknown:
        raise BuildError(f"[pyproject.toml] [project] keys must be among {', '.join(sorted(PROJECT_KEYS))}, "
                         f"got {', '.join(unknown)}")
    return project


def project_version():
    """CMakeLists.txt's project(posenc VERSION ...), read by the package's own _version.py."""
    spec = importlib.util.spec_from_file_location("_posenc_version", PACKAGE_DIR / "_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # loads only that file: importing posenc would need torch
    version = module.version_from_cmake(SOURCE_DIR / "CMakeLists.txt")
    if version is None:
        raise BuildError(f"[version] CMakeLists.txt must declare project(posenc VERSION x.y.z), got none in "
                         f"{SOURCE_DIR / 'CMakeLists.txt'}")
    return version


def wheel_tag():
    # The op libraries are C++ against libtorch, not CPython extensions: any Python 3, this platform.
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def dist_info_files(project, version):
    """{name: text} of the .dist-info directory, RECORD aside."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project['license']['text']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    files = {
        "METADATA": "\n".join(lines) + "\n",
        "WHEEL": "\n".join([
            "Wheel-Version: 1.0",
            "Generator: posenc_build_backend",
            "Root-Is-Purelib: false",
            f"Tag: {wheel_tag()}",
        ]) + "\n",
    }
    scripts = project.get("scripts", {})
    if scripts:
        files["entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{name} = {target}\n" for name, target in sorted(scripts.items()))
    return files


def dist_info_name(project, version):
    return f"{project['name']}-{version}.dist-info"


# ---------------------------------------------------------------- torch

def _environment_without_isolation():
    """os.environ without pip's build isolation: its PYTHONPATH entry (pip-build-env-*/site,
    whose sitecustomize hides the interpreter's site-packages) and PYTHONNOUSERSITE."""
    environ = dict(os.environ)
    entries = environ.get("PYTHONPATH", "").split(os.pathsep)
    kept = [entry for entry in entries if entry and "pip-build-env-" not in entry]
    if len(kept) != len([entry for entry in entries if entry]):
        environ.pop("PYTHONNOUSERSITE", None)
    if kept:
        environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        environ.pop("PYTHONPATH", None)
    return environ


_TORCH_QUERY = ("import json, torch, torch.utils; print(json.dumps({'version': torch.__version__, "
                "'file': torch.__file__, 'cmake_prefix_path': torch.utils.cmake_prefix_path}))")


def host_torch(python=None):
    """{version, file, cmake_prefix_path} of the torch that python (default: the interpreter
    running pip) imports outside pip's isolation."""
    python = python or sys.executable
    result = subprocess.run([python, "-c", _TORCH_QUERY], env=_environment_without_isolation(),
                            capture_output=True, text=True)
    if result.returncode != 0:
        error = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"[torch] must be importable by {python}, the interpreter running pip, got {error}; "
                         "Debian's python3-torch is importable by /usr/bin/python3: make the virtual "
                         "environment with /usr/bin/python3 -m venv --system-site-packages")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _release(version):
    """'1.13.0a0+gitunknown' -> '1.13.0': the release numbers, without pre-release or local parts."""
    match = re.match(r"[0-9]+(?:\.[0-9]+)*", version)
    return match.group(0) if match else version


def cmake_cache(build_dir):
    """{name: value} of build_dir/CMakeCache.txt."""
    entries = {}
    for line in (build_dir / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace").splitlines():
        match = re.match(r"([^#/][^:=]*):[A-Z]+=(.*)", line)
        if match:
            entries[match.group(1)] = match.group(2)
    return entries


def check_torch(build_dir, torch):
    """The libtorch CMake found for build_dir must be the torch pip's interpreter imports."""
    torch_dir = cmake_cache(build_dir).get("Torch_DIR", "")
    config = Path(torch_dir) / "TorchConfigVersion.cmake"
    match = re.search(r'set\(PACKAGE_VERSION "([^"]+)"\)', config.read_text()) if config.is_file() else None
    if match is None:
        raise BuildError(f"[torch] the build must name libtorch's TorchConfigVersion.cmake (Torch_DIR in "
                         f"CMakeCache.txt), got Torch_DIR={torch_dir!r} in {build_dir}")
    libtorch = match.group(1)
    if _release(libtorch) != _release(torch["version"]):
        raise BuildError(f"[torch] the libtorch CMake found must be the version of the torch that pip's "
                         f"interpreter imports ({torch['version']}, {torch['file']}), got {libtorch} ({config})")


# ---------------------------------------------------------------- the C++ build

def requested_build_dir(config_settings, environ=None):
    """The existing build directory asked for (config setting build-dir, else $POSENC_BUILD_DIR), or None.
    A relative path is taken from the source tree."""
    environ = os.environ if environ is None else environ
    value = (config_settings or {}).get(BUILD_DIR_SETTING) or environ.get(BUILD_DIR_VARIABLE)
    if not value:
        return None
    return (SOURCE_DIR / value).resolve()


def check_build_dir(build_dir):
    """build_dir must be a configured and built posenc build of this source tree."""
    if not (build_dir / "CMakeCache.txt").is_file():
        raise BuildError("[build-dir] must be a CMake build directory of posenc (with CMakeCache.txt), got "
                         f"{build_dir}")
    cache = cmake_cache(build_dir)
    home = cache.get("CMAKE_HOME_DIRECTORY", "")
    if not home or Path(home).resolve() != SOURCE_DIR:
        raise BuildError(f"[build-dir] must be a build of this source tree {SOURCE_DIR}, got a build of "
                         f"{home or 'an unknown tree'} ({build_dir})")
    if cache.get("POSENC_BUILD_NN", "ON").upper() in ("OFF", "0", "FALSE", "NO"):
        raise BuildError(f"[build-dir] must be configured with POSENC_BUILD_NN=ON (the op libraries), got "
                         f"POSENC_BUILD_NN={cache['POSENC_BUILD_NN']} ({build_dir})")
    missing = [name for name in (*LIBRARIES, CLI, TEXT_TOOL) if not (build_dir / name).is_file()]
    if missing:
        raise BuildError(f"[build-dir] must contain the built {', '.join((*LIBRARIES, CLI, TEXT_TOOL))}, got no "
                         f"{', '.join(missing)} in {build_dir} "
                         f"(cmake --build {build_dir} --target {' '.join(TARGETS)})")


def _run(command, what):
    print("posenc build:", shlex.join(str(part) for part in command), flush=True)
    result = subprocess.run([str(part) for part in command])
    if result.returncode != 0:
        raise BuildError(f"[build] {what} must succeed, got exit status {result.returncode} from "
                         f"{shlex.join(str(part) for part in command)}")


def build_from_scratch(build_dir, torch, config_settings):
    """Configures (Release, no tests, no benchmarks) and builds the four targets in build_dir."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("[build] cmake must be on PATH (Debian: apt-get install cmake ninja-build g++), got none")
    command = [cmake, "-S", SOURCE_DIR, "-B", build_dir, *SCRATCH_CMAKE_ARGS]
    if shutil.which("ninja"):
        command += ["-G", "Ninja"]
    # A pip-installed torch carries its CMake config; Debian's libtorch-dev is found by CMake's defaults.
    torch_prefix = Path(torch["cmake_prefix_path"])
    if (torch_prefix / "Torch" / "TorchConfig.cmake").is_file():
        command.append(f"-DCMAKE_PREFIX_PATH={torch_prefix}")
    command += shlex.split((config_settings or {}).get(CMAKE_ARGS_SETTING, ""))
    _run(command, "configuring with CMake")
    check_torch(build_dir, torch)  # before the long build
    build = [cmake, "--build", build_dir, "--target", *TARGETS]
    if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
        build += ["--parallel", str(os.cpu_count() or 1)]
    _run(build, "building with CMake")


# ---------------------------------------------------------------- native files

def dynamic_section(path):
    """(NEEDED names, RUNPATH or RPATH entries) of an ELF file, from readelf."""
    result = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                            env=dict(os.environ, LC_ALL="C"))
    if result.returncode != 0:
        raise BuildError(f"[build] readelf -d must read {path}, got: {result.stderr.strip()}")
    needed, runpath = [], []
    for line in result.stdout.splitlines():
        match = re.search(r"\((NEEDED|RUNPATH|RPATH)\)[^\[]*\[(.*)\]", line)
        if match and match.group(1) == "NEEDED":
            needed.append(match.group(2))
        elif match:
            runpath += match.group(2).split(":")
    return needed, runpath


def set_runpath(path, entries):
    """Rewrites path's RUNPATH in place with CMake (it must fit in the old one's room)."""
    script = path.parent / "set_runpath.cmake"
    script.write_text('file(RPATH_SET FILE "${FILE}" NEW_RPATH "${RUNPATH}")\n')
    result = subprocess.run(["cmake", f"-DFILE={path}", f"-DRUNPATH={':'.join(entries)}", "-P", str(script)],
                            capture_output=True, text=True)
    script.unlink()
    if result.returncode != 0:
        raise BuildError(f"[build] the RUNPATH of {path.name} must become {':'.join(entries)}, got: "
                         f"{result.stderr.strip()}")


def stage_native(build_dir, stage):
    """Copies the op libraries, the CLI and any other shared library of ours they need
    (transitively, found in build_dir/lib) into stage/_lib and stage/_bin, with RUNPATHs that
    find each other there. Returns [(path in the package, staged file)]."""
    build_dir = build_dir.resolve()
    lib_dir = build_dir / "lib"
    ours = {Path(name).name: build_dir / name for name in LIBRARIES}
    pending = [*ours.values(), build_dir / CLI]
    while pending:
        needed, _ = dynamic_section(pending.pop())
        for name in needed:
            if name not in ours and (lib_dir / name).is_file():
                ours[name] = lib_dir / name
                pending.append(lib_dir / name)
    staged = []
    for source, target, origin in ([(path, f"_lib/{name}", "$ORIGIN") for name, path in sorted(ours.items())]
                                   + [(build_dir / CLI, "_bin/posenc", "$ORIGIN/../_lib"),
                                      (build_dir / TEXT_TOOL, "_bin/posenc-text", "$ORIGIN/../_lib")]):
        copy = stage / target
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)
        needed, runpath = dynamic_section(copy)
        # Keep what points outside the build (e.g. a pip-installed torch's lib/); ours is found via $ORIGIN.
        foreign = [entry for entry in runpath if entry and not entry.startswith("$ORIGIN")
                   and not Path(entry).resolve().is_relative_to(build_dir)]
        wanted = ([origin] if any(name in ours for name in needed) else []) + foreign
        if wanted != runpath:
            set_runpath(copy, wanted)
        staged.append((target, copy))
    return staged


# ---------------------------------------------------------------- the wheel

def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def package_sources():
    """[(path in the wheel, file)] of every .py under python/posenc but _version.py (written in)."""
    files = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        relative = path.relative_to(PACKAGE_DIR)
        if "__pycache__" in relative.parts or relative == Path("_version.py"):
            continue
        files.append((f"posenc/{relative.as_posix()}", path))
    return files


def version_module(version):
    return ('"""posenc.__version__, written by the build backend from CMakeLists.txt\'s project(posenc VERSION)."""'
            f'\n\n__version__ = "{version}"\n')


def write_wheel(wheel_directory, project, version, staged):
    """Writes the wheel; returns its file name."""
    name = f"{project['name']}-{version}-{wheel_tag()}.whl"
    dist_info = dist_info_name(project, version)
    entries = [(arcname, path.read_bytes(), 0o644) for arcname, path in package_sources()]
    entries.append(("posenc/_version.py", version_module(version).encode(), 0o644))
    entries += [(f"posenc/{target}", path.read_bytes(), 0o755) for target, path in staged]
    entries += [(f"{dist_info}/{file}", text.encode(), 0o644)
                for file, text in dist_info_files(project, version).items()]
    record = [f"{arcname},{_record_hash(data)},{len(data)}" for arcname, data, _ in entries]
    record.append(f"{dist_info}/RECORD,,")
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    path = Path(wheel_directory) / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data, mode in entries:
            info = zipfile.ZipInfo(arcname, date_time=ZIP_DATE)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with these permissions
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


# ---------------------------------------------------------------- PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # pip resolves the "torch" dependency after this hook and before build_wheel: without torch it would
    # look for it on an index and end with "No matching distribution found for torch", not this message.
    host_torch()
    project, version = project_table(), project_version()
    directory = Path(metadata_directory) / dist_info_name(project, version)
    directory.mkdir(parents=True, exist_ok=True)
    for file, text in dist_info_files(project, version).items():
        (directory / file).write_text(text, encoding="utf-8")
    return directory.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, version = project_table(), project_version()
    torch = host_torch()
    with tempfile.TemporaryDirectory(prefix="posenc-wheel-") as scratch:
        scratch = Path(scratch)
        build_dir = requested_build_dir(config_settings)
        if build_dir is None:
            build_dir = scratch / "build"
            build_from_scratch(build_dir, torch, config_settings)  # checks torch before the long build
            check_build_dir(build_dir)
        else:
            check_build_dir(build_dir)
            check_torch(build_dir, torch)
        staged = stage_native(build_dir, scratch / "stage")
        return write_wheel(wheel_directory, project, version, staged)
