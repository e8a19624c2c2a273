// The p_stop plots (pstop_plot.py draws the SVG): hover a frame for its p_stop, belief entropy and time; drag
// the red threshold line to see where this take would stop at that threshold (the engine's
// rule, as gepard_demo/model/guards/stop_rule.py: the first step j >= 1 with p_stop[j] > threshold).
// Dragging the line on the A/B plot also sets the re-cut slider, so "Re-cut A" plays it.
// Event delegation on the document: Gradio replaces the plot's HTML at every update.
(function () {
  const RECUT = '#gepard-recut-threshold';

  function dataOf(root) {
    try { return JSON.parse(root.dataset.pstop); } catch (e) { return null; }
  }

  function stopStep(p, threshold) {
    for (let j = 1; j < p.length; j++) if (p[j] > threshold) return j;
    return null;
  }

  // SVG user units of a pointer event (the viewBox may be scaled).
  function svgPoint(svg, e) {
    const pt = svg.createSVGPoint();
    pt.x = e.clientX; pt.y = e.clientY;
    const m = svg.getScreenCTM();
    return m ? pt.matrixTransform(m.inverse()) : {x: 0, y: 0};
  }

  function stepAt(d, x) {
    const [left, right, , , w] = d.box;
    const f = (x - left) / (w - left - right);
    return Math.max(0, Math.min(d.steps - 1, Math.round(f * (d.steps - 1))));
  }

  function thresholdAt(d, y) {
    const [, , top, bottom, , h] = d.box;
    const p = 1 - (y - top) / (h - top - bottom);
    return Math.max(0.01, Math.min(0.99, Math.round(p * 100) / 100));
  }

  function yOf(d, p) {
    const [, , top, bottom, , h] = d.box;
    return top + (h - top - bottom) * (1 - p);
  }

  function whereItStops(d, threshold) {
    return d.traces.map((t) => {
      const j = stopStep(t.p, threshold);
      if (j === null) return t.label + ': no stop in the frames made';
      return t.label + ': stops at frame ' + j + ' (' + (j / d.frameRate).toFixed(2) + ' s)';
    }).join(' · ');
  }

  function onMove(e) {
    const root = e.target.closest && e.target.closest('.gepard-pstop');
    if (!root) return;
    const svg = root.querySelector('svg');
    const d = dataOf(root);
    if (!svg || !d) return;
    const pt = svgPoint(svg, e);
    if (root._drag) { moveThreshold(root, d, thresholdAt(d, pt.y)); return; }
    const j = stepAt(d, pt.x);
    const cursor = svg.querySelector('.gepard-cursor');
    const x = d.box[0] + (d.box[4] - d.box[0] - d.box[1]) * j / Math.max(d.steps - 1, 1);
    if (cursor) { cursor.setAttribute('x1', x); cursor.setAttribute('x2', x); cursor.setAttribute('visibility', 'visible'); }
    const vals = d.traces.map((t) => {
      const h = t.h && j < t.h.length && t.h[j] !== null ? ', entropy ' + t.h[j].toFixed(3) + ' nats' : '';
      return t.label + ' ' + (j < t.p.length ? t.p[j].toFixed(4) : '–') + h;
    }).join(' · ');
    readout(root, 'frame ' + j + ' · ' + (j / d.frameRate).toFixed(2) + ' s · p_stop ' + vals);
  }

  function readout(root, text) {
    const el = root.querySelector('.gepard-pstop-readout');
    if (el) el.textContent = text;
  }

  function moveThreshold(root, d, threshold) {
    const g = root.querySelector('.gepard-threshold');
    if (!g) return;
    g.querySelectorAll('line').forEach((l) => { l.setAttribute('y1', yOf(d, threshold)); l.setAttribute('y2', yOf(d, threshold)); });
    g.dataset.threshold = String(threshold);
    const v = root.querySelector('.gepard-threshold-value');
    if (v) v.textContent = String(threshold);
    readout(root, 'At threshold ' + threshold + ': ' + whereItStops(d, threshold));
  }

  function setRecutSlider(threshold) {
    const box = document.querySelector(RECUT + ' input[type=number]');
    if (!box) return;
    box.value = String(threshold);
    box.dispatchEvent(new Event('input', {bubbles: true}));
    box.dispatchEvent(new Event('change', {bubbles: true}));
    box.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}));
    box.dispatchEvent(new Event('blur', {bubbles: true}));
  }

  document.addEventListener('pointermove', onMove, true);
  document.addEventListener('pointerdown', (e) => {
    const g = e.target.closest && e.target.closest('.gepard-threshold');
    const root = g && g.closest('.gepard-pstop');
    const d = root && dataOf(root);
    if (!d || !d.movable) return;
    root._drag = true;
    e.preventDefault();
  }, true);
  document.addEventListener('pointerup', () => {
    document.querySelectorAll('.gepard-pstop').forEach((root) => {
      if (!root._drag) return;
      root._drag = false;
      const g = root.querySelector('.gepard-threshold');
      if (root.dataset.plot === 'ab' && g) setRecutSlider(Number(g.dataset.threshold));
    });
  }, true);
  document.addEventListener('pointerleave', (e) => {
    const root = e.target.closest && e.target.closest('.gepard-pstop');
    if (!root) return;
    const c = root.querySelector('.gepard-cursor');
    if (c) c.setAttribute('visibility', 'hidden');
  }, true);

  window.gepardPstop = {stopStep, whereItStops};
})();
