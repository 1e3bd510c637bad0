// The data source. Owns: the connection to Berth — the Tauri shell when window.__TAURI__ is
// there (`invoke('status')` and the `status-changed` event), otherwise the loopback server of
// `berth serve` (`GET /api/status` and the `/api/events` server-sent events, with the token
// from this page's address) — and the senders of decisions, answers, resumes, policy values,
// grants and conflict choices. Must not: touch the DOM (it reports through the callbacks `connect` is given) or
// poll.

import { arr, obj, str, num } from './words.js';

// (action, ids, digests, { includingFetch }) => Promise<decided ids>; rejects with {code,
// message, recovery}. `includingFetch` takes both of an npm plugin's steps at once. Set by the
// transport in use.
export let sendDecision = null;
// (key, value) => Promise<the entry now in force>; `value` null takes the person's setting
// back. Rejects with {code, message, recovery}. Set by the transport in use.
export let sendPolicy = null;
// (source, item, granted) => Promise; lets one held contribution through its `review` cap (or
// holds it again). Rejects with {code, message, recovery}. Set by the transport in use.
export let sendGrant = null;
// (id, reply) => Promise; rejects with {code, message, recovery}. Set by the transport in use.
export let sendPromptAnswer = null;
// (tool, candidate) => Promise<the conflict now>; the person chooses who serves a contested tool
// name. Rejects with {code, message, recovery}. Set by the transport in use.
export let sendChoice = null;
// () => Promise<resumed backends>; rejects with {code, message, recovery}. Set by the transport.
export let sendResume = null;
// (action, source, opts) => Promise<answer>: action 'check' ({offers, errors}), 'update'
// (opts.approveGrowth), 'rollback' (opts.to) → the outcome, or 'prepare' (an MCP server's
// fetch-and-run package) → what was prepared. Rejects with {code, message,
// recovery}. Set by the transport in use.
export let sendLifecycle = null;
// (action 'sign-in' | 'sign-out', source) => Promise: a remote MCP server's sign-in starts (the
// browser opens on the provider's page; the snapshots show how it ends) or is forgotten.
// Rejects with {code, message, recovery}. Set by the transport in use.
export let sendSignIn = null;
// (folder) => Promise<{opened: path}>: 'logs' or 'config', opened in the file manager.
export let sendOpenFolder = null;
// (tool, args, call) => Promise<receipt>: one real call through Berth's full path; `call` is
// this page's id for it, which sendCancel(call) cancels while it runs. Rejects with {code,
// message, recovery} when the call could not run at all.
export let sendInvoke = null;
export let sendCancel = null;
// (action 'list' | 'pick' | 'open' | 'close' | 'forget', path) => Promise<{current, recent}>
// ('forget': whether it was listed). The window only (null in a browser: `berth serve` has
// one project). 'pick' opens the native folder dialog. Rejects with {code, message, recovery}.
export let sendProjects = null;

/** An error from either transport as {code, message, recovery}. */
export function describeError(err) {
  let e = err;
  if (typeof e === 'string') {
    try {
      e = JSON.parse(e);
    } catch (_) {
      e = { message: e };
    }
  }
  e = obj(e);
  if (obj(e.error).message) e = obj(e.error);
  return {
    code: str(e.code) || 'error',
    message: str(e.message) || String(err),
    recovery: str(e.recovery),
  };
}

/**
 * Starts the transport this page runs under. `page`: { render(snap), hasSnapshot(),
 * setLive(state, hint), showError(title, message, recovery), clearError() }.
 */
export function connect(page) {
  // page.projectsChanged(answer): the window opened another project (or a second launch did);
  // page.showItem({kind, id}): a desktop notification about that source or prompt was clicked.
  const tauri = window.__TAURI__;
  if (tauri && tauri.core && typeof tauri.core.invoke === 'function' && tauri.event) {
    startTauri(tauri, page);
  } else {
    startWeb(page);
  }
}

