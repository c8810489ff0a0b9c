// Injected by report_cli_test into a copy of a report page: once the page says
// every chart is drawn (<html data-charts="rendered N">), it measures what a
// reader sees and writes it as JSON into a <pre> with the id "probe" for the test to read
// from Chromium's --dump-dom. It reads the page; it changes nothing else.
(function () {
  'use strict';
  function texts(root, selector) {
    return Array.prototype.map.call(root.querySelectorAll(selector), function (t) {
      return t.textContent;
    });
  }
  function number(value, otherwise) {
    var n = parseFloat(value);
    return isNaN(n) ? otherwise : n;
  }
  // Every drawn item of a mark group: its accessible description (Vega-Lite
  // writes the fields of its data there), fill, opacity and size on screen.
  function items(group) {
    return Array.prototype.map.call(group.querySelectorAll(':scope > path, :scope > line, :scope > g > path'),
      function (item) {
        var box = item.getBoundingClientRect();
        var style = getComputedStyle(item);
        return {
          label: item.getAttribute('aria-label') || '',
          fill: item.getAttribute('fill') || '',
          stroke: item.getAttribute('stroke') || '',
          opacity: number(item.getAttribute('opacity'), 1) *
                   number(item.getAttribute('fill-opacity'), 1) * number(1, 1),
          stroke_width: number(item.getAttribute('stroke-width'), 1),
          width: box.width,
          height: box.height
        };
      });
  }
  function chart(element) {
    var svg = element.querySelector('svg');
    if (!svg) return { drawn: false };
    var top = element.getBoundingClientRect().top + window.scrollY;
    var axes = Array.prototype.map.call(svg.querySelectorAll('g.role-axis'), function (axis) {
      return {
        description: axis.getAttribute('aria-label') || '',
        title: texts(axis, 'g.role-axis-title text').join(' '),
        labels: texts(axis, 'g.role-axis-label text')
      };
    });
    var marks = Array.prototype.map.call(svg.querySelectorAll('g.role-mark'), function (group) {
      return { name: group.getAttribute('class'), items: items(group) };
    });
    return {
      drawn: true,
      top: top,
      client_width: element.clientWidth,
      scroll_width: element.scrollWidth,
      client_height: element.clientHeight,
      scroll_height: element.scrollHeight,
      title: texts(svg, 'g.role-title-text text').join(' '),
      legend: texts(svg, 'g.role-legend-label text'),
      axes: axes,
      marks: marks
    };
  }
  // A table fits when nothing of it lies beyond its box; when it does not,
  // the reader can still reach it only if the box scrolls.
  function table(element) {
    var style = getComputedStyle(element);
    // The cells' text of the tables the page names (not the long ones of every run).
    var rows = !element.id ? [] : Array.prototype.map.call(element.querySelectorAll('tbody tr'), function (row) {
      return Array.prototype.map.call(row.cells, function (cell) { return cell.textContent; });
    });
    return {
      id: element.id || '',
      top: element.getBoundingClientRect().top + window.scrollY,
      rows: rows,
      client_width: element.clientWidth,
      scroll_width: element.scrollWidth,
      overflow_x: style.overflowX,
      right: element.getBoundingClientRect().right
    };
  }
  function probe() {
    var out = {
      viewport: window.innerWidth,
      page_width: document.documentElement.scrollWidth,
      charts: Array.prototype.map.call(document.querySelectorAll('div.chart'), chart),
      tables: Array.prototype.map.call(document.querySelectorAll('table'), table)
    };
    var pre = document.createElement('pre');
    pre.id = 'probe';
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  function wait() {
    var state = document.documentElement.dataset.charts || '';
    if (state.indexOf('rendered') === 0 || state === 'failed') probe();
    else setTimeout(wait, 50);
  }
  window.addEventListener('load', function () { setTimeout(wait, 0); });
})();
