"""KPI declaration and records.

A suite declares its KPIs in ``kpis.py`` as small functions named after the KPI::

    from pytest_topsail.kpi import kpi

    @kpi(unit="tokens/s", help="Training throughput", higher_better=True, format="{:.1f}")
    def train_tokens_per_second(results):
        return results["train_tokens_per_second"]

and may declare ``class Labels(pydantic.BaseModel)`` to validate the labels of its KPIs.
A test records values through the ``kpis`` fixture (a :class:`KpiRecorder`).

A KPI measured once where it happens — per worker (a deployed model's load time) or per run — is declared with
``scope="worker"`` or ``scope="run"``: its labels are the ones naming that worker (``kpis.scope("worker", ...)``)
plus the cluster facts, never the item's case settings, and it is judged, stored and shown once per run and scope
key however many items record it.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic

from pytest_topsail.errors import TopsailError
from pytest_topsail.redact import redact
from pytest_topsail.settings import load_module, validate

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

KPI_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
SCOPES = ("item", "worker", "run")  # where a KPI is measured: once per test item, per deployed worker, per run
LABEL_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class KpiSpec:
    """What a KPI is: unit, help text, direction, and how to show it."""

    name: str
    unit: str
    help: str
    higher_better: bool
    ignored_for_regression: bool = False
    format: str = "{}"
    function: Callable[..., Any] | None = None
    scope: str = "item"  # one of SCOPES
    why: str = ""  # why the KPI is informational (ignored_for_regression), shown in its verdict row
    samples: Callable[..., Any] | None = None  # a tail statistic or a rate: samples(data) -> its sample size
    min_samples: float | None = None  # judged from this sample size on (default regression.TAIL_MIN_SAMPLES)
    machine_bound: bool = False  # measured on this machine's clock around its own work: CPU contention moves it
    untrusted: Callable[..., Any] | None = None  # untrusted(data) -> why the data's value cannot be trusted, or None

    def render(self, value: float) -> str:
        return format_value(value, self.format)


def format_value(value: float | None, fmt: str | None) -> str:
    if value is None:
        return ""
    try:
        return (fmt or "{}").format(value)
    except (ValueError, TypeError):
        return str(value)


def kpi(
    *,
    unit: str,
    help: str,
    higher_better: bool = False,
    lower_better: bool = False,
    ignored_for_regression: bool = False,
    format: str = "{}",
    scope: str = "item",
    why: str = "",
    samples: Callable[..., Any] | None = None,
    min_samples: float | None = None,
    machine_bound: bool = False,
    untrusted: Callable[..., Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated function as a KPI named after it (exactly one of higher_better/lower_better).

    ``scope``: where it is measured, ``item`` (default), ``worker`` or ``run`` (judged once per scope key);
    ``why``: the reason an ``ignored_for_regression`` KPI is informational, shown in its verdict row;
    ``samples``: for a tail statistic (P95, P99) or a rate, a function of the same data giving the size of the sample
    it was taken from: with fewer than ``min_samples`` (default ``regression.TAIL_MIN_SAMPLES``, 100; for a quantile q
    10 / (1 - q), so that 10 samples lie beyond it: 1,000 for a P99) the value is informational, not judged;
    ``machine_bound``: the value is a time (or rate) this machine's own work makes up (an API round trip on the
    client's clock, no simulated delay in it), so CPU contention moves it: a change is not judged when the machine
    was clearly busier (or quieter) during the test than during every baseline run;
    ``untrusted``: a function of the same data giving why this measurement cannot be trusted (e.g. the load client
    was saturated), or None: the value is then recorded with that reason, its verdict ``ignored``, never judged,
    and it stays out of later baselines."""
    if higher_better == lower_better:
        raise TopsailError(
            f"KPI declared with unit {unit!r}: give exactly one of higher_better=True or lower_better=True")
    if scope not in SCOPES:
        raise TopsailError(f"KPI declared with unit {unit!r}: scope {scope!r} is not one of {', '.join(SCOPES)}")

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        if not KPI_NAME.match(function.__name__):
            raise TopsailError(f"KPI function {function.__name__!r}: name must be a valid metric name")
        function.topsail_kpi = KpiSpec(  # type: ignore[attr-defined]
            name=function.__name__, unit=unit, help=help, higher_better=higher_better,
            ignored_for_regression=ignored_for_regression, format=format, function=function, scope=scope,
            why=why, samples=samples, min_samples=min_samples, machine_bound=machine_bound, untrusted=untrusted,
        )
        return function

    return decorate


