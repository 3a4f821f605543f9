// Agents: each agent's registration as Studio sees it — identity, introduction, surfaces,
// actions with their flags, setup plan, resources, datasets, rule checkpoints — and whether it
// passes the registration rules.

import {h, text, section, table, flag, badge, jsonBlock, link, tree} from '../dom.js';
import {surfaces, actions} from '../agents.js';
import {setupPlan, fieldTable} from '../result.js';

export async function agentsPage(root, app) {
  const reload = h('button', {type: 'button', id: 'agents-reload'}, 'Discover again');
  const list = h('div', {id: 'agents'}, h('p', {class: 'hint'}, 'Discovering…'));
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Agents'),
    h('p', {class: 'hint'}, 'From GET /.well-known/agents.json, each Agent Card (supervaizer.v2) and the agent info route.'), reload), list);
  const show = async (again) => {
    list.replaceChildren(h('p', {class: 'hint'}, 'Discovering…'));
    let agents;
    try {
      agents = await app.agents.all(again);
    } catch (e) {
      list.replaceChildren(h('p', {class: 'error-box'}, e.message));
      return;
    }
    list.replaceChildren(...(agents.length ? agents.map(agentCard) : [h('p', {class: 'empty'}, 'The controller serves no agent.')]));
  };
  reload.addEventListener('click', () => show(true));
  await show(false);
}

function agentCard(a) {
  const reg = a.registration || {};
  const info = a.info || {};
  const caps = reg.capabilities || {};
  const report = a.report || {valid: false, problems: []};
  const el = h('article', {class: 'agent', 'data-agent': a.slug},
    h('h2', {}, text(reg.agent && reg.agent.display_name, a.entry.name), ' ',
      h('code', {}, a.slug), ' ', h('span', {class: 'hint'}, 'v' + text(a.entry.version, '?')), ' ',
      report.valid ? badge('ok', 'registration valid', {class: 'badge ok validation', title: 'Checked with the reference SDK\'s rules (package contract)'})
        : badge('error', report.problems.length + ' registration problem(s)', {class: 'badge error validation'})),
    a.errors.length ? h('ul', {class: 'error-box'}, a.errors.map((e) => h('li', {}, e))) : null,
    report.problems.length ? section('Validation', table(['document', 'path', 'problem'],
      report.problems.map((p) => [p.source, h('code', {}, p.path || '(whole)'), p.message]), {class: 'problems'})) : null,
    section('Identity', table(['', ''], [
      ['id', h('code', {}, text(reg.agent && reg.agent.id, text(info.id)))],
      ['slug', h('code', {}, a.slug)],
      ['description', text(info.description, a.entry.description)],
      ['developer', text(a.entry.developer)],
      ['contract version', String(reg.supervaizer_contract_version ?? '?')],
      ['versions', reg.versions ? Object.entries(reg.versions).filter(([k]) => k !== 'extra').map(([k, v]) => k + ' ' + (v ?? 'null')).join(' · ') : '?'],
      ['Agent Card', h('code', {}, text(reg.a2a && reg.a2a.agent_card_url))],
      ['controller', h('code', {}, text(reg.a2a && reg.a2a.controller_url))],
      ['transport', reg.a2a && reg.a2a.transport ? Object.entries(reg.a2a.transport).map(([k, v]) => flag(v, k)) : ''],
    ])),
    introduction(info),
    section('Surfaces', table(['id', 'label', 'description', ''], surfaces(reg).map((s) => [
      h('code', {}, s.id), text(s.label), text(s.description),
      h('a', {href: link('surface', {agent: a.slug, surface: s.id})}, 'Load'),
    ]), {class: 'surfaces'})),
    section('Actions', table(['id', 'label', 'kind', 'scope', 'flags', ''], actions(reg).map((x) => [
      h('code', {}, x.id), text(x.label), text(x.kind, 'command'), text(x.scope, 'job'),
      [flag(x.mutating !== false, 'mutating', 'Changes state on the agent side'), ' ',
        flag(x.dry_run === true, 'dry run', 'A test run: no external communication'),
        x.target_field ? [' ', flag(true, 'target ' + x.target_field)] : null],
      h('a', {href: link('action', {agent: a.slug, action: x.id})}, 'Invoke'),
    ]), {class: 'actions'})),
    jobPolicy(reg.job_policy),
    reg.resources && reg.resources.length ? section('Resources', reg.resources.map((r) => h('div', {class: 'resource'},
      h('h4', {}, text(r.label, r.id), ' ', h('code', {}, r.id), ' ', h('span', {class: 'hint'}, 'scope ' + text(r.scope, 'workspace'))),
      h('p', {}, 'operations: ', (r.operations || []).join(', ') || 'none'),
      r.fields && r.fields.length ? fieldTable(r.fields) : null))) : section('Resources', h('p', {class: 'empty'}, 'None.')),
    section('Datasets', table(['id', 'label', 'scope'], (reg.datasets || []).map((d) => [h('code', {}, d.id), text(d.label), text(d.scope)]))),
    section('Rule checkpoints', caps.rule_checkpoints ? tree(caps.rule_checkpoints) : h('p', {class: 'empty'}, 'None declared.')),
    info.data_resources && info.data_resources.length ? section('Data resources', tree(info.data_resources)) : null,
    info.billing_catalog && info.billing_catalog.length ? section('Billing catalog', table(['sku', 'unit', 'description'],
      info.billing_catalog.map((b) => [h('code', {}, b.sku), text(b.unit), text(b.description)]))) : null,
    h('details', {class: 'raw'}, h('summary', {}, 'The agent info payload as JSON'), jsonBlock(a.info || a.card)));
  return el;
}

function introduction(info) {
  const i = info.introduction;
  const d = info.full_description;
  if (!i && !d) return section('Introduction', h('p', {class: 'empty'}, 'None.'));
  return section('Introduction',
    i ? [h('p', {class: 'tagline'}, text(i.tagline)), h('p', {}, text(i.summary)),
      i.example_goals && i.example_goals.length ? h('ul', {}, i.example_goals.map((g) => h('li', {}, g))) : null] : null,
    d ? h('details', {}, h('summary', {}, 'Full description (' + text(d.format, 'text') + ')'), h('pre', {class: 'description'}, text(d.content))) : null);
}

function jobPolicy(p) {
  if (!p) return null;
  const setup = p.setup;
  return section('Job policy',
    table(['', ''], [
      ['sync action', p.sync ? h('code', {}, text(p.sync.action)) : 'none'],
      ['offline start', text(p.offline_start_policy)],
      ['offline running', text(p.offline_running_policy)],
      ['default timeout', p.default_timeout_seconds ? p.default_timeout_seconds + ' s' : 'none'],
    ]),
    setup ? h('div', {class: 'setup'},
      h('h4', {}, 'Setup'),
      h('p', {}, 'preview ', h('code', {}, text(setup.preview_action, 'job.start.preview')), ' · start ',
        h('code', {}, text(setup.start_action, 'job.start')), ' · submit ', h('code', {}, text(setup.submit_action, 'step.awaiting.submit')),
        setup.action_scopes && setup.action_scopes.length ? ' · scopes ' + setup.action_scopes.join(', ') : ''),
      setup.plan ? setupPlan(setup.plan) : h('p', {class: 'empty'}, 'No plan.')) : h('p', {class: 'hint'}, 'No setup plan.'));
}
