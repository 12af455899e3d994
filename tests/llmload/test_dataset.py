from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.dataset import BUNDLED, Prompt, load_dataset


def test_bundled_dataset_loads() -> None:
    prompts = load_dataset(BUNDLED)
    assert len(prompts) == 64
    assert all(p.output_tokens >= 16 and len(p.text.split()) == p.input_tokens for p in prompts)


def test_llm_load_test_format_with_metadata_line(tmp_path: Path) -> None:
    path = tmp_path / "profile.jsonl"
    lines = [{"name": "synthetic-data", "version": "0.1.1", "dataset_info": {"n": 2}},
             {"index": 0, "question": "why?", "tok_input_length": 12, "tok_output_length": 30, "system_prompt": "",
              "output_tokens": 30},
             {"index": 1, "question": "how?", "tok_input_length": 7, "output_tokens": 5, "system_prompt": "be brief"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert load_dataset(path) == [Prompt("why?", 12, 30), Prompt("how?", 7, 5, "be brief")]


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", ":2: not JSON"),
    ('{"prompt": "x", "input_tokens": 3}', ":2: needs one of output_tokens, tok_output_length"),
    ('{"prompt": "x", "input_tokens": 3, "output_tokens": 0}', ":2: output_tokens must be >= 1"),
    ('{"prompt": 5, "input_tokens": 3, "output_tokens": 2}', ":2: needs a string 'prompt'"),
    ('{"prompt": "x", "input_tokens": "3", "output_tokens": 2}', ":2: input_tokens must be a non-negative integer"),
])
def test_bad_line_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok", "input_tokens": 1, "output_tokens": 1}\n' + line + "\n")
    with pytest.raises(TopsailError, match=f"dataset {path}{message}"):
        load_dataset(path)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(TopsailError, match="cannot be read"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TopsailError, match="holds no prompt"):
        load_dataset(tmp_path / "empty.jsonl")


def test_latin1_dataset_is_one_error_naming_file_line_and_encoding(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "why?", "output_tokens": 3}\n{"prompt": "caf\u00e9?", "output_tokens": 3}\n'
                     .encode("latin-1"))
    with pytest.raises(TopsailError, match=r"dataset .*latin1.jsonl:2: not UTF-8 text \(invalid continuation byte: "
                                           r"byte 0xe9 at offset 54\); save it as UTF-8"):
        load_dataset(path)
