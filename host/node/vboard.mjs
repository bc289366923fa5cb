// The virtual board: the table firmware on MicroPython's WebAssembly port, with a simulated
// `machine` (host/rmc/vboard/mpy/), its REPL on a loopback socket for the real mpremote, and
// the frame UART on a second socket for `rmc record`.
//
//   node vboard.mjs [--repl-port N] [--uart-port N] [--sensors TRACE.jsonl] [--speed X]
//                   [--flash DIR] [--pins PINS.json] [--heap 2M] [--control] [--no-raw-paste]
//                   [--flash-op-us 500] [--pty-fd N]
//
// --pty-fd N: the master side of a pseudo-terminal the parent opened (VirtualBoard(pty=True)),
// a second way onto the same REPL line: `mpremote connect /dev/pts/M` reads a pty blocking,
// without the 10 ms polls it makes on a socket.
// The REPL serves mpremote's raw-paste mode with its flow control, as a Pico does;
// --no-raw-paste answers R\x00 instead (unsupported: mpremote falls back to plain raw mode,
// 256 bytes per 10 ms, several times slower for `mpremote cp`).
// --speed 0 (default) runs the virtual clock as fast as the firmware goes; X > 0 runs it at
// X virtual seconds per wall second (1 = real time). On stdout, one JSON line per event:
// {"event":"ready","repl_port":..,"uart_port":..} first, then boot, power, irq_error, watchdog
// (armed by the program), exit.
// With --control, stdin takes JSON lines: {"cmd":"sensors","path":..} or {"cmd":"sensors",
// "records":[..]} (times from now), {"cmd":"power","event":"cut"|"restore"},
// {"cmd":"uart","hex":..}, {"cmd":"save"}, {"cmd":"quit"}.
import fs from "node:fs";
import path from "node:path";
import tty from "node:tty";
import { fileURLToPath } from "node:url";
import { MessageChannel, Worker, receiveMessageOnPort } from "node:worker_threads";
import { MAX_BACKLOG, NCHAN, boardIO, parseRecords, readTrace } from "./board_common.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");
const { die, event, log, send, serve, dropping, controlled, parseArgs, loadPins: readPins } =
  boardIO("vboard");

// ---------------------------------------------------------------------------------------
// Arguments.
function parseSize(text) {
  const m = /^(\d+)([kKmM]?)$/.exec(text);
  if (!m) die(`bad size ${text}`);
  return parseInt(m[1], 10) * { "": 1, k: 1024, K: 1024, m: 1 << 20, M: 1 << 20 }[m[2]];
}
const opts = {
  replPort: 0,
  uartPort: 0,
  sensors: null,
  speed: 0,
  flash: null,
  pins: path.join(ROOT, "hardware", "pico_pins.json"),
  heap: 2 << 20,
  control: false,
  rawPaste: true,
  flashOpUs: 500, // virtual time a file system write takes (a flash program, roughly)
  mpyDir: path.join(ROOT, "host", "rmc", "vboard", "mpy"),
  ptyFd: null,
};
parseArgs(opts, (a, next) => {
  if (a === "--speed") {
    const v = next();
    opts.speed = v === "max" ? 0 : Number(v);
    if (!Number.isFinite(opts.speed) || opts.speed < 0) die(`bad speed ${v}`);
  } else if (a === "--flash") opts.flash = next();
  else if (a === "--heap") opts.heap = parseSize(next());
  else if (a === "--raw-paste") opts.rawPaste = true;
  else if (a === "--no-raw-paste") opts.rawPaste = false;
  else if (a === "--flash-op-us") {
    const v = Number(next());
    if (!Number.isInteger(v) || v < 0) die(`bad --flash-op-us ${v}`);
    opts.flashOpUs = v;
  } else if (a === "--mpy-dir") opts.mpyDir = next();
  else if (a === "--pty-fd") {
    const v = Number(next());
    if (!Number.isInteger(v) || v < 0 || !tty.isatty(v)) die(`--pty-fd ${v}: not a terminal`);
    opts.ptyFd = v;
  } else return false;
});

// ---------------------------------------------------------------------------------------
// The pin map (hardware/pico_pins.json), with what the simulated machine needs of it.
function loadPins(file) {
  const pins = readPins(file);
  const { pockets, uart } = pins;
  return {
    ...pins,
    epoch: 1767225600, // 2026-01-01T00:00:00Z: the RTC of a freshly powered table
    python: { pockets, uart_id: uart.id, led: pins.led, freq: 125000000, flash_op_us: 0 },
  };
}
const config = loadPins(opts.pins);
config.python.flash_op_us = opts.flashOpUs;

