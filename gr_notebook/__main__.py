"""``python -m gr_notebook demo``: run the main job headless on the simulated model."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_notebook")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the demo job on the simulated model")
    demo.add_argument("--workspace", help="workspace directory (default: gr_runs/<run id>)")
    demo.add_argument("--store", help="SQLite store (default: gr_runs/store.sqlite)")
    demo.add_argument("--profile", default="diligent", help="simulated behaviour profile")
    args = parser.parse_args(argv)
    from gr_notebook.demo import run_demo

    run = run_demo(workspace=args.workspace, store=args.store, profile=args.profile)
    return 0 if run.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
