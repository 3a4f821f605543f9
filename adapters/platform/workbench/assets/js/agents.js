// The agents as Studio discovers them: /.well-known/agents.json, each Agent Card (its
// supervaizer.v2 registration) and the agent info route, checked by the workbench's validator.

// pathOf keeps the path of a URL the controller published: its public URL may name another host
// than the one the browser uses (127.0.0.1 or localhost), and the page may only reach its own.
export function pathOf(u) {
  try { return new URL(u, location.origin).pathname; } catch (e) { return u; }
}

export class Agents {
  constructor(client) {
    this.client = client;
    this.list = null; // [{entry, card, info, registration, report, error}]
    this.loading = null;
  }

  // all returns the agents, loading them once (reload forces a new discovery).
  async all(reload) {
    if (this.list && !reload) return this.list;
    if (!this.loading || reload) this.loading = this.discover().finally(() => { this.loading = null; });
    return this.loading;
  }

  async discover() {
    const found = await this.client.get('/.well-known/agents.json');
    if (found.error) throw new Error('Discovery failed: ' + found.error);
    const out = [];
    for (const entry of found.body.agents || []) out.push(await this.describe(entry));
    this.list = out;
    return out;
  }

  async describe(entry) {
    const a = {entry, card: null, info: null, registration: null, report: null, errors: []};
    const card = await this.client.get(pathOf(entry.agent_card_url));
    if (card.error) a.errors.push('Agent Card: ' + card.error);
    else a.card = card.body;
    const infoURL = a.card && a.card.api_endpoints && a.card.api_endpoints[0] && a.card.api_endpoints[0].url;
    if (infoURL) {
      const info = await this.client.get(pathOf(infoURL), true);
      if (info.error) a.errors.push('Agent info: ' + info.error);
      else a.info = info.body;
    }
    a.registration = (a.info && a.info.supervaizer_v2) || (a.card && a.card.supervaizer && a.card.supervaizer.v2) || null;
    a.slug = (a.registration && a.registration.agent && a.registration.agent.slug) || (a.info && a.info.slug) || entry.name;
    a.report = await validate(a.info, a.card);
    return a;
  }

  async bySlug(slug) {
    const list = await this.all();
    return list.find((a) => a.slug === slug) || null;
  }
}

// validate asks the workbench to check the registration as received (package contract's rules).
async function validate(info, card) {
  try {
    const resp = await fetch('/manage/api/validate', {
      method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({info, card}),
    });
    const body = await resp.json();
    if (!resp.ok) return {valid: false, problems: [{source: 'workbench', path: '', message: body.detail || String(resp.status)}]};
    return body;
  } catch (e) {
    return {valid: false, problems: [{source: 'workbench', path: '', message: e.message}]};
  }
}

// surfaces returns the surface ids the registration declares, with their display texts.
export function surfaces(reg) {
  const caps = (reg && reg.capabilities) || {};
  const defs = Object.fromEntries((caps.surface_definitions || []).map((d) => [d.id, d]));
  return (caps.surfaces || []).map((id) => Object.assign({id}, defs[id] || {}));
}

// actions returns the action definitions the registration declares (plain ids become the
// reference's default: mutating, job scope).
export function actions(reg) {
  const caps = (reg && reg.capabilities) || {};
  return (caps.actions || []).map((a) => (typeof a === 'string' ? {id: a, mutating: true, scope: 'job'} : a));
}
