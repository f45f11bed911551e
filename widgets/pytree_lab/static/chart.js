// @ts-check
// BarTable (pytree_lab.chart): the before/after bar chart as text and by keyboard.
//
// Traits (same names in chart.py): rows [[label, owner path, before, after], ...], title, note
// and figure_class (the kernel's); selected_path, the one the page writes: the leaf of the
// element the person chose, as a click on its bar chooses it. A note (why these bars, e.g. the
// selection brought its leaf in) is a visible line above the disclosure, a polite live region.
//
// The table sits in a disclosure under the chart ("Bar values"): its summary is in the Tab
// order; inside, each element is a button (Enter/Space selects its leaf, aria-pressed shows
// the selection). The chart itself (a bqplot figure found by its DOM class) is a named figure
// described by this table, its drawing (the first SVG) an image of the same name; not the figure
// itself, which holds bqplot's toolbar buttons (an image's content is not for the keyboard). Every
// other bqplot figure of the explorer (the loss line) is named the same way by its title.
//
// In a StepExplorer, this view also keeps the keys typed in the explorer's stock parts
// (ipywidgets buttons, the checkbox, the bqplot figures) away from the notebook's command mode,
// as the pytree-lab views do for themselves: ipywidgets offers no hook on those views.
//
// All text goes through textContent: labels are the person's keys.

/**
 * @typedef {{ rows: [string, string, string, string][], title: string, note: string,
 *             figure_class: string, selected_path: string }} Model
 */

/**
 * The leaf at `owner` is `path` or inside the container at `path` (`['a']` holds `['a'][0]`,
 * not `['ab']`).
 * @param {string} owner @param {string} path
 */
function under(owner, path) {
  if (owner === path) return true;
  const next = owner.charAt(path.length);
  return owner.startsWith(path) && (next === "[" || next === ".");
}

/**
 * The bars' tick labels never overprint: whenever two would overlap (many bars, large text, a
 * narrow chart), only every k-th is shown, k the smallest that leaves no two shown overlapping
 * (each one's full name is in the table and its bar's tooltip). Laid out again as bqplot draws
 * its ticks or the figure changes size. Returns what stops it.
 * @param {Element} figure @param {() => number} bars
 */
