#!/usr/bin/env python3
"""Checks that includes point down, never up or round (ARCHITECTURE.md, "Layers").

Reads the #include lines of the project's C++ files and fails, naming each offending include,
when
  - a component includes one above it (the order below: common at the bottom, the launcher at
    the top; worker-runtime stands apart and uses only common);
  - a folder of agent/ includes a folder of a layer above its own, or a folder beside it in the
    same layer;
  - files of worker-runtime/ (or of any one agent/ folder) include each other round (x.hpp or
    x.cpp includes y.hpp, and y's include x's).
Usage: scripts/check_layers.py [SOURCE_DIR]     (exit 0: all arrows point down)
"""

import pathlib
import re
import sys

# Component -> the components it may include (besides itself).
COMPONENTS = {
    "common": set(),
    "rendezvous": {"common"},
    "agent": {"rendezvous", "common"},
    "launcher": {"agent", "rendezvous", "common"},
    "worker-runtime": {"common"},
}

# agent/'s folders, top layer first; a folder may include only folders of later layers.
AGENT_LAYERS = [
    ["."],  # agent.cpp: run_agent
    ["loop"],  # the event loop: owns and drives everything below
    ["health", "node_check", "watchdog"],  # what the loop runs beside the workers
    ["watchdog/hang"],  # the hang response (its reports name the detectors' findings)
    ["watchdog/file_timer", "watchdog/progress"],  # the hang and straggler detectors
    ["stacks"],  # capturing stacks of processes
    ["node"],  # the node's rendezvous
    ["workers"],  # spawning, watching and reaping workers
    ["logs"],  # the workers' output
    ["base"],  # what all use: configuration, event log, owned fds, round types
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def agent_folder(relative: pathlib.PurePosixPath) -> str:
    parts = relative.parts[1:-1]  # below agent/, without the file name
    if not parts:
        return "."
    if parts[0] == "watchdog" and len(parts) > 1:
        return "watchdog/" + parts[1]
    return parts[0]


def agent_rank(folder: str) -> int:
    for rank, layer in enumerate(AGENT_LAYERS):
        if folder in layer:
            return rank
    raise KeyError(folder)


def unit_cycles(units: dict) -> list:
    """Cycles in {unit: set(units it includes)}, each as a list of units."""
    cycles, state = [], {}

    def visit(unit, path):
        state[unit] = "open"
        path.append(unit)
        for other in sorted(units.get(unit, ())):
            if state.get(other) == "open":
                cycles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path)
        path.pop()
        state[unit] = "done"

    for unit in sorted(units):
        if unit not in state:
            visit(unit, [])
    return cycles


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    agent_units = {}
    runtime_units = {}
    for component in COMPONENTS:
        for path in sorted((root / component).rglob("*")):
            if path.suffix not in (".cpp", ".hpp"):
                continue
            relative = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            unit = str(relative.with_suffix(""))
            for target in INCLUDE.findall(path.read_text(errors="replace")):
                where = f"{relative}: #include \"{target}\""
                if component == "worker-runtime":
                    included = "worker-runtime/" + target.rsplit(".", 1)[0]
                    if "/" not in target:
                        if included != unit:
                            runtime_units.setdefault(unit, set()).add(included)
                    elif target.split("/")[0] not in COMPONENTS["worker-runtime"]:
                        problems.append(where + ": worker-runtime uses only common/")
                    continue
                first = target.split("/")[0]
                if first not in COMPONENTS or first == component:
                    if first == component == "agent":
                        check_agent(relative, target, where, problems, agent_units, unit)
                    continue
                if first not in COMPONENTS[component]:
                    problems.append(f"{where}: {component}/ may include only "
                                    f"{', '.join(sorted(COMPONENTS[component])) or 'itself'}")
    for units in (agent_units, runtime_units):
        for cycle in unit_cycles(units):
            problems.append("include cycle: " + " -> ".join(cycle))
    for problem in problems:
        print(f"check_layers: {problem}")
    print(f"check_layers: {'FAILED' if problems else 'ok'}: "
          f"{len(problems)} arrow(s) pointing up or round")
    return 1 if problems else 0


def check_agent(relative, target, where, problems, agent_units, unit):
    target_path = pathlib.PurePosixPath(target)
    source_folder = agent_folder(relative)
    target_folder = agent_folder(target_path)
    agent_units.setdefault(unit, set())
    if str(target_path.with_suffix("")) != unit:
        agent_units[unit].add(str(target_path.with_suffix("")))
    if source_folder == target_folder:
        return
    try:
        source_rank, target_rank = agent_rank(source_folder), agent_rank(target_folder)
    except KeyError as unknown:
        problems.append(f"{where}: agent/{unknown.args[0]} has no layer in scripts/check_layers.py")
        return
    if target_rank <= source_rank:
        direction = "beside" if target_rank == source_rank else "above"
        problems.append(f"{where}: agent/{target_folder} is {direction} agent/{source_folder}")


if __name__ == "__main__":
    sys.exit(main())
