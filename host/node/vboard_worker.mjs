// One power-on (or soft-reset) lifetime of the virtual board: a MicroPython WebAssembly
// interpreter with the simulated `machine`, run in a worker thread so that it may block
// (sleep, busy loops, endless main loops) while the main thread keeps the sockets served.
//
// Main thread -> worker: messages on `mail` (a MessagePort), read synchronously with
// receiveMessageOnPort whenever Python calls the bridge or the REPL is idle; `ctrl[MAIL]` is
// bumped and notified with each one so a blocked worker wakes up (Atomics.wait).
// Worker -> main thread: parentPort messages (output bytes, UART bytes, reboot, power off);
// flash snapshots on a port of their own (`W.snapPort`), which the main thread can drain
// synchronously before it resets a hung worker (see vboard.mjs, the hang watch).
//
// Every reset (soft, watchdog, machine.reset, power cut) ends this worker: the main thread
// boots the next one with the file system carried over, as a board keeps its flash.
//
// A worker is started ahead of its boot, as a spare: it loads the interpreter, then waits for
// its boot's data (the flash, the mode, the mail port: the first message on parentPort). A
// reset, and so every mpremote command, then costs neither a worker start nor a load. Until
// that message it touches nothing shared: the board before it is still running.
import { parentPort, workerData, receiveMessageOnPort } from "node:worker_threads";
import fs from "node:fs";
import { performance } from "node:perf_hooks";
import { loadMicroPython } from "@micropython/micropython-webassembly-pyscript";

var booted = false; // var: the interpreter's output callbacks may run before `let`s below exist
const loading = loadMicroPython({
  heapsize: workerData.heap,
  stdout: (b) => booted && stdout(b),
  stderr: (b) => booted && stdout(b),
  linebuffer: false,
});
loading.catch(() => {}); // a failure is reported when boot() awaits it, not as unhandled here
const W = { ...workerData, ...(await new Promise((resolve) => parentPort.once("message", resolve))) };
booted = true;
const ctrl = new Int32Array(W.ctrlBuf); // [MAIL, CURSOR, BEAT, BUSY, WDT_MS, PTY_LINE, PTY_QUEUED]
const world = new Float64Array(W.worldBuf); // [NOW_US, RTC offset in s]
const levels = new Uint8Array(W.levelsBuf); // channel values, 45 channels
const MAIL = 0;
const CURSOR = 1;
const BEAT = 2; // bumped at every bridge call: the main thread spots a hung interpreter
const BUSY = 3;
const WDT_MS = 4;
const PTY_LINE = 5; // the pty is the REPL line's client (set by the main thread)
const PTY_QUEUED = 6; // output for the pty the main thread has yet to write
const cfg = W.config;
// Ctrl-C bytes this board has taken from its input (as an interrupt, or as a REPL or stdin
// byte), against the count the main thread sent: one sent and not taken while the interpreter
// makes no bridge call is a Ctrl-C it cannot hear.
const heard = new Int32Array(W.heardBuf);
const TICKS_MASK = 0x3fffffff; // MicroPython's ticks period on a 32-bit port is 2**30

// ---------------------------------------------------------------------------------------
// Reset: thrown from a bridge call, it unwinds the interpreter (the instance is dropped).
class BoardReset extends Error {
  constructor(kind, cause) {
    super(`board reset: ${kind}`);
    this.kind = kind; // "wdt" | "reset" | "soft" | "power"
    this.cause = cause;
  }
}
const CAUSE = { PWRON: 1, HARD: 2, WDT: 3, DEEPSLEEP: 4, SOFT: 5 };

