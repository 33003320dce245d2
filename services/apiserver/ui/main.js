// The dashboard: nodes, pods and events kept live by list-watch, and a selected pod's details,
// logs and trace. Everything is read through the regular API with the user's credentials
// (api.js); only the trace comes from the dashboard's own endpoint, which reads the same
// objects on the server and asks the same authorizers.

import { ListWatch, getJSON, getText, setToken, token } from "./api.js";
import { drawSwimlane } from "./swimlane.js";
import { Collection, VirtualTable, keyOf } from "./table.js";

const $ = (selector) => document.querySelector(selector);

// -- how objects read in a table -----------------------------------------------------------

function age(timestamp) {
  if (!timestamp) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  if (seconds < 120) return `${Math.floor(seconds)}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86400)}d`;
}

function nodeStatus(node) {
  const ready = (node.status?.conditions || []).find((c) => c.type === "Ready");
  let text = !ready ? "Unknown" : ready.status === "True" ? "Ready" : "NotReady";
  if (node.spec?.unschedulable) text += ",SchedulingDisabled";
  return text;
}

/** What kubectl's STATUS column says, near enough: a waiting reason, Terminating, the phase. */
function podStatus(pod) {
  if (pod.metadata.deletionTimestamp) return "Terminating";
  for (const status of pod.status?.containerStatuses || []) {
    const reason = status.state?.waiting?.reason || status.state?.terminated?.reason;
    if (reason) return reason;
  }
  return pod.status?.reason || pod.status?.phase || "Pending";
}

function restarts(pod) {
  return String((pod.status?.containerStatuses || []).reduce((n, s) => n + (s.restartCount || 0), 0));
}

function eventTime(event) {
  return event.lastTimestamp || event.eventTime || event.metadata.creationTimestamp || "";
}

/** Milliseconds of an Event's latest occurrence: lastTimestamp has whole seconds, eventTime
 * (its first occurrence) microseconds; the later of the two orders repeats and single events. */
function lastSeen(event) {
  const times = [event.lastTimestamp, event.eventTime, event.metadata.creationTimestamp];
  return Math.max(...times.filter(Boolean).map(Date.parse), 0);
}

function byNewest(a, b) {
  return lastSeen(b) - lastSeen(a) || Number(b.metadata.resourceVersion) - Number(a.metadata.resourceVersion);
}

// -- the three live tables -----------------------------------------------------------------

const nodes = new Collection();
const pods = new Collection();
const events = new Collection({ sort: byNewest, limit: 500 });

const nodeTable = new VirtualTable($("#nodes"), {
  columns: [
    { title: "Name", width: "minmax(8em, 2fr)", value: (n) => n.metadata.name },
    { title: "Status", width: "minmax(6em, 1fr)", value: nodeStatus },
    { title: "Version", width: "6em", value: (n) => n.status?.nodeInfo?.kubeletVersion || "" },
    { title: "Age", width: "4em", value: (n) => age(n.metadata.creationTimestamp) },
  ],
});

let selectedPod = null;
const podTable = new VirtualTable($("#pods"), {
  columns: [
    { title: "Namespace", width: "minmax(6em, 1fr)", value: (p) => p.metadata.namespace },
    { title: "Name", width: "minmax(8em, 2fr)", value: (p) => p.metadata.name },
    { title: "Status", width: "minmax(6em, 1fr)", value: podStatus },
    { title: "Restarts", width: "5em", value: restarts },
    { title: "Node", width: "minmax(6em, 1fr)", value: (p) => p.spec?.nodeName || "" },
    { title: "Age", width: "4em", value: (p) => age(p.metadata.creationTimestamp) },
  ],
  onSelect: (key) => selectPod(key),
});

const eventTable = new VirtualTable($("#events"), {
  columns: [
    { title: "Last seen", width: "5em", value: (e) => age(eventTime(e)) },
    { title: "Type", width: "5em", value: (e) => e.type || "" },
    { title: "Reason", width: "minmax(7em, 1fr)", value: (e) => e.reason || "" },
    {
      title: "Object",
      width: "minmax(10em, 2fr)",
      value: (e) => `${(e.involvedObject?.kind || "").toLowerCase()}/${e.involvedObject?.name || ""}`,
    },
    { title: "From", width: "minmax(7em, 1fr)", value: (e) => e.source?.component || e.reportingComponent || "" },
    { title: "Message", width: "minmax(12em, 5fr)", value: (e) => e.message || "" },
  ],
});

