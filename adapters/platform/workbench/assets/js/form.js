// Forms from the field schema of seed 000 ("Plan de configuration et schéma de champ"): the
// fields of an A2UI Form, of a DocumentReview, of a setup plan step or of an awaiting step.
//
// Types: string, text, boolean, integer, number, date, select, multi_select, resource_ref, file,
// list (unknown types render as string). Keys: required, default, placeholder, description (a
// tooltip), multiline and min_rows, options [{value, label}], depends_on {field, in},
// validation {min_length, max_length, pattern, min, max, min_items, max_items, message},
// item_fields (list), accept, max_bytes and storage (file). The checks mirror the controller's
// input validation, so an error shows at its field before the call is made; the controller's own
// field errors (errors[].field of a result) show at the same place.

import {h, text} from './dom.js';

const TEXT_TYPES = new Set(['string', 'text']);
const KNOWN = new Set(['string', 'text', 'boolean', 'integer', 'number', 'date', 'select',
  'multi_select', 'resource_ref', 'file', 'list']);

const MSG_MISSING = 'Field required';

// fieldType is the type a field renders as: unknown types are strings.
export function fieldType(f) {
  const t = text(f.type, 'string');
  return KNOWN.has(t) ? t : 'string';
}

let formCount = 0;

// FormView renders fields and reads, checks and shows their values.
export class FormView {
  // fields: the field definitions; initial: values to show instead of the defaults.
  constructor(fields, initial, opts) {
    this.prefix = (opts && opts.prefix) || 'f' + (++formCount);
    this.fields = (fields || []).filter((f) => f && typeof f.id === 'string');
    this.controls = new Map(); // id -> {field, wrap, read(), error el, set(v)}
    this.el = h('div', {class: 'fields'});
    for (const f of this.fields) {
      const c = this.control(f, initial && Object.hasOwn(initial, f.id) ? initial[f.id] : f.default);
      this.controls.set(f.id, c);
      this.el.append(c.wrap);
    }
    this.el.addEventListener('input', () => this.refresh());
    this.el.addEventListener('change', () => this.refresh());
    this.refresh();
  }

  // refresh shows the fields whose depends_on holds and hides the others.
  refresh() {
    for (const c of this.controls.values()) c.wrap.hidden = !this.active(c.field, 0);
  }

  // active follows a field's depends_on chain: the parent must be active and its stringified
  // value (each value of a list) in the "in" list.
  active(f, depth) {
    const dep = f.depends_on;
    if (!dep || typeof dep.field !== 'string') return true;
    const parent = this.controls.get(dep.field);
    if (!parent || depth > this.fields.length) return false;
    if (!this.active(parent.field, depth + 1)) return false;
    const v = parent.read();
    const vals = Array.isArray(v) ? v.map(stringify) : v === undefined ? [] : [stringify(v)];
    const allowed = (dep.in || []).map(String);
    return vals.some((x) => allowed.includes(x));
  }

  // values reads the active fields: absent when empty, typed otherwise (files are read here).
  async values() {
    const out = {};
    for (const [id, c] of this.controls) {
      if (!this.active(c.field, 0)) continue;
      const v = c.readAsync ? await c.readAsync() : c.read();
      if (v !== undefined) out[id] = v;
    }
    return out;
  }

  // check returns the field errors of the current values, {id: message} (list rows: "id[2].x").
  check() {
    const errs = {};
    for (const [id, c] of this.controls) {
      if (!this.active(c.field, 0)) continue;
      const msg = c.check ? c.check() : checkValue(c.field, c.read());
      if (typeof msg === 'string' && msg) errs[id] = msg;
      else if (msg && typeof msg === 'object') Object.assign(errs, msg);
    }
    return errs;
  }

