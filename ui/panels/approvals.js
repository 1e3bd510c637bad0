// Deciding about a source. Owns: the approval panel of a waiting source, "Later", the decision in
// force with the way to change it, and the decisions this page sent until a snapshot shows them.
// Must not: change a source's state itself: the new state arrives with the next snapshot.

import { el } from '../dom.js';
import {
  arr, obj, str, num, kindLabel, category, isTool, scopeLabel, sourceName, approvalStep, BACKENDS, whenText, domainWords,
} from '../words.js';
import { rerender } from '../page.js';
import { focusIn } from '../focus.js';
import { sendDecision, describeError } from '../transport.js';

// Decisions sent from this page, by source id: { action, phase: 'sending' | 'sent' | 'error',
// error, before: the source's approval when it was sent }. An entry is settled (removed) as
// soon as a snapshot shows the source's decision changed.
const decisions = Object.create(null);
// Sources the person chose to decide "Later" in this page session, by id and capability
// digest: a source that changes again asks again.
export const later = new Set();

export function originParts(s) {
  return [
    el('span', { className: 'mono', testid: 'source-origin', text: str(s.origin) }),
    el('span', { className: 'scope scope-' + str(s.scope), testid: 'source-scope', text: scopeLabel(s.scope) }),
  ];
}

export function capsList(caps) {
  const summary = arr(caps.summary);
  return summary.length
    ? el('ul', { className: 'caps-list', testid: 'capabilities' }, summary.map((line) =>
      el('li', { className: caps.contents_unknown ? 'caps-unknown' : '', text: str(line) })))
    : el('p', { className: 'caps-none', text: 'Nothing is known about it yet.' });
}

export function laterKey(s) {
  return [str(s.id), str(s.capability_digest || s.digest), str(s.state),
    arr(obj(s.approval).grew).map(str).join('|')].join('@');
}

/** "plugin" or "tool", for sentences. */
function noun(s) {
  return isTool(s) ? 'tool' : category(s) === 'mcp' ? 'server' : 'plugin';
}

function timeEl(ms) {
  const n = num(ms);
  if (n === null) return null;
  return el('time', {
    testid: 'decided-at',
    text: whenText(n),
    attrs: { datetime: new Date(n).toISOString() },
  });
}

function runsWhere(approval) {
  const backend = str(approval.backend);
  return [
    el('strong', { text: BACKENDS[backend] || backend || 'its runtime' }),
    ' on ',
    el('span', { testid: 'approval-domain', title: 'The execution domain this decision applies to: ' + str(approval.domain), text: domainWords(approval.domain) }),
    ', with that user\u2019s rights',
  ];
}

