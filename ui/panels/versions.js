// A source's versions and updates. Owns: the "Version" block of a card — the version that runs
// and why, the earlier versions (folded) with whether each can run again, and for an npm plugin
// from a registry "Check for updates", "Update" (or "Review and update" when the new version can
// do more), "Roll back", its update policy and the progress Berth reports — and the last action
// this page sent per source. Must not: show a version as running before Berth says so (that
// arrives with the snapshot), or wait on an install or a load: a button sends, and the snapshot
// shows the progress.

import { el, details } from '../dom.js';
import { arr, obj, str, num } from '../words.js';
import { rerender } from '../page.js';
import { errorBox } from '../problems.js';
import { sendLifecycle, sendPolicy, describeError } from '../transport.js';

// The last action sent from this page, per source: { action, phase: 'sending' | 'error' |
// 'done', error, outcome }.
const sent = new Map();

const POLICIES = [
  ['manual', 'Manual: only when I press Update'],
  ['notify', 'Notify: Berth checks and tells me'],
  ['auto', 'Auto: take versions the spec allows'],
];

const shortDigest = (d) => str(d).replace(/^sha256:/, '').slice(0, 12);
const when = (ms) => (num(ms) !== null ? new Date(num(ms)).toLocaleString() : '');
const versionName = (v) => str(obj(v).version) || shortDigest(obj(v).digest);

/** The card's "Version" block (nothing for a source that never ran and has no updates). */
export function renderVersions(s) {
  const life = obj(s.lifecycle);
  if (life.prepared || life.preparable) return renderPrepared(s, life);
  const current = life.current ? obj(life.current) : null;
  const history = arr(life.history).map(obj);
  const updates = life.updates ? obj(life.updates) : null;
  if (!current && !updates) return null;
  const id = str(s.id);
  return el('section', { className: 'versions', testid: 'versions', dataset: { sourceId: id } }, [
    el('h3', { className: 'caps-title', text: 'Version' }),
    current ? renderCurrent(s, current) : el('p', { className: 'muted', text: 'It has not run here yet.' }),
    life.pinned ? el('p', { className: 'source-status status-preparing', testid: 'version-pinned', attrs: { role: 'status' } },
      'Rolled back: it runs the kept earlier version above, not its files on disk. Edit them again, or approve them as they are, to run them.') : null,
    updates ? renderUpdates(s, updates) : renderLocalRollback(s, life),
    history.length ? renderHistory(id, history) : null,
  ]);
}

/**
 * An MCP server started by a fetch-and-run launcher: what Berth prepared in its place, or what
 * the launcher does and "Prepare in Berth instead".
 */
function renderPrepared(s, life) {
  const id = str(s.id);
  const p = life.prepared ? obj(life.prepared) : null;
  const offer = obj(life.preparable);
  const entry = sent.get(id);
  const busy = !!entry && entry.phase === 'sending';
  let body;
  if (p) {
    body = el('p', { testid: 'prepared' }, [
      'Prepared by Berth: ',
      el('strong', { className: 'mono', testid: 'prepared-version', text: str(p.package) + '@' + str(p.version) }),
      el('span', { className: 'muted', text: ' (integrity ' + str(p.integrity).slice(0, 19) + '\u2026), installed with its install scripts off; it runs from Berth\u2019s data dir, not through its launcher.' }),
    ]);
  } else {
    const b = el('button', {
      className: 'btn btn-small btn-allow',
      testid: 'prepare',
      text: busy ? 'Preparing\u2026' : 'Prepare in Berth instead',
      dataset: { action: 'prepare' },
      attrs: { type: 'button', 'aria-label': 'Prepare ' + str(offer.package) + ' in Berth instead of ' + str(offer.launcher) },
    });
    b.disabled = busy;
    b.addEventListener('click', () => send(id, 'prepare'));
    body = el('div', { testid: 'preparable' }, [
      el('p', null, [
        el('span', { className: 'mono', text: str(offer.launcher) }),
        ' downloads and runs whatever is newest of ',
        el('span', { className: 'mono', text: str(offer.package) }),
        ' at every start, with its install scripts on. Berth can install the newest version once, check its integrity, keep its scripts off and run it from there.',
      ]),
      el('div', { className: 'update-actions' }, [b]),
    ]);
  }
  // Prepared: it updates and rolls back like an npm plugin (each prepared install that ran is a
  // version, its exact files kept).
  const history = p ? arr(life.history).map(obj) : [];
  const actions = p ? el('div', { className: 'update-actions' }, [
    button(id, 'update', 'Prepare the newest version', busy, {}, 'prepared-update'),
    num(life.rollback_to) !== null
      ? button(id, 'rollback', 'Roll back to the kept earlier version', busy, { to: num(life.rollback_to) }, 'update-rollback')
      : null,
  ]) : null;
  return el('section', { className: 'versions', testid: 'versions', dataset: { sourceId: id } }, [
    el('h3', { className: 'caps-title', text: 'Version' }),
    body,
    life.current && p ? el('p', { className: 'muted', testid: 'version-why', text: str(obj(life.current).why) }) : null,
    actions,
    entry && entry.phase === 'error'
      ? errorBox(entry.error, p ? 'It did not happen: ' : 'Could not prepare it: ', p ? 'update-error' : 'prepare-error')
      : null,
    history.length ? renderHistory(id, history) : null,
  ]);
}

