"""Runs microbenchmark queries through their Flink Java plan (cepkit.flink.MicroFlink) in Flink's local
mini-cluster: run with the Flink environment's interpreter by tests/flink_runtime/test_micro_logic_plans.py.

stdin: {"jar": path, "jars": [more], "jdbc": {"url", "properties"} (J3), "parallelism": n, "block": b,
"cases": [{"name", "query", "columns", "types", "rows", "mode"}]}. Mode "ordered": one source in feed order (as the programs read the feed: one
split); "splits": the events cut into blocks of `block` offsets, block i read by source i mod 2,
unioned and shuffled into the plan (a control: the test expects it to go wrong). Every case of a
group runs in one job; stdout: {name: [row, ...]} in arrival order.
"""

from __future__ import annotations

import json
import sys

from pyflink.common import Configuration, Row, Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

FLINK_TYPES = {"int": Types.INT(), "long": Types.LONG(), "double": Types.DOUBLE(), "string": Types.STRING()}


def main() -> None:
    spec = json.load(sys.stdin)
    conf = Configuration()
    conf.set_string("pipeline.auto-watermark-interval", "1 ms")
    conf.set_string("python.executable", sys.executable)        # the map's Python workers
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(int(spec["parallelism"]))
    env.add_jars(*("file://" + jar for jar in [spec["jar"], *spec.get("jars", [])]))
    micro = get_gateway().jvm.cepkit.flink.MicroFlink
    outputs, whole = [], 0
    for case in spec["cases"]:
        info = Types.ROW_NAMED(case["columns"], [FLINK_TYPES[t] for t in case["types"]])
        rows = [Row(*r) for r in case["rows"]]
        offset = case["columns"].index("offset")
        if case["mode"] == "ordered":
            j_events = micro.stamped(env.from_collection(rows, type_info=info)._j_data_stream)
        else:
            parts = [[r for r in rows if (r[offset] // spec["block"]) % 2 == k] for k in (0, 1)]
            splits = [DataStream(micro.stamped(env.from_collection(p, type_info=info)._j_data_stream)) for p in parts]
            # Two readers' events interleave at the plan's input as the channels deliver them.
            j_events = splits[0].union(splits[1]).rebalance()._j_data_stream
        if case["query"]["kind"] == "table_join":       # J3: the JDBC lookup (MicroLookup)
            lookup = get_gateway().jvm.cepkit.flink.MicroLookup
            out = DataStream(lookup.plan(j_events, json.dumps(case["query"]), spec["jdbc"]["url"],
                                         json.dumps(spec["jdbc"]["properties"]), int(spec["parallelism"])))
        else:
            out = DataStream(micro.plan(j_events, json.dumps(case["query"]), whole, int(spec["parallelism"])))
        whole += 1
        name = case["name"]
        outputs.append(out.map(lambda r, name=name: json.dumps([name, *list(r)]), output_type=Types.STRING()))
    got = {case["name"]: [] for case in spec["cases"]}
    merged = outputs[0].union(*outputs[1:]) if len(outputs) > 1 else outputs[0]
    with merged.execute_and_collect() as results:
        for line in results:
            name, *row = json.loads(line)
            got[name].append(row)
    print(json.dumps(got))


if __name__ == "__main__":
    main()
