#include "http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

namespace tune {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

// ---------------------------------------------------------------------------
// The dashboard. One page, no external resources: the coordinator often runs
// on a host without internet access, and a page that loads nothing from
// elsewhere also needs no CORS or CDN trust. Every string from the API goes
// in through textContent, never innerHTML, because sweep and worker names
// come from users and remote hosts.
constexpr const char* kChartJsMarker = "<!--TUNEFARM_CHARTJS-->";

constexpr const char* kDashboardHtml = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunefarm</title>
<link rel="icon" href="data:,">
<style>
:root { --bg:#f6f7f9; --card:#fff; --ink:#1d2330; --muted:#6b7385; --line:#e2e5eb;
        --ok:#2e9d5b; --fail:#d0453b; --run:#3a6fd8; --bar:#4a78c2; --sim:#b35c00; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--ink); }
header { display:flex; align-items:baseline; gap:16px; padding:12px 20px; background:#1d2330; color:#fff; }
header h1 { margin:0; font-size:18px; font-weight:600; }
#conn { font-size:12px; padding:2px 8px; border-radius:10px; background:#555; }
#conn[data-state="live"] { background:var(--ok); }
#conn[data-state="error"] { background:var(--fail); }
#updated { font-size:12px; color:#aab; margin-left:auto; }
main { padding:16px 20px; display:grid; gap:16px; max-width:1400px; }
section h2 { font-size:15px; margin:0 0 8px; display:flex; gap:12px; align-items:baseline; }
section h2 .summary { font-weight:400; font-size:12px; color:var(--muted); }
.card { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:10px 12px; }
.empty { color:var(--muted); font-style:italic; }
.mono { font-family:ui-monospace, "DejaVu Sans Mono", monospace; font-size:12px; }
.sweep { margin-bottom:8px; }
.sweep-head { display:flex; gap:10px; align-items:baseline; flex-wrap:wrap; }
.sweep-name { font-weight:600; }
.sweep-id, .sweep-models { color:var(--muted); }
.state { font-size:11px; text-transform:uppercase; padding:1px 6px; border-radius:8px; color:#fff; background:var(--muted); }
.state-running { background:var(--run); } .state-done { background:var(--ok); } .state-failed { background:var(--fail); }
.progress { display:flex; height:12px; margin:6px 0 4px; background:var(--line); border-radius:6px; overflow:hidden; }
.progress-ok { background:var(--ok); transition:width .4s; }
.progress-failed { background:var(--fail); transition:width .4s; }
.sweep-counts { font-size:12px; color:var(--muted); }
.sweep-counts .pairs { color:var(--ink); }
table { border-collapse:collapse; width:100%; background:var(--card); border:1px solid var(--line); }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; color:var(--muted); font-weight:600; background:#fafbfc; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.badge-sim { font-size:10px; font-weight:700; color:var(--sim); border:1px solid var(--sim); border-radius:4px; padding:0 4px; margin-left:4px; }
#compare { display:grid; grid-template-columns:repeat(auto-fill, minmax(420px, 1fr)); gap:12px; }
.compare-title { margin-bottom:6px; font-weight:600; }
.compare-title .shape { font-weight:400; color:var(--muted); }
.chart-wrap { position:relative; height:80px; }
.bar-row { display:grid; grid-template-columns:160px 1fr 150px; gap:8px; align-items:center; margin:3px 0; font-size:12px; }
.bar-label { overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.bar-track { background:var(--line); height:14px; border-radius:3px; overflow:hidden; }
.bar { height:100%; background:var(--bar); }
.bar.best { background:var(--ok); }
.bar-value { font-variant-numeric:tabular-nums; color:var(--muted); }
</style>
<!--TUNEFARM_CHARTJS-->
</head>
<body>
<header><h1>tunefarm</h1><span id="conn" data-state="connecting">connecting</span><span id="updated"></span></header>
<main>
<section id="sweeps-section"><h2>Sweeps <span class="summary" id="sweeps-summary"></span></h2>
  <div id="sweeps"></div><div class="empty" id="sweeps-empty">No sweeps yet.</div></section>
<section id="workers-section"><h2>Workers <span class="summary" id="workers-summary"></span></h2>
  <table id="workers-table"><thead><tr><th>Worker</th><th>GPU</th><th>Model</th><th>Backend</th>
  <th class="num">CC</th><th class="num">SMs</th><th class="num">Memory</th><th class="num">Leases</th><th class="num">Last seen</th></tr></thead>
  <tbody id="workers-body"></tbody></table></section>
<section id="compare-section"><h2>GPU models compared <span class="summary">best median latency per (op, dtype, shape); lower is better</span></h2>
  <div id="compare"></div><div class="empty" id="compare-empty">Nothing to compare yet.</div></section>
<section id="best-section"><h2>Best so far <span class="summary" id="best-summary"></span></h2>
  <table id="best-table"><thead><tr><th>Op</th><th>Dtype</th><th>Shape</th><th>GPU model</th><th>Config</th>
  <th class="num">Median</th><th class="num">&plusmn; stdev</th><th class="num">Samples</th><th>Backend</th></tr></thead>
  <tbody id="best-body"></tbody></table></section>
</main>
<script>
'use strict';
(function () {
  const POLL_MS = 1000;
  const hasChart = typeof window.Chart === 'function';
  document.documentElement.dataset.charts = hasChart ? 'chartjs' : 'dom';
  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v) { const n = Number(v); return Number.isFinite(n) ? n : 0; }
  function fmtInt(v) { return Math.round(num(v)).toLocaleString('en-US'); }
  function fmtUs(v) {
    const n = num(v);
    if (n >= 1000) return (n / 1000).toFixed(3) + ' ms';
    return n.toFixed(n < 10 ? 3 : 1) + ' \u00b5s';
  }
  function fmtDuration(s) {
    s = Math.max(0, Math.round(s));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return h ? `${h}h ${m}m` : (m ? `${m}m ${sec}s` : `${sec}s`);
  }
  function fmtBytes(b) {
    const g = num(b) / 1073741824;
    return g >= 1 ? g.toFixed(g >= 10 ? 0 : 1) + ' GiB' : Math.round(num(b) / 1048576) + ' MiB';
  }
  function list(v) { return Array.isArray(v) ? v : []; }
  function backendCell(backend) {
    const td = el('td', 'backend', backend || '');
    if (backend === 'sim') td.append(el('span', 'badge-sim', 'SIMULATED'));
    return td;
  }

  // Sweeps: one card per sweep id, updated in place so progress bars animate.
  const sweepCards = new Map();
  function makeSweepCard(id) {
    const c = el('div', 'sweep card');
    c.dataset.id = id;
    const p = c.parts = {
      name: el('span', 'sweep-name'), state: el('span', 'state'),
      models: el('span', 'sweep-models'), id: el('span', 'sweep-id mono'),
      bar: el('div', 'progress'), ok: el('div', 'progress-ok'), failed: el('div', 'progress-failed'),
      pairs: el('span', 'pairs mono'), detail: el('span', 'detail'),
    };
    const head = el('div', 'sweep-head');
    head.append(p.name, p.state, p.models, p.id);
    p.bar.setAttribute('role', 'progressbar');
    p.bar.setAttribute('aria-valuemin', '0');
    p.bar.append(p.ok, p.failed);
    const counts = el('div', 'sweep-counts');
    counts.append(p.pairs, p.detail);
    c.append(head, p.bar, counts);
    return c;
  }
  function updateSweepCard(c, s, now) {
    const p = c.parts;
    const done = num(s.pairs_done), total = num(s.pairs_total);
    const failed = Math.min(num(s.pairs_failed), done);
    const state = String(s.state || 'unknown');
    p.name.textContent = s.name || '(unnamed)';
    p.id.textContent = s.id || '';
    p.state.textContent = state;
    p.state.className = 'state state-' + state.replace(/[^a-z]/g, '');
    p.models.textContent = list(s.gpu_models).join(', ');
    const pct = total > 0 ? Math.min(100, done / total * 100) : (state === 'done' ? 100 : 0);
    p.ok.style.width = (total > 0 ? Math.min(100, (done - failed) / total * 100) : pct) + '%';
    p.failed.style.width = (total > 0 ? Math.min(100, failed / total * 100) : 0) + '%';
    p.bar.setAttribute('aria-valuemax', String(total));
    p.bar.setAttribute('aria-valuenow', String(done));
    p.pairs.textContent = `${fmtInt(done)} / ${fmtInt(total)} pairs`;
    const bits = [pct.toFixed(1) + '%'];
    if (failed) bits.push(fmtInt(failed) + ' failed');
    if (list(s.waiting_for).length) bits.push('waiting for ' + list(s.waiting_for).join(', ') + ': no live worker');
    if (list(s.expanding).length) bits.push('expanding the config spaces for ' + list(s.expanding).join(', '));
    if (s.error) bits.push(String(s.error));
    if (s.units_total !== undefined) bits.push(`units ${fmtInt(s.units_done)}/${fmtInt(s.units_total)}`);
    const started = num(s.started_unix), finished = num(s.finished_unix);
    if (started > 0) {
      const elapsed = (finished || now) - started;
      bits.push('elapsed ' + fmtDuration(elapsed));
      if (state === 'running' && done > 0 && total > done && elapsed > 0) {
        bits.push('ETA ' + fmtDuration((total - done) * elapsed / done));
      }
    }
    p.detail.textContent = ' \u00b7 ' + bits.join(' \u00b7 ');
  }
  function renderSweeps(doc) {
    const sweeps = list(doc.sweeps);
    const now = num(doc.now_unix) || Date.now() / 1000;
    const box = $('sweeps');
    const seen = new Set();
    let running = 0;
    sweeps.forEach((s, i) => {
      const id = String(s.id || s.name || i);
      seen.add(id);
      let card = sweepCards.get(id);
      if (!card) { card = makeSweepCard(id); sweepCards.set(id, card); }
      box.append(card);  // re-appending keeps the server's order
      updateSweepCard(card, s, now);
      if (s.state === 'running') running++;
    });
    for (const [id, card] of sweepCards) {
      if (!seen.has(id)) { card.remove(); sweepCards.delete(id); }
    }
    $('sweeps-empty').hidden = sweeps.length > 0;
    $('sweeps-summary').textContent = (doc.store_fault ? 'STORE WRITES FAIL, NO LEASING: ' + doc.store_fault + ' \u00b7 ' : '') +
        (sweeps.length ? `${sweeps.length} sweep(s), ${running} running` : '');
    document.title = running ? `tunefarm \u2014 ${running} running` : 'tunefarm';
  }

  function renderWorkers(doc) {
    const workers = list(doc.workers);
    const rows = [];
    let gpus = 0;
    for (const w of workers) {
      const devs = list(w.devices).length ? list(w.devices) : [null];
      devs.forEach((d, i) => {
        const tr = el('tr', i === 0 ? 'worker-first' : '');
        if (i === 0) {
          const td = el('td', 'worker-name mono', w.name || '');
          td.rowSpan = devs.length;
          tr.append(td);
        }
        if (d) {
          gpus++;
          tr.append(el('td', 'gpu-name', d.name || ''), el('td', 'gpu-model mono', d.model || ''),
                    backendCell(d.backend), el('td', 'num', d.cc || ''),
                    el('td', 'num', d.num_sms ? fmtInt(d.num_sms) : ''),
                    el('td', 'num', d.total_mem_bytes ? fmtBytes(d.total_mem_bytes) : ''));
        } else {
          const td = el('td', 'empty', 'no devices');
          td.colSpan = 6;
          tr.append(td);
        }
        if (i === 0) {
          const leases = el('td', 'num', fmtInt(w.leases));
          const seen = el('td', 'num', w.last_seen_seconds !== undefined ? num(w.last_seen_seconds).toFixed(1) + ' s ago' : '');
          leases.rowSpan = seen.rowSpan = devs.length;
          tr.append(leases, seen);
        }
        rows.push(tr);
      });
    }
    if (!rows.length) {
      const tr = el('tr'), td = el('td', 'empty', 'No workers connected.');
      td.colSpan = 9;
      tr.append(td);
      rows.push(tr);
    }
    $('workers-body').replaceChildren(...rows);
    $('workers-summary').textContent = `${workers.length} worker(s), ${gpus} GPU(s)`;
  }

  function renderBest(doc) {
    const best = list(doc.best);
    const rows = best.map((b) => {
      const tr = el('tr');
      const cfg = el('td', 'mono', b.config || b.config_id || '');
      if (b.kernel_hash) cfg.title = 'kernel ' + b.kernel_hash + (b.config_id ? ', config ' + b.config_id : '');
      tr.append(el('td', '', b.op || ''), el('td', '', b.dtype || ''), el('td', 'mono', b.shape || ''),
                el('td', 'mono', b.gpu_model || ''), cfg, el('td', 'num', fmtUs(b.median_us)),
                el('td', 'num', b.stdev_us !== undefined ? fmtUs(b.stdev_us) : ''),
                el('td', 'num', b.samples !== undefined ? fmtInt(b.samples) : ''), backendCell(b.backend));
      return tr;
    });
    if (!rows.length) {
      const tr = el('tr'), td = el('td', 'empty', 'No results yet.');
      td.colSpan = 9;
      tr.append(td);
      rows.push(tr);
    }
    $('best-body').replaceChildren(...rows);
    $('best-summary').textContent = best.length ? `${best.length} key(s)` : '';
  }

  // Comparison: one card per (op, dtype, shape); Chart.js instances are kept
  // and updated, because re-creating a chart every second flickers.
  const compareCards = new Map();
  function makeCompareCard(g, key) {
    const c = el('div', 'compare-group card');
    c.dataset.key = key;
    const title = el('div', 'compare-title');
    const sim = el('span', 'badge-sim', 'SIMULATED');
    title.append(el('span', 'op', g.op || ''), ' ', el('span', 'dtype', g.dtype || ''), ' ',
                 el('span', 'shape mono', g.shape || ''), sim);
    const body = el('div', 'compare-chart');
    c.append(title, body);
    c.parts = { sim, body };
    c.configs = [];
    if (hasChart) {
      const wrap = el('div', 'chart-wrap'), canvas = el('canvas');
      wrap.append(canvas);
      body.append(wrap);
      c.parts.wrap = wrap;
      c.chart = new Chart(canvas, {
        type: 'bar',
        data: { labels: [], datasets: [{ label: 'best median (\u00b5s)', data: [], backgroundColor: [], borderWidth: 0 }] },
        options: {
          indexAxis: 'y', animation: false, responsive: true, maintainAspectRatio: false,
          plugins: { legend: { display: false },
                     tooltip: { callbacks: { label: (ctx) => fmtUs(ctx.parsed.x) + '  ' + (c.configs[ctx.dataIndex] || '') } } },
          scales: { x: { beginAtZero: true, title: { display: true, text: 'median latency (\u00b5s)' } } },
        },
      });
    } else {
      c.parts.bars = el('div', 'bars');
      body.append(c.parts.bars);
    }
    return c;
  }
  function updateCompareCard(c, g) {
    const gpus = list(g.gpus).filter((x) => num(x.median_us) > 0);
    const values = gpus.map((x) => num(x.median_us));
    const best = values.length ? Math.min(...values) : 0;
    const max = values.length ? Math.max(...values) : 0;
    const labels = gpus.map((x) => String(x.gpu_model || '?') + (x.backend === 'sim' ? ' (sim)' : ''));
    c.parts.sim.hidden = !gpus.some((x) => x.backend === 'sim');
    c.configs = gpus.map((x) => x.config || '');
    c.dataset.gpus = labels.join(',');
    if (c.chart) {
      c.parts.wrap.style.height = (50 + 26 * Math.max(1, gpus.length)) + 'px';
      c.chart.data.labels = labels;
      const ds = c.chart.data.datasets[0];
      ds.data = values;
      ds.backgroundColor = values.map((v) => (v === best ? '#2e9d5b' : '#4a78c2'));
      c.chart.update('none');
    } else {
      c.parts.bars.replaceChildren(...gpus.map((x, i) => {
        const row = el('div', 'bar-row');
        const track = el('div', 'bar-track');
        const bar = el('div', values[i] === best ? 'bar best' : 'bar');
        bar.style.width = (max > 0 ? values[i] / max * 100 : 0) + '%';
        track.append(bar);
        const ratio = best > 0 ? values[i] / best : 1;
        row.append(el('span', 'bar-label', labels[i]), track,
                   el('span', 'bar-value', fmtUs(values[i]) + ' (' + ratio.toFixed(2) + '\u00d7)'));
        row.title = c.configs[i];
        return row;
      }));
    }
  }
  function renderCompare(doc) {
    const groups = list(doc.groups);
    const box = $('compare');
    const seen = new Set();
    for (const g of groups) {
      const key = [g.op, g.dtype, g.shape].join('|');
      if (seen.has(key)) continue;
      seen.add(key);
      let card = compareCards.get(key);
      if (!card) { card = makeCompareCard(g, key); compareCards.set(key, card); }
      box.append(card);
      updateCompareCard(card, g);
    }
    for (const [key, card] of compareCards) {
      if (!seen.has(key)) { if (card.chart) card.chart.destroy(); card.remove(); compareCards.delete(key); }
    }
    $('compare-empty').hidden = seen.size > 0;
  }

  const renderers = { sweeps: renderSweeps, workers: renderWorkers, best: renderBest, compare: renderCompare };
  const lastText = {};
  async function fetchText(what) {
    const r = await fetch('api/' + what, { cache: 'no-store' });
    if (!r.ok) throw new Error(`/api/${what}: HTTP ${r.status}`);
    return [what, await r.text()];
  }
  function setConn(state, text) {
    const c = $('conn');
    c.dataset.state = state;
    c.textContent = text;
  }
  async function poll() {
    try {
      const answers = await Promise.all(Object.keys(renderers).map(fetchText));
      for (const [what, text] of answers) {
        if (lastText[what] === text) continue;  // unchanged: keep the DOM as it is
        renderers[what](JSON.parse(text));
        lastText[what] = text;
      }
      setConn('live', 'live');
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    } catch (e) {
      setConn('error', 'disconnected: ' + (e && e.message ? e.message : e));
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }
  poll();
})();
</script>
</body>
</html>
)HTML";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream out;
  out << in.rdbuf();
  return in.bad() ? std::string() : out.str();
}

// A script element ends at the first "</script" whatever the JavaScript
// around it means, and after "<!--" a later "<script" nests. Both can only
// occur inside JavaScript strings, regular expressions or comments, where
// "<\/" and "<\!--" mean the same, so only those two are rewritten.
std::string EscapeInlineScript(const std::string& js) {
  auto lower_at = [&js](size_t i, std::string_view word) {
    if (i + word.size() > js.size()) return false;
    for (size_t k = 0; k < word.size(); ++k) {
      const char c = js[i + k];
      if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != word[k]) return false;
    }
    return true;
  };
  std::string out;
  out.reserve(js.size() + 16);
  for (size_t i = 0; i < js.size(); ++i) {
    out += js[i];
    if (js[i] == '<' && (lower_at(i, "</script") || lower_at(i, "<!--"))) out += '\\';
  }
  return out;
}

std::string BuildDashboard(const std::string& chart_js) {
  std::string page = kDashboardHtml;
  const size_t at = page.find(kChartJsMarker);
  std::string script;
  if (!chart_js.empty()) script = "<script>\n" + EscapeInlineScript(chart_js) + "\n</script>";
  page.replace(at, std::char_traits<char>::length(kChartJsMarker), script);
  return page;
}

// Chart.js draws on the page, so the dashboard's CSP allows inline script and
// style but no other origin, no framing and no form posts.
constexpr const char* kDashboardCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

constexpr const char* kJsonType = "application/json";
constexpr const char* kTextType = "text/plain; charset=utf-8";
constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

struct Reply {
  http::status status = http::status::ok;
  std::string content_type = kTextType;
  std::string body;
  bool dashboard = false;
};

Reply Text(http::status status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string_view PathOf(std::string_view target) {
  const size_t q = target.find_first_of("?#");
  return q == std::string_view::npos ? target : target.substr(0, q);
}

}  // namespace

HttpStatusSource::~HttpStatusSource() = default;

std::vector<std::string> DefaultChartJsPaths() {
  // Chart.js 4 (Debian 13) ships a UMD build as chart.umd.js; Chart.js 3
  // (Debian 12) as chart.min.js. The page uses only what both provide.
  return {"/usr/share/javascript/chart.js/chart.umd.js",
          "/usr/share/javascript/chart.js/chart.min.js",
          "/usr/share/javascript/chart.js/Chart.min.js"};
}

// ---------------------------------------------------------------------------
// Server internals. Everything below runs on the one HTTP thread, except
// Start() and Stop(), which touch the io_context only before run() starts
// and through stop() and join(), and counters(), which reads atomics.

namespace {

using Clock = std::chrono::steady_clock;

// Options in seconds as clock durations. Clamped so that now + the result
// cannot overflow; a year is as good as "never" for a connection.
Clock::duration Seconds(double s) {
  if (!(s > 0)) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::min(s, 365.0 * 24 * 3600)));
}

// Connections are grouped per host for the per-address cap: an IPv4 address,
// or the /64 of an IPv6 address (a host usually holds a whole /64, so
// counting single IPv6 addresses would cap nothing).
using AddressKey = net::ip::address_v6::bytes_type;

AddressKey KeyOf(const net::ip::address& a) {
  if (a.is_v4()) return net::ip::make_address_v6(net::ip::v4_mapped, a.to_v4()).to_bytes();
  AddressKey key = a.to_v6().to_bytes();
  if (!a.to_v6().is_v4_mapped()) std::fill(key.begin() + 8, key.end(), 0);
  return key;
}

struct AtomicCounters {
  std::atomic<uint64_t> accepted{0}, refused{0}, evicted{0}, header_timeouts{0},
      body_timeouts{0}, write_timeouts{0}, idle_timeouts{0}, open{0};
};

class Session;

// What every connection reads, and the table of slots; lives in
// HttpServer::Impl, which outlives every Session (see Stop()).
struct ServerState {
  HttpServerOptions opts;
  HttpStatusSource* source = nullptr;
  std::string dashboard;
  AtomicCounters counters;
  // Every connection holding a slot. Small (max_connections), so the
  // eviction rule scans it instead of keeping an ordered index up to date.
  std::vector<Session*> sessions;
  std::map<AddressKey, size_t> per_address;

