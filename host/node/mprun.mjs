// Run a MicroPython script on the official WebAssembly port, with host folders copied in.
//
//   node mprun.mjs [--heap 1M] [--mount HOSTDIR:/target]... [--path /a,/b] [--cwd /dir]
//                  (--script FILE.py | --code "print(1)") [-- args...]
//
// Folders are copied (not linked: the port has no NODEFS) into the in-memory file system,
// so a script can read and write files as on a board. Exit status: 0 when the script
// ended normally, 1 on an uncaught Python exception (its traceback goes to stderr),
// 2 on a usage error. `sys.argv` gets the arguments after `--`.
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";
import fs from "node:fs";
import path from "node:path";

function usage(msg) {
  process.stderr.write(`mprun: ${msg}\n`);
  process.exit(2);
}

function parseSize(text) {
  const m = /^(\d+)([kKmM]?)$/.exec(text);
  if (!m) usage(`bad size ${text}`);
  const mult = { "": 1, k: 1024, K: 1024, m: 1048576, M: 1048576 }[m[2]];
  return parseInt(m[1], 10) * mult;
}

const opts = { heap: 1024 * 1024, mounts: [], path: [], cwd: null, script: null, code: null, argv: [] };
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const next = () => (i + 1 < args.length ? args[++i] : usage(`${a} needs a value`));
  if (a === "--heap") opts.heap = parseSize(next());
  else if (a === "--mount") {
    const v = next();
    const cut = v.lastIndexOf(":");
    if (cut <= 0) usage(`--mount wants HOSTDIR:/target, got ${v}`);
    opts.mounts.push([v.slice(0, cut), v.slice(cut + 1)]);
  } else if (a === "--path") opts.path.push(...next().split(",").filter(Boolean));
  else if (a === "--cwd") opts.cwd = next();
  else if (a === "--script") opts.script = next();
  else if (a === "--code") opts.code = next();
  else if (a === "--") { opts.argv = args.slice(i + 1); break; }
  else usage(`unknown argument ${a}`);
}
if ((opts.script === null) === (opts.code === null)) usage("give exactly one of --script or --code");

const mp = await loadMicroPython({
  heapsize: opts.heap,
  stdout: (data) => process.stdout.write(data),
  stderr: (data) => process.stderr.write(data),
  linebuffer: false,
});
const FS = mp.FS;

function mkdirs(target) {
  let cur = "";
  for (const part of target.split("/").filter(Boolean)) {
    cur += "/" + part;
    try { FS.mkdir(cur); } catch (e) { /* exists */ }
  }
}

function copyIn(hostDir, target) {
  mkdirs(target);
  for (const entry of fs.readdirSync(hostDir, { withFileTypes: true })) {
    if (entry.name === "__pycache__" || entry.name.startsWith(".")) continue;
    const src = path.join(hostDir, entry.name);
    const dst = target.replace(/\/$/, "") + "/" + entry.name;
    if (entry.isDirectory()) copyIn(src, dst);
    else if (entry.isFile()) FS.writeFile(dst, fs.readFileSync(src));
  }
}

for (const [hostDir, target] of opts.mounts) {
  if (!fs.existsSync(hostDir) || !fs.statSync(hostDir).isDirectory()) usage(`no folder ${hostDir}`);
  copyIn(hostDir, target);
}

const source = opts.script !== null ? fs.readFileSync(opts.script, "utf8") : opts.code;
const scriptName = opts.script !== null ? path.basename(opts.script) : "<code>";
const prelude = [
  "import sys",
  ...opts.path.map((p) => `sys.path.insert(0, ${JSON.stringify(p)})`),
  `sys.argv[:] = ${JSON.stringify([scriptName, ...opts.argv])}`,
  ...(opts.cwd ? [`import os`, `os.chdir(${JSON.stringify(opts.cwd)})`] : []),
].join("\n");

let status = 0;
try {
  mp.runPython(prelude);
  // Run as __main__ through exec so tracebacks name the script.
  mp.globals.set("__rmc_src", source);
  mp.globals.set("__rmc_name", scriptName);
  mp.runPython("exec(compile(__rmc_src, __rmc_name, 'exec'), {'__name__': '__main__'})");
} catch (err) {
  if (err && err.name === "PythonError") {
    const text = String(err.message || err);
    const exit = /SystemExit: ?(\d+)?/.exec(text);
    if (exit) status = exit[1] ? parseInt(exit[1], 10) : 0;
    else {
      process.stderr.write(text.endsWith("\n") ? text : text + "\n");
      status = 1;
    }
  } else throw err;
}
process.exitCode = status;
