// runner report: the page's own script, inlined by `runner report` before the
// chart library. It records every error and warning the page raises (so a
// headless browser can assert there were none: <html data-errors="0">),
// renders each chart from the Vega-Lite specification embedded next to it,
// says when all are drawn (<html data-charts="rendered N">), and makes the
// tables marked "sortable" sort by a column on a click.
(function () {
  'use strict';
  var root = document.documentElement;
  var errors = 0, warnings = 0;
  root.dataset.errors = '0';
  root.dataset.warnings = '0';
  function show(kind, message) {
    var box = document.getElementById('report-problems');
    if (!box) return;
    box.hidden = false;
    var item = document.createElement('li');
    item.textContent = kind + ': ' + message;
    box.querySelector('ul').appendChild(item);
  }
  function error(message) {
    errors += 1;
    root.dataset.errors = String(errors);
    show('error', message);
  }
  function warning(message) {
    warnings += 1;
    root.dataset.warnings = String(warnings);
    show('warning', message);
  }
  function text(args) {
    return Array.prototype.map.call(args, function (a) {
      return a && a.message ? a.message : String(a);
    }).join(' ');
  }
  window.addEventListener('error', function (e) { error(e.message || String(e)); });
  window.addEventListener('unhandledrejection', function (e) {
    error(e.reason && e.reason.message ? e.reason.message : String(e.reason));
  });
  var consoleError = console.error, consoleWarn = console.warn;
  console.error = function () { error(text(arguments)); consoleError.apply(console, arguments); };
  console.warn = function () { warning(text(arguments)); consoleWarn.apply(console, arguments); };

  // Sorts a table's body by the clicked column: numbers by data-sort (or the
  // cell's text when it reads as a number), text otherwise; a second click
  // reverses the order.
  function sortable(table) {
    var heads = table.querySelectorAll('thead th');
    Array.prototype.forEach.call(heads, function (th, column) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var descending = th.dataset.order === 'ascending';
        Array.prototype.forEach.call(heads, function (h) { delete h.dataset.order; });
        th.dataset.order = descending ? 'descending' : 'ascending';
        function key(row) {
          var cell = row.cells[column];
          if (!cell) return '';
          var raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
          var number = raw === '' ? NaN : Number(raw);
          return isNaN(number) ? raw.toLowerCase() : number;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var order;
          if (typeof x === 'number' && typeof y === 'number') order = x - y;
          else if (typeof x === 'number') order = -1;
          else if (typeof y === 'number') order = 1;
          else order = x < y ? -1 : x > y ? 1 : 0;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  window.addEventListener('DOMContentLoaded', function () {
    Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), sortable);
    var charts = Array.prototype.slice.call(document.querySelectorAll('[data-spec]'));
    if (typeof vegaEmbed !== 'function') {
      error('the chart library did not load');
      root.dataset.charts = 'failed';
      return;
    }
    Promise.all(charts.map(function (element) {
      var spec = JSON.parse(document.getElementById(element.dataset.spec).textContent);
      return vegaEmbed(element, spec, { actions: false, renderer: 'svg' });
    })).then(function () {
      root.dataset.charts = 'rendered ' + charts.length;
    }, function (e) {
      error(e && e.message ? e.message : String(e));
      root.dataset.charts = 'failed';
    });
  });
})();
