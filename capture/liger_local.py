"""Build a local ``kernels`` repository for Liger's GeGLU from the PyPI ``liger-kernel`` package.

Why: ``tracekit capture`` loads Liger through ``kernels.get_kernel("kernels-community/liger-kernels",
version=1)``. A GPU host without network cannot reach the Hub, but ``kernels`` honours
``LOCAL_KERNELS="kernels-community/liger-kernels=/path/to/repo"`` and then imports the kernel from that
folder. This module writes such a folder from the ``liger-kernel`` wheel (or the installed package):
the same ``_geglu_tanh_forward_kernel``, ``LigerGELUMulFunction`` and ``LigerGEGLUMLP`` that the Hub
build ships, packaged as a local kernel and loaded through ``kernels``. It is not the Hub artefact,
and the capture manifest says so.

Usage::

    python -m capture.liger_local --out /tmp/liger-kernels                 # from installed liger-kernel
    python -m capture.liger_local --wheel liger_kernel-0.8.5-py3-none-any.whl --out /tmp/liger-kernels
    LOCAL_KERNELS=kernels-community/liger-kernels=/tmp/liger-kernels HF_HUB_OFFLINE=1 \\
        tracekit capture --variant mlp --mode liger --out traces
    # or: tracekit capture ... --kernel-repo /tmp/liger-kernels

Layout written (``kernels``' local-repository format)::

    OUT/build/<variant>/metadata.json      name, id, version, license, python-depends, backend.type
    OUT/build/<variant>/liger_kernels/...  the package; imported by ``kernels`` under metadata["id"]
    OUT/build/<variant>/PROVENANCE.json    which liger-kernel release (and wheel sha256) it came from

for the noarch variants ``torch-cuda`` (GPU hosts) and ``torch-universal`` (so a CPU-only torch can
load it in tests). ``kernels`` imports the package under ``metadata["id"]``, so every absolute
``liger_kernel.`` import in the copied modules is rewritten to a relative one.

Only stdlib is imported here: building the folder needs neither torch nor triton.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

REPO_ID = "kernels-community/liger-kernels"
KERNEL_NAME = "liger-kernels"
PACKAGE = "liger_kernels"
# Metadata backend.type only accepts concrete backends; the universal (noarch) build declares cpu,
# the backend a CPU-only torch reports, while GPU hosts pick torch-cuda first.
VARIANTS = {"torch-cuda": "cuda", "torch-universal": "cpu"}
UPSTREAM = "https://github.com/linkedin/Liger-Kernel"

# Source modules (inside the liger_kernel package) copied verbatim apart from import rewriting. This
# is the GeGLU closure: the Triton kernels, the autograd Function and the nn.Module wrapper.
_MODULES = ("utils.py", "ops/utils.py", "ops/geglu.py", "transformers/geglu.py")
_LICENSE_FILES = ("LICENSE", "NOTICE")

# Generated glue. ops/__init__ exports only GeGLU: liger's own pulls in ~40 unrelated ops.
_GENERATED = {
    "__init__.py": (
        '"""Liger-Kernel GeGLU packaged as a local kernel (built by tracekit\'s capture.liger_local)."""\n\n'
        "from . import layers\n"
        "from .ops.geglu import LigerGELUMulFunction, geglu_backward, geglu_forward\n\n"
        '__all__ = ["layers", "LigerGELUMulFunction", "geglu_forward", "geglu_backward"]\n'
    ),
    "layers.py": (
        '"""Layers exposed like the Hub build\'s ``layers`` module (version 1: constructors take a config)."""\n\n'
        "from .transformers.geglu import LigerGEGLUMLP\n\n"
        '__all__ = ["LigerGEGLUMLP"]\n'
    ),
    "ops/__init__.py": "from .geglu import LigerGELUMulFunction, geglu_backward, geglu_forward  # noqa: F401\n",
    "transformers/__init__.py": "",
}

_FROM_IMPORT = re.compile(r"^(?P<indent>\s*)from\s+liger_kernel(?P<rest>(\.\w+)*)\s+import\s", re.M)
_PLAIN_IMPORT = re.compile(r"^\s*import\s+liger_kernel\b", re.M)


class BuildError(Exception):
    """The source package is missing, or a module could not be made relocatable."""


