// Paused sources (their plugin host spent its restart budget). Owns: the banner above everything,
// the paused part of a source's card, and the last "Resume" this page sent. Must not: mark a
// source as resumed itself: that arrives with the next snapshot.

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

function resume(button) {
  if (!sendResume || (resuming && resuming.phase === 'sending')) return;
  const focusKey = button && button.dataset.focusGlobal;
  if (resuming) clearTimeout(resuming.timer);
  const entry = { phase: 'sending', error: null, resumed: [], noneFound: false, timer: null };
  resuming = entry;
  rerender();
  let sent;
  try {
    sent = Promise.resolve(sendResume());
  } catch (err) {
    sent = Promise.reject(err);
  }
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
