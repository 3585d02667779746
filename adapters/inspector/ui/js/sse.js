// Reads an SSE stream with fetch and a ReadableStream instead of
// EventSource, because EventSource cannot send the Authorization header a
// daemon started with --token requires. Reconnects resume after the last
// event id (Last-Event-ID), as the daemon replays from its buffer.

import { request } from "./api.js";

// parse reads SSE frames from a fetch Response and calls onEvent({id, event,
// data}) for each one that has data. Comments (heartbeats) are skipped.
export async function parse(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let ev = { id: null, event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let start = 0;
    let nl;
    while ((nl = buf.indexOf("\n", start)) >= 0) {
      let line = buf.slice(start, nl);
      start = nl + 1;
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line === "") {
        if (ev.data.length) onEvent({ id: ev.id, event: ev.event, data: ev.data.join("\n") });
        ev = { id: null, event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") ev.data.push(val);
      else if (field === "id") ev.id = val;
      else if (field === "event") ev.event = val;
    }
    buf = buf.slice(start);
  }
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});

// Stream follows GET path, reconnecting with Last-Event-ID until stopped or
// until the daemon answers 404 (the instance is gone). onState(state, err)
// gets "connecting", "live", "reconnecting", "gone" or "stopped".
export class Stream {
  constructor(path, { onEvent, onState }) {
    this.path = path;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.lastEventId = 0;
    this.stopped = false;
    this.ctrl = null;
    this.wake = null;
  }

  start() {
    this.loop();
    return this;
  }

  async loop() {
    let backoff = 250;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      const headers = { Accept: "text/event-stream" };
      if (this.lastEventId > 0) headers["Last-Event-ID"] = String(this.lastEventId);
      this.onState("connecting");
      try {
        const res = await request("GET", this.path, { headers, signal: this.ctrl.signal });
        backoff = 250;
        this.onState("live");
        await parse(res, (ev) => {
          if (ev.id !== null && ev.id !== "") {
            const seq = Number(ev.id);
            if (seq <= this.lastEventId) return; // already seen
            this.lastEventId = seq;
          }
          // A handler that throws must not end the stream: the events
          // after it in the same read would be lost.
          try { this.onEvent(ev); } catch (err) { console.error("inspector: event handler failed:", err); }
        });
      } catch (e) {
        if (this.stopped) break;
        if (e.status === 404) {
          this.stopped = true;
          this.onState("gone", e);
          return;
        }
        if (e.name !== "AbortError") this.onState("reconnecting", e);
      }
      if (this.stopped) break;
      this.onState("reconnecting");
      if (this.now) {
        this.now = false;
        continue;
      }
      this.wake = new AbortController();
      await sleep(backoff, this.wake.signal);
      backoff = Math.min(backoff * 2, 5000);
    }
    this.onState("stopped");
  }

  // reconnect drops the connection and opens a new one at once, resuming
  // after the last event seen.
  reconnect() {
    this.now = true;
    this.ctrl?.abort();
    this.wake?.abort();
  }

  stop() {
    this.stopped = true;
    this.ctrl?.abort();
    this.wake?.abort();
  }
}
