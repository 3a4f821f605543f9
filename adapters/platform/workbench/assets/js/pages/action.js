// Action: invoke any declared action (supervaizer/action.invoke) with an editable JSON input,
// prefilled from a surface's form, an optional idempotency key, and the agent's dry-run actions;
// show the result, its effects, its job_state as a tree, and errors with their codes.

import {h, clear, params, pretty, link, flag} from '../dom.js';
import {baseRequest, newID} from '../client.js';
import {actions, surfaces} from '../agents.js';
import {renderAnswer} from '../result.js';
import {followJob} from '../follow.js';
import {agentPicker, idInputs, parseInput} from './common.js';

export async function actionPage(root, app) {
  const q = params();
  const agents = await app.agents.all();
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Action'),
    h('p', {class: 'hint'}, 'supervaizer/action.invoke with the request below.')));
  if (!agents.length) {
    root.append(h('p', {class: 'empty'}, 'The controller serves no agent.'));
    return;
  }
  // A call handed over by the Surface page (its form's values) prefills the request.
  const draft = q.from === 'surface' && app.shared.actionDraft && app.shared.actionDraft.action === q.action ? app.shared.actionDraft : null;
  const agentSel = agentPicker('action-agent', agents, q.agent);
  const actionSel = h('select', {id: 'action-id'});
  const flags = h('span', {id: 'action-flags'});
  const surfaceIn = h('input', {type: 'text', id: 'action-surface', spellcheck: 'false', value: (draft && draft.surface) || q.surface || ''});
  const surfaceList = h('datalist', {id: 'action-surfaces'});
  surfaceIn.setAttribute('list', 'action-surfaces');
  const ids = idInputs('action', Object.assign({}, q, draft ? draft.ids : {}));
  const input = h('textarea', {id: 'action-input', rows: '8', spellcheck: 'false'}, draft ? pretty(draft.input) : '{}');
  const inputError = h('p', {class: 'field-error', id: 'action-input-error', hidden: true});
  const prefill = h('button', {type: 'button', id: 'action-prefill'}, 'Prefill from the surface\'s form');
  const idemOn = h('input', {type: 'checkbox', id: 'action-idem-on'});
  const idemKey = h('input', {type: 'text', id: 'action-idem-key', value: newID('wb-idem'), spellcheck: 'false'});
  const idemNew = h('button', {type: 'button', id: 'action-idem-new', class: 'small'}, 'New key');
  const dryRun = h('input', {type: 'checkbox', id: 'action-dry-run'});
  const dryNote = h('span', {class: 'hint', id: 'action-dry-note'});
  const invoke = h('button', {type: 'submit', id: 'action-invoke', class: 'primary'}, 'Invoke');
  const out = h('div', {id: 'action-answer'});

  const current = () => agents.find((a) => a.slug === agentSel.value);
  const fillActions = (want) => {
    const a = current();
    const all = actions(a && a.registration);
    const dry = all.filter((x) => x.dry_run === true);
    dryRun.disabled = !dry.length;
    if (!dry.length) dryRun.checked = false;
    dryNote.textContent = dry.length ? dry.length + ' dry-run action(s): ' + dry.map((x) => x.id).join(', ')
      : 'this agent declares no dry-run action (dry_run: true)';
    const shown = dryRun.checked ? dry : all;
    clear(actionSel, shown.map((x) => h('option', {value: x.id, selected: x.id === want}, x.id)));
    clear(surfaceList, surfaces(a && a.registration).map((s) => h('option', {value: s.id})));
    showFlags();
  };
  const showFlags = () => {
    const x = actions(current().registration).find((y) => y.id === actionSel.value) || {};
    clear(flags, flag(x.mutating !== false, 'mutating'), ' ', flag(x.dry_run === true, 'dry run'), ' ',
      flag(true, 'kind ' + (x.kind || 'command')), ' ', flag(true, 'scope ' + (x.scope || 'job')));
    if (!surfaceIn.value) surfaceIn.value = guessSurface(current(), actionSel.value);
  };
  fillActions(q.action);
  agentSel.addEventListener('change', () => { surfaceIn.value = ''; fillActions(''); });
  actionSel.addEventListener('change', () => { surfaceIn.value = ''; showFlags(); });
  dryRun.addEventListener('change', () => fillActions(actionSel.value));
  idemNew.addEventListener('click', () => { idemKey.value = newID('wb-idem'); idemOn.checked = true; });
  prefill.addEventListener('click', prefillFromSurface);

  const form = h('form', {id: 'action-request', class: 'request'},
    h('div', {class: 'row-controls'}, h('label', {}, 'agent', agentSel), h('label', {}, 'action', actionSel), flags),
    h('div', {class: 'row-controls'}, h('label', {}, 'surface (the request\'s surface member)', surfaceIn, surfaceList)),
    ids.el,
    h('label', {class: 'wide'}, 'input (JSON)', input), inputError,
    h('div', {class: 'row-controls'},
      prefill,
      h('label', {class: 'inline'}, idemOn, ' idempotency key'), idemKey, idemNew,
      h('label', {class: 'inline'}, dryRun, ' dry run'), dryNote),
    h('div', {class: 'buttons'}, invoke));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    run();
  });
  root.append(form, out);

  // prefillFromSurface loads the surface named above and takes its form's default values.
  async function prefillFromSurface() {
    const a = current();
    const surface = surfaceIn.value.trim();
    if (!surface) return;
    const req = Object.assign(baseRequest(a.slug, surface, ids.read()), {input: {}});
    const answer = await app.client.rpc('supervaizer/surface.load', req);
    const doc = answer.body && answer.body.result && answer.body.result.document;
    if (!doc || !Array.isArray(doc.fields)) {
      showInputError('The surface ' + surface + ' has no form to prefill from.');
      return;
    }
    const values = {};
    for (const f of doc.fields) if (f && f.id && f.default !== undefined) values[f.id] = f.default;
    if (doc.type === 'DocumentReview' && doc.document && doc.document.field) values[doc.document.field] = doc.document.value;
    input.value = pretty(values);
    showInputError('');
  }

  function showInputError(msg) {
    inputError.textContent = msg;
    inputError.hidden = !msg;
  }

  async function run() {
    const parsed = parseInput(input.value);
    showInputError(parsed.error || '');
    if (parsed.error) return;
    const a = current();
    const action = actionSel.value;
    const req = Object.assign(baseRequest(a.slug, surfaceIn.value.trim() || action, ids.read()), {action, input: parsed.value});
    if (idemOn.checked && idemKey.value.trim()) req.idempotency_key = idemKey.value.trim();
    history.replaceState(null, '', link('action', {agent: a.slug, action, surface: req.surface}));
    invoke.disabled = true;
    clear(out, h('p', {class: 'hint'}, 'Calling ' + action + '…'));
    try {
      const answer = await app.client.rpc('supervaizer/action.invoke', req);
      clear(out, h('h3', {}, 'Answer of ', h('code', {}, action), dryRun.checked ? ' (dry run)' : ''), renderAnswer(answer, {agent: a.slug}));
      followJob(app, out, answer, req);
    } finally {
      invoke.disabled = false;
    }
  }
}

// guessSurface is the surface an action is usually submitted from: the awaiting surface for the
// setup's submit action, job.start for the start actions, else the action id itself.
function guessSurface(agent, action) {
  const reg = agent && agent.registration;
  const declared = surfaces(reg).map((s) => s.id);
  const setup = (reg && reg.job_policy && reg.job_policy.setup) || {};
  if (action === (setup.submit_action || 'step.awaiting.submit') && declared.includes('case.step.awaiting')) return 'case.step.awaiting';
  if ([setup.start_action || 'job.start', setup.preview_action || 'job.start.preview'].includes(action) && declared.includes('job.start')) return 'job.start';
  return declared.includes(action) ? action : (declared[0] || action);
}
