// The engineer's live view of one table: for the spin in progress (or the last one), the
// ball's laps against a fit of the predictor's model, the call of « rien ne va plus » with
// its predicted drop and lead, the real drop, the rotor; the wheel's pockets in the order of
// hardware/wheel.json, lit as the ball bounces (HOP frames, live) and where it rests; faults,
// the link's health and the tail of the frame log.
// Every frame the service stores comes on the stream; the figures are the service's
// (/api/tables/{id}/live), read again when a frame of the spin comes. A HOP (up to 20 a
// second) is not read again: its pockets are lit in place, from the frame itself.

import { api, clock, debounce, el, q, svg, table, token } from "./api.js";
import { STATES, leadSetBy, leadWords, words } from "./events.js";
import { login, roleWord } from "./login.js";
import { follow } from "./sse.js";

const $ = (id) => document.getElementById(id);
const SPIN_FRAMES = new Set(["LAUNCH", "REV", "RNVP", "DROP", "RES", "VOID", "INC", "STAT", "FAULT", "BOOT", "LID"]);
const LOG_MAX = 200;
const DIRS = { cw: "horaire", ccw: "antihoraire", "-": "—" };
const WHY = { fit: "ajustement", limit: "tour trop long", drop: "bille tombée d'abord", incident: "incident", power: "coupure" };

const HOPS_KEPT = 500;

const probe = { refreshes: 0, frames: 0, spin: null, laps: 0, call: false, hops: [] };
window.rmcEngineer = probe;

let wheel = null;
let liveNow = false;
let shownSpin = null; // the spin the wheel shows (the live view's), null before one
let hopLive = null; // the newest HOP heard on the stream: { spin, boot, seq, lit }
const logKeys = new Set();

const session = login({
  form: $("login"),
  message: $("login-msg"),
  app: $("app"),
  roles: ["engineer", "chef"],
  what: "la vue de l'ingénieur",
  onIn: start,
});
$("table-id").textContent = table;
$("logout").addEventListener("click", () => session.logout());

async function start(who) {
  $("who").textContent = `${who.name} — ${roleWord(who.role)}`;
  $("logout").hidden = false;
  const w = await api("/api/wheel", { auth: false });
  if (w.ok) wheel = w.data;
  follow(`/api/tables/${q(table)}/live/events`, {
    token: token.get(),
    onEvent,
    onOpen: refresh,
    onState: (s) => {
      liveNow = s === "live";
      $("live").dataset.state = s;
      $("live").textContent = liveNow ? "en direct" : "reconnexion…";
    },
    onAuth: () => session.refused(),
  });
  // the link's counters change with every line: read again now and then
  setInterval(() => liveNow && refresh(), 2000);
}

async function refresh() {
  const res = await api(`/api/tables/${q(table)}/live`);
  if (res.status === 401) return session.refused();
  if (!res.ok) return;
  const s = res.data;
  probe.refreshes += 1;
  drawHeadline(s);
  drawChart(s.spin);
  drawWheel(s);
  drawSpin(s.spin);
  drawLead(s.lead);
  drawLink(s.info.link, s.damage);
  drawFaults(s);
  for (const f of s.tail) addLog(f, false);
  scrollLog();
}
const refreshSoon = debounce(refresh, 150);

function onEvent(type, ev) {
  if (type === "frame") {
    probe.frames += 1;
    addLog(ev, true);
    scrollLog();
    if (ev.frame === "HOP") onHop(ev);
    else if (SPIN_FRAMES.has(ev.frame)) refreshSoon();
    return;
  }
  refreshSoon();
}

// --- header ---

function drawHeadline(s) {
  const i = s.info;
  const parts = [`coup n° ${i.spin ?? "—"}`, STATES[i.state] ?? i.state ?? "—"];
  if (i.session !== null && i.session !== undefined) parts.push(`session ${i.session}`);
  $("headline").textContent = parts.join(" · ");
}

// --- the laps chart ---

const W = 960;
const H = 380;
const M = { l: 64, r: 24, t: 26, b: 44 };

