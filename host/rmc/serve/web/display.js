// The players' results display: the last results as a casino marquee, the table's state,
// the announcement of the result, « les trois derniers coups » and the session's figures.
// It follows the service's public event stream and, after every (re)connection, reads the
// whole picture again from the API: a result that came while it was cut off is shown too.
// Nothing here decides anything: announcements and figures come from the service.

import { api, el, q, table } from "./api.js";
import { follow } from "./sse.js";

const LANG = new URLSearchParams(location.search).get("lang") === "en" ? "en" : "fr";
const WORDS = {
  fr: {
    table: "Table",
    marquee: "Derniers numéros",
    hot: "Numéros chauds",
    cold: "Numéros froids",
    last3: "Les trois derniers coups",
    session: (n, open) => `Session ${n}${open ? "" : " (fermée)"}`,
    coups: (n) => `${n} coup${n > 1 ? "s" : ""}`,
    figures: (scope, n) =>
      scope === "session" ? `La session en chiffres — ${n} coup${n > 1 ? "s" : ""}` : "Derniers coups",
    left: (n) => (n > 1 ? `encore ${n} coups` : n === 1 ? "dernier coup" : "session terminée"),
    live: "en direct",
    down: "reconnexion…",
    offline: "Connexion perdue — reprise en cours",
    waiting: "En attente de la table",
    zeros: "Zéros",
    none: "—",
    states: {
      closed: "Table fermée",
      open: "Table ouverte",
      bets: "Faites vos jeux",
      track: "Faites vos jeux",
      rnvp: "Rien ne va plus",
      dropped: "Rien ne va plus",
      incident: "Incident : le coup est rejoué",
    },
    void: (why) => `Coup annulé : ${VOIDS.fr[why] ?? why}`,
    lead: (l) =>
      `« Rien ne va plus » ${l.unit === "revs" ? `${l.lead_revs} tour${l.lead_revs > 1 ? "s" : ""}` : `${sec(l.lead_ms)} s`} avant la chute` +
      (l.window_ms ? `, plus 0 à ${sec(l.window_ms)} s au hasard` : ""),
    shareNames: { rouge: "Rouge", noir: "Noir", pair: "Pair", impair: "Impair", manque: "Manque", passe: "Passe" },
  },
  en: {
    table: "Table",
    marquee: "Last numbers",
    hot: "Hot numbers",
    cold: "Cold numbers",
    last3: "Les trois derniers coups — last three spins",
    session: (n, open) => `Session ${n}${open ? "" : " (closed)"}`,
    coups: (n) => `${n} spin${n > 1 ? "s" : ""}`,
    figures: (scope, n) => (scope === "session" ? `This session — ${n} spin${n > 1 ? "s" : ""}` : "Last spins"),
    left: (n) => (n > 1 ? `${n} spins left` : n === 1 ? "last spin" : "session over"),
    live: "live",
    down: "reconnecting…",
    offline: "Connection lost — reconnecting",
    waiting: "Waiting for the table",
    zeros: "Zeros",
    none: "—",
    states: {
      closed: "Table closed",
      open: "Table open",
      bets: "Faites vos jeux — place your bets",
      track: "Faites vos jeux — place your bets",
      rnvp: "Rien ne va plus — no more bets",
      dropped: "Rien ne va plus — no more bets",
      incident: "Incident: the spin is played again",
    },
    void: (why) => `Spin void: ${VOIDS.en[why] ?? why}`,
    lead: (l) =>
      `No more bets ${l.unit === "revs" ? `${l.lead_revs} revolution${l.lead_revs > 1 ? "s" : ""}` : `${sec(l.lead_ms)} s`} before the drop` +
      (l.window_ms ? `, plus 0 to ${sec(l.window_ms)} s at random` : ""),
    shareNames: { rouge: "Red", noir: "Black", pair: "Even", impair: "Odd", manque: "1–18", passe: "19–36" },
  },
};
const VOIDS = {
  fr: {
    same_dir: "bille lancée dans le sens du cylindre",
    not_reversed: "cylindre tourné dans le même sens",
    few_revs: "moins de quatre tours",
    object: "objet dans le cylindre",
    ball_out: "bille sortie du cylindre",
    sensors: "capteurs en désaccord",
    power: "coupure de courant",
  },
  en: {
    same_dir: "ball launched the rotor's way",
    not_reversed: "rotor turned the same way",
    few_revs: "fewer than four revolutions",
    object: "object in the cylinder",
    ball_out: "ball left the wheel",
    sensors: "sensors disagree",
    power: "power cut",
  },
};
const W = WORDS[LANG];
// seconds from milliseconds, in the page's language (« 1,5 s »)
function sec(ms) {
  return (ms / 1000).toLocaleString(LANG === "fr" ? "fr-FR" : "en-GB", { maximumFractionDigits: 3 });
}
const MARQUEE = 20;

