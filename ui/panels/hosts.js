// The plugin host processes. Owns: the hosts table (runtime, pid, memory, what runs there).
// Must not: act on a process: Berth starts and stops them.

import { el, th } from '../dom.js';
import { arr, obj, str, num, plural, BACKENDS } from '../words.js';
import { sourceLink, hostAnchor } from '../page.js';

function mib(bytes) {
  const n = num(bytes);
  return n === null ? '\u2014' : (n / 1048576).toFixed(1) + ' MiB';
}

export function renderHosts(snap) {
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
    el('p', { className: 'section-intro', text: 'Plugins run with your user\u2019s rights in these processes; Berth stops them when you revoke a plugin. Plugins of one runtime share a host, except a source given a host of its own and a restricted source, which always runs alone inside its OS boundary.' }),
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
      h.boundary
        ? el('span', {
          className: 'host-boundary',
          testid: 'host-boundary',
          dataset: { tier: str(h.boundary) },
          title: 'Restricted mode: this process runs inside an OS boundary and alone.',
          text: ' \u2014 restricted (' + (str(h.boundary) === 'bwrap' ? 'bubblewrap' : 'Landlock') + ' + seccomp)',
        })
        : h.own
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
