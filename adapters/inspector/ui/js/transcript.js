// The decoded view of one ACP session: message and thought chunks merged
// into bubbles, tool calls as cards updated in place, plans, permission
// requests with their options, and the end of each turn.

import { errorBox, h, replace } from "./dom.js";

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
    this.add(h("div.turn-end", { "data-stop-reason": stopReason }, h("span", `turn ended: ${stopReason}`)));
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
        return this.note(`commands: ${(u.availableCommands || []).map((c) => "/" + c.name).join(", ") || "none"}`);
      case "current_mode_update": return this.note(`mode: ${u.currentModeId}`);
      default: {
        const { sessionUpdate, ...rest } = u;
        return this.note(`${sessionUpdate}: ${JSON.stringify(rest)}`);
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
      t.card = h("div.card.tool", { "data-tool-call": u.toolCallId },
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
    t.title.textContent = s.title || s.toolCallId;
    t.kind.textContent = s.kind || "";
    t.status.textContent = s.status || "";
    t.status.className = `status badge ${statusClass(s.status)}`;
    const parts = [];
    for (const c of s.content || []) {
      if (c.type === "content") parts.push(h("div.tool-content", contentNode(c.content)));
      else if (c.type === "diff") parts.push(h("div.diff", h("div.path", c.path), h("pre.old", c.oldText ?? ""), h("pre.new", c.newText ?? "")));
      else if (c.type === "terminal") parts.push(h("div.muted", `terminal ${c.terminalId}`));
      else parts.push(h("pre.json", JSON.stringify(c, null, 2)));
    }
    for (const l of s.locations || []) parts.push(h("div.location", h("code", l.path + (l.line ? `:${l.line}` : ""))));
    replace(t.body, parts);
    t.raw.textContent = JSON.stringify(s, null, 2);
  }

  showPlan(entries) {
    const list = h("ol.plan-entries", entries.map((e) =>
      h("li", { class: `plan-${e.status}` }, h(`span.badge.${statusClass(e.status)}`, e.status), " ", e.content,
        e.priority ? h("span.muted", ` (${e.priority})`) : null)));
    const card = h("div.card.plan", h("div.card-head", h("span.label", "plan")), list);
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
    const buttons = (params.options || []).map((o) =>
      h("button", { class: `perm-option ${o.kind && o.kind.startsWith("allow") ? "primary" : ""}`, "data-option": o.optionId, title: o.kind || "" }, o.name || o.optionId));
    const cancel = h("button.perm-cancel", { title: "answer with outcome cancelled" }, "Dismiss");
    const all = [...buttons, cancel];
    const card = h("div.card.permission", { "data-tool-call": tc.toolCallId || "" },
      h("div.card-head", h("span.label", "permission"), h("span.title", tc.title || tc.toolCallId || "the agent asks for permission"),
        tc.kind ? h("span.kind", tc.kind) : null),
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
      reply({ outcome: "selected", optionId: params.options[i].optionId }, params.options[i].name || params.options[i].optionId)));
    cancel.addEventListener("click", () => reply({ outcome: "cancelled" }, "cancelled"));
    this.add(card);
  }
}

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
  if (!c) return "";
  switch (c.type) {
    case "text": return document.createTextNode(c.text ?? "");
    case "image":
      return /^image\/(png|jpeg|gif|webp)$/.test(c.mimeType || "")
        ? h("img.inline", { src: `data:${c.mimeType};base64,${c.data}`, alt: "image from the agent" })
        : h("span.muted", `[image ${c.mimeType}]`);
    case "resource_link": return h("span.resource", `[${c.name || c.uri}] `);
    case "resource": return h("span.resource", `[resource ${c.resource && c.resource.uri}] `);
    default: return h("span.muted", `[${c.type}]`);
  }
}
