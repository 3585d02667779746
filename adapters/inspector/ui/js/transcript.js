// The decoded view of one ACP session: message and thought chunks merged
// into bubbles, tool calls as cards updated in place, plans, permission
// requests with their options, and the end of each turn.

import { errorBox, h, replace, str } from "./dom.js";

// Transcript renders one session's updates into el.
export class Transcript {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.el = h("div.transcript", { "data-session": sessionId, "aria-live": "polite" });
    this.open = null; // the bubble chunks are appended to: {role, textEl}
    this.tools = new Map(); // toolCallId -> card parts
    this.plan = null;
    this.empty = h("div.empty", "No messages yet. Type a prompt below.");
    this.el.append(this.empty);
  }

  add(node, keepOpen = false) {
    this.empty?.remove();
    this.empty = null;
    const stick = nearBottom(this.el);
    this.el.append(node);
    if (!keepOpen) this.open = null;
    if (stick) this.el.scrollTop = this.el.scrollHeight;
    return node;
  }

  user(text) {
    this.add(h("div.msg.user", h("div.who", "you"), h("div.text", text)));
  }

  note(text, kind = "meta") {
    return this.add(h(`div.note.${kind}`, text));
  }

  error(err, prefix) {
    return this.add(errorBox(err, prefix));
  }

  turnEnded(stopReason) {
    this.add(h("div.turn-end", { "data-stop-reason": str(stopReason) }, h("span", `turn ended: ${str(stopReason)}`)));
  }

  // update applies one session/update notification's `update`.
  update(u) {
    switch (u.sessionUpdate) {
      case "agent_message_chunk": return this.chunk("agent", u.content);
      case "agent_thought_chunk": return this.chunk("thought", u.content);
      case "user_message_chunk": return this.chunk("user", u.content);
      case "tool_call": return this.tool(u, true);
      case "tool_call_update": return this.tool(u, false);
      case "plan": return this.showPlan(u.entries || []);
      case "available_commands_update":
        return this.note(`commands: ${list(u.availableCommands).map((c) => "/" + str(c && c.name)).join(", ") || "none"}`);
      case "current_mode_update": return this.note(`mode: ${str(u.currentModeId)}`);
      default: {
        const { sessionUpdate, ...rest } = u;
        return this.note(`${str(sessionUpdate)}: ${JSON.stringify(rest)}`);
      }
    }
  }

  chunk(role, content) {
    const stick = nearBottom(this.el);
    if (!this.open || this.open.role !== role) {
      const who = { agent: "agent", thought: "thought", user: "you" }[role];
      const textEl = h("div.text");
      this.add(h(`div.msg.${role}`, h("div.who", who), textEl));
      this.open = { role, textEl };
    }
    this.open.textEl.append(contentNode(content));
    if (stick) this.el.scrollTop = this.el.scrollHeight;
  }

  tool(u, isNew) {
    let t = this.tools.get(u.toolCallId);
    if (!t) {
      t = {
        title: h("span.title"), kind: h("span.kind"), status: h("span.status"),
        body: h("div.tool-body"), raw: h("pre.json"),
      };
      t.card = h("div.card.tool", { "data-tool-call": str(u.toolCallId) },
        h("div.card-head", h("span.label", "tool"), t.kind, t.title, t.status),
        t.body,
        h("details", h("summary", "raw"), t.raw));
      t.state = {};
      this.tools.set(u.toolCallId, t);
      this.add(t.card);
    } else if (isNew) {
      t.state = {};
    }
    this.open = null;
    for (const [k, v] of Object.entries(u)) if (v !== undefined && v !== null) t.state[k] = v;
    const s = t.state;
    t.title.textContent = str(s.title || s.toolCallId);
    t.kind.textContent = str(s.kind);
    t.status.textContent = str(s.status);
    t.status.className = `status badge ${statusClass(s.status)}`;
    const parts = [];
    for (const c of list(s.content)) {
      if (c && c.type === "content") parts.push(h("div.tool-content", contentNode(c.content)));
      else if (c && c.type === "diff") parts.push(h("div.diff", h("div.path", str(c.path)), h("pre.old", str(c.oldText)), h("pre.new", str(c.newText))));
      else if (c && c.type === "terminal") parts.push(h("div.muted", `terminal ${str(c.terminalId)}`));
      else parts.push(h("pre.json", JSON.stringify(c, null, 2)));
    }
    for (const l of list(s.locations)) parts.push(h("div.location", h("code", str(l && l.path) + (l && l.line ? `:${str(l.line)}` : ""))));
    replace(t.body, parts);
    t.raw.textContent = JSON.stringify(s, null, 2);
  }

  showPlan(entries) {
    const items = h("ol.plan-entries", list(entries).map((e) => {
      e = e || {};
      return h("li", { class: `plan-${planStatuses.has(e.status) ? e.status : "other"}` },
        h(`span.badge.${statusClass(e.status)}`, str(e.status)), " ", str(e.content),
        e.priority ? h("span.muted", ` (${str(e.priority)})`) : null);
    }));
    const card = h("div.card.plan", h("div.card-head", h("span.label", "plan")), items);
    if (this.plan && this.plan === this.el.lastElementChild) this.plan.replaceWith(card);
    else this.add(card);
    this.plan = card;
    this.open = null;
  }

  // permission shows a session/request_permission request; answer(outcome)
  // posts the reply and resolves when it was sent.
  permission(params, answer) {
    const tc = params.toolCall || {};
    const status = h("div.perm-status");
    const options = list(params.options).filter((o) => o && typeof o === "object");
    const buttons = options.map((o) =>
      h("button", { class: `perm-option ${typeof o.kind === "string" && o.kind.startsWith("allow") ? "primary" : ""}`, "data-option": str(o.optionId), title: str(o.kind) },
        str(o.name || o.optionId)));
    const cancel = h("button.perm-cancel", { title: "answer with outcome cancelled" }, "Dismiss");
    const all = [...buttons, cancel];
    const card = h("div.card.permission", { "data-tool-call": str(tc.toolCallId) },
      h("div.card-head", h("span.label", "permission"), h("span.title", str(tc.title || tc.toolCallId || "the agent asks for permission")),
        tc.kind ? h("span.kind", str(tc.kind)) : null),
      h("div.perm-options", all), status);
    const reply = async (outcome, label) => {
      all.forEach((b) => { b.disabled = true; });
      status.textContent = "sending…";
      try {
        await answer(outcome);
        status.textContent = `answered: ${label}`;
        card.classList.add("answered");
      } catch (e) {
        replace(status, errorBox(e, "reply failed"));
        all.forEach((b) => { b.disabled = false; });
      }
    };
    buttons.forEach((b, i) => b.addEventListener("click", () =>
      reply({ outcome: "selected", optionId: options[i].optionId }, str(options[i].name || options[i].optionId))));
    cancel.addEventListener("click", () => reply({ outcome: "cancelled" }, "cancelled"));
    this.add(card);
  }
}

