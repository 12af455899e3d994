"""Regenerate the checked-in Python stubs of generation.proto (needs grpcio-tools, a dev dependency).

`python -m pytest_topsail.tgis.protogen` rewrites generation_pb2.py, generation_pb2.pyi and generation_pb2_grpc.py
next to the .proto; `generate(out_dir)` writes them elsewhere so a test can compare them with the checked-in ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_NAME = "pytest_topsail/tgis/generation.proto"
REPO_ROOT = Path(__file__).resolve().parents[2]
STUB_NAMES = ("generation_pb2.py", "generation_pb2.pyi", "generation_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on generation.proto into `out_dir`; the stubs' paths (under out_dir/pytest_topsail/tgis/)."""
    from grpc_tools import protoc  # dev dependency, imported only when regenerating

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{REPO_ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        PROTO_NAME,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_NAME}")
    return [out_dir / "pytest_topsail" / "tgis" / name for name in STUB_NAMES]


def main() -> int:
    for path in generate(REPO_ROOT):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
