// pytree-lab: draws the widget outputs the site's build stored (lite_build/first_paint.py), before
// the kernel exists. A JupyterLab mime extension, written by hand as a federated container (the
// page calls init(shareScope), then get("./mimeExtension")): it takes Lumino from the page's
// shared modules and brings nothing else. A stored widget is drawn from its saved state by the
// site's own modules (named by sha256, fetched from static/modules/: a notebook cannot bring
// code of its own), inert, with a quiet line saying it is not live yet; running the cell
// replaces it like any output.
(function () {
  "use strict";
  var NAME = "@pytree-lab/stored-outputs";
  var MIME = "application/vnd.pytree-lab.stored-widget+json";
  var NOTE = "saved with the site: run the cell to make it live";
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
    var kids = function (direction) {
      box.classList.add("widget-container", "widget-box", direction === "row" ? "widget-hbox" : "widget-vbox");
      box.style.display = "flex";
      box.style.flexDirection = direction;
      return Promise.all((s.children || []).map(function (ref) {
        var slot = child("div", "", box);
        return draw(data, refId(ref), slot, sanitizer);
      }));
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
        box.classList.add("ptl-stored-later");
        box.textContent = "(drawn when the cell runs)";
        return Promise.resolve();
    }
  }

  var CSS =
    ".ptl-stored{position:relative}" +
    ".ptl-stored-note{position:absolute;top:0;right:0;z-index:1;padding:0 6px;font-size:var(--jp-ui-font-size0,11px);" +
    "color:var(--jp-ui-font-color2,#616161);background:var(--jp-layout-color1,#fff);opacity:.9}" +
    ".ptl-stored-body button,.ptl-stored-body input,.ptl-stored-body select{opacity:.55}" +
    ".ptl-stored-later{padding:8px;color:var(--jp-ui-font-color2,#616161);font-style:italic}";

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
        note.textContent = NOTE;
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

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (shareScope) { scope = shareScope; },
    get: function (name) {
      if (name !== "./mimeExtension") return Promise.reject(new Error(NAME + " has no " + name));
      return shared("@lumino/widgets").then(function (lumino) {
        var ext = extension(lumino.Widget);
        return function () { return { __esModule: true, default: ext }; };
      });
    },
  };
})();