function renderCurrent(s, v) {
  const npm = obj(s.npm);
  const onDisk = str(s.digest) === str(v.digest);
  return el('div', { className: 'version-current', testid: 'version-current', dataset: { digest: str(v.digest) } }, [
    el('p', null, [
      el('strong', { className: 'mono', testid: 'version-name', text: versionName(v) }),
      npm.name ? el('span', { className: 'muted', text: ' of ' + str(npm.name) }) : null,
      el('span', { className: 'muted', text: ' \u2014 ' }),
      el('span', { testid: 'version-why', text: str(v.why) }),
    ]),
    el('p', { className: 'muted version-facts' }, [
      'Ran ' + num(v.activations) + (num(v.activations) === 1 ? ' time' : ' times') + ', last ' + when(v.last_at_ms),
      num(v.packages) ? ' \u00b7 ' + num(v.packages) + ' packages' : '',
      num(v.without_integrity) ? ' (' + num(v.without_integrity) + ' without integrity: those prove nothing)' : '',
      arr(v.native_modules).length ? ' \u00b7 native modules: ' + arr(v.native_modules).map(str).join(', ') : '',
      onDisk ? '' : ' \u00b7 what is on disk now differs from it',
    ]),
  ]);
}

function renderUpdates(s, u) {
  const id = str(s.id);
  const progress = u.progress ? obj(u.progress) : null;
  const stage = progress ? str(progress.stage) : '';
  const offer = obj(u.offer);
  const available = offer.available ? obj(offer.available) : null;
  const action = sent.get(id);
  const busy = (action && action.phase === 'sending') || ['checking', 'preparing', 'applying'].includes(stage);
  const current = str(offer.current) || str(obj(obj(s.npm).resolved).version);
  const rows = [];
  if (available) {
    rows.push(el('p', { className: 'update-offer', testid: 'update-offer', dataset: { version: str(available.version) } }, [
      el('span', { className: 'mono', text: (current || '?') + ' \u2192 ' + str(available.version) }),
      el('span', { className: 'muted', text: ' available' + (available.published ? ', published ' + new Date(str(available.published)).toLocaleString() : '') }),
      available.integrity
        ? el('span', { className: 'mono muted update-integrity', title: str(available.integrity), text: ' ' + str(available.integrity).slice(0, 19) + '\u2026' })
        : el('span', { className: 'diag-code', text: ' no integrity: it will not be taken' }),
      arr(u.failed_versions).map(str).includes(str(available.version))
        ? el('span', { className: 'diag-code', testid: 'update-failed-before', text: ' it failed to load here before: an automatic update never takes it again' })
        : null,
    ]));
  } else if (num(u.checked_at_ms) !== null) {
    rows.push(el('p', { className: 'muted', testid: 'update-none', text: 'The newest version its spec (' + str(offer.request) + ') allows; checked ' + when(u.checked_at_ms) + (offer.latest && str(offer.latest) !== current ? '. Outside the spec: ' + str(offer.latest) : '') }));
  } else {
    rows.push(el('p', { className: 'muted', testid: 'update-none', text: 'Not checked yet. Berth asks the registry only when you press Check (or your update policy says so).' }));
  }
  if (progress) rows.push(renderProgress(progress));
  const buttons = [button(id, 'check', 'Check for updates', busy)];
  if (stage === 'waiting-for-you') {
    buttons.push(button(id, 'update', 'Review and update to ' + str(progress.target), busy, { approveGrowth: true }, 'update-approve'));
  } else if (available) {
    buttons.push(button(id, 'update', 'Update to ' + str(available.version), busy));
  }
  if (num(u.rollback_to) !== null) {
    buttons.push(button(id, 'rollback', 'Roll back', busy, { to: num(u.rollback_to) }, 'update-rollback'));
  }
  rows.push(el('div', { className: 'update-actions' }, buttons));
  if (action && action.phase === 'error') rows.push(errorBox(action.error, 'It did not happen: ', 'update-error'));
  rows.push(renderPolicy(s, u, busy));
  return el('div', { className: 'updates', testid: 'updates', dataset: { stage: stage || 'idle' } }, rows);
}

