// Reading the snapshot, and the words the page uses for it. Owns: the coercions that make any
// value safe to read (arr, obj, str, num), the labels of states, kinds, scopes and runtimes, how
// a source is named, an npm plugin's approval step, the policy's layers and categories, dates
// and times. Must not: touch the DOM or keep state.

export const arr = (v) => (Array.isArray(v) ? v : []);
export const obj = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? v : {});
export const str = (v) => (v === undefined || v === null ? '' : String(v));
export const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function plural(n, one, many) {
  return n === 1 ? one : many;
}

export function basename(path) {
  const s = str(path).replace(/[\\/]+$/, '');
  const i = Math.max(s.lastIndexOf('/'), s.lastIndexOf('\\'));
  return i >= 0 ? s.slice(i + 1) : s;
}

// Words for the snapshot's codes

const STATES = {
  discovered: { label: 'Discovered', tone: 'neutral' },
  'pending-approval': { label: 'Waiting for approval', tone: 'attention' },
  // Decided, its bytes still the approved ones, not loaded in this process yet.
  approved: { label: 'Approved', tone: 'ok' },
  preparing: { label: 'Preparing', tone: 'progress' },
  'pending-activation': { label: 'Waiting for activation', tone: 'attention' },
  active: { label: 'Active', tone: 'ok' },
  // Loaded before and loading again in a fresh host (a new version, a changed file); calls wait.
  updating: { label: 'Updating', tone: 'progress' },
  'load-failed': { label: 'Failed to load', tone: 'error' },
  paused: { label: 'Paused', tone: 'error' },
  disabled: { label: 'Disabled', tone: 'neutral' },
  'policy-limited': { label: 'Limited by policy', tone: 'limited' },
  unsupported: { label: 'Not supported', tone: 'limited' },
  'incompatible-version': { label: 'Incompatible version', tone: 'limited' },
};

export function stateInfo(state) {
  const s = str(state);
  return STATES[s] || { label: s ? s.replace(/-/g, ' ') : 'unknown', tone: 'neutral' };
}

const KINDS = {
  'npm-plugin': 'npm plugin',
  'file-plugin': 'Local plugin',
  'standalone-tool': 'Custom tool',
  mcp: 'MCP server',
};

export function kindLabel(kind) {
  const k = str(kind);
  return KINDS[k] || (k ? k.replace(/-/g, ' ') : 'Source');
}

/** Which group a source is shown in: 'plugin', 'tool', 'mcp' or 'other'. */
export function category(source) {
  const k = str(obj(source).kind);
  if (k === 'mcp' || k.startsWith('mcp-')) return 'mcp';
  if (/(^|-)tool$/.test(k)) return 'tool';
  if (/(^|-)plugin$/.test(k)) return 'plugin';
  return 'other';
}

export const isTool = (source) => category(source) === 'tool';

export function scopeLabel(scope) {
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

export function severity(code) {
  const c = str(code);
  if (ERROR_CODES.has(c)) return 'error';
  if (WARNING_CODES.has(c)) return 'warning';
  return 'info';
}

/** A source waiting for the person: before it is loaded, or for what a changed version registers. */
export const isAsking = (s) => obj(s).state === 'pending-approval' || obj(s).state === 'pending-activation';

/** A source's name, as its card shows it. */
export function sourceName(s) {
  const k = str(s.kind);
  // An npm plugin by its package (its entry file's path changes with every version prepared).
  if (k === 'npm-plugin') {
    const npm = obj(s.npm);
    // The version that runs, else the one asked for (not a bare `latest`).
    const request = str(npm.request);
    const version = str(obj(npm.resolved).version) || (request !== 'latest' && request !== str(npm.name) ? request : '');
    if (npm.name) return str(npm.name) + (version ? ' ' + version : '');
    return str(s.spec) || str(s.entry) || str(s.id);
  }
  if (category(s) === 'mcp') return str(s.entry) || str(s.spec) || str(s.id);
  const tools = arr(obj(s.capabilities).tools);
  if (isTool(s) && tools.length === 1) return str(tools[0]);
  return basename(s.entry) || str(s.id);
}

export const BACKENDS = { bun: 'Bun', node: 'Node.js' };

/**
 * An execution domain (`host/uid-N`) in words: "this computer (host), as root" — every domain
 * Berth makes today is the computer it runs on.
 */
export function domainWords(domain) {
  const d = str(domain);
  const m = /^(.*)\/uid-(\d+)$/.exec(d);
  if (!m) return d || 'this computer';
  const who = m[2] === '0' ? 'as root' : 'as user ' + m[2];
  return 'this computer' + (m[1] ? ' (' + m[1] + ')' : '') + ', ' + who;
}

/**
 * The step of an npm plugin's two approvals (`approval.step`, "1 of 2: …"): { n, of, text },
 * or null for a source that takes one.
 */
export function approvalStep(s) {
  const text = str(obj(obj(s).approval).step);
  if (!text) return null;
  const m = /^(\d+) of (\d+)/.exec(text);
  return { n: m ? Number(m[1]) : null, of: m ? Number(m[2]) : null, text };
}

// Words for the policy

const LAYERS = {
  organisation: { who: 'your organisation', by: 'your organisation\u2019s policy' },
  product: { who: 'Berth', by: 'Berth\u2019s default' },
  user: { who: 'you', by: 'your setting' },
};

/** Who set a policy value: { who: 'your organisation', by: 'your organisation’s policy' }. */
export function layerWords(layer) {
  const l = str(layer);
  return LAYERS[l] || { who: l || 'an unknown layer', by: l || 'an unknown layer' };
}

const CATEGORIES = {
  'tool-override': 'takes the name of a built-in or protected tool',
  config: 'changes the OpenCode config',
  'model-request': 'changes what is sent to the model',
  'shell-env': 'sets variables in the shell commands the agent runs',
  credentials: 'handles credentials',
  ui: 'puts something before you (toasts, prompt text)',
};

/** What a capped contribution does, in plain words. */
export function categoryWords(category) {
  const c = str(category);
  return CATEGORIES[c] || (c ? c.replace(/-/g, ' ') : 'capped');
}

/** A contribution as a policy names it (`hook:chat.params`, `tool:webfetch`, `call:tui.showToast`), in words. */
export function itemWords(item) {
  const s = str(item);
  const i = s.indexOf(':');
  const kind = i > 0 ? s.slice(0, i) : '';
  const name = i > 0 ? s.slice(i + 1) : s;
  if (kind === 'hook') return { kind: 'its hook', name };
  if (kind === 'tool') return { kind: 'its tool', name };
  if (kind === 'call') return { kind: 'its calls to', name: 'client.' + name };
  return { kind: '', name };
}

export function whenText(ms) {
  const n = num(ms);
  if (n === null) return '';
  return new Date(n).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function clockText(ms) {
  const n = num(ms);
  if (n === null) return '';
  const d = new Date(n);
  const today = new Date().toDateString() === d.toDateString();
  return today
    ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : whenText(n);
}
