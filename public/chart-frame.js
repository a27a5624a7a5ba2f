// An interactive chart's frame. The notebook page loads /chart-frame.html
// in an iframe sandboxed without `allow-same-origin`: this document's
// origin is opaque, so it holds no cookie and can read nothing of runcell's
// or the page's, and its policy lets it fetch nothing at all (scripts from
// runcell's /charts/ alone, no connections, images only from data: and
// blob:). The chart's libraries are served by runcell, never by a CDN.
//
// The page posts it a JSON string {kind, spec, theme}: `kind` is
// "plotly" (spec: a Plotly figure, `application/vnd.plotly.v1+json`) or
// "vegalite" (a Vega-Lite spec, `application/vnd.vegalite.v5+json`), and
// `spec` the figure's JSON text, both as the program made them: untrusted
// data; `theme` is the page's ("auto", "light" or "dark"), and comes again
// alone, {theme}, when the reader switches it. To the page, JSON strings:
// {t:"ready"} until the spec comes (the page may hydrate after this frame
// loaded), then {t:"height", h}.
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
  // Each library once, however many times the chart is drawn.
  const loading = new Map();
  const load = (src) => {
    if (!loading.has(src)) {
      loading.set(src, new Promise((resolve, reject) => {
        const script = document.createElement('script');
        script.src = src;
        script.onload = resolve;
        script.onerror = () => reject(new Error('the chart library could not be loaded'));
        document.head.appendChild(script);
      }));
    }
    return loading.get(src);
  };

  // Plotly's own dark template's colours (plotly_dark), laid over the
  // figure's in the dark theme; Vega-Lite has a dark theme of its own.
  const PLOTLY_DARK = {
    paper_bgcolor: 'rgb(17,17,17)', plot_bgcolor: 'rgb(17,17,17)', font: { color: '#f2f5fa' },
  };
  const PLOTLY_DARK_AXIS = { gridcolor: '#283442', linecolor: '#506784', zerolinecolor: '#283442' };
  const system = matchMedia('(prefers-color-scheme: dark)');
  let theme = 'auto';
  const dark = () => theme === 'dark' || (theme !== 'light' && system.matches);

  let started = false;
  // The chart once read: its kind and figure, to draw again in another theme.
  let chart = null;
  const draw = async () => {
    const { kind, figure } = chart;
    document.documentElement.style.colorScheme = dark() ? 'dark' : 'light';
    for (const src of LIBRARIES[kind]) await load(src);
    if (kind === 'plotly') {
      // As wide as the frame; as tall as the figure says, else Plotly's 450.
      const layout = Object.assign({ autosize: true }, figure.layout || {});
      if (typeof layout.height !== 'number') layout.height = 450;
      if (dark()) {
        Object.assign(layout, PLOTLY_DARK, { font: Object.assign({}, layout.font, PLOTLY_DARK.font) });
        for (const key of Object.keys(layout).concat(['xaxis', 'yaxis'])) {
          if (/^[xy]axis\d*$/.test(key)) layout[key] = Object.assign({}, layout[key], PLOTLY_DARK_AXIS);
        }
      }
      await Plotly.react(root, Array.isArray(figure.data) ? figure.data : [], layout, {
        responsive: true, displaylogo: false,
      });
    } else {
      await vegaEmbed(root, figure, Object.assign({ actions: false, renderer: 'svg' }, dark() ? { theme: 'dark' } : {}));
    }
  };
  const read = (kind, text) => {
    if (!LIBRARIES[kind]) throw new Error('not a chart kind runcell draws');
    const figure = JSON.parse(text);
    if (typeof figure !== 'object' || figure === null) throw new Error('the chart is not an object');
    chart = { kind, figure };
  };
  const failed = (error) => {
    root.textContent = 'This chart could not be drawn: ' + String(error && error.message).slice(0, NOTE_MAX);
    height();
  };
  const redraw = () => { if (chart) draw().then(height, failed); };
  const setTheme = (name) => {
    if (name !== 'auto' && name !== 'light' && name !== 'dark') return false;
    const before = dark();
    theme = name;
    return before !== dark();
  };
  system.addEventListener('change', () => { if (theme === 'auto') redraw(); });

  addEventListener('message', (event) => {
    if (event.source !== parent || typeof event.data !== 'string') return;
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    if (!message || typeof message !== 'object') return;
    if (started) {
      // The reader switched the theme.
      if (setTheme(message.theme)) redraw();
      return;
    }
    if (typeof message.kind !== 'string' || typeof message.spec !== 'string') return;
    started = true;
    clearInterval(asking);
    setTheme(message.theme);
    try {
      read(message.kind, message.spec);
    } catch (error) {
      failed(error);
      return;
    }
    draw().then(height, failed);
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
