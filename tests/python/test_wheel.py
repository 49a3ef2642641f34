"""The wheel `cargo xtask wheel` builds: its name, tag and metadata, a warning-free
`pip install` into a fresh venv beside the pinned onnxruntime (from the local wheelhouse,
nothing downloaded), the issue's one-liner and the README's Python snippet run there."""
import base64
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "onnxruntime_ep_rivet"
ONE_LINER = (
    "import onnxruntime as ort, onnxruntime_ep_rivet as r; "
    "ort.register_execution_provider_library('rivet', r.get_library_path()); "
    "print([d.ep_name for d in ort.get_ep_devices()])"
)


def wheel_path():
    if "RIVET_WHEEL" in os.environ:
        return pathlib.Path(os.environ["RIVET_WHEEL"]).resolve()  # pip runs elsewhere
    found = sorted((ROOT / "target/wheels").glob(f"{PACKAGE}-*.whl"))
    assert len(found) == 1, f"expected one wheel in target/wheels, found {found}: run `cargo xtask wheel`"
    return found[0]


def pinned(*names):
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m and m[1] in names:
            pins[m[1]] = line.strip()
    assert set(pins) == set(names), f"requirements.txt pins {sorted(pins)}, expected {names}"
    return [pins[n] for n in names]


def readme_python_snippet():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- python-snippet -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README has no python block after <!-- python-snippet -->"
    return m.group(1)


def isolated_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv with the wheel, onnxruntime==1.32.0 and the snippet's onnx and numpy,
    installed with --no-index from the wheelhouse `cargo xtask setup` keeps."""
    wheelhouse = pathlib.Path(os.environ.get("RIVET_WHEELHOUSE", ROOT / ".venv/wheelhouse"))
    assert wheelhouse.is_dir(), f"{wheelhouse} is missing: run `cargo xtask setup`"
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, env=isolated_env())
    python = base / "venv/bin/python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
         "--find-links", str(wheelhouse), str(wheel_path()), *pinned("onnxruntime", "onnx", "numpy")],
        cwd=base, capture_output=True, text=True, env=isolated_env(), timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return python, base, install


def run_in(venv, code):
    python, cwd, _ = venv
    out = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, env=isolated_env(), timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_wheel_name_tag_and_contents():
    wheel = wheel_path()
    m = re.fullmatch(rf"{PACKAGE}-(\d+\.\d+\.\d+)-py3-none-(manylinux_(\d+)_(\d+)_x86_64)\.whl", wheel.name)
    assert m, f"unexpected wheel name {wheel.name}"
    version, platform = m[1], m[2]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        libs = {f"{PACKAGE}/librivet_ep.so", f"{PACKAGE}/librivet_ep_probe.so"}
        assert libs <= names, f"the wheel lacks {sorted(libs - names)}"
        assert not [n for n in names - libs if n.endswith(".so") or ".so." in n], "a library the package does not use"
        assert f"{PACKAGE}/__init__.py" in names
        # The tag is the newest glibc symbol version either library references (the
        # version names sit in .dynstr; the builder reads them from .gnu.version_r).
        newest = max(
            (int(a), int(b))
            for lib in libs
            for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", z.read(lib))
        )
        assert platform == f"manylinux_{newest[0]}_{newest[1]}_x86_64", (platform, newest)
        dist_info = f"{PACKAGE}-{version}.dist-info"
        wheel_meta = z.read(f"{dist_info}/WHEEL").decode()
        assert f"Tag: py3-none-{platform}\n" in wheel_meta and "Root-Is-Purelib: false" in wheel_meta
        meta, _, description = z.read(f"{dist_info}/METADATA").decode().partition("\n\n")
        # RECORD lists every other file with its sha256 and size (PEP 376/427).
        record = {}
        for row in z.read(f"{dist_info}/RECORD").decode().splitlines():
            name, digest, size = row.rsplit(",", 2)
            record[name] = (digest, size)
        assert set(record) == names, sorted(set(record) ^ names)
        for name, (digest, size) in record.items():
            if name != f"{dist_info}/RECORD":
                data = z.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, size) == (f"sha256={want}", str(len(data))), name
    assert "Name: onnxruntime-ep-rivet\n" in meta + "\n"
    assert "Requires-Dist: onnxruntime>=1.32" in meta.splitlines()
    assert description == (ROOT / "README.md").read_text()


def test_pip_install_is_clean(venv):
    python, _, install = venv
    output = install.stdout + install.stderr
    assert not re.search(r"warning|deprecat|error", output, re.I), output
    check = subprocess.run([str(python), "-m", "pip", "check", "--disable-pip-version-check"],
                           capture_output=True, text=True, env=isolated_env())
    assert check.returncode == 0, check.stdout + check.stderr


def test_issue_one_liner_lists_rivet(venv):
    out = run_in(venv, ONE_LINER)
    assert "'Rivet'" in out, out
    assert "site-packages" in run_in(venv, "import onnxruntime_ep_rivet as r; print(r.get_library_path())")


def test_readme_snippet_runs_through_the_package(venv):
    out = run_in(venv, readme_python_snippet())
    m = re.search(r"max \|rivet - numpy\| (\S+)", out)
    assert m and float(m[1]) < 1e-5, out


def test_probe_build_is_selectable_and_runs(venv):
    out = run_in(venv, """
import ctypes
import onnxruntime as ort, onnxruntime_ep_rivet as r
assert r.get_ep_name() == "Rivet"
assert r.get_library_path(probe=True) != r.get_library_path()
assert hasattr(ctypes.CDLL(r.get_library_path(probe=True)), "rivet_probe_snapshot")
assert not hasattr(ctypes.CDLL(r.get_library_path()), "rivet_probe_snapshot")
devices = r.register(ort, name="rivet_probe", probe=True)
print(len(devices), "probe device(s)")
""")
    assert re.search(r"^[1-9]\d* probe device\(s\)$", out, re.M), out
