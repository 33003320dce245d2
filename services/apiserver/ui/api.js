// How the page talks to the apiserver: the user's credentials on every call, and the
// list-then-watch loop every kubelite component runs (client/reflector.py), in the browser.
//
// A ListWatch lists a collection (resourceVersion=0 first: the watch cache answers), then
// watches from the list's resourceVersion (?watch=1: one JSON event per line of a chunked
// response), resumes from the last resourceVersion it saw when the stream ends, re-lists when
// the apiserver answers 410 Expired, and backs off (0.8 s doubling to 30 s, jittered) when a
// request fails. It hands objects to its handlers as they arrive; drawing them is not its job.

const TOKEN_KEY = "kubelite.dashboard.token";

/** The bearer token a person pasted (kept for this tab only), or "". */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }

  /** The Status body's message when the answer has one, else the HTTP status line. */
  static async from(resp) {
    let message = `${resp.status} ${resp.statusText}`;
    try {
      const body = await resp.json();
      if (body && body.message) message = body.message;
    } catch {
      // not JSON: the status line says enough
    }
    return new ApiError(resp.status, message);
  }
}

export async function request(path, { signal, accept = "application/json" } = {}) {
  const headers = { Accept: accept };
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const resp = await fetch(path, { headers, signal, credentials: "same-origin", cache: "no-store" });
  if (!resp.ok) throw await ApiError.from(resp);
  return resp;
}

export async function getJSON(path, options) {
  return (await request(path, options)).json();
}

export async function getText(path, options) {
  return (await request(path, { ...options, accept: "text/plain" })).text();
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

const FIRST_DELAY_MS = 800;
const MAX_DELAY_MS = 30_000;

export class ListWatch {
  /**
   * @param {string} path a collection, e.g. "/api/v1/pods"
   * @param {{reset(items: object[]): void, event(type: string, obj: object): void,
   *          status(text: string, ok: boolean): void}} handlers
   */
  constructor(path, handlers) {
    this.path = path;
    this.handlers = handlers;
    this.controller = null;
  }

  start() {
    this.controller = new AbortController();
    this.#run(this.controller.signal);
  }

  stop() {
    this.controller?.abort();
  }

  async #run(signal) {
    let delay = FIRST_DELAY_MS;
    let resourceVersion = "0"; // the first list may come from the watch cache
    let listed = false;
    while (!signal.aborted) {
      try {
        if (!listed) {
          const list = await getJSON(`${this.path}?resourceVersion=${resourceVersion}`, { signal });
          resourceVersion = list.metadata.resourceVersion;
          this.handlers.reset(list.items || []);
          listed = true;
        }
        resourceVersion = await this.#watch(resourceVersion, signal);
        delay = FIRST_DELAY_MS;
      } catch (err) {
        if (signal.aborted) return;
        if (err.status === 410) {
          this.handlers.status("resourceVersion expired: listing again", false);
          resourceVersion = "";
          listed = false;
          continue;
        }
        const wait = delay * (0.5 + Math.random());
        this.handlers.status(`${err.message}; retrying in ${(wait / 1000).toFixed(1)}s`, false);
        await pause(wait, signal);
        delay = Math.min(delay * 2, MAX_DELAY_MS);
      }
    }
  }

  /** Watch from resourceVersion until the stream ends; return the last resourceVersion seen. */
  async #watch(resourceVersion, signal) {
    const timeout = 300 + Math.floor(Math.random() * 300); // spread re-watches, as client-go does
    const url =
      `${this.path}?watch=1&allowWatchBookmarks=true` +
      `&resourceVersion=${resourceVersion}&timeoutSeconds=${timeout}`;
    const resp = await request(url, { signal });
    this.handlers.status("watching", true);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return resourceVersion;
      buffer += value;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (!line.trim()) continue;
        const event = JSON.parse(line);
        if (event.type === "ERROR") {
          throw new ApiError(event.object.code || 500, event.object.message || "watch error");
        }
        resourceVersion = event.object.metadata.resourceVersion;
        if (event.type !== "BOOKMARK") this.handlers.event(event.type, event.object);
      }
    }
  }
}
