// The tools OpenCode can call. Owns: the tools panel (name, source, description, parameters, a
// Contested mark) and the line naming Berth's built-ins; each tool's "Try it" form comes from
// try_tool.js. Must not: call a tool or talk to Berth itself.

import { el, details } from '../dom.js';
import { arr, obj, str, stateInfo, BACKENDS } from '../words.js';
import { sourceLink } from '../page.js';
import { renderTry } from './try_tool.js';

export function renderTools(snap) {
  const contested = new Set(arr(snap.conflicts).map((c) => str(obj(c).tool)));
  const tools = arr(snap.tools).map(obj).map((t) => Object.assign({}, t, { contested: contested.has(str(t.name)) }));
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
    renderBuiltins(snap, contested),
  ]);
}

/** Berth's own built-ins: one line, each name marked when a conflict gave it to another candidate. */
function renderBuiltins(snap, contested) {
  const builtins = arr(snap.builtins).map(obj);
  if (!builtins.length) return null;
  const elsewhere = new Set(arr(snap.conflicts).map(obj)
    .filter((c) => str(c.serving) !== 'builtin').map((c) => str(c.tool)));
  return el('p', { className: 'tool-builtins muted', testid: 'tool-builtins' }, [
    'Berth\u2019s built-ins: ',
    ...builtins.flatMap((b, i) => [
      i ? ', ' : '',
      el('span', {
        className: 'mono' + (elsewhere.has(str(b.name)) ? ' is-replaced' : ''),
        testid: 'builtin',
        dataset: { tool: str(b.name), serving: elsewhere.has(str(b.name)) ? '' : '1' },
        title: elsewhere.has(str(b.name))
          ? 'You chose another candidate for this name'
          : contested.has(str(b.name)) ? 'Serves its name; another source registers it too' : 'Serves its name',
        text: str(b.name),
      }),
    ]),
    ' \u2014 OpenCode\u2019s read, glob and grep, limited to this project, each call receipted.',
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
      t.contested
        ? el('span', { className: 'badge badge-attention badge-quiet', testid: 'tool-contested', title: 'Several sources register this name: see Tool conflicts', text: 'Contested' })
        : null,
      el('span', { className: 'tool-from' }, [
        'from ',
        sourceLink(sourceId, { testid: 'tool-source', focusGlobal: key + ':source' }),
        str(provider.kind) === 'mcp'
          ? el('span', { className: 'tag', testid: 'tool-backend', text: 'MCP server' })
          : backend ? el('span', { className: 'tag', testid: 'tool-backend', text: BACKENDS[backend] || backend }) : null,
      ]),
    ]),
    str(t.description)
      ? el('p', { className: 'tool-desc', testid: 'tool-description', text: str(t.description) })
      : null,
    paramsBlock,
    state === 'active' ? renderTry(t) : null,
  ]);
}
