// @ts-check
// The replay page of an exported run (explorer/export.py): a step slider, the before/after bars,
// the loss line, the aligned diagram drawn by diagram.js's own `render` from a small in-page
// model (get/set/on/off/save_changes), and every other view's text (explorer/views.py), every
// point's numbers embedded in the page as JSON (#ptl-replay-data). No kernel, no network. All
// text goes through textContent, never HTML.

/**
 * @typedef {{ labels: string[], paths: string[], before: (number|null)[][], after: (number|null)[][],
 *             before_text: string[][], after_text: string[][] }} ReplayBars
 * @typedef {{ title: string, note: string, start: number, loss: (number|null)[], loss_text: string[],
 *             rate_text: string[], log_scale: boolean, bars: ReplayBars,
 *             diagram: Record<string, any> & { steps: Record<string, any>[] },
 *             views: { name: string, text: string | string[] }[] }} ReplayData
 */

/**
 * Draw the page into #ptl-replay and show the step the run ended at.
 * @param {{ render: (props: { model: any, el: HTMLElement }) => unknown }} diagram
 */
function replayPage(diagram) {
  const data = /** @type {ReplayData} */ (JSON.parse(document.getElementById("ptl-replay-data")?.textContent ?? "{}"));
  const root = /** @type {HTMLElement} */ (document.getElementById("ptl-replay"));
  const n = data.loss.length;
  const bars = data.bars;
  /** @param {string} tag @param {string} [cls] @param {string} [text] @returns {any} */
  const mk = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  /** @param {string} tag @param {Record<string, string | number>} attrs @param {string} [text] */
  const svg = (tag, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  /** @param {(number|null)[]} xs */
  const finite = (xs) => /** @type {number[]} */ (xs.filter((x) => x !== null && Number.isFinite(x)));

  // ---- the title, the note and the step slider
  const head = mk("header", "ptl-replay-head");
  head.append(mk("h1", "", data.title), mk("p", "ptl-replay-note", data.note));
  const controls = mk("div", "ptl-replay-controls");
  const slider = /** @type {HTMLInputElement} */ (mk("input", "ptl-replay-step"));
  Object.assign(slider, { type: "range", min: "0", max: String(n - 1), step: "1", id: "ptl-replay-step" });
  const label = mk("label", "", "Step");
  label.htmlFor = slider.id;
  const readout = mk("output", "ptl-replay-readout");
  readout.htmlFor = slider.id;
  const stepText = mk("span", "ptl-replay-stepno");
  const lossText = mk("span", "ptl-replay-loss");
  const rateText = mk("span", "ptl-replay-rate");
  readout.append(stepText, lossText, rateText);
  controls.append(label, slider, readout);

  // ---- the bars: before and after of each element, one row each (a zero line), and their table
  const W = 460;
  const ROW = 16;
  const LEFT = Math.min(160, 16 + 7 * Math.max(4, ...bars.labels.map((l) => Math.min(l.length, 22))));
  const all = finite([...bars.before.flat(), ...bars.after.flat(), 0]);
  const lo = Math.min(...all);
  const hi = Math.max(...all);
  const x = (/** @type {number | null} */ v) => LEFT + ((((v ?? 0) - lo) / (hi - lo || 1)) * (W - LEFT - 10));
  const barsFig = mk("figure", "ptl-replay-fig ptl-replay-bars");
  const barsSvg = svg("svg", { viewBox: `0 0 ${W} ${bars.labels.length * ROW + 24}`, role: "img" });
  barsSvg.setAttribute("aria-label", "before (blue) and after (orange) value of each parameter element");
  barsSvg.append(svg("line", { x1: x(0), x2: x(0), y1: 0, y2: bars.labels.length * ROW, class: "ptl-replay-axis" }));
  /** @type {[SVGElement, SVGElement][]} */
  const rects = bars.labels.map((name, i) => {
    const y = i * ROW;
    const text = svg("text", { x: LEFT - 6, y: y + 12, "text-anchor": "end", class: "ptl-replay-label" });
    text.textContent = name.length > 22 ? `${name.slice(0, 8)}…${name.slice(-13)}` : name;
    text.append(svg("title", {}, bars.paths[i]));
    const b = svg("rect", { y: y + 2, height: 6, class: "ptl-replay-before" });
    const a = svg("rect", { y: y + 8, height: 6, class: "ptl-replay-after" });
    barsSvg.append(text, b, a);
    return [b, a];
  });
  const ticks = [lo, hi].map((v, i) => svg("text", { x: x(v), y: bars.labels.length * ROW + 16,
    "text-anchor": i ? "end" : "start", class: "ptl-replay-tick" }, String(Number(v.toPrecision(3)))));
  barsSvg.append(...ticks);
  const table = mk("table", "ptl-bars-table ptl-replay-table");
  table.append(mk("caption", "", "Bars: before and after the step"));
  const thead = mk("tr");
  for (const t of ["element", "before", "after"]) thead.append(mk("th", "", t));
  const theadBox = mk("thead");
  theadBox.append(thead);
  table.append(theadBox);
  const tbody = mk("tbody");
  /** @type {HTMLElement[][]} */
  const cells = bars.labels.map((name) => {
    const tr = mk("tr");
    const cs = [mk("td", "ptl-key", name), mk("td", "ptl-bars-value"), mk("td", "ptl-bars-value")];
    tr.append(...cs);
    tbody.append(tr);
    return cs;
  });
  table.append(tbody);
  const folded = mk("details", "ptl-replay-values");
  folded.append(mk("summary", "", "the values as a table"), table);
  barsFig.append(mk("figcaption", "", "Before (blue) and after (orange) the step"), barsSvg, folded);
  barsFig.hidden = bars.labels.length === 0;

  // ---- the loss line, a marker at the step
  const H = 200;
  const losses = finite(data.loss);
  const ylo = Math.min(...losses);
  const yhi = Math.max(...losses);
  const lx = (/** @type {number} */ t) => 50 + (t / Math.max(n - 1, 1)) * (W - 60);
  // a log scale (the live explorer's "log-scale loss" box, as it was) when every loss is above 0
  const canLog = losses.length > 0 && ylo > 0;
  let logScale = canLog && data.log_scale;
  const f = (/** @type {number} */ v) => (logScale ? Math.log10(v) : v);
  const ly = (/** @type {number | null} */ v) => 10 + (1 - (f(v ?? ylo) - f(ylo)) / (f(yhi) - f(ylo) || 1)) * (H - 40);
  const lossFig = mk("figure", "ptl-replay-fig ptl-replay-lossfig");
  const lossSvg = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  lossSvg.setAttribute("aria-label", "the loss at each step of the run");
  const line = svg("polyline", { class: "ptl-replay-line" });
  const drawLine = () =>
    line.setAttribute("points", data.loss.map((v, t) => `${lx(t).toFixed(1)},${ly(v).toFixed(1)}`).join(" "));
  drawLine();
  const marker = svg("circle", { r: 5, class: "ptl-replay-marker" });
  const guide = svg("line", { y1: 10, y2: H - 30, class: "ptl-replay-guide" });
  lossSvg.append(
    svg("line", { x1: 50, x2: 50, y1: 10, y2: H - 30, class: "ptl-replay-axis" }),
    svg("line", { x1: 50, x2: W - 10, y1: H - 30, y2: H - 30, class: "ptl-replay-axis" }),
    line,
    guide,
    marker,
    svg("text", { x: 46, y: 14, "text-anchor": "end", class: "ptl-replay-tick" }, String(Number(yhi.toPrecision(3)))),
    svg("text", { x: 46, y: H - 30, "text-anchor": "end", class: "ptl-replay-tick" }, String(Number(ylo.toPrecision(3)))),
    svg("text", { x: 50, y: H - 14, "text-anchor": "middle", class: "ptl-replay-tick" }, "0"),
    svg("text", { x: W - 10, y: H - 14, "text-anchor": "end", class: "ptl-replay-tick" }, String(n - 1)),
    svg("text", { x: (W + 40) / 2, y: H - 2, "text-anchor": "middle", class: "ptl-replay-tick" }, "step"),
  );
  const logBox = /** @type {HTMLInputElement} */ (mk("input", "ptl-replay-log"));
  Object.assign(logBox, { type: "checkbox", id: "ptl-replay-log", checked: logScale, disabled: !canLog });
  const logLabel = mk("label", "", "log-scale loss");
  logLabel.htmlFor = logBox.id;
  if (!canLog) logLabel.title = "a log scale needs every loss above 0";
  logBox.addEventListener("change", () => {
    logScale = logBox.checked;
    drawLine();
    show(Number(slider.value));
  });
  const lossHead = mk("figcaption", "", "Loss at each step");
  lossHead.append(mk("span", "ptl-replay-logbox"));
  lossHead.lastChild.append(logBox, logLabel);
  lossFig.append(lossHead, lossSvg);

  // ---- the diagram: diagram.js's render, with a model holding the step's traits
  const { steps, ...fixed } = data.diagram;
  /** @type {Record<string, any>} */
  const traits = { ...fixed, ...steps[data.start] };
  /** @type {Map<string, Set<() => void>>} */
  const heard = new Map();
  const fire = (/** @type {string} */ name) => heard.get(name)?.forEach((fn) => fn());
  const model = {
    get: (/** @type {string} */ k) => traits[k],
    set: (/** @type {string} */ k, /** @type {any} */ v) => {
      if (traits[k] === v) return;
      traits[k] = v;
      fire(`change:${k}`);
    },
    save_changes() {},
    send() {},
    on(/** @type {string} */ names, /** @type {() => void} */ fn) {
      for (const name of names.split(/\s+/)) (heard.get(name) ?? heard.set(name, new Set()).get(name))?.add(fn);
    },
    off(/** @type {string} */ names, /** @type {() => void} */ fn) {
      for (const name of names.split(/\s+/)) heard.get(name)?.delete(fn);
    },
  };
  const diagramBox = mk("section", "ptl-replay-diagram");
  diagramBox.setAttribute("aria-label", "the aligned trees at this step");

  // ---- every other view: its text at the step (one text where it never changes)
  const texts = data.views.map((v) => {
    const pre = mk("pre", "ptl-replay-text");
    pre.dataset.view = v.name;
    return /** @type {[string | string[], HTMLElement]} */ ([v.text, pre]);
  });

  const row = mk("div", "ptl-replay-row");
  row.append(barsFig, lossFig);
  root.append(head, controls, row, diagramBox, ...texts.map(([, pre]) => pre));
  diagram.render({ model, el: diagramBox });

  /** Everything at step `t`. @param {number} t */
  function show(t) {
    stepText.textContent = `step ${t} of ${n - 1}`;
    lossText.textContent = `loss ${data.loss_text[t]}`;
    lossText.dataset.value = String(data.loss[t]);
    rateText.textContent = data.rate_text[t] ? `learning rate ${data.rate_text[t]}` : "";
    rects.forEach(([b, a], i) => {
      for (const [r, v] of /** @type {[SVGElement, number | null][]} */ ([[b, bars.before[t][i]], [a, bars.after[t][i]]])) {
        r.setAttribute("x", String(Math.min(x(0), x(v))));
        r.setAttribute("width", String(Math.abs(x(v) - x(0))));
      }
      cells[i][1].textContent = bars.before_text[t][i];
      cells[i][1].dataset.value = String(bars.before[t][i]);
      cells[i][2].textContent = bars.after_text[t][i];
      cells[i][2].dataset.value = String(bars.after[t][i]);
    });
    marker.setAttribute("cx", String(lx(t)));
    marker.setAttribute("cy", String(ly(data.loss[t])));
    guide.setAttribute("x1", String(lx(t)));
    guide.setAttribute("x2", String(lx(t)));
    for (const [text, pre] of texts) pre.textContent = typeof text === "string" ? text : text[t];
    Object.assign(traits, steps[t]);
    fire("change:rows");
    fire("change:panels");
    root.dataset.step = String(t);
  }
  slider.value = String(data.start);
  slider.addEventListener("input", () => show(Number(slider.value)));
  show(data.start);
}
