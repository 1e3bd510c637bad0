// The first run: what Berth does, in two sentences, and that nothing has run yet. Owns: that
// panel, shown until the person's first decision or the first call. Must not: ask anything or
// offer a decision itself (the cards below do).

import { el } from '../dom.js';
import { arr, obj, plural } from '../words.js';

/** Whether nothing was ever decided here and nothing was called (the snapshot's word). */
export function isFirstRun(snap, sources) {
  if (arr(snap.calls).length) return false;
  return sources.every((s) => !obj(obj(s).approval).decision);
}

export function renderWelcome(snap, sources) {
  if (!isFirstRun(snap, sources)) return null;
  const n = sources.length;
  const found = n
    ? 'Nothing has run yet: Berth has read the ' + n + ' ' + plural(n, 'plugin or tool', 'plugins and tools') +
      ' it found without running ' + plural(n, 'it', 'them') + ', and waits for your decision on each.'
    : 'Nothing has run yet, and Berth found no plugin or tool: add one to your OpenCode config folder and it appears here.';
  return el('section', { className: 'panel welcome', testid: 'welcome', attrs: { 'aria-labelledby': 'welcome-title' } }, [
    el('h2', { className: 'empty-title', attrs: { id: 'welcome-title' }, text: 'Welcome to Berth' }),
    el('p', { className: 'empty-text', testid: 'welcome-what', text: 'Berth runs the OpenCode plugins and tools you already have, each one only after you allow it, in a supervised process of its own, with a receipt for every call.' }),
    el('p', { className: 'empty-text', testid: 'welcome-nothing-ran', text: found }),
  ]);
}
