// The virtual Pico: MicroPython's own RP2040 firmware on an emulated RP2040 (rp2040js), with
// the table firmware on its LittleFS flash, the wheel's sensors at the chip's pins, its USB
// REPL on a loopback socket for the real mpremote, and its frame UART on a second socket.
//
//   node vpico.mjs --image FS.img [--rp2-dir DIR] [--repl-port N] [--uart-port N]
//                  [--sensors TRACE.jsonl] [--pins PINS.json] [--control] [--flash-timing typ|0]
//
// --image: the LittleFS image of the flash file system (352 blocks of 4096 bytes, as the rp2
// port's _boot.py mounts it), loaded at flash offset 0xa0000. It is the board's flash: every
// erase or program the firmware makes in that region is written back to the file at once, so
// stopping node at any instant and starting again on the same file is a power cut.
// --rp2-dir: MicroPython's RPI_PICO build and the B1 boot ROM (../shared/rp2 by default).
// --flash-timing typ (default): an erase or program takes the flash chip's typical time
// (W25Q16JV: 45 ms a 4 KB sector, 0.4 ms a 256-byte page) of emulated time, with the CPU
// stalled, as on a Pico; 0: instant.
//
// Time is the emulated chip's: the sensor schedule is placed on its clock (nanoseconds of
// emulated time), never on the wall's. The chip runs as fast as the host emulates it.
// On stdout, one JSON line per event: {"event":"ready","repl_port":..,"uart_port":..} first,
// then boot, power, reset, sensors, flash, exit. With --control, stdin takes JSON lines:
// {"cmd":"sensors","path":..} or {"cmd":"sensors","records":[..]} (times from now),
// {"cmd":"power","event":"cut"|"restore"}, {"cmd":"uart","hex":..}, {"cmd":"status"},
// {"cmd":"save"}, {"cmd":"quit"} — the virtual board's protocol (vboard.mjs).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Simulator, USBCDC } from "rp2040js";
import { CHANNELS, NCHAN, boardIO, parseRecords, readTrace } from "./board_common.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..", "..");
const FIRMWARE_BIN = "micropython-v1.28.0-rpi-pico.bin";
const BOOTROM_BIN = "rp2040-bootrom-b1.bin";
const FS_OFFSET = 0xa0000; // the rp2 port's file system: the last 1408 KB of the 2 MB flash
const FS_SIZE = 352 * 4096;
const SECTOR = 4096;
const { die, event, log, send, serve, controlled, parseArgs, loadPins } = boardIO("vpico");

// ---------------------------------------------------------------------------------------
// Arguments.
const opts = {
  replPort: 0,
  uartPort: 0,
  sensors: null,
  image: null,
  rp2Dir: path.resolve(ROOT, "..", "shared", "rp2"),
  pins: path.join(ROOT, "hardware", "pico_pins.json"),
  control: false,
  flashTiming: true,
};
parseArgs(opts, (a, next) => {
  if (a === "--image") opts.image = next();
  else if (a === "--rp2-dir") opts.rp2Dir = next();
  else if (a === "--flash-timing") {
    const v = next();
    if (v !== "typ" && v !== "0") die(`bad --flash-timing ${v}: typ or 0`);
    opts.flashTiming = v === "typ";
  } else return false;
});
if (!opts.image) die("--image FS.img needed (a LittleFS image: rmc.vpico.build_image)");

function readFile(file, what) {
  try {
    return fs.readFileSync(file);
  } catch (e) {
    die(`cannot read ${what} ${file}: ${e.message}`);
  }
}
const firmware = readFile(path.join(opts.rp2Dir, FIRMWARE_BIN), "the MicroPython build");
const bootrom = readFile(path.join(opts.rp2Dir, BOOTROM_BIN), "the boot ROM");
if (firmware.length > FS_OFFSET) die(`${FIRMWARE_BIN} overlaps the file system`);
if (bootrom.length !== 16384) die(`${BOOTROM_BIN}: ${bootrom.length} bytes, not 16384`);

