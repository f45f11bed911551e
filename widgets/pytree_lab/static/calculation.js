// @ts-check
// WorkedCalculation (pytree_lab.calculation): the step written out, as the kernel wrote it.
//
// Trait (same name in calculation.py): value, the kernel's: the calculation's markup, every text
// in it escaped by the kernel (keys from user trees included). The page writes nothing back.
//
// The kernel sends the whole calculation again at every step and every change of the selected
// leaf. What the person did with the last one carries over to the new one: a disclosure they
// opened (every leaf's rows, a group of rows) stays open, the focus stays on its summary, and a
// matrix scrolled sideways keeps its place. A disclosure is the same one when its summary reads
// the same; a matrix, when its name (aria-label) is the same.
//
// The markup is parsed inert (a <template>) and only its own vocabulary is kept: the elements
// and attributes calculation.py writes. A state the kernel did not write (a notebook's saved
// widget state, drawn before any kernel on the Lite site; a crafted comm message) can put no
// script, handler, link or image on the page: any other element goes, with what it holds, and so
// does any other attribute.

/** @typedef {{ value: string }} Model */

const TAGS = new Set(["TABLE", "CAPTION", "TBODY", "TR", "TH", "TD", "DIV", "SPAN", "DETAILS", "SUMMARY"]);
const ATTRIBUTES = new Set(["class", "data-path", "data-focus", "aria-label", "role", "scope", "colspan"]);
const GRID_WIDTH = /^--ptl-grid-ch: \d+$/; // the one style calculation.py writes (a grid's cell width)

/** The calculation's markup as nodes, in its own vocabulary only. @param {string} value */
function calculationNodes(value) {
  const template = document.createElement("template");
  template.innerHTML = value;
  for (const node of template.content.querySelectorAll("*")) {
    if (!TAGS.has(node.tagName)) {
      node.remove();
      continue;
    }
    for (const { name, value: text } of Array.from(node.attributes)) {
      if (!ATTRIBUTES.has(name) && !(name === "style" && GRID_WIDTH.test(text))) node.removeAttribute(name);
    }
  }
  return template.content;
}

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  keepKeys(el);
  const unwatchKernel = watchKernel(model, el);
  const root = h("div", "ptl-calc-view");
  el.append(root);
  const summaryKey = (/** @type {Element} */ node) => node.querySelector(":scope > summary")?.textContent ?? "";
  function draw() {
    const open = new Set(Array.from(root.querySelectorAll("details[open]"), summaryKey));
    const active = document.activeElement;
    const focused = active instanceof HTMLElement && active.tagName === "SUMMARY" && root.contains(active)
      ? active.textContent : null;
    /** @type {Map<string, number>} */
    const scrolled = new Map();
    for (const grid of root.querySelectorAll(".ptl-grid")) {
      if (grid.scrollLeft > 0) scrolled.set(grid.getAttribute("aria-label") ?? "", grid.scrollLeft);
    }
    root.replaceChildren(calculationNodes(model.get("value") || ""));
    for (const details of root.querySelectorAll("details")) {
      if (open.has(summaryKey(details))) details.open = true;
    }
    fitGrids(root); // each grid's shape, narrower numbers, keys (static/_shared.js)
    for (const grid of root.querySelectorAll(".ptl-grid")) {
      const left = scrolled.get(grid.getAttribute("aria-label") ?? "");
      if (left) grid.scrollLeft = left;
    }
    if (focused !== null) {
      const again = Array.from(root.querySelectorAll("summary")).find((s) => s.textContent === focused);
      if (again) again.focus({ preventScroll: true });
    }
  }
  draw();
  model.on("change:value", draw);
  return () => {
    model.off("change:value", draw);
    unwatchKernel();
  };
}

export default { render };