  // showErrors puts each message under its field; ids no field has are returned.
  showErrors(errs) {
    const rest = {};
    for (const c of this.controls.values()) c.setError('');
    for (const [key, msg] of Object.entries(errs || {})) {
      const m = /^([^[]+)\[(\d+)\]\.(.+)$/.exec(key);
      const c = this.controls.get(m ? m[1] : key);
      if (!c) { rest[key] = msg; continue; }
      if (m && c.rowError) c.rowError(Number(m[2]), m[3], msg);
      else c.setError(msg);
    }
    return rest;
  }

  control(f, initial) {
    const type = fieldType(f);
    const id = this.prefix + '-' + f.id;
    const errorEl = h('p', {class: 'field-error', id: id + '-error', role: 'alert', hidden: true});
    const described = {'aria-describedby': id + '-error'};
    const label = h('label', {for: id, class: 'label', title: f.description || null},
      text(f.label, f.id), f.required ? h('span', {class: 'required', title: 'Required'}, ' *') : null,
      f.description ? h('span', {class: 'info', title: f.description, 'aria-label': f.description}, 'i') : null,
      h('span', {class: 'type'}, ' ' + text(f.type, 'string')));
    const c = {field: f, read: () => undefined, set: () => {}};
    let input;
    switch (type) {
      case 'boolean':
        input = h('input', Object.assign({type: 'checkbox', id, name: f.id, checked: initial === true}, described));
        c.read = () => input.checked;
        break;
      case 'integer':
      case 'number':
        input = h('input', Object.assign({
          type: 'number', id, name: f.id, step: type === 'integer' ? '1' : 'any',
          placeholder: f.placeholder || null, value: initial === undefined || initial === null ? '' : String(initial),
          min: num(f.validation && f.validation.min), max: num(f.validation && f.validation.max),
        }, described));
        c.read = () => {
          if (input.value === '' && input.validity.badInput) return NaN;
          return input.value === '' ? undefined : Number(input.value);
        };
        break;
      case 'date':
        input = h('input', Object.assign({type: 'date', id, name: f.id, value: typeof initial === 'string' ? initial : ''}, described));
        c.read = () => input.value || undefined;
        break;
      case 'select':
        input = selectInput(f, id, initial, described);
        c.read = () => optionValue(f, input.value);
        break;
      case 'multi_select':
        input = multiSelect(f, id, initial);
        c.read = () => Array.from(input.querySelectorAll('input:checked'), (x) => optionValue(f, x.value));
        break;
      case 'file':
        input = h('input', Object.assign({type: 'file', id, name: f.id, accept: f.accept || null}, described));
        c.read = () => (input.files.length ? {filename: input.files[0].name} : undefined);
        c.readAsync = () => (input.files.length ? fileValue(f, input.files[0]) : Promise.resolve(undefined));
        c.check = () => checkFile(f, input.files[0]);
        break;
      case 'list':
        return this.listControl(f, id, label, errorEl, initial);
      default: {
        const multiline = type === 'text' || f.multiline === true;
        const attrs = Object.assign({id, name: f.id, placeholder: f.placeholder || null, spellcheck: 'false'}, described);
        const v = initial === undefined || initial === null ? '' : String(initial);
        if (multiline) {
          input = h('textarea', Object.assign(attrs, {rows: String(Math.max(Number(f.min_rows) || 3, 1))}));
          input.value = v;
        } else {
          input = h('input', Object.assign(attrs, {type: 'text', value: v}));
        }
        c.read = () => (input.value === '' ? undefined : input.value);
      }
    }
    const notes = [];
    if (type === 'file') {
      notes.push([f.accept ? 'accept ' + f.accept : '', f.max_bytes ? 'at most ' + f.max_bytes + ' bytes' : '',
        'storage ' + (f.storage || 'studio')].filter(Boolean).join(', '));
    }
    if (f.options_source) notes.push('options from ' + JSON.stringify(f.options_source));
    if (f.depends_on) notes.push('shown when ' + f.depends_on.field + ' is ' + (f.depends_on.in || []).join(' or '));
    const rules = describeRules(f.validation);
    if (rules) notes.push(rules);
    c.wrap = h('div', {class: 'field field-' + type, 'data-field': f.id},
      label, input, notes.length ? h('p', {class: 'hint'}, notes.join(' · ')) : null, errorEl);
    c.setError = (msg) => setError(c.wrap, input, errorEl, msg);
    return c;
  }

  // listControl renders a list field: rows of item fields, added and removed by the user.
  listControl(f, id, label, errorEl, initial) {
    const items = (f.item_fields || []).filter((x) => x && fieldType(x) !== 'list');
    const rows = [];
    const body = h('div', {class: 'rows', id});
    const addRow = (values) => {
      const view = new FormView(items, values, {prefix: id + '-' + rows.length});
      const row = {view, el: null};
      const remove = h('button', {type: 'button', class: 'small', title: 'Remove this row'}, 'Remove');
      row.el = h('div', {class: 'row'}, view.el, remove);
      remove.addEventListener('click', () => {
        rows.splice(rows.indexOf(row), 1);
        row.el.remove();
        body.dispatchEvent(new Event('change', {bubbles: true}));
      });
      rows.push(row);
      body.append(row.el);
    };
    for (const v of Array.isArray(initial) ? initial : []) addRow(v && typeof v === 'object' ? v : {});
    const add = h('button', {type: 'button', class: 'small', id: id + '-add'}, 'Add a row');
    add.addEventListener('click', () => addRow({}));
    const wrap = h('div', {class: 'field field-list', 'data-field': f.id}, label, body, add,
      describeRules(f.validation) ? h('p', {class: 'hint'}, describeRules(f.validation)) : null, errorEl);
    const c = {
      field: f, wrap,
      read: () => (rows.length ? rows.map(() => ({})) : undefined),
      readAsync: async () => {
        const out = [];
        for (const r of rows) out.push(await r.view.values());
        return out.length ? out : undefined;
      },
      check: () => {
        const errs = {};
        const own = checkValue(f, rows.length ? rows : undefined);
        if (own) errs[f.id] = own;
        rows.forEach((r, i) => {
          for (const [k, msg] of Object.entries(r.view.check())) errs[f.id + '[' + i + '].' + k] = msg;
        });
        return errs;
      },
      setError: (msg) => {
        setError(wrap, null, errorEl, msg);
        for (const r of rows) r.view.showErrors({});
      },
      rowError: (i, itemField, msg) => {
        if (rows[i]) rows[i].view.showErrors(Object.assign({[itemField]: msg}));
      },
    };
    return c;
  }
}

function setError(wrap, input, errorEl, msg) {
  errorEl.textContent = msg || '';
  errorEl.hidden = !msg;
  wrap.classList.toggle('field-invalid', Boolean(msg));
  if (input) input.setAttribute('aria-invalid', msg ? 'true' : 'false');
}

function selectInput(f, id, initial, described) {
  const opts = options(f);
  const sel = h('select', Object.assign({id, name: f.id}, described));
  const chosen = opts.findIndex((o) => stringify(o.value) === stringify(initial));
  // A required select has no empty choice: its placeholder shows until the user picks one.
  if (f.required) {
    sel.append(h('option', {value: '', disabled: true, hidden: true, selected: chosen < 0}, f.placeholder || 'Choose…'));
  } else {
    sel.append(h('option', {value: '', selected: chosen < 0}, f.placeholder || '—'));
  }
  opts.forEach((o, i) => sel.append(h('option', {value: String(i), selected: i === chosen}, text(o.label, stringify(o.value)))));
  return sel;
}

function multiSelect(f, id, initial) {
  const chosen = new Set((Array.isArray(initial) ? initial : []).map(stringify));
  return h('fieldset', {id, class: 'choices'}, options(f).map((o, i) =>
    h('label', {class: 'choice'},
      h('input', {type: 'checkbox', name: f.id, value: String(i), checked: chosen.has(stringify(o.value))}),
      ' ' + text(o.label, stringify(o.value)))));
}

function options(f) {
  return (Array.isArray(f.options) ? f.options : []).filter((o) => o && typeof o === 'object');
}

// optionValue maps the index a select shows back to the option's own value.
function optionValue(f, index) {
  if (index === '' || index === undefined) return undefined;
  const o = options(f)[Number(index)];
  return o ? o.value : undefined;
}

// stringify is how depends_on compares values: true/false, numbers as written, strings as is.
function stringify(v) {
  if (typeof v === 'string') return v;
  if (v === undefined) return '';
  return JSON.stringify(v);
}

function num(v) { return typeof v === 'number' ? String(v) : null; }

function describeRules(v) {
  if (!v || typeof v !== 'object') return '';
  const parts = [];
  if (v.min_length !== undefined) parts.push('at least ' + plural(v.min_length, 'character'));
  if (v.max_length !== undefined) parts.push('at most ' + plural(v.max_length, 'character'));
  if (v.pattern !== undefined) parts.push('matches ' + v.pattern);
  if (v.min !== undefined) parts.push('≥ ' + v.min);
  if (v.max !== undefined) parts.push('≤ ' + v.max);
  if (v.min_items !== undefined) parts.push('at least ' + plural(v.min_items, 'item'));
  if (v.max_items !== undefined) parts.push('at most ' + plural(v.max_items, 'item'));
  return parts.join(', ');
}

// checkValue applies a field's type and validation rules to a value read from its control; it
// returns the message to show, or ''.
export function checkValue(f, v) {
  const type = fieldType(f);
  const empty = v === undefined || v === '' || (Array.isArray(v) && v.length === 0);
  if (empty) return f.required && type !== 'boolean' ? MSG_MISSING : '';
  const rules = (f.validation && typeof f.validation === 'object') ? f.validation : {};
  const rule = (msg) => rules.message || msg;
  if (type === 'number' || type === 'integer') {
    if (typeof v !== 'number' || !Number.isFinite(v)) return 'Input should be a valid number';
    if (type === 'integer' && !Number.isInteger(v)) return 'Input should be a valid integer';
    if (typeof rules.min === 'number' && v < rules.min) return rule('Input should be greater than or equal to ' + rules.min);
    if (typeof rules.max === 'number' && v > rules.max) return rule('Input should be less than or equal to ' + rules.max);
  }
  if ((TEXT_TYPES.has(type) || !KNOWN.has(f.type || 'string')) && typeof v === 'string') {
    const n = Array.from(v).length;
    if (typeof rules.min_length === 'number' && n < rules.min_length) return rule('String should have at least ' + plural(rules.min_length, 'character'));
    if (typeof rules.max_length === 'number' && n > rules.max_length) return rule('String should have at most ' + plural(rules.max_length, 'character'));
    if (typeof rules.pattern === 'string') {
      let re;
      try { re = new RegExp(rules.pattern, 'u'); } catch (e) { re = null; }
      if (re && !re.test(v)) return rule("String should match pattern '" + rules.pattern + "'");
    }
  }
  if ((type === 'multi_select' || type === 'list') && Array.isArray(v)) {
    if (typeof rules.min_items === 'number' && v.length < rules.min_items) return rule('List should have at least ' + plural(rules.min_items, 'item'));
    if (typeof rules.max_items === 'number' && v.length > rules.max_items) return rule('List should have at most ' + plural(rules.max_items, 'item'));
  }
  return '';
}

function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

function checkFile(f, file) {
  if (!file) return f.required ? MSG_MISSING : '';
  if (typeof f.max_bytes === 'number' && file.size > f.max_bytes) {
    return 'File is ' + file.size + ' bytes, more than the ' + f.max_bytes + ' this field accepts';
  }
  if (typeof f.accept === 'string' && f.accept.trim()) {
    const name = file.name.toLowerCase();
    const type = (file.type || '').toLowerCase();
    const ok = f.accept.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean).some((a) =>
      a.startsWith('.') ? name.endsWith(a) : a.endsWith('/*') ? type.startsWith(a.slice(0, -1)) : type === a);
    if (!ok) return 'File type not accepted: ' + f.accept;
  }
  return '';
}

