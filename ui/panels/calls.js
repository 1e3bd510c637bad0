// The latest tool calls. Owns: the recent calls table, from their receipts, and what an open
// call waits for (queued for its host, its plugin loading again or its dependencies being
// prepared, running in the plugin or its MCP server, or waiting for the person's answer to a
// permission prompt it asked). Must not: show a call's arguments or output (`berth receipts`
// has them).

import { el, th } from '../dom.js';
import { arr, obj, str, num, clockText } from '../words.js';
import { sourceLink, view } from '../page.js';

// How a call ended, as its receipt says.
const CALL_STATES = {
  accepted: { label: 'Queued', tone: 'progress', title: 'Accepted; it starts when its host takes it' },
  running: { label: 'Running', tone: 'progress' },
  completed: { label: 'Completed', tone: 'ok' },
  failed: { label: 'Failed', tone: 'error' },
  cancelled: { label: 'Cancelled', tone: 'limited' },
  unknown: { label: 'Outcome unknown', tone: 'attention' },
};

/** The latest tool calls (their receipts, without arguments or output), newest first. */
export function renderCalls(snap) {
  const calls = arr(snap.calls).map(obj);
  if (!calls.length) return null;
  // A prompt names the call that asked it (its receipt's id).
  const asking = new Set(arr(snap.prompts).map((p) => str(obj(p).call_id)));
  const mcp = new Set(arr(snap.tools).map(obj).filter((t) => str(obj(t.provider).kind) === 'mcp').map((t) => str(t.name)));
  return el('section', { className: 'panel calls-panel', testid: 'call-list' }, [
    el('h2', { className: 'section-title' }, [
      'Recent calls',
      el('span', { className: 'section-count', text: calls.length }),
      el('span', { className: 'section-note', text: 'newest first — `berth receipts` has their arguments and output' }),
    ]),
    el('table', { className: 'hosts calls' }, [
      el('thead', null, el('tr', null, [
        th('When'), th('Tool'), th('From'), th('Took', 'num'), th('Outcome'),
      ])),
      el('tbody', null, calls.map((c, i) => renderCall(c, i, asking, mcp))),
    ]),
  ]);
}

function renderCall(c, i, asking, mcp) {
  const status = str(c.status);
  let info = CALL_STATES[status] || { label: status || 'unknown', tone: 'neutral' };
  if (status === 'running' || status === 'accepted') info = openCall(c, status, info, asking, mcp);
  const started = num(c.created_at_ms);
  const ended = num(c.updated_at_ms);
  const open = status === 'accepted' || status === 'running';
  const took = !open && started !== null && ended !== null ? Math.max(0, ended - started) : null;
  const error = obj(c.error);
  const note = status === 'unknown'
    ? 'Berth stopped during this call: it may or may not have taken effect, and it was not repeated.'
    : error.message ? str(error.message) : '';
  return el('tr', {
    className: 'call',
    testid: 'call',
    dataset: { receiptId: str(c.receipt_id), status, tool: str(c.tool) },
    title: str(c.receipt_id),
  }, [
    el('td', { className: 'call-when' }, started !== null
      ? el('time', { text: clockText(started), attrs: { datetime: new Date(started).toISOString() } })
      : null),
    el('td', { className: 'call-tool mono', text: str(c.tool) }),
    el('td', { className: 'call-from' }, sourceLink(c.source_id, {
      testid: 'call-source',
      focusGlobal: 'call:' + i + ':' + str(c.receipt_id),
    })),
    el('td', { className: 'num', testid: 'call-took', text: took === null ? '—' : took + ' ms' }),
    el('td', { className: 'call-outcome' }, [
      el('span', { className: 'badge badge-' + info.tone, testid: 'call-status', dataset: { waits: info.waits }, title: info.title, text: info.label }),
      error.code && str(error.code) !== status
        ? el('span', { className: 'call-code mono', testid: 'call-code', text: str(error.code) })
        : null,
      note ? el('div', { className: 'call-note', testid: 'call-note', text: note }) : null,
    ]),
  ]);
}

/** What an open call waits for: the person, its source coming back, its host, or nothing. */
function openCall(c, status, info, asking, mcp) {
  if (asking.has(str(c.receipt_id))) return { label: 'Waiting for your answer', tone: 'attention', waits: 'person' };
  const source = obj(view.sourceById.get(str(c.source_id)));
  if (source.state === 'updating') {
    return { label: 'Waiting: the plugin loads again', tone: 'progress', waits: 'reload', title: 'Its host is being replaced (a new version or a changed file); the call runs once it is back' };
  }
  if (source.state === 'preparing') {
    return { label: 'Waiting: preparing dependencies', tone: 'progress', waits: 'prepare', title: 'npm is installing what the plugin imports (install scripts off)' };
  }
  if (status === 'accepted') return { ...info, waits: 'queue' };
  return { label: mcp.has(str(c.tool)) ? 'Running in its MCP server' : 'Running in the plugin', tone: 'progress', waits: 'run' };
}