  // Gives `socket` a slot (taking one per the rule in http_server.h) and
  // starts serving it, or closes it.
  void Admit(tcp::socket socket);
  // The connection to give up its slot: the one waiting longest for a
  // complete request, among those from `address` when given. Null if every
  // candidate is writing a response.
  Session* LongestWaiting(const AddressKey* address) const;
  void Register(Session* s, const AddressKey& address);
  void Unregister(Session* s, const AddressKey& address);

  Reply Route(std::string_view target) const {
    const std::string_view path = PathOf(target);
    if (path == "/healthz") return Text(http::status::ok, "ok\n");
    if (path == "/" || path == "/index.html") {
      Reply r;
      r.content_type = "text/html; charset=utf-8";
      r.body = dashboard;
      r.dashboard = true;
      return r;
    }
    static const std::map<std::string_view, std::string> kApi = {
        {"/api/sweeps", "sweeps"}, {"/api/workers", "workers"},
        {"/api/best", "best"},     {"/api/compare", "compare"}};
    const bool metrics = path == "/metrics";
    const auto api = kApi.find(path);
    if (!metrics && api == kApi.end()) {
      return Text(http::status::not_found,
                  "not found; try /, /api/sweeps, /api/workers, /api/best, /api/compare, "
                  "/metrics\n");
    }
    std::string body;
    try {
      body = metrics ? source->Metrics() : source->Json(api->second);
    } catch (const std::exception& e) {
      return Text(http::status::internal_server_error,
                  std::string("status source failed: ") + e.what() + "\n");
    } catch (...) {
      return Text(http::status::internal_server_error, "status source failed\n");
    }
    if (body.empty()) return Text(http::status::service_unavailable, "no status published yet\n");
    Reply r;
    r.content_type = metrics ? kMetricsType : kJsonType;
    r.body = std::move(body);
    return r;
  }
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState* server, const AddressKey& address)
      : stream_(std::move(socket)), server_(server), address_(address) {
    server_->Register(this, address_);
  }
  ~Session() { Release(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void Start() { StartRequest(); }

  const AddressKey& address() const { return address_; }
  // Whether the slot rule may take this connection's slot: not while its
  // response is being written, since that client did its part.
  bool evictable() const { return phase_ != Phase::kWrite; }
  // The rule's order, oldest first. A connection draining after an error
  // answer has had its answer and sorts before every waiting one.
  Clock::time_point waiting_since() const {
    return phase_ == Phase::kDrain ? Clock::time_point::min() : waiting_since_;
  }
  void Evict() {
    ++server_->counters.evicted;
    Close();
  }

 private:
  enum class Phase { kRequest, kBody, kWrite, kDrain };
  static constexpr size_t kReadChunk = 4096;

  const HttpServerOptions& opts() const { return server_->opts; }

  // A new request starts: from the accept, or from the end of the previous
  // response; the header deadline counts from here.
  void StartRequest() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(opts().max_header_bytes));
    parser_->body_limit(opts().max_body_bytes);
    parser_->eager(true);
    phase_ = Phase::kRequest;
    waiting_since_ = Clock::now();
    phase_deadline_ = waiting_since_ + Seconds(opts().header_deadline_seconds);
    Parse();
  }

