// Paused sources (their plugin host spent its restart budget) and hooks and tools paused on their
// own. Owns: the banner above everything, the paused parts of a source's card, and the last
// "Resume" this page sent. Must not: mark anything as resumed itself: that arrives with the next
// snapshot.

import { el } from '../dom.js';
import { arr, obj, str, plural, sourceName, BACKENDS } from '../words.js';
import { rerender } from '../page.js';
import { focusGlobal } from '../focus.js';
import { errorBox } from '../problems.js';
import { sendResume, describeError } from '../transport.js';

// The last "Resume" from this page: { phase: 'sending' | 'sent' | 'error', error, resumed }.
let resuming = null;

/** A reason the snapshot gives for a pause, when it gives one. */
function pauseReason(s) {
  return str(s.paused_reason || s.state_reason || s.reason || obj(s.pause).reason);
}

export function settleResume(sources) {
  if (!resuming || resuming.phase === 'sending') return;
  if (resuming.phase === 'sent' && !sources.some((s) => obj(s).state === 'paused') && !resuming.noneFound) {
    clearTimeout(resuming.timer);
    resuming = null;
  }
}

function resumeButton(label, props) {
  const busy = !!resuming && resuming.phase !== 'error' && !resuming.noneFound;
  const b = el('button', Object.assign({
    className: 'btn btn-small btn-resume',
    text: label,
  }, props));
  b.type = 'button';
  b.disabled = busy;
  b.addEventListener('click', () => resume(b));
  return b;
}

function resumeStatus() {
  if (!resuming) return null;
  if (resuming.phase === 'error') return errorBox(resuming.error, 'Could not resume: ', 'resume-error');
  const text = resuming.phase === 'sending'
    ? 'Resuming\u2026'
    : resuming.noneFound
      ? 'Nothing was paused any more; the page shows what Berth says now.'
      : 'Resumed (' + resuming.resumed.map((b) => BACKENDS[b] || b).join(', ') + '). Loading again\u2026';
  return el('span', {
    className: 'progress',
    testid: 'resume-progress',
    dataset: { phase: resuming.noneFound ? 'none' : resuming.phase },
    attrs: { role: 'status' },
  }, [
    resuming.noneFound ? null : el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    text,
  ]);
}

/** `sendResume()` as a promise, also when it throws at once. */
function sendResumeNow() {
  try {
    return Promise.resolve(sendResume());
  } catch (err) {
    return Promise.reject(err);
  }
}