// fileValue is what Studio sends for a file field. Inline storage carries the content (base64);
// studio storage carries a reference to bytes Studio keeps: there is no Studio here, so the
// workbench names the file by its SHA-256 (file_id "workbench-<sha256>"), which the agent can
// read as a reference but not fetch.
async function fileValue(f, file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  const mediaType = file.type || 'application/octet-stream';
  if (f.storage === 'inline') {
    return {storage: 'inline', filename: file.name, media_type: mediaType, size: file.size, encoding: 'base64', content: base64(bytes)};
  }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  const sha = Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
  return {storage: 'studio', file_id: 'workbench-' + sha.slice(0, 24), filename: file.name, media_type: mediaType, size: file.size, sha256: sha};
}

function base64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

// fieldErrors turns a result's errors into {key: message} for FormView.showErrors: a field error
// (errors[].field) goes to its field, a list row error to "field[item].item_field".
export function fieldErrors(errors) {
  const out = {};
  for (const e of Array.isArray(errors) ? errors : []) {
    if (!e || typeof e.field !== 'string' || !e.field) continue;
    const key = typeof e.item === 'number' && e.item_field ? e.field + '[' + e.item + '].' + e.item_field : e.field;
    out[key] = (e.message || e.code || 'invalid') + (e.code ? ' (' + e.code + ')' : '');
  }
  return out;
}
