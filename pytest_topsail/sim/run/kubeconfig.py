"""The kubeconfig written for a simulator run: server URL, CA data and bearer token, mode 0600."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

CONTEXT_NAME = "topsail-sim"


def kubeconfig_document(url: str, ca_pem: bytes, token: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": {
            "server": url,
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
        }}],
        "users": [{"name": CONTEXT_NAME, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT_NAME, "context": {
            "cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": "default",
        }}],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }


def check_writable(path: Path) -> str | None:
    """None if a kubeconfig can be written at ``path``, else the reason why not."""
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return "it is a directory"
    if not directory.is_dir():
        return f"directory {directory} does not exist"
    if not os.access(directory, os.W_OK):
        return f"directory {directory} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    return None


def write_kubeconfig(path: Path, url: str, ca_pem: bytes, token: str) -> None:
    """Write atomically (temp file + rename) with mode 0600 so readers never see a partial file."""
    text = yaml.safe_dump(kubeconfig_document(url, ca_pem, token), sort_keys=False)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
