// The policy in force. Owns: the policy panel (the organisation's file and its problems, every
// value with the layer that set it and whether the person may change it, the controls for the
// person's values, the mode each source runs in) and the changes this page sent until a
// snapshot shows them. Must not: decide what is stricter than what beyond greying out the
// options an organisation's value rules out (Berth refuses a looser value itself), or change a
// value on screen before Berth's next snapshot says so.

import { el, th, details } from '../dom.js';
import { arr, obj, str, num, plural, layerWords } from '../words.js';
import { rerender, sourceLink } from '../page.js';
import { focusGlobal } from '../focus.js';
import { errorBox } from '../problems.js';
import { sendPolicy, describeError } from '../transport.js';

// Changes sent from this page, by key: { value, phase: 'sending' | 'sent' | 'error', error,
// before: the entry's value and layer when it was sent, timer }. Settled (removed) once a
// snapshot shows the entry changed.
const changes = Object.create(null);
// What the person typed into a number or list field and has not sent yet, by key: a live
// re-render keeps it.
const drafts = Object.create(null);

export const policyAnchor = (key) => 'policy-' + str(key);
/** The policy key of a cap's category (`model-request` → `cap.model-request`). */
export const capKey = (category) => 'cap.' + str(category);

// The words each kind of value takes, loosest first.
const CHOICES = {
  cap: ['allow', 'review', 'deny'],
  mode: ['compatible', 'restricted'],
  project: ['read-write', 'read'],
  network: ['on', 'off'],
  updates: ['auto', 'notify', 'manual'],
};
const CHOICE_LABELS = {
  review: 'review (held until you allow it)',
  'read-write': 'read and write',
  read: 'read only',
  auto: 'auto (within the spec, after the minimum age)',
  notify: 'notify (Berth checks and tells you)',
  manual: 'manual (only when you press Update)',
};

function kindOf(key) {
  const k = str(key);
  if (k.startsWith('cap.')) return 'cap';
  if (k === 'mode' || k.startsWith('mode.')) return 'mode';
  if (k === 'restricted.project') return 'project';
  if (k === 'restricted.network') return 'network';
  if (k === 'restricted.env') return 'names';
  if (k.startsWith('budget.')) return 'budget';
  if (k === 'updates' || k.startsWith('updates.')) return 'updates';
  if (k === 'update-age' || k.startsWith('update-age.')) return 'age';
  return 'fixed';
}

const GROUPS = [
  ['caps', 'What plugins may do through Berth', (k) => kindOf(k) === 'cap'],
  ['modes', 'How sources run', (k) => k === 'mode' || k.startsWith('mode.') || k.startsWith('restricted.')],
  ['updates', 'Updates of npm plugins', (k) => ['updates', 'age'].includes(kindOf(k))],
  ['budgets', 'Time budgets', (k) => k.startsWith('budget.')],
  ['organisation', 'Set by your organisation only', () => true],
];

const CHANGEABLE = {
  yes: 'Yes',
  'stricter-only': 'Only stricter',
  no: 'No',
};

/** A value as the page shows it in words. */
function valueText(v) {
  if (v === null || v === undefined) return 'not set';
  if (Array.isArray(v)) return v.length ? v.map(str).join(', ') : 'none';
  if (typeof v === 'object') return JSON.stringify(v);
  return str(v);
}

function seconds(ms) {
  const n = num(ms);
  if (n === null) return '';
  if (n >= 60000 && n % 60000 === 0) return n / 60000 + ' min';
  if (n >= 1000) return (n / 1000).toLocaleString(undefined, { maximumFractionDigits: 1 }) + ' s';
  return '';
}