// ---------------------------------------------------------------------------------------
// Output to the REPL socket, batched: one message per line or per REPL step.
let out = [];
let muted = false;
function flushOut() {
  lastFlush = performance.now();
  if (!out.length) return;
  const data = Uint8Array.from(out);
  out = [];
  if (W.ptyFd === null || !Atomics.load(ctrl, PTY_LINE)) {
    parentPort.postMessage({ type: "out", data });
    return;
  }
  // The pty is the line's client: written from here, one thread hop less per answer. What it
  // cannot take now (full: its reader is slow) goes to the main thread, which writes it in
  // order; so does all that follows until that is written.
  let n = 0;
  if (Atomics.load(ctrl, PTY_QUEUED) <= 0) {
    try {
      n = fs.writeSync(W.ptyFd, data);
    } catch (e) {
      n = 0; // EAGAIN (the fd is non-blocking), or gone: the main thread decides
    }
  }
  if (n < data.length) {
    Atomics.add(ctrl, PTY_QUEUED, 1);
    parentPort.postMessage({ type: "out", pty: true, data: data.subarray(n) });
  }
}
let dropOK = 0; // raw-paste mode: the port's raw REPL says "OK", which raw-paste does not
// A line ends a batch only if the last one left more than FLUSH_MS ago: a command's whole answer
// (output, the two \x04 and the prompt) then leaves in one piece. mpremote sleeps 10 ms each
// time it finds nothing to read, so an answer in pieces costs it 10 ms a piece. Output of a
// longer program still streams: every bridge call and every wait flushes too.
const FLUSH_MS = 20;
let lastFlush = 0;
// `buf` may be the interpreter's signed heap (HEAP8): bytes are taken `& 255`.
function stdoutBytes(buf, off, len) {
  if (muted || len <= 0) return;
  for (let i = off; i < off + len; i++) {
    const b = buf[i] & 255;
    if (dropOK && b === "OK".charCodeAt(2 - dropOK)) {
      dropOK--;
      continue;
    }
    dropOK = 0;
    out.push(b);
  }
  if (out.length >= 4096) flushOut();
  else if ((buf[off + len - 1] & 255) === 10 && performance.now() - lastFlush > FLUSH_MS) flushOut();
}
function stdout(bytes) {
  stdoutBytes(bytes, 0, bytes.length);
}
// The port writes its output to fd 1 and 2 a string at a time, but Emscripten's terminal
// device hands it over one byte per call, each in a new array: ~750 calls for one 256-byte
// chunk of `mpremote cp` from the board. The streams' write takes the whole string instead.
function installStdout() {
  for (const fd of [1, 2]) {
    const stream = FS.getStream(fd);
    if (!stream) continue;
    const ops = Object.assign({}, stream.stream_ops);
    ops.write = (st, buffer, offset, length) => {
      stdoutBytes(buffer, offset, length);
      return length;
    };
    stream.stream_ops = ops;
  }
}
function emit(text) {
  for (const b of Buffer.from(text, "latin1")) out.push(b);
  flushOut();
}

// ---------------------------------------------------------------------------------------
// Input queues and the mail box.
// One less than the counter: messages the main thread posted before this worker ran are read.
let seenMail = (Atomics.load(ctrl, MAIL) - 1) | 0;
const inQ = []; // REPL bytes not yet processed
const uartQ = []; // frame UART bytes from the host
let interrupts = 0; // Ctrl-C received while Python was running
// Input bytes out of the queue, the Ctrl-C among them counted as taken.
function takeIn(n) {
  const bytes = inQ.splice(0, n);
  let k = 0;
  for (const b of bytes) if (b === 3) k++;
  if (k) Atomics.add(heard, 0, k);
  return bytes;
}
function takeByte() {
  const b = inQ.shift();
  if (b === 3) Atomics.add(heard, 0, 1);
  return b;
}
// The interrupt character, as micropython.kbd_intr() set it (-1: none; mpremote's mount code
// turns it off while file data flows on stdin, where a 0x03 byte is data).
function kbdIntr() {
  return mpModule ? mpModule._mp_hal_get_interrupt_char() : 3;
}
let busy = false; // Python is running (REPL command, boot.py, main.py)
let booting = true; // before the REPL: a Ctrl-C now is meant for main.py
let pendingPower = null; // "cut" asked by the host, done at the next bridge call
let snapshotAsked = false;

// Files changed since the last snapshot sent to the main thread. Writes to an open file are
// not seen one by one, so snapshots go on for a while after each open-for-write.
let fsDirty = false;
let dirtyUntil = 0;
let lastSnap = 0;
function checkMail() {
  Atomics.add(ctrl, BEAT, 1);
  const m = Atomics.load(ctrl, MAIL);
  if (m === seenMail) return;
  seenMail = m;
  for (;;) {
    const msg = receiveMessageOnPort(W.mail);
    if (!msg) break;
    const v = msg.message;
    if (v.type === "in") {
      const ic = busy || booting ? kbdIntr() : -1;
      for (const b of v.data) {
        if (b === ic) {
          interrupts++;
          if (b === 3) Atomics.add(heard, 0, 1);
        } else inQ.push(b);
      }
    } else if (v.type === "uart") {
      for (const b of v.data) uartQ.push(b);
    } else if (v.type === "sched") {
      installSchedule(v);
    } else if (v.type === "power") {
      pendingPower = v.event;
    } else if (v.type === "snapshot") {
      snapshotAsked = true;
    }
  }
  if (snapshotAsked) {
    snapshotAsked = false;
    sendSnapshot(true);
  }
}