  // Feeds what is buffered to the parser (pipelined requests may be there
  // already) and reads only when it needs more.
  void Parse() {
    while (buffer_.size() > 0 && !parser_->is_done()) {
      beast::error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return RequestFailed(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return Handle(parser_->get());
    if (phase_ == Phase::kRequest && parser_->is_header_done()) {
      phase_ = Phase::kBody;
      phase_deadline_ = Clock::now() + Seconds(opts().body_deadline_seconds);
    }
    ArmTimer();
    stream_.async_read_some(
        buffer_.prepare(kReadChunk),
        [self = shared_from_this()](beast::error_code ec, std::size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, std::size_t n) {
    if (!open_) return;  // evicted meanwhile
    buffer_.commit(n);
    if (ec == beast::error::timeout) return TimedOut();
    // A clean close, an end in mid-request or a reset: nobody is there to answer.
    if (ec) return Close();
    Parse();
  }

  void RequestFailed(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return SendError(http::status::payload_too_large, "request body too large\n");
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return SendError(http::status::request_header_fields_too_large,
                       "request headers too large\n");
    }
    SendError(http::status::bad_request, "bad request: " + ec.message() + "\n");
  }

  // Each read or write waits until the phase's deadline or for
  // idle_timeout_seconds, whichever comes first. The stream closes the
  // socket when that time passes.
  void ArmTimer() {
    const Clock::time_point idle = Clock::now() + Seconds(opts().idle_timeout_seconds);
    idle_bound_ = idle < phase_deadline_;
    stream_.expires_at(idle_bound_ ? idle : phase_deadline_);
  }

  void TimedOut() {
    AtomicCounters& c = server_->counters;
    if (idle_bound_) {
      ++c.idle_timeouts;
    } else if (phase_ == Phase::kRequest) {
      ++c.header_timeouts;
    } else if (phase_ == Phase::kBody) {
      ++c.body_timeouts;
    } else if (phase_ == Phase::kWrite) {
      ++c.write_timeouts;
    }
    Close();
  }

  void Handle(const http::request<http::string_body>& req) {
    const bool head = req.method() == http::verb::head;
    Reply reply;
    if (req.method() != http::verb::get && !head) {
      reply = Text(http::status::method_not_allowed, "only GET and HEAD are served\n");
    } else {
      reply = server_->Route(std::string_view(req.target().data(), req.target().size()));
    }
    res_ = {};
    res_.version(req.version() == 10 ? 10 : 11);
    res_.result(reply.status);
    SetCommonHeaders(reply.content_type);
    if (reply.status == http::status::method_not_allowed) res_.set(http::field::allow, "GET, HEAD");
    if (reply.dashboard) {
      res_.set("Content-Security-Policy", kDashboardCsp);
      res_.set("Referrer-Policy", "no-referrer");
    }
    res_.keep_alive(req.keep_alive());
    // HEAD announces the length GET would send, and sends no body.
    res_.content_length(reply.body.size());
    if (!head) res_.body() = std::move(reply.body);
    Write(/*after_error=*/false);
  }

  // After an error the request's framing is unknown: answer, then close.
  void SendError(http::status status, std::string body) {
    res_ = {};
    res_.version(11);
    res_.result(status);
    SetCommonHeaders(kTextType);
    res_.keep_alive(false);
    res_.content_length(body.size());
    res_.body() = std::move(body);
    Write(/*after_error=*/true);
  }

  void SetCommonHeaders(beast::string_view content_type) {
    res_.set(http::field::server, "tunefarm");
    res_.set(http::field::content_type, content_type);
    res_.set(http::field::cache_control, "no-store");
    res_.set("X-Content-Type-Options", "nosniff");
  }

  void Write(bool after_error) {
    phase_ = Phase::kWrite;
    phase_deadline_ = Clock::now() + Seconds(opts().write_deadline_seconds);
    after_error_ = after_error;
    serializer_.emplace(res_);
    WriteSome();
  }

  // One write at a time, so that the idle limit applies to each.
  void WriteSome() {
    ArmTimer();
    http::async_write_some(stream_, *serializer_,
                           [self = shared_from_this()](beast::error_code ec, std::size_t) {
                             self->OnWrite(ec);
                           });
  }

  void OnWrite(beast::error_code ec) {
    if (!open_) return;
    if (ec == beast::error::timeout) return TimedOut();
    if (ec) return Close();
    if (!serializer_->is_done()) return WriteSome();
    serializer_.reset();
    if (after_error_) return StartDrain();
    if (!res_.keep_alive()) return Close();
    StartRequest();
  }

  // Closing a socket with unread input makes the kernel send a reset, which
  // can destroy the error response before the client reads it (an oversized
  // body is still arriving). So: stop sending, then read and discard for a
  // short while until the client closes too.
  void StartDrain() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    phase_ = Phase::kDrain;
    drained_ = 0;
    stream_.expires_after(std::chrono::seconds(1));
    Drain();
  }

  void Drain() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (!self->open_) return;
                              self->drained_ += n;
                              if (ec || self->drained_ > (1u << 20)) return self->Close();
                              self->Drain();
                            });
  }

  // Gives the slot back at once, not when the last handler lets go of the
  // session, so that an evicted or timed-out connection frees its slot
  // (and its descriptor) before the next accept.
  void Close() {
    Release();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  void Release() {
    if (!open_) return;
    open_ = false;
    server_->Unregister(this, address_);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::optional<http::response_serializer<http::string_body>> serializer_;
  ServerState* server_;
  const AddressKey address_;
  bool open_ = true;
  Phase phase_ = Phase::kRequest;
  Clock::time_point waiting_since_;
  Clock::time_point phase_deadline_;
  bool idle_bound_ = false;  // the armed expiry is the idle limit, not the deadline
  bool after_error_ = false;
  std::array<char, 4096> discard_{};
  size_t drained_ = 0;
};

void ServerState::Register(Session* s, const AddressKey& address) {
  sessions.push_back(s);
  ++per_address[address];
  counters.open = sessions.size();
}

void ServerState::Unregister(Session* s, const AddressKey& address) {
  const auto it = std::find(sessions.begin(), sessions.end(), s);
  if (it != sessions.end()) {
    *it = sessions.back();
    sessions.pop_back();
  }
  const auto count = per_address.find(address);
  if (count != per_address.end() && --count->second == 0) per_address.erase(count);
  counters.open = sessions.size();
}

Session* ServerState::LongestWaiting(const AddressKey* address) const {
  Session* oldest = nullptr;
  for (Session* s : sessions) {
    if (!s->evictable() || (address && s->address() != *address)) continue;
    if (!oldest || s->waiting_since() < oldest->waiting_since()) oldest = s;
  }
  return oldest;
}

void ServerState::Admit(tcp::socket socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // the client is gone already; the socket closes with this scope
  const AddressKey key = KeyOf(peer.address());
  const size_t per_address_cap = opts.max_connections_per_address;
  const auto from_here = per_address.find(key);
  bool full = false;
  Session* victim = nullptr;
  if (per_address_cap > 0 && from_here != per_address.end() &&
      from_here->second >= per_address_cap) {
    full = true;
    victim = LongestWaiting(&key);
  } else if (sessions.size() >= opts.max_connections) {
    full = true;
    victim = LongestWaiting(nullptr);
  }
  if (full && !victim) {
    ++counters.refused;
    socket.close(ec);
    return;
  }
  if (victim) victim->Evict();
  ++counters.accepted;
  std::make_shared<Session>(std::move(socket), this, key)->Start();
}

}  // namespace

