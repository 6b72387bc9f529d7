"""`sitp viz`: run a program with stage3's recording on (stage3_compiler/viz/record.py), then serve the page
that shows it (app.py) or write what it shows as JSON.

    sitp viz SCRIPT.py [args]                       a learner's script
    sitp viz -m common.train nanogpt --stage 3 --steps 5
    sitp viz --stage2 -m common.train nanogpt --stage 3 --steps 5   and stage2's calls for the same steps
    sitp viz --json view.json --no-serve SCRIPT.py  the page's data, for a test or a script
    sitp viz --load sitp-viz-123.json               a recording VIZ=1 wrote
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from dataclasses import asdict
from pathlib import Path


def add_parser(commands) -> None:
    viz = commands.add_parser("viz", help="watch a program go through stage3's compiler, in the browser",
                              description=__doc__.split("\n\n")[0])
    viz.add_argument("-m", dest="module", default=None, help="run a module as `python -m` does")
    viz.add_argument("--load", default=None, help="a recording VIZ=1 wrote, instead of running a program")
    viz.add_argument("--json", default=None, help="write the page's data to this file")
    viz.add_argument("--no-serve", action="store_true", help="do not serve the page")
    viz.add_argument("--stage2", action="store_true",
                     help="rerun the program with --stage 2 and count stage2's kernel calls beside stage3's kernels")
    viz.add_argument("--host", default="127.0.0.1")
    viz.add_argument("--port", type=int, default=8008)
    viz.add_argument("program", nargs=argparse.REMAINDER, help="the script and its arguments (or the module's)")
    viz.set_defaults(func=cmd_viz)


def run_program(module: str | None, argv: list[str]) -> None:
    """Run the script (argv[0]) or the module with its arguments as `python` would; a nonzero exit raises."""
    saved = sys.argv
    try:
        if module is not None:
            sys.argv = [module, *argv]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise RuntimeError(f"viz: the program exited with status {e.code}") from None
    finally:
        sys.argv = saved


def as_stage2(argv: list[str]) -> list[str]:
    """The arguments with --stage 3 (or --stage=3) made --stage 2; a RuntimeError where there is none."""
    out, changed = list(argv), False
    for i, a in enumerate(out):
        if a == "--stage" and i + 1 < len(out) and out[i + 1] == "3":
            out[i + 1], changed = "2", True
        elif a == "--stage=3":
            out[i], changed = "--stage=2", True
    if not changed:
        raise RuntimeError("viz: --stage2 reruns a program that takes --stage 3, and this one's arguments have none")
    return out


def record_program(module: str | None, argv: list[str], stage2: bool) -> tuple[dict, dict | None]:
    # the stages load when a command runs, not when `sitp` starts (as common/stages.load_stage loads them)
    from stage3_compiler.viz.record import recording

    from . import stage2_calls

    with recording() as r:
        run_program(module, argv)
    calls = None
    if stage2:
        with stage2_calls.counting() as counted:
            run_program(module, as_stage2(argv))
        calls = counted()
    return r.to_json(), calls


def load_recording(path: Path) -> dict:
    """A recording VIZ=1 wrote; a RuntimeError naming the file where it is missing or not one."""
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RuntimeError(f"viz: cannot read the recording {path}: {e}") from None
    if not isinstance(recorded, dict) or not {"realizes", "programs", "jits", "passes"} <= recorded.keys():
        raise RuntimeError(f"viz: {path} is not a recording VIZ=1 wrote (it lacks realizes, programs, jits, passes)")
    return recorded


def cmd_viz(args: argparse.Namespace) -> int:
    from .peak import measure  # (stage3's compiler, as above)
    from .view import build

    if args.load is not None:
        recorded, calls, title = load_recording(Path(args.load)), None, args.load
    elif args.module is None and not args.program:
        raise RuntimeError("viz: name a script (sitp viz SCRIPT.py ...) or a module (sitp viz -m MODULE ...)")
    else:
        recorded, calls = record_program(args.module, args.program, args.stage2)
        title = " ".join([*(["-m", args.module] if args.module else []), *args.program])
    on_cpu = all(p["device"] == "CPU" for p in recorded["programs"].values())
    view = build(recorded, asdict(measure()) if on_cpu else None, calls, title)
    if args.json:
        Path(args.json).write_text(json.dumps(view))
        print(f"viz: the page's data in {args.json}")
    if args.no_serve:
        return 0
    try:
        from .app import make_server  # FastAPI and uvicorn: the optional `serve` extra
    except ModuleNotFoundError as e:
        print(f"sitp viz: {e.name} is not installed; pip install -e '.[serve]' (or write the page's data with "
              "--json FILE --no-serve)", file=sys.stderr)
        return 1
    print(f"viz: http://{args.host}:{args.port}/ ({len(view['realizes'])} realizes, "
          f"{len(view['programs'])} kernels; Ctrl-C to stop)", flush=True)
    make_server(view, args.host, args.port).run()
    return 0

