// Calls: the last requests the workbench made to the controller and their answers, each
// copyable as a curl command that repeats it.

import {h, clear, badge, jsonBlock, copyButton, pretty} from '../dom.js';

export function callsPage(root, app) {
  const list = h('ul', {id: 'calls', class: 'calls'});
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Calls'),
    h('p', {class: 'hint'}, 'The last 50 requests to the controller, newest first. A key that is not public knowledge and the workspace token ' +
      'are read from $SUPERVAIZER_API_KEY and $TOKEN in the curl commands.')), list);
  const render = () => clear(list, app.client.calls.length ? app.client.calls.map((c) => callItem(app.client, c))
    : h('p', {class: 'empty'}, 'No call yet.'));
  render();
  const listener = () => { if (root.isConnected) render(); };
  app.client.onCall(listener);
  app.leave = () => app.client.listeners.delete(listener);
}

function callItem(client, c) {
  const curl = client.curl(c);
  let request = c.body;
  try { request = c.body === undefined ? undefined : pretty(JSON.parse(c.body)); } catch (e) { /* shown as sent */ }
  let response = c.response;
  try { response = pretty(JSON.parse(c.response)); } catch (e) { /* shown as received */ }
  const rpc = c.body ? safeMethod(c.body) : '';
  return h('li', {class: 'call', 'data-n': String(c.n)},
    h('p', {class: 'call-line'}, h('span', {class: 'n'}, '#' + c.n), ' ', h('code', {}, c.method + ' ' + c.path), rpc ? [' ', h('code', {class: 'rpc-method'}, rpc)] : null, ' ',
      badge(c.status === 200 && !c.error ? 'ok' : 'error', c.status ? String(c.status) : 'no answer'),
      h('span', {class: 'hint'}, ' ' + c.at.toLocaleTimeString() + ' · ' + c.ms + ' ms'), c.error ? h('span', {class: 'invalid'}, ' ' + c.error) : null),
    h('div', {class: 'curl'}, copyButton(curl, 'Copy as curl'), h('pre', {class: 'curl-command'}, curl)),
    h('details', {}, h('summary', {}, 'Request and answer'),
      request !== undefined ? [h('h4', {}, 'Request'), jsonBlock(request)] : null,
      h('h4', {}, 'Answer'), jsonBlock(response)));
}

function safeMethod(body) {
  try { return JSON.parse(body).method || ''; } catch (e) { return ''; }
}
