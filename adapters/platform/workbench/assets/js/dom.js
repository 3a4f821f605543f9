// DOM helpers. Everything the agent or the controller sends is untrusted text: it only ever
// reaches the page through textContent and attribute values, never as HTML.

// h builds an element: h('a', {href: '#/x', class: 'btn'}, 'text', child...). An attribute
// whose value is false, null or undefined is left out; on* attributes are listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'value' && 'value' in el) {
      el.value = v;
    } else if (k === 'checked' || k === 'selected' || k === 'disabled' || k === 'multiple') {
      el[k] = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// clear empties el and appends children.
export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// pretty formats a JSON value with two-space indentation.
export function pretty(v) {
  return JSON.stringify(v, null, 2);
}

// jsonBlock shows a JSON value in a <pre>, with a copy button.
export function jsonBlock(v, attrs) {
  const text = typeof v === 'string' ? v : pretty(v);
  return h('div', {class: 'code'},
    copyButton(text),
    h('pre', Object.assign({class: 'json'}, attrs || {}), text));
}

// copyButton copies text to the clipboard (a secure context: loopback is one).
export function copyButton(text, label) {
  const b = h('button', {type: 'button', class: 'copy', title: 'Copy to the clipboard'}, label || 'Copy');
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      flash(b, 'Copied');
    } catch (e) {
      flash(b, 'Copy failed: select the text');
    }
  });
  return b;
}

function flash(b, text) {
  const was = b.textContent;
  b.textContent = text;
  setTimeout(() => { b.textContent = was; }, 1500);
}

// section is a titled block.
export function section(title, ...children) {
  return h('section', {class: 'block'}, h('h3', {}, title), ...children);
}

// table renders rows (arrays of cells) under headers; an empty list says so.
export function table(headers, rows, attrs) {
  if (!rows.length) return h('p', {class: 'empty'}, 'None.');
  return h('table', attrs || {},
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', {}, t)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

// flag shows a boolean property as a small badge.
export function flag(on, text, title) {
  return h('span', {class: on ? 'flag on' : 'flag', title: title || null}, text);
}

// badge is a small colored label: kind is ok, error, warn or info.
export function badge(kind, text, attrs) {
  return h('span', Object.assign({class: 'badge ' + kind}, attrs || {}), text);
}

// tree renders any JSON value as nested definition lists: the generic view of documents the
// workbench has no renderer for.
export function tree(v) {
  if (v === null || typeof v !== 'object') return h('span', {class: 'scalar ' + typeof v}, v === null ? 'null' : String(v));
  const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
  if (!entries.length) return h('span', {class: 'scalar'}, Array.isArray(v) ? '[]' : '{}');
  return h('dl', {class: 'tree'}, entries.map(([k, x]) => [h('dt', {}, k), h('dd', {}, tree(x))]));
}

// text returns v when it is a non-empty string, else fallback.
export function text(v, fallback) {
  return typeof v === 'string' && v !== '' ? v : fallback === undefined ? '' : fallback;
}

// params reads the query part of the location hash (#/page?a=1&b=2).
export function params() {
  const q = location.hash.split('?')[1] || '';
  return Object.fromEntries(new URLSearchParams(q));
}

// link builds a hash link to page with query parameters (empty values left out).
export function link(page, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return '#/' + page + (s ? '?' + s : '');
}
