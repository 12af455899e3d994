"""Local stand-ins for the storage PVC's content, so a real SFT trainer can run without any download: tiny random
models built from a config (the catalog's shape and family), a byte-level BPE tokenizer trained on the dataset, and
an alpaca-shaped dataset generated from a seed.

`python -m pytest_topsail.fine_tuning.tiny STORAGE_DIR` writes `STORAGE_DIR/model/<safe-name>/` for every catalog
model with `tiny: true` and `STORAGE_DIR/dataset/<name>.json` for every catalog dataset with `generated: true`, laid
out as the PyTorchJob's entrypoint expects them on /mnt/storage. Needs the `real-trainer` extra (torch,
transformers, tokenizers).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from pytest_topsail.fine_tuning.catalog import Catalog, DatasetSpec, ModelSpec, builtin_catalog
from pytest_topsail.fine_tuning.manifests import safe_model_name

VOCAB_SIZE = 600
_WORDS = ("model gpu token train batch loss tensor layer weight learning rate epoch sample data cluster node pod "
          "memory kernel attention vector matrix gradient optimizer step sequence output input answer question "
          "simple small fast slow large value number list word sentence write explain describe give name").split()
_VERBS = ("Explain", "Describe", "List", "Summarize", "Name", "Give", "Write", "Rewrite")


def alpaca_samples(count: int, seed: int = 42) -> list[dict[str, str]]:
    """`count` alpaca-shaped samples (instruction, input, output); about half have an empty input, as alpaca."""
    rng = random.Random(seed)

    def words(low: int, high: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(low, high)))

    return [{"instruction": f"{rng.choice(_VERBS)} {words(3, 9)}.",
             "input": words(4, 14) if rng.random() < 0.5 else "",
             "output": f"{words(6, 24).capitalize()}."} for _ in range(count)]


def build_dataset(storage: Path, name: str, spec: DatasetSpec) -> Path:
    path = storage / "dataset" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(alpaca_samples(spec.samples)), encoding="utf-8")
    return path


def build_tokenizer(texts: list[str], max_length: int) -> Any:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=VOCAB_SIZE, min_frequency=1, special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   model_max_length=max_length)


def _config(spec: ModelSpec, vocab: int, eos: int) -> Any:
    from transformers import BloomConfig, LlamaConfig

    if spec.family == "bloom":
        return BloomConfig(vocab_size=vocab, hidden_size=spec.hidden, n_layer=spec.layers, n_head=spec.heads,
                           bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    if spec.family == "llama":
        return LlamaConfig(vocab_size=vocab, hidden_size=spec.hidden, intermediate_size=2 * spec.hidden,
                           num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
                           num_key_value_heads=spec.heads, max_position_embeddings=spec.max_length,
                           bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    raise ValueError(f"no tiny-model builder for family {spec.family!r} (known: llama, bloom)")


def build_model(storage: Path, name: str, spec: ModelSpec, texts: list[str], seed: int = 0) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    target = storage / "model" / safe_model_name(name)
    tokenizer = build_tokenizer(texts, spec.max_length)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_config(spec, len(tokenizer), tokenizer.eos_token_id))
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    config_path = target / "tokenizer_config.json"  # a class that transformers 4.x and 5.x both load
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")
    return target


def build_storage(storage: Path, catalog: Catalog | None = None) -> list[Path]:
    """Every generated dataset and tiny model of the catalog under `storage` (models/datasets already there kept)."""
    catalog = catalog or builtin_catalog()
    built, texts = [], []
    for name, dataset in catalog.datasets.items():
        if dataset.generated:
            path = storage / "dataset" / f"{name}.json"
            if not path.exists():
                built.append(build_dataset(storage, name, dataset))
            texts += [" ".join(s.values()) for s in json.loads(path.read_text(encoding="utf-8"))]
    texts = texts or [" ".join(s.values()) for s in alpaca_samples(200)]
    for name, model in catalog.models.items():
        if model.tiny and not (storage / "model" / safe_model_name(name) / "config.json").exists():
            built.append(build_model(storage, name, model, texts))
    return built


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pytest_topsail.fine_tuning.tiny STORAGE_DIR", file=sys.stderr)
        return 2
    for path in build_storage(Path(args[0])):
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
