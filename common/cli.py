"""The ``sitp`` console command: ``sitp train linreg|logreg|softmax --stage 1`` (the GLMs, any
stage), ``sitp train mlp|rnn|lstm|cnn|nanogpt --stage 2`` (the zoo, a stage with autograd),
``sitp sample --ckpt PATH --stage 1|2``, ``sitp nanochat`` (the chat pipeline), ``sitp chat --ckpt PATH``,
``sitp viz`` (stage3's compiler at work, in the browser) and ``sitp diff``; ``bench`` comes later.

Runs write a loss-curve PNG and a metrics.json into ``--out``, by default
``$SITP_CACHE/runs/<task>-stage<N>-<timestamp>`` for the GLMs and ``$SITP_CACHE/runs/<task>-stage<N>``
for the zoo (a fixed folder, so ``--resume`` finds the checkpoint without ``--out``); both are
outside the source tree, like all data.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .chat import cli as chat_cli
from .data import Split, cache_dir, load_diabetes, load_digits8x8, load_housing, load_mnist5k, load_vader_bow
from .stages import STAGES, load_stage
from .train import TrainResult, save_loss_curve, train_linreg, train_logreg, train_softmax, zoo_cli
from .train.checkpoint import CheckpointError
from .train.reference import relative_error, sklearn_linreg, sklearn_logistic
from .viz import cli as viz_cli

# task -> data set name -> loader; the first data set of each task is its default
DATASETS: dict[str, dict[str, Callable[[int], Split]]] = {
    "linreg": {"housing": load_housing, "diabetes": load_diabetes},
    "logreg": {"vader": load_vader_bow},
    "softmax": {"mnist5k": load_mnist5k, "digits8x8": load_digits8x8},
}
# defaults measured to reach the sklearn solution (linreg) or its accuracy (logreg, softmax)
DEFAULTS: dict[str, dict[str, float]] = {
    "linreg": {"steps": 500, "lr": 0.3, "momentum": 0.9},
    "logreg": {"steps": 300, "lr": 2.0, "momentum": 0.9},
    "softmax": {"steps": 200, "lr": 0.5, "momentum": 0.9},
}


def _print_metrics(result: TrainResult) -> None:
    shown = ", ".join(f"{k}={v:.6g}" for k, v in result.metrics.items())
    print(f"[{result.task}/{result.method}] {result.data}: {shown}  ({result.seconds:.2f}s)")


def _run_linreg(Tensor: type, data: Split, args: argparse.Namespace) -> list[TrainResult]:
    ref = None if args.no_reference else sklearn_linreg(data)
    methods = ["normal", "gd"] if args.method == "both" else [args.method]
    results = []
    for method in methods:
        result = train_linreg(
            Tensor, data, method, args.steps, args.lr, args.momentum, progress=not args.quiet
        )
        if ref is not None:
            # max over coefficients of |ours - sklearn| / |sklearn|, in the original feature scale
            result.metrics["coef_rel_err"] = relative_error(result.params["coef"], ref["coef"])
            result.metrics["intercept_rel_err"] = relative_error(
                result.params["intercept"], [ref["intercept"]]
            )
        _print_metrics(result)
        results.append(result)
    if ref is not None:
        print(f"[sklearn LinearRegression] test_rmse={ref['test_rmse']:.4f}")
    return results


def _run_classifier(Tensor: type, data: Split, args: argparse.Namespace) -> list[TrainResult]:
    train = train_logreg if args.task == "logreg" else train_softmax
    result = train(Tensor, data, args.steps, args.lr, args.momentum, args.C, progress=not args.quiet)
    _print_metrics(result)
    if not args.no_reference:
        ref = sklearn_logistic(data, C=args.C)
        result.metrics.update({f"sklearn_{k}": v for k, v in ref.items()})
        shown = f"val_acc={ref['val_acc']:.4f} test_acc={ref['test_acc']:.4f}"
        print(f"[sklearn LogisticRegression C={args.C}] {shown}")
    return [result]


def cmd_train(args: argparse.Namespace) -> int:
    if args.task in zoo_cli.TASKS:
        return zoo_cli.cmd_train(args)
    if args.stage is None:
        args.stage = 1
    for key, value in DEFAULTS[args.task].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    datasets = DATASETS[args.task]
    name = args.data or next(iter(datasets))
    if name not in datasets:
        raise SystemExit(f"sitp train {args.task}: --data must be one of {sorted(datasets)}, got {name!r}")
    Tensor = load_stage(args.stage).Tensor
    data = datasets[name](args.seed)
    print(f"sitp train {args.task} --stage {args.stage} ({STAGES[args.stage]}): {data}")
    run = _run_linreg if args.task == "linreg" else _run_classifier
    results = run(Tensor, data, args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else cache_dir() / "runs" / f"{args.task}-stage{args.stage}-{stamp}"
    for r in results:
        png = save_loss_curve(
            r.losses, out / f"{r.task}-{r.method}-loss.png", f"{r.task} ({r.method}) on {r.data}"
        )
        print(f"loss curve: {png}")
    summary = [{"task": r.task, "data": r.data, "method": r.method, "metrics": r.metrics} for r in results]
    (out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"metrics: {out / 'metrics.json'}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from common import stagediff

    flags = [*(["--stat"] if args.stat else []), *(["--no-tests"] if args.no_tests else [])]
    return stagediff.main([*args.stages, *flags])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sitp", description="Structure and Interpretation of Tensor Programs"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a model from the zoo on one stage")
    train.add_argument("task", choices=sorted(DATASETS) + list(zoo_cli.TASKS), help="which model")
    train.add_argument(
        "--stage", type=int, default=None, choices=sorted(STAGES),
        help="which stage's Tensor to use (default: 1 for the GLMs, 2 for the zoo, which needs autograd)",
    )
    train.add_argument(
        "--data", default=None, help="data set (linreg: housing|diabetes; softmax: mnist5k|digits8x8)"
    )
    train.add_argument("--method", default="both", choices=["normal", "gd", "both"], help="linreg solver")
    train.add_argument("--steps", type=int, default=None, help="gradient-descent steps")
    train.add_argument("--lr", type=float, default=None, help="learning rate")
    train.add_argument("--momentum", type=float, default=None, help="Nesterov momentum (0 = plain GD)")
    train.add_argument("--C", type=float, default=1.0, help="inverse L2 strength, as sklearn's C")
    train.add_argument("--seed", type=int, default=0,
                       help="GLMs: seed of the train/val/test split; zoo: seed of the init and the batches")
    train.add_argument("--out", default=None, help="output dir (default: $SITP_CACHE/runs/...)")
    train.add_argument("--no-reference", action="store_true", help="skip the sklearn reference fit")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    zoo_cli.add_train_arguments(train)
    train.set_defaults(func=cmd_train)
    zoo_cli.add_sample_parser(commands)
    chat_cli.add_parsers(commands)
    viz_cli.add_parser(commands)
    diff = commands.add_parser("diff", help="the lesson between two stages (files that changed, lines per file)")
    diff.add_argument("stages", nargs="*", default=["1", "2"], help="two stage numbers, e.g. 1 2")
    diff.add_argument("--stat", action="store_true", help="only the changed-lines table")
    diff.add_argument("--no-tests", action="store_true", help="leave out the stages' tests/ folders")
    diff.set_defaults(func=cmd_diff)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (RuntimeError, CheckpointError) as e:
        # missing data or stage, an unusable checkpoint: the message names the cause, a traceback would bury it
        print(f"sitp: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
