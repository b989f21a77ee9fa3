import { el, link, runPath, clear, byId, stream, formatDuration, formatTime, phaseBadge, setText } from './dom.js';

// The runs list: a snapshot of the rows the filter keeps, then the rows
// that change, from the server's watch. Rows are kept by namespace/name;
// a change replaces its row and the list is put in order again.

const columns = [
  { key: 'namespace', label: 'Namespace', when: (s) => s.allNamespaces },
  { key: 'name', label: 'Name' },
  { key: 'runtime', label: 'Runtime' },
  { key: 'model', label: 'Model' },
  { key: 'phase', label: 'Phase' },
  { key: 'endStatus', label: 'End' },
  { key: 'started', label: 'Started', num: true },
  { key: 'duration', label: 'Duration', num: true },
  { key: 'tokens', label: 'Tokens', num: true },
  { key: 'cost', label: 'Cost', num: true },
  { key: 'branch', label: 'Branch', git: true },
  { key: 'diff', label: 'Diff', num: true, git: true },
  { key: 'result', label: 'Result or activity' },
];

const sortValue = {
  started: (r) => r.started || r.created,
  duration: (r) => duration(r),
  tokens: (r) => r.tokens,
  cost: (r) => r.costValue,
  diff: (r) => r.diffSize,
  result: (r) => r.result || r.activity,
};

function duration(r) {
  if (r.durationMs) return r.durationMs;
  if (r.started && r.running) return Date.now() - r.started;
  return 0;
}

