// Parses a diagram with the real parser of its language and prints, as JSON on stdout, what
// the parser made of it: vertices (id, shape, label as parsed, label as rendered), edges and
// clusters. streams-core/tests/diagram_parsers.rs compares that with the topology.
//
//   node parse.mjs mermaid|dot < diagram
//
// mermaid: Mermaid's own flowchart parser (mermaid's getDiagramFromText), then a full
//          mermaid.render() in jsdom, whose SVG gives the labels as a browser would show them.
// dot:     Graphviz itself (compiled to WebAssembly, @hpcc-js/wasm-graphviz): its JSON output
//          for the parsed graph, and its SVG output for the labels as drawn.
// A diagram the parser rejects: exit status 2, the parser's message on stderr.
import { readFileSync } from 'node:fs';
import { JSDOM } from 'jsdom';

// Only the JSON goes to stdout: libraries' console output goes to stderr.
for (const level of ['log', 'info', 'debug', 'warn']) console[level] = console.error;

const mode = process.argv[2];
const text = readFileSync(0, 'utf8');

function reject(err) {
  process.stderr.write(`${mode} parser rejected the diagram: ${err?.message ?? err}\n`);
  process.exit(2);
}

function svgDocument(svg) {
  return new JSDOM(svg, { contentType: 'image/svg+xml' }).window.document;
}

/** The text an element shows, a line break (`<br>`) read as a newline. */
function shown(element) {
  const copy = element.cloneNode(true);
  for (const br of copy.querySelectorAll('br')) br.replaceWith('\n');
  return copy.textContent;
}

async function mermaidResult() {
  const dom = new JSDOM('<!doctype html><html><body></body></html>', { pretendToBeVisual: true });
  const w = dom.window;
  globalThis.window = w;
  globalThis.document = w.document;
  for (const k of ['CSSStyleSheet', 'Element', 'HTMLElement', 'SVGElement', 'Node', 'DOMParser', 'MutationObserver']) {
    if (!(k in globalThis)) globalThis[k] = w[k];
  }
  // jsdom does no layout: every box measures the same, which is all the layout needs.
  const box = () => ({ x: 0, y: 0, width: 80, height: 20, top: 0, left: 0, right: 80, bottom: 20 });
  w.SVGElement.prototype.getBBox = box;
  w.SVGElement.prototype.getComputedTextLength = () => 80;
  w.Element.prototype.getBoundingClientRect = box;
  const { default: mermaid } = await import('mermaid');
  mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });

  let diagram;
  try {
    diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
  } catch (err) {
    reject(err);
  }
  if (diagram.type !== 'flowchart-v2' && diagram.type !== 'flowchart') {
    reject(`not a flowchart but ${diagram.type}`);
  }
  const db = diagram.db;
  const vertices = [...db.getVertices().values()].map((v) => ({
    id: v.id,
    shape: v.type,
    label: v.text,
  }));
  const edges = db.getEdges().map((e) => ({ from: e.start, to: e.end, kind: e.type }));
  const clusters = db.getSubGraphs().map((s) => ({ id: s.id, label: s.title, members: s.nodes }));

  let svg;
  try {
    ({ svg } = await mermaid.render('d', text));
  } catch (err) {
    reject(err);
  }
  const doc = svgDocument(svg);
  const rendered = {};
  for (const g of doc.querySelectorAll('g.node')) {
    const m = /^d-flowchart-(.*)-\d+$/.exec(g.getAttribute('id') ?? '');
    if (m) rendered[m[1]] = shown(g);
  }
  const renderedClusters = {};
  for (const g of doc.querySelectorAll('g.cluster')) {
    const id = (g.getAttribute('id') ?? '').replace(/^d-/, '');
    renderedClusters[id] = shown(g.querySelector('.cluster-label') ?? g);
  }
  for (const v of vertices) v.rendered = rendered[v.id] ?? null;
  for (const c of clusters) c.rendered = renderedClusters[c.id] ?? null;
  return { vertices, edges, clusters };
}

async function dotResult() {
  const { Graphviz } = await import('@hpcc-js/wasm-graphviz');
  const graphviz = await Graphviz.load();
  let json, svg;
  try {
    json = JSON.parse(graphviz.layout(text, 'json', 'dot'));
    svg = graphviz.layout(text, 'svg', 'dot');
  } catch (err) {
    reject(err);
  }
  const objects = json.objects ?? [];
  const subgraphs = json._subgraph_cnt ?? 0;
  const names = new Map(objects.map((o) => [o._gvid, o.name]));
  // Graphviz writes the second of two spaces in a row as &#160; to keep it in SVG (a real
  // U+00A0 in a label it writes as the character itself): read it back as the space.
  const doc = svgDocument(svg.replaceAll('&#160;', ' '));
  // Each drawn label line is one <text>; <title> holds the vertex's or cluster's name.
  const drawn = {};
  for (const g of doc.querySelectorAll('g.node, g.cluster')) {
    const name = g.querySelector('title')?.textContent;
    drawn[name] = [...g.querySelectorAll('text')].map((t) => t.textContent).join('\n');
  }
  const vertices = objects.slice(subgraphs).map((o) => ({
    id: o.name,
    shape: [o.shape, o.style].filter(Boolean).join(','),
    label: o.label,
    rendered: drawn[o.name] ?? null,
  }));
  const edges = (json.edges ?? []).map((e) => ({
    from: names.get(e.tail),
    to: names.get(e.head),
    kind: e.dir === 'none' ? 'line' : 'arrow',
  }));
  const clusters = objects.slice(0, subgraphs).map((o) => ({
    id: o.name,
    label: o.label,
    members: (o.nodes ?? []).map((i) => names.get(i)),
    rendered: drawn[o.name] ?? null,
  }));
  return { vertices, edges, clusters };
}

let result;
if (mode === 'mermaid') result = await mermaidResult();
else if (mode === 'dot') result = await dotResult();
else {
  process.stderr.write('usage: node parse.mjs mermaid|dot < diagram\n');
  process.exit(64);
}
process.stdout.write(JSON.stringify(result));