export function renderPolicy(snap, sources) {
  if (!snap.policy) return null;
  const policy = obj(snap.policy);
  const entries = arr(policy.entries).map(obj);
  const problems = arr(policy.problems).map(str).filter(Boolean);
  const present = !!policy.organisation_present;
  const file = str(policy.organisation_file);
  const placed = new Set();
  const groups = GROUPS.map(([id, title, fits]) => {
    const rows = entries.filter((e) => !placed.has(e.key) && fits(str(e.key)));
    for (const e of rows) placed.add(e.key);
    return rows.length ? renderGroup(id, title, rows) : null;
  });

  return el('section', {
    className: 'panel policy-panel',
    testid: 'policy',
    attrs: { id: 'policy', tabindex: '-1', 'aria-labelledby': 'policy-title' },
  }, [
    el('h2', { className: 'section-title', attrs: { id: 'policy-title' } }, [
      'Policy',
      el('span', { className: 'section-note', text: 'what plugins may do through Berth' }),
    ]),
    el('p', {
      className: 'section-intro',
      text: 'Your organisation\u2019s file sets bounds; your settings replace Berth\u2019s defaults within them. ' +
        'You may make a value your organisation set stricter, never looser. A change applies from the next call.',
    }),
    el('dl', { className: 'policy-facts' }, [
      el('dt', { text: 'Organisation\u2019s file' }),
      el('dd', { testid: 'policy-org', dataset: { present: present ? 'yes' : 'no' } }, [
        el('span', { className: 'mono', testid: 'policy-org-file', text: file || 'none' }),
        el('span', {
          className: 'tag ' + (present ? 'tag-present' : 'tag-absent'),
          testid: 'policy-org-present',
          text: present ? 'present' : 'not present: no organisation policy applies',
        }),
      ]),
    ]),
    problems.length
      ? el('ul', { className: 'diags policy-problems', testid: 'policy-problems' }, problems.map((p) =>
        el('li', { className: 'diag diag-warning', testid: 'policy-problem', attrs: { role: 'note' } }, [
          el('span', { className: 'diag-code', text: 'policy' }),
          el('div', { className: 'diag-body' }, [el('p', { className: 'diag-message', text: p })]),
        ])))
      : null,
    renderBoundary(snap.boundary),
    ...groups,
    renderSourceModes(sources),
  ]);
}

const TIERS = { bwrap: 'bubblewrap + seccomp', landlock: 'Landlock + seccomp' };

/**
 * Restricted mode on this machine, as Berth found it by trying: the OS boundary restricted
 * sources get (or why there is none: then no restricted source runs), the probe's findings,
 * and what that boundary cannot stop.
 */
function renderBoundary(boundary) {
  if (!boundary) return null;
  const b = obj(boundary);
  const tier = str(b.tier);
  const cannot = arr(b.cannot_stop).map(str).filter(Boolean);
  const facts = [
    ['bubblewrap', b.bwrap ? str(b.bwrap) : 'not usable'],
    ['Landlock', num(b.landlock_abi) !== null ? 'ABI ' + num(b.landlock_abi) : 'not enforced by this kernel'],
    ['seccomp', b.seccomp ? 'works' : 'not usable'],
  ];
  return el('div', { className: 'policy-boundary', testid: 'policy-boundary', dataset: { tier: tier || 'none' } }, [
    el('h3', { className: 'policy-group-title', text: 'Restricted mode on this machine' }),
    el('p', { testid: 'policy-boundary-tier' }, tier
      ? ['Restricted sources run alone inside ', el('strong', { text: TIERS[tier] || tier }),
        b.forced ? el('span', { className: 'muted', text: ' (chosen by BERTH_SANDBOX_TIER)' }) : null, '.']
      : [el('strong', { text: 'No OS boundary can be made here' }), ': ' + str(b.unavailable) +
        ' A source set to restricted mode does not run at all.']),
    el('dl', { className: 'policy-facts' }, facts.flatMap(([k, v]) => [
      el('dt', { text: k }),
      el('dd', { className: 'mono', testid: 'policy-boundary-fact', dataset: { fact: k }, text: v }),
    ])),
    cannot.length
      ? details('policy:boundary:cannot', false, 'What it cannot stop (' + cannot.length + ')',
        el('ul', { className: 'policy-cannot', testid: 'policy-cannot-stop' }, cannot.map((c) => el('li', { text: c }))),
        { testid: 'policy-cannot' })
      : null,
  ]);
}

