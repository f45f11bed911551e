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
 * Shift/Ctrl/Alt+Enter run the cell. One listener on the window (once per page, before lumino's
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

/** Escape, and Enter with Shift, Ctrl, Alt or Meta: the notebook's keys (see keepKeys). */
function notebookKey(/** @type {Event} */ e) {
  return e instanceof KeyboardEvent
    && (e.key === "Escape" || (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.altKey || e.metaKey)));
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