// The simulated machine and boot code, copied into every fresh interpreter.
const mpyFiles = {};
try {
  for (const name of fs.readdirSync(opts.mpyDir)) {
    if (name.endsWith(".py")) mpyFiles[name] = fs.readFileSync(path.join(opts.mpyDir, name), "utf8");
  }
} catch (e) {
  die(`cannot read ${opts.mpyDir}: ${e.message}`);
}
if (!mpyFiles["machine.py"] || !mpyFiles["_vboard_boot.py"]) die(`${opts.mpyDir} lacks machine.py`);

// ---------------------------------------------------------------------------------------
// Sensor traces (board_common.mjs), placed in shared memory for the worker.
function makeSchedule(events, base) {
  const n = events.length;
  const t = new SharedArrayBuffer(Math.max(8, n * 8));
  const code = new SharedArrayBuffer(Math.max(4, n * 4));
  const tv = new Float64Array(t);
  const cv = new Int32Array(code);
  events.forEach(([tt, c], i) => {
    tv[i] = base + Math.round(tt);
    cv[i] = c;
  });
  return { t, code, n };
}

// ---------------------------------------------------------------------------------------
// Shared world state: clock, schedule cursor, sensor levels.
const ctrlBuf = new SharedArrayBuffer(32); // [MAIL, CURSOR, BEAT, BUSY, WDT_MS, PTY_LINE, PTY_QUEUED]
const PTY_LINE = 5; // 1 while the pty is the REPL line's client: the worker writes to it itself
const PTY_QUEUED = 6; // worker output for the pty that this thread still has to write
const worldBuf = new SharedArrayBuffer(16); // [world time in us, RTC offset in s]
const levelsBuf = new SharedArrayBuffer(NCHAN);
const ctrl = new Int32Array(ctrlBuf);
const world = new Float64Array(worldBuf);
const levels = new Uint8Array(levelsBuf);
let sched = makeSchedule([], 0);
let schedPending = null; // {n, base} of a schedule posted to a worker that has not placed it yet
if (opts.sensors) {
  try {
    sched = makeSchedule(readTrace(opts.sensors), 0);
  } catch (e) {
    die(`--sensors: ${e.message}`);
  }
}

// ---------------------------------------------------------------------------------------
// Flash: the user's files, kept across resets; optionally loaded from and saved to a folder.
let flash = { dirs: [], files: [] };
function loadFlash(dir) {
  const snap = { dirs: [], files: [] };
  const walk = (host, target) => {
    for (const e of fs.readdirSync(host, { withFileTypes: true })) {
      const src = path.join(host, e.name);
      const dst = target + "/" + e.name;
      if (e.isDirectory()) {
        snap.dirs.push(dst);
        walk(src, dst);
      } else if (e.isFile()) snap.files.push([dst, new Uint8Array(fs.readFileSync(src))]);
    }
  };
  walk(dir, "");
  return snap;
}
function saveFlash() {
  if (!opts.flash) return;
  // Written beside, then swapped in: a host crash mid-save leaves the old image whole.
  const tmp = opts.flash + ".new";
  const old = opts.flash + ".old";
  try {
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp, { recursive: true });
    for (const d of flash.dirs) fs.mkdirSync(path.join(tmp, d), { recursive: true });
    for (const [p, data] of flash.files) fs.writeFileSync(path.join(tmp, p), data);
    fs.rmSync(old, { recursive: true, force: true });
    if (fs.existsSync(opts.flash)) fs.renameSync(opts.flash, old);
    fs.renameSync(tmp, opts.flash);
    fs.rmSync(old, { recursive: true, force: true });
  } catch (e) {
    log(`cannot save flash to ${opts.flash}: ${e.message}`);
  }
}
if (opts.flash) {
  try {
    if (fs.existsSync(opts.flash)) flash = loadFlash(opts.flash);
    else fs.mkdirSync(opts.flash, { recursive: true });
  } catch (e) {
    die(`--flash ${opts.flash}: ${e.message}`);
  }
}