@dataclass(frozen=True)
class SuiteKpis:
    """The KPIs and labels model a suite's kpis.py declares."""

    path: Path | None
    specs: dict[str, KpiSpec]
    labels_model: type[pydantic.BaseModel] | None = None
    parse: Callable[[Path], Any] | None = None  # optional parse(artifact_dir) -> data, used by --topsail-replot
    # optional figures(records) -> {title: plotly figure}: figures of the whole suite from its items' records
    figures: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None
    # optional samples(artifact_dir) -> {metric: values}: an item's raw samples of the KPIs named
    # <metric>_<statistic>[_<unit>], in the KPIs' unit (python -m pytest_topsail.compare bootstraps them)
    samples: Callable[[Path], dict[str, Any]] | None = None
    # optional compare_figures(runs) -> {title: plotly figure}: figures overlaying runs (python -m
    # pytest_topsail.compare), runs = {run name: its items' records of this suite}
    compare_figures: Callable[[dict[str, list[dict[str, Any]]]], dict[str, Any]] | None = None


def load_suite_kpis(path: Path) -> SuiteKpis:
    """Load ``<suite dir>/kpis.py`` by path (no sys.path changes); a missing file means no declared KPIs."""
    if not path.is_file():
        return SuiteKpis(path=None, specs={})
    module = load_module(path, "topsail_suite_kpis")
    specs = {
        value.topsail_kpi.name: value.topsail_kpi
        for value in vars(module).values()
        if callable(value) and isinstance(getattr(value, "topsail_kpi", None), KpiSpec)
    }
    labels_model = getattr(module, "Labels", None)
    is_model = isinstance(labels_model, type) and issubclass(labels_model, pydantic.BaseModel)
    if labels_model is not None and not is_model:
        raise TopsailError(f"{path}: Labels must be a pydantic BaseModel subclass")
    parse = getattr(module, "parse", None)
    figures = getattr(module, "figures", None)
    samples = getattr(module, "samples", None)
    compare_figures = getattr(module, "compare_figures", None)
    return SuiteKpis(path=path, specs=specs, labels_model=labels_model, parse=parse if callable(parse) else None,
                     figures=figures if callable(figures) else None, samples=samples if callable(samples) else None,
                     compare_figures=compare_figures if callable(compare_figures) else None)


