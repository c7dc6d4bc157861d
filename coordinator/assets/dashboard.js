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
