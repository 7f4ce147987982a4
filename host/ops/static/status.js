// The stategate status page. The admin token (when the gateway has one) is typed in once,
// kept in sessionStorage (this tab only), and sent as "Authorization: Bearer" on every
// request, the event stream included (fetch streams SSE, so the token never goes into a
// URL). Nothing here comes from outside the admin listener.
"use strict";
const $ = (id) => document.getElementById(id);
const maxEvents = 200;
let token = sessionStorage.getItem("stategate-token") || "";

function headers(extra) {
  const h = Object.assign({ "X-Stategate-Via": "page" }, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

// say shows a message: kind "ok" (green) or "error" (red).
function say(text, kind) {
  $("message").textContent = text || "";
  $("message").dataset.kind = text ? (kind || "error") : "";
}

// confirmAction shows what an action will do and asks for a reason; ok(reason) runs when
// the operator confirms. One confirmation at a time.
let pendingAction = null;
function confirmAction(text, ok) {
  pendingAction = ok;
  $("confirm-text").textContent = text;
  $("confirm-reason").value = "";
  $("confirm").hidden = false;
  $("confirm-reason").focus();
}
$("confirm-ok").addEventListener("click", () => {
  const ok = pendingAction;
  pendingAction = null;
  $("confirm").hidden = true;
  if (ok) ok($("confirm-reason").value.trim());
});
$("confirm-cancel").addEventListener("click", () => {
  pendingAction = null;
  $("confirm").hidden = true;
  say("cancelled: nothing changed", "ok");
});

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
  restartEvents();
});