// ---------------------------------------------------------------------------------------
// Sockets: one client at a time on each, like a serial port; errors never kill the board.
let replClient = null;
let uartClient = null;
let ptyClient = null;
function setReplClient(c) {
  replClient = c;
  Atomics.store(ctrl, PTY_LINE, c !== null && c === ptyClient ? 1 : 0);
}

// The REPL on a pseudo-terminal (--pty-fd), without a bridge: the same line as the socket,
// one client at a time. The pty takes the line when bytes come from it, so an idle pty never
// pushes a socket client off; a socket client that connects takes the line back, and a reset
// that drops the client leaves the pty unheard until it is used again, as a socket's client
// would have to reconnect.
//
// The fd is non-blocking (the parent set it so). It is read through a tty handle, but never
// written through one: libuv writes a pty master blocking, or spins on it once non-blocking,
// and a pty whose reader went away (mpremote killed mid-output; the parent holds the other
// side open) would then freeze the board. Writes go out here, or straight from the worker,
// and what the pty cannot take waits in `ptyQueue`, retried on a timer, dropped past
// MAX_BACKLOG as on a socket.
const PTY_RETRY_MS = 2;
let ptyFd = null;
let ptyQueue = [];
let ptyQueued = 0; // bytes in ptyQueue
let ptyTimer = null;
let ptyGone = false;
function ptyPump() {
  ptyTimer = null;
  while (ptyQueue.length) {
    const [data, done] = ptyQueue[0];
    let n = 0;
    try {
      n = fs.writeSync(ptyFd, data);
    } catch (e) {
      if (e.code !== "EAGAIN") ptyGone = true; // EIO: nobody holds the other side any more
    }
    if (ptyGone) n = data.length; // dropped, as bytes on an unplugged line
    ptyQueued -= n;
    if (n < data.length) {
      ptyQueue[0][0] = data.subarray(n);
      ptyTimer = setTimeout(ptyPump, PTY_RETRY_MS);
      return;
    }
    ptyQueue.shift();
    done();
  }
}
// Every item waiting here counts in ctrl[PTY_QUEUED] (the worker counted those it posted),
// so that the worker writes nothing straight to the pty before them.
function ptyWrite(data, counted = false) {
  if (!counted) Atomics.add(ctrl, PTY_QUEUED, 1);
  const done = () => Atomics.sub(ctrl, PTY_QUEUED, 1);
  if (ptyGone || ptyQueued > MAX_BACKLOG) {
    if (!ptyGone) dropping();
    done();
    return;
  }
  const bytes = typeof data === "string" ? Buffer.from(data, "latin1") : data;
  ptyQueue.push([bytes, done]);
  ptyQueued += bytes.length;
  if (!ptyTimer) ptyPump();
}
function servePty(fd) {
  let stream;
  try {
    stream = new tty.ReadStream(fd);
  } catch (e) {
    die(`--pty-fd ${fd}: ${e.message}`);
  }
  ptyFd = fd;
  const client = {
    get destroyed() {
      return ptyGone;
    },
    writable: true,
    writableLength: 0, // send() drops past MAX_BACKLOG: ptyWrite does that itself
    write: (data) => ptyWrite(data),
    // Another client took the line: the pty stays open, unheard, and what waited for it is
    // dropped, as a socket's unsent output goes with it.
    destroy: () => {
      const gone = ptyQueue;
      ptyQueue = [];
      ptyQueued = 0;
      for (const [, done] of gone) done();
    },
  };
  stream.on("data", (data) => {
    if (replClient !== client) {
      if (replClient) replClient.destroy();
      setReplClient(client);
    }
    onReplData(data);
  });
  stream.on("error", () => {}); // EIO once nobody holds the other side: 'close' follows
  stream.on("close", () => {
    ptyGone = true;
    if (replClient === client) setReplClient(null);
  });
  ptyClient = client;
}
// Worker output the pty could not take at once (full), or that must follow such output: the
// worker counted it. Every such message is written or dropped here, from whichever worker it
// came, so the count comes back to 0 (a worker terminated between counting and posting would
// leave it above: its successors would then send everything through here, slower but in order).
function writePty(data) {
  ptyWrite(data, true);
}

// ---------------------------------------------------------------------------------------
// The board: one worker per power-on or soft reset.
let worker = null;
let mail = null;
let ready = false;
let powered = false;
let cause = 1; // PWRON_RESET
let pendingIn = []; // REPL bytes that arrived while the board was rebooting
let pendingUart = [];
let quitting = false;
let boots = 0;

