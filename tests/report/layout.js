(async () => {
  await window.topsailDrawAll();
  const screen = window.innerHeight, top = el => el.getBoundingClientRect().top + window.scrollY;
  const inside = (r, box) => r.left >= box.left - 1 && r.right <= box.right + 1 && r.top >= box.top - 1
                             && r.bottom <= box.bottom + 1;
  const overlap = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const clipped = [];
  for (const holder of document.querySelectorAll("div[data-figure]")) {
    const box = holder.getBoundingClientRect();
    if (!box.width) { continue; }
    const texts = holder.querySelectorAll(".xtick text, .ytick text, .g-gtitle text, .legend, "
      + "[class^=g-x] text, [class^=g-y] text, .annotation-text");
    for (const text of texts) {
      const r = text.getBoundingClientRect();
      if (r.width && !inside(r, box)) { clipped.push(holder.id + " leaves its box: " + text.textContent.slice(0, 40)); }
    }
    const areas = Array.from(holder.querySelectorAll(".nsewdrag")).map(a => a.getBoundingClientRect());
    for (const title of holder.querySelectorAll("[class^=g-x][class$=title] text, [class^=g-y][class$=title] text, .g-gtitle text")) {
      const r = title.getBoundingClientRect();
      if (r.width && areas.some(a => overlap(r, a))) { clipped.push(holder.id + " title under a plot: " + title.textContent); }
    }
    const legend = holder.querySelector(".legend"), gtitle = holder.querySelector(".g-gtitle text");
    if (legend && gtitle && overlap(legend.getBoundingClientRect(), gtitle.getBoundingClientRect())) {
      clipped.push(holder.id + " title under the legend: " + gtitle.textContent);
    }
  }
  const attention = document.getElementById("attention");
  return {
    width: document.documentElement.scrollWidth, viewport: window.innerWidth, screen,
    verdictTop: top(document.getElementById("verdict")), attentionTop: attention ? top(attention) : null,
    suites: Array.from(document.querySelectorAll("section.suite")).map(section => {
      const figure = section.querySelector("div[data-figure]:not([data-lazy])");
      return {id: section.id, top: top(section), figure: figure ? top(figure) - top(section) : null,
              matrix: top(section.querySelector("table.matrix")) - top(section)};
    }),
    firstFigureMs: Number(document.body.dataset.firstFigureMs || -1),
    holders: document.querySelectorAll("div[data-figure]").length,
    drawn: Array.from(document.querySelectorAll("div[data-figure]")).filter(d => d.querySelector("svg.main-svg")).length,
    errors: JSON.parse(document.body.dataset.errors || "[]"),
    violations: JSON.parse(document.body.dataset.violations || "[]"),
    clipped,
  };
})()