def relativize(source: str, module_path: str) -> str:
    """Rewrite ``from liger_kernel.x import y`` in the module at ``module_path`` (e.g. ``ops/geglu.py``)
    into the equivalent relative import, so the package works under any top-level name."""
    if _PLAIN_IMPORT.search(source):
        raise BuildError(f"{module_path}: 'import liger_kernel...' cannot be made relative")
    depth = module_path.count("/")  # packages between the root and this module

    def repl(match: re.Match[str]) -> str:
        target = match.group("rest").lstrip(".")
        return f"{match.group('indent')}from {'.' * (depth + 1)}{target} import "

    out = _FROM_IMPORT.sub(repl, source)
    if re.search(r"\bliger_kernel\.", out):
        raise BuildError(f"{module_path}: an absolute liger_kernel reference is left after rewriting")
    return out


def _reader_from_wheel(wheel: Path) -> tuple[Callable[[str], bytes], str, dict]:
    zf = zipfile.ZipFile(wheel)
    names = set(zf.namelist())
    dist_info = next((n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")), None)
    if dist_info is None:
        raise BuildError(f"{wheel}: not a wheel (no .dist-info)")
    version = dist_info[: -len(".dist-info")].split("-")[-1]

    def read(rel: str) -> bytes:
        for candidate in (f"liger_kernel/{rel}", f"{dist_info}/licenses/{rel}", f"{dist_info}/{rel}"):
            if candidate in names:
                return zf.read(candidate)
        raise FileNotFoundError(rel)

    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return read, version, {"wheel": wheel.name, "wheel_sha256": digest}


def _reader_from_installed() -> tuple[Callable[[str], bytes], str, dict]:
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("liger_kernel")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("liger-kernel is not installed; pass --wheel PATH (pip download liger-kernel==0.8.5)")
    root = Path(next(iter(spec.submodule_search_locations)))
    dist = importlib.metadata.distribution("liger-kernel")

    def read(rel: str) -> bytes:
        path = root / rel
        if path.exists():
            return path.read_bytes()
        for f in dist.files or ():
            if f.name == rel:
                return Path(str(f.locate())).read_bytes()
        raise FileNotFoundError(rel)

    return read, dist.version, {"installed_at": str(root)}


def _metadata(backend_type: str, version: str) -> dict:
    # The id is the module name kernels imports the package under; keep it unique per release.
    return {
        "name": KERNEL_NAME,
        "id": f"_liger_kernels_local_{re.sub(r'[^0-9a-zA-Z]', '_', version)}_{backend_type}",
        "version": 1,
        "license": "BSD-2-Clause",
        "upstream": UPSTREAM,
        "python-depends": [],
        "backend": {"type": backend_type},
    }


def build(out: Path, wheel: Path | None = None) -> dict:
    """Write the local kernel repository to ``out`` (replacing it) and return its provenance record."""
    read, version, origin = _reader_from_wheel(wheel) if wheel else _reader_from_installed()
    provenance = {
        "built_by": "capture.liger_local",
        "repo_id_served": REPO_ID,
        "source": "liger-kernel (PyPI) packaged as a local kernel; not the Hub build",
        "liger_kernel_version": version,
        "modules": list(_MODULES),
        **origin,
    }
    files: dict[str, bytes] = {}
    for rel in _MODULES:
        try:
            files[rel] = relativize(read(rel).decode(), rel).encode()
        except FileNotFoundError:
            raise BuildError(f"liger-kernel {version} has no liger_kernel/{rel}") from None
    for rel, text in _GENERATED.items():
        files[rel] = text.encode()
    for rel in _LICENSE_FILES:
        try:
            files[rel] = read(rel)
        except FileNotFoundError:
            pass

    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and swap it in, so a half-written folder is never loaded.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for variant, backend_type in VARIANTS.items():
            vdir = staging / "build" / variant
            for rel, data in files.items():
                dest = vdir / PACKAGE / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            (vdir / "metadata.json").write_text(json.dumps(_metadata(backend_type, version), indent=2) + "\n")
            (vdir / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return provenance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m capture.liger_local",
        description=f"Build a local kernels repository serving {REPO_ID} from the PyPI liger-kernel package.",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write (replaced if it exists)")
    parser.add_argument("--wheel", type=Path, help="liger_kernel-*.whl to read (default: the installed package)")
    args = parser.parse_args(argv)
    try:
        prov = build(args.out, args.wheel)
    except (BuildError, OSError, zipfile.BadZipFile) as err:
        print(f"liger_local: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} (liger-kernel {prov['liger_kernel_version']}); use it with")
    print(f"  LOCAL_KERNELS={REPO_ID}={args.out.resolve()} HF_HUB_OFFLINE=1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