function post(msg) {
  if (!mail) return false;
  mail.postMessage(msg);
  Atomics.add(ctrl, 0, 1);
  Atomics.notify(ctrl, 0);
  return true;
}
// Bytes go to the worker's port even while it boots (main.py may be running and must see
// Ctrl-C); only between two workers are they kept here.
let lastCtrlC = 0;
// Ctrl-C bytes sent to the current board (those it starts with included), and its count of
// those it took (`heard`, shared): the hang watch compares the two, not times.
let ctrlCSent = 0;
let heard = null;
function countCtrlC(bytes) {
  let k = 0;
  for (const b of bytes) if (b === 3) k++;
  return k;
}
function onReplData(data) {
  if (!powered) return; // nobody listens on a dead board
  const k = countCtrlC(data);
  if (k) {
    lastCtrlC = Date.now();
    ctrlCSent += k;
  }
  if (mail) post({ type: "in", data: new Uint8Array(data) });
  else pendingIn.push(...data);
}
function onUartData(data) {
  if (!powered) return;
  if (mail) post({ type: "uart", data: new Uint8Array(data) });
  else pendingUart.push(...data);
}

// The watchdog a soft reset carries into the next board (an RP2040's cannot be stopped).
let nextWdt = null;

// A worker started ahead, its interpreter loaded, waiting for the next boot's data (see
// vboard_worker.mjs): started with each board, taken by the next reset.
let spare = null;
function newWorker() {
  const w = new Worker(path.join(HERE, "vboard_worker.mjs"), {
    workerData: {
      ctrlBuf,
      worldBuf,
      levelsBuf,
      config,
      speed: opts.speed,
      rawPaste: opts.rawPaste,
      heap: opts.heap,
      ptyFd: opts.ptyFd,
      mpyFiles,
    },
  });
  // A spare that fails before it is used is only forgotten; the next boot starts a fresh one.
  w.on("error", () => {
    if (spare === w) spare = null;
  });
  w.on("exit", () => {
    if (spare === w) spare = null;
  });
  return w;
}
function startSpare() {
  if (!spare && !quitting) spare = newWorker();
}

function startBoard(mode) {
  const wdt = nextWdt; // only the next board inherits it: any other start is a fresh one
  nextWdt = null;
  if (mode === "power") world[1] = 0; // the RTC (no battery) starts again from its epoch
  const channel = new MessageChannel();
  mail = channel.port1;
  ready = false;
  powered = true;
  boots++;
  const w = spare || newWorker();
  spare = null;
  // Flash snapshots come on a port of their own, which the hang watch can drain at once.
  if (snapPort) snapPort.close();
  const snaps = new MessageChannel();
  snapPort = snaps.port1;
  snaps.port1.on("message", (m) => {
    if (worker === w) applySnapshot(m);
  });
  const heardBuf = new SharedArrayBuffer(4);
  heard = new Int32Array(heardBuf);
  ctrlCSent = countCtrlC(pendingIn); // they go with the boot data
  w.postMessage(
    {
      mail: channel.port2,
      snapPort: snaps.port2,
      heardBuf,
      sched,
      fs: flash,
      mode,
      cause,
      wdt,
      pending: Uint8Array.from(pendingIn),
      uart: Uint8Array.from(pendingUart),
    },
    [channel.port2, snaps.port2],
  );
  pendingIn = [];
  pendingUart = [];
  worker = w;
  startSpare(); // loads on the other core while this board boots
  event({ event: "boot", mode, cause, t_us: world[0], boot: boots });
  w.on("message", (m) => {
    if (m.type === "out" && m.pty) return writePty(m.data); // counted by the worker: always done
    if (worker !== w) return;
    if (m.type === "out") send(replClient, m.data);
    else if (m.type === "uart") send(uartClient, m.data);
    else if (m.type === "ready") {
      ready = true;
      if (schedPending) {
        // the worker that was sent the schedule is gone: this one started with it as it was
        event({ event: "sensors", n: schedPending.n, base_us: schedPending.base });
        schedPending = null;
      }
      if (pendingIn.length) post({ type: "in", data: Uint8Array.from(pendingIn) });
      if (pendingUart.length) post({ type: "uart", data: Uint8Array.from(pendingUart) });
      pendingIn = [];
      pendingUart = [];
    } else if (m.type === "event") {
      if (m.event === "sensors") schedPending = null;
      event(m);
    }
    else if (m.type === "reboot") onReboot(m);
    else if (m.type === "crash") {
      log(`interpreter crashed: ${m.message}`);
      event({ event: "crash", message: m.message });
    }
  });
  w.on("error", (e) => {
    if (worker !== w) return;
    log(`worker error: ${e.stack || e}`);
    event({ event: "crash", message: String(e) });
  });
  w.on("exit", () => {
    if (worker !== w) return; // ended by a reset: the next board is already starting
    // The interpreter died without a reset (a crash): the board restarts from its flash.
    drainSnapshots();
    worker = null;
    mail = null;
    ready = false;
    if (quitting || !powered) return;
    if (replClient) replClient.destroy();
    setReplClient(null);
    pendingIn = [];
    setTimeout(() => startBoard("power"), 10);
  });
}