// list is v when it is an array, else empty: what an agent sends where the
// protocol has a list may be anything.
function list(v) {
  return Array.isArray(v) ? v : [];
}

const planStatuses = new Set(["pending", "in_progress", "completed"]);

function statusClass(s) {
  switch (s) {
    case "completed": return "ok";
    case "failed": return "bad";
    case "in_progress": return "warn";
    default: return "off";
  }
}

function nearBottom(el) {
  return el.scrollHeight - el.scrollTop - el.clientHeight < 40;
}

// contentNode renders one ACP ContentBlock.
export function contentNode(c) {
  if (!c || typeof c !== "object") return str(c);
  switch (c.type) {
    case "text": return document.createTextNode(str(c.text));
    case "image":
      // Only base64 of a raster type: the bytes can never be markup (no
      // SVG) nor leave the data: URL.
      return typeof c.mimeType === "string" && /^image\/(png|jpeg|gif|webp)$/.test(c.mimeType) && typeof c.data === "string" && /^[A-Za-z0-9+/]*={0,2}$/.test(c.data)
        ? h("img.inline", { src: `data:${c.mimeType};base64,${c.data}`, alt: "image from the agent" })
        : h("span.muted", `[image ${str(c.mimeType)}]`);
    case "resource_link": return h("span.resource", `[${str(c.name || c.uri)}] `);
    case "resource": return h("span.resource", `[resource ${str(c.resource && c.resource.uri)}] `);
    default: return h("span.muted", `[${str(c.type)}]`);
  }
}
