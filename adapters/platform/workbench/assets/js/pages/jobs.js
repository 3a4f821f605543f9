// Jobs: the background jobs (package jobs) of the workspace the workbench acts in, as svz jobs
// shows them: #/jobs lists them, newest first; #/jobs?agent=…&job=… shows one — its steps with
// their tries and errors, fan-out items, failure handler, builds and lease, and its job_state —
// with Retry (a failed or stopped job, from its first unfinished step) and Cancel (as job.stop).
// Both pages follow the jobs while something may change (every 2 s).

import {h, clear, section, table, badge, text, params, link} from '../dom.js';
import {jobState} from '../result.js';

const EVERY_MS = 2000;
// SETTLED are the statuses after which nothing changes until someone acts.
const SETTLED = new Set(['completed', 'failed', 'stopped', 'awaiting']);
const ENDED = new Set(['completed', 'failed', 'stopped', 'failing']);
const RETRYABLE = new Set(['failed', 'stopped']);

export async function jobsPage(root, app) {
  const p = params();
  if (p.agent && p.job) return jobPage(root, app, p.agent, p.job);
  const box = h('div', {id: 'jobs'}, h('p', {class: 'hint'}, 'Reading…'));
  const status = h('p', {class: 'hint', id: 'jobs-status'});
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Jobs'),
    h('p', {class: 'hint'}, 'The background jobs of the workspace ', h('code', {}, 'local'),
      ' in the controller\'s store, newest first: what svz jobs list shows (GET /manage/api/jobs).')), status, box);
  const follow = poll(app, async () => {
    const out = await app.client.get('/manage/api/jobs', true);
    if (out.error) {
      clear(box, h('p', {class: 'error-box'}, out.error));
      return false;
    }
    const jobs = out.body.jobs || [];
    clear(box, table(['Job', 'Agent', 'Work', 'Status', 'Created', 'Note'], jobs.map((j) => [
      h('a', {href: link('jobs', {agent: j.agent, job: j.job}), class: 'job-link', 'data-job': j.job}, j.job),
      j.agent, j.work, statusBadge(j.status), when(j.created), note(j),
    ]), {id: 'jobs-list'}));
    status.textContent = jobs.length + ' job(s)' + (jobs.every((j) => SETTLED.has(j.status)) ? '.' : '; refreshed every 2 s…');
    return !jobs.every((j) => SETTLED.has(j.status));
  });
  await follow();
}

async function jobPage(root, app, agent, job) {
  const head = h('div', {class: 'page-head'},
    h('p', {}, h('a', {href: '#/jobs', id: 'jobs-back'}, '← All jobs')),
    h('h2', {}, 'Job ', h('code', {}, job), ' ', h('span', {class: 'hint'}, 'of ' + agent)));
  const retry = h('button', {type: 'button', id: 'job-retry', class: 'primary', disabled: true}, 'Retry');
  const cancel = h('button', {type: 'button', id: 'job-cancel', disabled: true}, 'Cancel');
  const said = h('p', {id: 'job-said', class: 'hint'});
  const view = h('div', {id: 'job'}, h('p', {class: 'hint'}, 'Reading…'));
  root.append(head, h('p', {class: 'actions'}, retry, ' ', cancel), said, view);

  let current = null;
  const draw = (d) => {
    current = d;
    retry.disabled = !RETRYABLE.has(d.status);
    cancel.disabled = ENDED.has(d.status);
    clear(view, detail(d, agent));
    view.dataset.status = d.status;
  };
  const follow = poll(app, async () => {
    const out = await app.client.get('/manage/api/jobs/job?' + new URLSearchParams({agent, job}), true);
    if (out.error) {
      clear(view, h('p', {class: 'error-box'}, out.error));
      return false;
    }
    draw(out.body);
    return !SETTLED.has(out.body.status);
  });
  const act = async (what, button) => {
    button.disabled = true;
    said.className = 'hint';
    said.textContent = what + '…';
    const out = await app.client.send('POST', '/manage/api/jobs/' + what,
      Object.assign({'Content-Type': 'application/json'}, app.client.headers()), JSON.stringify({agent, job}));
    if (out.error) {
      said.className = 'error-box';
      said.textContent = out.error;
      if (current) draw(current);
      return;
    }
    said.textContent = what === 'retry'
      ? 'Retried: the job is ' + out.body.status + ' and runs from its first unfinished step.'
      : 'Cancelled: the job is ' + out.body.status + (out.body.stop_requested ? ' (its delivery stops it)' : '') + '.';
    draw(out.body);
    follow();
  };
  retry.addEventListener('click', () => act('retry', retry));
  cancel.addEventListener('click', () => act('cancel', cancel));
  await follow();
}

