// The chef de table's console: open, « les trois derniers coups », close (forced, with a
// reason), recall; an engineer may also set a threshold, after a confirmation. Every order
// goes through the service's API (the routes `rmc table` uses): the service signs it, sends
// it to the table and keeps it with the operator's name and the table's answer. Faults,
// tamper, broken rules and orders show as they happen (the API's event stream).

import { api, clock, debounce, el, q, reason, table, token } from "./api.js";
import { STATES, leadWords, words, zeroClass } from "./events.js";
import { login, roleWord } from "./login.js";
import { follow } from "./sse.js";

const $ = (id) => document.getElementById(id);
const VERB_WORDS = {
  open: "Ouverture",
  last3: "« Les trois derniers coups »",
  close: "Fermeture",
  recall: "Rappel",
  set: "Réglage du seuil",
  status: "État",
};
const JOURNAL_KINDS = new Set([
  "fault", "tamper", "alert", "violation", "rejected", "forced_close", "void", "incident",
  "setting", "last3", "session_open", "session_close", "integrity",
]);

// what the tests read
const probe = { answers: [], journal: [] };
window.rmcConsole = probe;

let op = null;
let colours = new Map();
const seenAt = new Map(); // journal key -> when it came live
const live = [];

const session = login({
  form: $("login"),
  message: $("login-msg"),
  app: $("app"),
  roles: ["chef", "engineer"],
  what: "la console",
  onIn: start,
});

$("table-id").textContent = table;
$("logout").addEventListener("click", () => session.logout());

async function start(who) {
  op = who;
  $("who").textContent = `${who.name} — ${roleWord(who.role)}`;
  $("logout").hidden = false;
  if (!$("chef").value) $("chef").value = who.name;
  $("thresholds").hidden = who.role !== "engineer";
  const wheel = await api("/api/wheel", { auth: false });
  if (wheel.ok) colours = new Map(wheel.data.pockets.map((p) => [p.result, p.colour]));
  follow(`/api/events?table=${q(table)}`, {
    token: token.get(),
    onEvent,
    onOpen: () => {
      refresh();
      loadJournal();
      if (op.role === "engineer") loadThresholds();
    },
    onState: (s) => {
      $("live").dataset.state = s;
      $("live").textContent = s === "live" ? "en direct" : "reconnexion…";
    },
    onAuth: () => session.refused(),
  });
}

// --- the table's state ---

function fact(dl, name, value, cls) {
  dl.append(el("dt", { text: name }), el("dd", { class: cls, text: value }));
}

async function refresh() {
  const [info, disp, sess] = await Promise.all([
    api(`/api/tables/${q(table)}`),
    api(`/api/display/${q(table)}`, { auth: false }),
    api(`/api/tables/${q(table)}/sessions?last=1`),
  ]);
  if (info.status === 401) return session.refused();
  if (!info.ok) return;
  const t = info.data;
  const link = t.link ?? {};
  const dl = $("facts");
  dl.replaceChildren();
  fact(dl, "Liaison", link.connected ? (link.silent ? "muette" : "connectée") : `coupée${link.error ? ` (${link.error})` : ""}`,
    link.connected && !link.silent ? "ok" : "ko");
  fact(dl, "État", STATES[t.state] ?? t.state ?? "—");
  fact(dl, "Coup (spin)", t.spin ?? "—");
  const s = sess.ok ? sess.data.sessions[0] : null;
  if (t.session !== null && t.session !== undefined) {
    fact(dl, "Session", `n° ${t.session}, ouverte par ${s?.chef ?? "?"} à ${clock(s?.opened_us)}`);
    if (disp.ok && disp.data.session?.coups !== null) fact(dl, "Coups joués", disp.data.session?.coups ?? 0);
  } else {
    fact(dl, "Session", s ? `aucune ouverte (dernière : n° ${s.session}, ${s.reason ? `fermeture forcée : ${s.reason}` : "fermée"})` : "aucune");
  }
  fact(dl, "Couvercle", t.lid === "1" ? "verrouillé" : t.lid === "0" ? "ouvert" : "—");
  const faults = t.active_faults ?? [];
  fact(dl, "Défauts actifs", faults.length ? faults.join(", ") : "aucun", faults.length ? "ko" : "ok");
  const lead = disp.ok ? disp.data.lead : null;
  if (lead) fact(dl, "Rien ne va plus", leadWords(lead), "lead");
  const l3 = disp.ok ? disp.data.last3 : null;
  $("last3-line").hidden = !l3;
  if (l3) {
    $("last3-line").textContent =
      `« Les trois derniers coups » annoncés : dernier coup n° ${l3.last} de la session, ` +
      (l3.left ? `encore ${l3.left}.` : "tous joués.");
  }
}
// an event reaches the stream a little before the database holds it: read again soon, and
// once more a little later
const refreshNow = debounce(refresh, 200);
const refreshLate = debounce(refresh, 1700);
const refreshSoon = () => {
  refreshNow();
  refreshLate();
};

