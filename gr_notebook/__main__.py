"""``python -m gr_notebook demo``: run the main job headless on the simulated model.
``python -m gr_notebook export STORE [RUN_ID ...] -o FILE``: runs as one HTML file to send."""

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
    export = commands.add_parser(
        "export", help="write runs of a store as one HTML file that opens anywhere"
    )
    export.add_argument("store", help="the run store, e.g. gr_runs/store.sqlite")
    export.add_argument(
        "run_ids", nargs="*", metavar="RUN_ID", help="runs to export (default: all)"
    )
    export.add_argument("-o", "--output", required=True, help="the HTML file to write")
    args = parser.parse_args(argv)
    if args.command == "export":
        return _export(args.store, args.run_ids, args.output)
    from gr_notebook.demo import run_demo

    run = run_demo(workspace=args.workspace, store=args.store, profile=args.profile)
    return 0 if run.status == "completed" else 1


def _export(store: str, run_ids: list[str], output: str) -> int:
    from gr_notebook.errors import GrNotebookError
    from gr_notebook.history.store import Store
    from gr_notebook.share import export_html

    try:
        with Store(store, create=False) as opened:
            chosen = list(dict.fromkeys(run_ids)) or [r["run_id"] for r in reversed(opened.runs())]
            path = export_html(chosen, output, store=opened)
    except GrNotebookError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    size = path.stat().st_size
    print(f"wrote {path} ({len(chosen)} run{'s' * (len(chosen) != 1)}, {size / 1024:,.0f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
