// Compile the .py files of zip archives (the stdlib zip, wheels) to bytecode with the very
// Python the site runs: Pyodide's own interpreter, here under node.
//
//   node lite_build/bytecode.mjs PYODIDE_DIR JOBS.json
//
// JOBS.json: [{"src": path, "dst": path, "layout": "zipimport" | "wheel", "prefix": path,
//              "drop_sources": bool}]
// "zipimport": mod.pyc next to mod.py (what zipimport reads, for python_stdlib.zip);
// "wheel": pkg/__pycache__/mod.<cache_tag>.pyc (what an installed package reads).
// drop_sources: mod.py is left out wherever it compiled, and mod.pyc takes its place (the
// sourceless layout Python imports from when there is no source; tracebacks then show no
// source lines for those files). A file that does not compile keeps its source.
// The .pyc files are unchecked-hash pycs: valid whatever the files' times in the browser.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [pyodideDir, jobsFile] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: pyodideDir + "/" });
const jobs = JSON.parse(readFileSync(jobsFile, "utf8"));

py.runPython(`
import importlib._bootstrap_external as _be
import importlib.util, posixpath, sys, zipfile

def compile_zip(src, dst, layout, prefix, drop_sources=False):
    tag = sys.implementation.cache_tag
    count = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        record_name = None
        added, dropped = [], set()
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                record_name, record = info, data
                continue
            code = None
            if info.filename.endswith(".py"):
                try:
                    code = compile(data, posixpath.join(prefix, info.filename), "exec", dont_inherit=True)
                except SyntaxError:
                    code = None  # e.g. test data shipped as .py; it is never imported
            if code is None or not drop_sources:
                zout.writestr(info, data)
            if code is None:
                continue
            pyc = _be._code_to_hash_pyc(code, importlib.util.source_hash(data), checked=False)
            if layout == "zipimport" or drop_sources:
                name = info.filename + "c"
            else:
                folder, base = posixpath.split(info.filename)
                name = posixpath.join(folder, "__pycache__", base[:-3] + "." + tag + ".pyc")
            if drop_sources:
                dropped.add(info.filename)
            entry = zipfile.ZipInfo(name, date_time=info.date_time)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = info.external_attr
            zout.writestr(entry, pyc)
            added.append(name)
            count += 1
        if record_name is not None:  # list the pycs (no hash: allowed for .pyc in RECORD)
            kept = [line for line in record.decode().splitlines(keepends=True)
                    if line.split(",", 1)[0] not in dropped]
            text = "".join(kept) + "".join(f"{n},,\\n" for n in added)
            zout.writestr(record_name, text.encode())
    return count
`);
const compileZip = py.globals.get("compile_zip");
for (const job of jobs) {
  py.FS.writeFile("/tmp/in.zip", readFileSync(job.src));
  const n = compileZip("/tmp/in.zip", "/tmp/out.zip", job.layout, job.prefix, Boolean(job.drop_sources));
  writeFileSync(job.dst, py.FS.readFile("/tmp/out.zip"));
  console.log(JSON.stringify({ src: path.basename(job.src), compiled: n }));
}
console.log(JSON.stringify({ python: py.runPython("import sys; sys.version.split()[0]") }));