export function runsPage() {
  const params = new URLSearchParams(location.search);
  const rows = new Map(); // namespace/name to the row
  const trs = new Map(); // namespace/name to its <tr>
  let state = null;
  let sort = { key: params.get('sort') || 'started', dir: params.get('dir') || 'desc' };
  let shown = []; // the visible columns
  let gitShown = false;
  let pending = false;

  byId('f-label').value = params.get('l') || '';

  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  };

  stream('/api/runs?' + filterQuery(params), {
    snapshot: (s) => {
      state = s.state;
      rows.clear();
      trs.clear();
      for (const r of s.rows) rows.set(key(r), r);
      fillFilters(state, params);
      schedule();
    },
    changes: (c) => {
      state = c.state;
      for (const k of c.remove) { rows.delete(k); trs.delete(k); }
      for (const r of c.upsert) { rows.set(key(r), r); trs.delete(key(r)); }
      fillFilters(state, params);
      schedule();
    },
  });

  function render() {
    setText(byId('problem'), state.problem);
    const git = [...rows.values()].some((r) => r.branch || r.diff);
    const visible = columns.filter((c) => (!c.when || c.when(state)) && (!c.git || git));
    if (visible.length !== shown.length || git !== gitShown) {
      shown = visible;
      gitShown = git;
      trs.clear();
      header();
    }
    const ordered = [...rows.values()].sort(compare);
    const body = byId('runs-body');
    const frag = document.createDocumentFragment();
    for (const r of ordered) {
      let tr = trs.get(key(r));
      if (!tr) { tr = rowElement(r); trs.set(key(r), tr); }
      frag.append(tr);
    }
    clear(body).append(frag);
    byId('empty').hidden = rows.size > 0 || !state.synced;
    byId('count').textContent = state.synced
      ? rows.size + (rows.size === 1 ? ' run' : ' runs') + (rows.size !== state.total ? ' of ' + state.total : '')
      : 'Listing AgentRuns…';
    document.body.dataset.rendered = String(rows.size);
    if (!performance.getEntriesByName('runs-rendered').length && state.synced) performance.mark('runs-rendered');
  }

  function header() {
    const head = clear(byId('runs-head'));
    for (const c of shown) {
      const active = sort.key === c.key;
      const th = el('th', { scope: 'col', 'aria-sort': active ? (sort.dir === 'asc' ? 'ascending' : 'descending') : 'none', class: c.num ? 'num' : '' });
      const b = el('button', { type: 'button', class: 'sort', 'data-key': c.key }, c.label, el('span', { class: 'arrow', 'aria-hidden': 'true' }, active ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''));
      b.addEventListener('click', () => {
        sort = sort.key === c.key ? { key: c.key, dir: sort.dir === 'asc' ? 'desc' : 'asc' } : { key: c.key, dir: c.num ? 'desc' : 'asc' };
        const p = new URLSearchParams(location.search);
        p.set('sort', sort.key); p.set('dir', sort.dir);
        history.replaceState(null, '', '?' + p.toString());
        trs.clear();
        header();
        render();
        byId('runs-head').querySelector('[data-key="' + c.key + '"]').focus();
      });
      th.append(b);
      head.append(th);
    }
  }

  function compare(a, b) {
    const get = sortValue[sort.key] || ((r) => r[sort.key]);
    let x = get(a), y = get(b);
    let d;
    if (typeof x === 'number' || typeof y === 'number') d = (x || 0) - (y || 0);
    else d = String(x || '').localeCompare(String(y || ''));
    if (d === 0) d = (a.created - b.created) || key(a).localeCompare(key(b));
    return sort.dir === 'asc' ? d : -d;
  }

  function rowElement(r) {
    const tr = el('tr', { 'data-key': key(r), 'data-phase': r.phase || 'New' });
    for (const c of shown) tr.append(cell(c.key, r));
    return tr;
  }

  function cell(k, r) {
    switch (k) {
      case 'name': return el('td', { class: 'name' }, link(runPath(r.namespace, r.name), r.name), r.stopping && r.running ? el('span', { class: 'tag' }, 'stopping') : null);
      case 'phase': return el('td', {}, phaseBadge(r.phase, r.reason));
      case 'endStatus': return el('td', { class: r.endStatus && r.endStatus !== 'finished' ? 'bad' : '' }, r.endStatus || '—');
      case 'started': return r.started
        ? el('td', { class: 'num', title: 'started ' + new Date(r.started).toISOString() }, formatTime(r.started))
        : el('td', { class: 'num muted', title: 'made ' + new Date(r.created).toISOString() + ', not started' }, 'not yet');
      case 'duration': {
        const td = el('td', { class: 'num' }, duration(r) ? formatDuration(duration(r)) : '—');
        if (r.running && r.started) td.dataset.since = String(r.started);
        return td;
      }
      case 'tokens': return el('td', { class: 'num' }, r.tokensText || '—');
      case 'cost': return el('td', { class: 'num' }, r.cost ? r.cost + (r.costEstimated ? ' (est.)' : '') : '—');
      case 'branch': return el('td', { class: 'mono' }, r.branch || '—');
      case 'diff': return el('td', { class: 'num' }, r.diff || '—');
      case 'result': return el('td', { class: 'result-cell' }, r.running ? el('span', { class: 'muted' }, r.activity || '') : r.result);
      default: return el('td', { class: 'nowrap' }, r[k] || '—');
    }
  }

  // Running rows count their duration on.
  setInterval(() => {
    for (const td of document.querySelectorAll('td[data-since]')) {
      td.textContent = formatDuration(Date.now() - Number(td.dataset.since));
    }
  }, 1000);
}

function key(r) {
  return r.namespace + '/' + r.name;
}

function filterQuery(params) {
  const q = new URLSearchParams();
  for (const k of ['ns', 'phase', 'runtime', 'l']) if (params.get(k)) q.set(k, params.get(k));
  return q.toString();
}

// fillFilters offers the namespaces, phases and runtimes the list knows.
function fillFilters(state, params) {
  byId('ns-field').hidden = !state.allNamespaces;
  options(byId('f-ns'), state.namespaces, params.get('ns'));
  options(byId('f-phase'), [...state.phases, 'none'], params.get('phase'), { none: 'not seen yet' });
  options(byId('f-runtime'), state.runtimes, params.get('runtime'));
}

function options(select, values, current, labels) {
  const want = ['', ...new Set([...values, ...(current ? [current] : [])])];
  const have = [...select.options].map((o) => o.value);
  if (want.join('\n') === have.join('\n')) return;
  clear(select);
  for (const v of want) {
    const o = el('option', { value: v }, v === '' ? 'all' : (labels && labels[v]) || v);
    if (v === (current || '')) o.selected = true;
    select.append(o);
  }
}
