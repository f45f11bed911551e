// @ts-check
// Shared by every pytree-lab widget module: page.py puts this text before each module's own
// that calls one of its functions (a script, not a module: anywidget loads one file per widget,
// so nothing can be imported). Its top-level names are therefore taken in every such module.
//
// h(): one element, its text through textContent (never HTML: labels are the person's keys).
// keepKeys(): keys typed in a widget never reach the notebook's command-mode shortcuts.
// kernelGone() / watchKernel(): a widget whose kernel is gone says so.

/**
 * A new element: `props` is its class (a string) or its attributes (an object); `text` is set
 * as text, never parsed as HTML.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag @param {string | Record<string, string>} [props] @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function h(tag, props, text) {
  const node = document.createElement(tag);
  if (typeof props === "string") {
    if (props) node.className = props;
  } else if (props) {
    for (const [name, value] of Object.entries(props)) node.setAttribute(name, value);
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * Keys typed under `root` stay there. JupyterLab and Notebook 7 bind single keys in command
 * mode (b inserts a cell, d d deletes one, m turns it to Markdown, arrows move between cells,
 * Space/Enter too), and a read-only box, a radio or a button is not an editor, so the notebook
 * would take them. lumino runs no shortcut for a target that carries
 * `data-lm-suppress-shortcuts` or sits inside one (the documented opt-out), and stopping the
 * events at the root keeps the notebook's own listeners out (ipywidgets' text boxes do the
 * same). JupyterLab matches shortcuts as the key bubbles up, so the stop at the root alone would
 * do there. Notebook 7 matches them while the key is on its way down (lumino listens on the
 * document, capturing), before the widget sees it; and its command-mode shortcuts select
 * `.jp-Notebook.jp-mod-commandMode:not(.jp-mod-readWrite) :focus`, the focused control itself.
 * lumino walks from the key's target upward and takes the first element that either opts out
 * or matches, so the control matched before the walk reached an opt-out on the widget's root:
 * an arrow key on a slider moved to the next cell, `d d` on a button deleted one. Every element
 * that takes the focus inside the widget therefore carries the opt-out itself, marked as it
 * takes the focus (`focusin`: controls drawn later included), or already when this runs (the
 * explorer's stock parts, drawn by other views, may hold the focus before the chart's view is).
 * Calling it again on the same root does nothing (the chart calls it on the explorer until the
 * explorer is there; each module has its own copy of this function, so the mark is on the root).
 *
 * The keys a student needs to go on are the notebook's, from anywhere in a widget: Escape puts
 * the focus on the widget's cell (command mode, where the arrows and Shift+Enter go on), and
 * Shift/Ctrl/Alt+Enter run the cell, Ctrl/Cmd+S saves the notebook. One listener on the window (once per page, before lumino's
 * on the document in either phase) lifts the opt-outs from the key's target and its ancestors
 * for that key alone, and the root lets it through.
 * @param {HTMLElement} root
 */
function keepKeys(root) {
  if (root.dataset.ptlKeys) return;
  root.dataset.ptlKeys = "1";
  const optOut = (/** @type {Element} */ node) => node.setAttribute("data-lm-suppress-shortcuts", "true");
  optOut(root);
  // a click on the widget's text or on a locked control focuses the widget, not the notebook
  if (!root.hasAttribute("tabindex")) root.tabIndex = -1;
  root.addEventListener("focusin", (e) => { if (e.target instanceof Element) optOut(e.target); });
  const active = document.activeElement;
  if (active && active !== root && root.contains(active)) optOut(active);
  const stop = (/** @type {Event} */ e) => { if (!notebookKey(e)) e.stopPropagation(); };
  for (const type of ["keydown", "keypress", "keyup"]) root.addEventListener(type, stop);
  if (document.documentElement.dataset.ptlKeys) return;
  document.documentElement.dataset.ptlKeys = "1";
  window.addEventListener("keydown", (e) => {
    const target = e.target instanceof Element ? e.target : null;
    if (!notebookKey(e) || !target?.closest("[data-ptl-keys]")) return;
    if (e.key === "Escape") {
      const cell = target.closest(".jp-Cell");
      if (cell instanceof HTMLElement) cell.focus();
      return;
    }
    /** @type {Element[]} */
    const lifted = [];
    for (let n = /** @type {Element | null} */ (target); n; n = n.parentElement) {
      if (n.hasAttribute("data-lm-suppress-shortcuts")) lifted.push(n);
    }
    for (const n of lifted) n.removeAttribute("data-lm-suppress-shortcuts");
    setTimeout(() => { for (const n of lifted) optOut(n); });
  }, true);
}