export function renderApprovalPanel(s, caps) {
  const id = str(s.id);
  const approval = obj(s.approval);
  const grew = arr(approval.grew).map(str).filter(Boolean);
  // A later load of changed bytes the person did not decide on, found to register more than
  // the version that was active before.
  const activation = s.state === 'pending-activation';
  // An npm plugin's two steps: allow the fetch (its bytes are not here yet), then its bytes.
  const step = activation ? null : approvalStep(s);
  const fetchStep = !!step && step.n === 1;
  const contentsStep = !!step && step.n === 2;
  const again = !step && approval.decision === 'allow';
  const name = sourceName(s);
  const what = noun(s);
  const local = s.kind === 'file-plugin' || isTool(s);
  const variant = activation ? 'activation' : fetchStep ? 'fetch' : contentsStep ? 'contents' : again ? 'again' : 'first';

  let intro;
  if (activation) {
    const at = timeEl(approval.decided_at_ms);
    intro = ['You approved ', el('strong', { text: name }), at ? ' on ' : '', at,
      '. Its code changed since, and its new version registers more than the version that was active. ' +
      'Berth stopped the new version; OpenCode uses none of it until you decide.'];
  } else if (fetchStep) {
    intro = ['OpenCode would load ', el('strong', { text: name }), ' from npm for ',
      s.scope === 'local' ? 'this project' : 'all your projects',
      '. Berth has not fetched it yet, so what it contains cannot be known: allowing the fetch ' +
      'downloads the package with its install scripts off, and Berth shows what it contains before any of it runs.'];
  } else if (contentsStep) {
    intro = ['Berth fetched ', el('strong', { text: name }), ' with its install scripts off. ' +
      'None of its code has run. Decide on what it can do.'];
  } else if (again) {
    const at = timeEl(approval.decided_at_ms);
    intro = ['You approved ', el('strong', { text: name }), at ? ' on ' : '', at,
      '. It has changed since, so Berth will not run the new version until you decide again.'];
  } else {
    intro = ['OpenCode would load ', el('strong', { text: name }), ' as a ', kindLabel(s.kind).toLowerCase(),
      ' for ', s.scope === 'local' ? 'this project' : 'all your projects',
      '. Berth has not run any of its code.',
      local ? ' Once you allow it, it loads and registers what it contributes; you are not asked a second time.' : ''];
  }

  const grewTitle = activation ? 'Its new version registers more:'
    : contentsStep ? 'Found in the fetched package:' : 'Asked again because it now:';
  const grewBlock = grew.length
    ? el('div', { className: 'approval-grew', testid: 'approval-grew', attrs: { role: 'note' } }, [
      el('p', { className: 'approval-grew-title', text: grewTitle }),
      el('ul', { className: 'approval-grew-list' }, grew.map((g) => {
        const i = g.indexOf(': ');
        return el('li', { dataset: { grew: g } }, i > 0
          ? [el('strong', { text: g.slice(0, i) }), ': ', el('span', { className: 'mono', text: g.slice(i + 2) })]
          : [el('strong', { text: g })]);
      })),
    ])
    : again
      ? el('div', { className: 'approval-grew', testid: 'approval-changed', attrs: { role: 'note' } }, [
        el('p', { className: 'approval-grew-title', text: 'Asked again because its code changed since you approved it.' }),
      ])
      : null;

  const runMode = obj(s.run_mode);
  const facts = el('dl', { className: 'approval-facts' }, [
    el('dt', { text: 'Plugin id' }),
    el('dd', { className: 'mono', testid: 'approval-id', text: id }),
    el('dt', { text: local ? 'File' : 'Package' }),
    el('dd', { className: 'mono', testid: 'source-entry', text: str(s.entry) }),
    el('dt', { text: 'Comes from' }),
    el('dd', { className: 'approval-origin' }, originParts(s)),
    el('dt', { text: activation ? 'Runs' : 'Would run' }),
    el('dd', { testid: 'approval-runs' }, runsWhere(approval)),
    str(runMode.why) ? el('dt', { text: 'Mode' }) : null,
    str(runMode.why) ? el('dd', { testid: 'approval-mode', dataset: { mode: str(runMode.mode) }, text: str(runMode.why) }) : null,
    el('dt', { text: 'What it could do' }),
    el('dd', null, capsList(caps)),
  ]);

  const busy = isBusy(id);
  const btn = (action, label, cls, aria) => {
    const b = el('button', {
      className: 'btn ' + cls,
      text: label,
      dataset: { action, focus: action },
      attrs: { type: 'button', 'aria-label': aria },
    });
    b.disabled = busy;
    b.addEventListener('click', () => {
      if (action === 'later') deferSource(s);
      else decide(s, action);
    });
    return b;
  };

  const title = activation
    ? 'Allow its new version to register more?'
    : fetchStep ? 'Allow Berth to fetch this ' + what + '?'
      : again ? 'Allow the changed ' + what + ' to run?' : 'Allow this ' + what + ' to run?';
  const note = activation
    ? [
      el('strong', { text: 'Allowing lets OpenCode call what its new version registers, with your user\u2019s rights.' }),
      ' Its code already ran once when Berth loaded it; denying stops it and keeps it from loading again.',
    ]
    : fetchStep
      ? [
        el('strong', { text: 'Allowing the fetch runs none of its code.' }),
        ' \u201cAllow, including what it fetches\u201d also approves the fetched bytes: its code then runs with your user\u2019s rights without asking again.',
      ]
      : [
        el('strong', { text: 'Approving lets its code run with your user\u2019s rights.' }),
        ' Berth cannot undo side effects an import already had; denying later only stops it from loading again.',
      ];

  return el('section', {
    className: 'approval' + (again ? ' is-again' : '') + (activation ? ' is-activation' : ''),
    testid: 'approval-panel',
    dataset: { variant, step: step ? step.n : null },
    attrs: { 'aria-label': 'Approval for ' + name, 'aria-busy': busy ? 'true' : null },
  }, [
    step ? el('p', { className: 'approval-step', testid: 'approval-step', dataset: { step: step.n } }, [
      el('span', { className: 'approval-step-mark', text: 'Step' }),
      ' ' + step.text,
    ]) : null,
    el('h4', { className: 'approval-title', text: title }),
    el('p', { className: 'approval-intro' }, intro),
    grewBlock,
    facts,
    el('p', { className: 'approval-note', testid: 'approval-note' }, [
      el('span', { className: 'approval-note-icon', text: '!', attrs: { 'aria-hidden': 'true' } }),
      el('span', null, note),
    ]),
    el('div', { className: 'approval-actions' }, [
      fetchStep
        ? btn('allow', 'Allow fetching', 'btn-allow', 'Allow Berth to fetch ' + name)
        : btn('allow', activation ? 'Allow' : again ? 'Allow again' : 'Allow', 'btn-allow',
          activation ? 'Allow what the new version of ' + name + ' registers' : 'Allow ' + name),
      fetchStep
        ? btn(INCLUDING_FETCH, 'Allow, including what it fetches', 'btn-always',
          'Allow ' + name + ', including what its fetch brings')
        : null,
      btn('deny', 'Deny', 'btn-deny', 'Deny ' + name),
      btn('later', 'Later', 'btn-quiet', 'Decide about ' + name + ' later'),
      decisionStatus(id),
    ]),
    decisionError(id),
  ]);
}