function show(collection, table, counter, noun) {
  collection.onChange((rows) => {
    table.setRows(rows);
    $(counter).textContent = `${collection.size} ${noun}`;
  });
}
show(nodes, nodeTable, "#nodes-count", "nodes");
show(pods, podTable, "#pods-count", "pods");
show(events, eventTable, "#events-count", "recent events");

function watch(path, collection, name, onEvent) {
  const lamp = $(`#stream-${name}`);
  const lw = new ListWatch(path, {
    reset: (items) => collection.reset(items),
    event: (type, obj) => {
      collection.apply(type, obj);
      onEvent?.(type, obj);
    },
    status: (text, ok) => {
      lamp.title = `${name}: ${text}`;
      lamp.classList.toggle("ok", ok);
      if (!ok) $("#status").textContent = `${name}: ${text}`;
    },
  });
  lw.start();
  return lw;
}

const streams = [
  watch("/api/v1/nodes", nodes, "nodes"),
  watch("/api/v1/pods", pods, "pods", (type, pod) => {
    if (selectedPod && keyOf(pod) === selectedPod) podChanged(type);
  }),
  watch("/api/v1/events", events, "events", (type, event) => {
    if (selectedPod && event.involvedObject?.uid === pods.get(selectedPod)?.metadata.uid) {
      scheduleTrace();
    }
  }),
];

// Ages move even when nothing is written: redraw the rows in view every few seconds.
setInterval(() => [nodeTable, podTable, eventTable].forEach((t) => t.schedule()), 5000);

// -- the selected pod: details, trace, logs ------------------------------------------------

function podPath(key) {
  const [namespace, name] = key.split("/");
  return { namespace, name, api: `/api/v1/namespaces/${namespace}/pods/${name}` };
}

function selectPod(key) {
  selectedPod = key;
  podTable.select(key);
  $("#detail").hidden = false;
  $("#detail-title").textContent = key;
  drawDetails();
  loadTrace();
  loadLogs();
}

function drawDetails() {
  const pod = pods.get(selectedPod);
  const facts = $("#facts");
  facts.replaceChildren();
  if (!pod) {
    facts.textContent = "deleted";
    return;
  }
  const rows = [
    ["Status", podStatus(pod)],
    ["Node", pod.spec?.nodeName || "(not scheduled)"],
    ["Pod IP", pod.status?.podIP || ""],
    ["Created", pod.metadata.creationTimestamp],
    ["resourceVersion", pod.metadata.resourceVersion],
    ["Conditions", (pod.status?.conditions || []).map((c) => `${c.type}=${c.status}`).join(" ")],
  ];
  for (const [term, value] of rows) {
    facts.append(
      Object.assign(document.createElement("dt"), { textContent: term }),
      Object.assign(document.createElement("dd"), { textContent: value || "" }),
    );
  }
}

function podChanged(type) {
  drawDetails();
  if (type !== "DELETED") scheduleTrace();
}

// A pod being started changes several times a second; fetch its trace at most once a second.
const TRACE_INTERVAL_MS = 1000;
let traceTimer = null;
function scheduleTrace() {
  if (traceTimer) return;
  traceTimer = setTimeout(() => {
    traceTimer = null;
    loadTrace();
  }, TRACE_INTERVAL_MS);
}

async function loadTrace() {
  const key = selectedPod;
  const { namespace, name } = podPath(key);
  try {
    const trace = await getJSON(`/ui/api/trace/namespaces/${namespace}/pods/${name}`);
    if (key !== selectedPod) return;
    drawSwimlane($("#trace"), trace.steps);
  } catch (err) {
    if (key === selectedPod) $("#trace").textContent = `trace: ${err.message}`;
  }
}

async function loadLogs() {
  const key = selectedPod;
  const out = $("#logs");
  try {
    const text = await getText(`${podPath(key).api}/log?tailLines=500`);
    if (key === selectedPod) out.textContent = text || "(no output)";
  } catch (err) {
    if (key === selectedPod) out.textContent = `logs: ${err.message}`;
  }
}

$("#logs-refresh").addEventListener("click", () => selectedPod && loadLogs());

// -- credentials ----------------------------------------------------------------------------

$("#token").value = token();
$("#credentials").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken($("#token").value.trim());
  for (const stream of streams) {
    stream.stop();
    stream.start();
  }
});
