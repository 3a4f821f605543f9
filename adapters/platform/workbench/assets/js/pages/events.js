// Events: the live effect stream (GET /a2a/events), kept since the workbench opened, newest
// first, with the stream's state, the last event id and the reconnections.

import {h, clear, badge, jsonBlock, text} from '../dom.js';
import {effectList} from '../result.js';

export function eventsPage(root, app) {
  const s = app.stream;
  const state = h('p', {id: 'events-state', class: 'hint'});
  const list = h('ul', {id: 'events', class: 'events'});
  const reconnect = h('button', {type: 'button', id: 'events-reconnect'}, 'Reconnect');
  const clearBtn = h('button', {type: 'button', id: 'events-clear'}, 'Clear');
  reconnect.addEventListener('click', () => s.reconnect());
  clearBtn.addEventListener('click', () => s.clear());
  root.append(h('div', {class: 'page-head'}, h('h2', {}, 'Events'),
    h('p', {class: 'hint'}, 'GET /a2a/events: one supervaizer.effect event per action call, whatever made it (this workbench, Studio, curl). ' +
      'A dropped stream is reopened with Last-Event-ID, and the controller replays what was missed.'),
    reconnect, ' ', clearBtn), state, list);

  const showState = () => {
    clear(state, 'Stream ', badge(s.state === 'open' ? 'ok' : s.state === 'reconnecting' ? 'warn' : 'info', s.state, {id: 'events-stream-state'}),
      s.detail ? ' — ' + s.detail : '', ' · connections ', h('span', {id: 'events-connections'}, String(s.connections)),
      ' · last event id ', h('code', {id: 'events-last-id'}, s.lastID || 'none'),
      s.lastHeartbeat ? ' · last heartbeat ' + s.lastHeartbeat.toLocaleTimeString() : '');
  };
  const render = () => clear(list, s.events.map(eventItem));
  showState();
  render();
  const listener = (what) => {
    if (!root.isConnected) return;
    showState();
    if (what.event) list.prepend(eventItem(what.event));
    if (what.cleared) render();
  };
  s.on(listener);
  app.leave = () => s.listeners.delete(listener);
}

function eventItem(e) {
  const d = e.data && typeof e.data === 'object' ? e.data : null;
  return h('li', {class: 'event', 'data-event': e.name, 'data-id': e.id},
    h('p', {}, h('span', {class: 'n'}, '#' + e.n), ' ', h('code', {class: 'event-name'}, e.name), ' ', h('span', {class: 'hint'}, e.at.toLocaleTimeString() + (e.id ? ' · id ' + e.id : '')),
      d && d.action ? [' · ', h('code', {class: 'event-action'}, d.action), ' on ', h('code', {}, text(d.agent_slug, '?')),
        h('span', {class: 'hint'}, ' request ' + text(d.request_id, '?'))] : null),
    d && Array.isArray(d.effects) ? effectList(d.effects) : null,
    h('details', {}, h('summary', {}, 'data'), jsonBlock(e.raw)));
}
