"""Reading and driving pytree-lab widgets in the page: the DOM side of the browser tests.

Selectors follow the widgets' DOM contract (role="tree", role="treeitem", data-path) and
what the pytree-lab slider (a native range input) and bqplot draw.
"""

from __future__ import annotations

import json
import re

from .harness import Timeouts


def css_string(text: str) -> str:
    """A CSS attribute-selector string literal (JSON escaping is valid CSS escaping here)."""
    return json.dumps(text)


def tree_item(scope, path: str):
    return scope.locator(f'[role="treeitem"][data-path={css_string(path)}]')


def tree_cell(scope, path: str, column: str):
    """The cell of one tree (column) in the row of `path`: the row's own line, not a child's."""
    return tree_item(scope, path).locator(f":scope > .ptl-line > .ptl-cell[data-column={css_string(column)}]")


def selected_paths(scope) -> list[str]:
    return scope.locator('[role="treeitem"][aria-selected="true"]').evaluate_all("els => els.map(e => e.dataset.path)")


def wait_selected(scope, path: str) -> None:
    """Wait until exactly `path` is the selected tree item in `scope`."""
    tree_item(scope, path).and_(scope.locator('[aria-selected="true"]')).wait_for(
        timeout=Timeouts.ms(Timeouts.ROUND_TRIP)
    )


def slider(scope, label: str):
    """The pytree-lab slider whose visible label is exactly `label`."""
    return scope.locator(".ptl-slider").filter(
        has=scope.page.locator("label.ptl-slider-label", has_text=re.compile(f"^{re.escape(label)}$"))
    )


def slider_handle(scope, label: str):
    """The slider's native range input (it takes focus and Arrow/Home/End keys)."""
    return slider(scope, label).locator('input[type="range"]')


def slider_aria_value(scope, label: str) -> float:
    """The position the range input shows (the browser snaps what it shows to the step grid;
    the kernel keeps the exact value until the person moves the slider)."""
    return float(slider_handle(scope, label).input_value())


def slider_readout(scope, label: str) -> str:
    return slider(scope, label).locator("output.ptl-slider-readout").text_content()


# Everything in screen coordinates, so transforms inside bqplot's SVG do not matter.
# The axes of a bqplot figure: each one's tick texts and positions (and whether it stands upright).
_AXES = """
  const mid = (r) => ({x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2});
  const axes = [...fig.querySelectorAll('svg.svg-background g.axis')].map(axis => {
    const ticks = [...axis.querySelectorAll(':scope > g.tick')];
    return {
      vertical: ticks.length > 1 && ticks.every(t => /^translate\\(0[ ,]/.test(t.getAttribute('transform') || '')),
      ticks: ticks.map(t => ({
        text: t.querySelector('text').textContent,
        ...mid(t.querySelector('line').getBoundingClientRect()),
      })),
      label: [...axis.querySelectorAll(':scope > text')].map(t => t.textContent).join(' '),
    };
  });
"""

_READ_BARS = (
    "(fig) => {"
    + _AXES
    + """
  const groups = [...fig.querySelectorAll('g.bargroup')].map(g => ({
    bars: [...g.querySelectorAll('rect.bar')].map(r => {
      const b = r.getBoundingClientRect();
      return {top: b.top, bottom: b.bottom, x: (b.left + b.right) / 2, height: +r.getAttribute('height')};
    }),
  }));
  const zero = fig.querySelector('line.zeroLine');
  return {
    axes,
    groups,
    zero: zero ? mid(zero.getBoundingClientRect()).y : null,
    legend: [...fig.querySelectorAll('text.legendtext')].map(t => t.textContent),
    texts: [...fig.querySelectorAll('text')].map(t => t.textContent),
  };
}
"""
)

# The loss line: its points in screen coordinates, and the axes to turn them into numbers.
_READ_LINE = (
    "(fig) => {"
    + _AXES
    + """
  const path = fig.querySelector('path.line');
  const points = [];
  if (path) {
    const m = path.getScreenCTM();
    const nums = (path.getAttribute('d') || '').match(/-?[\\d.]+(e[-+]?\\d+)?/g) || [];
    for (let i = 0; i + 1 < nums.length; i += 2) {
      const p = new DOMPoint(+nums[i], +nums[i + 1]).matrixTransform(m);
      points.push({x: p.x, y: p.y});
    }
  }
  return {axes, points};
}
"""
)