// The flash as the running board last sent it (snapshots: vboard_worker.mjs).
let snapPort = null;
function applySnapshot(m) {
  flash = m.fs;
  if (m.asked) {
    saveFlash();
    if (snapshotWaiter) snapshotWaiter();
  }
}
// Snapshots the current worker posted that this thread has not handled yet, applied in order
// now: a worker about to be terminated keeps every file it closed, however late the event
// loop would have delivered them.
function drainSnapshots() {
  if (!snapPort) return;
  for (let r = receiveMessageOnPort(snapPort); r; r = receiveMessageOnPort(snapPort)) {
    applySnapshot(r.message);
  }
}

function onReboot(m) {
  flash = m.fs;
  worker = null;
  mail = null;
  ready = false;
  pendingIn = [...m.pending, ...pendingIn];
  pendingUart = [...m.uart, ...pendingUart];
  if (m.kind !== "soft") {
    // A hard reset drops the USB serial link of a Pico: mpremote sees the device go away
    // instead of waiting forever for the end of its command.
    if (replClient) replClient.destroy();
    setReplClient(null);
    pendingIn = [];
  }
  if (m.kind === "power") {
    powerOff();
    return;
  }
  saveFlash();
  cause = m.cause;
  nextWdt = m.kind === "soft" ? m.wdt || null : null;
  event({ event: "reset", kind: m.kind, cause, t_us: world[0] });
  if (!quitting) startBoard(m.kind === "soft" ? m.mode : "power");
}

// Power off: flash kept, RAM and serial input lost; the world clock runs on to the restore.
let offTimer = null;
// A cut reaches the worker asynchronously: a restore asked for before the board is really off
// is remembered here and carried out right after the cut, instead of being lost.
let cutPending = false;
let restoreAfterCut = false;
function powerOff() {
  powered = false;
  cutPending = false;
  pendingIn = [];
  pendingUart = [];
  saveFlash();
  event({ event: "power", state: "off", t_us: world[0] });
  if (quitting) return;
  if (restoreAfterCut) {
    restoreAfterCut = false;
    powerOn();
    return;
  }
  // Sensor edges while the board is off only change the levels it will see at power-up.
  let cur = Atomics.load(ctrl, 1);
  while (cur < sched.n) {
    const c = new Int32Array(sched.code)[cur];
    const t = new Float64Array(sched.t)[cur];
    cur++;
    if (c === -2) {
      Atomics.store(ctrl, 1, cur);
      const wallMs = opts.speed > 0 ? (t - world[0]) / (1000 * opts.speed) : 0;
      offTimer = setTimeout(() => {
        offTimer = null;
        world[0] = Math.max(world[0], t);
        powerOn();
      }, Math.max(0, wallMs));
      return;
    }
    if (c >= 0) levels[c >> 1] = c & 1;
  }
  Atomics.store(ctrl, 1, cur); // no restore scheduled: off until {"cmd":"power","event":"restore"}
}
function powerOn() {
  if (powered || quitting) return;
  cause = 1;
  event({ event: "power", state: "on", t_us: world[0] });
  startBoard("power");
}

