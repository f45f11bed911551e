// @ts-check
// Slider view: one number of the person's model on a native <input type="range">.
//
// Traits (same names in slider.py), all written by Python only:
//   value, min, max, step   numbers (null for a non-finite value, shown as text)
//   description             the visible label
//   path                    the full tree path: the title (tooltip) and accessible description
//   ack                     seq of the last move the kernel applied
// The page never writes a trait. A move sends {type: "move", value, seq, view}; the kernel keeps the
// newest. One move is in flight at a time: while the kernel has not acknowledged the last move
// sent (`ack`), the page keeps only the newest position and sends it the moment the ack arrives,
// when the person lets go (key up, pointer up), or after HOLD_MS should an ack be lost. A fast
// drag therefore costs the page one update per round trip instead of a queue of stale ones, and
// the final position goes out as soon as the drag ends. Until the person moves this slider, the
// page sends nothing, so the kernel keeps the exact value it was given (a range input snaps what
// it *shows* to its step grid; that snapped position never travels back).
//
// All text goes through textContent / attributes: never interpreted as HTML.

/**
 * The synced traits (slider.py), all the kernel's.
 * @typedef {{ value: number | null, min: number | null, max: number | null, step: number | null,
 *             description: string, path: string, ack: number }} Model
 * @typedef {import("@anywidget/types").AnyModel<Model>} SliderModel
 */

let uid = 0;
const HOLD_MS = 250;

/** Per model (several views of one slider share it): what was sent, what waits. */
class Mover {
  /** @param {SliderModel} model */
  constructor(model) {
    this.model = model;
    this.sent = 0; // seq of the last move sent
    this.view = Math.random().toString(36).slice(2, 12); // this page's id: its moves only go forward
    /** @type {number | null} the newest position not sent yet (a move is in flight) */
    this.held = null;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
    model.on("change:ack", () => this.acked());
  }

  /** the page is ahead of the kernel: a move is in flight or waiting */
  get ahead() {
    return this.held !== null || this.sent > this.model.get("ack");
  }

  move(/** @type {number} */ v) {
    if (this.sent > this.model.get("ack")) {
      this.held = v;
      if (this.timer === null) this.timer = setTimeout(() => this.release(), HOLD_MS);
      return;
    }
    this.send(v);
  }

  send(/** @type {number} */ v) {
    this.sent = Math.max(this.sent, this.model.get("ack")) + 1;
    this.model.send({ type: "move", value: v, seq: this.sent, view: this.view });
  }

  /** the person let go (key up, pointer up): the newest position goes now, without waiting */
  letGo() {
    if (this.held !== null) this.release();
  }

  acked() {
    if (this.held !== null && this.model.get("ack") >= this.sent) this.release();
  }

  release() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const v = this.held;
    this.held = null;
    if (v !== null) this.send(v);
  }
}

/** @type {WeakMap<SliderModel, Mover>} */
const movers = new WeakMap();

// Characters that draw nothing or reorder their neighbours (controls, bidi overrides and
// isolates, zero-width): shown as escapes, as Python shows them (_format.visible)
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
/** @type {Record<string, string>} */
const ESCAPES = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const visible = (/** @type {string} */ text) => text.replace(INVISIBLE, (ch) => ESCAPES[ch] ||
  (ch.charCodeAt(0) < 0x100 ? `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}` : `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`));

/**
 * A label into `node` with each name of the person's isolated (<bdi>): `وزن[0]` shows `وزن`
 * then `[0]`, not `[0]وزن`. Our own syntax (`/` between keys, `[0]`, `[0,1]` indices) stays
 * outside the isolates; the text content is the label, unchanged.
 * @param {HTMLElement} node @param {string} text
 */
function isolatedLabel(node, text) {
  node.replaceChildren();
  for (const part of visible(text).split(/(\/|\[[0-9, ]*\])/)) {
    if (!part) continue;
    if (part === "/") node.append(part, h("wbr")); // a long label wraps after a key
    else if (/^\[[0-9, ]*\]$/.test(part)) node.append(part);
    else node.append(h("bdi", "", part));
  }
}