/** A pending source the person put off: one line, and a way back to the panel. */
export function renderDeferred(s) {
  const review = el('button', {
    className: 'btn btn-small btn-quiet',
    text: 'Review now',
    dataset: { action: 'review', focus: 'review' },
    attrs: { type: 'button', 'aria-label': 'Review ' + sourceName(s) + ' now' },
  });
  review.addEventListener('click', () => {
    later.delete(laterKey(s));
    rerender();
    focusIn(str(s.id), 'allow');
  });
  return el('div', { className: 'decision decision-later', testid: 'decision' }, [
    el('span', {
      className: 'decision-text',
      text: s.state === 'pending-activation'
        ? 'Its new version registers more than the version that was active; OpenCode uses none of it yet. You chose to decide later.'
        : 'Waiting for your decision. You chose to decide later.',
    }),
    review,
  ]);
}

/** The decision in force for a source that is not waiting, with the way to change it. */
export function renderDecided(s) {
  const approval = obj(s.approval);
  const id = str(s.id);
  const d = approval.decision;
  if (d !== 'allow' && d !== 'deny') return null;
  const allowed = d === 'allow';
  const action = allowed ? 'deny' : 'allow';
  const button = el('button', {
    className: 'btn btn-small ' + (allowed ? 'btn-deny' : 'btn-quiet'),
    text: allowed ? 'Revoke' : 'Allow instead',
    dataset: { action, focus: action },
    attrs: {
      type: 'button',
      'aria-label': (allowed ? 'Revoke the approval of ' : 'Allow ') + sourceName(s) + (allowed ? '' : ' instead'),
    },
  });
  button.disabled = isBusy(id);
  button.addEventListener('click', () => decide(s, action));
  const at = timeEl(approval.decided_at_ms);
  return el('div', {
    className: 'decision decision-' + d,
    testid: 'decision',
    dataset: { decision: d },
  }, [
    el('span', { className: 'decision-mark', text: allowed ? '\u2713' : '\u2715', attrs: { 'aria-hidden': 'true' } }),
    el('span', { className: 'decision-text' }, allowed
      ? [el('strong', { text: 'Approved' }), at ? ' ' : '', at, ' to run with ', ...runsWhere(approval).slice(0, 3)]
      : [el('strong', { text: 'Denied' }), at ? ' ' : '', at, '. Berth will not load it.']),
    button,
    decisionStatus(id),
    decisionError(id),
  ]);
}

function isBusy(id) {
  const d = decisions[id];
  return !!d && d.phase !== 'error';
}

