// @ts-check
// Shared by every pytree-lab widget module: _static.py puts this text before each module's own
// (a script, not a module: anywidget loads one file per widget, so nothing can be imported).
//
// After a kernel restart (or a kernel that died), the widget manager marks every widget of the
// old kernel disconnected (DOMWidgetView adds `jupyter-widgets-disconnected` to the view's
// element); clicks and keys then reach no kernel. Instead of doing silently nothing, the widget
// says so, once the student tries it, in a status line at its top.

const KERNEL_GONE_TEXT = "This widget belongs to a kernel that was restarted or stopped, so it no longer "
  + "answers. Run its cell again (or the notebook's cells from the top) to get a working one.";

/**
 * Whether the kernel behind the view whose element is `el` is gone (restarted or stopped).
 * @param {HTMLElement} el
 */
function kernelGone(el) {
  return el.closest(".jupyter-widgets-disconnected") !== null;
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
      + "color: var(--jp-ui-font-color0, #000); font-size: var(--jp-ui-font-size1, 13px);";
    el.prepend(notice);
  };
  const onInteract = () => { if (gone() || notice) tell(); };
  // reconnected (the same kernel back after a network drop): the notice goes away
  const onLive = () => { if (notice) tell(); };
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