function drawChart(v) {
  const chart = $("chart");
  chart.replaceChildren();
  probe.spin = v?.spin ?? null;
  probe.laps = v?.laps.length ?? 0;
  probe.call = !!v?.rnvp;
  $("chart-title").textContent = v ? `Coup n° ${v.spin} : les tours de la bille` : "Les tours de la bille";
  if (!v || !v.laps.length) {
    chart.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, v ? "bille pas encore lancée" : "aucun coup"));
    return;
  }
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#b3261e" }));
  defs.append(marker);
  chart.append(defs);

  const fit = v.fit ?? { curve: [], ahead: [] };
  const times = [...v.laps.map((l) => l.t_s), ...fit.ahead.map((p) => p.t_s)];
  if (v.rnvp) times.push(v.rnvp.t_s, v.rnvp.drop_t_s ?? 0);
  if (v.drop) times.push(v.drop.t_s);
  const periods = [...v.laps, ...fit.curve, ...fit.ahead].map((p) => p.period_ms);
  const xmax = Math.max(5, ...times) * 1.04;
  let ylo = Math.min(...periods);
  let yhi = Math.max(...periods);
  const pad = Math.max(50, (yhi - ylo) * 0.12);
  ylo = Math.max(0, Math.floor((ylo - pad) / 100) * 100);
  yhi = Math.ceil((yhi + pad) / 100) * 100;
  const x = (t) => M.l + (t / xmax) * (W - M.l - M.r);
  const y = (p) => H - M.b - ((p - ylo) / (yhi - ylo)) * (H - M.t - M.b);

  const axis = svg("g", { class: "axis" });
  const xstep = xmax > 24 ? 5 : xmax > 10 ? 2 : 1;
  for (let t = 0; t <= xmax; t += xstep) {
    axis.append(svg("line", { x1: x(t), x2: x(t), y1: M.t, y2: H - M.b, class: "grid-line" }));
    axis.append(svg("text", { x: x(t), y: H - M.b + 18, "text-anchor": "middle" }, `${t} s`));
  }
  const ystep = yhi - ylo > 1200 ? 200 : 100;
  for (let p = ylo; p <= yhi; p += ystep) {
    axis.append(svg("line", { x1: M.l, x2: W - M.r, y1: y(p), y2: y(p), class: "grid-line" }));
    axis.append(svg("text", { x: M.l - 8, y: y(p) + 4, "text-anchor": "end" }, `${p}`));
  }
  axis.append(svg("text", { x: 14, y: M.t - 8 }, "durée du tour (ms)"));
  axis.append(svg("text", { x: W - M.r, y: H - 6, "text-anchor": "end" }, "temps depuis le lancer (horloge de la carte)"));
  chart.append(axis);

  if (fit.curve.length) {
    const pts = fit.curve.map((p) => `${x(p.t_s)},${y(p.period_ms)}`).join(" ");
    chart.append(svg("polyline", { points: pts, class: "fit", "data-n": fit.curve.length }));
  }
  if (fit.ahead.length) {
    const last = v.laps[v.laps.length - 1];
    const pts = [last, ...fit.ahead].map((p) => `${x(p.t_s)},${y(p.period_ms)}`).join(" ");
    chart.append(svg("polyline", { points: pts, class: "ahead" }));
    for (const p of fit.ahead) chart.append(svg("circle", { cx: x(p.t_s), cy: y(p.period_ms), r: 4, class: "ahead-pt" }));
  }
  const laps = svg("g", { id: "laps" });
  for (const l of v.laps) {
    const c = svg("circle", { cx: x(l.t_s), cy: y(l.period_ms), r: 5.5, class: "lap", "data-n": l.n });
    c.append(svg("title", {}, `tour ${l.n} : ${l.period_ms} ms, fini à ${l.t_s} s`));
    laps.append(c);
  }
  chart.append(laps);

  const vline = (t, cls, label, row) => {
    chart.append(svg("line", { x1: x(t), x2: x(t), y1: M.t, y2: H - M.b, class: cls, id: `mark-${cls}` }));
    // a label on the right half is written to the left of its line: it stays in the chart
    const left = x(t) > W * 0.55;
    const at = { x: x(t) + (left ? -6 : 6), y: M.t + 16 + 18 * row, "text-anchor": left ? "end" : "start" };
    chart.append(svg("text", { ...at, class: `label ${cls}` }, label));
  };
  if (v.rnvp) {
    vline(v.rnvp.t_s, "call", `rien ne va plus (${WHY[v.rnvp.why] ?? v.rnvp.why}) ${v.rnvp.t_s.toFixed(2)} s`, 0);
    if (v.rnvp.drop_t_s !== null && v.rnvp.drop_t_s !== undefined) {
      vline(v.rnvp.drop_t_s, "predicted", `chute prévue ${v.rnvp.drop_t_s.toFixed(2)} s`, 1);
      const ya = H - M.b - 14;
      chart.append(svg("line", { x1: x(v.rnvp.t_s), x2: x(v.rnvp.drop_t_s), y1: ya, y2: ya, class: "lead" }));
      chart.append(svg("text", { x: (x(v.rnvp.t_s) + x(v.rnvp.drop_t_s)) / 2, y: ya - 6, "text-anchor": "middle", class: "label" }, `avance ${v.rnvp.lead_ms} ms`));
    }
  }
  if (v.drop) vline(v.drop.t_s, "drop", `chute ${v.drop.t_s.toFixed(2)} s (${v.drop.revs} tours)`, 2);
}

