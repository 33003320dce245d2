"""``python -m bench [--quick] [--only NAME,...] [--rounds R] [--store sqlite|memory] [--out PATH]
[--scale [NODESxPODS]]``.

Runs the suite (``bench.suite``): ceilings first, then the API, watch, end-to-end and scale
scenarios; prints one table of figures with their ceiling ratios and anchors, and writes the
same as JSON to ``bench/results/<date>.json`` (or ``--out``). ``make bench`` runs it;
``make bench ARGS=--quick`` is the short run (about three minutes on two cores: no 10,000- or
30,000-pod runs). ``--only`` takes scenario names or section names (``--list`` shows them);
the ceilings run first even then, unless ``--no-ceilings``: a ratio needs its ceiling from the
same run. ``--scale`` runs the seeded scale scenario alone (5,000 nodes and 150,000 pods unless
``--scale 5000x50000`` names another size; nothing in it has a ceiling): a long run, by hand.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from bench.harness import Context, render, run_scenarios, write_json
from bench.profile import sample_gil_only, summarize


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    parser.add_argument("--quick", action="store_true", help="short run, one round, small sizes")
    parser.add_argument("--only", default="", help="comma-separated scenarios or sections")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per figure (3; quick 1)")
    parser.add_argument(
        "--store", choices=("sqlite", "memory"), default="sqlite",
        help="store of the cluster scenarios (default sqlite, kubelite's default)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="JSON path (bench/results/<date>)")
    parser.add_argument("--keep", type=Path, default=None, help="keep process logs in this dir")
    parser.add_argument(
        "--no-ceilings", action="store_true",
        help="do not add the ceilings to an --only run (ratios are then left blank)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", default="",
        help="components to record with py-spy in cluster scenarios "
        "(apiserver,scheduler,controller-manager,kubelet); summaries are printed",
    )  # fmt: skip
    parser.add_argument(
        "--profile-gil", action="store_true",
        help="with --profile: sample only the thread holding the GIL (py-spy --gil)",
    )  # fmt: skip
    parser.add_argument(
        "--scale", nargs="?", const=DEFAULT_SCALE, default=None, type=_scale_size,
        metavar="NODESxPODS",
        help="run the seeded scale scenario (default 5000x150000; long, by hand)",
    )  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser.parse_args(argv)


DEFAULT_SCALE = (5000, 150_000)
"""Issue 23's goal: one apiserver holding 5,000 sim nodes and 150,000 pods."""


def _scale_size(text: str | tuple[int, int]) -> tuple[int, int]:
    if isinstance(text, tuple):
        return text
    nodes, sep, pods = text.lower().partition("x")
    if not sep or not nodes.isdigit() or not pods.isdigit() or int(nodes) < 2:
        raise argparse.ArgumentTypeError(f"expected NODESxPODS with NODES >= 2, got {text!r}")
    return int(nodes), int(pods)


def main(argv: list[str] | None = None) -> int:
    from bench.suite import build_registry, scale_name

    raw = sys.argv[1:] if argv is None else argv
    args = parse_args(raw)
    registry = build_registry(scale=args.scale)
    if args.list:
        for s in registry:
            print(f"{s.name:<22} {s.section:<9} {'' if s.quick else '(full only) '}{s.summary}")
        return 0
    only = [name for name in args.only.split(",") if name]
    if args.scale is not None:
        only.append(scale_name(*args.scale))
    try:
        scenarios = registry.select(only=only, quick=args.quick)
    except KeyError as exc:
        print(f"python -m bench: {exc.args[0]}", file=sys.stderr)
        return 2
    alone = args.scale is not None and not args.only  # the scale figures have no ceiling
    if not args.no_ceilings and not alone and "ceilings" in registry.names():
        # every ratio refers to a ceiling measured in the same run
        if all(s.name != "ceilings" for s in scenarios):
            scenarios = registry.select(only=["ceilings"]) + scenarios
    rounds = args.rounds or (1 if args.quick else 3)
    command = shlex.join(["python", "-m", "bench", *raw])

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="kubelite-bench-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        profile = tuple(name for name in args.profile.split(",") if name)
        sample_gil_only(args.profile_gil)
        ctx = Context(
            quick=args.quick, rounds=rounds, workdir=workdir, store=args.store, profile=profile
        )
        import uvloop

        report = uvloop.run(run_scenarios(scenarios, ctx, command=command, progress=progress))
        for path in sorted(workdir.rglob("profile-*.txt")):
            print(f"{path.relative_to(workdir)}:\n{summarize(path)}\n")
    print(render(report))
    path = write_json(report, args.out)
    print(f"results: {path}")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
