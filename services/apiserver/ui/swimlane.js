// A pod's trace as a swimlane picture: one lane per component, each step a dot placed by its
// time offset from the first step, so the seed's flow — apiserver, controller-manager,
// scheduler, kubelet — reads left to right and top to bottom. Below it, the same steps as an
// ordered list, numbered as the dots are, with offsets and details (what a screen reader or a
// copy-paste needs too).

const SVG = "http://www.w3.org/2000/svg";
const LANE_ORDER = ["apiserver", "controller-manager", "scheduler", "kubelet"];
const WIDTH = 900;
const LANE_HEIGHT = 46;
const LABEL_WIDTH = 150;
const PAD = 28;
const MIN_GAP = 24; // steps a millisecond apart still get a dot of their own

function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, value);
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The lanes in the seed's order, then any other component in order of appearance. */
function lanesOf(steps) {
  const seen = [...new Set(steps.map((s) => s.component))];
  const known = LANE_ORDER.filter((c) => seen.includes(c));
  return [...known, ...seen.filter((c) => !LANE_ORDER.includes(c))];
}

function offsetText(seconds) {
  return seconds < 10 ? `+${seconds.toFixed(3)}s` : `+${seconds.toFixed(1)}s`;
}

/** Replace root's content with the swimlane of `steps` (TraceStep JSON objects). */
export function drawSwimlane(root, steps) {
  root.replaceChildren();
  if (!steps.length) {
    root.append(Object.assign(document.createElement("p"), { textContent: "No steps yet." }));
    return;
  }
  const lanes = lanesOf(steps);
  const height = lanes.length * LANE_HEIGHT + 30;
  const span = Math.max(...steps.map((s) => s.offsetSeconds), 0.001);
  // Proportional to the offset, plus MIN_GAP per step before it: order and rough spacing
  // stay true, and a burst of steps in one millisecond does not collapse into one dot.
  const gap = Math.min(MIN_GAP, (WIDTH - LABEL_WIDTH - 2 * PAD) / 2 / steps.length);
  const scale = WIDTH - LABEL_WIDTH - 2 * PAD - gap * (steps.length - 1);
  const x = (offset, n) => LABEL_WIDTH + PAD + (offset / span) * scale + n * gap;
  const picture = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${height}`,
    class: "swimlane",
    role: "img",
    "aria-label": `trace: ${steps.length} steps across ${lanes.length} components`,
  });

  lanes.forEach((component, i) => {
    const y = i * LANE_HEIGHT;
    const lane = svg("g", { class: "lane", "data-component": component });
    lane.append(
      svg("rect", { x: 0, y, width: WIDTH, height: LANE_HEIGHT, class: i % 2 ? "odd" : "even" }),
      svg("text", { x: 8, y: y + LANE_HEIGHT / 2 + 4, class: "lane-name" }, component),
    );
    picture.append(lane);
  });
  picture.append(
    svg("text", { x: x(0, 0), y: height - 8, class: "axis" }, "0s"),
    svg("text", { x: x(span, steps.length - 1), y: height - 8, class: "axis", "text-anchor": "end" },
      offsetText(span)),
  );

  let previous = null;
  steps.forEach((step, n) => {
    const cx = x(step.offsetSeconds, n);
    const cy = lanes.indexOf(step.component) * LANE_HEIGHT + LANE_HEIGHT / 2;
    if (previous) {
      picture.append(svg("line", { x1: previous[0], y1: previous[1], x2: cx, y2: cy, class: "flow" }));
    }
    previous = [cx, cy];
    // Steps a millisecond apart would overwrite each other's names: each dot carries its
    // number in the list below, and its name, time and detail as a tooltip.
    const dot = svg("g", { class: "step", "data-step": step.step });
    dot.append(
      svg("circle", { cx, cy, r: 9 }),
      svg("text", { x: cx, y: cy + 4, class: "step-number", "text-anchor": "middle" }, n + 1),
      svg("title", {}, `${n + 1}. ${step.step} — ${step.component} ${offsetText(step.offsetSeconds)}` +
        (step.detail ? `\n${step.detail}` : "")),
    );
    picture.append(dot);
  });

  const list = document.createElement("ol");
  list.className = "steps";
  for (const step of steps) {
    const item = document.createElement("li");
    const when = Object.assign(document.createElement("code"), {
      textContent: offsetText(step.offsetSeconds),
    });
    const what = Object.assign(document.createElement("b"), { textContent: step.step });
    item.append(when, " ", what, ` — ${step.component}`, step.detail ? `: ${step.detail}` : "");
    list.append(item);
  }
  root.append(picture, list);
}