// ---------------------------------------------------------------------------------------
// The sensor schedule: absolute world times (us) and codes (channel*2+value; -1 power cut,
// -2 power restore), shared with the main thread; the cursor lives in ctrl[CURSOR].
let schedT = new Float64Array(W.sched.t);
let schedC = new Int32Array(W.sched.code);
let schedN = W.sched.n;
function installSchedule(v) {
  schedT = new Float64Array(v.t);
  schedC = new Int32Array(v.code);
  schedN = v.n;
  // The edges were placed from the main thread's reading of the clock. If this clock has
  // moved on since (the message waited on a busy machine while an idle board's clock ran),
  // the whole schedule moves with it: no edge falls in the past, to fire late and bunched.
  let shift = 0;
  if (v.base !== undefined && now > v.base) {
    shift = now - v.base;
    for (let i = 0; i < schedN; i++) schedT[i] += shift;
  }
  Atomics.store(ctrl, CURSOR, 0);
  if (v.base !== undefined) {
    parentPort.postMessage({ type: "event", event: "sensors", n: v.n, base_us: v.base + shift });
  }
}

// ---------------------------------------------------------------------------------------
// Virtual clock. `now` is world time in us (since the vboard started); ticks count from boot.
let now = world[0];
const RTC = 1;
function rtcUs() {
  return cfg.epoch * 1e6 + now + world[RTC] * 1e6;
}
const bootAt = now;
const speed = W.speed; // 0: as fast as possible; X: X virtual seconds per wall second
let wallAnchor = performance.now();
let virtAnchor = now;
function anchor() {
  wallAnchor = performance.now();
  virtAnchor = now;
}
function wallVirtual() {
  return virtAnchor + (performance.now() - wallAnchor) * 1000 * speed;
}
function setNow(t) {
  if (t > now) {
    now = t;
    world[0] = now;
  }
}
// Catching up with the wall clock advances virtual time by at most MAX_SLICE_US at once: when
// the interpreter was starved of CPU (a busy machine, a slow boot), the virtual clock slips
// behind the wall clock instead of jumping, so the firmware never sees a gap in its own
// time that the board would not have had, and a run's outcome does not depend on the load.
const MAX_SLICE_US = 2000;
function catchUp(slip = true) {
  if (speed <= 0) return;
  const w = Math.floor(wallVirtual());
  if (slip && w - now > MAX_SLICE_US) {
    setNow(now + MAX_SLICE_US);
    anchor(); // the rest of the gap is lost, not owed
  } else setNow(w);
}

// ---------------------------------------------------------------------------------------
// Pins. GPIO levels come from the channel values (sensors), the pulls, or Python's outputs.
const NPINS = 32;
const pinMode = new Int8Array(NPINS).fill(-1); // -1 unset, 0 in, 1 out, 2 open drain
const pinPull = new Int8Array(NPINS); // 0 none, 1 up, 2 down
const pinOut = new Uint8Array(NPINS);
const irqTrig = new Uint8Array(NPINS); // Pin.IRQ_FALLING 4 | Pin.IRQ_RISING 8
const irqPending = new Int16Array(NPINS).fill(-1); // deferred event code while IRQs are off
let masked = 0;
const chanPin = cfg.chanPin; // channel -> [gpio, invert] for the direct sensors
const pinChan = new Int16Array(NPINS).fill(-1);
for (const [ch, spec] of Object.entries(chanPin)) pinChan[spec[0]] = Number(ch);

function pinLevel(p) {
  if (pinMode[p] === 1) return pinOut[p];
  const ch = pinChan[p];
  if (ch >= 0) return levels[ch] ^ chanPin[ch][1];
  if (pinMode[p] === 2 && pinOut[p] === 0) return 0;
  return pinPull[p] === 1 ? 1 : 0;
}