struct HttpServer::Impl {
  ServerState state;
  bool chart_js = false;
  bool started = false;
  uint16_t bound_port = 0;
  std::string url;

  std::unique_ptr<net::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<net::steady_timer> accept_retry;
  std::thread thread;

  void Accept() {
    acceptor->async_accept(*ioc, [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {
        // Out of descriptors, typically: retry soon instead of spinning.
        accept_retry->expires_after(std::chrono::milliseconds(50));
        accept_retry->async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      state.Admit(std::move(socket));
      Accept();
    });
  }
};

HttpServer::HttpServer(HttpServerOptions opts, HttpStatusSource* source)
    : impl_(std::make_unique<Impl>()) {
  impl_->state.opts = std::move(opts);
  impl_->state.source = source;
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return Status::Error("http: server already started");
  const std::string where = s.state.opts.address + ":" + std::to_string(s.state.opts.port);
  if (!s.state.source) return Status::Error("http: no status source for " + where);
  beast::error_code ec;
  const net::ip::address addr = net::ip::make_address(s.state.opts.address, ec);
  if (ec) return Status::Error("http: cannot parse address '" + s.state.opts.address + "': " + ec.message());

  for (const auto& path : s.state.opts.chart_js_candidates) {
    std::string js = ReadFile(path);
    if (!js.empty()) {
      s.state.dashboard = BuildDashboard(js);
      s.chart_js = true;
      break;
    }
  }
  if (!s.chart_js) s.state.dashboard = BuildDashboard("");

  auto ioc = std::make_unique<net::io_context>(1);
  auto acceptor = std::make_unique<tcp::acceptor>(*ioc);
  const tcp::endpoint endpoint(addr, s.state.opts.port);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("http: cannot listen on " + where + ": " + ec.message());
  s.bound_port = acceptor->local_endpoint(ec).port();
  if (ec) return Status::Error("http: cannot read the bound port of " + where + ": " + ec.message());
  const std::string host = addr.is_v6() ? "[" + s.state.opts.address + "]" : s.state.opts.address;
  s.url = "http://" + host + ":" + std::to_string(s.bound_port) + "/";

  s.ioc = std::move(ioc);
  s.acceptor = std::move(acceptor);
  s.accept_retry = std::make_unique<net::steady_timer>(*s.ioc);
  s.started = true;
  s.Accept();
  s.thread = std::thread([&s] {
    for (;;) {
      try {
        s.ioc->run();
        return;
      } catch (const std::exception& e) {
        // One request's failure (out of memory, typically) must not take the
        // status page down for good.
        std::fprintf(stderr, "http: handler failed: %s\n", e.what());
      }
    }
  });
  return Status::OK();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.ioc) return;
  s.ioc->stop();
  if (s.thread.joinable()) s.thread.join();
  // Destroying the io_context destroys the pending handlers and with them
  // every Session, while the Impl they point to is still alive.
  s.accept_retry.reset();
  s.acceptor.reset();
  s.ioc.reset();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }
