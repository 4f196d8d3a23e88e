"""The one typed model of workload specs: Pairs strategies and microbenchmark queries.

Parsing any spec file (`read_spec`) yields these frozen dataclasses, and `to_xml`/`write_spec`
write them back so that re-reading gives an equal object. The query generator builds them, the
translators compile them, the validator computes reference answers from them. XML layout:
`specs/schemas/*.xsd`; meaning: `specs/SEMANTICS.md` and `specs/STRATEGIES.md`.
"""

from kit.workload.aux import AUX_FILE, Correlation, PairsAux, load_aux
from kit.workload.common import (SCHEMA_VERSION, STRATEGIES_KIND, SUITE_KIND, WORKLOAD_KIND, Comparison,
                                 SpecError, format_number)
from kit.workload.queries import (CONSUMPTION_POLICIES, CountWindowAggregation, Filter, Pattern, PatternEvent, Query,
                                  QuerySet, TableJoin, TimeWindowAggregation, TwoLevelAggregation, WindowJoin,
                                  output_schema)
from kit.workload.query_base import FUNCTIONS, INPUT_TS, Aggregate, field_type
from kit.workload.strategies import (AVAILABLE_FUNDS_CENTS, BANDS_MULTIPLIERS, NUM_PERIODS, PERIOD_LENGTHS_S,
                                     STOP_LOSS_PERCS, PairsStrategy, StrategySet)
from kit.workload.suite import METRICS, Dataset, Load, Param, Suite, Workload
from kit.workload.xmlread import parse_spec, read_spec, read_strategies, read_suite, read_workload
from kit.workload.xmlwrite import to_xml, write_spec

__all__ = [
    "AUX_FILE", "AVAILABLE_FUNDS_CENTS", "BANDS_MULTIPLIERS", "CONSUMPTION_POLICIES", "FUNCTIONS", "INPUT_TS",
    "METRICS", "NUM_PERIODS", "PERIOD_LENGTHS_S", "SCHEMA_VERSION", "STOP_LOSS_PERCS", "STRATEGIES_KIND",
    "SUITE_KIND", "WORKLOAD_KIND", "Aggregate", "Comparison", "Correlation", "CountWindowAggregation", "Dataset",
    "Filter", "Load", "PairsAux", "PairsStrategy", "Param", "Pattern", "PatternEvent", "Query", "QuerySet",
    "SpecError", "StrategySet", "Suite", "TableJoin", "TimeWindowAggregation", "TwoLevelAggregation", "WindowJoin",
    "Workload", "field_type", "format_number", "load_aux", "output_schema", "parse_spec", "read_spec",
    "read_strategies", "read_suite", "read_workload", "to_xml", "write_spec",
]
