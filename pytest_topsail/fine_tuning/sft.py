"""A plain TRL SFT trainer driven by fms-hf-tuning's configuration JSON (the default path of the real-trainer
preset; fms-hf-tuning's own `tuning.sft_trainer` is used instead where it installs).

Run once per rank (torchrun sets RANK/WORLD_SIZE). Reads the JSON named by SFT_TRAINER_CONFIG_JSON_PATH as
fms-hf-tuning does: training arguments are parsed with extra keys allowed (a key this transformers version does not
know is ignored), `peft_method: lora` with r/lora_alpha/lora_dropout/target_modules adds a LoRA adapter, and
`data_formatter_template` (`{{field}}` placeholders) builds each sample's text; without it the text is the sample's
`input` and `output`, as fms-hf-tuning trains without a template. On an error, the exception's last line goes to the
termination log (TERMINATION_LOG_FILE, default /dev/termination-log) and the exit code is 1.
On CPU, rank 0 prints the matmul peak it measured in the trainer's dtype before training (the MFU's peak,
pytest_topsail/fine_tuning/efficiency.py).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from pytest_topsail.fine_tuning.catalog import render_template

MODEL_KEYS = ("model_name_or_path", "training_data_path", "peft_method", "r", "lora_alpha", "lora_dropout",
              "target_modules", "data_formatter_template", "response_template", "torch_dtype", "use_flash_attn",
              "max_seq_length")


def sample_text(sample: dict[str, Any], config: dict[str, Any]) -> str:
    template = config.get("data_formatter_template")
    if template:
        return render_template(template, sample)
    return f"{sample.get('input') or ''} {sample.get('output') or ''}".strip()


def train(config: dict[str, Any]) -> None:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
    from trl import SFTConfig, SFTTrainer

    arguments = {k: v for k, v in config.items() if k not in MODEL_KEYS}
    arguments.setdefault("report_to", "none")
    arguments.update(max_length=config.get("max_seq_length", 1024), dataset_text_field="text")
    (args,) = HfArgumentParser(SFTConfig).parse_dict(arguments, allow_extra_keys=True)  # type: ignore[arg-type]
    path = config["model_name_or_path"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = getattr(torch, str(config.get("torch_dtype") or "float32"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    samples = json.loads(Path(config["training_data_path"]).read_text(encoding="utf-8"))
    dataset = Dataset.from_list([{"text": sample_text(s, config)} for s in samples])
    peft = None
    if config.get("peft_method") == "lora":
        peft = LoraConfig(r=int(config.get("r", 8)), lora_alpha=int(config.get("lora_alpha", 16)),
                          lora_dropout=float(config.get("lora_dropout", 0.05)),
                          target_modules=config.get("target_modules"), task_type="CAUSAL_LM")
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=peft)
    if args.process_index == 0:
        print(f"sft: world size {args.world_size}, {len(dataset)} samples", flush=True)
        if args.use_cpu or not torch.cuda.is_available():  # the MFU's peak on CPU: measured here (efficiency.py)
            from pytest_topsail.fine_tuning.efficiency import measure_matmul_peak, peak_line

            name = str(dtype).removeprefix("torch.")
            print(peak_line("cpu", name, measure_matmul_peak(name), torch.get_num_threads()), flush=True)
    trainer.train()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # a rank of a trained point leaves at once: left to the interpreter's exit, its process group's threads
        # aborted it (SIGABRT, "terminate called without an active exception"), and destroy_process_group() could
        # stall under load (a barrier before it stalled more); every collective of the training has returned
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def write_termination_log(message: str) -> None:
    path = Path(os.environ.get("TERMINATION_LOG_FILE", "/dev/termination-log"))
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(message[-4000:] + "\n")
    except OSError:
        pass  # no termination log where this runs: the message is in the log anyway


def main() -> int:
    try:
        config = json.loads(Path(os.environ["SFT_TRAINER_CONFIG_JSON_PATH"]).read_text(encoding="utf-8"))
        train(config)
    except Exception as error:  # noqa: BLE001 - every failure ends as the termination message and exit 1
        traceback.print_exc()
        write_termination_log(f"Exception: {type(error).__name__}: {error}".splitlines()[0])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