// The flash file system image, kept open: writes land in the file as the chip makes them.
let imageFd;
try {
  imageFd = fs.openSync(opts.image, "r+");
  const size = fs.fstatSync(imageFd).size;
  if (size !== FS_SIZE) die(`--image ${opts.image}: ${size} bytes, not ${FS_SIZE}`);
} catch (e) {
  die(`--image ${opts.image}: ${e.message}`);
}

// ---------------------------------------------------------------------------------------
// The pin map (hardware/pico_pins.json), read as vboard.mjs reads it (board_common.mjs).
const pins = loadPins(opts.pins);

// ---------------------------------------------------------------------------------------
// World state, kept across resets and power cuts: the time, the sensor levels, the schedule.
// World time (ns) = worldBase + the running chip's clock; the chip's clock starts at 0 at
// each power-up or reset, as the RP2040's timer does.
let worldBase = 0;
let worldOff = 0; // world time while no chip runs
const levels = new Uint8Array(NCHAN);
levels[39 + CHANNELS.indexOf("lid")] = 0; // lid unlocked, incident inactive until told
let sched = []; // [t_ns world, code] sorted; code = ch*2+v, -1 cut, -2 restore
let cursor = 0;
if (opts.sensors) {
  try {
    sched = readTrace(opts.sensors).map(([t, c]) => [t * 1000, c]);
  } catch (e) {
    die(`--sensors: ${e.message}`);
  }
}

// ---------------------------------------------------------------------------------------
// Sockets: one client at a time on each, like a serial port (board_common.mjs).
let replClient = null;
let uartClient = null;

// ---------------------------------------------------------------------------------------
// The chip. A fresh RP2040 at each power-up and reset: RAM and peripherals start over, the
// flash is the image file's (plus MicroPython itself).
let chip = null; // {sim, mcu, cdc, ...}
let boots = 0;
let usbIn = []; // REPL bytes from the host waiting for room in the CDC FIFO
let uartIn = []; // frame-line bytes waiting to be clocked into the UART at its baud rate
const stats = { erases: 0, programs: 0, bytesProgrammed: 0, flashNs: 0 };

// The boot ROM's function table (RP2040 datasheet 2.8.3): its address at 0x14, entries of
// (two-letter code, thumb address), ending at code 0.
function romFunction(rom, c1, c2) {
  const half = (a) => rom[a] | (rom[a + 1] << 8);
  const code = c1.charCodeAt(0) | (c2.charCodeAt(0) << 8);
  for (let p = half(0x14); half(p) !== 0; p += 4) if (half(p) === code) return half(p + 2) & ~1;
  die(`boot ROM has no function ${c1}${c2}`);
}
const BKPT_ERASE = 0xe0;
const BKPT_PROGRAM = 0xe1;
const romErase = romFunction(bootrom, "R", "E");
const romProgram = romFunction(bootrom, "R", "P");
const patchedRom = Buffer.from(bootrom);
// Each entry's first instruction becomes a BKPT the emulator answers (onBreak, below): the
// emulated SSI does not talk to a flash chip, so the ROM's own code would change nothing.
patchedRom.writeUInt16LE(0xbe00 | BKPT_ERASE, romErase);
patchedRom.writeUInt16LE(0xbe00 | BKPT_PROGRAM, romProgram);
const romWords = new Uint32Array(new Uint8Array(patchedRom).buffer);

const ERASE_NS = 45e6; // W25Q16JV typical sector erase (4 KB)
const PROGRAM_NS = 0.4e6; // typical page program (256 bytes)

function persist(offset, length) {
  // the flash file system's part of the range, written through to the image file
  const lo = Math.max(offset, FS_OFFSET);
  const hi = Math.min(offset + length, FS_OFFSET + FS_SIZE);
  if (hi <= lo) return;
  fs.writeSync(imageFd, chip.mcu.flash, lo, hi - lo, lo - FS_OFFSET);
}