// what the tests read: every result with the moment it was drawn, and the stream's states
const probe = { shown: [], conn: [], last3: [], refreshes: 0 };
window.rmcDisplay = probe;

const view = {
  results: new Map(), // "boot.seq" -> result
  snap: null,
  state: null,
  notice: null,
  live: false,
  liveLast3: null, // the last LAST3 of the open session, as the stream gave it
};

const $ = (id) => document.getElementById(id);
const keyOf = (r) => `${r.boot}.${r.seq}`;
const order = (a, b) => b.boot - a.boot || b.seq - a.seq;
const now = () => performance.timeOrigin + performance.now();

/** A result as a chip: its colour, and each of the three zeros a look of its own. */
function chip(result, colour, tag = "span") {
  const zero = { 0: "z0", "00": "z00", CMC: "zcmc" }[result];
  return el(tag, { class: `chip ${colour ?? ""} ${zero ?? ""}`.trim(), "data-result": result }, result);
}

function newest() {
  return [...view.results.values()].sort(order).slice(0, MARQUEE);
}

function renderMarquee() {
  const ol = $("marquee");
  const rows = newest().map((r, i) =>
    el(
      "li",
      { class: `row ${r.colour}${i === 0 ? " newest" : ""}`, "data-key": keyOf(r), "data-spin": r.spin },
      chip(r.result, r.colour),
    ),
  );
  ol.replaceChildren(...rows);
}

function renderNow() {
  const last = newest()[0];
  const st = view.state?.state;
  const big = $("big");
  if (last) {
    const zero = { 0: "z0", "00": "z00", CMC: "zcmc" }[last.result];
    big.className = `big chip ${last.colour} ${zero ?? ""}`.trim();
    big.dataset.result = last.result;
    big.textContent = last.result;
    big.hidden = false;
  } else {
    big.hidden = true;
  }
  const words = $("state-words");
  const ann = $("announcement");
  if (st === "result" && last) {
    words.textContent = last.announcement ?? last.result;
    words.className = "state result";
    ann.textContent = "";
  } else {
    words.textContent = W.states[st] ?? "";
    words.className = `state ${st ?? ""}`;
    ann.textContent = last ? (last.announcement ?? last.result) : "";
  }
  const notice = $("notice");
  notice.hidden = !view.notice;
  notice.textContent = view.notice ?? "";
}

function renderLast3() {
  const box = $("last3");
  const l3 = view.snap?.last3;
  box.hidden = !l3;
  if (l3) $("last3-left").textContent = W.left(l3.left);
}

function renderHeader() {
  $("table-id").textContent = table;
  const s = view.snap?.session;
  const parts = [];
  if (s) parts.push(W.session(s.session, s.open));
  if (s?.coups !== null && s?.coups !== undefined) parts.push(W.coups(s.coups));
  $("session-line").textContent = parts.join(" · ");
  // the lead in force (the table's CFG frames, else its defaults): when bets close
  const lead = view.snap?.lead;
  $("lead-line").textContent = lead ? W.lead(lead) : "";
}

function renderConn() {
  const c = $("conn");
  const tableDown = view.snap && !view.snap.connected; // port closed or table silent
  c.dataset.state = view.live ? (tableDown ? "waiting" : "live") : "down";
  $("conn-words").textContent = view.live ? (tableDown ? W.waiting : W.live) : W.down;
}

function share(title, parts) {
  const total = parts.reduce((s, p) => s + p.n, 0);
  const bar = el("div", { class: "bar3" });
  for (const p of parts) {
    const seg = el("span", { class: `seg ${p.cls}` });
    seg.style.flexGrow = String(total ? p.n : 1);
    if (p.n || !total) bar.append(seg);
  }
  const legend = el("div", { class: "legend" });
  for (const p of parts) {
    legend.append(el("span", { class: `lg ${p.cls}` }, `${p.label} ${Math.round(p.pct)} %`));
  }
  return el("div", { class: "share" }, el("h3", { text: title }), bar, legend);
}

