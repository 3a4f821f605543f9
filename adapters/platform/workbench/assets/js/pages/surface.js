// Surface: load a declared surface with an editable request (supervaizer/surface.load), show its
// A2UI document as JSON and rendered, and submit the rendered form to its action
// (supervaizer/action.invoke) with the form's values, as Studio does.

import {h, clear, params, jsonBlock, link, text, badge, section} from '../dom.js';
import {baseRequest, newID} from '../client.js';
import {surfaces} from '../agents.js';
import {renderDocument} from '../document.js';
import {fieldErrors} from '../form.js';
import {renderAnswer, errorList} from '../result.js';
import {followJob} from '../follow.js';
import {agentPicker, idInputs, parseInput, documentIDs} from './common.js';

export async function surfacePage(root, app) {
  const q = params();
  const agents = await app.agents.all();
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Surface'),
    h('p', {class: 'hint'}, 'supervaizer/surface.load, then the document\'s submit as supervaizer/action.invoke.')));
  if (!agents.length) {
    root.append(h('p', {class: 'empty'}, 'The controller serves no agent.'));
    return;
  }
  const agentSel = agentPicker('surface-agent', agents, q.agent);
  const surfaceSel = h('select', {id: 'surface-id'});
  const ids = idInputs('surface', q);
  const input = h('textarea', {id: 'surface-input', rows: '3', spellcheck: 'false'}, q.input || '{}');
  const load = h('button', {type: 'submit', id: 'surface-load', class: 'primary'}, 'Load');
  const inputError = h('p', {class: 'field-error', hidden: true});
  const out = h('div', {id: 'surface-out'});
  const fillSurfaces = (want) => {
    const a = agents.find((x) => x.slug === agentSel.value);
    clear(surfaceSel, surfaces(a && a.registration).map((s) => h('option', {value: s.id, selected: s.id === want}, s.id)));
  };
  fillSurfaces(q.surface);
  agentSel.addEventListener('change', () => fillSurfaces(''));
  const form = h('form', {id: 'surface-request', class: 'request'},
    h('div', {class: 'row-controls'}, h('label', {}, 'agent', agentSel), h('label', {}, 'surface', surfaceSel)),
    ids.el, h('label', {class: 'wide'}, 'input (JSON object)', input), inputError, h('div', {class: 'buttons'}, load));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    loadSurface();
  });
  root.append(form, out);

  async function loadSurface() {
    const parsed = parseInput(input.value);
    inputError.hidden = !parsed.error;
    inputError.textContent = parsed.error || '';
    if (parsed.error) return;
    const agent = agents.find((x) => x.slug === agentSel.value);
    const surface = surfaceSel.value;
    const req = Object.assign(baseRequest(agent.slug, surface, ids.read()), {input: parsed.value});
    history.replaceState(null, '', link('surface', Object.assign({agent: agent.slug, surface}, ids.read())));
    clear(out, h('p', {class: 'hint'}, 'Loading ' + surface + '…'));
    const answer = await app.client.rpc('supervaizer/surface.load', req);
    const result = answer.body && answer.body.result;
    if (!result) {
      clear(out, renderAnswer(answer, {agent: agent.slug}));
      return;
    }
    showDocument(agent, surface, result);
  }

  function showDocument(agent, surface, result) {
    const doc = result.document;
    const answerBox = h('div', {id: 'surface-answer'});
    const status = h('p', {id: 'form-status', class: 'hint', role: 'status'});
    // Studio keeps one idempotency key and one job id for the preview, the start and every retry of
    // a setup. A start answered with an error ends that attempt: the next submit is a new one.
    const setup = {el: h('code', {id: 'setup-key'}), renew() {
      this.key = newID('wb-idem');
      this.jobID = newID('wb-job');
      this.el.textContent = this.key;
    }};
    setup.renew();
    const rendered = renderDocument(doc, {
      submit: (action, formView, button) => submit(agent, surface, doc, action, formView, button, status, answerBox, setup),
    });
    clear(out,
      h('p', {class: 'meta'}, 'surface ', h('code', {}, result.surface), ' · a2ui_version ', String(result.a2ui_version),
        ' · a2ui_catalog_version ', String(result.a2ui_catalog_version), ' · document type ',
        badge('info', text(doc && doc.type, 'none'), {id: 'document-type'})),
      Array.isArray(result.errors) && result.errors.length ? section('The surface cannot be shown as asked', errorList(result.errors)) : null,
      h('div', {class: 'columns'},
        h('div', {class: 'column', id: 'surface-rendered'}, h('h3', {class: 'column-title'}, 'Rendered'), rendered.el, status),
        h('div', {class: 'column', id: 'surface-json'}, h('h3', {class: 'column-title'}, 'Document (JSON)'), jsonBlock(doc))),
      isStart(agent, doc) ? h('p', {class: 'hint'}, 'Idempotency key ', setup.el,
        ': kept, with the job id, for the preview, the start and every retry of this form, as Studio does; a new one after a start ' +
        'answered with an error (load the surface again for a new one at any time).') : null,
      answerBox);
  }

  async function submit(agent, surface, doc, action, formView, button, status, answerBox, setup) {
    if (formView) {
      const errs = formView.check();
      formView.showErrors(errs);
      const n = Object.keys(errs).length;
      if (n) {
        status.textContent = n + ' field(s) to fix before ' + action + ' is called.';
        status.className = 'hint invalid';
        return;
      }
    }
    status.textContent = 'Calling ' + action + '…';
    status.className = 'hint';
    clear(answerBox);
    button.disabled = true;
    try {
      const values = formView ? await formView.values() : {};
      const reqIDs = Object.assign(documentIDs(doc), ids.read());
      const req = Object.assign(baseRequest(agent.slug, surface, reqIDs), {action, input: values});
      if (isStartAction(agent, action)) {
        req.idempotency_key = setup.key;
        if (!req.job_id && action !== previewAction(agent)) req.job_id = setup.jobID;
      }
      app.shared.actionDraft = {agent: agent.slug, action, surface, ids: reqIDs, input: values};
      const answer = await app.client.rpc('supervaizer/action.invoke', req);
      const result = answer.body && answer.body.result;
      let note = result ? action + ' answered ' + result.status : action + ' failed';
      if (result && result.status === 'error' && action !== previewAction(agent) && isStartAction(agent, action)) {
        setup.renew();
      }
      if (formView && result) {
        const rest = formView.showErrors(fieldErrors(result.errors));
        if (Object.keys(rest).length) note += '; errors about fields this form does not show: ' + Object.keys(rest).join(', ');
      }
      status.textContent = note;
      status.className = 'hint ' + (result && result.status === 'ok' ? 'ok' : 'invalid');
      clear(answerBox, h('h3', {}, 'Answer of ', h('code', {}, action)),
        h('p', {}, h('a', {href: link('action', {agent: agent.slug, action, surface, from: 'surface'})}, 'Edit this call in the Action page')),
        renderAnswer(answer, {agent: agent.slug}));
      followJob(app, answerBox, answer, req);
    } finally {
      button.disabled = false;
    }
  }

  if (q.load === '1' || q.surface) loadSurface();
}

// The setup's actions (job_policy.setup, else the standard ids) take the setup's idempotency key.
function setupOf(agent) {
  const p = agent.registration && agent.registration.job_policy;
  return (p && p.setup) || {};
}

function previewAction(agent) { return setupOf(agent).preview_action || 'job.start.preview'; }

function isStartAction(agent, action) {
  const s = setupOf(agent);
  return action === (s.start_action || 'job.start') || action === previewAction(agent);
}

function isStart(agent, doc) {
  return Boolean(doc && ((doc.submit && isStartAction(agent, doc.submit.action)) || (doc.preview && isStartAction(agent, doc.preview.action))));
}