// The 74HC165 chain: loaded while the latch is at its active level, shifted out by SPI.
const pk = cfg.pockets;
const chain = new Uint8Array(pk.chips);
let chainPos = pk.chips;
function loadChain() {
  chain.fill(0);
  for (let ch = 0; ch < pk.chips * 8; ch++) {
    let bit = ch < 39 ? levels[ch] : 0;
    if (!pk.active) bit ^= 1;
    if (bit) chain[ch >> 3] |= 0x80 >> (ch & 7);
  }
  chainPos = 0;
}
function pinWrite(p, v) {
  pinOut[p] = v;
  if (p === pk.latch && v === pk.latch_active) loadChain();
}

// Applies one schedule entry; returns an IRQ event code for Python, or -1.
function apply(code) {
  if (code === -1) throw new BoardReset("power", CAUSE.PWRON);
  if (code < 0) return -1; // restore while powered: nothing to do
  const ch = code >> 1;
  const v = code & 1;
  if (levels[ch] === v) return -1;
  const spec = chanPin[ch];
  if (!spec) {
    levels[ch] = v; // a pocket: seen at the next latch
    if (ch < 39 && pinOut[pk.latch] === pk.latch_active) loadChain();
    return -1;
  }
  const p = spec[0];
  const before = pinLevel(p);
  levels[ch] = v;
  const after = pinLevel(p);
  if (before === after || pinMode[p] === 1) return -1;
  const want = after ? 8 : 4;
  if (!(irqTrig[p] & want)) return -1;
  const ev = p * 2 + after;
  if (masked) {
    irqPending[p] = ev;
    return -1;
  }
  return ev;
}

// ---------------------------------------------------------------------------------------
// Timers (machine.Timer) and the watchdog, on the virtual clock.
const NTIMERS = 16;
const timerNext = new Float64Array(NTIMERS).fill(Infinity);
const timerPeriod = new Float64Array(NTIMERS);
const timerOnce = new Uint8Array(NTIMERS);
// An RP2040's watchdog cannot be stopped once started: it runs on through a soft reset (W.wdt
// carries it into the next board) and at the prompt, where nothing feeds it.
let wdtTimeout = W.wdt ? W.wdt.timeout : 0;
let wdtDeadline = W.wdt ? W.wdt.deadline : Infinity;

function nextTimer() {
  let best = -1;
  let t = Infinity;
  for (let i = 0; i < NTIMERS; i++) {
    if (timerNext[i] < t) {
      t = timerNext[i];
      best = i;
    }
  }
  return best;
}

// The next thing due at or before `limit`: returns an event code (>= 0) to hand to Python,
// -1 when nothing is due up to `limit` (now is then at least `limit` if `advance`).
function due(limit) {
  for (;;) {
    if (!masked) {
      for (let p = 0; p < NPINS; p++) {
        if (irqPending[p] >= 0) {
          const ev = irqPending[p];
          irqPending[p] = -1;
          return ev;
        }
      }
    }
    const cur = Atomics.load(ctrl, CURSOR);
    const te = cur < schedN ? schedT[cur] : Infinity;
    const ti = nextTimer();
    const tt = ti >= 0 ? timerNext[ti] : Infinity;
    const t = Math.min(te, tt, wdtDeadline);
    if (t > limit || t === Infinity) return -1;
    if (!waitWall(t)) return -2; // interrupted while pacing
    setNow(t);
    if (t === wdtDeadline) {
      throw new BoardReset("wdt", CAUSE.WDT);
    } else if (t === tt) {
      if (timerOnce[ti]) timerNext[ti] = Infinity;
      else timerNext[ti] += timerPeriod[ti];
      if (masked) continue;
      return 1000 + ti;
    } else {
      Atomics.store(ctrl, CURSOR, cur + 1);
      const ev = apply(schedC[cur]);
      if (ev >= 0) return ev;
    }
  }
}

// At a finite speed, wait (wall clock) until virtual time `t`; false if Ctrl-C came.
function waitWall(t) {
  if (speed <= 0) return true;
  for (;;) {
    const remaining = wallAnchor + (t - virtAnchor) / (1000 * speed) - performance.now();
    if (remaining <= 0.05) return true;
    flushOut();
    Atomics.wait(ctrl, MAIL, seenMail, Math.min(remaining, 250));
    checkMail();
    if (interrupts > 0 || pendingPower) return false;
  }
}

