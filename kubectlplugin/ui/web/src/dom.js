// The page's only way to put content in the DOM: elements made with
// createElement and text set as text nodes. Nothing the server sends is
// ever parsed as markup (no innerHTML anywhere), so a result, summary or
// file name holding <script> or <img onerror> shows as those characters.

// el makes an element; attrs may hold class, id, and plain attributes
// (never event handlers, never href: see link); children are nodes or
// strings (strings become text nodes).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on') || k === 'href' || k === 'src' || k === 'style') throw new Error('el: ' + k + ' is not set this way');
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}

export function append(parent, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// link is an anchor to one of the ui's own pages (a path built from
// encoded parts) or to an http(s) URL the server made.
export function link(href, ...children) {
  const a = el('a', {}, ...children);
  if (href.startsWith('/') && !href.startsWith('//')) {
    a.href = href;
  } else {
    const u = new URL(href);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('link: not an http(s) URL');
    a.href = u.href;
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
  }
  return a;
}

export function runPath(ns, name) {
  return '/runs/' + encodeURIComponent(ns) + '/' + encodeURIComponent(name);
}

export function clear(e) {
  while (e.firstChild) e.firstChild.remove();
  return e;
}

export function byId(id) {
  return document.getElementById(id);
}

// setText sets an element's text, and hides it when there is none.
export function setText(e, s) {
  e.textContent = s || '';
  e.hidden = !s;
}

// stream opens a server-sent event stream and reports its state in the
// header's live region.
export function stream(url, handlers) {
  const live = byId('live');
  const es = new EventSource(url);
  es.onopen = () => { live.textContent = 'live'; live.className = 'live on'; };
  es.onerror = () => { live.textContent = 'reconnecting…'; live.className = 'live off'; };
  for (const [name, fn] of Object.entries(handlers)) {
    es.addEventListener(name, (ev) => fn(JSON.parse(ev.data)));
  }
  return es;
}

// formatDuration is kubectl agentrun get's DURATION: 12.4s, 4m05s, 2h03m.
export function formatDuration(ms) {
  if (ms < 0) ms = 0;
  if (ms < 60000) return Math.floor(ms / 1000) + '.' + Math.floor((ms % 1000) / 100) + 's';
  const s = Math.floor(ms / 1000);
  if (ms < 3600000) return Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's';
  return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
}

// formatTime shows a time in the user's zone, the date only when it is
// not today.
export function formatTime(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const now = new Date();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  if (d.toDateString() === now.toDateString()) return time;
  return d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + time;
}

export function phaseBadge(phase, reason) {
  const p = phase || 'New';
  return el('span', { class: 'badge phase-' + p.toLowerCase() }, p + (reason ? ' · ' + reason : ''));
}