function thinTicks(figure, bars) {
  let frame = 0;
  const thin = () => {
    frame = 0;
    const axis = [...figure.querySelectorAll(".axis")].find((a) => a.querySelectorAll(".tick text").length === bars());
    if (!axis) return;
    const texts = /** @type {SVGTextElement[]} */ ([...axis.querySelectorAll(".tick text")]);
    const boxes = texts.map((t) => t.getBoundingClientRect());
    const apart = (/** @type {DOMRect} */ a, /** @type {DOMRect} */ b) =>
      Math.min(a.right, b.right) - Math.max(a.left, b.left) <= 1 || Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) <= 1;
    let k = 1;
    while (k < texts.length && !boxes.every((b, i) => i + k >= boxes.length || apart(b, boxes[i + k]))) k++;
    texts.forEach((t, i) => {
      const want = i % k ? "hidden" : "";
      if (t.style.visibility !== want) t.style.visibility = want; // (unchanged: no mutation, no loop)
    });
    figure.toggleAttribute("data-ptl-thinned", k > 1);
  };
  const later = () => { if (!frame) frame = requestAnimationFrame(thin); };
  const mutations = new MutationObserver(later);
  mutations.observe(figure, { subtree: true, childList: true, characterData: true, attributeFilter: ["transform", "x", "y", "dy", "style", "class"] });
  const sizes = new ResizeObserver(later);
  sizes.observe(figure);
  later();
  return () => { mutations.disconnect(); sizes.disconnect(); cancelAnimationFrame(frame); };
}

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  const id = `ptl-bars-${Math.random().toString(36).slice(2, 10)}`;
  const root = h("details", "ptl-bars");
  root.id = id;
  keepKeys(root);
  const note = h("p", "ptl-bars-note");
  note.setAttribute("role", "status");
  const summary = h("summary", "ptl-bars-summary", "Bar values (before and after, as a table)");
  const table = h("table", "ptl-bars-table");
  const caption = h("caption");
  const head = h("thead");
  const headRow = h("tr");
  for (const text of ["parameter element", "before", "after"]) {
    const th = h("th", "", text);
    th.setAttribute("scope", "col");
    headRow.append(th);
  }
  head.append(headRow);
  const body = h("tbody");
  table.append(caption, head, body);
  root.append(summary, table);
  el.append(note, root);

  let drawn = "";
  function draw() {
    caption.textContent = model.get("title");
    note.textContent = model.get("note") || "";
    note.hidden = !note.textContent;
    const rows = model.get("rows") || [];
    const labels = JSON.stringify(rows.map((r) => [r[0], r[1]]));
    if (labels !== drawn) {
      drawn = labels;
      body.replaceChildren(...rows.map(([label, owner]) => {
        const tr = h("tr");
        const th = h("th");
        th.setAttribute("scope", "row");
        const pick = h("button", "ptl-bars-pick");
        pick.type = "button";
        pick.dataset.owner = owner;
        pick.append(h("bdi", "", label));
        pick.title = `select ${owner || "the root"}`;
        pick.addEventListener("click", () => {
          model.set("selected_path", owner);
          model.save_changes();
        });
        th.append(pick);
        tr.append(th, h("td", "ptl-bars-value"), h("td", "ptl-bars-value"));
        return tr;
      }));
    }
    rows.forEach((r, i) => {
      const cells = body.children[i].querySelectorAll("td");
      cells[0].textContent = r[2];
      cells[1].textContent = r[3];
    });
    paint();
    describeFigure();
  }

  function paint() {
    const sel = model.get("selected_path");
    for (const pick of body.querySelectorAll(".ptl-bars-pick")) {
      const owner = /** @type {HTMLElement} */ (pick).dataset.owner || "";
      const on = Boolean(sel) && under(owner, sel);
      pick.setAttribute("aria-pressed", String(on));
      pick.closest("tr")?.classList.toggle("ptl-bars-selected", on);
    }
  }

  /** The chart: an image with a name, described by this table. */
  function describeFigure() {
    const cls = model.get("figure_class");
    if (!cls || !root.isConnected) return false;
    const scope = root.closest(".pytree-lab-explorer") || document;
    const figure = scope.querySelector(`.${CSS.escape(cls)}`);
    if (!figure) return false;
    if (figure !== thinned) {
      unthin();
      thinned = figure;
      unthin = thinTicks(figure, () => (model.get("rows") || []).length);
    }
    name(figure, model.get("title"));
    figure.setAttribute("aria-describedby", id);
    for (const other of scope.querySelectorAll(".bqplot.figure:not([aria-label])")) {
      const title = other.querySelector(".mainheading")?.textContent;
      if (title) name(other, title);
    }
    return !scope.querySelector(".bqplot.figure:not([aria-label])"); // the loss line may come later
  }

  /** @param {Element} figure @param {string} label */
  function name(figure, label) {
    figure.setAttribute("role", "figure");
    figure.setAttribute("aria-label", label);
    const svg = figure.querySelector("svg");
    svg?.setAttribute("role", "img");
    svg?.setAttribute("aria-label", label);
  }

  // the explorer's stock parts and the figure are drawn by other views, maybe after this one
  /** @type {Element|null} */
  let thinned = null;
  let unthin = () => {};
  let tries = 0;
  const settle = () => {
    const explorer = /** @type {HTMLElement|null} */ (root.closest(".pytree-lab-explorer"));
    if (explorer) keepKeys(explorer); // (again and again: it marks the root the first time only)
    if ((!describeFigure() || !explorer) && tries++ < 100) timer = setTimeout(settle, 100);
  };
  let timer = setTimeout(settle, 0);

  draw();
  const events = ["change:rows", "change:title", "change:note", "change:figure_class"];
  for (const ev of events) model.on(ev, draw);
  model.on("change:selected_path", paint);
  return () => {
    clearTimeout(timer);
    unthin();
    for (const ev of events) model.off(ev, draw);
    model.off("change:selected_path", paint);
    root.remove();
    note.remove();
    unwatchKernel();
  };
}

export default { render };