function startTauri(tauri, page) {
  page.setLive('connecting');
  let latest = -1;
  const accept = (snap) => {
    const rev = num(obj(snap).revision);
    if (rev !== null && rev < latest) return; // an older answer arriving late
    if (rev !== null) latest = rev;
    page.render(snap);
  };
  sendDecision = (action, ids, digests, opts) => {
    if (action !== 'allow') return tauri.core.invoke('deny', { ids, digests });
    const args = { ids, digests };
    if (obj(opts).includingFetch) args.includingFetch = true;
    return tauri.core.invoke('approve', args);
  };
  sendPromptAnswer = (id, reply) => tauri.core.invoke('answer_prompt', { id, reply });
  sendResume = () => tauri.core.invoke('resume');
  sendPolicy = (key, value) => tauri.core.invoke('set_policy', { key, value });
  sendGrant = (source, item, granted) => tauri.core.invoke('grant', { source, item, granted });
  sendChoice = (tool, candidate) => tauri.core.invoke('choose', { tool, candidate });
  sendLifecycle = (action, source, opts) => {
    const o = obj(opts);
    if (action === 'check') return tauri.core.invoke('check_updates', { sources: source ? [source] : null });
    if (action === 'update') return tauri.core.invoke('update', { source, approveGrowth: !!o.approveGrowth });
    if (action === 'prepare') return tauri.core.invoke('prepare', { source });
    return tauri.core.invoke('rollback', { source, to: o.to ?? null });
  };
  sendSignIn = (action, source) => tauri.core.invoke(action === 'sign-in' ? 'mcp_sign_in' : 'mcp_sign_out', { source });
  sendOpenFolder = (folder) => tauri.core.invoke('open_folder', { folder });
  sendInvoke = (tool, args, call) => tauri.core.invoke('invoke_tool', { tool, args, call });
  sendCancel = (call) => tauri.core.invoke('cancel_call', { call });
  sendProjects = (action, path) => {
    if (action === 'list') return tauri.core.invoke('projects');
    if (action === 'forget') return tauri.core.invoke('forget_project', { path });
    if (action === 'close') return tauri.core.invoke('open_project', { none: true });
    return tauri.core.invoke('open_project', { path: action === 'open' ? path : null });
  };
  // A desktop notification was clicked: the window shows its item ({kind, id}).
  Promise.resolve(tauri.event.listen('focus-item', (e) => {
    if (page.showItem) page.showItem(obj(e && e.payload));
  })).catch((err) => console.error('berth: focus events', err));
  // Another project's snapshots count their revisions afresh.
  Promise.resolve(tauri.event.listen('project-changed', (e) => {
    latest = -1;
    if (page.projectsChanged) page.projectsChanged(obj(e && e.payload));
    tauri.core.invoke('status').then(accept, (err) => console.error('berth: status', err));
  })).catch((err) => console.error('berth: project events', err));
  // Listen first, then ask: no change can fall between the two.
  Promise.resolve(tauri.event.listen('status-changed', (e) => {
    const payload = obj(e && e.payload);
    if (payload.snapshot) accept(payload.snapshot);
    else tauri.core.invoke('status').then(accept, (err) => console.error('berth: status', err));
  }))
    .then(() => tauri.core.invoke('status'))
    .then((snap) => {
      accept(snap);
      page.setLive('connected');
    })
    .catch((err) => {
      page.setLive('disconnected', String(err));
      page.showError('Berth could not read its status', String((err && err.message) || err),
        'Restart Berth; if it happens again, look at the log file.');
    });
}