// Groups shown folded until opened, unless a value in them is not Berth's default.
const FOLDED = new Set(['budgets', 'organisation']);

function renderGroup(id, title, rows) {
  const table = el('table', { className: 'policy-table' }, [
    el('thead', null, el('tr', null, [
      th('Setting'), th('Value'), th('Set by'), th('You may change it'),
    ])),
    el('tbody', null, rows.flatMap(renderEntry)),
  ]);
  if (FOLDED.has(id)) {
    const own = rows.filter((e) => str(e.layer) !== 'product' || e.overruled || changes[str(e.key)]).length;
    return details('policy:' + id, own > 0, [
      el('span', { className: 'details-title', text: title }),
      el('span', {
        className: 'details-note',
        text: own ? own + ' of ' + rows.length + ' not Berth\u2019s default' : rows.length + ' ' + plural(rows.length, 'value', 'values') + ', all Berth\u2019s defaults',
      }),
    ], table, { className: 'looked policy-group policy-fold', testid: 'policy-group-' + id, dataset: { group: id } });
  }
  return el('div', { className: 'policy-group', testid: 'policy-group-' + id, dataset: { group: id } }, [
    el('h3', { className: 'policy-group-title', text: title }),
    table,
  ]);
}

/** The runtime's `about` words, with `code` in backticks shown as code. */
function aboutParts(text) {
  return str(text).split('`').map((part, i) => (i % 2 ? el('code', { text: part }) : part));
}

function renderEntry(e) {
  const key = str(e.key);
  const layer = str(e.layer);
  const changeable = str(e.changeable);
  const change = changes[key];
  const busy = !!change && change.phase !== 'error';
  const hasOwn = layer === 'user' || !!e.overruled;
  const row = el('tr', {
    className: 'policy-entry' + (e.overruled ? ' is-overruled' : ''),
    testid: 'policy-entry',
    dataset: { key, layer, changeable, value: JSON.stringify(e.value === undefined ? null : e.value) },
    attrs: { id: policyAnchor(key), tabindex: '-1', 'aria-busy': busy ? 'true' : null },
  }, [
    el('td', { className: 'policy-setting' }, [
      el('span', { className: 'mono policy-key', testid: 'policy-key', text: key }),
      str(e.about) ? el('span', { className: 'policy-about', testid: 'policy-about' }, aboutParts(e.about)) : null,
    ]),
    el('td', { className: 'policy-value' }, [
      changeable === 'no' ? renderFixed(e) : renderControl(e, busy),
      policyStatus(key),
    ]),
    el('td', { className: 'policy-layer', testid: 'policy-layer', dataset: { layer } }, capital(layerWords(layer).by)),
    el('td', { className: 'policy-changeable', testid: 'policy-changeable' }, [
      CHANGEABLE[changeable] || changeable,
      hasOwn && changeable !== 'no' ? resetButton(e, busy) : null,
    ]),
  ]);
  const notes = [
    e.overruled
      ? el('p', { className: 'policy-overruled', testid: 'policy-overruled', attrs: { role: 'note' } }, [
        el('span', { className: 'policy-warn-mark', text: '\u26a0', attrs: { 'aria-hidden': 'true' } }),
        el('strong', { text: 'Overruled: ' }),
        str(e.overruled),
      ])
      : null,
    change && change.phase === 'error'
      ? errorBox(change.error, change.value === null ? 'Could not reset it: ' : 'Could not change it: ', 'policy-error')
      : null,
  ].filter(Boolean);
  if (!notes.length) return [row];
  return [row, el('tr', { className: 'policy-extra', testid: 'policy-entry-notes', dataset: { key } }, [
    el('td', { attrs: { colspan: '4' } }, notes),
  ])];
}

const capital = (s) => (s ? s[0].toUpperCase() + s.slice(1) : s);

/** A value nobody on this computer may change. */
function renderFixed(e) {
  return el('span', { className: 'policy-fixed', testid: 'policy-value', text: valueText(e.value) });
}

