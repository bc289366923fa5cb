// A live event stream (Server-Sent Events) read with fetch(): unlike EventSource it can send
// the operator's token in a header, and it is ours to reconnect. After every (re)connection
// `onOpen` runs: the page then reads what it may have missed from the API, since the stream
// only carries what happens while it is open (a service restarted starts a new one).

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 3000;
// the service sends a comment every 15 s: this long without a byte, the connection is dead
// even if no error came (a cable pulled, a laptop asleep)
const SILENCE_MS = 40000;

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

function parse(block) {
  let type = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // a comment: the service's ping
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  try {
    return { type, data: JSON.parse(data.join("\n")) };
  } catch {
    return null;
  }
}

/**
 * Follow `url`'s events until stop() is called.
 * onEvent(type, data) for each event; onOpen() once connected (catch up then);
 * onState("live" | "down"); onAuth(status) when the token is refused (the stream stops).
 */
export function follow(url, { token = null, onEvent, onOpen, onState, onAuth } = {}) {
  let stopped = false;
  let ctrl = null;
  let delay = FIRST_DELAY_MS;

  async function once() {
    ctrl = new AbortController();
    let timer = null;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => ctrl.abort(), SILENCE_MS);
    };
    try {
      const headers = { Accept: "text/event-stream" };
      if (token) headers.Authorization = `Bearer ${token}`;
      const resp = await fetch(url, { headers, signal: ctrl.signal, cache: "no-store" });
      if (resp.status === 401 || resp.status === 403) {
        stopped = true;
        onAuth?.(resp.status);
        return;
      }
      if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
      arm();
      delay = FIRST_DELAY_MS;
      onState?.("live");
      onOpen?.();
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buf += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const ev = parse(buf.slice(0, cut));
          buf = buf.slice(cut + 2);
          if (ev) {
            try {
              onEvent?.(ev.type, ev.data);
            } catch (e) {
              console.error(e); // a page's bug must not cut the stream
            }
          }
        }
      }
    } catch {
      // lost: the loop below tries again
    } finally {
      clearTimeout(timer);
    }
  }

  (async () => {
    while (!stopped) {
      await once();
      if (stopped) break;
      onState?.("down");
      await sleep(delay);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  })();

  return {
    stop() {
      stopped = true;
      ctrl?.abort();
    },
  };
}
