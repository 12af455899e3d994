"""The real-trainer image's `/app/accelerate_launch.py` on a machine without GPUs: starts the SFT trainer once per
"GPU" with torchrun (gloo on CPU), over every pod of the job (the training operator's PET_* or WORLD_SIZE/RANK).

TOPSAIL_SFT_TRAINER picks the trainer: `trl` (default; pytest_topsail.fine_tuning.sft, plain TRL) or `fms`
(fms-hf-tuning's `tuning.sft_trainer`). Without GPUs the configuration is copied with `use_cpu: true` (a 2-rank CPU
run needs it). The trainer's exit code is this process's; when the trainer left no termination message, the
launcher writes one naming the exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TRAINERS = {"trl": "pytest_topsail.fine_tuning.sft", "fms": "tuning.sft_trainer"}


def torchrun_command(module: str, env: dict[str, str]) -> list[str]:
    nnodes = env.get("PET_NNODES") or env.get("WORLD_SIZE") or "1"
    node_rank = env.get("PET_NODE_RANK") or env.get("RANK") or "0"
    nproc = env.get("PET_NPROC_PER_NODE") or env.get("NUM_GPUS") or "1"
    command = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--node_rank={node_rank}",
               f"--nproc_per_node={nproc}"]
    if nnodes == "1":
        command.append("--standalone")
    else:
        command += [f"--master_addr={env.get('PET_MASTER_ADDR') or env.get('MASTER_ADDR', '127.0.0.1')}",
                    f"--master_port={env.get('PET_MASTER_PORT') or env.get('MASTER_PORT', '29500')}"]
    return [*command, "-m", module]


def cpu_config(path: str) -> str:
    """A copy of the configuration with `use_cpu: true` (in a temporary directory), or `path` where GPUs are (an
    nvidia-smi on the PATH: importing torch only to ask would cost seconds per pod)."""
    if shutil.which("nvidia-smi"):
        return path
    config = json.loads(Path(path).read_text(encoding="utf-8"))
    config["use_cpu"] = True
    copy = Path(tempfile.mkdtemp(prefix="sft-config-")) / "config.json"
    copy.write_text(json.dumps(config), encoding="utf-8")
    return str(copy)


def main() -> int:
    env = dict(os.environ)
    trainer = env.get("TOPSAIL_SFT_TRAINER", "trl")
    if trainer not in TRAINERS:
        print(f"TOPSAIL_SFT_TRAINER={trainer!r}: known trainers are {', '.join(TRAINERS)}", file=sys.stderr)
        return 2
    env["SFT_TRAINER_CONFIG_JSON_PATH"] = cpu_config(env["SFT_TRAINER_CONFIG_JSON_PATH"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    command = torchrun_command(TRAINERS[trainer], env)
    print("launching:", " ".join(command), flush=True)
    code = subprocess.call(command, env=env)
    termination = Path(env.get("TERMINATION_LOG_FILE", "/dev/termination-log"))
    if code and (not termination.exists() or not termination.read_text(errors="replace").strip()):
        try:
            termination.write_text(f"the trainer exited with code {code}\n", encoding="utf-8")
        except OSError:
            pass
    return code


if __name__ == "__main__":
    sys.exit(main())