/** Escape, Enter with Shift, Ctrl, Alt or Meta, and Ctrl/Cmd+S (save): the notebook's keys (see keepKeys). */
function notebookKey(/** @type {Event} */ e) {
  return e instanceof KeyboardEvent
    && (e.key === "Escape" || (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.altKey || e.metaKey))
      || (e.key.toLowerCase() === "s" && (e.ctrlKey || e.metaKey) && !e.altKey));
}

// After a kernel restart (or a kernel that died), the widget manager marks every widget of the
// old kernel disconnected (DOMWidgetView adds `jupyter-widgets-disconnected` to the view's
// element); clicks and keys then reach no kernel. Instead of doing silently nothing, the widget
// says so, once the student tries it, in a status line at its top. An anywidget view on its own
// (a check card, not inside an ipywidgets box) gets no such class: its model's
// `comm_live_update` event, called with the view as `this`, marks the element instead.

const KERNEL_GONE_TEXT = "This widget belongs to a kernel that was restarted or stopped, so it no longer "
  + "answers. Run its cell again (or the notebook's cells from the top) to get a working one.";

/**
 * Whether the kernel behind the view whose element is `el` is gone (restarted or stopped).
 * @param {HTMLElement} el
 */
function kernelGone(el) {
  return el.closest(".jupyter-widgets-disconnected, [data-ptl-kernel-gone]") !== null;
}

/**
 * Watch `el` (a widget view's element) for interaction while its kernel is gone.
 * @param {{ on: (name: any, cb: () => void) => void, off: (name: any, cb: () => void) => void }} model
 * @param {HTMLElement} el
 * @returns {() => void} cleanup for render()
 */
function watchKernel(model, el) {
  /** @type {HTMLElement | null} */
  let notice = null;
  const gone = () => kernelGone(el);
  const tell = () => {
    if (!gone()) {
      notice?.remove();
      notice = null;
      return;
    }
    if (notice) return;
    notice = document.createElement("div");
    notice.className = "pytree-lab-kernel-gone";
    notice.setAttribute("role", "status");
    notice.textContent = KERNEL_GONE_TEXT;
    notice.style.cssText = "margin: 0 0 4px 0; padding: 4px 8px; border-left: 4px solid "
      + "var(--jp-warn-color0, #bf5b00); background: var(--jp-warn-color3, #fff3e0); "
      + "color: #000; font-size: var(--jp-ui-font-size1, 13px);";
    el.prepend(notice);
  };
  const onInteract = () => { if (gone() || notice) tell(); };
  /**
   * The comm went down (or came back: the same kernel after a network drop, and the notice goes).
   * @this {{ model?: { comm_live?: boolean } } | undefined}
   */
  const onLive = function () {
    el.toggleAttribute("data-ptl-kernel-gone", this?.model?.comm_live !== true);
    if (notice) tell();
  };
  el.addEventListener("pointerdown", onInteract, true);
  el.addEventListener("keydown", onInteract, true);
  model.on("comm_live_update", onLive);
  return () => {
    el.removeEventListener("pointerdown", onInteract, true);
    el.removeEventListener("keydown", onInteract, true);
    model.off("comm_live_update", onLive);
    notice?.remove();
  };
}

// Grids of values (diagram.js valueGrid, calculation.py grid_html): a grid narrower than its
// values first takes a narrower number format (3, then 2 significant digits; each value's full
// text in its title), and cut still, scrolls sideways: focusable then, named by its aria-label,
// the arrows (Home, End, Page Up/Down) scroll it a column at a time. Under every grid, a line
// says its shape (`2×8`), the digits shown when narrowed, and how many columns are out of sight.

/** A grid's shape from its rows: a matrix's, or its slices' (`[1,2,:,:]`) before it. @param {Element} grid */
function gridShape(grid) {
  const rows = grid.querySelectorAll(":scope > .ptl-grid-row");
  const slices = grid.querySelectorAll(":scope > .ptl-grid-slice");
  const cols = rows.length ? rows[0].children.length : 0;
  if (!slices.length) return [rows.length, cols];
  const last = (slices[slices.length - 1].textContent || "").replace(/[[\]\s]/g, "").split(",");
  const lead = last.filter((t) => t !== ":").map((t) => Number(t) + 1);
  return [...lead, Math.round(rows.length / slices.length), cols];
}

