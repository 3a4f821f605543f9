// Controls the Surface and Action pages share: the agent picker and the request's correlation
// ids.

import {h} from '../dom.js';

export const ID_FIELDS = ['job_id', 'case_id', 'step_id', 'mission_id', 'draft_session_id'];

// agentPicker is a <select> of the discovered agents, on the one named by slug (else the first).
export function agentPicker(id, agents, slug) {
  return h('select', {id}, agents.map((a) => h('option', {value: a.slug, selected: a.slug === slug}, a.slug)));
}

// idInputs are the request's correlation ids, prefilled from values; read() returns the
// non-empty ones.
export function idInputs(prefix, values) {
  const inputs = {};
  const el = h('div', {class: 'ids'}, ID_FIELDS.map((k) => {
    inputs[k] = h('input', {type: 'text', id: prefix + '-' + k, name: k, value: values[k] || '', spellcheck: 'false',
      placeholder: k === 'mission_id' ? 'local-mission' : ''});
    return h('label', {}, k, inputs[k]);
  }));
  return {
    el,
    read: () => Object.fromEntries(ID_FIELDS.map((k) => [k, inputs[k].value.trim()]).filter(([, v]) => v)),
    set: (k, v) => { if (inputs[k]) inputs[k].value = v || ''; },
  };
}

// parseInput reads a JSON input box: {value} or {error}.
export function parseInput(s) {
  const t = s.trim();
  if (t === '') return {value: {}};
  try {
    return {value: JSON.parse(t)};
  } catch (e) {
    return {error: 'The input is not valid JSON: ' + e.message};
  }
}

// documentIDs are the correlation ids a document's state carries back (the awaiting surface's
// job, case and step; the start form's draft session).
export function documentIDs(doc) {
  const s = doc && doc.state && typeof doc.state === 'object' ? doc.state : {};
  return Object.fromEntries(ID_FIELDS.filter((k) => typeof s[k] === 'string' && s[k]).map((k) => [k, s[k]]));
}
