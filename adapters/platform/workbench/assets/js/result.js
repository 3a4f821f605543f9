// An answer of POST /a2a, readable: a JSON-RPC error with its code and data; or an action result
// with its status, errors (codes, fields), effects, job_state as a tree (job, cases, steps,
// awaiting objects, artifacts), setup plan, draft, dry-run outcome and replay safety.

import {h, text, tree, badge, jsonBlock, section, table, link, pretty} from './dom.js';

const KNOWN_RESULT = new Set(['status', 'effects', 'job_state', 'replay_safety', 'setup_plan', 'draft', 'dry_run', 'errors']);

// renderAnswer renders the outcome of Client.rpc. ctx.agent is the agent's slug (for the links
// to awaiting surfaces).
export function renderAnswer(outcome, ctx) {
  const el = h('div', {class: 'answer', id: 'answer'});
  const body = outcome.body;
  if (outcome.error && !(body && (body.result || body.error))) {
    el.append(h('div', {class: 'error-box', id: 'result-error'},
      h('strong', {}, 'The call failed: '), outcome.error,
      body && body.detail ? h('p', {}, 'detail: ', typeof body.detail === 'string' ? body.detail : pretty(body.detail)) : null));
  } else if (body.error) {
    const e = body.error;
    el.append(h('div', {class: 'error-box', id: 'result-error'},
      h('p', {}, h('strong', {}, 'JSON-RPC error '), h('code', {class: 'error-code'}, String(e.code)), ' ', text(e.message)),
      e.data && e.data.code ? h('p', {}, 'data.code ', h('code', {class: 'error-data-code'}, String(e.data.code))) : null,
      e.data ? tree(e.data) : null));
  } else if (body.result && 'status' in body.result) {
    el.append(actionResult(body.result, ctx, Boolean(outcome.call && outcome.call.replayed)));
  } else if (body.result) {
    el.append(section('Result', tree(body.result)));
  }
  el.append(h('details', {class: 'raw'}, h('summary', {}, 'The answer as JSON'), jsonBlock(body === undefined ? outcome.call.response : body)));
  return el;
}

// actionResult shows an action's result; replayed is what the controller's Idempotent-Replayed
// header said: strictly_idempotent_response, true on a first run too, says only that a retry
// would get the same answer.
function actionResult(r, ctx, replayed) {
  const ok = r.status === 'ok';
  const out = h('div', {class: 'result'},
    h('p', {class: 'status-line'}, 'Status ', badge(ok ? 'ok' : 'error', String(r.status), {id: 'result-status'}),
      ' · ', String((r.effects || []).length), ' effect(s)',
      replayed ? [' · ', badge('info', 'replayed: the recorded result of this idempotency key, the action not run again', {id: 'result-replayed'})] : null));
  if (Array.isArray(r.errors) && r.errors.length) out.append(section('Errors', errorList(r.errors)));
  out.append(section('Effects', effectList(r.effects || [])));
  if (r.job_state) out.append(section('Job state', jobState(r.job_state, ctx)));
  if (r.setup_plan) out.append(section('Setup plan', setupPlan(r.setup_plan)));
  if (r.draft) out.append(section('Draft', draft(r.draft)));
  if (r.dry_run) out.append(section('Dry run', dryRun(r.dry_run)));
  if (r.replay_safety) out.append(section('Replay safety', tree(r.replay_safety)));
  const extra = Object.fromEntries(Object.entries(r).filter(([k]) => !KNOWN_RESULT.has(k)));
  if (Object.keys(extra).length) out.append(section('Other members', tree(extra)));
  return out;
}

export function errorList(errors) {
  return h('ul', {class: 'errors', id: 'result-errors'}, errors.map((e) => h('li', {},
    h('code', {class: 'error-code'}, text(e.code, '(no code)')), ' ', text(e.message),
    e.field ? h('span', {class: 'hint'}, ' field ' + e.field + (typeof e.item === 'number' ? '[' + e.item + ']' + (e.item_field ? '.' + e.item_field : '') : '')) : null,
    typeof e.retry_after_seconds === 'number' ? h('span', {class: 'hint'}, ' retry after ' + e.retry_after_seconds + ' s') : null)));
}

// effectList shows each effect's type and identities, with its JSON.
export function effectList(effects) {
  if (!effects.length) return h('p', {class: 'empty'}, 'No effect.');
  return h('ol', {class: 'effects'}, effects.map((e) => h('li', {class: 'effect'},
    h('code', {class: 'effect-type'}, text(e.type, '(no type)')),
    e.status ? [' ', badge(statusKind(e.status), e.status)] : null,
    ['job_id', 'case_id', 'step_id', 'resource', 'dataset', 'artifact_id'].filter((k) => e[k]).map((k) => h('span', {class: 'id'}, ' ' + k + ' ' + e[k])),
    e.message ? h('span', {class: 'message'}, ' — ' + e.message) : null,
    h('details', {}, h('summary', {}, 'JSON'), jsonBlock(e)))));
}

function statusKind(s) {
  switch (s) {
    case 'completed': case 'ok': case 'done': return 'ok';
    case 'failed': case 'error': case 'cancelled': return 'error';
    case 'awaiting': case 'pending': return 'warn';
    default: return 'info';
  }
}

