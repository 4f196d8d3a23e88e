"""Record schemas of the benchmark's streams and tables.

Types are the thesis' logical types: string, int (32-bit), long (64-bit), double; `arrow_type` and
`RecordSchema.arrow_schema` are the one mapping to Arrow types. Timestamps are integer epoch
milliseconds. Datagen files hold only what the generator knows: stock-tick files
carry symbol, price, size and tickTS (TS is the send time the harness stamps while replaying);
microbenchmark stream files carry TS as the *scheduled* time on the simulated clock, which the
harness rebases to wall-clock time. Within a file, row order is the canonical event order: ties
on a timestamp are broken by position (file index, then row index).
"""

from __future__ import annotations

from dataclasses import dataclass

LOGICAL_TYPES = ("string", "int", "long", "double")
# The file formats records are written in: datasets, output logs.
FILE_FORMATS = ("parquet", "csv")


@dataclass(frozen=True)
class Field:
    name: str
    type: str

    def __post_init__(self) -> None:
        if self.type not in LOGICAL_TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")


@dataclass(frozen=True)
class RecordSchema:
    name: str
    fields: tuple[Field, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def arrow_schema(self, nullable: bool = True):
        """The schema as a pyarrow.Schema (`arrow_type` of each field). Data files are written and
        read with `nullable=False` (every generated value is present); engine outputs may hold nulls."""
        import pyarrow as pa

        return pa.schema([pa.field(f.name, arrow_type(f.type), nullable=nullable) for f in self.fields])


def arrow_type(logical: str):
    """The pyarrow type of a logical type: string, int32, int64, float64."""
    # pyarrow is imported here, not at the top: engine programs ship this module to executors,
    # which must be able to import it with the standard library alone.
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "double": pa.float64()}
    return types[logical]


def _schema(name: str, *pairs: tuple[str, str]) -> RecordSchema:
    return RecordSchema(name, tuple(Field(n, t) for n, t in pairs))


# Thesis Figure 7.2: price in cents, size in shares, tickTS simulation clock, TS send time.
STOCK_TICK = _schema("StockTick", ("symbol", "string"), ("price", "int"), ("size", "int"),
                     ("tickTS", "long"), ("TS", "long"))
STOCK_TICK_FILE = _schema("StockTickFile", *((f.name, f.type) for f in STOCK_TICK.fields if f.name != "TS"))

# Thesis Figure 7.8.
INDICATOR = _schema("Indicator", ("strategy", "string"), ("ratio", "double"), ("avgRatio", "double"),
                    ("upperBand", "double"), ("lowerBand", "double"), ("inputTickTS", "long"),
                    ("inputTS", "long"))
MARKET_ORDER = _schema("MarketOrder", ("strategy", "string"), ("type", "string"), ("symbol", "string"),
                       ("price", "int"), ("size", "int"), ("inputTickTS", "long"), ("inputTS", "long"))

ORDER_TYPES = ("BUY", "SELL")


def micro_event(num_attributes: int, name: str = "S") -> RecordSchema:
    """Thesis Table 4.1: ID, A1..AN (doubles in U(1,100)), TS."""
    if num_attributes < 1:
        raise ValueError("a microbenchmark event needs at least one attribute")
    return _schema(name, ("ID", "int"), *((f"A{i}", "double") for i in range(1, num_attributes + 1)),
                   ("TS", "long"))


def join_table(num_attributes: int, name: str = "T") -> RecordSchema:
    """The static table of the stream-to-table joins (Q6): ID plus T1..TM doubles."""
    if num_attributes < 1:
        raise ValueError("the join table needs at least one attribute")
    return _schema(name, ("ID", "int"), *((f"T{i}", "double") for i in range(1, num_attributes + 1)))
