// @ts-check
// PytreeDiagram view: trees side by side, rows matched by path (WAI-ARIA tree pattern).
//
// Python owns the data; this module draws it and reports intents (select a path, fold a node).
//
// Cell: ty type label, v value text, g a small matrix's formatted values (a row's separated by
//   spaces, rows by newlines; shown whole as a grid, instead of v), i flatten index,
//   nd not differentiable, n number of children
// Row: p path, u parent path, l label, d depth, leaf, c cells (one per column), s status
// On the wire, rows (and each panel's rows) come by column, one list per key, the same names
// (diagram.py's module docstring is the reference): rowsFromWire turns them back into Rows.
// Traits (same names in diagram.py):
//   columns: string[]        tree names, one column each (params, grads, updated)
//   rows: Row[]              aligned rows in display order (parents before children). For a
//                            big tree, the rows below a container arrive when it is first
//                            opened (Python sees `collapsed` change): until then it shows
//                            "loading…", and the new rows are added where they belong (grow)
//   counts: string[]         the counts line of each tree
//   panels: Panel[]          trees shown apart (optimizer state), not aligned
//   selected_path: string    keystr of the selected node, "" for none   (written here on click)
//   collapsed: string[]      paths of folded containers                  (written here on fold)
//   message, message_kind    a message above the trees (the trees stay as they were)
//   caption: string          a line under the trees (e.g. which engine computed them)
//   foldable: string[]       columns and panel titles folded together behind one toggle
//                            (an optimizer's moment columns and its state panel)
//   foldable_open: boolean   whether that group shows now          (written here on toggle)
//
// All text from user trees goes through textContent: never interpreted as HTML.

/**
 * @typedef {{ty: string, v?: string, g?: string, i?: number, nd?: number, n?: number} | null} Cell
 * @typedef {{p: string, u: string|null, l: string, d: number, leaf: number, c: Cell[], s: string}} Row
 * @typedef {{title: string, rows: Row[], counts: string}} Panel
 * @typedef {{ columns: string[], rows: string, counts: string[], panels: string, selected_path: string,
 *             collapsed: string[], message: string, message_kind: string, caption: string,
 *             foldable: string[], foldable_open: boolean }} Model
 * @typedef {import("@anywidget/types").AnyModel<Model>} DiagramModel
 */

const PAGE = 200; // children rendered per group before a "show more" button

// [in-memory key, column name on the wire]: ROW_COLUMNS and CELL_COLUMNS in diagram.py
const ROW_COLUMNS = [["p", "path"], ["u", "parent"], ["l", "label"], ["d", "depth"], ["leaf", "leaf"],
  ["s", "status"]];
const CELL_COLUMNS = [["ty", "type"], ["v", "value"], ["g", "grid"], ["i", "index"],
  ["nd", "not_differentiable"], ["n", "children"]];

/**
 * Rows from their wire form: one list per column (rows by column), back to one object per row.
 * A cell whose type is null is a missing cell; a cell's other null keys are left out.
 * @param {any} wire @returns {Row[]}
 */
function rowsFromWire(wire) {
  if (!wire || Array.isArray(wire)) return wire || [];
  const n = wire.path.length;
  const cols = wire.cells;
  const rows = new Array(n);
  for (let k = 0; k < n; k++) {
    const r = /** @type {any} */ ({});
    for (const [key, name] of ROW_COLUMNS) r[key] = wire[name][k];
    r.c = cols.map((/** @type {any} */ col) => {
      if (col.type[k] === null) return null;
      const cell = /** @type {any} */ ({});
      for (const [key, name] of CELL_COLUMNS) {
        const v = col[name][k];
        if (v !== null) cell[key] = v;
      }
      return cell;
    });
    rows[k] = r;
  }
  return rows;
}

/**
 * A list trait that Python sends as one JSON text (rows, panels), parsed once per change.
 * @template T
 * @param {DiagramModel} model @param {"rows" | "panels"} name @param {(parsed: any) => T[]} decode
 * @returns {() => T[]}
 */