function startWeb(page) {
  const token = new URLSearchParams(location.search).get('token');
  if (!token) {
    page.setLive('disconnected');
    page.showError('This address has no access token',
      'The status page needs the address that `berth serve` printed; it ends in ?token=…',
      'Open the full URL printed by `berth serve`.');
    return;
  }
  const q = '?token=' + encodeURIComponent(token);
  sendDecision = (action, ids, digests, opts) => {
    const body = { ids, digests };
    if (action === 'allow' && obj(opts).includingFetch) body.including_fetch = true;
    return webPost(token, action === 'allow' ? 'approve' : 'deny', body).then((answer) => arr(obj(answer).decided));
  };
  sendPromptAnswer = (id, reply) => webPost(token, 'prompt', { id, reply });
  sendResume = () => webPost(token, 'resume', {}).then((body) => arr(obj(body).resumed));
  sendPolicy = (key, value) => webPost(token, 'policy', { key, value }).then((body) => obj(obj(body).set));
  sendGrant = (source, item, granted) => webPost(token, 'policy/grant', { source, item, granted });
  sendChoice = (tool, candidate) => webPost(token, 'choose', { tool, candidate }).then((b) => obj(obj(b).conflict));
  sendLifecycle = (action, source, opts) => {
    const o = obj(opts);
    if (action === 'check') return webPost(token, 'updates/check', { sources: source ? [source] : null });
    if (action === 'update') return webPost(token, 'update', { source, approve_growth: !!o.approveGrowth }).then((b) => obj(b).update);
    if (action === 'prepare') return webPost(token, 'prepare', { source }).then((b) => obj(b).prepared);
    return webPost(token, 'rollback', { source, to: o.to ?? null }).then((b) => obj(b).update);
  };
  sendSignIn = (action, source) => webPost(token, action === 'sign-in' ? 'mcp-sign-in' : 'mcp-sign-out', { source });
  sendOpenFolder = (folder) => webPost(token, 'open-folder', { folder });
  sendInvoke = (tool, args, call) => webPost(token, 'invoke', { tool, args, call });
  sendCancel = (call) => webPost(token, 'cancel', { call });
  page.setLive('connecting');

  fetch('/api/status', { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' })
    .then((res) => {
      if (res.status === 401 || res.status === 403) {
        const err = new Error('The access token in this address is not accepted (HTTP ' + res.status + ').');
        err.auth = true;
        throw err;
      }
      if (!res.ok) throw new Error('The status request failed (HTTP ' + res.status + ').');
      return res.json();
    })
    .then((snap) => {
      if (!page.hasSnapshot()) page.render(snap);
      listen(q, page);
    })
    .catch((err) => {
      page.setLive('disconnected');
      if (err && err.auth) {
        page.showError('Access refused', err.message,
          'Berth makes a new token each time it starts: open the URL that `berth serve` printed last.');
      } else {
        page.showError('Berth is not reachable', String((err && err.message) || err),
          'Check that `berth serve` is still running, then reload this page.');
      }
    });
}

/**
 * POST /api/<path> with a JSON body (approve, deny, prompt, resume, policy, policy/grant, choose) → the
 * 200 answer's JSON, or a rejection with {code, message, recovery} (Berth's error body, or one
 * made here).
 */
function webPost(token, path, payload) {
  return fetch('/api/' + path, {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: JSON.stringify(payload),
    cache: 'no-store',
  }).then(
    (res) => res.json().catch(() => null).then((body) => {
      if (res.ok) return body;
      const e = obj(obj(body).error);
      if (e.message) throw e;
      throw {
        code: res.status === 401 || res.status === 403 ? 'action-required' : 'temporarily-unavailable',
        message: 'Berth refused the request (HTTP ' + res.status + ').',
        recovery: res.status === 401 || res.status === 403
          ? 'Open the URL that `berth serve` printed last.'
          : 'Try again; if it keeps failing, look at the log file.',
      };
    }),
    (err) => {
      throw {
        code: 'temporarily-unavailable',
        message: 'Berth did not answer (' + String((err && err.message) || err) + ').',
        recovery: 'Check that `berth serve` is still running, then try again.',
      };
    },
  );
}

function listen(q, page) {
  const source = new EventSource('/api/events' + q);
  source.addEventListener('open', () => page.setLive('connected'));
  source.addEventListener('status', (ev) => {
    let snap;
    try {
      snap = JSON.parse(ev.data);
    } catch (e) {
      console.error('berth: an event did not hold JSON', e);
      return;
    }
    page.setLive('connected');
    page.clearError();
    page.render(snap);
  });
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) {
      page.setLive('disconnected', 'The server refused or ended the live connection');
      page.showError('The live connection ended',
        'Berth stopped sending updates; what is shown may be out of date.',
        'If `berth serve` was restarted, open the new URL it printed.');
    } else {
      page.setLive('reconnecting', 'The connection dropped; the browser is trying again');
    }
  });
}