function renderFigures() {
  const f = view.snap?.figures;
  if (!f) return;
  $("figures-title").textContent = W.figures(f.scope, f.coups);
  const hot = f.hot.map((h) => el("li", {}, chip(h.result, h.colour), el("small", { text: `×${h.count}` })));
  $("hot").replaceChildren(...(hot.length ? hot : [el("li", { class: "none", text: W.none })]));
  const cold = f.cold.map((c) => el("li", {}, chip(c.result, c.colour), el("small", { text: `×${c.count}` })));
  $("cold").replaceChildren(...cold);
  const s = f.shares;
  const zeros = (s["0"].pct ?? 0) + (s["00"].pct ?? 0) + (s.CMC.pct ?? 0);
  const zn = s["0"].n + s["00"].n + s.CMC.n;
  const N = W.shareNames;
  const z = { label: W.zeros, n: zn, pct: zeros, cls: "vert" };
  $("shares").replaceChildren(
    share(`${N.rouge} / ${N.noir}`, [
      { label: N.rouge, ...s.rouge, cls: "rouge" },
      z,
      { label: N.noir, ...s.noir, cls: "noir" },
    ]),
    share(`${N.pair} / ${N.impair}`, [
      { label: N.pair, ...s.pair, cls: "pair" },
      z,
      { label: N.impair, ...s.impair, cls: "impair" },
    ]),
    share(`${N.manque} / ${N.passe}`, [
      { label: N.manque, ...s.manque, cls: "manque" },
      z,
      { label: N.passe, ...s.passe, cls: "passe" },
    ]),
    el(
      "div",
      { class: "share zeros" },
      el("h3", { text: W.zeros }),
      el(
        "div",
        { class: "zero-counts" },
        ...["0", "00", "CMC"].map((x) =>
          el("span", { class: "zc" }, chip(x, "vert"), el("small", { text: `×${s[x].n} · ${Math.round(s[x].pct)} %` })),
        ),
      ),
    ),
  );
}

function addResult(r, via) {
  const key = keyOf(r);
  if (view.results.has(key)) return false;
  view.results.set(key, r);
  return via;
}

function renderAll() {
  renderHeader();
  renderMarquee();
  renderNow();
  renderLast3();
  renderFigures();
  renderConn();
}

async function refresh() {
  const res = await api(`/api/display/${q(table)}`, { auth: false });
  if (!res.ok) return;
  const snap = res.data;
  // « les trois derniers coups » heard on the stream but not yet in the database
  if (!snap.last3 && view.liveLast3 && snap.state.session !== null) snap.last3 = view.liveLast3;
  view.snap = snap;
  view.state = snap.state;
  const fresh = [];
  for (const r of snap.results) if (addResult(r, "api")) fresh.push(r);
  // only the newest MARQUEE results are kept
  const keep = new Set(newest().map(keyOf));
  for (const k of [...view.results.keys()]) if (!keep.has(k)) view.results.delete(k);
  if (!["result", "dropped", "rnvp", "incident"].includes(snap.state.state)) view.notice = null;
  renderAll();
  const t = now();
  for (const r of fresh) probe.shown.push({ key: keyOf(r), spin: r.spin, result: r.result, at_us: r.at_us, shown_ms: t, via: "api" });
  if (snap.last3) probe.last3.push({ ...snap.last3, t });
  probe.refreshes += 1;
}

// An event reaches the stream as the service finds it, a little before the database holds
// it: the picture is read again soon, and once more a little later.
let refreshTimer = null;
let lateTimer = null;
const LATE_MS = 1500;
function refreshSoon(ms = 300) {
  clearTimeout(refreshTimer);
  clearTimeout(lateTimer);
  refreshTimer = setTimeout(refresh, ms);
  lateTimer = setTimeout(refresh, ms + LATE_MS);
}

function onEvent(type, ev) {
  switch (type) {
    case "result": {
      if (addResult(ev, "stream")) {
        renderMarquee();
        renderNow();
        const t = now();
        probe.shown.push({ key: keyOf(ev), spin: ev.spin, result: ev.result, at_us: ev.at_us, shown_ms: t, via: "stream" });
      }
      refreshSoon(); // the figures and the coups left
      break;
    }
    case "state":
      view.state = ev;
      if (["bets", "track", "open", "closed"].includes(ev.state)) view.notice = null;
      renderNow();
      break;
    case "void":
      view.notice = W.void(ev.data?.reason);
      renderNow();
      refreshSoon();
      break;
    case "link":
      if (view.snap) view.snap.connected = ev.connected && !ev.silent;
      renderConn();
      break;
    case "last3":
      view.liveLast3 = { last: Number(ev.data?.last), left: Number(ev.data?.left) };
      if (view.snap) {
        view.snap.last3 = view.liveLast3;
        renderLast3();
        probe.last3.push({ ...view.liveLast3, t: now() });
      }
      refreshSoon(100);
      break;
    case "session_open":
    case "session_close":
      view.liveLast3 = null;
      refreshSoon(100);
      break;
    default: // incident
      refreshSoon(100);
  }
}

function setLive(state) {
  view.live = state === "live";
  probe.conn.push({ state, t: now() });
  renderConn();
  clearTimeout(offlineTimer);
  if (view.live) $("offline").hidden = true;
  else offlineTimer = setTimeout(() => {
    $("offline").textContent = W.offline;
    $("offline").hidden = false;
  }, 3000);
}
let offlineTimer = null;

document.documentElement.lang = LANG;
for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = W[node.dataset.i18n];
$("table-id").textContent = table;
renderConn();
follow(`/api/display/${q(table)}/events`, {
  onEvent,
  onOpen: refresh,
  onState: setLive,
});
