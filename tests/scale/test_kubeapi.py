"""The raw API access: credential refresh throttled, also when the kubeconfig loader re-installs its hook."""

from __future__ import annotations

from kubernetes.client import Configuration

from pytest_topsail.scale.kubeapi import ThrottledRefresh, api_client_for


def test_refresh_runs_once_per_interval_even_when_the_hook_replaces_itself():
    calls = []

    def loader_hook(configuration):
        calls.append(1)
        configuration.refresh_api_key_hook = loader_hook  # what kubernetes.config's _set_config does

    configuration = Configuration()
    configuration.api_key = {"BearerToken": "token"}
    configuration.refresh_api_key_hook = loader_hook
    client = api_client_for(configuration, pool_size=4)
    for _ in range(100):
        client.configuration.auth_settings()
    assert len(calls) == 1
    assert isinstance(client.configuration.refresh_api_key_hook, ThrottledRefresh)
    assert client.configuration.connection_pool_maxsize == 4


def test_refresh_runs_again_after_the_interval():
    calls = []
    throttled = ThrottledRefresh(lambda configuration: calls.append(1), interval_s=0.0)
    configuration = Configuration()
    for _ in range(3):
        throttled(configuration)
    assert len(calls) == 3
