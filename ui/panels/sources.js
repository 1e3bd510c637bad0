// The sources, grouped by kind, one card each. Owns: a card's head, state, facts (with the mode
// it runs in), what it can do and its technical details; the empty state. Must not: decide for
// the person or talk to Berth: the approval parts of a card are approvals.js's, the paused parts
// paused.js's, what the policy keeps back limits.js's, versions and updates versions.js's, a
// remote MCP server's sign-in sign_in.js's.

import { el, details } from '../dom.js';
import {
  arr, obj, str, num, stateInfo, kindLabel, category, isAsking, sourceName, approvalStep, BACKENDS,
} from '../words.js';
import { view, sourceAnchor, hostAnchor } from '../page.js';
import { jumpLink } from '../focus.js';
import { renderDiagnostics, problemPill } from '../problems.js';
import {
  later, laterKey, originParts, capsList, renderApprovalPanel, renderDeferred, renderDecided,
} from './approvals.js';
import { renderPausedSource, renderPausedParts, pausedPartsPill } from './paused.js';
import { renderLimited, limitedPill } from './limits.js';
import { renderVersions } from './versions.js';
import { renderSignIn } from './sign_in.js';

export function renderEmpty() {
  return el('section', { className: 'panel empty', testid: 'empty-state' }, [
    el('h2', { className: 'empty-title', text: 'No OpenCode plugins or tools were found' }),
    el('p', { className: 'empty-text' }, [
      'Berth looks where OpenCode does: the ',
      el('code', { text: 'plugins/' }),
      ' and ',
      el('code', { text: 'tools/' }),
      ' folders of the config folders listed below, and the ',
      el('code', { text: 'plugin' }),
      ' list in ',
      el('code', { text: 'opencode.json' }),
      ' files. Add a plugin there and it shows up here; nothing runs until you approve it.',
    ]),
  ]);
}

export function renderSources(sources) {
  const indexed = sources.map((s, i) => ({ s: obj(s), i }));
  const byOrder = (a, b) => {
    const oa = num(a.s.order);
    const ob = num(b.s.order);
    if (oa !== null && ob !== null && oa !== ob) return oa - ob;
    return a.i - b.i;
  };
  const of = (cat) => indexed.filter((x) => category(x.s) === cat).sort(byOrder);
  const groups = [
    ['plugin', 'Plugins', 'in load order'],
    ['tool', 'Custom tools', 'from tools/ folders'],
    ['mcp', 'MCP servers', 'listed in config'],
    ['other', 'Other sources', ''],
  ]
    .map(([cat, title, note]) => [cat, title, note, of(cat)])
    .filter((g) => g[3].length)
    .map(([cat, title, note, items]) => renderGroup(cat, title, note, items));
  return el('section', { className: 'sources', testid: 'source-list' }, groups);
}

function renderGroup(key, title, note, items) {
  return el('div', { className: 'source-group', dataset: { group: key } }, [
    el('h2', { className: 'section-title' }, [
      title,
      el('span', { className: 'section-count', text: items.length }),
      note ? el('span', { className: 'section-note', text: note }) : null,
    ]),
    el('ol', { className: 'source-items' }, items.map((x, pos) => el('li', null, renderSource(x.s, pos)))),
  ]);
}

// Which OpenCode plugin API a plugin is written for (`capabilities.generation`, read from its
// default export before it runs).
const GENERATIONS = {
  v1: { text: 'V1', title: 'Written for OpenCode 1 (its `server` entry); OpenCode 2 does not run it, Berth does' },
  v2: { text: 'V2', title: 'Written for OpenCode 2 (`setup` / `effect`); Berth runs it through its V2 adapter' },
  'v1+v2': { text: 'V1 + V2', title: 'Has entries for both: Berth runs its V1 `server`, as OpenCode 1.18.29 and later do' },
};

function generationTag(s) {
  const g = GENERATIONS[str(obj(s.capabilities).generation)];
  if (!g) return null;
  return el('span', { className: 'generation', testid: 'generation', title: g.title, text: 'OpenCode ' + g.text });
}

