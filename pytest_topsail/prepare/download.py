"""The download pod's program (TOPSAIL's ``storage download_to_pvc``): put one model or dataset on the storage PVC.

    python3 download.py SOURCE DEST_DIR NAME [--sha256 HEX]

SOURCE: ``hf://ORG/REPO`` or ``https://huggingface.co/ORG/REPO`` (every file of the repository, ``hf://datasets/...``
for a dataset; ``$HF_TOKEN`` for gated ones), ``s3://BUCKET/KEY`` (through the ``aws`` CLI of the image), an
``http(s)://`` file, or a path (``file://`` or absolute, as the pod sees it: on the simulator, this machine's).
The result lands in ``DEST_DIR/NAME`` (a file or a directory) with ``DEST_DIR/NAME.sha256sum`` (one ``<sha256>
<path>`` line per file, as ``sha256sum`` writes); with ``--sha256`` a single downloaded file must match it.
Progress lines go to stdout. Exit 0 on success, 1 with one ``download failed: ...`` line otherwise.

Standard library only: the ConfigMap carrying this file runs in any image with a Python 3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20
HF_HOST = "https://huggingface.co"
TIMEOUT_S = 60  # per network read


class DownloadError(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="download.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("dest_dir", type=Path)
    parser.add_argument("name")
    parser.add_argument("--sha256", default=None)
    args = parser.parse_args(argv)
    try:
        download(args.source, args.dest_dir, args.name, args.sha256)
    except (DownloadError, OSError) as error:
        print(f"download failed: {error}", flush=True)
        return 1
    return 0


def download(source: str, dest_dir: Path, name: str, sha256: str | None = None) -> Path:
    """Download `source` into `dest_dir/name` (written aside, then renamed: a failed download leaves nothing)."""
    if "/" in name or name in ("", ".", ".."):
        raise DownloadError(f"name {name!r} is not a plain file name")
    target = dest_dir / name
    dest_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest_dir))
    started = time.monotonic()
    try:
        fetched = fetch(source, staging / name)
        files = list(files_of(fetched))
        if sha256 is not None:
            if fetched.is_dir():
                raise DownloadError("--sha256 checks a single file; the source is a directory")
            actual = file_sha256(fetched)
            if actual != sha256.lower():
                raise DownloadError(f"{source}: sha256 {actual} does not match the expected {sha256}")
        if target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        fetched.rename(target)
        write_checksums(dest_dir, name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    size = sum(path.stat().st_size for path in files_of(target))
    print(f"downloaded {source} -> {target}: {len(files)} file(s), {size} bytes in "
          f"{time.monotonic() - started:.1f}s", flush=True)
    return target


def fetch(source: str, target: Path) -> Path:
    parsed = urllib.parse.urlparse(source)
    if parsed.scheme == "hf" or source.startswith(HF_HOST + "/"):
        repo = source[len("hf://"):] if parsed.scheme == "hf" else source[len(HF_HOST) + 1:]
        return fetch_hf(repo.strip("/"), target)
    if parsed.scheme == "s3":
        return fetch_s3(source, target)
    if parsed.scheme in ("http", "https"):
        fetch_url(source, target)
        return target
    if parsed.scheme in ("", "file"):
        return copy_path(Path(parsed.path if parsed.scheme == "file" else source), target)
    raise DownloadError(f"{source}: unknown scheme {parsed.scheme!r} (hf, https, http, s3, file or a path)")


def copy_path(path: Path, target: Path) -> Path:
    if not path.is_absolute():
        raise DownloadError(f"{path}: a local source is an absolute path")
    if path.is_dir():
        shutil.copytree(path, target)
    elif path.is_file():
        copy_stream(path.open("rb"), target, path.stat().st_size, str(path))
    else:
        raise DownloadError(f"{path}: no such file or directory")
    return target


def fetch_url(url: str, target: Path, headers: dict[str, str] | None = None) -> None:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)  # noqa: S310 - the user's own source
    except OSError as error:
        raise DownloadError(f"{url}: {error}") from None
    with response:
        size = int(response.headers.get("Content-Length") or 0)
        copy_stream(response, target, size, url)


def copy_stream(stream: object, target: Path, size: int, what: str) -> None:
    """Copy with a progress line every 5 s and at the end."""
    target.parent.mkdir(parents=True, exist_ok=True)
    done, last = 0, time.monotonic()
    with stream, target.open("wb") as out:  # type: ignore[attr-defined]
        while chunk := stream.read(CHUNK):  # type: ignore[attr-defined]
            out.write(chunk)
            done += len(chunk)
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                print(f"{what}: {progress(done, size)}", flush=True)
    print(f"{what}: {progress(done, size)}", flush=True)


def progress(done: int, size: int) -> str:
    return f"{done} of {size} bytes ({100 * done / size:.0f}%)" if size else f"{done} bytes"


def fetch_hf(repo: str, target: Path) -> Path:
    """Every file of a Hugging Face repository (``datasets/ORG/NAME`` for a dataset), at its main revision."""
    kind, _, repo_id = repo.partition("/") if repo.startswith("datasets/") else ("models", "", repo)
    headers = {"Authorization": f"Bearer {os.environ['HF_TOKEN']}"} if os.environ.get("HF_TOKEN") else {}
    listing = target.parent / ".listing.json"
    fetch_url(f"{HF_HOST}/api/{kind}/{repo_id}", listing, headers)
    try:
        files = [entry["rfilename"] for entry in json.loads(listing.read_text(encoding="utf-8"))["siblings"]]
    except (ValueError, KeyError, TypeError) as error:
        raise DownloadError(f"hf://{repo}: unexpected repository listing ({error})") from None
    prefix = f"{HF_HOST}/{'datasets/' if kind == 'datasets' else ''}{repo_id}/resolve/main/"
    for name in files:
        fetch_url(prefix + urllib.parse.quote(name), target / name, headers)
    return target


def fetch_s3(source: str, target: Path) -> Path:
    aws = shutil.which("aws")
    if aws is None:
        raise DownloadError(f"{source}: s3:// needs the aws CLI in the download image (storage.image)")
    command = [aws, "s3", "cp", "--recursive", source, str(target)] if source.endswith("/") else \
        [aws, "s3", "cp", source, str(target)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=24 * 3600, check=False)
    if result.returncode != 0:
        raise DownloadError(f"{source}: aws s3 cp exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return target


def files_of(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())
    elif path.is_file():
        yield path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksums(dest_dir: Path, name: str, target: Path) -> None:
    lines = [f"{file_sha256(path)}  {path.relative_to(dest_dir)}" for path in files_of(target)]
    (dest_dir / f"{name}.sha256sum").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
