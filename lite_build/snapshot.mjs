// Make the kernel's start snapshot with the site's own Pyodide, under node (build.py --snapshot).
//
//   node lite_build/snapshot.mjs SITE OUT IMPORTS PACKAGE... -- WHEEL...
//
// Boots Pyodide from SITE/static/pyodide with the lock packages PACKAGE... (micropip, IPython,
// jedi and their dependencies), unpacks the wheels (the kernel's own: piplite, the ipykernel shim,
// comm, pyodide-kernel; the setup cell's: the widgets, pytree-lab), runs IMPORTS (`import
// pyodide_kernel` makes IPython's shell and the kernel object) and writes, gzipped:
//   OUT.gz        the interpreter's memory (pyodide.makeMemorySnapshot), restored by loadPyodide
//   OUT.files.gz  site-packages, as files: Emscripten's file system lives in JS, outside that
//                 memory. Layout: u32 little-endian header length, JSON header
//                 {"files": [[path, size], ...], "loadedPackages": [...]}, then the files' bytes.
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { pathToFileURL } from "node:url";
import path from "node:path";

const args = process.argv.slice(2);
const [site, out, imports] = args;
const split = args.indexOf("--");
const packages = args.slice(3, split);
const wheels = args.slice(split + 1);
const pyodideDir = path.join(site, "static", "pyodide");
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: pyodideDir + "/", _makeSnapshot: true, packages });
// (sysconfig says "//lib/..."; unpackArchive's default folder is the working folder, not site-packages)
const sitePackages = path.posix.normalize(py.runPython("import sysconfig; sysconfig.get_path('purelib')"));
for (const wheel of wheels) py.unpackArchive(new Uint8Array(readFileSync(wheel)), "wheel", { extractDir: sitePackages });
await py.runPythonAsync(imports);

const files = [];
const chunks = [];
const walk = (dir) => {
  for (const name of py.FS.readdir(dir).sort()) {
    if (name === "." || name === "..") continue;
    const full = `${dir}/${name}`;
    if (py.FS.isDir(py.FS.stat(full).mode)) walk(full);
    else {
      const data = py.FS.readFile(full);
      files.push([full, data.length]);
      chunks.push(data);
    }
  }
};
walk(sitePackages);
const header = new TextEncoder().encode(JSON.stringify({ files, loadedPackages: Object.keys(py.loadedPackages) }));
const size = new Uint8Array(4);
new DataView(size.buffer).setUint32(0, header.length, true);

// The snapshot keeps no JS object but those it can name: Pyodide wants its loadedPackages empty
// (the worker fills it again), and the API functions Python holds are named here, bound again
// by the worker (build.py SNAPSHOT_WORKER).
for (const name of Object.keys(py.loadedPackages)) delete py.loadedPackages[name];
const known = {
  public_api: py,
  loadPackage: py.loadPackage,
  loadPackagesFromImports: py.loadPackagesFromImports,
  install: py._api.install,
  loadBinaryFile: py._api.loadBinaryFile,
};
const snapshot = py.makeMemorySnapshot({
  serializer: (obj) => {
    const name = Object.keys(known).find((k) => known[k] === obj);
    if (!name) throw new Error(`Python holds a JS object the snapshot cannot name: ${obj?.name || obj?.constructor?.name}`);
    return name;
  },
});
writeFileSync(`${out}.gz`, gzipSync(snapshot, { level: 6 }));
writeFileSync(`${out}.files.gz`, gzipSync(Buffer.concat([size, header, ...chunks]), { level: 6 }));
console.log(JSON.stringify({ memory: snapshot.length, files: files.length, python: py.runPython("import sys; sys.version.split()[0]") }));
