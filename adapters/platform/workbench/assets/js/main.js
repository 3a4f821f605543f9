// The workbench's entry: it reads the settings, asks for the key when it is a secret, opens the
// effect stream (so effects are kept whatever the page shown) and shows the page the location
// hash names: #/agents, #/surface, #/action, #/events, #/calls or #/jobs (shown when an agent
// defines background work).

import {Client} from './client.js';
import {Agents} from './agents.js';
import {EventStream} from './stream.js';
import {clear, h} from './dom.js';
import {agentsPage} from './pages/agents.js';
import {surfacePage} from './pages/surface.js';
import {actionPage} from './pages/action.js';
import {eventsPage} from './pages/events.js';
import {callsPage} from './pages/calls.js';
import {jobsPage} from './pages/jobs.js';

const pages = {agents: agentsPage, surface: surfacePage, action: actionPage, events: eventsPage, calls: callsPage, jobs: jobsPage};

const app = {
  client: new Client(),
  shared: {}, // what one page hands to another (the surface's form values for the action page)
};
app.agents = new Agents(app.client);
app.stream = new EventStream(app.client);

async function boot() {
  const root = document.getElementById('page');
  try {
    await app.client.load();
  } catch (e) {
    clear(root, h('p', {class: 'error-box'}, 'The workbench cannot read its settings: ' + e.message));
    return;
  }
  credentials();
  document.getElementById('nav-jobs').hidden = !app.client.config.jobs;
  app.client.onCall(() => { document.getElementById('calls-count').textContent = String(app.client.calls.length); });
  app.stream.on((what) => {
    const s = document.getElementById('stream-status');
    s.textContent = 'events: ' + app.stream.state;
    s.title = app.stream.detail || 'The effect stream, GET /a2a/events';
    s.className = 'stream ' + app.stream.state;
    s.dataset.connections = String(app.stream.connections);
    if (what.event || what.cleared) document.getElementById('events-count').textContent = String(app.stream.events.length);
  });
  app.stream.start();
  window.addEventListener('hashchange', route);
  route();
}

// credentials shows the key form when the key is a secret (or a token is needed) and not given.
function credentials() {
  const c = app.client;
  const box = document.getElementById('credentials');
  const needKey = !c.publicKey;
  box.hidden = !needKey && !c.needsToken;
  document.getElementById('api-key').closest('label').hidden = !needKey;
  document.getElementById('key-hint').textContent = needKey ? '(SUPERVAIZER_API_KEY, fingerprint ' + (c.config.api_key_fingerprint || '?') + ')' : '';
  document.getElementById('token-label').hidden = !c.needsToken;
  const notice = document.getElementById('notice');
  if (c.config.workspace_authorization === 'refused') {
    notice.hidden = false;
    notice.textContent = 'Every /a2a call is refused (workspace_authorization_not_configured): SUPERVAIZE_API_KEY connects this controller to Studio, which requires token verification. See the local-mode banner.';
  }
  document.getElementById('credentials-form').addEventListener('submit', (e) => {
    e.preventDefault();
    c.setCredentials(needKey ? document.getElementById('api-key').value : undefined,
      c.needsToken ? document.getElementById('workspace-token').value : undefined);
    app.agents.list = null; // discovered again with the new credentials
    app.stream.reconnect();
    route();
  });
}

function route() {
  const name = (location.hash.replace(/^#\/?/, '').split('?')[0]) || 'agents';
  const page = pages[name] || pages.agents;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('current', a.dataset.page === name);
  const root = document.getElementById('page');
  if (app.leave) app.leave();
  app.leave = null;
  clear(root);
  root.dataset.page = name;
  Promise.resolve(page(root, app)).catch((e) => {
    root.append(h('p', {class: 'error-box'}, 'This page failed: ' + e.message));
  });
}

boot();