// "Allow, including what it fetches": both of an npm plugin's steps at once.
const INCLUDING_FETCH = 'allow-including-fetch';
const PROGRESS = { allow: 'Allowing\u2026', [INCLUDING_FETCH]: 'Allowing, with what it fetches\u2026', deny: 'Denying\u2026' };

function decisionStatus(id) {
  const d = decisions[id];
  if (!d || d.phase === 'error') return null;
  return el('span', {
    className: 'progress',
    testid: 'decision-progress',
    dataset: { phase: d.phase, focus: 'status' },
    attrs: { role: 'status', tabindex: '-1' },
  }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    d.phase === 'sending' ? PROGRESS[d.action] : 'Saved. Updating\u2026',
  ]);
}

function decisionError(id) {
  const d = decisions[id];
  if (!d || d.phase !== 'error') return null;
  const e = d.error;
  return el('div', {
    className: 'diag diag-error decision-error',
    testid: 'decision-error',
    dataset: { code: e.code },
    attrs: { role: 'alert' },
  }, [
    el('span', { className: 'diag-code', text: e.code || 'error' }),
    el('div', { className: 'diag-body' }, [
      el('p', { className: 'diag-message' }, [
        el('strong', { text: (d.action === 'deny' ? 'Could not deny it: ' : 'Could not allow it: ') }),
        e.message,
      ]),
      e.recovery ? el('p', { className: 'diag-recovery' }, [
        el('span', { className: 'diag-label', text: 'What to do: ' }),
        e.recovery,
      ]) : null,
    ]),
  ]);
}

function deferSource(s) {
  later.add(laterKey(s));
  rerender();
  focusIn(str(s.id), 'review');
}

function decide(s, action) {
  const id = str(s.id);
  if (!sendDecision || isBusy(id)) return;
  const approval = obj(s.approval);
  const entry = {
    action,
    phase: 'sending',
    error: null,
    before: { decision: approval.decision || null, at: num(approval.decided_at_ms) },
  };
  decisions[id] = entry;
  rerender();
  focusIn(id, 'status');
  let sent;
  try {
    // The digest of the source as this card showed it: Berth refuses an approval of bytes
    // that moved since.
    const including = action === INCLUDING_FETCH;
    sent = Promise.resolve(sendDecision(including ? 'allow' : action, [id], { [id]: str(s.digest) },
      { includingFetch: including }));
  } catch (err) {
    sent = Promise.reject(err);
  }
  sent.then(() => {
    if (decisions[id] !== entry) return;
    entry.phase = 'sent';
    // The new state comes with the live event (it may already be here). If none arrives,
    // stop showing progress after a while: the page then shows whatever Berth last said.
    entry.timer = setTimeout(() => {
      if (decisions[id] === entry) {
        delete decisions[id];
        rerender();
      }
    }, 10000);
    rerender();
  }, (err) => {
    if (decisions[id] !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    focusIn(id, action);
  });
}

/** Drops the decisions the snapshot now reflects (and errors of sources that changed). */
export function settleDecisions(sources) {
  const byId = new Map(sources.map((x) => [str(obj(x).id), obj(x)]));
  for (const id of Object.keys(decisions)) {
    const d = decisions[id];
    if (d.phase === 'sending') continue;
    const s = byId.get(id);
    const approval = obj(s && s.approval);
    const changed = !s || (approval.decision || null) !== d.before.decision ||
      num(approval.decided_at_ms) !== d.before.at;
    if (changed) {
      clearTimeout(d.timer);
      delete decisions[id];
    }
  }
}

/** The header badge: brings back panels put off with Later and goes to the first one. */
/** Brings the card of source `id` into view with the focus on its decision (a notification's click). */
export function showSource(id) {
  later.clear();
  rerender();
  const row = [...document.querySelectorAll('[data-testid=source]')].find((r) => r.dataset.sourceId === id);
  if (!row) return false;
  row.scrollIntoView({ block: 'start' });
  focusIn(id, 'allow');
  return true;
}

export function showPending() {
  later.clear();
  rerender();
  const app = document.getElementById('app');
  const row = app.querySelector('[data-testid=source]:is([data-state=pending-approval], [data-state=pending-activation])');
  if (!row) return;
  row.scrollIntoView({ block: 'start' });
  focusIn(row.dataset.sourceId, 'allow');
}
