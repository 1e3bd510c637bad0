#!/usr/bin/env python3
"""Draws Berth's app icon and writes every size Tauri 2 bundles.

The mark: a white "B" above a wave (a boat's berth) on a deep-navy rounded square. It is
drawn on a 100x100 grid, the same one as the SVG mark in ui/header.js and ui/index.html, at
2048 px and scaled down with a Lanczos filter, so every size comes from one drawing.

Usage:  python3 icons/make-icons.py        (needs Pillow: `pip install pillow`
                                            or `apt-get install python3-pil`)
Writes: 32x32.png, 128x128.png, 128x128@2x.png and 256x256.png (256), icon.png (512), icon.ico (16-256),
        icon.icns (16-1024) next to this script. All PNGs are 8-bit RGBA.
"""

from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
MASTER = 2048
K = MASTER / 100.0  # grid unit in pixels

NAVY = (21, 57, 91, 255)  # #15395b, the page's --brand
WHITE = (255, 255, 255, 255)

CORNER = 22  # rounded-square radius, grid units
B_STROKE = 9
WAVE_STROKE = 6


def px(v):
    return v * K


def rect(draw, x0, y0, x1, y1, fill):
    draw.rectangle([px(x0), px(y0), px(x1), px(y1)], fill=fill)


def right_half_ring(draw, cx, cy, r, width, fill):
    """The right half of a ring of radius r (centre line) and the given stroke width."""
    outer = r + width / 2
    draw.pieslice(
        [px(cx - outer), px(cy - outer), px(cx + outer), px(cy + outer)],
        start=-90, end=90, fill=fill,
    )


def quad(p0, p1, p2, t):
    u = 1 - t
    return (
        u * u * p0[0] + 2 * u * t * p1[0] + t * t * p2[0],
        u * u * p0[1] + 2 * u * t * p1[1] + t * t * p2[1],
    )


def wave_points():
    """M23 83 q6.75 -6 13.5 0 t13.5 0 t13.5 0 t13.5 0, sampled."""
    x, y, step = 23.0, 83.0, 13.5
    pts = []
    for i in range(4):
        dy = -6 if i % 2 == 0 else 6
        p0, p1, p2 = (x, y), (x + step / 2, y + dy), (x + step, y)
        for j in range(200):
            pts.append(quad(p0, p1, p2, j / 200))
        x += step
    pts.append((x, y))
    return pts


def draw_master():
    # Background: a rounded square, transparent outside it.
    img = Image.new("RGBA", (MASTER, MASTER), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([0, 0, MASTER - 1, MASTER - 1], radius=px(CORNER), fill=NAVY)

    # The B, as the SVG path M52 20 H33 V68 H55 A12 12 0 0 0 55 44 H33 M33 44 H52 A12 12 0 0 0 52 20
    # stroked 9 wide: bowls first (solid half discs), then their counters cut out in navy, then
    # the straight strokes on top.
    h = B_STROKE / 2
    right_half_ring(d, 52, 32, 12, B_STROKE, WHITE)  # upper bowl
    right_half_ring(d, 55, 56, 12, B_STROKE, WHITE)  # lower bowl
    inner = 12 - h
    d.pieslice([px(52 - inner), px(32 - inner), px(52 + inner), px(32 + inner)], -90, 90, fill=NAVY)
    d.pieslice([px(55 - inner), px(56 - inner), px(55 + inner), px(56 + inner)], -90, 90, fill=NAVY)
    rect(d, 33 - h, 20 + h, 52, 44 - h, NAVY)  # upper counter, straight part
    rect(d, 33 - h, 44 + h, 55, 68 - h, NAVY)  # lower counter, straight part
    rect(d, 33 - h, 20 - h, 33 + h, 68 + h, WHITE)  # stem
    rect(d, 33 - h, 20 - h, 52, 20 + h, WHITE)  # top
    rect(d, 33 - h, 44 - h, 55, 44 + h, WHITE)  # middle
    rect(d, 33 - h, 68 - h, 55, 68 + h, WHITE)  # bottom

    # The wave: round-capped stroke as overlapping discs along the curve.
    r = px(WAVE_STROKE / 2)
    for x, y in wave_points():
        d.ellipse([px(x) - r, px(y) - r, px(x) + r, px(y) + r], fill=WHITE)
    return img


def sized(master, size):
    return master.resize((size, size), Image.LANCZOS)


def main():
    master = draw_master()
    pngs = {
        "32x32.png": 32,
        "128x128.png": 128,
        "128x128@2x.png": 256,
        "256x256.png": 256,
        "icon.png": 512,
    }
    for name, size in pngs.items():
        sized(master, size).save(HERE / name, format="PNG", optimize=True)

    ico_sizes = [16, 24, 32, 48, 64, 128, 256]
    base = sized(master, 256)
    base.save(
        HERE / "icon.ico",
        format="ICO",
        sizes=[(s, s) for s in ico_sizes],
        append_images=[sized(master, s) for s in ico_sizes if s != 256],
    )

    icns_base = sized(master, 1024)
    icns_base.save(
        HERE / "icon.icns",
        format="ICNS",
        append_images=[sized(master, s) for s in (16, 32, 64, 128, 256, 512)],
    )

    for name in list(pngs) + ["icon.ico", "icon.icns"]:
        with Image.open(HERE / name) as im:
            print(f"{name}: {im.format} {im.size[0]}x{im.size[1]} {im.mode}")


if __name__ == "__main__":
    main()