// jobState is the snapshot as a tree: the job, its cases, their steps, each step's awaiting
// object (with a link to load its surface) and outputs.
export function jobState(s, ctx) {
  const job = s.job || {};
  const cases = Array.isArray(s.cases) ? s.cases : [];
  return h('div', {class: 'job-state', id: 'job-state'},
    h('p', {class: 'job'}, 'Job ', h('code', {}, text(job.id, '?')), ' ', badge(statusKind(job.status), text(job.status, '?')),
      h('span', {class: 'hint'}, ' mission ' + text(job.mission_id, '?') + ' · agent ' + text(job.agent_slug, '?') +
        (job.source ? ' · source ' + text(job.source.type, '?') : ''))),
    job.display ? tree(job.display) : null,
    job.information ? h('details', {}, h('summary', {}, 'information'), tree(job.information)) : null,
    cases.length ? h('ul', {class: 'cases'}, cases.map((c) => h('li', {class: 'case', 'data-case': text(c.id, '')},
      'Case ', h('code', {}, text(c.id, '?')), ' ', badge(statusKind(c.status), text(c.status, '—')),
      ' ', text(c.title), h('span', {class: 'hint'}, ' lane ' + text(c.lane, 'work')),
      c.metadata && Object.keys(c.metadata).length ? h('details', {}, h('summary', {}, 'metadata'), tree(c.metadata)) : null,
      h('ul', {class: 'steps'}, (c.steps || []).map((st) => step(st, c, job, ctx)))))) : h('p', {class: 'empty'}, 'No case.'));
}

function step(st, c, job, ctx) {
  const a = st.awaiting;
  return h('li', {class: 'step', 'data-step': text(st.id, ''), 'data-status': text(st.status, '')},
    'Step ', h('code', {}, text(st.id, '?')), ' ', badge(statusKind(st.status), text(st.status, '?')),
    ' ', text(st.title), h('span', {class: 'hint'}, ' ' + text(st.activity, '')),
    a ? h('div', {class: 'awaiting'},
      h('p', {}, badge('warn', 'awaiting'), ' ', text(a.reason), ' · surface ', h('code', {}, text(a.surface, '?')),
        ' · action ', h('code', {}, text(a.action, '?')), a.reopenable ? ' · reopenable' : ''),
      a.fields && a.fields.length ? table(['field', 'label', 'type', 'required'],
        a.fields.map((f) => [f.id, text(f.label), text(f.type, 'string'), f.required ? 'yes' : 'no'])) : null,
      h('a', {class: 'button', id: 'open-awaiting', href: link('surface', {
        agent: ctx.agent, surface: a.surface, job_id: job.id, case_id: c.id, step_id: st.id,
        mission_id: job.mission_id, load: '1',
      })}, 'Open the awaiting surface')) : null,
    st.outputs && st.outputs.length ? h('ul', {class: 'artifacts'}, st.outputs.map((o) => h('li', {},
      'Artifact ', h('code', {}, text(o.id, '?')), ' ', badge('info', text(o.type, '?')), ' ', text(o.title),
      o.media_type ? h('span', {class: 'hint'}, ' ' + o.media_type) : null,
      o.storage ? h('span', {class: 'hint'}, ' storage ' + o.storage + (o.file_id ? ' ' + o.file_id : '')) : null))) : null);
}

// setupPlan shows the plan's steps and their fields, and the cost estimate.
export function setupPlan(plan) {
  const steps = Array.isArray(plan.steps) ? plan.steps : [];
  return h('div', {class: 'setup-plan'},
    h('p', {}, 'Confirmation ' + (plan.confirmation_required === false ? 'not required' : 'required')),
    steps.map((s) => h('div', {class: 'plan-step'},
      h('h4', {}, text(s.title, s.id), ' ', badge(statusKind(s.status), text(s.status, 'pending'))),
      s.description ? h('p', {}, s.description) : null,
      fieldTable(s.fields || []),
      s.help_actions && s.help_actions.length ? h('p', {class: 'hint'}, 'help actions: ' + s.help_actions.join(', ')) : null)),
    plan.cost_estimate ? h('p', {}, 'Cost estimate: ', costEstimate(plan.cost_estimate)) : null);
}

// fieldTable lists field definitions with their schema keys.
export function fieldTable(fields) {
  return table(['id', 'label', 'type', 'required', 'default', 'rules'], fields.map((f) => [
    h('code', {}, f.id), text(f.label), text(f.type, 'string'), f.required ? 'yes' : 'no',
    f.default === undefined ? '' : JSON.stringify(f.default),
    [f.options ? 'options ' + f.options.map((o) => o.value).join('|') : '', f.validation ? JSON.stringify(f.validation) : '',
      f.depends_on ? 'depends_on ' + JSON.stringify(f.depends_on) : '', f.item_fields ? 'items ' + f.item_fields.map((i) => i.id).join(',') : '']
      .filter(Boolean).join(' · '),
  ]));
}

// costEstimate shows a range or "unknown", never a single number.
export function costEstimate(c) {
  if (!c || c.status === 'unknown') return 'unknown' + (c && c.basis ? ' (' + c.basis + ')' : '');
  return text(String(c.min ?? '?')) + '–' + text(String(c.max ?? '?')) + ' ' + text(c.unit) + (c.basis ? ' (' + c.basis + ')' : '');
}

function draft(d) {
  return h('div', {},
    h('p', {}, 'Field ', h('code', {}, text(d.field, '?')), ' proposed value: ', h('code', {}, d.value === undefined ? '(none: a check)' : JSON.stringify(d.value))),
    table(['severity', 'message', 'field', 'proposed'], (d.suggestions || []).map((s) => [
      badge(s.severity === 'error' ? 'error' : s.severity === 'warning' ? 'warn' : 'info', text(s.severity, '?')),
      text(s.message), text(s.field), s.proposed_value === undefined ? '' : JSON.stringify(s.proposed_value)])));
}

function dryRun(d) {
  return h('div', {id: 'dry-run'},
    h('p', {}, badge('info', 'dry run'), ' deletable ' + (d.deletable ? 'yes' : 'no') +
      (d.expires_at ? ' · expires ' + d.expires_at : '')),
    d.cost_incurred ? h('p', {}, 'Cost incurred: ', costEstimate(d.cost_incurred)) : null);
}
