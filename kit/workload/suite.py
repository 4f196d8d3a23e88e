"""Microbenchmark workloads and suites: what data to generate, how fast to send it, which queries.

A `Workload` is one experiment point of Table 4.2: the dataset (Table 4.1's stream shape and the
join table), the load (rate profile, rate, duration), the query set, and the swept parameter
values that place the point on its chart. A `Suite` is a named group of workloads (filtering,
count-windows, ...), the unit `cepkit querygen micro --suite` writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.config import LIMITS, MAX_DURATION_S, MAX_RATE_EPS, MAX_ZIPF_ID, MIN_DURATION_S
from kit.profiles import PROFILE_NAMES
from kit.workload.common import as_tuple, identifier, integer, need, number, one_of, slug, xml_text
from kit.workload.queries import QuerySet, check_queries
from kit.workload.query_base import TABLE_NAME

# Table 4.2's metrics column.
METRICS = ("throughput", "memory", "max-latency", "latency-degradation", "recovery-time",
           "post-peak-latency-variation")
# Each Dataset attribute and the `micro` config key it sets (`Workload.micro_settings`): a value
# must lie in the key's range (kit.config.LIMITS), so that a spec the model takes is one datagen
# can generate, and a value beyond is refused at the spec's line, not later without the file.
MIN_RATE_EPS = LIMITS["RateConfig"]["basis_rate_eps"][0]
_CONFIG_KEYS = {"streams": "streams", "attributes": "attributes", "maxId": "max_id", "tableRows": "table_rows",
                "tableAttributes": "table_attributes", "zipfS": "zipf_s", "seed": "seed"}


@dataclass(frozen=True)
class Dataset:
    """Input data of a workload; maps one-to-one onto the `micro` config section of datagen."""

    streams: int = 1
    attributes: int = 4
    max_id: int = 1000
    table_rows: int = 0
    table_attributes: int = 9
    zipf_s: float = 0.0
    seed: int = 7

    def __post_init__(self) -> None:
        integer("streams", self.streams, 1)
        integer("attributes", self.attributes, 1)
        integer("maxId", self.max_id, 1)
        integer("tableRows", self.table_rows, 0)
        integer("tableAttributes", self.table_attributes, 1)
        number("zipfS", self.zipf_s)
        need(self.zipf_s >= 0, f"zipfS must be >= 0, got {self.zipf_s}")
        integer("seed", self.seed, 0)
        need(self.zipf_s == 0 or self.max_id <= MAX_ZIPF_ID,
             f"maxId must be <= {MAX_ZIPF_ID} with zipfS > 0 (the config's micro.max_id), got {self.max_id}")
        for attr, key in _CONFIG_KEYS.items():       # the fields are named as the config's keys
            value, high = getattr(self, key), LIMITS["MicroConfig"][key][1]
            shown = int(high) if float(high).is_integer() else high
            need(value <= high, f"{attr} must be <= {shown}, got {value}")

    @property
    def stream_names(self) -> tuple[str, ...]:
        return tuple(f"S{i}" for i in range(1, self.streams + 1))

    def stream_fields(self, stream: str) -> tuple[str, ...] | None:
        if stream not in self.stream_names:
            return None
        return ("ID", *(f"A{i}" for i in range(1, self.attributes + 1)), "TS")

    def table_fields(self, table: str) -> tuple[str, ...] | None:
        if table != TABLE_NAME or self.table_rows == 0:
            return None
        return ("ID", *(f"T{i}" for i in range(1, self.table_attributes + 1)))


@dataclass(frozen=True)
class Load:
    """How the data is sent: a rate profile of `kit.profiles` at `rate_eps` (the profile's basis
    rate, lambda for `adaptivity`), over `duration_ms` (None: the profile's own length)."""

    profile: str
    rate_eps: float
    duration_ms: int | None = None

    def __post_init__(self) -> None:
        one_of("profile", self.profile, PROFILE_NAMES)
        number("rateEps", self.rate_eps)
        # The same bounds as a config's rates and durations (kit.config), so a spec cannot start
        # an unbounded generation either.
        need(self.rate_eps > 0, f"rateEps must be > 0, got {self.rate_eps}")
        need(self.rate_eps >= MIN_RATE_EPS, f"rateEps must be >= {MIN_RATE_EPS} (the config's micro.rate.basis_rate_eps), "
                                            f"got {self.rate_eps}")
        need(self.rate_eps <= MAX_RATE_EPS, f"rateEps must be <= {MAX_RATE_EPS:.0e}, got {self.rate_eps}")
        if self.duration_ms is not None:
            integer("durationMs", self.duration_ms, 1)
            need(self.duration_ms >= MIN_DURATION_S * 1000,
                 f"durationMs must be >= {MIN_DURATION_S * 1000:g} (the config's micro.rate.duration_s), "
                 f"got {self.duration_ms}")
            need(self.duration_ms <= MAX_DURATION_S * 1000,
                 f"durationMs must be <= {MAX_DURATION_S * 1000} (30 days), got {self.duration_ms}")


@dataclass(frozen=True)
class Param:
    """A swept factor's value at this point, e.g. selectivity = 0.05 (for reports and charts)."""

    name: str
    value: str

    def __post_init__(self) -> None:
        identifier("name", self.name)
        need(isinstance(self.value, str) and bool(self.value), f"Param {self.name} needs a value")
        xml_text(f"Param {self.name}", self.value)


@dataclass(frozen=True)
class Workload:
    name: str
    experiment: str
    metrics: tuple[str, ...]
    dataset: Dataset
    load: Load
    query_set: QuerySet
    params: tuple[Param, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        as_tuple(self, "metrics", "params")
        slug("name", self.name)
        xml_text("description", self.description)
        slug("experiment", self.experiment)
        need(len(self.metrics) > 0, "metrics must name at least one metric")
        for m in self.metrics:
            one_of("metrics", m, METRICS)
        names = [p.name for p in self.params]
        for n in names:
            need(names.count(n) == 1, f"Param {n} appears twice")
        check_queries(self.query_set, self.dataset)

    @property
    def queries(self):
        return self.query_set.queries

    def param(self, name: str) -> str:
        for p in self.params:
            if p.name == name:
                return p.value
        raise KeyError(name)

    def micro_settings(self) -> dict:
        """The config keys (typed, by dotted key) that make datagen produce this workload's input
        (`kit.config.load_config(settings=...)`, `with_settings`)."""
        d, ld = self.dataset, self.load
        out = {"micro.seed": d.seed, "micro.streams": d.streams, "micro.attributes": d.attributes,
               "micro.max_id": d.max_id, "micro.zipf_s": float(d.zipf_s), "micro.table_rows": d.table_rows,
               "micro.table_attributes": d.table_attributes, "micro.rate.profile": ld.profile,
               "micro.rate.basis_rate_eps": float(ld.rate_eps)}
        if ld.duration_ms is not None:
            out["micro.rate.duration_s"] = ld.duration_ms / 1000
        return out


@dataclass(frozen=True)
class Suite:
    name: str
    quick: bool
    workloads: tuple[Workload, ...]
    description: str = ""

    def __post_init__(self) -> None:
        as_tuple(self, "workloads")
        slug("name", self.name)
        xml_text("description", self.description)
        need(isinstance(self.quick, bool), f"quick must be true or false, got {self.quick!r}")
        need(len(self.workloads) > 0, "a Suite needs at least one Workload")
        seen: set[str] = set()
        for w in self.workloads:
            need(w.name not in seen, f"duplicate workload name {w.name}", w.name)
            seen.add(w.name)

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(name)

    @property
    def query_count(self) -> int:
        return sum(len(w.query_set) for w in self.workloads)


