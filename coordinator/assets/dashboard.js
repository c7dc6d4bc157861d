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

  function sweepLink(s) {
    const a = el('a', 'sweep-link', s.name || '(unnamed)');
    a.href = '#sweep/' + encodeURIComponent(String(s.id || ''));
    return a;
  }
  function isFinished(s) { return s.state !== 'running'; }
  // Failures by class as bars, largest first, into `box`.
  function renderFailureBars(box, byClass, emptyText) {
    const entries = Object.entries(byClass || {}).map(([k, v]) => [k, num(v)]).filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    const max = entries.length ? entries[0][1] : 0;
    if (!entries.length) { box.replaceChildren(el('div', 'empty', emptyText)); return 0; }
    box.replaceChildren(...entries.map(([cls, n]) => {
      const row = el('div', 'fail-row');
      row.dataset.cls = cls;
      const track = el('div', 'fail-track'), bar = el('div', 'fail-bar');
      bar.style.width = (n / max * 100) + '%';
      track.append(bar);
      row.append(el('span', 'fail-class mono', cls), track, el('span', 'fail-count', fmtInt(n)));
      return row;
    }));
    return entries.reduce((t, [, n]) => t + n, 0);
  }
  function failureText(byClass) {
    return Object.entries(byClass || {}).filter(([, v]) => num(v) > 0).map(([k, v]) => `${k} ${fmtInt(v)}`).join(', ');
  }
  // Progress figures shared by the running cards and the sweep page.
  function drawProgress(bar, ok, failedBar, s) {
    const done = num(s.pairs_done), total = num(s.pairs_total);
    const failed = Math.min(num(s.pairs_failed), done);
    const pct = total > 0 ? Math.min(100, done / total * 100) : (s.state === 'done' ? 100 : 0);
    ok.style.width = (total > 0 ? Math.min(100, (done - failed) / total * 100) : pct) + '%';
    failedBar.style.width = (total > 0 ? Math.min(100, failed / total * 100) : 0) + '%';
    bar.setAttribute('aria-valuemax', String(total));
    bar.setAttribute('aria-valuenow', String(done));
    return pct;
  }
  function detailBits(s, now, pct) {
    const done = num(s.pairs_done), total = num(s.pairs_total);
    const failed = Math.min(num(s.pairs_failed), done);
    const bits = [pct.toFixed(1) + '%'];
    if (failed) bits.push(fmtInt(failed) + ' failed' + (failureText(s.failed_by_class) ? ` (${failureText(s.failed_by_class)})` : ''));
    if (list(s.waits).length) list(s.waits).forEach((w) => bits.push('waiting for ' + String(w)));
    else if (list(s.waiting_for).length) bits.push('waiting for ' + list(s.waiting_for).join(', ') + ': no live worker');
    list(s.skipped).forEach((w) => bits.push('skipped ' + String(w)));
    if (list(s.expanding).length) bits.push('expanding the config spaces for ' + list(s.expanding).join(', '));
    if (s.error) bits.push(String(s.error));
    if (s.units_total !== undefined) bits.push(`units ${fmtInt(s.units_done)}/${fmtInt(s.units_total)}`);
    const pipe = s.pipeline || {};
    if (num(pipe.units) > 0) {
      bits.push(`devices busy ${(num(pipe.devices_busy) * 100).toFixed(0)}% (waited ${num(pipe.device_wait_seconds).toFixed(1)} s for compiles)`);
      bits.push(`configs ${fmtInt(pipe.compiled)} compiled (${num(pipe.compile_seconds).toFixed(1)} s), ` +
                `${fmtInt(pipe.fetched)} fetched, ${fmtInt(pipe.cached)} cached`);
      if (num(pipe.compile_threads) > 0) {
        bits.push(`compile pool busy ${(num(pipe.compile_busy) * 100).toFixed(0)}% of ${fmtInt(pipe.compile_threads)} thread(s)`);
      }
    }
    if (num(pipe.in_flight_depth) > 0) bits.push(`in flight ${fmtInt(pipe.in_flight)}/${fmtInt(pipe.in_flight_depth)}`);
    const started = num(s.started_unix), finished = num(s.finished_unix);
    if (started > 0) {
      const elapsed = (finished || now) - started;
      bits.push('elapsed ' + fmtDuration(elapsed));
      if (s.state === 'running' && done > 0 && total > done && elapsed > 0) {
        bits.push('ETA ' + fmtDuration((total - done) * elapsed / done));
      }
    }
    return bits;
  }

  // Running sweeps: one card per sweep id, updated in place so progress bars
  // animate. Finished ones collapse into one table.
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
    const state = String(s.state || 'unknown');
    p.name.replaceChildren(sweepLink(s));
    p.id.textContent = s.id || '';
    p.state.textContent = state;
    p.state.className = 'state state-' + state.replace(/[^a-z]/g, '');
    p.models.textContent = list(s.gpu_models).join(', ');
    const pct = drawProgress(p.bar, p.ok, p.failed, s);
    p.pairs.textContent = `${fmtInt(s.pairs_done)} / ${fmtInt(s.pairs_total)} pairs`;
    p.detail.textContent = ' \u00b7 ' + detailBits(s, now, pct).join(' \u00b7 ');
  }
  function finishedRow(s, now) {
    const tr = el('tr', 'finished-sweep');
    tr.dataset.id = String(s.id || '');
    const name = el('td');
    name.append(sweepLink(s), ' ', el('span', 'sweep-id mono', s.id || ''));
    const state = String(s.state || 'unknown');
    const st = el('td');
    st.append(el('span', 'state state-' + state.replace(/[^a-z]/g, ''), state));
    const started = num(s.started_unix), finished = num(s.finished_unix);
    const failed = el('td', 'num', fmtInt(s.pairs_failed));
    if (failureText(s.failed_by_class)) failed.title = failureText(s.failed_by_class);
    tr.append(name, st, el('td', 'num', `${fmtInt(s.pairs_done)} / ${fmtInt(s.pairs_total)}`), failed,
              el('td', 'mono', list(s.gpu_models).join(', ')),
              el('td', 'num', started && finished ? fmtDuration(finished - started) : ''),
              el('td', 'num', finished ? fmtDuration(now - finished) + ' ago' : ''));
    return tr;
  }
  function renderSweeps(doc) {
    const sweeps = list(doc.sweeps);
    const now = num(doc.now_unix) || Date.now() / 1000;
    const box = $('sweeps');
    const seen = new Set();
    const finished = [];
    const farmFailures = {};
    sweeps.forEach((s, i) => {
      for (const [k, v] of Object.entries(s.failed_by_class || {})) farmFailures[k] = (farmFailures[k] || 0) + num(v);
      if (isFinished(s)) { finished.push(s); return; }
      const id = String(s.id || s.name || i);
      seen.add(id);
      let card = sweepCards.get(id);
      if (!card) { card = makeSweepCard(id); sweepCards.set(id, card); }
      box.append(card);  // re-appending keeps the server's order
      updateSweepCard(card, s, now);
    });
    for (const [id, card] of sweepCards) {
      if (!seen.has(id)) { card.remove(); sweepCards.delete(id); }
    }
    finished.sort((a, b) => num(b.finished_unix) - num(a.finished_unix));
    $('finished-body').replaceChildren(...finished.map((s) => finishedRow(s, now)));
    $('finished').hidden = finished.length === 0;
    $('finished-summary').textContent = `${finished.length} finished sweep(s)`;
    const running = sweeps.length - finished.length;
    $('sweeps-empty').hidden = sweeps.length > 0;
    $('sweeps-summary').textContent = (doc.store_fault ? 'STORE WRITES FAIL, NO LEASING: ' + doc.store_fault + ' \u00b7 ' : '') +
        (doc.kernel_image_conflicts ? `CUBIN CONFLICTS: ${fmtInt(doc.kernel_image_conflicts)} image(s) differ from ` +
          'another worker\'s of the same kernel (neither ships) \u00b7 ' : '') +
        (sweeps.length ? `${sweeps.length} sweep(s), ${running} running` : '');
    const total = renderFailureBars($('failures'), farmFailures, 'No failures stored.');
    $('failures-summary').textContent = total
      ? `${fmtInt(total)} failed (config, shape) pairs summed over ${sweeps.length} sweep(s) (a pair stored before counts in each sweep that holds it)`
      : '';
    document.title = running ? `tunefarm \u2014 ${running} running` : 'tunefarm';
    renderSweepPage();
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
                    el('td', 'num', d.total_mem_bytes ? fmtBytes(d.total_mem_bytes) : ''),
                    el('td', 'num', d.power_limit_w ? fmtInt(Math.round(d.power_limit_w)) + ' W' : ''));
        } else {
          const td = el('td', 'empty', 'no devices');
          td.colSpan = 7;
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
    fillRows($('workers-body'), rows, 'No workers connected.', 9);
    $('workers-summary').textContent = `${workers.length} worker(s), ${gpus} GPU(s)`;
  }

  function bestRow(b) {
    const tr = el('tr');
    const cfg = el('td', 'mono', b.config || b.config_id || '');
    if (b.kernel_hash) cfg.title = 'kernel ' + b.kernel_hash + (b.config_id ? ', config ' + b.config_id : '');
    tr.append(el('td', '', b.op || ''), el('td', '', b.dtype || ''), el('td', 'mono', b.shape || ''),
              el('td', 'mono', b.gpu_model || ''), cfg, el('td', 'num', fmtUs(b.median_us)),
              el('td', 'num', b.stdev_us !== undefined ? fmtUs(b.stdev_us) : ''),
              el('td', 'num', b.samples !== undefined ? fmtInt(b.samples) : ''), backendCell(b.backend),
              coverageCell(b.coverage));
    return tr;
  }
  // What the farm measured of the key: "searched 300/3156" (the strategy in the title).
  function coverageCell(c) {
    if (!c) return el('td', '', '');
    const td = el('td', c.state === 'partial' ? 'partial' : '',
                  `${c.state} ${fmtInt(c.evaluated)}/${c.legal_exact ? '' : '~'}${fmtInt(c.legal)}`);
    td.title = (c.strategy || '') + (c.budget ? `, budget ${c.budget}` : '');
    return td;
  }
  function fillRows(body, rows, emptyText, span) {
    if (!rows.length) {
      const tr = el('tr'), td = el('td', 'empty', emptyText);
      td.colSpan = span;
      tr.append(td);
      rows = [tr];
    }
    body.replaceChildren(...rows);
  }
  function renderBest(doc) {
    const best = list(doc.best);
    fillRows($('best-body'), best.map(bestRow), 'No results yet.', 10);
    $('best-summary').textContent = best.length ? `${best.length} key(s)` : '';
    renderSweepPage();
  }

  // Comparison: one card per op, whatever the number of keys: a grouped bar
  // chart (a bar per GPU model at each (dtype, shape) key) that scrolls
  // sideways past a few dozen keys, or without Chart.js a table with a bar
  // per cell. Chart.js instances are kept and updated, because re-creating a
  // chart every second flickers.
  const PALETTE = ['#4a78c2', '#2e9d5b', '#d08a2e', '#8b5cc7', '#c24a6b', '#3aa3a3', '#7a8596'];
  const METRICS = {
    throughput: { value: (x) => num(x.throughput), label: (g) => 'throughput' + (g.unit ? ' (' + g.unit + ')' : ''),
                  fmt: (v, x) => v.toFixed(v >= 100 ? 0 : 1) + ' ' + (x && x.unit ? x.unit : ''), higher: true },
    roofline: { value: (x) => num(x.roofline_share) * 100, label: () => 'roofline share (%)',
                fmt: (v) => v.toFixed(1) + '%', higher: true },
    latency: { value: (x) => num(x.median_us), label: () => 'median latency (\u00b5s)', fmt: (v) => fmtUs(v), higher: false },
    baseline: { value: (x) => num(x.vs_baseline), label: () => 'vs the op\'s baseline (\u00d7, > 1: faster than the vendor library)',
                fmt: (v, x) => v.toFixed(3) + '\u00d7' + (x && x.baseline ? ' ' + x.baseline : ''), higher: true },
  };
  let compareDoc = null;
  const opCards = new Map();
  function keyLabel(g) { return `${g.dtype || ''} ${g.shape || ''}`; }
  function makeOpCard(op) {
    const c = el('div', 'op-card card');
    c.dataset.op = op;
    const title = el('div', 'compare-title');
    const sim = el('span', 'badge-sim', 'SIMULATED');
    const count = el('span', 'shape');
    title.append(el('span', 'op', op), ' ', count, sim);
    const body = el('div', 'op-body');
    c.append(title, body);
    c.parts = { sim, count, body };
    if (hasChart) {
      const scroll = el('div', 'op-scroll'), wrap = el('div', 'op-chart'), canvas = el('canvas');
      wrap.append(canvas);
      scroll.append(wrap);
      body.append(scroll);
      c.parts.wrap = wrap;
      c.chart = new Chart(canvas, {
        type: 'bar',
        data: { labels: [], datasets: [] },
        options: {
          animation: false, responsive: true, maintainAspectRatio: false,
          plugins: { legend: { position: 'top' },
                     tooltip: { callbacks: { label: (ctx) => {
                       const x = (c.cells[ctx.dataIndex] || {})[ctx.dataset.label];
                       return ctx.dataset.label + ': ' + METRICS[metric()].fmt(ctx.parsed.y, x) + (x && x.config ? '  ' + x.config : '');
                     } } } },
          scales: { x: { ticks: { autoSkip: true, maxRotation: 60 } }, y: { beginAtZero: true, title: { display: true, text: '' } } },
        },
      });
    } else {
      const wrap = el('div', 'op-table-wrap'), table = el('table', 'op-table');
      table.append(el('thead'), el('tbody'));
      wrap.append(table);
      body.append(wrap);
      c.parts.table = table;
    }
    return c;
  }
  function metric() { return METRICS[$('compare-metric').value] ? $('compare-metric').value : 'throughput'; }
  function updateOpCard(c, op, groups) {
    const m = METRICS[metric()];
    const models = [...new Set(groups.flatMap((g) => list(g.gpus).map((x) => String(x.gpu_model || '?'))))].sort();
    const sims = new Set(groups.flatMap((g) => list(g.gpus).filter((x) => x.backend === 'sim').map((x) => String(x.gpu_model))));
    // cells[key index][model] = that model's winner on the key
    c.cells = groups.map((g) => Object.fromEntries(list(g.gpus).map((x) => [String(x.gpu_model || '?'), x])));
    c.parts.sim.hidden = sims.size === 0;
    c.parts.count.textContent = `${groups.length} key(s), ${models.length} GPU model(s)`;
    c.dataset.keys = String(groups.length);
    c.dataset.models = models.join(',');
    const unitOf = groups.flatMap((g) => list(g.gpus)).find((x) => x.unit) || {};
    if (c.chart) {
      const labels = groups.map(keyLabel);
      c.parts.wrap.style.width = (labels.length * Math.max(1, models.length) * 10 + 120) + 'px';
      c.chart.data.labels = labels;
      c.chart.data.datasets = models.map((model, i) => ({
        label: model + (sims.has(model) ? ' (sim)' : ''),
        data: c.cells.map((cell) => (cell[model] ? m.value(cell[model]) : null)),
        backgroundColor: PALETTE[i % PALETTE.length], borderWidth: 0,
      }));
      c.cells = c.cells.map((cell) => Object.fromEntries(Object.entries(cell).map(([k, v]) => [k + (sims.has(k) ? ' (sim)' : ''), v])));
      c.chart.options.scales.y.title.text = m.label(unitOf);
      c.chart.update('none');
      return;
    }
    const head = el('tr');
    head.append(el('th', '', 'dtype'), el('th', '', 'shape'),
                ...models.map((model) => el('th', '', model + (sims.has(model) ? ' (sim)' : ''))));
    c.parts.table.tHead.replaceChildren(head);
    const rows = groups.map((g, k) => {
      const tr = el('tr', 'op-key');
      tr.append(el('td', '', g.dtype || ''), el('td', 'mono', g.shape || ''));
      const values = models.map((model) => (c.cells[k][model] ? m.value(c.cells[k][model]) : 0));
      const present = values.filter((v) => v > 0);
      const best = present.length ? (m.higher ? Math.max(...present) : Math.min(...present)) : 0;
      const max = present.length ? Math.max(...present) : 0;
      models.forEach((model, i) => {
        const td = el('td', 'cell');
        const x = c.cells[k][model];
        if (x && values[i] > 0) {
          const track = el('span', 'mini-track'), bar = el('span', values[i] === best ? 'mini-bar best' : 'mini-bar');
          bar.style.display = 'block';
          bar.style.width = (values[i] / max * 100) + '%';
          track.append(bar);
          td.append(track, el('span', 'cell-value', m.fmt(values[i], x)));
          td.title = x.config || '';
        }
        tr.append(td);
      });
      return tr;
    });
    c.parts.table.tBodies[0].replaceChildren(...rows);
  }
  function renderCompare(doc) {
    compareDoc = doc;
    const byOp = new Map();
    const seenKeys = new Set();
    for (const g of list(doc.groups)) {
      const key = [g.op, g.dtype, g.shape].join('|');
      if (seenKeys.has(key)) continue;
      seenKeys.add(key);
      const op = String(g.op || '?');
      if (!byOp.has(op)) byOp.set(op, []);
      byOp.get(op).push(g);
    }
    const box = $('compare');
    for (const [op, groups] of [...byOp].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      let card = opCards.get(op);
      if (!card) { card = makeOpCard(op); opCards.set(op, card); }
      box.append(card);
      updateOpCard(card, op, groups);
    }
    for (const [op, card] of opCards) {
      if (!byOp.has(op)) { if (card.chart) card.chart.destroy(); card.remove(); opCards.delete(op); }
    }
    $('compare-empty').hidden = byOp.size > 0;
  }
  $('compare-metric').addEventListener('change', () => { if (compareDoc) renderCompare(compareDoc); });

  // The page of one sweep (#sweep/ID): its progress, facts, failures by
  // class and its best rows; drawn from the documents the farm page polls.
  const docs = {};
  function routeSweep() {
    const m = /^#sweep\/(.+)$/.exec(location.hash);
    if (!m) return null;
    try {
      return decodeURIComponent(m[1]);
    } catch (e) {
      return m[1];  // a malformed escape names no sweep; the page says so
    }
  }
  function renderSweepPage() {
    const id = routeSweep();
    $('farm').hidden = id !== null;
    $('sweep-page').hidden = id === null;
    if (id === null) return;
    const sdoc = docs.sweeps || {};
    const s = list(sdoc.sweeps).find((x) => String(x.id) === id);
    $('sp-missing').hidden = !!s || !docs.sweeps;
    if (!s) { $('sp-name').textContent = id; return; }
    const now = num(sdoc.now_unix) || Date.now() / 1000;
    const state = String(s.state || 'unknown');
    $('sp-name').textContent = s.name || '(unnamed)';
    $('sp-id').textContent = s.id || '';
    $('sp-state').textContent = state;
    $('sp-state').className = 'state state-' + state.replace(/[^a-z]/g, '');
    const pct = drawProgress($('sp-bar'), $('sp-ok'), $('sp-failed'), s);
    $('sp-counts').textContent = `${fmtInt(s.pairs_done)} / ${fmtInt(s.pairs_total)} pairs \u00b7 ` + detailBits(s, now, pct).join(' \u00b7 ');
    const facts = [['GPU models', list(s.gpu_models).join(', ') || '\u2014'],
                   ['started', num(s.started_unix) ? new Date(num(s.started_unix) * 1000).toLocaleString() : '\u2014'],
                   ['ended', num(s.finished_unix) ? new Date(num(s.finished_unix) * 1000).toLocaleString() : '\u2014'],
                   ['waiting for', list(s.waiting_for).join(', ') || '\u2014']];
    $('sp-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', '', k), el('dd', '', v)]));
    renderFailureBars($('sp-failures'), s.failed_by_class, 'No failures.');
    const rows = list((docs.best || {}).best).filter((b) => String(b.sweep_id) === id);
    fillRows($('sp-best-body'), rows.map(bestRow), 'No results of this sweep yet.', 10);
    $('sp-best-summary').textContent = rows.length ? `${rows.length} key(s)` : '';
    document.title = `tunefarm \u2014 ${s.name || id}`;
  }
  window.addEventListener('hashchange', renderSweepPage);

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
        docs[what] = JSON.parse(text);
        lastText[what] = text;
        renderers[what](docs[what]);
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
