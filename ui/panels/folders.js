// "Open log folder" and "Open config folder". Owns: the two buttons and what became of the last
// click (the folder opened, or why not). Must not: name a path itself (Berth decides which folder
// each button means) or wait for the file manager.

import { el } from '../dom.js';
import { obj, str } from '../words.js';
import { rerender } from '../page.js';
import { errorBox } from '../problems.js';
import { sendOpenFolder, describeError } from '../transport.js';

const FOLDERS = [
  ['logs', 'Open log folder', 'Berth\u2019s log files'],
  ['config', 'Open config folder', 'Your OpenCode config folder: plugins and tools there apply to every project'],
];

// The last click: { folder, phase: 'sending' | 'done' | 'error', opened, error }.
let last = null;

export function renderFolders() {
  const buttons = FOLDERS.map(([folder, label, title]) => {
    const b = el('button', {
      className: 'btn btn-small',
      testid: 'open-folder-' + folder,
      dataset: { focusGlobal: 'open-folder:' + folder },
      text: label,
      title,
      attrs: { type: 'button' },
    });
    b.disabled = !sendOpenFolder || (!!last && last.phase === 'sending');
    b.addEventListener('click', () => open(folder));
    return b;
  });
  return el('section', { className: 'folders', testid: 'folders' }, [
    el('div', { className: 'update-actions' }, buttons),
    last && last.phase === 'done'
      ? el('p', { className: 'muted', testid: 'folder-opened', attrs: { role: 'status' } }, ['Opened ', el('span', { className: 'mono', text: last.opened })])
      : null,
    last && last.phase === 'error' ? errorBox(last.error, 'It could not be opened: ', 'folder-error') : null,
  ]);
}

function open(folder) {
  const entry = { folder, phase: 'sending', opened: '', error: null };
  last = entry;
  rerender();
  let p;
  try {
    p = Promise.resolve(sendOpenFolder(folder));
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then((answer) => {
    if (last !== entry) return;
    entry.phase = 'done';
    entry.opened = str(obj(answer).opened);
    rerender();
  }, (err) => {
    if (last !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
  });
}
