"""Kubernetes quantities, read by one parser (pytest_topsail/kube/quantity.py) for its two users: the client helpers
(numbers, lenient syntax) and the simulator's API (the apiserver's syntax and words, exact arithmetic)."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes, parse_quantity, read_quantity
from pytest_topsail.sim.registry.defaults import parse_quantity as exact_quantity

PODS = "/api/v1/namespaces/default/pods"


@pytest.mark.parametrize(("text", "decimal", "exact"), [
    ("500m", Decimal("0.5"), Fraction(1, 2)), ("64Gi", Decimal(64 * 2**30), Fraction(64 * 2**30)),
    ("1.5", Decimal("1.5"), Fraction(3, 2)), ("1e3", Decimal(1000), Fraction(1000)), ("5n", Decimal("5e-9"),
                                                                                      Fraction(5, 10**9)),
    (".5k", Decimal(500), Fraction(500)), ("+2E-2", Decimal("0.02"), Fraction(1, 50)), ("1e64", Decimal("1e64"),
                                                                                         Fraction(10**64)),
])
def test_both_forms_of_a_quantity_agree(text: str, decimal: Decimal, exact: Fraction) -> None:
    assert parse_quantity(text) == decimal
    assert exact_quantity(text) == exact
    assert read_quantity(text).canonical


@pytest.mark.parametrize(("value", "millis"), [("1e3m", 1000), (" 250m ", 250), ("250m\n", 250)])
def test_the_client_helpers_take_what_the_apiserver_would_not(value: str, millis: int) -> None:
    assert parse_cpu_millis(value) == millis
    assert exact_quantity(value) is None


def test_the_client_helpers_round_cpu_up_to_millicores() -> None:
    assert parse_cpu_millis("1.0001") == 1001
    assert parse_cpu_millis(2) == 2000


@pytest.mark.parametrize("value", ["1e999999999", "1e-999999999", "9" * 80 + "Ei", "10e64", "lots", "1.2.3", ".",
                                   "1Qi", True])
def test_the_client_helpers_refuse_naming_the_value(value: Any) -> None:
    with pytest.raises(ValueError, match=r"not a Kubernetes quantity: " + repr(value).replace(".", r"\.")):
        parse_memory_bytes(value)
    assert exact_quantity(value) is None


def _pod(name: str, cpu: Any) -> str:
    return json.dumps({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": "1"}}}]}})


@pytest.mark.parametrize(("cpu", "message"), [
    ("1e999999999", "unable to parse quantity's numeric part: exponent beyond 64"),
    ("9" * 80, "unable to parse quantity's numeric part: exponent beyond 64"),
    ("1e3m", "quantities must match the regular expression"),
    (" 1", "quantities must match the regular expression"),
    ("1Qi", "quantities must match the regular expression"),
])
def test_the_simulator_refuses_what_the_apiserver_refuses(api_sim: Any, cpu: str, message: str) -> None:
    response = api_sim.raw("POST", PODS, _pod("bad-quantity", cpu))
    assert response.status_code == 400, response.text
    assert f"spec.containers.resources.requests[cpu]: {message}" in response.json()["message"]


def test_the_simulator_compares_requests_and_limits_exactly(api_sim: Any) -> None:
    assert api_sim.raw("POST", PODS, _pod("at-the-limit", "1000m")).status_code == 201
    over = api_sim.raw("POST", PODS, _pod("over-the-limit", "1000000001n"))
    assert over.status_code == 422, over.text
    assert "must be less than or equal to cpu limit of 1" in over.json()["message"]