// --- the wheel ---

function polar(r, deg) {
  const a = ((deg - 90) * Math.PI) / 180; // 0° at the top, clockwise
  return [r * Math.cos(a), r * Math.sin(a)];
}

function faultChannels(findings, active) {
  // a pocket fault names its channel (its place in wheel.json) in its detail
  const on = new Map();
  for (const e of [...findings].reverse()) {
    if (e.kind !== "fault") continue;
    const d = e.data ?? {};
    if (!/^pocket_/.test(d.code ?? "") || !/^\d+$/.test(d.detail ?? "")) continue;
    on.set(`${d.code}:${d.detail}`, d.on === "1");
  }
  const out = new Set();
  for (const [k, v] of on) {
    const [code, ch] = k.split(":");
    if (v && active.includes(code)) out.add(Number(ch));
  }
  return out;
}

// --- the ball among the pockets (HOP frames) ---

/** A HOP frame's spin and pockets, from its line (`lit`: labels joined by ";", "-" none;
 * labels hold no byte the wire escapes). null for a line that does not say them. */
function hopOf(ev) {
  const spin = /,spin=(\d+)[,#*]/.exec(ev.line ?? "");
  const lit = /,lit=([^,#*]*)[,#*]/.exec(ev.line ?? "");
  if (!spin || !lit) return null;
  return { spin: Number(spin[1]), boot: ev.boot, seq: ev.seq, lit: lit[1] === "-" ? [] : lit[1].split(";") };
}

const newer = (a, b) => !b || a.boot > b.boot || (a.boot === b.boot && a.seq > b.seq);

function onHop(ev) {
  const h = hopOf(ev);
  if (!h) return;
  if (newer(h, hopLive)) hopLive = h;
  const shown = lightHops();
  probe.hops.push({ spin: h.spin, key: `${h.boot}.${h.seq}`, lit: h.lit, shown });
  if (probe.hops.length > HOPS_KEPT) probe.hops.shift();
  if (!shownSpin || shownSpin.spin !== h.spin) refreshSoon(); // a spin the view has not yet
}

/** The pockets to light as bouncing: the newest HOP of the spin shown (the view's, or one
 * heard since), while the spin has no outcome and no incident stopped it. */
function hopPicture() {
  const v = shownSpin;
  if (!v || v.outcome || (v.incident ?? []).length) return [];
  let h = v.hop ? { spin: v.spin, ...v.hop } : null;
  if (hopLive && hopLive.spin === v.spin && newer(hopLive, h)) h = hopLive;
  return h ? h.lit : [];
}

/** Light the bouncing pockets on the wheel drawn; the labels lit. */
function lightHops() {
  const lit = new Set(hopPicture());
  const shown = [];
  for (const p of document.querySelectorAll("#wheel path.pocket")) {
    const on = lit.has(p.dataset.result);
    p.classList.toggle("hop", on);
    if (on) shown.push(p.dataset.result);
  }
  return shown;
}

function drawWheel(s) {
  const g = $("wheel");
  g.replaceChildren();
  shownSpin = s.spin ?? null;
  if (!wheel) return;
  const v = s.spin;
  const lit = new Set();
  if (v?.outcome?.result) lit.add(v.outcome.result);
  for (const inc of v?.incident ?? []) if (inc.num) lit.add(inc.num);
  const faulty = faultChannels(s.findings, s.info.active_faults ?? []);
  const n = wheel.pockets.length;
  const step = 360 / n;
  const defs = svg("defs");
  const marker = svg("marker", { id: "warrow", viewBox: "0 0 10 10", refX: 5, refY: 5, markerWidth: 5, markerHeight: 5, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#163d29" }));
  defs.append(marker);
  g.append(defs);
  g.append(svg("circle", { r: 205, class: "rim" }));
  const R1 = 192;
  const R0 = 128;
  for (const p of wheel.pockets) {
    const a0 = p.channel * step - step / 2;
    const a1 = a0 + step;
    const [x0, y0] = polar(R1, a0);
    const [x1, y1] = polar(R1, a1);
    const [x2, y2] = polar(R0, a1);
    const [x3, y3] = polar(R0, a0);
    const on = lit.has(p.result);
    const cls = `pocket ${p.colour}${on ? " lit" : ""}${faulty.has(p.channel) ? " fault" : ""}`;
    const path = svg("path", {
      d: `M${x0},${y0} A${R1},${R1} 0 0 1 ${x1},${y1} L${x2},${y2} A${R0},${R0} 0 0 0 ${x3},${y3} Z`,
      class: cls,
      "data-channel": p.channel,
      "data-result": p.result,
    });
    path.append(svg("title", {}, `case ${p.result}, capteur ${p.channel}`));
    g.append(path);
    const [tx, ty] = polar((R1 + R0) / 2 + 8, p.channel * step);
    const label = svg("text", { x: tx, y: ty, class: `num${on ? " lit" : ""}`, transform: `rotate(${p.channel * step} ${tx} ${ty})` }, p.result);
    g.append(label);
  }
  for (const deg of wheel.ball_sensor_angles_deg ?? []) {
    const [sx, sy] = polar(209, deg);
    g.append(svg("circle", { cx: sx, cy: sy, r: 4, class: "sensor" }));
  }
  for (const deg of wheel.deflectors_deg ?? []) {
    const [dx, dy] = polar(R1 + 6, deg);
    g.append(svg("rect", { x: dx - 3, y: dy - 3, width: 6, height: 6, class: "deflector", transform: `rotate(45 ${dx} ${dy})` }));
  }
  g.append(svg("circle", { r: R0 - 4, class: "hub" }));
  const rotor = v?.rotor;
  const rdir = rotor?.rdir ?? v?.launch?.rdir;
  if (rdir === "cw" || rdir === "ccw") {
    const r = 80;
    const [ax, ay] = polar(r, rdir === "cw" ? -50 : 50);
    const [bx, by] = polar(r, rdir === "cw" ? 50 : -50);
    g.append(svg("path", { d: `M${ax},${ay} A${r},${r} 0 0 ${rdir === "cw" ? 1 : 0} ${bx},${by}`, class: "rotor-arrow" }));
  }
  g.append(svg("text", { x: 0, y: -8, class: "hubtext big", id: "rotor-period" }, rotor ? `${(rotor.period_ms / 1000).toFixed(2)} s` : "—"));
  g.append(svg("text", { x: 0, y: 18, class: "hubtext" }, `rotor ${DIRS[rdir] ?? "—"}`));
  if (v?.launch?.bdir) g.append(svg("text", { x: 0, y: 40, class: "hubtext" }, `bille ${DIRS[v.launch.bdir] ?? v.launch.bdir}`));
  lightHops();
  $("wheel-note").textContent =
    `${wheel.name ?? ""} (id ${wheel.id ?? "?"}) : capteur 0 en haut, sens horaire. ` +
    "En bleu : les cases où la bille rebondit (trames HOP, au plus 20 par seconde). En or : la case où la bille repose." +
    (faulty.size ? ` En rouge : capteur en défaut (${[...faulty].join(", ")}).` : "");
}

// --- the spin's facts ---

function fact(dl, name, value) {
  dl.append(el("dt", { text: name }), el("dd", { text: value }));
}

function drawSpin(v) {
  const dl = $("spin-facts");
  dl.replaceChildren();
  if (!v) return fact(dl, "Coup", "aucun");
  fact(dl, "Coup", `n° ${v.spin}`);
  if (v.launch) fact(dl, "Lancer", `rotor ${DIRS[v.launch.rdir] ?? v.launch.rdir}, bille ${DIRS[v.launch.bdir] ?? v.launch.bdir}`);
  const last = v.laps[v.laps.length - 1];
  fact(dl, "Tours", last ? `${v.laps.length} (dernier : ${last.period_ms} ms)` : "0");
  if (v.rnvp) {
    fact(dl, "Rien ne va plus", `à ${v.rnvp.t_s.toFixed(2)} s (${WHY[v.rnvp.why] ?? v.rnvp.why})`);
    if (v.rnvp.drop_t_s !== null && v.rnvp.drop_t_s !== undefined) {
      fact(dl, "Chute prévue", `à ${v.rnvp.drop_t_s.toFixed(2)} s : avance demandée ${v.rnvp.lead_ms} ms`);
    }
  }
  if (v.drop) fact(dl, "Chute", `à ${v.drop.t_s.toFixed(2)} s après ${v.drop.revs} tours${v.drop.void ? ` (nul : ${v.drop.void})` : ""}`);
  if (v.lead_actual_ms !== null) fact(dl, "Avance obtenue", `${v.lead_actual_ms} ms`);
  if (v.outcome?.result) fact(dl, "Résultat", v.outcome.announcement ?? v.outcome.result);
  if (v.outcome?.void) fact(dl, "Coup nul", v.outcome.void);
  if (v.fit) fact(dl, "Ajustement", `a = ${v.fit.a}, b = ${v.fit.b} (tr/s)²`);
}

/** The lead in force, under the spin's facts: what the call aims at, and who set it. */
function drawLead(lead) {
  if (!lead) return;
  const dl = $("spin-facts");
  fact(dl, "Avance en vigueur", leadWords(lead));
  const who = leadSetBy(lead);
  fact(dl, "Réglée", who || "valeurs par défaut (aucune trame CFG)");
}

// --- the link ---

const LINK_ROWS = [
  ["connected", "connectée", (x) => (x ? "oui" : "non")],
  ["silent", "muette", (x) => (x ? "oui" : "non")],
  ["since_us", "depuis", clock],
  ["last_rx_us", "dernière réception", clock],
  ["reconnects", "reconnexions"],
  ["lines", "lignes reçues"],
  ["frames", "trames valides"],
  ["damaged", "lignes endommagées"],
  ["duplicates", "doublons"],
  ["missing", "trames manquantes"],
  ["resends_asked", "renvois demandés"],
  ["lost", "perdues (hors du journal)"],
  ["error", "erreur", (x) => x ?? "—"],
];
const WHY_DAMAGE = { crc: "CRC faux", malformed: "mal formées", auth: "signature refusée", noise: "bruit", conflict: "conflit", foreign: "autre table" };

function drawLink(link, damage) {
  const rows = LINK_ROWS.map(([k, name, fmt]) =>
    el("tr", { "data-k": k }, el("th", { text: name }), el("td", { text: fmt ? fmt(link[k]) : String(link[k] ?? "—") })),
  );
  for (const [why, name] of Object.entries(WHY_DAMAGE)) {
    rows.push(el("tr", { "data-k": `damage-${why}` }, el("th", { text: `dont ${name}` }), el("td", { text: String(damage.by_why[why] ?? 0) })));
  }
  $("link").replaceChildren(el("tbody", {}, ...rows));
}

// --- faults and findings ---

function drawFaults(s) {
  const active = s.info.active_faults ?? [];
  $("active-faults").textContent = active.length ? `Défauts actifs : ${active.join(", ")}` : "Aucun défaut actif.";
  $("active-faults").className = active.length ? "ko" : "ok";
  $("findings").replaceChildren(
    ...s.findings.map((e) => el("li", { class: e.kind }, el("time", { text: `${e.boot}:${e.seq}` }), el("span", { text: words(e.kind, e.data) }))),
  );
}

// --- the frame log ---

function addLog(f, fromStream) {
  const key = `${f.boot}.${f.seq}`;
  if (logKeys.has(key)) return;
  logKeys.add(key);
  const log = $("log");
  const rx = f.rx_us ? new Date(f.rx_us / 1000) : null;
  const time = rx ? `${rx.toLocaleTimeString("fr-FR", { hour12: false })}.${String(rx.getMilliseconds()).padStart(3, "0")}` : "";
  const li = el(
    "li",
    { "data-frame": f.frame, "data-key": key, class: f.resent ? "resent" : null },
    el("time", { text: time }),
    el("span", { class: "t", text: f.frame }),
    el("span", { class: "line", text: f.line }),
  );
  // in (boot, seq) order: a frame resent after a gap goes to its place
  let before = null;
  if (!fromStream || f.resent) {
    for (const other of log.children) {
      const [b, s] = other.dataset.key.split(".").map(Number);
      if (b > f.boot || (b === f.boot && s > f.seq)) {
        before = other;
        break;
      }
    }
  }
  log.insertBefore(li, before);
  while (log.children.length > LOG_MAX) {
    logKeys.delete(log.firstElementChild.dataset.key);
    log.firstElementChild.remove();
  }
}

function scrollLog() {
  const log = $("log");
  if (log.scrollHeight - log.scrollTop - log.clientHeight < 80 || log.dataset.pinned !== "no") {
    log.scrollTop = log.scrollHeight;
  }
}
$("log").addEventListener("scroll", () => {
  const log = $("log");
  log.dataset.pinned = log.scrollHeight - log.scrollTop - log.clientHeight < 80 ? "yes" : "no";
});
