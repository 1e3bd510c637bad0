// The frame around the panels. Owns: the top bar (brand mark, version, project folder, the badges
// for what waits for the person, the state of the whole — updating, partially limited — and the
// live indicator) and the footer. Must not: write inside
// #app, or act on a click (main.js wires the badges to the panels they show).

import { el } from './dom.js';
import { arr, obj, str, plural, basename, isAsking } from './words.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

export function renderHeader(snap, sources) {
  const asking = sources.filter(isAsking);
  const pending = asking.length;
  const activations = asking.filter((s) => obj(s).state === 'pending-activation').length;
  const waitingFor = activations === 0 ? 'waiting for approval'
    : activations === pending ? 'waiting for activation' : 'waiting for your decision';
  const badge = document.querySelector('[data-testid=pending-badge]');
  if (badge) {
    badge.dataset.count = String(pending);
    badge.hidden = pending === 0;
    badge.replaceChildren(
      el('span', { className: 'pending-badge-count', text: pending }),
      el('span', { className: 'pending-badge-text', text: waitingFor }),
    );
    badge.setAttribute('aria-label', pending + ' ' + plural(pending, 'source', 'sources') +
      ' ' + waitingFor + ': show ' + plural(pending, 'it', 'them'));
    badge.title = 'Show what is waiting for your decision';
  }
  renderPromptBadge(arr(snap.prompts).length);
  renderHeaderState(sources);
  const berth = obj(snap.berth);
  const version = document.querySelector('[data-testid=version]');
  version.textContent = berth.version ? 'v' + str(berth.version) : '';
  const project = obj(snap.project);
  const path = document.getElementById('project-path');
  const dir = str(project.directory) || str(project.worktree);
  path.textContent = project.open === false ? 'no project open' : dir || 'no project folder';
  path.title = dir;
  if (project.worktree && project.worktree !== project.directory) {
    path.title = dir + '\nworktree: ' + str(project.worktree);
  }
  document.title = 'Berth — ' + (project.open !== false && dir ? basename(dir) : 'status');
}

/** "Updating" while any source loads again or an update runs; "partially limited" while the
 * policy keeps something of an active source back. */
function renderHeaderState(sources) {
  const slot = document.querySelector('[data-testid=header-state]');
  if (!slot) return;
  const busy = ['checking', 'preparing', 'applying'];
  const updating = sources.filter((s) => obj(s).state === 'updating'
    || busy.includes(str(obj(obj(obj(obj(s).lifecycle).updates).progress).stage))).length;
  const limited = sources.filter((s) => arr(obj(s).limited).length > 0).length;
  const words = [];
  if (updating) words.push('Updating ' + updating + ' ' + plural(updating, 'source', 'sources'));
  if (limited) words.push(limited + ' partially limited');
  slot.hidden = words.length === 0;
  slot.dataset.updating = String(updating);
  slot.dataset.limited = String(limited);
  slot.textContent = words.join(' · ');
  slot.setAttribute('role', 'status');
}

function renderPromptBadge(n) {
  const badge = document.querySelector('[data-testid=prompt-badge]');
  if (!badge) return;
  badge.dataset.count = String(n);
  badge.hidden = n === 0;
  const text = plural(n, 'permission request', 'permission requests');
  badge.replaceChildren(
    el('span', { className: 'prompt-badge-count', text: n }),
    el('span', { className: 'prompt-badge-text', text }),
  );
  badge.setAttribute('aria-label', n + ' ' + text + ' waiting for your answer: show ' + plural(n, 'it', 'them'));
  badge.title = 'A tool is waiting for your answer';
}

export function renderFooter(snap) {
  const berth = obj(snap.berth);
  const store = obj(berth.store);
  const footer = document.getElementById('footer');
  const item = (label, value, testid) =>
    value === undefined || value === null || value === ''
      ? null
      : el('span', { className: 'footer-item', testid }, [
        el('span', { className: 'footer-label', text: label }),
        el('span', { className: 'mono', text: str(value) }),
      ]);
  footer.replaceChildren(...[
    item('Data', berth.data_dir, 'data-dir'),
    item('Store schema', store.schema_version, 'schema-version'),
    item('Log', berth.log_file, 'log-file'),
    item('Revision', snap.revision, 'revision'),
  ].filter(Boolean));
}

const LIVE_TEXT = {
  connecting: 'Connecting…',
  connected: 'Live',
  reconnecting: 'Reconnecting…',
  disconnected: 'Disconnected',
};

export function setLive(state, hint) {
  const live = document.querySelector('[data-testid=live]');
  if (!live) return;
  live.dataset.live = state;
  live.querySelector('.live-text').textContent = LIVE_TEXT[state] || state;
  live.title = hint || (state === 'connected' ? 'Changes appear here as they happen' : '');
}

// Brand mark (same drawing as icons/make-icons.py)

export function drawMark() {
  const host = document.getElementById('brand-mark');
  if (!host) return;
  const svg = document.createElementNS(SVG_NS, 'svg');
  svg.setAttribute('viewBox', '0 0 100 100');
  svg.setAttribute('width', '28');
  svg.setAttribute('height', '28');
  const bg = document.createElementNS(SVG_NS, 'rect');
  for (const [k, v] of Object.entries({ x: 0, y: 0, width: 100, height: 100, rx: 22, class: 'mark-bg' })) {
    bg.setAttribute(k, String(v));
  }
  const b = document.createElementNS(SVG_NS, 'path');
  b.setAttribute('d', 'M52 20 H33 V68 H55 A12 12 0 0 0 55 44 H33 M33 44 H52 A12 12 0 0 0 52 20');
  b.setAttribute('class', 'mark-fg');
  b.setAttribute('stroke-width', '9');
  const wave = document.createElementNS(SVG_NS, 'path');
  wave.setAttribute('d', 'M23 83 q6.75 -6 13.5 0 t13.5 0 t13.5 0 t13.5 0');
  wave.setAttribute('class', 'mark-fg');
  wave.setAttribute('stroke-width', '6');
  wave.setAttribute('stroke-linecap', 'round');
  svg.append(bg, b, wave);
  host.append(svg);
}