function jsonTrait(model, name, decode) {
  /** @type {unknown} */
  let raw = undefined;
  /** @type {T[]} */
  let parsed = [];
  return () => {
    const now = model.get(name);
    if (now !== raw) {
      raw = now;
      parsed = decode(typeof now === "string" ? JSON.parse(now) : now || []);
    }
    return parsed;
  };
}

/** Index rows into parent -> children lists. @param {Row[]} rows */
function index(rows) {
  /** @type {Map<string, Row[]>} */
  const kids = new Map();
  /** @type {Map<string, Row>} */
  const byPath = new Map();
  const top = [];
  for (const r of rows) {
    byPath.set(r.p, r);
    if (r.u === null || r.u === undefined || !byPath.has(r.u)) top.push(r);
    else {
      let list = kids.get(r.u);
      if (!list) kids.set(r.u, (list = []));
      list.push(r);
    }
  }
  return { kids, byPath, top };
}

/**
 * A small matrix shown whole, in its own shape: one line per row of values (the last axis
 * across), never rewrapped: a (2, 8) is 2 lines of 8, an (8, 2) 8 lines of 2. A grid wider than
 * its tree cell scrolls sideways inside it (nothing is drawn over the next tree's cell). An array
 * of more dimensions comes as its 2-D slices, each after a label line (`[0,:,:]`).
 * The values arrive formatted from Python (_format.grid_rows); this only lays them out. Every
 * cell is as wide as the widest value (in ch of the monospace font, right-aligned), so the
 * columns line up from row to row. calculation.py's grid_html draws the same markup.
 * `chars`: the cells' width, the widest value of the whole row (every tree's grid in a row of
 * the diagram alike, so params[i, j] sits where updated[i, j] does).
 * @param {string} text values by spaces, rows by newlines @param {string} label @param {number} [chars]
 */
function valueGrid(text, label, chars) {
  const rows = text.split("\n").map((line) => line.split(" "));
  const grid = h("span", "ptl-grid");
  grid.setAttribute("role", "table");
  grid.setAttribute("aria-label", `values of ${label}`);
  grid.style.setProperty("--ptl-grid-ch", String(chars || widest(text)));
  for (const row of rows) {
    const slice = row.length === 1 && row[0].startsWith("[");
    const line = h("span", slice ? "ptl-grid-slice" : "ptl-grid-row");
    line.setAttribute("role", "row");
    for (const text of row) {
      const cell = h("span", slice ? "" : "ptl-grid-cell", text);
      cell.setAttribute("role", slice ? "rowheader" : "cell");
      line.append(cell);
    }
    grid.append(line);
  }
  return grid;
}

/** The longest value of a grid's text (slice labels left out). @param {string} text */
function widest(text) {
  let n = 1;
  for (const t of text.split(/\s+/)) if (!t.startsWith("[")) n = Math.max(n, t.length);
  return n;
}

/**
 * The width of the path column, in em: enough for the deepest, longest label of these rows
 * (keys are monospace, about 0.6em a character), between 6em and 16em (a longer one ends
 * in an ellipsis, its full text in the row's title). The value columns get the rest.
 * @param {Row[]} rows
 */
function nameWidth(rows) {
  let widest = 4;
  for (const r of rows) {
    const indent = Math.max(0, (r.d || 1) - 1) * 1.1 + 1.1;
    // the key, and a leaf's shared type under it (compact layout: 0.85em monospace)
    const type = r.leaf ? sharedType(r).length * 0.52 : 0;
    widest = Math.max(widest, indent + r.l.length * 0.61, indent + type);
  }
  return Math.min(16, Math.max(6, widest + 1.4));
}

/**
 * A leaf row's type and flatten index said once, abbreviated (float32[2,8] #0 -> f32[2,8] #0),
 * when every tree agrees: an explorer's compact layout shows it under the key instead of in
 * each cell (static/diagram.css), so the cells hold only values. "" when the trees differ.
 * @param {Row} r
 */
function sharedType(r) {
  const first = r.c[0];
  if (!first || r.s !== "ok" || r.c.some((c) => !c || c.ty !== first.ty)) return "";
  const ty = first.ty.replace(/^(b?)float(\d+)/, "$1f$2").replace(/^uint(\d+)/, "u$1").replace(/^int(\d+)/, "i$1");
  return first.i !== undefined ? `${ty} #${first.i}` : ty;
}

