// ts2 SEG explorer (analysis/report/explorer.py). Our own script, MIT like the rest of ts2; no libraries.
// Every string from the data is inserted with textContent or setAttribute (never innerHTML), so a
// prompt holding markup shows as text.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("ts2-data").textContent);
  var thumbs = null; // parsed on first use: the list view needs none, and the block can be megabytes
  var SVGNS = "http://www.w3.org/2000/svg";
  var app = document.getElementById("app");
  var segById = {};
  D.segs.forEach(function (s) { segById[s.id] = s; });
  var metricNames = D.metrics.map(function (m) { return m.name; });
  var MAX_WALKS_SHOWN = 200;

  function T() {
    if (thumbs === null) thumbs = JSON.parse(document.getElementById("ts2-thumbs").textContent);
    return thumbs;
  }

  function add(parent, kids) {
    kids.forEach(function (k) {
      if (k === null || k === undefined) return;
      parent.appendChild(typeof k === "string" || typeof k === "number" ? document.createTextNode(String(k)) : k);
    });
    return parent;
  }
  function el(tag, attrs) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    return add(e, Array.prototype.slice.call(arguments, 2));
  }
  function sv(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    return add(e, Array.prototype.slice.call(arguments, 2));
  }
  function setAttrs(e, attrs) {
    Object.keys(attrs || {}).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    });
  }
  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "n/a";
    var a = Math.abs(v);
    return a >= 1000 ? v.toFixed(0) : a >= 10 ? v.toFixed(2) : v.toFixed(3);
  }
  // Meta-metric values come as fractions (as in the CSV files) and are shown in %, the unit in
  // every header and sentence (analysis/units.py); the same rounding: 0.1, never "-0.0".
  function inPct(v) { return v === null || v === undefined || !isFinite(v) ? null : 100 * v; }
  function pctText(p) {
    if (p === null) return "n/a";
    var t = p.toFixed(1);
    return t === "-0.0" ? "0.0" : t;
  }
  function pct(v) { return pctText(inPct(v)); }
  function cls(v, thr) { return v === null || v === undefined ? "na" : v < thr ? "bad" : "good"; }

  // -- state, kept in the URL's fragment so the back button and reloads work ---------------------
  var defaults = { view: "list", a: metricNames[0], b: "", mm: D.meta_metrics[0] || "rank", subset: "",
                   filter: "all", thr: "50", seg: "" };
  function state() {
    var s = Object.assign({}, defaults);
    var q = new URLSearchParams(location.hash.slice(1));
    Object.keys(defaults).forEach(function (k) { if (q.has(k)) s[k] = q.get(k); });
    if (metricNames.indexOf(s.a) < 0) s.a = defaults.a;
    if (s.b && metricNames.indexOf(s.b) < 0) s.b = "";
    if (["list", "seg", "compare"].indexOf(s.view) < 0 || (s.view !== "list" && !segById[s.seg])) s.view = "list";
    return s;
  }
  function go(changes) {
    var s = Object.assign(state(), changes), q = new URLSearchParams();
    Object.keys(defaults).forEach(function (k) { if (s[k] !== defaults[k]) q.set(k, s[k]); });
    location.hash = q.toString();
  }
  function metricInfo(name) { return D.metrics[metricNames.indexOf(name)]; }
  function metricLabel(name) {
    var m = metricInfo(name);
    return name + (m.role !== "metric" ? " (" + m.role + ")" : "") + (m.lower_is_better ? " (lower is better)" : "");
  }
  function segValue(seg, metric, mm) {
    var m = seg.metrics[metric];
    var v = m && m.values ? m.values[mm] : null;
    return v === undefined ? null : v;
  }
  function select(id, options, value, onchange) {
    var s = el("select", { id: id, onchange: function () { onchange(s.value); } });
    options.forEach(function (o) {
      var opt = el("option", { value: o[0] }, o[1]);
      if (o[0] === value) opt.selected = true;
      s.appendChild(opt);
    });
    return s;
  }
  function metricOptions(withNone) {
    var out = withNone ? [["", "(none)"]] : [];
    return out.concat(metricNames.map(function (n) { return [n, metricLabel(n)]; }));
  }

  // -- view 1: SEGs worst first -----------------------------------------------------------------
  function listView(s) {
    var thr = parseFloat(s.thr);
    if (!isFinite(thr)) thr = 50;  // in %, like the values shown
    var rows = D.segs.filter(function (g) { return !s.subset || g.subset === s.subset; });
    if (s.filter === "afbp" && s.b) {
      rows = rows.filter(function (g) {
        var a = inPct(segValue(g, s.a, s.mm)), b = inPct(segValue(g, s.b, s.mm));
        return a !== null && b !== null && a < thr && b >= thr;
      });
    }
    rows.sort(function (x, y) {
      var a = segValue(x, s.a, s.mm), b = segValue(y, s.a, s.mm);
      if (a === null) return b === null ? 0 : 1;
      if (b === null) return -1;
      return a - b;
    });
    var mmName = s.mm + "_m";
    var controls = el("div", { "class": "controls" },
      el("label", {}, "metric A ", select("metric-a", metricOptions(false), s.a, function (v) { go({ a: v }); })),
      el("label", {}, "sort by ", select("meta-metric", D.meta_metrics.map(function (k) { return [k, k + "_m"]; }),
                                       s.mm, function (v) { go({ mm: v }); })),
      el("label", {}, "subset ", select("subset", [["", "all"]].concat(D.subsets.map(function (x) { return [x, x]; })),
                                      s.subset, function (v) { go({ subset: v }); })),
      el("label", {}, "metric B ", select("metric-b", metricOptions(true), s.b, function (v) { go({ b: v }); })),
      el("label", {}, "show ", select("filter", [["all", "all SEGs"], ["afbp", "A fails, B passes"]], s.filter,
                                    function (v) { go({ filter: v }); })),
      el("label", {}, "pass at " + mmName + " (%) \u2265 ",
         el("input", { id: "threshold", type: "number", step: "5", value: s.thr, style: "width:5em",
                       onchange: function (e) { go({ thr: e.target.value }); } })));
    var head = el("tr", {}, el("th", {}, "#"), el("th", {}, "SEG"), el("th", {}, "subset"), el("th", {}, "prompt"),
                  el("th", {}, "A: " + s.a + " " + mmName + " (%)"), s.b ? el("th", {}, "B: " + s.b + " " + mmName + " (%)") : null,
                  el("th", {}, "nodes"), el("th", {}, "images"));
    var body = el("tbody", {});
    rows.forEach(function (g, i) {
      var a = inPct(segValue(g, s.a, s.mm)), b = s.b ? inPct(segValue(g, s.b, s.mm)) : null;
      var n = g.nodes.reduce(function (t, x) { return t + x.images.length; }, 0);
      body.appendChild(el("tr", { "class": "seg-row", "data-seg": g.id, onclick: function () { go({ view: "seg", seg: g.id }); } },
        el("td", { "class": "num" }, String(i + 1)), el("td", {}, g.id), el("td", {}, g.subset || ""),
        el("td", {}, g.prompt), el("td", { "class": "num " + cls(a, thr) }, pctText(a)),
        s.b ? el("td", { "class": "num " + cls(b, thr) }, pctText(b)) : null,
        el("td", { "class": "num" }, String(g.nodes.length)), el("td", { "class": "num" }, String(n))));
    });
    var sub = "Dataset " + (D.dataset || "not recorded") + ", protocol " + D.protocol + ": " + rows.length + " of " +
      D.segs.length + " SEGs, worst first by A's " + mmName + " (click a row for its graph). " +
      (s.filter === "afbp" ? (s.b ? "Only SEGs where A fails (" + mmName + " < " + thr + " %) and B passes." :
        "Choose metric B to filter.") : "");
    var notes = D.notes.length ? el("details", {}, el("summary", { "class": "note" }, D.notes.length + " note(s)"),
      add(el("ul", {}), D.notes.map(function (t) { return el("li", { "class": "note" }, t); }))) : null;
    return el("div", { id: "list-view" }, el("h1", {}, D.title), el("p", { "class": "sub" }, sub), controls,
              el("table", { id: "seg-list" }, el("thead", {}, head), body), notes);
  }

  // -- view 2: one SEG under one metric -----------------------------------------------------------
  function thumbFig(seg, im, j, scoreClass) {
    var src = im.t !== null ? T()[im.t] : null;
    var pic = src && src.indexOf("data:image/jpeg;base64,") === 0 ?
      el("img", { "class": "thumb", src: src, alt: im.f, title: im.f }) :
      el("div", { "class": "nothumb", title: im.f }, im.f);
    return el("figure", { "class": "img" }, pic, el("figcaption", { "class": scoreClass }, fmt(im.s[j])));
  }
  function graphSvg(seg, m, walk, selected) {
    var onWalk = {}, nodeOn = {};
    function mark(w, tag) {
      if (!w) return;
      w.forEach(function (n, i) { nodeOn[n] = nodeOn[n] || tag; if (i && w[i - 1] !== n) onWalk[w[i - 1] + ">" + n] = onWalk[w[i - 1] + ">" + n] || tag; });
    }
    mark(selected, "sel");
    mark(walk, "worst");
    var svg = sv("svg", { width: seg.width, height: seg.height, viewBox: "0 0 " + seg.width + " " + seg.height,
                          "class": "seg-graph" });
    var W = D.node_size[0], H = D.node_size[1];
    seg.edges.forEach(function (e, k) {
      var u = seg.nodes[e[0]], v = seg.nodes[e[1]], c = m.edges[k];
      var against = c[2] > 0 && c[0] > c[2] / 2;
      var x1 = u.x + W / 2, y1 = u.y, x2 = v.x - W / 2, y2 = v.y, mx = (x1 + x2) / 2;
      var tag = onWalk[e[0] + ">" + e[1]];
      var title = "edge " + u.label + " \u2192 " + v.label + ": " + c[0] + " of " + c[2] +
        " image pairs ordered against the graph, " + c[1] + " tied" + (e[2].length ? "; " + e[2].join("; ") : "");
      svg.appendChild(sv("path", { "class": "edge" + (against ? " against" : "") + (tag ? " " + tag : ""),
                                   d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2,
                                   "data-edge": k }, sv("title", {}, title)));
    });
    seg.nodes.forEach(function (n, i) {
      var sc = n.images.map(function (im) { return im.s[m.j]; }).filter(function (v) { return v !== null; });
      var mean = sc.length ? sc.reduce(function (a, b) { return a + b; }, 0) / sc.length : null;
      var first = n.errors.length ? n.errors[0] : n.level ? "errors not described" : "no error";
      if (first.length > 30) first = first.slice(0, 29) + "\u2026";
      svg.appendChild(sv("g", { "class": "node" + (nodeOn[i] ? " " + nodeOn[i] : ""), "data-node": n.label,
                                transform: "translate(" + (n.x - W / 2) + "," + (n.y - H / 2) + ")" },
        sv("title", {}, "node " + n.label + " (" + n.level + " error" + (n.level === 1 ? "" : "s") + ")" +
           (n.errors.length ? ": " + n.errors.join("; ") : "")),
        sv("rect", { width: W, height: H, rx: 6 }),
        sv("text", { x: 6, y: 15 }, n.label + " \u00b7 " + n.images.length + " img \u00b7 mean " + fmt(mean)),
        sv("text", { x: 6, y: 31, "class": "small" }, first),
        n.errors.length > 1 ? sv("text", { x: 6, y: 44, "class": "small" }, "+" + (n.errors.length - 1) + " more") : null));
    });
    return el("div", { "class": "graph" }, svg);
  }
  function walkText(seg, w) { return w.map(function (i) { return seg.nodes[i].label; }).join(" \u2192 "); }
  function panel(seg, metric) {
    var j = metricNames.indexOf(metric), m = Object.assign({ j: j }, seg.metrics[metric]);
    var worst = m.worst === null ? null : seg.walks[m.worst];
    var box = el("div", { "class": "panel", "data-metric": metric });
    var vals = D.meta_metrics.map(function (k) { return k + "_m " + pct(m.values[k]); }).join(", ");
    var gdiv = graphSvg(seg, m, worst, null);
    add(box, [el("h3", {}, metricLabel(metric)),
              el("p", { "class": "sub" }, "This SEG, in %: " + vals + " (protocol " + D.protocol + "). Worst walk: " +
                 (worst ? walkText(seg, worst) + " (rank_m " + pct(m.walks[m.worst]) + ")" : "none") + "."),
              el("div", { "class": "legend" }, el("span", { "class": "lg-worst" }, "\u2501 worst walk"),
                 el("span", { "class": "lg-against" }, "\u2504 edge the metric orders against the graph (most image pairs)"),
                 el("span", {}, "click a walk to show it")),
              gdiv]);
    // walks, worst first
    var order = seg.walks.map(function (_, i) { return i; });
    order.sort(function (a, b) {
      var x = m.walks[a], y = m.walks[b];
      if (x === null) return y === null ? a - b : 1;
      if (y === null) return -1;
      return x - y || a - b;
    });
    var wbody = el("tbody", {});
    order.slice(0, MAX_WALKS_SHOWN).forEach(function (i) {
      var tr = el("tr", { "class": "walk" + (i === m.worst ? " worst" : ""), "data-walk": i,
                          onclick: function () {
                            box.querySelectorAll("tr.walk.sel").forEach(function (r) { r.classList.remove("sel"); });
                            tr.classList.add("sel");
                            var g = graphSvg(seg, m, worst, seg.walks[i]);
                            box.replaceChild(g, gdiv);
                            gdiv = g;
                          } },
                  el("td", {}, walkText(seg, seg.walks[i])), el("td", { "class": "num " + cls(m.walks[i], 0.5) }, pct(m.walks[i])));
      wbody.appendChild(tr);
    });
    add(box, [el("h4", {}, seg.walks.length + " walk(s) with their Spearman rank_m, worst first" +
                 (seg.walks.length > MAX_WALKS_SHOWN ? " (first " + MAX_WALKS_SHOWN + " shown)" : "")),
              el("div", { "class": "walks" }, el("table", { "class": "walks-table" },
                 el("thead", {}, el("tr", {}, el("th", {}, "walk"), el("th", {}, "rank_m (%)"))), wbody))]);
    // image pairs ordered against the graph
    if (m.pairs.length) {
      var pb = el("tbody", {});
      m.pairs.forEach(function (p) {
        var e = seg.edges[p[0]], a = seg.imgs[p[1]], b = seg.imgs[p[2]];
        pb.appendChild(el("tr", { "class": "pair" },
          el("td", {}, seg.nodes[e[0]].label + " \u2192 " + seg.nodes[e[1]].label),
          el("td", {}, thumbFig(seg, a, j, "pair-score")), el("td", {}, thumbFig(seg, b, j, "pair-score"))));
      });
      add(box, [el("h4", {}, "Image pairs scored against the graph (the image with more errors scored higher), largest gap first"),
                el("table", { "class": "pairs" }, el("thead", {}, el("tr", {}, el("th", {}, "edge"),
                   el("th", {}, "fewer errors"), el("th", {}, "more errors"))), pb)]);
    } else {
      var ties = m.edges.reduce(function (t, c) { return t + c[1]; }, 0);
      box.appendChild(el("p", { "class": "sub" }, "No image pair along an edge is scored against the graph" +
                         (ties ? "; " + ties + " pair(s) tied (a tie lowers a walk's rank_m too)." : ".")));
    }
    // nodes with their errors, thumbnails and scores
    var onWorst = {};
    (worst || []).forEach(function (i) { onWorst[i] = true; });
    var cards = el("div", { "class": "nodes" });
    seg.nodes.forEach(function (n, i) {
      cards.appendChild(el("div", { "class": "node-card" + (onWorst[i] ? " worst" : ""), "data-node": n.label },
        el("h4", {}, "node " + n.label + " \u00b7 " + n.level + " error" + (n.level === 1 ? "" : "s")),
        n.errors.length ? add(el("ul", {}), n.errors.map(function (t) { return el("li", { "class": "error" }, t); })) : null,
        add(el("div", { "class": "thumbs" }), n.images.map(function (im) { return thumbFig(seg, im, j, "score"); }))));
    });
    add(box, [el("h4", {}, "Nodes: errors, images and " + metric + " scores"), cards]);
    return box;
  }
  function indexImages(seg) {
    if (seg.imgs) return;
    seg.imgs = {};
    seg.nodes.forEach(function (n) { n.images.forEach(function (im) { seg.imgs[im.r] = im; }); });
  }
  function segHeader(s, seg) {
    return [el("p", {}, el("button", { id: "back", onclick: function () { go({ view: "list", seg: "" }); } }, "\u2190 all SEGs")),
            el("h2", {}, "SEG " + seg.id + (seg.subset ? " (" + seg.subset + ")" : "")),
            el("p", { "class": "prompt" }, el("b", {}, "Prompt: "), seg.prompt)];
  }
  function segView(s) {
    var seg = segById[s.seg];
    indexImages(seg);
    var others = metricNames.filter(function (n) { return n !== s.a; });
    var b = s.b && s.b !== s.a ? s.b : others[0] || s.a;
    var controls = el("div", { "class": "controls" },
      el("label", {}, "metric ", select("seg-metric", metricOptions(false), s.a, function (v) { go({ a: v }); })),
      el("label", {}, "compare with ", select("compare-b", metricOptions(false), b, function (v) { go({ b: v }); })),
      el("button", { id: "compare", onclick: function () { go({ view: "compare", b: b }); } }, "side by side"));
    return add(el("div", { id: "seg-view" }), segHeader(s, seg).concat([controls, panel(seg, s.a)]));
  }
  // -- view 3: two metrics side by side -----------------------------------------------------------
  function compareView(s) {
    var seg = segById[s.seg];
    indexImages(seg);
    var b = s.b || metricNames.filter(function (n) { return n !== s.a; })[0] || s.a;
    var controls = el("div", { "class": "controls" },
      el("label", {}, "left ", select("left-metric", metricOptions(false), s.a, function (v) { go({ a: v }); })),
      el("label", {}, "right ", select("right-metric", metricOptions(false), b, function (v) { go({ b: v }); })),
      el("button", { id: "single", onclick: function () { go({ view: "seg" }); } }, "one metric"));
    return add(el("div", { id: "compare-view" }), segHeader(s, seg).concat([controls,
      el("div", { "class": "panels" }, panel(seg, s.a), panel(seg, b))]));
  }

  function render() {
    var s = state(), v = s.view === "seg" ? segView(s) : s.view === "compare" ? compareView(s) : listView(s);
    while (app.firstChild) app.removeChild(app.firstChild);
    app.appendChild(v);
    document.title = D.title + (s.view === "list" ? "" : " \u2014 SEG " + s.seg);
    window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", render);
  render();
  document.body.setAttribute("data-ready", "1");
})();