def _number(text: str) -> float:
    return float(text.replace("\u2212", "-").strip())


def _x_and_y_axes(axes: list[dict]) -> tuple[dict, dict]:
    vertical = [a for a in axes if a["vertical"]]
    horizontal = [a for a in axes if not a["vertical"]]
    assert len(vertical) == 1 and len(horizontal) == 1, f"expected one x and one y axis: {axes}"
    return horizontal[0], vertical[0]


class _Scale:
    """Pixel -> value along one axis: least squares through every tick (tick labels are rounded
    for display, positions are not)."""

    def __init__(self, axis: dict, coordinate: str):
        ticks = [(t[coordinate], _number(t["text"])) for t in axis["ticks"]]
        n = len(ticks)
        self.mean_pixel = sum(p for p, _ in ticks) / n
        self.mean_value = sum(v for _, v in ticks) / n
        self.slope = sum((p - self.mean_pixel) * (v - self.mean_value) for p, v in ticks) / sum(
            (p - self.mean_pixel) ** 2 for p, _ in ticks
        )

    def __call__(self, pixel: float) -> float:
        return self.mean_value + self.slope * (pixel - self.mean_pixel)

    @property
    def pixels_per_unit(self) -> float:
        return abs(1.0 / self.slope)

    @property
    def zero_pixel(self) -> float:
        return self.mean_pixel - self.mean_value / self.slope


def read_bars(figure) -> dict:
    """The values bqplot drew, read from the SVG: {label: [before, after]}, plus the axis texts.

    Pixel positions of the y-axis ticks give the pixel -> value map; each bar's value is its
    end away from zero. Bars are matched to x labels by horizontal position.
    """
    raw = figure.evaluate(_READ_BARS)
    x_axis, y_axis = _x_and_y_axes(raw["axes"])
    value = _Scale(y_axis, "y")

    out: dict[str, list[float]] = {}
    xticks = x_axis["ticks"]
    for group in raw["groups"]:
        values = []
        for bar in group["bars"]:
            ends = [value(bar["top"]), value(bar["bottom"])]
            values.append(max(ends, key=abs) if bar["height"] > 0 else 0.0)
        cx = sum(b["x"] for b in group["bars"]) / len(group["bars"])
        label = min(xticks, key=lambda t: abs(t["x"] - cx))["text"]
        out[label] = values
    return {
        "bars": out,
        "x_labels": [t["text"] for t in xticks],
        "pixels_per_unit": value.pixels_per_unit,
        "zero_pixel": raw["zero"],
        "zero_from_ticks": value.zero_pixel,
        "legend": raw["legend"],
        "texts": raw["texts"],
    }


def read_line(figure) -> dict:
    """The loss curve bqplot drew: (step, loss) per point, read through the axes' ticks."""
    raw = figure.evaluate(_READ_LINE)
    x_axis, y_axis = _x_and_y_axes(raw["axes"])
    x_of, y_of = _Scale(x_axis, "x"), _Scale(y_axis, "y")
    return {"points": [(x_of(p["x"]), y_of(p["y"])) for p in raw["points"]], "pixels_per_unit": y_of.pixels_per_unit}


# Effective colours: JupyterLab's text colours are often translucent (rgba(0,0,0,.54)),
# so the text colour is composited over the background stack it sits on.
_COLOURS = """
(el) => {
  const parse = (c) => {
    const v = (c.match(/[\\d.]+/g) || []).map(Number);
    return v.length === 3 ? [...v, 1] : v.length === 4 ? v : [0, 0, 0, 0];
  };
  const over = (top, under) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const layers = [];
  for (let n = el; n; n = n.parentElement) {
    const c = parse(getComputedStyle(n).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255, 1];
  for (const layer of layers.reverse()) bg = over(layer, bg);
  // SVG text (bqplot's labels) is painted with fill, not color
  const style = getComputedStyle(el);
  const fg = over(parse(el instanceof SVGElement ? style.fill : style.color), bg);
  return {fg: fg.slice(0, 3), bg: bg.slice(0, 3)};
}
"""


def contrast_ratio(locator) -> float:
    """WCAG 2 contrast ratio of an element's text against the background it sits on."""
    colours = locator.evaluate(_COLOURS)

    def luminance(rgb):
        def channel(c):
            c = c / 255.0
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (channel(c) for c in rgb)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((luminance(colours["fg"]), luminance(colours["bg"])), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