// Host requests and Ctrl-C, checked at every bridge call. Returns -2 for KeyboardInterrupt.
function service() {
  checkMail();
  if ((fsDirty || performance.now() < dirtyUntil) && performance.now() - lastSnap > 1000) {
    sendSnapshot(); // what a hung interpreter would otherwise lose
  }
  if (pendingPower === "cut") {
    pendingPower = null;
    throw new BoardReset("power", CAUSE.PWRON);
  }
  pendingPower = null;
  if (interrupts > 0) {
    interrupts--;
    return -2;
  }
  return 0;
}

// Durations from Python: a bad value (NaN, negative) counts as 0 rather than derailing the clock.
function dur(x) {
  const v = Number(x);
  return Number.isFinite(v) && v > 0 ? v : 0;
}

let target = 0;
const bridge = {
  config: () => JSON.stringify(cfg.python),
  ticks_us: () => {
    catchUp();
    const t = Math.floor(now - bootAt) & TICKS_MASK;
    if (speed <= 0) setNow(now + 1); // so that busy-wait loops on ticks end
    return t;
  },
  ticks_ms: () => {
    catchUp();
    const t = Math.floor((now - bootAt) / 1000) & TICKS_MASK;
    if (speed <= 0) setNow(now + 1);
    return t;
  },
  // The RTC: the virtual clock plus the offset machine.RTC().datetime(...) set (world[RTC]).
  epoch_s: () => Math.floor(rtcUs() / 1e6),
  epoch_frac_us: () => Math.floor(rtcUs() % 1e6),
  rtc_set: (secs, us) => {
    world[RTC] = dur(secs) + dur(us) / 1e6 - (cfg.epoch + now / 1e6);
  },
  // Events due by now (after catching up with the wall clock at a finite speed).
  poll: () => {
    for (;;) {
      if (out.length) flushOut();
      const s = service();
      if (s) return s;
      catchUp();
      const ev = due(now);
      if (ev !== -2) return ev;
    }
  },
  // Sleep: set the wake-up time, then call until() until it returns -1.
  wait: (us) => {
    catchUp();
    target = now + dur(us);
  },
  until: () => {
    for (;;) {
      if (out.length) flushOut();
      const s = service();
      if (s) return s;
      const ev = due(target);
      if (ev === -2) continue;
      if (ev >= 0) return ev;
      if (!waitWall(target)) continue; // Ctrl-C or power cut while sleeping
      setNow(target);
      return -1;
    }
  },
  mask: (on) => {
    masked = on ? 1 : 0;
  },
  pin_cfg: (p, mode, pull) => {
    pinMode[p] = mode;
    pinPull[p] = pull;
  },
  pin_get: (p) => pinLevel(p),
  pin_set: (p, v) => pinWrite(p, v ? 1 : 0),
  pin_irq: (p, trig) => {
    irqTrig[p] = trig;
    irqPending[p] = -1;
  },
  spi_byte: (id) => {
    if (id !== pk.spi || chainPos >= pk.chips) return 0; // serial input of the chain is tied low
    return chain[chainPos++];
  },
  uart_write: (id, addr, n) => {
    if (id !== cfg.uartId) return n;
    const M = mpModule;
    const data = new Uint8Array(n);
    for (let i = 0; i < n; i++) data[i] = M.getValue(addr + i, "i8") & 255;
    parentPort.postMessage({ type: "uart", data });
    return n;
  },
  uart_any: (id) => {
    checkMail();
    return id === cfg.uartId ? uartQ.length : 0;
  },
  uart_readinto: (id, addr, n) => {
    checkMail();
    if (id !== cfg.uartId) return 0;
    const k = Math.min(n, uartQ.length);
    const M = mpModule;
    for (let i = 0; i < k; i++) M.setValue(addr + i, uartQ[i], "i8");
    uartQ.splice(0, k);
    return k;
  },
  timer_start: (slot, periodUs, once) => {
    if (!(slot >= 0 && slot < NTIMERS)) return;
    timerPeriod[slot] = Math.max(1, dur(periodUs));
    timerOnce[slot] = once ? 1 : 0;
    timerNext[slot] = now + timerPeriod[slot];
  },
  timer_stop: (slot) => {
    timerNext[slot] = Infinity;
  },
  wdt_start: (timeoutUs) => {
    wdtTimeout = Math.max(1, dur(timeoutUs));
    wdtDeadline = now + wdtTimeout;
    Atomics.store(ctrl, WDT_MS, Math.max(1, Math.round(wdtTimeout / 1000)));
    // said, so that a test can wait for the program to have armed it rather than sleep
    parentPort.postMessage({ type: "event", event: "watchdog", timeout_ms: wdtTimeout / 1000, t_us: now });
  },
  fd_isdir: (fd) => {
    const st = FS.getStream(fd);
    return st && st.node && FS.isDir(st.node.mode) ? 1 : 0;
  },
  fs_dirty: () => {
    fsDirty = true;
    dirtyUntil = performance.now() + 5000;
  },
  // A file closed, renamed or removed: snapshot now, whatever the rate, so that a hang right
  // after (which the main thread ends by terminating this worker) loses nothing the board's
  // flash would keep. It is posted before Python goes on; the main thread drains the
  // snapshot port before it resets a hung board.
  fs_changed: () => {
    fsDirty = true;
    sendSnapshot();
  },
  wdt_feed: () => {
    if (wdtTimeout) wdtDeadline = now + wdtTimeout;
  },
  reset: () => {
    throw new BoardReset("reset", CAUSE.WDT); // rp2: machine.reset() goes through the watchdog
  },
  soft_reset: () => {
    throw new BoardReset("soft", W.cause);
  },
  reset_cause: () => W.cause,
  irq_error: (what) => {
    parentPort.postMessage({ type: "event", event: "irq_error", what: String(what) });
  },
};

