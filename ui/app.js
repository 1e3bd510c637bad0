// Berth status page. Plain script, no build step, no framework.
//
// Data comes from the Tauri shell when it is present (window.__TAURI__: `invoke('status')` and
// the `status-changed` event), otherwise from the loopback page server (`GET /api/status` and
// the `/api/events` server-sent events, both with the token from this page's address).
// Nothing is polled. Every piece of data is put into the page as text (never as HTML).
//
// Approval decisions go out through `invoke('approve'|'deny', {ids, digests})` or
// `POST /api/approve|deny` (each id with the digest its card showed);
// answers to a tool's permission prompt through `invoke('answer_prompt', {id, reply})` or
// `POST /api/prompt`; resuming paused plugin hosts through `invoke('resume')` or
// `POST /api/resume`. The page never changes a source's state (or removes a prompt) itself: the
// new state arrives with the next live event, and the page re-renders from that snapshot.
// Messages plugins send (`notices`) also show as short-lived toasts, each one once.
'use strict';

(function () {
  // ---------------------------------------------------------------------------------------
  // Small helpers

  const SVG_NS = 'http://www.w3.org/2000/svg';

  /** Creates an element. `props`: className, text, testid, title, dataset, attrs, hidden. */
  function el(tag, props, children) {
    const node = document.createElement(tag);
    if (props) {
      if (props.className) node.className = props.className;
      if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
      if (props.testid) node.setAttribute('data-testid', props.testid);
      if (props.title) node.title = String(props.title);
      if (props.dataset) {
        for (const [k, v] of Object.entries(props.dataset)) {
          if (v !== undefined && v !== null) node.dataset[k] = String(v);
        }
      }
      if (props.attrs) {
        for (const [k, v] of Object.entries(props.attrs)) {
          if (v !== undefined && v !== null) node.setAttribute(k, String(v));
        }
      }
    }
    appendAll(node, children);
    return node;
  }

  function appendAll(node, children) {
    if (children === undefined || children === null) return node;
    for (const child of Array.isArray(children) ? children : [children]) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const arr = (v) => (Array.isArray(v) ? v : []);
  const obj = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
  const str = (v) => (v === undefined || v === null ? '' : String(v));
  const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

  function plural(n, one, many) {
    return n === 1 ? one : many;
  }

  function basename(path) {
    const s = str(path).replace(/[\\/]+$/, '');
    const i = Math.max(s.lastIndexOf('/'), s.lastIndexOf('\\'));
    return i >= 0 ? s.slice(i + 1) : s;
  }

  // ---------------------------------------------------------------------------------------
  // Words for the snapshot's codes

  const STATES = {
    discovered: { label: 'Discovered', tone: 'neutral' },
    'pending-approval': { label: 'Waiting for approval', tone: 'attention' },
    preparing: { label: 'Preparing', tone: 'progress' },
    'pending-activation': { label: 'Waiting for activation', tone: 'attention' },
    active: { label: 'Active', tone: 'ok' },
    'load-failed': { label: 'Failed to load', tone: 'error' },
    paused: { label: 'Paused', tone: 'error' },
    disabled: { label: 'Disabled', tone: 'neutral' },
    'policy-limited': { label: 'Limited by policy', tone: 'limited' },
    unsupported: { label: 'Not supported', tone: 'limited' },
    'incompatible-version': { label: 'Incompatible version', tone: 'limited' },
  };

  function stateInfo(state) {
    const s = str(state);
    return STATES[s] || { label: s ? s.replace(/-/g, ' ') : 'unknown', tone: 'neutral' };
  }

  const KINDS = {
    'npm-plugin': 'npm plugin',
    'file-plugin': 'Local plugin',
    'standalone-tool': 'Custom tool',
    mcp: 'MCP server',
  };

  function kindLabel(kind) {
    const k = str(kind);
    return KINDS[k] || (k ? k.replace(/-/g, ' ') : 'Source');
  }

  /** Which group a source is shown in: 'plugin', 'tool', 'mcp' or 'other'. */
  function category(source) {
    const k = str(obj(source).kind);
    if (k === 'mcp' || k.startsWith('mcp-')) return 'mcp';
    if (/(^|-)tool$/.test(k)) return 'tool';
    if (/(^|-)plugin$/.test(k)) return 'plugin';
    return 'other';
  }

  const isTool = (source) => category(source) === 'tool';

  function scopeLabel(scope) {
    const s = str(scope);
    if (s === 'global') return 'All projects';
    if (s === 'local') return 'This project';
    return s || 'unknown scope';
  }

  const ERROR_CODES = new Set([
    'plugin-failed', 'dependency-failed', 'process-lost', 'worker-lost', 'invalid-response',
  ]);
  const WARNING_CODES = new Set([
    'action-required', 'temporarily-unavailable', 'timeout', 'overloaded', 'cancelled',
    'invalid-arguments', 'incompatible-version',
  ]);

  function severity(code) {
    const c = str(code);
    if (ERROR_CODES.has(c)) return 'error';
    if (WARNING_CODES.has(c)) return 'warning';
    return 'info';
  }

  // ---------------------------------------------------------------------------------------
  // Page state

  let current = null; // the snapshot on screen
  // Lookups into the snapshot on screen, made once per render: sources by id, and the host
  // process that runs each source.
  let view = { sourceById: new Map(), hostBySource: new Map() };
  const openState = Object.create(null); // <details> the person opened or closed, by key

  // Decisions sent from this page, by source id: { action, phase: 'sending' | 'sent' | 'error',
  // error, before: the source's approval when it was sent }. An entry is settled (removed) as
  // soon as a snapshot shows the source's decision changed.
  const decisions = Object.create(null);
  // Sources the person chose to decide "Later" in this page session, by id and capability
  // digest: a source that changes again asks again.
  const later = new Set();
  // (action, ids) => Promise<decided ids>; rejects with {code, message, recovery}. Set by the
  // transport in use.
  let sendDecision = null;
  // (id, reply) => Promise; rejects with {code, message, recovery}. Set by the transport in use.
  let sendPromptAnswer = null;
  // () => Promise<resumed backends>; rejects with {code, message, recovery}. Set by the transport.
  let sendResume = null;

  // Answers sent from this page to permission prompts, by prompt id: { reply, phase: 'sending' |
  // 'sent' | 'error', error }. Settled (removed) once the snapshot no longer lists the prompt.
  const answers = Object.create(null);
  // The last "Resume" from this page: { phase: 'sending' | 'sent' | 'error', error, resumed }.
  let resuming = null;

  function details(key, defaultOpen, summaryChildren, bodyChildren, props) {
    const d = el('details', props);
    d.open = key in openState ? openState[key] : defaultOpen;
    d.addEventListener('toggle', () => {
      openState[key] = d.open;
    });
    d.append(el('summary', null, summaryChildren));
    appendAll(d, bodyChildren);
    return d;
  }

  // ---------------------------------------------------------------------------------------
  // Rendering

  function render(snapshot) {
    const snap = obj(snapshot);
    current = snap;
    const app = document.getElementById('app');
    const sources = arr(snap.sources);
    settleDecisions(sources);
    const focus = rememberFocus(app);
    view = lookups(snap, sources);

    settleAnswers(arr(snap.prompts));
    settleResume(sources);
    renderHeader(snap, sources);
    const parts = [
      renderNotices(snap),
      renderPaused(sources),
      renderPrompts(snap),
      renderStandingAnswers(snap),
      renderSummary(snap, sources),
      renderGlobalDiagnostics(snap),
      sources.length ? renderSources(sources) : renderEmpty(),
      renderTools(snap),
      renderCalls(snap),
      renderMessages(snap),
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

  function lookups(snap, sources) {
    const sourceById = new Map();
    for (const s of sources) sourceById.set(str(obj(s).id), obj(s));
    const hostBySource = new Map();
    for (const h of arr(snap.hosts).map(obj)) {
      for (const id of arr(h.instances)) if (!hostBySource.has(str(id))) hostBySource.set(str(id), h);
    }
    return { sourceById, hostBySource };
  }

  /** A source waiting for the person: before it is loaded, or for what it registers. */
  const isAsking = (s) => obj(s).state === 'pending-approval' || obj(s).state === 'pending-activation';

  function renderHeader(snap, sources) {
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
    const berth = obj(snap.berth);
    const version = document.querySelector('[data-testid=version]');
    version.textContent = berth.version ? 'v' + str(berth.version) : '';
    const project = obj(snap.project);
    const path = document.getElementById('project-path');
    const dir = str(project.directory) || str(project.worktree);
    path.textContent = dir || 'no project folder';
    path.title = dir;
    if (project.worktree && project.worktree !== project.directory) {
      path.title = dir + '\nworktree: ' + str(project.worktree);
    }
    document.title = 'Berth — ' + (dir ? basename(dir) : 'status');
  }

  function renderNotices(snap) {
    const notices = [];
    const store = obj(obj(snap.berth).store);
    if (store.moved_aside) {
      notices.push(
        el('div', { className: 'notice notice-warning', testid: 'store-moved-aside' }, [
          el('strong', { text: 'Berth started with a fresh database. ' }),
          'The previous one could not be opened and was kept at ',
          el('span', { className: 'mono', text: store.moved_aside }),
          '. Earlier approvals are not applied.',
        ]),
      );
    }
    return notices.length ? el('div', { className: 'notices' }, notices) : null;
  }

  function renderSummary(snap, sources) {
    // The snapshot's `counts` are made from the same sources listed below; they are counted
    // here only for a snapshot that has none.
    const counts = obj(snap.counts);
    const count = (key, pred) => {
      const n = num(counts[key]);
      return n !== null ? n : sources.filter((s) => pred(obj(s))).length;
    };
    const total = count('sources', () => true);
    const pending = count('pending_approval', (s) => s.state === 'pending-approval');
    const activation = count('pending_activation', (s) => s.state === 'pending-activation');
    const active = count('active', (s) => s.state === 'active');
    const failed = count('failed', (s) =>
      s.state === 'load-failed' || s.state === 'paused' || s.state === 'incompatible-version');
    const unsupported = count('unsupported', (s) => s.state === 'unsupported' || s.state === 'policy-limited');
    const disabled = count('disabled', (s) => s.state === 'disabled');
    const preparing = sources.filter((s) => obj(s).state === 'preparing').length;

    let headline;
    let tone;
    let detail;
    if (total === 0) {
      headline = 'Nothing waiting for approval';
      tone = 'neutral';
      detail = 'Berth watches OpenCode\'s folders and updates this page as soon as something appears.';
    } else if (pending > 0) {
      headline = pendingHeadline(pending, sources);
      tone = 'attention';
      const askedAgain = sources.filter((s) => obj(s).state === 'pending-approval' &&
        obj(obj(s).approval).decision === 'allow').length;
      if (askedAgain === pending) {
        detail = pending === 1
          ? 'It changed since you approved it, so Berth asks again before it runs the new version.'
          : 'They changed since you approved them, so Berth asks again before it runs the new versions.';
      } else if (askedAgain > 0) {
        detail = 'Some changed since you approved them. Review what each one can do before you decide.';
      } else {
        detail = pending === 1
          ? 'None of its code has run. Review what it can do before you approve it.'
          : 'None of their code has run. Review what each one can do before you approve it.';
      }
      if (activation > 0) {
        detail += ' ' + activation + ' more ' + plural(activation, 'registers', 'register') +
          ' more than you approved.';
      }
    } else if (activation > 0) {
      headline = activationHeadline(activation, sources);
      tone = 'attention';
      detail = activation === 1
        ? 'Berth loaded it and found more than you approved. OpenCode uses none of it until you decide.'
        : 'Berth loaded them and found more than you approved. OpenCode uses none of it until you decide.';
    } else if (failed > 0) {
      const paused = sources.filter((s) => obj(s).state === 'paused').length;
      tone = 'error';
      if (paused > 0 && paused >= failed) {
        headline = paused + ' ' + plural(paused, 'source is', 'sources are') + ' paused';
        detail = 'Their plugin host stopped too often. Look at what went wrong, then resume.';
      } else {
        headline = failed + ' ' + plural(failed, 'source failed', 'sources failed') + ' to load';
        detail = 'Each one below says what went wrong and what to do.' +
          (paused > 0 ? ' ' + paused + ' of them ' + plural(paused, 'is', 'are') + ' paused.' : '');
      }
    } else if (preparing > 0) {
      headline = 'Preparing ' + preparing + ' ' + plural(preparing, 'source', 'sources');
      tone = 'progress';
      detail = 'Berth is downloading what ' + plural(preparing, 'it needs', 'they need') +
        '; this page updates by itself when ' + plural(preparing, 'it is', 'they are') + ' ready.';
    } else if (active === total) {
      headline = total === 1 ? 'The one source is active' : 'All ' + total + ' sources are active';
      tone = 'ok';
      detail = '';
    } else {
      headline = active + ' of ' + total + ' ' + plural(total, 'source', 'sources') + ' active';
      tone = 'neutral';
      detail = '';
    }

    const chips = [
      chip(total, plural(total, 'source found', 'sources found'), 'total'),
      chip(pending, 'waiting for approval', 'pending', pending > 0 ? 'attention' : ''),
      activation > 0 ? chip(activation, 'waiting for activation', 'pending-activation', 'attention') : null,
      chip(active, 'active', 'active', active > 0 ? 'ok' : ''),
      chip(failed, 'failed', 'failed', failed > 0 ? 'error' : ''),
      chip(unsupported, 'not supported', 'unsupported', unsupported > 0 ? 'limited' : ''),
      disabled > 0 ? chip(disabled, 'disabled', 'disabled', '') : null,
    ].filter(Boolean);
    const pure = obj(snap.pure);
    const purePart = str(pure.state) && str(pure.state) !== 'off';
    if (purePart) {
      chips.push(
        el('span', {
          className: 'chip chip-limited',
          testid: 'pure',
          title: 'OPENCODE_PURE' + (pure.raw !== undefined && pure.raw !== null ? '=' + str(pure.raw) : ''),
          text: str(pure.state) === 'on' ? 'Pure mode: external plugins off' : 'Pure mode: ' + str(pure.state),
        }),
      );
    }

    return el('section', { className: 'summary tone-' + tone, testid: 'summary-section' }, [
      el('h1', { className: 'summary-headline', testid: 'summary', text: headline }),
      detail ? el('p', { className: 'summary-detail', text: detail }) : null,
      total > 0 || purePart ? el('div', { className: 'chips', testid: 'counts' }, chips) : null,
    ]);
  }

  function activationHeadline(n, sources) {
    const waiting = sources.filter((s) => obj(s).state === 'pending-activation');
    const cats = new Set(waiting.map(category));
    const what = waiting.length === n && cats.size === 1 && (cats.has('plugin') || cats.has('tool'))
      ? (cats.has('plugin') ? plural(n, 'plugin', 'plugins') : plural(n, 'tool', 'tools'))
      : plural(n, 'source', 'sources');
    return n + ' ' + what + ' ' + plural(n, 'registers', 'register') + ' more than you approved';
  }

  function pendingHeadline(pending, sources) {
    const waiting = sources.filter((s) => obj(s).state === 'pending-approval');
    const tools = waiting.filter(isTool).length;
    const plugins = waiting.filter((s) => category(s) === 'plugin').length;
    let what;
    if (waiting.length !== pending || tools + plugins !== pending) what = plural(pending, 'source', 'sources');
    else if (tools === 0) what = plural(plugins, 'plugin', 'plugins');
    else if (plugins === 0) what = plural(tools, 'tool', 'tools');
    else {
      return plugins + ' ' + plural(plugins, 'plugin', 'plugins') + ' and ' + tools + ' ' +
        plural(tools, 'tool', 'tools') + ' waiting for approval';
    }
    return pending + ' ' + what + ' waiting for approval';
  }

  function chip(n, label, key, tone) {
    return el('span', {
      className: 'chip' + (tone ? ' chip-' + tone : ' chip-quiet'),
      dataset: { count: key },
    }, [el('strong', { text: n }), ' ' + label]);
  }

  function renderGlobalDiagnostics(snap) {
    const diags = arr(snap.diagnostics);
    if (!diags.length) return null;
    return el('section', { className: 'panel diagnostics-panel', testid: 'diagnostics' }, [
      el('h2', { className: 'section-title', text: 'Configuration problems' }),
      renderDiagnostics(diags),
    ]);
  }

  function renderDiagnostics(diags) {
    return el('ul', { className: 'diags' }, arr(diags).map((d) => {
      const diag = obj(d);
      const sev = severity(diag.code);
      return el('li', {
        className: 'diag diag-' + sev,
        testid: 'diagnostic',
        dataset: { code: str(diag.code), severity: sev },
      }, [
        el('span', { className: 'diag-code', text: str(diag.code) || 'problem' }),
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

  function renderEmpty() {
    return el('section', { className: 'panel empty', testid: 'empty-state' }, [
      el('h2', { className: 'empty-title', text: 'No OpenCode plugins or tools were found' }),
      el('p', { className: 'empty-text' }, [
        'Berth looks where OpenCode does: the ',
        el('code', { text: 'plugins/' }),
        ' and ',
        el('code', { text: 'tools/' }),
        ' folders of the config folders listed below, and the ',
        el('code', { text: 'plugin' }),
        ' list in ',
        el('code', { text: 'opencode.json' }),
        ' files. Add a plugin there and it shows up here; nothing runs until you approve it.',
      ]),
    ]);
  }

  function renderSources(sources) {
    const indexed = sources.map((s, i) => ({ s: obj(s), i }));
    const byOrder = (a, b) => {
      const oa = num(a.s.order);
      const ob = num(b.s.order);
      if (oa !== null && ob !== null && oa !== ob) return oa - ob;
      return a.i - b.i;
    };
    const of = (cat) => indexed.filter((x) => category(x.s) === cat).sort(byOrder);
    const groups = [
      ['plugin', 'Plugins', 'in load order'],
      ['tool', 'Custom tools', 'from tools/ folders'],
      ['mcp', 'MCP servers', 'listed in config'],
      ['other', 'Other sources', ''],
    ]
      .map(([cat, title, note]) => [cat, title, note, of(cat)])
      .filter((g) => g[3].length)
      .map(([cat, title, note, items]) => renderGroup(cat, title, note, items));
    return el('section', { className: 'sources', testid: 'source-list' }, groups);
  }

  function renderGroup(key, title, note, items) {
    return el('div', { className: 'source-group', dataset: { group: key } }, [
      el('h2', { className: 'section-title' }, [
        title,
        el('span', { className: 'section-count', text: items.length }),
        note ? el('span', { className: 'section-note', text: note }) : null,
      ]),
      el('ol', { className: 'source-items' }, items.map((x, pos) => el('li', null, renderSource(x.s, pos)))),
    ]);
  }

  function sourceName(s) {
    const k = str(s.kind);
    if (k === 'npm-plugin' || category(s) === 'mcp') return str(s.entry) || str(s.spec) || str(s.id);
    const tools = arr(obj(s.capabilities).tools);
    if (isTool(s) && tools.length === 1) return str(tools[0]);
    return basename(s.entry) || str(s.id);
  }

  function renderSource(s, pos) {
    const info = stateInfo(s.state);
    const caps = obj(s.capabilities);
    const diags = arr(s.diagnostics);
    const order = num(s.order);
    const approval = obj(s.approval);
    const pending = s.state === 'pending-approval';
    const asking = isAsking(s);
    const deferred = asking && later.has(laterKey(s));
    let badgeLabel = info.label;
    let badgeTone = info.tone;
    if (s.state === 'discovered' && approval.decision === 'allow') {
      badgeLabel = 'Approved';
      badgeTone = 'ok';
    } else if (s.state === 'disabled' && approval.decision === 'deny') {
      badgeLabel = 'Denied';
    } else if (pending && approval.decision === 'allow') {
      badgeLabel = 'Waiting for approval again';
    }

    // A waiting source shows its problems before the question: they matter to the answer.
    // A version Berth will not load leads with why.
    const blocked = s.state === 'incompatible-version';
    const problems = diags.length && !blocked ? renderDiagnostics(diags) : null;
    const body = asking && !deferred
      ? [problems, renderApprovalPanel(s, caps)]
      : [
        blocked ? renderBlocked(s, diags) : null,
        s.state === 'paused' ? renderPausedSource(s) : null,
        asking ? renderDeferred(s) : renderDecided(s),
        s.state === 'preparing' ? renderPreparing(s) : null,
        s.state === 'active' ? renderRunsIn(s) : null,
        renderMeta(s),
        renderCaps(caps),
        problems,
      ];

    return el('article', {
      className: 'source tone-' + info.tone + (asking && !deferred ? ' is-asking' : ''),
      testid: 'source',
      dataset: { sourceId: str(s.id), state: str(s.state), kind: str(s.kind) },
      attrs: { tabindex: '-1', id: sourceAnchor(s.id) },
    }, [
      el('header', { className: 'source-head' }, [
        el('span', {
          className: 'order',
          title: order !== null ? 'Load order ' + (order + 1) : 'Position ' + (pos + 1),
          text: order !== null ? order + 1 : pos + 1,
        }),
        el('div', { className: 'source-title' }, [
          el('h3', { className: 'source-name', text: sourceName(s) }),
          el('p', { className: 'source-sub' }, [
            el('span', { className: 'kind', text: kindLabel(s.kind) }),
            el('span', { className: 'sep', text: '·', attrs: { 'aria-hidden': 'true' } }),
            el('span', { className: 'mono source-id', testid: 'source-id', text: str(s.id) }),
          ]),
        ]),
        diags.length ? problemPill(diags) : null,
        el('span', {
          className: 'badge badge-' + badgeTone,
          testid: 'state',
          dataset: { state: str(s.state) },
          text: badgeLabel,
        }),
      ]),
      ...body,
      renderTechnical(s, caps),
    ]);
  }

  function renderMeta(s) {
    const npm = obj(s.npm);
    // The package, when it says more than the entry does.
    const pkg = !!npm.name && (str(npm.name) !== str(s.entry) || (!!npm.request && str(npm.request) !== str(npm.name)));
    return el('dl', { className: 'source-meta' }, [
      el('dt', { text: 'Entry' }),
      el('dd', { className: 'mono', testid: 'source-entry', text: str(s.entry) }),
      pkg ? el('dt', { text: 'Package' }) : null,
      pkg ? el('dd', { testid: 'source-npm' }, [
        el('span', { className: 'mono', text: str(npm.name) }),
        npm.request && str(npm.request) !== str(npm.name)
          ? el('span', { className: 'tag', title: 'the version asked for in the config', text: 'asks for ' + str(npm.request) })
          : null,
      ]) : null,
      el('dt', { text: 'Listed in' }),
      el('dd', null, originParts(s)),
    ]);
  }

  /** An approved package being fetched (or a plugin's dependencies being installed). */
  function renderPreparing(s) {
    const npm = obj(s.npm);
    const download = !!npm.name || s.kind === 'npm-plugin';
    return el('div', { className: 'source-status status-preparing', testid: 'preparing', attrs: { role: 'status' } }, [
      el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      el('span', { text: download ? 'Downloading its package\u2026' : 'Preparing its dependencies\u2026' }),
      npm.name
        ? el('span', { className: 'mono status-detail', text: str(npm.name) + (npm.request ? ' ' + str(npm.request) : '') })
        : null,
    ]);
  }

  /** Which plugin host process runs an active source. */
  function renderRunsIn(s) {
    const h = view.hostBySource.get(str(s.id));
    if (!h) return null;
    const backend = str(h.backend);
    const pid = str(h.pid);
    return el('p', { className: 'source-status status-runs', testid: 'runs-in', dataset: { pid } }, [
      el('span', { className: 'status-dot', attrs: { 'aria-hidden': 'true' } }),
      'Runs in ' + (BACKENDS[backend] || backend || 'a') + ' host ',
      jumpLink('#' + hostAnchor(pid), 'pid ' + pid, { focus: 'runs-in', title: 'Show this process under Plugin hosts' }),
    ]);
  }

  /** A source Berth will not load as it is: the reason first, prominently. */
  function renderBlocked(s, diags) {
    return el('div', { className: 'blocked', testid: 'blocked', attrs: { role: 'note' } }, [
      el('p', { className: 'blocked-title', text: 'Berth does not load this version: it is not made for the OpenCode version Berth provides.' }),
      diags.length ? renderDiagnostics(diags) : null,
    ]);
  }

  const sourceAnchor = (id) => 'source-' + str(id);
  const hostAnchor = (pid) => 'host-' + str(pid);

  /** A link to another place on this page: scrolls there and moves the focus there. */
  function jumpLink(href, text, opts) {
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

  /** A link to a source's card, named as its card is. */
  function sourceLink(id, opts) {
    const s = view.sourceById.get(str(id));
    if (!s) return el('span', { className: 'mono', testid: obj(opts).testid, dataset: { sourceId: str(id) }, text: str(id) });
    const a = jumpLink('#' + sourceAnchor(id), sourceName(s), Object.assign({ title: str(id) }, opts));
    a.dataset.sourceId = str(id);
    return a;
  }

  function originParts(s) {
    return [
      el('span', { className: 'mono', testid: 'source-origin', text: str(s.origin) }),
      el('span', { className: 'scope scope-' + str(s.scope), testid: 'source-scope', text: scopeLabel(s.scope) }),
    ];
  }

  function capsList(caps) {
    const summary = arr(caps.summary);
    return summary.length
      ? el('ul', { className: 'caps-list', testid: 'capabilities' }, summary.map((line) =>
        el('li', { className: caps.contents_unknown ? 'caps-unknown' : '', text: str(line) })))
      : el('p', { className: 'caps-none', text: 'Nothing is known about it yet.' });
  }

  function renderCaps(caps) {
    return el('div', { className: 'caps' }, [
      el('h3', { className: 'caps-title', text: 'What it can do' }),
      capsList(caps),
    ]);
  }

  // ---------------------------------------------------------------------------------------
  // Approval

  const BACKENDS = { bun: 'Bun', node: 'Node.js' };

  function laterKey(s) {
    return [str(s.id), str(s.capability_digest || s.digest), str(s.state),
      arr(obj(s.approval).grew).map(str).join('|')].join('@');
  }

  /** "plugin" or "tool", for sentences. */
  function noun(s) {
    return isTool(s) ? 'tool' : category(s) === 'mcp' ? 'server' : 'plugin';
  }

  function whenText(ms) {
    const n = num(ms);
    if (n === null) return '';
    return new Date(n).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  }

  function timeEl(ms) {
    const n = num(ms);
    if (n === null) return null;
    return el('time', {
      testid: 'decided-at',
      text: whenText(n),
      attrs: { datetime: new Date(n).toISOString() },
    });
  }

  function runsWhere(approval) {
    const backend = str(approval.backend);
    return [
      el('strong', { text: BACKENDS[backend] || backend || 'its runtime' }),
      ' on ',
      el('span', { className: 'mono', title: 'host/user this decision applies to', text: str(approval.domain) || 'this computer' }),
      ', with your user\u2019s rights',
    ];
  }

  function renderApprovalPanel(s, caps) {
    const id = str(s.id);
    const approval = obj(s.approval);
    const grew = arr(approval.grew).map(str).filter(Boolean);
    // Loaded after an approval, and found to register more than was approved.
    const activation = s.state === 'pending-activation';
    const again = approval.decision === 'allow';
    const name = sourceName(s);
    const what = noun(s);
    const local = s.kind === 'file-plugin' || isTool(s);

    let intro;
    if (activation) {
      const at = timeEl(approval.decided_at_ms);
      intro = ['You approved ', el('strong', { text: name }), at ? ' on ' : '', at,
        '. Berth loaded it and found that it registers more than that approval covered. ' +
        'OpenCode uses none of it until you decide.'];
    } else if (again) {
      const at = timeEl(approval.decided_at_ms);
      intro = ['You approved ', el('strong', { text: name }), at ? ' on ' : '', at,
        '. It has changed since, so Berth will not run the new version until you decide again.'];
    } else {
      intro = ['OpenCode would load ', el('strong', { text: name }), ' as a ', kindLabel(s.kind).toLowerCase(),
        ' for ', s.scope === 'local' ? 'this project' : 'all your projects',
        '. Berth has not run any of its code.'];
    }

    const grewBlock = grew.length
      ? el('div', { className: 'approval-grew', testid: 'approval-grew', attrs: { role: 'note' } }, [
        el('p', {
          className: 'approval-grew-title',
          text: activation ? 'Once loaded, it:' : 'Asked again because it now:',
        }),
        el('ul', { className: 'approval-grew-list' }, grew.map((g) => {
          const i = g.indexOf(': ');
          return el('li', { dataset: { grew: g } }, i > 0
            ? [el('strong', { text: g.slice(0, i) }), ': ', el('span', { className: 'mono', text: g.slice(i + 2) })]
            : [el('strong', { text: g })]);
        })),
      ])
      : again
        ? el('div', { className: 'approval-grew', testid: 'approval-changed', attrs: { role: 'note' } }, [
          el('p', { className: 'approval-grew-title', text: 'Asked again because its code changed since you approved it.' }),
        ])
        : null;

    const facts = el('dl', { className: 'approval-facts' }, [
      el('dt', { text: 'Plugin id' }),
      el('dd', { className: 'mono', testid: 'approval-id', text: id }),
      el('dt', { text: local ? 'File' : 'Package' }),
      el('dd', { className: 'mono', testid: 'source-entry', text: str(s.entry) }),
      el('dt', { text: 'Comes from' }),
      el('dd', { className: 'approval-origin' }, originParts(s)),
      el('dt', { text: activation ? 'Runs' : 'Would run' }),
      el('dd', { testid: 'approval-runs' }, runsWhere(approval)),
      el('dt', { text: 'What it could do' }),
      el('dd', null, capsList(caps)),
    ]);

    const busy = isBusy(id);
    const btn = (action, label, cls, aria) => {
      const b = el('button', {
        className: 'btn ' + cls,
        text: label,
        dataset: { action, focus: action },
        attrs: { type: 'button', 'aria-label': aria },
      });
      b.disabled = busy;
      b.addEventListener('click', () => {
        if (action === 'later') deferSource(s);
        else decide(s, action);
      });
      return b;
    };

    const title = activation
      ? 'Approve what it registers?'
      : again ? 'Allow the changed ' + what + ' to run?' : 'Allow this ' + what + ' to run?';
    const note = activation
      ? [
        el('strong', { text: 'Allowing lets OpenCode call what it registers, with your user\u2019s rights.' }),
        ' Its code already ran once when Berth loaded it; denying stops it and keeps it from loading again.',
      ]
      : [
        el('strong', { text: 'Approving lets its code run with your user\u2019s rights.' }),
        ' Berth cannot undo side effects an import already had; denying later only stops it from loading again.',
      ];

    return el('section', {
      className: 'approval' + (again ? ' is-again' : '') + (activation ? ' is-activation' : ''),
      testid: 'approval-panel',
      dataset: { variant: activation ? 'activation' : again ? 'again' : 'first' },
      attrs: { 'aria-label': 'Approval for ' + name, 'aria-busy': busy ? 'true' : null },
    }, [
      el('h4', { className: 'approval-title', text: title }),
      el('p', { className: 'approval-intro' }, intro),
      grewBlock,
      facts,
      el('p', { className: 'approval-note', testid: 'approval-note' }, [
        el('span', { className: 'approval-note-icon', text: '!', attrs: { 'aria-hidden': 'true' } }),
        el('span', null, note),
      ]),
      el('div', { className: 'approval-actions' }, [
        btn('allow', activation ? 'Allow' : again ? 'Allow again' : 'Allow', 'btn-allow',
          activation ? 'Allow what ' + name + ' registers' : 'Allow ' + name),
        btn('deny', 'Deny', 'btn-deny', 'Deny ' + name),
        btn('later', 'Later', 'btn-quiet', 'Decide about ' + name + ' later'),
        decisionStatus(id),
      ]),
      decisionError(id),
    ]);
  }

  /** A pending source the person put off: one line, and a way back to the panel. */
  function renderDeferred(s) {
    const review = el('button', {
      className: 'btn btn-small btn-quiet',
      text: 'Review now',
      dataset: { action: 'review', focus: 'review' },
      attrs: { type: 'button', 'aria-label': 'Review ' + sourceName(s) + ' now' },
    });
    review.addEventListener('click', () => {
      later.delete(laterKey(s));
      rerender();
      focusIn(str(s.id), 'allow');
    });
    return el('div', { className: 'decision decision-later', testid: 'decision' }, [
      el('span', {
        className: 'decision-text',
        text: s.state === 'pending-activation'
          ? 'Registers more than you approved; OpenCode uses none of it yet. You chose to decide later.'
          : 'Waiting for your decision. You chose to decide later.',
      }),
      review,
    ]);
  }

  /** The decision in force for a source that is not waiting, with the way to change it. */
  function renderDecided(s) {
    const approval = obj(s.approval);
    const id = str(s.id);
    const d = approval.decision;
    if (d !== 'allow' && d !== 'deny') return null;
    const allowed = d === 'allow';
    const action = allowed ? 'deny' : 'allow';
    const button = el('button', {
      className: 'btn btn-small ' + (allowed ? 'btn-deny' : 'btn-quiet'),
      text: allowed ? 'Revoke' : 'Allow instead',
      dataset: { action, focus: action },
      attrs: {
        type: 'button',
        'aria-label': (allowed ? 'Revoke the approval of ' : 'Allow ') + sourceName(s) + (allowed ? '' : ' instead'),
      },
    });
    button.disabled = isBusy(id);
    button.addEventListener('click', () => decide(s, action));
    const at = timeEl(approval.decided_at_ms);
    return el('div', {
      className: 'decision decision-' + d,
      testid: 'decision',
      dataset: { decision: d },
    }, [
      el('span', { className: 'decision-mark', text: allowed ? '\u2713' : '\u2715', attrs: { 'aria-hidden': 'true' } }),
      el('span', { className: 'decision-text' }, allowed
        ? [el('strong', { text: 'Approved' }), at ? ' ' : '', at, ' to run with ', ...runsWhere(approval).slice(0, 3)]
        : [el('strong', { text: 'Denied' }), at ? ' ' : '', at, '. Berth will not load it.']),
      button,
      decisionStatus(id),
      decisionError(id),
    ]);
  }

  function isBusy(id) {
    const d = decisions[id];
    return !!d && d.phase !== 'error';
  }

  const PROGRESS = { allow: 'Allowing\u2026', deny: 'Denying\u2026' };

  function decisionStatus(id) {
    const d = decisions[id];
    if (!d || d.phase === 'error') return null;
    return el('span', {
      className: 'progress',
      testid: 'decision-progress',
      dataset: { phase: d.phase, focus: 'status' },
      attrs: { role: 'status', tabindex: '-1' },
    }, [
      el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      d.phase === 'sending' ? PROGRESS[d.action] : 'Saved. Updating\u2026',
    ]);
  }

  function decisionError(id) {
    const d = decisions[id];
    if (!d || d.phase !== 'error') return null;
    const e = d.error;
    return el('div', {
      className: 'diag diag-error decision-error',
      testid: 'decision-error',
      dataset: { code: e.code },
      attrs: { role: 'alert' },
    }, [
      el('span', { className: 'diag-code', text: e.code || 'error' }),
      el('div', { className: 'diag-body' }, [
        el('p', { className: 'diag-message' }, [
          el('strong', { text: (d.action === 'allow' ? 'Could not allow it: ' : 'Could not deny it: ') }),
          e.message,
        ]),
        e.recovery ? el('p', { className: 'diag-recovery' }, [
          el('span', { className: 'diag-label', text: 'What to do: ' }),
          e.recovery,
        ]) : null,
      ]),
    ]);
  }

  function deferSource(s) {
    later.add(laterKey(s));
    rerender();
    focusIn(str(s.id), 'review');
  }

  function decide(s, action) {
    const id = str(s.id);
    if (!sendDecision || isBusy(id)) return;
    const approval = obj(s.approval);
    const entry = {
      action,
      phase: 'sending',
      error: null,
      before: { decision: approval.decision || null, at: num(approval.decided_at_ms) },
    };
    decisions[id] = entry;
    rerender();
    focusIn(id, 'status');
    let sent;
    try {
      // The digest of the source as this card showed it: Berth refuses an approval of bytes
      // that moved since.
      sent = Promise.resolve(sendDecision(action, [id], { [id]: str(s.digest) }));
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(() => {
      if (decisions[id] !== entry) return;
      entry.phase = 'sent';
      // The new state comes with the live event (it may already be here). If none arrives,
      // stop showing progress after a while: the page then shows whatever Berth last said.
      entry.timer = setTimeout(() => {
        if (decisions[id] === entry) {
          delete decisions[id];
          rerender();
        }
      }, 10000);
      rerender();
    }, (err) => {
      if (decisions[id] !== entry) return;
      entry.phase = 'error';
      entry.error = describeError(err);
      rerender();
      focusIn(id, action);
    });
  }

  /** Drops the decisions the snapshot now reflects (and errors of sources that changed). */
  function settleDecisions(sources) {
    const byId = new Map(sources.map((x) => [str(obj(x).id), obj(x)]));
    for (const id of Object.keys(decisions)) {
      const d = decisions[id];
      if (d.phase === 'sending') continue;
      const s = byId.get(id);
      const approval = obj(s && s.approval);
      const changed = !s || (approval.decision || null) !== d.before.decision ||
        num(approval.decided_at_ms) !== d.before.at;
      if (changed) {
        clearTimeout(d.timer);
        delete decisions[id];
      }
    }
  }

  /** An error from either transport as {code, message, recovery}. */
  function describeError(err) {
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

  function rerender() {
    if (current) safeRender(current);
  }

  // ---------------------------------------------------------------------------------------
  // Focus across re-renders: the element in focus is found again by its source and its
  // data-focus key; if it is gone or disabled, the nearest useful thing in the same source.

  function rowOf(app, id) {
    for (const row of app.querySelectorAll('[data-testid=source]')) {
      if (row.dataset.sourceId === id) return row;
    }
    return null;
  }

  function rememberFocus(app) {
    const a = document.activeElement;
    if (!a || !app.contains(a)) return null;
    // Outside the source cards (tools, hosts): only elements that carry a key of their own.
    if (a.dataset.focusGlobal) return { global: a.dataset.focusGlobal };
    const row = a.closest('[data-testid=source]');
    if (!row) return null;
    if (a === row) return { id: row.dataset.sourceId, key: null, self: true };
    return { id: row.dataset.sourceId, key: a.dataset.focus || null };
  }

  function restoreFocus(app, focus) {
    if (!focus) return;
    if (focus.global) {
      let t = app.querySelector('[data-focus-global="' + CSS.escape(focus.global) + '"]');
      if (t && t.disabled && focus.global.startsWith('prompt:')) {
        // Its buttons wait for Berth: the progress line of the same prompt holds the focus.
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

  function focusIn(id, key) {
    restoreFocus(document.getElementById('app'), { id, key });
  }

  /** The header badge: brings back panels put off with Later and goes to the first one. */
  function showPending() {
    later.clear();
    rerender();
    const app = document.getElementById('app');
    const row = app.querySelector('[data-testid=source]:is([data-state=pending-approval], [data-state=pending-activation])');
    if (!row) return;
    row.scrollIntoView({ block: 'start' });
    focusIn(row.dataset.sourceId, 'allow');
  }

  function problemPill(diags) {
    const sevs = diags.map((d) => severity(obj(d).code));
    const sev = sevs.includes('error') ? 'error' : sevs.includes('warning') ? 'warning' : 'info';
    return el('span', {
      className: 'problems problems-' + sev,
      testid: 'problem-count',
      text: diags.length + ' ' + plural(diags.length, 'problem', 'problems'),
    });
  }

  function renderTechnical(s, caps) {
    const rows = [];
    const add = (label, value, mono) => {
      if (value === undefined || value === null || value === '') return;
      if (Array.isArray(value) && !value.length) return;
      const text = Array.isArray(value) ? value.map(str).join(', ') : str(value);
      rows.push(el('dt', { text: label }), el('dd', { className: mono ? 'mono' : '', text }));
    };
    add('Spec', s.spec, true);
    if (s.options !== undefined && s.options !== null) add('Options', JSON.stringify(s.options), true);
    add('Files', caps.files, true);
    add('Exports', caps.exports, true);
    add('Tools', caps.tools, true);
    add('Packages', caps.packages, true);
    add('Install scripts', caps.install_scripts, true);
    add('OpenCode versions', caps.engines_opencode, true);
    add('Digest', s.digest, true);
    add('Capability digest', s.capability_digest, true);
    if (!rows.length) return null;
    return details('tech:' + str(s.id), false, 'Technical details',
      el('dl', { className: 'tech-list' }, rows), { className: 'tech' });
  }

  // ---------------------------------------------------------------------------------------
  // Permission prompts (a running tool waits on `ctx.ask`)

  const LEVELS = { allow: 'allow', ask: 'ask', deny: 'deny' };
  const level = (v) => LEVELS[str(v)] || str(v) || 'ask';

  /** The plugin a prompt or a notice comes from, as its card names it (or its id). */
  function pluginName(id) {
    const s = view.sourceById.get(str(id));
    return s ? sourceName(s) : str(id) || 'a plugin';
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

  /** The person's standing answers, each said to be for one plugin or for every plugin. */
  function renderStandingAnswers(snap) {
    const rules = arr(snap.standing_answers).map(obj);
    if (!rules.length) return null;
    return el('section', { className: 'panel standing-panel', testid: 'standing-answers' }, [
      el('h2', { className: 'section-title' }, [
        'Standing answers',
        el('span', { className: 'section-count', text: rules.length }),
      ]),
      el('p', { className: 'section-intro', text: 'Permissions answered for good. An answer given to one plugin ("Always") answers only that plugin; change them with berth permissions.' }),
      el('ul', { className: 'standing-items' }, rules.map((r) => el('li', { testid: 'standing-answer', dataset: { source: str(r.source_id) } }, [
        el('span', { className: 'mono', text: str(r.permission) + ' ' + str(r.pattern) }),
        ' → ',
        el('strong', { text: str(r.action) === 'allow' ? 'always allowed' : 'always refused' }),
        ' for ',
        str(r.source_id) === '*' ? el('span', { text: 'every plugin' }) : sourceLink(str(r.source_id), { testid: 'standing-source' }),
      ]))),
    ]);
  }

  function renderPrompts(snap) {
    const prompts = arr(snap.prompts).map(obj);
    if (!prompts.length) return null;
    return el('section', {
      className: 'panel prompts-panel',
      testid: 'prompts',
      attrs: { id: 'prompts', tabindex: '-1', 'aria-labelledby': 'prompts-title' },
    }, [
      el('h2', { className: 'section-title', attrs: { id: 'prompts-title' } }, [
        'Permission requests',
        el('span', { className: 'section-count', text: prompts.length }),
        el('span', { className: 'section-note', text: 'a tool is waiting for your answer' }),
      ]),
      el('p', {
        className: 'section-intro',
        text: plural(prompts.length, 'This call is', 'These calls are') +
          ' paused until you answer or ' + plural(prompts.length, 'its', 'their') +
          ' time runs out. Everything else keeps working meanwhile.',
      }),
      el('ul', { className: 'prompt-items' }, prompts.map(renderPrompt)),
    ]);
  }

  function renderPrompt(p) {
    const id = str(p.id);
    const tool = str(p.tool);
    const permission = str(p.permission) || 'a permission';
    const patterns = arr(p.patterns).map(str);
    const always = arr(p.always).map(str);
    const sameAlways = always.length === patterns.length && always.every((a, i) => a === patterns[i]);
    const answer = answers[id];
    const busy = !!answer && answer.phase !== 'error';
    const name = pluginName(p.plugin);
    const key = 'prompt:' + id;

    const btn = (reply, label, cls, aria) => {
      const b = el('button', {
        className: 'btn ' + cls,
        text: label,
        dataset: { reply, focusGlobal: key + ':' + reply },
        attrs: { type: 'button', 'aria-label': aria },
      });
      b.disabled = busy;
      b.addEventListener('click', () => answerPrompt(p, reply));
      return b;
    };
    const what = tool + ' (' + permission + (patterns.length ? ': ' + patterns.join(', ') : '') + ')';

    return el('li', {
      className: 'prompt',
      testid: 'prompt',
      dataset: { promptId: id, permission, tool, plugin: str(p.plugin) },
      attrs: { 'aria-label': str(p.title) || what, 'aria-busy': busy ? 'true' : null },
    }, [
      el('h3', { className: 'prompt-title', testid: 'prompt-heading' }, [
        el('span', { className: 'prompt-icon', text: '?', attrs: { 'aria-hidden': 'true' } }),
        el('span', null, [
          'The tool ',
          el('span', { className: 'mono prompt-tool', testid: 'prompt-tool', text: tool || 'unknown' }),
          ' from ',
          sourceLink(p.plugin, { testid: 'prompt-plugin', focusGlobal: key + ':plugin' }),
          ' asks for the ',
          el('strong', { className: 'prompt-permission', testid: 'prompt-permission', text: permission }),
          ' permission',
        ]),
      ]),
      el('dl', { className: 'prompt-facts' }, [
        el('dt', { text: patterns.length === 1 ? 'On' : 'On these' }),
        el('dd', null, patterns.length
          ? el('ul', { className: 'prompt-patterns', testid: 'prompt-patterns' },
            patterns.map((x) => el('li', { className: 'mono', text: x })))
          : el('span', { className: 'muted', testid: 'prompt-patterns', text: 'nothing named' })),
        always.length && !sameAlways ? el('dt', { text: '\u201cAlways\u201d covers' }) : null,
        always.length && !sameAlways
          ? el('dd', null, el('ul', { className: 'prompt-patterns', testid: 'prompt-always' },
            always.map((x) => el('li', { className: 'mono', text: x }))))
          : null,
        el('dt', { text: 'Why you' }),
        el('dd', { testid: 'prompt-answers' }, [
          'The plugin answered ',
          el('strong', { className: 'level level-' + level(p.plugin_answer), testid: 'prompt-plugin-answer', text: level(p.plugin_answer) }),
          '; your cap is ',
          el('strong', { className: 'level level-' + level(p.cap), testid: 'prompt-cap', text: level(p.cap) }),
          '.',
          el('span', { className: 'muted', text: ' ' + whyAsked(level(p.plugin_answer), level(p.cap)) }),
        ]),
        num(p.asked_at_ms) !== null ? el('dt', { text: 'Asked' }) : null,
        num(p.asked_at_ms) !== null
          ? el('dd', null, [
            el('time', { text: clockText(p.asked_at_ms), attrs: { datetime: new Date(num(p.asked_at_ms)).toISOString() } }),
            p.call_id ? el('span', { className: 'muted', text: ' \u00b7 call ' }) : null,
            p.call_id ? el('span', { className: 'mono muted', testid: 'prompt-call', text: str(p.call_id) }) : null,
          ])
          : null,
      ]),
      el('div', { className: 'prompt-actions' }, [
        btn('once', 'Allow once', 'btn-allow', 'Allow ' + what + ' once'),
        btn('always', 'Always allow', 'btn-always',
          'Always allow ' + tool + ' to use ' + permission + (always.length ? ' on ' + always.join(', ') : '')),
        btn('reject', 'Reject', 'btn-deny', 'Reject ' + what),
        answerStatus(id, key),
      ]),
      answerError(id),
    ]);
  }

  function whyAsked(pluginAnswer, cap) {
    if (cap === 'ask' && pluginAnswer === 'allow') return 'Your cap has the last word, so Berth asks you.';
    if (pluginAnswer === 'ask') return 'Nothing allowed it on its own, so Berth asks you.';
    return 'So Berth asks you.';
  }

  function clockText(ms) {
    const n = num(ms);
    if (n === null) return '';
    const d = new Date(n);
    const today = new Date().toDateString() === d.toDateString();
    return today
      ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' })
      : whenText(n);
  }

  const REPLY_PROGRESS = { once: 'Allowing once\u2026', always: 'Allowing always\u2026', reject: 'Rejecting\u2026' };
  const REPLY_FAILED = { once: 'Could not allow it: ', always: 'Could not allow it: ', reject: 'Could not reject it: ' };

  function answerStatus(id, key) {
    const a = answers[id];
    if (!a || a.phase === 'error') return null;
    return el('span', {
      className: 'progress',
      testid: 'prompt-progress',
      dataset: { phase: a.phase, focusGlobal: key + ':status' },
      attrs: { role: 'status', tabindex: '-1' },
    }, [
      el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      a.phase === 'sending' ? REPLY_PROGRESS[a.reply] : 'Answered. Updating\u2026',
    ]);
  }

  function answerError(id) {
    const a = answers[id];
    if (!a || a.phase !== 'error') return null;
    return errorBox(a.error, REPLY_FAILED[a.reply] || 'Could not answer: ', 'prompt-error');
  }

  /** An error from Berth, inline: its code, message and what to do. */
  function errorBox(e, lead, testid) {
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

  function answerPrompt(p, reply) {
    const id = str(p.id);
    const old = answers[id];
    if (!sendPromptAnswer || (old && old.phase !== 'error')) return;
    const entry = { reply, phase: 'sending', error: null, timer: null };
    answers[id] = entry;
    rerender();
    focusGlobal('prompt:' + id + ':status');
    let sent;
    try {
      sent = Promise.resolve(sendPromptAnswer(id, reply));
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(() => {
      if (answers[id] !== entry) return;
      entry.phase = 'sent';
      // The prompt leaves with the live event (it may already have); if none comes, stop
      // showing progress after a while and show whatever Berth last said.
      entry.timer = setTimeout(() => {
        if (answers[id] === entry) {
          delete answers[id];
          rerender();
        }
      }, 10000);
      rerender();
    }, (err) => {
      if (answers[id] !== entry) return;
      entry.phase = 'error';
      entry.error = describeError(err);
      rerender();
      focusGlobal('prompt:' + id + ':' + reply);
    });
  }

  /** Drops answers to prompts the snapshot no longer lists. */
  function settleAnswers(prompts) {
    const open = new Set(prompts.map((p) => str(obj(p).id)));
    for (const id of Object.keys(answers)) {
      if (answers[id].phase === 'sending' || open.has(id)) continue;
      clearTimeout(answers[id].timer);
      delete answers[id];
    }
  }

  /** The header's permission badge: goes to the first prompt's "Allow once". */
  function showPrompts() {
    const panel = document.querySelector('[data-testid=prompts]');
    if (!panel) return;
    panel.scrollIntoView({ block: 'start' });
    const first = panel.querySelector('button[data-reply]:not([disabled])');
    (first || panel).focus({ preventScroll: true });
  }

  function focusGlobal(key) {
    restoreFocus(document.getElementById('app'), { global: key });
  }

  // ---------------------------------------------------------------------------------------
  // Paused sources (their plugin host spent its restart budget)

  /** A reason the snapshot gives for a pause, when it gives one. */
  function pauseReason(s) {
    return str(s.paused_reason || s.state_reason || s.reason || obj(s.pause).reason);
  }

  function settleResume(sources) {
    if (!resuming || resuming.phase === 'sending') return;
    if (resuming.phase === 'sent' && !sources.some((s) => obj(s).state === 'paused') && !resuming.noneFound) {
      clearTimeout(resuming.timer);
      resuming = null;
    }
  }

  function resumeButton(label, props) {
    const busy = !!resuming && resuming.phase !== 'error' && !resuming.noneFound;
    const b = el('button', Object.assign({
      className: 'btn btn-small btn-resume',
      text: label,
    }, props));
    b.type = 'button';
    b.disabled = busy;
    b.addEventListener('click', () => resume(b));
    return b;
  }

  function resumeStatus() {
    if (!resuming) return null;
    if (resuming.phase === 'error') return errorBox(resuming.error, 'Could not resume: ', 'resume-error');
    const text = resuming.phase === 'sending'
      ? 'Resuming\u2026'
      : resuming.noneFound
        ? 'Nothing was paused any more; the page shows what Berth says now.'
        : 'Resumed (' + resuming.resumed.map((b) => BACKENDS[b] || b).join(', ') + '). Loading again\u2026';
    return el('span', {
      className: 'progress',
      testid: 'resume-progress',
      dataset: { phase: resuming.noneFound ? 'none' : resuming.phase },
      attrs: { role: 'status' },
    }, [
      resuming.noneFound ? null : el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      text,
    ]);
  }

  function resume(button) {
    if (!sendResume || (resuming && resuming.phase === 'sending')) return;
    const focusKey = button && button.dataset.focusGlobal;
    if (resuming) clearTimeout(resuming.timer);
    const entry = { phase: 'sending', error: null, resumed: [], noneFound: false, timer: null };
    resuming = entry;
    rerender();
    let sent;
    try {
      sent = Promise.resolve(sendResume());
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then((resumed) => {
      if (resuming !== entry) return;
      entry.phase = 'sent';
      entry.resumed = arr(resumed).map(str);
      entry.noneFound = entry.resumed.length === 0;
      entry.timer = setTimeout(() => {
        if (resuming === entry) {
          resuming = null;
          rerender();
        }
      }, entry.noneFound ? 8000 : 15000);
      rerender();
    }, (err) => {
      if (resuming !== entry) return;
      entry.phase = 'error';
      entry.error = describeError(err);
      rerender();
      if (focusKey) focusGlobal(focusKey);
    });
  }

  /** One banner above everything when sources are paused, with the way to resume them. */
  function renderPaused(sources) {
    const paused = sources.map(obj).filter((s) => s.state === 'paused');
    if (!paused.length && !(resuming && resuming.phase !== 'sending')) return null;
    if (!paused.length) {
      // Resumed: say so until the sources are back (or the note times out).
      const status = resumeStatus();
      return status ? el('div', { className: 'paused-banner is-resumed', testid: 'paused-banner' }, [status]) : null;
    }
    const backends = [...new Set(paused.map((s) => str(obj(s.approval).backend)).filter(Boolean))]
      .map((b) => BACKENDS[b] || b);
    const host = backends.length ? backends.join(' and ') + ' plugin ' + plural(backends.length, 'host', 'hosts') : 'plugin host';
    const n = paused.length;
    return el('section', {
      className: 'paused-banner',
      testid: 'paused-banner',
      dataset: { count: n },
      attrs: { 'aria-label': 'Paused sources' },
    }, [
      el('p', { className: 'paused-title' }, [
        el('strong', { text: n + ' ' + plural(n, 'source is', 'sources are') + ' paused. ' }),
        'The ' + host + ' stopped too often, so Berth stopped restarting ' + plural(backends.length, 'it', 'them') +
          '. Their tools cannot be called until you resume.',
      ]),
      el('div', { className: 'paused-actions' }, [
        resumeButton('Resume', {
          testid: 'resume',
          dataset: { focusGlobal: 'resume-banner' },
          attrs: { 'aria-label': 'Resume the paused plugin hosts' },
        }),
        resumeStatus(),
      ]),
    ]);
  }

  /** In a paused source's card: why, and Resume. */
  function renderPausedSource(s) {
    const reason = pauseReason(s);
    return el('div', { className: 'paused', testid: 'paused', attrs: { role: 'note' } }, [
      el('p', { className: 'paused-text' }, [
        el('strong', { text: 'Paused. ' }),
        'Its plugin host stopped too often, so Berth stopped restarting it. ' +
          'Look at its problems below, then resume.',
      ]),
      reason ? el('p', { className: 'paused-reason', testid: 'paused-reason' }, [
        el('span', { className: 'diag-label', text: 'Reason: ' }),
        reason,
      ]) : null,
      el('div', { className: 'paused-actions' }, [
        resumeButton('Resume', {
          testid: 'source-resume',
          dataset: { action: 'resume', focus: 'resume' },
          attrs: { 'aria-label': 'Resume ' + sourceName(s) + ' and its plugin host' },
        }),
      ]),
    ]);
  }

  // ---------------------------------------------------------------------------------------
  // Messages from plugins (client.tui.showToast): toasts and the recent list

  const VARIANTS = {
    info: { label: 'Info', icon: 'i' },
    success: { label: 'Success', icon: '\u2713' },
    warning: { label: 'Warning', icon: '!' },
    error: { label: 'Error', icon: '\u2715' },
  };
  const variantOf = (n) => (VARIANTS[str(n.variant)] ? str(n.variant) : 'info');
  const noticeKey = (n) => str(n.at_ms) + '\u0000' + str(n.plugin) + '\u0000' + str(n.message);

  // Notices already turned into toasts (only keys the snapshot still lists are kept: a notice
  // the server dropped never comes back).
  let shownNotices = new Set();
  let noticesSeen = false;
  const TOAST_MS = 6000;
  // On the first snapshot, only messages this recent become toasts (older ones are in the list).
  const TOAST_RECENT_MS = 120000;
  const TOASTS_MAX = 4;

  function showNewToasts(snap) {
    const notices = arr(snap.notices).map(obj);
    const now = Date.now();
    const keys = new Set();
    for (const n of notices) {
      const key = noticeKey(n);
      keys.add(key);
      if (shownNotices.has(key)) continue;
      const at = num(n.at_ms);
      if (noticesSeen || (at !== null && Math.abs(now - at) <= TOAST_RECENT_MS)) showToast(n);
    }
    shownNotices = keys;
    noticesSeen = true;
  }

  function showToast(n) {
    const box = document.getElementById('toasts');
    if (!box) return;
    const variant = variantOf(n);
    const name = pluginName(n.plugin);
    const close = el('button', {
      className: 'toast-close',
      text: '\u00d7',
      testid: 'toast-close',
      attrs: { type: 'button', 'aria-label': 'Dismiss the message from ' + name },
    });
    const toast = el('div', {
      className: 'toast toast-' + variant,
      testid: 'toast',
      dataset: { variant, plugin: str(n.plugin), at: num(n.at_ms) },
    }, [
      el('span', { className: 'toast-icon', text: VARIANTS[variant].icon, attrs: { 'aria-hidden': 'true' } }),
      el('div', { className: 'toast-body' }, [
        el('p', { className: 'toast-from' }, [
          el('span', { className: 'sr-only', text: VARIANTS[variant].label + ' from ' }),
          el('span', { className: 'toast-plugin', testid: 'toast-plugin', title: str(n.plugin), text: name }),
        ]),
        n.title ? el('p', { className: 'toast-title', testid: 'toast-title', text: str(n.title) }) : null,
        el('p', { className: 'toast-message', testid: 'toast-message', text: str(n.message) }),
      ]),
      close,
    ]);
    let timer = null;
    const dismiss = () => {
      clearTimeout(timer);
      const hadFocus = toast.contains(document.activeElement);
      toast.remove();
      if (hadFocus) {
        const next = box.querySelector('.toast-close');
        if (next) next.focus();
      }
    };
    const arm = () => {
      clearTimeout(timer);
      // window.__berthToastMs: a shorter time for the browser tests.
      timer = setTimeout(dismiss, num(window.__berthToastMs) || TOAST_MS);
    };
    close.addEventListener('click', dismiss);
    toast.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') dismiss();
    });
    // Hovering or focusing a toast keeps it (time enough to read); leaving restarts the clock.
    toast.addEventListener('mouseenter', () => clearTimeout(timer));
    toast.addEventListener('mouseleave', () => {
      if (!toast.contains(document.activeElement)) arm();
    });
    toast.addEventListener('focusin', () => clearTimeout(timer));
    toast.addEventListener('focusout', (e) => {
      if (!toast.contains(e.relatedTarget) && !toast.matches(':hover')) arm();
    });
    box.append(toast);
    while (box.children.length > TOASTS_MAX) box.firstElementChild.remove();
    arm();
  }

  function renderMessages(snap) {
    const notices = arr(snap.notices).map(obj);
    if (!notices.length) return null;
    const newest = notices.slice().reverse();
    return el('section', { className: 'panel messages-panel', testid: 'plugin-messages' }, [
      el('h2', { className: 'section-title' }, [
        'Plugin messages',
        el('span', { className: 'section-count', text: notices.length }),
        el('span', { className: 'section-note', text: 'newest first' }),
      ]),
      el('ol', { className: 'messages' }, newest.map((n, i) => {
        const variant = variantOf(n);
        return el('li', {
          className: 'message message-' + variant,
          testid: 'plugin-message',
          dataset: { variant, plugin: str(n.plugin) },
        }, [
          el('span', { className: 'message-variant', text: VARIANTS[variant].label }),
          el('span', { className: 'message-when' }, num(n.at_ms) !== null
            ? el('time', { text: clockText(n.at_ms), attrs: { datetime: new Date(num(n.at_ms)).toISOString() } })
            : null),
          el('span', { className: 'message-from' }, sourceLink(n.plugin, {
            testid: 'message-plugin',
            focusGlobal: 'message:' + i + ':' + str(n.plugin),
          })),
          el('span', { className: 'message-text' }, [
            n.title ? el('strong', { text: str(n.title) + ' ' }) : null,
            str(n.message),
          ]),
        ]);
      })),
    ]);
  }

  // ---------------------------------------------------------------------------------------
  // Tools and plugin hosts

  function renderTools(snap) {
    const tools = arr(snap.tools).map(obj);
    const body = tools.length
      ? el('ul', { className: 'tool-items' }, tools.map(renderTool))
      : el('p', { className: 'muted section-empty', testid: 'tools-empty', text: 'No active tools yet \u2014 approve a source to load its tools.' });
    return el('section', { className: 'panel tools-panel', testid: 'tool-list' }, [
      el('h2', { className: 'section-title' }, [
        'Tools',
        tools.length ? el('span', { className: 'section-count', text: tools.length }) : null,
        el('span', { className: 'section-note', text: 'what OpenCode can call' }),
      ]),
      body,
    ]);
  }

  function renderTool(t) {
    const name = str(t.name);
    const provider = obj(t.provider);
    const sourceId = str(provider.source_id);
    const backend = str(provider.backend);
    const state = str(t.state) || 'active';
    const schema = t.parameters === undefined ? null : t.parameters;
    const params = Object.keys(obj(obj(schema).properties));
    const required = new Set(arr(obj(schema).required).map(str));
    const key = 'tool:' + sourceId + ':' + name;

    const paramsBlock = details(key, false,
      [
        el('span', { className: 'details-title', text: 'Parameters' }),
        el('span', {
          className: 'details-note mono',
          text: params.length ? params.map((p) => p + (required.has(p) ? '' : '?')).join(', ') : 'none',
        }),
      ],
      el('pre', {
        className: 'schema',
        testid: 'tool-schema',
        text: schema === null ? 'No schema was given.' : JSON.stringify(schema, null, 2),
      }),
      { className: 'tool-params', testid: 'tool-params' });
    paramsBlock.querySelector('summary').dataset.focusGlobal = key;

    return el('li', { className: 'tool', testid: 'tool', dataset: { tool: name, state, sourceId } }, [
      el('div', { className: 'tool-head' }, [
        el('span', { className: 'tool-name mono', testid: 'tool-name', text: name }),
        state !== 'active'
          ? el('span', { className: 'badge badge-' + stateInfo(state).tone, text: stateInfo(state).label })
          : null,
        el('span', { className: 'tool-from' }, [
          'from ',
          sourceLink(sourceId, { testid: 'tool-source', focusGlobal: key + ':source' }),
          backend ? el('span', { className: 'tag', testid: 'tool-backend', text: BACKENDS[backend] || backend }) : null,
        ]),
      ]),
      str(t.description)
        ? el('p', { className: 'tool-desc', testid: 'tool-description', text: str(t.description) })
        : null,
      paramsBlock,
    ]);
  }

  /** A column header of the page's tables. */
  const th = (text, cls) => el('th', { className: cls, text, attrs: { scope: 'col' } });

  // How a call ended, as its receipt says.
  const CALL_STATES = {
    accepted: { label: 'Starting', tone: 'progress' },
    running: { label: 'Running', tone: 'progress' },
    completed: { label: 'Completed', tone: 'ok' },
    failed: { label: 'Failed', tone: 'error' },
    cancelled: { label: 'Cancelled', tone: 'limited' },
    unknown: { label: 'Outcome unknown', tone: 'attention' },
  };

  /** The latest tool calls (their receipts, without arguments or output), newest first. */
  function renderCalls(snap) {
    const calls = arr(snap.calls).map(obj);
    if (!calls.length) return null;
    return el('section', { className: 'panel calls-panel', testid: 'call-list' }, [
      el('h2', { className: 'section-title' }, [
        'Recent calls',
        el('span', { className: 'section-count', text: calls.length }),
        el('span', { className: 'section-note', text: 'newest first — `berth receipts` has their arguments and output' }),
      ]),
      el('table', { className: 'hosts calls' }, [
        el('thead', null, el('tr', null, [
          th('When'), th('Tool'), th('From'), th('Took', 'num'), th('Outcome'),
        ])),
        el('tbody', null, calls.map(renderCall)),
      ]),
    ]);
  }

  function renderCall(c, i) {
    const status = str(c.status);
    const info = CALL_STATES[status] || { label: status || 'unknown', tone: 'neutral' };
    const started = num(c.created_at_ms);
    const ended = num(c.updated_at_ms);
    const open = status === 'accepted' || status === 'running';
    const took = !open && started !== null && ended !== null ? Math.max(0, ended - started) : null;
    const error = obj(c.error);
    const note = status === 'unknown'
      ? 'Berth stopped during this call: it may or may not have taken effect, and it was not repeated.'
      : error.message ? str(error.message) : '';
    return el('tr', {
      className: 'call',
      testid: 'call',
      dataset: { receiptId: str(c.receipt_id), status, tool: str(c.tool) },
      title: str(c.receipt_id),
    }, [
      el('td', { className: 'call-when' }, started !== null
        ? el('time', { text: clockText(started), attrs: { datetime: new Date(started).toISOString() } })
        : null),
      el('td', { className: 'call-tool mono', text: str(c.tool) }),
      el('td', { className: 'call-from' }, sourceLink(c.source_id, {
        testid: 'call-source',
        focusGlobal: 'call:' + i + ':' + str(c.receipt_id),
      })),
      el('td', { className: 'num', testid: 'call-took', text: took === null ? '—' : took + ' ms' }),
      el('td', { className: 'call-outcome' }, [
        el('span', { className: 'badge badge-' + info.tone, testid: 'call-status', text: info.label }),
        error.code && str(error.code) !== status
          ? el('span', { className: 'call-code mono', testid: 'call-code', text: str(error.code) })
          : null,
        note ? el('div', { className: 'call-note', testid: 'call-note', text: note }) : null,
      ]),
    ]);
  }

  function mib(bytes) {
    const n = num(bytes);
    return n === null ? '\u2014' : (n / 1048576).toFixed(1) + ' MiB';
  }

  function renderHosts(snap) {
    const hosts = arr(snap.hosts).map(obj);
    const title = el('h2', { className: 'section-title' }, [
      'Plugin hosts',
      hosts.length ? el('span', { className: 'section-count', text: hosts.length }) : null,
    ]);
    if (!hosts.length) {
      return el('section', { className: 'panel hosts-panel', testid: 'host-list' }, [
        title,
        el('p', { className: 'muted section-empty', testid: 'hosts-empty', text: 'No plugin host is running (one starts when an approved source is used).' }),
      ]);
    }
    return el('section', { className: 'panel hosts-panel', testid: 'host-list' }, [
      title,
      el('p', { className: 'section-intro', text: 'Plugins run with your user\u2019s rights in these processes; Berth stops them when you revoke a plugin.' }),
      el('table', { className: 'hosts' }, [
        el('thead', null, el('tr', null, [
          th('Runtime'), th('Process'), th('Memory', 'num'), th('Runs'),
        ])),
        el('tbody', null, hosts.map(renderHost)),
      ]),
    ]);
  }

  function renderHost(h) {
    const backend = str(h.backend);
    const pid = str(h.pid);
    const ids = arr(h.instances).map(str);
    const dropped = num(h.dropped_frames) || 0;
    const links = [];
    ids.forEach((id, i) => {
      if (i) links.push(el('span', { className: 'sep', text: ', ' }));
      links.push(sourceLink(id, { testid: 'host-source', focusGlobal: 'host:' + pid + ':' + id }));
    });
    return el('tr', {
      className: 'host',
      testid: 'host',
      dataset: { pid, backend, generation: num(h.generation) },
      attrs: { id: hostAnchor(pid), tabindex: '-1' },
    }, [
      el('td', { className: 'host-backend' }, [
        el('span', { className: 'status-dot', attrs: { 'aria-hidden': 'true' } }),
        BACKENDS[backend] || backend || 'unknown',
      ]),
      el('td', {
        className: 'host-pid',
        title: num(h.generation) !== null ? 'Host process number ' + num(h.generation) + ' Berth started' : '',
      }, [
        el('span', { className: 'muted', text: 'pid ' }),
        el('span', { className: 'mono', testid: 'host-pid', text: pid }),
      ]),
      el('td', {
        className: 'host-mem num',
        testid: 'host-memory',
        title: num(h.rss_bytes) !== null ? num(h.rss_bytes).toLocaleString() + ' bytes resident' : '',
        text: mib(h.rss_bytes),
      }),
      el('td', { className: 'host-sources' }, [
        ...(ids.length ? links : [el('span', { className: 'muted', text: 'nothing yet' })]),
        h.own
          ? el('span', {
            className: 'host-own muted',
            testid: 'host-own',
            title: 'No other plugin runs in this process (berth isolate).',
            text: ' \u2014 a host of its own',
          })
          : null,
        // Plugins in one process can reach each other's code and data: one trust domain.
        ids.length > 1
          ? el('span', {
            className: 'host-shared muted',
            testid: 'host-shared',
            title: 'These plugins run in one process, as in OpenCode. Each can see and change what the others do there; Berth keeps its own machinery out of their reach, not their reach of each other.',
            text: ' — share one process: one trust domain',
          })
          : null,
        dropped > 0
          ? el('span', {
            className: 'host-warn',
            testid: 'host-dropped',
            title: 'Messages from this process that arrived late, twice, or for a request Berth did not make. A few are harmless; many point to a misbehaving plugin.',
            text: '\u26a0 ' + dropped + ' dropped ' + plural(dropped, 'frame', 'frames'),
          })
          : null,
      ]),
    ]);
  }

  function renderLookedAt(snap, empty) {
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

  function renderRuntimes(snap) {
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

  function renderFooter(snap) {
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

  // ---------------------------------------------------------------------------------------
  // Live indicator

  const LIVE_TEXT = {
    connecting: 'Connecting…',
    connected: 'Live',
    reconnecting: 'Reconnecting…',
    disconnected: 'Disconnected',
  };

  function setLive(state, hint) {
    const live = document.querySelector('[data-testid=live]');
    if (!live) return;
    live.dataset.live = state;
    live.querySelector('.live-text').textContent = LIVE_TEXT[state] || state;
    live.title = hint || (state === 'connected' ? 'Changes appear here as they happen' : '');
  }

  // ---------------------------------------------------------------------------------------
  // Brand mark (same drawing as icons/make-icons.py)

  function drawMark() {
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

  // ---------------------------------------------------------------------------------------
  // Transports

  function startTauri(tauri) {
    setLive('connecting');
    let latest = -1;
    const accept = (snap) => {
      const rev = num(obj(snap).revision);
      if (rev !== null && rev < latest) return; // an older answer arriving late
      if (rev !== null) latest = rev;
      safeRender(snap);
    };
    sendDecision = (action, ids, digests) => tauri.core.invoke(action === 'allow' ? 'approve' : 'deny', { ids, digests });
    sendPromptAnswer = (id, reply) => tauri.core.invoke('answer_prompt', { id, reply });
    sendResume = () => tauri.core.invoke('resume');
    // Listen first, then ask: no change can fall between the two.
    Promise.resolve(tauri.event.listen('status-changed', (e) => {
      const payload = obj(e && e.payload);
      if (payload.snapshot) accept(payload.snapshot);
      else tauri.core.invoke('status').then(accept, (err) => console.error('berth: status', err));
    }))
      .then(() => tauri.core.invoke('status'))
      .then((snap) => {
        accept(snap);
        setLive('connected');
      })
      .catch((err) => {
        setLive('disconnected', String(err));
        renderError('Berth could not read its status', String((err && err.message) || err),
          'Restart Berth; if it happens again, look at the log file.');
      });
  }

  function startWeb() {
    const token = new URLSearchParams(location.search).get('token');
    if (!token) {
      setLive('disconnected');
      renderError('This address has no access token',
        'The status page needs the address that `berth serve` printed; it ends in ?token=…',
        'Open the full URL printed by `berth serve`.');
      return;
    }
    const q = '?token=' + encodeURIComponent(token);
    sendDecision = (action, ids, digests) =>
      webPost(token, action === 'allow' ? 'approve' : 'deny', { ids, digests }).then((body) => arr(obj(body).decided));
    sendPromptAnswer = (id, reply) => webPost(token, 'prompt', { id, reply });
    sendResume = () => webPost(token, 'resume', {}).then((body) => arr(obj(body).resumed));
    setLive('connecting');

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
        if (!current) safeRender(snap);
        listen(q);
      })
      .catch((err) => {
        setLive('disconnected');
        if (err && err.auth) {
          renderError('Access refused', err.message,
            'Berth makes a new token each time it starts: open the URL that `berth serve` printed last.');
        } else {
          renderError('Berth is not reachable', String((err && err.message) || err),
            'Check that `berth serve` is still running, then reload this page.');
        }
      });
  }

  /**
   * POST /api/<path> with a JSON body (approve, deny, prompt, resume) → the 200 answer's JSON,
   * or a rejection with {code, message, recovery} (Berth's error body, or one made here).
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

  function listen(q) {
    const source = new EventSource('/api/events' + q);
    source.addEventListener('open', () => setLive('connected'));
    source.addEventListener('status', (ev) => {
      let snap;
      try {
        snap = JSON.parse(ev.data);
      } catch (e) {
        console.error('berth: an event did not hold JSON', e);
        return;
      }
      setLive('connected');
      const old = document.querySelector('[data-testid=load-error]');
      if (old) old.remove();
      safeRender(snap);
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) {
        setLive('disconnected', 'The server refused or ended the live connection');
        renderError('The live connection ended',
          'Berth stopped sending updates; what is shown may be out of date.',
          'If `berth serve` was restarted, open the new URL it printed.');
      } else {
        setLive('reconnecting', 'The connection dropped; the browser is trying again');
      }
    });
  }

  function start() {
    drawMark();
    const badge = document.querySelector('[data-testid=pending-badge]');
    if (badge) badge.addEventListener('click', showPending);
    const promptBadge = document.querySelector('[data-testid=prompt-badge]');
    if (promptBadge) promptBadge.addEventListener('click', showPrompts);
    const tauri = window.__TAURI__;
    if (tauri && tauri.core && typeof tauri.core.invoke === 'function' && tauri.event) {
      startTauri(tauri);
    } else {
      startWeb();
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
