"""zg.viz.colour: how a colour reads: to every eye, and on a light or a dark page.

Where it sits: under :mod:`zg.viz.common` (which picks the palettes with it) and
``tools/figure_check.py`` (which checks every drawn figure with it). Plain Python, no
dependency: a colour is parsed as plotly writes it (``#RRGGBB``, ``#RGB``, ``rgb()``,
``rgba()``, a few CSS names), and

* :func:`simulate` is what a person with deuteranopia or protanopia sees: the matrices of
  Machado, Oliveira and Fernandes, "A Physiologically-based Model for Simulation of Color
  Vision Deficiency", IEEE TVCG 15(6), 2009, at severity 1.0 (their Table, the values the
  authors publish at https://www.inf.ufrgs.br/~oliveira/pubs_files/CVD_Simulation/
  CVD_Simulation.html), applied to linear sRGB (as colorspacious does) and clipped to the
  gamut;
* :func:`delta_e` is the CIE76 colour difference (Euclidean distance in CIELAB, D65 white):
  about 2.3 is a just-noticeable difference; two series need far more to be told apart at a
  glance in a legend-sized swatch (see :data:`DISTINCT` );
* :func:`contrast` is WCAG 2's contrast ratio of two colours' relative luminances.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "parse",
    "alpha",
    "to_lab",
    "simulate",
    "delta_e",
    "contrast",
    "luminance",
    "MACHADO",
    "DISTINCT",
    "LIGHT_PAGE",
    "DARK_PAGE",
]

# Machado et al. 2009, severity 1.0, on linear RGB.
MACHADO = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
}
# Two series told apart by colour alone need at least this CIE76 difference, with normal vision
# and under each simulated deficiency. 10 is about four times a just-noticeable difference: the
# step between neighbouring hues of a qualitative palette made for it (Okabe-Ito's closest pair
# under deuteranopia is about 12 apart); the red/green pair this replaces was 1.7.
DISTINCT = 10.0
LIGHT_PAGE = "#ffffff"  # JupyterLab's light theme, the HTML report
DARK_PAGE = "#111111"  # JupyterLab's dark theme (its --jp-layout-color0 is #111111)

_NAMES = {
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "grey": (128, 128, 128),
    "gray": (128, 128, 128),
    "red": (255, 0, 0),
    "green": (0, 128, 0),
    "blue": (0, 0, 255),
    "orange": (255, 165, 0),
    "yellow": (255, 255, 0),
    "purple": (128, 0, 128),
    "transparent": (0, 0, 0),
}
_FUNC = re.compile(r"^rgba?\(\s*([^)]*)\)$")


def _rgba(color: str) -> tuple[float, float, float, float]:
    text = str(color).strip().lower()
    if text.startswith("#"):
        hexes = text[1:]
        if len(hexes) in (3, 4):
            hexes = "".join(c * 2 for c in hexes)
        if len(hexes) not in (6, 8) or not re.fullmatch(r"[0-9a-f]+", hexes):
            raise ValueError(f"not a colour: {color!r}")
        parts = [int(hexes[i : i + 2], 16) for i in range(0, len(hexes), 2)]
        a = parts[3] / 255 if len(parts) == 4 else 1.0
        return float(parts[0]), float(parts[1]), float(parts[2]), a
    match = _FUNC.match(text)
    if match:
        values = [v.strip() for v in match.group(1).replace("/", ",").split(",") if v.strip()]
        if len(values) not in (3, 4):
            raise ValueError(f"not a colour: {color!r}")
        rgb = [float(v[:-1]) * 2.55 if v.endswith("%") else float(v) for v in values[:3]]
        a = 1.0
        if len(values) == 4:
            a = float(values[3][:-1]) / 100 if values[3].endswith("%") else float(values[3])
        return rgb[0], rgb[1], rgb[2], a
    if text in _NAMES:
        return (*map(float, _NAMES[text]), 0.0 if text == "transparent" else 1.0)
    raise ValueError(f"not a colour: {color!r}")


def parse(color: str) -> tuple[float, float, float]:
    """``color`` as (r, g, b), each 0-255 (its alpha dropped)."""
    return _rgba(color)[:3]


def alpha(color: str) -> float:
    """The opacity of ``color``: 0 transparent, 1 opaque."""
    return _rgba(color)[3]


def _linear(c: float) -> float:
    c = c / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _gamma(c: float) -> float:
    c = min(max(c, 0.0), 1.0)
    return 255 * (12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(color: str | Sequence[float], deficiency: str) -> tuple[float, float, float]:
    """What ``color`` looks like with ``deficiency`` ("deuteranopia" or "protanopia"; "normal"
    gives it back), as (r, g, b) 0-255."""
    rgb = parse(color) if isinstance(color, str) else tuple(float(c) for c in color)
    if deficiency == "normal":
        return rgb
    if deficiency not in MACHADO:
        raise ValueError(
            f"deficiency must be one of {sorted(MACHADO)} or 'normal', got {deficiency!r}"
        )
    lin = [_linear(c) for c in rgb]
    return tuple(_gamma(sum(m * v for m, v in zip(row, lin))) for row in MACHADO[deficiency])


def to_lab(color: str | Sequence[float]) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour."""
    rgb = parse(color) if isinstance(color, str) else tuple(float(c) for c in color)
    r, g, b = (_linear(c) for c in rgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e(a: str, b: str, deficiency: str = "normal") -> float:
    """CIE76 difference of ``a`` and ``b`` as seen with ``deficiency`` (default: normal vision)."""
    la, lb = to_lab(simulate(a, deficiency)), to_lab(simulate(b, deficiency))
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5


def luminance(color: str) -> float:
    """WCAG 2's relative luminance of ``color`` (0 black, 1 white)."""
    r, g, b = (_linear(c) for c in parse(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of ``a`` on ``b`` (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
