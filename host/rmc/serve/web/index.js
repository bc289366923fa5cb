import { api, el, q, reason } from "./api.js";

const res = await api("/api/display", { auth: false });
const body = document.querySelector("#tables tbody");
if (!res.ok) document.getElementById("msg").textContent = `Tables illisibles : ${reason(res)}`;
else
  for (const t of res.data.tables) {
    const link = (kind, words) => el("td", {}, el("a", { href: `/${kind}/${q(t)}` }, words));
    body.append(
      el("tr", {}, el("td", { text: t }), link("display", "résultats"), link("console", "console"), link("engineer", "vue ingénieur")),
    );
  }
