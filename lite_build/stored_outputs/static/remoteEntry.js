// pytree-lab: draws the widget outputs the site's build stored (lite_build/first_paint.py), before
// the kernel exists. A JupyterLab mime extension, written by hand as a federated container (the
// page calls init(shareScope), then get("./mimeExtension")): it takes Lumino from the page's
// shared modules and brings nothing else. A stored widget is drawn from its saved state by the
// site's own modules (named by sha256, fetched from static/modules/: a notebook cannot bring
// code of its own), inert, with a quiet line saying it is not live yet; running the cell
// replaces it like any output. A student's notebook reopened (a second visit) shows its widget
// outputs the same way: JupyterLab's widget manager saved their models into the notebook's
// metadata (its saveState setting, on in the site), and the plugin below turns each widget output
// whose models are there into a stored one as the notebook opens, before any kernel exists.
//
// The same file, loaded by the site's page itself (lab/index.html, before JupyterLab's own code),
// draws the opened notebook (?path=) from its preview (lite_build/first_paint.py `preview`) at
// once, over the page, while JupyterLab starts; the plugin below takes it away once JupyterLab
// shows that notebook. JupyterLab loads this file again as its extension: the second run keeps
// the first one's container, so the plugin is the one that drew the preview.
(function () {
  "use strict";
  var NAME = "@pytree-lab/stored-outputs";
  if (window._JUPYTERLAB && window._JUPYTERLAB[NAME]) return;
  var MIME = "application/vnd.pytree-lab.stored-widget+json";
  var WIDGET_VIEW = "application/vnd.jupyter.widget-view+json";
  var WIDGET_STATE = "application/vnd.jupyter.widget-state+json";
  var REF = /(?:IPY_MODEL_|anywidget:)([0-9a-f]{32})\b/g; // a model named in another's state
  var NOTES = {
    site: "saved with the site: run the cell to make it live",
    notebook: "saved with your notebook: run the cell to make it live",
  };
  var NOTE = NOTES.site;
  var KERNEL = "python"; // the Pyodide kernel's name in the site's kernelspecs
  var script = document.currentScript;
  var modulesUrl = new URL("modules/", script ? script.src : location.href).href;
  var previewsUrl = new URL("previews/", script ? script.src : location.href).href;
  var scope = null;
  var loaded = {};

  function shared(name) {
    var versions = (scope && scope[name]) || {};
    var newest = Object.keys(versions).sort().pop();
    if (!newest) return Promise.reject(new Error(NAME + ": the page shares no " + name));
    return Promise.resolve(versions[newest].get()).then(function (factory) { return factory(); });
  }

  function text(sha) {
    if (!loaded[sha]) {
      loaded[sha] = fetch(modulesUrl + encodeURIComponent(sha)).then(function (answer) {
        if (!answer.ok) throw new Error(NAME + ": no module " + sha + " in the site");
        return answer.text();
      });
    }
    return loaded[sha];
  }

  var imported = {};
  function module(sha) {
    if (!imported[sha]) {
      imported[sha] = text(sha).then(function (source) {
        var url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
        return import(url).then(function (mod) {
          var def = mod.default || mod;
          return typeof def === "function" ? def() : def;
        });
      });
    }
    return imported[sha];
  }

  var styled = {};
  function style(sha) {
    if (!sha || styled[sha]) return Promise.resolve();
    styled[sha] = true;
    return text(sha).then(function (css) {
      var tag = document.createElement("style");
      tag.dataset.ptlStored = sha;
      tag.textContent = css;
      document.head.appendChild(tag);
    });
  }

  function refId(ref) { return String(ref || "").replace(/^(anywidget:|IPY_MODEL_)/, ""); }

  // What a widget's module may ask of its model: the saved state, read only in effect.
  function storedModel(data, id) {
    var state = Object.assign({}, data.models[id].state);
    var model = {
      get: function (key) { return state[key]; },
      set: function (key, value) { state[key] = value; },
      on: function () {},
      off: function () {},
      save_changes: function () {},
      send: function () {},
      widget_manager: { get_model: function (ref) { return Promise.resolve(storedModel(data, refId(ref))); } },
    };
    return model;
  }

  var experimental = { invoke: function () { return Promise.reject(new Error(NOTE)); } };

  function anyWidget(data, id, el, sanitizer) {
    var state = data.models[id].state;
    return Promise.all([module(state._esm.sha256), style(state._css && state._css.sha256)]).then(function (got) {
      var def = got[0];
      var model = storedModel(data, id);
      var host = {
        getWidget: function (ref) {
          var child = refId(ref);
          var childState = data.models[child].state;
          return module(childState._esm.sha256).then(function (childDef) {
            var childModel = storedModel(data, child);
            return Promise.resolve(childDef.initialize ? childDef.initialize({ model: childModel, experimental: experimental }) : {})
              .then(function (exports) {
                return {
                  exports: exports || {},
                  model: childModel,
                  render: function (props) { return draw(data, child, props.el, sanitizer); },
                };
              });
          });
        },
      };
      return Promise.resolve(def.initialize ? def.initialize({ model: model, experimental: experimental }) : null)
        .then(function () {
          return def.render && def.render({ model: model, el: el, experimental: experimental, host: host });
        });
    });
  }

  function child(tag, className, parent) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (parent) parent.appendChild(node);
    return node;
  }

  // One model of a stored output into el: anywidgets by their own module, boxes and the plain
  // controls as they look, anything else (a chart) as a quiet placeholder.
  function draw(data, id, el, sanitizer) {
    var model = data.models[id];
    if (!model) return Promise.resolve();
    var s = model.state;
    var box = child("div", "jupyter-widgets", el);
    (s._dom_classes || []).forEach(function (c) { box.classList.add(c); });
    var layout = (data.models[refId(s.layout)] || {}).state || {};
    Object.keys(layout).forEach(function (key) { // as ipywidgets' LayoutView: each trait a CSS property
      if (key.charAt(0) !== "_" && layout[key] !== null && layout[key] !== "") {
        box.style.setProperty(key.replace(/_/g, "-"), String(layout[key]));
      }
    });
    var kids = function (direction) {
      box.classList.add("widget-container", "widget-box", direction === "row" ? "widget-hbox" : "widget-vbox");
      box.style.display = "flex";
      box.style.flexDirection = direction;
      return Promise.all((s.children || []).map(function (ref) { return draw(data, refId(ref), box, sanitizer); }));
    };
    switch (model.name) {
      case "AnyModel":
        return anyWidget(data, id, box, sanitizer);
      case "VBoxModel":
      case "BoxModel":
      case "GridBoxModel":
        return kids("column");
      case "HBoxModel":
        return kids("row");
      case "HTMLModel":
      case "HTMLMathModel":
        box.classList.add("widget-inline-hbox", "widget-html");
        child("div", "widget-html-content", box).innerHTML = sanitizer.sanitize(String(s.value || ""));
        return Promise.resolve();
      case "LabelModel":
        child("div", "widget-label", box).textContent = String(s.value || "");
        return Promise.resolve();
      case "ButtonModel":
        var button = child("button", "jupyter-widgets jupyter-button widget-button", box);
        button.className += " " + box.className.replace("jupyter-widgets", ""); // its own classes and layout,
        button.style.cssText = box.style.cssText; // as ipywidgets puts them on the button itself
        box.style.display = "contents";
        button.disabled = true;
        button.textContent = String(s.description || "");
        return Promise.resolve();
      case "CheckboxModel":
      case "DropdownModel":
        var label = child("label", "widget-label", box);
        label.textContent = String(s.description || "");
        var input = child(model.name === "CheckboxModel" ? "input" : "select", "", box);
        if (model.name === "CheckboxModel") {
          input.type = "checkbox";
          input.checked = !!s.value;
        } else {
          child("option", "", input).textContent = String((s._options_labels || [])[s.index] || "");
        }
        input.disabled = true;
        return Promise.resolve();
      default:
        // a chart: the room it will take (its layout, above), so that running the cell moves nothing
        box.classList.add("ptl-stored-later");
        box.textContent = (s.title ? String(s.title) + ": " : "") + "drawn when the cell runs";
        return Promise.resolve();
    }
  }

  var CSS =
    ".ptl-stored,.ptl-stored-text{position:relative}" +
    ".ptl-stored-note{position:absolute;top:0;right:0;z-index:1;padding:0 6px;font-size:var(--jp-ui-font-size0,11px);" +
    "color:var(--jp-ui-font-color2,#616161);background:var(--jp-layout-color1,#fff);opacity:.9}" +
    ".ptl-stored-note.ptl-stored-said{color:var(--jp-ui-inverse-font-color1,#fff);background:var(--jp-brand-color1,#1976d2);opacity:1}" +
    ".ptl-stored-body :is(button,input,select,[role=slider],[role=button]){opacity:.5;filter:grayscale(1)}" +
    ".ptl-stored-later{box-sizing:border-box;padding:8px;color:var(--jp-ui-font-color2,#616161);font-style:italic;" +
    "border:1px dashed var(--jp-border-color2,#e0e0e0)}";

  function addStyle(id, css) {
    if (document.getElementById(id)) return;
    var tag = child("style", "", document.head);
    tag.id = id;
    tag.textContent = css;
  }

  // The quiet note of a stored output (a .ptl-stored or .ptl-stored-text box); a click on the output says it louder.
  function note(node, text) {
    addStyle("ptl-stored-style", CSS);
    var line = child("div", "ptl-stored-note", node);
    line.setAttribute("role", "status");
    line.textContent = text;
    node.addEventListener("click", function () {
      line.textContent = "not live yet: run the cell to make it live (Shift+Enter)";
      line.classList.add("ptl-stored-said");
    });
  }

  // Stored text outputs carry the note too: in a notebook of the site (metadata.pytree_lab), a code
  // cell with outputs and no execution count shows what the build stored; each of its outputs but a
  // stored widget (noted already) gets the note, until the cell runs and its outputs are new ones.
  function noteText(panel) {
    if (!panel.context.model.getMetadata("pytree_lab")) return;
    panel.content.widgets.forEach(function (cell) {
      if (cell.model.type !== "code") return;
      Promise.resolve(cell.ready).then(function () {
        var outputs = cell.model.outputs;
        if (cell.model.executionCount !== null || !cell.outputArea) return;
        cell.outputArea.widgets.forEach(function (shown, i) {
          var out = outputs.get(i);
          if (!out || out.data[MIME] || shown.hasClass("ptl-stored-text")) return;
          shown.addClass("ptl-stored-text");
          note(shown.node, NOTES.site);
        });
      });
    });
  }

  // A stored widget into node (a .ptl-stored box): its quiet note, then its models, inert; its
  // text form where it cannot be drawn.
  function storedInto(node, data, text, sanitizer) {
    note(node, NOTES[data.from === "notebook" ? "notebook" : "site"]);
    var body = child("div", "ptl-stored-body", node);
    body.inert = true; // a control needs the kernel: none reacts until the cell runs (dimmed, a click says so)
    return draw(data, data.model_id, body, sanitizer).catch(function (err) {
      body.textContent = "";
      child("pre", "", body).textContent = String(text || "");
      console.warn(NAME, err);
    }).then(function () { node.setAttribute("data-ptl-drawn", ""); });
  }

  function extension(Widget) {
    class StoredOutput extends Widget {
      constructor(options) {
        super();
        this.sanitizer = options.sanitizer;
        this.addClass("ptl-stored");
      }

      renderModel(mimeModel) {
        this.node.textContent = "";
        return storedInto(this.node, mimeModel.data[MIME], mimeModel.data["text/plain"], this.sanitizer);
      }
    }
    return {
      id: NAME + ":renderer",
      rendererFactory: {
        safe: true,
        mimeTypes: [MIME],
        createRenderer: function (options) { return new StoredOutput(options); },
      },
      rank: 0,
      dataType: "json",
    };
  }

  function sha256(text) {
    return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)).then(function (digest) {
      return Array.from(new Uint8Array(digest), function (b) { return b.toString(16).padStart(2, "0"); }).join("");
    });
  }

  // The models one widget output shows, from the notebook's saved widget state, as the build
  // stores them (first_paint.store): its view traits left out, modules named by sha256.
  function storedFromState(state, rootId) {
    var models = {};
    var hashed = [];
    var todo = [rootId];
    while (todo.length) {
      var id = todo.shift();
      if (models[id] || !state[id]) continue;
      var saved = state[id].state || {};
      var kept = {};
      Object.keys(saved).forEach(function (key) { if (key.indexOf("_view") !== 0) kept[key] = saved[key]; });
      models[id] = { name: state[id].model_name, state: kept };
      var refs = JSON.stringify(saved).matchAll(REF);
      for (var ref of refs) todo.push(ref[1]);
      ["_esm", "_css"].forEach(function (trait) {
        var owner = kept;
        if (typeof owner[trait] === "string") {
          hashed.push(sha256(owner[trait]).then(function (sha) { owner[trait] = { sha256: sha }; }));
        }
      });
    }
    return Promise.all(hashed).then(function () { return { model_id: rootId, models: models, from: "notebook" }; });
  }

  // A notebook as it opens: each widget output whose models the notebook saved becomes a stored
  // one (the cell's other outputs and everything the student wrote stay as they are). The saved
  // state is then taken out of the open notebook, so that the widget manager does not restore it
  // as models without a kernel behind them once the kernel starts; the next save writes the live
  // widgets' state again. Opening changes nothing the student would have to save.
  function revisit(model) {
    var saved = model.getMetadata("widgets");
    var state = saved && saved[WIDGET_STATE] && saved[WIDGET_STATE].state;
    if (!state || !(window.crypto && crypto.subtle)) return Promise.resolve();
    var clean = !model.dirty;
    var jobs = [];
    for (var c = 0; c < model.cells.length; c++) {
      var cell = model.cells.get(c);
      if (cell.type !== "code") continue;
      for (var i = 0; i < cell.outputs.length; i++) {
        var view = cell.outputs.get(i).data[WIDGET_VIEW];
        if (view && state[view.model_id]) jobs.push(restore(cell.outputs, cell.outputs.get(i), state));
      }
    }
    model.deleteMetadata("widgets");
    return Promise.all(jobs).then(function () { if (clean) model.dirty = false; });
  }

  function restore(outputs, output, state) {
    return storedFromState(state, output.data[WIDGET_VIEW].model_id).then(function (stored) {
      for (var i = 0; i < outputs.length; i++) {
        if (outputs.get(i) !== output) continue; // (gone: the cell ran meanwhile)
        var json = output.toJSON();
        json.data = Object.assign({}, json.data);
        delete json.data[WIDGET_VIEW];
        json.data[MIME] = stored;
        outputs.set(i, json);
      }
    });
  }

  // The kernel of the notebook the address opens (lab/index.html?path=...) is started as soon as
  // the page's plugins are active, not after the notebook has been fetched and drawn (seconds of
  // a start): the notebook then finds its session by path and joins that kernel. Only where the
  // site's default kernel is the Pyodide one and no session has that path yet. This page's own
  // connection to the kernel is closed at once: a second client would take the kernel's messages
  // (a widget's comm_open) that belong to the notebook.
  function startEarly(app) {
    var path = openedPath();
    if (!path) return Promise.resolve();
    var sessions = app.serviceManager.sessions;
    var specs = app.serviceManager.kernelspecs;
    var known = function () { return specs.specs && specs.specs.default; };
    return Promise.all([sessions.ready, specs.ready])
      .then(function () { return known() || specs.refreshSpecs(); })
      .then(function () {
      var kernel = known();
      if (kernel !== KERNEL) return;
      for (var model of sessions.running()) if (model.path === path) return;
      return sessions
        .startNew({ path: path, name: path.split("/").pop(), type: "notebook", kernel: { name: kernel } })
        .then(function (session) { session.dispose(); }); // the kernel stays; the notebook's own connection alone hears it
    });
  }

  // ---- the kernel starts with the page

  // The page starts the opened notebook's kernel worker itself, before any of JupyterLab's code
  // has loaded: Pyodide's boot, the kernel's installs and its imports run while JupyterLab starts.
  // The notebook's Pyodide kernel takes this worker when it would give it the same options (the
  // build patches jupyterlite-pyodide-kernel to ask: lite_build/build.py, "the kernel starts with
  // the page") and makes its own otherwise. On <html data-ptl-kernel>: "starting", then "started"
  // (Pyodide up, the kernel imported) or "failed"; "taken" once the kernel has it; "declined"
  // (other options) or "unused" (no kernel took it a minute after JupyterLab restored): stopped;
  // "late": none started, the link is slow (kernelLate).
  var early = null; // the worker no kernel has taken yet: {worker, options}
  var kernelWaits = true; // the page has not started its worker yet (nor has JupyterLab its own)

  function kernelSaid(what) {
    document.documentElement.dataset.ptlKernel = what;
    performance.mark("ptl-kernel-" + what); // for the bench
  }

  function stopUnused() {
    if (!early) return;
    early.worker.terminate();
    early = null;
    kernelSaid("unused");
  }

  function startOf(options) { // what the worker's start depends on, addresses made absolute
    var at = function (url) { return url && new URL(url, location.href).href; };
    return JSON.stringify([at(options.pyodideUrl), at(options.indexUrl), at(options.pipliteWheelUrl),
      (options.pipliteUrls || []).map(at), !!options.disablePyPIFallback, options.loadPyodideOptions || {}]);
  }

  function startKernel() {
    var start = script.getAttribute("data-ptl-kernel");
    if (!start || !openedPath() || window.crossOriginIsolated || !window.Worker) return;
    start = JSON.parse(start);
    var root = new URL("../../../../", script.src); // this file is extensions/<name>/static/ of the site
    var at = function (url) { return new URL(url, root).href; };
    var options = {
      pyodideUrl: at(start.pyodideUrl),
      indexUrl: at(start.indexUrl),
      pipliteWheelUrl: at(start.pipliteWheelUrl),
      pipliteUrls: start.pipliteUrls.map(at),
      disablePyPIFallback: start.disablePyPIFallback,
      loadPyodideOptions: start.loadPyodideOptions,
    };
    if (slowLink) delete options.loadPyodideOptions.ptlSnapshot; // (kernelLate, above)
    var worker = new Worker(at(start.worker), { type: "module" });
    early = { worker: worker, options: options };
    kernelSaid("starting");
    worker.addEventListener("message", function (event) { // comlink's answer to the call below
      var data = event.data || {};
      if (data.id !== "ptl-start") return;
      var what = data.type === "RAW" ? "started" : "failed";
      if (document.documentElement.dataset.ptlKernel === "starting") kernelSaid(what);
      else performance.mark("ptl-kernel-" + what);
    });
    worker.postMessage({ id: "ptl-start", type: "APPLY", path: ["ptlStart"], argumentList: [{ type: "RAW", value: options }] });
  }

  // On a slow link (the page's own files came at under 30 Mbit/s) the kernel's tens of MB would
  // share it with JupyterLab's own files, and JupyterLab would draw the notebook seconds later
  // (3.3x JupyterLite's own site at 10 Mbit/s): there the kernel starts as JupyterLite starts it,
  // once JupyterLab has opened the notebook, and its bytes follow JupyterLab's. Decided once, by
  // whichever asks first (the page's start of the kernel, or the plugin's); a file from the cache (or
  // answered 304) tells nothing.
  // The link as last seen is kept (localStorage) for a visit whose files all come from the cache: it
  // decides whether a start snapshot is worth its bytes (slowLink), not when the kernel starts.
  var late = null;
  var slowLink = false;

  function kernelLate() {
    if (late === null) {
      var best = 0;
      performance.getEntriesByType("resource").forEach(function (e) {
        var took = e.responseEnd - e.responseStart;
        if (e.encodedBodySize >= 16384 && e.transferSize > e.encodedBodySize) best = Math.max(best, took > 0 ? e.encodedBodySize / took : Infinity);
      });
      late = slowLink = best > 0 && best < 3750; // bytes a millisecond: 30 Mbit/s
      try {
        if (best > 0) localStorage.setItem("ptl-slow-link", String(late));
        else slowLink = localStorage.getItem("ptl-slow-link") === "true";
      } catch (e) {} // (no storage: the link as this visit saw it)
      if (late) kernelSaid("late");
    }
    return late;
  }

  // Asked by the notebook's Pyodide kernel (the build's patch of its initWorker) with its options.
  window.ptlKernelWorker = function (options) {
    kernelWaits = false; // a kernel is starting: the page starts none of its own after this
    // a site built with a start snapshot (build.py --snapshot): on a slow link its 24 MB cost more
    // than the imports it saves, and the kernel boots as on a site without one (the options are
    // the kernel's own, so every kernel of this page does)
    if (kernelLate() || slowLink) delete (options.loadPyodideOptions || {}).ptlSnapshot;
    var offered = early;
    early = null;
    if (!offered) return null;
    if (startOf(options) === startOf(offered.options)) {
      kernelSaid("taken");
      return offered.worker;
    }
    offered.worker.terminate();
    kernelSaid("declined");
    console.warn(NAME, "the kernel's options are not the build's: the page's early start was stopped", options, offered.options);
    return null;
  };

  // ---- the preview: the opened notebook as the build stored it, drawn before JupyterLab starts

  // In JupyterLab's colours and fonts: the page links the student's JupyterLab theme (its CSS
  // variables) for the preview; the values after each variable are the light theme's.
  var PREVIEW_CSS =
    "#ptl-preview{position:fixed;inset:0;z-index:9999;overflow:auto;background:var(--jp-layout-color0,#fff);" +
    "color:var(--jp-content-font-color1,rgba(0,0,0,.87));font-size:var(--jp-content-font-size1,14px);line-height:1.5;" +
    "font-family:var(--jp-content-font-family,system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif)}" +
    "#ptl-preview .ptl-preview-status{margin:0;padding:6px 16px;border-bottom:1px solid var(--jp-border-color2,#e0e0e0);" +
    "color:var(--jp-ui-font-color2,#616161);font-size:12px}" +
    "#ptl-preview .ptl-preview-cells{max-width:1100px;margin:0 auto;padding:12px 24px 48px 72px}" +
    "#ptl-preview .ptl-preview-cell{margin:0 0 12px}#ptl-preview .anchor-link{display:none}" +
    "#ptl-preview a{color:var(--jp-content-link-color,#1976d2)}" +
    "#ptl-preview pre{margin:0;white-space:pre-wrap;font-family:var(--jp-code-font-family,monospace);" +
    "font-size:var(--jp-code-font-size,13px);line-height:var(--jp-code-line-height,1.3077)}" +
    "#ptl-preview .ptl-preview-code{padding:5px 8px;background:var(--jp-cell-editor-background,#f5f5f5);" +
    "border:1px solid var(--jp-cell-editor-border-color,#e0e0e0);border-radius:2px}" +
    "#ptl-preview .ptl-preview-out{display:block;margin:6px 0 0;padding:0 8px}" +
    "#ptl-preview .k,#ptl-preview .kn,#ptl-preview .ow{color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold}" +
    "#ptl-preview .s,#ptl-preview .s1,#ptl-preview .s2,#ptl-preview .sd{color:var(--jp-mirror-editor-string-color,#ba2121)}" +
    "#ptl-preview .c,#ptl-preview .c1{color:var(--jp-mirror-editor-comment-color,#3d7b7b);font-style:italic}" +
    "#ptl-preview .mi,#ptl-preview .mf{color:var(--jp-mirror-editor-number-color,#080)}" +
    "#ptl-preview .nf,#ptl-preview .nc{color:var(--jp-mirror-editor-def-color,#00f)}";
  var THEMES = { "JupyterLab Dark": "theme-dark-extension", "JupyterLab Dark High Contrast": "theme-dark-high-contrast-extension" };
  var themesUrl = new URL("../../../../build/themes/@jupyterlab/", script ? script.src : location.href).href;

  // The preview has no JupyterLab sanitizer yet: an HTML widget there shows its text only.
  var TEXT_ONLY = {
    sanitize: function (html) {
      var span = document.createElement("span");
      span.textContent = new DOMParser().parseFromString(String(html), "text/html").body.textContent || "";
      return span.innerHTML;
    },
  };

  var previewing = null; // the preview on the page: {root}
  var previewEnded = false;

  function openedPath() {
    var path = new URLSearchParams(location.search).get("path");
    return path && /\.ipynb$/.test(path) ? path : null;
  }

  // One value of the site's browser storage (JupyterLite keeps the students' files and settings in
  // IndexedDB: database `storage`, stores "files" and "settings"): {value} (undefined where there is
  // none), or null where this cannot be told without making a database.
  function stored(storage, store, key) {
    if (!window.indexedDB || !indexedDB.databases) return Promise.resolve(null);
    return indexedDB.databases().then(function (all) {
      if (!all.some(function (db) { return db.name === storage; })) return { value: undefined };
      return new Promise(function (resolve) {
        var open = indexedDB.open(storage);
        open.onerror = function () { resolve(null); };
        open.onsuccess = function () {
          var db = open.result;
          try {
            if (!db.objectStoreNames.contains(store)) return resolve({ value: undefined });
            var get = db.transaction(store, "readonly").objectStore(store).get(key);
            get.onsuccess = function () { resolve({ value: get.result }); };
            get.onerror = function () { resolve(null); };
          } catch (err) {
            resolve(null);
          } finally {
            setTimeout(function () { db.close(); });
          }
        };
      });
    }, function () { return null; });
  }

  // Whether the student's browser holds a copy of `path`: that copy opens as it is, so no preview
  // (nor where this cannot be told).
  function savedCopy(storage, path) {
    return stored(storage, "files", path).then(function (got) { return !got || got.value !== undefined; });
  }

  // The student's JupyterLab theme, linked for the preview (the light one unless a dark one is set).
  function linkTheme(storage) {
    return stored(storage, "settings", "@jupyterlab/apputils-extension:themes").then(function (got) {
      var raw = got && got.value !== undefined ? (typeof got.value === "string" ? got.value : JSON.stringify(got.value)) : "";
      var name = (/\\?"theme\\?"\s*:\s*\\?"([^"\\]+)/.exec(raw) || [])[1];
      var link = document.createElement("link");
      link.id = "ptl-preview-theme";
      link.rel = "stylesheet";
      link.href = themesUrl + (THEMES[name] || "theme-light-extension") + "/index.css";
      return new Promise(function (resolve) {
        link.onload = link.onerror = function () { resolve(); };
        setTimeout(resolve, 1000); // drawn in the fallback colours rather than later
        document.head.appendChild(link);
      });
    });
  }

  // What became of the preview, on <html data-ptl-preview>: "shown", "saved" (the student's copy
  // opens instead), "none" (no preview of this notebook), "late" (JupyterLab showed it first).
  function said(what) { document.documentElement.dataset.ptlPreview = what; }

  // Resolves once the preview is drawn (its stored widgets too) or there is none to draw.
  function preview() {
    var path = openedPath();
    if (!path || !window.fetch) return Promise.resolve(said("none"));
    return fetch(previewsUrl + path.split("/").map(encodeURIComponent).join("/") + ".json")
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (data) {
        if (!data) return said("none");
        return savedCopy(data.storage, path).then(function (saved) {
          if (saved) return said("saved");
          return linkTheme(data.storage).then(function () {
            if (previewEnded) return said("late");
            if (document.body) return showPreview(data);
            return new Promise(function (resolve) {
              document.addEventListener("DOMContentLoaded", function () { resolve(previewEnded || showPreview(data)); });
            });
          });
        });
      })
      .catch(function (err) { said("none"); console.warn(NAME, err); });
  }

  function showPreview(data) {
    addStyle("ptl-preview-style", PREVIEW_CSS);
    var root = document.createElement("div");
    root.id = "ptl-preview";
    root.setAttribute("role", "region");
    root.setAttribute("aria-label", "The lesson as the site stored it, while JupyterLab starts");
    root.setAttribute("aria-busy", "true");
    var status = child("p", "ptl-preview-status", root);
    status.setAttribute("role", "status");
    status.textContent = "Opening the lesson: shown as the site stored it while JupyterLab starts (nothing here reacts yet).";
    var cells = child("div", "ptl-preview-cells", root);
    cells.inert = true;
    var drawn = [];
    data.cells.forEach(function (cell) {
      var box = child("div", "ptl-preview-cell", cells);
      if (cell.markdown !== undefined) {
        box.innerHTML = cell.markdown; // rendered and cleaned (bleach) by the build
        return;
      }
      if (cell.raw !== undefined) {
        child("pre", "", box).textContent = cell.raw;
        return;
      }
      child("pre", "ptl-preview-code", box).innerHTML = cell.code; // pygments' escaped HTML, made by the build
      cell.outputs.forEach(function (out) {
        if (out.stored) {
          drawn.push(storedInto(child("div", "ptl-stored ptl-preview-out", box), out.stored, out.text, TEXT_ONLY));
        } else if (out.png) {
          var img = child("img", "ptl-preview-out", box);
          img.alt = out.text || "an image output";
          img.src = "data:image/png;base64," + out.png;
        } else if (out.text) {
          var stored = child("div", "ptl-stored-text", box);
          note(stored, NOTE);
          child("pre", "ptl-preview-out", stored).textContent = out.text;
        }
      });
    });
    document.body.appendChild(root);
    previewing = { root: root };
    said("shown");
    return Promise.all(drawn);
  }

  // The cell at the top of the preview as the student scrolled it (0 where not scrolled).
  function previewTop() {
    if (!previewing) return 0;
    var cells = previewing.root.querySelectorAll(".ptl-preview-cell");
    var top = previewing.root.getBoundingClientRect().top;
    var at = 0;
    while (at < cells.length - 1 && cells[at].getBoundingClientRect().bottom <= top + 40) at += 1;
    return at;
  }

  // JupyterLab shows the opened notebook: its cells drawn down to the one at the preview's top (it
  // draws them in order, a few at a time), and every stored widget among those drawn; or 3 s (10 s
  // for a cell further down: the student reads the preview there meanwhile).
  function shown(panel, at) {
    var until = Date.now() + (at > 0 ? 10000 : 3000);
    return new Promise(function (resolve) {
      (function check() {
        var made = panel.node.querySelectorAll(".ptl-stored").length;
        var drawn = panel.node.querySelectorAll("[data-ptl-drawn]").length;
        var cells = panel.node.querySelectorAll(".jp-Cell").length;
        if ((cells > at && drawn === made) || Date.now() > until) requestAnimationFrame(function () { resolve(); });
        else requestAnimationFrame(check);
      })();
    });
  }

  // The cell at the notebook's top, kept there while JupyterLab still draws the cells above it
  // (their heights change as their outputs render): until the student scrolls, clicks or types,
  // or for 10 s.
  function pin(panel, cell) {
    cell.node.scrollIntoView({ block: "start" });
    var at = cell.node.getBoundingClientRect().top;
    var until = Date.now() + 10000;
    var stop = function () { until = 0; };
    ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (type) {
      panel.node.addEventListener(type, stop, { capture: true, once: true });
    });
    (function hold() {
      if (Date.now() > until || !cell.node.isConnected) return;
      if (Math.abs(cell.node.getBoundingClientRect().top - at) > 2) cell.node.scrollIntoView({ block: "start" });
      requestAnimationFrame(hold);
    })();
  }

  // The preview goes; the notebook shows the cell the preview's top showed.
  function endPreview(panel, at) {
    previewEnded = true;
    if (!previewing) return;
    var cell = at > 0 && panel && panel.content && panel.content.widgets[at];
    if (cell && cell.node && cell.node.isConnected) pin(panel, cell);
    else if (cell && panel.content.scrollToItem) Promise.resolve(panel.content.scrollToItem(at, "start")).catch(function () {});
    previewing.root.remove();
    previewing = null;
    var theme = document.getElementById("ptl-preview-theme"); // JupyterLab has linked its own
    if (theme) theme.remove();
  }

  function plugin(notebook) {
    return {
      id: NAME + ":revisit",
      description: "Starts the opened notebook's kernel early; draws a reopened notebook's saved widgets before it",
      autoStart: true,
      requires: [notebook.INotebookTracker],
      activate: function (app, tracker) {
        if (!kernelLate()) startEarly(app).catch(function (err) { console.warn(NAME, err); });
        var path = openedPath();
        // the preview goes once JupyterLab shows the notebook, or 10 s after it restored without it
        app.restored.then(function () {
          setTimeout(function () { endPreview(null, 0); }, 10000);
          setTimeout(stopUnused, 60000);
        });
        tracker.widgetAdded.connect(function (_, panel) {
          panel.context.ready
            .then(function () { noteText(panel); return revisit(panel.context.model); })
            .catch(function (err) { console.warn(NAME, err); });
          if (path && panel.context.path === path) {
            var at = 0;
            var end = function () { endPreview(panel, at); };
            panel.revealed.then(function () { at = previewTop(); return shown(panel, at); }).then(end, end);
          }
        });
      },
    };
  }

  if (script && script.hasAttribute("data-ptl-preview")) { // loaded by the page, not by JupyterLab
    // the kernel's downloads (tens of MB) wait for the preview's (under 1 MB), which a slow link
    // would otherwise share with them: until it is drawn, or 3 s
    var kernelGoes = function () {
      if (kernelWaits && !kernelLate()) startKernel();
      kernelWaits = false;
    };
    preview().then(kernelGoes, kernelGoes);
    setTimeout(kernelGoes, 3000);
  }

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (shareScope) { scope = shareScope; },
    get: function (name) {
      if (name === "./extension") {
        return shared("@jupyterlab/notebook").then(function (notebook) {
          var ext = plugin(notebook);
          return function () { return { __esModule: true, default: ext }; };
        });
      }
      if (name !== "./mimeExtension") return Promise.reject(new Error(NAME + " has no " + name));
      return shared("@lumino/widgets").then(function (lumino) {
        var ext = extension(lumino.Widget);
        return function () { return { __esModule: true, default: ext }; };
      });
    },
  };
})();