function onBreak(code) {
  const { mcu } = chip;
  const core = mcu.core;
  const r = core.registers;
  if (code === BKPT_ERASE) {
    // flash_range_erase(addr, count, block_size, block_cmd): whole 4 KB sectors
    const addr = r[0] >>> 0;
    const count = r[1] >>> 0;
    const start = addr - (addr % SECTOR);
    const end = Math.min(mcu.flash.length, Math.ceil((addr + count) / SECTOR) * SECTOR);
    if (end > start) {
      mcu.flash.fill(0xff, start, end);
      persist(start, end - start);
    }
    stats.erases += (end - start) / SECTOR;
    stallChip(((end - start) / SECTOR) * ERASE_NS);
  } else if (code === BKPT_PROGRAM) {
    // flash_range_program(addr, data, count): NOR flash only clears bits
    const addr = r[0] >>> 0;
    const data = r[1] >>> 0;
    const count = Math.min(r[2] >>> 0, mcu.flash.length - addr);
    for (let i = 0; i < count; i++) mcu.flash[addr + i] &= mcu.readUint8(data + i);
    persist(addr, count);
    stats.programs++;
    stats.bytesProgrammed += count;
    stallChip(Math.ceil(count / 256) * PROGRAM_NS);
  } else {
    log(`breakpoint ${code} at ${(core.PC - 2).toString(16)}: chip stopped`);
    chip.stopped = true;
    return;
  }
  core.PC = core.registers[14] & ~1; // return to the caller (bx lr)
}

// The CPU waits for the flash: emulated time passes, nothing executes (the rp2 port runs its
// flash operations with interrupts off, and the XIP flash is unreadable meanwhile).
function stallChip(ns) {
  if (!opts.flashTiming || ns <= 0) return;
  stats.flashNs += ns;
  chip.sim.clock.tick(ns);
}

function worldNs() {
  return chip ? worldBase + chip.sim.clock.nanos : worldOff;
}

function makeChip(mode) {
  const sim = new Simulator();
  const mcu = sim.rp2040;
  mcu.logger = { debug() {}, info() {}, warn() {}, error: (c, m) => log(`${c}: ${m}`) };
  mcu.loadBootrom(romWords);
  mcu.flash.set(firmware, 0);
  fs.readSync(imageFd, mcu.flash, FS_OFFSET, FS_SIZE, 0);
  const c = { sim, mcu, cdc: null, connected: false, stopped: false, chain: new Uint8Array(8), shift: 0 };
  chip = c;
  mcu.onBreak = onBreak;

  // USB: the REPL
  const cdc = new USBCDC(mcu.usbCtrl);
  c.cdc = cdc;
  cdc.onDeviceConnected = () => {
    c.connected = true;
  };
  cdc.onSerialData = (bytes) => send(replClient, Buffer.from(bytes));
  // rp2040js's host answers every OUT transfer the device arms, 10 µs later, with zero bytes
  // when it has nothing to send; TinyUSB arms it again at once: two thirds of the emulated
  // CPU went to USB interrupts. A real host sends OUT packets only with data: the transfer
  // is held here until bytes come (pumpUsb).
  const answerOut = mcu.usbCtrl.onEndpointRead;
  c.outHeld = [];
  c.answerOut = answerOut;
  mcu.usbCtrl.onEndpointRead = (ep, size) => {
    if (ep === cdc.outEndpoint && cdc.txFIFO.empty) c.outHeld.push(size);
    else answerOut(ep, size);
  };

  // The frame UART
  const uart = mcu.uart[pins.uartId];
  modelUartTx(c, uart, (b) => send(uartClient, Buffer.from([b])));

  // The 74HC165 chain: the latch at its active level loads the pockets, each SPI frame
  // shifts one chip out (pocket i = bit 7 - i%8 of byte i//8), zeros past the last chip.
  const pk = pins.pockets;
  const spi = mcu.spi[pk.spi];
  spi.onTransmit = () => {
    const b = c.shift < pk.chips ? c.chain[c.shift] : 0;
    c.shift++;
    spi.completeTransmit(b);
  };
  mcu.gpio[pk.latch].addListener((state) => {
    if ((state === 1) === (pk.latch_active === 1) && (state === 0 || state === 1)) {
      c.chain.fill(0);
      for (let i = 0; i < 39; i++) {
        const v = pk.active ? levels[i] : 1 - levels[i];
        if (v) c.chain[i >> 3] |= 0x80 >> (i & 7);
      }
      if (!pk.active) for (let i = 39; i < pk.chips * 8; i++) c.chain[i >> 3] |= 0x80 >> (i & 7);
      c.shift = 0;
    }
  });

  // Sensor inputs: their present levels, then the schedule's edges on the chip's clock.
  for (let ch = 39; ch < NCHAN; ch++) applyLevel(ch);
  c.alarm = sim.clock.createAlarm(onScheduleAlarm);
  c.uartAlarm = sim.clock.createAlarm(onUartAlarm);
  c.uartByteNs = 1e9 / 11520; // replaced once the baud rate is known
  uart.onBaudRateChange = (baud) => {
    c.uartByteNs = 1e10 / baud;
  };

  // Watchdog or machine.reset(): the chip starts again, with the watchdog's REASON (TIMER 1
  // when it ran out, FORCE 2 when triggered: machine.reset()) and scratch registers, which a
  // watchdog reset leaves as they were (RP2040 datasheet 4.7); reset_cause() reads REASON.
  const wd = mcu.peripherals[0x40058];
  wd.onWatchdogTrigger = () => {
    // rp2040js 1.4.1 re-arms a watchdog that ran out 0 ns later (a decrementing timer's
    // target of 0), forever: the clock's tick never returned. This chip is done anyway.
    wd.alarm.enable = false;
    c.stopped = true;
    c.resetReason = wd.reason;
    c.resetScratch = Uint32Array.from(wd.scratchData);
  };

  mcu.core.PC = 0x10000000; // boot2, first thing in the flash, then MicroPython
  boots++;
  scheduleNext();
  event({ event: "boot", mode, t_us: Math.round(worldBase / 1000), boot: boots });
  return c;
}