// ---------------------------------------------------------------------------------------
// File system: carried from one boot to the next as a snapshot of the user's files.
function sendSnapshot(asked = false) {
  fsDirty = false;
  lastSnap = performance.now();
  W.snapPort.postMessage({ type: "snapshot", asked, fs: snapshotFS() });
}
const SKIP = new Set(["/dev", "/proc", "/tmp", "/home", "/.vboard"]);
let FS = null;
let mpModule = null;
function snapshotFS() {
  const dirs = [];
  const files = [];
  const walk = (dir) => {
    for (const name of FS.readdir(dir)) {
      if (name === "." || name === "..") continue;
      const p = (dir === "/" ? "" : dir) + "/" + name;
      if (SKIP.has(p)) continue;
      const st = FS.stat(p);
      if (FS.isDir(st.mode)) {
        dirs.push(p);
        walk(p);
      } else if (FS.isFile(st.mode)) files.push([p, FS.readFile(p)]);
    }
  };
  walk("/");
  return { dirs, files };
}
function restoreFS(snap) {
  for (const d of snap.dirs) {
    try {
      FS.mkdir(d);
    } catch (e) {
      /* exists */
    }
  }
  for (const [p, data] of snap.files) FS.writeFile(p, data);
}

// ---------------------------------------------------------------------------------------
// The program's stdin (sys.stdin, fd 0) is the REPL line, as on a board: a read blocks until
// bytes come (mpremote's `mount` code reads its file data there, 0x18 and 0x03 bytes
// included), Ctrl-C (when it is the interrupt character) raises KeyboardInterrupt, and poll
// says whether a byte is waiting. Emscripten's own stdin would read the node process's stdin.
const POLLIN = 1;
const EINTR = 27; // Emscripten's errno numbers
function installStdin() {
  const stream = FS.getStream(0);
  const ops = Object.assign({}, stream.stream_ops);
  ops.read = (st, buffer, offset, length) => {
    if (length <= 0) return 0;
    flushOut(); // the other side answers what it has seen
    for (;;) {
      checkMail();
      if (pendingPower === "cut") {
        pendingPower = null;
        throw new BoardReset("power", CAUSE.PWRON);
      }
      if (inQ.length) break;
      if (interrupts > 0) {
        interrupts--;
        mpModule._mp_sched_keyboard_interrupt(); // raised when the read returns EINTR
        throw new FS.ErrnoError(EINTR);
      }
      const wdtLeft = promptWatchdog(); // the clock runs on while the program waits
      Atomics.wait(ctrl, MAIL, seenMail, Math.min(wdtLeft, 250));
    }
    const bytes = takeIn(Math.min(length, inQ.length));
    for (let i = 0; i < bytes.length; i++) buffer[offset + i] = bytes[i];
    return bytes.length;
  };
  ops.poll = () => {
    checkMail();
    if (inQ.length || interrupts > 0) return POLLIN;
    // select.poll() asks again and again until its timeout: wait a little, not spin
    flushOut();
    Atomics.wait(ctrl, MAIL, seenMail, 1);
    checkMail();
    return inQ.length || interrupts > 0 ? POLLIN : 0;
  };
  stream.stream_ops = ops;
}

