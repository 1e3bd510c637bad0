// What Berth found on this computer. Owns: the config folders and files it looked at, and the
// JavaScript runtimes (with the buttons that open Berth's folders, from folders.js). Must not:
// keep state or talk to Berth.

import { el, details } from '../dom.js';
import { arr, obj, str, scopeLabel } from '../words.js';
import { renderFolders } from './folders.js';

export function renderLookedAt(snap, empty) {
  const dirs = arr(snap.config_dirs).map(obj);
  const files = arr(snap.config_files).map(obj);
  const dirsFound = dirs.filter((d) => d.exists).length;
  const filesFound = files.filter((f) => f.exists).length;

  const dirsBlock = details('config-dirs', empty,
    [
      el('span', { className: 'details-title', text: 'Config folders looked at' }),
      el('span', { className: 'details-note', text: dirsFound + ' of ' + dirs.length + ' present' }),
    ],
    pathList(dirs, 'config-dir', 'No config folders were looked at.'),
    { className: 'looked', testid: 'config-dirs' });
  const filesBlock = details('config-files', false,
    [
      el('span', { className: 'details-title', text: 'Config files' }),
      el('span', { className: 'details-note', text: filesFound + ' of ' + files.length + ' present' }),
    ],
    pathList(files, 'config-file', 'No config files were looked at.'),
    { className: 'looked', testid: 'config-files' });

  return el('section', { className: 'panel looked-panel', testid: 'config-section' }, [
    el('h2', { className: 'section-title', text: 'Where Berth looked' }),
    renderFolders(),
    dirsBlock,
    filesBlock,
  ]);
}

const ROLES = {
  global: 'Your config',
  project: 'Project',
  'config-dir': '.opencode folder',
  managed: 'Managed by admin',
};

function roleLabel(role) {
  return ROLES[str(role)] || str(role).replace(/-/g, ' ');
}

function pathList(items, testid, emptyText) {
  if (!items.length) return el('p', { className: 'muted', text: emptyText });
  return el('ul', { className: 'paths' }, items.map((item) => {
    const exists = item.exists === true;
    return el('li', {
      className: 'path-row ' + (exists ? 'is-present' : 'is-absent'),
      testid,
      dataset: { exists: exists ? '1' : '0', path: str(item.path) },
    }, [
      el('span', {
        className: 'presence',
        title: exists ? 'present' : 'not present',
        text: exists ? 'Present' : 'Not present',
      }),
      el('span', { className: 'mono path', text: str(item.path) }),
      el('span', { className: 'tags' }, [
        item.role ? el('span', { className: 'tag', title: 'role: ' + str(item.role), text: roleLabel(item.role) }) : null,
        item.scope ? el('span', { className: 'tag', text: scopeLabel(item.scope) }) : null,
      ]),
    ]);
  }));
}

export function renderRuntimes(snap) {
  const runtimes = arr(snap.runtimes).map(obj);
  const body = runtimes.length
    ? el('ul', { className: 'runtimes' }, runtimes.map((r) => {
      const ok = !r.problem && !!r.path;
      return el('li', {
        className: 'runtime ' + (ok ? 'is-ok' : 'is-problem'),
        testid: 'runtime',
        dataset: { runtime: str(r.name) },
      }, [
        el('span', { className: 'runtime-name', text: str(r.name) }),
        el('span', { className: 'runtime-version mono', text: r.version ? str(r.version) : 'not found' }),
        el('span', { className: 'runtime-path mono', text: str(r.path) }),
        r.found_via ? el('span', { className: 'tag', text: 'via ' + str(r.found_via) }) : null,
        r.problem ? el('p', { className: 'runtime-problem', text: str(r.problem) }) : null,
      ]);
    }))
    : el('p', { className: 'muted', text: 'No JavaScript runtime information yet.' });
  return el('section', { className: 'panel', testid: 'runtimes-section' }, [
    el('h2', { className: 'section-title', text: 'Runtimes' }),
    body,
  ]);
}
