"""Builds the `onnxruntime_ep_rivet` wheel from already-built plugin libraries.

    python python/build_wheel.py --version 0.1.0 --lib target/release/librivet_ep.so \
        --probe-lib target/probe/release/librivet_ep.so --readme README.md --out target/wheels

`cargo xtask wheel` runs it after its own builds. The wheel holds no Python extension
module, only a pure-Python package and two plugin libraries, so it is tagged
`py3-none-manylinux_X_Y_x86_64` with X.Y the newest glibc symbol version the libraries
require (read from their ELF version-needs sections). Only the standard library is used.
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

NAME = "onnxruntime-ep-rivet"
PACKAGE = "onnxruntime_ep_rivet"
SUMMARY = "Rivet: a CPU execution provider for ONNX Runtime 1.32, as a plugin library"
REQUIRES = ["onnxruntime>=1.32"]
LICENSE = "MIT OR Apache-2.0"

# Libraries a manylinux wheel may link against without shipping them (PEP 600 / the
# manylinux policies): the C runtime, its companions and the GCC support libraries.
SYSTEM_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libgcc_s.so.1", "libstdc++.so.6", "ld-linux-x86-64.so.2",
}

EM_X86_64 = 62
SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED = 1


def elf_dependencies(path):
    """(machine, needed libraries, {library: [required symbol versions]}) of a 64-bit
    little-endian ELF shared library, from its section headers."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit(f"{path}: not a 64-bit little-endian ELF file")
    (machine,) = struct.unpack_from("<H", data, 0x12)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        sh_type, _flags, _addr, offset, size, link, info = struct.unpack_from("<IQQQQII", data, shoff + i * shentsize + 4)
        sections.append((sh_type, offset, size, link, info))

    def string(table, at):
        start = sections[table][1] + at
        return data[start:data.index(b"\0", start)].decode()

    needed, versions = [], {}
    for sh_type, offset, size, link, info in sections:
        if sh_type == SHT_DYNAMIC:
            for at in range(offset, offset + size, 16):
                tag, value = struct.unpack_from("<qQ", data, at)
                if tag == DT_NEEDED:
                    needed.append(string(link, value))
        elif sh_type == SHT_GNU_VERNEED:
            at = offset
            for _ in range(info):  # sh_info: the number of Verneed entries
                _version, count, file_name, aux, next_need = struct.unpack_from("<HHIII", data, at)
                names, aux_at = [], at + aux
                for _ in range(count):
                    _hash, _flags, _other, name, next_aux = struct.unpack_from("<IHHII", data, aux_at)
                    names.append(string(link, name))
                    aux_at += next_aux
                versions[string(link, file_name)] = names
                at += next_need
    return machine, needed, versions


def platform_tag(libraries):
    """The manylinux tag for the newest GLIBC_x.y any of the libraries requires, and a
    sentence saying where it came from."""
    newest, source = (2, 17), "no GLIBC version needed (manylinux2014 floor)"
    for lib in libraries:
        machine, needed, versions = elf_dependencies(lib)
        if machine != EM_X86_64:
            raise SystemExit(f"{lib}: ELF machine {machine}, not x86_64")
        foreign = sorted(set(needed) - SYSTEM_LIBRARIES)
        if foreign:
            raise SystemExit(f"{lib} links {', '.join(foreign)}, which a manylinux wheel may not assume")
        for file_name, names in versions.items():
            for name in names:
                m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", name)
                if m and (int(m[1]), int(m[2])) > newest:
                    newest = (int(m[1]), int(m[2]))
                    source = f"{name} from {file_name} in {os.path.basename(lib)}"
    return f"manylinux_{newest[0]}_{newest[1]}_x86_64", source


def stripped(lib, workdir, name):
    """A copy of `lib` without debug information (the symbol table stays, for profilers)."""
    out = os.path.join(workdir, name)
    strip = shutil.which("strip")
    if strip:
        subprocess.run([strip, "--strip-debug", "-o", out, lib], check=True)
    else:
        print("build_wheel: `strip` (binutils) not found; the libraries keep their debug information", file=sys.stderr)
        shutil.copyfile(lib, out)
    return out


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def metadata(version, readme):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        f"Summary: {SUMMARY}",
        f"License: {LICENSE}",
        "Requires-Python: >=3.9",
        *(f"Requires-Dist: {r}" for r in REQUIRES),
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + readme


def build(args):
    tag = platform_tag([args.lib, args.probe_lib])
    platform, source = tag
    full_tag = f"py3-none-{platform}"
    dist_info = f"{PACKAGE}-{args.version}.dist-info"
    wheel_name = f"{PACKAGE}-{args.version}-{full_tag}.whl"
    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):  # one wheel, so `pip install target/wheels/*.whl` is unambiguous
        if old.startswith(PACKAGE + "-") and old.endswith(".whl"):
            os.remove(os.path.join(args.out, old))

    with open(args.readme, encoding="utf-8") as f:
        readme = f.read()
    with tempfile.TemporaryDirectory() as work:
        files = []  # (name in the wheel, bytes, executable)
        for entry in sorted(os.listdir(args.package_dir)):
            path = os.path.join(args.package_dir, entry)
            if entry.endswith(".py") and os.path.isfile(path):
                with open(path, "rb") as f:
                    files.append((f"{PACKAGE}/{entry}", f.read(), False))
        for lib, name in [(args.lib, "librivet_ep.so"), (args.probe_lib, "librivet_ep_probe.so")]:
            with open(stripped(lib, work, name), "rb") as f:
                files.append((f"{PACKAGE}/{name}", f.read(), True))
        wheel_file = "\n".join([
            "Wheel-Version: 1.0",
            "Generator: rivet python/build_wheel.py",
            "Root-Is-Purelib: false",
            f"Tag: {full_tag}",
        ]) + "\n"
        files.append((f"{dist_info}/METADATA", metadata(args.version, readme).encode(), False))
        files.append((f"{dist_info}/WHEEL", wheel_file.encode(), False))
        files.append((f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode(), False))
        record = "\n".join([record_line(n, d) for n, d, _ in files] + [f"{dist_info}/RECORD,,"]) + "\n"
        files.append((f"{dist_info}/RECORD", record.encode(), False))

        path = os.path.join(args.out, wheel_name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
            for name, data, executable in files:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (0o100755 if executable else 0o100644) << 16
                z.writestr(info, data)
    size = os.path.getsize(path)
    print(f"{path}: {size / 1e6:.2f} MB, tag {full_tag} ({source})")
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--version", required=True)
    p.add_argument("--lib", required=True, help="the production librivet_ep.so")
    p.add_argument("--probe-lib", required=True, help="the probe build of librivet_ep.so")
    p.add_argument("--readme", required=True, help="the long description (Markdown)")
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--package-dir", default=os.path.join(here, PACKAGE))
    p.add_argument("--out", required=True)
    build(p.parse_args())


if __name__ == "__main__":
    main()