std::string HttpServer::url() const { return impl_->url; }
bool HttpServer::has_chart_js() const { return impl_->chart_js; }

HttpServerCounters HttpServer::counters() const {
  const AtomicCounters& c = impl_->state.counters;
  HttpServerCounters out;
  out.accepted = c.accepted;
  out.refused = c.refused;
  out.evicted = c.evicted;
  out.header_timeouts = c.header_timeouts;
  out.body_timeouts = c.body_timeouts;
  out.write_timeouts = c.write_timeouts;
  out.idle_timeouts = c.idle_timeouts;
  out.open = c.open;
  return out;
}

// ---------------------------------------------------------------------------
// Prometheus text format.

namespace {

std::string SanitiseName(const std::string& name, bool allow_colon) {
  std::string out = name.empty() ? "_" : name;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || (allow_colon && c == ':');
    if (!ok) c = '_';
  }
  if (out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  return out;
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void WriteSample(std::string& out, const std::string& name, const MetricLabels& labels,
                 const std::pair<std::string, std::string>* extra, const std::string& value) {
  out += name;
  if (!labels.empty() || extra) {
    out += '{';
    bool first = true;
    auto add = [&](const std::pair<std::string, std::string>& l) {
      if (!first) out += ',';
      first = false;
      out += SanitiseName(l.first, false);
      out += "=\"";
      out += EscapeLabelValue(l.second);
      out += '"';
    };
    for (const auto& l : labels) add(l);
    if (extra) add(*extra);
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

const char* TypeName(Metric::Type t) {
  switch (t) {
    case Metric::Type::kCounter: return "counter";
    case Metric::Type::kSummary: return "summary";
    case Metric::Type::kGauge: break;
  }
  return "gauge";
}

}  // namespace

Metric Metric::Gauge(std::string name, std::string help, double value, MetricLabels labels) {
  Metric m;
  m.name = std::move(name);
  m.help = std::move(help);
  m.value = value;
  m.labels = std::move(labels);
  return m;
}

Metric Metric::Counter(std::string name, std::string help, double value, MetricLabels labels) {
  Metric m = Gauge(std::move(name), std::move(help), value, std::move(labels));
  m.type = Type::kCounter;
  return m;
}

Metric Metric::Summary(std::string name, std::string help,
                       std::vector<std::pair<double, double>> quantiles, double sum,
                       uint64_t count, MetricLabels labels) {
  Metric m = Gauge(std::move(name), std::move(help), 0, std::move(labels));
  m.type = Type::kSummary;
  m.quantiles = std::move(quantiles);
  m.sum = sum;
  m.count = count;
  return m;
}

std::string RenderMetrics(const std::vector<Metric>& metrics) {
  // The format wants every sample of a family right after its TYPE line, so
  // samples are grouped by name, families in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Metric*>> families;
  for (const auto& m : metrics) {
    const std::string name = SanitiseName(m.name, true);
    auto [it, inserted] = families.try_emplace(name);
    if (inserted) order.push_back(name);
    it->second.push_back(&m);
  }
  std::string out;
  for (const auto& name : order) {
    const auto& samples = families[name];
    const Metric& first = *samples.front();
    if (!first.help.empty()) out += "# HELP " + name + " " + EscapeHelp(first.help) + "\n";
    out += "# TYPE " + name + " " + TypeName(first.type) + "\n";
    for (const Metric* m : samples) {
      if (first.type != Metric::Type::kSummary) {
        WriteSample(out, name, m->labels, nullptr, FormatValue(m->value));
        continue;
      }
      for (const auto& [q, v] : m->quantiles) {
        const std::pair<std::string, std::string> quantile{"quantile", FormatValue(q)};
        WriteSample(out, name, m->labels, &quantile, FormatValue(v));
      }
      WriteSample(out, name + "_sum", m->labels, nullptr, FormatValue(m->sum));
      WriteSample(out, name + "_count", m->labels, nullptr, std::to_string(m->count));
    }
  }
  return out;
}

}  // namespace tune