// ---------------------------------------------------------------------------------------
let mp;
let rawMode = false;
let pasteState = 0; // raw-paste request \x05 A \x01 being read
// Raw-paste mode (--raw-paste): the command is collected here with flow control, then fed
// to the port's raw REPL at once. Without it, the request is answered R\x00 (unsupported).
const PASTE_WINDOW = 2048;
let pasting = false;
let pasteBuf = [];
let pasteCredit = 0;

function setBusy(on) {
  busy = on;
  Atomics.store(ctrl, BUSY, on ? 1 : 0);
  Atomics.add(ctrl, BEAT, 1);
}

// The port's exported function, called directly: its `replProcessChar` goes through ccall,
// which costs as much again per byte (a 256-byte chunk of `mpremote cp` is ~750 bytes).
let processChar = null;
function feedChar(c) {
  setBusy(true);
  anchor();
  try {
    return processChar(c);
  } finally {
    setBusy(false);
  }
}
// Bytes of a command's text, before its \x04: nothing runs, so one busy mark for them all.
function feedText(bytes) {
  setBusy(true);
  try {
    for (const c of bytes) processChar(c);
  } finally {
    setBusy(false);
  }
}

function pasteByte(c) {
  if (c !== 4) {
    pasteBuf.push(c);
    if (++pasteCredit >= PASTE_WINDOW) {
      pasteCredit = 0;
      emit("\x01"); // the host may send another window
    }
    return;
  }
  pasting = false;
  // End of data acknowledged; compile and run as in raw mode. The \x04 leaves with the
  // command's first output (see FLUSH_MS), not on its own.
  out.push(4);
  if (pasteBuf.length === 0) pasteBuf.push(10); // an empty line would mean soft reset
  feedText(pasteBuf);
  pasteBuf = [];
  dropOK = 2;
  feedChar(4);
  dropOK = 0;
}

function runPy(code) {
  setBusy(true);
  anchor();
  try {
    mp.runPython(code);
  } catch (e) {
    if (e instanceof BoardReset) throw e;
    if (e && e.name === "PythonError") {
      emit(String(e.message).replace(/\n/g, "\r\n"));
      parentPort.postMessage({ type: "event", event: "boot_error", message: String(e.message) });
    }
    else throw e;
  } finally {
    setBusy(false);
  }
}

function finish(reset) {
  flushOut();
  const wdt = reset.kind === "soft" && wdtTimeout ? { timeout: wdtTimeout, deadline: wdtDeadline } : null;
  parentPort.postMessage({
    type: "reboot",
    kind: reset.kind,
    cause: reset.cause,
    mode: reset.mode || "friendly",
    wdt,
    fs: snapshotFS(),
    pending: Uint8Array.from(inQ),
    uart: Uint8Array.from(uartQ),
  });
  process.exit(0);
}

// At the prompt, at a finite speed (virtual time follows the wall clock), a running watchdog
// resets the board when it runs out; returns the wall ms left until then (Infinity: none). At
// speed 0 virtual time stands still at the prompt, and so does the watchdog.
function promptWatchdog() {
  if (speed <= 0 || wdtDeadline === Infinity) return Infinity;
  catchUp(false); // idle at the prompt: the clock runs with the wall clock, as on a board
  if (now >= wdtDeadline) throw new BoardReset("wdt", CAUSE.WDT);
  return Math.max(1, wallAnchor + (wdtDeadline - virtAnchor) / (1000 * speed) - performance.now());
}

