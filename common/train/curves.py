"""Loss curves saved as PNG with matplotlib's Agg canvas (no display, no global backend switch)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def save_loss_curve(losses: list[float], path: str | Path, title: str = "", log_y: bool = True) -> Path:
    """Plot loss against step and write a PNG to ``path`` (parent dirs are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(range(1, len(losses) + 1), losses, marker="o" if len(losses) == 1 else None)
    if log_y and losses and min(losses) > 0:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path
