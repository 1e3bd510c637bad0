// How problems look wherever they are shown. Owns: a list of diagnostics (code, message, what to
// do), a source card's problem count, and the inline box for an error Berth answered with.
// Must not: keep state or read more of the snapshot than it is given.

import { el } from './dom.js';
import { arr, obj, str, plural, severity } from './words.js';

/** A diagnostic that records an intended difference from OpenCode (a ledger row): a note. */
export const isNote = (d) => !!str(obj(d).ledger);

export function renderDiagnostics(diags) {
  return el('ul', { className: 'diags' }, arr(diags).map((d) => {
    const diag = obj(d);
    const note = isNote(diag);
    const sev = note ? 'note' : severity(diag.code);
    return el('li', {
      className: 'diag diag-' + sev,
      testid: 'diagnostic',
      dataset: { code: str(diag.code), severity: sev },
    }, [
      note
        ? el('span', { className: 'diag-code', title: 'Where Berth differs from OpenCode on purpose: row ' + str(diag.ledger) + ' of the deviations ledger', text: 'Note' })
        : el('span', { className: 'diag-code', text: str(diag.code) || 'problem' }),
      el('div', { className: 'diag-body' }, [
        el('p', { className: 'diag-message', text: str(diag.message) }),
        diag.recovery
          ? el('p', { className: 'diag-recovery' }, [
            el('span', { className: 'diag-label', text: 'What to do: ' }),
            str(diag.recovery),
          ])
          : null,
        diag.path && !str(diag.message).includes(str(diag.path))
          ? el('p', { className: 'diag-path mono', text: str(diag.path) })
          : null,
      ]),
    ]);
  }));
}

/** How many problems a card has (its notes are not problems); nothing when it has none. */
export function problemPill(all) {
  const diags = arr(all).filter((d) => !isNote(d));
  if (!diags.length) return null;
  const sevs = diags.map((d) => severity(obj(d).code));
  const sev = sevs.includes('error') ? 'error' : sevs.includes('warning') ? 'warning' : 'info';
  return el('span', {
    className: 'problems problems-' + sev,
    testid: 'problem-count',
    text: diags.length + ' ' + plural(diags.length, 'problem', 'problems'),
  });
}

/** An error from Berth, inline: its code, message and what to do. */
export function errorBox(e, lead, testid) {
  return el('div', {
    className: 'diag diag-error decision-error',
    testid,
    dataset: { code: e.code },
    attrs: { role: 'alert' },
  }, [
    el('span', { className: 'diag-code', text: e.code || 'error' }),
    el('div', { className: 'diag-body' }, [
      el('p', { className: 'diag-message' }, [el('strong', { text: lead }), e.message]),
      e.recovery ? el('p', { className: 'diag-recovery' }, [
        el('span', { className: 'diag-label', text: 'What to do: ' }),
        e.recovery,
      ]) : null,
    ]),
  ]);
}
