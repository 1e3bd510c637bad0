// The project picker (the window only). Owns: the open project as the window sees it, the
// folders opened before, "Open folder…" (the native dialog), opening a recent one, closing the
// project, forgetting one, and what became of the last of these. Must not: name a folder
// Berth did not list or the person did not pick, or wait for the switch (the new project's
// snapshot arrives as any other).

import { el } from '../dom.js';
import { arr, obj, str, num } from '../words.js';
import { rerender } from '../page.js';
import { errorBox } from '../problems.js';
import { sendProjects, describeError } from '../transport.js';

// What Berth said last: { current: path | null, recent: [{path, opened_at_ms, exists}] }.
let known = null;
// The last action: { what, phase: 'sending' | 'error', error }.
let last = null;

/** Berth's answer about the projects (at start, after a switch, from a second launch). */
export function setProjects(answer) {
  known = obj(answer);
  if (last && last.phase === 'sending') last = null;
  rerender();
}

/** Asks Berth for the picker's contents (the window only). */
export function loadProjects() {
  if (!sendProjects) return;
  Promise.resolve(sendProjects('list')).then(setProjects, (err) => {
    last = { what: 'list', phase: 'error', error: describeError(err) };
    rerender();
  });
}

export function renderProjects(snap) {
  if (!sendProjects) return null;
  const project = obj(snap.project);
  const open = project.open !== false;
  const current = known ? str(known.current) : open ? str(project.directory) : '';
  const busy = !!last && last.phase === 'sending';
  const button = (label, testid, action, arg, primary) => {
    const b = el('button', {
      className: primary ? 'btn btn-allow' : 'btn btn-small',
      testid,
      dataset: { focusGlobal: 'project:' + testid + ':' + (arg || '') },
      text: label,
      attrs: { type: 'button' },
    });
    b.disabled = busy;
    b.addEventListener('click', () => act(action, arg));
    return b;
  };
  const recent = arr(known && known.recent).map(obj).filter((r) => str(r.path) !== current);
  const list = recent.length
    ? el('ul', { className: 'project-list', testid: 'recent-projects' }, recent.map((r) => {
        const path = str(r.path);
        const when = num(r.opened_at_ms);
        return el('li', { className: 'project-item', testid: 'recent-project', dataset: { path } }, [
          r.exists === false
            ? el('span', { className: 'mono muted', text: path, title: 'This folder is not there any more (moved or deleted).' })
            : button(path, 'open-recent', 'open', path),
          when ? el('span', { className: 'muted', text: ' opened ' + new Date(when).toLocaleString() }) : null,
          r.exists === false ? el('span', { className: 'muted', text: ' \u2014 not there any more' }) : null,
          button('Forget', 'forget-project', 'forget', path),
        ]);
      }))
    : null;
  const heading = current
    ? el('p', { testid: 'project-current' }, ['Open: ', el('span', { className: 'mono', text: current })])
    : el('p', { className: 'empty-text', testid: 'no-project' },
        'No project is open. Below are the plugins and tools that apply to every project (your global OpenCode folders); open a project folder to see its own as well \u2014 nothing in it runs until you allow it.');
  return el('section', { className: 'panel projects', testid: 'projects', attrs: { 'aria-labelledby': 'projects-title' } }, [
    el('h2', { className: 'section-title', attrs: { id: 'projects-title' }, text: current ? 'Project' : 'Open a project' }),
    heading,
    el('div', { className: 'update-actions' }, [
      button(current ? 'Open another folder\u2026' : 'Open folder\u2026', 'open-folder-dialog', 'pick', '', !current),
      current ? button('Close project', 'close-project', 'close', '') : null,
    ]),
    list ? el('h3', { className: 'policy-group-title', text: 'Recent projects' }) : null,
    list,
    busy ? el('p', { className: 'muted', testid: 'project-opening', attrs: { role: 'status' }, text: 'Opening\u2026 the plugins of the project before are being stopped.' }) : null,
    last && last.phase === 'error' ? errorBox(last.error, 'The project could not be opened: ', 'project-error') : null,
  ]);
}

function act(action, path) {
  const entry = { what: action, phase: 'sending', error: null };
  last = entry;
  rerender();
  let p;
  try {
    p = Promise.resolve(sendProjects(action, path));
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then((answer) => {
    if (last !== entry) return;
    last = null;
    if (action === 'forget') loadProjects();
    else setProjects(answer);
  }, (err) => {
    if (last !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
  });
}
