// Where the keyboard focus goes. Owns: finding the focused element again after a re-render (by
// its source card and data-focus key, or by its data-focus-global key) and the in-page links
// that move the focus. Must not: render panels or read the snapshot.

import { el } from './dom.js';
import { obj } from './words.js';

// Focus across re-renders: the element in focus is found again by its source and its
// data-focus key; if it is gone or disabled, the nearest useful thing in the same source.

function rowOf(app, id) {
  for (const row of app.querySelectorAll('[data-testid=source]')) {
    if (row.dataset.sourceId === id) return row;
  }
  return null;
}

export function rememberFocus(app) {
  const a = document.activeElement;
  if (!a || !app.contains(a)) return null;
  // Outside the source cards (tools, hosts): only elements that carry a key of their own.
  if (a.dataset.focusGlobal) return { global: a.dataset.focusGlobal };
  const row = a.closest('[data-testid=source]');
  if (!row) return null;
  if (a === row) return { id: row.dataset.sourceId, key: null, self: true };
  return { id: row.dataset.sourceId, key: a.dataset.focus || null };
}

export function restoreFocus(app, focus) {
  if (!focus) return;
  if (focus.global) {
    let t = app.querySelector('[data-focus-global="' + CSS.escape(focus.global) + '"]');
    if (t && t.disabled && /:.*:/.test(focus.global)) {
      // Its controls wait for Berth (a prompt's answer, a policy value): the progress line of
      // the same group holds the focus.
      t = app.querySelector('[data-focus-global="' + CSS.escape(focus.global.replace(/:[^:]*$/, ':status')) + '"]');
    }
    if (!t && focus.global.startsWith('prompt:')) {
      // The prompt was answered and left: on to the next one, if any.
      t = app.querySelector('[data-testid=prompt] button[data-reply]:not([disabled])');
    }
    if (t && !t.disabled && document.activeElement !== t) t.focus({ preventScroll: true });
    return;
  }
  const row = rowOf(app, focus.id);
  if (row && focus.self) {
    if (document.activeElement !== row) row.focus({ preventScroll: true });
    return;
  }
  if (!row) return;
  const usable = (n) => n && !n.disabled;
  const byKey = (k) => (k ? row.querySelector('[data-focus="' + CSS.escape(k) + '"]') : null);
  const target = [byKey(focus.key), byKey('status'), row.querySelector('[data-action]:not([disabled])'), row]
    .find(usable);
  if (target && document.activeElement !== target) target.focus({ preventScroll: true });
}

export function focusIn(id, key) {
  restoreFocus(document.getElementById('app'), { id, key });
}

export function focusGlobal(key) {
  restoreFocus(document.getElementById('app'), { global: key });
}

/** A link to another place on this page: scrolls there and moves the focus there. */
export function jumpLink(href, text, opts) {
  const o = obj(opts);
  const a = el('a', {
    className: 'jump' + (o.className ? ' ' + o.className : ''),
    text,
    testid: o.testid,
    title: o.title,
    dataset: { focus: o.focus, focusGlobal: o.focusGlobal, target: href.slice(1) },
    attrs: { href },
  });
  a.addEventListener('click', (e) => {
    const target = document.getElementById(href.slice(1));
    if (!target) return;
    e.preventDefault();
    target.scrollIntoView({ block: 'start' });
    if (!target.hasAttribute('tabindex')) target.setAttribute('tabindex', '-1');
    target.focus({ preventScroll: true });
  });
  return a;
}
