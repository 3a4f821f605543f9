// A2UI documents as Studio renders them: Form and DocumentReview (seed 000) with their fields,
// and a generic view of any other document (Studio renders unknown documents generically too).

import {h, text, tree, badge} from './dom.js';
import {FormView} from './form.js';

// renderDocument returns {el, form} for a surface's document. on.submit(action, form) runs when
// the document's submit (or preview) button is used and the form's own checks pass.
export function renderDocument(doc, on) {
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
    return {el: h('p', {class: 'empty'}, 'The surface returned no document.'), form: null};
  }
  switch (doc.type) {
    case 'Form':
      return formDocument(doc, on);
    case 'DocumentReview':
      return reviewDocument(doc, on);
    default:
      return genericDocument(doc, on);
  }
}

function formDocument(doc, on) {
  const form = new FormView(doc.fields, null, {prefix: 'doc'});
  const el = h('form', {class: 'a2ui-form', id: 'a2ui-form', novalidate: true},
    h('h3', {}, text(doc.title, 'Form'), ' ', badge('info', 'Form')),
    form.el, buttons(doc, form, on));
  el.addEventListener('submit', (e) => e.preventDefault());
  return {el, form};
}

function reviewDocument(doc, on) {
  const d = (doc.document && typeof doc.document === 'object') ? doc.document : {};
  const initial = {};
  if (typeof d.field === 'string' && typeof d.value === 'string') initial[d.field] = d.value;
  const form = new FormView(doc.fields, initial, {prefix: 'doc'});
  const checks = Array.isArray(d.validation) ? d.validation : [];
  const el = h('form', {class: 'a2ui-form review', id: 'a2ui-form', novalidate: true},
    h('h3', {}, text(d.title, 'Review'), ' ', badge('info', 'DocumentReview')),
    h('div', {class: 'reviewed'},
      h('p', {class: 'hint'}, 'Content' + (d.language ? ' (' + d.language + ')' : '') +
        (d.field ? ', edited in the field ' + d.field : '')),
      h('pre', {class: 'document-value'}, text(d.value, '')),
      checks.length ? h('ul', {class: 'checks'}, checks.map((c) =>
        h('li', {}, badge(c.status === 'ok' || c.status === 'passed' ? 'ok' : c.status === 'failed' ? 'error' : 'warn', text(c.status, '?')),
          ' ', text(c.label, c.id)))) : null),
    form.el, buttons(doc, form, on));
  el.addEventListener('submit', (e) => e.preventDefault());
  return {el, form};
}

// genericDocument shows any other document as a tree; when it declares fields and a submit
// action it can still be submitted through the same form.
function genericDocument(doc, on) {
  const hasForm = Array.isArray(doc.fields) && doc.submit && typeof doc.submit.action === 'string';
  const form = hasForm ? new FormView(doc.fields, null, {prefix: 'doc'}) : null;
  const el = h('div', {class: 'a2ui-generic', id: 'a2ui-generic'},
    h('h3', {}, text(doc.title, 'Document'), ' ', badge('warn', text(doc.type, 'no type'))),
    h('p', {class: 'hint'}, 'The workbench has no renderer for this document type: this is the generic view of its members.'),
    tree(doc),
    form ? h('form', {class: 'a2ui-form', id: 'a2ui-form', novalidate: true}, form.el, buttons(doc, form, on)) : null);
  return {el, form};
}

function buttons(doc, form, on) {
  const out = h('div', {class: 'buttons'});
  const add = (def, primary, id) => {
    if (!def || typeof def.action !== 'string' || !def.action) return;
    const b = h('button', {type: 'button', id, class: primary ? 'primary' : ''},
      text(def.label, primary ? 'Submit' : 'Preview'), h('span', {class: 'action-id'}, ' → ' + def.action));
    b.addEventListener('click', () => on.submit(def.action, form, b));
    out.append(b);
  };
  add(doc.submit, true, 'form-submit');
  add(doc.preview, false, 'form-preview');
  if (!out.childElementCount) out.append(h('p', {class: 'hint'}, 'This document names no submit action.'));
  return out;
}
