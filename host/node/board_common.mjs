// What the virtual board (vboard.mjs) and the virtual Pico (vpico.mjs) share: their messages
// and events, the pin map, the sensor traces, and the sockets that stand for serial lines.
import fs from "node:fs";
import net from "node:net";
import readline from "node:readline";

export const NCHAN = 45; // 39 pockets, then CHANNELS
export const CHANNELS = ["rotor_a", "rotor_b", "ball_a", "ball_b", "lid", "incident"];
export const MAX_BACKLOG = 4 << 20; // a client that stops reading loses bytes, as on a serial line

// Messages on stderr prefixed with the program's name, events as JSON lines on stdout, and
// the serial lines' sockets: one client at a time on each; errors never kill the board.
// `hold_ms` (serve): a new client's first bytes wait that long (wall time), so that the ones
// sent just after it connected are not lost to an opener that empties its input (pyserial's
// socket:// does, at open).
export function boardIO(name) {
  let dropped = 0;
  const io = {
    die(msg, code = 2) {
      process.stderr.write(`${name}: ${msg}\n`);
      process.exit(code);
    },
    event(obj) {
      process.stdout.write(JSON.stringify(obj) + "\n");
    },
    log(msg) {
      process.stderr.write(`${name}: ${msg}\n`);
    },
    // output for a client that does not read, dropped: said once
    dropping() {
      if (dropped++ === 0) io.log("a client is not reading: output dropped");
    },
    send(sock, data) {
      if (!sock || sock.destroyed || !sock.writable) return;
      if (sock.writableLength > MAX_BACKLOG) return io.dropping();
      if (sock.held) {
        sock.held.push(data);
        return;
      }
      sock.write(data, () => {}); // EPIPE/ECONNRESET arrive on 'error', handled in serve
    },
    serve(port, onData, setClient, getClient, holdMs = 0) {
      const server = net.createServer((sock) => {
        const prev = getClient();
        if (prev) prev.destroy(); // a new opener takes the line, as with a serial device
        setClient(sock);
        sock.setNoDelay(true);
        if (holdMs > 0) {
          sock.held = [];
          setTimeout(() => {
            const held = sock.held;
            sock.held = null;
            for (const data of held) io.send(sock, data);
          }, holdMs);
        }
        sock.on("data", onData);
        sock.on("error", () => {});
        sock.on("close", () => {
          if (getClient() === sock) setClient(null);
        });
      });
      server.on("error", (e) => io.die(`cannot listen on 127.0.0.1:${port}: ${e.message}`, 1));
      return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(server)));
    },
    // The process's life: SIGTERM/SIGINT and the end of stdin call shutdown(0); with
    // `control`, stdin takes JSON lines {"cmd": NAME, ...}, each handed to commands[NAME](c).
    // A line that is not JSON, a command not there or whose handler returns false, and a
    // handler's exception are "error" events: the board runs on.
    controlled(control, commands, shutdown) {
      process.on("SIGTERM", () => shutdown(0));
      process.on("SIGINT", () => shutdown(0));
      process.stdout.on("error", () => {}); // a parent that stopped reading must not kill the board
      if (!control) return;
      const rl = readline.createInterface({ input: process.stdin });
      rl.on("line", (line) => {
        if (!line.trim()) return;
        let c;
        try {
          c = JSON.parse(line);
        } catch (e) {
          io.event({ event: "error", message: `control: not JSON: ${e.message}` });
          return;
        }
        try {
          const run = c && Object.hasOwn(commands, c.cmd) ? commands[c.cmd] : null;
          if (!run || run(c) === false) {
            io.event({ event: "error", message: `control: unknown command ${JSON.stringify(c && c.cmd)}` });
          }
        } catch (e) {
          io.event({ event: "error", message: `control: ${e.message}` });
        }
      });
      rl.on("close", () => shutdown(0)); // the controlling process went away
    },
    // The command line into opts: the options both boards take (--repl-port, --uart-port,
    // --sensors, --pins, --control), then own(a, next) for the others, false if unknown.
    parseArgs(opts, own) {
      const args = process.argv.slice(2);
      for (let i = 0; i < args.length; i++) {
        const a = args[i];
        const next = () => (i + 1 < args.length ? args[++i] : io.die(`${a} needs a value`));
        if (a === "--repl-port") opts.replPort = io.parsePort(next());
        else if (a === "--uart-port") opts.uartPort = io.parsePort(next());
        else if (a === "--sensors") opts.sensors = next();
        else if (a === "--pins") opts.pins = next();
        else if (a === "--control") opts.control = true;
        else if (own(a, next) === false) io.die(`unknown argument ${a}`);
      }
      return opts;
    },
    parsePort(text) {
      const n = Number(text);
      if (!Number.isInteger(n) || n < 0 || n > 65535) io.die(`bad port ${text}`);
      return n;
    },
    // The pin map (hardware/pico_pins.json): which GPIO each sensor channel drives, and how.
    // chanPin[39 + i] = [gpio, invert] for CHANNELS[i]: channel value 1 (sensor active, lid
    // locked) is GPIO level 1 ^ invert.
    loadPins(file) {
      let p;
      try {
        p = JSON.parse(fs.readFileSync(file, "utf8"));
      } catch (e) {
        io.die(`cannot read pin map ${file}: ${e.message}`);
      }
      const need = (obj, key, where) => {
        if (!obj || obj[key] === undefined) io.die(`pin map ${file}: missing ${where}${key}`);
        return obj[key];
      };
      const pk = need(p, "pockets", "");
      const pockets = {
        spi: need(pk, "spi", "pockets."),
        latch: need(pk, "latch", "pockets."),
        latch_active: need(pk, "latch_active", "pockets.") ? 1 : 0,
        chips: need(pk, "chips", "pockets."),
        active: pk.active === undefined ? 1 : pk.active ? 1 : 0,
      };
      if (pockets.chips * 8 < 39) {
        io.die(`pin map ${file}: ${pockets.chips} chips hold fewer than 39 pockets`);
      }
      const chanPin = {};
      for (const [i, chan] of CHANNELS.entries()) {
        const spec = need(p, chan, "");
        const pin = need(spec, "pin", `${chan}.`);
        let invert = 0;
        if (chan === "lid") invert = need(spec, "locked_level", "lid.") ? 0 : 1;
        else if (chan === "incident") invert = need(spec, "active_level", "incident.") ? 0 : 1;
        else if (spec.active_level !== undefined) invert = spec.active_level ? 0 : 1;
        chanPin[39 + i] = [pin, invert];
      }
      const uart = need(p, "uart", "");
      return { pockets, chanPin, uart, uartId: need(uart, "id", "uart."), led: p.led ? p.led.pin : 25 };
    },
  };
  return io;
}