/** A number's text in at most `digits` significant digits, where that is shorter. @param {string} text @param {number} digits */
function narrowNumber(text, digits) {
  const x = Number(text);
  if (!/^-?[\d.]+(e[-+]?\d+)?$/.test(text) || !Number.isFinite(x)) return text;
  const plain = String(Number(x.toPrecision(digits)));
  const exp = x.toExponential(digits - 1).replace(/\.?0*e\+?/, "e");
  const best = plain.length <= exp.length ? plain : exp;
  return best.length < text.length ? best : text;
}

/** Every grid under `root` not fitted yet: its shape line, narrower numbers, keys. @param {ParentNode} root */
function fitGrids(root) {
  for (const grid of root.querySelectorAll(".ptl-grid:not([data-ptl-fit])")) {
    if (!(grid instanceof HTMLElement)) continue;
    grid.dataset.ptlFit = "1";
    const box = h("span", "ptl-grid-box");
    const note = h("span", "ptl-grid-note");
    grid.replaceWith(box);
    box.append(grid, note);
    const cells = /** @type {HTMLElement[]} */ ([...grid.querySelectorAll(".ptl-grid-cell")]);
    const texts = cells.map((c) => c.textContent || "");
    const chars = grid.style.getPropertyValue("--ptl-grid-ch");
    const shape = gridShape(grid).join("×");
    let digits = 0;
    let width = -1;
    const cut = () => grid.scrollWidth > grid.clientWidth + 1;
    const show = (/** @type {number} */ d) => {
      const shown = d ? texts.map((t) => narrowNumber(t, d)) : texts;
      cells.forEach((c, k) => {
        c.textContent = shown[k];
        if (d && shown[k] !== texts[k]) c.title = texts[k];
        else c.removeAttribute("title");
      });
      grid.style.setProperty("--ptl-grid-ch", d ? String(Math.max(1, ...shown.map((t) => t.length))) : chars);
      digits = d && shown.some((t, k) => t !== texts[k]) ? d : 0;
    };
    const tell = () => {
      const g = grid.getBoundingClientRect();
      const left = g.left + grid.clientLeft;
      const right = left + grid.clientWidth;
      let before = 0;
      let after = 0;
      for (const c of grid.querySelector(":scope > .ptl-grid-row")?.children || []) {
        const r = c.getBoundingClientRect();
        if (r.right > right + 0.5) after++;
        else if (r.left < left - 0.5) before++;
      }
      const plural = (/** @type {number} */ n) => `${n} more column${n === 1 ? "" : "s"}`;
      const more = after ? `${plural(after)} →` : before ? `← ${plural(before)}` : "";
      note.textContent = [shape, digits ? `${digits} digits` : "", more].filter(Boolean).join(" · ");
    };
    const fit = () => {
      const now = box.parentElement?.clientWidth ?? 0;
      if (!grid.isConnected || Math.abs(now - width) < 1) return;
      width = now;
      show(0);
      if (cut()) show(3);
      if (cut()) show(2);
      if (cut()) show(3);
      const scrolls = cut();
      if (scrolls) grid.tabIndex = 0;
      else grid.removeAttribute("tabindex");
      tell();
    };
    grid.addEventListener("scroll", tell, { passive: true });
    grid.addEventListener("keydown", (e) => {
      if (grid.tabIndex < 0 || e.altKey || e.ctrlKey || e.metaKey) return;
      const column = (cells[0]?.getBoundingClientRect().width || 40) + parseFloat(getComputedStyle(cells[0]?.parentElement || grid).columnGap || "0");
      /** @type {Record<string, number>} */
      const by = { ArrowRight: column, ArrowLeft: -column, PageDown: grid.clientWidth, PageUp: -grid.clientWidth,
        End: grid.scrollWidth, Home: -grid.scrollWidth };
      if (!(e.key in by)) return;
      grid.scrollBy({ left: by[e.key] });
      e.preventDefault();
      e.stopPropagation();
    });
    note.textContent = shape;
    Object.assign(grid, { ptlFit: fit }); // (a line that starts with a comment would be stripped)
    if (grid.isConnected) fit();
    // one observer per module: a cell or column that changes width fits the grids in it again
    GRID_OBSERVER ||= new ResizeObserver((entries) => {
      for (const { target } of entries)
        for (const g of target.querySelectorAll(".ptl-grid[data-ptl-fit]")) /** @type {any} */ (g).ptlFit?.();
    });
    GRID_OBSERVER.observe(box.parentElement || box);
  }
}
/** @type {ResizeObserver | null} */
let GRID_OBSERVER = null;