/** @type {Record<string, string>} */
const STATUS_TEXT = {
  missing: "missing in one tree",
  shape: "shapes differ",
  dtype: "dtypes differ",
  kind: "leaf in one tree, container in another",
};

/**
 * One ARIA tree (the aligned main tree or a side panel).
 * `folded`: the columns not shown now (a group folded behind one toggle, see `foldable`).
 * @param {{ model: DiagramModel, label: string, columns: string[], rows: Row[], counts: string[],
 *           className?: string, folded?: Set<string> }} opts
 */
function makeTree({ model, label, columns, rows, counts, className, folded: hiddenColumns }) {
  const root = h("div", `ptl-tree ${className || ""}`);
  root.setAttribute("role", "tree");
  root.setAttribute("aria-label", label);
  let hidden = hiddenColumns || new Set();
  root.style.setProperty("--ptl-cols", String(columns.filter((c) => !hidden.has(c)).length || 1));
  root.style.setProperty("--ptl-name-width", `${nameWidth(rows)}em`);

  const head = h("div", "ptl-head");
  head.setAttribute("aria-hidden", "true");
  head.append(h("span", "ptl-name", "path"));
  for (const c of columns) {
    const name = h("span", "ptl-cell ptl-colname", c);
    name.dataset.column = c;
    name.hidden = hidden.has(c);
    head.append(name);
  }
  root.append(head);

  const body = h("div", "ptl-body");
  root.append(body);
  const { kids, byPath, top } = index(rows);
  /** @type {Map<string, HTMLElement>} */
  const items = new Map();
  let folded = new Set(model.get("collapsed"));

  /** @param {Row} r */
  function item(r) {
    const li = h("div", `ptl-item ptl-s-${r.s}`);
    li.setAttribute("role", "treeitem");
    li.dataset.path = r.p;
    li.setAttribute("aria-level", String(r.d || 1));
    li.tabIndex = -1;
    const line = h("div", "ptl-line");
    const name = h("span", "ptl-name");
    name.style.paddingLeft = `${Math.max(0, (r.d || 1) - 1) * 1.1}em`;
    const toggle = h("span", "ptl-toggle", r.leaf ? "" : "▸");
    toggle.setAttribute("aria-hidden", "true");
    // the key is the person's text: isolated, so a right-to-left key does not reorder the row
    const key = h("bdi", "ptl-key", r.l);
    name.append(toggle, key);
    if (r.leaf) name.append(h("span", "ptl-name-type", sharedType(r)));
    line.append(name);
    r.c.forEach((cell, i) => {
      const td = h("span", "ptl-cell");
      td.dataset.column = columns[i];
      td.hidden = hidden.has(columns[i]);
      fillCell(td, cell, r);
      line.append(td);
    });
    if (r.s !== "ok") line.title = STATUS_TEXT[r.s] || r.s;
    else if (r.l.length > 12) name.title = r.l;
    li.append(line);
    if (!r.leaf) {
      const group = h("div", "ptl-group");
      group.setAttribute("role", "group");
      li.append(group);
      setExpanded(li, r, !folded.has(r.p));
    }
    items.set(r.p, li);
    return li;
  }

  /** @param {HTMLElement} td @param {Cell} cell @param {Row} r */
  function fillCell(td, cell, r) {
    td.textContent = "";
    td.classList.toggle("ptl-absent", cell === null);
    if (cell === null) {
      td.append(h("span", "ptl-missing", "— missing"));
      return;
    }
    td.append(h("span", "ptl-type", cell.ty));
    if (cell.g) {
      const chars = Math.max(...r.c.map((c) => (c && c.g ? widest(c.g) : 1)));
      td.append(valueGrid(cell.g, `${td.dataset.column || ""} ${r.p || r.l}`.trim(), chars));
    }
    else if (cell.v !== undefined && cell.v !== "") td.append(h("span", "ptl-val", cell.v));
    if (cell.g) fitGrids(td); // its shape under it, narrower numbers, keys (static/_shared.js)
    if (cell.nd) td.append(h("span", "ptl-nd", "not differentiable"));
    if (cell.i !== undefined) {
      const badge = h("span", "ptl-idx", `#${cell.i}`);
      badge.title = `leaf ${cell.i} in JAX flatten order`;
      td.append(badge);
    }
  }

  /** @param {HTMLElement} li @param {Row} r @param {boolean} open */
  function setExpanded(li, r, open) {
    li.setAttribute("aria-expanded", String(open));
    const group = /** @type {HTMLElement} */ (li.lastElementChild);
    const toggle = li.querySelector(".ptl-toggle");
    if (toggle) toggle.textContent = open ? "▾" : "▸";
    if (open && !group.dataset.filled) {
      const list = kids.get(r.p) || [];
      // children not sent yet (a big tree's folded container): they follow the fold message
      if (!list.length && r.c.some((c) => c && c.n)) group.replaceChildren(h("div", "ptl-loading", "loading…"));
      else fill(group, list);
    }
    group.hidden = !open;
  }

  /** Render children lazily, a page at a time. @param {HTMLElement} group @param {Row[]} list */
  function fill(group, list, start = 0) {
    group.dataset.filled = "1";
    const end = Math.min(list.length, start + PAGE);
    const frag = document.createDocumentFragment();
    for (let k = start; k < end; k++) frag.append(item(list[k]));
    group.append(frag);
    /** @type {any} */ (group).ptlMore = null;
    if (end < list.length) {
      const more = h("button", "ptl-more", `show ${Math.min(PAGE, list.length - end)} more of ${list.length - end}`);
      more.type = "button";
      const next = () => {
        more.remove();
        fill(group, list, end);
      };
      more.addEventListener("click", (e) => {
        e.stopPropagation();
        next();
      });
      /** @type {any} */ (group).ptlMore = next;
      group.append(more);
    }
  }

  fill(body, top);
  if (counts) {
    const foot = h("div", "ptl-foot");
    foot.append(h("span", "ptl-name", ""));
    counts.forEach((c, i) => {
      const cell = h("span", "ptl-cell ptl-counts", c);
      cell.dataset.column = columns[i] ?? "";
      cell.hidden = hidden.has(columns[i]);
      foot.append(cell);
    });
    root.append(foot);
  }

  // ---- selection, focus, folding
  function visibleItems() {
    // an item is visible when no enclosing group is folded
    return /** @type {HTMLElement[]} */ ([...root.querySelectorAll('[role="treeitem"]')]).filter(
      (el) => !el.closest("[hidden]"),
    );
  }

  /** @type {string | null} */
  let focusPath = top.length ? top[0].p : null;
  /** @param {string | undefined} path @param {boolean} [move] */
  function setFocus(path, move = true) {
    if (path === undefined) return;
    const prev = focusPath !== null ? items.get(focusPath) : null;
    if (prev) prev.tabIndex = -1;
    focusPath = path;
    const el = items.get(path);
    if (el) {
      el.tabIndex = 0;
      if (move) el.focus();
    }
  }
  const first = focusPath !== null ? items.get(focusPath) : undefined;
  if (first) first.tabIndex = 0;

  /** @param {string} path */
  function select(path) {
    model.set("selected_path", path);
    model.save_changes();
  }

  /** @param {string} path @param {boolean} [open] */
  function toggleFold(path, open) {
    const r = byPath.get(path);
    const li = items.get(path);
    if (!r || r.leaf || !li) return;
    const isOpen = li.getAttribute("aria-expanded") === "true";
    const want = open === undefined ? !isOpen : open;
    if (want === isOpen) return;
    setExpanded(li, r, want);
    if (want) folded.delete(path);
    else folded.add(path);
    model.set("collapsed", [...folded]);
    model.save_changes();
  }

  function showSelection() {
    const sel = model.get("selected_path");
    root.querySelectorAll('[aria-selected="true"]').forEach((el) => el.setAttribute("aria-selected", "false"));
    root.querySelectorAll(".ptl-related").forEach((el) => el.classList.remove("ptl-related"));
    if (!sel) return;
    // reveal the selected node: render and unfold its ancestors (pages past the first included)
    let r = byPath.get(sel);
    const chain = r ? [sel] : [];
    while (r && r.u !== null && r.u !== undefined && byPath.has(r.u)) {
      chain.unshift(r.u);
      r = byPath.get(r.u);
    }
    let unfolded = false;
    for (let k = 0; k < chain.length; k++) {
      const p = chain[k];
      const parent = k === 0 ? null : items.get(chain[k - 1]);
      const group = /** @type {any} */ (parent ? parent.lastElementChild : body);
      while (!items.has(p) && group && group.ptlMore) group.ptlMore();
      const li = items.get(p);
      const row = byPath.get(p);
      if (k < chain.length - 1 && li && row && li.getAttribute("aria-expanded") === "false") {
        setExpanded(li, row, true);
        folded.delete(p);
        unfolded = true;
      }
    }
    if (unfolded) {
      // tell Python what is open now, so a later change of `collapsed` does not fold it again
      model.set("collapsed", [...folded]);
      model.save_changes();
    }
    const el = items.get(sel);
    if (el) el.setAttribute("aria-selected", "true");
    // the same parameter inside other trees (e.g. optimizer moments end with the same path)
    else
      for (const [p, li] of items) if (p.endsWith(sel)) li.classList.add("ptl-related");
  }

  root.addEventListener("click", (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    const li = /** @type {HTMLElement|null} */ (target.closest('[role="treeitem"]'));
    if (!li || !root.contains(li)) return;
    e.stopPropagation();
    const path = li.dataset.path ?? "";
    const r = byPath.get(path);
    setFocus(path);
    if (r && !r.leaf && target.closest(".ptl-toggle")) toggleFold(path);
    else select(path);
  });
  root.addEventListener("dblclick", (e) => {
    const li = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (e.target).closest('[role="treeitem"]'));
    if (li) toggleFold(li.dataset.path ?? "");
  });

  root.addEventListener("keydown", (e) => {
    if (focusPath === null || notebookKey(e)) return; // Shift/Ctrl+Enter run the cell
    const vis = visibleItems();
    const at = vis.findIndex((el) => el.dataset.path === focusPath);
    const r = byPath.get(focusPath);
    const li = items.get(focusPath);
    let handled = true;
    switch (e.key) {
      case "ArrowDown":
        if (at < vis.length - 1) setFocus(vis[at + 1].dataset.path);
        break;
      case "ArrowUp":
        if (at > 0) setFocus(vis[at - 1].dataset.path);
        break;
      case "Home":
        if (vis.length) setFocus(vis[0].dataset.path);
        break;
      case "End":
        if (vis.length) setFocus(vis[vis.length - 1].dataset.path);
        break;
      case "ArrowRight":
        if (r && !r.leaf && li) {
          const children = kids.get(focusPath) || [];
          if (li.getAttribute("aria-expanded") === "false") toggleFold(focusPath, true);
          else if (children.length) setFocus(children[0].p);
        }
        break;
      case "ArrowLeft":
        if (r && !r.leaf && li && li.getAttribute("aria-expanded") === "true") toggleFold(focusPath, false);
        else if (r && r.u !== null && r.u !== undefined && items.has(r.u)) setFocus(r.u);
        break;
      case "Enter":
      case " ":
        select(focusPath);
        break;
      default:
        handled = false;
    }
    if (handled) {
      e.preventDefault();
      e.stopPropagation();
    }
  });

  /**
   * Update cell contents in place when only the values changed.
   * @param {Row[]} next @param {string[]} [nextCounts] the counts line(s) under the tree
   */
  function refresh(next, nextCounts) {
    for (const r of next) {
      const li = items.get(r.p);
      const old = byPath.get(r.p);
      if (old) Object.assign(old, r);
      if (!li) continue;
      li.className = `ptl-item ptl-s-${r.s}`;
      const shared = li.querySelector(":scope > .ptl-line > .ptl-name > .ptl-name-type");
      if (shared) shared.textContent = sharedType(r);
      const cells = /** @type {HTMLElement} */ (li.firstElementChild).querySelectorAll(":scope > .ptl-cell");
      r.c.forEach((cell, i) => cells[i] && fillCell(/** @type {HTMLElement} */ (cells[i]), cell, r));
    }
    if (counts && nextCounts) {
      const foot = root.querySelectorAll(".ptl-counts");
      nextCounts.forEach((c, i) => foot[i] && (foot[i].textContent = c));
    }
  }

  /**
   * Add rows that arrived below containers that had none on the page (opened for the first
   * time); false when `next` is not that (rows went away or came elsewhere): draw anew.
   * @param {Row[]} next @param {string[]} [nextCounts]
   */
  function grow(next, nextCounts) {
    const added = next.filter((r) => !byPath.has(r.p));
    if (next.length - added.length !== byPath.size) return false;
    const newPaths = new Set(added.map((r) => r.p));
    const opened = new Set();
    for (const r of added) {
      if (r.u === null || r.u === undefined) return false; // a new top-level row
      if (newPaths.has(r.u)) continue; // below another new row (a selection deep inside)
      if (!byPath.has(r.u) || (kids.get(r.u) || []).length) return false;
      opened.add(r.u);
    }
    for (const r of added) {
      byPath.set(r.p, r);
      let list = kids.get(/** @type {string} */ (r.u));
      if (!list) kids.set(/** @type {string} */ (r.u), (list = []));
      list.push(r);
    }
    for (const p of opened) {
      const li = items.get(p);
      if (!li) continue;
      const group = /** @type {HTMLElement} */ (li.lastElementChild);
      group.replaceChildren();
      delete group.dataset.filled;
      if (li.getAttribute("aria-expanded") === "true") fill(group, kids.get(p) || []);
    }
    api.signature = next.map((r) => r.p).join("\u0000");
    root.style.setProperty("--ptl-name-width", `${nameWidth(next)}em`);
    refresh(next, nextCounts);
    return true;
  }

  function syncFolded() {
    folded = new Set(model.get("collapsed"));
    for (const [p, li] of items) {
      const r = byPath.get(p);
      if (r && !r.leaf) {
        const open = !folded.has(p);
        if ((li.getAttribute("aria-expanded") === "true") !== open) setExpanded(li, r, open);
      }
    }
  }

  /** Show only the columns not in `next` (the folded group), in place. @param {Set<string>} next */
  function foldColumns(next) {
    hidden = next;
    root.style.setProperty("--ptl-cols", String(columns.filter((c) => !hidden.has(c)).length || 1));
    for (const el of /** @type {NodeListOf<HTMLElement>} */ (root.querySelectorAll(".ptl-cell[data-column]")))
      el.hidden = hidden.has(el.dataset.column ?? "");
  }

  showSelection();
  const api = {
    el: root,
    showSelection,
    refresh,
    grow,
    syncFolded,
    foldColumns,
    label,
    columns: columns.join("\u0000"),
    signature: rows.map((r) => r.p).join("\u0000"),
  };
  return api;
}