function resume(button) {
  if (!sendResume || (resuming && resuming.phase === 'sending')) return;
  const focusKey = button && button.dataset.focusGlobal;
  if (resuming) clearTimeout(resuming.timer);
  const entry = { phase: 'sending', error: null, resumed: [], noneFound: false, timer: null };
  resuming = entry;
  rerender();
  const sent = sendResumeNow();
  sent.then((resumed) => {
    if (resuming !== entry) return;
    entry.phase = 'sent';
    entry.resumed = arr(resumed).map(str);
    entry.noneFound = entry.resumed.length === 0;
    entry.timer = setTimeout(() => {
      if (resuming === entry) {
        resuming = null;
        rerender();
      }
    }, entry.noneFound ? 8000 : 15000);
    rerender();
  }, (err) => {
    if (resuming !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    if (focusKey) focusGlobal(focusKey);
  });
}

/** One banner above everything when sources are paused, with the way to resume them. */
export function renderPaused(sources) {
  const paused = sources.map(obj).filter((s) => s.state === 'paused');
  if (!paused.length && !(resuming && resuming.phase !== 'sending')) return null;
  if (!paused.length) {
    // Resumed: say so until the sources are back (or the note times out).
    const status = resumeStatus();
    return status ? el('div', { className: 'paused-banner is-resumed', testid: 'paused-banner' }, [status]) : null;
  }
  const backends = [...new Set(paused.map((s) => str(obj(s.approval).backend)).filter(Boolean))]
    .map((b) => BACKENDS[b] || b);
  const host = backends.length ? backends.join(' and ') + ' plugin ' + plural(backends.length, 'host', 'hosts') : 'plugin host';
  const n = paused.length;
  return el('section', {
    className: 'paused-banner',
    testid: 'paused-banner',
    dataset: { count: n },
    attrs: { 'aria-label': 'Paused sources' },
  }, [
    el('p', { className: 'paused-title' }, [
      el('strong', { text: n + ' ' + plural(n, 'source is', 'sources are') + ' paused. ' }),
      'The ' + host + ' stopped too often, so Berth stopped restarting ' + plural(backends.length, 'it', 'them') +
        '. Their tools cannot be called until you resume.',
    ]),
    el('div', { className: 'paused-actions' }, [
      resumeButton('Resume', {
        testid: 'resume',
        dataset: { focusGlobal: 'resume-banner' },
        attrs: { 'aria-label': 'Resume the paused plugin hosts' },
      }),
      resumeStatus(),
    ]),
  ]);
}

/** In a paused source's card: why, and Resume. */
export function renderPausedSource(s) {
  const reason = pauseReason(s);
  return el('div', { className: 'paused', testid: 'paused', attrs: { role: 'note' } }, [
    el('p', { className: 'paused-text' }, [
      el('strong', { text: 'Paused. ' }),
      'Its plugin host stopped too often, so Berth stopped restarting it. ' +
        'Look at its problems below, then resume.',
    ]),
    reason ? el('p', { className: 'paused-reason', testid: 'paused-reason' }, [
      el('span', { className: 'diag-label', text: 'Reason: ' }),
      reason,
    ]) : null,
    el('div', { className: 'paused-actions' }, [
      resumeButton('Resume', {
        testid: 'source-resume',
        dataset: { action: 'resume', focus: 'resume' },
        attrs: { 'aria-label': 'Resume ' + sourceName(s) + ' and its plugin host' },
      }),
    ]),
  ]);
}

// Hooks and tools Berth paused on their own (`paused_parts`): the source stays active, the rest
// of it runs. The last "Resume" sent for them: { phase, error, id } (settled once the source's
// snapshot lists none).
let partsResuming = null;

/** What of a source is paused on its own, `[]` for nothing. */
export const pausedPartsOf = (s) => arr(obj(s).paused_parts).map(obj);

/** A small mark for the card's head when some of its hooks or tools are paused. */
export function pausedPartsPill(s) {
  const n = pausedPartsOf(s).length;
  if (!n) return null;
  return el('span', {
    className: 'badge badge-limited badge-quiet',
    testid: 'partly-paused',
    dataset: { count: n },
    title: n + ' ' + plural(n, 'hook or tool is', 'hooks or tools are') + ' paused for failing again and again',
    text: 'Partly paused',
  });
}

/** In an active source's card: each hook or tool paused on its own, why, and Resume. */
export function renderPausedParts(s) {
  const parts = pausedPartsOf(s);
  const id = str(s.id);
  if (partsResuming && partsResuming.id === id && partsResuming.phase === 'sent' && !parts.length) partsResuming = null;
  if (!parts.length) return null;
  const n = parts.length;
  const mine = partsResuming && partsResuming.id === id ? partsResuming : null;
  const button = el('button', {
    className: 'btn btn-small btn-resume',
    testid: 'resume-parts',
    text: 'Resume',
    attrs: { 'aria-label': 'Run the paused ' + plural(n, 'hook or tool', 'hooks and tools') + ' of ' + sourceName(s) + ' again' },
  });
  button.type = 'button';
  button.disabled = !!mine && mine.phase !== 'error';
  button.addEventListener('click', () => resumeParts(id));
  return el('section', {
    className: 'limited paused-parts',
    testid: 'paused-parts',
    dataset: { count: n },
    attrs: { 'aria-label': 'What Berth paused of ' + sourceName(s) },
  }, [
    el('p', { className: 'limited-title' }, [
      el('strong', { text: 'Partly paused. ' }),
      plural(n, 'This', 'These') + ' failed again and again, so Berth stopped calling ' + plural(n, 'it', 'them') +
        '; the rest of ' + sourceName(s) + ' keeps working.',
    ]),
    el('ul', { className: 'limited-items' }, parts.map((p) => el('li', {
      className: 'limited-item',
      testid: 'paused-part',
      dataset: { capability: str(p.capability), code: str(p.code) },
    }, [
      el('p', { className: 'limited-what' }, [
        el('span', { className: 'mono limited-name', testid: 'paused-part-name', text: str(p.capability) }),
      ]),
      el('p', { className: 'limited-why', text: str(p.reason) }),
    ]))),
    el('div', { className: 'paused-actions' }, [
      button,
      mine && mine.phase === 'error' ? errorBox(mine.error, 'Could not resume: ', 'resume-parts-error') : null,
      mine && mine.phase !== 'error'
        ? el('span', { className: 'progress', testid: 'resume-parts-progress', attrs: { role: 'status' }, text: 'Resuming\u2026' })
        : null,
    ]),
  ]);
}

function resumeParts(id) {
  if (!sendResume || (partsResuming && partsResuming.phase === 'sending')) return;
  const entry = { phase: 'sending', error: null, id };
  partsResuming = entry;
  rerender();
  const sent = sendResumeNow();
  sent.then(() => {
    if (partsResuming !== entry) return;
    entry.phase = 'sent';
    rerender();
  }, (err) => {
    if (partsResuming !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
  });
}
