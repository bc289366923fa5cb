// The service's HTTP API as the pages call it: the table from the page's address, the
// operator's token kept in this tab's sessionStorage (gone when the tab closes), and the
// answers as { status, ok, data } (status 0: the service could not be reached).

const TOKEN_KEY = "rmc.token";

export const table = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] ?? "");

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export async function api(path, { method = "GET", body, auth = true, tok } = {}) {
  const headers = { Accept: "application/json" };
  const t = tok ?? (auth ? token.get() : null);
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    let data = null;
    try {
      data = await resp.json();
    } catch {
      data = null;
    }
    return { status: resp.status, ok: resp.ok, data };
  } catch {
    return { status: 0, ok: false, data: { detail: "le service ne répond pas" } };
  }
}

export const q = encodeURIComponent;

/** The reason an answer gives, in one line. */
export function reason(res) {
  const d = res.data ?? {};
  let why = d.error || d.detail || ""; // a command's 503/504 says why in `error`
  if (Array.isArray(why)) why = why.map((x) => x.msg ?? String(x)).join("; ");
  return String(why || `HTTP ${res.status}`);
}

/** An element with text (never HTML: what operators and tables send is shown as it is). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  if (text !== undefined) node.textContent = String(text);
  return node;
}

export function clock(us) {
  if (!us) return "—";
  return new Date(us / 1000).toLocaleTimeString("fr-FR", { hour12: false });
}

/** fn at most once every `ms`, the last call winning. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
