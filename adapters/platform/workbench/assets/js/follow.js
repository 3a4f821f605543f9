// Jobs that run in the background (package jobs): job.start answers at once with the job active,
// and its steps advance afterwards. followJob polls job.sync for such a job and redraws its
// cases and steps as they advance, until the job ends or waits for an answer, or the page is left.

import {h, clear, section} from './dom.js';
import {baseRequest} from './client.js';
import {jobState} from './result.js';

// SETTLED are the job statuses after which nothing changes until someone acts.
const SETTLED = new Set(['completed', 'failed', 'cancelled', 'awaiting']);
const EVERY_MS = 1000;

// followJob follows the job of an answer (Client.rpc's outcome) in box, when the answer shows it
// still running; req is the request that was answered (its agent, surface and mission).
export function followJob(app, box, outcome, req) {
  const result = outcome.body && outcome.body.result;
  const js = result && result.job_state;
  if (!js || !js.job || !js.job.id || SETTLED.has(js.job.status)) return;
  const job = js.job;
  const status = h('p', {class: 'hint', id: 'job-follow-status'}, 'Job ' + job.id + ' is ' + job.status + ': job.sync every second…');
  const view = h('div', {id: 'job-follow', 'data-history': ''});
  box.append(section('The job as it runs', status, view));
  let left = false;
  const leave = app.leave;
  app.leave = () => {
    left = true;
    if (leave) leave();
  };
  let last = '';
  const tick = async () => {
    if (left || !view.isConnected) return;
    const ids = {job_id: job.id, mission_id: job.mission_id || req.mission_id};
    const sync = Object.assign(baseRequest(req.agent_slug, req.surface, ids), {action: 'job.sync', input: {}});
    const answer = await app.client.rpc('supervaizer/action.invoke', sync);
    const s = answer.body && answer.body.result && answer.body.result.job_state;
    if (s && s.job) {
      const el = jobState(s, {agent: req.agent_slug});
      el.removeAttribute('id'); // the answer above has the job-state id
      clear(view, el);
      view.dataset.status = s.job.status;
      // The history of what the page saw: one entry per change of the job's steps.
      const seen = s.job.status + ':' + (s.cases || []).flatMap((c) => (c.steps || []).map((st) => st.id + '=' + st.status)).join(',');
      if (seen !== last) view.dataset.history += (view.dataset.history ? ' ' : '') + seen;
      last = seen;
      status.textContent = 'Job ' + job.id + ' is ' + s.job.status + (SETTLED.has(s.job.status) ? '.' : ': job.sync every second…');
      if (SETTLED.has(s.job.status)) return;
    } else {
      status.textContent = 'job.sync did not answer a job state: following stopped (see the calls).';
      return;
    }
    setTimeout(tick, EVERY_MS);
  };
  setTimeout(tick, EVERY_MS);
}