function renderControl(e, busy) {
  const key = str(e.key);
  const kind = kindOf(key);
  if (CHOICES[kind]) return renderSelect(e, CHOICES[kind], busy);
  if (kind === 'budget') return renderField(e, busy, 'number');
  if (kind === 'age') return renderField(e, busy, 'hours');
  if (kind === 'names') return renderField(e, busy, 'names');
  return renderFixed(e);
}

function renderSelect(e, choices, busy) {
  const key = str(e.key);
  const current = str(e.value);
  // Stricter only: the options looser than the organisation's value are ruled out (it comes
  // with the entry also while a stricter value of the person's is in force).
  const bound = e.organisation_value !== undefined && e.organisation_value !== null ? str(e.organisation_value) : current;
  const floor = str(e.changeable) === 'stricter-only' ? choices.indexOf(bound) : -1;
  const select = el('select', {
    className: 'policy-select',
    testid: 'policy-control',
    dataset: { focusGlobal: 'policy:' + key + ':control' },
    attrs: { 'aria-label': key + ', set by ' + layerWords(e.layer).by },
  }, choices.map((c, i) => {
    const looser = floor > 0 && i < floor;
    const o = el('option', {
      text: (CHOICE_LABELS[c] || c) + (looser ? ' \u2014 looser than your organisation allows' : ''),
      attrs: { value: c },
    });
    o.disabled = looser;
    o.selected = c === current;
    return o;
  }));
  if (!choices.includes(current)) {
    const o = el('option', { text: valueText(e.value), attrs: { value: current } });
    o.selected = true;
    o.disabled = true;
    select.prepend(o);
  }
  select.disabled = busy;
  select.addEventListener('change', () => send(key, select.value, e));
  return select;
}

/** A number of milliseconds or hours, or a list of names: typed, then sent with Enter or "Set". */
function renderField(e, busy, type) {
  const key = str(e.key);
  const hours = type === 'hours';
  const budget = type === 'number' || hours;
  const shown = budget ? str(e.value) : arr(e.value).map(str).join(', ');
  const input = el('input', {
    className: 'policy-input' + (budget ? ' is-number' : ''),
    testid: 'policy-control',
    dataset: { focusGlobal: 'policy:' + key + ':control' },
    attrs: budget
      ? {
        type: 'number', min: hours ? 0 : 1, step: 1, inputmode: 'numeric',
        max: hours ? 8760 : e.max ?? null,
        'aria-label': key + (hours ? ' in hours' : ' in milliseconds'),
      }
      : { type: 'text', spellcheck: 'false', placeholder: 'none', 'aria-label': key + ', names separated by commas' },
  });
  input.value = key in drafts ? drafts[key] : shown;
  input.disabled = busy;
  input.addEventListener('input', () => {
    drafts[key] = input.value;
  });
  const set = el('button', {
    className: 'btn btn-small',
    text: 'Set',
    testid: 'policy-set',
    dataset: { focusGlobal: 'policy:' + key + ':set' },
    attrs: { type: 'submit', 'aria-label': 'Set ' + key },
  });
  set.disabled = busy;
  // Berth judges the value (and says why it refuses one), not the browser's form validation.
  const form = el('form', { className: 'policy-field', attrs: { novalidate: '' } }, [
    input,
    budget ? el('span', { className: 'muted policy-unit', text: hours ? 'hours' : 'ms' }) : null,
    set,
    budget && !hours && seconds(e.value) ? el('span', { className: 'muted policy-human', text: '= ' + seconds(e.value) }) : null,
  ]);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const raw = input.value.trim();
    let value;
    if (budget) {
      const n = Number(raw);
      // Anything but a whole number goes to Berth as typed: its refusal says what it takes.
      value = raw !== '' && Number.isInteger(n) ? n : raw;
    } else {
      value = raw.split(',').map((x) => x.trim()).filter(Boolean);
    }
    send(key, value, e);
  });
  return form;
}

