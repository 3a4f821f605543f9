// The workbench's only way to the controller: its public protocol (discovery, the Agent Card,
// the agent info route, POST /a2a, GET /a2a/events), with the API key and, when trust settings
// are on, a workspace token. Every call is kept in a log of the last MAX_CALLS, each with the
// curl command that repeats it.

const MAX_CALLS = 50;
const KEY_ITEM = 'svz-workbench-api-key';
const TOKEN_ITEM = 'svz-workbench-token';
const GRANT_HEADER = 'X-Supervaize-Workspace-Authorization';

export class Client {
  constructor() {
    this.config = {api_key: null, workspace_authorization: 'bypassed'};
    this.calls = [];
    this.nextCall = 1;
    this.nextRPC = 1;
    this.listeners = new Set();
  }

  // load reads the workbench's settings: the key when it is public knowledge (local-dev), and
  // whether calls need a workspace token.
  async load() {
    const resp = await fetch('/manage/api/config', {cache: 'no-store'});
    if (!resp.ok) throw new Error('GET /manage/api/config answered ' + resp.status);
    this.config = await resp.json();
  }

  // publicKey reports whether the key is public knowledge, so it may be shown in curl commands.
  get publicKey() { return typeof this.config.api_key === 'string' && this.config.api_key !== ''; }

  get apiKey() { return this.publicKey ? this.config.api_key : sessionStorage.getItem(KEY_ITEM) || ''; }

  get token() { return sessionStorage.getItem(TOKEN_ITEM) || ''; }

  get needsToken() { return this.config.workspace_authorization === 'token'; }

  // missing says what the user must still give, or '' when calls can be made.
  missing() {
    if (!this.apiKey) return 'the API key (SUPERVAIZER_API_KEY, fingerprint ' + (this.config.api_key_fingerprint || '?') + ')';
    if (this.needsToken && !this.token) return 'a workspace token (svz dev token)';
    return '';
  }

  setCredentials(key, token) {
    if (!this.publicKey && key !== undefined) sessionStorage.setItem(KEY_ITEM, key);
    if (token !== undefined) sessionStorage.setItem(TOKEN_ITEM, token);
  }

  // headers are the authentication headers of every protected call.
  headers() {
    const hd = {'X-API-Key': this.apiKey};
    if (this.token) hd[GRANT_HEADER] = /^bearer /i.test(this.token) ? this.token : 'Bearer ' + this.token;
    return hd;
  }

  onCall(fn) { this.listeners.add(fn); }

  // get fetches a JSON document; auth adds the key (the agent info route needs it).
  async get(path, auth) {
    return this.send('GET', path, auth ? this.headers() : {}, undefined);
  }

  // rpc calls a JSON-RPC method on /a2a and returns {status, body, error}: body is the parsed
  // answer; error is set for a transport problem (no JSON, HTTP status other than 200).
  async rpc(method, params) {
    const envelope = {jsonrpc: '2.0', id: this.nextRPC++, method, params};
    const hd = Object.assign({'Content-Type': 'application/json'}, this.headers());
    return this.send('POST', '/a2a', hd, JSON.stringify(envelope));
  }

  async send(method, path, headers, body) {
    const call = {
      n: this.nextCall++, at: new Date(), method, url: location.origin + path, path,
      headers, body, status: 0, response: '', ms: 0, error: '',
    };
    const began = performance.now();
    let parsed;
    try {
      const resp = await fetch(path, {method, headers, body, cache: 'no-store'});
      call.status = resp.status;
      call.contentType = resp.headers.get('Content-Type') || '';
      call.replayed = resp.headers.get('Idempotent-Replayed') === 'true';
      call.response = await resp.text();
      try { parsed = JSON.parse(call.response); } catch (e) { call.error = 'The answer is not JSON'; }
      if (!call.error && !resp.ok) call.error = 'HTTP ' + resp.status + describeDetail(parsed);
    } catch (e) {
      call.error = 'The controller did not answer: ' + e.message;
    }
    call.ms = Math.round(performance.now() - began);
    this.remember(call);
    return {status: call.status, body: parsed, error: call.error, call};
  }

  remember(call) {
    this.calls.unshift(call);
    if (this.calls.length > MAX_CALLS) this.calls.length = MAX_CALLS;
    for (const fn of this.listeners) fn(call);
  }

  // curl is the shell command that repeats call. A key that is not public knowledge, and the
  // token, are read from the shell's environment, never written out.
  curl(call) {
    const parts = ['curl -s', shellQuote(call.url)];
    if (call.method !== 'GET' && !(call.method === 'POST' && call.body !== undefined)) parts.push('-X ' + call.method);
    for (const [k, v] of Object.entries(call.headers)) {
      if (k === 'X-API-Key' && !this.publicKey) parts.push('-H "X-API-Key: $SUPERVAIZER_API_KEY"');
      else if (k === GRANT_HEADER) parts.push('-H "' + GRANT_HEADER + ': Bearer $TOKEN"');
      else parts.push('-H ' + shellQuote(k + ': ' + v));
    }
    if (call.body !== undefined) parts.push('-d ' + shellQuote(call.body));
    return parts.join(' \\\n  ');
  }
}

function describeDetail(body) {
  if (body && typeof body.detail === 'string') return ': ' + body.detail;
  return '';
}

// shellQuote quotes s for a POSIX shell.
export function shellQuote(s) {
  return "'" + String(s).replace(/'/g, "'\\''") + "'";
}

// newID returns a random id with a prefix, e.g. wb-req-1f3a...
export function newID(prefix) {
  const b = new Uint8Array(8);
  crypto.getRandomValues(b);
  return prefix + '-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// baseRequest is the part of every v2 request that names the caller: the workbench acts as a
// local user in the workspace "local", as the banner's curl commands do.
export function baseRequest(agentSlug, surface, ids) {
  const req = {
    request_id: newID('wb-req'),
    actor: {user_id: 'workbench'},
    workspace: {id: 'local'},
    mission_id: ids.mission_id || 'local-mission',
    agent_slug: agentSlug,
    surface,
  };
  for (const k of ['job_id', 'case_id', 'step_id', 'draft_session_id']) {
    if (ids[k]) req[k] = ids[k];
  }
  return req;
}
