// Contested tool names. Owns: the conflicts panel (each name several candidates register, who
// serves it now, why it asks, OpenCode's silent pick, and "Use this" for each candidate that can
// serve, "Keep this" for the one serving while it asks) and the choices this page sent until a snapshot shows them. Must not: decide who serves
// a name, or show a choice as made before Berth says so: that arrives with the next snapshot.

import { el } from '../dom.js';
import { arr, obj, str, plural } from '../words.js';
import { rerender, sourceLink } from '../page.js';
import { focusGlobal } from '../focus.js';
import { errorBox } from '../problems.js';
import { sendChoice, describeError } from '../transport.js';

// Choices sent from this page, by tool: { candidate, digest, phase: 'sending' | 'sent' | 'error',
// error, timer }.
// Settled once a snapshot shows the conflict chosen for that candidate, or its candidates moved.
const sent = Object.create(null);

const KINDS = {
  builtin: 'Berth built-in',
  'standalone-tool': 'tool file',
  'file-plugin': 'plugin',
  'npm-plugin': 'npm plugin',
  mcp: 'MCP server',
};

/** The conflicts a snapshot lists, `[]` for none. */
export const conflictsOf = (snap) => arr(obj(snap).conflicts).map(obj);

/** Forgets sent choices the snapshot settled (chosen as sent, or a new candidate set). */
export function settleChoices(snap) {
  const byTool = new Map(conflictsOf(snap).map((c) => [str(c.tool), c]));
  for (const tool of Object.keys(sent)) {
    const c = byTool.get(tool);
    const s = sent[tool];
    if (!c || str(c.digest) !== s.digest
      || (c.state === 'chosen' && str(c.serving) === s.candidate && s.phase !== 'error')) {
      clearTimeout(s.timer);
      delete sent[tool];
    }
  }
}

export function renderConflicts(snap) {
  const conflicts = conflictsOf(snap);
  if (!conflicts.length) return null;
  const asking = conflicts.filter((c) => c.state === 'asks').length;
  return el('section', {
    className: 'panel conflicts-panel',
    testid: 'conflicts',
    dataset: { count: conflicts.length, asking },
    attrs: { 'aria-label': 'Tool names several sources register' },
  }, [
    el('h2', { className: 'section-title' }, [
      'Tool conflicts',
      el('span', { className: 'section-count', text: conflicts.length }),
      el('span', {
        className: 'section-note',
        text: asking
          ? asking + ' ' + plural(asking, 'waits', 'wait') + ' for your choice \u2014 nothing switched silently'
          : 'each served by your choice',
      }),
    ]),
    el('ul', { className: 'conflict-items' }, conflicts.map(renderConflict)),
  ]);
}

function renderConflict(c) {
  const tool = str(c.tool);
  const s = sent[tool];
  const busy = !!s && s.phase !== 'error';
  return el('li', {
    className: 'conflict conflict-' + str(c.state),
    testid: 'conflict',
    dataset: { tool, state: str(c.state), serving: str(c.serving) },
  }, [
    el('p', { className: 'conflict-head' }, [
      el('span', { className: 'tool-name mono', text: tool }),
      ' ',
      c.state === 'asks'
        ? el('span', { className: 'badge badge-attention', testid: 'conflict-asks', text: 'Choose' })
        : el('span', { className: 'badge badge-ok badge-quiet', text: 'Your choice' }),
    ]),
    el('p', { className: 'conflict-reason', testid: 'conflict-reason', text: str(c.reason) }),
    el('ul', { className: 'conflict-candidates' }, arr(c.candidates).map(obj).map((cand) => {
      const id = str(cand.id);
      const serving = str(c.serving) === id;
      const chosen = serving && c.state === 'chosen';
      let action = null;
      if (!chosen && cand.available) {
        const b = el('button', {
          className: 'btn btn-small btn-allow',
          // While it asks, the one serving can be confirmed as the choice.
          text: busy && s.candidate === id ? 'Choosing\u2026' : serving ? 'Keep this' : 'Use this',
          testid: 'choose',
          dataset: { action: 'choose', candidate: id, focusGlobal: 'choose:' + tool + ':' + id },
          attrs: { type: 'button', 'aria-label': (serving ? 'Keep ' : 'Use ') + id + ' for ' + tool },
        });
        b.disabled = busy;
        b.addEventListener('click', () => choose(c, id));
        action = b;
      }
      return el('li', {
        className: 'conflict-candidate' + (serving ? ' is-serving' : ''),
        testid: 'conflict-candidate',
        dataset: { candidate: id, serving: serving ? '1' : '' },
      }, [
        id === 'builtin'
          ? el('span', { className: 'mono', text: 'builtin' })
          : sourceLink(id, { testid: 'candidate-source' }),
        el('span', { className: 'tag', text: KINDS[str(cand.kind)] || str(cand.kind) }),
        serving ? el('span', { className: 'muted', testid: 'candidate-serving', text: 'serves it now' }) : null,
        cand.available ? null : el('span', { className: 'muted', text: 'cannot serve now (it failed to load or is held)' }),
        str(c.opencode_winner) === id ? el('span', { className: 'muted', title: 'OpenCode 1.18.4 lets the last one win silently', text: 'OpenCode\u2019s pick' }) : null,
        action,
      ]);
    })),
    s && s.phase === 'error' ? errorBox(s.error, 'Could not choose: ', 'choose-error') : null,
  ]);
}

function choose(c, candidate) {
  const tool = str(c.tool);
  if (!sendChoice || (sent[tool] && sent[tool].phase !== 'error')) return;
  const entry = { candidate, digest: str(c.digest), phase: 'sending', error: null };
  sent[tool] = entry;
  rerender();
  let answer;
  try {
    answer = Promise.resolve(sendChoice(tool, candidate));
  } catch (err) {
    answer = Promise.reject(err);
  }
  answer.then(() => {
    // Settled by the snapshot that shows it; until then the button says "Choosing…".
    if (sent[tool] !== entry) return;
    entry.phase = 'sent';
    entry.timer = setTimeout(() => {
      if (sent[tool] === entry) {
        delete sent[tool];
        rerender();
      }
    }, 15000);
  }, (err) => {
    if (sent[tool] !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    focusGlobal('choose:' + tool + ':' + candidate);
  });
}