function resetButton(e, busy) {
  const key = str(e.key);
  const b = el('button', {
    className: 'btn btn-small btn-quiet policy-reset',
    text: 'Reset',
    testid: 'policy-reset',
    dataset: { focusGlobal: 'policy:' + key + ':reset' },
    attrs: {
      type: 'button',
      'aria-label': 'Reset ' + key + ': take your setting back',
      title: 'Take your setting back: the value of the layer above applies',
    },
  });
  b.disabled = busy;
  b.addEventListener('click', () => send(key, null, e));
  return b;
}

const POLICY_PROGRESS = { sending: 'Saving\u2026', sent: 'Saved. Updating\u2026' };

function policyStatus(key) {
  const c = changes[key];
  if (!c || c.phase === 'error') return null;
  return el('span', {
    className: 'progress',
    testid: 'policy-progress',
    dataset: { phase: c.phase, focusGlobal: 'policy:' + key + ':status' },
    attrs: { role: 'status', tabindex: '-1' },
  }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    c.value === null && c.phase === 'sending' ? 'Resetting\u2026' : POLICY_PROGRESS[c.phase],
  ]);
}

const fingerprint = (e) => JSON.stringify([obj(e).value, obj(e).layer, obj(e).overruled || null]);

function send(key, value, e) {
  const old = changes[key];
  if (!sendPolicy || (old && old.phase !== 'error')) return;
  if (old) clearTimeout(old.timer);
  const entry = { value, phase: 'sending', error: null, before: fingerprint(e), timer: null };
  changes[key] = entry;
  rerender();
  focusGlobal('policy:' + key + ':status');
  let sent;
  try {
    sent = Promise.resolve(sendPolicy(key, value));
  } catch (err) {
    sent = Promise.reject(err);
  }
  sent.then(() => {
    if (changes[key] !== entry) return;
    entry.phase = 'sent';
    delete drafts[key];
    // The new value arrives with the live event (it may already be here). If none comes, stop
    // showing progress after a while and show whatever Berth last said.
    entry.timer = setTimeout(() => {
      if (changes[key] === entry) {
        delete changes[key];
        rerender();
      }
    }, 10000);
    rerender();
  }, (err) => {
    if (changes[key] !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    focusGlobal('policy:' + key + ':control');
  });
}

/**
 * Drops the changes the snapshot now shows (the entry's value, layer or note moved), and the
 * refusals of values that changed since.
 */
export function settlePolicy(snap) {
  const byKey = new Map(arr(obj(snap.policy).entries).map((e) => [str(obj(e).key), obj(e)]));
  for (const key of Object.keys(changes)) {
    const c = changes[key];
    if (c.phase === 'sending') continue;
    const e = byKey.get(key);
    if (!e || fingerprint(e) !== c.before) {
      clearTimeout(c.timer);
      delete changes[key];
    }
  }
}

/** Per source: the mode it runs in and why. */
function renderSourceModes(sources) {
  const rows = sources.map(obj).filter((s) => str(obj(s.run_mode).why));
  if (!rows.length) return null;
  return el('div', { className: 'policy-group', dataset: { group: 'sources' } }, [
    el('h3', { className: 'policy-group-title' }, [
      'Mode of each source',
      el('span', { className: 'section-count', text: rows.length }),
    ]),
    el('ul', { className: 'policy-sources' }, rows.map((s) => {
      const m = obj(s.run_mode);
      const id = str(s.id);
      return el('li', {
        className: 'policy-source',
        testid: 'policy-source-mode',
        dataset: { sourceId: id, mode: str(m.mode), layer: str(m.layer) },
      }, [
        sourceLink(id, { testid: 'policy-source', focusGlobal: 'policy-source:' + id }),
        el('span', { className: 'tag mode-' + str(m.mode), text: str(m.mode) || 'unknown' }),
        el('span', { className: 'muted policy-source-why', testid: 'policy-source-why', text: str(m.why) }),
      ]);
    })),
    rows.length !== sources.length
      ? el('p', { className: 'muted', text: (sources.length - rows.length) + ' ' +
        plural(sources.length - rows.length, 'source does', 'sources do') + ' not say how it runs.' })
      : null,
  ]);
}