// --- orders ---

const buttons = ["do-open", "do-last3", "do-close", "do-recall", "do-set"];

async function order(verb, args) {
  const words = VERB_WORDS[verb] ?? verb;
  const answer = $("answer");
  answer.className = "message";
  answer.textContent = `${words} : envoyé à la table…`;
  for (const b of buttons) $(b).disabled = true;
  const res = await api(`/api/tables/${q(table)}/commands/${verb}`, { method: "POST", body: args });
  for (const b of buttons) $(b).disabled = false;
  if (res.status === 401) {
    session.refused();
    return res;
  }
  let ok = false;
  let text;
  if (res.ok) {
    ok = !!res.data.ok;
    text = ok ? `${words} : fait.` : `${words} : refusé par la table (${res.data.detail || "sans raison"}).`;
  } else {
    text = `${words} : ${reason(res)}.`;
  }
  answer.className = `message ${ok ? "ok" : "ko"}`;
  answer.textContent = text;
  probe.answers.push({ verb, ok, status: res.status, detail: res.data?.detail ?? null, error: res.data?.error ?? null });
  refreshSoon();
  return res;
}

function confirmAsk(text) {
  return new Promise((done) => {
    const box = $("confirm");
    $("confirm-text").textContent = text;
    box.hidden = false;
    $("confirm-yes").focus();
    const end = (v) => {
      box.hidden = true;
      $("confirm-yes").onclick = null;
      $("confirm-no").onclick = null;
      done(v);
    };
    $("confirm-yes").onclick = () => end(true);
    $("confirm-no").onclick = () => end(false);
  });
}

$("do-open").addEventListener("click", () => {
  const chef = $("chef").value.trim();
  if (!chef) {
    $("answer").className = "message ko";
    $("answer").textContent = "Ouverture : le nom du chef de table manque.";
    return;
  }
  order("open", { chef });
});

$("do-last3").addEventListener("click", async () => {
  if (await confirmAsk(`Annoncer « les trois derniers coups » à la table ${table} ? La session finira après trois coups.`))
    order("last3", {});
});

$("do-close").addEventListener("click", async () => {
  const why = $("reason").value.trim();
  const text = why
    ? `Fermeture forcée de la session de la table ${table}, pour : « ${why} » ?`
    : `Fermer la session de la table ${table} ?`;
  if (await confirmAsk(text)) order("close", why ? { reason: why } : {});
});

$("do-recall").addEventListener("click", async () => {
  const n = $("recall-n").value.trim();
  const res = await order("recall", n ? { n } : {});
  const list = $("recall");
  list.replaceChildren();
  const games = res?.ok ? String(res.data.games ?? "") : "";
  for (const g of games.split(";").filter(Boolean).reverse()) {
    const [spin, num] = g.split(":");
    const cls = `chip ${colours.get(num) ?? ""} ${zeroClass(num)}`;
    list.append(el("li", { "data-spin": spin }, el("span", { class: cls, text: num }), `n° ${spin}`));
  }
});

// --- thresholds (engineers) ---

let thresholds = [];
const liveSettings = new Map(); // key -> the newest CFG seen on the stream

// which of the database's value and the stream's is the newer (by the CFG frames' order)
const newer = (a, b) => (a.boot ?? -1) - (b.boot ?? -1) || (a.seq ?? -1) - (b.seq ?? -1);

async function loadThresholds() {
  const res = await api(`/api/tables/${q(table)}/thresholds`);
  if (!res.ok) return;
  thresholds = res.data.thresholds;
  for (const t of thresholds) {
    const live = liveSettings.get(t.key);
    if (live && newer(live, t) > 0) Object.assign(t, live);
  }
  renderThresholds();
}