def flatten_labels(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted keys; lists and other non-scalars become their JSON text."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_labels(value, f"{name}."))
        elif isinstance(value, LABEL_SCALARS):
            flat[name] = value
        else:
            flat[name] = json.dumps(value, sort_keys=True, default=str)
    return flat


def validate_labels(labels: dict[str, Any], model: type[pydantic.BaseModel] | None, where: str) -> dict[str, Any]:
    """Validate labels with the suite's Labels model: declared fields are coerced, others kept."""
    if model is None:
        return labels
    validated = validate(model, labels, where, "KPI labels do not match the suite's Labels model")
    return {**labels, **flatten_labels(validated.model_dump(mode="json"))}


class KpiRecorder:
    """The ``kpis`` fixture: records KPI values and figures of one test item into its item record."""

    def __init__(self, record: ItemRecord, suite_kpis: SuiteKpis, test_uuid: str | None = None,
                 hook_labels: Callable[[], dict[str, Any]] | None = None) -> None:
        self.item_record = record
        self.suite_kpis = suite_kpis
        self.test_uuid = test_uuid or str(uuid.uuid4())
        self.extra_labels: dict[str, Any] = {}
        self.scope_labels: dict[str, dict[str, Any]] = {}
        self._hook_labels = hook_labels
        self._hook_labels_value: dict[str, Any] | None = None
        self.excluded: str | None = None

    @property
    def specs(self) -> dict[str, KpiSpec]:
        return self.suite_kpis.specs

    def labels(self, **labels: Any) -> None:
        """Add labels to every KPI recorded after this call."""
        self.extra_labels.update(labels)

    def scope(self, scope: str, **labels: Any) -> None:
        """The labels naming the worker (or run) of the ``scope="worker"`` (``"run"``) KPIs recorded after this
        call, e.g. ``kpis.scope("worker", model=..., config=...)``: those KPIs carry these labels and the cluster
        facts only, so every item sharing the worker records the same KPI, judged once."""
        if scope not in SCOPES[1:]:
            raise TopsailError(f"kpis.scope({scope!r}): the scope is one of {', '.join(SCOPES[1:])}")
        self.scope_labels.setdefault(scope, {}).update(labels)

    def scoped_labels(self, scope: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return redact({**flatten_labels(self._hooks()), **flatten_labels(self.scope_labels.get(scope) or {}),
                       **flatten_labels(extra or {})})

    def _hooks(self) -> dict[str, Any]:
        if self._hook_labels_value is None:
            self._hook_labels_value = self._hook_labels() if self._hook_labels else {}
        return self._hook_labels_value or {}

    def current_labels(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        merged = {
            **flatten_labels(self.item_record.settings),
            **flatten_labels(self._hooks()),
            **flatten_labels(self.item_record.labels),
            **flatten_labels(self.extra_labels),
            **flatten_labels(extra or {}),
        }
        where = str(self.suite_kpis.path or self.item_record.suite)
        return validate_labels(redact(merged), self.suite_kpis.labels_model, where)

    def record(
        self, name: str, value: float, *, unit: str | None = None, help: str | None = None,
        higher_better: bool | None = None, lower_better: bool | None = None,
        ignored_for_regression: bool | None = None, format: str | None = None,
        labels: Mapping[str, Any] | None = None, samples: float | None = None, why: str | None = None,
        untrusted: str | None = None,
    ) -> dict[str, Any]:
        """Record one KPI value; metadata comes from the suite's declaration unless given here (``samples``: the
        sample size of a tail statistic; ``untrusted``: why this measurement cannot be trusted: never judged)."""
        spec = self.specs.get(name)
        if spec is None:
            if unit is None or help is None or (higher_better is None) == (lower_better is None):
                raise TopsailError(
                    f"KPI {name!r} is not declared in {self.suite_kpis.path or 'the suite kpis.py'}: "
                    "declare it there or pass unit=, help= and exactly one of higher_better=True / lower_better=True")
            if not KPI_NAME.match(name):
                raise TopsailError(f"KPI {name!r}: name must be a valid metric name")
            spec = KpiSpec(name=name, unit=unit, help=help, higher_better=bool(higher_better),
                           ignored_for_regression=bool(ignored_for_regression), format=format or "{}")
        if spec.scope != "item" and spec.scope not in self.scope_labels:
            raise TopsailError(
                f"KPI {name!r} is measured per {spec.scope} (scope={spec.scope!r} in {self.suite_kpis.path}): call "
                f"kpis.scope({spec.scope!r}, ...) first with the labels that name the {spec.scope}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TopsailError(f"KPI {name!r}: value {value!r} is not a number") from None
        if math.isnan(number) or math.isinf(number):
            raise TopsailError(f"KPI {name!r}: value {value!r} is not a finite number")
        entry = {
            "name": name,
            "value": number,
            "unit": unit or spec.unit,
            "help": help or spec.help,
            "higher_better": spec.higher_better if higher_better is None and lower_better is None
            else bool(higher_better) if higher_better is not None else not lower_better,
            "ignored_for_regression": spec.ignored_for_regression if ignored_for_regression is None
            else bool(ignored_for_regression),
            "format": format or spec.format,
            "labels": self.current_labels(labels) if spec.scope == "item" else self.scoped_labels(spec.scope, labels),
            "scope": spec.scope,
            "timestamp": time.time(),
            "test_uuid": self.test_uuid,
            "suite": self.item_record.suite,
            "nodeid": self.item_record.nodeid,
            "test_id": self.item_record.test_id,
        }
        if why or spec.why:
            entry["why"] = why or spec.why
        if spec.machine_bound:
            entry["machine_bound"] = True
        if untrusted:
            entry["untrusted"] = untrusted
        if self.excluded:
            entry["excluded"] = self.excluded
        if samples is not None:
            entry["samples"] = float(samples)
            if spec.min_samples:
                entry["min_samples"] = float(spec.min_samples)
        kpis = self.item_record.kpis
        kpis[:] = [k for k in kpis if k["name"] != name]  # recording a KPI again replaces its value
        kpis.append(entry)
        return entry

    def exclude(self, reason: str) -> None:
        """The item's KPIs (recorded so far and later) were measured through a fault (a cluster fault ended its
        server, a worker lost its GPU): kept and shown with `reason`, never judged, never stored in the history."""
        self.excluded = reason
        for entry in self.item_record.kpis:
            entry["excluded"] = reason

    def machine_load(self, load: float | None) -> None:
        """The machine's CPU contention during the test (runnable tasks per CPU, pytest_topsail.contention), kept
        in the item record and on each KPI record: a ``machine_bound`` KPI's verdict takes it into account."""
        if load is None:
            return
        self.item_record.machine_load = load
        for entry in self.item_record.kpis:
            entry["machine_load"] = load

    def record_from(self, data: Any, *, labels: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Run every KPI function of the suite's kpis.py on ``data``; functions returning None are skipped."""
        if not self.specs:
            raise TopsailError(f"record_from: the suite {self.item_record.suite!r} declares no KPI "
                               "(kpis.py missing or without @kpi functions)")
        values: dict[str, float] = {}
        for name, spec in self.specs.items():
            assert spec.function is not None
            try:
                value = spec.function(data)
                samples = spec.samples(data) if spec.samples is not None and value is not None else None
                untrusted = spec.untrusted(data) if spec.untrusted is not None and value is not None else None
            except Exception as error:
                raise TopsailError(f"{self.suite_kpis.path}: KPI function {name}() failed: "
                                   f"{type(error).__name__}: {error}") from None
            if value is None:
                continue
            self.record(name, value, labels=labels, samples=samples, untrusted=untrusted)
            values[name] = float(value)
        return values

    def warn(self, message: str) -> None:
        """A warning about this item's figures (e.g. the load client was saturated): shown in the terminal summary
        and the report's problems, kept in item.json (a replot shows it again); the item does not fail for it."""
        self.item_record.warnings.append(message)

    def add_figure(self, title: str, figure: Any, *, directory: Path | None = None) -> Path:
        """Save a plotly figure (object or dict) as JSON in the item's artifacts; the report embeds it."""
        base = directory or self.item_record.directory
        if base is None:
            raise TopsailError(f"add_figure({title!r}): the item has no artifact directory")
        text = figure.to_json() if hasattr(figure, "to_json") else json.dumps(figure)
        folder = base / "figures"
        folder.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-zA-Z0-9]+", "_", title).strip("_")[:60] or "figure"
        path = folder / f"{len(self.item_record.figures):02d}_{slug}.json"
        path.write_text(text, encoding="utf-8")
        self.item_record.figures.append({"title": title, "path": str(path)})
        return path

    def write_json(self, directory: Path) -> Path:
        """Write this item's KPI records as ``kpis.json``."""
        path = directory / "kpis.json"
        path.write_text(json.dumps(self.item_record.kpis, indent=2, sort_keys=True), encoding="utf-8")
        return path
