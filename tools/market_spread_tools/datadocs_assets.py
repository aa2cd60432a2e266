"""Fetch the Data Docs' CSS and scripts from the npm registry (`npm pack`), so reports render offline.

    .venv/bin/python -m market_spread_tools.datadocs_assets [FOLDER]   # make setup runs it

Keeps only the files the pages load (about 3.3 MB of the 17 MB of packages), each where
market_spread.orchestration.datadocs_assets expects it, and checks the hashes the templates pin.
Returns at once when every file is there.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from market_spread.orchestration.datadocs_assets import ASSETS, FOLDERS, assets_dir, missing


def _wanted(package: str) -> tuple[set[str], tuple[str, ...]]:
    files = {a.path for a in ASSETS if a.package == package}
    folders = tuple(f"{folder}/" for name, folder in FOLDERS if name == package)
    return files, folders


def _check_integrity(path: Path, integrity: str | None) -> None:
    if not integrity:
        return
    algorithm, expected = integrity.split("-", 1)
    digest = base64.b64encode(hashlib.new(algorithm, path.read_bytes()).digest()).decode()
    if digest != expected:
        raise RuntimeError(f"{path}: {algorithm} {digest} is not the template's {expected}")


def _unpack(tarball: Path, package: str, target: Path) -> int:
    """Copy the wanted members of an npm tarball (its files sit under package/) into target."""
    files, folders = _wanted(package)
    count = 0
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            inner = member.name.removeprefix("package/")
            if not member.isfile() or ".." in Path(inner).parts:
                continue
            if inner in files or inner.startswith(folders):
                out = target / package / inner
                out.parent.mkdir(parents=True, exist_ok=True)
                src = archive.extractfile(member)
                assert src is not None  # a regular file (above)
                with src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                count += 1
    return count


def fetch(folder: Path) -> int:
    """Fetch what `folder` lacks; returns the number of files written."""
    todo = missing(folder)
    if not todo:
        return 0
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm not found: install it (apt-get install npm) to fetch the Data Docs' assets")
    packages = sorted({a.package for a in ASSETS if a.local in todo})
    written = 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [npm, "pack", "--silent", "--pack-destination", tmp, *packages],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=600,
        )
        staging = Path(tmp) / "files"
        for package in packages:
            name = package.rsplit("@", 1)[0].lstrip("@").replace("/", "-")
            version = package.rsplit("@", 1)[1]
            written += _unpack(Path(tmp) / f"{name}-{version}.tgz", package, staging)
        for asset in ASSETS:
            _check_integrity(staging / asset.local, asset.integrity)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, folder, dirs_exist_ok=True)
    still = missing(folder)
    if still:
        raise RuntimeError(f"not in the npm packages: {still}")
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]).resolve() if args else assets_dir()
    try:
        written = fetch(folder)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        print(f"error: Data Docs assets: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"Data Docs assets: {folder} ({size / 1e6:.1f} MB{f', {written} files fetched' if written else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