// rp2040js 1.4.1's UART sends a byte the instant it is written and raises its TX interrupt
// again after every clear: MicroPython's UART (txbuf, TX interrupt enabled) then never
// leaves its interrupt handler, and `machine.UART(...)` hangs. Here the UART's TX side is a
// PL011's: a 32-byte FIFO that drains one byte per character time (10 bits at the baud rate,
// on the chip's clock), FR's TXFF/TXFE/BUSY from it, and the TX interrupt raised when the
// FIFO drains through its trigger level (IFLS TXIFLSEL: 1/8 = 4 bytes, the SDK's setting),
// cleared by ICR, as the datasheet (4.2.6) says.
const UART_DR = 0x0;
const UART_FR = 0x18;
const UART_TXINTR = 1 << 5;
const FR_BUSY = 1 << 3;
const FR_TXFF = 1 << 5;
const FR_TXFE = 1 << 7;
function modelUartTx(c, uart, out) {
  const fifo = [];
  const TX_TRIGGER = 4;
  let shifting = false;
  const byteNs = () => (uart.baudRate > 0 ? 1e10 / uart.baudRate : 1e10 / 115200);
  // fires when the FIFO's first byte is all out on the line
  const alarm = c.sim.clock.createAlarm(() => {
    const before = fifo.length;
    out(fifo.shift());
    if (before > TX_TRIGGER && fifo.length <= TX_TRIGGER) {
      uart.interruptStatus |= UART_TXINTR;
      uart.checkInterrupts();
    }
    if (fifo.length) alarm.schedule(byteNs());
    else shifting = false;
  });
  uart.checkInterrupts = function () {
    c.mcu.setInterrupt(this.irq, !!(this.interruptStatus & this.interruptMask));
  };
  const read = uart.readUint32.bind(uart);
  uart.readUint32 = (offset) => {
    if (offset !== UART_FR) return read(offset);
    let fr = read(offset) & ~(FR_TXFE | FR_TXFF | FR_BUSY);
    if (!fifo.length) fr |= FR_TXFE;
    if (fifo.length >= 32) fr |= FR_TXFF;
    if (shifting) fr |= FR_BUSY;
    return fr;
  };
  const write = uart.writeUint32.bind(uart);
  uart.writeUint32 = (offset, value) => {
    if (offset !== UART_DR) return write(offset, value);
    if (fifo.length >= 32) return; // overrun: the PL011 drops it too
    fifo.push(value & 0xff);
    if (!shifting) {
      shifting = true;
      alarm.schedule(byteNs());
    }
  };
}

