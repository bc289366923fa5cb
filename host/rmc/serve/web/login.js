// The operator's login for the console and the engineer's view: the token the service was
// configured with (docs/serve.md), checked by /api/whoami and kept in this tab's
// sessionStorage. A token the service does not know is refused (and is on its audit log);
// a display's token is refused here too: it may read, not operate.

import { api, reason, token } from "./api.js";

const ROLE_WORDS = { display: "écran", chef: "chef de table", engineer: "ingénieur" };
export const roleWord = (role) => ROLE_WORDS[role] ?? role;

/**
 * Show the form until a token of one of `roles` is given; then onIn({name, role}).
 * form: the <form>; its <input name="token">; message: where a refusal is said.
 */
export function login({ form, message, app, roles, onIn, what }) {
  const input = form.querySelector("input[name=token]");

  function out(text) {
    app.hidden = true;
    form.hidden = false;
    message.textContent = text ?? "";
    input.value = "";
    input.focus();
  }

  async function check(tok, fromStorage) {
    const res = await api("/api/whoami", { tok });
    if (res.status === 401) {
      token.clear();
      return out(fromStorage ? "" : "Jeton refusé : il n'est celui d'aucun opérateur.");
    }
    if (!res.ok) return out(`Connexion impossible : ${reason(res)}.`);
    const op = res.data;
    if (!roles.includes(op.role)) {
      token.clear();
      return out(
        `Refusé : ${op.name} est ${roleWord(op.role)} ; ${what} demande ` +
          roles.map(roleWord).join(" ou ") +
          ".",
      );
    }
    token.set(tok);
    form.hidden = true;
    app.hidden = false;
    message.textContent = "";
    onIn(op);
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const tok = input.value.trim();
    if (!tok) return out("Donnez votre jeton.");
    message.textContent = "Vérification…";
    check(tok, false);
  });

  const kept = token.get();
  if (kept) check(kept, true);
  else out("");

  return {
    logout() {
      token.clear();
      location.reload();
    },
    refused() {
      token.clear();
      out("Session expirée ou jeton retiré : reconnectez-vous.");
    },
  };
}
