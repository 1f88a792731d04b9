// metricalc inspect: the per-unit scatter (image pairs, or benchmark files), drawn as SVG by
// plain JavaScript (no library). The data come from the JSON block "inspect-data"
// (metricalc.experiment.inspect.page_data).
// Names are only ever inserted as text (textContent, attribute values), never as markup.
"use strict";
(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var W = 760, H = 520, M = { left: 72, right: 16, top: 16, bottom: 52 };
  var LANE = 18;  // width of a lane holding the points whose value is n/a, -inf or +inf
  var RADIUS = 4;

  var data = JSON.parse(document.getElementById("inspect-data").textContent);
  var experiments = data.experiments;
  var unit = data.unit;   // what a point stands for: an image pair, a benchmark file
  var pairs = data.pairs;  // the units: id and label coordinates
  var nPairs = pairs.id.length;

  function decode(v) {
    if (v === null) return NaN;
    if (v === "inf") return Infinity;
    if (v === "-inf") return -Infinity;
    return v;
  }
  experiments.forEach(function (e) {
    Object.keys(e.values).forEach(function (name) {
      e.values[name] = e.values[name].map(decode);
    });
  });

  var state = { x: data.axes[0], y: data.axes[1], diff: false, selected: null };
  var plot = document.getElementById("plot");
  var tooltip = document.getElementById("tooltip");
  var xSelect = document.getElementById("x-axis");
  var ySelect = document.getElementById("y-axis");
  var diffBox = document.getElementById("diff-only");

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  function fmt(v) {
    if (Number.isNaN(v)) return "n/a";
    if (v === Infinity) return "+\u221e";
    if (v === -Infinity) return "\u2212\u221e";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
    return String(Number(v.toPrecision(6)));
  }

  // ---- the points: one per unit and experiment (diff_only: minus the first experiment)
  function points() {
    var out = [];
    for (var e = state.diff ? 1 : 0; e < experiments.length; e++) {
      var exp = experiments[e];
      for (var i = 0; i < nPairs; i++) {
        if (!exp.present[i] || (state.diff && !experiments[0].present[i])) continue;
        var x = exp.values[state.x][i], y = exp.values[state.y][i];
        if (state.diff) {
          x = x - experiments[0].values[state.x][i];
          y = y - experiments[0].values[state.y][i];
        }
        out.push({ e: e, i: i, x: x, y: y });
      }
    }
    return out;
  }

  // ---- a linear scale from values to pixels, with lanes for n/a, -inf (low end), +inf (high)
  function niceStep(span) {
    var raw = span / 6, magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
    var r = raw / magnitude;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * magnitude;
  }

  function makeScale(values, p0, p1) {
    var dir = p1 > p0 ? 1 : -1, a = p0, b = p1, lanes = {};
    if (values.some(function (v) { return Number.isNaN(v); })) {
      lanes.nan = a + dir * LANE / 2; a += dir * LANE;
    }
    if (values.some(function (v) { return v === -Infinity; })) {
      lanes.neg = a + dir * LANE / 2; a += dir * LANE;
    }
    if (values.some(function (v) { return v === Infinity; })) {
      lanes.pos = b - dir * LANE / 2; b -= dir * LANE;
    }
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) {
      if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    });
    if (lo > hi) { lo = 0; hi = 1; }
    else if (lo === hi) { var pad = lo === 0 ? 1 : Math.abs(lo) / 10; lo -= pad; hi += pad; }
    else { var margin = (hi - lo) * 0.04; lo -= margin; hi += margin; }
    var q0 = a + dir * 4, q1 = b - dir * 4;
    function map(v) {
      if (Number.isNaN(v)) return lanes.nan;
      if (v === -Infinity) return lanes.neg;
      if (v === Infinity) return lanes.pos;
      return q0 + (v - lo) / (hi - lo) * (q1 - q0);
    }
    var step = niceStep(hi - lo), ticks = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step) {
      ticks.push(Number(t.toPrecision(12)));
    }
    return { map: map, ticks: ticks, lanes: lanes };
  }

  var LANE_LABELS = { nan: "n/a", neg: "\u2212\u221e", pos: "+\u221e" };

  function axisName(name) {
    return state.diff ? "\u0394 " + name + " (minus " + experiments[0].tag + ")" : name;
  }

  function drawAxes(xs, ys) {
    var x0 = M.left, x1 = W - M.right, y0 = H - M.bottom, y1 = M.top;
    var axes = el("g", { "class": "axis" }, plot);
    Object.keys(xs.lanes).forEach(function (kind) {
      var at = xs.lanes[kind];
      el("rect", { "class": "lane", x: at - LANE / 2, y: y1, width: LANE, height: y0 - y1 }, axes);
      el("text", { "class": "lane-label", x: at, y: y0 + 16, "text-anchor": "middle" }, axes)
        .textContent = LANE_LABELS[kind];
    });
    Object.keys(ys.lanes).forEach(function (kind) {
      var at = ys.lanes[kind];
      el("rect", { "class": "lane", x: x0, y: at - LANE / 2, width: x1 - x0, height: LANE }, axes);
      el("text", { "class": "lane-label", x: x0 - 6, y: at + 4, "text-anchor": "end" }, axes)
        .textContent = LANE_LABELS[kind];
    });
    xs.ticks.forEach(function (t) {
      var at = xs.map(t);
      el("line", { "class": "grid", x1: at, x2: at, y1: y1, y2: y0 }, axes);
      el("text", { x: at, y: y0 + 16, "text-anchor": "middle" }, axes).textContent = fmt(t);
    });
    ys.ticks.forEach(function (t) {
      var at = ys.map(t);
      el("line", { "class": "grid", x1: x0, x2: x1, y1: at, y2: at }, axes);
      el("text", { x: x0 - 6, y: at + 4, "text-anchor": "end" }, axes).textContent = fmt(t);
    });
    el("line", { x1: x0, x2: x1, y1: y0, y2: y0 }, axes);
    el("line", { x1: x0, x2: x0, y1: y0, y2: y1 }, axes);
    el("text", { "class": "axis-label", id: "x-label", x: (x0 + x1) / 2, y: H - 8,
                 "text-anchor": "middle" }, axes).textContent = axisName(state.x);
    el("text", { "class": "axis-label", id: "y-label", x: 14, y: (y0 + y1) / 2,
                 "text-anchor": "middle", transform: "rotate(-90 14 " + (y0 + y1) / 2 + ")" },
       axes).textContent = axisName(state.y);
  }

  var current = [];  // the drawn points, with their circles

  function draw() {
    while (plot.firstChild) plot.removeChild(plot.firstChild);
    hideTooltip();
    current = points();
    var xs = makeScale(current.map(function (p) { return p.x; }), M.left, W - M.right);
    var ys = makeScale(current.map(function (p) { return p.y; }), H - M.bottom, M.top);
    drawAxes(xs, ys);
    el("g", { id: "links" }, plot);
    var layer = el("g", { id: "points" }, plot);
    current.forEach(function (p, k) {
      var exp = experiments[p.e];
      p.cx = xs.map(p.x);
      p.cy = ys.map(p.y);
      p.node = el("circle", {
        "class": "point" + (p.i === state.selected ? " selected" : ""),
        cx: p.cx.toFixed(2), cy: p.cy.toFixed(2), r: RADIUS, fill: exp.color,
        "data-k": k, "data-exp": p.e, "data-tag": exp.tag, "data-index": p.i,
        "data-pair": pairs.id[p.i], "data-x": String(p.x), "data-y": String(p.y)
      }, layer);
    });
    var count = document.getElementById("count");
    count.textContent = current.length + " points" +
      (state.diff ? " (differences to " + experiments[0].tag + ")" : "");
    drawLegend();
  }

  function drawLegend() {
    var legend = document.getElementById("legend");
    while (legend.firstChild) legend.removeChild(legend.firstChild);
    experiments.forEach(function (exp, e) {
      var item = document.createElement("li");
      var swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = exp.color;
      item.appendChild(swatch);
      var shown = current.filter(function (p) { return p.e === e; }).length;
      var text = exp.label + " (" + shown + " points)";
      if (state.diff && e === 0) text = exp.label + " (reference)";
      item.appendChild(document.createTextNode(text));
      legend.appendChild(item);
    });
  }

  // ---- hover: the unit and its values, lines to the same unit in the other experiments
  function hideTooltip() {
    tooltip.hidden = true;
    var links = document.getElementById("links");
    if (links) while (links.firstChild) links.removeChild(links.firstChild);
    current.forEach(function (p) { if (p.node) p.node.classList.remove("hovered"); });
  }

  function hover(p) {
    hideTooltip();
    var links = document.getElementById("links");
    current.forEach(function (q) {
      if (q.i !== p.i) return;
      q.node.classList.add("hovered");
      if (q !== p) el("line", { "class": "link", x1: p.cx, y1: p.cy, x2: q.cx, y2: q.cy }, links);
    });
    var prefix = state.diff ? "\u0394 " : "";
    tooltip.textContent = pairs.id[p.i] + "  (" + experiments[p.e].tag + ")\n" +
      prefix + state.x + ": " + fmt(p.x) + "\n" + prefix + state.y + ": " + fmt(p.y);
    tooltip.style.left = (p.cx + 12) + "px";
    tooltip.style.top = (p.cy + 12) + "px";
    tooltip.hidden = false;
  }

  function pointOf(target) {
    if (!target.classList || !target.classList.contains("point")) return null;
    return current[Number(target.getAttribute("data-k"))];
  }

  plot.addEventListener("mouseover", function (event) {
    var p = pointOf(event.target);
    if (p) hover(p);
  });
  plot.addEventListener("mouseout", function (event) {
    if (pointOf(event.target)) hideTooltip();
  });
  plot.addEventListener("click", function (event) {
    var p = pointOf(event.target);
    if (p) select(p.i);
  });

  // ---- click: the unit's values (and match pictures) in every experiment
  function cell(row, tag, text) {
    var node = document.createElement(tag);
    node.textContent = text;
    row.appendChild(node);
    return node;
  }

  // "scene v_a, pair 1-2, viewpoint": the unit's label coordinates, empty ones left out
  function describe(i) {
    var parts = [];
    unit.labels.forEach(function (label) {
      var value = pairs[label[0]][i];
      if (value !== "") parts.push(label[1] ? label[1] + " " + value : value);
    });
    return parts.length ? "  (" + parts.join(", ") + ")" : "";
  }

  function select(i) {
    state.selected = i;
    current.forEach(function (p) { p.node.classList.toggle("selected", p.i === i); });
    document.getElementById("detail-title").textContent = pairs.id[i] + describe(i);
    var table = document.getElementById("detail-table");
    while (table.firstChild) table.removeChild(table.firstChild);
    var head = document.createElement("tr");
    cell(head, "th", "metric");
    experiments.forEach(function (exp) { cell(head, "th", exp.tag); });
    table.appendChild(head);
    data.variables.forEach(function (name) {
      var row = document.createElement("tr");
      cell(row, "td", name);
      experiments.forEach(function (exp) {
        cell(row, "td", exp.present[i] ? fmt(exp.values[name][i]) : "\u2014");
      });
      table.appendChild(row);
    });
    var images = document.getElementById("detail-images");
    while (images.firstChild) images.removeChild(images.firstChild);
    if (!unit.pictures) return;
    experiments.forEach(function (exp) {
      var figure = document.createElement("figure");
      figure.setAttribute("data-tag", exp.tag);
      var caption = cell(figure, "figcaption", "");
      var swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = exp.color;
      caption.appendChild(swatch);
      caption.appendChild(document.createTextNode(exp.tag));
      if (!exp.present[i]) {
        cell(figure, "p", "no result for this " + unit.short + " in " + exp.tag).className =
          "absent";
      } else if (exp.images[i] === null) {
        cell(figure, "p", "match picture not found in the run folder of " + exp.tag)
          .className = "absent";
      } else {
        var img = document.createElement("img");
        img.alt = exp.tag + ": matches of " + pairs.id[i];
        img.src = exp.images[i];
        figure.appendChild(img);
      }
      images.appendChild(figure);
    });
  }

  document.addEventListener("keydown", function (event) {
    if (event.target.tagName === "SELECT" || nPairs === 0) return;
    var step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
    if (!step) return;
    var start = state.selected === null ? (step > 0 ? -1 : 0) : state.selected;
    select((start + step + nPairs) % nPairs);
    event.preventDefault();
  });

  // ---- controls
  data.variables.forEach(function (name) {
    [xSelect, ySelect].forEach(function (select) {
      var option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      select.appendChild(option);
    });
  });
  xSelect.value = state.x;
  ySelect.value = state.y;
  xSelect.addEventListener("change", function () { state.x = xSelect.value; draw(); });
  ySelect.addEventListener("change", function () { state.y = ySelect.value; draw(); });
  diffBox.disabled = experiments.length < 2;
  diffBox.addEventListener("change", function () { state.diff = diffBox.checked; draw(); });

  var gaps = experiments.filter(function (exp) { return exp.missing > 0; });
  document.getElementById("gaps").textContent = gaps.length === 0 ? "" :
    "Runs with gaps (the union of the " + unit.name + "s is shown; a run has no point where it " +
    "lacks a " + unit.short + "): " + gaps.map(function (exp) {
      return exp.tag + " lacks " + exp.missing + " of " + nPairs + " " + unit.short + "s";
    }).join("; ") + ".";

  draw();
})();