/** A local source: "Roll back" to the newest earlier version whose exact bytes are kept. */
function renderLocalRollback(s, life) {
  const id = str(s.id);
  const action = sent.get(id);
  const rows = [];
  if (num(life.rollback_to) !== null) {
    const busy = !!action && action.phase === 'sending';
    rows.push(el('div', { className: 'update-actions' }, [
      button(id, 'rollback', 'Roll back to the kept earlier version', busy, { to: num(life.rollback_to) }, 'update-rollback'),
    ]));
  }
  if (action && action.phase === 'error') rows.push(errorBox(action.error, 'It did not happen: ', 'update-error'));
  return rows.length ? el('div', { className: 'updates', testid: 'local-rollback' }, rows) : null;
}

function renderProgress(p) {
  const stage = str(p.stage);
  const target = str(p.target);
  if (stage === 'failed') {
    return errorBox({ code: str(p.code), message: str(p.message), recovery: str(p.recovery) },
      'The update to ' + target + ' failed: ', 'update-failed');
  }
  const words = {
    checking: 'Asking the registry\u2026',
    preparing: 'Preparing ' + target + ' (install scripts off); the version that runs keeps serving\u2026',
    applying: 'Stopping the version that runs, then loading ' + target + '\u2026',
    'waiting-for-you': target + ' is prepared and can do more than the version that runs; nothing of it runs until you allow it:',
  }[stage] || stage;
  return el('div', { className: 'source-status status-preparing', testid: 'update-progress', dataset: { stage }, attrs: { role: 'status' } }, [
    stage === 'waiting-for-you' ? null : el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    el('span', { text: words }),
    stage === 'waiting-for-you'
      ? el('ul', { className: 'grew', testid: 'update-grew' }, arr(p.grew).map((g) => el('li', { text: str(g) })))
      : null,
  ]);
}

function button(id, action, label, busy, opts, testid) {
  const b = el('button', {
    className: 'btn btn-small' + (action === 'update' ? ' btn-primary' : ''),
    testid: testid || 'update-' + action,
    dataset: { focusGlobal: 'update:' + id + ':' + action },
    text: label,
    attrs: { type: 'button' },
  });
  b.disabled = busy || !sendLifecycle;
  b.addEventListener('click', () => send(id, action, opts));
  return b;
}

function send(id, action, opts) {
  let p;
  try {
    p = Promise.resolve(sendLifecycle(action, id, opts));
  } catch (err) {
    p = Promise.reject(err);
  }
  track(id, action, p);
}

/** Keeps what became of `promise` (this page's `action` for source `id`) until it settles. */
function track(id, action, promise) {
  const entry = { action, phase: 'sending', error: null };
  sent.set(id, entry);
  rerender();
  promise.then((answer) => {
    if (sent.get(id) !== entry) return;
    // A check's own errors come in its answer.
    const failed = action === 'check' ? arr(obj(answer).errors)[0] : null;
    if (failed) {
      entry.phase = 'error';
      entry.error = describeError(failed);
    } else {
      sent.delete(id);
    }
    rerender();
  }, (err) => {
    if (sent.get(id) !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
  });
}

function renderPolicy(s, u, busy) {
  const id = str(s.id);
  const select = el('select', {
    className: 'policy-select',
    testid: 'update-policy',
    dataset: { focusGlobal: 'update:' + id + ':policy' },
    attrs: { 'aria-label': 'Update policy of ' + id },
  }, POLICIES.map(([value, label]) => {
    const o = el('option', { text: label });
    o.value = value;
    o.selected = str(u.policy) === value;
    return o;
  }));
  select.disabled = busy || !sendPolicy;
  select.addEventListener('change', () => {
    let p;
    try {
      p = Promise.resolve(sendPolicy('updates.' + id, select.value));
    } catch (err) {
      p = Promise.reject(err);
    }
    track(id, 'policy', p);
  });
  return el('p', { className: 'update-policy' }, [
    el('span', { className: 'muted', text: 'Updates: ' }),
    select,
    el('span', { className: 'muted', text: ' (set by ' + ({ organisation: 'your organisation', product: 'Berth\u2019s default', user: 'you' }[str(u.layer)] || str(u.layer)) + (num(u.min_age_hours) ? '; auto waits ' + num(u.min_age_hours) + ' h after publishing' : '') + ')' }),
  ]);
}

function renderHistory(id, history) {
  return details('versions:' + id, false, 'Earlier versions (' + history.length + ')',
    el('ol', { className: 'version-history', testid: 'version-history' }, history.map((v) => el('li', {
      testid: 'version-item',
      dataset: { versionId: str(v.id), recoverable: String(!!v.recoverable) },
    }, [
      el('span', { className: 'mono', text: versionName(v) }),
      el('span', { className: 'muted', text: ' \u2014 ' + str(v.why) + ', last ran ' + when(v.last_at_ms) + ' \u00b7 ' }),
      el('span', { className: v.recoverable ? 'muted' : 'diag-code', text: v.recoverable ? 'its exact bytes are kept' : str(v.kept) }),
    ]))), { className: 'tech' });
}