// ---------------------------------------------------------------------------------------
// A hung interpreter (a loop that never calls time or machine) cannot see Ctrl-C nor its
// watchdog from inside: the main thread watches its heartbeat and resets the board, with the
// files of the last snapshot, when its watchdog would have fired or when Ctrl-C went unheard.
const HANG_MS = 4000;
let lastBeat = -1;
let beatSince = Date.now();
setInterval(() => {
  const beat = Atomics.load(ctrl, 2);
  if (beat !== lastBeat || !worker || !Atomics.load(ctrl, 3)) {
    lastBeat = beat;
    beatSince = Date.now();
    return;
  }
  const stuck = Date.now() - beatSince;
  const wdtMs = Atomics.load(ctrl, 4);
  const wdtFired = wdtMs > 0 && stuck >= Math.max(HANG_MS, wdtMs / Math.max(opts.speed, 1));
  // A Ctrl-C the board has not taken (still in its mail, or queued behind the running
  // program as REPL input), and no bridge call since it came nor for HANG_MS: the program
  // cannot hear it. Counted, not timed: a Ctrl-C that came just before the tick that saw the
  // program's last beat counts as well.
  const unheard =
    ctrlCSent > Atomics.load(heard, 0) && Date.now() - Math.max(beatSince, lastCtrlC) >= HANG_MS;
  if (!wdtFired && !unheard) return;
  const w = worker;
  drainSnapshots(); // the files it closed before it hung, in order, before the reset uses them
  log(`interpreter hung for ${stuck} ms (${wdtFired ? "watchdog" : "Ctrl-C unheard"}): reset`);
  if (!wdtFired) send(replClient, "\r\n[vboard: program hung outside time/machine calls; board reset]\r\n");
  worker = null;
  w.terminate();
  beatSince = Date.now();
  onReboot({
    kind: wdtFired ? "wdt" : "reset",
    cause: wdtFired ? 3 : cause,
    mode: "power",
    fs: flash,
    pending: [],
    uart: [],
  });
}, 250).unref();

// ---------------------------------------------------------------------------------------
// Control (stdin JSON lines) and shutdown.
let snapshotWaiter = null;
function askSnapshot(timeoutMs) {
  return new Promise((resolve) => {
    if (!ready && !worker) return resolve(false);
    const timer = setTimeout(() => {
      snapshotWaiter = null;
      resolve(false);
    }, timeoutMs);
    snapshotWaiter = () => {
      clearTimeout(timer);
      snapshotWaiter = null;
      resolve(true);
    };
    post({ type: "snapshot" });
  });
}

async function shutdown(code = 0) {
  if (quitting) return;
  quitting = true;
  if (offTimer) clearTimeout(offTimer);
  if (worker && opts.flash) await askSnapshot(1500);
  if (spare) spare.terminate();
  if (worker) await worker.terminate();
  event({ event: "exit", t_us: world[0] });
  process.exit(code);
}

// The control channel (board_common.mjs).
const commands = {
  sensors(c) {
    const evs = c.path ? readTrace(c.path) : parseRecords(c.records || [], "records");
    const base = world[0];
    sched = makeSchedule(evs, base);
    Atomics.store(ctrl, 1, 0);
    // A running board places the edges itself when the schedule reaches it, from its own
    // clock (which may have moved on while the message waited), and says where ("sensors").
    if (post({ type: "sched", ...sched, base })) schedPending = { n: sched.n, base };
    else event({ event: "sensors", n: sched.n, base_us: base });
  },
  power(c) {
    if (c.event === "cut") {
      if (powered) {
        if (post({ type: "power", event: "cut" })) cutPending = true;
        else powerOff();
      }
    } else if (c.event === "restore") {
      if (offTimer) clearTimeout(offTimer);
      offTimer = null;
      if (cutPending) restoreAfterCut = true;
      else powerOn();
    } else return false;
  },
  uart(c) {
    onUartData(Buffer.from(String(c.hex || ""), "hex"));
  },
  save() {
    askSnapshot(1500).then((ok) => event({ event: "saved", ok }));
  },
  status() {
    event({ event: "status", t_us: world[0], powered, ready, boots, cause, cursor: ctrl[1], n: sched.n });
  },
  quit: () => shutdown(0),
};
controlled(opts.control, commands, shutdown);

const replServer = await serve(opts.replPort, onReplData, setReplClient, () => replClient);
const uartServer = await serve(opts.uartPort, onUartData, (s) => (uartClient = s), () => uartClient);
if (opts.ptyFd !== null) servePty(opts.ptyFd);
event({
  event: "ready",
  repl_port: replServer.address().port,
  uart_port: uartServer.address().port,
  speed: opts.speed,
});
startBoard("power");
