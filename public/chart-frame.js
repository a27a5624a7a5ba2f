// An interactive chart's frame. The notebook page loads /chart-frame.html
// in an iframe sandboxed without `allow-same-origin`: this document's
// origin is opaque, so it holds no cookie and can read nothing of runcell's
// or the page's, and its policy lets it fetch nothing at all (scripts from
// runcell's /charts/ alone, no connections, images only from data: and
// blob:). The chart's libraries are served by runcell, never by a CDN.
//
// The page posts it one message, a JSON string {kind, spec}: `kind` is
// "plotly" (spec: a Plotly figure, `application/vnd.plotly.v1+json`) or
// "vegalite" (a Vega-Lite spec, `application/vnd.vegalite.v5+json`), and
// `spec` the figure's JSON text, both as the program made them: untrusted
// data. To the page, JSON strings: {t:"ready"} until the spec comes (the
// page may hydrate after this frame loaded), then {t:"height", h}.
'use strict';

(() => {
  if (parent === self) return;
  const LIBRARIES = {
    plotly: ['/charts/plotly-strict.min.js'],
    vegalite: ['/charts/vega.min.js', '/charts/vega-lite.min.js', '/charts/vega-embed.min.js'],
  };
  const NOTE_MAX = 300;
  const root = document.getElementById('chart');
  const toPage = (message) => parent.postMessage(JSON.stringify(message), '*');
  const height = () => toPage({ t: 'height', h: Math.ceil(document.documentElement.scrollHeight) });
  const load = (src) => new Promise((resolve, reject) => {
    const script = document.createElement('script');
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error('the chart library could not be loaded'));
    document.head.appendChild(script);
  });

  let started = false;
  const draw = async (kind, text) => {
    const libraries = LIBRARIES[kind];
    if (!libraries) throw new Error('not a chart kind runcell draws');
    const figure = JSON.parse(text);
    if (typeof figure !== 'object' || figure === null) throw new Error('the chart is not an object');
    for (const src of libraries) await load(src);
    if (kind === 'plotly') {
      // As wide as the frame; as tall as the figure says, else Plotly's 450.
      const layout = Object.assign({ autosize: true }, figure.layout || {});
      if (typeof layout.height !== 'number') layout.height = 450;
      await Plotly.newPlot(root, Array.isArray(figure.data) ? figure.data : [], layout, {
        responsive: true, displaylogo: false,
      });
    } else {
      await vegaEmbed(root, figure, { actions: false, renderer: 'svg' });
    }
  };

  addEventListener('message', (event) => {
    if (event.source !== parent || started || typeof event.data !== 'string') return;
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    if (!message || typeof message.kind !== 'string' || typeof message.spec !== 'string') return;
    started = true;
    clearInterval(asking);
    draw(message.kind, message.spec).then(height, (error) => {
      root.textContent = 'This chart could not be drawn: ' + String(error && error.message).slice(0, NOTE_MAX);
      height();
    });
  });
  new ResizeObserver(() => { if (started) height(); }).observe(document.body);
  // Asked for until it comes: the page may not be listening yet.
  let tries = 0;
  const asking = setInterval(() => {
    if (++tries > 300) clearInterval(asking);
    toPage({ t: 'ready' });
  }, 100);
  toPage({ t: 'ready' });
})();
