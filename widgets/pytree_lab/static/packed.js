// @ts-check
// PackedView (pytree_lab.packed): packed positions <-> tree elements, for one or more layouts.
//
// Python owns the layouts and the highlights. The page writes one intent trait, `selected`
// ({layout, kind: "leaf" | "position", key}); `highlight` ({layout, positions, elements}) and
// `readout` come back from Python. All text goes through textContent (keys are user data).
//
// The view is one Tab stop (a big model draws thousands of positions): one of its buttons is in
// the Tab order, the last one focused; the arrow keys move between them (Right/Down the next,
// Left/Up the one before, Home/End the first and the last), Enter or Space selects.

/**
 * @typedef {{ i: number, value: string, label: string }} Position
 * @typedef {{ path: string, shape: number[], elements: {i: number, label: string}[], hidden: number }} Leaf
 * @typedef {{ layout?: number, kind?: "leaf" | "position", key?: string | number }} Selection
 * @typedef {{ layouts_data: {name: string, positions: Position[], more: number, leaves: Leaf[]}[],
 *             selected: Selection, highlight: {layout?: number, positions?: number[], elements?: string[]},
 *             readout: string }} Model
 */

// Characters that draw nothing or reorder their neighbours, in a key: shown as escapes
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
const visible = (/** @type {string} */ text) => text.replace(INVISIBLE, (ch) => {
  const code = ch.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
});

/** The elements under `scope` that match `selector`, as HTML elements (all of ours are). */
const all = (/** @type {ParentNode} */ scope, /** @type {string} */ selector) =>
  /** @type {HTMLElement[]} */ ([...scope.querySelectorAll(selector)]);

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  const root = h("div", { class: "ptl-packed" });
  keepKeys(root);
  const readout = h("p", { class: "ptl-packed-readout", role: "status", "aria-live": "polite" });
  el.append(root);
  /** @param {number} layout @param {"leaf" | "position"} kind @param {string | number} key */
  const choose = (layout, kind, key) => { model.set("selected", { layout, kind, key }); model.save_changes(); };
  /** @type {HTMLElement | undefined} */
  let stop; // the button in the Tab order
  const rove = (/** @type {HTMLElement | undefined} */ next) => {
    if (!next || next === stop) return;
    if (stop) stop.tabIndex = -1;
    next.tabIndex = 0;
    stop = next;
  };
  const STEPS = /** @type {Record<string, number>} */ ({ ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 });
  root.addEventListener("focusin", (e) => { if (e.target instanceof HTMLButtonElement) rove(e.target); });
  root.addEventListener("keydown", (e) => {
    const buttons = all(root, "button");
    const at = stop ? buttons.indexOf(stop) : -1;
    if (at < 0 || document.activeElement !== stop || e.altKey || e.ctrlKey || e.metaKey) return;
    const to = e.key === "Home" ? 0 : e.key === "End" ? buttons.length - 1 : at + (STEPS[e.key] ?? NaN);
    if (!(to >= 0 && to < buttons.length)) return;
    e.preventDefault();
    buttons[to].focus();
  });

  function draw() {
    root.replaceChildren();
    model.get("layouts_data").forEach((layout, li) => {
      const box = h("section", { class: "ptl-packed-layout", "data-layout": String(li) });
      box.append(h("h4", {}, `${layout.name}: packed positions`));
      const row = h("div", { class: "ptl-packed-row", role: "group", "aria-label": `${layout.name} packed vector` });
      for (const pos of layout.positions) {
        const cell = h("button", { type: "button", class: "ptl-packed-cell", "data-position": String(pos.i),
                                   title: visible(pos.label), "aria-pressed": "false", tabindex: "-1" });
        cell.append(h("span", { class: "ptl-packed-index" }, String(pos.i)), h("span", { class: "ptl-packed-value" }, pos.value));
        cell.addEventListener("click", () => choose(li, "position", pos.i));
        row.append(cell);
      }
      if (layout.more > 0) {
        row.append(h("span", { class: "ptl-packed-more" }, `… ${layout.more.toLocaleString("en")} more positions, not drawn`));
      }
      box.append(row, h("h4", {}, "leaves (flatten order) and their elements"));
      for (const leaf of layout.leaves) {
        const line = h("div", { class: "ptl-packed-leaf" });
        const name = h("button", { type: "button", class: "ptl-packed-leafname", "data-path": leaf.path,
                                   "aria-pressed": "false", tabindex: "-1" });
        name.append(layout.name, h("bdi", {}, visible(leaf.path)));
        name.addEventListener("click", () => choose(li, "leaf", leaf.path));
        line.append(name);
        for (const element of leaf.elements) {
          const span = h("span", { class: "ptl-packed-element", "data-label": element.label, "data-position": String(element.i) });
          span.append(h("bdi", {}, visible(element.label.slice(layout.name.length))), ` → ${element.i}`);
          line.append(span);
        }
        if (leaf.hidden > 0) {
          line.append(h("span", { class: "ptl-packed-more" }, `… ${leaf.hidden.toLocaleString("en")} more elements`));
        }
        box.append(line);
      }
      root.append(box);
    });
    root.append(readout);
    stop = undefined;
    rove(all(root, "button")[0]);
    paint();
  }

  function paint() {
    const lit = model.get("highlight") || {};
    const sel = model.get("selected") || {};
    all(root, ".ptl-packed-layout").forEach((box) => {
      const li = Number(box.dataset.layout);
      const mine = lit.layout === li;
      const positions = new Set(mine ? lit.positions || [] : []);
      const elements = new Set(mine ? lit.elements || [] : []);
      all(box, ".ptl-packed-cell").forEach((cell) => {
        cell.setAttribute("aria-pressed", String(positions.has(Number(cell.dataset.position))));
      });
      all(box, ".ptl-packed-element").forEach((span) => {
        span.dataset.lit = String(elements.has(span.dataset.label ?? ""));
      });
      all(box, ".ptl-packed-leafname").forEach((name) => {
        name.setAttribute("aria-pressed", String(sel.layout === li && sel.kind === "leaf" && sel.key === name.dataset.path));
      });
    });
    readout.textContent = model.get("readout");
  }

  model.on("change:layouts_data", draw);
  model.on("change:highlight", paint);
  model.on("change:readout", paint);
  model.on("change:selected", paint);
  draw();
  return () => {
    model.off("change:layouts_data", draw);
    model.off("change:highlight", paint);
    model.off("change:readout", paint);
    model.off("change:selected", paint);
    root.remove();
    unwatchKernel();
  };
}

export default { render };