$("reload").addEventListener("click", async () => {
  const r = await api("/admin/reload", { method: "POST", body: {} });
  if (r.body.ok) say("configuration reloaded", "ok");
  else say("reload refused: " + (r.body.errors || [r.body.error]).join("; "));
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
  const changes = r.body.changes || [];
  const refused = changes.filter((c) => !c.ok);
  say(changes.map((c) => c.name + ": " + c.from + " -> " + c.to + (c.ok ? "" : " (" + c.error + ")")).join("; ") || "nothing changed",
    refused.length ? "error" : "ok");
  refresh();
}

// approve previews the approval of one tool, shows the definitions it would pin and, when
// confirmed, approves exactly those ("pending"): a definition the server lists in between
// is refused (rule approve-as-shown), never approved unseen.
async function approve(name) {
  const r = await api("/admin/tools/approve", { method: "POST", body: { tool: name, dryRun: true } });
  if (r.status !== 200) { say(r.body.error || "failed"); return; }
  const pending = {};
  for (const c of r.body.changes || []) Object.assign(pending, c.pending || {});
  const shown = Object.entries(pending).map(([tool, fp]) => tool + " sha256:" + fp.slice(0, 12)).join(", ");
  confirmAction("Approve " + name + "'s new definition (quarantined -> active)?" + (shown ? " Pending: " + shown + "." : ""),
    () => act("/admin/tools/approve", { tool: name, pending }));
}

// refreshApprovals lists the calls held for an operator (every replica's), each with
// approve and deny buttons that ask first. Names and arguments come from clients: they are
// shown as text only, escaped by the gateway already (no control, bidi or invisible
// character).
async function refreshApprovals() {
  const r = await api("/admin/approvals");
  if (r.status !== 200) return;
  const tbody = $("approvals").querySelector("tbody");
  tbody.replaceChildren();
  const list = r.body.approvals || [];
  $("approvals").hidden = list.length === 0;
  $("approvals-note").dataset.count = String(list.length);
  for (const p of list) {
    const left = Math.max(0, Math.round((p.deadline - Date.now()) / 1000)) + " s";
    const decide = (verb, path) => () => confirmAction(verb + " the call of " + p.toolShown + " with " + p.arguments + "?",
      async (reason) => {
        const res = await api(path, { method: "POST", body: { id: p.id, reason } });
        if (res.status !== 200) say(res.body.error || "failed");
        else say(res.body.approval.toolShown + ": " + res.body.approval.decision.verdict + " by " + res.body.approval.decision.by, "ok");
        refreshApprovals().catch(() => {});
      });
    const actions = document.createElement("span");
    actions.append(button("approve", decide("Approve", "/admin/approvals/approve")), button("deny", decide("Deny", "/admin/approvals/deny")));
    const tr = row([p.toolShown, p.arguments, p.principal || "", p.session || "", left, actions]);
    tr.dataset.approval = p.id;
    tr.cells[1].className = "arguments";
    tbody.appendChild(tr);
  }
}

function ms(seconds) { return seconds ? (seconds * 1000).toFixed(1) + " ms" : ""; }

// refreshTools lists every tool the upstream listed, with what the configuration does
// with it, its mode (tool health), its latency and its last refusal.
async function refreshTools() {
  const r = await api("/admin/tools/overview");
  if (r.status !== 200) return;
  const tbody = $("tools").querySelector("tbody");
  tbody.replaceChildren();
  const health = r.body.health;
  $("tools-note").textContent = (health ? "" : "Tool health is not configured: modes are not tracked. ") +
    ((r.body.tools || []).length ? "" : "No tool listed yet (the upstream's tools appear once a client or the gateway's probe lists them).");
  for (const t of r.body.tools || []) {
    // A row's buttons act on that tool alone: its exact name goes as "tool", never as the
    // "match" glob (an upstream may name a tool "**").
    const actions = document.createElement("span");
    if (health) {
      const mode = (m, verb) => () => confirmAction(verb + " " + t.name + " (" + (t.mode || "?") + " -> " + m + ")?",
        (reason) => act("/admin/tools/mode", { tool: t.name, mode: m, reason: reason || "status page" }));
      actions.append(button("disable", mode("disabled", "Disable")), button("enable", mode("active", "Enable")));
      if (t.mode === "quarantined") {
        actions.append(button("approve", () => approve(t.name)));
      }
    }
    const refusal = t.lastRefusal ? t.lastRefusal.code + " at " + new Date(t.lastRefusal.at).toLocaleTimeString() : "";
    const tr = row([t.name, t.hint || "", t.mode || "", String(t.calls || 0), ms(t.p50), ms(t.p95), refusal, actions]);
    tr.dataset.tool = t.name;
    tr.cells[2].className = "mode";
    tr.cells[4].className = "p50";
    tr.cells[5].className = "p95";
    tr.cells[6].className = "refusal";
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

let workflows = [];
async function refreshWorkflows() {
  const r = await api("/admin/workflows");
  if (r.status !== 200) return;
  workflows = r.body.workflows || [];
  const box = $("workflows");
  box.replaceChildren();
  const pick = $("lookup-workflow");
  const chosen = pick.value;
  pick.replaceChildren();
  for (const w of workflows) {
    const d = document.createElement("details");
    d.open = true;
    d.dataset.workflow = w.id;
    const s = document.createElement("summary");
    s.textContent = w.id + " (key: " + w.key + ")";
    const src = document.createElement("details");
    src.className = "source";
    const ss = document.createElement("summary");
    ss.textContent = "Mermaid source (stategate graph)";
    const pre = document.createElement("pre");
    pre.textContent = w.text;
    src.append(ss, pre);
    d.append(s, drawWorkflow(w), src);
    box.appendChild(d);
    const o = document.createElement("option");
    o.value = o.textContent = w.id;
    pick.appendChild(o);
  }
  if (chosen) pick.value = chosen;
}

// The instance lookup: GET /admin/state, then the reset form (with a confirmation).
let looked = null;
$("lookup").addEventListener("submit", (ev) => { ev.preventDefault(); lookup(false).catch((e) => say(String(e))); });

// lookup shows the instance's state (keep: leave the message as it is).
async function lookup(keep) {
  const wf = $("lookup-workflow").value, kind = $("lookup-kind").value, value = $("lookup-value").value;
  const principal = $("lookup-principal").value;
  const q = new URLSearchParams({ workflow: wf });
  q.set(kind, value);
  if (principal) q.set("principal", principal);
  const r = await api("/admin/state?" + q.toString());
  document.querySelectorAll("#workflows g.state.current").forEach((g) => g.classList.remove("current"));
  const w = workflows.find((x) => x.id === wf);
  let state = "";
  let active = [];
  if (r.status === 200) {
    const value = (r.body.snapshot && r.body.snapshot.state) || "";
    active = activePaths(value, "");
    // A compound or parallel value reads as its active leaves ("paying.payment.pending, paying.review.open").
    state = typeof value === "string" ? value : active.filter((p) => !active.some((q) => q.startsWith(p + "."))).join(", ");
    $("lookup-state").textContent = wf + ": " + state + (r.body.snapshot && r.body.snapshot.seq ? " (move " + r.body.snapshot.seq + ")" : "");
  } else if (r.status === 404 && w) {
    state = w.initial;
    $("lookup-state").textContent = wf + ": " + state + " (nothing stored: it never moved, or was forgotten)";
  } else {
    $("lookup-result").hidden = true;
    say(r.body.error || "lookup failed");
    return;
  }
  if (!keep) say("");
  looked = { workflow: wf, kind, value, principal, state, stored: r.status === 200 };
  $("lookup-result").hidden = false;
  $("lookup-result").dataset.state = state;
  const to = $("reset-to");
  to.replaceChildren();
  for (const s of (w ? w.states : [])) {
    const o = document.createElement("option");
    o.value = s.name;
    o.textContent = s.name + (w && s.name === w.initial ? " (initial)" : "");
    to.appendChild(o);
  }
  if (w) to.value = w.initial;
  for (const p of active.length ? active : [state]) {
    const g = document.querySelector(`#workflows details[data-workflow="${CSS.escape(wf)}"] g.state[data-state="${CSS.escape(p)}"]`);
    if (g) g.classList.add("current");
  }
}

$("reset").addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (!looked) return;
  const l = looked, to = $("reset-to").value;
  confirmAction("Reset " + l.workflow + " for " + l.kind + " " + l.value + " from " + l.state + " to " + to + "?", async (reason) => {
    const body = { workflow: l.workflow, to, reason };
    body[l.kind] = l.value;
    if (l.principal) body.principal = l.principal;
    const r = await api("/admin/state/reset", { method: "POST", body });
    if (r.status !== 200) { say(r.body.error || "reset failed"); return; }
    say(r.body.workflow + ": " + r.body.from + " -> " + r.body.to, "ok");
    await lookup(true);
  });
});

async function refresh() {
  try { await Promise.all([refreshInfo(), refreshTools(), refreshApprovals()]); } catch (e) { if (e.message !== "unauthorized") say(String(e)); }
}

// show adds an event at the top of the list (text only): a refusal's code stands out, a
// gap history no longer holds is said.
let lastID = 0;
function show(ev) {
  if (ev.id) lastID = Math.max(lastID, ev.id);
  const li = document.createElement("li");
  li.dataset.type = ev.type;
  if (ev.id) li.dataset.id = String(ev.id);
  if (ev.tool) li.dataset.tool = ev.tool;
  const d = ev.data || {};
  const parts = [ev.timestamp, ev.type];
  if (ev.tool) parts.push(ev.tool);
  if (ev.old_state || ev.new_state) parts.push((ev.old_state || "") + " -> " + (ev.new_state || ""));
  const code = ev.type === "call_refused" ? d.code : (ev.type === "tool_called" && d.outcome === "denied" ? "denied" : "");
  if (ev.type === "events_gap") parts.push(d.unknownSince !== undefined ? "history does not know id " + d.unknownSince : "events " + d.from + "-" + d.to + " are no longer in history");
  if (ev.data) parts.push(JSON.stringify(ev.data));
  if (code) {
    const c = document.createElement("span");
    c.className = "code";
    c.textContent = code;
    li.append(c, document.createTextNode(" "));
  }
  li.append(document.createTextNode(parts.join("  ")));
  const list = $("events");
  list.insertBefore(li, list.firstChild);
  while (list.children.length > maxEvents) list.lastChild.remove();
  if (ev.type === "config_reloaded") refreshWorkflows().catch(() => {});
  if (ev.type === "approval_requested" || ev.type === "approval_decided") refreshApprovals().catch(() => {});
  if (ev.type === "app_state_changed" || ev.type === "tool_state_changed" || ev.type === "config_reloaded" || ev.type === "config_unknown_tool") refresh();
  else soon();
}

function eventFilters() {
  const q = new URLSearchParams();
  for (const [k, id] of [["type", "filter-type"], ["tool", "filter-tool"], ["session", "filter-session"]]) {
    const v = $(id).value.trim();
    if (v) q.set(k, v);
  }
  return q;
}

$("filters").addEventListener("submit", (ev) => { ev.preventDefault(); restartEvents(); });

// restartEvents shows the last events of history that the filters select, then follows
// the stream from there (since the last id: none lost, none twice).
let streamAbort = null;
async function restartEvents() {
  if (streamAbort) streamAbort.abort();
  $("events").replaceChildren();
  lastID = 0;
  const q = eventFilters();
  q.set("count", String(maxEvents));
  try {
    const r = await api("/admin/events/history?" + q.toString());
    if (r.status !== 200) return;
    for (const ev of r.body.events || []) show(ev);
    lastID = Math.max(lastID, r.body.last || 0);
  } catch (e) { return; }
  stream();
}

// soon refreshes the counters shortly after events, at most twice a second.
let pending = null;
function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refreshInfo().catch(() => {}); refreshTools().catch(() => {}); }, 500);
}

// stream reads the SSE stream through fetch (so it can carry the Authorization header)
// from the last id shown, reconnecting after a pause when it ends (again from the last
// id, so nothing between is lost).
async function stream() {
  const ctl = new AbortController();
  streamAbort = ctl;
  let retry = true;
  try {
    const q = eventFilters();
    q.set("since", String(lastID));
    const res = await fetch("/admin/events?" + q.toString(), { headers: headers({ Accept: "text/event-stream" }), cache: "no-store", signal: ctl.signal });
    if (res.status === 401) { needToken(); retry = false; return; }
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
    if (ctl.signal.aborted) retry = false;
    else say(String(e));
  } finally {
    if (streamAbort === ctl) $("stream").textContent = "disconnected";
  }
  if (retry && streamAbort === ctl) setTimeout(() => { if (streamAbort === ctl) stream(); }, 2000);
}

refresh();
refreshWorkflows().catch(() => {});
restartEvents();
setInterval(refresh, 5000);