function applyLevel(ch) {
  if (!chip || ch < 39) return; // pockets are read through the chain at each latch
  const [pin, invert] = pins.chanPin[ch];
  chip.mcu.gpio[pin].setInputValue(!!(levels[ch] ^ invert));
}

function scheduleNext() {
  if (!chip) return;
  const c = chip;
  c.alarm.cancel();
  if (cursor >= sched.length) return;
  const dt = sched[cursor][0] - worldNs();
  c.alarm.schedule(Math.max(0, dt));
}

function onScheduleAlarm() {
  const now = worldNs();
  while (cursor < sched.length && sched[cursor][0] <= now) {
    const code = sched[cursor][1];
    cursor++;
    if (code === -1) {
      powerCut();
      return;
    }
    if (code === -2) continue; // restore while on: nothing to do
    levels[code >> 1] = code & 1;
    applyLevel(code >> 1);
  }
  scheduleNext();
}

// Bytes to the frame UART's RX at the line's rate: its FIFO holds 32, as on the chip.
function onUartAlarm() {
  const c = chip;
  if (!c || !uartIn.length) return;
  const uart = c.mcu.uart[pins.uartId];
  if (!uart.rxFIFO.full) uart.feedByte(uartIn.shift());
  if (uartIn.length) c.uartAlarm.schedule(c.uartByteNs);
}
function onUartData(data) {
  if (!chip) return;
  const was = uartIn.length;
  uartIn.push(...data);
  if (!was) chip.uartAlarm.schedule(chip.uartByteNs);
}
function onReplData(data) {
  if (!chip) return;
  usbIn.push(...data);
}
function pumpUsb() {
  const c = chip;
  if (!c || !c.connected) return;
  const fifo = c.cdc.txFIFO;
  let n = 0;
  while (n < usbIn.length && !fifo.full) fifo.push(usbIn[n++]);
  usbIn = n === usbIn.length ? [] : usbIn.slice(n);
  while (c.outHeld.length && !fifo.empty) c.answerOut(c.cdc.outEndpoint, c.outHeld.shift());
}

// ---------------------------------------------------------------------------------------
// Power and resets.
let offUntil = null; // world ns of a scheduled restore, while off
function powerCut() {
  if (!chip) return;
  worldOff = worldNs();
  chip = null;
  usbIn = [];
  uartIn = [];
  if (replClient) replClient.destroy(); // the USB device goes away
  event({ event: "power", state: "off", t_us: Math.round(worldOff / 1000) });
  // Edges while off only set the levels seen at power-up; a restore record powers up.
  while (cursor < sched.length) {
    const [t, code] = sched[cursor++];
    if (code === -2) {
      worldOff = Math.max(worldOff, t);
      setImmediate(powerOn);
      return;
    }
    if (code >= 0) levels[code >> 1] = code & 1;
  }
}
function powerOn() {
  if (chip || quitting) return;
  worldBase = worldOff;
  event({ event: "power", state: "on", t_us: Math.round(worldBase / 1000) });
  makeChip("power");
}
function chipReset(c) {
  worldOff = worldNs();
  chip = null;
  usbIn = [];
  if (replClient) replClient.destroy();
  event({ event: "reset", kind: "wdt", reason: c.resetReason, t_us: Math.round(worldOff / 1000) });
  worldBase = worldOff;
  const n = makeChip("reset");
  n.mcu.peripherals[0x40058].reason = c.resetReason;
  n.mcu.peripherals[0x40058].scratchData.set(c.resetScratch);
}

