"""What bounded an engine run: the CPU of its parts, and the run's verdict (specs/ENGINE_RUN.md, "What bounded a run").

A benchmark's figure must be the engine's, not the kit's. The resource sampler (harness/resources.py)
splits the CPU a run used into four parts, by process:

- `feed`: the harness's driver process, which releases and serves the events;
- `sink`: the harness's own process, which hosts the sink (stamping, writing the output log);
- `kit_in_engine`: the kit's code inside the engine: the engine's Python processes (the Spark
  program's Python, where a driver-side plan runs and foreachBatch collects; Spark's and PyFlink's
  Python workers, where the Python source, puller, emitter and the kit's cores run);
- `engine`: the engine's JVMs (its own operators, and its share of every Python crossing).

`judge` turns them into the run's verdict: `none` (the run kept up: nothing bounded it at this
rate), `kit` with the part that was saturated (a kit process busy at least `SATURATED` of one core,
or the kit's parts taking most of a saturated machine), `other` (the machine was saturated by work
outside the run: the figure is no one's, run it again alone), or `engine`. A kit process is judged on one
core: the feed, the sink and the Python workers each do their work on one thread (the GIL), so one
of them at a whole core is the limit whatever the machine has left.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

PARTS = ("engine", "kit_in_engine", "feed", "sink")
KIT_PARTS = ("feed", "sink", "kit_in_engine")
PART_NAMES = {"engine": "the engine's JVMs", "kit_in_engine": "the kit's code in the engine", "feed": "the feed",
              "sink": "the sink"}
# A kit process busy this much of one core is saturated (sampled means sit a little under 100 %).
SATURATED = 85.0
# The machine is saturated when this much of all its cores is busy.
MACHINE_SATURATED = 85.0
# The machine's busy share outside the run's processes, in cores, from which a saturated machine is
# blamed on other work rather than on the run's parts.
OTHER_LOAD_CORES = 0.5
BOUNDS = ("none", "engine", "kit", "other")


@dataclass(frozen=True)
class Verdict:
    """`bound`: none, engine or kit; `part`: the kit's part that bounded it (feed, sink,
    kit_in_engine) or None; `why`: one sentence with the figures behind it."""

    bound: str
    part: str | None
    why: str

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"bound must be one of {', '.join(BOUNDS)}, got {self.bound!r}")
        if (self.bound == "kit") != (self.part in KIT_PARTS):
            raise ValueError(f"a kit bound names its part, and only it: {self.bound!r}, {self.part!r}")

    @property
    def label(self) -> str:
        """As the summaries print it: `engine`, `kit-bound (feed)`, `kept up`."""
        if self.bound == "kit":
            return f"kit-bound ({self.part.replace('_', ' ')})"
        return {"none": "kept up", "other": "other load on the machine"}.get(self.bound, "engine")

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}


def judge(parts_cpu: dict[str, float], processes: list[dict], cores: int, kept_up: bool,
          machine_cpu_percent: float | None = None) -> Verdict:
    """The run's verdict from its mean CPU per part (percent of one core), its processes' means
    (`{"part", "label", "cpu_percent"}`, percent of one core), the machine's cores and whether the
    run kept up with its load (module doc)."""
    busiest = sorted((p for p in processes if p.get("part") in KIT_PARTS), key=lambda p: -p["cpu_percent"])
    saturated = [p for p in busiest if p["cpu_percent"] >= SATURATED]
    total = sum(parts_cpu.get(k, 0.0) for k in PARTS)
    shares = ", ".join(f"{PART_NAMES[k]} {parts_cpu.get(k, 0.0):.0f} %" for k in PARTS)
    if kept_up:
        note = (f"; {saturated[0]['label']} was at {saturated[0]['cpu_percent']:.0f} % of a core"
                if saturated else "")
        return Verdict("none", None, f"kept up with the load (CPU, % of one core: {shares}){note}")
    if saturated:
        p = saturated[0]
        return Verdict("kit", p["part"], f"{p['label']} was at {p['cpu_percent']:.0f} % of one core, the most one "
                                         f"thread of it can use (CPU, % of one core: {shares})")
    busy = machine_cpu_percent if machine_cpu_percent is not None else total / max(cores, 1)
    other_cores = busy / 100.0 * cores - total / 100.0
    if busy >= MACHINE_SATURATED and other_cores >= OTHER_LOAD_CORES:
        return Verdict("other", None, f"the machine was saturated ({busy:.0f} % of {cores} cores), {other_cores:.1f} "
                                      f"cores of it by work outside this run (CPU, % of one core: {shares}): "
                                      "measure again alone")
    if busy >= MACHINE_SATURATED:
        kit = {k: parts_cpu.get(k, 0.0) for k in KIT_PARTS}
        part = max(kit, key=kit.get)
        if sum(kit.values()) > parts_cpu.get("engine", 0.0):
            return Verdict("kit", part, f"the machine was saturated ({busy:.0f} % of {cores} cores) and the kit's "
                                        f"parts used most of it (CPU, % of one core: {shares})")
        return Verdict("engine", None, f"the machine was saturated ({busy:.0f} % of {cores} cores), mostly by the "
                                       f"engine's JVMs (CPU, % of one core: {shares})")
    return Verdict("engine", None, f"no part of the kit was saturated (CPU, % of one core: {shares})")
