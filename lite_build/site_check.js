// pytree-lab: a page of the site says on screen, in one sentence, why it cannot start or save.
// The build copies this file to the site's root as pytree-lab-check.js and loads it from
// lab/index.html and notebooks/index.html, before JupyterLite itself. It checks, in parallel
// with JupyterLite's own start:
// - the files the Python kernel loads (static/pyodide/, pypi/) against the build's list of every
//   file with its size and sha256 (pytree-lab-files.json): a missing or cut file is a broken upload
//   (the publisher's to fix), a request that fails without an answer is the network (the student's);
//   when the kernel fails to start, their contents against the sha256s (a damaged copy);
// - the browser's storage: IndexedDB available, and room left under the site's quota;
// - a student's stored copy of a course notebook that is older than the site's version.
(function () {
  "use strict";
  var script = document.currentScript;
  var root = new URL("..", script ? script.src : location.href).href;
  var shown = {};

  function say(cause, text) {
    if (shown[cause]) return;
    shown[cause] = true;
    var put = function () {
      var box = document.getElementById("pytree-lab-site-notice");
      if (!box) {
        box = document.createElement("div");
        box.id = "pytree-lab-site-notice";
        box.setAttribute("role", "alert");
        box.style.cssText =
          "position:fixed;left:0;right:0;bottom:0;z-index:100000;padding:8px 14px;" +
          "background:#fff4ce;color:#2b2100;border-top:2px solid #b58900;font:14px/1.45 system-ui,sans-serif";
        document.body.appendChild(box);
      }
      var line = document.createElement("p");
      line.style.margin = "2px 0";
      line.setAttribute("data-cause", cause);
      line.textContent = text; // names of files and notebooks are text, never HTML
      box.appendChild(line);
    };
    if (document.body) put();
    else document.addEventListener("DOMContentLoaded", put);
  }

  var REUPLOAD = "whoever published the site should upload the whole built folder again (or rebuild it with make lite-build).";
  var NETWORK = "this is the network, not the site: check the connection and reload the page.";

  function listed(names) {
    return names.slice(0, 2).join(", ") + (names.length > 2 ? " and " + (names.length - 2) + " more" : "");
  }

  function checkFiles() {
    fetch(root + "pytree-lab-files.json", { cache: "no-cache" }).then(
      function (answer) {
        if (!answer.ok) {
          say("upload", "This copy of the site is incomplete: its list of files (pytree-lab-files.json) is " +
            "missing on the server (HTTP " + answer.status + "), so Python may not start here; " + REUPLOAD);
          return null;
        }
        return answer.json().then(function (manifest) {
          hashOnFailure(manifest.files);
          return headAll(manifest);
        });
      },
      function () {
        say("network", "The site's files could not be loaded (no answer from the server): " + NETWORK);
      }
    );
  }

  function headAll(manifest) {
    var files = manifest.files;
    var names = Object.keys(files).filter(function (p) { return /^(static\/pyodide|pypi)\//.test(p); });
    var missing = [], cut = [], unanswered = [], refused = [];
    return Promise.all(names.map(function (path) {
      return fetch(root + path, { method: "HEAD", cache: "no-cache" }).then(
        function (answer) {
          var length = answer.headers.get("content-length");
          if (answer.status === 404 || answer.status === 410) missing.push(path);
          else if (!answer.ok) refused.push(path + " (HTTP " + answer.status + ")");
          else if (length !== null && !answer.headers.get("content-encoding") && Number(length) !== files[path][0]) cut.push(path);
        },
        function () { unanswered.push(path); }
      );
    })).then(function () {
      if (missing.length) {
        say("upload", "This copy of the site is incomplete: " + missing.length + " of the files Python needs " +
          (missing.length === 1 ? "is" : "are") + " missing on the server (" + listed(missing) +
          "), so Python cannot start here; " + REUPLOAD);
      } else if (cut.length) {
        say("upload", "This copy of the site is damaged: " + cut.length + " of the files Python needs " +
          (cut.length === 1 ? "has" : "have") + " another size on the server than the build made (" +
          listed(cut) + "), so Python cannot start here; " + REUPLOAD);
      } else if (unanswered.length) {
        say("network", "Some of the site's files could not be loaded (" + listed(unanswered) + "): " + NETWORK);
      } else if (refused.length) {
        say("server", "The server refused some of the site's files (" + listed(refused) +
          "): try again later, and if it stays, tell whoever published the site.");
      }
    });
  }

  // A file of the right size can still hold other bytes (a damaged copy): the kernel's worker then
  // fails (Pyodide refuses a wheel whose sha256 is not its lock's) and the kernel stays "Unknown".
  // When the page's kernel worker says it failed (remoteEntry.js marks "ptl-kernel-failed"), the
  // files are read again (from the browser's cache: the worker has just loaded them) and each is
  // compared with the build's sha256; nothing is read twice while the kernel starts well.
  function hashOnFailure(files) {
    if (!window.PerformanceObserver || !window.crypto || !crypto.subtle) return;
    var watch = new PerformanceObserver(function (list) {
      if (!list.getEntriesByName("ptl-kernel-failed").length) return;
      watch.disconnect();
      hashAll(files);
    });
    watch.observe({ type: "mark", buffered: true });
  }

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer), function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }

  function hashAll(files) {
    var names = Object.keys(files).filter(function (p) { return /^(static\/pyodide|pypi)\//.test(p); });
    var damaged = [], unread = 0;
    return Promise.all(names.map(function (path) {
      return fetch(root + path, { cache: "no-cache" })
        .then(function (answer) { return answer.ok ? answer.arrayBuffer() : Promise.reject(); })
        .then(function (bytes) { return crypto.subtle.digest("SHA-256", bytes); })
        .then(function (digest) { if (hex(digest) !== files[path][1]) damaged.push(path); }, function () { unread += 1; });
    })).then(function () {
      if (damaged.length) {
        say("upload", "This copy of the site is damaged: " + damaged.length + " of the files Python needs " +
          (damaged.length === 1 ? "differs" : "differ") + " from what the build made (" + listed(damaged) +
          "), so Python cannot start here; " + REUPLOAD);
      } else if (!unread) {
        say("kernel", "Python could not start in this page although the site's files are intact: reload the " +
          "page, and if it stays, tell whoever published the site.");
      }
    });
  }

  function megabytes(n) { return (n / 1048576).toFixed(n < 10485760 ? 1 : 0) + " MB"; }

  var FULL = function (usage, quota) {
    return "This browser's storage for this site is full" +
      (quota ? " (" + megabytes(usage) + " of " + megabytes(quota) + " used)" : "") +
      ", so lessons cannot be opened or saved: keep the notebooks you need with File > Download, then " +
      "free space (clear this site's data in the browser's settings, or free disk space) and reload.";
  };

  function checkStorage() {
    var noStore = "This browser gives the site no storage of its own (IndexedDB is off, as in some private " +
      "windows), so your work is not kept after this tab closes: keep it with File > Download, or open the " +
      "site in a regular window.";
    try {
      // a trial write of the size of a small lesson: refused when the quota is used up (the
      // browser's estimate may not show a quota set by policy), then deleted again
      var request = window.indexedDB.open("pytree-lab-storage-check");
      var refused = function (error) {
        if (error && error.name === "QuotaExceededError") say("full", FULL(0, 0));
        else say("no-storage", noStore);
      };
      request.onupgradeneeded = function () { request.result.createObjectStore("trial"); };
      request.onerror = function (event) { refused(request.error); event.preventDefault(); };
      request.onsuccess = function () {
        var db = request.result;
        var done = function () { db.close(); window.indexedDB.deleteDatabase("pytree-lab-storage-check"); };
        try {
          var write = db.transaction("trial", "readwrite");
          write.objectStore("trial").put(new Array(262145).join("x"), "lesson");
          write.oncomplete = done;
          write.onabort = function () { refused(write.error); done(); };
        } catch (e) {
          refused(e);
          done();
        }
      };
    } catch (e) {
      say("no-storage", noStore);
    }
    if (navigator.storage && navigator.storage.estimate) {
      navigator.storage.estimate().then(function (e) {
        // a lesson and its outputs take a few MB: less than that left is full for a student
        if (e.quota && e.quota - e.usage < 4194304) say("full", FULL(e.usage, e.quota));
      }, function () {});
    }
    window.addEventListener("unhandledrejection", function (event) {
      if (event.reason && event.reason.name === "QuotaExceededError") say("full", FULL(0, 0));
    });
  }

  // A stored copy of a course notebook hides the site's newer version of it (JupyterLite opens the
  // copy): say so as the page opens. Read only; the setup cell puts the new version beside the copy.
  function checkUpdates() {
    // when every stored copy has been compared, the page says so on <html> (data-ptl-updates-checked)
    var done = function () { document.documentElement.setAttribute("data-ptl-updates-checked", ""); };
    if (!window.indexedDB || !indexedDB.databases) return done();
    fetch(root + "jupyter-lite.json", { cache: "no-cache" }).then(function (r) { return r.json(); }).then(function (config) {
      var name = config["jupyter-config-data"].contentsStorageName;
      return indexedDB.databases().then(function (all) {
        if (!all.some(function (db) { return db.name === name; })) return;
        return new Promise(function (ok) {
          var request = indexedDB.open(name);
          request.onerror = function () { ok(); };
          request.onsuccess = function () {
            var db = request.result;
            db.onversionchange = function () { db.close(); }; // never hold up JupyterLite's own storage
            if (!db.objectStoreNames.contains("files")) { db.close(); return ok(); }
            var read = db.transaction("files", "readonly").objectStore("files").getAll();
            read.onerror = function () { db.close(); ok(); };
            read.onsuccess = function () { db.close(); ok(Promise.all(read.result.map(compare))); };
          };
        });
      });
    }).catch(function () {}).then(done);
  }

  function compare(item) {
    var meta = item && item.type === "notebook" && item.content && item.content.metadata &&
      item.content.metadata.pytree_lab;
    if (!meta || typeof meta.site_path !== "string" || typeof meta.site_version !== "string") return null;
    return fetch(root + "files/" + meta.site_path.split("/").map(encodeURIComponent).join("/"), { cache: "no-cache" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (site) {
        var now = site && site.metadata && site.metadata.pytree_lab;
        if (now && now.site_version !== meta.site_version) {
          say("update:" + item.path, "A newer version of " + meta.site_path + " was published after you saved your " +
            "copy " + item.path + " (your copy is what opens, unchanged): run its first cell to put the new " +
            "version beside it as a new file.");
        }
      }).catch(function () {});
  }

  checkFiles();
  checkStorage();
  checkUpdates();
})();
