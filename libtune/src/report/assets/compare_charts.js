// Draws the charts of `tunefarm compare --format html` from the JSON in
// #tf-data (report/compare.cc inlines this file).
(function () {
  var data = JSON.parse(document.getElementById('tf-data').textContent);
  var palette = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#bab0ac'];
  function datasets(field, scale) {
    return data.models.map(function (m, i) {
      return {
        label: m.label,
        backgroundColor: palette[i % palette.length],
        borderColor: m.simulated ? '#a15c00' : palette[i % palette.length],
        borderWidth: m.simulated ? 2 : 0,
        data: data.rows.map(function (r) {
          var v = r[field][i];
          return v === null ? null : v * scale;
        })
      };
    });
  }
  function bar(id, field, scale, title, logarithmic) {
    var y = { title: { display: true, text: title } };
    if (logarithmic) y.type = 'logarithmic';
    new Chart(document.getElementById(id), {
      type: 'bar',
      data: { labels: data.rows.map(function (r) { return r.key; }), datasets: datasets(field, scale) },
      options: { animation: false, responsive: true, scales: { y: y },
                 plugins: { title: { display: true, text: title } } }
    });
  }
  bar('tf-chart-speedup', 'speedup', 1, 'speed-up vs ' + data.reference, false);
  bar('tf-chart-share', 'share', 100, 'share of roofline (%)', false);
  bar('tf-chart-median', 'median', 1, 'median latency (us, log scale)', true);
})();
