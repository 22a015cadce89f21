"""Draw the Teams app icons once (the PNGs beside this script are committed; run again only to change them).

    .venv/bin/python bot/teams/manifest/make_icons.py

Teams asks for (Microsoft's "app icons" guidance for the app package):

- ``color.png``: 192 x 192, full colour; here the accent colour's rounded square with a white speech
  bubble holding a check mark (answers you can verify), the glyph inside the central 120 x 120 safe area;
- ``outline.png``: 32 x 32, the same glyph as a white outline on a **transparent** background (every
  pixel white, only the alpha varies), which Teams tints for its app bar.

Shapes are drawn at 8x and scaled down with Lanczos resampling, so edges are smooth. Needs Pillow (a
test/dev dependency, not the bot's).
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
#: The manifest's ``accentColor``: the colour icon's background.
ACCENT = (0x3A, 0x5B, 0xA0)
SCALE = 8


def _glyph(draw: ImageDraw.ImageDraw, box: tuple[float, float, float, float], *, fill, stroke: float,
           check: tuple[int, ...] | int, outline_only: bool) -> None:
    """A speech bubble (rounded rectangle with a tail at its lower left) with a check mark inside, in ``box``."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    body = (x0, y0, x1, y0 + h * 0.78)
    radius = h * 0.2
    tail = [(x0 + w * 0.18, body[3] - stroke), (x0 + w * 0.16, y1), (x0 + w * 0.42, body[3] - stroke)]
    if outline_only:
        draw.rounded_rectangle(body, radius, outline=fill, width=round(stroke))
        draw.polygon(tail, fill=fill)
        inner = [(x0 + w * 0.18 + stroke * 1.2, body[3] - stroke * 2.2), (x0 + w * 0.2, y1 - stroke * 1.6),
                 (x0 + w * 0.42 - stroke * 1.3, body[3] - stroke * 2.2)]
        draw.polygon(inner, fill=0)
    else:
        draw.rounded_rectangle(body, radius, fill=fill)
        draw.polygon(tail, fill=fill)
    cx, cy = (body[0] + body[2]) / 2, (body[1] + body[3]) / 2
    mark = [(cx - w * 0.2, cy + h * 0.0), (cx - w * 0.05, cy + h * 0.15), (cx + w * 0.22, cy - h * 0.16)]
    draw.line(mark, fill=check, width=round(stroke * 1.2), joint="curve")


def color_icon(size: int = 192) -> Image.Image:
    """The colour icon: accent background, white bubble, accent check mark (RGBA, opaque)."""
    big = size * SCALE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    draw.rounded_rectangle((0, 0, big - 1, big - 1), big * 0.18, fill=(*ACCENT, 255))
    safe = (size - 120) / 2 * SCALE
    _glyph(draw, (safe, safe + 6 * SCALE, big - safe, big - safe + 4 * SCALE), fill=(255, 255, 255, 255),
           stroke=9 * SCALE, check=(*ACCENT, 255), outline_only=False)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def outline_icon(size: int = 32) -> Image.Image:
    """The outline icon: white glyph, transparent elsewhere (all pixels white; only alpha varies)."""
    big = size * SCALE
    mask = Image.new("L", (big, big), 0)
    draw = ImageDraw.Draw(mask)
    pad = 2 * SCALE
    _glyph(draw, (pad, pad + SCALE, big - pad, big - pad), fill=255, stroke=2.2 * SCALE, check=255,
           outline_only=True)
    alpha = mask.resize((size, size), Image.Resampling.LANCZOS)
    img = Image.new("RGBA", (size, size), (255, 255, 255, 0))
    img.putalpha(alpha)
    return img


def main(out: Path = HERE) -> int:
    """Write ``color.png`` and ``outline.png`` into ``out``."""
    color_icon().save(out / "color.png", optimize=True)
    outline_icon().save(out / "outline.png", optimize=True)
    print(f"wrote {out / 'color.png'} and {out / 'outline.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
