// The live effect stream, GET /a2a/events. EventSource cannot send the X-API-Key header, so the
// stream is read with fetch: the text/event-stream format is parsed here, and a dropped stream
// is reopened after a growing delay with Last-Event-ID set to the last id received, so the
// controller replays what was missed (and only that).

const MAX_EVENTS = 500;
const MIN_DELAY = 500;
const MAX_DELAY = 10000;

export class EventStream {
  constructor(client) {
    this.client = client;
    this.events = []; // newest first: {n, at, name, id, data, raw}
    this.n = 0;
    this.lastID = '';
    this.state = 'idle';
    this.detail = '';
    this.connections = 0;
    this.listeners = new Set();
    this.abort = null;
    this.delay = MIN_DELAY;
    this.retry = 0; // the server's retry: field, when it sent one
    this.lastHeartbeat = null;
  }

  on(fn) { this.listeners.add(fn); }

  emit(what) { for (const fn of this.listeners) fn(what); }

  setState(state, detail) {
    this.state = state;
    this.detail = detail || '';
    this.emit({state});
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  // reconnect drops the current connection now; the loop opens a new one.
  reconnect() {
    if (this.abort) this.abort.abort();
  }

  clear() {
    this.events = [];
    this.emit({cleared: true});
  }

  async loop() {
    while (this.running) {
      if (this.client.missing()) {
        this.setState('waiting', 'needs ' + this.client.missing());
        await sleep(1000);
        continue;
      }
      this.abort = new AbortController();
      let failure = '';
      try {
        await this.read(this.abort.signal);
        failure = 'the controller ended the stream';
      } catch (e) {
        failure = e.name === 'AbortError' ? 'the connection was dropped' : e.message;
      }
      const wait = this.retry || this.delay;
      this.setState('reconnecting', failure + '; reconnecting in ' + (wait / 1000).toFixed(1) + ' s' +
        (this.lastID ? ' with Last-Event-ID ' + this.lastID : ''));
      await sleep(wait);
      this.delay = Math.min(this.delay * 2, MAX_DELAY);
    }
  }

  async read(signal) {
    const headers = Object.assign({Accept: 'text/event-stream'}, this.client.headers());
    if (this.lastID) headers['Last-Event-ID'] = this.lastID;
    this.setState('connecting', this.lastID ? 'resuming after ' + this.lastID : '');
    const resp = await fetch('/a2a/events', {headers, signal, cache: 'no-store'});
    if (!resp.ok) {
      let detail = '';
      try { detail = (await resp.json()).detail || ''; } catch (e) { /* not JSON */ }
      throw new Error('GET /a2a/events answered ' + resp.status + (detail ? ': ' + detail : ''));
    }
    this.connections++;
    this.delay = MIN_DELAY;
    this.setState('open', this.lastID ? 'resumed after ' + this.lastID : '');
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = newEvent();
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      // Lines end with \r\n, \n or \r; a blank line dispatches the event.
      let m;
      while ((m = /\r\n|\n|\r/.exec(buf))) {
        if (m[0] === '\r' && m.index === buf.length - 1) break; // maybe the first half of \r\n
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          this.dispatch(ev);
          ev = newEvent();
          continue;
        }
        if (line.startsWith(':')) continue; // a comment (a ping)
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        switch (field) {
          case 'event': ev.name = val; break;
          case 'data': ev.data.push(val); break;
          case 'id': if (!val.includes('\0')) ev.id = val; break;
          case 'retry': if (/^\d+$/.test(val)) this.retry = Number(val); break;
        }
      }
    }
  }

  dispatch(ev) {
    if (ev.id !== null) this.lastID = ev.id;
    if (!ev.data.length) return;
    if (ev.name === 'supervaizer.heartbeat') { // the keepalive: shown in the state, not listed
      this.lastHeartbeat = new Date();
      this.emit({heartbeat: true});
      return;
    }
    const raw = ev.data.join('\n');
    let data;
    try { data = JSON.parse(raw); } catch (e) { data = raw; }
    const item = {n: ++this.n, at: new Date(), name: ev.name || 'message', id: ev.id || '', data, raw};
    this.events.unshift(item);
    if (this.events.length > MAX_EVENTS) this.events.length = MAX_EVENTS;
    this.emit({event: item});
  }
}

function newEvent() { return {name: '', id: null, data: []}; }

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