function renderSource(s, pos) {
  const info = stateInfo(s.state);
  const caps = obj(s.capabilities);
  const diags = arr(s.diagnostics);
  const order = num(s.order);
  const approval = obj(s.approval);
  const pending = s.state === 'pending-approval';
  const asking = isAsking(s);
  const deferred = asking && later.has(laterKey(s));
  const step = pending ? approvalStep(s) : null;
  let badgeLabel = info.label;
  let badgeTone = info.tone;
  // A remote MCP server that wants a sign-in has not failed: it waits for the person.
  const wantsSignIn = s.state === 'load-failed' && s.sign_in && !obj(s.sign_in).signed_in;
  if (wantsSignIn) {
    badgeLabel = obj(s.sign_in).waiting_at ? 'Signing in' : 'Waiting for sign-in';
    badgeTone = 'attention';
  } else if (s.state === 'disabled' && approval.decision === 'deny') {
    badgeLabel = 'Denied';
  } else if (step && step.n !== null && step.of !== null) {
    badgeLabel = 'Waiting for approval (' + step.n + ' of ' + step.of + ')';
  } else if (pending && approval.decision === 'allow') {
    badgeLabel = 'Waiting for approval again';
  }

  // A waiting source shows its problems before the question: they matter to the answer.
  // A version Berth will not load leads with why.
  const blocked = s.state === 'incompatible-version';
  const problems = diags.length && !blocked ? renderDiagnostics(diags) : null;
  const body = asking && !deferred
    // An MCP server's launcher can be replaced by a prepared package before it is approved.
    ? [problems, renderApprovalPanel(s, caps), category(s) === 'mcp' ? renderVersions(s) : null]
    : [
      blocked ? renderBlocked(s, diags) : null,
      s.state === 'paused' ? renderPausedSource(s) : null,
      asking ? renderDeferred(s) : renderDecided(s),
      s.state === 'approved' ? renderApproved(s) : null,
      s.state === 'preparing' ? renderPreparing(s) : null,
      s.state === 'active' ? renderRunsIn(s) : null,
      s.state === 'updating' ? renderUpdating(s) : null,
      renderPausedParts(s),
      renderLimited(s),
      renderVersions(s),
      renderSignIn(s),
      renderMeta(s),
      renderCaps(caps),
      problems,
    ];

  return el('article', {
    className: 'source tone-' + badgeTone + (asking && !deferred ? ' is-asking' : ''),
    testid: 'source',
    dataset: { sourceId: str(s.id), state: str(s.state), kind: str(s.kind) },
    attrs: { tabindex: '-1', id: sourceAnchor(s.id) },
  }, [
    el('header', { className: 'source-head' }, [
      el('span', {
        className: 'order',
        title: order !== null ? 'Load order ' + (order + 1) : 'Position ' + (pos + 1),
        text: order !== null ? order + 1 : pos + 1,
      }),
      el('div', { className: 'source-title' }, [
        el('h3', { className: 'source-name', testid: 'source-name', text: sourceName(s) }),
        el('p', { className: 'source-sub' }, [
          el('span', { className: 'kind', text: kindLabel(s.kind) }),
          generationTag(s),
          el('span', { className: 'sep', text: '·', attrs: { 'aria-hidden': 'true' } }),
          el('span', { className: 'mono source-id', testid: 'source-id', text: str(s.id) }),
        ]),
      ]),
      diags.length ? problemPill(diags) : null,
      pausedPartsPill(s),
      limitedPill(s),
      el('span', {
        className: 'badge badge-' + badgeTone,
        testid: 'state',
        dataset: { state: str(s.state) },
        text: badgeLabel,
      }),
    ]),
    ...body,
    renderTechnical(s, caps),
  ]);
}

function renderMeta(s) {
  const npm = obj(s.npm);
  // The package, when it says more than the entry does.
  const pkg = !!npm.name && (str(npm.name) !== str(s.entry) || (!!npm.request && str(npm.request) !== str(npm.name)));
  return el('dl', { className: 'source-meta' }, [
    el('dt', { text: 'Entry' }),
    el('dd', { className: 'mono', testid: 'source-entry', text: str(s.entry) }),
    pkg ? el('dt', { text: 'Package' }) : null,
    pkg ? el('dd', { testid: 'source-npm' }, [
      el('span', { className: 'mono', text: str(npm.name) }),
      npm.request && str(npm.request) !== str(npm.name)
        ? el('span', { className: 'tag', title: 'the version asked for in the config', text: 'asks for ' + str(npm.request) })
        : null,
    ]) : null,
    el('dt', { text: 'Listed in' }),
    el('dd', null, originParts(s)),
    str(obj(s.run_mode).why) ? el('dt', { text: 'Mode' }) : null,
    str(obj(s.run_mode).why) ? renderRunMode(s) : null,
  ]);
}

