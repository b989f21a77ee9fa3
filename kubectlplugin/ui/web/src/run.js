import { el, link, clear, byId, stream, formatDuration, formatTime, phaseBadge, setText } from './dom.js';

// One run: its status from the watch, and its event log as a timeline,
// followed live while the run goes on. Items come numbered from the
// log's start; after a reconnect the server starts again from the top
// and the items already shown are skipped.

export function runPage() {
  const ns = document.body.dataset.runNs;
  const name = document.body.dataset.runName;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const root = byId('timeline');
  const nodes = new Map(); // tool call and subagent ids to their <li>
  let lastSeq = 0;
  let view = null;
  let endResult = null;

  const usageBox = byId('show-usage');
  const netBox = byId('show-network');
  const toggles = () => {
    root.classList.toggle('hide-usage', !usageBox.checked);
    root.classList.toggle('hide-allowed', !netBox.checked);
  };
  usageBox.addEventListener('change', toggles);
  netBox.addEventListener('change', toggles);
  toggles();
  setText(byId('log-state'), 'Reading the event log…');

  stream('/api/runs/' + encodeURIComponent(ns) + '/' + encodeURIComponent(name), {
    run: (v) => { view = v; renderRun(v); },
    missing: (m) => {
      setText(byId('problem'), m.problem || (m.synced ? m.message : ''));
      document.body.dataset.state = 'missing';
    },
    items: (batch) => {
      for (const it of batch) {
        if (it.kind === 'logEnd') { logEnd(JSON.parse(it.body)); continue; }
        if (it.seq && it.seq <= lastSeq) continue;
        if (it.seq) lastSeq = it.seq;
        place(it);
      }
    },
  });

  function logEnd(end) {
    let s;
    if (end.error) s = end.error;
    else if (end.sawEnd) s = 'The event log is complete.';
    else s = 'The event log ends without its end event: the status has the outcome.';
    setText(byId('log-state'), s);
    byId('log-state').className = end.error ? 'problem-inline' : 'muted';
    document.body.dataset.log = end.error ? 'error' : 'done';
  }

  // place puts an item in the timeline: nested under its subagent, a
  // tool's end on its start, a subagent's end on its start.
  function place(it) {
    const known = it.id && nodes.get(it.id);
    if (known && (it.kind === 'tool' || it.kind === 'subagent')) {
      update(known, it);
      return;
    }
    const li = item(it);
    if (it.id) nodes.set(it.id, li);
    let list = root;
    const parent = it.parent && nodes.get(it.parent);
    if (parent && parent.dataset.kind === 'subagent') list = parent.querySelector(':scope > ol');
    list.append(li);
    if (it.kind === 'end') {
      endResult = it.body || null;
      if (view) renderResult(view);
    }
  }

  function item(it) {
    const li = el('li', { class: 'ev ev-' + it.kind + (it.alert ? ' alert' : ''), 'data-kind': it.kind, 'data-state': it.state || '' });
    fill(li, it);
    if (it.kind === 'subagent') li.append(el('ol', { class: 'nested', 'aria-label': 'Events of ' + it.title }));
    return li;
  }

  function update(li, it) {
    li.className = 'ev ev-' + it.kind + (it.alert ? ' alert' : '');
    li.dataset.state = it.state || '';
    const nested = li.querySelector(':scope > ol');
    for (const c of [...li.children]) if (c !== nested) c.remove();
    // A subagent's end keeps its start's description.
    if (it.kind === 'subagent' && !it.body && li.dataset.body) it.body = li.dataset.body;
    fill(li, it);
    if (nested) li.append(nested);
  }

  function fill(li, it) {
    if (it.body && it.kind === 'subagent') li.dataset.body = it.body;
    const head = el('div', { class: 'ev-head' },
      el('time', { datetime: it.time ? new Date(it.time).toISOString() : '' }, it.time ? formatTime(it.time) : ''),
      el('span', { class: 'agent' }, it.agent),
      el('span', { class: 'kind' }, kindWord(it)),
      it.title ? el('span', { class: 'title' }, it.title) : el('span', { class: 'title' }),
      it.state ? el('span', { class: 'state state-' + it.state }, it.state) : null);
    li.append(head);
    if (it.detail) li.append(el('div', { class: 'ev-detail' }, it.detail));
    if (it.body && it.kind !== 'end') li.append(el('pre', { class: 'ev-body' }, it.body));
  }

  function renderRun(v) {
    const r = v.row;
    document.body.dataset.phase = r.phase || 'New';
    document.title = r.name + ' · kubectl agentrun ui';
    setText(byId('problem'), '');
    const badges = clear(byId('badges'));
    badges.append(phaseBadge(r.phase, r.reason));
    if (r.endStatus) badges.append(el('span', { class: 'badge end-' + r.endStatus }, 'end: ' + r.endStatus));
    badges.append(el('span', { class: 'badge plain' }, r.runtime), el('span', { class: 'badge plain' }, r.model));
    if (r.tokensText) badges.append(el('span', { class: 'badge plain' }, r.tokensText + ' tokens'));
    if (r.cost) badges.append(el('span', { class: 'badge plain' }, r.cost + (r.costEstimated ? ' (estimated)' : '')));
    const d = r.durationMs || (r.running && r.started ? Date.now() - r.started : 0);
    if (d) badges.append(el('span', { class: 'badge plain', id: 'duration' }, formatDuration(d)));
    byId('summary').textContent = v.summary;
    if (v.detail && !r.running) byId('summary').append(el('span', { class: 'detail' }, ' ' + v.detail));
    renderStop(v);
    facts(byId('facts'), v.facts);
    const conds = clear(byId('conditions'));
    for (const c of v.conditions || []) {
      conds.append(el('li', { class: 'cond cond-' + c.status.toLowerCase() }, el('span', { class: 'cond-words' }, c.words),
        c.since ? el('span', { class: 'muted' }, ' · ' + c.since + ' ago') : null,
        c.message ? el('div', { class: 'cond-msg' }, c.message) : null));
    }
    usage(v);
    budgets(v.budgets || []);
    byId('git-section').hidden = !(v.git && v.git.length);
    facts(byId('git'), v.git || []);
    setText(byId('prompt-note'), v.promptNote);
    byId('prompt').textContent = v.prompt;
    byId('prompt').hidden = !v.prompt;
    renderResult(v);
    const cmds = clear(byId('commands'));
    for (const c of v.commands) cmds.append(el('dt', {}, c.what), el('dd', {}, el('code', {}, c.line)));
    const trace = clear(byId('trace'));
    if (v.traceID) {
      trace.append(el('p', {}, 'Trace ', v.traceURL ? link(v.traceURL, v.traceID) : el('code', {}, v.traceID),
        v.traceURL ? '' : el('span', { class: 'muted' }, ' (start the ui with --trace-url to link it)')));
    }
  }

  function renderResult(v) {
    // The end event has the whole result; the status its first 32 KiB.
    const text = endResult !== null ? endResult : v.result;
    byId('result').textContent = text || '';
    byId('result').hidden = !text;
    setText(byId('result-note'), text === endResult && endResult !== v.result ? 'From the event log\'s end event.' : v.resultNote);
  }

  let stopShown = null;
  // renderStop draws the stop's controls when what they say changes only:
  // the status of a running run changes every few seconds, and a person
  // in the middle of confirming keeps their place.
  function renderStop(v) {
    const shown = JSON.stringify([v.row.uid, v.row.running, v.canStop, v.stopNote]);
    if (shown === stopShown) return;
    stopShown = shown;
    const box = clear(byId('stop'));
    if (!v.row.running && !v.canStop) return;
    const note = el('p', { class: 'muted', id: 'stop-note' }, v.stopNote);
    if (!v.canStop) { box.append(note); return; }
    const ask = el('button', { type: 'button', class: 'danger', id: 'stop-button', 'aria-describedby': 'stop-note' }, 'Stop this run…');
    const confirm = el('div', { class: 'confirm', id: 'stop-confirm', role: 'group', 'aria-label': 'Confirm the stop', hidden: true },
      el('span', {}, 'Stop ' + v.row.name + '? '));
    const yes = el('button', { type: 'button', class: 'danger', id: 'stop-yes' }, 'Yes, stop it');
    const no = el('button', { type: 'button', class: 'secondary', id: 'stop-no' }, 'Keep it running');
    const msg = el('p', { id: 'stop-message', role: 'status', 'aria-live': 'polite' });
    confirm.append(yes, ' ', no);
    ask.addEventListener('click', () => { ask.hidden = true; confirm.hidden = false; yes.focus(); });
    no.addEventListener('click', () => { confirm.hidden = true; ask.hidden = false; ask.focus(); });
    yes.addEventListener('click', async () => {
      yes.disabled = no.disabled = true;
      try {
        const res = await fetch('/api/runs/' + encodeURIComponent(ns) + '/' + encodeURIComponent(name) + '/stop', {
          method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
          body: JSON.stringify({ uid: v.row.uid }), credentials: 'same-origin',
        });
        const body = await res.json();
        msg.textContent = body.message || body.error;
        msg.className = res.ok ? '' : 'problem-inline';
      } catch (e) {
        msg.textContent = 'The request failed: ' + e.message;
        msg.className = 'problem-inline';
      }
      confirm.hidden = true;
    });
    box.append(ask, confirm, note, msg);
  }

  function usage(v) {
    const t = byId('usage');
    for (const c of [...t.children]) if (c.tagName !== 'CAPTION') c.remove();
    const notes = clear(byId('usage-notes'));
    if (!v.usage || !v.usage.length) {
      notes.append(el('li', {}, 'No usage reported yet.'));
      return;
    }
    t.append(el('thead', {}, el('tr', {}, ...['Model', 'Input', 'Output', 'Cache read', 'Cache write', 'Total', 'Cost'].map((h, i) => el('th', { scope: 'col', class: i ? 'num' : '' }, h)))));
    const body = el('tbody');
    for (const u of v.usage) {
      const total = u === v.usage[v.usage.length - 1];
      body.append(el('tr', { class: total ? 'total' : '' }, el(total ? 'th' : 'td', total ? { scope: 'row' } : {}, u.model),
        ...[u.input, u.output, u.cacheRead, u.cacheWrite, u.total, u.cost].map((x) => el('td', { class: 'num' }, x))));
    }
    t.append(body);
    for (const n of v.usageNotes || []) notes.append(el('li', {}, n));
  }

  function budgets(list) {
    const box = clear(byId('budgets'));
    if (!list.length) { box.append(el('p', { class: 'muted' }, 'No AgentBudget covers this run.')); return; }
    for (const b of list) {
      box.append(el('div', { class: 'budget' + (b.spent ? ' spent' : '') },
        el('p', {}, el('strong', {}, b.name), ' · ', b.window),
        el('p', {}, 'Tokens ', b.tokens, b.maxTokens ? ' of ' + b.maxTokens : ' (no cap)', ' · cost ', b.cost, b.maxCost ? ' of ' + b.maxCost : ' (no cap)'),
        el('p', { class: b.spent ? 'problem-inline' : 'muted' }, b.state)));
    }
  }

  setInterval(() => {
    if (!view || !view.row.running || !view.row.started) return;
    const d = byId('duration');
    if (d) d.textContent = formatDuration(Date.now() - view.row.started);
  }, 1000);
}

function kindWord(it) {
  switch (it.kind) {
    case 'tool': return 'tool';
    case 'subagent': return 'subagent';
    case 'network': return 'network';
    case 'usage': return 'model call';
    case 'end': return 'end';
    case 'start': return 'start';
    case 'prompt': return 'prompt';
    case 'text': return 'text';
    default: return '';
  }
}

function facts(dl, list) {
  clear(dl);
  for (const f of list) dl.append(el('dt', {}, f.label), el('dd', {}, f.value));
}
