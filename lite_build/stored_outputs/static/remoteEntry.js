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
(function () {
  "use strict";
  var NAME = "@pytree-lab/stored-outputs";
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
    ".ptl-stored{position:relative}" +
    ".ptl-stored-note{position:absolute;top:0;right:0;z-index:1;padding:0 6px;font-size:var(--jp-ui-font-size0,11px);" +
    "color:var(--jp-ui-font-color2,#616161);background:var(--jp-layout-color1,#fff);opacity:.9}" +
    ".ptl-stored-body button,.ptl-stored-body input,.ptl-stored-body select{opacity:.55}" +
    ".ptl-stored-later{box-sizing:border-box;padding:8px;color:var(--jp-ui-font-color2,#616161);font-style:italic;" +
    "border:1px dashed var(--jp-border-color2,#e0e0e0)}";

  function extension(Widget) {
    class StoredOutput extends Widget {
      constructor(options) {
        super();
        this.sanitizer = options.sanitizer;
        this.addClass("ptl-stored");
      }

      renderModel(mimeModel) {
        var data = mimeModel.data[MIME];
        var node = this.node;
        node.textContent = "";
        if (!document.getElementById("ptl-stored-style")) {
          var css = child("style", "", document.head);
          css.id = "ptl-stored-style";
          css.textContent = CSS;
        }
        var note = child("div", "ptl-stored-note", node);
        note.setAttribute("role", "note");
        note.textContent = NOTES[data.from === "notebook" ? "notebook" : "site"];
        var body = child("div", "ptl-stored-body", node);
        body.inert = true; // a control needs the kernel: none reacts until the cell runs
        return draw(data, data.model_id, body, this.sanitizer).catch(function (err) {
          body.textContent = "";
          child("pre", "", body).textContent = String(mimeModel.data["text/plain"] || "");
          console.warn(NAME, err);
        }).then(function () { node.setAttribute("data-ptl-drawn", ""); });
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
    var path = new URLSearchParams(location.search).get("path");
    if (!path || !/\.ipynb$/.test(path)) return Promise.resolve();
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

  function plugin(notebook) {
    return {
      id: NAME + ":revisit",
      description: "Starts the opened notebook's kernel early; draws a reopened notebook's saved widgets before it",
      autoStart: true,
      requires: [notebook.INotebookTracker],
      activate: function (app, tracker) {
        startEarly(app).catch(function (err) { console.warn(NAME, err); });
        tracker.widgetAdded.connect(function (_, panel) {
          panel.context.ready
            .then(function () { return revisit(panel.context.model); })
            .catch(function (err) { console.warn(NAME, err); });
        });
      },
    };
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