// ---------------------------------------------------------------------------------------
// The run loop: slices of ~20 ms of wall time, then the event loop (sockets, control).
// While the core sleeps (WFE/WFI), the clock jumps to the next alarm, but never further than
// the wall time gone by allows: a sleeping chip's time passes at most at real time, as on a
// Pico. Without that, a chip idle at the REPL with its watchdog running was reset the instant
// it stopped (the clock leapt 2 s), where a Pico leaves mpremote 2 s; and a REPL with no alarm
// at all stood still. Running code takes its cycles' time, ~0.1-0.25 of real time here.
const perf = { wallMs: 0, emulNs: 0 };
const IDLE_CREDIT_MAX_NS = 100e6;
let idleCredit = 0; // ns of sleep the wall time gone by allows
let lastSlice = performance.now();
function runSlice() {
  const c = chip;
  if (!c || quitting) {
    setTimeout(runSlice, 5);
    return;
  }
  const { sim, mcu } = c;
  const core = mcu.core;
  const clock = sim.clock;
  const t0 = performance.now();
  idleCredit = Math.min(IDLE_CREDIT_MAX_NS, idleCredit + (t0 - lastSlice) * 1e6);
  lastSlice = t0;
  const n0 = clock.nanos;
  let asleep = false;
  pumpUsb();
  while (!asleep && !c.stopped && chip === c && performance.now() - t0 < 20) {
    const cycleNs = 1e9 / mcu.clkSys;
    for (let i = 0; i < 20000 && !c.stopped && chip === c; i++) {
      if (core.waiting) {
        // to the next alarm only: the core wakes at each (an edge, a timer) and runs before
        // the next fires, as on the chip (two edges met in one tick were served together)
        const next = clock.nextAlarm;
        const dt = next ? Math.max(0, next.nanos - clock.nanos) : Infinity;
        if (dt <= idleCredit) {
          clock.tick(dt);
          idleCredit -= dt;
          continue;
        }
        // the next alarm is further off than real time allows (or there is none): the
        // time allowed passes, reaching no alarm
        clock.tick(idleCredit);
        idleCredit = 0;
        asleep = true;
        break;
      }
      clock.tick(core.executeInstruction() * cycleNs);
    }
    pumpUsb();
  }
  perf.wallMs += performance.now() - t0;
  perf.emulNs += clock.nanos - n0;
  if (c.stopped && chip === c) {
    if (c.resetReason !== undefined) chipReset(c);
    else {
      log("the chip stopped");
      chip = null;
    }
  }
  if (asleep) setTimeout(runSlice, 1); // wall time passes; sockets and control are served
  else setImmediate(runSlice);
}

// ---------------------------------------------------------------------------------------
// Control (stdin JSON lines) and shutdown.
let quitting = false;
function shutdown(code = 0) {
  if (quitting) return;
  quitting = true;
  try {
    fs.fsyncSync(imageFd);
    fs.closeSync(imageFd);
  } catch (e) {
    log(`image: ${e.message}`);
  }
  event({ event: "exit", t_us: Math.round(worldNs() / 1000) });
  process.exit(code);
}
function status() {
  return {
    event: "status",
    t_us: Math.round(worldNs() / 1000),
    powered: chip !== null,
    ready: !!(chip && chip.connected),
    boots,
    cursor,
    n: sched.length,
    pc: chip ? chip.mcu.core.PC : null,
    speed: perf.wallMs > 0 ? perf.emulNs / 1e6 / perf.wallMs : 0,
    flash: { ...stats },
  };
}
// The control channel (board_common.mjs): the virtual board's protocol.
const commands = {
  sensors(c) {
    const evs = c.path ? readTrace(c.path) : parseRecords(c.records || [], "records");
    const base = worldNs();
    sched = evs.map(([t, code]) => [base + Math.round(t) * 1000, code]);
    cursor = 0;
    scheduleNext();
    event({ event: "sensors", n: sched.length, base_us: Math.round(base / 1000) });
  },
  power(c) {
    if (c.event === "cut") powerCut();
    else if (c.event === "restore") setImmediate(powerOn);
    else return false;
  },
  uart(c) {
    onUartData(Buffer.from(String(c.hex || ""), "hex"));
  },
  save() {
    fs.fsyncSync(imageFd); // written through already
    event({ event: "saved", ok: true });
  },
  status: () => event(status()),
  quit: () => shutdown(0),
};
controlled(opts.control, commands, shutdown);

const replServer = await serve(opts.replPort, onReplData, (s) => (replClient = s), () => replClient);
// a new frame-line client hears the chip 250 ms after it connects: pyserial empties its
// input once connected, and frames sent in that instant were lost to it
const uartServer = await serve(opts.uartPort, onUartData, (s) => (uartClient = s), () => uartClient, 250);
event({ event: "ready", repl_port: replServer.address().port, uart_port: uartServer.address().port });
makeChip("power");
setImmediate(runSlice);
