"""The config's sections: frozen dataclasses that check themselves, and the names each choice
may take.

Mirrors the thesis' configuration file (B.6: output folders, scale factor, file count) and the
data generator's parameters (B.1: symbols, correlations, strategies, rates, arrival law, test
duration), plus `[run]`, how the harness drives the engine under test. Optional integers/floats
left unset (absent in TOML, `auto` on the command line) are derived from the scale factor by
`kit.scale.ScaleModel`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import tomli_w

from kit.config.limits import MAX_ZIPF_ID, FieldError, check_values, choice, memory_mib, need, positive
from kit.engines import ALIASES, ENGINE_NAMES
from kit.errors import CepkitError
from kit.faults import check_faults, parse_faults
from kit.records import FILE_FORMATS
from kit.scale import MAX_STRATEGIES_PER_PAIR, SYMBOLS_PER_MARKET, ScaleModel, markets_for, pair_capacity

CONFIG_KIND = "cepkit.config"
CONFIG_SCHEMA_VERSION = 1
FORMATS = FILE_FORMATS
ARRIVALS = ("poisson", "constant")
PROFILES = ("standard", "adaptivity", "constant")
# 2026-01-05 14:30:00 UTC, a Monday market open; any epoch works, this one is easy to read.
DEFAULT_START_EPOCH_MS = 1_767_623_400_000


@dataclass(frozen=True)
class PathsConfig:
    """Output folders (thesis B.6: dGenFolder, qGenFolder, translatorFolder, validFolder)."""

    datagen_dir: str = "data"
    querygen_dir: str = "queries"
    translator_dir: str = "impl"
    validator_dir: str = "valid"
    runs_dir: str = "runs"

    def __post_init__(self) -> None:
        check_values(self)
        for f in dataclasses.fields(self):
            need(bool(getattr(self, f.name)), f.name, "must not be empty")


@dataclass(frozen=True)
class RateConfig:
    """Arrival process. Unset rates come from the scale model (pairs) or the section default.

    Ranges (LIMITS): duration_s 0.01 s .. 30 days, basis_rate_eps 0.001 .. 1e8 ev/s, peak_factor 1 .. 100.
    """

    profile: str = "standard"
    quick: bool = False
    duration_s: float | None = None      # rescale the profile to this total length, same shape; <= 30 days
    basis_rate_eps: float | None = None  # events/s, <= 1e8
    peak_factor: float = 1.5            # peak = basis x peak_factor, in [1, 100]
    arrivals: str = "poisson"           # exponential inter-arrival times, or constant ones
    varying: bool = True                # false: the basis rate throughout, same phases

    def __post_init__(self) -> None:
        check_values(self)
        choice(self, "profile", PROFILES)
        choice(self, "arrivals", ARRIVALS)
        need(not (self.quick and self.duration_s is not None), "quick",
              f"cannot be combined with duration_s = {self.duration_s} (which already sets the length); "
              "unset one of them")


@dataclass(frozen=True)
class PriceConfig:
    """Geometric Brownian motion of tick prices; time is measured in simulated hours."""

    correlation: float = 0.9            # in [-1, 1]
    drift_per_hour: float = 0.0         # in [-1, 1]
    volatility_per_hour: float = 0.02   # in [0, 10]
    initial_min_cents: int = 1000       # 1 .. 100,000,000 (1 M dollars)
    initial_max_cents: int = 10000      # initial_min_cents .. 100,000,000

    def __post_init__(self) -> None:
        check_values(self)
        need(self.initial_max_cents >= self.initial_min_cents, "initial_max_cents",
              f"must be >= initial_min_cents ({self.initial_min_cents}), got {self.initial_max_cents!r}")


@dataclass(frozen=True)
class PairsConfig:
    """Pairs data generation (thesis B.1 and B.6)."""

    scale_factor: int = 1               # 1 .. 10,000 (1,000 markets, 100,000 symbols)
    file_count: int = 1                 # 1 .. 1,000
    seed: int = 42                      # 0 .. 2^63-1
    format: str = "parquet"
    symbols: int | None = None          # 2 .. 1,000,000, and more than the markets (ceil(SF/10))
    correlations: int | None = None     # 1 .. symbols/2 (with several markets: the pairs they hold)
    strategies: int | None = None       # 1 .. 1,000,000, and at most 10 per correlated pair
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS    # 0 (1970) .. 7,258,118,400,000 (2200-01-01 UTC)
    rate: RateConfig = field(default_factory=RateConfig)
    prices: PriceConfig = field(default_factory=PriceConfig)

    def __post_init__(self) -> None:
        check_values(self)
        choice(self, "format", FORMATS)
        self._check_sizes()

    def _check_sizes(self) -> None:
        """What the generator and the query generator will need of the sizes, checked here so that
        every value in the documented ranges either works end to end or is refused at its key
        (the scale model derives the unset ones; a pair lies within one market)."""
        markets = markets_for(self.scale_factor)
        symbols = SYMBOLS_PER_MARKET * markets if self.symbols is None else self.symbols
        capacity = pair_capacity(symbols, markets)
        need(capacity >= 1, "symbols", f"must be > the number of markets ({markets} for scale_factor "
                                       f"{self.scale_factor}) so that a market has two symbols to pair, got {symbols}")
        if self.correlations is not None:
            held = (f"symbols/2 = {capacity}" if capacity == symbols // 2 else
                    f"{capacity} (what {symbols} symbols over {markets} markets hold)")
            need(self.correlations <= capacity, "correlations", f"must be <= {held}, got {self.correlations}")
        if self.strategies is not None:
            pairs = ScaleModel.from_sf(self.scale_factor, symbols=self.symbols,
                                       correlations=self.correlations).correlations
            most = pairs * MAX_STRATEGIES_PER_PAIR
            need(self.strategies <= most, "strategies",
                 f"must be <= {most} ({pairs} correlated pairs x {MAX_STRATEGIES_PER_PAIR} strategies per pair), "
                 f"got {self.strategies}")


@dataclass(frozen=True)
class MicroConfig:
    """Microbenchmark dataset (thesis Table 4.1 and the join table of Q6)."""

    seed: int = 7                       # 0 .. 2^63-1
    streams: int = 1                    # 1 .. 26 (S1..S26)
    max_id: int = 1000                  # 1 .. 2^31-1
    zipf_s: float = 0.0                 # 0: IDs equiprobable; > 0 (<= 100): bounded Zipf with this exponent
    attributes: int = 4                 # 1 .. 1,000
    table_rows: int = 0                 # 0: no join table; at most 2^31-1
    table_attributes: int = 9           # 1 .. 1,000
    file_count: int = 1                 # 1 .. 1,000 per stream
    format: str = "parquet"
    start_epoch_ms: int = DEFAULT_START_EPOCH_MS    # 0 (1970) .. 7,258,118,400,000 (2200-01-01 UTC)
    rate: RateConfig = field(default_factory=lambda: RateConfig(profile="constant", basis_rate_eps=1000.0))

    def __post_init__(self) -> None:
        check_values(self)
        choice(self, "format", FORMATS)
        need(self.rate.basis_rate_eps is not None, "rate.basis_rate_eps", "must be set for microbenchmark streams")
        # What datagen takes, checked here so that a config the model takes is one it generates.
        need(self.zipf_s == 0 or self.max_id <= MAX_ZIPF_ID, "max_id",
             f"must be <= {MAX_ZIPF_ID} with zipf_s > 0 (the sampler keeps a table per ID), got {self.max_id}")


PLANS = ("keyed", "shared", "per-strategy")
# Microbenchmark J3 (translators/spark_micro.py): per-batch key lookups through psycopg, or Spark's
# own JDBC source re-reading the table.
DATABASE_JOIN_PLANS = ("lookup", "jdbc")
# Where a run's per-event work runs: the plan family (specs/TRANSLATION.md, "Plan families").
# "engine": the engine's own operators where they say the query, else the kit's Java logic as user
# code in the engine's keyed, checkpointed operators; "operators": the engine's own operators
# wherever it has any (Spark's window() and stream-stream interval join too), Java user code for the
# rest; "jvm": the Java logic for every kind that has it; "python": the kit's Python logic as user
# code in the engine's keyed operators; "driver": the kit's Python core in one process on Spark's
# driver (opt-in, never behind a published engine figure).
WORK_PLANS = ("engine", "operators", "jvm", "python", "driver")
# Settings folded into run.work: each old value and the run.work that replaces it (None: the old
# default, which the engine family replaces). A config file written before the fold still loads.
FOLDED_WORK = {"cores": {"by-kind": None, "driver": "driver", "operator": "python"},
               "patterns": {"core": None, "join": "operators"},
               "time_windows": {"core": None, "native": "operators"}}
# How a Spark query runs (specs/TRANSLATION.md, "Real-time mode"): micro-batches, or Spark's
# real-time mode (long-running batches, events processed as they arrive).
TRIGGERS = ("micro-batch", "realtime")
STAMPS = ("scheduled", "send")
# How events enter and answers leave the engine (specs/ENGINE_RUN.md, "Connectors"): "jvm", the
# engine's JVM source and sink (cepkit's Java connectors, at connector speed) wherever the plan
# admits them; "python", the kit's Python source and sink (Spark: the Python data source and the
# collect of every answer to the driver; Flink: the Python puller and emitter), opt-in, to measure
# what the kit's own I/O costs.
CONNECTORS = ("jvm", "python")
# How the driver paces a dataset (specs/DRIVER.md): at its recorded times (tickTS / TS) scaled by
# `speed`, evenly at `replay_rate_eps`, or as fast as the engine pulls.
REPLAYS = ("recorded", "constant", "pull")
# Who starts the engine program (run.launch).
LAUNCHES = ("harness", "external")


@dataclass(frozen=True)
class RunConfig:
    """How a benchmark run drives the engine under test (the harness).

    - `speed`: simulated ms per wall-clock ms when the driver paces by tickTS (1.0: real time).
    - `max_backlog_s` is Karimov's q^b as time: the run is stopped as unsustainable once the
      backlog (released but not pulled events) stays above `max_backlog_s` seconds of input at the
      profile's basis rate for `backlog_grace_s` seconds.
    """

    # The engine under test (kit/engines.py): "spark" or "flink" ("pyspark" is read as "spark").
    engine: str = "spark"
    # Pairs plan (specs/TRANSLATION.md): "keyed" (strategy state over many keys), "shared" (one key),
    # "per-strategy" (one pipeline per strategy).
    plan: str = "keyed"
    # State keys of the keyed Pairs plan, each a bucket of whole correlated pairs; 0: one per shuffle
    # partition, at least 2.
    buckets: int = 0
    master: str = "local[*]"
    shuffle_partitions: int = 2
    # Offset ranges (Spark) or splits (Flink) the engine's source reads in parallel; 0: the
    # program's choice (the Pairs program one per core; Spark's JVM source one per core; Flink's
    # JVM source and the Python source one).
    source_partitions: int = 0
    # Spark micro-batches: most events one batch reads (0: no cap). An engine that falls behind
    # otherwise reads everything waiting in its next batch, each batch bigger and slower than the
    # last, until one no longer fits the driver's heap (seen: Q7 at 800 K ev/s, batches of 0.4, 1,
    # 1.5, 2.5, 5.2 M events, then OutOfMemoryError); capped, it falls behind in the harness, which
    # ends the run as unsustainable. 2 M sits above every batch of a sustained rate measured here
    # (Q1 at 1.5 M ev/s: ~0.9 M).
    max_rows_per_batch: int = 2_000_000
    trigger_ms: int = 0
    # "micro-batch", or "realtime": Spark's real-time mode, for the queries it admits (Spark only).
    trigger: str = "micro-batch"
    # Real-time mode: how long each batch runs, i.e. how often the query checkpoints (not a latency).
    realtime_batch_ms: int = 5000
    # The engine's connectors: "jvm" (its JVM source and sink wherever the plan admits them) or
    # "python" (the kit's Python source and sink; CONNECTORS above).
    connectors: str = "jvm"
    speed: float = 1.0
    stamp: str = "scheduled"
    replay: str = "recorded"
    replay_rate_eps: float | None = None    # replay = "constant": events per second
    # The measurement interval in seconds on the run's time axis (simulated seconds for a recorded
    # replay, wall seconds otherwise); unset: the rate profile's measured phases, or the whole run.
    measure_from_s: float | None = None
    measure_to_s: float | None = None
    output_format: str = "parquet"
    # Where the per-event work runs, the plan family (WORK_PLANS above): "engine", "operators",
    # "jvm", "python" or "driver" (Spark only). It replaces run.cores, run.patterns and
    # run.time_windows.
    work: str = "engine"
    # Microbenchmark J3: "lookup" (per-batch key lookups through psycopg) or "jdbc" (Spark's JDBC
    # source re-reading the table every micro-batch; needs Debian's libpostgresql-jdbc-java).
    database_join: str = "lookup"
    # J3's database: "" for a private PostgreSQL the kit starts for the run (on run.feed_bind, so a
    # cluster's workers reach it, with a password made for the run: SCRAM-SHA-256); or your own
    # PostgreSQL, its DSN (libpq's key=value or a postgresql:// URI) read from "env:NAME" (the
    # environment variable NAME) or from a file (mode 0600, its first line): never from this
    # setting itself, and never printed. The kit loads the table into a fresh schema of it,
    # dropped when the run ends (specs/ENGINE_RUN.md, "J3's database"). The "lookup" plan only.
    database_dsn: str = ""
    max_backlog_s: float = 30.0
    backlog_grace_s: float = 5.0
    startup_timeout_s: float = 240.0
    drain_timeout_s: float = 180.0
    # The driver JVM's heap (spark.driver.memory). Spark's 1g default runs out when a backlog
    # turns into one micro-batch of millions of rows collected on the driver (Q1 near 1 M ev/s).
    driver_memory: str = "4g"
    spark_conf: tuple[str, ...] = ()     # extra Spark settings, "key=value" each
    # Where the harness's feed (driver) and sink listen, and the host the engine's processes use to
    # reach them: loopback by default; 0.0.0.0 (all interfaces) and a host name executors on other
    # machines resolve for a cluster. Unset advertised_host: the bind address (the machine's name
    # when binding all interfaces).
    feed_bind: str = "127.0.0.1"
    advertised_host: str | None = None
    # The interpreter of the engine's Python workers on a cluster's hosts (Spark's executors, Flink's
    # TaskManagers): a path that exists on every worker host; unset: the engine's own interpreter
    # on this machine (a cluster on this machine). specs/ENGINE_RUN.md, "On several machines".
    worker_python: str | None = None
    # The client credentials of a cluster that requires authentication (one the kit started beyond
    # loopback: `cepkit cluster start --host ...` writes <dir>/credentials/, scripts/netns-cluster.sh
    # DIR/credentials/; specs/ENGINE_RUN.md, "Authentication"): a directory holding Spark's
    # spark-defaults.conf with the cluster's secret, mode 0600, which the driver reads as its
    # SPARK_CONF_DIR (the secret never on a command line). Empty: the cluster asks none.
    cluster_credentials: str = ""
    # The streaming query's checkpoint: empty for the run directory; a URL (file:///shared/...,
    # hdfs://...) under which each run gets its own directory, for clusters with shared storage.
    checkpoint_url: str = ""
    # Who starts the engine program: the harness, or you ("external": the harness feeds and waits;
    # run the engine/spark-submit.sh it writes, by hand or from your scheduler).
    launch: str = "harness"
    # Faults injected on purpose (kit/faults.py): "kill-engine@40s", "kill-executor@60s", ...
    faults: tuple[str, ...] = ()
    # The command that injects a host fault (cut-link, kill-worker) on your hosts: run with the
    # fault's kind as its last argument, e.g. ["scripts/netns-cluster.sh", "fault", "/tmp/hosts"].
    fault_command: tuple[str, ...] = ()
    # How often the harness restarts an engine program that died (for any reason: an injected
    # kill, a crash, an OOM killer, a kill from outside) from its checkpoint before the run ends
    # "failed" (specs/ENGINE_RUN.md, "Supervision").
    max_restarts: int = 3

    def __post_init__(self) -> None:
        check_values(self)              # every number finite and within LIMITS["RunConfig"]
        if isinstance(self.engine, str):
            object.__setattr__(self, "engine", ALIASES.get(self.engine, self.engine))
        choice(self, "engine", ENGINE_NAMES)
        need(memory_mib(self.driver_memory) is not None, "driver_memory",
              f"must be a size like 4g or 2048m, got {self.driver_memory!r}")
        for item in self.spark_conf:
            need("=" in item and bool(item.split("=", 1)[0].strip()), "spark_conf",
                  f"entries must look like key=value, got {item!r}")
        choice(self, "plan", PLANS)
        choice(self, "work", WORK_PLANS)
        need(self.work != "driver" or self.engine == "spark", "work",
             f"\"driver\" runs the kit's core on Spark's driver; engine {self.engine!r} has none")
        choice(self, "database_join", DATABASE_JOIN_PLANS)
        need(not self.database_dsn or self.database_dsn.startswith("env:") or "=" not in self.database_dsn
             and "://" not in self.database_dsn, "database_dsn",
             "names where the DSN is (env:NAME or a file), it is not the DSN itself (it would be recorded)")
        need(not self.database_dsn.startswith("env:") or bool(re.fullmatch(r"env:[A-Za-z_][A-Za-z0-9_]*",
                                                                           self.database_dsn)),
             "database_dsn", f"env:NAME needs an environment variable's name, got {self.database_dsn!r}")
        need(not self.database_dsn or self.database_join == "lookup", "database_dsn",
             "your own database serves the \"lookup\" plan only (database_join)")
        choice(self, "trigger", TRIGGERS)
        choice(self, "connectors", CONNECTORS)
        need(self.trigger == "micro-batch" or self.engine == "spark", "trigger",
             f"\"realtime\" is Spark's real-time mode; engine {self.engine!r} has none")
        choice(self, "stamp", STAMPS)
        choice(self, "replay", REPLAYS)
        need((self.replay == "constant") == (self.replay_rate_eps is not None), "replay_rate_eps",
              "is required with replay = \"constant\" (cepkit pairs --rate) and only applies to it")
        positive(self, "replay_rate_eps")
        need(self.measure_from_s is None or self.measure_from_s >= 0, "measure_from_s",
              f"must be >= 0, got {self.measure_from_s!r}")
        need(self.measure_from_s is None or self.measure_to_s is None or self.measure_to_s > self.measure_from_s,
              "measure_to_s", f"must be > measure_from_s ({self.measure_from_s}), got {self.measure_to_s!r}")
        choice(self, "output_format", FORMATS)
        need(bool(self.master), "master", "must not be empty")
        positive(self, "shuffle_partitions", "speed", "max_backlog_s", "startup_timeout_s", "drain_timeout_s")
        need(self.trigger_ms >= 0, "trigger_ms", f"must be >= 0, got {self.trigger_ms!r}")
        need(self.backlog_grace_s >= 0, "backlog_grace_s", f"must be >= 0, got {self.backlog_grace_s!r}")
        need(bool(self.feed_bind), "feed_bind", "must not be empty (0.0.0.0 for every interface)")
        need(self.advertised_host is None or bool(self.advertised_host), "advertised_host", "must not be empty")
        need(self.worker_python is None or bool(self.worker_python), "worker_python", "must not be empty")
        need(all(isinstance(w, str) and w for w in self.fault_command), "fault_command",
             "must be a list of non-empty strings (the command and its arguments)")
        choice(self, "launch", LAUNCHES)
        try:
            check_faults(parse_faults(self.faults), self.master, self.launch, self.fault_command)
        except CepkitError as e:
            raise FieldError("faults", str(e)) from None

    def backlog_limit_events(self, mean_eps: float | None) -> int | None:
        """q^b in events: `max_backlog_s` seconds of input at the mean release rate, at least 1000
        events; None when nothing sets the pace (a pulled replay is never more than its pull
        window ahead of the engine)."""
        return None if mean_eps is None else max(1000, int(self.max_backlog_s * mean_eps))

    @property
    def measure_ms(self) -> tuple[int | None, int | None]:
        """`measure_from_s` / `measure_to_s` in ms (None where unset)."""
        return tuple(None if v is None else int(round(v * 1000)) for v in (self.measure_from_s, self.measure_to_s))


@dataclass(frozen=True)
class Config:
    paths: PathsConfig = field(default_factory=PathsConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)
    micro: MicroConfig = field(default_factory=MicroConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict:
        return {"kind": CONFIG_KIND, "schema_version": CONFIG_SCHEMA_VERSION, **dataclasses.asdict(self)}

    def to_toml(self) -> str:
        """The resolved config as TOML (tomli-w); unset (None) keys are left out: TOML has no null."""
        return tomli_w.dumps(_without_none(self.to_dict()))


def _without_none(data: dict) -> dict:
    return {k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}
