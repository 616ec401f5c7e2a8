"""`pip install .` (issue 17): a virtual environment that sees Debian's torch
(--system-site-packages) gets posenc from this source tree with its op
libraries and CLI inside; posenc then works from any directory without
PYTHONPATH, POSENC_LIBRARY or the build tree.

The wheel is made from the build under test (the build directory that
$POSENC_LIBRARY points into, default <repo>/build) through the backend's
build-dir setting, so nothing is compiled twice. Also here: the backend's
refusals (exact messages), its wheel's RECORD, and __version__ and
`python -m posenc` in the source tree.
"""

import base64
import hashlib
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = (Path(os.environ["POSENC_LIBRARY"]).resolve().parents[1] if os.environ.get("POSENC_LIBRARY")
             else REPO / "build")
BUILD_CLI = os.environ.get("POSENC_CLI", str(REPO / "build" / "bin" / "posenc"))
SITE = Path("lib") / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

sys.path.insert(0, str(REPO / "python" / "build_backend"))
import posenc_build_backend as backend  # noqa: E402


def cmake_version():
    """project(posenc VERSION x.y.z) of the top-level CMakeLists.txt, read here on its own."""
    match = re.search(r"project\(posenc VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text())
    assert match, "CMakeLists.txt has no project(posenc VERSION ...)"
    return match.group(1)


def clean_environment(**extra):
    """This environment without anything that points at the source tree or the build."""
    environ = {name: value for name, value in os.environ.items()
               if name not in ("PYTHONPATH", "POSENC_LIBRARY", "POSENC_CLI", "POSENC_BUILD_DIR", "VIRTUAL_ENV")}
    return {**environ, **extra}


def unmet_torch_pins():
    """torch's exact pins that the installed packages do not meet: Debian 13's torch 2.6 declares
    sympy==1.13.1 where Debian ships 1.13.3, and pip would then look for 1.13.1 on an index."""
    unmet = []
    for requirement in importlib.metadata.requires("torch") or []:
        spec, _, marker = requirement.partition(";")
        if "extra" in marker or "==" not in spec:
            continue
        name, pinned = (part.strip() for part in spec.split("=="))
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != pinned:
            unmet.append(f"{name}=={pinned} (installed: {installed})")
    return unmet


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv with --system-site-packages into which pip installed <repo> from the build under test."""
    root = tmp_path_factory.mktemp("pip_install")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    # No index: torch must come from Debian, and nothing may be downloaded.
    environ = clean_environment(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    # Where Debian's torch pins what Debian does not ship, its dependencies cannot be resolved without an
    # index: install as docs/install.md says for that case, with --no-deps (torch itself is checked by
    # the build backend).
    no_deps = ["--no-deps"] if unmet_torch_pins() else []
    result = subprocess.run([str(venv / "bin" / "pip"), "install", str(REPO),
                             f"--config-settings=build-dir={BUILD_DIR}", *no_deps],
                            env=environ, cwd=str(root), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return venv


def run_in(venv, *args, **kwargs):
    """Runs args with the venv's python from a directory outside the source tree, in a clean environment."""
    return subprocess.run([str(venv / "bin" / "python"), *args], env=clean_environment(), cwd=str(venv.parent),
                          capture_output=True, text=True, timeout=300, **kwargs)


PROBE_ROWS = [[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]]
PROBE = f"""
import importlib.metadata, json, torch, posenc, posenc.__main__
from posenc import _library
metadata = importlib.metadata.metadata("posenc")
table = posenc.sinusoidal(4, 8)
print(json.dumps({{
    "version": posenc.__version__,
    "distribution_version": importlib.metadata.version("posenc"),
    "metadata": {{key: metadata.get_all(key) for key in
                  ("Name", "Summary", "License", "Requires-Python", "Requires-Dist")}},
    "package": posenc.__file__,
    "library": str(_library._loaded),
    "cli": str(posenc.__main__.candidate_paths()[0]),
    "table": table.tolist(),
    "dtype": str(table.dtype),
    "proximity": posenc.proximity(torch.tensor({PROBE_ROWS}, dtype=torch.float64)).tolist(),
    "analysis_library": str(_library.analysis_library_path()),
}}))
"""


@pytest.fixture(scope="module")
def probe(venv):
    result = run_in(venv, "-c", PROBE)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_installed_package_has_the_cmake_version(probe):
    assert probe["version"] == cmake_version()
    assert probe["distribution_version"] == cmake_version()


def test_installed_package_metadata_is_pyprojects(probe):
    with open(REPO / "pyproject.toml", "rb") as file:
        project = tomllib.load(file)["project"]
    assert probe["metadata"] == {
        "Name": ["posenc"],
        "Summary": [project["description"]],
        "License": [project["license"]["text"]],
        "Requires-Python": [project["requires-python"]],
        "Requires-Dist": ["torch"],
    }


def test_installed_package_uses_its_own_files(venv, probe):
    package = venv / SITE / "posenc"
    assert Path(probe["package"]) == package / "__init__.py"
    assert Path(probe["library"]) == package / "_lib" / "libposenc_nn.so"
    assert Path(probe["analysis_library"]) == package / "_lib" / "libposenc_analysis_torch.so"
    assert Path(probe["cli"]) == package / "_bin" / "posenc"


def test_installed_sinusoidal_matches_the_formula(probe):
    # PE[p, 2i] = sin(p * 10000^(-2i/8)), PE[p, 2i+1] = cos(...), in float64.
    expected = [[f(p * 10000.0 ** (-2 * i / 8)) for i in range(4) for f in (math.sin, math.cos)] for p in range(4)]
    assert probe["dtype"] == "torch.float32"
    for row, expected_row in zip(probe["table"], expected):
        # 5e-7: the kernels' documented bound for float32 tables (exact angles, one rounding).
        assert row == pytest.approx(expected_row, abs=5e-7)


def test_installed_analysis_library_computes_proximity(probe):
    expected = [[sum(a * b for a, b in zip(x, y)) for y in PROBE_ROWS] for x in PROBE_ROWS]
    assert probe["proximity"] == expected  # dyadic rationals: float64 dot products are exact


def test_wheel_holds_every_module_of_the_source_tree(venv):
    package = venv / SITE / "posenc"
    source = REPO / "python" / "posenc"
    installed = {p.relative_to(package) for p in package.rglob("*.py")}
    expected = {p.relative_to(source) for p in source.rglob("*.py") if "__pycache__" not in p.parts}
    assert installed == expected
    assert os.access(package / "_bin" / "posenc", os.X_OK)


def test_installed_cli_finds_the_libraries_beside_it(venv):
    cli = venv / SITE / "posenc" / "_bin" / "posenc"
    dynamic = subprocess.run(["readelf", "-d", str(cli)], capture_output=True, text=True, check=True,
                             env=dict(os.environ, LC_ALL="C")).stdout
    assert re.findall(r"\((?:RUNPATH|RPATH)\).*\[(.*)\]", dynamic) == ["$ORIGIN/../_lib"]
    resolved = subprocess.run(["ldd", str(cli)], capture_output=True, text=True, check=True).stdout
    ours = dict(re.findall(r"^\s*(libposenc\S*) => (\S+)", resolved, re.MULTILINE))
    assert set(ours) == {"libposenc_nn.so", "libposenc_training.so", "libposenc_analysis_torch.so"}
    for name, path in ours.items():
        assert Path(path).resolve() == (venv / SITE / "posenc" / "_lib" / name).resolve()


def build_cli(*args):
    return subprocess.run([BUILD_CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [["--version"], ["encodings"], ["table", "--no-such-option"]],
                         ids=["version", "encodings", "bad-option"])
def test_python_m_posenc_is_the_cli(venv, args):
    result = run_in(venv, "-m", "posenc", *args)
    expected = build_cli(*args)
    assert (result.returncode, result.stdout, result.stderr) == (expected.returncode, expected.stdout,
                                                                 expected.stderr)
    if args == ["--version"]:
        assert result.stdout.startswith(f"posenc {cmake_version()},")
    if args == ["table", "--no-such-option"]:
        assert result.returncode == 2


def test_console_script_is_the_cli(venv):
    result = subprocess.run([str(venv / "bin" / "posenc"), "--version"], env=clean_environment(),
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, build_cli("--version").stdout)


# ---------------------------------------------------------------- the backend on its own


def test_wheel_record_lists_every_file_with_its_hash(tmp_path):
    name = backend.build_wheel(str(tmp_path), {"build-dir": str(BUILD_DIR)})
    version = cmake_version()
    assert name == f"posenc-{version}-py3-none-linux_x86_64.whl"
    dist_info = f"posenc-{version}.dist-info"
    with zipfile.ZipFile(tmp_path / name) as wheel:
        names = wheel.namelist()
        record = wheel.read(f"{dist_info}/RECORD").decode().splitlines()
        assert f"{dist_info}/RECORD,," in record
        rows = {path: f"{digest},{size}" for path, digest, size in (line.rsplit(",", 2) for line in record)}
        assert set(rows) == set(names)
        for arcname in names:
            if arcname == f"{dist_info}/RECORD":
                continue
            data = wheel.read(arcname)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert rows[arcname] == f"sha256={digest},{len(data)}", arcname
        assert (wheel.getinfo("posenc/_bin/posenc").external_attr >> 16) & 0o777 == 0o755
        assert (wheel.getinfo("posenc/_bin/posenc-text").external_attr >> 16) & 0o777 == 0o755
        assert "Tag: py3-none-linux_x86_64" in wheel.read(f"{dist_info}/WHEEL").decode().splitlines()
        assert wheel.read(f"{dist_info}/entry_points.txt").decode() == \
            "[console_scripts]\nposenc = posenc.__main__:main\n"
        assert wheel.read("posenc/_version.py").decode().endswith(f'\n__version__ = "{version}"\n')


def test_build_dir_comes_from_the_setting_then_the_environment():
    assert backend.requested_build_dir({}, {}) is None
    assert backend.requested_build_dir({"build-dir": "b"}, {}) == REPO / "b"  # relative to the source tree
    assert backend.requested_build_dir({}, {"POSENC_BUILD_DIR": "/x/y"}) == Path("/x/y")
    assert backend.requested_build_dir({"build-dir": "/a"}, {"POSENC_BUILD_DIR": "/x/y"}) == Path("/a")


def test_build_from_scratch_configures_release_without_tests(tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(backend, "_run", lambda command, what: commands.append([str(part) for part in command]))
    monkeypatch.setattr(backend, "check_torch", lambda build_dir, torch: None)
    monkeypatch.setattr(backend.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setenv("CMAKE_BUILD_PARALLEL_LEVEL", "3")
    torch = {"version": "1.13.0", "file": "/t/torch/__init__.py", "cmake_prefix_path": str(tmp_path / "none")}
    backend.build_from_scratch(tmp_path / "b", torch, {"cmake-args": "-DPOSENC_NATIVE=OFF -DX='a b'"})
    assert commands == [
        ["/usr/bin/cmake", "-S", str(REPO), "-B", str(tmp_path / "b"), "-DCMAKE_BUILD_TYPE=Release",
         "-DPOSENC_BUILD_NN=ON", "-DPOSENC_BUILD_TESTS=OFF", "-DPOSENC_BUILD_BENCH=OFF", "-G", "Ninja",
         "-DPOSENC_NATIVE=OFF", "-DX=a b"],
        ["/usr/bin/cmake", "--build", str(tmp_path / "b"), "--target", "posenc_nn", "posenc_analysis_torch",
         "posenc", "posenc-text"],
    ]
    # A pip-installed torch brings its own CMake config, which then comes first.
    (tmp_path / "share" / "Torch").mkdir(parents=True)
    (tmp_path / "share" / "Torch" / "TorchConfig.cmake").write_text("")
    commands.clear()
    backend.build_from_scratch(tmp_path / "b", {**torch, "cmake_prefix_path": str(tmp_path / "share")}, None)
    assert f"-DCMAKE_PREFIX_PATH={tmp_path / 'share'}" in commands[0]


def fake_build(tmp_path, home=REPO, torch_version=None):
    """A directory with a CMakeCache.txt naming home and, with torch_version, a libtorch of that version."""
    build = tmp_path / "build"
    build.mkdir()
    lines = [f"CMAKE_HOME_DIRECTORY:INTERNAL={home}", "POSENC_BUILD_NN:BOOL=ON"]
    if torch_version:
        torch_dir = tmp_path / "libtorch"
        torch_dir.mkdir()
        (torch_dir / "TorchConfigVersion.cmake").write_text(f'set(PACKAGE_VERSION "{torch_version}")\n')
        lines.append(f"Torch_DIR:PATH={torch_dir}")
    (build / "CMakeCache.txt").write_text("\n".join(lines) + "\n")
    return build


def test_refuses_a_directory_that_is_not_a_build(tmp_path):
    with pytest.raises(backend.BuildError) as error:
        backend.check_build_dir(tmp_path)
    assert str(error.value) == ("[build-dir] must be a CMake build directory of posenc (with CMakeCache.txt), "
                                f"got {tmp_path}")


def test_refuses_a_build_of_another_tree(tmp_path):
    build = fake_build(tmp_path, home="/elsewhere/posenc")
    with pytest.raises(backend.BuildError) as error:
        backend.check_build_dir(build)
    assert str(error.value) == (f"[build-dir] must be a build of this source tree {REPO}, got a build of "
                                f"/elsewhere/posenc ({build})")


def test_refuses_a_build_without_the_targets(tmp_path):
    build = fake_build(tmp_path)
    (build / "lib").mkdir()
    (build / "lib" / "libposenc_nn.so").write_bytes(b"")
    with pytest.raises(backend.BuildError) as error:
        backend.check_build_dir(build)
    assert str(error.value) == (
        "[build-dir] must contain the built lib/libposenc_nn.so, lib/libposenc_analysis_torch.so, bin/posenc, "
        f"bin/posenc-text, got no lib/libposenc_analysis_torch.so, bin/posenc, bin/posenc-text in {build} "
        f"(cmake --build {build} --target posenc_nn posenc_analysis_torch posenc posenc-text)")


def test_refuses_a_libtorch_of_another_version(tmp_path):
    build = fake_build(tmp_path, torch_version="9.9.9")
    torch = {"version": "1.13.0a0+gitunknown", "file": "/usr/lib/python3/dist-packages/torch/__init__.py"}
    with pytest.raises(backend.BuildError) as error:
        backend.check_torch(build, torch)
    assert str(error.value) == (
        "[torch] the libtorch CMake found must be the version of the torch that pip's interpreter imports "
        f"(1.13.0a0+gitunknown, /usr/lib/python3/dist-packages/torch/__init__.py), got 9.9.9 "
        f"({tmp_path / 'libtorch' / 'TorchConfigVersion.cmake'})")
    # Pre-release and local parts aside, the same release is the same libtorch (Debian: 1.13.0a0 and 1.13.0).
    backend.check_torch(build, {**torch, "version": "9.9.9a0+gitunknown"})


def test_refuses_an_interpreter_without_torch(tmp_path, monkeypatch):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    with pytest.raises(backend.BuildError) as error:
        backend.host_torch(python)
    assert str(error.value) == (
        f"[torch] must be importable by {python}, the interpreter running pip, got ModuleNotFoundError: "
        "No module named 'torch'; Debian's python3-torch is importable by /usr/bin/python3: make the virtual "
        "environment with /usr/bin/python3 -m venv --system-site-packages")
    # pip asks for the metadata before it resolves the torch dependency: the refusal comes first.
    monkeypatch.setattr(backend.sys, "executable", python)
    with pytest.raises(backend.BuildError, match=r"^\[torch\] must be importable by "):
        backend.prepare_metadata_for_build_wheel(str(tmp_path / "metadata"))
    assert not (tmp_path / "metadata").exists()


# ---------------------------------------------------------------- the source tree


def test_source_tree_version_is_cmakes():
    import posenc
    assert posenc.__version__ == cmake_version()


def test_python_m_posenc_in_the_source_tree(tmp_path):
    environ = dict(os.environ, PYTHONPATH=str(REPO / "python"), POSENC_CLI=BUILD_CLI)
    result = subprocess.run([sys.executable, "-m", "posenc", "--version"], env=environ, cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, build_cli("--version").stdout)
    missing = tmp_path / "nowhere" / "posenc"
    result = subprocess.run([sys.executable, "-m", "posenc", "--version"], cwd=str(tmp_path),
                            env=dict(environ, POSENC_CLI=str(missing)), capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"posenc: the command-line tool posenc was not found; tried {missing}. "
                             "Build it (cmake --build build --target posenc) or set POSENC_CLI to its path.\n")


def test_package_directories_come_before_the_build_tree(tmp_path, monkeypatch):
    from posenc import __main__ as cli, _library
    monkeypatch.delenv("POSENC_LIBRARY", raising=False)
    monkeypatch.delenv("POSENC_CLI", raising=False)
    monkeypatch.setattr(_library, "PACKAGE_LIBRARY_DIR", tmp_path)
    monkeypatch.setattr(cli, "PACKAGE_BIN_DIR", tmp_path)
    assert _library.candidate_paths() == [tmp_path / "libposenc_nn.so", REPO / "build" / "lib" / "libposenc_nn.so"]
    assert cli.candidate_paths() == [tmp_path / "posenc", REPO / "build" / "bin" / "posenc"]
    monkeypatch.setenv("POSENC_CLI", "/some/where/posenc")
    assert cli.candidate_paths() == [Path("/some/where/posenc")]