const IDLE_SNAP_MS = 250;
function replLoop() {
  for (;;) {
    checkMail();
    if (pendingPower === "cut") throw new BoardReset("power", CAUSE.PWRON);
    pendingPower = null;
    const wdtLeft = promptWatchdog();
    if (inQ.length === 0) {
      flushOut();
      let waitMs = wdtLeft;
      if (fsDirty || performance.now() < dirtyUntil) {
        // A snapshot copies every file: at most one per IDLE_SNAP_MS, or a copy of 100 KB
        // would take one after each of its 400 commands.
        const since = performance.now() - lastSnap;
        if (since >= IDLE_SNAP_MS) {
          sendSnapshot();
          dirtyUntil = 0;
        } else waitMs = Math.min(waitMs, IDLE_SNAP_MS - since);
      }
      Atomics.wait(ctrl, MAIL, seenMail, waitMs);
      continue;
    }
    const c = takeByte();
    if (rawMode && pasteState === 0 && c === 5) {
      pasteState = 1; // mpremote asks for raw-paste mode: say we don't support it
      continue;
    }
    if (pasteState === 1 && c === 0x41) {
      pasteState = 2;
      continue;
    }
    if (pasteState === 2 && c === 1) {
      pasteState = 0;
      if (W.rawPaste) {
        emit("R\x01" + String.fromCharCode(PASTE_WINDOW & 255, PASTE_WINDOW >> 8));
        pasting = true;
        pasteCredit = 0;
      } else emit("R\x00");
      continue;
    }
    pasteState = 0;
    if (pasting) {
      pasteByte(c);
      while (pasting && inQ.length) pasteByte(takeByte()); // the rest that came, at once
      // All that came is taken: grant a new window now rather than when this one is used up.
      // Any byte back carries the TCP acknowledgement, without which the host's Nagle
      // algorithm holds its end-of-data \x04 until the delayed ACK, 40 ms later, at every
      // command. mpremote counts each \x01 as one more window, which is harmless here. A pty
      // has no such delay: there the byte would only wake mpremote for nothing.
      if (pasting && pasteCredit > 0 && !(W.ptyFd !== null && Atomics.load(ctrl, PTY_LINE))) {
        pasteCredit = 0;
        emit("\x01");
      }
      continue;
    }
    const ret = feedChar(c);
    if (c === 1) rawMode = true;
    else if (c === 2) rawMode = false;
    if (ret & 0x100) {
      // Ctrl-D on an empty line: the port asks for a soft reset.
      throw Object.assign(new BoardReset("soft", W.cause), { mode: rawMode ? "raw" : "friendly" });
    }
    if (inQ.length === 0) flushOut();
  }
}

async function boot() {
  Atomics.add(ctrl, BEAT, 1);
  mp = await loading;
  Atomics.add(ctrl, BEAT, 1);
  mpModule = mp._module;
  processChar = mpModule._mp_js_repl_process_char;
  FS = mp.FS;
  installStdin();
  installStdout();
  restoreFS(W.fs);
  try {
    FS.mkdir("/.vboard");
  } catch (e) {
    /* exists */
  }
  for (const [name, text] of Object.entries(W.mpyFiles)) FS.writeFile("/.vboard/" + name, text);
  mp.registerJsModule("_vbhw", bridge);
  // A soft reset from mpremote prints "soft reboot" and must then show nothing but the raw
  // REPL banner; boot.py's output is muted in that case only.
  if (W.mode !== "power") emit("MPY: soft reboot\r\n");
  muted = W.mode === "raw";
  // The port's REPL makes Ctrl-C the interrupt character only while it runs a command; boot.py
  // and main.py run outside it, where a board's Ctrl-C stops them too.
  runPy("import micropython\nmicropython.kbd_intr(3)\ndel micropython");
  runPy("import sys\nsys.path.append('/.vboard')\nimport _vboard_boot\nsys.path.remove('/.vboard')");
  for (const name of Object.keys(W.mpyFiles)) FS.unlink("/.vboard/" + name);
  FS.rmdir("/.vboard"); // imported: the board's flash holds only the user's files
  runPy("_vboard_boot.run_file('boot.py')");
  if (W.mode !== "raw") runPy("_vboard_boot.run_file('main.py')");
  booting = false;
  interrupts = 0; // a Ctrl-C main.py did not see is not kept for later commands
  mp.replInit();
  if (W.mode === "raw") {
    mp.replProcessChar(1);
    rawMode = true;
    muted = false;
    emit("raw REPL; CTRL-B to exit\r\n>");
  }
  flushOut();
  parentPort.postMessage({ type: "ready" });
  replLoop();
}

// a board after power-up or a hard reset has no watchdog running; after a soft reset, the one
// that ran before
Atomics.store(ctrl, WDT_MS, wdtTimeout ? Math.max(1, Math.round(wdtTimeout / 1000)) : 0);
Atomics.store(ctrl, BUSY, 1); // booting counts as busy: a hung boot.py is seen too
try {
  for (const b of W.pending) inQ.push(b);
  for (const b of W.uart) uartQ.push(b);
  await boot();
} catch (e) {
  if (e instanceof BoardReset) finish(e);
  else {
    flushOut();
    parentPort.postMessage({ type: "crash", message: String((e && e.stack) || e) });
    process.exit(1);
  }
}
