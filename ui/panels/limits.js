// What the policy keeps from a source. Owns: the "partially limited" part of a source's card
// (each held or refused contribution, its category, cap and the layer that set it, with "Allow"
// for one held for review) and the grants this page sent until a snapshot shows them. Must not:
// change what a source registers itself: that arrives with the next snapshot.

import { el } from '../dom.js';
import { arr, obj, str, plural, sourceName, layerWords, categoryWords, itemWords } from '../words.js';
import { rerender } from '../page.js';
import { focusIn, jumpLink } from '../focus.js';
import { errorBox } from '../problems.js';
import { sendGrant, describeError } from '../transport.js';
import { policyAnchor, capKey } from './policy.js';

// Grants sent from this page, by source id and item: { phase: 'sending' | 'sent' | 'error',
// error, timer }. Settled (removed) once a snapshot no longer lists the item as limited.
const grants = Object.create(null);
const grantKey = (id, item) => str(id) + '\u0000' + str(item);

/** The contributions a policy cap keeps from registering, `[]` for none. */
export const limitedOf = (s) => arr(obj(s).limited).map(obj);

/** A small mark for the card's head: "Partially limited" when the policy keeps something back. */
export function limitedPill(s) {
  const n = limitedOf(s).length;
  if (!n) return null;
  return el('span', {
    className: 'badge badge-limited badge-quiet',
    testid: 'partially-limited',
    dataset: { count: n },
    title: n + ' ' + plural(n, 'contribution is', 'contributions are') + ' kept back by the policy',
    text: 'Partially limited',
  });
}

/** In a source's card: what the policy keeps back, and why, with "Allow" for what waits for review. */
export function renderLimited(s) {
  const items = limitedOf(s);
  if (!items.length) return null;
  const n = items.length;
  const active = s.state === 'active';
  return el('section', {
    className: 'limited',
    testid: 'limited',
    dataset: { count: n },
    attrs: { 'aria-label': 'What the policy keeps from ' + sourceName(s) },
  }, [
    el('p', { className: 'limited-title' }, [
      el('strong', { text: 'Partially limited. ' }),
      active
        ? 'The policy keeps ' + plural(n, 'this', 'these') + ' from registering; the rest of it is active.'
        : 'Once loaded, the policy keeps ' + plural(n, 'this', 'these') + ' from registering; the rest of it loads.',
    ]),
    el('ul', { className: 'limited-items' }, items.map((l) => renderItem(s, l))),
  ]);
}

function renderItem(s, l) {
  const id = str(s.id);
  const item = str(l.item);
  const cap = str(l.cap);
  const layer = layerWords(l.layer);
  const what = itemWords(item);
  const key = capKey(l.category);
  const g = grants[grantKey(id, item)];
  const busy = !!g && g.phase !== 'error';
  const focus = 'grant:' + item;

  let why;
  let action = null;
  if (cap === 'review') {
    why = ['Held for review by ', el('strong', { text: layer.by }), ' (', capLink(key), ' is review).'];
    const b = el('button', {
      className: 'btn btn-small btn-allow',
      text: 'Allow',
      dataset: { action: 'grant', focus, item },
      attrs: { type: 'button', 'aria-label': 'Allow ' + what.kind + ' ' + what.name + ' of ' + sourceName(s) },
    });
    b.disabled = busy;
    b.addEventListener('click', () => grant(s, item));
    action = b;
  } else {
    why = ['Refused by ', el('strong', { text: layer.by }), ' (', capLink(key), ' is ' + (cap || 'deny') + '). ',
      str(l.layer) === 'organisation'
        ? 'Only your administrator can change that.'
        : 'Change it under Policy to let it through.'];
  }

  return el('li', {
    className: 'limited-item cap-' + cap,
    testid: 'limited-item',
    dataset: { item, category: str(l.category), cap, layer: str(l.layer) },
  }, [
    el('p', { className: 'limited-what' }, [
      what.kind ? what.kind + ' ' : '',
      el('span', { className: 'mono limited-name', testid: 'limited-name', text: what.name }),
      ' ',
      el('span', { className: 'muted', testid: 'limited-category', text: categoryWords(l.category) }),
    ]),
    el('p', { className: 'limited-why', testid: 'limited-why' }, why),
    action || g ? el('div', { className: 'limited-actions' }, [action, grantStatus(g, focus)]) : null,
    g && g.phase === 'error' ? errorBox(g.error, 'Could not allow it: ', 'grant-error') : null,
  ]);
}

/** The cap's key, as a link to its row in the policy panel. */
function capLink(key) {
  return jumpLink('#' + policyAnchor(key), key, { className: 'mono', title: 'Show ' + key + ' under Policy' });
}

function grantStatus(g, focus) {
  if (!g || g.phase === 'error') return null;
  return el('span', {
    className: 'progress',
    testid: 'grant-progress',
    dataset: { phase: g.phase, focus: focus + ':status' },
    attrs: { role: 'status', tabindex: '-1' },
  }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    g.phase === 'sending' ? 'Allowing\u2026' : 'Allowed; it registers on its next call\u2026',
  ]);
}

function grant(s, item) {
  const id = str(s.id);
  const k = grantKey(id, item);
  const old = grants[k];
  if (!sendGrant || (old && old.phase !== 'error')) return;
  const entry = { phase: 'sending', error: null, timer: null };
  grants[k] = entry;
  rerender();
  focusIn(id, 'grant:' + item + ':status');
  let sent;
  try {
    sent = Promise.resolve(sendGrant(id, item, true));
  } catch (err) {
    sent = Promise.reject(err);
  }
  sent.then(() => {
    if (grants[k] !== entry) return;
    entry.phase = 'sent';
    // The item leaves the list with the live event; if none comes, stop showing progress after
    // a while and show whatever Berth last said.
    entry.timer = setTimeout(() => {
      if (grants[k] === entry) {
        delete grants[k];
        rerender();
      }
    }, 10000);
    rerender();
  }, (err) => {
    if (grants[k] !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    focusIn(id, 'grant:' + item);
  });
}

/** Drops the grants the snapshot now reflects (the item is no longer limited, or the source went). */
export function settleGrants(sources) {
  const still = new Set();
  for (const s of sources.map(obj)) {
    for (const l of limitedOf(s)) still.add(grantKey(s.id, l.item));
  }
  for (const k of Object.keys(grants)) {
    const g = grants[k];
    if (g.phase === 'sending' || still.has(k)) continue;
    clearTimeout(g.timer);
    delete grants[k];
  }
}