/** The mode it runs in, and why (the layer that decided it is named in the words). */
function renderRunMode(s) {
  const m = obj(s.run_mode);
  return el('dd', {
    testid: 'run-mode',
    dataset: { mode: str(m.mode), layer: str(m.layer) },
  }, [
    el('span', { className: 'tag mode-' + str(m.mode), text: str(m.mode) || 'unknown' }),
    el('span', { className: 'run-mode-why', testid: 'run-mode-why', text: str(m.why) }),
  ]);
}

/** Decided, not loaded in this process yet. */
function renderApproved(s) {
  return el('p', { className: 'source-status status-approved', testid: 'approved-note', attrs: { role: 'status' } }, [
    el('span', { className: 'status-dot', attrs: { 'aria-hidden': 'true' } }),
    'Approved; not loaded yet. Berth loads it next, and then shows what it registers.',
  ]);
}

/** An approved package being fetched (or a plugin's dependencies being installed). */
function renderPreparing(s) {
  const npm = obj(s.npm);
  const download = !!npm.name || s.kind === 'npm-plugin';
  return el('div', { className: 'source-status status-preparing', testid: 'preparing', attrs: { role: 'status' } }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    el('span', { text: download ? 'Downloading its package\u2026' : 'Preparing its dependencies\u2026' }),
    npm.name
      ? el('span', { className: 'mono status-detail', text: str(npm.name) + (npm.request ? ' ' + str(npm.request) : '') })
      : null,
  ]);
}

/** Loaded before, loading again in a fresh host; its calls wait meanwhile. */
function renderUpdating(s) {
  return el('p', { className: 'source-status status-preparing', testid: 'updating-note', attrs: { role: 'status' } }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    'Updating: its old host finishes its calls and stops, then it loads again. Calls made now wait and are answered by the new version.',
  ]);
}

/** Which plugin host process runs an active source. */
function renderRunsIn(s) {
  const h = view.hostBySource.get(str(s.id));
  if (!h) return null;
  const backend = str(h.backend);
  const pid = str(h.pid);
  return el('p', { className: 'source-status status-runs', testid: 'runs-in', dataset: { pid } }, [
    el('span', { className: 'status-dot', attrs: { 'aria-hidden': 'true' } }),
    'Runs in ' + (BACKENDS[backend] || backend || 'a') + ' host ',
    jumpLink('#' + hostAnchor(pid), 'pid ' + pid, { focus: 'runs-in', title: 'Show this process under Plugin hosts' }),
  ]);
}

/** A source Berth will not load as it is: the reason first, prominently. */
function renderBlocked(s, diags) {
  return el('div', { className: 'blocked', testid: 'blocked', attrs: { role: 'note' } }, [
    el('p', { className: 'blocked-title', text: 'Berth does not load this version: it is not made for the OpenCode version Berth provides.' }),
    diags.length ? renderDiagnostics(diags) : null,
  ]);
}

function renderCaps(caps) {
  return el('div', { className: 'caps' }, [
    el('h3', { className: 'caps-title', text: 'What it can do' }),
    capsList(caps),
  ]);
}

function renderTechnical(s, caps) {
  const rows = [];
  const add = (label, value, mono) => {
    if (value === undefined || value === null || value === '') return;
    if (Array.isArray(value) && !value.length) return;
    const text = Array.isArray(value) ? value.map(str).join(', ') : str(value);
    rows.push(el('dt', { text: label }), el('dd', { className: mono ? 'mono' : '', text }));
  };
  add('Spec', s.spec, true);
  if (s.options !== undefined && s.options !== null) add('Options', JSON.stringify(s.options), true);
  add('Files', caps.files, true);
  add('Exports', caps.exports, true);
  add('Tools', caps.tools, true);
  add('Packages', caps.packages, true);
  add('Install scripts', caps.install_scripts, true);
  add('OpenCode versions', caps.engines_opencode, true);
  add('Plugin ID', caps.plugin_id, true);
  add('Digest', s.digest, true);
  add('Capability digest', s.capability_digest, true);
  if (!rows.length) return null;
  return details('tech:' + str(s.id), false, 'Technical details',
    el('dl', { className: 'tech-list' }, rows), { className: 'tech' });
}