/**
 * A readout with the value's own digits (up to 6 significant), never the step's rounding.
 * @param {number | null | undefined} v
 */
function fmt(v) {
  if (v === null || v === undefined) return "not finite";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e-4 && a < 1e6) return String(Number(v.toPrecision(6)));
  return v.toExponential(3).replace(/\.?0+e/, "e");
}

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  // each widget may load its own copy of this module, so a module counter alone could repeat
  const id = `ptl-slider-${++uid}-${Math.random().toString(36).slice(2, 10)}`;
  const root = h("div", "ptl-slider");
  keepKeys(root);
  const label = h("label", "ptl-slider-label");
  label.htmlFor = id;
  const input = h("input", "ptl-slider-input");
  input.type = "range";
  input.id = id;
  const readout = h("output", "ptl-slider-readout");
  readout.setAttribute("for", id);
  readout.setAttribute("aria-hidden", "true"); // aria-valuetext says it to screen readers
  root.append(label, input, readout);
  el.append(root);

  let mover = movers.get(model);
  if (!mover) movers.set(model, (mover = new Mover(model)));

  const show = (/** @type {number|null} */ v) => {
    readout.textContent = fmt(v);
    input.setAttribute("aria-valuetext", fmt(v));
  };

  const update = () => {
    const path = model.get("path") || model.get("description");
    isolatedLabel(label, model.get("description"));
    root.title = visible(path);
    input.setAttribute("aria-description", visible(path));
    const lo = model.get("min"), hi = model.get("max"), step = model.get("step");
    // order matters: the range first, so the value is not clamped by a stale min/max
    if (lo !== null) input.min = String(lo);
    if (hi !== null) input.max = String(hi);
    input.step = step !== null && step > 0 ? String(step) : "any";
    // a move of ours is still on its way: the page keeps what the person chose
    if (mover.ahead) return;
    const v = model.get("value");
    if (v !== null) input.value = String(v);
    show(v);
  };

  input.addEventListener("input", () => {
    const v = input.valueAsNumber;
    if (!Number.isFinite(v)) return;
    if (kernelGone(el)) {
      // no kernel will answer: the slider stays where the last step left it (the notice says why)
      const held = model.get("value");
      if (held !== null) input.value = String(held);
      return;
    }
    show(v);
    mover.move(v);
  });

  // The range input's own keys move it; the notebook's shortcuts (which would cancel the
  // move: ArrowUp/ArrowDown select cells) must not see them.
  const KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp", "PageDown"]);
  input.addEventListener("keydown", (e) => { if (KEYS.has(e.key)) e.stopPropagation(); });
  // letting go ends a drag: the position held for the ack goes out at once (one round trip to
  // the final value, not one plus the wait for the ack)
  for (const ev of ["keyup", "pointerup", "pointercancel"]) input.addEventListener(ev, () => mover.letGo());
  // A click on the thumb leaves the slider focused, so arrow keys go on from where the mouse
  // left it: a notebook's own mouse handling (Notebook 7) may move the focus to the cell after
  // the press; the focus comes back once the click is over.
  input.addEventListener("click", () => {
    if (document.activeElement !== input) input.focus({ preventScroll: true });
    setTimeout(() => { if (document.activeElement !== input && root.isConnected) input.focus({ preventScroll: true }); }, 0);
  });

  const events = ["change:value", "change:min", "change:max", "change:step", "change:ack",
                  "change:description", "change:path"];
  for (const ev of events) model.on(ev, update);
  update();
  return () => { for (const ev of events) model.off(ev, update); unwatchKernel(); };
}

// A SliderModule (slider.py) carries this module for many sliders: initialize() hands `render`
// to their views (slider_proxy.js, through anywidget's host.getWidget). A Slider of its own
// (without a shared module) renders with it directly.
export default { initialize: () => ({ render }), render };
