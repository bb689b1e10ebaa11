"""Draw the shipped model's loss curve as an SVG (no plotting library needed).

    python scripts/loss_plot.py runs/shakespeare.log.jsonl docs/loss_curve.svg

Reads the JSON-lines log that `python -m tinygpt.train` writes beside its checkpoint: the
training loss of every step (smoothed over a window) and the validation loss where measured.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 720, 400, 60, 20, 30, 50


def read_log(path: Path) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(step, train loss) and (step, validation loss); a resumed run's repeats keep the last."""
    train: dict[int, float] = {}
    val: dict[int, float] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        train[rec["step"]] = rec["loss"]
        if rec.get("val_loss") is not None:
            val[rec["step"]] = rec["val_loss"]
    return sorted(train.items()), sorted(val.items())


def smooth(points: list[tuple[int, float]], window: int = 25) -> list[tuple[int, float]]:
    out = []
    for i in range(len(points)):
        chunk = points[max(0, i - window + 1) : i + 1]
        out.append((points[i][0], sum(v for _, v in chunk) / len(chunk)))
    return out


def svg(train: list[tuple[int, float]], val: list[tuple[int, float]]) -> str:
    steps = [s for s, _ in train]
    values = [v for _, v in train] + [v for _, v in val]
    x_max, y_min, y_max = max(steps), min(values) * 0.95, min(max(values), 9.0)

    def x(step: float) -> float:
        return PAD_L + (WIDTH - PAD_L - PAD_R) * step / x_max

    def y(value: float) -> float:
        value = min(value, y_max)
        return PAD_T + (HEIGHT - PAD_T - PAD_B) * (y_max - value) / (y_max - y_min)

    def line(points, colour, width) -> str:
        coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in points)
        return f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{coords}"/>'

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    n_ticks = 6
    for i in range(n_ticks + 1):  # horizontal grid with loss labels
        value = y_min + (y_max - y_min) * i / n_ticks
        parts.append(f'<line x1="{PAD_L}" x2="{WIDTH - PAD_R}" y1="{y(value):.1f}" '
                     f'y2="{y(value):.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{PAD_L - 8}" y="{y(value) + 4:.1f}" text-anchor="end">'
                     f'{value:.1f}</text>')
    for i in range(n_ticks + 1):  # step labels
        step = x_max * i / n_ticks
        parts.append(f'<text x="{x(step):.1f}" y="{HEIGHT - PAD_B + 18}" text-anchor="middle">'
                     f'{step:.0f}</text>')
    parts.append(line(smooth(train), "#0072B2", 1.5))  # Okabe-Ito blue
    parts.append(line(val, "#E69F00", 2.5))  # Okabe-Ito orange
    for s, v in val:
        parts.append(f'<circle cx="{x(s):.1f}" cy="{y(v):.1f}" r="3" fill="#E69F00"/>')
    parts += [
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle">optimiser step</text>',
        f'<text x="14" y="{HEIGHT / 2}" transform="rotate(-90 14 {HEIGHT / 2})" '
        'text-anchor="middle">cross-entropy (nats per token)</text>',
        f'<text x="{WIDTH - PAD_R - 250}" y="{PAD_T}" fill="#0072B2">'
        'training loss (25-step mean)</text>',
        f'<text x="{WIDTH - PAD_R - 250}" y="{PAD_T + 16}" fill="#E69F00">'
        'validation loss (held-out plays)</text>',
        "</svg>",
    ]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    train, val = read_log(Path(argv[0]))
    Path(argv[1]).write_text(svg(train, val))
    print(f"wrote {argv[1]}: {len(train)} steps, {len(val)} validation points")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
