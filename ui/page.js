// The snapshot on screen. Owns: that snapshot, the lookups made from it once per render (sources
// by id, the host process of each source), re-rendering it, and the names and links that need
// it. Must not: change the snapshot (a source's new state only arrives from Berth) or talk to
// Berth.

import { el } from './dom.js';
import { jumpLink } from './focus.js';
import { arr, obj, str, sourceName } from './words.js';

export let current = null; // the snapshot on screen
// Lookups into the snapshot on screen, made once per render: sources by id, and the host
// process that runs each source.
export let view = { sourceById: new Map(), hostBySource: new Map() };
let renderer = null; // renders a snapshot (main.js), set once at start

export function setRenderer(renderSnapshot) {
  renderer = renderSnapshot;
}

export function setCurrent(snap) {
  current = snap;
}

/** Makes the lookups for the snapshot being rendered. */
export function makeLookups(snap, sources) {
  const sourceById = new Map();
  for (const s of sources) sourceById.set(str(obj(s).id), obj(s));
  const hostBySource = new Map();
  for (const h of arr(snap.hosts).map(obj)) {
    for (const id of arr(h.instances)) if (!hostBySource.has(str(id))) hostBySource.set(str(id), h);
  }
  view = { sourceById, hostBySource };
}

export function rerender() {
  if (current) renderer(current);
}

export const sourceAnchor = (id) => 'source-' + str(id);
export const hostAnchor = (pid) => 'host-' + str(pid);

/** A link to a source's card, named as its card is. */
export function sourceLink(id, opts) {
  const s = view.sourceById.get(str(id));
  if (!s) return el('span', { className: 'mono', testid: obj(opts).testid, dataset: { sourceId: str(id) }, text: str(id) });
  const a = jumpLink('#' + sourceAnchor(id), sourceName(s), Object.assign({ title: str(id) }, opts));
  a.dataset.sourceId = str(id);
  return a;
}

/** The plugin a prompt or a notice comes from, as its card names it (or its id). */
export function pluginName(id) {
  const s = view.sourceById.get(str(id));
  return s ? sourceName(s) : str(id) || 'a plugin';
}