function renderThresholds() {
  const sel = $("set-key");
  const was = sel.value;
  sel.replaceChildren(...thresholds.map((t) => el("option", { value: t.key, text: t.key })));
  if (was) sel.value = was;
  $("set-table").replaceChildren(
    ...thresholds.map((t) =>
      el("tr", { "data-key": t.key }, el("td", { text: t.key }), el("td", { text: t.default }),
        el("td", { text: `${t.min}–${t.max}` }), el("td", { text: t.value ?? "—" }), el("td", { text: t.by ?? "" })),
    ),
  );
  showRange();
}

function showRange() {
  const t = thresholds.find((x) => x.key === $("set-key").value);
  if (!t) return;
  $("set-value").min = t.min;
  $("set-value").max = t.max;
  $("set-value").placeholder = String(t.value ?? t.default);
  $("set-range").textContent = `de ${t.min} à ${t.max} ; défaut ${t.default}${t.value !== null ? ` ; réglé à ${t.value} par ${t.by}` : ""}`;
}
$("set-key").addEventListener("change", showRange);

$("do-set").addEventListener("click", async () => {
  const key = $("set-key").value;
  const value = $("set-value").value.trim();
  const t = thresholds.find((x) => x.key === key);
  if (!t || !/^\d+$/.test(value) || +value < t.min || +value > t.max) {
    $("answer").className = "message ko";
    $("answer").textContent = `Réglage : ${key} prend un entier de ${t?.min} à ${t?.max}.`;
    return;
  }
  const from = t.value ?? `${t.default} (défaut)`;
  if (await confirmAsk(`Passer le seuil ${key} de ${from} à ${value} sur la table ${table} ?`)) {
    await order("set", { key, value: Number(value) });
    loadThresholds();
  }
});

// --- the journal: what happens, as it happens ---

const keyOf = (kind, boot, seq, data) => `${kind}.${boot}.${seq}.${JSON.stringify(data)}`;
let history = [];

async function loadJournal() {
  const res = await api(`/api/tables/${q(table)}/events?last=80`);
  if (!res.ok) return;
  history = res.data.events
    .filter((e) => JOURNAL_KINDS.has(e.kind))
    .map((e) => ({ key: keyOf(e.kind, e.boot, e.seq, e.data), kind: e.kind, text: words(e.kind, e.data), where: `${e.boot}:${e.seq}` }));
  renderJournal();
}

function renderJournal() {
  const items = [];
  const keys = new Set();
  for (const e of live) {
    keys.add(e.key);
    items.push(e);
  }
  for (const e of history) if (!keys.has(e.key)) items.push({ ...e, at_us: seenAt.get(e.key) });
  $("journal").replaceChildren(
    ...items.slice(0, 150).map((e) =>
      el("li", { class: e.kind, "data-kind": e.kind }, el("time", { text: e.at_us ? clock(e.at_us) : (e.where ?? "") }), el("span", { text: e.text })),
    ),
  );
}

function onEvent(type, ev) {
  if (type === "command") {
    const ok = ev.ok;
    const text = `${ev.by} : ${VERB_WORDS[ev.command] ?? ev.command} → ${
      ev.error ? ev.error : ok ? "fait" : `refusé (${ev.detail || "sans raison"})`
    }`;
    live.unshift({ key: `cmd.${ev.id}`, kind: ok ? "command" : "command ko", text, at_us: ev.at_us });
    probe.journal.push({ type, text });
    renderJournal();
    return;
  }
  if (JOURNAL_KINDS.has(type)) {
    const key = keyOf(type, ev.boot, ev.seq, ev.data);
    if (!seenAt.has(key)) {
      seenAt.set(key, ev.at_us);
      live.unshift({ key, kind: type, text: words(type, ev.data ?? {}), at_us: ev.at_us });
      probe.journal.push({ type, text: live[0].text });
      renderJournal();
    }
  }
  if (["state", "link", "session_open", "session_close", "last3", "result", "setting"].includes(type)) refreshSoon();
  if (type === "setting" && op?.role === "engineer") {
    // the table's CFG frame, as it comes (the database may not hold it yet)
    const live = { value: Number(ev.data?.new), by: ev.data?.by, boot: ev.boot, seq: ev.seq };
    liveSettings.set(ev.data?.key, live);
    const t = thresholds.find((x) => x.key === ev.data?.key);
    if (t && newer(live, t) > 0) {
      Object.assign(t, live);
      renderThresholds();
    }
  }
}
