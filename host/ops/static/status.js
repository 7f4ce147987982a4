// The stategate status page. The admin token (when the gateway has one) is typed in once,
// kept in sessionStorage (this tab only), and sent as "Authorization: Bearer" on every
// request, the event stream included (fetch streams SSE, so the token never goes into a
// URL). Nothing here comes from outside the admin listener.
"use strict";
const $ = (id) => document.getElementById(id);
const maxEvents = 200;
let token = sessionStorage.getItem("stategate-token") || "";

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

function say(text) { $("message").textContent = text || ""; }

async function api(path, opts) {
  opts = opts || {};
  const res = await fetch(path, { method: opts.method || "GET", headers: headers(opts.body ? { "Content-Type": "application/json" } : {}),
    body: opts.body ? JSON.stringify(opts.body) : undefined, cache: "no-store" });
  if (res.status === 401) { needToken(); throw new Error("unauthorized"); }
  const body = await res.json().catch(() => ({}));
  return { status: res.status, body };
}

function needToken() {
  $("login").hidden = false;
  say("This gateway's admin API needs its token.");
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("stategate-token", token);
  $("token").value = "";
  $("login").hidden = true;
  say("");
  refresh();
  refreshWorkflows().catch(() => {});
  stream();
});

$("reload").addEventListener("click", async () => {
  const r = await api("/admin/reload", { method: "POST", body: {} });
  say(r.body.ok ? "configuration reloaded" : "reload refused: " + (r.body.errors || [r.body.error]).join("; "));
});

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

function button(label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.addEventListener("click", onClick);
  return b;
}

async function act(path, body) {
  const r = await api(path, { method: "POST", body });
  if (r.status !== 200) { say(r.body.error || "failed"); return; }
  say((r.body.changes || []).map((c) => c.name + ": " + c.from + " -> " + c.to + (c.ok ? "" : " (" + c.error + ")")).join("; "));
  refresh();
}

async function refreshTools() {
  const r = await api("/admin/tools");
  const tbody = $("tools").querySelector("tbody");
  tbody.replaceChildren();
  if (r.status !== 200) {
    $("tools-note").textContent = r.body.code === "health_off" ? "Tool health is not configured: modes are not tracked." : (r.body.error || "");
    return;
  }
  $("tools-note").textContent = "";
  for (const t of r.body.tools || []) {
    // A row's buttons act on that tool alone: its exact name goes as "tool", never as the
    // "match" glob (an upstream may name a tool "**").
    const actions = document.createElement("span");
    actions.append(
      button("disable", () => act("/admin/tools/mode", { tool: t.name, mode: "disabled", reason: "status page" })),
      button("enable", () => act("/admin/tools/mode", { tool: t.name, mode: "active", reason: "status page" })));
    if (t.mode === "quarantined") actions.append(button("approve", () => act("/admin/tools/approve", { tool: t.name })));
    const tr = row([t.name, t.mode, String(t.failures || 0), t.lastError || "", actions]);
    tr.dataset.tool = t.name;
    tbody.appendChild(tr);
  }
}

async function refreshInfo() {
  const r = await api("/admin/info");
  if (r.status !== 200) return;
  $("state").textContent = r.body.state;
  $("state").dataset.state = r.body.state;
  $("parts").textContent = (r.body.parts || []).join(", ");
  const tbody = $("counters").querySelector("tbody");
  tbody.replaceChildren();
  const counters = Object.assign({}, r.body.counters || {}, { events_dropped: r.body.eventsDropped, subscribers: r.body.subscribers });
  for (const [k, v] of Object.entries(counters)) tbody.appendChild(row([k, String(v)]));
  showUnknownTools(r.body.unknownTools || []);
}

// showUnknownTools lists the configuration's tool names no listed tool meets (text only).
function showUnknownTools(unknown) {
  const list = $("unknown-tools");
  list.replaceChildren();
  for (const u of unknown) {
    const li = document.createElement("li");
    li.dataset.tool = u.name;
    const name = document.createElement("code");
    name.textContent = u.name;
    const where = (u.where || []).map((p) => p.path + " (" + p.kind + ")").join(", ");
    li.append(name, document.createTextNode((u.glob ? " matches no listed tool: " : " is not a listed tool: ") + where));
    list.appendChild(li);
  }
  $("config-warnings").hidden = unknown.length === 0;
}

async function refreshWorkflows() {
  const r = await api("/admin/workflows");
  if (r.status !== 200) return;
  const box = $("workflows");
  box.replaceChildren();
  for (const w of r.body.workflows || []) {
    const d = document.createElement("details");
    d.open = true;
    d.dataset.workflow = w.id;
    const s = document.createElement("summary");
    s.textContent = w.id;
    const pre = document.createElement("pre");
    pre.textContent = w.text;
    d.append(s, pre);
    box.appendChild(d);
  }
}

async function refresh() {
  try { await Promise.all([refreshInfo(), refreshTools()]); } catch (e) { if (e.message !== "unauthorized") say(String(e)); }
}

function show(ev) {
  const li = document.createElement("li");
  li.dataset.type = ev.type;
  if (ev.tool) li.dataset.tool = ev.tool;
  const parts = [ev.timestamp, ev.type];
  if (ev.tool) parts.push(ev.tool);
  if (ev.old_state || ev.new_state) parts.push((ev.old_state || "") + " -> " + (ev.new_state || ""));
  if (ev.data) parts.push(JSON.stringify(ev.data));
  li.textContent = parts.join("  ");
  const list = $("events");
  list.insertBefore(li, list.firstChild);
  while (list.children.length > maxEvents) list.lastChild.remove();
  if (ev.type === "config_reloaded") refreshWorkflows().catch(() => {});
  if (ev.type === "app_state_changed" || ev.type === "tool_state_changed" || ev.type === "config_reloaded" || ev.type === "config_unknown_tool") refresh();
  else soon();
}

// soon refreshes the counters shortly after events, at most twice a second.
let pending = null;
function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refreshInfo().catch(() => {}); }, 500);
}

// stream reads the SSE stream through fetch (so it can carry the Authorization header),
// reconnecting after a pause when it ends.
let streaming = false;
async function stream() {
  if (streaming) return;
  streaming = true;
  try {
    const res = await fetch("/admin/events", { headers: headers({ Accept: "text/event-stream" }), cache: "no-store" });
    if (res.status === 401) { needToken(); return; }
    if (!res.ok || !res.body) throw new Error("events: HTTP " + res.status);
    $("stream").textContent = "live";
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value.replace(/\r\n?/g, "\n");
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (data) { try { show(JSON.parse(data)); } catch (e) { /* not an event */ } }
      }
    }
  } catch (e) {
    say(String(e));
  } finally {
    streaming = false;
    $("stream").textContent = "disconnected";
  }
  setTimeout(stream, 2000);
}

refresh();
refreshWorkflows().catch(() => {});
stream();
setInterval(refresh, 5000);
