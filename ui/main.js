// Berth status page, the entry module. Native ES modules, no build step, no framework.
//
// Data comes from the Tauri shell when it is present, otherwise from the loopback page server
// (transport.js). Nothing is polled. Every piece of data is put into the page as text (never as
// HTML). The page never changes a source's state (or removes a prompt) itself: the new state
// arrives with the next live event, and the page re-renders from that snapshot.
//
// Owns: rendering one snapshot (the panels, in their order), the load error, and wiring the
// transport and the header's badges at start. Must not: hold rules or markup of a panel.

import { el } from './dom.js';
import { arr, obj, num } from './words.js';
import { current, setCurrent, makeLookups, setRenderer } from './page.js';
import { rememberFocus, restoreFocus } from './focus.js';
import { connect } from './transport.js';
import { renderHeader, renderFooter, setLive, drawMark } from './header.js';
import { renderNotices, renderSummary, renderGlobalDiagnostics } from './panels/summary.js';
import { renderSources, renderEmpty } from './panels/sources.js';
import { settleDecisions, showPending, showSource } from './panels/approvals.js';
import { renderPrompts, renderStandingAnswers, settleAnswers, showPrompts } from './panels/prompts.js';
import { renderPaused, settleResume } from './panels/paused.js';
import { renderMessages, showNewToasts } from './panels/messages.js';
import { renderTools } from './panels/tools.js';
import { renderConflicts, settleChoices } from './panels/conflicts.js';
import { renderCalls } from './panels/calls.js';
import { renderHosts } from './panels/hosts.js';
import { renderPolicy, settlePolicy } from './panels/policy.js';
import { settleGrants } from './panels/limits.js';
import { renderLookedAt, renderRuntimes } from './panels/environment.js';
import { renderWelcome } from './panels/welcome.js';
import { renderProjects, setProjects, loadProjects } from './panels/projects.js';

function render(snapshot) {
  const snap = obj(snapshot);
  setCurrent(snap);
  const app = document.getElementById('app');
  const sources = arr(snap.sources);
  settleDecisions(sources);
  settleGrants(sources);
  settlePolicy(snap);
  settleChoices(snap);
  const focus = rememberFocus(app);
  makeLookups(snap, sources);

  settleAnswers(arr(snap.prompts));
  settleResume(sources);
  renderHeader(snap, sources);
  const parts = [
    renderProjects(snap),
    renderWelcome(snap, sources),
    renderNotices(snap),
    renderPaused(sources),
    renderPrompts(snap),
    renderStandingAnswers(snap),
    renderSummary(snap, sources),
    renderGlobalDiagnostics(snap),
    sources.length ? renderSources(sources) : renderEmpty(),
    renderConflicts(snap),
    renderTools(snap),
    renderCalls(snap),
    renderMessages(snap),
    renderPolicy(snap, sources),
    renderHosts(snap),
    renderLookedAt(snap, sources.length === 0),
    renderRuntimes(snap),
  ];
  app.replaceChildren(...parts.filter(Boolean));
  app.removeAttribute('aria-busy');
  restoreFocus(app, focus);
  renderFooter(snap);
  showNewToasts(snap);

  const revision = num(snap.revision);
  document.body.dataset.revision = revision === null ? '' : String(revision);
  document.body.dataset.ready = '1';
}

function renderError(title, message, recovery) {
  const app = document.getElementById('app');
  const box = el('section', { className: 'panel load-error', testid: 'load-error' }, [
    el('h2', { className: 'empty-title', text: title }),
    el('p', { text: message }),
    recovery ? el('p', { className: 'diag-recovery' }, [
      el('span', { className: 'diag-label', text: 'What to do: ' }),
      recovery,
    ]) : null,
  ]);
  if (current) {
    // Keep the last good snapshot on screen; put the problem above it.
    const old = app.querySelector('[data-testid=load-error]');
    if (old) old.remove();
    app.prepend(box);
  } else {
    app.replaceChildren(box);
    app.removeAttribute('aria-busy');
  }
}

function safeRender(snapshot) {
  try {
    render(snapshot);
  } catch (e) {
    console.error('berth: cannot render the status', e);
    renderError('This status could not be shown', String((e && e.message) || e),
      'Reload the page; if it happens again, report it with the log file.');
  }
}

function clearError() {
  const old = document.querySelector('[data-testid=load-error]');
  if (old) old.remove();
}

/** A desktop notification's item ({kind: 'source' | 'prompt', id}), brought into view. */
function showItem(item) {
  const shown = item.kind === 'prompt' ? (showPrompts(), true) : showSource(String(item.id || ''));
  if (shown) document.body.dataset.shownItem = String(item.kind) + ':' + String(item.id);
}

function start() {
  drawMark();
  const badge = document.querySelector('[data-testid=pending-badge]');
  if (badge) badge.addEventListener('click', showPending);
  const promptBadge = document.querySelector('[data-testid=prompt-badge]');
  if (promptBadge) promptBadge.addEventListener('click', showPrompts);
  connect({
    render: safeRender,
    hasSnapshot: () => !!current,
    setLive,
    showError: renderError,
    clearError,
    projectsChanged: setProjects,
    showItem,
  });
  loadProjects();
}

setRenderer(safeRender);

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', start);
} else {
  start();
}
