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

/** @typedef {{ value: string }} Model */

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
    root.innerHTML = model.get("value");
    for (const details of root.querySelectorAll("details")) {
      if (open.has(summaryKey(details))) details.open = true;
    }
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
