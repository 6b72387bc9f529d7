"""nanochat's part of the ``sitp`` command: ``sitp nanochat`` (the pipeline) and ``sitp chat`` (talk to a model).

``sitp nanochat --stage 2`` trains tokenizer, base, mid and SFT into ``--out`` (default
``$SITP_CACHE/runs/nanochat-stage<N>``) and writes the report card there; ``--resume`` continues an
interrupted run. ``sitp chat --ckpt PATH`` is an interactive chat on any stage, ``-p TEXT`` a one-shot
answer, ``--web`` the web UI.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..data.files import cache_dir
from ..stages import STAGES, load_stage
from ..train.distributed import BUCKET_MB, World, bucket_mb


def _steps(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        phase, sep, value = pair.partition("=")
        if not sep or phase not in ("base", "mid", "sft") or not value.isdigit() or int(value) < 1:
            raise SystemExit(f"sitp nanochat: --steps expects base|mid|sft=N with N >= 1, got {pair!r}")
        out[phase] = int(value)
    return out


def cmd_nanochat(args: argparse.Namespace) -> int:
    from .backend import ChatBackend
    from .pipeline import NanochatSettings, run_pipeline
    from .report import chat_checks, write_report

    stage = load_stage(args.stage)
    settings = NanochatSettings()
    settings.steps.update(_steps(args.steps))
    for name in ("depth", "vocab_size", "sequence_len", "batch_size", "seed", "precision"):
        if getattr(args, name) is not None:
            setattr(settings, name, getattr(args, name))
    out = Path(args.out) if args.out else cache_dir() / "runs" / f"nanochat-stage{args.stage}"
    world = World.start(stage, args.ddp, args.zero, args.ddp_timeout, args.bucket_mb)
    report = run_pipeline(stage, out, settings, resume=args.resume, progress=not args.quiet, world=world)
    if not world.is_main:
        return 0
    backend = ChatBackend.load(report["checkpoint"], stage)
    report["chat"] = chat_checks(backend, seeds=args.chat_seeds)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    path = write_report(report, out / "report.md")
    print(path.read_text())
    print(f"report: {path}\nchat with it: sitp chat --ckpt {report['checkpoint']}")
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    from .backend import ChatBackend

    backend = ChatBackend.load(args.ckpt, args.stage)
    options = {"temperature": args.temperature, "top_k": args.top_k, "max_tokens": args.max_tokens,
               "top_p": args.top_p}
    if args.web:
        from .web import Defaults, run_web

        run_web(backend, args.host, args.port, Defaults(args.temperature, args.top_k, args.max_tokens))
        return 0
    if args.prompt is not None:
        for piece in backend.stream_reply([{"role": "user", "content": args.prompt}], seed=args.seed, **options):
            print(piece, end="", flush=True)
        print()
        return 0
    messages: list[dict] = []
    print("nanochat: type a message; 'clear' starts over, 'quit' or Ctrl-D leaves.")
    while True:
        try:
            text = input("\nUser: ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if text in ("quit", "exit"):
            return 0
        if text == "clear":
            messages = []
            continue
        if not text:
            continue
        messages.append({"role": "user", "content": text})
        print("\nAssistant: ", end="", flush=True)
        pieces = []
        try:
            for piece in backend.stream_reply(messages, seed=args.seed, **options):
                pieces.append(piece)
                print(piece, end="", flush=True)
        except ValueError as e:  # the conversation outgrew the model's window
            print(f"\n{e}", file=sys.stderr)
            messages = []
            continue
        print()
        messages.append({"role": "assistant", "content": "".join(pieces)})


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from . import api  # FastAPI and uvicorn: the optional `serve` extra
    except ModuleNotFoundError as e:
        print(f"sitp serve: {e.name} is not installed; pip install -e '.[serve]'", file=sys.stderr)
        return 1
    from .backend import ChatBackend
    from .web import Defaults

    backend = ChatBackend.load(args.ckpt, args.stage)
    app = api.create_app(backend, args.model, Defaults(args.temperature, args.top_k, args.max_tokens),
                         args.max_waiting)
    print(f"nanochat at http://{args.host}:{args.port}/ (OpenAI API: base_url http://{args.host}:{args.port}/v1, "
          f"model {args.model!r}; Ctrl-C to stop)", flush=True)
    api.make_server(app, args.host, args.port).run()
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .backend import ChatBackend
    from .evals import run_evals, table

    backend = ChatBackend.load(args.ckpt, args.stage)
    sizes = {task: args.n for task in args.tasks} if args.n else {}
    text = table(run_evals(backend, tuple(args.tasks), sizes))
    print(text)
    if args.report:
        path = Path(args.report)
        path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n\n## Evals\n\n" + text + "\n",
                        encoding="utf-8")
        print(f"added to {path}")
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("nanochat", help="train nanochat: tokenizer, base, mid-training, SFT, report card")
    run.add_argument("--stage", type=int, default=2, choices=[s for s in sorted(STAGES) if s >= 2],
                     help="stage to train on (needs autograd)")
    run.add_argument("--out", default=None, help="output dir (default: $SITP_CACHE/runs/nanochat-stage<N>)")
    run.add_argument("--resume", action="store_true", help="skip finished phases, continue the unfinished one")
    run.add_argument("--steps", action="append", default=[], metavar="PHASE=N", help="e.g. --steps base=200")
    run.add_argument("--depth", type=int, default=None, help="model depth (width = 64 * depth)")
    run.add_argument("--vocab-size", dest="vocab_size", type=int, default=None, help="BPE vocabulary size")
    run.add_argument("--sequence-len", dest="sequence_len", type=int, default=None, help="context length")
    run.add_argument("--batch-size", dest="batch_size", type=int, default=None, help="rows per step")
    run.add_argument("--seed", type=int, default=None, help="seed of init, batches and splits")
    run.add_argument("--precision", default=None, choices=["fp32", "bf16", "fp16"],
                     help="mixed precision: the matmuls and attention in bf16 or fp16 (fp16 with loss scaling)")
    run.add_argument("--chat-seeds", dest="chat_seeds", type=int, default=20, help="samples of the tool check")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument("--ddp", action="store_true", help="data-parallel over the ranks mpiexec starts; --batch-size "
                                                        "is then a rank's")
    run.add_argument("--zero", action="store_true", help="with --ddp: shard the optimizer (ZeRO-1)")
    run.add_argument("--ddp-timeout", dest="ddp_timeout", type=float, default=60.0,
                     help="seconds a rank waits for the others before the job ends with an error")
    run.add_argument("--bucket-mb", dest="bucket_mb", type=bucket_mb, default=BUCKET_MB,
                     help="with --ddp: MiB of gradients (or parameters) a collective carries at once")
    run.set_defaults(func=cmd_nanochat)

    chat = commands.add_parser("chat", help="chat with a nanochat checkpoint (terminal, one-shot or web UI)")
    chat.add_argument("--ckpt", required=True, help="a checkpoint written by `sitp nanochat` (e.g. .../sft/ckpt...)")
    chat.add_argument("--stage", type=int, default=2, choices=sorted(STAGES), help="stage to run it on")
    chat.add_argument("-p", "--prompt", default=None, help="answer this one message and exit")
    chat.add_argument("--temperature", type=float, default=0.6)
    chat.add_argument("--top-k", dest="top_k", type=int, default=50)
    chat.add_argument("--top-p", dest="top_p", type=float, default=1.0, help="nucleus sampling (1: off)")
    chat.add_argument("--max-tokens", dest="max_tokens", type=int, default=256)
    chat.add_argument("--seed", type=int, default=0)
    chat.add_argument("--web", action="store_true", help="serve the web UI instead")
    chat.add_argument("--host", default="127.0.0.1")
    chat.add_argument("--port", type=int, default=8000)
    chat.set_defaults(func=cmd_chat)

    evals = commands.add_parser("eval", help="evals of a nanochat checkpoint on packaged data (cloze by likelihood, "
                                             "arithmetic by exact match, HumanEval by running the code)")
    evals.add_argument("--ckpt", required=True, help="a checkpoint written by `sitp nanochat`")
    evals.add_argument("--stage", type=int, default=2, choices=sorted(STAGES), help="stage to run it on")
    evals.add_argument("--tasks", nargs="+", default=["cloze", "arithmetic", "humaneval"],
                       choices=["cloze", "arithmetic", "humaneval"])
    evals.add_argument("-n", type=int, default=None, help="items per task (default: 100 cloze, 20 others)")
    evals.add_argument("--report", default=None, help="a report.md to append the table to")
    evals.set_defaults(func=cmd_eval)

    serve = commands.add_parser("serve", help="serve a nanochat checkpoint: the chat page and an OpenAI-compatible "
                                              "API (/v1/chat/completions, /v1/models)")
    serve.add_argument("--ckpt", required=True, help="a checkpoint written by `sitp nanochat`")
    serve.add_argument("--stage", type=int, default=2, choices=sorted(STAGES), help="stage to run it on")
    serve.add_argument("--model", default="nanochat", help="the model id clients name")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--temperature", type=float, default=0.6, help="default temperature")
    serve.add_argument("--top-k", dest="top_k", type=int, default=50, help="default top-k")
    serve.add_argument("--max-tokens", dest="max_tokens", type=int, default=256, help="default reply length")
    serve.add_argument("--max-waiting", dest="max_waiting", type=int, default=16,
                       help="requests that may wait for the model; past that, 429 with Retry-After")
    serve.set_defaults(func=cmd_serve)
