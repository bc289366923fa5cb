// The table's findings (the service's derived events) in the operators' words.

export function words(kind, d = {}) {
  switch (kind) {
    case "fault":
      return `Défaut ${d.code} ${d.on === "1" ? "levé" : "effacé"}${d.detail && d.detail !== "-" ? ` (${d.detail})` : ""}`;
    case "tamper":
      return `Effraction : ${d.what}${d.n ? ` (${d.n})` : ""}`;
    case "alert":
      return `Alerte : ${d.what}${d.detail ? ` — ${d.detail}` : ""}`;
    case "violation":
      return `Règle enfreinte : ${d.rule}${d.detail ? ` — ${d.detail}` : ""}`;
    case "rejected":
      return `Résultat refusé : coup ${d.spin}, ${d.result} (${(d.rules ?? []).join(", ")})`;
    case "forced_close":
      return `Fermeture forcée : ${d.reason}`;
    case "void":
      return `Coup ${d.spin} annulé : ${d.reason}`;
    case "incident":
      return `Incident, coup ${d.spin} : ${d.step}${d.num ? ` (${d.num})` : ""}`;
    case "setting":
      return `Seuil ${d.key} : ${d.old} → ${d.new} (par ${d.by}${d.role ? `, ${d.role}` : ""})`;
    case "last3":
      return `« Les trois derniers coups » : dernier coup n° ${d.last}, encore ${d.left}`;
    case "session_open":
      return `Session ${d.session} ouverte par ${d.chef}`;
    case "integrity":
      return `Intégrité de la roue : alarme du suivi (${d.detector}, après ${d.results} résultats)`;
    case "session_close":
      return `Session ${d.session} fermée, ${d.spins} coups${d.reason ? `, raison : ${d.reason}` : ""}`;
    default:
      return kind;
  }
}

export const zeroClass = (result) => ({ 0: "z0", "00": "z00", CMC: "zcmc" })[result] ?? "";

export const STATES = {
  closed: "fermée (couvercle)",
  open: "session ouverte, cylindre au repos",
  bets: "faites vos jeux",
  track: "bille lancée, jeux ouverts",
  rnvp: "rien ne va plus",
  dropped: "bille tombée",
  result: "résultat annoncé",
  incident: "incident (objet dans le cylindre)",
};

/** The lead in force (rmcfw.lead): « 1 s avant la chute, plus 0 à 0,5 s au hasard ». */
export function leadWords(l) {
  const sec = (ms) => (ms / 1000).toLocaleString("fr-FR", { maximumFractionDigits: 3 });
  const lead = l.unit === "revs" ? `${l.lead_revs} tour${l.lead_revs > 1 ? "s" : ""}` : `${sec(l.lead_ms)} s`;
  return `${lead} avant la chute${l.window_ms ? `, plus 0 à ${sec(l.window_ms)} s au hasard` : ""}`;
}

/** Who set the lead's keys, from the CFG frames: « lead_ms par paul (engineer) ». */
export function leadSetBy(l) {
  return Object.entries(l.set ?? {})
    .map(([k, x]) => `${k} = ${x.value} par ${x.by ?? "?"}${x.role ? ` (${x.role})` : ""}`)
    .join(" ; ");
}
