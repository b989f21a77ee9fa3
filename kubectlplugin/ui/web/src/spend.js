import { Chart, BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip } from 'chart.js';
import { el, clear, byId, stream, setText } from './dom.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

// A palette that colour-blind readers can tell apart (Okabe and Ito).
const palette = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];

const common = {
  animation: false,
  responsive: true,
  maintainAspectRatio: false,
  plugins: { legend: { position: 'bottom', labels: { boxWidth: 14, font: { size: 13 } } } },
};

export function spendPage() {
  const params = new URLSearchParams(location.search);
  const by = byId('s-by');
  by.value = params.get('by') === 'runtime' ? 'runtime' : 'model';
  let view = null;
  const charts = {};
  by.addEventListener('change', () => {
    const p = new URLSearchParams(location.search);
    p.set('by', by.value);
    history.replaceState(null, '', '?' + p.toString());
    if (view) render(view);
  });
  byId('s-ns').addEventListener('change', () => byId('spend-form').requestSubmit());

  const q = params.get('ns') ? '?ns=' + encodeURIComponent(params.get('ns')) : '';
  stream('/api/spend' + q, { spend: (v) => { view = v; render(v); } });

  function render(v) {
    setText(byId('problem'), v.problem);
    const sel = clear(byId('s-ns'));
    for (const n of v.namespaces.length ? v.namespaces : [v.namespace]) {
      const o = el('option', { value: n }, n);
      if (n === v.namespace) o.selected = true;
      sel.append(o);
    }
    byId('spend-note').textContent = v.note;
    const series = (by.value === 'runtime' ? v.byRuntime : v.byModel) || [];
    bars('cost-chart', v.labels || [], series, (s) => s.cost, dollars, 'Cost (USD) per ' + (v.bucket || 'period'));
    bars('tokens-chart', v.labels || [], series, (s) => s.tokens, (x) => compact(x), 'Tokens per ' + (v.bucket || 'period'));
    budgetChart(v.budgets || []);
    budgetTable(v.budgets || []);
    totals(by.value === 'runtime' ? v.runtimes : v.models, by.value);
    document.body.dataset.rendered = 'spend';
  }

  function bars(id, labels, series, values, tick, title) {
    const data = {
      labels,
      datasets: series.map((s, i) => ({ label: s.name, data: values(s), backgroundColor: palette[i % palette.length], borderWidth: 0 })),
    };
    const options = {
      ...common,
      scales: {
        x: { stacked: true, ticks: { font: { size: 12 } } },
        y: { stacked: true, beginAtZero: true, ticks: { callback: tick, font: { size: 12 } }, title: { display: true, text: title, font: { size: 13 } } },
      },
      plugins: { ...common.plugins, tooltip: { callbacks: { label: (c) => c.dataset.label + ': ' + tick(c.parsed.y) } } },
    };
    chart(id, 'bar', data, options);
  }

  function budgetChart(list) {
    byId('no-budgets').hidden = list.length > 0;
    byId('budget-chart').parentElement.hidden = list.length === 0;
    if (!list.length) return;
    const pct = (x) => (x < 0 ? null : Math.round(x * 1000) / 10);
    const data = {
      labels: list.map((b) => b.name),
      datasets: [
        { label: 'tokens spent, % of the cap', data: list.map((b) => pct(b.tokenShare)), backgroundColor: palette[0] },
        { label: 'cost spent, % of the cap', data: list.map((b) => pct(b.costShare)), backgroundColor: palette[1] },
      ],
    };
    const max = Math.max(100, ...list.flatMap((b) => [pct(b.tokenShare) || 0, pct(b.costShare) || 0]));
    chart('budget-chart', 'bar', data, {
      ...common,
      indexAxis: 'y',
      scales: { x: { min: 0, max: Math.ceil(max / 10) * 10, ticks: { callback: (x) => x + '%' }, title: { display: true, text: '% of the cap (100% = spent)' } } },
      plugins: { ...common.plugins, tooltip: { callbacks: { label: (c) => c.dataset.label + ': ' + c.parsed.x + '%' } } },
    });
  }

  function chart(id, type, data, options) {
    if (charts[id]) {
      charts[id].data = data;
      charts[id].options = options;
      charts[id].update();
      return;
    }
    charts[id] = new Chart(byId(id), { type, data, options });
  }
}

function budgetTable(list) {
  const t = byId('budget-table');
  for (const c of [...t.children]) if (c.tagName !== 'CAPTION') c.remove();
  t.hidden = !list.length;
  if (!list.length) return;
  t.append(el('thead', {}, el('tr', {}, ...['Budget', 'Window', 'Covers', 'Tokens', 'Cost', 'Runs', 'Held', 'State'].map((h) => el('th', { scope: 'col' }, h)))));
  const body = el('tbody');
  for (const b of list) {
    body.append(el('tr', { class: b.spent ? 'spent' : '' },
      el('th', { scope: 'row' }, b.name), el('td', {}, b.window), el('td', {}, b.covers),
      el('td', { class: 'num' }, b.tokens + (b.maxTokens ? ' of ' + b.maxTokens : '')),
      el('td', { class: 'num' }, b.cost + (b.maxCost ? ' of ' + b.maxCost : '')),
      el('td', { class: 'num' }, String(b.runCount)),
      el('td', {}, b.held && b.held.length ? b.held.length + ': ' + b.held.join(', ') : 'none'),
      el('td', {}, b.state, ...(b.notes || []).map((n) => el('div', { class: 'muted' }, n)))));
  }
  t.append(body);
}

function totals(list, by) {
  const t = byId('totals');
  for (const c of [...t.children]) if (c.tagName !== 'CAPTION') c.remove();
  t.append(el('thead', {}, el('tr', {}, ...[by === 'runtime' ? 'Runtime' : 'Model', 'Runs', 'Tokens', 'Cost'].map((h, i) => el('th', { scope: 'col', class: i ? 'num' : '' }, h)))));
  const body = el('tbody');
  for (const r of list || []) {
    body.append(el('tr', {}, el('th', { scope: 'row' }, r.name), el('td', { class: 'num' }, String(r.runs)), el('td', { class: 'num' }, r.tokens), el('td', { class: 'num' }, r.cost)));
  }
  t.append(body);
}

function dollars(x) {
  if (x === 0) return '$0';
  return '$' + Number(x).toFixed(Math.abs(x) < 0.01 ? 4 : 2);
}

function compact(n) {
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(1) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}