// ---------------------------------------------------------------------------------------
// Sensor traces: JSON Lines; "sensor" and "power" records are played, others ignored.
// A record becomes [t_us, code, index]: code = channel * 2 + value, -1 a cut, -2 a restore.
export function channelCode(name) {
  if (typeof name !== "string") return -1;
  if (name.startsWith("pocket:")) {
    const n = Number(name.slice(7));
    return Number.isInteger(n) && n >= 0 && n < 39 ? n : -1;
  }
  const i = CHANNELS.indexOf(name);
  return i < 0 ? -1 : 39 + i;
}
export function parseRecords(records, where) {
  const ev = [];
  records.forEach((r, i) => {
    const at = `${where}: record ${i + 1}`;
    if (!r || typeof r !== "object") throw new Error(`${at}: not an object`);
    if (r.kind !== "sensor" && r.kind !== "power") return;
    const t = r.t_us;
    if (typeof t !== "number" || !Number.isFinite(t) || t < 0) throw new Error(`${at}: bad t_us ${t}`);
    if (r.kind === "power") {
      if (r.event !== "cut" && r.event !== "restore") throw new Error(`${at}: bad power event ${r.event}`);
      ev.push([t, r.event === "cut" ? -1 : -2, i]);
      return;
    }
    const ch = channelCode(r.ch);
    if (ch < 0) throw new Error(`${at}: unknown channel ${JSON.stringify(r.ch)}`);
    if (r.v !== 0 && r.v !== 1) throw new Error(`${at}: bad value ${JSON.stringify(r.v)}`);
    ev.push([t, ch * 2 + r.v, i]);
  });
  ev.sort((a, b) => a[0] - b[0] || a[2] - b[2]); // stable: file order breaks ties
  return ev;
}
export function readTrace(file) {
  const text = fs.readFileSync(file, "utf8");
  const records = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    try {
      records.push(JSON.parse(line));
    } catch (e) {
      throw new Error(`${file}:${i + 1}: not JSON: ${e.message}`);
    }
  });
  return parseRecords(records, file);
}