// poll runs tick now and again every EVERY_MS while it returns true and the page is shown; the
// function it returns starts it again (after an action).
function poll(app, tick) {
  let timer = null;
  let left = false;
  const leave = app.leave;
  app.leave = () => {
    left = true;
    clearTimeout(timer);
    if (leave) leave();
  };
  const run = async () => {
    clearTimeout(timer);
    if (left) return;
    if (await tick() && !left) timer = setTimeout(run, EVERY_MS);
  };
  return run;
}

function detail(d, agent) {
  const rows = [
    ['Status', [statusBadge(d.status, {id: 'job-status'}), d.stop_requested ? ' stop requested' : '']],
    ['Work', d.work],
    ['Error', d.error ? h('span', {class: 'invalid', id: 'job-error'}, d.error) : ''],
    ['Cancelled', text(d.cancelled)],
    ['Waiting', d.waiting ? note({waiting: d.waiting}) : ''],
    ['Mission', text(d.mission)],
    ['Created', when(d.created)],
    ['Deadline', when(d.deadline)],
    ['Deliveries', String(d.deliveries)],
    ['Retries', d.retries ? d.retries + ', the last at ' + when(d.retried) : ''],
    ['Lease', d.holder ? 'held by ' + d.holder + ' until ' + when(d.lease_until) : ''],
    ['Builds', (d.builds || []).join('; ')],
    ['Failure handler', d.failure_handler ? handler(d.failure_handler) : ''],
  ].filter(([, v]) => v !== '' && v !== null && v !== undefined);
  const multi = (d.builds || []).length > 1;
  return h('div', {},
    h('dl', {class: 'job-fields', id: 'job-fields'}, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    section('Steps', (d.steps || []).length ? h('table', {id: 'job-steps'},
      h('thead', {}, h('tr', {}, ['Record', 'Step', 'Kind', 'Status', 'Tries', 'Note'].concat(multi ? ['Build'] : []).map((t) => h('th', {}, t)))),
      h('tbody', {}, d.steps.map((st) => h('tr', {'data-step': st.name, 'data-status': st.status, 'data-kind': st.kind},
        [st.record ? String(st.record) : '—', h('code', {}, st.name), st.kind, statusBadge(st.status), st.tries ? String(st.tries) : '—', stepNote(st)]
          .concat(multi ? [text(st.build)] : []).map((c) => h('td', {}, c)))))) : h('p', {class: 'empty'}, 'No step yet.')),
    section('job_state, as job.sync answers it', jobState(d.job_state || {}, {agent})));
}

function handler(f) {
  return [statusBadge(f.state === 'ran' ? 'completed' : f.state), ' cause ' + f.cause,
    f.tries ? ' · ' + f.tries + ' failed tries, last error: ' + text(f.error) : ''];
}

function stepNote(st) {
  const parts = [];
  const it = st.items;
  if (it) {
    let s = it.done + '/' + it.total + ' items';
    for (const [i, n] of Object.entries(it.failed || {})) s += ', item ' + i + ' failed ' + n + '×';
    parts.push(s);
  }
  if (st.until) parts.push('wakes at ' + when(st.until));
  if (st.answered_by || st.answered_at) parts.push('answered' + (st.answered_by ? ' by ' + st.answered_by : '') + (st.answered_at ? ' at ' + when(st.answered_at) : ''));
  if (st.error) parts.push('last error: ' + st.error);
  return parts.join('; ');
}

function note(j) {
  if (j.error) return j.error;
  const w = j.waiting;
  if (!w) return '';
  return 'waits for ' + w.reason + (w.step ? ' of step ' + w.step : w.limit ? ' ' + w.limit : '') + (w.until ? ' until ' + when(w.until) : '');
}

function when(t) {
  return t ? new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

function statusBadge(s, attrs) {
  const kind = s === 'completed' ? 'ok' : s === 'failed' || s === 'failing' || s === 'stopped' ? 'error' : s === 'awaiting' || s === 'pending' ? 'warn' : 'info';
  return badge(kind, s, Object.assign({'data-status': s}, attrs || {}));
}