/** @type {import("@anywidget/types").Render<Model>} */
function render({ model, el }) {
  const unwatchKernel = watchKernel(model, el);
  const wrap = h("div", "ptl-diagram");
  keepKeys(wrap);
  const msg = h("div", "ptl-message");
  msg.setAttribute("role", "alert");
  // one toggle for the group of columns and panels that start folded (`foldable`)
  const foldBar = h("div", "ptl-foldbar");
  const foldButton = h("button", "ptl-fold-group");
  foldButton.type = "button";
  foldBar.append(foldButton);
  const trees = h("div", "ptl-trees");
  const side = h("div", "ptl-panels");
  const caption = h("div", "ptl-caption");
  wrap.append(msg, foldBar, trees, side, caption);
  el.append(wrap);

  /** The columns and panels not shown now. */
  const foldedNow = () => new Set(model.get("foldable_open") ? [] : model.get("foldable") || []);
  foldButton.addEventListener("click", (e) => {
    e.stopPropagation();
    model.set("foldable_open", !model.get("foldable_open"));
    model.save_changes();
    drawFold();
  });

  const getRows = jsonTrait(model, "rows", rowsFromWire);
  const getPanels = jsonTrait(model, "panels", (/** @type {any[]} */ specs) =>
    specs.map((p) => ({ ...p, rows: rowsFromWire(p.rows) })),
  );
  /** @type {ReturnType<typeof makeTree> | null} */
  let main = null;
  /** @type {ReturnType<typeof makeTree>[]} */
  let panels = [];

  function drawMain() {
    const rows = getRows();
    const sig = rows.map((/** @type {Row} */ r) => r.p).join("\u0000") + "\u0001" + model.get("columns").join("\u0000");
    if (main && main.signature + "\u0001" + model.get("columns").join("\u0000") === sig) {
      main.refresh(rows, model.get("counts"));
      return;
    }
    if (main && main.columns === model.get("columns").join("\u0000") && main.grow(rows, model.get("counts"))) return;
    const hadFocus = main && main.el.contains(document.activeElement);
    main = makeTree({
      model,
      label: `${model.get("columns").join(", ")} aligned by path`,
      columns: model.get("columns"),
      rows,
      counts: model.get("counts"),
      folded: foldedNow(),
    });
    trees.replaceChildren(main.el);
    if (hadFocus) /** @type {HTMLElement | null} */ (main.el.querySelector('[tabindex="0"]'))?.focus();
  }

  function drawPanels() {
    const specs = getPanels();
    // the same panels, maybe with rows opened since: added in place (a big panel's rows come as opened)
    const same = panels.length === specs.length && panels.every((t, i) => t.label === specs[i].title);
    if (same && panels.every((t, i) => t.grow(specs[i].rows, [specs[i].counts]))) return;
    panels = specs.map((/** @type {Panel} */ p) => {
      const t = makeTree({ model, label: p.title, columns: ["value"], rows: p.rows, counts: [p.counts], className: "ptl-side" });
      return t;
    });
    side.replaceChildren(
      ...panels.map((t, i) => {
        const box = h("section", "ptl-panel");
        box.dataset.title = specs[i].title;
        box.append(h("div", "ptl-panel-title", specs[i].title), t.el);
        return box;
      }),
    );
    drawFold();
  }

  /** The folded group: its toggle's words, and which columns and panels show. */
  function drawFold() {
    const group = model.get("foldable") || [];
    const open = !!model.get("foldable_open");
    foldBar.hidden = group.length === 0;
    foldButton.setAttribute("aria-expanded", String(open));
    foldButton.textContent = `${open ? "▾ hide" : "▸ show"} ${group.join(", ")}`;
    foldButton.title = open ? "fold these columns and panels again" : "show the folded columns and panels";
    const folded = foldedNow();
    if (main) main.foldColumns(folded);
    for (const box of /** @type {NodeListOf<HTMLElement>} */ (side.querySelectorAll(":scope > .ptl-panel")))
      box.hidden = folded.has(box.dataset.title ?? "");
  }

  function drawMessage() {
    const text = model.get("message");
    msg.textContent = text;
    msg.hidden = !text;
    msg.dataset.kind = model.get("message_kind");
  }

  function drawCaption() {
    caption.textContent = model.get("caption");
    caption.hidden = !model.get("caption");
  }

  const showSelection = () => [main, ...panels].forEach((t) => t && t.showSelection());
  const syncFolded = () => [main, ...panels].forEach((t) => t && t.syncFolded());

  drawMain();
  drawPanels();
  drawMessage();
  drawCaption();
  drawFold();

  /** @type {[string, () => void][]} */
  const handlers = [
    ["change:rows change:columns change:counts", () => (drawMain(), showSelection())],
    ["change:panels", () => (drawPanels(), showSelection())],
    ["change:selected_path", showSelection],
    ["change:collapsed", syncFolded],
    ["change:message change:message_kind", drawMessage],
    ["change:caption", drawCaption],
    ["change:foldable change:foldable_open", drawFold],
  ];
  for (const [ev, fn] of handlers) model.on(ev, fn);
  return () => {
    for (const [ev, fn] of handlers) model.off(ev, fn);
    unwatchKernel();
  };
}

export default { render };
