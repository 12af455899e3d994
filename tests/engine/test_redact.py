"""The one redaction rule (pytest_topsail/redact.py) on documents and on free text."""

from __future__ import annotations

import pytest

from pytest_topsail.redact import REDACTED, is_secret_key, redact, redact_text


@pytest.mark.parametrize("key", ["password", "pg_password", "passwd", "pass", "passphrase", "aws_secret_access_key",
                                 "client_secret", "secret_file", "token", "authToken", "bearer-token", "api_key",
                                 "apiKey", "AWS_ACCESS_KEY_ID", "credentials", "credential", "auth", "Authorization",
                                 "client-key-data", "private_key", "key", "cookie"])
def test_secret_names(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_new_tokens", "author", "keep", "comparison_keys", "password_env", "bypass",
                                 "passes", "username", "namespace", 3, None])
def test_names_that_are_not_secret(key: object) -> None:
    assert not is_secret_key(key)


def test_redact_replaces_every_value_under_a_secret_name_numbers_too() -> None:
    data = {"history": {"opensearch": {"password": "hunter2", "password_env": "OS_PASSWORD", "username": "me",
                                       "secret_file": "/etc/os.yaml"}},
            "db": {"pg_password": 12345, "port": 5432, "enabled_auth": True},
            "credentials": {"user": "bob", "pass": "x", "nested": [{"a": 1}]},
            "tests": {"tgis": {"max_new_tokens": 20, "token": "", "api_key": None}},
            "list": [{"client_secret": "s"}], "url": "postgres://bob:pw@db:5432/kpis", "plain": "a@b"}
    assert redact(data) == {
        "history": {"opensearch": {"password": REDACTED, "password_env": "OS_PASSWORD", "username": "me",
                                   "secret_file": REDACTED}},
        "db": {"pg_password": REDACTED, "port": 5432, "enabled_auth": REDACTED},
        "credentials": {"user": REDACTED, "pass": REDACTED, "nested": [{"a": REDACTED}]},
        "tests": {"tgis": {"max_new_tokens": 20, "token": "", "api_key": None}},
        "list": [{"client_secret": REDACTED}], "url": f"postgres://{REDACTED}@db:5432/kpis", "plain": "a@b"}
    assert data["db"]["pg_password"] == 12345  # a copy: the configuration itself is untouched


def test_redact_text_hides_urls_and_authorization_values_only() -> None:
    text = ("GET https://user:hunter2@example.com/x Authorization: Bearer eyJabc.def\n"
            "headers {'authorization': 'token s3cr3tvalue'} curl -H 'Authorization: Basic dXNlcjpwdw=='")
    redacted = redact_text(text)
    for secret in ("hunter2", "eyJabc", "s3cr3tvalue", "dXNlcjpwdw"):
        assert secret not in redacted
    assert "example.com/x" in redacted


@pytest.mark.parametrize("text", [
    "inputTokenCount: expected 7, got 5",
    "case 'Stop sequence 1 token': 3 difference(s) from the reference's answer",
    "responses[0].tokens[2].text: expected ' house', got ' the'",
    "settings {'max_seq_token': 512, 'token': 'x'} token=abc123 api_key: zz9 password = config.get('pw')",
])
def test_redact_text_guesses_nothing_from_names(text: str) -> None:
    assert redact_text(text) == text


def test_known_secret_values_are_hidden_in_text_without_mangling_code() -> None:
    from pytest_topsail.redact import secret_values

    secrets = secret_values({"db": {"pg_password": 987654321, "url": "https://u:pw-in-url@h/x"}, "jobs": 1234})
    assert secrets == {"987654321", "pw-in-url"}
    text = ('    password = config.get("db.pg_password")\n'
            "E   AssertionError: refused 987654321 (from pw-in-url), 1234 jobs")
    assert redact_text(text, secrets) == ('    password = config.get("db.pg_password")\n'
                                          f"E   AssertionError: refused {REDACTED} (from {REDACTED}), 1234 jobs")


def test_redact_object_hides_secret_env_values_and_secret_data_only() -> None:
    from pytest_topsail.redact import redact_object

    pod = {"kind": "Pod", "spec": {"automountServiceAccountToken": False, "containers": [{"env": [
        {"name": "HF_TOKEN", "value": "hf_canary"}, {"name": "MAX_NEW_TOKENS", "value": "1024"},
        {"name": "AWS_SECRET_ACCESS_KEY", "value": "aws-canary"},
        {"name": "STORAGE", "value": "s3://user:url-canary@minio:9000/models"},
        {"name": "API_KEY", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}]}],
        "volumes": [{"name": "creds", "secret": {"secretName": "hub"}}]}}
    clean = redact_object(pod)
    env = clean["spec"]["containers"][0]["env"]
    assert [item.get("value") for item in env] == [REDACTED, "1024", REDACTED, f"s3://{REDACTED}@minio:9000/models",
                                                  None]
    assert env[4] == pod["spec"]["containers"][0]["env"][4]  # a reference, untouched
    assert clean["spec"]["volumes"] == pod["spec"]["volumes"] and clean["spec"]["automountServiceAccountToken"] is False
    assert redact_object({"kind": "Secret", "stringData": {"token": "x"}})["stringData"] == {"token": REDACTED}
    assert pod["spec"]["containers"][0]["env"][0]["value"] == "hf_canary"  # a copy
